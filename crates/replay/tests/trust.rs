//! A plan is data from elsewhere and init and run work as root: what a plan asks for must never
//! grant privilege (file capabilities, privileged attribute namespaces, set-id or
//! world-writable modes) nor pin unbounded kernel memory; and nothing a sandbox's `--user`
//! puts in the sandbox is trusted by root's next init, run or purge.

mod common;
use common::*;
use latscope_event::SysDesc;
use latscope_replay::{
    init, plan_events, run, sandbox, InitOptions, Plan, PrepareOptions, RunOptions, SandboxChoice, XattrPolicy,
};
use std::ffi::CString;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// `cap_setuid=ep` as the kernel stores it (`struct vfs_cap_data`, revision 2).
const CAP_SETUID_EP: [u8; 20] = [1, 0, 0, 2, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
const NOBODY: u32 = 65534;

fn is_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test} needs root (file capabilities, trusted attributes, other users)");
    }
    eprintln!("SKIPPED {test}: needs root (file capabilities, trusted attributes, other users)");
    false
}

fn plan_in(r: &Rec, root: &Path) -> Plan {
    let opts = PrepareOptions { sandbox: SandboxChoice::Root(root.to_str().unwrap().into()), filter: None };
    plan_events(&r.events(), &opts).expect("plan")
}

/// A getxattr that found `name` with `value` on `path` (so the starting tree has it).
fn found_xattr(r: &mut Rec, path: &str, name: &str, value: &[u8]) {
    r.sys(100, 100, "getxattr", |e| {
        e.path = path.into();
        e.path2 = SysDesc::join_xattr(name, value);
        e.bytes = 256;
        e.ret = value.len() as i64;
    });
}

/// A setxattr of `name` to `value` on `path` that succeeded.
fn set_xattr(r: &mut Rec, path: &str, name: &str, value: &[u8]) {
    r.sys(100, 100, "setxattr", |e| {
        e.path = path.into();
        e.path2 = SysDesc::join_xattr(name, value);
        e.bytes = value.len() as u64;
        e.ret = 0;
    });
}

/// The value of attribute `name` of `p` (not following a symlink), or None.
fn xattr(p: &Path, name: &str) -> Option<Vec<u8>> {
    let (c, n) = (CString::new(p.to_str().unwrap()).unwrap(), CString::new(name).unwrap());
    let mut v = vec![0u8; 65536];
    // SAFETY: NUL-terminated strings and a buffer of v.len() bytes.
    let r = unsafe { libc::lgetxattr(c.as_ptr(), n.as_ptr(), v.as_mut_ptr() as *mut libc::c_void, v.len()) };
    (r >= 0).then(|| v[..r as usize].to_vec())
}

/// A recording of a program that found a file with file capabilities, a trusted attribute, a
/// POSIX ACL and a user attribute, then gave it capabilities again and set a trusted attribute.
fn privileged_recording() -> Rec {
    let mut r = Rec::new();
    r.open(100, "/w/bin", O_RDONLY, 3).read(100, 3, 100, 0, 100).close(100, 3);
    found_xattr(&mut r, "/w/bin", "security.capability", &CAP_SETUID_EP);
    found_xattr(&mut r, "/w/bin", "trusted.overlay.redirect", b"/etc");
    // A POSIX ACL giving uid 65534 rwx: version 2, then (tag, perm, id) entries: USER_OBJ rwx,
    // USER 65534 rwx, GROUP_OBJ r-x, MASK rwx, OTHER r-x.
    let mut acl = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in
        [(1u16, 7u16, u32::MAX), (2, 7, NOBODY), (4, 5, u32::MAX), (0x10, 7, u32::MAX), (0x20, 5, u32::MAX)]
    {
        acl.extend(tag.to_le_bytes().into_iter().chain(perm.to_le_bytes()).chain(id.to_le_bytes()));
    }
    found_xattr(&mut r, "/w/bin", "system.posix_acl_access", &acl);
    found_xattr(&mut r, "/w/bin", "user.note", b"hello");
    set_xattr(&mut r, "/w/bin", "security.capability", &CAP_SETUID_EP);
    set_xattr(&mut r, "/w/bin", "trusted.later", b"x");
    set_xattr(&mut r, "/w/bin", "user.later", b"y");
    r
}

#[test]
fn a_plan_naming_security_capability_gives_no_file_capability_whatever_namespaces_are_allowed() {
    if !is_root("a_plan_naming_security_capability_gives_no_file_capability") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("sb");
    let p = plan_in(&privileged_recording(), &root);
    assert!(p.xattrs.iter().any(|x| p.literals[x.name as usize] == "security.capability"), "the plan asks for it");
    for policy in [XattrPolicy::default(), XattrPolicy::parse("all").unwrap()] {
        let rep = init(&p, &InitOptions { xattrs: policy, ..Default::default() }).unwrap();
        let bin = root.join("w/bin");
        assert_eq!(xattr(&bin, "security.capability"), None, "init gave capabilities ({policy:?})");
        assert!(
            rep.xattrs_refused >= 1 && rep.xattrs_refused_names.iter().any(|n| n.contains("capability")),
            "{rep:?}"
        );
        let s = run(&p, &mut RunOptions { xattrs: policy, ..Default::default() }).unwrap();
        assert_eq!(xattr(&bin, "security.capability"), None, "run gave capabilities ({policy:?})");
        assert!(s.skip_reasons.keys().any(|k| k.contains("security.capability never")), "{}", s.text());
        assert_eq!(xattr(&bin, "user.note").as_deref(), Some(&b"hello"[..]));
        assert_eq!(xattr(&bin, "user.later").as_deref(), Some(&b"y"[..]));
    }
}

#[test]
fn attributes_of_namespaces_that_can_grant_privilege_are_set_only_when_allowed() {
    if !is_root("attributes_of_namespaces_that_can_grant_privilege_are_set_only_when_allowed") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("sb");
    let p = plan_in(&privileged_recording(), &root);
    let bin = root.join("w/bin");
    // By default: user.* only; the others are said and their calls skipped.
    let rep = init(&p, &InitOptions::default()).unwrap();
    assert_eq!(rep.xattrs_refused, 3, "{rep:?}");
    for n in ["trusted.overlay.redirect", "system.posix_acl_access", "security.capability"] {
        assert_eq!(xattr(&bin, n), None, "{n} set by default");
    }
    let s = run(&p, &mut RunOptions::default()).unwrap();
    assert_eq!(xattr(&bin, "trusted.later"), None);
    assert_eq!(s.skipped, 2, "the capability and the trusted set: {}", s.text());
    // Each namespace by its own option.
    init(&p, &InitOptions { xattrs: XattrPolicy::parse("trusted,system").unwrap(), ..Default::default() }).unwrap();
    assert_eq!(xattr(&bin, "trusted.overlay.redirect").as_deref(), Some(&b"/etc"[..]));
    assert!(xattr(&bin, "system.posix_acl_access").is_some(), "the ACL, asked for");
    assert_eq!(xattr(&bin, "security.capability"), None);
}

#[test]
fn thousands_of_large_attributes_are_refused_before_anything_is_written() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("sb");
    // 2000 files with a 64 KiB attribute each (values over 256 bytes are not recorded: init
    // generates them), as a small plan may ask: 131 MB of kernel memory on tmpfs.
    let mut r = Rec::new();
    for i in 0..2000 {
        let f = format!("/w/f{i}");
        r.path_op(100, "newfstatat", &f, 0);
        r.sys(100, 100, "getxattr", |e| {
            e.path = f.clone();
            e.path2 = "user.big".into();
            e.bytes = 65536;
            e.ret = 65536;
        });
    }
    let p = plan_in(&r, &root);
    assert_eq!(p.xattrs.len(), 2000);
    let e = init(&p, &InitOptions::default()).unwrap_err().to_string();
    assert!(e.contains("extended attributes") && e.contains("in all"), "{e}");
    assert!(!root.exists(), "refused before anything was written");
    let e = run(&p, &mut RunOptions::default()).unwrap_err().to_string();
    assert!(e.contains("extended attributes"), "{e}");
    // One file with 200 names: over the per-file bound.
    let mut r = Rec::new();
    r.path_op(100, "newfstatat", "/w/one", 0);
    for i in 0..200 {
        found_xattr(&mut r, "/w/one", &format!("user.a{i}"), b"v");
    }
    let p = plan_in(&r, &root);
    let e = init(&p, &InitOptions::default()).unwrap_err().to_string();
    assert!(e.contains("on ") && e.contains("w/one") && e.contains("one file"), "{e}");
    assert!(!root.exists());
}

#[test]
fn a_plan_never_makes_set_id_or_group_or_world_writable_files_in_init_or_run() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("sb");
    let mut r = Rec::new();
    r.open(100, "/w/old", O_RDONLY, 3).read(100, 3, 10, 0, 10).close(100, 3);
    r.path_op(100, "newfstatat", "/w/dir/x", 0);
    r.sys(100, 100, "openat", |e| {
        e.path = "/w/new".into();
        e.flags = O_CREAT | O_WRONLY;
        e.mode = 0o6777;
        e.ret = 3;
        e.fd = 3;
        e.dirfd = AT_FDCWD;
        e.fd_type = 1;
    });
    r.close(100, 3);
    r.sys(100, 100, "mkdir", |e| {
        e.path = "/w/newdir".into();
        e.mode = 0o2777;
    });
    r.sys(100, 100, "chmod", |e| {
        e.path = "/w/old".into();
        e.mode = 0o4777;
    });
    r.sys(100, 100, "mknodat", |e| {
        e.path = "/w/node".into();
        e.dirfd = AT_FDCWD;
        e.mode = libc::S_IFREG | 0o6777;
    });
    let mut p = plan_in(&r, &root);
    // A forged starting tree: set-id, sticky and world-writable everything.
    for e in &mut p.init {
        e.mode = 0o7777;
    }
    init(&p, &InitOptions::default()).unwrap();
    run(&p, &mut RunOptions::default()).unwrap();
    let mut seen = 0;
    for rel in ["w", "w/old", "w/dir", "w/dir/x", "w/new", "w/newdir", "w/node"] {
        let Ok(md) = std::fs::symlink_metadata(root.join(rel)) else { continue };
        seen += 1;
        let mode = md.permissions().mode();
        assert_eq!(mode & 0o6022, 0, "{rel}: mode {mode:o}");
    }
    assert_eq!(seen, 7, "every path was made");
}

/// Runs `sh -c script` as uid/gid 65534 (the sandbox's user), failing the test if it fails.
fn as_nobody(script: &str) {
    use std::os::unix::process::CommandExt;
    let out = Command::new("sh").arg("-c").arg(script).uid(NOBODY).gid(NOBODY).output().unwrap();
    assert!(out.status.success(), "as nobody: {script}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A root-mode sandbox initialised for nobody in a directory nobody can reach, and its plan.
fn nobodys_sandbox(t: &tempfile::TempDir) -> (PathBuf, Plan) {
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = t.path().join("sb");
    let mut r = Rec::new();
    r.open(100, "/w/f", O_RDONLY, 3).read(100, 3, 10, 0, 10).close(100, 3);
    let p = plan_in(&r, &root);
    init(&p, &InitOptions { owner: Some((NOBODY, NOBODY)), ..Default::default() }).unwrap();
    assert_eq!(std::fs::metadata(&root).unwrap().uid(), NOBODY);
    assert_eq!(std::fs::metadata(root.join(sandbox::MARKER)).unwrap().uid(), 0, "the marker stays root's");
    (root, p)
}

/// `f` on another thread, failing the test if it takes more than 20 s (a FIFO would block it).
fn within_20s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20)).expect("blocked: a FIFO planted in the sandbox hangs root")
}

#[test]
fn a_symlink_planted_as_the_trash_by_the_sandbox_user_is_refused_and_nothing_outside_is_made() {
    if !is_root("a_symlink_planted_as_the_trash_by_the_sandbox_user_is_refused") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (root, p) = nobodys_sandbox(&t);
    let outside = t.path().join("outside");
    as_nobody(&format!(
        "ln -s {} {}/.latscope-trash && echo x > {}/w/left",
        outside.display(),
        root.display(),
        root.display()
    ));
    let e = init(&p, &InitOptions::default()).unwrap_err().to_string();
    assert!(e.contains(".latscope-trash") && e.contains("symbolic link"), "{e}");
    assert!(!outside.exists(), "root made a directory outside the sandbox");
    assert!(root.join("w/left").exists(), "nothing was moved");
    // A directory of nobody's is refused too (root would move the tree into it).
    std::fs::remove_file(root.join(".latscope-trash")).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
    as_nobody(&format!("mkdir {}/.latscope-trash", root.display()));
    let e = init(&p, &InitOptions::default()).unwrap_err().to_string();
    assert!(e.contains(".latscope-trash") && e.contains("owned by uid 65534"), "{e}");
    // The purge refuses it as well, removing nothing.
    as_nobody(&format!("echo keep > {}/.latscope-trash/keep", root.display()));
    let e = sandbox::purge(&p.meta.sandbox).unwrap_err().to_string();
    assert!(e.contains("owned by uid 65534"), "{e}");
    assert!(root.join(".latscope-trash/keep").exists());
}

#[test]
fn a_fifo_or_dev_zero_planted_as_the_marker_is_refused_at_once_by_init_and_run() {
    if !is_root("a_fifo_or_dev_zero_planted_as_the_marker_is_refused_at_once_by_init_and_run") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (root, p) = nobodys_sandbox(&t);
    let m = root.join(sandbox::MARKER);
    let nobody = Some((NOBODY, NOBODY));
    for (plant, found) in [
        (format!("rm -f {0} && mkfifo {0}", m.display()), "a FIFO"),
        (format!("rm -f {0} && ln -s /dev/zero {0}", m.display()), "a symbolic link"),
        (format!("rm -f {0} && head -c 100000 /dev/zero > {0}", m.display()), "owned by uid 65534"),
    ] {
        as_nobody(&plant);
        let p2 = p.clone();
        let e = within_20s(move || run(&p2, &mut RunOptions { user: nobody, ..Default::default() }).unwrap_err())
            .to_string();
        assert!(e.contains(sandbox::MARKER) && e.contains(found), "run: {e}");
        let p2 = p.clone();
        let e = within_20s(move || init(&p2, &InitOptions { owner: nobody, ..Default::default() }).unwrap_err())
            .to_string();
        assert!(e.contains(sandbox::MARKER) && e.contains(found), "init: {e}");
    }
}

#[test]
fn root_replays_a_sandbox_another_user_owns_only_as_that_user() {
    if !is_root("root_replays_a_sandbox_another_user_owns_only_as_that_user") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let (root, p) = nobodys_sandbox(&t);
    let e = run(&p, &mut RunOptions::default()).unwrap_err().to_string();
    assert!(e.contains("belongs to uid 65534") && e.contains("--user"), "{e}");
    // Its next init as root takes it back: root's again, the old tree in root's trash.
    let rep = init(&p, &InitOptions::default()).unwrap();
    assert_eq!(std::fs::metadata(&root).unwrap().uid(), 0);
    let trash = root.join(sandbox::ROOT_TRASH);
    assert_eq!((std::fs::metadata(&trash).unwrap().mode() & 0o777, rep.trashed.len()), (0o700, 1));
    // Anything in root's tree that another user owns (they could change it during the run) is
    // refused before the run.
    std::os::unix::fs::lchown(root.join("w/f"), Some(NOBODY), Some(NOBODY)).unwrap();
    let e = run(&p, &mut RunOptions::default()).unwrap_err().to_string();
    assert!(e.contains("w/f") && e.contains("owned by uid 65534"), "{e}");
}

#[test]
fn a_directory_of_sandboxes_made_by_another_user_is_refused() {
    if !is_root("a_directory_of_sandboxes_made_by_another_user_is_refused") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    // A world-writable mount point, as /tmp is: another user made .latscope there first.
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let mnt = t.path().to_str().unwrap().to_string();
    let mut r = Rec::new();
    r.header.mounts.push(latscope_event::Mount {
        mount_point: mnt.clone(),
        fstype: "ext4".into(),
        ..Default::default()
    });
    r.open(100, &format!("{mnt}/f"), O_RDONLY, 3).read(100, 3, 10, 0, 10);
    let p =
        plan_events(&r.events(), &PrepareOptions { sandbox: SandboxChoice::Name("t".into()), filter: None }).unwrap();
    as_nobody(&format!("mkdir {mnt}/.latscope && ln -s /etc {mnt}/.latscope/t"));
    let e = init(&p, &InitOptions::default()).unwrap_err().to_string();
    assert!(e.contains(".latscope") && e.contains("owned by uid 65534"), "{e}");
    assert!(!Path::new("/etc/.latscope-sandbox").exists());
}
