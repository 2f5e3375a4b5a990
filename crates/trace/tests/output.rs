//! Never destroying a file: staged trace writers, `FILE.old`, the destination lock, atomic
//! derived outputs, outputs that are inputs, crashes after the commit.

mod common;

use std::io::Write;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;

use common::*;
use latscope_event::EventBatch;
use latscope_trace::{
    check_output_not_input, AtomicFile, Existing, OutputError, Summary, ThreadedTraceWriter, TraceError, TraceReader,
    TraceWriter, WriterOptions,
};

fn write_trace(path: &Path, n: usize, opts: WriterOptions) -> EventBatch {
    let b = random_batch(&mut Rng::new(n as u64), n);
    let mut w = TraceWriter::create_with(path, &sample_header(), opts).unwrap();
    w.write_batch(&b, 0).unwrap();
    w.finish(Summary::default()).unwrap();
    b
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

fn staged() -> WriterOptions {
    WriterOptions { staged: true, ..Default::default() }
}

#[test]
fn a_staged_writer_dropped_before_commit_leaves_the_previous_file_untouched() {
    let dir = tmpdir("staged-drop");
    let path = dir.join("t.lst");
    write_trace(&path, 10, WriterOptions::default());
    let before = std::fs::read(&path).unwrap();
    for threaded in [false, true] {
        if threaded {
            let mut w = ThreadedTraceWriter::create_with(&path, &sample_header(), staged(), 2).unwrap();
            w.write_batch(random_batch(&mut Rng::new(1), 100), 0).unwrap();
            w.flush().unwrap();
        } else {
            let mut w = TraceWriter::create_with(&path, &sample_header(), staged()).unwrap();
            w.write_batch(&random_batch(&mut Rng::new(1), 100), 0).unwrap();
        }
        assert_eq!(std::fs::read(&path).unwrap(), before);
        assert_eq!(names(&dir), ["t.lst"], "nothing else is left in the directory");
    }
}

#[test]
fn commit_keeps_the_previous_file_as_old_and_the_new_one_is_private() {
    let dir = tmpdir("staged-commit");
    let path = dir.join("t.lst");
    let old = write_trace(&path, 10, WriterOptions::default());
    let old_bytes = std::fs::read(&path).unwrap();
    let b = random_batch(&mut Rng::new(2), 50);
    let mut w = ThreadedTraceWriter::create_with(&path, &sample_header(), staged(), 2).unwrap();
    w.write_batch(b.clone(), 0).unwrap();
    let backup = w.commit().unwrap();
    assert_eq!(backup.as_deref(), Some(dir.join("t.lst.old").as_path()));
    assert_eq!(std::fs::read(dir.join("t.lst.old")).unwrap(), old_bytes);
    // Committed: the trace is at the path while it is being written.
    w.flush().unwrap();
    assert_eq!(TraceReader::open(&path).unwrap().read_all().unwrap(), b);
    w.finish(Summary::default()).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(names(&dir), ["t.lst", "t.lst.old"]);
    assert_eq!(TraceReader::open(dir.join("t.lst.old")).unwrap().read_all().unwrap(), old);

    // The default (not staged) writer does the same at once; an older .old is replaced.
    let third = write_trace(&path, 7, WriterOptions::default());
    assert_eq!(TraceReader::open(&path).unwrap().read_all().unwrap(), third);
    assert_eq!(TraceReader::open(dir.join("t.lst.old")).unwrap().read_all().unwrap(), b);
}

#[test]
fn refuse_and_replace() {
    let dir = tmpdir("existing");
    let path = dir.join("t.lst");
    let first = write_trace(&path, 3, WriterOptions::default());
    let e = TraceWriter::create_with(&path, &sample_header(), WriterOptions { existing: Existing::Refuse, ..staged() })
        .unwrap_err();
    assert!(matches!(e, TraceError::Output(OutputError::Exists { .. })), "{e}");
    assert!(e.to_string().contains("already exists"), "{e}");
    assert_eq!(TraceReader::open(&path).unwrap().read_all().unwrap(), first);
    let second = write_trace(&path, 4, WriterOptions { existing: Existing::Replace, ..Default::default() });
    assert_eq!(TraceReader::open(&path).unwrap().read_all().unwrap(), second);
    assert_eq!(names(&dir), ["t.lst"]);
    // Refuse on a new path writes.
    let p2 = dir.join("new.lst");
    write_trace(&p2, 2, WriterOptions { existing: Existing::Refuse, ..Default::default() });
    assert!(TraceReader::open(&p2).is_ok());
}

#[test]
fn a_second_writer_of_the_same_destination_refuses_with_the_first_ones_pid() {
    let dir = tmpdir("lock");
    let path = dir.join("t.lst");
    let busy = |r: Result<TraceWriter, TraceError>| match r {
        Err(TraceError::Output(OutputError::Busy { pid, .. })) => {
            assert_eq!(pid, Some(std::process::id()));
        }
        Err(e) => panic!("not busy: {e}"),
        Ok(_) => panic!("a second writer was allowed"),
    };
    // Committed and recording.
    let mut a = TraceWriter::create(&path, &sample_header()).unwrap();
    busy(TraceWriter::create_with(&path, &sample_header(), staged()));
    let e = TraceWriter::create(&path, &sample_header()).map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("another latscope") && e.contains("is writing this file"), "{e}");
    a.write_batch(&random_batch(&mut Rng::new(3), 5), 0).unwrap();
    a.finish(Summary::default()).unwrap();
    // Finished: the file can be written again.
    drop(TraceWriter::create(&path, &sample_header()).unwrap());

    // Staged over an existing file: that file is locked too.
    let a = TraceWriter::create_with(&path, &sample_header(), staged()).unwrap();
    busy(TraceWriter::create_with(&path, &sample_header(), staged()));
    drop(a);

    // Both staged for a new file: the second to commit refuses, the first's file is intact.
    let p2 = dir.join("new.lst");
    let mut a = TraceWriter::create_with(&p2, &sample_header(), staged()).unwrap();
    let mut b = TraceWriter::create_with(&p2, &sample_header(), staged()).unwrap();
    a.commit().unwrap();
    let e = b.commit().unwrap_err();
    assert!(matches!(e, TraceError::Output(OutputError::Busy { .. })), "{e}");
    drop(b);
    let batch = random_batch(&mut Rng::new(4), 20);
    a.write_batch(&batch, 0).unwrap();
    a.finish(Summary::default()).unwrap();
    assert_eq!(TraceReader::open(&p2).unwrap().read_all().unwrap(), batch);
}

/// A recorder killed with SIGKILL after the commit leaves a readable trace with every block it
/// had handed to the kernel. The child is this test binary, run again with an environment
/// variable.
#[test]
fn a_writer_killed_after_the_commit_leaves_a_readable_file() {
    if let Ok(path) = std::env::var("LATSCOPE_TEST_KILLED_WRITER") {
        let mut w = TraceWriter::create_with(&path, &sample_header(), staged()).unwrap();
        w.commit().unwrap();
        for i in 0..3 {
            w.write_batch(&random_batch(&mut Rng::new(i), 100), 0).unwrap();
        }
        w.flush().unwrap();
        println!("written");
        std::io::stdout().flush().unwrap();
        std::thread::sleep(std::time::Duration::from_secs(60));
        return;
    }
    let dir = tmpdir("killed");
    let path = dir.join("t.lst");
    let old = write_trace(&path, 9, WriterOptions::default());
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        // Its full name in the test binary: the module path without the crate's name.
        .args([
            "--exact",
            concat!(module_path!(), "::a_writer_killed_after_the_commit_leaves_a_readable_file")
                .split_once("::")
                .unwrap()
                .1,
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LATSCOPE_TEST_KILLED_WRITER", &path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("written") {
        let n = std::io::Read::read(&mut out, &mut buf).unwrap();
        assert!(n > 0, "the child ended early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let mut r = TraceReader::open(&path).unwrap();
    let got = r.read_all().unwrap();
    let want: Vec<EventBatch> = (0..3).map(|i| random_batch(&mut Rng::new(i), 100)).collect();
    assert_eq!(got, concat(&want));
    assert!(r.summary().is_none());
    assert!(r.warnings().iter().any(|w| w.to_string().contains("not closed cleanly")), "{:?}", r.warnings());
    assert_eq!(TraceReader::open(dir.join("t.lst.old")).unwrap().read_all().unwrap(), old);
    // The lock died with the process.
    drop(TraceWriter::create(&path, &sample_header()).unwrap());
}

#[test]
fn outputs_that_are_inputs_are_refused_before_anything_is_written() {
    let dir = tmpdir("same");
    let input = dir.join("in.lst");
    std::fs::write(&input, b"data").unwrap();
    let link = dir.join("link.lst");
    std::os::unix::fs::symlink(&input, &link).unwrap();
    let hard = dir.join("hard.lst");
    std::fs::hard_link(&input, &hard).unwrap();
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let dotted = sub.join("../in.lst");
    for (out, how) in [
        (input.clone(), "same path"),
        (dir.join("./in.lst"), "same path"),
        (link.clone(), "symlink"),
        (hard.clone(), "hard link"),
        (dotted, "symlink or a hard link"),
    ] {
        let e = check_output_not_input(&[dir.join("other.lst"), input.clone()], &out).unwrap_err();
        assert!(matches!(e, OutputError::SameAsInput { .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.contains(how) && msg.contains("destroy the input"), "{out:?}: {msg}");
        // And the other way round (the input given through the link).
        assert!(check_output_not_input(&[&out], &input).is_err(), "{out:?}");
    }
    assert_eq!(std::fs::read(&input).unwrap(), b"data");
    check_output_not_input(&[&input], dir.join("new.svg")).unwrap();
    std::fs::write(dir.join("other.svg"), b"x").unwrap();
    check_output_not_input(&[&input], dir.join("other.svg")).unwrap();
    // Standard input and output are different streams unless they are the same file.
    check_output_not_input(&["-"], "-").unwrap();
    check_output_not_input(&[&input], "-").unwrap();
}

#[test]
fn atomic_files_replace_only_when_committed_and_keep_permissions() {
    let dir = tmpdir("atomic");
    let path = dir.join("out.svg");
    // A new file: 0666 less the umask.
    // SAFETY: umask is process-wide; this is the only test of this binary that depends on it,
    // and it only narrows permissions for files created meanwhile.
    let old_mask = unsafe { libc::umask(0o027) };
    let mut f = AtomicFile::create(&path).unwrap();
    f.write_all(b"first").unwrap();
    assert!(!path.exists(), "nothing at the path before the commit");
    f.commit().unwrap();
    unsafe { libc::umask(old_mask) };
    assert_eq!(std::fs::read(&path).unwrap(), b"first");
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o640);

    // Dropped uncommitted: the previous content stays, nothing is left behind.
    let mut f = AtomicFile::create(&path).unwrap();
    f.write_all(b"half").unwrap();
    drop(f);
    assert_eq!(std::fs::read(&path).unwrap(), b"first");
    assert_eq!(names(&dir), ["out.svg"]);

    // Replacing keeps the replaced file's permissions, no backup.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o604)).unwrap();
    let ino = std::fs::metadata(&path).unwrap().ino();
    let mut f = AtomicFile::create(&path).unwrap();
    f.write_all(b"second").unwrap();
    f.commit().unwrap();
    let m = std::fs::metadata(&path).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"second");
    assert_eq!(m.permissions().mode() & 0o777, 0o604);
    assert_ne!(m.ino(), ino, "a new file was renamed into place");
    assert_eq!(names(&dir), ["out.svg"]);

    // Through a symlink: refused, naming the link and its target; both stay as they were.
    let link = dir.join("link.svg");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    let e = AtomicFile::create(&link).unwrap_err();
    assert!(matches!(e, OutputError::Symlink { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("link.svg") && msg.contains(path.to_str().unwrap()), "{msg}");
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read(&path).unwrap(), b"second");
    std::fs::remove_file(&link).unwrap();

    // A device is written in place; a directory is refused.
    let mut f = AtomicFile::create("/dev/null").unwrap();
    f.write_all(b"gone").unwrap();
    f.commit().unwrap();
    assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());
    let e = AtomicFile::create(&*dir).unwrap_err();
    assert!(e.to_string().contains("is a directory"), "{e}");
    let e = AtomicFile::create(dir.join("missing/x.svg")).unwrap_err();
    assert!(e.to_string().contains("missing"), "{e}");
}

/// A world-writable sticky directory (as /tmp), and a precious file outside it.
fn sticky_dir(name: &str) -> (TmpDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tmpdir(name);
    let shared = dir.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let precious = dir.join("precious");
    std::fs::write(&precious, b"keep me").unwrap();
    (dir, shared, precious)
}

/// A symlink `link -> target` owned by another user (nobody), as another user of the machine
/// would plant it; not chowned where this test is not root (the attack is the same link).
fn plant_symlink(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link).unwrap();
    let _ = std::os::unix::fs::lchown(link, Some(65534), Some(65534));
}

/// An attacker plants a symlink (to a precious file, or dangling) and a hard link (to the
/// precious file) in a shared sticky directory where a privileged user then writes a trace, a
/// derived output and a file written in place: every output is refused with a message naming
/// the link (and the symlink's target), and the precious file keeps its bytes; a dangling
/// link's target is not created.
#[test]
fn planted_links_in_a_sticky_directory_are_never_written_through() {
    let (dir, shared, precious) = sticky_dir("planted");
    let dangling_target = dir.join("created-by-the-attack");
    plant_symlink(&precious, &shared.join("sym.lst"));
    plant_symlink(&dangling_target, &shared.join("dangling.lst"));
    std::fs::hard_link(&precious, shared.join("hard.lst")).unwrap();
    for name in ["sym.lst", "dangling.lst", "hard.lst"] {
        let out = shared.join(name);
        let hard = name == "hard.lst";
        let check = |e: &dyn std::fmt::Display, what: &str| {
            let msg = e.to_string();
            assert!(msg.contains(out.to_str().unwrap()), "{what} {name}: {msg}");
            if hard {
                assert!(msg.contains("hard links"), "{what} {name}: {msg}");
            } else {
                assert!(msg.contains("symbolic link") && msg.contains(&*dir.to_string_lossy()), "{what} {name}: {msg}");
            }
        };
        for existing in [Existing::Backup, Existing::Replace] {
            let opts = WriterOptions { existing, ..WriterOptions::default() };
            let e = TraceWriter::create_with(&out, &sample_header(), opts).unwrap_err();
            check(&e, "trace");
        }
        check(&AtomicFile::create(&out).unwrap_err(), "derived output");
        check(
            &latscope_trace::open_in_place(&out, latscope_trace::InPlace::Create(0o600), true).unwrap_err(),
            "in place",
        );
        check(
            &latscope_trace::open_in_place(&out, latscope_trace::InPlace::CheckOnly, true).unwrap_err(),
            "check only",
        );
        assert_eq!(std::fs::read(&precious).unwrap(), b"keep me", "{name}");
        assert!(!dangling_target.exists(), "{name}: the dangling link's target was created");
        assert!(!dir.join("precious.old").exists() && !dir.join("created-by-the-attack.old").exists());
    }
    // Nothing was left in the shared directory but the planted links.
    assert_eq!(names(&shared), ["dangling.lst", "hard.lst", "sym.lst"]);
}

/// A symlink planted after the output was staged (between the checks and the commit) is
/// replaced by the commit, never followed: the rename works on the directory entry.
#[test]
fn a_symlink_planted_before_the_commit_is_refused_not_followed() {
    let (_dir, shared, precious) = sticky_dir("race");
    let out = shared.join("out.svg");
    let mut f = AtomicFile::create(&out).unwrap();
    f.write_all(b"<svg/>").unwrap();
    plant_symlink(&precious, &out);
    let e = f.commit().unwrap_err();
    assert!(e.to_string().contains("symbolic link"), "{e}");
    assert_eq!(std::fs::read(&precious).unwrap(), b"keep me");
    assert!(std::fs::symlink_metadata(&out).unwrap().file_type().is_symlink());
}

/// A file planted with set-user-ID and set-group-ID bits gives none of them to the output
/// that replaces it.
#[test]
fn a_replaced_file_passes_on_no_setuid_bits() {
    let (_dir, shared, _) = sticky_dir("setuid");
    let out = shared.join("out.svg");
    std::fs::write(&out, b"planted").unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o6755)).unwrap();
    let mut f = AtomicFile::create(&out).unwrap();
    f.write_all(b"<svg/>").unwrap();
    f.commit().unwrap();
    assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o7777, 0o755);
}

/// A FIFO nobody reads is refused at once instead of blocking the writer in open().
#[test]
fn a_fifo_without_a_reader_is_refused_without_blocking() {
    let dir = tmpdir("fifo-no-reader");
    let fifo = dir.join("p");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let e = TraceWriter::create(&fifo, &sample_header()).unwrap_err();
    assert!(e.to_string().contains("FIFO with no reader"), "{e}");
    let e = AtomicFile::create(&fifo).unwrap_err();
    assert!(e.to_string().contains("FIFO with no reader"), "{e}");
    // With a reader it is written as a stream.
    let reader = std::thread::spawn({
        let fifo = fifo.clone();
        move || std::fs::read(&fifo).unwrap()
    });
    let mut f = loop {
        match AtomicFile::create(&fifo) {
            Ok(f) => break f,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
        }
    };
    f.write_all(b"streamed").unwrap();
    f.commit().unwrap();
    assert_eq!(reader.join().unwrap(), b"streamed");
}
