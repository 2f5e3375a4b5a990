/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Structures, enums and constants shared by the BPF programs and user space. This is the one
 * place they are defined: the Rust side uses the types libbpf-cargo generates from the object's
 * BTF (see crates/probe/build.rs), and tests pin the values latscope-event mirrors (its syscall
 * table bits, fd types, event kinds). Constants are enums, not #defines, so that they are in the
 * BTF too.
 */
#ifndef LATSCOPE_H
#define LATSCOPE_H

enum ls_limits {
	LS_COMM_LEN = 16,
	LS_PATH_MAX = 512,      /* bytes captured per path, NUL included */
	LS_NR_MAX = 512,        /* syscall numbers covered by the tables */
	LS_AGG_BUCKETS = 640,   /* log2 buckets with 16 linear sub-buckets (6.25% wide): 0 ns .. ~2^42 ns */
	LS_AGG_GROUPS = 1024,   /* most groups of in-kernel histograms (the map is sized to those in use) */
	LS_AGG_NONE = 0xffff,   /* ls_sys_desc.agg0/agg1: the syscall counts in no group of that factor */
	LS_NARGS = 6,           /* syscall arguments saved at entry */
	LS_ARG_NONE = 0xff,     /* an argument slot of ls_sys_desc: the syscall has no such argument */
	LS_PIDS_MAX = 65536,    /* processes the pid filter holds (given, and children followed) */
	LS_CGROUPS_MAX = 64,    /* cgroups the cgroup filter holds */
	LS_CGROUP_DEPTH = 32,   /* cgroup levels below the root the cgroup filter looks at */
	LS_XVALUE_MAX = 256,    /* bytes of an xattr value captured after its name (LS_INFO_XVALUE) */
};

enum ls_kind { LS_SYSCALL = 0, LS_BLOCK = 1, LS_PROC = 2 };
enum ls_proc_op { LS_FORK = 0, LS_EXEC = 1, LS_EXIT = 2, LS_TIMES = 3, LS_SAMPLE = 4, LS_UCOPY = 5 };
/* Where a thread's times (LS_TIMES) were read: when the recording started, at its exit, when the
 * recording ended, or when a call it was blocked in at the start (begun before the recording, so
 * never recorded) returned. */
enum ls_times_when { LS_TIMES_START = 0, LS_TIMES_EXIT = 1, LS_TIMES_END = 2, LS_TIMES_RESUMED = 3 };

/* Bits of ls_sys_desc.bits (mirrors SysDesc in crates/event). */
enum ls_desc_bits {
	LS_IO = 1, LS_READ = 2, LS_WRITE = 4, LS_RET_FD = 8, LS_IOV = 16,
	LS_OPENAT2 = 32, LS_OFF_PTR = 64, LS_FILE_POS = 128, LS_CLOSE = 256, LS_ADDR_FD = 512,
	LS_SOCK = 1024, LS_FD_PAIR = 2048, LS_CLONE_ARGS = 4096, LS_RENAMES = 8192, LS_FD_TABLE = 16384,
	LS_CLONE_RANGE = 32768,
};

/* fd types (mirrors FdType in crates/event). */
enum ls_fd_type {
	LS_FD_UNKNOWN = 0, LS_FD_FILE, LS_FD_DIR, LS_FD_IPV4, LS_FD_IPV6, LS_FD_UNIX, LS_FD_PIPE,
	LS_FD_EVENT, LS_FD_SIGNALFD, LS_FD_EVENTPOLL, LS_FD_INOTIFY, LS_FD_TIMERFD, LS_FD_MEMFD,
	LS_FD_CHR, LS_FD_BLK, LS_FD_NETLINK, LS_FD_SOCKET, LS_FD_ANON,
};

/* Block flag bits (mirrors Rwbs in crates/event). */
enum ls_rwbs { LS_RWBS_SYNC = 1, LS_RWBS_META = 2, LS_RWBS_FUA = 4, LS_RWBS_PREFLUSH = 8, LS_RWBS_RAHEAD = 16 };

/* SysClass codes the BPF side needs (mirrors SysClass in crates/event). */
enum ls_sys_class { LS_CLASS_PROCESS = 7 };

/*
 * Aggregation groupings for in-kernel histograms. LS_AGG_COMPOSITE serves several views at once
 * (the agent's series): a syscall counts in group agg0 of its ls_sys_desc (views that do not look
 * at the fd) and, for views that do, in the group of its fd group g = fdclass[fd type] when bit g
 * of agg1_fds is set: agg1 + the number of bits set below g. A block request counts in the group
 * its device has in the devs map. User space sums the groups into each view.
 */
enum ls_agg_group { LS_AGG_ALL = 0, LS_AGG_FDCLASS = 1, LS_AGG_SYSCALL = 2, LS_AGG_SYSCLASS = 3, LS_AGG_COMPOSITE = 4 };

/* Per-syscall argument layout: which argument (0-5) holds what (LS_ARG_NONE: none). */
struct ls_sys_desc {
	__u8 fd, dirfd, path, dirfd2, path2, count, off, flags, mode, addr, iovcnt;
	__u8 want;   /* record this syscall (the syscall-set filter) */
	__u16 bits;  /* enum ls_desc_bits */
	__u8 class;  /* SysClass */
	__u8 off2;   /* offset in the second fd's file (sendfile, splice, copy_file_range) */
	__u16 agg0;  /* LS_AGG_COMPOSITE: group of the call whatever its fd (LS_AGG_NONE: none) */
	__u16 agg1;  /* LS_AGG_COMPOSITE: first group of the call by fd group (LS_AGG_NONE: none) */
	__u16 agg2;  /* the same for a second set of views (so that views by syscall and views by fd
	              * class do not need a group per syscall and class) */
	__u16 agg_pad;
	__u32 agg1_fds; /* the fd groups (bits) that have a group from agg1 on, in order */
	__u32 agg2_fds; /* the same from agg2 on */
	__u8 infoarg;   /* the argument enum ls_exit_info reads (LS_ARG_NONE: none) */
	__u8 info;      /* enum ls_exit_info: what the exit adds to the event for a replay */
	__u16 info_pad;
};

/* What a successful call's exit reads for a replay's starting tree (ls_sys_desc.info). */
enum ls_exit_info {
	LS_INFO_NONE = 0,
	LS_INFO_STAT = 1,  /* struct stat at infoarg: st_mode into addr, st_size into off2 */
	LS_INFO_STATX = 2, /* struct statx at infoarg: the same */
	LS_INFO_FSIZE = 3, /* the mode of the fd's file (the returned fd's for LS_RET_FD) after the
	                    * call into addr, its size into off2 */
	LS_INFO_ACL = 4,   /* an xattr value at infoarg that is a minimal POSIX ACL: its permission
	                    * bits | LS_ACL_MODE into mode */
	LS_ACL_MODE = 0x10000,
	LS_INFO_XLIST = 5,  /* listxattr: the names the kernel wrote at infoarg (ret bytes, at most
	                     * LS_PATH_MAX) are the path2 payload */
	LS_INFO_XVALUE = 6, /* getxattr: the value at infoarg (ret bytes, if at most LS_XVALUE_MAX)
	                     * follows the name's NUL in the path2 payload; setxattr (LS_INFO_ACL)
	                     * does the same with its `bytes` */
};

/*
 * The task's identity beyond pid/uid (group.gid, user.loginuid, proc.tty, proc.vpid,
 * thread.vtid): read per event, since setgid, a write to /proc/self/loginuid and setsid change
 * them without an event of their own.
 */
struct ls_ids {
	__u32 gid;        /* real group id */
	__u32 loginuid;   /* audit login uid; 4294967295 when unset */
	__u32 tty;        /* controlling terminal, encoded as /proc/PID/stat's tty_nr; 0 none */
	__u32 vpid, vtid; /* pid and tid in the task's own pid namespace */
	__u32 pad;
};

/*
 * One event in the ring buffer. Events of path-taking syscalls are followed by
 * path_len bytes of the first path then path2_len bytes of the second.
 */
struct ls_event {
	__u64 ts;      /* start, CLOCK_MONOTONIC ns */
	__u64 lat;     /* ns */
	__s64 ret;
	__u64 ino;
	__u64 bytes;
	__s64 off;
	__u64 addr;
	__u64 cgroup;
	__u64 qtime;
	__s64 off2;    /* offset in the file of the second fd (addr); -1 if none */
	__u32 pid, tid, uid, dev;
	__s32 fd, dirfd;
	__u32 flags, mode;
	__u16 nr;
	__u8 kind;     /* enum ls_kind */
	__u8 fd_type;  /* enum ls_fd_type */
	__u16 path_len, path2_len;
	char comm[LS_COMM_LEN];
	__u16 cpu;     /* the CPU the event ended on */
	__u16 ext;     /* enum ls_ext_bits: what follows the fixed part */
	__u32 pad32;
	struct ls_ids ids;
};

/*
 * The addresses of a socket, carried as the path payload of connect/accept events (LS_SOCK):
 * ports in host byte order, addresses as in the kernel (network order; IPv4 in the first 4 bytes).
 */
struct ls_sock_tuple {
	__u16 family;  /* AF_INET or AF_INET6 */
	__u16 lport, rport;
	__u16 proto;   /* IPPROTO_TCP, IPPROTO_UDP, ...; IPPROTO_RAW (255) for raw sockets */
	__u8 laddr[16], raddr[16];
};

/* The per-CPU counters: the one value of the `stats` map. */
struct ls_stats {
	__u64 events;        /* events written to the ring buffer */
	__u64 lost;          /* events lost: ring buffer full */
	__u64 path_faults;   /* path arguments that could not be read */
	__u64 blk_unpaired;  /* block completions without a seen issue */
	__u64 not_followed;  /* children of followed processes the full pid filter could not take */
	__u64 wakeups_unseen; /* --why: blocked intervals found ended at a switch in, no wake-up seen */
	__u64 blk_flush_ends; /* completions without data the flush machinery reports for a request
	                       * whose data completed already, or for an empty flush whose device
	                       * work is a flush request of its own: not requests missed */
};

/*
 * Per-call attribution ("why was it slow"): the parts a syscall's latency is split into. A
 * syscall event whose `ext` has LS_EXT_WHY is followed (before its paths) by a struct ls_why.
 */
enum ls_why_part {
	LS_WHY_CPU = 0,    /* running */
	LS_WHY_RUNQ,       /* runnable, waiting for a CPU (preempted, or woken and not yet running) */
	LS_WHY_IO,         /* blocked in an I/O wait (io_schedule: block requests, writeback) */
	LS_WHY_LOCK,       /* blocked on a lock: futex, file lock (flock, fcntl), semaphore */
	LS_WHY_IPC,        /* blocked on a pipe or socket, or waiting for fds (poll, epoll) */
	LS_WHY_TIMER,      /* blocked until a timer fired (sleeps, timeouts) */
	LS_WHY_FAULT,      /* I/O wait of a page fault taken inside the call */
	LS_WHY_OTHER,      /* blocked, woken by a task for another reason */
	LS_WHY_UNKNOWN,    /* blocked, not attributed: a wake-up the probes did not see, of a call
	                    * that says nothing of its cause by itself */
	LS_WHY_PARTS,
};

/* Intervals off the CPU kept per call (struct ls_why.off_*), and the mark of an unseen wake-up. */
enum ls_off_limits { LS_OFF_KEPT = 8, LS_OFF_UNSEEN = 0x80 };

/* Who ended the longest blocked interval of a call (struct ls_why.waker_ctx). */
enum ls_waker_ctx { LS_WAKER_NONE = 0, LS_WAKER_TASK = 1, LS_WAKER_TIMER = 2, LS_WAKER_SOFTIRQ = 3 };

/* Bits of ls_event.ext. */
enum ls_ext_bits {
	LS_EXT_WHY = 1,     /* a struct ls_why follows the event */
	LS_EXT_WHY_CPU = 2, /* recorded with attribution, the call ran on its CPU throughout (its
			     * parts: all of its latency on CPU); nothing follows */
};

/* Bits of ls_why.wake_flags: what is known of the end of the call's longest blocked interval. */
enum ls_wake_flags {
	LS_WAKE_KNOWN = 1,   /* set by every recording that knows these bits (older traces: 0) */
	LS_WAKE_TRACED = 2,  /* the waking thread is in the recording's set (passes its pid, command
	                      * name and cgroup filter); a whole-machine recording has every thread */
	LS_WAKE_KTHREAD = 4, /* the waking thread is a kernel thread */
	LS_WAKE_HELD = 8,    /* a futex wait its timeout ended while another thread held the futex
	                      * (holder_tid): contention, not idle time */
};

/* What the lock fields of struct ls_why describe (by syscall: the why_nr_lock table). */
enum ls_lock_kind {
	LS_LOCK_NONE = 0,
	LS_LOCK_FUTEX = 1,   /* futex: lock_addr the address, lock_op the operation, lock_word the word */
	LS_LOCK_FLOCK = 2,   /* flock: the fd's file, lock_op the operation */
	LS_LOCK_FCNTL = 3,   /* fcntl: the fd's file, lock_op the command, the range of its struct flock */
	LS_LOCK_SEM = 4,     /* semop, semtimedop: lock_addr the semaphore set, lock_start the number */
	LS_LOCK_FUTEXV = 5,  /* futex_waitv: lock_addr the first futex's address */
};

struct ls_why {
	__u64 part[LS_WHY_PARTS]; /* ns; they add up to the event's lat */
	__u64 wake_sector;        /* the block request whose completion woke the call (longest I/O wait) */
	__u32 waker_tid;          /* LS_WAKER_TASK: the waking thread; LS_WAKER_SOFTIRQ: the softirq number */
	__u32 rq_tid;             /* the thread that took the CPU on the call's longest preemption */
	__u32 wake_dev;           /* device of wake_sector (0: none) */
	__u16 rq_cpu;             /* the CPU of that preemption */
	__u8 waker_ctx;           /* enum ls_waker_ctx */
	__u8 pad;
	char waker_comm[LS_COMM_LEN];
	/* Stacks (record --why with stacks): 1 captured (its key below), 0 none, negative: -errno
	 * of the capture (the stack is missing: -EEXIST a hash collision, -E2BIG a full map,
	 * -EDQUOT the user's quota of new stacks used up, -ESRCH (kstack) the kernel did not report
	 * the switch back onto a CPU, where it is read; see why.bpf.h). */
	__s32 kstack;             /* kernel stack where the call blocked (its longest blocked interval) */
	__s32 ustack;             /* user stack of the call */
	/* One level of cascade (wPerf): what the waking thread (LS_WAKER_TASK) was itself blocked
	 * in during the call's longest blocked interval, in the traced calls it made meanwhile:
	 * the part (enum ls_why_part) it spent the most of that interval in, and how long. */
	__u64 waker_wait_ns;      /* 0: none seen */
	__u8 waker_wait_part;
	__u8 pad2[7];
	/* The block requests whose completions ended the call's I/O waits, summed over those
	 * waits, ns: of each wait, the time before its request existed (was inserted, or issued
	 * straight to the driver): the bio held by cgroup I/O throttling or a plug, or not yet
	 * submitted; the request's time queued (insert to issue) and on the device (issue to
	 * completion). */
	__u64 wake_held_ns;
	__u64 wake_queue_ns;
	__u64 wake_device_ns;
	/* The page fault whose I/O wait was the call's longest (LS_WHY_FAULT time; fault_addr 0:
	 * none): the user address it faulted on and, where the kernel resolved it (bpf_find_vma,
	 * Linux 5.17), the file mapped there (fault_ino 0: not resolved) and the byte offset in it. */
	__u64 fault_addr;
	__u64 fault_ino;
	__u64 fault_off;
	__u32 fault_dev;
	__u32 pad3;
	/* The captured stacks' keys in why_kstacks / why_ustacks: a 64-bit hash of the frames,
	 * never 0 (0: none). */
	__u64 kstack_key;
	__u64 ustack_key;
	__u64 waker_ustack_key; /* the waker's user stack's key (waker_ustack > 0) */
	/* The longest blocked interval (the one whose waker is kept): CLOCK_MONOTONIC ns, 0 none. */
	__u64 wait_start;
	__u64 wait_end;
	/* The lock the call waited for (lock_kind), as it was when the call first blocked: a
	 * futex's address, operation and word; a file lock's range (fcntl: its struct flock, the
	 * start made absolute for SEEK_CUR; lock_word its l_type, | 0x10000 for SEEK_END); a
	 * semaphore's set and number. */
	__u64 lock_addr;
	__s64 lock_start;
	__s64 lock_len;
	__u32 lock_op;
	__u32 lock_word;
	__u32 holder_tid;     /* LS_WAKE_HELD: the thread that held the futex when the timeout ended */
	__s32 waker_ustack;   /* the waking thread's user stack at the wake-up (stacks), as ustack (its key in waker_ustack_key) */
	__u32 waker_wait_dev; /* the device whose completion ended the waker's I/O wait of waker_wait_ns
	                       * (kernel threads; 0: not known) */
	__u8 lock_kind;       /* enum ls_lock_kind */
	__u8 wake_flags;      /* enum ls_wake_flags, of the longest blocked interval */
	__u8 pad4[2];
	/* The call's intervals off its CPU (blocked, then waiting for a CPU; preempted), in time
	 * order: the first LS_OFF_KEPT - 1 of them and, in the last slot, the longest of the rest
	 * (off_n: how many there were in all). Between them the call ran. off_part: enum
	 * ls_why_part, LS_OFF_UNSEEN set on a pipe/socket wait whose wake-up was not seen (timer
	 * time instead when off_timer: see why_close). */
	__u64 off_start[LS_OFF_KEPT];
	__u64 off_end[LS_OFF_KEPT];
	__u8 off_part[LS_OFF_KEPT];
	__u16 off_n;
	__u8 off_timer;
	__u8 pad5[5];
};

/*
 * In-kernel aggregation beyond the bucket counts of `agg` (see agg.bpf.h), per CPU: per group,
 * what buckets cannot give (struct ls_agg_sum, map `agg_sums`); per block group and operation,
 * the queue time, size and bytes of block requests (struct ls_agg_blk, map `agg_blk`, key
 * (group - agg_blk_base) * LS_AGG_OPS + op).
 */
enum ls_agg_ops { LS_AGG_OP_READ = 0, LS_AGG_OP_WRITE = 1, LS_AGG_OP_OTHER = 2, LS_AGG_OPS = 3 };

struct ls_agg_sum {
	__u64 lat;    /* latencies counted, ns: the exact sum of the group's histogram */
	__u64 errors; /* syscalls counted that returned a negative value (failed) */
};

struct ls_agg_blk {
	__u64 bytes;                 /* bytes completed: the exact sum of `size` */
	__u64 qtime;                 /* queue times (insert to issue), ns: the exact sum of `queue` */
	__u64 queue[LS_AGG_BUCKETS]; /* queue time, the buckets of `agg` (0 when issued directly) */
	__u64 size[LS_AGG_BUCKETS];  /* bytes of each completion, the same buckets */
};

/* Stacks of record --why: frames kept per stack, stacks each map holds, and the new stacks one
 * user may store in a map between two reads by user space (a quarter of it: see why.bpf.h). */
enum ls_stack_limits { LS_STACK_DEPTH = 64, LS_STACK_ENTRIES = 8192, LS_STACK_USER_QUOTA = 2048 };

/*
 * A copy of the top of a user stack, for unwinding in user space from the binaries' .eh_frame
 * (record --call-graph dwarf): the registers the unwinding starts from and the stack's bytes from
 * sp up, as `perf record --call-graph dwarf` takes them. Sent just before the event whose user
 * stack it is (the call's, or the sample's), as a record of its own: e.kind LS_PROC, e.nr
 * LS_UCOPY, e.pid/e.tid the thread, e.bytes the bytes copied; `key` is the frame-pointer stack's
 * key in that event (ls_why.ustack_key), which the copy stands beside. Not an event: never
 * counted as one, and lost copies only leave the frame-pointer stack.
 */
enum ls_ucopy_limits { LS_UCOPY_MAX = 16384 };
struct ls_ucopy {
	struct ls_event e;
	__u64 key;
	__u64 ip, sp, bp;
	__u8 data[LS_UCOPY_MAX];
};

/* A user stack's frames as the files mapped there (why_ufiles): the inode, device and byte
 * offset in the file of each frame of the stack of the same key (0: no file, or not code),
 * taken when its thread exits its process or execs. */
/* LS_LASTU_ENTRIES: threads whose last user stack is kept for that (why_lastu). */
enum ls_ufiles_limits { LS_UFILES_ENTRIES = 512, LS_LASTU_ENTRIES = 4096 };
struct ls_ufiles {
	__u64 ino[LS_STACK_DEPTH];
	__u64 off[LS_STACK_DEPTH];
	__u32 dev[LS_STACK_DEPTH];
};

#endif
