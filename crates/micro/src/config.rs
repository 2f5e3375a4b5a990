//! Probe definitions from flags (`read:/data/f,region=512KiB,direct`) and from a TOML file; both
//! use the same keys.

use crate::clock::{tsc_unavailable, ClockId};
use crate::error::ConfigError;
use crate::probe::{ProbeKind, ProbeSpec, BLOCK_SIZE, FSYNC_FILE_SIZE, MULADD_REPETITIONS, SIN_REPETITIONS};
use latscope_event::units::{parse_duration_secs_default, parse_size};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The probe kinds and what their flag syntax looks like, for help texts and errors.
pub const PROBE_SYNTAX: &[(&str, &str)] = &[
    ("clock[:CLOCK]", "consecutive reads of a clock (all clocks without CLOCK): granularity, read cost"),
    ("call[:CLOCK]", "an empty function call timed with CLOCK (monotonic)"),
    ("muladd[,repetitions=N]", "dependent multiply-add loop, time per iteration (1000000)"),
    ("sin[,repetitions=N]", "libm sin() loop, time per call (100000)"),
    (
        "read:PATH[,file_size=SIZE][,region=SIZE][,block_size=SIZE][,direct]",
        "random aligned block reads of a file (created with file_size), page cache or O_DIRECT",
    ),
    ("fsync:PATH[,size=SIZE][,file_size=SIZE]", "a small write then fsync(), in a file of the probe's own"),
    ("command:COMMAND", "wall time of `sh -c COMMAND` (the rest of the text is the command)"),
];

/// Settings of a run from a config file; flags override them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BenchConfig {
    /// Default pause between samples of each probe.
    pub every: Option<Duration>,
    /// How long to run.
    pub duration: Option<Duration>,
    /// Store flush interval.
    pub flush: Option<Duration>,
    /// Store file (relative paths are relative to the config file's directory).
    pub store: Option<PathBuf>,
    /// Days of history the store keeps.
    pub retention_days: Option<u32>,
    /// The probes, in file order.
    pub probes: Vec<ProbeSpec>,
}

/// A size or a duration: a number, or a string with a unit.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
enum Quantity {
    Number(u64),
    Text(String),
}

/// Every key a probe definition may have (flags and files alike).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProbe {
    kind: String,
    name: Option<String>,
    every: Option<Quantity>,
    clock: Option<String>,
    repetitions: Option<u64>,
    path: Option<PathBuf>,
    file_size: Option<Quantity>,
    region: Option<Quantity>,
    block_size: Option<Quantity>,
    direct: Option<bool>,
    size: Option<Quantity>,
    command: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    every: Option<Quantity>,
    duration: Option<Quantity>,
    flush: Option<Quantity>,
    store: Option<PathBuf>,
    retention_days: Option<u32>,
    #[serde(default)]
    probe: Vec<RawProbe>,
}

fn size(q: &Option<Quantity>, key: &str) -> Result<Option<u64>, String> {
    match q {
        None => Ok(None),
        Some(Quantity::Number(n)) => Ok(Some(*n)),
        Some(Quantity::Text(s)) => parse_size(s).map(Some).map_err(|e| format!("{key}: {e}")),
    }
}

fn duration(q: &Option<Quantity>, key: &str) -> Result<Option<Duration>, String> {
    match q {
        None => Ok(None),
        Some(Quantity::Number(n)) => Ok(Some(Duration::from_secs(*n))),
        Some(Quantity::Text(s)) => {
            parse_duration_secs_default(s).map(|ns| Some(Duration::from_nanos(ns))).map_err(|e| format!("{key}: {e}"))
        }
    }
}

impl RawProbe {
    /// The probe(s) it defines: a `clock` without a clock is every clock this machine has.
    fn into_specs(self) -> Result<Vec<ProbeSpec>, String> {
        let used: Vec<&str> = [
            ("clock", self.clock.is_some()),
            ("repetitions", self.repetitions.is_some()),
            ("path", self.path.is_some()),
            ("file_size", self.file_size.is_some()),
            ("region", self.region.is_some()),
            ("block_size", self.block_size.is_some()),
            ("direct", self.direct.is_some()),
            ("size", self.size.is_some()),
            ("command", self.command.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, set)| set.then_some(k))
        .collect();
        let allowed: &[&str] = match self.kind.as_str() {
            "clock" | "call" => &["clock"],
            "muladd" | "sin" => &["repetitions"],
            "read" => &["path", "file_size", "region", "block_size", "direct"],
            "fsync" => &["path", "size", "file_size"],
            "command" => &["command"],
            other => {
                let kinds: Vec<&str> =
                    PROBE_SYNTAX.iter().map(|(s, _)| s.split([':', '[']).next().unwrap_or(s)).collect();
                return Err(format!("unknown probe kind '{other}' (one of: {})", kinds.join(", ")));
            }
        };
        if let Some(k) = used.iter().find(|k| !allowed.contains(k)) {
            return Err(format!("'{k}' does not apply to a {} probe (it takes: {})", self.kind, allowed.join(", ")));
        }
        let clock = self.clock.as_deref().map(ClockId::parse).transpose()?;
        let path =
            || self.path.clone().ok_or_else(|| format!("a {} probe needs a path ({}:PATH)", self.kind, self.kind));
        let positive = |v: Option<u64>, key: &str, default: u64| match v {
            Some(0) => Err(format!("{key} must be at least 1")),
            v => Ok(v.unwrap_or(default)),
        };
        let kinds = match self.kind.as_str() {
            "clock" => match clock {
                Some(clock) => vec![ProbeKind::Clock { clock }],
                None => ClockId::ALL
                    .into_iter()
                    .filter(|&c| c != ClockId::Tsc || tsc_unavailable().is_none())
                    .map(|clock| ProbeKind::Clock { clock })
                    .collect(),
            },
            "call" => vec![ProbeKind::Call { clock: clock.unwrap_or(ClockId::Monotonic) }],
            "muladd" => {
                vec![ProbeKind::MulAdd { repetitions: positive(self.repetitions, "repetitions", MULADD_REPETITIONS)? }]
            }
            "sin" => vec![ProbeKind::Sin { repetitions: positive(self.repetitions, "repetitions", SIN_REPETITIONS)? }],
            "read" => vec![ProbeKind::Read {
                path: path()?,
                file_size: size(&self.file_size, "file_size")?,
                region: size(&self.region, "region")?,
                block_size: positive(size(&self.block_size, "block_size")?, "block_size", BLOCK_SIZE)?,
                direct: self.direct.unwrap_or(false),
            }],
            "fsync" => vec![ProbeKind::Fsync {
                path: path()?,
                size: positive(size(&self.size, "size")?, "size", BLOCK_SIZE)?,
                file_size: positive(size(&self.file_size, "file_size")?, "file_size", FSYNC_FILE_SIZE)?,
            }],
            "command" => match self.command.as_deref().map(str::trim) {
                Some(c) if !c.is_empty() => vec![ProbeKind::Command { command: c.to_string() }],
                _ => return Err("a command probe needs a command (command:COMMAND)".into()),
            },
            _ => unreachable!("kinds checked above"),
        };
        let every = duration(&self.every, "every")?;
        if self.name.is_some() && kinds.len() > 1 {
            return Err("a name needs a single probe: give a clock (clock:monotonic)".into());
        }
        Ok(kinds
            .into_iter()
            .map(|kind| {
                let mut spec = ProbeSpec::new(kind);
                if let Some(n) = &self.name {
                    spec.name = n.clone();
                }
                spec.every = every;
                spec
            })
            .collect())
    }
}

/// Parses one probe given as a flag: `KIND[:ARG][,KEY=VALUE|,FLAG]...`. ARG is the clock, the
/// path or the command; for `command` everything after the colon is the command.
pub fn parse_probe(text: &str) -> Result<Vec<ProbeSpec>, ConfigError> {
    let err = |message: String| ConfigError { origin: format!("probe '{text}'"), message };
    let (head, rest) = match text.find([':', ',']) {
        Some(i) => (&text[..i], &text[i..]),
        None => (text, ""),
    };
    let mut raw = RawProbe { kind: head.trim().to_string(), ..Default::default() };
    let mut options = rest;
    if let Some(arg_and_options) = rest.strip_prefix(':') {
        if raw.kind == "command" {
            raw.command = Some(arg_and_options.to_string());
            options = "";
        } else {
            let (arg, opts) = match arg_and_options.find(',') {
                Some(i) => (&arg_and_options[..i], &arg_and_options[i..]),
                None => (arg_and_options, ""),
            };
            match raw.kind.as_str() {
                "clock" | "call" => raw.clock = Some(arg.to_string()),
                "read" | "fsync" => raw.path = Some(PathBuf::from(arg)),
                _ => return Err(err(format!("a {} probe takes no ':' argument", raw.kind))),
            }
            options = opts;
        }
    }
    for opt in options.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        let (key, value) = opt.split_once('=').map_or((opt, None), |(k, v)| (k.trim(), Some(v.trim().to_string())));
        let need = |v: Option<String>| v.ok_or_else(|| err(format!("'{key}' needs a value ({key}=...)")));
        let q = |v: Option<String>| need(v).map(|s| Some(Quantity::Text(s)));
        match key {
            "name" => raw.name = Some(need(value)?),
            "every" => raw.every = q(value)?,
            "repetitions" => {
                let v = need(value)?;
                raw.repetitions = Some(
                    v.replace('_', "").parse().map_err(|_| err(format!("repetitions '{v}' is not a whole number")))?,
                );
            }
            "file_size" => raw.file_size = q(value)?,
            "region" => raw.region = q(value)?,
            "block_size" => raw.block_size = q(value)?,
            "size" => raw.size = q(value)?,
            "direct" => raw.direct = Some(value.is_none_or(|v| v != "false" && v != "0")),
            _ => return Err(err(format!("unknown option '{key}'"))),
        }
    }
    raw.into_specs().map_err(err)
}

/// Parses a TOML config file's text; `origin` names it in errors.
pub fn parse_config(text: &str, origin: &Path) -> Result<BenchConfig, ConfigError> {
    let err = |message: String| ConfigError { origin: origin.display().to_string(), message };
    let raw: RawFile = toml::from_str(text).map_err(|e| err(e.to_string().trim_end().to_string()))?;
    let mut probes = Vec::new();
    for (i, p) in raw.probe.into_iter().enumerate() {
        let label = p.name.clone().unwrap_or_else(|| p.kind.clone());
        let specs = p.into_specs().map_err(|m| ConfigError {
            origin: format!("{}: probe {} ({label})", origin.display(), i + 1),
            message: m,
        })?;
        probes.extend(specs);
    }
    let base = origin.parent().unwrap_or(Path::new("."));
    Ok(BenchConfig {
        every: duration(&raw.every, "every").map_err(err)?,
        duration: duration(&raw.duration, "duration").map_err(err)?,
        flush: duration(&raw.flush, "flush").map_err(err)?,
        store: raw.store.map(|s| base.join(s)),
        retention_days: raw.retention_days,
        probes,
    })
}

/// Reads and parses a TOML config file.
pub fn load_config(path: &Path) -> Result<BenchConfig, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError { origin: path.display().to_string(), message: format!("cannot read: {e}") })?;
    parse_config(&text, path)
}

/// Checks that probe names are unique (they name series in a store).
pub fn check_unique_names(probes: &[ProbeSpec]) -> Result<(), ConfigError> {
    for (i, p) in probes.iter().enumerate() {
        if probes[..i].iter().any(|q| q.name == p.name) {
            return Err(ConfigError {
                origin: format!("probe '{}'", p.name),
                message: "defined twice: give one of them another name (name=...)".into(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> ProbeSpec {
        let mut v = parse_probe(text).unwrap();
        assert_eq!(v.len(), 1, "{text}");
        v.pop().unwrap()
    }

    #[test]
    fn flags_parse_into_probes_named_after_their_definition() {
        assert_eq!(one("clock:monotonic_coarse").kind, ProbeKind::Clock { clock: ClockId::MonotonicCoarse });
        assert_eq!(one("clock:CLOCK_MONOTONIC_RAW").name, "clock:monotonic_raw");
        assert!(parse_probe("clock").unwrap().len() >= 6);
        assert_eq!(one("call").kind, ProbeKind::Call { clock: ClockId::Monotonic });
        assert_eq!(one("muladd").kind, ProbeKind::MulAdd { repetitions: 1_000_000 });
        assert_eq!(one("sin,repetitions=1_000").name, "sin,repetitions=1000");
        let r = one("read:/data/f,file_size=256MiB,region=512KiB,direct,every=10s");
        assert_eq!(
            r.kind,
            ProbeKind::Read {
                path: "/data/f".into(),
                file_size: Some(256 << 20),
                region: Some(512 << 10),
                block_size: 4096,
                direct: true
            }
        );
        assert_eq!((r.name.as_str(), r.every), ("read:/data/f,region=512KiB,direct", Some(Duration::from_secs(10))));
        assert_eq!(one("read:/f,name=hot").name, "hot");
        assert_eq!(
            one("fsync:/tmp/w,size=512").kind,
            ProbeKind::Fsync { path: "/tmp/w".into(), size: 512, file_size: 1 << 20 }
        );
        assert_eq!(
            one("command:sleep 0.1, then, more").kind,
            ProbeKind::Command { command: "sleep 0.1, then, more".into() }
        );
    }

    #[test]
    fn bad_flags_say_what_is_wrong() {
        for (text, want) in [
            ("bogus", "unknown probe kind 'bogus'"),
            ("clock:sundial", "unknown clock 'sundial'"),
            ("read", "needs a path"),
            ("read:/f,region=lots", "region"),
            ("read:/f,colour=red", "unknown option 'colour'"),
            ("muladd,repetitions=0", "at least 1"),
            ("muladd:x", "takes no ':' argument"),
            ("clock,region=4k", "does not apply to a clock probe"),
            ("command:", "needs a command"),
            ("clock,name=x", "a name needs a single probe"),
        ] {
            let e = parse_probe(text).unwrap_err().to_string();
            assert!(e.contains(want) && e.contains(text), "{text}: {e}");
        }
    }

    #[test]
    fn config_files_define_probes_and_run_settings() {
        let text = r#"
every = "1s"
duration = 60
flush = "10s"
store = "bench.db"
retention_days = 14

[[probe]]
kind = "read"
name = "read-4k-of-8G"
path = "/data/f"
file_size = "8GiB"
region = 524288
every = "10s"

[[probe]]
kind = "clock"
clock = "monotonic_coarse"
"#;
        let c = parse_config(text, Path::new("/etc/latscope/bench.toml")).unwrap();
        assert_eq!(c.every, Some(Duration::from_secs(1)));
        assert_eq!(c.duration, Some(Duration::from_secs(60)));
        assert_eq!(c.store, Some(PathBuf::from("/etc/latscope/bench.db")));
        assert_eq!(c.retention_days, Some(14));
        assert_eq!(c.probes.len(), 2);
        assert_eq!(c.probes[0].name, "read-4k-of-8G");
        assert!(matches!(c.probes[0].kind, ProbeKind::Read { file_size: Some(8589934592), region: Some(524288), .. }));
        assert_eq!(c.probes[1].name, "clock:monotonic_coarse");

        let e =
            parse_config("[[probe]]\nkind = \"read\"\npath = \"/f\"\ncolour = 1\n", Path::new("b.toml")).unwrap_err();
        assert!(e.to_string().starts_with("b.toml") && e.to_string().contains("colour"), "{e}");
        let e =
            parse_config("[[probe]]\nkind = \"sin\"\n[[probe]]\nkind = \"read\"\n", Path::new("b.toml")).unwrap_err();
        assert!(e.to_string().contains("probe 2 (read)") && e.to_string().contains("needs a path"), "{e}");
        assert!(parse_config("every = [", Path::new("b.toml")).unwrap_err().to_string().contains("b.toml"));
        let dup = [one("sin"), one("sin")];
        assert!(check_unique_names(&dup).unwrap_err().to_string().contains("defined twice"));
    }
}
