//! The task identity fields the probes read per event (`proc.tty`, `user.loginuid`,
//! `group.gid`, `group.name`, `proc.vpid`, `thread.vtid`), against ground truth: a recorded
//! command runs `cat` on a file of its own under the tools that change each one (`setsid`,
//! `script` for a pseudo-terminal, a write to /proc/self/loginuid, `setpriv --regid`,
//! `unshare --pid --fork`), and each field's filter keeps exactly that process's one open.

mod common;

use common::{bin, latscope_ok, require_bpf, require_tool};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;

/// `(pid, path) -> count` of the openat events `filter` keeps among the test's markers.
fn opens(trace: &str, dir: &str, filter: &str) -> BTreeMap<(u32, String), u64> {
    let f = format!("evt.type = openat and fd.name startswith {dir}/m- and ({filter})");
    let mut m = BTreeMap::new();
    for l in latscope_ok(&["events", "-r", trace, "--json", &f]).lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(l).unwrap();
        let path = v["path"].as_str().unwrap().rsplit('/').next().unwrap().to_string();
        *m.entry((v["pid"].as_u64().unwrap() as u32, path)).or_insert(0) += 1;
    }
    m
}

#[test]
fn tty_loginuid_gid_and_namespace_pids_match_what_the_tools_set() {
    let test = "tty_loginuid_gid_and_namespace_pids_match_what_the_tools_set";
    if !require_bpf(test) {
        return;
    }
    for tool in ["setsid", "script", "setpriv", "unshare"] {
        if !require_tool(test, tool) {
            return;
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let d = dir.to_str().unwrap();
    // A group of this machine, for group.name.
    let groups = std::fs::read_to_string("/etc/group").unwrap();
    let (gname, gid) = groups
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            Some((f.first()?.to_string(), f.get(2)?.parse::<u32>().ok()?))
        })
        .find(|(_, g)| *g != 0)
        .expect("a group other than root in /etc/group");
    // Each case opens its own marker file (absent: the open fails, which is still one event).
    let script = format!(
        "cat {d}/m-plain 2>/dev/null
         setsid -w cat {d}/m-setsid 2>/dev/null
         script -qec \"cat {d}/m-tty 2>/dev/null; awk '{{print \\$7}}' /proc/self/stat > {d}/ttynr\" /dev/null >/dev/null
         sh -c 'echo 4321 > /proc/self/loginuid && exec cat {d}/m-login 2>/dev/null'
         setpriv --regid {gid} --clear-groups cat {d}/m-gid 2>/dev/null
         unshare --pid --fork cat {d}/m-ns 2>/dev/null
         true"
    );
    let trace = dir.join("t.lst");
    let o = Command::new(bin())
        .args(["record", "--no-block", "--quiet", "--syscalls", "all", "-w"])
        .arg(&trace)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert!(o.status.success(), "record: {}", String::from_utf8_lossy(&o.stderr));
    let t = trace.to_str().unwrap();

    // Every marker opened once, by its own process.
    let all = opens(t, d, "evt.type = openat");
    let by_case: BTreeMap<String, u32> = all.keys().map(|(p, m)| (m.clone(), *p)).collect();
    assert_eq!(all.len(), 6, "one open per case: {all:?}");
    assert!(all.values().all(|&n| n == 1), "{all:?}");
    let only = |m: &str| BTreeMap::from([((by_case[m], m.to_string()), 1u64)]);
    let these = |ms: &[&str]| -> BTreeMap<(u32, String), u64> { ms.iter().flat_map(|m| only(m)).collect() };
    let others = |ms: &[&str]| -> BTreeMap<(u32, String), u64> {
        all.iter().filter(|((_, m), _)| !ms.contains(&m.as_str())).map(|(k, v)| (k.clone(), *v)).collect()
    };

    // proc.tty: the pseudo-terminal `script` made, as /proc/PID/stat's tty_nr says; none after
    // setsid. The others have the test's own terminal (or none).
    let ttynr: u32 = std::fs::read_to_string(dir.join("ttynr")).unwrap().trim().parse().unwrap();
    assert!(ttynr >> 8 == 136, "script gave a pseudo-terminal (major 136): tty_nr {ttynr}");
    assert_eq!(opens(t, d, &format!("proc.tty = {ttynr}")), only("m-tty"), "proc.tty = {ttynr}");
    let own: u32 = std::fs::read_to_string("/proc/self/stat")
        .unwrap()
        .rsplit(')')
        .next()
        .unwrap()
        .split(' ')
        .nth(5)
        .unwrap()
        .parse()
        .unwrap();
    if own == 0 {
        assert_eq!(opens(t, d, "proc.tty = 0"), others(&["m-tty"]), "proc.tty = 0");
    } else {
        assert_eq!(opens(t, d, "proc.tty = 0"), only("m-setsid"), "proc.tty = 0");
    }

    // user.loginuid: what the write set; the others keep the test's own (-1 when unset).
    assert_eq!(opens(t, d, "user.loginuid = 4321"), only("m-login"), "user.loginuid = 4321");
    let own_login: i64 = match std::fs::read_to_string("/proc/self/loginuid").unwrap().trim().parse::<u32>().unwrap() {
        u32::MAX => -1,
        u => i64::from(u),
    };
    if own_login != 4321 {
        assert_eq!(opens(t, d, &format!("user.loginuid = {own_login}")), others(&["m-login"]), "own loginuid");
    }

    // group.gid and group.name: setpriv's group; the others root's.
    assert_eq!(opens(t, d, &format!("group.gid = {gid}")), only("m-gid"), "group.gid = {gid}");
    assert_eq!(opens(t, d, &format!("group.name = '{gname}'")), only("m-gid"), "group.name = {gname}");
    assert_eq!(opens(t, d, "group.gid = 0 and group.name = root"), others(&["m-gid"]), "group root");

    // proc.vpid and thread.vtid: 1 for unshare's child, the first of its pid namespace; the
    // pid itself elsewhere.
    assert_eq!(opens(t, d, "proc.vpid = 1 and thread.vtid = 1"), only("m-ns"), "vpid 1");
    assert_eq!(opens(t, d, "proc.vpid = 1"), only("m-ns"));
    assert_eq!(
        opens(t, d, "proc.vpid != 1 and proc.vpid = val(proc.pid) and thread.vtid = val(thread.tid)"),
        others(&["m-ns"])
    );
    assert_eq!(these(&["m-ns"]).len(), 1);

    // `events --json` carries the same values.
    let json = latscope_ok(&["events", "-r", t, "--json", &format!("evt.type = openat and fd.name contains {d}/m-")]);
    let rows: Vec<Value> =
        json.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect();
    let row = |m: &str| rows.iter().find(|r| r["path"].as_str().is_some_and(|p| p.ends_with(m))).unwrap();
    assert_eq!(row("m-login")["loginuid"], 4321);
    assert_eq!(row("m-tty")["tty"], ttynr);
    assert_eq!(row("m-gid")["gid"], gid);
    assert_eq!((row("m-ns")["vpid"].as_u64(), row("m-ns")["vtid"].as_u64()), (Some(1), Some(1)));
}
