//! Drawing: a spectrogram, its axis, legend and status as a grid of styled cells ([`Screen`]),
//! and the grid as terminal bytes. Nothing here touches a terminal, so everything is testable.

use super::color::{color, empty_color, glyph, legend_steps, Color, Palette};
use super::model::{MapCache, Spectrogram};
use super::scale::{Axis, Buckets};
use latscope_event::units::fmt_ns;
use std::fmt::Write as _;

/// Text attributes of a cell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Style {
    /// Foreground colour (`None`: the terminal's).
    pub fg: Option<Color>,
    /// Background colour (`None`: the terminal's).
    pub bg: Option<Color>,
    /// Bold.
    pub bold: bool,
    /// Reverse video.
    pub reverse: bool,
}

impl Style {
    /// Reverse video (status bars, selections without colour).
    pub const REVERSE: Style = Style { fg: None, bg: None, bold: false, reverse: true };
    /// Bold.
    pub const BOLD: Style = Style { fg: None, bg: None, bold: true, reverse: false };
}

/// One character cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    /// The character.
    pub ch: char,
    /// Its style.
    pub style: Style,
}

impl Default for Cell {
    fn default() -> Self {
        Cell { ch: ' ', style: Style::default() }
    }
}

/// A grid of cells: what the terminal should show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Screen {
    /// Columns.
    pub width: usize,
    /// Lines.
    pub height: usize,
    /// `height` lines of `width` cells.
    pub cells: Vec<Cell>,
}

impl Screen {
    /// A blank screen.
    pub fn new(width: usize, height: usize) -> Screen {
        Screen { width, height, cells: vec![Cell::default(); width * height] }
    }
    /// Cell at column `x`, line `y`.
    pub fn get(&self, x: usize, y: usize) -> Cell {
        self.cells[y * self.width + x]
    }
    /// Set a cell (ignored outside the screen).
    pub fn set(&mut self, x: usize, y: usize, c: Cell) {
        if x < self.width && y < self.height {
            self.cells[y * self.width + x] = c;
        }
    }
    /// Write `s` from column `x` of line `y`, clipped at the right edge; returns the column after it.
    pub fn put(&mut self, x: usize, y: usize, s: &str, style: Style) -> usize {
        let mut cx = x;
        for ch in s.chars() {
            if cx >= self.width {
                break;
            }
            self.set(cx, y, Cell { ch, style });
            cx += 1;
        }
        cx
    }
    /// Fill line `y` from column `x` to the edge with `style` spaces.
    pub fn fill_line(&mut self, x: usize, y: usize, style: Style) {
        for cx in x..self.width {
            self.set(cx, y, Cell { ch: ' ', style });
        }
    }
    /// The characters of line `y` (no styles).
    pub fn line_text(&self, y: usize) -> String {
        (0..self.width).map(|x| self.get(x, y).ch).collect()
    }
    /// The whole screen as text, one line per line, trailing spaces kept.
    pub fn text(&self) -> String {
        (0..self.height).map(|y| self.line_text(y)).collect::<Vec<_>>().join("\n")
    }

    /// Terminal bytes redrawing the lines that differ from `prev` (all lines when `prev` is
    /// `None` or of another size).
    pub fn to_ansi(&self, prev: Option<&Screen>) -> String {
        let mut out = String::with_capacity(self.width * self.height * 2);
        let same_size = prev.is_some_and(|p| p.width == self.width && p.height == self.height);
        for y in 0..self.height {
            let row = &self.cells[y * self.width..(y + 1) * self.width];
            if same_size {
                let p = prev.expect("checked");
                if &p.cells[y * p.width..(y + 1) * p.width] == row {
                    continue;
                }
            }
            let _ = write!(out, "\x1b[{};1H", y + 1);
            line_ansi(row, &mut out);
        }
        out
    }
}

/// SGR sequence selecting `s` (after a reset).
pub fn sgr(s: Style) -> String {
    let mut out = String::from("\x1b[0");
    if s.bold {
        out.push_str(";1");
    }
    if s.reverse {
        out.push_str(";7");
    }
    match s.fg {
        Some(Color::Idx(i)) => {
            let _ = write!(out, ";38;5;{i}");
        }
        Some(Color::Rgb(r, g, b)) => {
            let _ = write!(out, ";38;2;{r};{g};{b}");
        }
        None => {}
    }
    match s.bg {
        Some(Color::Idx(i)) => {
            let _ = write!(out, ";48;5;{i}");
        }
        Some(Color::Rgb(r, g, b)) => {
            let _ = write!(out, ";48;2;{r};{g};{b}");
        }
        None => {}
    }
    out.push('m');
    out
}

/// Cells as text with colour changes (SGR) only where the style changes; ends reset.
pub fn line_ansi(cells: &[Cell], out: &mut String) {
    let mut cur = Style::default();
    for c in cells {
        if c.style != cur {
            out.push_str(&sgr(c.style));
            cur = c.style;
        }
        out.push(c.ch);
    }
    if cur != Style::default() {
        out.push_str("\x1b[0m");
    }
}

/// The cell showing a count of `n` events.
pub fn count_cell(n: u64, p: Palette) -> Cell {
    match p {
        Palette::Mono => Cell { ch: glyph(n), style: Style::default() },
        _ => Cell { ch: ' ', style: Style { bg: color(n, p).or(empty_color(p)), ..Style::default() } },
    }
}

/// How strips of a split view are placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// Next to each other (each gets a share of the width).
    Side,
    /// Above each other (each gets a share of the height).
    Stack,
}

impl Split {
    /// The placement asked for with `--layout` (`side`, `stack`, `auto`): `auto` puts the strips
    /// of `--by class` and `--by disk` (a few, fixed) side by side on a terminal 160 columns wide
    /// or more, and stacks the others.
    pub fn choose(layout: &str, few_strips: bool, width: usize) -> Split {
        match layout {
            "side" => Split::Side,
            "stack" => Split::Stack,
            _ if few_strips && width >= 160 => Split::Side,
            _ => Split::Stack,
        }
    }
}

/// What to draw and how.
#[derive(Debug, Clone)]
pub struct DrawOptions {
    /// Left edge of the latency axis (ns).
    pub min_ns: u64,
    /// Right edge of the latency axis (ns, excluded).
    pub max_ns: u64,
    /// Colours.
    pub palette: Palette,
    /// Split the view by group (`--by`); `false`: one strip with every group summed.
    pub split: bool,
    /// How strips are placed.
    pub layout: Split,
    /// Most strips drawn.
    pub max_strips: usize,
    /// First words of the status bar (`latscope spectrogram`).
    pub title: String,
}

impl Default for DrawOptions {
    fn default() -> Self {
        DrawOptions {
            min_ns: 1,
            max_ns: 10_000_000_000,
            palette: Palette::Ansi256,
            split: false,
            layout: Split::Side,
            max_strips: 4,
            title: "latscope spectrogram".into(),
        }
    }
}

/// What the data source reports for the status lines.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FeedStatus {
    /// Where the data comes from: `live: in-kernel aggregation`, `trace.lst`, ...
    pub source: String,
    /// The filter expression (empty: none).
    pub filter: String,
    /// Events per second over the last interval.
    pub events_per_s: f64,
    /// Events lost so far (ring buffer full); `None` where nothing can be lost (a file: what the
    /// recording lost is in `note`).
    pub drops: Option<u64>,
    /// Anything else worth a word (`end of trace`, `paused`, ...).
    pub note: String,
    /// Whether a drill-down can list events.
    pub has_events: bool,
    /// What the rows count besides the events drawn, after their number: ` (1444 idle waits
    /// left out)`, ` (idle waits included)`, ` (idle waits not counted: left out in the kernel)`,
    /// or nothing (block requests) — the counting rule of every view ([`crate::waits`]).
    pub counted: String,
}

impl FeedStatus {
    /// The line that says what was drawn: `67236 syscall events (1444 idle waits left out)`.
    pub fn headline(&self, events: u64, kind: latscope_event::EventKind) -> String {
        let noun = if kind == latscope_event::EventKind::Block { "block I/O" } else { "syscall" };
        format!("{events} {noun} events{}", self.counted)
    }
}

/// Interactive state drawn over the spectrogram.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ViewState {
    /// The display does not follow new rows.
    pub frozen: bool,
    /// Rows hidden below the bottom of the view (scrolled back), when frozen.
    pub scroll: u64,
    /// Cursor: (strip, row index, column).
    pub cursor: Option<(usize, u64, usize)>,
    /// The other corner of the selection: (row index, column).
    pub anchor: Option<(u64, usize)>,
    /// A message for the bottom line (replaces the key hints).
    pub message: String,
    /// An overlay (event list, help) drawn over the strips: title and lines, first line shown.
    pub overlay: Option<Overlay>,
}

/// A text panel drawn over the strips.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overlay {
    /// The title line.
    pub title: String,
    /// The lines.
    pub lines: Vec<String>,
    /// Index of the first line shown.
    pub top: usize,
}

/// Where one strip was drawn (for mouse hits and the selection).
#[derive(Debug, Clone, PartialEq)]
pub struct StripGeom {
    /// The group drawn (`None`: all).
    pub group: Option<u32>,
    /// First screen column of the cells.
    pub x0: usize,
    /// First screen line of the rows.
    pub y0: usize,
    /// The axis of the strip.
    pub axis: Axis,
    /// Row index drawn on each line, from `y0` down.
    pub lines: Vec<Option<u64>>,
}

impl StripGeom {
    /// The (row index, column) under screen position `(x, y)`, if it is a cell of this strip.
    pub fn hit(&self, x: usize, y: usize) -> Option<(u64, usize)> {
        if x < self.x0 || x >= self.x0 + self.axis.cols() || y < self.y0 {
            return None;
        }
        let row = (*self.lines.get(y - self.y0)?)?;
        Some((row, x - self.x0))
    }
    /// Screen line of row `index`, if visible.
    pub fn line_of(&self, index: u64) -> Option<usize> {
        self.lines.iter().position(|l| *l == Some(index)).map(|i| self.y0 + i)
    }
}

/// The geometry of a drawn frame.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Geometry {
    /// The strips.
    pub strips: Vec<StripGeom>,
    /// Lines per strip.
    pub rows: usize,
}

/// Width of the time column (`12345.5s` and a space).
pub const GUTTER: usize = 9;

/// Time of a row start, relative to the origin: `12.5s` (decimals to suit the interval).
pub fn fmt_rel(ns: u64, interval_ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if interval_ns >= 100_000_000 {
        format!("{s:.1}s")
    } else if interval_ns >= 10_000_000 {
        format!("{s:.2}s")
    } else {
        format!("{s:.3}s")
    }
}

/// Draw a whole frame: status bar, strips, axis, legend, bottom line.
pub fn compose(
    spec: &Spectrogram,
    opts: &DrawOptions,
    state: &ViewState,
    status: &FeedStatus,
    width: usize,
    height: usize,
) -> (Screen, Geometry) {
    let width = width.max(GUTTER + 10);
    let height = height.max(6);
    let mut scr = Screen::new(width, height);
    let pal = opts.palette;

    // Status bar: shortened (title, then the source in the middle, the filter at the end) to fit.
    let bar = status_bar(opts, spec, status, width);
    scr.put(0, 0, &bar, Style::REVERSE);
    scr.fill_line(bar.chars().count().min(width), 0, Style::REVERSE);

    // Strips.
    let groups: Vec<Option<u32>> = if opts.split {
        let g = spec.top_groups(opts.max_strips.max(1));
        if g.is_empty() {
            vec![None]
        } else {
            g.into_iter().map(Some).collect()
        }
    } else {
        vec![None]
    };
    let n = groups.len();
    let area_top = 1;
    let area_h = height.saturating_sub(4); // status, axis, legend, bottom line
    let avail_w = width - GUTTER;
    let mut geo = Geometry::default();
    let labelled = opts.split;
    let (strip_cols, strip_rows) = match opts.layout {
        Split::Side => ((avail_w + 1) / n - 1, area_h.saturating_sub(usize::from(labelled))),
        Split::Stack => (avail_w, (area_h / n).saturating_sub(usize::from(labelled))),
    };
    let strip_cols = strip_cols.max(1);
    geo.rows = strip_rows;
    let end = spec.sealed().saturating_sub(if state.frozen { state.scroll } else { 0 });
    let mut maps = MapCache::new(Axis::new(opts.min_ns, opts.max_ns, strip_cols));
    let (mut below, mut above) = (0u64, 0u64);
    for (si, g) in groups.iter().enumerate() {
        let (x0, y0) = match opts.layout {
            Split::Side => (GUTTER + si * (strip_cols + 1), area_top),
            Split::Stack => (GUTTER, area_top + si * (strip_rows + usize::from(labelled))),
        };
        if labelled {
            let name = g.map_or_else(|| "(no events yet)".to_string(), |g| spec.group_name(g));
            let total = spec.events_in(end.saturating_sub(strip_rows as u64), end, *g);
            let label = if total == 1 {
                format!("{} (1 event)", crate::text::clean(&name))
            } else {
                format!("{} ({} events)", crate::text::clean(&name), crate::text::short_count(total as f64))
            };
            let label: String = label.chars().take(strip_cols).collect();
            scr.put(x0, y0, &label, Style::BOLD);
            if si > 0 && opts.layout == Split::Side {
                for y in y0..y0 + 1 + strip_rows {
                    scr.set(x0 - 1, y, Cell { ch: '│', style: Style::default() });
                }
            }
        }
        let ry0 = y0 + usize::from(labelled);
        let mut lines = Vec::with_capacity(strip_rows);
        for li in 0..strip_rows {
            let back = (strip_rows - li) as u64;
            let idx = end.checked_sub(back).filter(|&i| i >= spec.first_index());
            lines.push(idx);
            let y = ry0 + li;
            let Some(idx) = idx else { continue };
            if si == 0 || opts.layout == Split::Stack {
                let t = fmt_rel(idx * spec.interval_ns(), spec.interval_ns());
                scr.put(0, y, &format!("{t:>8}"), Style::default());
            }
            let (cols, b, a) = spec.columns(idx, *g, &mut maps);
            below += b;
            above += a;
            for (c, &cnt) in cols.iter().enumerate() {
                scr.set(x0 + c, y, count_cell(cnt, pal));
            }
        }
        geo.strips.push(StripGeom { group: *g, x0, y0: ry0, axis: maps.axis.clone(), lines });
    }

    // Selection and cursor (frozen view).
    if let Some((cs, crow, ccol)) = state.cursor {
        if let Some(strip) = geo.strips.get(cs) {
            let (r0, r1, c0, c1) = match state.anchor {
                Some((arow, acol)) => (arow.min(crow), arow.max(crow), acol.min(ccol), acol.max(ccol)),
                None => (crow, crow, ccol, ccol),
            };
            for (li, l) in strip.lines.iter().enumerate() {
                let Some(idx) = l else { continue };
                if *idx < r0 || *idx > r1 {
                    continue;
                }
                for c in c0..=c1.min(strip.axis.cols() - 1) {
                    let (x, y) = (strip.x0 + c, strip.y0 + li);
                    let mut cell = scr.get(x, y);
                    let is_cursor = *idx == crow && c == ccol;
                    if pal == Palette::Mono {
                        cell.style.reverse = true;
                        if is_cursor {
                            cell.ch = '+';
                        }
                    } else {
                        cell.ch = if is_cursor { '+' } else { '░' };
                        cell.style.fg = Some(Color::Idx(15));
                        cell.style.bold = is_cursor;
                    }
                    scr.set(x, y, cell);
                }
            }
        }
    }

    // Axis under the strips.
    let axis_y = height - 3;
    scr.put(0, axis_y, &format!("{:>8}", "latency"), Style::default());
    for s in &geo.strips {
        scr.put(s.x0, axis_y, &s.axis.label_line(), Style::default());
        if opts.layout == Split::Stack {
            break;
        }
    }

    // Legend.
    let ly = height - 2;
    let mut x = scr.put(0, ly, &format!("count per cell per {}:", fmt_ns(spec.interval_ns())), Style::default());
    for (label, n) in legend_steps(pal) {
        x = scr.put(x, ly, " ", Style::default());
        let sw = count_cell(n, pal);
        scr.set(x, ly, sw);
        scr.set(x + 1, ly, sw);
        x = scr.put(x + 2, ly, &label, Style::default());
    }
    if pal != Palette::Mono {
        x = scr.put(x, ly, " ", Style::default());
        let e = count_cell(0, pal);
        scr.set(x, ly, e);
        scr.set(x + 1, ly, e);
        scr.put(x + 2, ly, "none", Style::default());
    }

    // Bottom line: numbers, then the message or key hints, fitted to the width; a message too
    // long for it takes the legend's line.
    let mut head = format!("{} events/s", crate::text::short_count(status.events_per_s.round()));
    if let Some(d) = status.drops {
        let _ = write!(head, "  drops {d}");
    }
    if below + above > 0 {
        let _ = write!(head, "  off axis: {} <{} {} >={}", below, fmt_ns(opts.min_ns), above, fmt_ns(opts.max_ns));
    }
    if state.frozen {
        head.push_str("  FROZEN");
    }
    let by = height - 1;
    let (upper, lower) = bottom_lines(&head, &status.note, state, width);
    if let Some(u) = upper {
        scr.fill_line(0, ly, Style::default());
        scr.put(0, ly, &u, Style::BOLD);
    }
    scr.put(0, by, &lower, Style::default());

    // Overlay over the strip area.
    if let Some(ov) = &state.overlay {
        let top = area_top;
        let h = area_h.max(2);
        scr.put(0, top, &format!(" {} ", ov.title), Style::REVERSE);
        scr.fill_line(ov.title.chars().count() + 2, top, Style::REVERSE);
        for i in 1..h {
            scr.fill_line(0, top + i, Style::default());
            if let Some(l) = ov.lines.get(ov.top + i - 1) {
                scr.put(1, top + i, l, Style::default());
            }
        }
    }
    (scr, geo)
}

/// `s` cut to `w` characters, with `…` at the end when cut.
pub fn fit_end(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        return s.to_string();
    }
    let mut out: String = s.chars().take(w.saturating_sub(1)).collect();
    if w > 0 {
        out.push('…');
    }
    out
}

/// `s` cut to `w` characters in the middle, keeping the last path component whole when there
/// is room (a path keeps its start and its file name).
pub fn fit_middle(s: &str, w: usize) -> String {
    let n = s.chars().count();
    if n <= w {
        return s.to_string();
    }
    if w < 5 {
        return fit_end(s, w);
    }
    let last = s.rsplit('/').next().map_or(0, |c| c.chars().count() + 1);
    let tail = last.min(w - 4).max((w - 1) / 2);
    let head = w - 1 - tail;
    let mut out: String = s.chars().take(head).collect();
    out.push('…');
    out.extend(s.chars().skip(n - tail));
    out
}

/// The status bar within `width` characters: the title, the interval, the source and the filter;
/// the title loses its `latscope spectrogram: ` first, then the source and the filter are cut.
fn status_bar(opts: &DrawOptions, spec: &Spectrogram, status: &FeedStatus, width: usize) -> String {
    let interval = format!("{}/row", fmt_ns(spec.interval_ns()));
    let filter = if status.filter.trim().is_empty() { "(none)" } else { status.filter.trim() };
    let filter = format!("filter: {}", crate::text::clean(filter));
    let source = crate::text::clean(&status.source).into_owned();
    let join = |title: &str, source: &str, filter: &str| {
        let mut bar = format!(" {title}  {interval}");
        if !source.is_empty() {
            let _ = write!(bar, "  {source}");
        }
        let _ = write!(bar, "  {filter}");
        bar
    };
    let full = join(&opts.title, &source, &filter);
    if full.chars().count() <= width {
        return full;
    }
    // "latscope spectrogram: syscall latency" -> "syscall latency".
    let title = opts.title.rsplit(": ").next().unwrap_or(&opts.title);
    let title = if title == opts.title { title.rsplit(' ').next().unwrap_or(title) } else { title };
    let shorter = join(title, &source, &filter);
    if shorter.chars().count() <= width {
        return shorter;
    }
    // Share what is left between the source (cut in the middle, at least 12 characters) and the
    // filter (cut at the end); with less room the source goes.
    let fixed = join(title, "", "").chars().count() + 2;
    let room = width.saturating_sub(fixed);
    let (ns, nf) = (source.chars().count(), filter.chars().count());
    if !source.is_empty() && room >= 12 + 16 {
        // The source keeps its file name if it can; the filter gets the rest.
        let last = source.rsplit('/').next().map_or(0, |c| c.chars().count());
        let s_min = ns.min((last + 6).max(12)).min(room - 16);
        let s_room = s_min.max(ns.min(room.saturating_sub(nf)));
        let f_room = room - s_room;
        return fit_end(&join(title, &fit_middle(&source, s_room), &fit_end(&filter, f_room)), width);
    }
    fit_end(&join(title, "", &filter), width)
}

/// The bottom line(s) within `width`: `head` (numbers), the note, then the message or key hints,
/// shortened to fit. Returns the line above it too when a message needs a line of its own.
fn bottom_lines(head: &str, note: &str, state: &ViewState, width: usize) -> (Option<String>, String) {
    let note = crate::text::clean(note);
    let with = |note: &str, tail: &str| {
        let mut l = head.to_string();
        if !note.is_empty() {
            let _ = write!(l, "  {note}");
        }
        let _ = write!(l, "  | {tail}");
        l
    };
    if !state.message.is_empty() {
        let msg = crate::text::clean(&state.message);
        let l = with(&note, &msg);
        if l.chars().count() <= width {
            return (None, l);
        }
        return (Some(fit_end(&msg, width)), fit_end(&with(&note, "?: help  q: quit"), width));
    }
    let hints: &[&str] = if state.frozen {
        &[
            "arrows: move  v: mark corner  enter: list events  esc: clear  space: resume  ?: help  q: quit",
            "arrows  v: mark  enter: list  space: resume  ?: help  q: quit",
            "?: help  q: quit",
        ]
    } else {
        &["space: freeze and select  ?: help  q: quit", "space: freeze  ?: help  q: quit", "?: help  q: quit"]
    };
    for h in hints {
        let l = with(&note, h);
        if l.chars().count() <= width {
            return (None, l);
        }
    }
    // Still too long: the note gives way, then the numbers are written shorter, then cut.
    let last = hints[hints.len() - 1];
    let room = width.saturating_sub(with("", last).chars().count() + 2);
    let note = if room >= 8 { fit_end(&note, room) } else { String::new() };
    let l = with(&note, last);
    if l.chars().count() <= width {
        return (None, l);
    }
    let compact = head.replace(" events/s", "/s").replace("  ", " ");
    let l = format!("{compact} | {last}");
    (None, if l.chars().count() <= width { l } else { fit_end(&l, width) })
}

/// The latency range and row range of a selection on a strip: `(t_from, t_to, lat_lo, lat_hi)`,
/// with times as event end times (`t_to` excluded) and latencies for [`Buckets::FINE`] counts.
pub fn selection_bounds(
    spec: &Spectrogram,
    axis: &Axis,
    rows: (u64, u64),
    cols: (usize, usize),
) -> (u64, u64, u64, u64) {
    let (r0, r1) = (rows.0.min(rows.1), rows.0.max(rows.1));
    let (c0, c1) = (cols.0.min(cols.1), cols.0.max(cols.1));
    let mut maps = MapCache::new(axis.clone());
    let (lo, hi) = maps.lat_range(Buckets::FINE, c0, c1);
    (spec.row_start(r0), spec.row_start(r1 + 1), lo, hi)
}

/// Plain text output (no cursor movement): a header, then one line per row as rows complete.
#[derive(Debug, Clone)]
pub struct PlainPrinter {
    axis: Axis,
    palette: Palette,
    split: bool,
    name_w: usize,
    next: u64,
}

impl PlainPrinter {
    /// A printer of `width` columns in all (the time column included).
    pub fn new(width: usize, opts: &DrawOptions) -> PlainPrinter {
        let name_w = if opts.split { 12 } else { 0 };
        let cols = width.saturating_sub(GUTTER + if opts.split { name_w + 1 } else { 0 }).max(10);
        PlainPrinter {
            axis: Axis::new(opts.min_ns, opts.max_ns, cols),
            palette: opts.palette,
            split: opts.split,
            name_w,
            next: u64::MAX,
        }
    }

    /// The axis rows are drawn on.
    pub fn axis(&self) -> &Axis {
        &self.axis
    }

    /// The header lines: what is drawn, the glyph or colour scale, and the axis.
    pub fn header(&self, spec: &Spectrogram, status: &FeedStatus) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "# latscope spectrogram: {} per row; latency {}..{} on a log scale, {} columns ({:.1} per decade); source: {}; filter: {}",
            fmt_ns(spec.interval_ns()),
            fmt_ns(self.axis.min_ns()),
            fmt_ns(self.axis.max_ns()),
            self.axis.cols(),
            self.axis.per_decade(),
            if status.source.is_empty() { "-" } else { &status.source },
            if status.filter.trim().is_empty() { "(none)" } else { status.filter.trim() }
        );
        if self.palette == Palette::Mono {
            let _ = writeln!(
                s,
                "# cell = events in that latency range in that row: ' ' 0, '.' 1-9, ':' 10-99, 'o' 100-999, '#' 1000-9999, '@' 10000+"
            );
        } else {
            let _ = writeln!(s, "# cell colour = events in that latency range in that row: black 0, greens 1-99, yellows 100-999, reds 1000+");
        }
        let name = if self.split { format!("{:<w$} ", "group", w = self.name_w) } else { String::new() };
        let _ = writeln!(s, "{:>8} {name}{}", "time", self.axis.label_line());
        s
    }

    /// Lines for the sealed rows not printed yet (every row from the first one on, empty or not).
    pub fn rows(&mut self, spec: &Spectrogram) -> String {
        let mut s = String::new();
        if self.next == u64::MAX {
            self.next = spec.first_index();
        }
        self.next = self.next.max(spec.first_index());
        let mut maps = MapCache::new(self.axis.clone());
        while self.next < spec.sealed() {
            let idx = self.next;
            self.next += 1;
            let t = format!("{:>8}", fmt_rel(idx * spec.interval_ns(), spec.interval_ns()));
            if !self.split {
                let (cols, b, a) = spec.columns(idx, None, &mut maps);
                self.line(&mut s, &t, None, &cols, b, a);
                continue;
            }
            let row = spec.row(idx).expect("sealed");
            let mut groups: Vec<u32> = row.groups.iter().map(|(g, _)| *g).collect();
            groups.dedup();
            if groups.is_empty() {
                self.line(&mut s, &t, Some("-"), &vec![0; self.axis.cols()], 0, 0);
            }
            for g in groups {
                let (cols, b, a) = spec.columns(idx, Some(g), &mut maps);
                let name = spec.group_name(g);
                self.line(&mut s, &t, Some(&name), &cols, b, a);
            }
        }
        s
    }

    fn line(&self, s: &mut String, t: &str, name: Option<&str>, cols: &[u64], below: u64, above: u64) {
        s.push_str(t);
        s.push(' ');
        if let Some(n) = name {
            let n: String = n.chars().take(self.name_w).collect();
            let _ = write!(s, "{n:<w$} ", w = self.name_w);
        }
        let cells: Vec<Cell> = cols.iter().map(|&n| count_cell(n, self.palette)).collect();
        if self.palette == Palette::Mono {
            s.extend(cells.iter().map(|c| c.ch));
        } else {
            line_ansi(&cells, s);
        }
        if below > 0 {
            let _ = write!(s, " below={below}");
        }
        if above > 0 {
            let _ = write!(s, " above={above}");
        }
        s.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::super::color::{heat_of_256, heat_of_glyph, Heat};
    use super::*;

    const MS: u64 = 1_000_000;
    const US: u64 = 1_000;

    /// 4 rows of 500 ms: 1000 events at ~100 us per row, 20 at ~10 ms, and an empty row 2.
    fn sample() -> Spectrogram {
        let mut s = Spectrogram::new(500 * MS, 0, 1000);
        for row in [0u64, 1, 3] {
            for i in 0..1000u64 {
                s.add(row * 500 * MS + i * 400 * US, 110 * US + (i % 7), 1);
            }
            for i in 0..20u64 {
                s.add(row * 500 * MS + i * 20 * MS, 11 * MS + i, 2);
            }
        }
        s.set_group_name(1, "file");
        s.set_group_name(2, "net");
        s.seal_until(4);
        s
    }

    #[test]
    fn screen_rows_land_in_the_right_columns_with_the_right_colours() {
        let s = sample();
        let opts = DrawOptions::default();
        let (scr, geo) = compose(&s, &opts, &ViewState::default(), &FeedStatus::default(), 109, 12);
        assert_eq!(geo.strips.len(), 1);
        let st = &geo.strips[0];
        assert_eq!(st.axis.cols(), 100);
        let c100us = st.axis.col_of(110_003.0).unwrap();
        let c10ms = st.axis.col_of(11_000_010.0).unwrap();
        assert_eq!((c100us, c10ms), (50, 70));
        let y = st.line_of(3).unwrap();
        let at = |x: usize, y: usize| match scr.get(x, y).style.bg {
            Some(Color::Idx(i)) => heat_of_256(i).unwrap(),
            other => panic!("no palette colour: {other:?}"),
        };
        assert_eq!(at(st.x0 + c100us, y), Heat::Red);
        assert_eq!(at(st.x0 + c10ms, y), Heat::Green);
        assert_eq!(at(st.x0 + 10, y), Heat::None);
        // The empty row is drawn, black.
        let y2 = st.line_of(2).unwrap();
        assert_eq!(y2 + 1, y);
        assert!((0..100).all(|c| at(st.x0 + c, y2) == Heat::None));
        assert!(scr.line_text(y).starts_with("    1.5s "), "{}", scr.line_text(y));
        // Axis and legend.
        assert!(scr.line_text(9).contains("|100us"), "{}", scr.line_text(9));
        assert!(scr.line_text(10).starts_with("count per cell per 500ms:"));
        assert!(scr.line_text(0).contains("filter: (none)"));
    }

    #[test]
    fn mono_and_split_side_by_side() {
        let s = sample();
        let opts = DrawOptions { palette: Palette::Mono, split: true, ..Default::default() };
        let (scr, geo) = compose(&s, &opts, &ViewState::default(), &FeedStatus::default(), 129, 12);
        assert_eq!(geo.strips.len(), 2);
        assert_eq!(geo.strips[0].group, Some(1));
        assert_eq!(geo.strips[0].axis.cols(), 59);
        let a = &geo.strips[0];
        let b = &geo.strips[1];
        let y = a.line_of(0).unwrap();
        let g = |st: &StripGeom, v: f64| scr.get(st.x0 + st.axis.col_of(v).unwrap(), y).ch;
        assert_eq!(heat_of_glyph(g(a, 110_003.0)), Some(Heat::Red));
        assert_eq!(heat_of_glyph(g(a, 11_000_010.0)), Some(Heat::None));
        assert_eq!(heat_of_glyph(g(b, 11_000_010.0)), Some(Heat::Green));
        assert!(scr.line_text(1).contains("file (3k events)"), "{}", scr.line_text(1));
        assert!(scr.line_text(1).contains("net (60 events)"), "{}", scr.line_text(1));
    }

    #[test]
    fn stacked_and_resized() {
        let s = sample();
        let opts = DrawOptions { split: true, layout: Split::Stack, ..Default::default() };
        for w in [60usize, 80, 200] {
            let (scr, geo) = compose(&s, &opts, &ViewState::default(), &FeedStatus::default(), w, 20);
            assert_eq!(geo.strips.len(), 2);
            assert_eq!(geo.strips[0].axis.cols(), w - GUTTER);
            assert!(geo.strips[1].y0 > geo.strips[0].y0 + 3);
            let st = &geo.strips[1];
            let y = st.line_of(3).unwrap();
            let c = st.axis.col_of(11_000_010.0).unwrap();
            assert!(
                matches!(scr.get(st.x0 + c, y).style.bg, Some(Color::Idx(i)) if heat_of_256(i) == Some(Heat::Green))
            );
        }
    }

    #[test]
    fn selection_is_drawn_and_bounded() {
        let s = sample();
        let opts = DrawOptions::default();
        let state = ViewState { frozen: true, cursor: Some((0, 3, 52)), anchor: Some((1, 48)), ..Default::default() };
        let (scr, geo) = compose(&s, &opts, &state, &FeedStatus::default(), 109, 12);
        let st = &geo.strips[0];
        let y = st.line_of(3).unwrap();
        assert_eq!(scr.get(st.x0 + 52, y).ch, '+');
        assert_eq!(scr.get(st.x0 + 48, st.line_of(1).unwrap()).ch, '░');
        assert_eq!(scr.get(st.x0 + 47, y).ch, ' ');
        assert_eq!(st.hit(st.x0 + 50, y), Some((3, 50)));
        let (t0, t1, lo, hi) = selection_bounds(&s, &st.axis, (3, 1), (52, 48));
        assert_eq!((t0, t1), (500 * MS, 2000 * MS));
        assert!((62_001..=63_200).contains(&lo), "{lo}");
        assert!((199_000..201_000).contains(&hi), "{hi}");
        assert!(scr.line_text(11).contains("FROZEN"));
    }

    #[test]
    fn plain_rows_every_interval() {
        let s = sample();
        let opts = DrawOptions { palette: Palette::Mono, ..Default::default() };
        let mut p = PlainPrinter::new(109, &opts);
        let head = p.header(&s, &FeedStatus { filter: "proc.name=x".into(), ..Default::default() });
        assert!(head.contains("filter: proc.name=x"));
        let rows = p.rows(&s);
        let lines: Vec<&str> = rows.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[2].trim(), "1.0s");
        let cells: Vec<char> = lines[3][GUTTER..].chars().collect();
        assert_eq!(cells.len(), 100);
        assert_eq!(heat_of_glyph(cells[50]), Some(Heat::Red));
        assert_eq!(heat_of_glyph(cells[70]), Some(Heat::Green));
        assert!(p.rows(&s).is_empty());
        // Split: one line per group present, a '-' line for an empty row.
        let mut p = PlainPrinter::new(120, &DrawOptions { palette: Palette::Mono, split: true, ..Default::default() });
        let rows = p.rows(&s);
        assert_eq!(rows.lines().count(), 7);
        assert!(rows.lines().nth(4).unwrap().contains(" - "));
    }

    #[test]
    fn status_and_hints_fit_any_width() {
        let s = sample();
        let status = FeedStatus {
            source: "/var/tmp/recordings/2024-05-01/a-rather-long-directory-name/ext4-sustained.lst".into(),
            filter: "proc.name=latscope-load and evt.is_io_write=true and fd.name contains /tmp/latscope-demo".into(),
            events_per_s: 12_345.0,
            drops: None,
            note: "paced at 1x (n: draw the rest now); 12 events lost when recorded".into(),
            has_events: true,
            counted: String::new(),
        };
        let long = "switched to the event stream: select cells of the new rows to list their events";
        for frozen in [false, true] {
            for message in ["", long] {
                let state = ViewState { frozen, message: message.into(), ..Default::default() };
                for w in [40usize, 60, 80, 100, 120, 200] {
                    let (scr, _) = compose(&s, &DrawOptions::default(), &state, &status, w, 20);
                    let (top, bottom) = (scr.line_text(0), scr.line_text(19));
                    // Nothing runs past the edge: a line that is full ends in a cut mark or the
                    // end of a word it shows whole.
                    for l in [&top, &bottom] {
                        let t = l.trim_end();
                        assert!(
                            t.chars().count() < w
                                || t.ends_with('…')
                                || t.ends_with("quit")
                                || t.ends_with(&message[message.len().saturating_sub(6)..])
                                || t.ends_with("demo"),
                            "{w} {frozen} {message:?}:\n{top}\n{bottom}"
                        );
                    }
                    assert!(top.contains("filter: "), "{w}: {top}");
                    assert!(bottom.contains("q: quit") || !message.is_empty(), "{w}: {bottom}");
                    assert!(!bottom.contains("drops"), "a file drops nothing: {bottom}");
                    if !message.is_empty() {
                        let text = scr.text();
                        assert!(text.contains("switched to the event stream") || w < 40, "{w}: {text}");
                    }
                    if w >= 80 {
                        assert!(top.contains("ext4-sustained.lst"), "the file name is kept: {w}: {top}");
                    }
                }
            }
        }
        // What fits is shown whole.
        let short = FeedStatus { source: "t.lst".into(), ..status.clone() };
        let (scr, _) = compose(&s, &DrawOptions::default(), &ViewState::default(), &short, 200, 12);
        assert!(scr
            .line_text(0)
            .starts_with(" latscope spectrogram  500ms/row  t.lst  filter: proc.name=latscope-load"));
        // Live: drops are shown; the legend reads 1k, 10k.
        let live = FeedStatus { drops: Some(3), ..FeedStatus::default() };
        let (scr, _) = compose(&s, &DrawOptions::default(), &ViewState::default(), &live, 120, 12);
        assert!(scr.line_text(11).contains("drops 3"));
        assert!(
            scr.line_text(10).contains(" 1k ") && scr.line_text(10).contains(" 10k ") && !scr.text().contains("1.00k")
        );
    }

    #[test]
    fn ansi_redraws_changed_lines_only() {
        let mut a = Screen::new(10, 3);
        a.put(0, 1, "hi", Style::BOLD);
        let full = a.to_ansi(None);
        assert!(full.contains("\x1b[1;1H") && full.contains("\x1b[2;1H\x1b[0;1mhi\x1b[0m"));
        let mut b = a.clone();
        b.set(3, 2, count_cell(150, Palette::Ansi256));
        let diff = b.to_ansi(Some(&a));
        assert!(!diff.contains("\x1b[1;1H") && diff.contains("\x1b[3;1H") && diff.contains("48;5;226"), "{diff:?}");
    }
}
