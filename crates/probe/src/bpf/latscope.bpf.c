// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * latscope's kernel side: syscall latency (raw_syscalls enter/exit), block
 * request latency (insert/issue/complete) and process lifecycle events, either
 * streamed through a ring buffer or aggregated into per-CPU histograms.
 *
 * Filters that user space pushes down (pids, comms, cgroups, syscall set,
 * minimum latency, fd types, devices) are tested here so that events that
 * cannot match never cross the ring buffer. A followed process's children are
 * added to the pid filter as they fork and leave it when they exit.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>
#include "latscope.h"
#include "compat.bpf.h"
#include "fdname.bpf.h"
#include "agg.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define IOV_MAX_READ 8

/* Set by user space before load. */
const volatile __u32 self_tgid = 0;
const volatile __u8 filter_pids = 0;
const volatile __u8 filter_comms = 0;
const volatile __u8 filter_devs = 0;
const volatile __u8 filter_cgroups = 0;
const volatile __u8 follow_children = 0;
const volatile __u8 agg_mode = 0;   /* 0: stream events; 1: in-kernel histograms */
const volatile __u8 agg_group = 0;  /* enum ls_agg_group */
const volatile __u8 agg_fd = 0;     /* LS_AGG_COMPOSITE: some syscalls are counted by fd group */
const volatile __u32 agg_dev_other = LS_AGG_NONE; /* LS_AGG_COMPOSITE: group of devices not in devs */
const volatile __u64 min_lat = 0;
const volatile __u32 fdtype_mask = 0;
const volatile __u64 wake_bytes = 256 * 1024;
const volatile __u8 proc_events = 1;  /* emit process events (fork, exec, exit) */
const volatile __u8 stash_exec = 0;   /* keep the program of an exec for its syscall's event */
/* Benchmarks only (LATSCOPE_ABLATE): parts of the per-call work switched off at load, to measure
 * what each costs. A constant: the verifier drops the code of the parts switched off, and with
 * the default 0 the programs are what they are without it. */
const volatile __u8 ablate = 0;
#define LS_ABLATE_RING 1   /* build the event in scratch space, never reserve or commit it */
#define LS_ABLATE_FD 2     /* no fd identity (device, inode, type, position) */
#define LS_ABLATE_TASK 4   /* no task fields (ids, uid, cgroup, comm) */
#define LS_ABLATE_FILTER 8 /* no pid/comm/cgroup filter: every task is wanted */

/* Bumped by user space whenever the pid filter changes, so that verdicts cached per task are
 * taken again (a process started behind a gate made syscalls before its pid was added). */
volatile __u32 filter_gen = 1;
/* Which point of the recording the thread-times iterator (ls_times_iter) reads: set by user space
 * before each read (enum ls_times_when). */
volatile __u32 times_when = LS_TIMES_START;

/* Make the shared types part of the object's BTF so the skeleton exports them (Rust reads the
 * constants from there; see latscope.h). */
struct ls_event _ls_event_type = {};
struct ls_sys_desc _ls_sys_desc_type = {};
struct ls_sock_tuple _ls_sock_tuple_type = {};
struct ls_stats _ls_stats_type = {};
enum ls_limits _ls_limits_type = LS_COMM_LEN;
enum ls_kind _ls_kind_type = LS_SYSCALL;
enum ls_proc_op _ls_proc_op_type = LS_FORK;
enum ls_desc_bits _ls_desc_bits_type = LS_IO;
enum ls_fd_type _ls_fd_type_type = LS_FD_UNKNOWN;
enum ls_rwbs _ls_rwbs_type = LS_RWBS_SYNC;
enum ls_sys_class _ls_sys_class_type = LS_CLASS_PROCESS;
enum ls_agg_group _ls_agg_group_type = LS_AGG_ALL;
enum ls_agg_ops _ls_agg_ops_type = LS_AGG_OPS;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 32 << 20); /* resized by user space */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LS_NR_MAX);
	__type(key, __u32);
	__type(value, struct ls_sys_desc);
} sys_desc SEC(".maps");

/* Syscall in flight, per task: set at entry, consumed at exit. */
struct ls_start {
	__u64 ts;
	__u64 args[LS_NARGS];
	__u64 ino;
	__s64 pos;
	__u32 dev;
	__u32 nr;
	__u8 fd_type;
	__u8 recheck;   /* the pid/comm filter is decided at exit (the call may rename the task) */
};

/* Whether a slot of struct ls_sys_desc names an argument. The table comes from latscope-event,
 * whose tests check that every slot is below LS_NARGS or LS_ARG_NONE; the bound also proves the
 * index to the verifier (the compiler folds the two tests into one). */
static __always_inline bool has_arg(__u8 idx)
{
	return idx != LS_ARG_NONE && idx < LS_NARGS;
}

/*
 * Where a syscall in flight waits for its exit. Task storage costs about as much as the rest of
 * the programs together, so the entry goes to a per-CPU slot, owned by the task that made it;
 * only when that task is switched out before its exit (it blocked, or was preempted) does
 * sched_switch move the entry to the task's storage ("spill"). A syscall that does not block
 * never touches task storage. `switches` counts context switches on the CPU so that a program
 * preempted halfway through the slot can tell and fall back to task storage.
 */
/* Who made a call: what every syscall event carries about its task. */
struct ls_who {
	__u64 cgroup;
	__u64 comm[2];
	struct ls_ids ids;
	__u32 pid, tid, uid, pad;
};

struct ls_cpu {
	struct ls_start st;
	__u64 task;      /* owner of st (task_struct address), 0 when free */
	__u64 switches;
	/* The task running here and its pt_regs, as a syscall program last found them (cur_task);
	 * ctask is 0 when unknown: sched_switch forgets it. */
	__u64 ctask;
	__u64 cregs;
	/* who_now's fields of the task that last ended a call here (who_cached), valid while wstamp
	 * is switches + 1 and the task's own fields it is read from are the w* keys below. */
	struct ls_who who;
	__u64 wstamp;
	__u64 wtask, wcgrp, wtty, wcomm[2];
	__u32 wtid, wluid;
	/* The pid/comm filter's verdict for the task that last made a syscall here, valid while
	 * the task, its tgid and command name and filter_gen are what they were when it was taken:
	 * hashing the comm on every syscall cost more than the rest of the entry program. */
	__u64 vtask;
	__u64 vcomm[2];
	__u64 vcss;      /* the task's css_set (its cgroups) when the cgroup filter is on */
	__u32 vtgid;
	__u32 vgen;
	__u8 wanted;
	/* With attribution: the CPU's steal clock just after st's entry (steal_clock). Last, so
	 * that the fields above keep the places the recording's hot path has them at. */
	__u64 st_steal;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ls_cpu);
} cpus SEC(".maps");

/* Entries of tasks switched out during a syscall (see struct ls_cpu). */
TASK_MAP(starts, struct ls_start, 1);

/*
 * The program of an exec in progress, as the kernel copied it (bprm->filename): the execve
 * event needs it, but at the syscall's exit the path argument's memory belongs to the old image.
 */
struct ls_exec_path {
	char path[LS_PATH_MAX];
};

TASK_MAP(exec_paths, struct ls_exec_path, 1);

#define barrier() asm volatile("" ::: "memory")

/* The pid filter: thread group ids. When following, fork adds children and exit removes
 * processes; a fork that finds the map full is counted (not_followed). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LS_PIDS_MAX);
	__type(key, __u32);
	__type(value, __u8);
} pids SEC(".maps");

/* The cgroup filter: ids of cgroup v2 directories (their inode numbers); a task in one of them
 * or in a cgroup below one passes. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LS_CGROUPS_MAX);
	__type(key, __u64);
	__type(value, __u8);
} cgroups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, char[LS_COMM_LEN]);
	__type(value, __u8);
} comms SEC(".maps");

/* Block devices to record (when filter_devs), value = aggregation group. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} devs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ls_stats);
} stats SEC(".maps");

/*
 * The per-CPU rings (x86 only: see pcpu_reserve). A plain event (no path, no attribution) is
 * written in place in a ring of the CPU it ends on, which user space maps and drains: no helper
 * call reserves or commits it, which is the dearest part of an event on hosts whose kernel
 * returns go through a mitigation thunk. User space merges the rings and the shared ring buffer
 * by time (see the probe crate's merge.rs). A full ring is no loss: the event goes to the
 * shared ring buffer instead. pcpu_ctl holds each CPU's head (written by the programs) and tail
 * (written by user space), each on a cache line of its own so that the reader's polling does
 * not take the writer's line away; pcpu_slots holds the CPUs' slots, CPU after CPU. Both are
 * sized by user space.
 */
const volatile __u8 pcpu_on = 0;
const volatile __u32 pcpu_mask = 0;  /* slots per CPU - 1 (a power of two less one) */
const volatile __u32 pcpu_shift = 0; /* log2 of the slots per CPU */

struct ls_pcpu_ctl {
	__u64 head;
	__u64 pad0[7];
	__u64 tail;
	__u64 pad1[7];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ls_pcpu_ctl);
} pcpu_ctl SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ls_event);
} pcpu_slots SEC(".maps");

struct ls_scratch {
	struct ls_event e;
	char paths[sizeof(struct ls_why) + 2 * LS_PATH_MAX + LS_XVALUE_MAX]; /* [struct ls_why] path path2 [xattr value] */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ls_scratch);
} scratch SEC(".maps");

struct ls_rq {
	__u64 insert_ts;
	__u64 issue_ts;
	__u64 cgroup;
	__u32 pid, tid, uid;
	char comm[LS_COMM_LEN];
	struct ls_ids ids;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct ls_rq);
} inflight SEC(".maps");

/* This CPU's counters (struct ls_stats, read by field in user space). */
static __always_inline struct ls_stats *cpu_stats(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&stats, &zero);
}

/* Count one more `field` (a member of struct ls_stats). */
#define STAT_INC(field)                                   \
	do {                                              \
		struct ls_stats *_st = cpu_stats();       \
		if (_st)                                  \
			_st->field++;                     \
	} while (0)

/* An output that failed after count_event() counted it: count it as lost instead. */
static __always_inline void stat_lost_after_count(void)
{
	struct ls_stats *st = cpu_stats();
	if (st) {
		st->events--;
		st->lost++;
	}
}

/* Aggregation that looks at the fd (its type): the only one that needs the fd resolved at entry. */
#define AGG_NEEDS_FD (fdtype_mask || agg_group == LS_AGG_FDCLASS || agg_fd)


/*
 * Whether the current task is in a cgroup of the filter or below one. Its ancestors are looked
 * up from the root down by id (bpf_get_current_ancestor_cgroup_id): the targets' levels need not
 * be known, which they cannot be inside a cgroup namespace, and cgroups created below a target
 * after the start are in without telling the kernel.
 */
static __always_inline bool cgroup_wanted(void)
{
	if (!filter_cgroups)
		return true;
	for (int level = 0; level <= LS_CGROUP_DEPTH; level++) {
		__u64 id = bpf_get_current_ancestor_cgroup_id(level);
		if (!id)
			return false; /* above the task's own level */
		if (bpf_map_lookup_elem(&cgroups, &id))
			return true;
	}
	return false;
}

static __always_inline bool task_wanted_uncached(__u32 tgid, const __u64 comm[2])
{
	if (filter_pids && !bpf_map_lookup_elem(&pids, &tgid))
		return false;
	if (filter_comms && !bpf_map_lookup_elem(&comms, comm))
		return false;
	return cgroup_wanted();
}

/* Whether the pid/comm/cgroup filter keeps this task (the current one); the verdict is cached in
 * the CPU's slot. */
static __always_inline bool task_wanted(struct task_struct *task, struct ls_cpu *c)
{
	if ((!filter_pids && !filter_comms && !filter_cgroups) || (ablate & LS_ABLATE_FILTER))
		return true;
	__u32 gen = filter_gen, tgid = task->tgid;
	__u64 comm[2] = {};
	if (filter_comms)
		task_comm(task, comm);
	/* A task moved to another cgroup gets another css_set. */
	__u64 css = filter_cgroups ? (__u64)task->cgroups : 0;
	if (c->vtask == (__u64)task && c->vtgid == tgid && c->vgen == gen && c->vcomm[0] == comm[0] &&
	    c->vcomm[1] == comm[1] && c->vcss == css)
		return c->wanted;
	bool w = task_wanted_uncached(tgid, comm);
	c->vtask = 0;
	barrier();
	c->wanted = w;
	c->vcomm[0] = comm[0];
	c->vcomm[1] = comm[1];
	c->vcss = css;
	c->vgen = gen;
	c->vtgid = tgid;
	barrier();
	c->vtask = (__u64)task; /* last: the entry is valid from here */
	return w;
}

static __always_inline void fill_start(const bool fast, struct ls_start *s, struct task_struct *task,
				       struct pt_regs *regs, __u32 nr, struct ls_sys_desc *d, __u8 recheck);

/*
 * The current task for the syscall programs. bpf_get_current_task_btf() is a helper call, which
 * costs about as much as the rest of the entry program bar the clock read (a return thunk on
 * CPUs that need one), and the exit program needs the task twice. So the CPU's slot keeps the
 * task a syscall program last found here with its pt_regs (the programs' first argument, the top
 * of the task's kernel stack: no two live tasks share one); sched_switch forgets it, so a task
 * kept with the same regs is the one running. The fast variant reads it through
 * bpf_rdonly_cast: loads only, never a helper that takes a task (trusted_task gives one).
 */
static __always_inline struct task_struct *cur_task(const bool fast, struct ls_cpu *c, void *regs)
{
	if (!fast)
		return bpf_get_current_task_btf();
	__u64 t = c->ctask;
	barrier();
	if (!t || c->cregs != (__u64)regs) {
		t = (__u64)bpf_get_current_task_btf();
		/* Another task that runs here before the last store finds ctask 0 (or its own). */
		c->ctask = 0;
		barrier();
		c->cregs = (__u64)regs;
		barrier();
		c->ctask = t;
	}
	return KCAST(true, struct task_struct, t);
}

/* The current task as helpers that take one (task storage) want it: cur_task's in the compat
 * variant, a helper call in the fast one (rare paths: a call switched out, attribution, exec). */
#define trusted_task(fast, task) ((fast) ? bpf_get_current_task_btf() : (task))

#include "why.bpf.h"

/* The syscall entry; `fast`: this kernel has bpf_rdonly_cast (see compat.bpf.h). */
static __always_inline int sys_enter(const bool fast, struct pt_regs *regs, long id)
{
	if (id < 0 || id >= LS_NR_MAX)
		return 0;
	/* A thread leaving its process or its program: its last user stack named as files. */
	if (why_mode && why_stacks && (id == 231 /* exit_group */ || id == 59 /* execve */ || id == 322 /* execveat */))
		why_keep_ufiles();
	__u32 nr = id;
	struct ls_sys_desc *d = bpf_map_lookup_elem(&sys_desc, &nr);
	if (!d || !d->want)
		return 0;
	__u32 zero = 0;
	struct ls_cpu *c = bpf_map_lookup_elem(&cpus, &zero);
	if (!c)
		return 0;
	struct task_struct *task = cur_task(fast, c, regs);
	if (task->tgid == self_tgid)
		return 0;
	__u8 recheck = 0;
	if (!task_wanted(task, c)) {
		/* exec and prctl may give the task the name the filter wants, and its event carries the
		 * name it returns with: decide at exit, or the event that renames it would be lost. */
		if (!filter_comms || !(d->bits & LS_RENAMES))
			return 0;
		recheck = 1;
	}
	__u64 switches = c->switches;
	c->task = 0;
	barrier();
	fill_start(fast, &c->st, task, regs, nr, d, recheck);
	if (why_mode)
		c->st_steal = steal_clock(fast, task);
	barrier();
	c->task = (__u64)task;
	barrier();
	if (c->switches != switches) {
		/* Preempted while writing the slot, which another task may have used meanwhile:
		 * keep this entry in task storage instead. */
		c->task = 0;
		struct ls_start *s = TASK_GET(starts, trusted_task(fast, task), true);
		if (s)
			fill_start(fast, s, task, regs, nr, d, recheck);
	}
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(ls_sys_enter, struct pt_regs *regs, long id)
{
	return sys_enter(true, regs, id);
}

/* The same without bpf_rdonly_cast (kernels before 6.2): user space loads one of the two. */
SEC("tp_btf/sys_enter")
int BPF_PROG(ls_sys_enter_compat, struct pt_regs *regs, long id)
{
	return sys_enter(false, regs, id);
}

/* The entry of a syscall moved to task storage by sched_switch, consumed. */
static __always_inline bool take_spilled(struct task_struct *task, struct ls_start *st)
{
	struct ls_start *s = TASK_GET(starts, task, false);
	if (!s || !s->ts)
		return false;
	__builtin_memcpy(st, s, sizeof(*st));
	s->ts = 0;
	TASK_DONE(starts, task);
	return true;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(ls_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u32 zero = 0;
	struct ls_cpu *c = bpf_map_lookup_elem(&cpus, &zero);
	if (!c)
		return 0;
	c->switches++;
	c->ctask = 0;
	struct ls_start *first = NULL;
	if (c->task && c->task == (__u64)prev) {
		/* prev blocks (or is preempted) inside a syscall: its entry moves with it. */
		struct ls_start *s = TASK_GET(starts, prev, true);
		if (s)
			__builtin_memcpy(s, &c->st, sizeof(*s));
		else
			STAT_INC(lost);
		first = s;
	}
	c->task = 0;
	if (why_mode)
		why_sched_switch(ctx, preempt, prev, next, first, first ? c->st_steal : 0);
	return 0;
}

/* An offset behind a pointer argument, read at entry: the kernel advances it by the time the call
 * returns. The pointer in the saved arguments is replaced by the offset (-1: NULL, unreadable). */
static __always_inline void deref_off(struct ls_start *s, __u8 idx)
{
	if (!has_arg(idx))
		return;
	__s64 off = -1;
	void *p = (void *)s->args[idx];
	if (p && bpf_probe_read_user(&off, sizeof(off), p))
		off = -1;
	s->args[idx] = off;
}

/* Save what the exit needs: number, arguments, the fd's identity, then the entry time. */
static __always_inline void fill_start(const bool fast, struct ls_start *s, struct task_struct *task,
				       struct pt_regs *regs, __u32 nr, struct ls_sys_desc *d, __u8 recheck)
{
	s->nr = nr;
	if (filter_comms) /* without a command-name filter (known at load), the verifier drops this */
		s->recheck = recheck;
	/* In-kernel histograms that need neither the fd nor the arguments: the entry time is all
	 * (with several views, for the calls no view counts by fd). */
	if (agg_mode && (!AGG_NEEDS_FD ||
			 (agg_group == LS_AGG_COMPOSITE && d->agg1 == LS_AGG_NONE && d->agg2 == LS_AGG_NONE))) {
		s->ts = bpf_ktime_get_ns();
		return;
	}
	s->args[0] = regs->di;
	s->args[1] = regs->si;
	s->args[2] = regs->dx;
	s->args[3] = regs->r10;
	s->args[4] = regs->r8;
	s->args[5] = regs->r9;
	if (d->bits & LS_OFF_PTR) {
		deref_off(s, d->off);
		deref_off(s, d->off2);
	}
	/* Resolve the fd now: close() has removed it by the time the call returns. */
	__u8 fdi = d->fd;
	if (has_arg(fdi) && !(ablate & LS_ABLATE_FD))
		fd_info(fast, task, (int)s->args[fdi], &s->dev, &s->ino, &s->fd_type, &s->pos);
	else {
		/* No fd: clear what the previous syscall of this task left. */
		s->fd_type = LS_FD_UNKNOWN;
		s->dev = 0;
		s->ino = 0;
		s->pos = -1;
	}
	s->ts = bpf_ktime_get_ns(); /* last: a non-zero ts marks a complete entry */
}

static __always_inline __u64 arg_or(struct ls_start *s, __u8 idx, __u64 dflt)
{
	return has_arg(idx) ? s->args[idx] : dflt;
}

/* The number of a pid in the namespace at `level` (struct pid's numbers[level].nr): a probe
 * read, since a direct load cannot take a variable index. Only for tasks in a child pid
 * namespace; level 0 is the pid itself. */
static __always_inline __u32 pid_nr_at(struct pid *p, __u32 level)
{
	__u64 base = 0;
	int nr = 0;
	bpf_probe_read_kernel(&base, sizeof(base), &p);
	if (level > 64)
		return 0;
	bpf_probe_read_kernel(&nr, sizeof(nr),
			      (void *)(base + bpf_core_field_offset(struct pid, numbers) +
				       level * bpf_core_type_size(struct upid)));
	return nr;
}

/* gid, login uid, controlling tty and namespace pids of `task` (a probe read inside a child pid
 * namespace). `typed`: direct loads, for the syscall programs; otherwise probe reads, for the
 * programs that run rarely (block requests, process events): each typed load is checked against
 * the kernel's BTF when the program loads, which made most of those small programs' load time,
 * while a probe read is checked as a helper call. */
static __always_inline void fill_ids(const bool typed, struct ls_ids *e, struct task_struct *task)
{
	e->gid = KREAD(typed, task, cred, gid.val);
	/* task_struct has loginuid only with CONFIG_AUDIT. */
	e->loginuid = bpf_core_field_exists(task->loginuid) ? KREAD(typed, task, loginuid.val) : 0xffffffff;
	struct tty_struct *tty = KREAD(typed, task, signal, tty);
	__u32 t = 0;
	if (tty) {
		/* As the kernel's new_encode_dev(tty_devnum()), /proc/PID/stat's tty_nr. */
		__u32 major = KREAD(typed, tty, driver, major);
		__u32 minor = KREAD(typed, tty, driver, minor_start) + KREAD(typed, tty, index);
		t = (minor & 0xff) | (major << 8) | ((minor & ~0xffu) << 12);
	}
	e->tty = t;
	struct pid *tp = KREAD(typed, task, thread_pid);
	__u32 level = KREAD(typed, tp, level);
	if (level) {
		e->vtid = pid_nr_at(tp, level);
		e->vpid = pid_nr_at(KREAD(typed, task, group_leader, thread_pid), level);
	} else {
		e->vtid = KREAD(typed, task, pid);
		e->vpid = KREAD(typed, task, tgid);
	}
	e->pad = 0;
}

/* An fd of the current task named (fd_info) by a global function: checked once, on its own, not
 * on each path of the exit program that reaches it (calls returning an fd, pipe and socketpair).
 * Only the variant for kernels with bpf_rdonly_cast calls it, as who_now below. */
struct ls_fdi {
	__u64 ino;
	__s64 pos;
	__u32 dev;
	__u8 type;
	__u8 pad[3];
};

__noinline int fd_info_now(__s64 fd, struct ls_fdi *o)
{
	if (!o)
		return 0;
	fd_info(true, bpf_get_current_task_btf(), fd, &o->dev, &o->ino, &o->type, &o->pos);
	return 0;
}

/* fd_info at the exit: through fd_info_now where the kernel has bpf_rdonly_cast. */
static __always_inline void fd_info_exit(const bool fast, struct task_struct *task, __s64 fd, __u32 *dev,
					 __u64 *ino, __u8 *type)
{
	if (fast) {
		struct ls_fdi o = {};
		fd_info_now(fd, &o);
		*dev = o.dev;
		*ino = o.ino;
		*type = o.type;
	} else {
		__s64 pos;
		fd_info(false, task, fd, dev, ino, type, &pos);
	}
}

/* Who made the call ending now, by direct loads from task_struct rather than four helper calls. */
static __always_inline void who_fill(struct ls_who *w, struct task_struct *task)
{
	w->pid = task->tgid;
	w->tid = task->pid;
	w->uid = task->cred->uid.val;
	w->cgroup = task->cgroups->dfl_cgrp->kn->id;
	task_comm(task, w->comm);
	fill_ids(true, &w->ids, task);
}

/*
 * The same as a global function: the verifier checks it once, on its own, rather than on every
 * path of the exit program that reaches it, which took most of the time the programs took to
 * load (each of the task's fields is a typed load checked against the kernel's BTF). Global
 * functions taking pointers to memory exist from Linux 5.12 on: only the variant of the syscall
 * programs for kernels with bpf_rdonly_cast (6.2) calls it (see compat.bpf.h). The task is the
 * one cur_task kept in the CPU's slot `c` (a global function takes no task pointer there), or,
 * when a switch has cleared it since, the helper's.
 */
__noinline int who_now(struct ls_who *w, struct ls_cpu *c)
{
	if (!w || !c)
		return 0;
	__u64 t = c->ctask;
	if (!t)
		t = (__u64)bpf_get_current_task_btf();
	who_fill(w, KCAST(true, struct task_struct, t));
	return 0;
}

/*
 * who_now's fields are read through a dozen loads, some three pointers deep; the exit program
 * keeps the last ones in the CPU's slot, with what of the task they follow from (its tid, name,
 * login uid, tty, cgroup, and the uid and gid themselves: a freed cred's memory is soon another
 * cred's), and takes them from there while those are the same. Only between two context
 * switches (wstamp): the task that ran meanwhile is the one there is now, and a program
 * preempted while writing the slot leaves it invalid.
 */
static __always_inline bool who_cached(struct ls_cpu *c, struct task_struct *task, __u64 sw)
{
	const __u64 *comm = (const __u64 *)task->comm;
	const struct cred *cred = task->cred;
	return c->wstamp == sw + 1 && c->wtask == (__u64)task && c->wtid == task->pid &&
	       c->who.uid == cred->uid.val && c->who.ids.gid == cred->gid.val &&
	       c->wcgrp == (__u64)task->cgroups->dfl_cgrp && c->wcomm[0] == comm[0] && c->wcomm[1] == comm[1] &&
	       c->wtty == (__u64)task->signal->tty &&
	       (!bpf_core_field_exists(task->loginuid) || c->wluid == task->loginuid.val);
}

/* Before who_now: the keys first, so that a field changed meanwhile leaves them stale (the
 * next call refreshes the entry), never the fields. (The uid and gid are who_now's own: a
 * change after it reads them fails the next check.) */
static __always_inline void who_keys(struct ls_cpu *c, struct task_struct *task)
{
	const __u64 *comm = (const __u64 *)task->comm;
	c->wstamp = 0;
	barrier();
	c->wtask = (__u64)task;
	c->wtid = task->pid;
	c->wcgrp = (__u64)task->cgroups->dfl_cgrp;
	c->wcomm[0] = comm[0];
	c->wcomm[1] = comm[1];
	c->wtty = (__u64)task->signal->tty;
	c->wluid = bpf_core_field_exists(task->loginuid) ? task->loginuid.val : 0;
}

/* After who_now: its fields, valid from here on until the next switch. */
static __always_inline void who_keep(struct ls_cpu *c, const struct ls_who *w, __u64 sw)
{
	__builtin_memcpy(&c->who, w, sizeof(*w));
	barrier();
	c->wstamp = sw + 1;
}

/* The event's who-fields from what who_now put in the CPU's slot. */
static __always_inline void fill_common(struct ls_event *e, const struct ls_who *w)
{
	e->cpu = bpf_get_smp_processor_id();
	e->ext = 0;
	e->pad32 = 0;
	if (ablate & LS_ABLATE_TASK)
		return;
	e->pid = w->pid;
	e->tid = w->tid;
	e->uid = w->uid;
	e->cgroup = w->cgroup;
	__builtin_memcpy(e->comm, w->comm, sizeof(w->comm));
	e->ids = w->ids;
}

/* fill_common from the slot's copy (`cached`) or `w`: a switch during the copy (wsw: the
 * switches before it) may have let another task's call replace the slot's, so then it is taken
 * again. */
static __always_inline void fill_who(const bool fast, struct ls_event *e, struct ls_cpu *c, struct ls_who *w,
				     bool cached, __u64 wsw)
{
	if (!fast || !cached) {
		fill_common(e, w);
		return;
	}
	fill_common(e, &c->who);
	barrier();
	if (c->switches != wsw) {
		who_now(w, c);
		fill_common(e, w);
	}
}

/* Count an event written and say whether to wake the reader: only every 1024th event per CPU
 * asks the ring buffer how full it is (the reader polls with a timeout anyway). */
static __always_inline __u64 count_event(void)
{
	struct ls_stats *st = cpu_stats();
	if (!st)
		return BPF_RB_NO_WAKEUP;
	if (++st->events & 1023)
		return BPF_RB_NO_WAKEUP;
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wake_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

/* The next free slot of this CPU's ring, and the ring, or NULL when the ring is full (or off).
 * One writer per CPU: a program's run is never nested in another run of itself on a CPU (the
 * kernel skips the second, counting a miss) and never moves to another CPU. */
static __always_inline struct ls_event *pcpu_reserve(struct ls_pcpu_ctl **ctl)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct ls_pcpu_ctl *c = bpf_map_lookup_elem(&pcpu_ctl, &cpu);
	if (!c)
		return NULL;
	__u64 head = c->head;
	/* The tail only grows: one read too old sees the ring fuller than it is, never emptier. */
	if (head - *(volatile __u64 *)&c->tail > pcpu_mask)
		return NULL;
	__u32 idx = (cpu << pcpu_shift) | ((__u32)head & pcpu_mask);
	struct ls_event *e = bpf_map_lookup_elem(&pcpu_slots, &idx);
	if (e)
		*ctl = c;
	return e;
}

/* Publish the slot pcpu_reserve gave: x86 keeps stores in order, so the reader that sees the new
 * head (with an acquiring load) sees the event written before it; the barrier keeps the compiler
 * from moving the event's stores past the head's. */
static __always_inline void pcpu_commit(struct ls_pcpu_ctl *c)
{
	barrier();
	*(volatile __u64 *)&c->head = c->head + 1;
	struct ls_stats *st = cpu_stats();
	if (st)
		st->events++;
}

/*
 * The ring buffer's wake-up flag for an event: `flags` (count_event's), or, with a threshold
 * (--why-above), a forced wake-up for a kept call with a user stack, so that user space reads
 * its addresses while the process still has them mapped (such calls are few by design; for
 * every call, a wake-up each would cost more than the calls).
 */
static __always_inline __u64 why_wake(struct ls_why *why, __u64 flags)
{
	if (why && why_min && why->ustack > 0)
		return BPF_RB_FORCE_WAKEUP;
	return flags;
}

/* Fill the syscall-specific part of an event from the saved entry. */
static __always_inline void fill_sys(struct ls_event *e, struct ls_start *s, struct ls_sys_desc *d, __u64 ts,
				     __u64 lat, long ret, __u32 dev, __u64 ino, __u8 fd_type)
{
	e->kind = LS_SYSCALL;
	e->ts = ts;
	e->lat = lat;
	e->ret = ret;
	e->nr = s->nr;
	e->fd = (__s32)arg_or(s, d->fd, (d->bits & LS_RET_FD) ? (__u64)ret : (__u64)-1);
	if (!has_arg(d->fd) && (d->bits & LS_RET_FD) && ret < 0)
		e->fd = -1;
	e->fd_type = fd_type;
	e->dev = dev;
	e->ino = ino;
	e->dirfd = (__s32)arg_or(s, d->dirfd, (__u64)-1);
	e->flags = (__u32)arg_or(s, d->flags, 0);
	e->mode = (__u32)arg_or(s, d->mode, 0);
	e->addr = arg_or(s, d->addr, 0);
	if (has_arg(d->dirfd2))
		e->addr = s->args[d->dirfd2]; /* dirfd of the second path (rename/link) */
	e->bytes = arg_or(s, d->count, 0);
	e->off = -1;
	e->qtime = 0;
	e->path_len = 0;
	e->path2_len = 0;

	if (d->bits & LS_IOV) {
		/* Sum the first iovecs: bytes requested by readv/writev. */
		struct iovec iov;
		__u64 total = 0, cnt = arg_or(s, d->iovcnt, 0);
		const struct iovec *uiov = (const struct iovec *)arg_or(s, d->count, 0);
		for (int i = 0; i < IOV_MAX_READ; i++) {
			if (i >= cnt)
				break;
			if (bpf_probe_read_user(&iov, sizeof(iov), &uiov[i]))
				break;
			total += iov.iov_len;
		}
		e->bytes = total;
	}
	if (has_arg(d->off)) {
		e->off = s->args[d->off]; /* behind a pointer: read at entry */
		/* A NULL offset pointer: the call uses (and advances) the file position. */
		if ((d->bits & (LS_OFF_PTR | LS_FILE_POS)) == (LS_OFF_PTR | LS_FILE_POS) && e->off == -1)
			e->off = s->pos;
	} else if (d->bits & LS_FILE_POS) {
		e->off = s->pos;
	}
	e->off2 = (__s64)arg_or(s, d->off2, (__u64)-1);
	if ((d->bits & LS_CLONE_RANGE) && e->flags == 0x4020940d /* FICLONERANGE */) {
		/* struct file_clone_range: the source fd, its offset, the length, the destination offset. */
		__s64 r[4] = { -1, -1, 0, -1 };
		bpf_probe_read_user(r, sizeof(r), (void *)e->addr);
		e->addr = (__u64)r[0];
		e->off2 = r[1];
		e->bytes = (__u64)r[2];
		e->off = r[3];
	}
	if (d->bits & LS_OPENAT2) {
		struct open_how how = {};
		bpf_probe_read_user(&how, sizeof(how), (void *)arg_or(s, d->flags, 0));
		e->flags = how.flags;
		e->mode = how.mode;
	} else if (d->bits & LS_CLONE_ARGS) {
		/* clone3: the flags are the first member of struct clone_args. */
		__u64 flags = 0;
		bpf_probe_read_user(&flags, sizeof(flags), (void *)arg_or(s, d->flags, 0));
		e->flags = (__u32)flags;
	}
}

/* What a successful call tells a replay about the tree (ls_sys_desc.info). */
static __always_inline void fill_exit_info(const bool fast, struct ls_event *e, struct ls_start *s,
					   struct ls_sys_desc *d, struct task_struct *task, long ret)
{
	if (!d->info || ret < 0)
		return;
	if (d->info == LS_INFO_FSIZE) {
		struct file *f = file_of(fast, task, (d->bits & LS_RET_FD) ? (int)ret : (int)arg_or(s, d->fd, (__u64)-1));
		struct inode *inode = f ? KREAD(fast, f, f_inode) : 0;
		if (inode) {
			e->addr = KREAD(fast, inode, i_mode);
			e->off2 = KREAD(fast, inode, i_size);
		}
		return;
	}
	if (!has_arg(d->infoarg))
		return;
	void *buf = (void *)s->args[d->infoarg];
	if (d->info == LS_INFO_ACL) {
		/* struct posix_acl_xattr_header { u32 version; } then { u16 tag, perm; u32 id; } x 3:
		 * user, group, other (a minimal ACL is a mode). */
		__u16 v[14] = {};
		if (e->bytes != 28 || bpf_probe_read_user(v, sizeof(v), buf))
			return;
		if (v[0] != 2 || v[2] != 1 || v[6] != 4 || v[10] != 0x20)
			return;
		e->mode = LS_ACL_MODE | (v[3] & 7) << 6 | (v[7] & 7) << 3 | (v[11] & 7);
		return;
	}
	__u64 size = 0;
	__u32 mode = 0;
	if (d->info == LS_INFO_STATX) {
		__u16 m = 0;
		bpf_probe_read_user(&m, sizeof(m), buf + 28);       /* stx_mode */
		bpf_probe_read_user(&size, sizeof(size), buf + 40); /* stx_size */
		mode = m;
	} else {
		bpf_probe_read_user(&mode, sizeof(mode), buf + 24); /* st_mode (x86_64) */
		bpf_probe_read_user(&size, sizeof(size), buf + 48); /* st_size */
	}
	e->addr = mode;
	e->off2 = (__s64)size;
}

/* Threads the start found blocked in a call begun before the recording (see times_resumed). */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u8);
} times_pre SEC(".maps");

/*
 * A thread's times so far, as the scheduler counts them (an LS_PROC event of op LS_TIMES; `when`:
 * enum ls_times_when, `pending` and `nr`: the call it is in): on CPU (se.sum_exec_runtime), runnable (sched_info.run_delay), user and
 * system CPU, page faults, switches, and when it started. Two of them bound the thread's whole
 * time over a recording, in and outside its calls (docs/WHY.md). With --why only. The fields it
 * takes are listed in docs/TRACE_FORMAT.md.
 */
static __always_inline void emit_times(struct task_struct *p, __u32 when, __u64 pending, long nr)
{
	if (agg_mode || !why_mode)
		return;
	__u32 zero = 0;
	struct ls_scratch *sc = bpf_map_lookup_elem(&scratch, &zero);
	if (!sc)
		return;
	struct ls_event *e = &sc->e;
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = LS_PROC;
	e->nr = LS_TIMES;
	e->cpu = bpf_get_smp_processor_id();
	e->ts = bpf_ktime_get_ns();
	e->pid = p->tgid;
	e->tid = p->pid;
	e->uid = p->cred->uid.val;
	e->cgroup = BPF_CORE_READ(p, cgroups, dfl_cgrp, kn, id);
	fill_ids(false, &e->ids, p);
	e->ret = p->start_time;
	e->bytes = p->se.sum_exec_runtime;
	e->qtime = p->sched_info.run_delay;
	e->addr = p->utime;
	e->off = p->stime;
	e->ino = p->min_flt;
	e->off2 = p->maj_flt;
	e->dev = p->nvcsw;
	e->flags = p->nivcsw;
	e->mode = when;
	/* The call it is in, where known: how long it has been in it (a recorded call not yet
	 * returned) and its number; -1 for none. */
	e->lat = pending;
	e->fd = nr;
	e->dirfd = -1;
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), p->comm);
	if (bpf_ringbuf_output(&events, sc, sizeof(struct ls_event), count_event()))
		stat_lost_after_count();
}

/* Whether task t (not the current one) is in a cgroup the filter takes: its cgroup or one of its
 * ancestors is in the filter's map (cgroup_wanted, for another task). */
static __always_inline bool task_cgroup_wanted(struct task_struct *t)
{
	struct cgroup *cg = BPF_CORE_READ(t, cgroups, dfl_cgrp);
	for (int i = 0; i <= LS_CGROUP_DEPTH && cg; i++) {
		__u64 id = BPF_CORE_READ(cg, kn, id);
		if (bpf_map_lookup_elem(&cgroups, &id))
			return true;
		struct cgroup_subsys_state *parent = BPF_CORE_READ(cg, self.parent);
		cg = parent ? BPF_CORE_READ(parent, cgroup) : NULL;
	}
	return false;
}

/* A call that began before the recording returned (the start found its thread blocked in it):
 * its thread's times now, once, bound the time it spent in it. */
static __always_inline void times_resumed(void *ctx, struct task_struct *task)
{
	__u8 *pre = bpf_task_storage_get(&times_pre, task, 0, 0);
	if (!pre || !*pre)
		return;
	*pre = 0;
	emit_times(task, LS_TIMES_RESUMED, 0, exit_syscall_nr(ctx));
}

/* The syscall exit; `fast` as for sys_enter. */
static __always_inline int sys_exit(void *ctx, const bool fast, struct pt_regs *regs, long ret)
{
	__u32 zero = 0;
	struct ls_cpu *c = bpf_map_lookup_elem(&cpus, &zero);
	if (!c)
		return 0;
	struct task_struct *task = cur_task(fast, c, regs);
	struct ls_start st; /* filled below: whole, or only ts and nr on the lean histogram path */
	__u64 switches = c->switches;
	bool spilled = false; /* the call was switched out (its entry comes from task storage) */
	barrier();
	if (c->task == (__u64)task) {
		if (agg_mode && !AGG_NEEDS_FD) {
			st.ts = c->st.ts;
			st.nr = c->st.nr;
			/* Always set: the compiler may load it before testing filter_comms, and kernels
			 * before 6.1 refuse a read of stack never written (5.15 did). */
			st.recheck = filter_comms ? c->st.recheck : 0;
		} else {
			__builtin_memcpy(&st, &c->st, sizeof(st));
		}
		barrier();
		c->task = 0;
		barrier();
		/* Preempted while reading the slot: the switch saved the entry in task storage. */
		if (c->switches != switches) {
			if (!take_spilled(trusted_task(fast, task), &st))
				return 0;
			spilled = true;
		}
	} else if (!take_spilled(trusted_task(fast, task), &st)) {
		if (why_mode)
			times_resumed(ctx, trusted_task(fast, task));
		return 0;
	} else {
		spilled = true;
	}
	struct ls_start *s = &st;
	if (!s->ts)
		return 0;
	if (filter_comms && s->recheck && !task_wanted(task, c))
		return 0;
	__u64 ts = s->ts;
	__u64 now = bpf_ktime_get_ns();
	__u64 lat = now - ts;
	/* The call's parts, closed whether or not an event follows. What its event carries is kept
	 * in a byte of the stack the compiler reads back at each use: the verifier of Linux 5.15
	 * follows no value kept there, so it explores what follows once, not once per kind. */
	volatile __u8 why = WHY_REC_NONE;
	if (why_mode && !agg_mode)
		why = why_close(fast, ctx, trusted_task(fast, task), spilled, ts, now, lat, ret);
	if (lat < min_lat)
		return 0;
	__u32 nr = s->nr;
	if (agg_mode && !AGG_NEEDS_FD && agg_group != LS_AGG_SYSCLASS && agg_group != LS_AGG_COMPOSITE) {
		agg_add(agg_group == LS_AGG_SYSCALL ? nr : 0, lat, ret < 0);
		return 0;
	}
	struct ls_sys_desc *d = bpf_map_lookup_elem(&sys_desc, &nr);
	if (!d)
		return 0;
	if (agg_mode && agg_group == LS_AGG_COMPOSITE) {
		if (d->agg0 != LS_AGG_NONE)
			agg_add(d->agg0, lat, ret < 0);
		if (!agg_fd || (d->agg1 == LS_AGG_NONE && d->agg2 == LS_AGG_NONE))
			return 0;
	}

	__u32 dev = s->dev;
	__u64 ino = s->ino;
	__u8 fd_type = s->fd_type;
	if ((d->bits & LS_RET_FD) && ret >= 0 && !(ablate & LS_ABLATE_FD))
		fd_info_exit(fast, task, ret, &dev, &ino, &fd_type);
	/* pipe, socketpair: the two fds the kernel wrote to user memory; the first names the event. */
	__s32 pair[2] = { -1, -1 };
	if ((d->bits & LS_FD_PAIR) && ret == 0) {
		if (bpf_probe_read_user(pair, sizeof(pair), (void *)arg_or(s, d->addr, 0)))
			pair[0] = pair[1] = -1;
		fd_info_exit(fast, task, pair[0], &dev, &ino, &fd_type);
	}
	if (fdtype_mask && !(fdtype_mask & (1U << (fd_type & 31))))
		return 0;

	if (agg_mode) {
		__u32 group = 0;
		if (agg_group == LS_AGG_SYSCALL) {
			group = nr;
		} else if (agg_group == LS_AGG_SYSCLASS) {
			group = d->class;
		} else if (agg_group == LS_AGG_FDCLASS || agg_group == LS_AGG_COMPOSITE) {
			__u32 t = fd_type & 31;
			__u32 *g = bpf_map_lookup_elem(&fdclass, &t);
			group = g ? *g : 0;
			if (agg_group == LS_AGG_COMPOSITE) {
				/* Only the fd groups some view counts have a group: bit `bit` of the masks. */
				__u32 bit = group & 31, f1 = d->agg1_fds, f2 = d->agg2_fds;
				if (d->agg1 != LS_AGG_NONE && ((f1 >> bit) & 1))
					agg_add(d->agg1 + popcount32(f1 & ((1U << bit) - 1)), lat, ret < 0);
				if (d->agg2 != LS_AGG_NONE && ((f2 >> bit) & 1))
					agg_add(d->agg2 + popcount32(f2 & ((1U << bit) - 1)), lat, ret < 0);
				return 0;
			}
		}
		agg_add(group, lat, ret < 0);
		return 0;
	}

	/* On the stack, or the slot's copy (who_cached) checked again once copied: the program
	 * may be preempted meanwhile. */
	struct ls_who who = {};
	bool cached = false;
	__u64 wsw = c->switches;
	if (!(ablate & LS_ABLATE_TASK)) {
		if (fast && who_cached(c, task, wsw)) {
			cached = true;
		} else if (fast) {
			who_keys(c, task);
			who_now(&who, c);
			who_keep(c, &who, wsw);
		} else {
			who_fill(&who, task);
		}
	}
	if (!has_arg(d->path) && !has_arg(d->path2) && !(d->bits & LS_SOCK) && d->info != LS_INFO_XLIST) {
		struct ls_event *e;
		struct ls_why *wo = NULL;
		struct ls_pcpu_ctl *ctl = NULL;
		__u8 rec = why;
		if (ablate & LS_ABLATE_RING) {
			struct ls_scratch *sc = bpf_map_lookup_elem(&scratch, &zero);
			if (!sc)
				return 0;
			e = &sc->e;
		} else if (rec & LS_EXT_WHY) {
			/* The parts follow the event: a record of its own size (the reserve's size is a constant). */
			struct ls_event_why {
				struct ls_event e;
				struct ls_why w;
			} *ew = bpf_ringbuf_reserve(&events, sizeof(*ew), 0);
			if (!ew) {
				STAT_INC(lost);
				return 0;
			}
			why_fill(&ew->w, trusted_task(fast, task), rec, lat);
			wo = &ew->w;
			e = &ew->e;
		} else if (pcpu_on && (e = pcpu_reserve(&ctl))) {
			/* in place, in this CPU's ring */
		} else {
			e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
			if (!e) {
				STAT_INC(lost);
				return 0;
			}
		}
		fill_who(fast, e, c, &who, cached, wsw);
		fill_sys(e, s, d, ts, lat, ret, dev, ino, fd_type);
		fill_exit_info(fast, e, s, d, task, ret);
		e->ext = rec & WHY_REC_EXT;
		if (d->bits & LS_FD_PAIR) {
			e->fd = pair[0];
			e->addr = pair[1] >= 0 ? pair[1] : 0;
		}
		if (ablate & LS_ABLATE_RING)
			count_event();
		else if (ctl)
			pcpu_commit(ctl);
		else
			bpf_ringbuf_submit(e, why_wake(wo, count_event()));
		return 0;
	}

	/* Path-taking call: build in scratch space, then copy out only the bytes used. */
	struct ls_scratch *sc = bpf_map_lookup_elem(&scratch, &zero);
	if (!sc)
		return 0;
	struct ls_event *e = &sc->e;
	fill_who(fast, e, c, &who, cached, wsw);
	fill_sys(e, s, d, ts, lat, ret, dev, ino, fd_type);
	fill_exit_info(fast, e, s, d, task, ret);
	/* With attribution, its parts come first and the paths after them. */
	__u32 woff = 0;
	struct ls_why *wo = NULL;
	__u8 rec = why;
	e->ext = rec & WHY_REC_EXT;
	if (rec & LS_EXT_WHY) {
		wo = (struct ls_why *)sc->paths;
		why_fill(wo, trusted_task(fast, task), rec, lat);
		woff = sizeof(struct ls_why);
	}
	char *paths = sc->paths + woff;
	long n1 = 0, n2 = 0;
	if (has_arg(d->path) && d->class == LS_CLASS_PROCESS && ret == 0) {
		/* A successful exec replaced the memory the path was in: take the kernel's copy. */
		struct task_struct *tt = trusted_task(fast, task);
		struct ls_exec_path *x = TASK_GET(exec_paths, tt, false);
		if (x) {
			n1 = bpf_probe_read_kernel_str(paths, LS_PATH_MAX, x->path);
			x->path[0] = 0;
			TASK_DONE(exec_paths, tt);
		}
		if (n1 <= 0) {
			STAT_INC(path_faults);
			n1 = 0;
		}
	} else if (has_arg(d->path)) {
		n1 = bpf_probe_read_user_str(paths, LS_PATH_MAX, (void *)s->args[d->path]);
		if (n1 < 0) {
			STAT_INC(path_faults);
			n1 = 0;
		}
	}
	if ((d->bits & LS_SOCK) && (ret >= 0 || ret == -115 /* EINPROGRESS */) &&
	    (fd_type == LS_FD_IPV4 || fd_type == LS_FD_IPV6)) {
		/* connect names the socket it was given, accept the one it returns. */
		__s64 sfd = (d->bits & LS_RET_FD) ? ret : (__s64)(int)arg_or(s, d->fd, (__u64)-1);
		n1 = sock_tuple(fast, task, sfd, (struct ls_sock_tuple *)paths);
	}
	if (n1 > LS_PATH_MAX)
		n1 = LS_PATH_MAX;
	if (has_arg(d->path2)) {
		n2 = bpf_probe_read_user_str(paths + n1, LS_PATH_MAX, (void *)s->args[d->path2]);
		if (n2 < 0) {
			STAT_INC(path_faults);
			n2 = 0;
		}
	}
	if (n2 > LS_PATH_MAX)
		n2 = LS_PATH_MAX;
	/* What an xattr call's starting tree needs: the names listed, a value got or set. The
	 * buffer is filled when the call asked for data (a size of 0 only asks for the length). */
	if ((d->info == LS_INFO_XLIST || d->info == LS_INFO_XVALUE || d->info == LS_INFO_ACL) && ret >= 0 &&
	    e->bytes > 0 && has_arg(d->infoarg)) {
		__u64 len = d->info == LS_INFO_ACL ? e->bytes : (__u64)ret;
		void *src = (void *)s->args[d->infoarg];
		if (d->info == LS_INFO_XLIST) {
			if (len > LS_PATH_MAX)
				len = LS_PATH_MAX;
			if (len && !bpf_probe_read_user(paths + n1, len, src))
				n2 = len;
		} else if (n2 > 0 && len > 0 && len <= LS_XVALUE_MAX) {
			if (bpf_probe_read_user(paths + n1 + n2, len, src) == 0)
				n2 += len;
		}
	}
	e->path_len = n1;
	e->path2_len = n2;
	__u64 size = sizeof(struct ls_event) + woff + n1 + n2;
	if (size > sizeof(struct ls_scratch))
		return 0;
	if (ablate & LS_ABLATE_RING)
		count_event();
	else if (bpf_ringbuf_output(&events, sc, size, why_wake(wo, count_event())))
		stat_lost_after_count();
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(ls_sys_exit, struct pt_regs *regs, long ret)
{
	return sys_exit(ctx, true, regs, ret);
}

/* The same without bpf_rdonly_cast (kernels before 6.2). */
SEC("tp_btf/sys_exit")
int BPF_PROG(ls_sys_exit_compat, struct pt_regs *regs, long ret)
{
	return sys_exit(ctx, false, regs, ret);
}

/* ---- block requests ---- */

static __always_inline __u32 rq_dev(struct request *rq)
{
	struct block_device *part = rq->part;
	if (part)
		return part->bd_dev;
	struct gendisk *disk = rq_gendisk(rq);
	if (!disk)
		return 0;
	return ((__u32)disk->major << 20) | (__u32)disk->first_minor;
}

static __always_inline __u32 rq_flags(__u32 opf)
{
	__u32 f = 0;
	if (opf & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_SYNC)))
		f |= LS_RWBS_SYNC;
	if (opf & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_META)))
		f |= LS_RWBS_META;
	if (opf & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_FUA)))
		f |= LS_RWBS_FUA;
	if (opf & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_PREFLUSH)))
		f |= LS_RWBS_PREFLUSH;
	if (opf & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_RAHEAD)))
		f |= LS_RWBS_RAHEAD;
	return f;
}

static __always_inline void rq_owner(struct ls_rq *v)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	v->pid = pid_tgid >> 32;
	v->tid = (__u32)pid_tgid;
	v->uid = (__u32)bpf_get_current_uid_gid();
	v->cgroup = bpf_get_current_cgroup_id();
	bpf_get_current_comm(v->comm, sizeof(v->comm));
	fill_ids(false, &v->ids, bpf_get_current_task_btf());
}

SEC("tp_btf/block_rq_insert")
int BPF_PROG(ls_rq_insert, struct request *rq)
{
	if ((bpf_get_current_pid_tgid() >> 32) == self_tgid)
		return 0; /* latscope's own I/O */
	struct ls_rq v = {};
	__u64 key = (__u64)rq;
	v.insert_ts = bpf_ktime_get_ns();
	rq_owner(&v);
	bpf_map_update_elem(&inflight, &key, &v, BPF_ANY);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(ls_rq_issue, struct request *rq)
{
	__u64 key = (__u64)rq;
	struct ls_rq *v = bpf_map_lookup_elem(&inflight, &key);
	if (v) {
		v->issue_ts = bpf_ktime_get_ns();
		return 0;
	}
	/* Issued without passing a scheduler queue: the issuer is the owner. */
	if ((bpf_get_current_pid_tgid() >> 32) == self_tgid)
		return 0;
	struct ls_rq n = {};
	rq_owner(&n);
	n.issue_ts = bpf_ktime_get_ns();
	bpf_map_update_elem(&inflight, &key, &n, BPF_ANY);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(ls_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	__u64 key = (__u64)rq;
	struct ls_rq *v = bpf_map_lookup_elem(&inflight, &key);
	if (!v || !v->issue_ts) {
		/* The flush machinery ends a request it sequenced with a completion of no bytes: a
		 * write with PREFLUSH|FUA once its data completed (the entry is gone then), or an empty
		 * flush (fsync's) that was never issued itself, the device's work being the flush
		 * request, which is paired and recorded (block_flush). It clears PREFLUSH (and FUA
		 * where the device lacks it) from the request first, so the sign is the empty
		 * completion. These are counted apart: an fsync-heavy workload has thousands of them,
		 * and no request was missed. */
		if (nr_bytes == 0)
			STAT_INC(blk_flush_ends);
		else
			STAT_INC(blk_unpaired);
		return 0;
	}
	__u64 now = bpf_ktime_get_ns();
	__u64 lat = now - v->issue_ts;
	__u32 dev = rq_dev(rq);
	if (why_mode)
		why_rq_done(dev, rq->__sector, v->insert_ts ? v->insert_ts : v->issue_ts,
			    v->insert_ts ? v->issue_ts - v->insert_ts : 0, lat);
	__u32 group = 0;
	if (filter_devs || agg_dev_other != LS_AGG_NONE) {
		__u32 *g = bpf_map_lookup_elem(&devs, &dev);
		if (g)
			group = *g;
		else if (agg_mode && agg_dev_other != LS_AGG_NONE)
			group = agg_dev_other; /* a disk that appeared after the start */
		else
			goto done;
	}
	if (lat < min_lat)
		goto done;
	if (agg_mode) {
		agg_add(group, lat, false);
		agg_blk_add(group, rq->cmd_flags & 0xff, v->insert_ts ? v->issue_ts - v->insert_ts : 0, nr_bytes);
		goto done;
	}
	struct ls_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		STAT_INC(lost);
		goto done;
	}
	__u32 opf = rq->cmd_flags;
	e->kind = LS_BLOCK;
	e->cpu = bpf_get_smp_processor_id();
	e->ext = 0;
	e->pad32 = 0;
	e->ts = v->issue_ts;
	e->lat = lat;
	e->qtime = v->insert_ts ? v->issue_ts - v->insert_ts : 0;
	e->ret = error;
	e->pid = v->pid;
	e->tid = v->tid;
	e->uid = v->uid;
	e->cgroup = v->cgroup;
	__builtin_memcpy(e->comm, v->comm, sizeof(e->comm));
	e->ids = v->ids;
	e->nr = opf & 0xff; /* REQ_OP_MASK */
	e->flags = rq_flags(opf);
	e->dev = dev;
	e->off = rq->__sector;
	e->bytes = nr_bytes;
	e->fd = -1;
	e->dirfd = -1;
	e->off2 = -1;
	e->fd_type = 0;
	e->ino = 0;
	e->addr = 0;
	e->mode = 0;
	e->path_len = 0;
	e->path2_len = 0;
	bpf_ringbuf_submit(e, count_event());
done:
	if (nr_bytes >= rq->__data_len)
		bpf_map_delete_elem(&inflight, &key);
	return 0;
}

/* ---- processes ---- */

/* A process event; exec events carry the program (kpath, kernel memory) and the arguments
 * (`args` .. `args_end` in the new image's memory, NUL-separated, at most LS_PATH_MAX bytes). */
static __always_inline void emit_proc(struct task_struct *p, __u16 op, __s64 ret, const char *kpath, __u64 args,
				      __u64 args_end)
{
	if (agg_mode || !proc_events)
		return;
	__u32 zero = 0;
	struct ls_scratch *sc = bpf_map_lookup_elem(&scratch, &zero);
	if (!sc)
		return;
	struct ls_event *e = &sc->e;
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = LS_PROC;
	e->cpu = bpf_get_smp_processor_id();
	e->ts = bpf_ktime_get_ns();
	e->pid = p->tgid;
	e->tid = p->pid;
	e->uid = p->cred->uid.val;
	e->cgroup = bpf_get_current_cgroup_id();
	fill_ids(false, &e->ids, p);
	e->nr = op;
	e->ret = ret;
	e->fd = -1;
	e->dirfd = -1;
	e->off = -1;
	e->off2 = -1;
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), p->comm);
	long n = 0;
	if (kpath) {
		n = bpf_probe_read_kernel_str(sc->paths, LS_PATH_MAX, kpath);
		if (n < 0)
			n = 0;
	}
	if (n > LS_PATH_MAX)
		n = LS_PATH_MAX;
	__u64 m = args_end > args ? args_end - args : 0;
	if (m > LS_PATH_MAX)
		m = LS_PATH_MAX;
	if (m && bpf_probe_read_user(sc->paths + n, m, (void *)args))
		m = 0;
	e->path_len = n;
	e->path2_len = m;
	if (bpf_ringbuf_output(&events, sc, sizeof(struct ls_event) + n + m, count_event()))
		stat_lost_after_count();
}

/*
 * On-CPU samples (record --profile): a perf event's program, at the frequency user space chose,
 * on every CPU. It runs in an interrupt, where it may interrupt the other programs on its CPU,
 * so it keeps to buffers of its own (the stacks' and the event's) and decides the filter without
 * the per-CPU cache (task_wanted's), whose fields an interrupted program may be writing.
 */
struct ls_sample_buf {
	struct ls_event e;
	struct ls_why w;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ls_sample_buf);
} sample_scratch SEC(".maps");


/* A stack of the interrupted context into why_kstacks (user: 0) or why_ustacks (user: 1), as
 * store_stack: 1 and its key, or -errno. */
static __always_inline __s32 sample_stack(void *ctx, __u32 user, __u32 uid, __u64 *key)
{
	__u32 idx = WHY_SBUF_SAMPLE | (user & 1);
	struct ls_stack *b = bpf_map_lookup_elem(&why_sbuf, &idx);
	if (!b)
		return -EFAULT;
	long n = bpf_get_stack(ctx, b->ip, sizeof(b->ip), user ? BPF_F_USER_STACK : 0);
	if (n <= 0)
		return n < 0 ? (__s32)n : -EFAULT;
	/* bpf_get_stack zero-fills past what it copied only from Linux 5.x on some paths: the
	 * frames past n are cleared here, as the store compares stacks up to their first zero. */
	for (int i = 0; i < LS_STACK_DEPTH; i++)
		if (i * 8 >= n)
			b->ip[i] = 0;
	return why_stored(user ? why_store_ustack(idx, uid) : why_store_kstack(idx, uid), key);
}

SEC("perf_event")
int ls_sample(struct bpf_perf_event_data *ctx)
{
	struct task_struct *t = bpf_get_current_task_btf();
	if (!t->pid || (t->flags & WHY_PF_KTHREAD))
		return 0; /* idle, or a kernel thread */
	__u32 tgid = t->tgid;
	if (tgid == self_tgid)
		return 0;
	if (filter_pids || filter_comms || filter_cgroups) {
		__u64 comm[2] = {};
		if (filter_comms)
			task_comm(t, comm);
		if (!task_wanted_uncached(tgid, comm))
			return 0;
	}
	__u32 zero = 0;
	struct ls_sample_buf *sb = bpf_map_lookup_elem(&sample_scratch, &zero);
	if (!sb)
		return 0;
	struct ls_event *e = &sb->e;
	__builtin_memset(sb, 0, sizeof(*sb));
	e->kind = LS_PROC;
	e->nr = LS_SAMPLE;
	e->ts = bpf_ktime_get_ns();
	e->cpu = bpf_get_smp_processor_id();
	e->pid = tgid;
	e->tid = t->pid;
	e->uid = t->cred->uid.val;
	e->cgroup = bpf_get_current_cgroup_id();
	fill_ids(false, &e->ids, t);
	e->fd = -1;
	e->dirfd = -1;
	e->off = -1;
	e->off2 = -1;
	/* 1: the CPU was in the kernel (a call, a fault, an interrupt), 0: in user code (x86_64:
	 * kernel addresses are the upper half). */
	e->ret = (long)ctx->regs.ip < 0 ? 1 : 0;
	/* The CPU time it stands for: a CPU-clock event's period is in ns. */
	e->bytes = ctx->sample_period;
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), t->comm);
	__u32 uid = e->uid;
	/* In user code, the kernel has no stack of it. */
	if (e->ret)
		sb->w.kstack = sample_stack(ctx, 0, uid, &sb->w.kstack_key);
	sb->w.ustack = sample_stack(ctx, 1, uid, &sb->w.ustack_key);
	if (why_ucopy && sb->w.ustack > 0) {
		/* The user registers: the sample's own in user code, those saved at the kernel's
		 * entry (a call, a fault, an interrupt) in the kernel (Linux 5.15). */
		__u64 who = (__u64)tgid << 32 | 1u << 31 | e->tid;
		if (!e->ret) {
			why_copy_ustack(who, sb->w.ustack_key, ctx->regs.ip, ctx->regs.sp, ctx->regs.bp);
		} else if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_task_pt_regs)) {
			struct pt_regs *r = (struct pt_regs *)bpf_task_pt_regs(t);
			if (r)
				why_copy_ustack(who, sb->w.ustack_key, BPF_CORE_READ(r, ip), BPF_CORE_READ(r, sp),
						BPF_CORE_READ(r, bp));
		}
	}
	e->ext = LS_EXT_WHY;
	if (bpf_ringbuf_output(&events, sb, sizeof(*sb), BPF_RB_NO_WAKEUP)) {
		struct ls_stats *st = cpu_stats();
		if (st)
			__sync_fetch_and_add(&st->lost, 1);
	}
	return 0;
}

/* Every thread the filter takes (not kernel threads), its times read at the point user space set
 * in times_when: run when user space reads the iterator, at the start and the end of a recording. */
SEC("iter/task")
int ls_times_iter(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;
	if (!t || (t->flags & WHY_PF_KTHREAD))
		return 0;
	__u32 tgid = t->tgid;
	if (tgid == self_tgid || (filter_pids && !bpf_map_lookup_elem(&pids, &tgid)))
		return 0;
	if (filter_comms) {
		__u64 comm[2] = {};
		task_comm(t, comm);
		if (!bpf_map_lookup_elem(&comms, comm))
			return 0;
	}
	if (filter_cgroups && !task_cgroup_wanted(t))
		return 0;
	/* A recorded call it has not returned from yet; else, at the start, a call it was blocked
	 * in before the recording, whose return times_resumed reports. */
	__u64 now = bpf_ktime_get_ns(), pending = 0;
	long nr = -1;
	struct ls_start *s = TASK_GET(starts, t, false);
	if (s && s->ts && s->ts < now) {
		pending = now - s->ts;
		nr = s->nr;
	} else if (times_when == LS_TIMES_START) {
		nr = task_blocked_syscall(t, why_task_state(t));
		__u8 one = 1;
		if (nr >= 0)
			bpf_task_storage_get(&times_pre, t, &one, BPF_LOCAL_STORAGE_GET_F_CREATE);
	}
	emit_times(t, times_when, pending, nr);
	return 0;
}

/* The pid filter changed: verdicts cached per CPU are taken again (see task_wanted). */
static __always_inline void filter_changed(void)
{
	__sync_fetch_and_add(&filter_gen, 1);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(ls_fork, struct task_struct *parent, struct task_struct *child)
{
	if (child->pid != child->tgid)
		return 0; /* a thread, not a process: it shares its process's tgid */
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	if (ptgid == self_tgid)
		return 0;
	if (filter_pids) {
		if (!bpf_map_lookup_elem(&pids, &ptgid))
			return 0;
		if (follow_children) {
			__u8 one = 1;
			/* Full: the child is not followed, and the user is told how many were not. */
			if (bpf_map_update_elem(&pids, &ctgid, &one, BPF_ANY))
				STAT_INC(not_followed);
			else
				filter_changed();
		}
	}
	/* The fork runs in the parent, whose cgroup the child starts in. */
	if (cgroup_wanted())
		emit_proc(child, LS_FORK, ptgid, NULL, 0, 0);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(ls_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = p->tgid;
	if (tgid == self_tgid || (filter_pids && !bpf_map_lookup_elem(&pids, &tgid)) || !cgroup_wanted())
		return 0;
	if (stash_exec) {
		struct ls_exec_path *x = TASK_GET(exec_paths, p, true);
		if (x)
			bpf_probe_read_kernel_str(x->path, sizeof(x->path), bprm->filename);
	}
	struct mm_struct *mm = p->mm;
	emit_proc(p, LS_EXEC, 0, bprm->filename, mm ? mm->arg_start : 0, mm ? mm->arg_end : 0);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(ls_exit, struct task_struct *p)
{
	/* A thread that exits in a syscall or an exec leaves no hash entry behind. */
	TASK_DONE(starts, p);
	TASK_DONE(exec_paths, p);
	__u32 tgid = p->tgid;
	if (tgid == self_tgid || (filter_pids && !bpf_map_lookup_elem(&pids, &tgid)))
		return 0;
	bool cg = cgroup_wanted();
	if (p->pid == p->tgid && cg)
		emit_proc(p, LS_EXIT, (p->exit_code >> 8) & 0xff, NULL, 0, 0);
	/* Every thread's times at its end (kernel threads are not followed). */
	if (why_mode && cg && !(p->flags & WHY_PF_KTHREAD))
		emit_times(p, LS_TIMES_EXIT, 0, -1);
	/* A followed process leaves the filter with its last thread (the count of live threads is
	 * down by the time of the tracepoint; the leader may exit before the others), so that the
	 * map stays bounded by the processes alive and a reused pid is not followed. */
	if (follow_children && filter_pids && !p->signal->live.counter) {
		bpf_map_delete_elem(&pids, &tgid);
		filter_changed();
	}
	return 0;
}
