//! The plan file: sections, each zstd-compressed and checksummed, and an end record.
//!
//! ```text
//! "LSREPLAY"  u32 version  u32 section count
//! per section:  [4] tag  u32 0  u64 raw length  u64 stored length  u32 CRC-32C  u32 0  stored bytes
//! "LSREPEND"  u64 file length before this record  u32 CRC-32C of every byte before this record  u32 0
//! ```
//! A section's CRC-32C covers its 28 header bytes before the CRC and its stored bytes. All
//! integers are little-endian. The layout of each section's raw bytes is in docs/REPLAY.md.

use super::*;
use crate::op::OP_BYTES;
use std::io::Write;
use std::path::Path;

/// First 8 bytes of a plan file.
pub const PLAN_MAGIC: &[u8; 8] = b"LSREPLAY";
/// The end record's marker.
const END_MAGIC: &[u8; 8] = b"LSREPEND";
/// Plan format version this build writes and reads.
pub const PLAN_VERSION: u32 = 2;

const SECTIONS: [&[u8; 4]; 8] = [b"META", b"PATH", b"LITR", b"THRD", b"OPS_", b"INIT", b"PREO", b"XATR"];
const SECTION_HEADER: usize = 32;
/// Largest raw section accepted (a corrupt length must not make the reader allocate wildly).
const MAX_RAW: u64 = 1 << 36;

/// Write `plan` to `path` (a new file renamed into place when complete and synced,
/// [`latscope_trace::AtomicFile`]: a failed write leaves the previous file as it was).
pub fn write_plan(plan: &Plan, path: &Path) -> Result<u64> {
    let bytes = encode(plan)?;
    let mut f = latscope_trace::AtomicFile::create(path)?;
    f.write_all(&bytes).map_err(|e| ReplayError::io(path, e))?;
    f.commit()?;
    Ok(bytes.len() as u64)
}

/// Read, check and validate a plan.
pub fn read_plan(path: &Path) -> Result<Plan> {
    let bytes = std::fs::read(path).map_err(|e| ReplayError::io(path, e))?;
    let mut plan = decode(&bytes).map_err(|detail| ReplayError::PlanFile { path: path.to_path_buf(), detail })?;
    plan.validate()?;
    plan.id = crc32c::crc32c(&bytes);
    Ok(plan)
}

fn encode(plan: &Plan) -> Result<Vec<u8>> {
    assemble(&sections(plan)?)
}

/// The raw (uncompressed) bytes of each section.
fn sections(plan: &Plan) -> Result<Vec<Vec<u8>>> {
    let mut raw: Vec<Vec<u8>> = Vec::with_capacity(SECTIONS.len());
    raw.push(serde_json::to_vec(&plan.meta).map_err(|e| ReplayError::Usage(format!("cannot encode the plan: {e}")))?);
    let mut b = Vec::new();
    put_u32(&mut b, plan.paths.len() as u32);
    for p in &plan.paths.entries {
        b.extend_from_slice(&p.root.to_le_bytes());
        put_u32(&mut b, p.parent);
        put_str(&mut b, &p.rel);
    }
    raw.push(b);
    let mut b = Vec::new();
    put_u32(&mut b, plan.literals.len() as u32);
    for l in &plan.literals {
        put_str(&mut b, l);
    }
    raw.push(b);
    let mut b = Vec::new();
    put_u32(&mut b, plan.threads.len() as u32);
    for t in &plan.threads {
        put_u32(&mut b, t.tid);
        put_u32(&mut b, t.pid);
        put_u64(&mut b, t.start);
        put_u64(&mut b, t.len);
        put_u32(&mut b, t.ops);
        put_u32(&mut b, t.lane);
        put_str(&mut b, &t.comm);
    }
    raw.push(b);
    let mut b = Vec::with_capacity(8 + plan.ops.len() * OP_BYTES);
    put_u64(&mut b, plan.ops.len() as u64);
    for op in &plan.ops {
        op.encode(&mut b);
    }
    raw.push(b);
    let mut b = Vec::new();
    put_u32(&mut b, plan.init.len() as u32);
    for e in &plan.init {
        put_u32(&mut b, e.path);
        b.push(e.kind as u8);
        put_u32(&mut b, e.mode);
        put_u64(&mut b, e.size);
        put_u32(&mut b, e.target);
    }
    raw.push(b);
    let mut b = Vec::new();
    put_u32(&mut b, plan.preopen.len() as u32);
    for p in &plan.preopen {
        put_u32(&mut b, p.slot);
        put_u32(&mut b, p.path);
        put_u32(&mut b, p.flags);
        put_u64(&mut b, p.pos as u64);
    }
    raw.push(b);
    let mut b = Vec::new();
    put_u32(&mut b, plan.values.len() as u32);
    for v in &plan.values {
        put_u32(&mut b, v.len() as u32);
        b.extend_from_slice(v);
    }
    put_u32(&mut b, plan.xattrs.len() as u32);
    for x in &plan.xattrs {
        put_u32(&mut b, x.path);
        put_u32(&mut b, x.name);
        put_u32(&mut b, x.value);
        put_u32(&mut b, x.size);
    }
    raw.push(b);
    Ok(raw)
}

/// The file: the sections compressed and checksummed, and the end record.
fn assemble(raw: &[Vec<u8>]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    out.extend_from_slice(PLAN_MAGIC);
    put_u32(&mut out, PLAN_VERSION);
    put_u32(&mut out, SECTIONS.len() as u32);
    for (tag, body) in SECTIONS.iter().zip(raw) {
        let stored =
            zstd::bulk::compress(body, 3).map_err(|e| ReplayError::Usage(format!("cannot compress the plan: {e}")))?;
        let start = out.len();
        out.extend_from_slice(*tag);
        put_u32(&mut out, 0);
        put_u64(&mut out, body.len() as u64);
        put_u64(&mut out, stored.len() as u64);
        let crc = crc32c::crc32c_append(crc32c::crc32c(&out[start..]), &stored);
        put_u32(&mut out, crc);
        put_u32(&mut out, 0);
        out.extend_from_slice(&stored);
    }
    let len = out.len() as u64;
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(END_MAGIC);
    put_u64(&mut out, len);
    put_u32(&mut out, crc);
    put_u32(&mut out, 0);
    Ok(out)
}

fn decode(bytes: &[u8]) -> std::result::Result<Plan, String> {
    if bytes.is_empty() {
        return Err("the file is empty: not a latscope replay plan".into());
    }
    if !PLAN_MAGIC.starts_with(&bytes[..bytes.len().min(8)]) {
        return Err("not a latscope replay plan (no LSREPLAY marker): make one with 'latscope replay prepare'".into());
    }
    if bytes.len() < 16 + 24 {
        return Err(format!(
            "the plan is cut short ({} bytes): it was not written completely; prepare it again",
            bytes.len()
        ));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap_or_default());
    if version != PLAN_VERSION {
        return Err(format!(
            "plan format version {version}; this latscope reads version {PLAN_VERSION}: prepare the plan again with this latscope"
        ));
    }
    // The end record: its absence means the file was cut short.
    let end_at = bytes.len().checked_sub(24);
    let ended = end_at.is_some_and(|e| &bytes[e..e + 8] == END_MAGIC);
    let Some(end_at) = end_at.filter(|_| ended) else {
        return Err(format!(
            "the plan is cut short ({} bytes, no end record): it was not written completely; prepare it again",
            bytes.len()
        ));
    };
    let declared = u64::from_le_bytes(bytes[end_at + 8..end_at + 16].try_into().unwrap_or_default());
    if declared != end_at as u64 || bytes[end_at + 20..].iter().any(|&b| b != 0) {
        return Err(format!("the plan's end record says {declared} bytes, the file has {end_at} before it: damaged"));
    }
    let nsec = u32::from_le_bytes(bytes[12..16].try_into().unwrap_or_default());
    if nsec as usize != SECTIONS.len() {
        return Err(format!("{nsec} sections, expected {}: damaged", SECTIONS.len()));
    }
    let mut pos = 16usize;
    let mut raw: Vec<Vec<u8>> = Vec::with_capacity(SECTIONS.len());
    let mut ops = Vec::new();
    for tag in SECTIONS {
        let name = String::from_utf8_lossy(tag).trim_end_matches('_').to_string();
        let here = pos;
        if end_at < pos + SECTION_HEADER {
            return Err(format!("section {name} at byte {here}: the file ends inside its header"));
        }
        let h = &bytes[pos..pos + SECTION_HEADER];
        if &h[..4] != tag {
            return Err(format!(
                "byte {here}: expected section {name}, found {:?}: damaged",
                String::from_utf8_lossy(&h[..4])
            ));
        }
        let raw_len = u64::from_le_bytes(h[8..16].try_into().unwrap_or_default());
        let stored_len = u64::from_le_bytes(h[16..24].try_into().unwrap_or_default());
        let crc = u32::from_le_bytes(h[24..28].try_into().unwrap_or_default());
        if h[4..8].iter().chain(&h[28..32]).any(|&b| b != 0) {
            return Err(format!("section {name} at byte {here}: reserved header bytes are not zero: damaged"));
        }
        let body_end = (pos + SECTION_HEADER).checked_add(stored_len as usize).filter(|&e| e <= end_at);
        let Some(body_end) = body_end else {
            return Err(format!("section {name} at byte {here}: its length {stored_len} runs past the end: damaged"));
        };
        let body = &bytes[pos + SECTION_HEADER..body_end];
        let got = crc32c::crc32c_append(crc32c::crc32c(&h[..24]), body);
        if got != crc {
            return Err(format!(
                "section {name} at byte {here} is damaged (checksum {got:08x}, expected {crc:08x}): prepare the plan again"
            ));
        }
        if raw_len > MAX_RAW {
            return Err(format!("section {name}: {raw_len} bytes uncompressed is implausible: damaged"));
        }
        if tag == b"OPS_" {
            // The largest section by far: decoded straight into the operations' memory.
            ops = decode_ops(body, raw_len, &name, here)?;
            raw.push(Vec::new());
        } else {
            let data = zstd::bulk::decompress(body, raw_len as usize)
                .map_err(|e| format!("section {name} at byte {here} does not decompress: {e}"))?;
            if data.len() as u64 != raw_len {
                return Err(format!("section {name}: {} bytes uncompressed, header says {raw_len}", data.len()));
            }
            raw.push(data);
        }
        pos = body_end;
    }
    if pos != end_at {
        return Err(format!("{} unexpected bytes before the end record at {end_at}: damaged", end_at - pos));
    }
    let whole = u32::from_le_bytes(bytes[end_at + 16..end_at + 20].try_into().unwrap_or_default());
    if crc32c::crc32c(&bytes[..end_at]) != whole {
        return Err("the plan's header is damaged (whole-file checksum mismatch): prepare the plan again".into());
    }

    let meta: PlanMeta = serde_json::from_slice(&raw[0]).map_err(|e| format!("section META: {e}"))?;
    let mut c = Cur::new(&raw[1], "PATH");
    let n = c.u32()?;
    let mut entries = Vec::with_capacity(c.cap(n, 10));
    for _ in 0..n {
        entries.push(PathEntry { root: c.u16()?, parent: c.u32()?, rel: c.str()? });
    }
    c.done()?;
    let mut c = Cur::new(&raw[2], "LITR");
    let n = c.u32()?;
    let mut literals = Vec::with_capacity(c.cap(n, 4));
    for _ in 0..n {
        literals.push(c.str()?);
    }
    c.done()?;
    let mut c = Cur::new(&raw[3], "THRD");
    let n = c.u32()?;
    let mut threads = Vec::with_capacity(c.cap(n, 36));
    for _ in 0..n {
        threads.push(ThreadInfo {
            tid: c.u32()?,
            pid: c.u32()?,
            start: c.u64()?,
            len: c.u64()?,
            ops: c.u32()?,
            lane: c.u32()?,
            comm: c.str()?,
        });
    }
    c.done()?;
    let mut c = Cur::new(&raw[5], "INIT");
    let n = c.u32()?;
    let mut init = Vec::with_capacity(c.cap(n, 21));
    for i in 0..n {
        let path = c.u32()?;
        let kind = match c.u8()? {
            0 => InitKind::Dir,
            1 => InitKind::File,
            2 => InitKind::Symlink,
            k => return Err(format!("section INIT: entry {i} has unknown kind {k}")),
        };
        init.push(InitEntry { path, kind, mode: c.u32()?, size: c.u64()?, target: c.u32()? });
    }
    c.done()?;
    let mut c = Cur::new(&raw[6], "PREO");
    let n = c.u32()?;
    let mut preopen = Vec::with_capacity(c.cap(n, 20));
    for _ in 0..n {
        preopen.push(Preopen { slot: c.u32()?, path: c.u32()?, flags: c.u32()?, pos: c.u64()? as i64 });
    }
    c.done()?;
    let mut c = Cur::new(&raw[7], "XATR");
    let n = c.u32()?;
    let mut values = Vec::with_capacity(c.cap(n, 4));
    for _ in 0..n {
        let len = c.u32()? as usize;
        values.push(c.take(len)?.to_vec());
    }
    let n = c.u32()?;
    let mut xattrs = Vec::with_capacity(c.cap(n, 16));
    for _ in 0..n {
        xattrs.push(InitXattr { path: c.u32()?, name: c.u32()?, value: c.u32()?, size: c.u32()? });
    }
    c.done()?;
    Ok(Plan { id: 0, meta, paths: PathTable { entries }, literals, threads, ops, init, preopen, values, xattrs })
}

/// The `OPS_` section (`u64 n`, then `n` 64-byte entries) decompressed as a stream: the count
/// into a small buffer, the entries straight into the memory of the returned vector (on a
/// little-endian machine an entry's bytes are its [`Op`]), checked before they become `Op`s.
/// No intermediate copy of the section, and its pages come from transparent huge pages where the
/// kernel allows: a plan of a million operations loads in a fraction of the time.
fn decode_ops(body: &[u8], raw_len: u64, name: &str, here: usize) -> std::result::Result<Vec<Op>, String> {
    let bad_len = || format!("section {name}: {raw_len} bytes uncompressed is not a count and whole entries: damaged");
    let Some(entries) = raw_len.checked_sub(8) else { return Err(bad_len()) };
    if entries % OP_BYTES as u64 != 0 {
        return Err(bad_len());
    }
    let n = usize::try_from(entries / OP_BYTES as u64).map_err(|_| bad_len())?;
    let undecodable = |e: std::io::Error| format!("section {name} at byte {here} does not decompress: {e}");
    let mut z = Inflater::new(body).map_err(undecodable)?;
    let mut head = [0u8; 8];
    let got = z.fill(&mut head).map_err(undecodable)?;
    if got < head.len() {
        return Err(format!("section {name}: {got} bytes uncompressed, header says {raw_len}"));
    }
    let count = u64::from_le_bytes(head);
    if count != n as u64 {
        return Err(format!("section {name}: {count} entries in {raw_len} bytes: damaged"));
    }
    let mut buf = OpBuf::zeroed(n).ok_or_else(|| format!("section {name}: cannot allocate {n} operations"))?;
    let got = z.fill(buf.bytes_mut()).map_err(undecodable)?;
    if got < n * OP_BYTES {
        return Err(format!("section {name}: {} bytes uncompressed, header says {raw_len}", 8 + got));
    }
    // Nothing may follow, and the frame must be complete.
    let extra = z.fill(&mut [0u8; 1]).map_err(undecodable)?;
    if extra > 0 || z.input.pos() < body.len() {
        return Err(format!("section {name}: more than the {raw_len} bytes its header says: damaged"));
    }
    if !z.ended {
        return Err(format!("section {name} at byte {here} does not decompress: the compressed data is cut short"));
    }
    for (i, b) in buf.bytes_mut().chunks_exact(OP_BYTES).enumerate() {
        if OpKind::from_u8(b[56]).is_none() || b[58] != 0 || b[59] != 0 {
            return Err(format!("section {name}: entry {i} has an unknown kind or bad padding"));
        }
    }
    #[cfg(target_endian = "big")]
    for b in buf.bytes_mut().chunks_exact_mut(OP_BYTES) {
        // Little-endian fields to native order (the padding stays zero).
        for (at, len) in
            [(0, 8), (8, 8), (16, 8), (24, 8), (32, 4), (36, 4), (40, 4), (44, 4), (48, 4), (52, 4), (60, 4)]
        {
            b[at..at + len].reverse();
        }
    }
    // SAFETY: every entry's kind byte is a valid OpKind, its fields in native order; the other
    // bytes of an Op may hold any value.
    Ok(unsafe { buf.into_vec() })
}

/// A zstd frame decompressed piecewise into buffers of the caller's choice.
struct Inflater<'a> {
    dec: zstd::stream::raw::Decoder<'static>,
    input: zstd::stream::raw::InBuffer<'a>,
    /// The frame was decoded to its end.
    ended: bool,
}

impl<'a> Inflater<'a> {
    fn new(body: &'a [u8]) -> std::io::Result<Self> {
        Ok(Inflater {
            dec: zstd::stream::raw::Decoder::new()?,
            input: zstd::stream::raw::InBuffer::around(body),
            ended: false,
        })
    }

    /// Decompress into `dst` until it is full or the data ends; the bytes written.
    fn fill(&mut self, dst: &mut [u8]) -> std::io::Result<usize> {
        use zstd::stream::raw::{Operation, OutBuffer};
        let mut pos = 0;
        while pos < dst.len() {
            let before = self.input.pos();
            let mut out = OutBuffer::around(&mut dst[pos..]);
            let hint = self.dec.run(&mut self.input, &mut out)?;
            let wrote = out.pos();
            pos += wrote;
            if wrote == 0 && self.input.pos() == before {
                break;
            }
            // 0: the frame is complete and every byte of it delivered.
            self.ended = hint == 0;
        }
        Ok(pos)
    }
}

/// Zeroed memory for `n` operations, advised to use transparent huge pages.
struct OpBuf {
    ptr: *mut Op,
    n: usize,
}

impl OpBuf {
    fn zeroed(n: usize) -> Option<OpBuf> {
        if n == 0 {
            return Some(OpBuf { ptr: std::ptr::NonNull::dangling().as_ptr(), n });
        }
        let layout = std::alloc::Layout::array::<Op>(n).ok()?;
        // SAFETY: non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) } as *mut Op;
        if ptr.is_null() {
            return None;
        }
        crate::sys::advise_huge_pages(ptr as *mut u8, layout.size());
        Some(OpBuf { ptr, n })
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: n * 64 initialised (zeroed) bytes owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut u8, self.n * OP_BYTES) }
    }
    /// # Safety
    /// Every entry's kind byte must be a valid [`OpKind`].
    unsafe fn into_vec(self) -> Vec<Op> {
        let v = Vec::from_raw_parts(self.ptr, self.n, self.n);
        std::mem::forget(self);
        v
    }
}

impl Drop for OpBuf {
    fn drop(&mut self) {
        if self.n > 0 {
            let layout = std::alloc::Layout::array::<Op>(self.n).expect("allocated with this layout");
            // SAFETY: allocated in zeroed() with this layout.
            unsafe { std::alloc::dealloc(self.ptr as *mut u8, layout) };
        }
    }
}

fn put_u32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}
fn put_u64(b: &mut Vec<u8>, v: u64) {
    b.extend_from_slice(&v.to_le_bytes());
}
fn put_str(b: &mut Vec<u8>, s: &str) {
    put_u32(b, s.len() as u32);
    b.extend_from_slice(s.as_bytes());
}

/// A bounds-checked reader over a section's raw bytes.
struct Cur<'a> {
    b: &'a [u8],
    pos: usize,
    name: &'static str,
}

impl<'a> Cur<'a> {
    fn new(b: &'a [u8], name: &'static str) -> Self {
        Cur { b, pos: 0, name }
    }
    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.b.len());
        let Some(end) = end else {
            return Err(format!("section {}: ends early at byte {}", self.name, self.pos));
        };
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    /// A capacity for `n` items of at least `min` bytes each that the section can hold.
    fn cap(&self, n: u32, min: usize) -> usize {
        (n as usize).min((self.b.len() - self.pos) / min.max(1))
    }
    fn u8(&mut self) -> std::result::Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> std::result::Result<u16, String> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().unwrap_or_default()))
    }
    fn u32(&mut self) -> std::result::Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap_or_default()))
    }
    fn u64(&mut self) -> std::result::Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap_or_default()))
    }
    fn str(&mut self) -> std::result::Result<String, String> {
        let n = self.u32()? as usize;
        let name = self.name;
        let b = self.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| format!("section {name}: a string is not UTF-8"))
    }
    fn done(&self) -> std::result::Result<(), String> {
        if self.pos != self.b.len() {
            return Err(format!("section {}: {} bytes left over", self.name, self.b.len() - self.pos));
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small valid plan: one root, two paths, two threads with a wait.
    pub(crate) fn sample() -> Plan {
        let mut meta = PlanMeta {
            plan_version: PLAN_VERSION,
            latscope_version: "test".into(),
            sandbox: SandboxSpec {
                mode: "root".into(),
                name: None,
                roots: vec![RootSpec { dir: "/tmp/sb".into(), mount: "/".into(), fstype: "ext4".into() }],
            },
            max_read: 4096,
            max_write: 4096,
            slots: 1,
            lanes: 2,
            ..Default::default()
        };
        meta.counts.ops = 3;
        meta.counts.init_dirs = 1;
        let paths = PathTable {
            entries: vec![
                PathEntry { root: 0, parent: NONE, rel: "d".into() },
                PathEntry { root: 0, parent: 0, rel: "d/f".into() },
            ],
        };
        let open =
            Op { kind: OpKind::Open, path: 1, slot2: 0, flags: 0o102, mode: 0o644, ret: 3, seq: 0, ..Op::blank() };
        let write = Op { kind: OpKind::Write, slot: 0, size: 4096, ret: 4096, seq: 1, ts: 10, ..Op::blank() };
        let read = Op { kind: OpKind::Pread, slot: 0, size: 4096, ret: 4096, seq: 2, ts: 20, ..Op::blank() };
        let ops = vec![open, write, Op::wait(0, 2, 2, 20), read];
        let threads = vec![
            ThreadInfo { tid: 10, pid: 10, start: 0, len: 2, ops: 2, lane: 0, comm: "a".into() },
            ThreadInfo { tid: 11, pid: 10, start: 2, len: 2, ops: 1, lane: 1, comm: "b".into() },
        ];
        let init = vec![InitEntry { path: 0, kind: InitKind::Dir, mode: 0o755, size: 0, target: NONE }];
        Plan {
            id: 0,
            meta,
            paths,
            literals: vec![],
            threads,
            ops,
            init,
            preopen: vec![],
            values: vec![],
            xattrs: vec![],
        }
    }

    #[test]
    fn plan_roundtrips() {
        let p = sample();
        p.validate().unwrap();
        let b = encode(&p).unwrap();
        assert_eq!(decode(&b).unwrap(), p);
    }

    #[test]
    fn every_truncation_is_refused_with_a_message() {
        let b = encode(&sample()).unwrap();
        for n in 0..b.len() {
            let e = decode(&b[..n]).unwrap_err();
            assert!(e.contains("cut short") || e.contains("empty"), "{n}: {e}");
        }
    }

    #[test]
    fn every_bit_flip_is_refused() {
        let b = encode(&sample()).unwrap();
        for i in 0..b.len() {
            for bit in [0u8, 3, 7] {
                let mut c = b.clone();
                c[i] ^= 1 << bit;
                if let Ok(p) = decode(&c) {
                    panic!("flip of bit {bit} at byte {i} went unnoticed: {p:?}");
                }
            }
        }
    }

    #[test]
    fn large_plans_roundtrip_through_the_streaming_decoder() {
        // Several zstd blocks and huge pages' worth of operations, every field varied.
        let mut p = sample();
        let n = 200_000u64;
        p.ops = (0..n)
            .map(|i| Op {
                ts: i * 1_000 + (i * 7919) % 997,
                size: (i * 31) % 1_000_003,
                off: (i as i64 * 4096) ^ -((i % 3) as i64),
                ret: -((i % 5) as i64) + (i as i64 % 17) * 100,
                slot: (i % 11) as u32,
                slot2: if i % 2 == 0 { NONE } else { (i % 13) as u32 },
                path: (i % 3) as u32,
                path2: NONE - (i % 2) as u32,
                flags: (i * 2_654_435_761) as u32,
                mode: (i % 0o7777) as u32,
                kind: OpKind::ALL[(i % OpKind::ALL.len() as u64) as usize],
                bits: (i % 32) as u8,
                seq: i as u32,
            })
            .collect();
        p.threads = vec![ThreadInfo { tid: 1, pid: 1, start: 0, len: n, ops: n as u32, lane: 0, comm: "a".into() }];
        assert_eq!(decode(&encode(&p).unwrap()).unwrap(), p);
        p.ops.clear();
        p.threads.clear();
        assert_eq!(decode(&encode(&p).unwrap()).unwrap(), p, "no operations");
    }

    #[test]
    fn damaged_operations_behind_valid_checksums_are_refused() {
        let p = sample();
        let raw = sections(&p).unwrap();
        let refuse = |ops: Vec<u8>, want: &str| {
            let mut r = raw.clone();
            r[4] = ops;
            let e = decode(&assemble(&r).unwrap()).unwrap_err();
            assert!(e.contains("section OPS") && e.contains(want), "{want}: {e}");
        };
        let good = raw[4].clone();
        let mut bad_kind = good.clone();
        bad_kind[8 + OP_BYTES + 56] = OpKind::ALL.len() as u8;
        refuse(bad_kind, "entry 1 has an unknown kind");
        let mut bad_pad = good.clone();
        bad_pad[8 + 3 * OP_BYTES + 58] = 1;
        refuse(bad_pad, "entry 3 has an unknown kind or bad padding");
        let mut count = good.clone();
        count[0] += 1;
        refuse(count, "5 entries in");
        refuse(good[..good.len() - OP_BYTES].to_vec(), "entries in");
        refuse(good[..good.len() - 1].to_vec(), "not a count and whole entries");
        refuse(good[..5].to_vec(), "not a count and whole entries");
        // Count and header agree, the data holds fewer entries or more.
        for (count, want) in [(5u64, "header says"), (3, "more than")] {
            let mut r = raw.clone();
            r[4][..8].copy_from_slice(&count.to_le_bytes());
            let mut f = assemble(&r).unwrap();
            let at = ops_header(&f);
            f[at + 8..at + 16].copy_from_slice(&(8 + count * OP_BYTES as u64).to_le_bytes());
            reseal(&mut f, at);
            let e = decode(&f).unwrap_err();
            assert!(e.contains("section OPS") && e.contains(want), "{want}: {e}");
        }
    }

    /// Where the OPS section's header starts.
    fn ops_header(f: &[u8]) -> usize {
        let mut pos = 16;
        loop {
            if &f[pos..pos + 4] == b"OPS_" {
                return pos;
            }
            pos += SECTION_HEADER + u64::from_le_bytes(f[pos + 16..pos + 24].try_into().unwrap()) as usize;
        }
    }

    /// Recompute the checksums after editing the section header at `at`.
    fn reseal(f: &mut [u8], at: usize) {
        let stored = u64::from_le_bytes(f[at + 16..at + 24].try_into().unwrap()) as usize;
        let body = at + SECTION_HEADER;
        let crc = crc32c::crc32c_append(crc32c::crc32c(&f[at..at + 24]), &f[body..body + stored]);
        f[at + 24..at + 28].copy_from_slice(&crc.to_le_bytes());
        let end = f.len() - 24;
        let whole = crc32c::crc32c(&f[..end]);
        f[end + 16..end + 20].copy_from_slice(&whole.to_le_bytes());
    }

    /// Forged limits (a 4 EiB read buffer, more slots than operations, a starting tree larger
    /// than the header says) are refused by validation, before anything is allocated.
    #[test]
    fn forged_limits_and_init_sizes_are_refused_before_allocation() {
        let mut p = sample();
        p.meta.max_read = 1 << 62;
        p.ops[3].size = 1 << 62;
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("max_read 4611686018427387904"), "{e}");
        let mut p = sample();
        p.meta.max_write = u64::MAX;
        assert!(p.validate().unwrap_err().to_string().contains("max_write"));
        let mut p = sample();
        p.meta.slots = u32::MAX;
        assert!(p.validate().unwrap_err().to_string().contains("fd slots"));
        let mut p = sample();
        p.init.push(InitEntry { path: 1, kind: InitKind::File, mode: 0o644, size: 1 << 50, target: NONE });
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("1125899906842624 bytes") && e.contains("header says 0 files (0 bytes)"), "{e}");
        // The same entry with the header telling the truth is valid (init then writes it).
        p.meta.counts.init_files = 1;
        p.meta.counts.init_bytes = 1 << 50;
        p.validate().unwrap();
    }

    /// The header's count of starting attributes must match the attributes the plan holds:
    /// a plan whose header says otherwise (one more, or none for one it holds) is refused as it
    /// is read, the message giving both counts.
    #[test]
    fn a_header_disagreeing_with_the_starting_attributes_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("p.plan");
        let mut p = sample();
        p.meta.counts.init_xattrs = 1;
        write_plan(&p, &f).unwrap();
        let e = read_plan(&f).unwrap_err().to_string();
        assert!(e.contains("the starting tree holds 0 extended attributes, the header says 1"), "{e}");
        let mut p = sample();
        p.literals.push("user.k".into());
        p.xattrs.push(InitXattr { path: 0, name: 0, value: NONE, size: 4 });
        write_plan(&p, &f).unwrap();
        let e = read_plan(&f).unwrap_err().to_string();
        assert!(e.contains("the starting tree holds 1 extended attributes, the header says 0"), "{e}");
        // With the header telling the truth the plan reads.
        p.meta.counts.init_xattrs = 1;
        write_plan(&p, &f).unwrap();
        assert_eq!(read_plan(&f).unwrap().xattrs.len(), 1);
    }

    #[test]
    fn validate_refuses_backward_and_self_waits() {
        let mut p = sample();
        p.ops[2] = Op::wait(1, 1, 2, 20);
        assert!(p.validate().unwrap_err().to_string().contains("not earlier"));
        let mut p = sample();
        p.ops[2] = Op::wait(0, 3, 2, 20);
        assert!(p.validate().is_err(), "waits for more operations than the thread has");
        let mut p = sample();
        p.ops[2].seq = 1; // the op it waits for (seq 1) is not earlier than itself
        p.ops[3].seq = 1;
        assert!(p.validate().is_err());
    }

    #[test]
    fn validate_refuses_escaping_paths() {
        for rel in ["../etc", "/etc", "d/../../x", "d//f", "./x", "a\0b"] {
            let mut p = sample();
            p.paths.entries[0].rel = rel.into();
            assert!(p.validate().is_err(), "{rel:?} accepted");
        }
        let mut p = sample();
        p.meta.sandbox.roots[0].dir = "relative/dir".into();
        assert!(p.validate().is_err());
    }

    #[test]
    fn symlink_targets_must_stay_inside() {
        assert!(target_stays_inside("a/b", 0));
        assert!(target_stays_inside("../x", 1));
        assert!(!target_stays_inside("../x", 0));
        assert!(!target_stays_inside("/etc/passwd", 3));
        assert!(!target_stays_inside("a/../../..", 1));
    }
}
