//! The Debian package (`make deb`: packaging/deb.sh) built from the binary under test, checked
//! with dpkg-deb, installed with dpkg into this system and used as a host would (man pages, bash
//! completion, the agent started by its unit's own command lines and scraped), then removed and
//! purged, leaving the system as it was; and `make install` / `make uninstall` into a DESTDIR.
//!
//! systemd is not PID 1 here, so `systemctl start` cannot run: the unit is checked with
//! `systemd-analyze verify` and its ExecStartPre and ExecStart lines are run as systemd would run
//! them.

mod common;
#[path = "../../export/tests/support/mod.rs"]
mod support;

use common::run_ok;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::{free_port, http_get, wait_for, Proc};

/// The repository's root (packaging/, Makefile).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// dpkg's status of the package ("install ok installed", "deinstall ok config-files"), or "" when
/// dpkg does not know it.
fn status() -> String {
    let o = Command::new("dpkg-query").args(["-W", "-f=${Status}", "latscope"]).output().unwrap();
    if o.status.success() {
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    } else {
        String::new()
    }
}

/// Purges the package when dropped: a failing test leaves nothing installed.
struct PurgeOnDrop;

impl Drop for PurgeOnDrop {
    fn drop(&mut self) {
        if !status().is_empty() {
            let _ = Command::new("dpkg").args(["--purge", "latscope"]).output();
        }
    }
}

/// Every path under `dir` (files, links, directories), to compare before and after.
fn tree(dir: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(e.path());
            }
            out.insert(e.path());
        }
    }
    out
}

/// The commands `latscope --help` lists (each has a man page).
fn commands() -> Vec<String> {
    let help = common::latscope_ok(&["--help"]);
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        // A description's continuation lines are indented further.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn deb_installs_starts_the_agent_as_its_unit_does_and_purges_to_the_system_before() {
    let test = "deb_installs_starts_the_agent_as_its_unit_does_and_purges_to_the_system_before";
    if !common::require_bpf(test)
        || !common::require_tool(test, "dpkg-deb")
        || !common::require_tool(test, "dpkg-shlibdeps")
    {
        return;
    }
    if !status().is_empty() {
        latscope_testkit::skip(test, &format!("a latscope package is on this system ({}): not replacing it", status()));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // zstd: the same package in a second (xz, make deb's default, takes half a minute).
    let built = run_ok(
        Command::new("bash")
            .arg(repo().join("packaging/deb.sh"))
            .arg(common::bin())
            .arg(dir.path())
            .env("DEB_COMPRESS", "zstd"),
    );
    let deb = PathBuf::from(built.trim());
    let arch = run_ok(Command::new("dpkg").arg("--print-architecture")).trim().to_string();
    assert_eq!(deb, dir.path().join(format!("latscope_{}_{arch}.deb", env!("CARGO_PKG_VERSION"))));

    // The control file: the libraries the binary links (libbpf is built in), the conffile.
    let control = run_ok(Command::new("dpkg-deb").arg("--field").arg(&deb));
    let depends = control.lines().find_map(|l| l.strip_prefix("Depends: ")).unwrap_or_else(|| panic!("{control}"));
    for lib in ["libc6 (>= ", "libelf1 (>= ", "zlib1g (>= ", "libgcc-s1 (>= "] {
        assert!(depends.contains(lib), "Depends lacks {lib}: {depends}");
    }
    assert!(!depends.contains("libbpf"), "libbpf is linked statically: {depends}");
    assert_eq!(run_ok(Command::new("dpkg-deb").arg("--info").arg(&deb).arg("conffiles")), "/etc/latscope/agent.toml\n");
    for script in ["postinst", "prerm", "postrm"] {
        run_ok(Command::new("dpkg-deb").arg("--info").arg(&deb).arg(script));
    }

    // The files, each where Debian looks for it.
    let listing = run_ok(Command::new("dpkg-deb").arg("--contents").arg(&deb));
    let entries: Vec<(bool, PathBuf)> = listing
        .lines()
        .filter_map(|l| {
            let path = l.split_whitespace().nth(5)?.strip_prefix('.')?;
            (path != "/").then(|| (l.starts_with('d'), PathBuf::from(path.trim_end_matches('/'))))
        })
        .collect();
    let files: BTreeSet<PathBuf> = entries.iter().filter(|(d, _)| !d).map(|(_, p)| p.clone()).collect();
    let mut want: Vec<String> = [
        "/usr/bin/latscope",
        "/lib/systemd/system/latscope-agent.service",
        "/etc/latscope/agent.toml",
        "/usr/share/latscope/grafana/latscope.json",
        "/usr/share/bash-completion/completions/latscope",
        "/usr/share/zsh/vendor-completions/_latscope",
        "/usr/share/fish/vendor_completions.d/latscope.fish",
        "/usr/share/doc/latscope/copyright",
        "/usr/share/doc/latscope/changelog.gz",
        "/usr/share/man/man1/latscope.1.gz",
    ]
    .map(String::from)
    .to_vec();
    let cmds = commands();
    assert!(cmds.len() >= 15 && cmds.contains(&"agent".to_string()), "{cmds:?}");
    want.extend(cmds.iter().map(|c| format!("/usr/share/man/man1/latscope-{c}.1.gz")));
    want.push("/usr/share/man/man1/latscope-replay-run.1.gz".into());
    for w in &want {
        assert!(files.contains(Path::new(w)), "{w} is not in the package:\n{listing}");
    }
    if Command::new("sh").args(["-c", "command -v lintian"]).output().is_ok_and(|o| o.status.success()) {
        run_ok(Command::new("lintian").args(["--fail-on", "error"]).arg(&deb));
    }

    // The system before: none of the package's files, which directories there were, the units
    // enabled.
    if let Some(f) = files.iter().find(|f| f.exists()) {
        latscope_testkit::skip(test, &format!("{} exists already: installing would overwrite it", f.display()));
        return;
    }
    let dirs_before: BTreeSet<PathBuf> =
        entries.iter().filter(|(d, p)| *d && p.is_dir()).map(|(_, p)| p.clone()).collect();
    let units_before = tree(Path::new("/etc/systemd/system"));
    let run_before = Path::new("/run/latscope").exists();

    let _purge = PurgeOnDrop;
    run_ok(Command::new("dpkg").arg("--install").arg(&deb));
    assert_eq!(status(), "install ok installed");
    for f in &files {
        assert!(f.exists(), "{} is not installed", f.display());
    }
    let version = run_ok(Command::new("/usr/bin/latscope").arg("--version"));
    assert_eq!(version.trim(), format!("latscope {}", env!("CARGO_PKG_VERSION")));
    let ldd = run_ok(Command::new("ldd").arg("/usr/bin/latscope"));
    assert!(!ldd.contains("not found"), "{ldd}");

    // A man page per command, found by man and rendered.
    let page = Path::new("/usr/share/man/man1/latscope-record.1.gz");
    if Command::new("sh").args(["-c", "command -v man"]).output().is_ok_and(|o| o.status.success()) {
        let text = run_ok(Command::new("man").args(["-l"]).arg(page).env("MANWIDTH", "100"));
        assert!(text.contains("NAME") && text.contains("SYNOPSIS") && text.contains("latscope record"), "{text}");
        assert!(text.contains("latscope record -w trace.lst"), "the examples are in the page:\n{text}");
        assert_eq!(run_ok(Command::new("man").args(["-w", "latscope-record"])).trim(), page.to_str().unwrap());
    } else {
        let roff = run_ok(Command::new("gzip").args(["-dc"]).arg(page));
        assert!(roff.contains(".TH latscope-record 1"), "{roff}");
    }

    // bash loads the completion and completes a command's name.
    let bash = run_ok(Command::new("bash").arg("-c").arg(
        "source /usr/share/bash-completion/completions/latscope; complete -p latscope; \
         COMP_WORDS=(latscope rec); COMP_CWORD=1; _latscope latscope rec latscope; echo \"words: ${COMPREPLY[*]}\"",
    ));
    assert!(bash.contains("-F _latscope latscope"), "{bash}");
    assert!(bash.contains("words: record"), "{bash}");

    // The unit as systemd would read it (offline), and its command lines as systemd runs them.
    let unit_path = "/lib/systemd/system/latscope-agent.service";
    if Command::new("sh").args(["-c", "command -v systemd-analyze"]).output().is_ok_and(|o| o.status.success()) {
        let o = Command::new("systemd-analyze").args(["verify", unit_path]).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success() && !err.contains("latscope-agent"), "systemd-analyze verify: {err}");
    }
    let unit = std::fs::read_to_string(unit_path).unwrap();
    let exec = |key: &str| -> Vec<String> {
        let line = unit.lines().find_map(|l| l.strip_prefix(key)).unwrap_or_else(|| panic!("no {key} in\n{unit}"));
        line.split_whitespace().map(str::to_string).collect()
    };
    let (pre, start) = (exec("ExecStartPre="), exec("ExecStart="));
    assert_eq!(start[0], "/usr/bin/latscope", "{unit}");
    let checked = run_ok(Command::new(&pre[0]).args(&pre[1..]));
    assert!(checked.starts_with("/etc/latscope/agent.toml: 3 series"), "{checked}");
    // A free port instead of the configured 9465, which a running agent may hold.
    let port = free_port();
    let agent = Proc::spawn(
        Command::new(&start[0]).args(&start[1..]).args(["--listen", &format!("127.0.0.1:{port}")]),
        &dir.path().join("agent.log"),
    );
    let metrics = wait_for(Duration::from_secs(60), || {
        let (code, _, body) = http_get(port, "/metrics", &[("Accept", "text/plain")]).ok()?;
        let text = String::from_utf8_lossy(&body).into_owned();
        (code == 200 && text.contains("series=\"disks\"")).then_some(text)
    })
    .unwrap_or_else(|| panic!("the agent did not serve /metrics:\n{}", agent.output()));
    // The three series of the installed configuration.
    for series in ["syscalls", "io_classes", "disks"] {
        let line = format!("series=\"{series}\"");
        assert!(
            metrics.lines().any(|l| l.starts_with("latscope_agent_events_total{") && l.contains(&line)),
            "{series} is not served:\n{metrics}"
        );
    }
    // systemctl stop sends SIGTERM: the agent ends cleanly.
    // SAFETY: kill has no memory preconditions; the pid is our child's, not yet waited for.
    unsafe { libc::kill(agent.child.id() as i32, libc::SIGTERM) };
    let mut agent = agent;
    let stopped = wait_for(Duration::from_secs(30), || agent.child.try_wait().ok().flatten());
    assert!(stopped.is_some_and(|s| s.success()), "the agent did not stop on SIGTERM: {stopped:?}\n{}", agent.output());

    // Remove: the program goes, the (edited) configuration stays; purge: that goes too.
    let conf = Path::new("/etc/latscope/agent.toml");
    let edited = format!("{}\n# edited on this host\n", std::fs::read_to_string(conf).unwrap());
    std::fs::write(conf, &edited).unwrap();
    run_ok(Command::new("dpkg").args(["--remove", "latscope"]));
    assert_eq!(status(), "deinstall ok config-files");
    assert!(!Path::new("/usr/bin/latscope").exists());
    assert_eq!(std::fs::read_to_string(conf).unwrap(), edited, "remove keeps the edited configuration");
    run_ok(Command::new("dpkg").args(["--purge", "latscope"]));
    assert_eq!(status(), "", "dpkg still knows the package after purge");
    for f in &files {
        assert!(!f.exists(), "{} is left after purge", f.display());
    }
    for (_, d) in entries.iter().filter(|(d, p)| *d && !dirs_before.contains(p)) {
        assert!(!d.exists(), "the directory {} is left after purge", d.display());
    }
    assert!(!Path::new("/etc/latscope").exists());
    assert_eq!(tree(Path::new("/etc/systemd/system")), units_before, "the enabled units changed");
    assert_eq!(Path::new("/run/latscope").exists(), run_before);
}

#[test]
fn make_install_puts_the_package_files_under_destdir_and_uninstall_removes_them() {
    let test = "make_install_puts_the_package_files_under_destdir_and_uninstall_removes_them";
    if !common::require_tool(test, "make") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("root");
    let make = |target: &str| {
        run_ok(
            Command::new("make")
                .arg("-s")
                .arg("-C")
                .arg(repo())
                .arg(target)
                .arg(format!("DESTDIR={}", dest.display()))
                .arg("PREFIX=/usr/local")
                .arg(format!("BIN={}", common::bin().display())),
        )
    };
    make("install");
    let installed = tree(&dest);
    for f in [
        "usr/local/bin/latscope",
        "usr/local/lib/systemd/system/latscope-agent.service",
        "etc/latscope/agent.toml",
        "usr/local/share/latscope/grafana/latscope.json",
        "usr/local/share/man/man1/latscope-agent.1.gz",
        "usr/local/share/bash-completion/completions/latscope",
        "usr/local/share/zsh/site-functions/_latscope",
        "usr/local/share/fish/vendor_completions.d/latscope.fish",
        "usr/local/share/doc/latscope/copyright",
    ] {
        assert!(installed.contains(&dest.join(f)), "{f} is not installed:\n{installed:?}");
    }
    // The unit starts the binary where this install put it.
    let unit = std::fs::read_to_string(dest.join("usr/local/lib/systemd/system/latscope-agent.service")).unwrap();
    assert!(unit.contains("\nExecStart=/usr/local/bin/latscope agent --config /etc/latscope/agent.toml\n"), "{unit}");
    let version = run_ok(Command::new(dest.join("usr/local/bin/latscope")).arg("--version"));
    assert_eq!(version.trim(), format!("latscope {}", env!("CARGO_PKG_VERSION")));

    // An edited configuration survives a reinstall and an uninstall; everything else goes.
    let conf = dest.join("etc/latscope/agent.toml");
    std::fs::write(&conf, "listen = \"127.0.0.1:9999\"\n").unwrap();
    make("install");
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), "listen = \"127.0.0.1:9999\"\n");
    make("uninstall");
    let files: Vec<PathBuf> = tree(&dest).into_iter().filter(|p| !p.is_dir()).collect();
    assert_eq!(files, vec![conf.clone()], "uninstall leaves only the edited configuration");
    std::fs::remove_file(&conf).unwrap();
    std::fs::copy(repo().join("packaging/agent.toml"), &conf).unwrap();
    make("uninstall");
    assert!(!dest.join("etc/latscope").exists(), "the default configuration is removed with its directory");
}
