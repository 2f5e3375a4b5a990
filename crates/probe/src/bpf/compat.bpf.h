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

#endif
