//! The fuzz harness (`fuzz/fuzz_targets/filter_parse.rs`) run on seeded random and mutated
//! inputs, so that `cargo test` covers it without a nightly toolchain.
//!
//! `LATSCOPE_FUZZ_CASES=200000 cargo test -p latscope-filter --release --test fuzz_seeded` runs more.

use latscope_filter::fuzz_support::check_str;
use latscope_trace::synth::Rng;

const CORPUS: &[&str] = &[
    "proc.name=httpd",
    "proc.name=httpd and fd.type=file",
    "proc.name=httpd and fd.type=file and evt.latency > 1000000",
    "evt.latency > 1000000000",
    "proc.name=test and evt.is_io_write=true and fd.name contains /mnt",
    "evt.type in (read, write, openat) or not (blk.disk = vda and blk.op != flush)",
    "fd.name pmatch (/mnt, /etc) and proc.exe glob '/usr/*/h[a-z]?pd'",
    "evt.res = ENOENT or evt.rawres < -1 or evt.failed",
    "container.id in (host, 1a2b) and user.name icontains ROO",
    "blk.dev = 253:0 and blk.bytes >= 4KiB and blk.qtime > 1 ms",
    "evt.time > 0 and evt.reltime <= 5s and fd.directory = /mnt/data",
    "thread.tid != 7 and proc.ppid exists and fd.filename endswith .log",
    "evt.kind = proc and evt.type = proc_exec",
    "fd.name = \"quoted \\\" value\" or proc.name = 'it\\'s'",
    "fd.sport = 80 and fd.cip != 10.0.0.7 or fd.port in (53, 5120) and fd.l4proto = udp",
    "fd.lip = ::1 and fd.rport > 1024 and not fd.rip startswith 10.",
    "evt.time > 2026-11-22T22:30:13Z and evt.datetime <= '1970-01-01 00:00:01.5+01:00'",
    "evt.arg.dirfd = AT_FDCWD and evt.arg.flags contains O_CREAT and evt.arg.mode = 0644",
    "evt.args contains 'fd=3' or evt.arg.res in (ENOENT, ERESTARTNOHAND) or evt.arg.size >= 4KiB",
    "proc.cmdline contains 'http.server' and proc.args startswith -m",
    "tolower(proc.name) = httpd and len(fd.name) > 3 or basename(fd.name) regex '.*\\.log'",
    "proc.name == oneof (httpd, test) and fd.name startswith anyof (/mnt, /etc) or proc.name != allof (a, b)",
    "join(\"->\", (proc.name, toupper(fd.filename))) = httpd->X and concat(proc.name, \"x\") iglob H*",
    "proc.aname[1] = httpd and proc.apid = 1 and proc.pname exists and evt.arg[0] startswith 3",
    "evt.rawarg.size >= 4096 and evt.buflen = val(evt.arg.size) and fd.ip = 10.0.0.1",
    "fd.net = 10.0.0.0/8 and fd.snet in (::1/128) and not fd.connected and fd.typechar = 4",
    "proc.name in () or proc.pid intersects (1, 2) or proc.name < m or evt.num > 2",
    "proc.name = \"\\x68ttpd\" or evt.source = syscall",
];

const PIECES: &[&str] = &[
    " ",
    "(",
    ")",
    ",",
    "=",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "'",
    "\"",
    "\\",
    "and",
    "or",
    "not",
    "exists",
    "in",
    "pmatch",
    "contains",
    "glob",
    "proc.name",
    "evt.latency",
    "fd.type",
    "evt.type",
    "blk.dev",
    "1ms",
    "-1",
    "99999999999999999999999999999",
    "0x",
    "*",
    "[",
    "]",
    "?",
    "é",
    "\u{201c}",
    "\0",
    "\n",
    "5 parsecs",
    "4KiB",
    "ENOENT",
    "true",
    ":",
    "syscall_",
    ".",
    "evt.",
    "[1]",
    "fd.sip",
    "fd.port",
    "evt.arg.",
    "proc.args",
    "2026-11-22T22:30:13Z",
    "+01:00",
    "::1",
    "->",
    "tolower(",
    "len(",
    "join(",
    "concat(",
    "b64(",
    "val(",
    " oneof ",
    " anyof ",
    " allof ",
    "regex",
    "iglob",
    "intersects",
    "bcontains",
    "proc.aname[",
    "evt.rawarg.",
    "evt.arg[",
    "fd.net",
    "/8",
    "\\x",
    "()",
];

fn mutate(r: &mut Rng, s: &str) -> String {
    let mut v: Vec<char> = s.chars().collect();
    for _ in 0..1 + r.index(4) {
        let at = r.index(v.len() + 1);
        match r.index(5) {
            0 if !v.is_empty() => {
                let end = (at + 1 + r.index(6)).min(v.len());
                v.drain(at.min(v.len())..end);
            }
            1 => {
                for (k, c) in r.pick(PIECES).chars().enumerate() {
                    v.insert((at + k).min(v.len()), c);
                }
            }
            2 if !v.is_empty() => {
                let i = at.min(v.len() - 1);
                v[i] = r.pick(PIECES).chars().next().unwrap_or('x');
            }
            3 => {
                // Splice a piece of another corpus entry.
                let other: Vec<char> = r.pick(CORPUS).chars().collect();
                let a = r.index(other.len());
                let b = (a + r.index(20)).min(other.len());
                for (k, c) in other[a..b].iter().enumerate() {
                    v.insert((at + k).min(v.len()), *c);
                }
            }
            _ => {
                let n = r.index(8);
                for k in 0..n {
                    v.insert((at + k).min(v.len()), char::from(32 + r.index(95) as u8));
                }
            }
        }
    }
    v.into_iter().collect()
}

#[test]
fn seeded_random_and_mutated_filters_pass_every_harness_check() {
    let cases: usize = std::env::var("LATSCOPE_FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let mut r = Rng::new(0x1a75_c09e);
    let mut parsed = 0usize;
    for i in 0..cases {
        let input = match i % 4 {
            // Pure noise from the token alphabet.
            0 => (0..r.index(12)).map(|_| *r.pick(PIECES)).collect::<Vec<_>>().join(if r.index(2) == 0 {
                " "
            } else {
                ""
            }),
            _ => {
                let mut s = r.pick(CORPUS).to_string();
                for _ in 0..1 + r.index(3) {
                    s = mutate(&mut r, &s);
                }
                s
            }
        };
        let ok = latscope_filter::Filter::parse(&input).is_ok();
        parsed += usize::from(ok);
        check_str(&input);
    }
    for c in CORPUS {
        check_str(c);
        assert!(latscope_filter::Filter::parse(c).is_ok(), "{c}");
    }
    println!("{cases} inputs, {parsed} parsed");
    assert!(parsed > cases / 50, "the mutator should keep some inputs valid ({parsed})");
}
