//! Series: what a stored histogram measures.

use crate::hour::Hour;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Well-known series kinds. A kind is free text in the store; these are the ones latscope writes.
pub mod kind {
    /// A micro-benchmark probe (`latscope bench`): clock, call, loop, file read, fsync, command.
    pub const MICROBENCH: &str = "microbench";
    /// Latency of one syscall (`latscope record` / live views), the series named after the syscall.
    pub const SYSCALL: &str = "syscall";
    /// Block request latency of one device, the series named after the device.
    pub const BLOCK: &str = "block";
    /// Latency of a class of events chosen by a filter (a process, a file system, an fd type).
    pub const CLASS: &str = "class";
}

/// Well-known units of recorded values.
pub mod unit {
    /// Nanoseconds.
    pub const NANOSECONDS: &str = "ns";
    /// Picoseconds (per-iteration times of loops, which are around a nanosecond).
    pub const PICOSECONDS: &str = "ps";
    /// Bytes.
    pub const BYTES: &str = "bytes";
}

/// Identifier of a series in one store file (its row id; not meaningful across files).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SeriesId(pub i64);

impl std::fmt::Display for SeriesId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a writer declares about a series before adding histograms to it
/// ([`Store::ensure_series`](crate::Store::ensure_series)). `(host, name)` identifies the series.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeriesSpec {
    /// Machine the values were measured on (default: this machine's host name).
    pub host: String,
    /// Name, unique per host: `read-4k-8GiB`, `clock:monotonic_coarse`, `pread64`, `vda`.
    pub name: String,
    /// What is measured: one of [`kind`] or any other word.
    pub kind: String,
    /// Unit of the recorded values: one of [`unit`].
    pub unit: String,
    /// One sentence for people.
    pub description: String,
    /// Parameters of the measurement as a JSON object, e.g. the `file_size` a read probe used (which
    /// turns a cache-hit share into a cache-size estimate) or the `repetitions` of a loop.
    pub params: Map<String, Value>,
}

impl SeriesSpec {
    /// A series on this machine with no description or parameters.
    pub fn new(name: impl Into<String>, kind: impl Into<String>, unit: impl Into<String>) -> SeriesSpec {
        SeriesSpec {
            host: local_host(),
            name: name.into(),
            kind: kind.into(),
            unit: unit.into(),
            description: String::new(),
            params: Map::new(),
        }
    }

    /// The series of one syscall's latency (`pread64`) on this machine, in ns. `io` marks syscalls
    /// that read or write files, whose peaks explanations label as cache tiers (`params.io`).
    pub fn syscall(name: &str, io: bool) -> SeriesSpec {
        let mut s = SeriesSpec::new(name, kind::SYSCALL, unit::NANOSECONDS);
        s.description = format!("latency of the {name} syscall");
        s.params.insert("io".into(), io.into());
        s
    }

    /// The series of one block device's request latency (`vda`) on this machine, in ns.
    pub fn block(device: &str) -> SeriesSpec {
        let mut s = SeriesSpec::new(device, kind::BLOCK, unit::NANOSECONDS);
        s.description = format!("block request latency of {device} (issue to completion)");
        s
    }

    /// The series of a class of events chosen by a filter expression (kept in `params.filter`),
    /// named `name`, in ns.
    pub fn class(name: &str, filter: &str) -> SeriesSpec {
        let mut s = SeriesSpec::new(name, kind::CLASS, unit::NANOSECONDS);
        s.description = format!("latency of events matching '{filter}'");
        s.params.insert("filter".into(), filter.into());
        s
    }

    /// Checks the fields a store accepts: non-empty host, name, kind and unit without control
    /// characters, at most 256 bytes each.
    pub fn validate(&self) -> Result<(), String> {
        for (what, v) in [("host", &self.host), ("name", &self.name), ("kind", &self.kind), ("unit", &self.unit)] {
            if v.is_empty() {
                return Err(format!("series {what} is empty"));
            }
            if v.len() > 256 {
                return Err(format!("series {what} is longer than 256 bytes"));
            }
            if v.chars().any(char::is_control) {
                return Err(format!("series {what} {v:?} contains control characters"));
            }
        }
        Ok(())
    }
}

/// A stored series: its declaration and the extent of its data.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Series {
    /// Row id in this store.
    pub id: SeriesId,
    /// What the writer declared (last declaration wins).
    #[serde(flatten)]
    pub spec: SeriesSpec,
    /// Earliest stored hour (`None`: no histogram yet).
    pub first_hour: Option<Hour>,
    /// Latest stored hour.
    pub last_hour: Option<Hour>,
    /// Number of stored hours.
    pub hours: u64,
    /// Values recorded over all stored hours.
    pub count: u64,
}

/// This machine's host name (`/proc/sys/kernel/hostname`), `localhost` if unreadable.
pub fn local_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}
