/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Kernel differences, in one place: each helper below hides one thing that changed between the
 * kernels latscope runs on, with the kernel that changed it. Included by latscope.bpf.c; needs
 * vmlinux.h and the libbpf headers first.
 *
 * Two ways are used. Fields that moved are found by CO-RE existence checks, resolved by libbpf
 * at load time (the branch not taken is dead code the verifier never sees). A missing kfunc
 * cannot be hidden that way from every verifier, so the programs that need one come in two
 * variants compiled from the same code (a `fast` argument, constant in each): user space loads
 * the one this kernel can run (`set_autoload`), after looking for the kfunc in the kernel's BTF.
 * The fast variant is the code as it would be without the other.
 */
#ifndef LATSCOPE_COMPAT_BPF_H
#define LATSCOPE_COMPAT_BPF_H

/*
 * bpf_rdonly_cast (Linux 6.2): makes a kernel pointer the verifier cannot follow (a struct file
 * behind fdt->fd[], void *private_data) one it can read fields of directly, fault-safe. Weak,
 * so that the object opens where it is missing; only the fast variants call it.
 */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

/* `ptr` as a `type *` whose fields can be read: bpf_rdonly_cast in the fast variant; in the
 * other one the pointer is a plain number and KREAD reads through it with probe reads. */
#define KCAST(fast, type, ptr) \
	((fast) ? (type *)bpf_rdonly_cast((void *)(ptr), bpf_core_type_id_kernel(type)) : (type *)(ptr))

/* src->a->b... for a pointer from KCAST: direct loads in the fast variant, BPF_CORE_READ
 * (one bpf_probe_read_kernel per step) without bpf_rdonly_cast (before Linux 6.2). */
#define KREAD(fast, src, a, ...) \
	((fast) ? ___arrow(src, a, ##__VA_ARGS__) : BPF_CORE_READ(src, a, ##__VA_ARGS__))

/* Copy the field src->a... (an array or struct) into *dst, which has its type or size. */
#define KREAD_INTO(fast, dst, src, a, ...)                                                   \
	do {                                                                                 \
		if (fast)                                                                    \
			__builtin_memcpy(dst, &___arrow(src, a, ##__VA_ARGS__), sizeof(*(dst))); \
		else                                                                         \
			BPF_CORE_READ_INTO(dst, src, a, ##__VA_ARGS__);                      \
	} while (0)

/* The struct file in slot `fd` of an fd table's array (fdt->fd, a `struct file **` the
 * verifier treats as a number). */
static __always_inline struct file *fd_slot(const bool fast, struct file **fds, __s64 fd)
{
	void *slot = (void *)((__u64)fds + fd * sizeof(void *));
	if (fast) {
		/* The slot read as the first word of a struct callback_head: a direct (fault-safe)
		 * load instead of a bpf_probe_read_kernel() call. */
		struct callback_head *h = KCAST(fast, struct callback_head, slot);
		return KCAST(fast, struct file, h->next);
	}
	struct file *f = NULL;
	bpf_probe_read_kernel(&f, sizeof(f), slot);
	return f;
}

/* struct request_queue gained `disk` in Linux 5.15; before, the request had `rq_disk`
 * (removed in 6.0). */
struct request___rq_disk {
	struct gendisk *rq_disk;
} __attribute__((preserve_access_index));

/* The disk a block request is for (NULL if none). */
static __always_inline struct gendisk *rq_gendisk(struct request *rq)
{
	if (bpf_core_field_exists(rq->q->disk))
		return rq->q->disk;
	return ((struct request___rq_disk *)rq)->rq_disk;
}

/* Bytes of `w` (little-endian) before its first NUL byte kept, the rest zeroed; `*nul` is set
 * when it has one. (w - 0x01..) & ~w & 0x80.. marks the first zero byte exactly with its
 * lowest set bit (bytes above it may be marked wrongly, which does not matter here). */
static __always_inline __u64 before_nul(__u64 w, bool *nul)
{
	__u64 t = (w - 0x0101010101010101ULL) & ~w & 0x8080808080808080ULL;
	*nul = t != 0;
	return w & (((t & -t) >> 7) - 1);
}

/*
 * The command name as two words, read straight from task_struct (cheaper than the helper), with
 * the bytes after its NUL zeroed. Older kernels (5.15 was seen to; 6.1 pads with zeros) give a
 * task its new name with strlcpy, which leaves the end of the old name after the NUL
 * ("zzwl\0sh"), so the raw words are no key for the command-name filter's hash map.
 */
static __always_inline void task_comm(struct task_struct *task, __u64 out[2])
{
	const __u64 *c = (const __u64 *)task->comm;
	bool nul;
	out[0] = before_nul(c[0], &nul);
	out[1] = nul ? 0 : before_nul(c[1], &nul);
}

/*
 * Task local storage in tracing programs (Linux 5.13). Where the kernel lacks it, what the
 * programs keep per thread goes to a preallocated hash map keyed by thread id instead, NAME_tid
 * next to each task storage map NAME (sized by user space at load: one entry when unused).
 * Its entries are deleted when taken and when the thread exits, so the map holds the threads in
 * the middle of something (a syscall switched out, an exec); past its size, a call is counted
 * lost. `task_storage` is set at load; the branch not taken is dead code the verifier drops.
 */
const volatile __u8 task_storage = 1;

#define TASK_MAP(name, vtype, tid_entries)                  \
	struct {                                            \
		__uint(type, BPF_MAP_TYPE_TASK_STORAGE);    \
		__uint(map_flags, BPF_F_NO_PREALLOC);       \
		__type(key, int);                           \
		__type(value, vtype);                       \
	} name SEC(".maps");                                \
	struct {                                            \
		__uint(type, BPF_MAP_TYPE_HASH);            \
		__uint(max_entries, tid_entries);           \
		__type(key, __u32);                         \
		__type(value, vtype);                       \
	} name##_tid SEC(".maps")

/* Zeros for a new hash entry (the largest value of a TASK_MAP fits). */
static __u8 task_zero[LS_PATH_MAX];

/* The value of `task` in TASK_MAP `name`: NULL when there is none (and `create` is false) or
 * when the map is full. */
#define TASK_GET(name, task, create) \
	((typeof(name##_tid.value))task_get(&name, &name##_tid, (task), (create)))

static __always_inline void *task_get(void *storage, void *by_tid, struct task_struct *task, const bool create)
{
	if (task_storage)
		return bpf_task_storage_get(storage, task, 0, create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	__u32 tid = task->pid;
	void *v = bpf_map_lookup_elem(by_tid, &tid);
	if (v || !create)
		return v;
	bpf_map_update_elem(by_tid, &tid, task_zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(by_tid, &tid);
}

/* Done with the value of `task` in TASK_MAP `name`: its hash entry goes (task storage is freed
 * with the task). */
#define TASK_DONE(name, task)                           \
	do {                                            \
		if (!task_storage) {                    \
			__u32 tid_ = (task)->pid;       \
			bpf_map_delete_elem(&name##_tid, &tid_); \
		}                                       \
	} while (0)

/*
 * bpf_find_vma (Linux 5.17): the mapping of a task at a user address. Found by CO-RE (the
 * helper's number in the kernel's enum bpf_func_id): on older kernels the call, and the callback
 * with it, is dead code the verifier drops.
 */
struct ls_vma_file {
	__u64 addr;  /* in: the user address */
	__u64 ino;   /* out: inode of the file mapped there (0: none, or anonymous memory) */
	__u64 off;   /* out: byte offset of addr in that file */
	__u32 dev;   /* out: its file system's device (s_dev, as ls_event.dev) */
	__u32 exec;  /* out: the mapping is executable (VM_EXEC): code, not data */
};

/* Pages of 4 KiB (x86-64: vm_pgoff counts them). */
#define LS_PAGE_SHIFT 12

extern int LINUX_KERNEL_VERSION __kconfig;

/*
 * The inode the user opened behind a mapped file. overlayfs maps its files as backing files
 * (Linux 6.8 and later: struct backing_file): the mapping holds the file beneath, while
 * /proc/PID/maps and the file descriptors the recording names show the overlay's inode (a
 * container's files, the root of many VMs). FMODE_BACKING, which marks such a file, is bit 25
 * until Linux 6.14 and bit 24 from it (fsnotify's pre-content bits moved it; bit 25 then means
 * something else): the only kernel difference this helper needs the version for.
 */
static __always_inline struct inode *user_inode(struct file *file)
{
	struct inode *inode = BPF_CORE_READ(file, f_inode);
	if (!bpf_core_type_exists(struct backing_file))
		return inode;
	unsigned int backing = LINUX_KERNEL_VERSION >= KERNEL_VERSION(6, 14, 0) ? 1u << 24 : 1u << 25;
	if (!(BPF_CORE_READ(file, f_mode) & backing))
		return inode;
	struct backing_file *bf = container_of(file, struct backing_file, file);
	struct inode *user = BPF_CORE_READ(bf, user_path.dentry, d_inode);
	return user ? user : inode;
}

static long vma_file_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct ls_vma_file *f = data;
	struct file *file = BPF_CORE_READ(vma, vm_file);
	if (!file)
		return 0;
	struct inode *inode = user_inode(file);
	if (!inode)
		return 0;
	f->ino = BPF_CORE_READ(inode, i_ino);
	f->dev = BPF_CORE_READ(inode, i_sb, s_dev);
	f->exec = (BPF_CORE_READ(vma, vm_flags) & 0x4 /* VM_EXEC */) != 0;
	f->off = (f->addr - BPF_CORE_READ(vma, vm_start)) + ((__u64)BPF_CORE_READ(vma, vm_pgoff) << LS_PAGE_SHIFT);
	return 0;
}

/* The file mapped at f->addr in the current task, into *f; false where the kernel lacks
 * bpf_find_vma or did not find it (the mm's lock is taken, no mapping there). */
static __always_inline bool vma_file(struct ls_vma_file *f)
{
	f->ino = 0;
	if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_find_vma))
		return false;
	long err = bpf_find_vma(bpf_get_current_task_btf(), f->addr, vma_file_cb, f, 0);
	return err == 0 && f->ino != 0;
}

/*
 * The syscall task t (not running) is blocked in, or -1: the number the kernel saved at its entry
 * (x86_64's orig_ax; an exception's error code stands there too, so a task blocked in a page
 * fault may pass for one in a low-numbered call). bpf_task_pt_regs: Linux 5.15.
 */
static __always_inline long task_blocked_syscall(struct task_struct *t, long state)
{
	if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs) || state == 0 /* TASK_RUNNING */)
		return -1;
	struct pt_regs *r = (struct pt_regs *)bpf_task_pt_regs(t);
	if (!r)
		return -1;
	long nr = BPF_CORE_READ(r, orig_ax);
	return nr >= 0 && nr < LS_NR_MAX ? nr : -1;
}

/* The syscall a sys_exit tracepoint (tp_btf: its first argument the pt_regs) ends. */
static __always_inline long exit_syscall_nr(void *ctx)
{
	struct pt_regs *r = (struct pt_regs *)((__u64 *)ctx)[0];
	return BPF_CORE_READ(r, orig_ax);
}

/*
 * The hypervisor's steal clock of this CPU (ns): how long a KVM guest's vCPU was runnable but
 * not running, because the host ran something else. The host keeps it current at each entry into
 * the guest, in the per-CPU record the guest registered (steal_time, MSR_KVM_STEAL_TIME), so a
 * read is exact at any moment. Kernels with CONFIG_PARAVIRT_TIME_ACCOUNTING leave that time out
 * of their tasks' CPU time; attribution files it as run-queue time, not time on CPU.
 *
 * steal_time is a per-CPU variable, but kernels without CONFIG_KALLSYMS_ALL cannot resolve it as
 * a ksym. So it is found from another per-CPU variable the programs reach, this CPU's struct rq
 * (a task's se.cfs_rq->rq): both lie in the kernel's per-CPU area at the distance their offsets
 * in its BTF (DATASEC .data..percpu) say. User space sets that distance under a hypervisor;
 * where it is not KVM, or the host does not offer the clock, the record stays 0. Without the
 * distance (bare metal, a kernel without KVM guest support) or CONFIG_FAIR_GROUP_SCHED (the
 * task's cfs_rq and its rq), 0 is read. t: a task running on this CPU.
 */
const volatile __s64 steal_off = 0;

static __always_inline __u64 steal_clock(const bool fast, struct task_struct *t)
{
	if (!steal_off || !bpf_core_field_exists(t->se.cfs_rq) || !bpf_core_field_exists(struct cfs_rq, rq))
		return 0;
	struct cfs_rq *cfs = t->se.cfs_rq;
	if (!cfs)
		return 0;
	__u64 at = (__u64)cfs->rq + steal_off;
	if (fast)
		return KCAST(fast, struct kvm_steal_time, at)->steal;
	__u64 v = 0;
	bpf_probe_read_kernel(&v, sizeof(v), (void *)(at + bpf_core_field_offset(struct kvm_steal_time, steal)));
	return v;
}

#endif
