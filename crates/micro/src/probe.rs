//! The [`Probe`] trait, what a probe is ([`ProbeSpec`]) and how one is built.

use crate::clock::{tsc_unavailable, ClockId};
use crate::error::ProbeError;
use crate::probes;
use latscope_event::units::fmt_ns_f;
use latscope_hist::Histogram;
use serde::Serialize;
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::time::Duration;

/// A micro-benchmark: each sample is one measured value recorded into a histogram.
pub trait Probe: Send {
    /// What the probe measures (name, unit, parameters).
    fn info(&self) -> &ProbeInfo;

    /// Takes `n` samples (at least one), recording each into `h`; returns how many were taken.
    /// An error stops the probe (the runner reports it); samples taken before it stay recorded.
    fn sample(&mut self, h: &mut Histogram, n: u64) -> Result<u64, ProbeError>;

    /// Samples that completed but failed (a command that exited non-zero); they are recorded too.
    fn failures(&self) -> u64 {
        0
    }
}

/// Unit of the values a probe records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// Nanoseconds: one timed operation.
    #[serde(rename = "ns")]
    Nanoseconds,
    /// Picoseconds: time per repetition of a loop (around a nanosecond, so ns would round it away).
    #[serde(rename = "ps")]
    Picoseconds,
}

impl Unit {
    /// `ns` or `ps`, as stored with a series.
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Nanoseconds => "ns",
            Unit::Picoseconds => "ps",
        }
    }

    /// The unit stored as `s` (`None` for units that are not times).
    pub fn parse(s: &str) -> Option<Unit> {
        match s {
            "ns" => Some(Unit::Nanoseconds),
            "ps" => Some(Unit::Picoseconds),
            _ => None,
        }
    }

    /// Nanoseconds per unit.
    pub fn ns(self) -> f64 {
        match self {
            Unit::Nanoseconds => 1.0,
            Unit::Picoseconds => 1e-3,
        }
    }

    /// A value with a time unit, 3 significant digits: `812ns`, `1.15ns`, `4.00ms`.
    pub fn format(self, v: f64) -> String {
        let ns = v * self.ns();
        if ns < 10.0 && self == Unit::Picoseconds && ns > 0.0 {
            return format!("{ns:.2}ns");
        }
        fmt_ns_f(ns)
    }
}

/// What a probe measures: the declaration of its series in a store.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProbeInfo {
    /// Name (unique among the probes of a run; the series name in a store).
    pub name: String,
    /// The probe's kind: `clock`, `call`, `muladd`, `sin`, `read`, `fsync`, `command`.
    pub probe: &'static str,
    /// Unit of the recorded values.
    pub unit: Unit,
    /// One sentence for people.
    pub description: String,
    /// How it measures, as stored with the series: always `probe` (the kind); then per kind
    /// `clock`, `repetitions`, `path`, `file_size`, `region`, `block_size`, `direct`, `size`,
    /// `command`, `tsc_hz`.
    pub params: Map<String, Value>,
}

impl ProbeInfo {
    pub(crate) fn new(name: &str, probe: &'static str, unit: Unit, description: String) -> ProbeInfo {
        let mut params = Map::new();
        params.insert("probe".into(), probe.into());
        ProbeInfo { name: name.to_string(), probe, unit, description, params }
    }

    pub(crate) fn with(mut self, key: &str, v: impl Into<Value>) -> ProbeInfo {
        self.params.insert(key.into(), v.into());
        self
    }
}

/// What to measure, per kind.
#[derive(Clone, Debug, PartialEq)]
pub enum ProbeKind {
    /// Two consecutive reads of `clock`: the difference shows its granularity (a coarse clock
    /// reads 0 or a whole tick) and, on average, its read cost.
    Clock {
        /// The clock measured.
        clock: ClockId,
    },
    /// An empty function call timed with `clock` (seed of every "how much does timing cost" question).
    Call {
        /// The clock timing the call.
        clock: ClockId,
    },
    /// A dependent integer multiply-add loop; the value is its time divided by `repetitions`.
    MulAdd {
        /// Iterations per sample.
        repetitions: u64,
    },
    /// A loop calling libm's `sin`; the value is its time divided by `repetitions`.
    Sin {
        /// Calls per sample.
        repetitions: u64,
    },
    /// Random `block_size`-aligned reads of `block_size` bytes from the first `region` bytes of a
    /// file (the whole file by default), through the page cache or with `O_DIRECT`.
    Read {
        /// The file; created (`file_size` bytes of pseudo-random data) if missing or shorter.
        path: PathBuf,
        /// Size the file must have (default: its current size).
        file_size: Option<u64>,
        /// Bytes from the start of the file that reads fall in (default: the whole file).
        region: Option<u64>,
        /// Bytes per read and their alignment.
        block_size: u64,
        /// Bypass the page cache (`O_DIRECT`).
        direct: bool,
    },
    /// A `size`-byte write followed by `fsync`, cycling through the first `file_size` bytes.
    Fsync {
        /// The file (created if missing).
        path: PathBuf,
        /// Bytes per write.
        size: u64,
        /// Bytes the writes cycle through.
        file_size: u64,
    },
    /// A command run with `sh -c`, its wall time from start to exit.
    Command {
        /// The command line.
        command: String,
    },
}

/// Default repetitions of [`ProbeKind::MulAdd`] (about a millisecond per sample).
pub const MULADD_REPETITIONS: u64 = 1_000_000;
/// Default repetitions of [`ProbeKind::Sin`].
pub const SIN_REPETITIONS: u64 = 100_000;
/// Default block size of reads and writes.
pub const BLOCK_SIZE: u64 = 4096;
/// Default file size of the fsync probe.
pub const FSYNC_FILE_SIZE: u64 = 1 << 20;

/// One probe to run: what it measures, its name, and how often it samples.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeSpec {
    /// Name (see [`ProbeSpec::default_name`]).
    pub name: String,
    /// Pause between samples; `None`: the run's default.
    pub every: Option<Duration>,
    /// What it measures.
    pub kind: ProbeKind,
}

impl ProbeSpec {
    /// A probe named after its definition.
    pub fn new(kind: ProbeKind) -> ProbeSpec {
        ProbeSpec { name: ProbeSpec::default_name(&kind), every: None, kind }
    }

    /// The name of a probe without one: its definition in flag syntax (`clock:monotonic_coarse`,
    /// `read:/data/f,region=512KiB,direct`), defaults left out.
    pub fn default_name(kind: &ProbeKind) -> String {
        match kind {
            ProbeKind::Clock { clock } => format!("clock:{clock}"),
            ProbeKind::Call { clock: ClockId::Monotonic } => "call".into(),
            ProbeKind::Call { clock } => format!("call:{clock}"),
            ProbeKind::MulAdd { repetitions: MULADD_REPETITIONS } => "muladd".into(),
            ProbeKind::MulAdd { repetitions } => format!("muladd,repetitions={repetitions}"),
            ProbeKind::Sin { repetitions: SIN_REPETITIONS } => "sin".into(),
            ProbeKind::Sin { repetitions } => format!("sin,repetitions={repetitions}"),
            ProbeKind::Read { path, region, block_size, direct, .. } => {
                let mut s = format!("read:{}", path.display());
                if let Some(r) = region {
                    s += &format!(",region={}", size_name(*r));
                }
                if *block_size != BLOCK_SIZE {
                    s += &format!(",block_size={}", size_name(*block_size));
                }
                if *direct {
                    s += ",direct";
                }
                s
            }
            ProbeKind::Fsync { path, size, .. } if *size == BLOCK_SIZE => format!("fsync:{}", path.display()),
            ProbeKind::Fsync { path, size, .. } => format!("fsync:{},size={}", path.display(), size_name(*size)),
            ProbeKind::Command { command } => format!("command:{command}"),
        }
    }

    /// Opens files, calibrates, checks what the machine offers; `note` receives progress messages
    /// for long preparations (creating a large file).
    pub fn build(&self, note: &mut dyn FnMut(&str)) -> Result<Box<dyn Probe>, ProbeError> {
        let name = &self.name;
        Ok(match &self.kind {
            ProbeKind::Clock { clock } => {
                if *clock == ClockId::Tsc {
                    if let Some(why) = tsc_unavailable() {
                        return Err(ProbeError::Unsupported { probe: name.clone(), why });
                    }
                }
                Box::new(probes::timing::ClockProbe::new(name, *clock))
            }
            ProbeKind::Call { clock } => {
                if *clock == ClockId::Tsc {
                    return Err(ProbeError::Unsupported {
                        probe: name.clone(),
                        why: "calls are timed with a POSIX clock".into(),
                    });
                }
                Box::new(probes::timing::CallProbe::new(name, *clock))
            }
            ProbeKind::MulAdd { repetitions } => Box::new(probes::timing::LoopProbe::muladd(name, *repetitions)),
            ProbeKind::Sin { repetitions } => Box::new(probes::timing::LoopProbe::sin(name, *repetitions)),
            ProbeKind::Read { path, file_size, region, block_size, direct } => {
                Box::new(probes::file::ReadProbe::open(name, path, *file_size, *region, *block_size, *direct, note)?)
            }
            ProbeKind::Fsync { path, size, file_size } => {
                Box::new(probes::file::FsyncProbe::open(name, path, *size, *file_size)?)
            }
            ProbeKind::Command { command } => Box::new(probes::command::CommandProbe::new(name, command)),
        })
    }
}

/// A size in the shortest exact binary unit: `4KiB`, `256MiB`, `1000B`.
pub(crate) fn size_name(b: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if b >= 1 << shift && b.is_multiple_of(1 << shift) {
            return format!("{}{unit}", b >> shift);
        }
    }
    format!("{b}B")
}
