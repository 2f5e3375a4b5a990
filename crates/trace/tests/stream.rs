//! Traces through pipes, FIFOs, devices and standard input: read as streams (or refused for
//! what they are), with the same results as the file; `-w -` and FIFOs written as streams.

mod common;

use std::ffi::CString;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;
use latscope_event::EventBatch;
use latscope_trace::{Column, ReadOptions, Summary, TraceError, TraceReader, TraceWriter, WarningKind};

/// A reader that hands out at most 7 bytes per call (as a slow pipe may).
struct Dribble(std::io::Cursor<Vec<u8>>);

impl Read for Dribble {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = out.len().min(7);
        self.0.read(&mut out[..n])
    }
}

#[derive(Debug, PartialEq)]
struct Outcome {
    batches: Vec<EventBatch>,
    errors: Vec<String>,
    warnings: Vec<WarningKind>,
    summary: bool,
}

fn outcome(r: Result<TraceReader, TraceError>) -> Result<Outcome, String> {
    let mut r = r.map_err(|e| e.to_string())?;
    let (mut batches, mut errors) = (Vec::new(), Vec::new());
    for b in r.by_ref() {
        match b {
            Ok(b) => batches.push(b),
            Err(e) => errors.push(e.to_string()),
        }
    }
    Ok(Outcome {
        batches,
        errors,
        warnings: r.warnings().iter().map(|w| w.kind.clone()).collect(),
        summary: r.summary().is_some(),
    })
}

fn trace_bytes(dir: &Path, sizes: &[usize]) -> (Vec<u8>, Vec<EventBatch>) {
    let path = dir.join("t.lst");
    let mut rng = Rng::new(21);
    let batches: Vec<EventBatch> = sizes.iter().map(|&n| random_batch(&mut rng, n)).collect();
    // A small header keeps the many reads of the damage sweep quick.
    let header = if sizes.len() < 4 { latscope_event::TraceHeader::default() } else { sample_header() };
    let mut w = TraceWriter::create(&path, &header).unwrap();
    for b in &batches {
        w.write_batch(b, 0).unwrap();
    }
    w.finish(Summary::default()).unwrap();
    (std::fs::read(&path).unwrap(), batches)
}

fn mkfifo(p: &Path) {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: mkfifo with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {p:?}");
}

/// Every cut and a sweep of bit flips of a trace read through a stream give what the file
/// gives. Differences by design: a stream is not read past its end-of-stream marker (no warning
/// about bytes after it), an empty stream is not an "empty file", and a projection reads (and
/// so verifies) whole bodies from a stream (flips are compared without projection).
#[test]
fn every_cut_and_flip_reads_the_same_through_a_stream() {
    let dir = tmpdir("stream-same");
    let (full, _) = trace_bytes(&dir, &[3, 0, 4]);
    let file = dir.join("f.lst");
    let mut trailing = full.clone();
    trailing.extend_from_slice(b"junk after the end");
    let cuts = (0..=full.len()).map(|n| (full[..n].to_vec(), false));
    let flips = (0..full.len()).step_by(7).map(|i| {
        let mut v = full.clone();
        v[i] ^= 0x10;
        (v, true)
    });
    let variants = cuts.chain(flips).chain(std::iter::once((trailing, false)));
    let normalize = |o: Result<Outcome, String>| {
        o.map(|mut o| {
            if o.summary {
                o.warnings.retain(|w| !matches!(w, WarningKind::TrailingData { .. }));
            }
            o
        })
    };
    for (i, (v, flipped)) in variants.enumerate() {
        std::fs::write(&file, &v).unwrap();
        for skip_corrupt in [false, true] {
            for projection in [None, Some(vec![Column::Lat, Column::Path])] {
                // Every cut read plainly; one in 5 every way.
                let plain = !skip_corrupt && projection.is_none();
                if (flipped && projection.is_some()) || (!flipped && !plain && i % 5 != 0) {
                    continue;
                }
                let opts = ReadOptions { skip_corrupt, projection };
                let want = normalize(outcome(TraceReader::open_with(&file, opts.clone())));
                let stream = Dribble(std::io::Cursor::new(v.clone()));
                let got = normalize(outcome(TraceReader::from_reader(&file, stream, opts)));
                if v.is_empty() {
                    let (w, g) = (want.unwrap_err(), got.unwrap_err());
                    assert!(w.contains("empty file"), "{w}");
                    assert!(g.contains("the stream ended before its first byte"), "{g}");
                    continue;
                }
                assert_eq!(want, got, "variant {i} ({} bytes), skip_corrupt {skip_corrupt}", v.len());
            }
        }
    }
}

#[test]
fn a_fifo_is_read_as_a_stream_and_written_as_one() {
    let dir = tmpdir("fifo");
    let (full, batches) = trace_bytes(&dir, &[5, 0, 300, 2]);
    let fifo = dir.join("p");
    mkfifo(&fifo);
    // Reading: a writer thread feeds the FIFO.
    let f2 = fifo.clone();
    let bytes = full.clone();
    let t = std::thread::spawn(move || std::fs::OpenOptions::new().write(true).open(&f2).unwrap().write_all(&bytes));
    let got = outcome(TraceReader::open_projected(&fifo, &Column::ALL)).unwrap();
    t.join().unwrap().unwrap();
    assert_eq!(got.batches.iter().filter(|b| !b.is_empty()).count(), 3);
    assert_eq!(concat(&got.batches), concat(&batches));
    assert!(got.summary && got.warnings.is_empty(), "{:?}", got.warnings);

    // Writing: the trace writer writes a FIFO in place (no temporary file, no rename) while a
    // reader reads it.
    let f2 = fifo.clone();
    let t = std::thread::spawn(move || outcome(TraceReader::open(&f2)).unwrap());
    let mut w = TraceWriter::create(&fifo, &sample_header()).unwrap();
    for b in &batches {
        w.write_batch(b, 0).unwrap();
    }
    w.finish(Summary::default()).unwrap();
    let got = t.join().unwrap();
    assert_eq!(concat(&got.batches), concat(&batches));
    assert!(got.summary);
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    assert_eq!(names_in(&dir), ["p", "t.lst"]);
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// What cannot hold a trace is refused for what it is; an empty stream is not an "empty file".
#[test]
fn what_cannot_hold_a_trace_is_named() {
    let dir = tmpdir("notafile");
    let e = TraceReader::open(&*dir).unwrap_err().to_string();
    assert!(e.contains("cannot read a trace from a directory"), "{e}");
    let e = TraceReader::open("/dev/null").unwrap_err().to_string();
    assert!(e.contains("/dev/null: the character device ended before its first byte"), "{e}");
    assert!(!e.contains("empty file"), "{e}");
    let sock = dir.join("s");
    let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let e = TraceReader::open(&sock).unwrap_err().to_string();
    assert!(e.contains("cannot read a trace from a socket"), "{e}");
    let fifo = dir.join("p");
    mkfifo(&fifo);
    let f2 = fifo.clone();
    let t = std::thread::spawn(move || drop(std::fs::OpenOptions::new().write(true).open(&f2).unwrap()));
    let e = TraceReader::open(&fifo).unwrap_err().to_string();
    t.join().unwrap();
    assert!(e.contains("the FIFO ended before its first byte"), "{e}");
    // /dev/zero: a stream of zeros is not an Arrow stream.
    let e = TraceReader::open("/dev/zero").unwrap_err().to_string();
    assert!(e.contains("not an Arrow IPC stream"), "{e}");
}

/// `-r -` and `-w -`: this test binary, run again as a child, reads its standard input or
/// writes its standard output.
#[test]
fn standard_input_and_output() {
    match std::env::var("LATSCOPE_TEST_STDIO").as_deref() {
        Ok("read") => {
            let o = outcome(TraceReader::open("-")).unwrap_or_else(|e| {
                println!("ERROR {e}");
                std::process::exit(0)
            });
            let n: usize = o.batches.iter().map(|b| b.len()).sum();
            println!("EVENTS {n} SUMMARY {} WARNINGS {}", o.summary, o.warnings.len());
            return;
        }
        Ok("write") => {
            // Standard output carries the test harness's lines: the trace goes to the
            // parent through standard error, made standard output here.
            // SAFETY: dup2 of our own descriptors.
            unsafe { libc::dup2(2, 1) };
            let mut w = TraceWriter::create("-", &sample_header()).unwrap();
            w.write_batch(&random_batch(&mut Rng::new(5), 77), 0).unwrap();
            w.finish(Summary::default()).unwrap();
            return;
        }
        _ => {}
    }
    let dir = tmpdir("stdio");
    let (full, batches) = trace_bytes(&dir, &[5, 0, 300, 2]);
    let events: usize = batches.iter().map(|b| b.len()).sum();
    let child = |mode: &str| {
        let mut c = Command::new(std::env::current_exe().unwrap());
        // Its full name in the test binary: the module path without the crate's name.
        c.args([
            "--exact",
            concat!(module_path!(), "::standard_input_and_output").split_once("::").unwrap().1,
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .env("LATSCOPE_TEST_STDIO", mode);
        c
    };
    let run_read = |stdin: Stdio, feed: Option<&[u8]>| {
        let mut c = child("read").stdin(stdin).stdout(Stdio::piped()).spawn().unwrap();
        if let Some(bytes) = feed {
            let mut si = c.stdin.take().unwrap();
            si.write_all(bytes).unwrap();
        }
        let out = c.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // A pipe.
    let out = run_read(Stdio::piped(), Some(&full));
    assert!(out.contains(&format!("EVENTS {events} SUMMARY true WARNINGS 0")), "{out}");
    // A file redirected to standard input.
    let out = run_read(std::fs::File::open(dir.join("t.lst")).unwrap().into(), None);
    assert!(out.contains(&format!("EVENTS {events} SUMMARY true WARNINGS 0")), "{out}");
    // An empty pipe.
    let out = run_read(Stdio::piped(), Some(b""));
    assert!(out.contains("ERROR -: standard input ended before its first byte"), "{out}");

    // `-w -` into a pipe, read as a stream.
    let mut c = child("write").stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let got = outcome(TraceReader::from_reader("child", c.stderr.take().unwrap(), ReadOptions::default())).unwrap();
    let _ = c.wait();
    assert_eq!(concat(&got.batches), random_batch(&mut Rng::new(5), 77));
    assert!(got.summary);
}
