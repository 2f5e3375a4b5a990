//! The Parquet tables: their columns, types and meaning (docs/EXPORT.md prints the same).

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

/// One column of an exported table, with what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnDoc {
    /// Column name.
    pub name: &'static str,
    /// Parquet type as SQL engines show it (`BIGINT`, `VARCHAR`, `TIMESTAMP WITH TIME ZONE`, ...).
    pub sql_type: &'static str,
    /// Meaning and unit.
    pub meaning: &'static str,
    /// Whether the column may hold NULL.
    pub nullable: bool,
}

const fn col(name: &'static str, sql_type: &'static str, meaning: &'static str) -> ColumnDoc {
    ColumnDoc { name, sql_type, meaning, nullable: false }
}

/// A column that may hold NULL.
const fn ncol(name: &'static str, sql_type: &'static str, meaning: &'static str) -> ColumnDoc {
    ColumnDoc { name, sql_type, meaning, nullable: true }
}

const TS: &str = "TIMESTAMP WITH TIME ZONE";
const STR: &str = "VARCHAR";
const I64: &str = "BIGINT";
const I32: &str = "INTEGER";

/// The columns of the events table, in file order.
pub const EVENT_COLUMNS: &[ColumnDoc] = &[
    col("host", STR, "host name of the recorded machine (the trace header's, or the export's `--host`)"),
    col("time", TS, "start of the event, wall clock, UTC, microseconds (syscall entry, block request issue, process event)"),
    col("time_ns", I64, "the same instant in nanoseconds since the Unix epoch, exact (order and join on this)"),
    col("lat", I64, "latency in nanoseconds: syscall entry to return, block request issue to completion; 0 for process events"),
    col("kind", STR, "`syscall`, `block` (a block request) or `proc` (fork, exec, exit)"),
    col("op", STR, "operation name, as `evt.type` matches it and `latscope events` prints it: the syscall (`pread64`, `write`), the block request (`block_read`, `block_write`, `block_flush`, `block_discard`, ...) or the process event (`proc_fork`, `proc_exec`, `proc_exit`); a syscall and a block request never share a name, so `GROUP BY op` never mixes them"),
    col("nr", I32, "the operation as a number: x86-64 syscall number, the kernel's REQ_OP_* code, or 0 fork / 1 exec / 2 exit"),
    col("pid", I32, "process id (thread group id); for block requests the process that queued or issued the request"),
    col("tid", I32, "thread id"),
    col("uid", I64, "user id"),
    col("comm", STR, "command name (the kernel's comm, at most 15 bytes)"),
    col("ret", I64, "return value (negative errno on failure); fork: parent pid; exit: exit code"),
    col("fd", I32, "file descriptor argument, -1 when none"),
    col("fd_type", STR, "type of `fd`: file, directory, ipv4, ipv6, unix, pipe, event, signalfd, eventpoll, inotify, timerfd, memfd, chardev, blockdev, netlink, socket, anon, unknown"),
    col("path", STR, "file path (argument of path calls, resolved path of fd calls; sockets: `local->peer`); exec: the new executable; empty when none"),
    col("path2", STR, "second path (rename, link, symlink targets); empty when none"),
    col("dev", I64, "device: of the file behind `fd`, or the block device; `major * 1048576 + minor`"),
    col("disk", STR, "kernel name of `dev` when it is a block device of the recorded machine (`vda`, `nvme0n1p2`, `loop3`); empty otherwise"),
    col("ino", I64, "inode number of the file behind `fd` (bit pattern of the unsigned value)"),
    col("bytes", I64, "bytes requested (count or length argument); block requests: request size"),
    col("off", I64, "file offset (pread/pwrite argument, file position for read/write, lseek argument); block requests: start sector (512 bytes); -1 when none"),
    col("flags", I64, "open/mmap/at flags, lseek whence; block requests: 1 SYNC, 2 META, 4 FUA, 8 PREFLUSH, 16 RAHEAD"),
    col("mode", I64, "open mode, mmap prot, access mode"),
    col("dirfd", I32, "directory fd of `*at` calls (-100 is AT_FDCWD), -1 when none"),
    col("addr", I64, "address (mmap, munmap, msync; bit pattern of the unsigned value); second fd (dup2 target, sendfile/splice input)"),
    col("cgroup", I64, "cgroup id of the task"),
    col("qtime", I64, "block requests: queue time, insert to issue, nanoseconds; 0 otherwise"),
    col("container_id", STR, "the container's full id (64 hex digits) from the trace's cgroup table; empty outside containers or for a cgroup the trace does not know"),
    col("container_name", STR, "the container's name from the runtime's state, empty when unknown"),
    col("container_image", STR, "the container's image as configured (`registry:5000/shop/api:v2`), empty when unknown"),
    col("pod_name", STR, "the Kubernetes pod's name, empty outside pods"),
    col("pod_namespace", STR, "the pod's namespace, empty outside pods"),
    col("cgroup_path", STR, "the task's cgroup v2 path (`/system.slice/nginx.service`), empty for a cgroup the trace does not know"),
    col("why_cpu", I64, "attribution (`record --why`): nanoseconds of the call on CPU; the `why_*` parts of a call add up to `lat`, and are all 0 when it carries no breakdown"),
    col("why_runq", I64, "attribution: nanoseconds runnable, waiting for a CPU (preempted, or woken and not yet running)"),
    col("why_io", I64, "attribution: nanoseconds blocked in an I/O wait (block requests, writeback)"),
    col("why_lock", I64, "attribution: nanoseconds blocked in a futex until another thread woke it"),
    col("why_ipc", I64, "attribution: nanoseconds blocked on a pipe or socket"),
    col("why_timer", I64, "attribution: nanoseconds blocked until a timer fired (sleeps, timeouts)"),
    col("why_fault", I64, "attribution: nanoseconds in the I/O waits of a page fault taken inside the call"),
    col("why_other", I64, "attribution: nanoseconds blocked, woken by a thread for another reason"),
    col("why_unknown", I64, "attribution: nanoseconds the probes could not attribute"),
    col("waker_kind", STR, "who ended the call's longest blocked interval: `thread`, `timer`, `softirq`, or empty when nothing did"),
    col("waker_tid", I32, "the waking thread's id (`waker_kind = 'thread'`), 0 otherwise"),
    col("waker_comm", STR, "the waking thread's command name, or the softirq's name (`block`, `net_rx`); empty otherwise"),
    col("runq_tid", I32, "the thread that held the CPU during the call's longest wait for it (the one that preempted it, or, after a wake-up, the one it took the CPU from), 0 when none"),
    col("runq_cpu", I32, "the CPU of that wait"),
    col("wake_dev", I64, "device (`major * 1048576 + minor`) of the block request whose completion woke the call from its longest I/O wait, 0 when none"),
    col("wake_sector", I64, "start sector of that request"),
    col("kstack", I64, "the kernel stack where the call blocked: `stacks.stack_id` (0: none)"),
    col("ustack", I64, "the user stack of the call: `stacks.stack_id` (0: none)"),
    col("wake_held_ns", I64, "the block requests whose completions ended the call's I/O waits: of each wait, nanoseconds before its request existed (inserted, or issued straight to the driver: the bio held by cgroup I/O throttling or a plug, or not yet submitted), summed"),
    col("wake_queue_ns", I64, "those requests' queue time, insert to issue, nanoseconds, summed (their block events' `qtime`)"),
    col("wake_device_ns", I64, "those requests' device time, issue to completion, nanoseconds, summed (their block events' `lat`)"),
    col("waker_was_in", STR, "one level of cascade: the `why_*` part (`io`, `lock`...) the waking thread (`waker_kind = 'thread'`) was itself blocked in during the call's longest blocked interval, as `top --by cause --json` names it in `was_in.cause`; empty when none was seen"),
    col("waker_was_in_ns", I64, "nanoseconds the waking thread spent blocked in `waker_was_in` during that interval, 0 when none"),
    col("fault_path", STR, "the file behind the call's page fault with the longest I/O wait (its `why_fault` time); empty when none, or when the recording could not name it"),
    col("fault_off", I64, "the byte offset in that file of the faulting address, -1 when unknown"),
    col("wait", STR, "how the call's latency counts in rankings (the idle rule, docs/WHY.md): `work`, `on_someone` (a wait another thread of the recording ended), `idle_timeout` (its own timeout ended it), `idle_outside` (outside work ended it), `idle_by_syscall` (a blocking wait without a breakdown)"),
    col("lock", STR, "the lock the call waited for, as `latscope events --why` names it (`futex 0x7f3a5c0010a8 (FUTEX_WAIT_PRIVATE)`, `fcntl write lock /db bytes 0-4095 (F_SETLKW)`); empty when none"),
    col("lock_addr", I64, "the lock's address: a futex's (bit pattern of the unsigned value), a semaphore set's id; 0 for file locks and when none"),
    col("lock_owner", I32, "the thread that held the lock, where known (a PI or robust futex's owner, the holder of a futex whose wait its timeout ended); 0 otherwise"),
    col("chain", STR, "the call's chain of waits as JSON, as `latscope events --json` has it in `why.chain`: the threads it waited on, each with what it was blocked in and for how long, down to the root; empty when the call never blocked"),
    col("chain_root", STR, "where that chain ends, as `latscope why` names it (`loop0 (7:0)'s device time`, `app/12 running`, `a timer`, `outside work (curl/77)`); empty when none"),
    col("chain_root_ns", I64, "nanoseconds of the call's longest wait that end at `chain_root`, 0 when none"),
];

/// The columns of the stacks table (the stacks of calls recorded with `record --why`, one row per
/// frame).
pub const STACK_COLUMNS: &[ColumnDoc] = &[
    col("host", STR, "host name"),
    col("trace_start", TS, "start of the recording (joins with `traces.trace_start`)"),
    col("stack_id", I64, "the stack, as `events.kstack` and `events.ustack` name it (unique across the traces of an export)"),
    col("trace_stack_id", I32, "the stack's id in its trace's stack table (as `latscope why --stacks --json` counts them)"),
    col("kind", STR, "`kernel` (where a call blocked) or `user` (the call's user stack)"),
    col("frame", I32, "position in the stack, 0 the innermost frame"),
    col("addr", I64, "the address as captured (kernel address; user: virtual address in the process; bit pattern of the unsigned value); 0 for a stack without frames"),
    col("file_offset", I64, "user frames: the offset of `addr` in `file`; 0 otherwise (not NULL: pandas would read the column as floats)"),
    col("symbol", STR, "the frame as latscope's views name it: kernel `function+0xoff` as named when recording, user functions from the binaries at hand, else `file+0xoffset` or the address; a stack without frames has one row saying why"),
    ncol("file", STR, "user frames: the file mapped at `addr`; NULL otherwise"),
    ncol("build_id", STR, "user frames: the GNU build id of `file`, lower-case hex; NULL when it has none"),
    col("file_deleted", "BOOLEAN", "user frames: `file` had been deleted (removed, or replaced at its path) while the process mapped it, what `/proc/PID/maps` shows as `(deleted)`"),
    col("truncated", "BOOLEAN", "the capture stopped at its depth limit: outer frames may be missing"),
    ncol("missing", STR, "why the stack has no frames (capture failed, process exited before its addresses were read); NULL when it has them"),
];

/// The columns of the processes table (the processes running when each recording started).
pub const PROCESS_COLUMNS: &[ColumnDoc] = &[
    col("host", STR, "host name"),
    col("trace_start", TS, "start of the recording the snapshot belongs to (joins with `traces.trace_start`)"),
    col("pid", I32, "process id"),
    col("ppid", I32, "parent process id"),
    col("uid", I64, "real user id"),
    col("user", STR, "user name of `uid` on the recorded machine, empty when unknown"),
    col("comm", STR, "command name"),
    col("exe", STR, "executable path"),
    col("cmdline", STR, "command line, arguments separated by spaces"),
    col("cwd", STR, "working directory"),
];

/// The columns of the disks table (the block devices of each recorded machine).
pub const DISK_COLUMNS: &[ColumnDoc] = &[
    col("host", STR, "host name"),
    col("trace_start", TS, "start of the recording (joins with `traces.trace_start`)"),
    col("dev", I64, "device number, `major * 1048576 + minor` (joins with `events.dev`)"),
    col("major", I32, "major device number"),
    col("minor", I32, "minor device number"),
    col("disk", STR, "kernel name (`vda`, `nvme0n1p2`; joins with `events.disk`)"),
    col("size_bytes", I64, "size in bytes"),
    ncol("scheduler", STR, "active I/O scheduler (whole disks), NULL for partitions or when unknown"),
    col("rotational", "BOOLEAN", "whether the device says it is rotational"),
    ncol("parent", STR, "the whole disk a partition belongs to, NULL for whole disks"),
];

/// The columns of the traces table (one row per exported trace).
pub const TRACE_COLUMNS: &[ColumnDoc] = &[
    col("host", STR, "host name"),
    col("trace_start", TS, "start of the recording, wall clock, UTC"),
    ncol("trace_end", TS, "end of the recording; NULL when the trace was not closed cleanly"),
    col("file", STR, "the trace file as given to the export"),
    col("kernel", STR, "kernel release of the recorded machine"),
    col("machine", STR, "architecture (`x86_64`)"),
    col("cpus", I32, "CPUs online"),
    col("latscope_version", STR, "latscope version that recorded the trace"),
    col("command_line", STR, "the recording's latscope command line"),
    ncol("record_filter", STR, "filter given at record time, NULL when none"),
    ncol("export_filter", STR, "filter given to the export, NULL when none"),
    col("events_read", I64, "events read from the trace"),
    col("events_exported", I64, "events written to the events table (those the export filter took)"),
    col("events_lost", I64, "events the probes lost while recording (not in the trace)"),
    col("corrupt_blocks", I64, "damaged blocks of the trace skipped by the export"),
];

/// The events table's columns that name the task's cgroup, from the trace's cgroup table.
pub(crate) const CGROUP_COLUMNS: [&str; 6] =
    ["container_id", "container_name", "container_image", "pod_name", "pod_namespace", "cgroup_path"];

fn dict(key: DataType) -> DataType {
    DataType::Dictionary(Box::new(key), Box::new(DataType::Utf8))
}

/// The UTC microsecond timestamp type.
pub(crate) fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some(Arc::from("UTC")))
}

/// The events table's Arrow schema (low-cardinality strings as dictionaries; Parquet stores
/// them as dictionary-encoded UTF-8 strings).
pub(crate) fn event_schema() -> SchemaRef {
    let t = |name: &str| -> DataType {
        match name {
            "host" | "op" | "disk" => dict(DataType::Int16),
            // A trace may name more cgroups than 16-bit keys count.
            c if CGROUP_COLUMNS.contains(&c) => dict(DataType::Int32),
            "kind" | "fd_type" | "waker_kind" | "waker_was_in" | "wait" => dict(DataType::Int8),
            "time" => ts_type(),
            "comm" | "path" | "path2" | "waker_comm" | "fault_path" | "lock" | "chain" | "chain_root" => DataType::Utf8,
            _ => match EVENT_COLUMNS.iter().find(|c| c.name == name).map(|c| c.sql_type) {
                Some(I32) => DataType::Int32,
                _ => DataType::Int64,
            },
        }
    };
    Arc::new(Schema::new(EVENT_COLUMNS.iter().map(|c| Field::new(c.name, t(c.name), false)).collect::<Vec<_>>()))
}

/// The directory names of a partitioned export that are not columns of its files: a key that is
/// both (as `host` once was) makes pyarrow and pandas refuse the dataset, Spark warn, and each
/// engine pick one of the two types.
pub const PARTITION_KEYS: &[&str] = &["host", "date", "hour"];

/// `schema` without the columns the directory names hold (see [`PARTITION_KEYS`]).
pub(crate) fn without_partition_keys(schema: &SchemaRef) -> SchemaRef {
    Arc::new(Schema::new(
        schema.fields().iter().filter(|f| !PARTITION_KEYS.contains(&f.name().as_str())).cloned().collect::<Vec<_>>(),
    ))
}

/// Arrow schema of a small table from its column docs (`NULL`-able where the doc says so).
pub(crate) fn table_schema(cols: &[ColumnDoc]) -> SchemaRef {
    Arc::new(Schema::new(
        cols.iter()
            .map(|c| {
                let t = match c.sql_type {
                    TS => ts_type(),
                    STR => DataType::Utf8,
                    I32 => DataType::Int32,
                    I64 => DataType::Int64,
                    _ => DataType::Boolean,
                };
                Field::new(c.name, t, c.nullable)
            })
            .collect::<Vec<_>>(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_list_every_column_with_its_type_and_meaning() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/EXPORT.md")).unwrap();
        for (title, cols) in [
            ("### The events table", EVENT_COLUMNS),
            ("### The processes table", PROCESS_COLUMNS),
            ("### The disks table", DISK_COLUMNS),
            ("### The traces table", TRACE_COLUMNS),
            ("### The stacks table", STACK_COLUMNS),
        ] {
            let section = doc.split(title).nth(1).unwrap_or_else(|| panic!("docs/EXPORT.md has no '{title}'"));
            let rows: Vec<String> = section
                .lines()
                .skip_while(|l| !l.starts_with("| `"))
                .take_while(|l| l.starts_with("| `"))
                .map(str::to_string)
                .collect();
            let want: Vec<String> =
                cols.iter().map(|c| format!("| `{}` | {} | {} |", c.name, c.sql_type, c.meaning)).collect();
            assert_eq!(rows, want, "{title} in docs/EXPORT.md");
        }
    }

    #[test]
    fn every_event_column_is_typed_and_unique() {
        let s = event_schema();
        assert_eq!(s.fields().len(), EVENT_COLUMNS.len());
        let mut names: Vec<_> = EVENT_COLUMNS.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), EVENT_COLUMNS.len());
        // No unsigned types: Spark and Trino read them badly.
        for f in s.fields() {
            assert!(!f.data_type().is_unsigned_integer(), "{}", f.name());
        }
        assert!(table_schema(DISK_COLUMNS).field_with_name("parent").unwrap().is_nullable());
        assert!(!table_schema(DISK_COLUMNS).field_with_name("dev").unwrap().is_nullable());
    }
}
