//! The runners: [`run_tui`] (interactive, full screen, keys and mouse, follows resizes) and
//! [`run_plain`] (rows as text lines, no cursor control: pipes, files, dumb terminals).

use super::feed::{DrillQuery, Feed};
use super::model::Spectrogram;
use super::render::{compose, selection_bounds, DrawOptions, Geometry, Overlay, PlainPrinter, Screen, ViewState};
use super::sources::now_ns;
use crossterm::event::{
    self, DisableMouseCapture, EnableMouseCapture, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton,
    MouseEvent, MouseEventKind,
};
use crossterm::{cursor, execute, terminal};
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options of the runners.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// How to draw.
    pub draw: DrawOptions,
    /// Set from a signal handler to stop.
    pub stop: Arc<AtomicBool>,
    /// Stop after this long from the start of the rows (live sources); the last interval is
    /// drawn, whole or not.
    pub duration: Option<Duration>,
    /// Most events listed by a drill-down.
    pub drill_limit: usize,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            draw: DrawOptions::default(),
            stop: Arc::new(AtomicBool::new(false)),
            duration: None,
            drill_limit: 2_000,
        }
    }
}

/// The width of the terminal on stdout, or `$COLUMNS`, if either says.
pub fn terminal_width() -> Option<usize> {
    // SAFETY: TIOCGWINSZ fills a winsize struct; we pass a valid pointer.
    unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        if libc::ioctl(1, libc::TIOCGWINSZ, &mut ws) == 0 && ws.ws_col > 0 {
            return Some(ws.ws_col as usize);
        }
    }
    std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok())
}

fn io_err(e: io::Error) -> String {
    format!("writing to the terminal failed: {e}")
}

/// Print rows as lines of text as they complete, until the feed ends, `duration` passes or
/// `stop` is set. A closed pipe ends quietly.
pub fn run_plain(
    feed: &mut dyn Feed,
    spec: &mut Spectrogram,
    opts: &RunOptions,
    width: usize,
    out: &mut dyn Write,
) -> Result<(), String> {
    let end = end_ns(spec, opts);
    let mut printer = PlainPrinter::new(width, &opts.draw);
    let mut header_done = false;
    let r = (|| -> Result<(), String> {
        loop {
            let more = feed.pump(spec, Duration::from_millis(100))?;
            if !header_done {
                out.write_all(printer.header(spec, &feed.status(spec)).as_bytes()).map_err(|e| e.to_string())?;
                header_done = true;
            }
            let stopping = more && (opts.stop.load(Ordering::Relaxed) || end.is_some_and(|e| now_ns() >= e));
            if stopping {
                // The last interval too, up to -d's end or the moment of Ctrl-C.
                feed.finish(spec, end.unwrap_or(u64::MAX).min(now_ns()))?;
            }
            let rows = printer.rows(spec);
            if !rows.is_empty() {
                out.write_all(rows.as_bytes()).map_err(|e| e.to_string())?;
                out.flush().map_err(|e| e.to_string())?;
            }
            if !more || stopping {
                break;
            }
        }
        let st = feed.status(spec);
        let mut tail = format!("# {} events{} in {} rows", spec.events, st.counted, spec.sealed() - spec.first_index());
        if let Some(d) = st.drops.filter(|&d| d > 0) {
            tail.push_str(&format!(", {d} events lost"));
        }
        if !st.note.is_empty() {
            tail.push_str(&format!("; {}", st.note));
        }
        tail.push('\n');
        out.write_all(tail.as_bytes()).map_err(|e| e.to_string())?;
        out.flush().map_err(|e| e.to_string())
    })();
    match r {
        Err(e) if e.contains("Broken pipe") => Ok(()),
        other => other,
    }
}

/// When `-d` ends: that long after the start of the rows (the session's start).
fn end_ns(spec: &Spectrogram, opts: &RunOptions) -> Option<u64> {
    opts.duration.map(|d| spec.origin_ns().saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)))
}

/// Puts the terminal back as it was, also on panic.
struct TermGuard;

impl TermGuard {
    fn enter() -> io::Result<TermGuard> {
        terminal::enable_raw_mode()?;
        let mut out = io::stdout();
        if let Err(e) = execute!(out, terminal::EnterAlternateScreen, cursor::Hide, EnableMouseCapture) {
            let _ = terminal::disable_raw_mode();
            return Err(e);
        }
        Ok(TermGuard)
    }
}

impl Drop for TermGuard {
    fn drop(&mut self) {
        let mut out = io::stdout();
        let _ = execute!(out, DisableMouseCapture, cursor::Show, terminal::LeaveAlternateScreen);
        let _ = terminal::disable_raw_mode();
    }
}

const HELP: &[&str] = &[
    "Rows are intervals (newest at the bottom), columns latency ranges on a log scale, colours the",
    "number of events of that latency that ended in that interval (legend at the bottom).",
    "",
    "space, p      freeze / resume the display (new rows are still collected)",
    "arrows, hjkl  move the cursor (frozen); shift or HJKL moves by 10",
    "PgUp PgDn     scroll through past rows; Home/End (g/G): oldest/newest",
    "v             mark a corner of a rectangle at the cursor (again: unmark)",
    "enter         list the events inside the rectangle (or the cursor cell)",
    "mouse         click a cell, or drag a rectangle: lists its events",
    "tab           next strip (split views)",
    "s             live in-kernel aggregation keeps no events: switch to the event stream",
    "              (the first enter or click does it too, and says so)",
    "n             trace files: stop pacing, draw the rest at once",
    "esc           close this panel / the event list, or unmark",
    "q, ctrl-c     quit",
];

struct App {
    state: ViewState,
    geo: Geometry,
    last_sealed: u64,
    ended: bool,
    quit: bool,
    dirty: bool,
    full_redraw: bool,
    drag: bool,
    /// Terminal columns (overlay text is wrapped to them).
    width: usize,
}

impl App {
    fn rows(&self) -> u64 {
        self.geo.rows as u64
    }

    /// The index of the row drawn at the bottom.
    fn bottom(&self, spec: &Spectrogram) -> u64 {
        spec.sealed().saturating_sub(self.state.scroll + 1)
    }

    fn freeze(&mut self, spec: &Spectrogram) {
        self.state.frozen = true;
        if self.state.cursor.is_none() {
            let row = spec.sealed().saturating_sub(1);
            let col = self.geo.strips.first().map_or(0, |s| s.axis.cols() / 2);
            self.state.cursor = Some((0, row, col));
        }
    }

    fn resume(&mut self) {
        self.state.frozen = false;
        self.state.scroll = 0;
        self.state.cursor = None;
        self.state.anchor = None;
        self.state.overlay = None;
        self.state.message.clear();
    }

    /// Keep the cursor on screen by scrolling.
    fn follow_cursor(&mut self, spec: &Spectrogram) {
        let Some((_, row, _)) = self.state.cursor else { return };
        let bottom = self.bottom(spec);
        let top = (bottom + 1).saturating_sub(self.rows().max(1));
        if row > bottom {
            self.state.scroll = self.state.scroll.saturating_sub(row - bottom);
        } else if row < top {
            self.state.scroll += top - row;
        }
    }

    fn move_cursor(&mut self, spec: &Spectrogram, drow: i64, dcol: i64) {
        let Some((s, row, col)) = self.state.cursor else { return };
        let cols = self.geo.strips.get(s).map_or(1, |st| st.axis.cols()) as i64;
        let first = spec.first_index() as i64;
        let last = spec.sealed() as i64 - 1;
        let nrow = (row as i64 + drow).clamp(first, last.max(first)) as u64;
        let ncol = (col as i64 + dcol).clamp(0, cols - 1) as usize;
        self.state.cursor = Some((s, nrow, ncol));
        self.follow_cursor(spec);
    }

    fn drill(&mut self, feed: &mut dyn Feed, spec: &mut Spectrogram, limit: usize) {
        let Some((s, row, col)) = self.state.cursor else { return };
        if !feed.status(spec).has_events {
            // In-kernel histograms keep no events: the first drill-down switches to the event
            // stream and says, in full, that events can be listed from now on.
            let said = match feed.keep_events(spec) {
                Ok(_) => "The histograms were built in the kernel, which keeps no events, so these cells cannot be \
                          listed. latscope now streams the events and keeps the most recent ones (each event is \
                          copied: more cost per syscall). Select cells of the rows from now on and press enter \
                          (or click) to list their events."
                    .to_string(),
                Err(e) => format!("The histograms are built in the kernel, which keeps no events, and switching to the event stream failed: {e}"),
            };
            self.state.overlay = Some(Overlay {
                title: "events are kept from now on  [esc close]".into(),
                lines: wrap(&said, self.width.saturating_sub(2).max(20)),
                top: 0,
            });
            self.state.anchor = None;
            return;
        }
        let Some(strip) = self.geo.strips.get(s) else { return };
        let (arow, acol) = self.state.anchor.unwrap_or((row, col));
        let (t_from, t_to, lat_lo, lat_hi) = selection_bounds(spec, &strip.axis, (row, arow), (col, acol));
        let q = DrillQuery { t_from, t_to, lat_lo, lat_hi, group: strip.group, limit };
        let what = match strip.group {
            Some(g) => format!("{}, events {}", spec.group_name(g), q.describe(spec.origin_ns())),
            None => format!("events {}", q.describe(spec.origin_ns())),
        };
        let (title, mut lines) = match feed.drill(spec, &q) {
            Ok(r) => {
                let shown = r.lines.len() as u64;
                let mut title = format!("{} {what}", r.matched);
                if shown < r.matched {
                    title.push_str(&format!(" (first {shown} listed)"));
                }
                title.push_str("  [arrows/PgUp/PgDn scroll, esc close]");
                let mut lines = Vec::new();
                if let Some(n) = r.note {
                    lines.push(format!("note: {n}"));
                }
                if r.matched == 0 && lines.is_empty() {
                    lines.push("no event in this rectangle".into());
                }
                lines.extend(r.lines);
                (title, lines)
            }
            Err(e) => (format!("drill-down failed: {what}"), vec![e]),
        };
        if lines.is_empty() {
            lines.push(String::new());
        }
        self.state.overlay = Some(Overlay { title, lines, top: 0 });
    }

    fn scroll_overlay(&mut self, d: i64) {
        let page = self.rows().max(2) as usize - 1;
        if let Some(ov) = &mut self.state.overlay {
            let max = ov.lines.len().saturating_sub(page);
            ov.top = (ov.top as i64 + d).clamp(0, max as i64) as usize;
        }
    }

    fn key(&mut self, k: KeyEvent, feed: &mut dyn Feed, spec: &mut Spectrogram, limit: usize) {
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        let shift = k.modifiers.contains(KeyModifiers::SHIFT);
        let step = if shift { 10 } else { 1 };
        let page = self.rows().max(2) as i64 - 1;
        if ctrl && matches!(k.code, KeyCode::Char('c') | KeyCode::Char('d')) {
            self.quit = true;
            return;
        }
        if self.state.overlay.is_some() {
            match k.code {
                KeyCode::Esc | KeyCode::Enter | KeyCode::Char('?') => self.state.overlay = None,
                KeyCode::Char('q') => self.quit = true,
                KeyCode::Up | KeyCode::Char('k') => self.scroll_overlay(-1),
                KeyCode::Down | KeyCode::Char('j') => self.scroll_overlay(1),
                KeyCode::PageUp => self.scroll_overlay(-page),
                KeyCode::PageDown | KeyCode::Char(' ') => self.scroll_overlay(page),
                KeyCode::Home => self.scroll_overlay(i64::MIN / 2),
                KeyCode::End => self.scroll_overlay(i64::MAX / 2),
                _ => {}
            }
            return;
        }
        match k.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char(' ') | KeyCode::Char('p') | KeyCode::Char('f') => {
                if self.state.frozen {
                    self.resume();
                } else {
                    self.freeze(spec);
                }
            }
            KeyCode::Char('?') | KeyCode::Char('h') if k.code == KeyCode::Char('?') || !self.state.frozen => {
                self.state.overlay = Some(Overlay {
                    title: "latscope spectrogram: keys  [esc close]".into(),
                    lines: HELP.iter().map(|s| s.to_string()).collect(),
                    top: 0,
                });
            }
            KeyCode::Char('n') => {
                feed.fast_forward();
                self.state.message = "drawing the rest at once".into();
            }
            KeyCode::Char('s') => {
                self.state.message = match feed.keep_events(spec) {
                    Ok(m) => m,
                    Err(e) => e,
                };
            }
            KeyCode::Esc => {
                if self.state.anchor.is_some() {
                    self.state.anchor = None;
                } else {
                    self.state.message.clear();
                }
            }
            _ if !self.state.frozen => {
                // Any movement key freezes first.
                if matches!(
                    k.code,
                    KeyCode::Up
                        | KeyCode::Down
                        | KeyCode::Left
                        | KeyCode::Right
                        | KeyCode::PageUp
                        | KeyCode::PageDown
                        | KeyCode::Enter
                ) {
                    self.freeze(spec);
                }
            }
            KeyCode::Up | KeyCode::Char('k') => self.move_cursor(spec, -step, 0),
            KeyCode::Down | KeyCode::Char('j') => self.move_cursor(spec, step, 0),
            KeyCode::Left | KeyCode::Char('h') => self.move_cursor(spec, 0, -step),
            KeyCode::Right | KeyCode::Char('l') => self.move_cursor(spec, 0, step),
            KeyCode::Char('K') => self.move_cursor(spec, -10, 0),
            KeyCode::Char('J') => self.move_cursor(spec, 10, 0),
            KeyCode::Char('H') => self.move_cursor(spec, 0, -10),
            KeyCode::Char('L') => self.move_cursor(spec, 0, 10),
            KeyCode::PageUp => self.move_cursor(spec, -page, 0),
            KeyCode::PageDown => self.move_cursor(spec, page, 0),
            KeyCode::Home | KeyCode::Char('g') => self.move_cursor(spec, i64::MIN / 2, 0),
            KeyCode::End | KeyCode::Char('G') => self.move_cursor(spec, i64::MAX / 2, 0),
            KeyCode::Tab => {
                if let Some((s, row, col)) = self.state.cursor {
                    let n = self.geo.strips.len().max(1);
                    let ns = (s + 1) % n;
                    let cols = self.geo.strips.get(ns).map_or(1, |st| st.axis.cols());
                    self.state.cursor = Some((ns, row, col.min(cols - 1)));
                    self.state.anchor = None;
                }
            }
            KeyCode::Char('v') | KeyCode::Char('m') => {
                self.state.anchor = match (self.state.anchor, self.state.cursor) {
                    (Some(_), _) => None,
                    (None, Some((_, r, c))) => Some((r, c)),
                    _ => None,
                };
            }
            KeyCode::Enter => self.drill(feed, spec, limit),
            _ => {}
        }
    }

    fn mouse(&mut self, m: MouseEvent, feed: &mut dyn Feed, spec: &mut Spectrogram, limit: usize) {
        let (x, y) = (m.column as usize, m.row as usize);
        let hit = self.geo.strips.iter().enumerate().find_map(|(i, s)| s.hit(x, y).map(|(r, c)| (i, r, c)));
        match m.kind {
            MouseEventKind::Down(MouseButton::Left) => {
                if self.state.overlay.is_some() {
                    self.state.overlay = None;
                    return;
                }
                if let Some((s, r, c)) = hit {
                    self.freeze(spec);
                    self.state.cursor = Some((s, r, c));
                    self.state.anchor = Some((r, c));
                    self.drag = true;
                }
            }
            MouseEventKind::Drag(MouseButton::Left) if self.drag => {
                if let (Some((s, r, c)), Some((cs, _, _))) = (hit, self.state.cursor) {
                    if s == cs {
                        self.state.cursor = Some((s, r, c));
                    }
                }
            }
            MouseEventKind::Up(MouseButton::Left) if self.drag => {
                self.drag = false;
                self.drill(feed, spec, limit);
            }
            MouseEventKind::ScrollUp => {
                if self.state.overlay.is_some() {
                    self.scroll_overlay(-3);
                } else {
                    self.freeze(spec);
                    self.move_cursor(spec, -3, 0);
                }
            }
            MouseEventKind::ScrollDown => {
                if self.state.overlay.is_some() {
                    self.scroll_overlay(3);
                } else if self.state.frozen {
                    self.move_cursor(spec, 3, 0);
                }
            }
            _ => {}
        }
    }
}

/// `text` in lines of at most `width` characters, broken between words.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// What the terminal on stdin has for us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Input {
    /// Nothing within the wait.
    Idle,
    /// Bytes to read.
    Ready,
    /// The terminal went away (ssh dropped, tmux pane killed).
    HungUp,
}

/// Wait up to `ms` for input on stdin. crossterm's reader spins forever on a hung-up terminal
/// (it loops on reads that return 0), so it is only called when this says `Ready`.
fn wait_input(ms: i32) -> Input {
    let mut p = libc::pollfd { fd: 0, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    if n <= 0 {
        Input::Idle
    } else if p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
        Input::HungUp
    } else {
        Input::Ready
    }
}

/// Sets the flag when dropped (however the function returns).
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// If the main loop cannot stop (a hang-up caught inside the terminal library), end the process
/// a moment after a stop was asked for or the terminal went away.
fn watchdog(stop: Arc<AtomicBool>, done: Arc<AtomicBool>) {
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(250));
        if done.load(Ordering::Relaxed) {
            return;
        }
        if stop.load(Ordering::Relaxed) || wait_input(0) == Input::HungUp {
            std::thread::sleep(Duration::from_secs(2));
            if !done.load(Ordering::Relaxed) {
                std::process::exit(1);
            }
        }
    });
}

/// Run the interactive view on the terminal until `q`, the end of `duration`, or `stop`.
/// A trace file that ends stays on screen (frozen) until `q`.
pub fn run_tui(feed: &mut dyn Feed, spec: &mut Spectrogram, opts: &RunOptions) -> Result<(), String> {
    let guard =
        TermGuard::enter().map_err(|e| format!("cannot use the terminal ({e}); use --plain or pipe the output"))?;
    let done = Arc::new(AtomicBool::new(false));
    watchdog(opts.stop.clone(), done.clone());
    let _done = SetOnDrop(done);
    let mut size = terminal::size().map_err(io_err)?;
    let end = end_ns(spec, opts);
    let mut out = io::BufWriter::with_capacity(1 << 16, io::stdout());
    let mut app = App {
        state: ViewState::default(),
        geo: Geometry::default(),
        last_sealed: spec.sealed(),
        ended: false,
        quit: false,
        dirty: true,
        full_redraw: true,
        drag: false,
        width: size.0 as usize,
    };
    let mut prev: Option<Screen> = None;
    let mut last_draw = Instant::now();
    let result = loop {
        if app.quit || opts.stop.load(Ordering::Relaxed) || end.is_some_and(|e| now_ns() >= e) {
            // The last interval is in the picture written after (--svg).
            if !app.ended {
                feed.finish(spec, end.unwrap_or(u64::MAX).min(now_ns()))?;
            }
            break Ok(());
        }
        if !app.ended {
            match feed.pump(spec, Duration::from_millis(25)) {
                Ok(true) => {}
                Ok(false) => {
                    app.ended = true;
                    app.dirty = true;
                }
                Err(e) => break Err(e),
            }
        } else if wait_input(100) == Input::HungUp {
            // Nothing left to read: waited for input.
            break Ok(());
        }
        let sealed = spec.sealed();
        if sealed != app.last_sealed {
            if app.state.frozen {
                app.state.scroll += sealed - app.last_sealed;
            }
            app.last_sealed = sealed;
            app.dirty = true;
        }
        loop {
            // Idle or ready: crossterm may also hold events it has already read.
            if wait_input(0) == Input::HungUp {
                app.quit = true;
                break;
            }
            match event::poll(Duration::ZERO) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => return Err(io_err(e)),
            }
            match event::read().map_err(io_err)? {
                Event::Key(k) if k.kind != KeyEventKind::Release => app.key(k, feed, spec, opts.drill_limit),
                Event::Mouse(m) => app.mouse(m, feed, spec, opts.drill_limit),
                Event::Resize(_, _) => app.full_redraw = true,
                _ => {}
            }
            app.dirty = true;
        }
        // Resizes are noticed here (crossterm only reports them while reading input).
        let now_size = terminal::size().map_err(io_err)?;
        if now_size != size {
            size = now_size;
            app.full_redraw = true;
        }
        if app.dirty || app.full_redraw || last_draw.elapsed() >= Duration::from_secs(1) {
            let (w, h) = size;
            app.width = w as usize;
            let status = feed.status(spec);
            let mut status = status;
            if app.ended {
                if !status.note.is_empty() {
                    status.note.push_str("; ");
                }
                status.note.push_str("end of input");
            }
            let (scr, geo) = compose(spec, &opts.draw, &app.state, &status, w as usize, h as usize);
            app.geo = geo;
            let bytes =
                if app.full_redraw { format!("\x1b[2J{}", scr.to_ansi(None)) } else { scr.to_ansi(prev.as_ref()) };
            out.write_all(bytes.as_bytes()).map_err(io_err)?;
            out.flush().map_err(io_err)?;
            prev = Some(scr);
            app.dirty = false;
            app.full_redraw = false;
            last_draw = Instant::now();
        }
    };
    drop(out);
    drop(guard);
    result
}
