//! `latscope check`: can this machine run the probes, and which of them.

use crate::args::JsonArg;
use anyhow::Result;
use latscope_probe::features::{Feature, KernelFeatures, StealClock};
use std::process::ExitCode;

/// Check this machine for what the probes need: the architecture, the privileges, and each kernel
/// feature they use (looked for in the kernel's BTF, not guessed from the version number). Says
/// for each missing feature which capability of latscope it costs and from which kernel it is
/// available, and which probes can run here. Exit status: 0 when every probe can run (some perhaps
/// by a slower path), 1 when some cannot, 2 when none can.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope check
  latscope check --json | jq '.features[] | select(.present | not)'
  sudo latscope check     # privileges as the probes would have them")]
pub struct Args {
    #[command(flatten)]
    pub json: JsonArg,
}

/// What can run, by probe group.
struct Verdict {
    arch_ok: bool,
    missing_caps: Vec<&'static str>,
    all: Vec<Feature>,
    syscalls: Vec<Feature>,
    fallbacks: Vec<Feature>,
}

impl Verdict {
    fn block_and_process(&self) -> bool {
        self.arch_ok && self.missing_caps.is_empty() && self.all.is_empty()
    }
    fn syscalls(&self) -> bool {
        self.block_and_process() && self.syscalls.is_empty()
    }
}

pub fn run(a: Args) -> Result<ExitCode> {
    let (_, release, machine) = latscope_probe::snapshot::uname();
    let kf = KernelFeatures::probe();
    let v = Verdict {
        arch_ok: machine == "x86_64",
        missing_caps: latscope_probe::missing_capabilities(),
        all: kf.missing_for_all().cloned().collect(),
        syscalls: kf.missing_for_syscalls().cloned().collect(),
        fallbacks: kf.features.iter().filter(|f| !f.present && f.fallback.is_some()).cloned().collect(),
    };
    if a.json.json {
        let feats: Vec<_> = kf
            .features
            .iter()
            .map(|f| {
                serde_json::json!({
                    "key": f.key, "what": f.what, "since": f.since, "present": f.present,
                    "needed_for": f.needed_for, "fallback": f.fallback,
                })
            })
            .collect();
        let out = serde_json::json!({
            "kernel": release,
            "machine": machine,
            "architecture_supported": v.arch_ok,
            "missing_capabilities": v.missing_caps,
            "features": feats,
            "probes": {
                "syscalls": v.syscalls(),
                "block": v.block_and_process(),
                "process": v.block_and_process(),
            },
            "notes": notes(&v),
            "steal_clock": steal_line(latscope_probe::features::steal_clock()),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", render(&release, &machine, &kf, &v));
    }
    Ok(ExitCode::from(if v.syscalls() {
        0
    } else if v.block_and_process() {
        1
    } else {
        2
    }))
}

/// What is lost or slower, one sentence each.
fn notes(v: &Verdict) -> Vec<String> {
    let mut n = Vec::new();
    if !v.arch_ok {
        n.push("the probes support x86_64 only (the syscall table and argument layouts are x86_64's)".to_string());
    }
    if !v.missing_caps.is_empty() {
        n.push(format!(
            "run latscope as root (or give it CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH); missing: {}",
            v.missing_caps.join(", ")
        ));
    }
    n.extend(v.all.iter().chain(&v.syscalls).chain(&v.fallbacks).map(Feature::describe_missing));
    if v.block_and_process() && !v.syscalls() {
        n.push("block and process probes run here: record with --syscalls none".to_string());
    }
    n
}

/// What `record --why` does with the time a hypervisor takes from a call's CPU, here.
fn steal_line(c: StealClock) -> &'static str {
    match c {
        StealClock::BareMetal => "none (bare metal)",
        StealClock::Read(_) => "read from the KVM steal clock: record --why files it as run queue, not on CPU",
        StealClock::Unreadable => {
            "not readable (a virtual machine whose kernel BTF lacks steal_time or CONFIG_FAIR_GROUP_SCHED): \
             record --why counts it as on CPU"
        }
    }
}

fn render(release: &str, machine: &str, kf: &KernelFeatures, v: &Verdict) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "kernel {release} ({machine})");
    let _ = writeln!(s);
    let _ = writeln!(s, "  {:<8} {:<7} feature", "present", "since");
    for f in &kf.features {
        let mark = if f.present {
            "yes"
        } else if f.fallback.is_some() {
            "no (ok)"
        } else {
            "NO"
        };
        let _ = writeln!(s, "  {mark:<8} {:<7} {}", f.since, f.what);
    }
    let _ = writeln!(s);
    let yn = |b: bool| if b { "run" } else { "cannot run" };
    let _ = writeln!(s, "syscall probes:           {}", yn(v.syscalls()));
    let _ = writeln!(s, "block and process probes: {}", yn(v.block_and_process()));
    let _ = writeln!(s, "steal time:               {}", steal_line(latscope_probe::features::steal_clock()));
    for n in notes(v) {
        let _ = writeln!(s, "note: {n}");
    }
    s
}
