//! latscope's flight recorder, and captures that run for days.
//!
//! **The flight recorder** (`latscope record -w DIR --ring 30s --trigger ...`) keeps every
//! event of a recording in a bounded ring in memory, as the trace file's own compressed blocks
//! ([`latscope_trace::SealedBlock`]: about 7 bytes an event), and writes nothing until a
//! trigger fires. Then the window before the trigger and the time after it
//! ([`FlightOptions::before`], [`FlightOptions::after`]) are written as an ordinary trace file
//! in `DIR`, named by the trigger's time and name (`flight-20261122T223013.250Z-slowpg.lst`),
//! that every command reads: its header is the recording's, with the processes, cgroups and
//! open files learned since the start and [`TraceHeader::flight`] saying what fired; its first
//! block of syscalls carries the stack table entries earlier blocks brought; its blocks are
//! numbered from 0.
//!
//! It is a [`latscope_live::BlockSink`] beside the trace writer: the
//! [`latscope_live::Recorder`] hands it the same batches it hands a file, and it seals them
//! into blocks on a thread of its own ([`FlightRecorder`]); a trigger has the dumper thread
//! write the window through [`latscope_trace::TraceWriter::write_sealed`] and the same
//! safe-output code as every trace (`latscope_trace::output`: a new file, mode 0600, never
//! through a symlink, at its name once the window before the trigger is on disk).
//!
//! * **Memory** is bounded by the ring ([`RingSize`]: a time, a size, or both, whichever is
//!   less), whatever the event rate: blocks are evicted oldest first. The whole process's bound
//!   ([`MemoryBound`]) adds the kernel's ring buffer (by default sized from the ring,
//!   [`default_kernel_buffer`]), the batches in flight (one queued for sealing) and the rest of
//!   latscope.
//! * **Triggers** ([`Trigger`], any number, each named): a call any filter matches (its
//!   kernel-testable clauses tested first, on columns), a percentile over a sliding window
//!   (`p99 of fsync on /var/lib/pg over 10s > 20ms`), a rate (`errors > 100/s`), a signal, a
//!   file appearing, or `latscope trigger NAME` on a local socket ([`ControlServer`]); the
//!   syntax is in [`trigger`].
//! * **Guards**: at most one dump per [`FlightOptions::min_gap`] (a trigger firing within it
//!   is dumped when it ends, [`Outcome::Deferred`]); a trigger firing during a dump extends it
//!   instead ([`Outcome::Extended`]); at most [`FlightOptions::keep`] dumps
//!   and [`FlightOptions::disk_budget`] bytes in the directory (the oldest deleted); a dump
//!   that does not fit on the disk is not begun, and one that fills it stops, cut back to its
//!   last complete block and readable, while the ring keeps running.
//! * `kill -9` during a dump: the dumps before are complete files; the one in progress is
//!   readable up to its last complete block once its window before the trigger was written,
//!   and absent before.
//!
//! **Rotating captures** ([`Rotator`], `record -w DIR --rotate 1GiB|10m --keep N`, as
//! sysdig's `-C`/`-G`/`-W`) write the recording into a new complete file every size or time,
//! keeping the newest N.
//!
//! ```no_run
//! use latscope_flight::{FlightOptions, FlightRecorder, RingSize, Trigger};
//! use latscope_live::{Recorder, RecorderOptions, SessionBuilder};
//!
//! let session = SessionBuilder::new().why(Some(100_000_000)).start()?;
//! let mut opts = FlightOptions::new("/var/lib/latscope/flight", RingSize::parse("30s")?);
//! opts.triggers.push(Trigger::parse("slow: evt.latency > 150ms and proc.name = postgres", "t1")?);
//! let ring = FlightRecorder::start(session.header(), opts, "record", |e| eprintln!("{e:?}"))?;
//! Recorder::new(session, ring, RecorderOptions::default()).run(|_| {})?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`TraceHeader::flight`]: latscope_event::TraceHeader::flight

#![warn(missing_docs)]

pub mod control;
mod dump;
pub mod files;
mod recorder;
mod ring;
mod rotate;
mod tables;
pub mod trigger;
mod watch;
mod worker;

pub use control::ControlServer;
pub use dump::{DumpReport, FlightEvent, FlightStats, Outcome};
pub use recorder::{
    default_kernel_buffer, FlightError, FlightHandle, FlightOptions, FlightRecorder, MemoryBound, DEFAULT_AFTER,
    DEFAULT_KEEP, DEFAULT_MIN_GAP, MAX_KERNEL_BUFFER, MIN_KERNEL_BUFFER, PROCESS_BYTES, RING_BLOCK_EVENTS,
};
pub use ring::{time_or_size, Amount, RingSize, DEFAULT_RING_BYTES, MIN_RING_BYTES};
pub use rotate::{RotateEvent, RotateEvery, Rotator};
pub use trigger::{Trigger, TriggerError, TriggerKind};
pub use watch::Fire;
