//! Tracing live: which syscalls, which processes, how large a ring buffer.

use latscope_event::units::parse_size;
use latscope_event::SyscallSet;
use latscope_filter::Filter;
use latscope_live::SessionBuilder;

/// Which syscalls to trace live.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyscallsArg {
    /// Every syscall.
    All,
    /// Syscalls that take, create or return a file descriptor, take a path, change the fd table
    /// (clone, fork, unshare) or sync: all a replay of file I/O needs.
    Io,
    /// No syscalls (block requests and processes only).
    None,
}

impl From<SyscallsArg> for SyscallSet {
    fn from(a: SyscallsArg) -> SyscallSet {
        match a {
            SyscallsArg::All => SyscallSet::All,
            SyscallsArg::Io => SyscallSet::Io,
            SyscallsArg::None => SyscallSet::None,
        }
    }
}

/// Tracing live: which syscalls, which processes, how large a ring buffer.
#[derive(clap::Args, Debug, Clone)]
pub struct LiveArgs {
    /// Which syscalls to trace.
    #[arg(long, value_enum, default_value = "all")]
    pub syscalls: SyscallsArg,
    /// Only these processes (repeatable). Block requests are traced for every process (their
    /// issuer is often a kernel thread): narrow them with a filter such as `blk.disk = sda`.
    #[arg(short = 'p', long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,
    /// With -p: also every process below them, like strace -f: those running at the start and
    /// every child forked from then on (children of children too; threads always are). The
    /// kernel adds each child as it forks and drops it when it exits; children that do not fit
    /// (65536 processes at once) are counted and reported. E.g. `-p $(pgrep -o nginx) -f`.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// Only tasks in this cgroup v2 cgroup or below it (repeatable): a directory of the cgroup2
    /// file system, absolute or relative to its mount (`system.slice/nginx.service`), or a
    /// systemd unit name (`nginx.service`, `session-2.scope`). Block requests are traced for
    /// every process, as with -p. E.g. `--cgroup system.slice/postgresql.service`.
    #[arg(long = "cgroup", value_name = "PATH")]
    pub cgroups: Vec<String>,
    /// Only these command names (repeatable; the kernel keeps 15 characters).
    #[arg(short = 'c', long = "comm", value_name = "COMM")]
    pub comms: Vec<String>,
    /// The kernel's ring buffer, 1MiB to 1GiB (e.g. 256MiB); larger absorbs longer bursts.
    /// Default 64MiB; with record --ring, half the ring, 8MiB to 64MiB (the buffer counts twice
    /// in the process's RSS: it is mapped twice). On x86, events without paths or --why are
    /// first written to a ring per CPU, together up to half this size (256KiB to 8MiB each).
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub buffer_size: Option<u64>,
}

impl LiveArgs {
    /// A session builder with these limits and `filter`.
    pub fn session(&self, filter: Filter) -> SessionBuilder {
        SessionBuilder::new()
            .syscalls(self.syscalls.into())
            .pids(self.pids.clone())
            .follow(self.follow)
            .cgroups(self.cgroups.clone())
            .comms(self.comms.clone())
            .ring_bytes(usize::try_from(self.buffer_size.unwrap_or(DEFAULT_BUFFER_SIZE)).unwrap_or(usize::MAX))
            .filter(filter)
    }
}

/// The kernel's ring buffer when --buffer-size is not given (and not --ring).
pub const DEFAULT_BUFFER_SIZE: u64 = 64 << 20;

/// Prints the session's warnings (options the kernel cannot honour as given).
pub fn print_warnings(warnings: &[String]) {
    for w in warnings {
        eprintln!("latscope: warning: {w}");
    }
}

/// `--call-graph`: how the user stacks of a recording with stacks are walked.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct CallGraphArg {
    /// How user stacks are walked (with stacks): `dwarf` (the default) copies the top 8 KiB of
    /// a user stack beside it and unwinds it from the binaries' unwind tables (.eh_frame), as
    /// `perf record --call-graph dwarf` does, so that code built without frame pointers (most
    /// distributions' libraries, Python, PostgreSQL) shows its callers; `dwarf,BYTES` copies
    /// BYTES (a power of two, 256 to 16384; deeper stacks need more); `fp` follows frame
    /// pointers only (cheaper; a stack through code without them stops after its first frame).
    #[arg(long, value_name = "fp|dwarf[,BYTES]", default_value = "dwarf", value_parser = parse_call_graph)]
    pub call_graph: u32,
}

/// `fp` -> 0, `dwarf` -> 8192, `dwarf,BYTES` -> BYTES.
fn parse_call_graph(s: &str) -> Result<u32, String> {
    let (mode, size) = match s.split_once(',') {
        Some((m, n)) => (m, Some(n)),
        None => (s, None),
    };
    match (mode, size) {
        ("fp", None) => Ok(0),
        ("dwarf", None) => Ok(8192),
        ("dwarf", Some(n)) => {
            let b = latscope_event::units::parse_size(n).map_err(|e| format!("dwarf,BYTES: {e}"))?;
            match u32::try_from(b) {
                Ok(b) if (256..=16384).contains(&b) && b.is_power_of_two() => Ok(b),
                _ => Err(format!(
                    "dwarf,{n}: the copy must be a power of two from 256 to 16384 bytes (e.g. dwarf,16384)"
                )),
            }
        }
        _ => Err(format!("'{s}': expected fp, dwarf or dwarf,BYTES (e.g. --call-graph dwarf,16384)")),
    }
}
