//! Live sessions on the probes: what `record`, `top`, `spectrogram`, the agent and replay's
//! `--trace` share.
//!
//! A [`SessionBuilder`] turns what a user asks for (a [`SyscallSet`], block requests, processes,
//! a command to run, a filter) into a probe configuration: the filter's kernel-testable clauses
//! are tested in the kernel, the rest in user space, so the events handed out are exactly those
//! the filter keeps. Processes are chosen by pid (optionally followed to every child they fork,
//! like `strace -f`: the kernel adds each child to its pid filter as it forks), by command name
//! and by cgroup v2 cgroup (a [`Cgroup`], with the cgroups below it), all tested in the kernel. [`SessionBuilder::start`] checks the environment and the options, takes the
//! start snapshot (processes, open files, mounts, disks), loads and attaches the probes and
//! installs the stop signals. The header's `start_ns` is the moment the probes attached, so views
//! do not show the load time as an idle stretch.
//!
//! A [`LiveSession`] then either streams events (an [`EventSource`]: filtered [`Chunk`]s) or, for
//! views that only count latencies, counts them in the kernel when the kernel can apply the
//! filter exactly (a [`CountSource`]: histogram counts per group, nothing copied per event).
//!
//! Several counting views with the same process filter can share one probe set: a
//! [`SharedCounter`] counts every event once, in composite groups, and hands each view its
//! counts ([`plan_sharing`] says which views share; the agent's series use it).
//!
//! A [`Recorder`] writes a streaming session to a trace file, in blocks flushed at least every
//! [`RecorderOptions::flush_every`], each poll reading a bounded number of ring-buffer records so
//! that flushes, `--duration` and stop requests are honoured under any load.
//!
//! ```no_run
//! use latscope_live::{Recorder, RecorderOptions, SessionBuilder};
//! use latscope_event::SyscallSet;
//!
//! let session = SessionBuilder::new().syscalls(SyscallSet::Io).command(vec!["make".into()]).start()?;
//! let writer = latscope_trace::ThreadedTraceWriter::create("build.lst", session.header())?;
//! let rec = Recorder::new(session, writer, RecorderOptions::default()).run(|_| {})?;
//! println!("{} events, {} lost, command status {:?}", rec.events, rec.stats.lost, rec.command_status);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`EventSource`]: latscope_event::source::EventSource
//! [`CountSource`]: latscope_event::source::CountSource
//! [`Chunk`]: latscope_event::source::Chunk

#![warn(missing_docs)]

mod cgroup;
mod command;
mod config;
mod follow;
mod recorder;
mod session;
mod shared;
mod stacks;

pub use cgroup::Cgroup;
pub use command::{Command, CommandError};
pub use latscope_event::SyscallSet;
pub use recorder::{
    BlockSink, Progress, RecordError, Recorder, RecorderOptions, Recording, StopReason, BLOCK_EVENTS,
    MEMORY_BOUND_BYTES, WRITER_QUEUE_BLOCKS,
};
pub use session::{CountBy, LiveSession, SessionBuilder, SessionError, RING_BYTES_RANGE};
pub use shared::{
    plan_sharing, share_key, CountSpec, KeyAggregate, ShareKey, SharedCounter, ViewAggregates, ViewCounts,
};
pub use stacks::{StackStats, MAX_STACKS};
