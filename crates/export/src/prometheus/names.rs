//! The metric names and labels latscope exposes: what the Grafana dashboard in
//! `packaging/grafana/latscope.json` queries and `latscope agent` serves. Every series also has a
//! `host` label (the recorded machine's host name), so that one Prometheus can hold a fleet.

/// Histogram of syscall latency, seconds; labels `host`, `syscall`.
pub const SYSCALL_LATENCY: &str = "latscope_syscall_latency_seconds";
/// Histogram of block request latency (issue to completion), seconds; labels `host`, `disk`, `op`.
pub const BLOCK_LATENCY: &str = "latscope_block_latency_seconds";
/// Histogram of block request queue time (insert to issue), seconds; labels `host`, `disk`, `op`.
pub const BLOCK_QUEUE: &str = "latscope_block_queue_seconds";
/// Histogram of block request sizes, bytes; labels `host`, `disk`, `op`.
pub const BLOCK_SIZE: &str = "latscope_block_size_bytes";
/// Counter of failed syscalls (negative return); labels `host`, `syscall`. Exposed as
/// `latscope_syscall_errors_total`.
pub const SYSCALL_ERRORS: &str = "latscope_syscall_errors";
/// Counter of bytes moved by block requests; labels `host`, `disk`, `op`. Exposed as
/// `latscope_block_bytes_total`.
pub const BLOCK_BYTES: &str = "latscope_block_bytes";
/// Counter of events the probes lost (ring buffer or map full); label `host`. Exposed as
/// `latscope_lost_events_total`.
pub const LOST_EVENTS: &str = "latscope_lost_events";

/// The label every series carries: the host name.
pub const LABEL_HOST: &str = "host";
/// The syscall name (`read`, `pread64`).
pub const LABEL_SYSCALL: &str = "syscall";
/// The disk's kernel name (`vda`, `nvme0n1`).
pub const LABEL_DISK: &str = "disk";
/// The block operation (`read`, `write`, `flush`, `discard`).
pub const LABEL_OP: &str = "op";
