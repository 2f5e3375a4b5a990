//! `latscope heatmap`: events (trace, perf script) or trace2heatmap text -> heat map SVG or JSON.

use crate::cmd::viewinput::{columns, read_all, shown, write_output, InputFormat, Kinds, Source, Zone};
use anyhow::{bail, Context, Result};
use latscope_event::units::{parse_duration_ns, parse_size};
use latscope_trace::BlockMeta;
use latscope_view::group::{GroupBy, Grouper};
use latscope_view::heatmap::text::{parse_two_columns, units_per_sec};
use latscope_view::heatmap::{
    render_svg, Binning, EventPoints, HeatMap, LogStream, Points, RenderOptions, XSpec, YField, YScale, YSpec, YUnit,
};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

/// Heat map of latency (or size, offset, subsecond offset) over time, as interactive SVG or JSON.
///
/// Draws a latency heat map (time on x, latency on y, colour = number of events), or an I/O size,
/// offset or subsecond-offset heat map, as an interactive SVG: mouse over a cell for its time,
/// range, count, share of the column and accumulated share (percentile). Reads latscope traces,
/// `perf script` block I/O text, and trace2heatmap.pl's two-column "time latency" text.
///
/// Linear rows follow trace2heatmap.pl's binning exactly (row = floor((v - minlat) / step),
/// step = floor((maxlat - minlat) / rows), column = floor((t - first) / unitstime / stepsec)), but
/// also draw the last column and the top row that trace2heatmap.pl drops. See docs/VIEWS.md.
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
  latscope heatmap --input text -r out.lat_us --unitstime=us --unitslat=us --grid -o lat.svg
                                                                 # trace2heatmap.pl input, same cells")]
pub struct Args {
    /// Input file (a trace, or text with --input; '-' reads stdin).
    #[arg(short = 'r', long = "read", value_name = "FILE")]
    pub file: PathBuf,
    /// Filter expression (see 'latscope fields'); not for --input text.
    #[arg(value_name = "FILTER")]
    pub filter: Option<String>,
    /// Input format.
    #[arg(long, value_enum, default_value = "trace")]
    pub input: InputFormat,
    /// Output file (default stdout).
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
    /// Logarithmic rows (the default for latency and qtime from traces and perf input).
    #[arg(long, conflicts_with = "linear")]
    pub log: bool,
    /// Linear rows (the default for size, offset, subsecond and text input).
    #[arg(long)]
    pub linear: bool,
    /// Title (default: "Latency Heat Map", "Size Heat Map", ...).
    #[arg(long)]
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
    /// Seconds per column (fractions allowed: 0.1).
    #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
    pub stepsec: f64,
    /// Keep only the columns up to this one (0-based).
    #[arg(long, value_name = "COL")]
    pub maxcol: Option<usize>,
    /// Draw grid lines at the axis ticks.
    #[arg(long)]
    pub grid: bool,
    /// Cell size in pixels.
    #[arg(long, default_value_t = 8.0, value_name = "PX")]
    pub boxsize: f64,
    /// Colour scale: linear (trace2heatmap.pl's: count / largest count) or log (ln(1 + count) /
    /// ln(1 + largest), so that rare events stay visible next to a hot cell).
    #[arg(long, default_value = "linear", value_parser = ["linear", "log"])]
    pub color: String,
    /// Font size in pixels.
    #[arg(long, default_value_t = 12.0, value_name = "PX")]
    pub fontsize: f64,
    /// One map per group, sharing axes: disk, op, proc (also pid, syscall, file, dir, client).
    #[arg(long, value_name = "GROUP", value_parser = GroupBy::parse)]
    pub per: Option<GroupBy>,
    /// With --per: at most this many maps (the groups with the most events).
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub maps: usize,
    /// Text input: unit of the time column (s, ms, us, ns), as trace2heatmap.pl's --unitstime.
    #[arg(long, default_value = "s", value_name = "UNIT")]
    pub unitstime: String,
    /// Text input: unit label of the value column (us, ms, bytes, ...), as trace2heatmap.pl's
    /// --unitslatency; a time or size unit also lets --minlat/--maxlat take units.
    #[arg(long, alias = "unitslatency", default_value = "", value_name = "UNIT")]
    pub unitslat: String,
    /// Write the matrix as JSON (row and column bounds, counts) instead of SVG.
    #[arg(long)]
    pub json: bool,
}

/// Parses a value option: units allowed when the axis unit is known.
fn value_opt(s: &str, unit: &YUnit) -> Result<f64> {
    let bare = s.trim().parse::<f64>();
    match unit {
        YUnit::Nanos => match bare {
            Ok(v) => Ok(v),
            Err(_) => Ok(parse_duration_ns(s).map_err(anyhow::Error::msg)? as f64),
        },
        YUnit::Bytes => match bare {
            Ok(v) => Ok(v),
            Err(_) => Ok(parse_size(s).map_err(anyhow::Error::msg)? as f64),
        },
        YUnit::Raw(u) => {
            if let Ok(v) = bare {
                return Ok(v);
            }
            // A time unit label: "15ms" in "us" input is 15000.
            if let Ok(per_sec) = units_per_sec(u) {
                let ns = parse_duration_ns(s).map_err(anyhow::Error::msg)? as f64;
                return Ok(ns / 1e9 * per_sec);
            }
            let size_unit = match u.to_ascii_lowercase().as_str() {
                "b" | "bytes" | "byte" => Some(1.0),
                "kb" | "kib" | "kbytes" => Some(1024.0),
                "mb" | "mib" | "mbytes" => Some(1024.0 * 1024.0),
                "gb" | "gib" | "gbytes" => Some(1024.0 * 1024.0 * 1024.0),
                _ => None,
            };
            if let Some(div) = size_unit {
                return Ok(parse_size(s).map_err(anyhow::Error::msg)? as f64 / div);
            }
            bail!("'{s}' is not a number (the input's unit '{u}' is not a time or size unit, so give a bare number)")
        }
    }
}

fn default_title(y: YField, kinds: Kinds) -> String {
    let what = match y {
        YField::Latency => "Latency",
        YField::Size => "Size",
        YField::Offset => "Offset",
        YField::Subsecond => "Subsecond Offset",
        YField::Qtime => "Queue Time",
    };
    match kinds {
        Kinds::Block => format!("Block I/O {what} Heat Map"),
        Kinds::Syscalls => format!("Syscall {what} Heat Map"),
    }
}

pub fn run(a: Args) -> Result<ExitCode> {
    if !(a.stepsec > 0.0 && a.stepsec.is_finite()) {
        bail!("--stepsec must be a positive number of seconds, not {}", a.stepsec);
    }
    if !(a.boxsize >= 1.0 && a.boxsize <= 200.0) {
        bail!("--boxsize must be between 1 and 200 pixels");
    }
    if a.rows == 0 {
        bail!("--rows must be at least 1");
    }
    if a.input == InputFormat::Text {
        return run_text(a);
    }
    let kinds = Kinds::new(a.block, a.input);
    if a.y == YField::Qtime && kinds != Kinds::Block {
        bail!("--y qtime is the block queue time: add --block");
    }
    let per = a.per.unwrap_or(GroupBy::All);
    let mut cols = vec!["kind", "ts"];
    cols.extend(a.y.columns());
    cols.extend(per.columns());
    let unit = a.y.unit();
    let scale = scale_for(&a, unit == YUnit::Nanos && a.y != YField::Subsecond);
    let subsec = a.y == YField::Subsecond;
    let y = yspec(&a, unit.clone(), scale, subsec, 1e9)?;
    let mut src = Source::open(&a.file, a.input, a.filter.as_deref(), &columns(&cols))?;
    let header = src.header().clone();
    let wall_known = header.realtime_offset_ns != 0;
    let title = a.title.clone().unwrap_or_else(|| default_title(a.y, kinds));
    let mut grouper = Grouper::new(per);
    let mut total = 0u64;
    let mut no_value = 0u64;
    let kind = kinds.code();
    let (maps, groups_total) = if scale == YScale::Log {
        // One pass, memory per column: exact counts on a fine log grid.
        let step_ns = ((a.stepsec * 1e9).round() as u64).max(1);
        let min = y.min.map(|m| m.max(1.0).ceil() as u64);
        let max = y.max.map(|m| m.max(0.0).floor() as u64);
        let new_stream = || LogStream::new(header.start_ns, step_ns, min, max, a.maxcol, 10_000);
        let mut streams: Vec<LogStream> = Vec::new();
        let mut per_group: Vec<u64> = Vec::new();
        let fast = per == GroupBy::All && a.y == YField::Latency;
        let field = a.y;
        // Zone maps: a block whose events all fall in one column is counted from `lat` (and
        // `kind`, unless the block holds syscalls only), without `ts`.
        let origin = header.start_ns;
        let column = move |ts: u64| Some((ts as i128 - origin as i128).div_euclid(step_ns as i128) as u64);
        let zone = |m: &BlockMeta| if fast { Zone::of(m, kind, false, false, column) } else { Default::default() };
        let mut scratch: Vec<u64> = Vec::new();
        src.for_each_zoned(zone, |b, rows, h, z| {
            if fast {
                if streams.is_empty() {
                    streams.push(new_stream());
                    per_group.push(0);
                    if !b.is_empty() {
                        grouper.group(b, 0, h);
                    }
                }
                let st = &mut streams[0];
                let before = total;
                if z.empty {
                    return Ok(());
                }
                if let Some(ts) = z.at {
                    // Every event in the column of `ts`.
                    if z.all_kind {
                        st.add_column(ts, &b.lat);
                        total += b.len() as u64;
                    } else {
                        scratch.clear();
                        scratch.extend(b.kind.iter().zip(&b.lat).filter(|(&k, _)| k == kind).map(|(_, &lat)| lat));
                        st.add_column(ts, &scratch);
                        total += scratch.len() as u64;
                    }
                } else if z.all_kind {
                    st.add_pairs(&b.ts, &b.lat);
                    total += b.len() as u64;
                } else if rows.len() == b.len() {
                    for ((&k, &ts), &lat) in b.kind.iter().zip(&b.ts).zip(&b.lat) {
                        if k == kind {
                            st.add(ts, lat);
                            total += 1;
                        }
                    }
                } else {
                    for &i in rows {
                        let i = i as usize;
                        if b.kind[i] == kind {
                            st.add(b.ts[i], b.lat[i]);
                            total += 1;
                        }
                    }
                }
                per_group[0] += total - before;
                return Ok(());
            }
            for &i in rows {
                let i = i as usize;
                if !kinds.takes(b, i) {
                    continue;
                }
                let Some(v) = EventPoints::value(field, b, i, h) else {
                    no_value += 1;
                    continue;
                };
                let g = grouper.group(b, i, h);
                while streams.len() <= g {
                    streams.push(new_stream());
                    per_group.push(0);
                }
                streams[g].add(b.ts[i], v as u64);
                per_group[g] += 1;
                total += 1;
            }
            Ok(())
        })?;
        let mut order: Vec<usize> = (0..streams.len()).collect();
        order.sort_by_key(|&g| (std::cmp::Reverse(per_group[g]), grouper.names().get(g).cloned().unwrap_or_default()));
        order.truncate(a.maps.max(1));
        let empty = new_stream();
        let chosen: Vec<(&LogStream, Option<String>)> = if order.is_empty() {
            vec![(&empty, None)]
        } else {
            order
                .iter()
                .map(|&g| {
                    (&streams[g], (per != GroupBy::All).then(|| format!("{} {}", per.name(), grouper.names()[g])))
                })
                .collect()
        };
        let wall = wall_known.then(|| header.wall_ns(header.start_ns));
        let maps = LogStream::finish(&chosen, a.rows, min, max, unit, a.y.label(), &title, wall)
            .map_err(anyhow::Error::msg)?;
        (maps, streams.len())
    } else {
        let mut pts = EventPoints::new(a.y, header.start_ns);
        let fast = per == GroupBy::All && a.y == YField::Latency;
        src.for_each(|b, rows, h| {
            if fast {
                if grouper.is_empty() && !b.is_empty() {
                    grouper.group(b, 0, h);
                }
                total += pts.add_latency_rows(b, rows, kind);
                return Ok(());
            }
            for &i in rows {
                let i = i as usize;
                if !kinds.takes(b, i) {
                    continue;
                }
                let g = grouper.group(b, i, h);
                if pts.add(g, b, i, h) {
                    total += 1;
                } else {
                    no_value += 1;
                }
            }
            Ok(())
        })?;
        let x = XSpec {
            units_per_sec: 1e9,
            step_sec: a.stepsec,
            origin: if subsec { None } else { Some(0.0) },
            max_col: a.maxcol,
            col_limit: 10_000,
            wall_ns_at_zero: if subsec {
                wall_known.then_some(0)
            } else {
                wall_known.then(|| header.wall_ns(header.start_ns))
            },
        };
        // Groups with the most events first.
        let mut order: Vec<usize> = (0..pts.groups.len()).collect();
        order.sort_by_key(|&g| (std::cmp::Reverse(pts.groups[g].len()), grouper.names()[g].clone()));
        order.truncate(a.maps.max(1));
        let chosen: Vec<&Points> = order.iter().map(|&g| &pts.groups[g]).collect();
        let empty = Points::default();
        let plan_input: Vec<&Points> = if chosen.is_empty() { vec![&empty] } else { chosen.clone() };
        let bins = Binning::plan(&plan_input, &x, &y).map_err(anyhow::Error::msg)?;
        let maps: Vec<HeatMap> = if order.is_empty() {
            vec![bins.build(&empty, &title, None)]
        } else {
            order
                .iter()
                .map(|&g| {
                    let name = (per != GroupBy::All).then(|| format!("{} {}", per.name(), grouper.names()[g]));
                    bins.build(&pts.groups[g], &title, name)
                })
                .collect()
        };
        (maps, pts.groups.len())
    };
    let bins = &maps[0].bins;
    let mut sub = vec![format!("{}", a.file.display()), format!("{total} {} events", kinds.noun())];
    if let Some(f) = src.filter_text() {
        sub.push(format!("filter: {f}"));
    }
    sub.push(grid_note(bins));
    if no_value > 0 {
        sub.push(format!("{no_value} events without a {}", a.y.name()));
    }
    if groups_total > maps.len() && per != GroupBy::All {
        sub.push(format!("{} of {groups_total} groups", maps.len()));
    }
    emit(&a, &maps, sub.join("; "))?;
    Ok(src.finish())
}

fn scale_for(a: &Args, log_default: bool) -> YScale {
    if a.log {
        YScale::Log
    } else if a.linear || !log_default {
        YScale::Linear
    } else {
        YScale::Log
    }
}

fn yspec(a: &Args, unit: YUnit, scale: YScale, subsec: bool, units_per_sec: f64) -> Result<YSpec> {
    let mut y = YSpec {
        scale,
        rows: a.rows,
        step: a.steplat.as_deref().map(|s| value_opt(s, &unit)).transpose()?,
        min: a.minlat.as_deref().map(|s| value_opt(s, &unit)).transpose()?,
        max: a.maxlat.as_deref().map(|s| value_opt(s, &unit)).transpose()?,
        max_exclusive: false,
        unit,
        label: a.y.label().to_string(),
    };
    if subsec {
        if scale == YScale::Log {
            bail!("--y subsecond needs linear rows");
        }
        y.min = Some(y.min.unwrap_or(0.0));
        y.max = Some(y.max.unwrap_or(units_per_sec).min(units_per_sec));
        y.max_exclusive = y.max == Some(units_per_sec);
    }
    if scale == YScale::Log && a.steplat.is_some() {
        bail!("--steplat is for linear rows: use --linear, or --rows with --log");
    }
    Ok(y)
}

fn grid_note(b: &Binning) -> String {
    let rows = b.rows();
    let r = match b.scale {
        YScale::Linear => format!("{rows} rows of {}", b.unit.fmt(b.edges[1] - b.edges[0])),
        YScale::Log => format!("{rows} log rows"),
    };
    format!("{r}, {} columns of {}", b.cols, latscope_view::svg::fmt_secs(b.step_sec))
}

fn emit(a: &Args, maps: &[HeatMap], subtitle: String) -> Result<()> {
    let title = maps.first().map(|m| m.title.clone()).unwrap_or_default();
    if a.json {
        let j = json!({
            "title": title,
            "subtitle": subtitle,
            "maps": maps.iter().map(|m| m.to_json()).collect::<Vec<_>>(),
        });
        let mut s = serde_json::to_string(&j)?;
        s.push('\n');
        write_output(a.output.as_ref(), s.as_bytes())?;
    } else {
        let o = RenderOptions {
            title,
            subtitle: Some(subtitle.clone()),
            boxsize: a.boxsize,
            grid: a.grid,
            font_size: a.fontsize,
            log_color: a.color == "log",
        };
        let svg = render_svg(maps, &o);
        write_output(a.output.as_ref(), svg.as_bytes())?;
    }
    let m = &maps[0];
    let events: u64 = maps.iter().map(|m| m.total).sum();
    let mut note = format!(
        "latscope: wrote {} ({} map{}, {} rows x {} columns, {events} events in cells",
        shown(a.output.as_ref()),
        maps.len(),
        if maps.len() == 1 { "" } else { "s" },
        m.rows,
        m.bins.cols
    );
    for m in maps {
        if let Some(ns) = m.not_shown() {
            note.push_str(&format!("; {}{ns}", m.group.as_deref().map(|g| format!("{g}: ")).unwrap_or_default()));
        }
    }
    note.push(')');
    eprintln!("{note}");
    Ok(())
}

/// trace2heatmap.pl's input.
fn run_text(a: Args) -> Result<ExitCode> {
    if a.filter.is_some() {
        bail!("filters apply to events: two-column text input takes none (filter the text with awk or grep first)");
    }
    if a.per.is_some() {
        bail!("--per needs events (a trace or --input perf), not two-column text");
    }
    if a.block || a.y == YField::Qtime || a.y == YField::Size || a.y == YField::Offset {
        bail!("two-column text has a time and one value: use --y latency (any value) or --y subsecond");
    }
    let ups = units_per_sec(&a.unitstime).map_err(anyhow::Error::msg).context("--unitstime")?;
    let name = a.file.display().to_string();
    let data = read_all(&a.file)?;
    let mut pts = parse_two_columns(&data, &name)?;
    let subsec = a.y == YField::Subsecond;
    let unit = if subsec { YUnit::Raw(a.unitstime.clone()) } else { YUnit::Raw(a.unitslat.clone()) };
    if subsec {
        // x: whole seconds; y: offset within the second, in the time unit.
        for k in 0..pts.len() {
            let t = pts.x[k];
            let sec = (t / ups).floor();
            pts.x[k] = sec * ups;
            pts.y[k] = t - sec * ups;
        }
    }
    let scale = scale_for(&a, false);
    let x = XSpec {
        units_per_sec: ups,
        step_sec: a.stepsec,
        origin: None,
        max_col: a.maxcol,
        col_limit: 10_000,
        wall_ns_at_zero: None,
    };
    let mut y = yspec(&a, unit, scale, subsec, ups)?;
    if !subsec {
        // trace2heatmap.pl's `||=`: a zero --maxlat or --steplat means "not given".
        y.max = y.max.filter(|&m| m != 0.0);
        y.step = y.step.filter(|&st| st != 0.0);
    }
    y.label = if subsec { "Offset within the second".into() } else { "Latency".into() };
    let bins = Binning::plan(&[&pts], &x, &y).map_err(anyhow::Error::msg)?;
    let title = a.title.clone().unwrap_or_else(|| {
        if subsec {
            "Subsecond Offset Heat Map".into()
        } else {
            "Latency Heat Map".into()
        }
    });
    let map = bins.build(&pts, &title, None);
    let sub = format!("{name}; {} lines; {}", pts.len(), grid_note(&bins));
    emit(&a, &[map], sub)?;
    Ok(ExitCode::SUCCESS)
}
