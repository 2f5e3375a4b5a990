/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Naming file descriptors in the kernel: what is behind an fd (device, inode, type, file
 * position) and, for inet sockets, their addresses. Included by latscope.bpf.c; needs
 * vmlinux.h, the libbpf headers, latscope.h and compat.bpf.h first. Every function takes `fast`,
 * a constant: whether this kernel has bpf_rdonly_cast (see compat.bpf.h).
 */
#ifndef LATSCOPE_FDNAME_BPF_H
#define LATSCOPE_FDNAME_BPF_H

#define ANON_INODE_FS_MAGIC 0x09041934
#define TMPFS_MAGIC 0x01021994
#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10
#define AF_NETLINK 16
#define S_IFMT 00170000
#define S_IFSOCK 0140000
#define S_IFBLK 0060000
#define S_IFDIR 0040000
#define S_IFCHR 0020000
#define S_IFIFO 0010000

static __always_inline __u8 sock_type(const bool fast, struct file *f)
{
	struct socket *sock = KCAST(fast, struct socket, KREAD(fast, f, private_data));
	if (!sock)
		return LS_FD_SOCKET;
	struct sock *sk = KREAD(fast, sock, sk);
	if (!sk)
		return LS_FD_SOCKET;
	switch (KREAD(fast, sk, __sk_common.skc_family)) {
	case AF_INET: return LS_FD_IPV4;
	case AF_INET6: return LS_FD_IPV6;
	case AF_UNIX: return LS_FD_UNIX;
	case AF_NETLINK: return LS_FD_NETLINK;
	default: return LS_FD_SOCKET;
	}
}

/* Anonymous inodes are told apart by their dentry name ("[eventfd]", "inotify", ...). */
static __always_inline __u8 anon_type(const bool fast, struct file *f)
{
	char name[12] = {};
	bpf_probe_read_kernel_str(name, sizeof(name), KREAD(fast, f, f_path.dentry, d_name.name));
	if (name[0] == '[') {
		if (name[1] == 'e' && name[2] == 'v' && name[5] == 't' && name[6] == 'f')
			return LS_FD_EVENT;      /* [eventfd] */
		if (name[1] == 'e' && name[2] == 'v' && name[5] == 't' && name[6] == 'p')
			return LS_FD_EVENTPOLL;  /* [eventpoll] */
		if (name[1] == 's' && name[2] == 'i')
			return LS_FD_SIGNALFD;   /* [signalfd] */
		if (name[1] == 't' && name[2] == 'i')
			return LS_FD_TIMERFD;    /* [timerfd] */
	} else if (name[0] == 'i' && name[1] == 'n' && name[2] == 'o') {
		return LS_FD_INOTIFY;
	}
	return LS_FD_ANON;
}

/* The struct file behind fd in task's table, or NULL. */
static __always_inline struct file *file_of(const bool fast, struct task_struct *task, __s64 fd)
{
	struct files_struct *files = task->files;
	if (!files || fd < 0)
		return NULL;
	struct fdtable *fdt = files->fdt;
	if (!fdt || fd >= fdt->max_fds)
		return NULL;
	return fd_slot(fast, fdt->fd, fd);
}

/* The addresses of the inet socket behind fd (connect/accept): size written, or 0. */
static __always_inline long sock_tuple(const bool fast, struct task_struct *task, __s64 fd,
				      struct ls_sock_tuple *t)
{
	struct file *f = file_of(fast, task, fd);
	if (!f)
		return 0;
	struct socket *sock = KCAST(fast, struct socket, KREAD(fast, f, private_data));
	if (!sock)
		return 0;
	struct sock *sk = KCAST(fast, struct sock, KREAD(fast, sock, sk));
	if (!sk)
		return 0;
	__u16 family = KREAD(fast, sk, __sk_common.skc_family);
	t->family = family;
	t->lport = KREAD(fast, sk, __sk_common.skc_num);
	t->rport = bpf_ntohs(KREAD(fast, sk, __sk_common.skc_dport));
	t->proto = KREAD(fast, sk, sk_type) == 3 /* SOCK_RAW */ ? 255 /* IPPROTO_RAW */ : KREAD(fast, sk, sk_protocol);
	if (family == AF_INET) {
		__builtin_memset(t->laddr, 0, sizeof(t->laddr));
		__builtin_memset(t->raddr, 0, sizeof(t->raddr));
		*(__u32 *)t->laddr = KREAD(fast, sk, __sk_common.skc_rcv_saddr);
		*(__u32 *)t->raddr = KREAD(fast, sk, __sk_common.skc_daddr);
	} else if (family == AF_INET6) {
		KREAD_INTO(fast, (struct in6_addr *)t->laddr, sk, __sk_common.skc_v6_rcv_saddr);
		KREAD_INTO(fast, (struct in6_addr *)t->raddr, sk, __sk_common.skc_v6_daddr);
	} else {
		return 0;
	}
	return sizeof(*t);
}

/* Look up fd in the current task's table: device, inode, type, file position. */
static __always_inline void fd_info(const bool fast, struct task_struct *task, __s64 fd, __u32 *dev, __u64 *ino,
				    __u8 *type, __s64 *pos)
{
	*dev = 0; *ino = 0; *type = LS_FD_UNKNOWN; *pos = -1;
	struct file *f = file_of(fast, task, fd);
	if (!f)
		return;
	struct inode *inode = KREAD(fast, f, f_inode);
	if (!inode)
		return;
	__u16 mode = KREAD(fast, inode, i_mode);
	struct super_block *sb = KREAD(fast, inode, i_sb);
	*ino = KREAD(fast, inode, i_ino);
	*dev = sb ? KREAD(fast, sb, s_dev) : 0;
	*pos = KREAD(fast, f, f_pos);
	switch (mode & S_IFMT) {
	case S_IFDIR: *type = LS_FD_DIR; return;
	case S_IFSOCK: *type = sock_type(fast, f); return;
	case S_IFIFO: *type = LS_FD_PIPE; return;
	case S_IFCHR: *type = LS_FD_CHR; return;
	case S_IFBLK: *type = LS_FD_BLK; return;
	}
	unsigned long magic = sb ? KREAD(fast, sb, s_magic) : 0;
	if (magic == ANON_INODE_FS_MAGIC) {
		*type = anon_type(fast, f);
	} else if (magic == TMPFS_MAGIC) {
		char name[6] = {};
		bpf_probe_read_kernel(name, sizeof(name), KREAD(fast, f, f_path.dentry, d_name.name));
		*type = (name[0] == 'm' && name[1] == 'e' && name[2] == 'm' && name[3] == 'f' && name[4] == 'd' &&
			 name[5] == ':') ? LS_FD_MEMFD : LS_FD_FILE;
	} else {
		*type = LS_FD_FILE;
	}
}

#endif
