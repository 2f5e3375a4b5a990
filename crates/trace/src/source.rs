//! Where a reader's bytes come from: a file read at offsets, or a stream (a pipe, a FIFO, a
//! character device, standard input) read once, front to back, through a buffer that holds what
//! the reader may still look at.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;

/// A trace's bytes.
pub(crate) enum Source {
    /// A seekable file of a known length.
    File { file: File, len: u64 },
    /// Bytes read in order: `buf` holds the bytes from offset `base` on that were read but may
    /// still be needed.
    Stream { r: Box<dyn Read + Send + Sync>, buf: Vec<u8>, base: u64, eof: bool, chunk: Vec<u8> },
}

/// Bytes read from a stream at a time.
const STREAM_CHUNK: usize = 256 << 10;

impl Source {
    pub(crate) fn stream(r: Box<dyn Read + Send + Sync>) -> Source {
        Source::Stream { r, buf: Vec::new(), base: 0, eof: false, chunk: Vec::new() }
    }

    pub(crate) fn is_stream(&self) -> bool {
        matches!(self, Source::Stream { .. })
    }

    /// The length, when known: a file's, or a stream's once its end has been read.
    pub(crate) fn len(&self) -> Option<u64> {
        match self {
            Source::File { len, .. } => Some(*len),
            Source::Stream { buf, base, eof: true, .. } => Some(base + buf.len() as u64),
            Source::Stream { .. } => None,
        }
    }

    /// How many of the `want` bytes from offset `at` exist (fewer at the end). A stream reads
    /// (and keeps) them; the caller bounds `want`.
    pub(crate) fn avail(&mut self, at: u64, want: u64) -> io::Result<u64> {
        match self {
            Source::File { len, .. } => Ok(want.min(len.saturating_sub(at))),
            Source::Stream { r, buf, base, eof, chunk } => {
                let end = at.saturating_add(want);
                while *base + (buf.len() as u64) < end && !*eof {
                    if chunk.is_empty() {
                        chunk.resize(4096, 0);
                    }
                    // Whatever is there, up to a chunk: a pipe's read returns what it holds. The
                    // chunk grows while reads fill it.
                    match r.read(chunk) {
                        Ok(0) => *eof = true,
                        Ok(n) => {
                            buf.extend_from_slice(&chunk[..n]);
                            if n == chunk.len() && n < STREAM_CHUNK {
                                chunk.resize(2 * n, 0);
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                if at < *base {
                    return Err(io::Error::other(format!(
                        "a stream cannot go back to byte {at} (it was read up to byte {base})"
                    )));
                }
                Ok((*base + buf.len() as u64).saturating_sub(at).min(want))
            }
        }
    }

    /// Exactly `out.len()` bytes from offset `at`.
    pub(crate) fn read_at(&mut self, out: &mut [u8], at: u64) -> io::Result<()> {
        match self {
            Source::File { file, .. } => file.read_exact_at(out, at),
            Source::Stream { .. } => {
                if self.avail(at, out.len() as u64)? < out.len() as u64 {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the stream ended"));
                }
                if let Source::Stream { buf, base, .. } = self {
                    let from = (at - *base) as usize;
                    out.copy_from_slice(&buf[from..from + out.len()]);
                }
                Ok(())
            }
        }
    }

    /// The reader will not look before offset `at` again: a stream forgets those bytes.
    pub(crate) fn release(&mut self, at: u64) {
        if let Source::Stream { buf, base, .. } = self {
            if at > *base {
                let n = ((at - *base) as usize).min(buf.len());
                buf.drain(..n);
                *base += n as u64;
                if buf.capacity() > 4 * STREAM_CHUNK && buf.len() < STREAM_CHUNK {
                    buf.shrink_to(STREAM_CHUNK);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out at most 3 bytes per call.
    struct Dribble(Vec<u8>, usize);
    impl Read for Dribble {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = out.len().min(3).min(self.0.len() - self.1);
            out[..n].copy_from_slice(&self.0[self.1..self.1 + n]);
            self.1 += n;
            Ok(n)
        }
    }

    #[test]
    fn a_stream_reads_forward_and_forgets() {
        let data: Vec<u8> = (0..=255).collect();
        let mut s = Source::stream(Box::new(Dribble(data.clone(), 0)));
        assert_eq!(s.len(), None);
        assert_eq!(s.avail(10, 20).unwrap(), 20);
        let mut b = [0u8; 5];
        s.read_at(&mut b, 100).unwrap();
        assert_eq!(b, [100, 101, 102, 103, 104]);
        s.read_at(&mut b, 2).unwrap();
        assert_eq!(b, [2, 3, 4, 5, 6]);
        s.release(50);
        assert!(s.read_at(&mut b, 10).is_err(), "released bytes are gone");
        s.read_at(&mut b, 251).unwrap();
        assert_eq!(s.avail(254, 10).unwrap(), 2);
        assert_eq!(s.len(), Some(256));
        assert_eq!(s.read_at(&mut b, 253).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }
}
