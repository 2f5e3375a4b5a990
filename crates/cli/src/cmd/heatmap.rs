//! `latscope heatmap`: events (trace, perf script) or trace2heatmap text -> heat map SVG or JSON.

use crate::args::{finish_scan, refuse_terminal, shown, write_output, InputArg, ReadArgs, ScanPlan};
use anyhow::{bail, Context, Result};
use latscope_event::EventKind;
use latscope_view::group::GroupBy;
use latscope_view::heatmap::text::{parse_two_columns, text_map, units_per_sec, TextMapOptions};
use latscope_view::heatmap::{grid_note, render_svg, ColorScale, EventMapBuilder, EventMapOptions, HeatMap};
use latscope_view::heatmap::{RenderOptions, YArgs, YField, YSpec, YUnit};
use std::path::PathBuf;
use std::process::ExitCode;

/// Heat map of latency (or size, offset, subsecond offset) over time, as interactive SVG or JSON.
///
/// Draws a latency heat map (time on x, latency on y, colour = number of events), or an I/O size,
/// offset or subsecond-offset heat map, as an interactive SVG: mouse over a cell for its time,
/// range, count, share of the column and accumulated share (percentile). Reads latscope traces,
/// `perf script` block I/O text, and trace2heatmap.pl's two-column "time latency" text (its option
/// names work too; linear rows are its cells, plus the last column and top row it drops). Columns
/// are 1, 2 or 5 times a power of ten wide, chosen to give 100 to 200 of them, unless --stepsec
/// (or --maxcol, with 1 s columns) is given. See docs/VIEWS.md.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope heatmap -r trace.lst -o lat.svg                       # syscall latency, log rows
  latscope heatmap -r trace.lst 'proc.name = postgres and fd.type = file' -o pg.svg
  latscope heatmap -r trace.lst --block --per disk -o disks.svg  # one map per disk
  latscope heatmap -r trace.lst --block --y offset -o offset.svg
  latscope heatmap -r trace.lst --y subsecond -o subsec.svg      # periodic work within each second
  latscope heatmap -r trace.lst --linear --maxlat 15ms --grid --title 'Latency: 15ms max' -o zoom.svg
  latscope heatmap -r trace.lst --json > matrix.json
  latscope heatmap --input perf -r out.blockio --y size -o sizes.svg    # perf script block I/O
  latscope heatmap --input text -r out.lat_us --unitstime=us --unitslabel=us --stepsec=1 -o lat.svg
                                                                 # trace2heatmap.pl input, same cells")]
pub struct Args {
    #[command(flatten)]
    pub read: ReadArgs,
    /// Output file (default stdout, unless it is a terminal).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// What the y axis shows: latency, size (bytes), offset (file offset, or byte offset on the
    /// disk), subsecond (offset of each event within its wall-clock second; x is whole seconds), qtime
    /// (block queue time).
    #[arg(long = "y", value_name = "FIELD", default_value = "latency", value_parser = YField::parse)]
    pub y: YField,
    /// Block requests instead of syscalls (implied by --input perf).
    #[arg(long)]
    pub block: bool,
    /// Logarithmic rows (the default for latency and qtime from traces and perf input, and for
    /// size: 4 KiB and 64 KiB requests get rows of their own).
    #[arg(long, conflicts_with = "linear")]
    pub log: bool,
    /// Linear rows (the default for offset, subsecond and text input).
    #[arg(long)]
    pub linear: bool,
    /// Title (default: "Syscall Latency Heat Map", "Block I/O Size Heat Map", ...).
    #[arg(long, alias = "titletext")]
    pub title: Option<String>,
    /// Smallest value shown, with units (250us, 4KiB); a bare number is ns or bytes for traces and
    /// the input's unit for text.
    #[arg(long, value_name = "VALUE")]
    pub minlat: Option<String>,
    /// Largest value shown, with units (15ms, 1MiB); default the largest value.
    #[arg(long, value_name = "VALUE")]
    pub maxlat: Option<String>,
    /// Row height (linear rows) instead of --rows, with units.
    #[arg(long, value_name = "VALUE")]
    pub steplat: Option<String>,
    /// Rows wanted (linear: the step is floor(range / rows), plus the top row holding the maximum;
    /// log: bins per decade chosen to give about this many).
    #[arg(long, default_value_t = 50)]
    pub rows: usize,
    /// Seconds per column (fractions allowed: 0.1); default: chosen for 100 to 200 columns.
    #[arg(long, value_name = "SECONDS")]
    pub stepsec: Option<f64>,
    /// Keep only the columns up to this one (0-based; 1 s columns unless --stepsec).
    #[arg(long, value_name = "COL")]
    pub maxcol: Option<usize>,
    /// Draw grid lines at the axis ticks.
    #[arg(long)]
    pub grid: bool,
    /// Cell size in pixels.
    #[arg(long, default_value_t = 8.0, value_name = "PX")]
    pub boxsize: f64,
    /// Colour scale: linear (trace2heatmap.pl's: count / largest count), log (ln(1 + count) /
    /// ln(1 + largest): rare events stay visible next to a hot cell), or auto: log for a map whose
    /// largest cell holds more than 20 times the 99th percentile of its non-empty cells.
    #[arg(long, default_value = "auto", value_parser = ColorScale::parse)]
    pub color: ColorScale,
    /// Font size in pixels.
    #[arg(long, default_value_t = 12.0, value_name = "PX")]
    pub fontsize: f64,
    /// Font family (default Verdana, then Helvetica, Arial, sans-serif).
    #[arg(long, value_name = "FONT")]
    pub fonttype: Option<String>,
    /// One map per group, sharing axes: disk, op, proc (also pid, syscall, file, dir, client, class,
    /// container, pod, cgroup).
    #[arg(long, value_name = "GROUP", value_parser = GroupBy::parse)]
    pub per: Option<GroupBy>,
    /// With --per: at most this many maps (the groups with the most events).
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub maps: usize,
    /// Text input: unit of the time column (s, ms, us, ns), as trace2heatmap.pl's --unitstime.
    #[arg(long, default_value = "s", value_name = "UNIT")]
    pub unitstime: String,
    /// Text input: unit label of the value column (us, ms, bytes, ...), as trace2heatmap.pl's
    /// --unitslabel (or --unitslatency); a time or size unit also lets --minlat/--maxlat take units.
    #[arg(long, visible_alias = "unitslabel", alias = "unitslatency", default_value = "", value_name = "UNIT")]
    pub unitslat: String,
    /// trace2heatmap.pl's --accstats: the accumulated count and percentile are always on hover.
    #[arg(long, hide = true)]
    pub accstats: bool,
    /// Write the matrix as JSON (row and column bounds, counts) instead of SVG.
    #[arg(long)]
    pub json: bool,
    /// Count idle waits (nanosleep, poll, select, futex, epoll_wait, wait4, ...) too; by default
    /// they are left out, as in every view, and the subtitle says how many.
    #[arg(long)]
    pub waits: bool,
}

impl Args {
    /// The value axis of `field` from the options, values read in `unit`.
    fn yspec(&self, field: YField, unit: YUnit, log_default: bool) -> Result<YSpec> {
        let (min, max, step) = (self.minlat.clone(), self.maxlat.clone(), self.steplat.clone());
        let y = YArgs { log: self.log, linear: self.linear, rows: self.rows, min, max, step };
        YSpec::from_args(&y, field, unit, log_default).map_err(anyhow::Error::msg)
    }

    /// Seconds per column: given, 1 with --maxcol (which counts columns), else chosen.
    fn step_sec(&self) -> Option<f64> {
        self.stepsec.or(self.maxcol.map(|_| 1.0))
    }

    fn check(&self) -> Result<()> {
        if let Some(s) = self.stepsec.filter(|s| !(*s > 0.0 && s.is_finite())) {
            bail!("--stepsec must be a positive number of seconds, not {s}");
        }
        if !(1.0..=200.0).contains(&self.boxsize) {
            bail!("--boxsize must be between 1 and 200 pixels");
        }
        if self.json {
            return Ok(());
        }
        refuse_terminal(self.output.as_deref(), "the heat map", "-o FILE (or --json)")
    }
}

pub fn run(a: Args) -> Result<ExitCode> {
    a.check()?;
    crate::args::check_output(Some(&a.read.file), a.output.as_deref())?;
    if a.read.input == InputArg::Text {
        return run_text(a);
    }
    let kind = a.read.kind(a.block);
    if a.y == YField::Qtime && kind != EventKind::Block {
        bail!("--y qtime is the block queue time: add --block");
    }
    let unit = a.y.unit();
    let opts = EventMapOptions {
        kind,
        y: a.y,
        yspec: a.yspec(a.y, unit.clone(), (unit == YUnit::Nanos && a.y != YField::Subsecond) || a.y == YField::Size)?,
        step_sec: a.step_sec(),
        max_col: a.maxcol,
        per: a.per.unwrap_or(GroupBy::All),
        max_maps: a.maps,
        title: a.title.clone().unwrap_or_else(|| EventMapOptions::default_title(a.y, kind)),
        waits: a.waits,
    };
    let cols = opts.columns();
    let mut scan = a.read.open("heatmap", ScanPlan { columns: &cols, zone: None })?;
    let header = scan.header().clone();
    let mut maps = EventMapBuilder::new(opts.clone(), &header);
    // Zone maps: the map's columns start at the recording's start, known from the header.
    scan.set_zone(maps.zone_plan());
    scan.for_each_with_header(|c, header| {
        maps.add(c, header);
        Ok::<(), anyhow::Error>(())
    })?;
    let wall = (header.realtime_offset_ns != 0).then(|| header.wall_ns(header.start_ns));
    let built = maps.finish(wall).map_err(anyhow::Error::msg)?;
    let filter = (!scan.filter().is_match_all()).then(|| scan.filter().source());
    let sub = built.subtitle(&opts, &a.read.file.display().to_string(), filter);
    emit(&a, &built.maps, sub, Some(built.counted.to_json()))?;
    Ok(finish_scan(&scan.report()))
}

fn emit(a: &Args, maps: &[HeatMap], subtitle: String, counted: Option<serde_json::Value>) -> Result<()> {
    let title = maps.first().map(|m| m.title.clone()).unwrap_or_default();
    let out = if a.json {
        let maps: Vec<_> = maps.iter().map(|m| m.to_json()).collect();
        format!("{}\n", serde_json::json!({ "title": title, "subtitle": subtitle, "counted": counted, "maps": maps }))
    } else {
        let (boxsize, grid, font_size, color, font) = (a.boxsize, a.grid, a.fontsize, a.color, a.fonttype.clone());
        render_svg(maps, &RenderOptions { title, subtitle: Some(subtitle), boxsize, grid, font_size, color, font })
    };
    write_output(a.output.as_deref(), out.as_bytes())?;
    eprintln!("latscope: wrote {} ({})", shown(a.output.as_deref()), latscope_view::heatmap::summary(maps));
    Ok(())
}

/// trace2heatmap.pl's input.
fn run_text(a: Args) -> Result<ExitCode> {
    a.read.text_takes_no_filter()?;
    if a.per.is_some() {
        bail!("--per needs events (a trace or --input perf), not two-column text");
    }
    if a.block || matches!(a.y, YField::Qtime | YField::Size | YField::Offset) {
        bail!("two-column text has a time and one value: use --y latency (any value) or --y subsecond");
    }
    let ups = units_per_sec(&a.unitstime).map_err(anyhow::Error::msg).context("--unitstime")?;
    let name = a.read.file.display().to_string();
    let pts = parse_two_columns(&latscope_scan::read_input(&a.read.file)?, &name)?;
    let lines = pts.len();
    let subsecond = a.y == YField::Subsecond;
    let unit = YUnit::Raw(if subsecond { a.unitstime.clone() } else { a.unitslat.clone() });
    let o = TextMapOptions {
        time_unit: a.unitstime.clone(),
        units_per_sec: ups,
        value_unit: a.unitslat.clone(),
        subsecond,
        // Text input's offsets within the second are in its own time unit: text_map sets them.
        yspec: a.yspec(YField::Latency, unit, false)?,
        step_sec: if subsecond { Some(a.step_sec().unwrap_or(1.0)) } else { a.step_sec() },
        max_col: a.maxcol,
        title: a.title.clone(),
    };
    let (map, bins) = text_map(pts, &o).map_err(anyhow::Error::msg)?;
    emit(&a, &[map], format!("{name}; {lines} lines; {}", grid_note(&bins)), None)?;
    Ok(ExitCode::SUCCESS)
}
