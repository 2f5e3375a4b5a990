/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Per-call attribution: where the time of a syscall went, split into the parts of enum
 * ls_why_part, which add up to its latency.
 *
 * A call that is never switched out ran on its CPU the whole time: it costs nothing here. When
 * sched_switch moves a call's entry to task storage (the task blocked or was preempted inside
 * it), the task gets an accounting state in `whys` as well. From then on, each switch out, wake-up
 * and switch in of that task closes an interval and adds it to one part:
 *
 *   switch out  -> on CPU since the last mark; then runnable (preempted) or blocked
 *   sched_waking -> blocked since the last mark, by cause (below); then runnable
 *   switch in   -> runnable since the last mark (run-queue delay)
 *   sys_exit    -> on CPU since the last mark
 *
 * On a KVM guest, what the hypervisor's steal clock advanced while the call was on its CPU is
 * run-queue time (the vCPU was waiting for a CPU of the host), not time on CPU: see why_ran.
 *
 * The cause of a blocked interval (why_cause): a page fault's I/O wait, an I/O wait (the task
 * slept with in_iowait, as io_schedule does), a timer (the wake-up came from an hrtimer or
 * timer-wheel callback), a lock (the call is futex, flock, fcntl or semop), a pipe or socket (the
 * call's fd is one, the call waits for fds or a message queue, or network softirq woke it), else
 * "other". A blocked interval whose wake-up no program saw (its program found task storage in
 * use on its CPU, or raced the switch out) is found ended at the switch in: its cause is what the call alone says (the
 * same rules without the wake-up's context; a sleep is a timer), else "unknown", and it has no
 * waker. Time outside any interval (before the state existed) is "unknown" too, never dropped:
 * the exit fills the difference to the latency into it.
 *
 * Only tasks inside a traced call have state, so other tasks pay a task-storage lookup that
 * finds nothing on each switch and wake-up.
 */
#ifndef WHY_BPF_H
#define WHY_BPF_H

const volatile __u8 why_mode = 0;    /* record attribution */
const volatile __u64 why_min = 0;    /* only calls at least this slow (ns) carry it */
/* The part a blocked wait of a call belongs to by the call alone (set by user space, by syscall
 * number): LS_WHY_LOCK for futexes, file locks and semaphores, LS_WHY_IPC for waits for fds
 * (poll, select, epoll) and message queues, LS_WHY_TIMER for sleeps (used only when the
 * wake-up was not seen: a sleep a signal ends is "other"); 0 for the rest. */
#define WHY_NR_SLOTS 512
const volatile __u8 why_nr_part[WHY_NR_SLOTS] = {};
/* Flagged in why_nr_part beside the part: a call that returns 0 when its timeout ended it (poll,
 * select, epoll_wait), so a wait of it whose wake-up was not seen was its timer's. */
#define WHY_NR_PART_MASK 0x7f
#define WHY_NR_TIMEOUT0 0x80
const volatile __u8 why_stacks = 0;  /* capture stacks: where a call blocked, and its user stack */
/* The lock a call's wait is for, by syscall number (enum ls_lock_kind; set by user space): what
 * the switch out that starts its state reads of the lock's identity. */
const volatile __u8 why_nr_lock[WHY_NR_SLOTS] = {};

enum why_state { WHY_RUN = 0, WHY_RUNNABLE = 1, WHY_BLOCKED = 2 };
enum why_hint { WHY_HINT_IOWAIT = 1, WHY_HINT_FAULT = 2 };

/* Blocked intervals a task remembers for the threads it wakes (a power of two). */
#define WHY_HIST 8

/* The accounting state of the call a task is in (valid while call_ts is the call's entry time). */
struct ls_why_acc {
	__u64 call_ts;
	__u64 mark;           /* start of the open interval */
	__u64 steal_mark;     /* the CPU's steal clock at `mark`, while on CPU (steal_clock) */
	__u64 part[LS_WHY_PARTS];
	__u64 best_wait;      /* the longest blocked interval so far (its waker is kept) */
	__u64 best_runq;      /* the longest preemption so far (its preempter is kept) */
	__u64 fault_call;     /* call_ts of the call that took a page fault in the kernel */
	__u64 wake_sector;
	__u32 wake_dev;
	__u32 waker_tid;
	char waker_comm[LS_COMM_LEN];
	__u32 rq_tid, pend_tid;
	__u16 rq_cpu, pend_cpu;
	__u32 nr;
	__u8 fd_type;
	__u8 state;           /* enum why_state */
	__u8 hint;            /* enum why_hint, of the blocked interval */
	__u8 waker_ctx;
	__u8 kstack_due;      /* the blocked interval just woken is to give its kernel stack (below) */
	__s32 best_kstack;    /* kernel stack of the longest blocked interval (ls_why.kstack encoding) */
	__u64 best_kkey;      /* and its key (ls_why.kstack_key) */
	/* The cascade of the longest blocked interval: what its waker was blocked in meanwhile. */
	__u64 casc_ns;
	__u8 casc_part;
	/* The task's last blocked intervals in traced calls, kept across its calls (a ring): a
	 * thread it wakes later looks here for what it was itself waiting for meanwhile. */
	__u8 hist_pos;
	__u8 hist_part[WHY_HIST];
	__u64 hist_start[WHY_HIST], hist_end[WHY_HIST];
	/* The requests that ended the call's I/O waits: the waits before they existed, their
	 * time queued, on the device (summed). */
	__u64 wake_held, wake_queue, wake_device;
	/* The call's last page fault in the kernel (address, and the file behind it where
	 * bpf_find_vma resolved it: ino 0 otherwise), and the one whose I/O wait was the longest. */
	struct ls_vma_file flt;
	__u8 flt_looked;      /* the file of flt.addr was looked up */
	__u64 best_fault;
	/* The fault of the longest fault wait: the last fault (flt) while bf_cur, else bf. Its
	 * file is copied only when the task faults again or exits the call: the wake-up that makes
	 * it the longest may come on another CPU while the switch out still looks the file up. */
	__u8 bf_cur;
	struct ls_vma_file bf;
	/* A kernel thread (never in a traced call) in an I/O wait since `mark`: its waits are
	 * remembered in the ring above for the cascade of the threads it wakes (a file system's
	 * journal thread that an fsync waits for, a flusher). */
	__u8 kio;
	/* The device whose completion ended each remembered interval (0: none, or not I/O), and
	 * that of the cascade's largest I/O wait. */
	__u32 hist_dev[WHY_HIST];
	__u32 casc_dev;
	/* The longest blocked interval: [wait_start, wait_end], how it ended (enum ls_wake_flags),
	 * the thread that held the futex a timeout ended it in (LS_WAKE_HELD), and the waker's user
	 * stack at the wake-up. */
	__u64 wait_start, wait_end;
	__u8 wake_flags;
	__u32 holder_tid;
	__s32 waker_ustack;
	__u64 waker_ukey;
	/* The call's own user stack, taken at its exit (see why_close) for its event. */
	__s32 ustack;
	__u64 ukey;
	/* The key of the thread's last user stack, whose frames why_lastu keeps: named as files
	 * at its exit or exec (why_keep_ufiles), where the recorder may have drained the stack but
	 * not yet read the process's maps. */
	__u64 last_ukey;
	/* The last user stack copied beside its frame-pointer stack (why_copy_ustack): its key
	 * and stack pointer. A call from the same place (the same frame-pointer stack at the same
	 * depth) is not copied again: user space takes the stack it unwound from that copy. */
	__u64 ucopy_key;
	__u64 ucopy_sp;
	/* The lock the call waits for (as struct ls_why has it), read when the call first blocks. */
	__u8 lock_kind;
	__u64 lock_addr;
	__s64 lock_start, lock_len;
	__u32 lock_op, lock_word;
	/* The task's page faults (min_flt + maj_flt) when the call's last fault in the kernel
	 * began: the kernel counts a fault when it is done, so an I/O wait while the count is
	 * still this one is inside that fault, and one after it is not the fault's. */
	__u64 flt_cnt;
	/* The futex this thread was last woken on by another (it may hold it now), across calls:
	 * its entry in why_fxs says whether it is blocked (see below). */
	__u64 fx_held;
	/* The last two futexes (8-byte words) the thread's calls waited on, across calls. */
	__u64 fx_waited[2];
	/* A wake-up that came while the task was not yet recorded as blocked (see why_switch_out):
	 * when, and its waker as a wake-up's fields have it. */
	__u64 early_ts;
	__u32 early_tid;
	/* The call's waits that ended without a wake-up seen and went to pipe/socket time by the
	 * call alone: its timer's, if it returns 0 and is one of WHY_NR_TIMEOUT0 (see why_close). */
	__u64 unseen_ipc;
	__u8 early_ctx, early_flags;
	char early_comm[LS_COMM_LEN];
	/* The call's intervals off its CPU, as struct ls_why has them (why_off). */
	__u64 off_start[LS_OFF_KEPT], off_end[LS_OFF_KEPT];
	__u8 off_part[LS_OFF_KEPT];
	__u16 off_n;
	__u8 off_timer;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ls_why_acc);
} whys SEC(".maps");

/*
 * Stacks (record --why --stacks). Each distinct stack is stored once, in a hash map of its kind
 * (why_kstacks, why_ustacks), under a 64-bit hash of its frames; the event carries the key
 * (ls_why.kstack_key / ustack_key) and a status (ls_why.kstack / ustack: 1, or -errno when the
 * stack is missing). Both maps are sized to 1 entry by user space when stacks are off.
 *
 * The maps are a hand-over, not a store: after each read of the ring buffer, user space drains
 * them (BPF_MAP_LOOKUP_AND_DELETE_BATCH) into a table of its own, so they only ever hold the
 * stacks first seen since the last read. Because the key is a 64-bit hash, a key names the
 * same frames for the whole recording (two distinct stacks share one with a probability of
 * about 2^-64 per pair, and the frames are compared when both are stored at once): user space
 * keeps what it drained by key, and a stack stored again after a drain is the one it has.
 *
 * So that no user can fill a map for everyone between two drains (a process calling from ever
 * new addresses makes a new user stack per call), each user (the task's uid) may store at most
 * LS_STACK_USER_QUOTA new stacks per map between two drains (why_stack_epoch, which user space
 * bumps at each drain); past it, its stacks are missing with -EDQUOT, and only its own. A stack
 * already stored costs no quota.
 *
 * Kernel stacks are those of a task being switched in (bpf_get_task_stack), user stacks those
 * of the current task at its syscall's exit (bpf_get_stack with BPF_F_USER_STACK): each is read
 * into a per-CPU buffer of its own (the two capture points run in different programs), hashed,
 * and stored if new. A later change of how stacks are captured (DWARF unwinding from a copy of
 * the user stack, say) only changes what goes into the buffer and the map's value.
 */
struct ls_stack {
	__u64 ip[LS_STACK_DEPTH];
};

#ifndef EEXIST
#define EFAULT 14
#define EEXIST 17
#endif
#ifndef EDQUOT
#define EDQUOT 122
#endif
#ifndef ESRCH
#define ESRCH 3
#endif

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LS_STACK_ENTRIES);
	__type(key, __u64);
	__type(value, struct ls_stack);
} why_kstacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LS_STACK_ENTRIES);
	__type(key, __u64);
	__type(value, struct ls_stack);
} why_ustacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LS_UFILES_ENTRIES);
	__type(key, __u64);
	__type(value, struct ls_ufiles);
} why_ufiles SEC(".maps");

/* Each thread's last user stack's frames, by thread id (see ls_why_acc.last_ukey). Not in the
 * task storage: 512 more bytes there move its elements to the allocator's next size class,
 * which the kernel refills too late for bursts of new threads (their first blocked call then
 * found no storage and lost its attribution). Preallocated, so an update never fails; a
 * thread that exits without exiting its process leaves its entry for the LRU to reuse. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LS_LASTU_ENTRIES);
	__type(key, __u32);
	__type(value, struct ls_stack);
} why_lastu SEC(".maps");

/* Where the files of a user stack are gathered (too large for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ls_ufiles);
} why_ufbuf SEC(".maps");

/* Where a stack is read before it is looked up (too large for the BPF stack): [0] kernel
 * stacks (sched_switch), [1] user stacks (sys_exit, wake-ups), [2] and [3] the same of samples,
 * which may interrupt the others. Bit 0 of the index: a user stack. */
enum why_sbuf_index { WHY_SBUF_KERNEL = 0, WHY_SBUF_USER = 1, WHY_SBUF_SAMPLE = 2 };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct ls_stack);
} why_sbuf SEC(".maps");

/* New stacks a user stored in the current epoch, per map kind (index 0 kernel, 1 user). */
struct ls_stack_quota {
	__u32 epoch;
	__u32 used[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct ls_stack_quota);
} why_stack_quota SEC(".maps");

/* Bumped by user space each time it drains the stack maps: quotas start again. */
volatile __u32 why_stack_epoch = 1;

/* May `uid` store one more new stack of kind `k` (0 kernel, 1 user) in this epoch? Counts it. */
static __always_inline bool why_stack_quota_take(__u32 uid, __u32 k)
{
	__u32 epoch = why_stack_epoch;
	struct ls_stack_quota *q = bpf_map_lookup_elem(&why_stack_quota, &uid);
	if (!q) {
		struct ls_stack_quota fresh = { .epoch = epoch };
		fresh.used[k & 1] = 1;
		/* A full LRU map evicts another user's count: it starts again, never blocks. */
		bpf_map_update_elem(&why_stack_quota, &uid, &fresh, BPF_ANY);
		return true;
	}
	if (q->epoch != epoch) {
		q->epoch = epoch;
		q->used[0] = 0;
		q->used[1] = 0;
	}
	if (q->used[k & 1] >= LS_STACK_USER_QUOTA)
		return false;
	__sync_fetch_and_add(&q->used[k & 1], 1);
	return true;
}

/*
 * Who holds a futex, for the waits on it that their timeout ends: the thread last woken on it by
 * another thread (by key: its address in the process), and whether that thread is blocked now.
 * A lock built on a futex and a timed wait (CPython's GIL: a condition variable waited on with a
 * 5 ms timeout, after which the waiter asks the holder to drop it) passes it from the releaser
 * to the thread it wakes: `handoffs` counts the wake-ups made by the thread last woken, of
 * `wakes`. A timeout on such a futex (a quarter of its wake-ups or more are hand-offs) ended a
 * wait for a thread that held it: lock contention, not idle time. That thread is the one last
 * woken on it unless that one is blocked (then another took it without a system call).
 * A queue's condition variable, which producers signal and consumers wait on, has no hand-offs.
 * A futex is known by its 8-byte word: glibc's condition variable waits on either of two
 * adjacent 4-byte words (its two groups of waiters), one condition all the same.
 * LRU: sized by user space (one entry without attribution).
 */
struct why_fx_key {
	__u64 addr;
	__u32 tgid;
	__u32 pad;
};

struct why_fx {
	__u32 holder;
	__u32 wakes;
	__u32 handoffs;
	__u32 blocked;
	__u64 comm[2];        /* the holder's command name */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct why_fx_key);
	__type(value, struct why_fx);
} why_fxs SEC(".maps");

/* t, which w belongs to, blocks (1) or is woken (0): said in the entry of the futex it was last
 * woken on, if it is the holder there still (else it holds none: forgotten). */
static __always_inline void why_fx_mark(struct ls_why_acc *w, struct task_struct *t, __u32 blocked)
{
	struct why_fx_key k = { .addr = w->fx_held, .tgid = t->tgid };
	struct why_fx *v = bpf_map_lookup_elem(&why_fxs, &k);
	if (v && v->holder == t->pid) {
		v->blocked = blocked;
	} else {
		w->fx_held = 0;
	}
}


/*
 * Store the stack in why_sbuf[buf] (zero-filled past its frames) in `map` (why_kstacks or
 * why_ustacks: `user`) unless it is there. Returns its key (below 2^63), or -errno (the stack is
 * missing): -EEXIST another stack under the same key, -EDQUOT the user's quota used up, -E2BIG
 * (or -ENOMEM) the map full.
 */
static __always_inline __s64 store_stack(void *map, __u32 buf, __u32 uid, __u32 user)
{
	__u32 idx = buf & 3;
	struct ls_stack *b = bpf_map_lookup_elem(&why_sbuf, &idx);
	if (!b)
		return -EFAULT;
	/* FNV-1a over the frames; the top bit clear, so a key is never taken for an error. */
	__u64 h = 0xcbf29ce484222325ULL;
	for (int i = 0; i < LS_STACK_DEPTH; i++) {
		if (!b->ip[i])
			break;
		h = (h ^ b->ip[i]) * 0x100000001b3ULL;
	}
	h &= ~(1ULL << 63);
	if (!h)
		h = 1;
	struct ls_stack *v = bpf_map_lookup_elem(map, &h);
	if (!v) {
		if (!why_stack_quota_take(uid, user))
			return -EDQUOT;
		long err = bpf_map_update_elem(map, &h, b, BPF_NOEXIST);
		if (err == -EEXIST) /* another CPU stored it meanwhile: compared below */
			v = bpf_map_lookup_elem(map, &h);
		else if (err)
			return err;
		else
			return h;
		if (!v)
			return -EEXIST;
	}
	/* Both are zero-filled past their frames: equal up to the first zero, equal. */
	for (int i = 0; i < LS_STACK_DEPTH; i++) {
		if (v->ip[i] != b->ip[i])
			return -EEXIST; /* another stack with the same key */
		if (!b->ip[i])
			break;
	}
	return h;
}

/* store_stack into each map: global functions, so that the verifier checks the loops over the
 * frames once per program, not on every path that stores a stack (19 k instructions), and one
 * per map, so that each look-up names its map (the verifier inlines a hash map's look-up only
 * then). */
__noinline __s64 why_store_kstack(__u32 buf, __u32 uid)
{
	return store_stack(&why_kstacks, buf, uid, 0);
}

__noinline __s64 why_store_ustack(__u32 buf, __u32 uid)
{
	return store_stack(&why_ustacks, buf, uid, 1);
}

/* A store's result as a status (1, or -errno) and *key. */
static __always_inline __s32 why_stored(__s64 r, __u64 *key)
{
	if (r < 0)
		return (__s32)r;
	*key = r;
	return 1;
}

/*
 * The kernel stack of `task`, which is not running (it is being switched in): where it blocked,
 * as the kernel saved it when it switched out. The kernel leaves out the scheduler's own frames
 * (__schedule, schedule, io_schedule, schedule_timeout, ...: its stack_trace_save_tsk), so the
 * stack starts at the function that waited. As store_stack.
 */
static __always_inline __s32 why_task_kstack(struct task_struct *task, __u64 *key)
{
	__u32 idx = WHY_SBUF_KERNEL;
	struct ls_stack *b = bpf_map_lookup_elem(&why_sbuf, &idx);
	if (!b)
		return -EFAULT;
	/* Zero-fills the buffer past the frames it copies. */
	long n = bpf_get_task_stack(task, b->ip, sizeof(b->ip), 0);
	if (n <= 0)
		return n < 0 ? (__s32)n : -EFAULT;
	return why_stored(why_store_kstack(idx, task->cred->uid.val), key);
}

/* The user stack of the current task (at its syscall's exit: the registers of its entry). As
 * store_stack. */
static __always_inline __s32 why_user_stack(void *ctx, struct task_struct *task, __u64 *key)
{
	__u32 idx = WHY_SBUF_USER;
	struct ls_stack *b = bpf_map_lookup_elem(&why_sbuf, &idx);
	if (!b)
		return -EFAULT;
	long n = bpf_get_stack(ctx, b->ip, sizeof(b->ip), BPF_F_USER_STACK);
	if (n <= 0)
		return n < 0 ? (__s32)n : -EFAULT;
	return why_stored(why_store_ustack(idx, task->cred->uid.val), key);
}

/*
 * record --call-graph dwarf: bytes of user stack copied beside each user stack (0: frame pointers
 * only; a power of two up to LS_UCOPY_MAX), for user space to unwind from the binaries' unwind
 * tables what the frame-pointer walk cannot (code built without frame pointers: most of a
 * distribution's libraries and interpreters).
 */
const volatile __u32 why_ucopy = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2); /* [0] calls (sys_exit), [1] samples, which may interrupt them */
	__type(key, __u32);
	__type(value, struct ls_ucopy);
} why_ucopy_buf SEC(".maps");

/*
 * Send a copy of the current thread's user stack from `sp` up, with the registers unwinding
 * starts from, beside its frame-pointer stack `key` (see struct ls_ucopy); 1: sent. The copy is cut to
 * what is mapped (a main thread's stack ends a few KB above its deepest frames): halved until
 * the read succeeds. Skipped while the ring buffer is a quarter full: the events come first.
 * A global function: the verifier checks it once, not in every path of its callers.
 */
__noinline int why_copy_ustack(__u64 who, __u64 key, __u64 ip, __u64 sp, __u64 bp)
{
	/* who: pid << 32 | tid, bit 31 the buffer (BPF calls take 5 arguments at most). */
	__u32 pid = who >> 32, tid = who & 0x7fffffff, buf = (who >> 31) & 1;
	if (!why_ucopy || !key || !sp)
		return 0;
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > bpf_ringbuf_query(&events, BPF_RB_RING_SIZE) / 4)
		return 0;
	struct ls_ucopy *c = bpf_map_lookup_elem(&why_ucopy_buf, &buf);
	if (!c)
		return 0;
	__u64 len = why_ucopy;
	/* A read that fails ran past the stack's mapping, which ends at a page boundary: the next
	 * try ends at the page boundary before the failed end (sp's own page always reads), so a
	 * stack near its top (a main thread's) is copied up to its last mapped byte. */
	__u64 room = 4096 - (sp & 4095);
	long err = -1;
	for (int i = 0; i < 6; i++) {
		if (len > LS_UCOPY_MAX)
			len = LS_UCOPY_MAX;
		if (len < 256)
			return 0;
		err = bpf_probe_read_user(c->data, len, (void *)sp);
		if (!err)
			break;
		if (len <= room)
			return 0;
		len = room + (((len - room - 1) >> 12) << 12);
	}
	if (err || len > LS_UCOPY_MAX)
		return 0;
	c->e.kind = LS_PROC;
	c->e.nr = LS_UCOPY;
	c->e.pid = pid;
	c->e.tid = tid;
	c->e.bytes = len;
	c->e.ext = 0;
	c->e.path_len = 0;
	c->e.path2_len = 0;
	c->key = key;
	c->ip = ip;
	c->sp = sp;
	c->bp = bp;
	return bpf_ringbuf_output(&events, c, sizeof(*c) - LS_UCOPY_MAX + len, BPF_RB_NO_WAKEUP) == 0;
}

/* What the CPU is doing now, as the wake-up programs need it. */
struct ls_why_cpu {
	__u32 timer;          /* depth of hrtimer / timer-wheel callbacks running */
	__u32 softirq;        /* softirq running: its number + 1 */
	__u64 rq_ts;          /* the last block completion on this CPU */
	__u64 rq_sector;
	__u32 rq_dev;
	__u32 pad;
	__u32 hardirq;        /* depth of device interrupt handlers running */
	__u32 net_tid;        /* the task that queued the packets of the pending net_rx softirq */
	char net_comm[LS_COMM_LEN];
	__u64 rq_start, rq_queue, rq_device; /* that request's insert (or issue), queue and device times */
	__u8 net_traced;      /* net_tid is in the recording's set (why_traced) */
	__u32 rq_pid;         /* the task the last completion ran in (or interrupted) */
	__u32 rq_ctx;         /* and its context: softirq | hardirq depth << 16 */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ls_why_cpu);
} why_cpus SEC(".maps");

/* A block completion wakes its waiter in the same call chain, after the tracepoint. The chain is
 * the completion's context (the task, softirq or interrupt it ran in, which ends at a switch or
 * the handler's exit), not a time: a preempted vCPU or a request of many pages can put
 * milliseconds between the two. The bound only guards against a context no exit marks (an IPI). */
#define WHY_RQ_WINDOW_NS 10000000ULL

static __always_inline __u32 why_rq_ctx(struct ls_why_cpu *wc)
{
	return wc->softirq | (wc->hardirq << 16);
}

/* The wake-up running now follows a block completion in the same call chain. */
static __always_inline bool why_rq_recent(struct ls_why_cpu *wc, __u64 now)
{
	return wc->rq_ts && now - wc->rq_ts < WHY_RQ_WINDOW_NS && wc->rq_ctx == why_rq_ctx(wc) &&
	       wc->rq_pid == (__u32)bpf_get_current_pid_tgid();
}

struct ls_why _ls_why_type = {};
enum ls_why_part _ls_why_part_type = LS_WHY_CPU;
enum ls_waker_ctx _ls_waker_ctx_type = LS_WAKER_NONE;
enum ls_ext_bits _ls_ext_bits_type = LS_EXT_WHY;
enum ls_off_limits _ls_off_limits_type = LS_OFF_KEPT;
enum ls_stack_limits _ls_stack_limits_type = LS_STACK_DEPTH;
enum ls_ucopy_limits _ls_ucopy_limits_type = LS_UCOPY_MAX;
enum ls_ufiles_limits _ls_ufiles_limits_type = LS_UFILES_ENTRIES;
enum ls_lock_kind _ls_lock_kind_type = LS_LOCK_NONE;
enum ls_wake_flags _ls_wake_flags_type = LS_WAKE_KNOWN;

static __always_inline struct ls_why_cpu *why_cpu(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&why_cpus, &zero);
}

/* task_struct.state was renamed __state in 5.14. */
struct task_struct___pre514 {
	volatile long state;
} __attribute__((preserve_access_index));

/* A direct load (t comes from the tracepoint, a pointer the verifier lets programs read). */
static __always_inline long why_task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return t->__state;
	return ((struct task_struct___pre514 *)t)->state;
}

/* A task a wake-up has claimed but not yet queued (include/linux/sched.h; 0x0200 since 2.6.32). */
#define WHY_TASK_WAKING 0x0200
/* A wake-up this recent, seen before the task was recorded as blocked, is the one that ends the
 * block its switch out records: the two race on two CPUs for a few microseconds. Older, it woke
 * an earlier sleep of the task that did not block (a wait loop that found its condition). */
#define WHY_EARLY_NS 20000

/* The softirq that processes received packets (enum in the kernel, stable since 2.6). */
#define WHY_NET_RX_SOFTIRQ 3

/* How a blocked interval ended, as far as the programs know. */
enum why_wake {
	WHY_WAKE_UNSEEN = 0, /* no program saw its wake-up: found ended at the switch in */
	WHY_WAKE_TASK = 1,   /* woken by a task, or in a softirq other than net_rx */
	WHY_WAKE_TIMER = 2,  /* in an hrtimer or timer-wheel callback */
	WHY_WAKE_NET_RX = 3, /* in the network receive softirq */
};

/*
 * The cause (enum ls_why_part) of a blocked interval of a call: its I/O-wait hint (enum
 * why_hint), its syscall number and fd type, and how the interval ended. The wake-up's context
 * comes first after I/O waits (a futex wait that times out is a timer); without it, only what
 * the call says by itself is left, and a call that says nothing is unknown.
 */
static __always_inline __u32 why_cause(__u8 hint, __u32 nr, __u8 fd_type, enum why_wake by)
{
	__u8 by_nr = nr < WHY_NR_SLOTS ? why_nr_part[nr] & WHY_NR_PART_MASK : 0;
	if (hint & WHY_HINT_FAULT)
		return LS_WHY_FAULT;
	if (hint & WHY_HINT_IOWAIT)
		return LS_WHY_IO;
	if (by == WHY_WAKE_TIMER)
		return LS_WHY_TIMER;
	if (by_nr == LS_WHY_LOCK)
		return LS_WHY_LOCK;
	if (by_nr == LS_WHY_IPC || by == WHY_WAKE_NET_RX || (fd_type >= LS_FD_IPV4 && fd_type <= LS_FD_PIPE) ||
	    fd_type == LS_FD_NETLINK || fd_type == LS_FD_SOCKET)
		return LS_WHY_IPC;
	if (by != WHY_WAKE_UNSEEN)
		return LS_WHY_OTHER;
	/* A sleep ends by its timer or by a signal; the timer is what it waits for. */
	if (by_nr == LS_WHY_TIMER)
		return LS_WHY_TIMER;
	return LS_WHY_UNKNOWN;
}

/* For the probe crate's tests (BPF_PROG_TEST_RUN), never loaded by a recording: why_cause of
 * the inputs given, as the return value. */
struct ls_why_cause_case {
	__u32 nr;
	__u8 hint, fd_type, by, pad;
};

SEC("syscall")
int ls_why_cause_test(struct ls_why_cause_case *c)
{
	return why_cause(c->hint, c->nr, c->fd_type, c->by);
}

/* An interval [from, to) of the call off its CPU, of `part` (with LS_OFF_UNSEEN): kept in time
 * order while there is room, the last slot for the longest of the rest. One compare at most: no
 * search, which the verifier of older kernels would follow down every branch. */
static __always_inline void why_off(struct ls_why_acc *w, __u32 part, __u64 from, __u64 to)
{
	if (to <= from || !w->call_ts)
		return;
	__u32 n = w->off_n;
	if (n < 0xffff)
		w->off_n = n + 1;
	__u32 k = LS_OFF_KEPT - 1;
	if (n < LS_OFF_KEPT - 1)
		k = n;
	else if (n >= LS_OFF_KEPT && to - from <= w->off_end[LS_OFF_KEPT - 1] - w->off_start[LS_OFF_KEPT - 1])
		return;
	k &= LS_OFF_KEPT - 1;
	w->off_start[k] = from;
	w->off_end[k] = to;
	w->off_part[k] = part;
}

/* A blocked interval of d ns, of `cause`, ended now: added to its part; if a page fault's wait,
 * the longest so far keeps its fault (the call's last one); remembered for the threads this one
 * wakes later (the cascade). unseen: its wake-up was not seen. */
static __always_inline void why_blocked_end(struct ls_why_acc *w, __u32 cause, __u64 d, __u64 now, __u32 dev,
					    bool unseen)
{
	if (cause < LS_WHY_PARTS)
		w->part[cause] += d;
	why_off(w, cause | (unseen && cause == LS_WHY_IPC ? LS_OFF_UNSEEN : 0), now - d, now);
	if (cause == LS_WHY_FAULT && d >= w->best_fault) {
		w->best_fault = d;
		w->bf_cur = 1;
	}
	__u32 h = w->hist_pos & (WHY_HIST - 1);
	w->hist_part[h] = cause;
	w->hist_start[h] = w->mark;
	w->hist_end[h] = now;
	w->hist_dev[h] = dev;
	w->hist_pos = h + 1;
}

/* Kernel threads: PF_KTHREAD in task_struct.flags (stable since 2.6). */
#define WHY_PF_KTHREAD 0x00200000

/* prev, a kernel thread, blocks in an I/O wait: the start is kept (true), for the cascade of
 * the threads it wakes when that wait is over. Only I/O waits: a kernel thread's other waits
 * are mostly for work, not part of what its wakees waited for. */
static __always_inline bool why_kthread_io_wait(struct task_struct *prev, bool preempt, __u64 now)
{
	if (!(prev->flags & WHY_PF_KTHREAD) || preempt || !BPF_CORE_READ_BITFIELD(prev, in_iowait))
		return false;
	struct ls_why_acc *w = bpf_task_storage_get(&whys, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!w)
		return true;
	w->kio = 1;
	w->mark = now;
	return true;
}

/* struct flock as x86-64 user space passes it to fcntl. */
struct why_flock {
	__s16 type, whence;
	__u32 pad;
	__s64 start, len;
	__s32 pid;
	__u32 pad2;
};

/*
 * The lock call `s` waits for, read when it first blocks (the current task's memory): a futex's
 * address, operation and word (which a PI or robust mutex's owner writes its thread id into); a
 * file lock's operation, and for fcntl the range of its struct flock; a semaphore's set, number
 * and operation. A word the read cannot take stays 0.
 */
static __always_inline void why_lock_of(struct ls_why_acc *w, struct ls_start *s)
{
	__u32 nr = s->nr;
	__u8 kind = nr < WHY_NR_SLOTS ? why_nr_lock[nr] : 0;
	w->lock_kind = kind;
	w->lock_addr = 0;
	w->lock_start = 0;
	w->lock_len = 0;
	w->lock_op = 0;
	w->lock_word = 0;
	if (kind == LS_LOCK_FUTEX || kind == LS_LOCK_FUTEXV) {
		__u64 addr = s->args[0];
		__u32 op = (__u32)s->args[1];
		if (kind == LS_LOCK_FUTEXV) {
			/* struct futex_waitv: val, uaddr, flags: the first futex of the vector */
			__u64 fw[3] = {};
			bpf_probe_read_user(fw, sizeof(fw), (void *)addr);
			addr = fw[1];
			op = (__u32)fw[2];
		}
		__u32 word = 0;
		bpf_probe_read_user(&word, sizeof(word), (void *)addr);
		w->lock_addr = addr;
		w->lock_op = op;
		w->lock_word = word;
		if ((addr & ~7ULL) != w->fx_waited[0]) {
			w->fx_waited[1] = w->fx_waited[0];
			w->fx_waited[0] = addr & ~7ULL;
		}
	} else if (kind == LS_LOCK_FLOCK) {
		w->lock_op = (__u32)s->args[1];
	} else if (kind == LS_LOCK_FCNTL) {
		__u32 cmd = (__u32)s->args[1];
		w->lock_op = cmd;
		/* F_GETLK, F_SETLK, F_SETLKW and the open file description ones take a struct flock */
		struct why_flock fl = {};
		if (((cmd >= 5 && cmd <= 7) || (cmd >= 36 && cmd <= 38)) &&
		    !bpf_probe_read_user(&fl, sizeof(fl), (void *)s->args[2])) {
			__s64 start = fl.start;
			if (fl.whence == 1 /* SEEK_CUR */ && s->pos >= 0)
				start += s->pos;
			w->lock_start = start;
			w->lock_len = fl.len;
			w->lock_word = (__u16)fl.type | (fl.whence == 2 /* SEEK_END */ ? 0x10000 : 0);
		}
	} else if (kind == LS_LOCK_SEM) {
		/* struct sembuf: sem_num, sem_op, sem_flg (the first of the call's operations) */
		__u16 sb[3] = {};
		w->lock_addr = s->args[0];
		if (!bpf_probe_read_user(sb, sizeof(sb), (void *)s->args[1])) {
			w->lock_start = sb[0];
			w->lock_op = (__u32)(__s32)(__s16)sb[1];
		}
	}
}

/* Whether `t`, the current task, is in the recording's set of threads: not latscope, and kept
 * by its pid, command-name and cgroup filter (the verdict cached for the CPU's current task). */
static __always_inline bool why_traced(struct task_struct *t)
{
	if (t->tgid == self_tgid)
		return false;
	__u32 zero = 0;
	struct ls_cpu *c = bpf_map_lookup_elem(&cpus, &zero);
	return c && task_wanted(t, c);
}

/* Of d ns a call ran on its CPU, those the hypervisor took: what the CPU's steal clock advanced
 * from `from` (0: not read) to `steal`, at most d. */
static __always_inline __u64 why_steal_in(__u64 d, __u64 from, __u64 steal)
{
	__u64 s = from && steal > from ? steal - from : 0;
	return s < d ? s : d;
}

/* For the probe crate's tests (BPF_PROG_TEST_RUN), never loaded by a recording: why_steal_in of
 * the inputs given, as the return value. */
struct ls_why_steal_case {
	__u64 d, from, steal;
};

SEC("syscall")
int ls_why_steal_test(struct ls_why_steal_case *c)
{
	return why_steal_in(c->d, c->from, c->steal);
}

/*
 * The call ran d ns on its CPU up to now, from when the CPU's steal clock read `from` (0: not
 * read) to `steal`. What the hypervisor took meanwhile (at most d) is run-queue time: its CPU was
 * runnable and waiting for one of the host's, and the kernel leaves it out of the thread's CPU
 * time too. It is kept as an interval at the end of the stretch, as the clock says how much was
 * taken, not when. The rest is on CPU.
 */
static __always_inline void why_ran(struct ls_why_acc *w, __u64 d, __u64 from, __u64 steal, __u64 now)
{
	__u64 s = why_steal_in(d, from, steal);
	w->part[LS_WHY_CPU] += d - s;
	if (s) {
		w->part[LS_WHY_RUNQ] += s;
		why_off(w, LS_WHY_RUNQ, now - s, now);
	}
}

/* w starts the accounting of the call that began at call_ts: every field of the call cleared
 * (what the task keeps across its calls stays). */
static __always_inline void why_reset(struct ls_why_acc *w, __u64 call_ts)
{
	for (int i = 0; i < LS_WHY_PARTS; i++)
		w->part[i] = 0;
	w->call_ts = call_ts;
	w->unseen_ipc = 0;
	w->best_wait = 0;
	w->best_runq = 0;
	w->wake_sector = 0;
	w->wake_dev = 0;
	w->wake_held = 0;
	w->wake_queue = 0;
	w->wake_device = 0;
	w->waker_tid = 0;
	w->waker_ctx = LS_WAKER_NONE;
	w->waker_comm[0] = 0;
	w->rq_tid = 0;
	w->rq_cpu = 0;
	w->kstack_due = 0;
	w->best_kstack = 0;
	w->best_kkey = 0;
	w->casc_ns = 0;
	w->casc_part = 0;
	w->best_fault = 0;
	w->bf_cur = 0;
	w->bf = (struct ls_vma_file){};
	w->casc_dev = 0;
	w->wait_start = 0;
	w->wait_end = 0;
	w->wake_flags = LS_WAKE_KNOWN;
	w->holder_tid = 0;
	w->waker_ustack = 0;
	w->off_n = 0;
	w->off_timer = 0;
}

/* prev leaves the CPU inside a traced call. `first`: its entry was just spilled (the first
 * switch out of this call), so its state starts here; first_steal: the steal clock at its entry.
 * The clock is read now only for a call's switch out (other tasks' switches pay nothing). */
static __always_inline void why_switch_out(struct task_struct *prev, struct task_struct *next,
					   bool preempt, struct ls_start *first, __u64 first_steal, __u64 now)
{
	struct ls_why_acc *w;
	__u64 since; /* when the task last ran into this call: its call's entry, or its switch in */
	if (first) {
		w = bpf_task_storage_get(&whys, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!w)
			return;
		since = first->ts;
		why_reset(w, first->ts);
		w->nr = first->nr;
		w->fd_type = first->fd_type;
		why_lock_of(w, first);
		why_ran(w, now > first->ts ? now - first->ts : 0, first_steal, steal_clock(false, prev), now);
	} else {
		if (why_kthread_io_wait(prev, preempt, now))
			return;
		w = bpf_task_storage_get(&whys, prev, 0, 0);
		if (!w || !w->call_ts || w->state != WHY_RUN)
			return;
		why_ran(w, now - w->mark, w->steal_mark, steal_clock(false, prev), now);
		since = w->mark;
	}
	w->mark = now;
	long task_state = why_task_state(prev);
	if (preempt || task_state == 0 /* TASK_RUNNING */) {
		w->state = WHY_RUNNABLE;
		w->pend_tid = next->pid;
		w->pend_cpu = bpf_get_smp_processor_id();
		return;
	}
	__u64 early = *(volatile __u64 *)&w->early_ts;
	if ((task_state & WHY_TASK_WAKING) || (early >= since && now - early < WHY_EARLY_NS)) {
		/* Woken already: a wake-up on another CPU came between the task's dequeue and this
		 * switch out (it claimed the task, or its program ran just before, while the task ran
		 * towards this switch: a wake-up finds a task in a sleeping state only), and its
		 * program found the task not yet blocked. What follows is time waiting for a CPU, not
		 * blocked time with no known waker; the wake-up, kept then, names the waker (a wait
		 * of no length), unless a longer wait of the call has one. */
		w->state = WHY_RUNNABLE;
		w->pend_tid = 0;
		if (early >= w->call_ts && w->best_wait == 0 && w->waker_ctx == LS_WAKER_NONE) {
			w->wait_start = now;
			w->wait_end = now;
			w->waker_ctx = w->early_ctx;
			w->waker_tid = w->early_tid;
			__builtin_memcpy(w->waker_comm, w->early_comm, LS_COMM_LEN);
			w->wake_flags = LS_WAKE_KNOWN | w->early_flags;
		}
		return;
	}
	w->state = WHY_BLOCKED;
	w->pend_tid = 0;
	if (w->fx_held)
		why_fx_mark(w, prev, 1);
	__u8 hint = 0;
	if (BPF_CORE_READ_BITFIELD(prev, in_iowait))
		hint = WHY_HINT_IOWAIT;
	/* Inside the call's last page fault: the task's fault count is still the one at its start
	 * (a buffered read's I/O waits after a minor fault of its copy are not the fault's). */
	if (hint && w->fault_call == w->call_ts && prev->min_flt + prev->maj_flt == w->flt_cnt)
		hint |= WHY_HINT_FAULT;
	w->hint = hint;
	/* The file mapped at the fault's address, looked up once per fault and only for a fault
	 * that waits for I/O (a major fault): not at the fault itself, where most faults are minor
	 * and the look-up (the mm's lock, and its release deferred to an irq_work with interrupts
	 * off) costs about 5 us each. prev is the current task here. */
	if ((hint & WHY_HINT_FAULT) && !w->flt_looked) {
		w->flt_looked = 1;
		/* (on the stack: bpf_find_vma takes its callback's data there) */
		struct ls_vma_file f = { .addr = w->flt.addr };
		vma_file(&f);
		w->flt = f;
	}
}

/*
 * w's blocked interval ended without a wake-up the programs saw: runnable time is in d too (the
 * wake-up's time is not known). The cause is the call's own; the waker is not known. t: w's task.
 */
static __always_inline void why_unseen_end(struct ls_why_acc *w, struct task_struct *t, __u64 d, __u64 now)
{
	STAT_INC(wakeups_unseen);
	__u32 cause = why_cause(w->hint, w->nr, w->fd_type, WHY_WAKE_UNSEEN);
	why_blocked_end(w, cause, d, now, 0, true);
	if (cause == LS_WHY_IPC)
		w->unseen_ipc += d;
	if (w->fx_held)
		why_fx_mark(w, t, 0);
	if (d >= w->best_wait) {
		/* The longest wait so far: no waker, no request, its stack (as a wake-up does). */
		w->best_wait = d;
		w->wait_start = w->mark;
		w->wait_end = now;
		w->wake_flags = LS_WAKE_KNOWN;
		w->holder_tid = 0;
		w->waker_ustack = 0;
		w->casc_dev = 0;
		w->kstack_due = why_stacks && d >= why_min;
		w->waker_ctx = LS_WAKER_NONE;
		w->waker_tid = 0;
		w->waker_comm[0] = 0;
		w->casc_ns = 0;
		w->casc_part = 0;
		w->wake_dev = 0;
		w->wake_sector = 0;
	}
}

/* next takes the CPU from prev: a runnable interval (run-queue delay) ends. The steal clock is
 * read through prev, the task still running on this CPU. */
static __always_inline void why_switch_in(struct task_struct *prev, struct task_struct *next, __u64 now)
{
	struct ls_why_acc *w = bpf_task_storage_get(&whys, next, 0, 0);
	if (!w)
		return;
	if (w->kio) {
		/* A kernel thread's I/O wait whose wake-up was not seen ends here at the latest. */
		w->kio = 0;
		why_blocked_end(w, LS_WHY_IO, 0, now, 0, false);
		return;
	}
	if (!w->call_ts || w->state == WHY_RUN)
		return;
	__u64 d = now - w->mark;
	if (w->state == WHY_RUNNABLE) {
		w->part[LS_WHY_RUNQ] += d;
		why_off(w, LS_WHY_RUNQ, w->mark, now);
		/* Who held the CPU: the thread that preempted it, or, after a wake-up, the one it
		 * takes the CPU from now (none when the CPU was idle: a wake-up's own latency). */
		__u32 tid = w->pend_tid, cpu = w->pend_cpu;
		if (!tid) {
			tid = prev->pid;
			cpu = bpf_get_smp_processor_id();
		}
		if (tid && d > w->best_runq) {
			w->best_runq = d;
			w->rq_tid = tid;
			w->rq_cpu = cpu;
		}
	} else {
		/* Woken without a wake-up the programs saw (its program found task storage in use on
		 * its CPU, or ran on another CPU before this thread's switch out was recorded). */
		why_unseen_end(w, next, d, now);
	}
	w->mark = now;
	w->steal_mark = steal_clock(false, prev);
	w->state = WHY_RUN;
	/* The kernel stack is taken here, where the blocked interval's length is known (a walk of
	 * the unwinder, the dearest thing the programs do), and only for the interval whose waker
	 * is kept, and not below the --why-above threshold: the task is still where it blocked. */
	if (w->kstack_due) {
		w->kstack_due = 0;
		w->best_kstack = why_task_kstack(next, &w->best_kkey);
	}
}

static __always_inline void why_sched_switch(void *ctx, bool preempt, struct task_struct *prev,
					     struct task_struct *next, struct ls_start *first, __u64 first_steal)
{
	__u64 now = bpf_ktime_get_ns();
	/* A completion in the task switched out: its call chain is over. */
	struct ls_why_cpu *wc = why_cpu();
	if (wc && !wc->softirq && !wc->hardirq)
		wc->rq_ts = 0;
	why_switch_out(prev, next, preempt, first, first_steal, now);
	why_switch_in(prev, next, now);
}

/*
 * One level of cascade (wPerf's): the waker `cur` ends w's blocked interval [w->mark, now]; of
 * the blocked intervals cur remembers (those of its own traced calls), the time inside that
 * interval by part, and the part with the most is kept: "lock, woken by the holder, which was in
 * block I/O meanwhile". Costs a task-storage lookup of the waker, only for wake-ups of a traced
 * call by a thread that end its longest wait so far.
 */
static __always_inline void why_cascade(struct ls_why_acc *w, struct task_struct *cur, __u64 now)
{
	w->casc_ns = 0;
	w->casc_part = 0;
	struct ls_why_acc *hw = bpf_task_storage_get(&whys, cur, 0, 0);
	if (!hw)
		return;
	/* The ring is in the order the intervals ended: when the newest ended before the wait
	 * began, none overlaps it (a ping-pong's waker, woken before its wakee blocked). */
	if (hw->hist_end[(hw->hist_pos - 1) & (WHY_HIST - 1)] <= w->mark)
		return;
	__u64 by_part[LS_WHY_PARTS] = {};
	__u64 from = w->mark, io_max = 0;
	w->casc_dev = 0;
	for (int i = 0; i < WHY_HIST; i++) {
		__u64 s = hw->hist_start[i] > from ? hw->hist_start[i] : from;
		__u64 e = hw->hist_end[i] < now ? hw->hist_end[i] : now;
		__u32 p = hw->hist_part[i];
		if (e > s && p < LS_WHY_PARTS)
			by_part[p] += e - s;
		if (e > s && p == LS_WHY_IO && e - s > io_max) {
			io_max = e - s;
			w->casc_dev = hw->hist_dev[i];
		}
	}
	for (int p = 0; p < LS_WHY_PARTS; p++) {
		if (by_part[p] > w->casc_ns) {
			w->casc_ns = by_part[p];
			w->casc_part = p;
		}
	}
}

/* Whether one of t's last two futex waits was on the futex at addr (8-byte word): a thread that
 * waits for a futex and wakes its waiters passes it on, as the thread last woken on it does (a
 * GIL taken after a timed-out wait, then a wait for its mutex, without a wake-up on the GIL, is
 * passed on by a thread not last woken on it). */
static __always_inline bool why_waits_on(struct task_struct *t, __u64 addr)
{
	struct ls_why_acc *tw = bpf_task_storage_get(&whys, t, 0, 0);
	return tw && (tw->fx_waited[0] == addr || tw->fx_waited[1] == addr);
}

/*
 * The futex wait of `w` (thread p) ends by `by`: a task's wake-up makes p the futex's holder
 * (counting a hand-off when the waker was the holder); a timer's ends a wait for the holder when
 * the futex is handed off (see why_fxs) and its holder is another thread, not blocked: true, with
 * the holder in *holder. When the thread last handed it is blocked (waiting for it again, or in
 * I/O having dropped it), or is p itself, another thread took it since without a system call
 * (CPython's GIL, taken by a thread back from I/O that found it free; a mutex's fast path): held
 * too, by a thread not seen (*holder 0; user space names it from the next release). A timeout on
 * a futex passed from hand to hand means nobody released it for that long: contention either way.
 */
static __always_inline bool why_fx_wake(struct ls_why_acc *w, struct task_struct *p, enum why_wake by,
					__u32 *holder, __u64 comm[2])
{
	struct why_fx_key k = { .addr = w->lock_addr & ~7ULL, .tgid = p->tgid };
	struct why_fx *v = bpf_map_lookup_elem(&why_fxs, &k);
	if (by == WHY_WAKE_TASK) {
		struct task_struct *cur = bpf_get_current_task_btf();
		if (v) {
			v->wakes++;
			if (v->holder == cur->pid || why_waits_on(cur, k.addr))
				v->handoffs++;
			v->holder = p->pid;
			v->blocked = 0;
			task_comm(p, v->comm);
		} else {
			struct why_fx n = { .holder = p->pid, .wakes = 1 };
			task_comm(p, n.comm);
			bpf_map_update_elem(&why_fxs, &k, &n, BPF_ANY);
		}
		w->fx_held = k.addr;
		return false;
	}
	if (by != WHY_WAKE_TIMER || !v || !v->holder || v->wakes < 2 || v->handoffs * 4 < v->wakes)
		return false;
	if (v->holder == p->pid || v->blocked) {
		*holder = 0;
		comm[0] = 0;
		comm[1] = 0;
		return true;
	}
	*holder = v->holder;
	comm[0] = v->comm[0];
	comm[1] = v->comm[1];
	return true;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(ls_why_waking, struct task_struct *p)
{
	struct ls_why_acc *w = bpf_task_storage_get(&whys, p, 0, 0);
	if (!w)
		return 0;
	struct ls_why_cpu *wc = why_cpu();
	if (!wc)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	/* A block request's completion on this CPU just before: this wake-up is its. */
	bool rq_recent = why_rq_recent(wc, now);
	if (w->kio) {
		/* A kernel thread's I/O wait is over: remembered, for the cascade, with its device. */
		w->kio = 0;
		why_blocked_end(w, LS_WHY_IO, 0, now, rq_recent ? wc->rq_dev : 0, false);
		return 0;
	}
	if (!w->call_ts || w->state != WHY_BLOCKED) {
		/* Not recorded as blocked: the task may be between its dequeue and its switch out on
		 * another CPU (that switch out finds it woken), or not block at all. Its waker is kept
		 * for the former. */
		w->early_ts = now;
		if (wc->timer) {
			w->early_ctx = LS_WAKER_TIMER;
			w->early_tid = 0;
			w->early_flags = 0;
		} else if (wc->softirq) {
			w->early_ctx = LS_WAKER_SOFTIRQ;
			w->early_tid = wc->softirq - 1;
			w->early_flags = 0;
		} else {
			struct task_struct *cur = bpf_get_current_task_btf();
			w->early_ctx = LS_WAKER_TASK;
			w->early_tid = cur->pid;
			task_comm(cur, (__u64 *)w->early_comm);
			w->early_flags = (cur->flags & WHY_PF_KTHREAD) ? LS_WAKE_KTHREAD
					 : why_traced(cur)		? LS_WAKE_TRACED
									: 0;
		}
		return 0;
	}
	if (w->fx_held)
		why_fx_mark(w, p, 0);
	__u64 d = now - w->mark;
	enum why_wake by = WHY_WAKE_TASK;
	if (wc->timer)
		by = WHY_WAKE_TIMER;
	else if (wc->softirq == WHY_NET_RX_SOFTIRQ + 1)
		by = WHY_WAKE_NET_RX;
	__u32 cause = why_cause(w->hint, w->nr, w->fd_type, by);
	/* A futex wait its timeout ended while another thread held the futex is lock time. */
	__u32 holder = 0;
	__u64 holder_comm[2] = {};
	bool held = false;
	if (w->lock_kind == LS_LOCK_FUTEX && (cause == LS_WHY_LOCK || cause == LS_WHY_TIMER)) {
		held = why_fx_wake(w, p, by, &holder, holder_comm);
		if (held)
			cause = LS_WHY_LOCK;
	}
	bool by_rq = (cause == LS_WHY_IO || cause == LS_WHY_FAULT) && rq_recent;
	why_blocked_end(w, cause, d, now, by_rq ? wc->rq_dev : 0, false);
	/* A block request's completion ended an I/O wait: the wait split into the time before the
	 * request existed (its bio held by cgroup I/O throttling or a plug, or not yet submitted),
	 * its time queued and on the device, each clipped to the wait (a readahead request queued
	 * before it adds only what it spent queued during it), so that the three add up to the
	 * wait; summed over the call's I/O waits. */
	if (by_rq) {
		__u64 from = w->mark, ins = wc->rq_start, iss = wc->rq_start + wc->rq_queue;
		__u64 qs = ins > from ? ins : from, ds = iss > from ? iss : from;
		w->wake_held += ins > from ? ins - from : 0;
		w->wake_queue += iss > qs ? iss - qs : 0;
		w->wake_device += now > ds ? now - ds : 0;
	}
	if (d >= w->best_wait) {
		w->best_wait = d;
		w->wait_start = w->mark;
		w->wait_end = now;
		w->holder_tid = holder;
		w->waker_ustack = 0;
		__u8 flags = LS_WAKE_KNOWN | (held ? LS_WAKE_HELD : 0);
		/* Its kernel stack, at the switch in (only intervals of --why-above or longer). */
		w->kstack_due = why_stacks && d >= why_min;
		if (wc->timer) {
			/* A timer has no name: with LS_WAKE_HELD, the comm is the futex holder's. */
			w->waker_ctx = LS_WAKER_TIMER;
			w->waker_tid = 0;
			__builtin_memcpy(w->waker_comm, holder_comm, LS_COMM_LEN);
		} else if (wc->softirq == WHY_NET_RX_SOFTIRQ + 1 && wc->net_tid) {
			/* Packets a task sent on this machine (loopback, veth): the sender woke it. */
			struct task_struct *cur = bpf_get_current_task_btf();
			w->waker_ctx = LS_WAKER_TASK;
			w->waker_tid = wc->net_tid;
			__builtin_memcpy(w->waker_comm, wc->net_comm, LS_COMM_LEN);
			w->casc_ns = 0;
			w->casc_part = 0;
			w->casc_dev = 0;
			if (wc->net_traced)
				flags |= LS_WAKE_TRACED;
			if (cur->pid == wc->net_tid)
				why_cascade(w, cur, now);
		} else if (wc->softirq) {
			w->waker_ctx = LS_WAKER_SOFTIRQ;
			w->waker_tid = wc->softirq - 1;
			w->waker_comm[0] = 0;
		} else {
			struct task_struct *cur = bpf_get_current_task_btf();
			w->waker_ctx = LS_WAKER_TASK;
			w->waker_tid = cur->pid;
			task_comm(cur, (__u64 *)w->waker_comm);
			if (cur->flags & WHY_PF_KTHREAD)
				flags |= LS_WAKE_KTHREAD;
			else if (why_traced(cur))
				flags |= LS_WAKE_TRACED;
			why_cascade(w, cur, now);
			/* Where the waker was when it ended the wait (a lock's release), with stacks. */
			if (w->kstack_due && !(cur->flags & WHY_PF_KTHREAD))
				w->waker_ustack = why_user_stack(ctx, cur, &w->waker_ukey);
		}
		w->wake_flags = flags;
		if (w->waker_ctx != LS_WAKER_TASK) {
			w->casc_ns = 0;
			w->casc_part = 0;
			w->casc_dev = 0;
		}
		if (by_rq) {
			w->wake_dev = wc->rq_dev;
			w->wake_sector = wc->rq_sector;
		} else {
			w->wake_dev = 0;
			w->wake_sector = 0;
		}
	}
	w->mark = now;
	w->state = WHY_RUNNABLE;
	w->pend_tid = 0;
	return 0;
}

/* A page fault in kernel mode (a copy from or to user memory) inside a traced call: its I/O
 * waits are the fault's. No tracepoint marks the fault's end; the kernel counts the fault in the
 * task's min_flt or maj_flt when it is done (a fault it retries after waiting, when the retry is
 * done): an I/O wait while the count is still the one taken here is inside it. */
SEC("tp_btf/page_fault_kernel")
int BPF_PROG(ls_why_fault, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	struct task_struct *task = bpf_get_current_task_btf();
	/* A fault with page faults disabled fails at once, reading nothing from disk: a probe's
	 * read of user memory (the user stack walk at the call's exit), a copy that is retried. */
	if (task->pagefault_disabled)
		return 0;
	__u32 zero = 0;
	struct ls_cpu *c = bpf_map_lookup_elem(&cpus, &zero);
	if (!c)
		return 0;
	__u64 call_ts = 0;
	if (c->task == (__u64)task) {
		call_ts = c->st.ts;
	} else {
		struct ls_start *s = bpf_task_storage_get(&starts, task, 0, 0);
		if (s)
			call_ts = s->ts;
	}
	if (!call_ts)
		return 0;
	struct ls_why_acc *w = bpf_task_storage_get(&whys, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!w)
		return 0;
	/* The previous fault of the call, if its wait is the longest so far, is kept. */
	if (w->bf_cur && w->fault_call == call_ts) {
		w->bf_cur = 0;
		w->bf = w->flt;
	}
	w->fault_call = call_ts;
	w->flt_cnt = task->min_flt + task->maj_flt;
	/* Its file is looked up if it waits for I/O (why_switch_out). */
	w->flt.addr = address;
	w->flt.ino = 0;
	w->flt_looked = 0;
	return 0;
}

/* The programs ls_why_<prog>_in and _out, on the tracepoints <tp>_entry and <tp>_exit: they
 * raise and lower the depth `field` of this CPU's struct ls_why_cpu. */
#define WHY_DEPTH_PROGS(prog, tp, field)                \
	SEC("tp_btf/" #tp "_entry")                     \
	int BPF_PROG(ls_why_##prog##_in)                \
	{                                               \
		struct ls_why_cpu *wc = why_cpu();      \
		if (wc)                                 \
			wc->field++;                    \
		return 0;                               \
	}                                               \
	SEC("tp_btf/" #tp "_exit")                      \
	int BPF_PROG(ls_why_##prog##_out)               \
	{                                               \
		struct ls_why_cpu *wc = why_cpu();      \
		if (wc && wc->field)                    \
			wc->field--;                    \
		return 0;                               \
	}

WHY_DEPTH_PROGS(hrtimer, hrtimer_expire, timer)
WHY_DEPTH_PROGS(timer, timer_expire, timer)

SEC("tp_btf/softirq_entry")
int BPF_PROG(ls_why_softirq_in, unsigned int vec)
{
	struct ls_why_cpu *wc = why_cpu();
	if (wc)
		wc->softirq = vec + 1;
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(ls_why_softirq_out, unsigned int vec)
{
	struct ls_why_cpu *wc = why_cpu();
	if (wc) {
		wc->softirq = 0;
		/* A completion inside this softirq: its call chain is over. */
		if (wc->rq_ctx & 0xffff)
			wc->rq_ts = 0;
		if (vec == WHY_NET_RX_SOFTIRQ)
			wc->net_tid = 0;
	}
	return 0;
}

/*
 * Who queued the packets the net_rx softirq will process: a task that raises it outside
 * interrupts sent them on this machine (loopback, veth: the receiver's waker is that sender);
 * raised by a device's interrupt, they came from the network (the waker stays the softirq).
 */
SEC("tp_btf/softirq_raise")
int BPF_PROG(ls_why_softirq_raise, unsigned int vec)
{
	if (vec != WHY_NET_RX_SOFTIRQ)
		return 0;
	struct ls_why_cpu *wc = why_cpu();
	if (!wc)
		return 0;
	struct task_struct *cur = bpf_get_current_task_btf();
	if (wc->hardirq || !cur->pid) {
		wc->net_tid = 0;
	} else if (!wc->softirq) {
		wc->net_tid = cur->pid;
		task_comm(cur, (__u64 *)wc->net_comm);
		wc->net_traced = why_traced(cur);
	}
	return 0;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(ls_why_irq_in)
{
	struct ls_why_cpu *wc = why_cpu();
	if (wc)
		wc->hardirq++;
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(ls_why_irq_out)
{
	struct ls_why_cpu *wc = why_cpu();
	if (!wc)
		return 0;
	/* A completion inside this handler: its call chain is over. */
	if ((wc->rq_ctx >> 16) >= wc->hardirq)
		wc->rq_ts = 0;
	if (wc->hardirq)
		wc->hardirq--;
	return 0;
}

/* A block request completed on this CPU: the wake-up that follows in the same call chain is its.
 * `start`: when it was inserted (or issued, when it went straight to the driver); `queue`,
 * `device`: its time queued and on the device (ns). */
static __always_inline void why_rq_done(__u32 dev, __u64 sector, __u64 start, __u64 queue, __u64 device)
{
	struct ls_why_cpu *wc = why_cpu();
	if (!wc)
		return;
	wc->rq_ts = bpf_ktime_get_ns();
	wc->rq_ctx = why_rq_ctx(wc);
	wc->rq_pid = (__u32)bpf_get_current_pid_tgid();
	wc->rq_dev = dev;
	wc->rq_sector = sector;
	wc->rq_start = start;
	wc->rq_queue = queue;
	wc->rq_device = device;
}

/* What carries a call's attribution in its event (see why_close); the low bits are the event's
 * `ext` (enum ls_ext_bits). */
enum why_rec {
	WHY_REC_NONE = 0,                   /* nothing: not recorded with attribution, or below --why-above */
	WHY_REC_FULL = LS_EXT_WHY,          /* a struct ls_why from the task's closed accumulator */
	WHY_REC_CPU = LS_EXT_WHY_CPU,       /* it ran on its CPU throughout: no struct ls_why follows */
	WHY_REC_UNKNOWN = LS_EXT_WHY | 4,   /* a struct ls_why of unknown parts: the accumulator was not kept */
	WHY_REC_EXT = LS_EXT_WHY | LS_EXT_WHY_CPU,
};

/*
 * A call that never left its CPU, at its exit: on CPU throughout (WHY_REC_CPU: its event carries
 * no parts), unless the hypervisor's steal clock advanced since its entry (the CPU's st_steal:
 * no other task has run here since). Then the call's state starts and ends here, its time split
 * by why_ran, and the event carries it.
 */
static __always_inline __u8 why_stolen_in(const bool fast, struct task_struct *task, __u64 call_ts, __u64 now,
					  __u64 lat)
{
	if (!steal_off)
		return WHY_REC_CPU;
	__u64 steal = steal_clock(fast, task);
	if (!steal)
		return WHY_REC_CPU;
	__u32 zero = 0;
	struct ls_cpu *c = bpf_map_lookup_elem(&cpus, &zero);
	__u64 entry_steal = c ? c->st_steal : 0;
	if (!entry_steal || steal <= entry_steal)
		return WHY_REC_CPU;
	struct ls_why_acc *w = bpf_task_storage_get(&whys, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!w)
		return WHY_REC_CPU;
	why_reset(w, call_ts);
	w->lock_kind = 0;
	w->lock_addr = 0;
	w->lock_start = 0;
	w->lock_len = 0;
	w->lock_op = 0;
	w->lock_word = 0;
	why_ran(w, lat, entry_steal, steal, now);
	w->call_ts = 0;
	w->ustack = 0;
	w->ukey = 0;
	return WHY_REC_FULL;
}

/* why_stolen_in as a global function, for the variant of the exit program for kernels before
 * 6.2: checked once, on its own. Inline, its code made the verifier of Linux 6.1 lose the bound
 * of a length on another path of that program (the path copy). Only where it can run: with
 * attribution and a steal clock (read-only data, so the verifier skips the rest otherwise). */
__noinline int why_stolen_now(__u64 call_ts, __u64 now, __u64 lat)
{
	if (!why_mode || !steal_off)
		return WHY_REC_CPU;
	return why_stolen_in(false, bpf_get_current_task_btf(), call_ts, now, lat);
}

static __always_inline __u8 why_stolen(const bool fast, struct task_struct *task, __u64 call_ts, __u64 now,
				       __u64 lat)
{
	if (!steal_off)
		return WHY_REC_CPU;
	if (fast)
		return why_stolen_in(true, task, call_ts, now, lat);
	return why_stolen_now(call_ts, now, lat);
}

/*
 * At the call's exit: the call's attribution closed (its state ended, whether or not an event
 * follows), and what its event carries (enum why_rec). `spilled`: the entry came from task
 * storage (the call was switched out); otherwise it ran on its CPU throughout, and its event says
 * so in a bit (the record of a call that never blocked stays as small as without attribution).
 * A kept call that spent time off its CPU other than waiting for one gets its user stack (user
 * registers are those of its entry); a call that never blocked has no blocked time for a stack to
 * carry, which keeps short calls as cheap as without stacks. The parts and the stack stay in the
 * task's storage for why_fill, which reads them straight into the event (nothing changes them
 * meanwhile: its call_ts is 0), rather than in registers or the program's stack, where the
 * verifier of older kernels follows each value across the exit's branches: Linux 5.15 explored
 * past its limit of 1 M instructions. A call not spilled that the hypervisor took time from
 * gets a breakdown of its own (why_stolen).
 */
static __always_inline __u8 why_close(const bool fast, void *ctx, struct task_struct *task, bool spilled,
				      __u64 call_ts, __u64 now, __u64 lat, long ret)
{
	if (!spilled) {
		if (lat < why_min)
			return WHY_REC_NONE;
		return why_stolen(fast, task, call_ts, now, lat);
	}
	struct ls_why_acc *w = bpf_task_storage_get(&whys, task, 0, 0);
	if (!w)
		return lat < why_min ? WHY_REC_NONE : WHY_REC_UNKNOWN;
	__u8 rec = WHY_REC_UNKNOWN;
	if (w->call_ts == call_ts) {
		__u64 d = now - w->mark;
		/* Not running: the kernel did not report the thread's switch back onto a CPU (some
		 * kernels skip the tracepoint for a few switches in a thousand), and with it, mostly,
		 * the wake-up. Runnable time then (and the little it ran since), or a wait ended by a
		 * wake-up not seen; its kernel stack, read at that switch, is gone. */
		if (w->state == WHY_RUN)
			why_ran(w, d, w->steal_mark, steal_clock(fast, task), now);
		else if (w->state == WHY_RUNNABLE) {
			w->part[LS_WHY_RUNQ] += d;
			why_off(w, LS_WHY_RUNQ, w->mark, now);
		} else
			why_unseen_end(w, task, d, now);
		/* A poll that timed out waited for its timer, whether or not its wake-up was seen. */
		__u32 nr = w->nr;
		if (ret == 0 && w->unseen_ipc && nr < WHY_NR_SLOTS && (why_nr_part[nr] & WHY_NR_TIMEOUT0)) {
			__u64 u = w->unseen_ipc < w->part[LS_WHY_IPC] ? w->unseen_ipc : w->part[LS_WHY_IPC];
			w->part[LS_WHY_IPC] -= u;
			w->part[LS_WHY_TIMER] += u;
			w->off_timer = 1;
			if (w->waker_ctx == LS_WAKER_NONE && w->best_wait)
				w->waker_ctx = LS_WAKER_TIMER;
		}
		if (w->kstack_due) {
			w->kstack_due = 0;
			w->best_kstack = -ESRCH;
		}
		w->call_ts = 0;
		rec = WHY_REC_FULL;
	}
	w->ustack = 0;
	w->ukey = 0;
	if (lat < why_min)
		return WHY_REC_NONE;
	if (why_stacks && (rec == WHY_REC_UNKNOWN || w->part[LS_WHY_CPU] + w->part[LS_WHY_RUNQ] < lat)) {
		w->ustack = why_user_stack(ctx, task, &w->ukey);
		if (why_ucopy && w->ustack > 0) {
			/* sys_exit's first argument: the registers of the call's entry from user space. */
			struct pt_regs *r = (struct pt_regs *)((__u64 *)ctx)[0];
			__u64 sp = BPF_CORE_READ(r, sp);
			if ((w->ucopy_key != w->ukey || w->ucopy_sp != sp) &&
			    why_copy_ustack((__u64)task->tgid << 32 | task->pid, w->ukey, BPF_CORE_READ(r, ip), sp,
					    BPF_CORE_READ(r, bp))) {
				w->ucopy_key = w->ukey;
				w->ucopy_sp = sp;
			}
		}
		/* The frames are still in the CPU's stack buffer (why_user_stack's). */
		__u32 one = 1;
		struct ls_stack *b = w->ustack > 0 ? bpf_map_lookup_elem(&why_sbuf, &one) : NULL;
		__u32 tid = task->pid;
		if (b && !bpf_map_update_elem(&why_lastu, &tid, b, BPF_ANY))
			w->last_ukey = w->ukey;
	}
	return rec;
}

/*
 * The current thread is about to exit its process or exec: its last user stack would lose its
 * names with the process's mappings if the recorder has not read them yet (a program that exits
 * right after its slow call always wins that race). Each frame is named here as the file mapped
 * at it (inode, device, offset), for the recorder to name by the file instead (Linux 5.17 and
 * later: bpf_find_vma). Called from the entry of exit_group and execve(at) (sys_enter): a
 * program of its own on those syscalls' tracepoints would add the kernel's per-syscall perf
 * dispatch to every syscall of every task (about 70 ns each here).
 */
struct ufiles_walk {
	struct ls_stack *last;
	struct ls_ufiles *u;
};

/* Frame i of the thread's last user stack named as a file (bpf_loop's callback). */
static long keep_ufile(__u64 i, void *data)
{
	struct ufiles_walk *x = data;
	if (i >= LS_STACK_DEPTH)
		return 1;
	struct ls_ufiles *u = x->u;
	u->ino[i] = 0;
	u->off[i] = 0;
	u->dev[i] = 0;
	__u64 ip = x->last->ip[i];
	if (!ip)
		return 0;
	/* A return address is in code: a frame in a data file (a locale archive) is the
	 * frame-pointer walk following data. */
	struct ls_vma_file f = { .addr = ip };
	if (vma_file(&f) && f.exec) {
		u->ino[i] = f.ino;
		u->off[i] = f.off;
		u->dev[i] = f.dev;
	}
	return 0;
}

static __always_inline int why_keep_ufiles(void)
{
	if (!why_stacks || !bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_find_vma))
		return 0;
	struct task_struct *t = bpf_get_current_task_btf();
	struct ls_why_acc *w = bpf_task_storage_get(&whys, t, 0, 0);
	if (!w)
		return 0;
	__u32 zero = 0;
	struct ls_ufiles *u = bpf_map_lookup_elem(&why_ufbuf, &zero);
	if (!u)
		return 0;
	__u64 key = w->last_ukey;
	w->last_ukey = 0;
	__u32 tid = t->pid;
	struct ls_stack *last = key ? bpf_map_lookup_elem(&why_lastu, &tid) : NULL;
	if (!last)
		return 0;
	/* In bpf_loop (as old as bpf_find_vma): the verifier checks the frame's look-up once, where
	 * an unrolled loop made it check each of the 64 (85 k instructions, most of the start). */
	struct ufiles_walk walk = { .last = last, .u = u };
	bpf_loop(LS_STACK_DEPTH, keep_ufile, &walk, 0);
	bpf_map_update_elem(&why_ufiles, &key, u, BPF_ANY);
	bpf_map_delete_elem(&why_lastu, &tid);
	return 0;
}

/* The event's struct ls_why (rec: WHY_REC_FULL or WHY_REC_UNKNOWN, see why_close). */
static __always_inline void why_fill(struct ls_why *o, struct task_struct *task, __u8 rec, __u64 lat)
{
	struct ls_why_acc *w = bpf_task_storage_get(&whys, task, 0, 0);
	if (!w || rec != WHY_REC_FULL) {
		__builtin_memset(o, 0, sizeof(*o));
		o->wake_flags = LS_WAKE_KNOWN;
		o->part[LS_WHY_UNKNOWN] = lat;
		if (w) {
			o->ustack = w->ustack;
			o->ustack_key = w->ukey;
		}
		return;
	}
	/* Every field written once (no clearing first: the record is read by user space as it is). */
	o->ustack = w->ustack;
	o->ustack_key = w->ukey;
	o->pad = 0;
	__builtin_memset(o->pad2, 0, sizeof(o->pad2));
	o->pad3 = 0;
	__builtin_memset(o->pad4, 0, sizeof(o->pad4));
	__u64 sum = 0;
	for (int i = 0; i < LS_WHY_PARTS; i++) {
		o->part[i] = w->part[i];
		sum += w->part[i];
	}
	if (sum < lat)
		o->part[LS_WHY_UNKNOWN] += lat - sum;
	o->wake_sector = w->wake_sector;
	o->wake_dev = w->wake_dev;
	o->waker_tid = w->waker_tid;
	o->waker_ctx = w->waker_ctx;
	__builtin_memcpy(o->waker_comm, w->waker_comm, LS_COMM_LEN);
	o->rq_tid = w->rq_tid;
	o->rq_cpu = w->rq_cpu;
	o->kstack = w->best_kstack;
	o->kstack_key = w->best_kstack > 0 ? w->best_kkey : 0;
	o->waker_wait_ns = w->casc_ns;
	o->waker_wait_part = w->casc_part;
	o->wake_held_ns = w->wake_held;
	o->wake_queue_ns = w->wake_queue;
	o->wake_device_ns = w->wake_device;
	struct ls_vma_file *f = w->bf_cur ? &w->flt : &w->bf;
	o->fault_addr = f->addr;
	o->fault_ino = f->ino;
	o->fault_off = f->off;
	o->fault_dev = f->dev;
	o->wait_start = w->wait_start;
	o->wait_end = w->wait_end;
	o->wake_flags = w->wake_flags;
	o->holder_tid = w->holder_tid;
	o->waker_ustack = w->waker_ustack;
	o->waker_ustack_key = w->waker_ukey;
	o->waker_wait_dev = w->casc_dev;
	o->lock_kind = w->lock_kind;
	o->lock_addr = w->lock_addr;
	o->lock_start = w->lock_start;
	o->lock_len = w->lock_len;
	o->lock_op = w->lock_op;
	o->lock_word = w->lock_word;
	__builtin_memcpy(o->off_start, w->off_start, sizeof(o->off_start));
	__builtin_memcpy(o->off_end, w->off_end, sizeof(o->off_end));
	__builtin_memcpy(o->off_part, w->off_part, sizeof(o->off_part));
	o->off_n = w->off_n;
	o->off_timer = w->off_timer;
	__builtin_memset(o->pad5, 0, sizeof(o->pad5));
}

#endif
