//! Helpers for the view tests: headless Chromium, a small PNG decoder (to check that a screenshot
//! is not blank without extra crates), SVG cell parsing, and trace fixtures with known events.
#![allow(dead_code)]

pub mod cdp;

use latscope_event::{BlockDevice, Event, EventBatch, TraceHeader};
use latscope_trace::{Summary, TraceWriter};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The chromium binary, or `None` (printing SKIPPED) when it is missing; under CI=true a missing
/// chromium fails the test.
pub fn chromium(test: &str) -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        let found = Command::new("sh").arg("-c").arg(format!("command -v {name}")).output();
        if let Ok(o) = found {
            if o.status.success() {
                let p = String::from_utf8_lossy(&o.stdout).trim().to_string();
                if !p.is_empty() {
                    return Some(PathBuf::from(p));
                }
            }
        }
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: chromium is not installed (make deps-test installs it)");
    }
    eprintln!("SKIPPED: chromium not installed ({test})");
    None
}

fn chromium_cmd(chrome: &Path, profile: &Path) -> Command {
    let mut c = Command::new(chrome);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ]);
    c.arg(format!("--user-data-dir={}", profile.display()));
    c
}

/// Screenshot of `url` as PNG bytes.
pub fn screenshot(chrome: &Path, url: &str, out: &Path, w: u32, h: u32) -> Vec<u8> {
    let profile = tempfile::tempdir().unwrap();
    let o = chromium_cmd(chrome, profile.path())
        .arg(format!("--screenshot={}", out.display()))
        .arg(format!("--window-size={w},{h}"))
        .arg(url)
        .output()
        .expect("chromium runs");
    assert!(out.exists(), "no screenshot: {}", String::from_utf8_lossy(&o.stderr));
    std::fs::read(out).unwrap()
}

/// The DOM of `url` after load (scripts run).
pub fn dump_dom(chrome: &Path, url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let o = chromium_cmd(chrome, profile.path())
        .arg("--virtual-time-budget=3000")
        .arg("--dump-dom")
        .arg(url)
        .output()
        .expect("chromium runs");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `file://` URL of a path.
pub fn file_url(p: &Path) -> String {
    format!("file://{}", p.canonicalize().unwrap().display())
}

// ---- PNG decoding (zlib inflate, RFC 1950/1951; filters of RFC 2083) ----

struct BitReader<'a> {
    data: &'a [u8],
    pos: usize,
    bitbuf: u64,
    bitcnt: u32,
}

impl<'a> BitReader<'a> {
    fn need(&mut self, n: u32) {
        while self.bitcnt < n {
            let b = *self.data.get(self.pos).expect("deflate stream ends early");
            self.pos += 1;
            self.bitbuf |= u64::from(b) << self.bitcnt;
            self.bitcnt += 8;
        }
    }
    fn bits(&mut self, n: u32) -> u32 {
        if n == 0 {
            return 0;
        }
        self.need(n);
        let v = (self.bitbuf & ((1u64 << n) - 1)) as u32;
        self.bitbuf >>= n;
        self.bitcnt -= n;
        v
    }
}

struct Huffman {
    counts: [u16; 16],
    symbols: Vec<u16>,
}

impl Huffman {
    fn new(lengths: &[u8]) -> Self {
        let mut counts = [0u16; 16];
        for &l in lengths {
            counts[l as usize] += 1;
        }
        counts[0] = 0;
        let mut offs = [0u16; 16];
        for i in 1..16 {
            offs[i] = offs[i - 1] + counts[i - 1];
        }
        let mut symbols = vec![0u16; lengths.len()];
        for (s, &l) in lengths.iter().enumerate() {
            if l != 0 {
                symbols[offs[l as usize] as usize] = s as u16;
                offs[l as usize] += 1;
            }
        }
        Huffman { counts, symbols }
    }
    fn decode(&self, r: &mut BitReader) -> u16 {
        let (mut code, mut first, mut index) = (0i32, 0i32, 0i32);
        for len in 1..16 {
            code |= r.bits(1) as i32;
            let count = i32::from(self.counts[len]);
            if code - count < first {
                return self.symbols[(index + (code - first)) as usize];
            }
            index += count;
            first += count;
            first <<= 1;
            code <<= 1;
        }
        panic!("bad huffman code");
    }
}

const LBASE: [u16; 29] =
    [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258];
const LEXT: [u8; 29] = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
const DBASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145,
    8193, 12289, 16385, 24577,
];
const DEXT: [u8; 30] =
    [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13];

/// Inflates a zlib stream.
pub fn zlib_inflate(data: &[u8]) -> Vec<u8> {
    let mut r = BitReader { data: &data[2..], pos: 0, bitbuf: 0, bitcnt: 0 };
    let mut out = Vec::new();
    loop {
        let last = r.bits(1);
        match r.bits(2) {
            0 => {
                r.bitbuf = 0;
                r.bitcnt = 0;
                let len = u16::from_le_bytes([r.data[r.pos], r.data[r.pos + 1]]) as usize;
                r.pos += 4;
                out.extend_from_slice(&r.data[r.pos..r.pos + len]);
                r.pos += len;
            }
            t @ (1 | 2) => {
                let (lit, dist) = if t == 1 {
                    let mut l = [0u8; 288];
                    for (i, x) in l.iter_mut().enumerate() {
                        *x = match i {
                            0..=143 => 8,
                            144..=255 => 9,
                            256..=279 => 7,
                            _ => 8,
                        };
                    }
                    (Huffman::new(&l), Huffman::new(&[5u8; 30]))
                } else {
                    let hlit = r.bits(5) as usize + 257;
                    let hdist = r.bits(5) as usize + 1;
                    let hclen = r.bits(4) as usize + 4;
                    const ORDER: [usize; 19] = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];
                    let mut cl = [0u8; 19];
                    for &o in ORDER.iter().take(hclen) {
                        cl[o] = r.bits(3) as u8;
                    }
                    let clh = Huffman::new(&cl);
                    let mut lens = Vec::with_capacity(hlit + hdist);
                    while lens.len() < hlit + hdist {
                        let sym = clh.decode(&mut r);
                        match sym {
                            0..=15 => lens.push(sym as u8),
                            16 => {
                                let prev = *lens.last().expect("repeat without a previous length");
                                let n = 3 + r.bits(2);
                                lens.extend(std::iter::repeat_n(prev, n as usize));
                            }
                            17 => {
                                let n = 3 + r.bits(3);
                                lens.extend(std::iter::repeat_n(0, n as usize));
                            }
                            _ => {
                                let n = 11 + r.bits(7);
                                lens.extend(std::iter::repeat_n(0, n as usize));
                            }
                        }
                    }
                    (Huffman::new(&lens[..hlit]), Huffman::new(&lens[hlit..]))
                };
                loop {
                    let sym = lit.decode(&mut r);
                    if sym < 256 {
                        out.push(sym as u8);
                    } else if sym == 256 {
                        break;
                    } else {
                        let i = (sym - 257) as usize;
                        let len = LBASE[i] as usize + r.bits(u32::from(LEXT[i])) as usize;
                        let d = dist.decode(&mut r) as usize;
                        let dd = DBASE[d] as usize + r.bits(u32::from(DEXT[d])) as usize;
                        let start = out.len() - dd;
                        for k in 0..len {
                            let b = out[start + k];
                            out.push(b);
                        }
                    }
                }
            }
            _ => panic!("bad deflate block type"),
        }
        if last == 1 {
            break;
        }
    }
    out
}

/// A decoded image: RGBA pixels.
pub struct Image {
    pub width: usize,
    pub height: usize,
    pub rgba: Vec<[u8; 4]>,
}

/// Decodes an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium writes).
pub fn decode_png(png: &[u8]) -> Image {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let mut pos = 8;
    let (mut w, mut h, mut ctype) = (0usize, 0usize, 0u8);
    let mut idat = Vec::new();
    while pos + 8 <= png.len() {
        let len = u32::from_be_bytes(png[pos..pos + 4].try_into().unwrap()) as usize;
        let kind = &png[pos + 4..pos + 8];
        let data = &png[pos + 8..pos + 8 + len];
        match kind {
            b"IHDR" => {
                w = u32::from_be_bytes(data[0..4].try_into().unwrap()) as usize;
                h = u32::from_be_bytes(data[4..8].try_into().unwrap()) as usize;
                assert_eq!(data[8], 8, "bit depth");
                ctype = data[9];
                assert_eq!(data[12], 0, "interlaced PNG");
            }
            b"IDAT" => idat.extend_from_slice(data),
            b"IEND" => break,
            _ => {}
        }
        pos += 12 + len;
    }
    let bpp = match ctype {
        2 => 3,
        6 => 4,
        other => panic!("PNG colour type {other} not handled"),
    };
    let raw = zlib_inflate(&idat);
    let stride = w * bpp;
    let mut prev = vec![0u8; stride];
    let mut rgba = Vec::with_capacity(w * h);
    for y in 0..h {
        let line = &raw[y * (stride + 1)..(y + 1) * (stride + 1)];
        let f = line[0];
        let mut cur = line[1..].to_vec();
        for i in 0..stride {
            let a = if i >= bpp { cur[i - bpp] } else { 0 };
            let b = prev[i];
            let c = if i >= bpp { prev[i - bpp] } else { 0 };
            let pred = match f {
                0 => 0,
                1 => a,
                2 => b,
                3 => ((u16::from(a) + u16::from(b)) / 2) as u8,
                4 => {
                    let p = i16::from(a) + i16::from(b) - i16::from(c);
                    let (pa, pb, pc) = ((p - i16::from(a)).abs(), (p - i16::from(b)).abs(), (p - i16::from(c)).abs());
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        b
                    } else {
                        c
                    }
                }
                _ => panic!("bad PNG filter {f}"),
            };
            cur[i] = cur[i].wrapping_add(pred);
        }
        for x in 0..w {
            let p = &cur[x * bpp..x * bpp + bpp];
            rgba.push([p[0], p[1], p[2], if bpp == 4 { p[3] } else { 255 }]);
        }
        prev = cur;
    }
    Image { width: w, height: h, rgba }
}

// ---- SVG cells ----

/// The cells of a heat map SVG: (map index, col, row) -> count, from the cell rects' data attributes.
pub fn svg_cells(svg: &str) -> BTreeMap<(usize, usize, usize), u64> {
    let mut out = BTreeMap::new();
    let mut map = 0usize;
    let mut seen_map = false;
    for line in svg.lines() {
        if line.contains(r#"<g class="heatmap""#) {
            if seen_map {
                map += 1;
            }
            seen_map = true;
        }
        if let (Some(c), Some(r), Some(n)) = (attr(line, "data-c"), attr(line, "data-r"), attr(line, "data-n")) {
            out.insert((map, c.parse().unwrap(), r.parse().unwrap()), n.parse().unwrap());
        }
    }
    out
}

/// Value of attribute `name` in a line of markup.
pub fn attr<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let key = format!(" {name}=\"");
    let i = line.find(&key)? + key.len();
    let j = line[i..].find('"')? + i;
    Some(&line[i..j])
}

// ---- trace fixtures ----

/// Writes `events` to a trace file whose recording started at `start_ns`.
pub fn write_trace(path: &Path, start_ns: u64, events: &[Event]) -> TraceHeader {
    let header = TraceHeader {
        format_version: latscope_event::TRACE_FORMAT_VERSION,
        hostname: "fixture".into(),
        start_ns,
        realtime_offset_ns: 1_700_000_000_000_000_000 - start_ns as i64,
        block: true,
        syscalls: "all".into(),
        block_devices: vec![
            BlockDevice { dev: (254 << 20), name: "vda".into(), ..Default::default() },
            BlockDevice { dev: (7 << 20) | 3, name: "loop3".into(), ..Default::default() },
        ],
        ..Default::default()
    };
    write_events(TraceWriter::create(path, &header).unwrap(), start_ns, events, 10_000);
    header
}

/// Writes `events` in blocks of `block` and closes the trace cleanly.
fn write_events(mut w: TraceWriter, start_ns: u64, events: &[Event], block: usize) {
    for chunk in events.chunks(block) {
        let mut b = EventBatch::with_capacity(chunk.len());
        for e in chunk {
            b.push(e);
        }
        w.write_batch(&b, 0).unwrap();
    }
    let end = events.iter().map(|e| e.ts + e.lat).max().unwrap_or(start_ns);
    w.finish(Summary { duration_ns: end.saturating_sub(start_ns).max(1), end_ns: end, ..Default::default() }).unwrap();
}

/// A deterministic pseudo-random sequence.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Like [`write_trace`], in blocks of `block` events, with or without zone maps (per-block events
/// per kind and latency/end ranges; without, the file is like one written before they existed).
pub fn write_trace_blocks(path: &Path, start_ns: u64, events: &[Event], block: usize, zone_maps: bool) {
    let header = TraceHeader {
        format_version: latscope_event::TRACE_FORMAT_VERSION,
        hostname: "fixture".into(),
        start_ns,
        block: true,
        syscalls: "all".into(),
        block_devices: vec![BlockDevice { dev: (254 << 20), name: "vda".into(), ..Default::default() }],
        ..Default::default()
    };
    let opts = latscope_trace::WriterOptions { zone_maps, sync_on_finish: false, ..Default::default() };
    write_events(TraceWriter::create_with(path, &header, opts).unwrap(), start_ns, events, block);
}

// ---- layout of an SVG as Chromium draws it ----

/// An element of a drawn SVG: its tag, id, class, text, whether it is visible and inside a
/// legend, and its box in SVG pixels.
#[derive(Debug, Clone)]
pub struct Drawn {
    pub tag: String,
    pub id: String,
    pub class: String,
    pub text: String,
    pub visible: bool,
    pub in_legend: bool,
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}

impl Drawn {
    /// Whether the boxes of `self` and `o` overlap by more than `tol` pixels each way.
    pub fn overlaps(&self, o: &Drawn, tol: f64) -> bool {
        self.x + self.w - tol > o.x
            && o.x + o.w - tol > self.x
            && self.y + self.h - tol > o.y
            && o.y + o.h - tol > self.y
    }
}

/// The drawn SVG: its size and its elements.
#[derive(Debug, Clone)]
pub struct Layout {
    pub width: f64,
    pub height: f64,
    pub elements: Vec<Drawn>,
}

impl std::ops::Deref for Layout {
    type Target = [Drawn];
    fn deref(&self) -> &[Drawn] {
        &self.elements
    }
}

const MEASURE_JS: &str = r#"<script type="text/ecmascript"><![CDATA[
window.addEventListener("load", function () { setTimeout(function () {
  var root = document.documentElement, out = [];
  var els = root.querySelectorAll("text, [class], [id]");
  for (var i = 0; i < els.length; i++) {
    var e = els[i], r = e.getBoundingClientRect(), cs = window.getComputedStyle(e);
    out.push({tag: e.tagName, id: e.id || "", cls: e.getAttribute("class") || "", text: e.tagName === "text" ? e.textContent : "",
              visible: cs.visibility !== "hidden" && cs.display !== "none", legend: !!(e.closest && e.closest(".legend")),
              x: r.left, y: r.top, w: r.width, h: r.height});
  }
  root.setAttribute("data-layout", JSON.stringify({w: root.width.baseVal.value, h: root.height.baseVal.value, els: out}));
}, 200); });
]]></script>
"#;

/// The layout of `svg` as headless Chromium draws it, after its scripts ran (`hash` is appended
/// to the URL, e.g. `#hover=3,7`).
pub fn layout(chrome: &Path, svg: &Path, hash: &str) -> Layout {
    let doc = std::fs::read_to_string(svg).unwrap();
    let end = doc.rfind("</svg>").expect("an SVG document");
    let probe = svg.with_extension("layout.svg");
    std::fs::write(&probe, format!("{}{MEASURE_JS}{}", &doc[..end], &doc[end..])).unwrap();
    let dom = dump_dom(chrome, &format!("{}{hash}", file_url(&probe)));
    let _ = std::fs::remove_file(&probe);
    let start =
        dom.find("data-layout=\"").unwrap_or_else(|| panic!("no layout report in:\n{}", &dom[..dom.len().min(800)]))
            + "data-layout=\"".len();
    let raw = &dom[start..start + dom[start..].find('"').unwrap()];
    let json = raw
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    let v: serde_json::Value = serde_json::from_str(&json).expect("layout JSON");
    let f = |e: &serde_json::Value, k: &str| e[k].as_f64().unwrap_or(0.0);
    let s = |e: &serde_json::Value, k: &str| e[k].as_str().unwrap_or("").to_string();
    Layout {
        width: v["w"].as_f64().unwrap(),
        height: v["h"].as_f64().unwrap(),
        elements: v["els"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| Drawn {
                tag: s(e, "tag"),
                id: s(e, "id"),
                class: s(e, "cls"),
                text: s(e, "text"),
                visible: e["visible"].as_bool().unwrap_or(true),
                in_legend: e["legend"].as_bool().unwrap_or(false),
                x: f(e, "x"),
                y: f(e, "y"),
                w: f(e, "w"),
                h: f(e, "h"),
            })
            .collect(),
    }
}

/// Every visible text of the drawing lies inside it, no two texts overlap, and no text outside a
/// legend overlaps one. The floating tooltip (`#tiptext`) is only checked to lie inside.
pub fn assert_text_fits(l: &Layout, what: &str) {
    let texts: Vec<&Drawn> = l.iter().filter(|e| e.tag == "text" && e.visible && !e.text.trim().is_empty()).collect();
    for t in &texts {
        assert!(
            t.x >= -0.5 && t.y >= -0.5 && t.x + t.w <= l.width + 0.5 && t.y + t.h <= l.height + 0.5,
            "{what}: text {:?} at ({:.1}, {:.1}) {:.1}x{:.1} runs off the {}x{} drawing",
            t.text,
            t.x,
            t.y,
            t.w,
            t.h,
            l.width,
            l.height
        );
    }
    let fixed: Vec<&&Drawn> = texts.iter().filter(|t| t.id != "tiptext").collect();
    for (i, a) in fixed.iter().enumerate() {
        for b in &fixed[i + 1..] {
            assert!(!a.overlaps(b, 0.5), "{what}: texts overlap: {:?} {a:?} and {:?} {b:?}", a.text, b.text);
        }
    }
    let legends: Vec<&Drawn> = l.iter().filter(|e| e.class.split(' ').any(|c| c == "legend") && e.tag == "g").collect();
    for t in fixed.iter().filter(|t| !t.in_legend) {
        for g in &legends {
            assert!(!t.overlaps(g, 0.5), "{what}: text {:?} overlaps the legend {g:?}", t.text);
        }
    }
}
