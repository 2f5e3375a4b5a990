//! `init`: the starting tree on disk, trash and purge, refusals.

mod common;
use common::*;
use latscope_replay::{init, pattern, plan_events, sandbox, InitOptions, Plan, PrepareOptions, SandboxChoice};
use std::path::Path;

fn plan_in(r: &Rec, root: &Path) -> Plan {
    let opts = PrepareOptions { sandbox: SandboxChoice::Root(root.to_str().unwrap().into()), filter: None };
    plan_events(&r.events(), &opts).expect("plan")
}

#[test]
fn init_builds_every_file_and_directory_used_before_it_is_created() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("sb");
    let mut r = Rec::new();
    r.open(100, "/w/a/data", O_RDONLY, 3).pread(100, 3, 4096, 0, 4096).pread(100, 3, 100, 1_000_000, 100).close(100, 3);
    r.path_op(100, "newfstatat", "/w/b/stat-only", 0);
    r.open(100, "/w/new", O_CREAT | O_WRONLY, 3).close(100, 3);
    r.path_op(100, "readlink", "/w/lnk", 11);
    let p = plan_in(&r, &root);
    let rep = init(&p, &InitOptions::default()).unwrap();
    assert_eq!((rep.files, rep.dirs, rep.symlinks), (2, 3, 1), "{rep:?}");
    let data = std::fs::read(root.join("w/a/data")).unwrap();
    assert_eq!(data.len(), 1_000_100);
    assert!(data.iter().enumerate().all(|(i, &b)| b == pattern::byte(i as u64)), "pattern, never zero");
    assert_eq!(std::fs::metadata(root.join("w/b/stat-only")).unwrap().len(), 0);
    assert!(!root.join("w/new").exists(), "created by the replay, not by init");
    assert_eq!(std::fs::read_link(root.join("w/lnk")).unwrap().as_os_str().len(), 11);
    assert_eq!(rep.bytes, 1_000_100);
    assert!(sandbox::check_tree(&root).is_ok());
}

#[test]
fn init_again_moves_the_old_tree_to_the_trash_and_purge_empties_it() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("sb");
    let mut r = Rec::new();
    r.open(100, "/w/f", O_RDONLY, 3).read(100, 3, 10, 0, 10);
    let p = plan_in(&r, &root);
    init(&p, &InitOptions::default()).unwrap();
    std::fs::write(root.join("w/left-by-a-run"), b"x").unwrap();
    let rep = init(&p, &InitOptions::default()).unwrap();
    assert_eq!(rep.trashed.len(), 1);
    assert!(rep.trashed[0].join("w/left-by-a-run").exists());
    assert!(!root.join("w/left-by-a-run").exists());
    assert_eq!(std::fs::metadata(root.join("w/f")).unwrap().len(), 10);
    let removed = sandbox::purge(&p.meta.sandbox).unwrap();
    assert_eq!(removed.len(), 1);
    assert!(!rep.trashed[0].exists());
}

#[test]
fn init_refuses_a_directory_that_is_not_a_sandbox_and_touches_nothing() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("precious");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("keep"), b"mine").unwrap();
    let mut r = Rec::new();
    r.open(100, "/keep", O_RDONLY, 3).read(100, 3, 10, 0, 10);
    let p = plan_in(&r, &root);
    let e = init(&p, &InitOptions::default()).unwrap_err().to_string();
    assert!(e.contains("not a latscope sandbox"), "{e}");
    assert_eq!(std::fs::read(root.join("keep")).unwrap(), b"mine");
    assert_eq!(std::fs::read_dir(&root).unwrap().count(), 1);
}

#[test]
fn name_mode_never_touches_another_test() {
    let t = tempfile::tempdir().unwrap();
    let mnt = t.path().to_str().unwrap().to_string();
    let mut r = Rec::new();
    r.header.mounts.push(latscope_event::Mount {
        mount_point: mnt.clone(),
        fstype: "ext4".into(),
        ..Default::default()
    });
    r.open(100, &format!("{mnt}/f"), O_RDONLY, 3).read(100, 3, 10, 0, 10);
    let other = t.path().join(".latscope/other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("theirs"), b"x").unwrap();
    let opts = PrepareOptions { sandbox: SandboxChoice::Name("mine".into()), filter: None };
    let p = plan_events(&r.events(), &opts).unwrap();
    init(&p, &InitOptions::default()).unwrap();
    init(&p, &InitOptions::default()).unwrap();
    assert_eq!(std::fs::metadata(t.path().join(".latscope/mine/f")).unwrap().len(), 10);
    sandbox::purge(&p.meta.sandbox).unwrap();
    assert!(other.join("theirs").exists());
    assert_eq!(std::fs::read_dir(t.path().join(".latscope/.trash")).unwrap().count(), 0);
}

/// A plan whose starting tree asks for set-user-ID and set-group-ID files and directories (a
/// forged plan, or a recording of such files): init creates them without those bits, and an
/// error names the root given with `--root`, not the plan's.
#[test]
fn init_never_creates_setuid_files_and_names_the_root_given() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("sb");
    let mut r = Rec::new();
    r.open(100, "/w/a/data", O_RDONLY, 3).pread(100, 3, 4096, 0, 4096).close(100, 3);
    let mut p = plan_in(&r, &root);
    for e in &mut p.init {
        e.mode |= 0o6000;
    }
    p.validate().unwrap();
    init(&p, &InitOptions::default()).unwrap();
    for rel in ["w", "w/a", "w/a/data"] {
        let mode = std::fs::metadata(root.join(rel)).unwrap().permissions().mode();
        assert_eq!(mode & 0o6000, 0, "{rel}: mode {mode:o}");
    }
    // --root at a directory whose parent is a file: the error names that root.
    let blocker = t.path().join("file");
    std::fs::write(&blocker, b"x").unwrap();
    let other = blocker.join("sb2");
    let e = init(&p, &InitOptions { root: Some(other.clone()), ..Default::default() }).unwrap_err().to_string();
    assert!(e.contains(other.to_str().unwrap()) && !e.contains(root.to_str().unwrap()), "{e}");
}
