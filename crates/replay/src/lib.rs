//! Replay of recorded file I/O in a sandbox.
//!
//! A latscope trace holds every I/O syscall of the recorded processes with its fd, paths,
//! flags, sizes, offsets and result. This crate turns it into load on a test machine:
//!
//! 1. [`prepare`] reads a trace (through an optional filter) and writes a [`Plan`]: per
//!    recorded thread, its operations in order ([`Op`]), with dependency markers where another
//!    thread must have progressed first (create before open of the same path, mkdir before a
//!    create inside it, rename before open of the new name, write before a read of the same
//!    range, close before the fd number is reused, the file position shared by dup'd fds); every
//!    path mapped into a sandbox; every fd resolved to a *slot* through a model of fd tables
//!    (dup, `F_DUPFD`, inheritance over fork and clone with `CLONE_FILES` sharing, `O_CLOEXEC`
//!    over exec, `*at` calls, files open before the recording); and what was left out and why.
//!    Pseudo file systems are dropped using the mount table recorded in the trace.
//! 2. [`init`] builds the starting tree in the sandbox: every file and directory used before it
//!    is created, files as large as what is read of them before being written, filled with
//!    generated non-zero data ([`pattern`]).
//! 3. [`run`] replays the plan: one worker per recorded thread (threads that never ran at the
//!    same time share one), as fast as dependencies allow or on the recorded schedule scaled by
//!    a speed factor; every result is compared with the recorded one ([`Stats`]).
//! 4. [`compare`] puts two runs side by side and says which differences exceed run-to-run noise;
//!    [`matrix`] replays under each value of a block-device setting and compares them.
//! 5. [`metrics`] turns a running replay's progress ([`Live`]) into per-interval metrics (ops/s,
//!    lateness percentiles, divergences, errors) for a time-series store such as Graphite.
//!
//! Safety: the replay reads and writes nothing outside its sandbox. Paths with `..`
//! components, on pseudo file systems, device nodes and symlinks leading out are refused when
//! the plan is made ([`PlanMeta::dropped`]); at run time every path is resolved with
//! `openat2(RESOLVE_BENEATH)` from a sandbox directory fd, and a sandbox that holds device
//! nodes, FIFOs, mount points or escaping symlinks is refused ([`sandbox::check_tree`]). A plan
//! file is versioned and checksummed; one that decodes but breaks a rule the executor relies on
//! is refused by [`Plan::validate`]. Nothing a plan asks for grants privilege: what init and run
//! create is never set-id nor writable by the group or others, only attributes of namespaces
//! that grant nothing are set unless more are allowed ([`xattrs`]; `security.capability`
//! never), and their number and size are checked before anything is written. Nothing in a
//! sandbox another user owns (after `init --user`) is trusted by root ([`sandbox`]).
//!
//! The plan file format, the meaning of every operation field and the statistics are
//! described in docs/REPLAY.md.
//!
//! ```no_run
//! use latscope_replay::{prepare, write_plan, read_plan, PrepareOptions, SandboxChoice};
//! # fn main() -> Result<(), latscope_replay::ReplayError> {
//! let opts = PrepareOptions { sandbox: SandboxChoice::Root("/mnt/test/sb".into()), filter: None };
//! let plan = prepare("trace.lst".as_ref(), &opts)?;
//! write_plan(&plan, "plan.lsr".as_ref())?;
//! let plan = read_plan("plan.lsr".as_ref())?;
//! println!("{} operations in {} threads", plan.meta.counts.ops, plan.threads.len());
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

pub mod compare;
mod cpaths;
pub mod env;
mod error;
mod init;
pub mod matrix;
pub mod metrics;
mod op;
pub mod pattern;
mod plan;
mod prepare;
mod report;
mod run;
pub mod sandbox;
mod source;
mod stats;
mod sys;
pub mod xattrs;

pub use error::{ReplayError, Result};
pub use init::{init, sandbox_spec, InitOptions, InitReport};
pub use metrics::LiveMetrics;
pub use op::{Compare, Op, OpKind, NONE, OP_BYTES};
pub use plan::{
    read_plan, write_plan, Dropped, InitEntry, InitKind, PathEntry, PathTable, Plan, PlanCounts, PlanMeta, Preopen,
    RootSpec, SandboxSpec, ThreadInfo, TraceInfo, MAX_IO_BYTES, PLAN_MAGIC, PLAN_VERSION,
};
pub use prepare::{plan_events, prepare, readiness, PrepareOptions, SandboxChoice, PSEUDO_FS};
pub use report::describe_plan;
pub use run::{run, Live, RunOptions};
pub use source::{read_trace, TraceEvents};
pub use stats::{DivergenceCount, DivergenceExample, KindStats, Lateness, Stats, WINDOW_NS};
pub use xattrs::{XattrLimits, XattrPolicy};
