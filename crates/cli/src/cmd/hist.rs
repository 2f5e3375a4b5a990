//! `latscope hist`: events -> high-resolution histogram(s) with statistics and peaks, as text, SVG
//! or JSON.

use crate::args::{check_range, finish_scan, refuse_terminal, write_output, InputArg, JsonArg, ReadArgs, ScanPlan};
use anyhow::{bail, Context, Result};
use latscope_event::EventKind;
use latscope_hist::Histogram;
use latscope_view::group::GroupBy;
use latscope_view::heatmap::text::parse_two_columns;
use latscope_view::heatmap::{YField, YUnit};
use latscope_view::histview::{self, from_pairs, keep_largest, HistBuilder, HistOptions, HistScale};
use std::path::PathBuf;
use std::process::ExitCode;

/// High-resolution latency histogram with percentiles and peaks (text, SVG, JSON).
///
/// Prints a latency histogram at full resolution (buckets 1/128 wide: percentiles within 0.78 %):
/// count, min, mean, p50, p90, p99, p99.9, p99.99, max, the distribution on a log (default) or
/// linear axis, and every peak with its mode, share of events and width — each peak is a population
/// worth explaining (a cache tier, a device, a lock, a retry timeout, a clock's granularity).
///
/// The first line says what was counted: idle waits (futex, poll, epoll_wait, nanosleep, wait4,
/// ...: time their caller chose to wait) are left out, as in every view, and a line says how many
/// and how long; --waits counts them. When nothing but waits matched the filter (evt.type =
/// futex), they are shown.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope hist -r trace.lst                                  # all syscalls' latency
  latscope hist -r trace.lst 'evt.type = pread64 and fd.type = file'
  latscope hist -r trace.lst --by syscall -n 5                # one histogram per syscall
  latscope hist -r trace.lst --block --by disk --svg disks.svg
  latscope hist -r trace.lst --by syscall --svg tails.svg --log-y
  latscope hist -r trace.lst --block --field qtime
  latscope hist -r trace.lst --linear --min 0 --max 2ms --bins 40
  latscope hist -r trace.lst --full                           # every non-empty bucket
  latscope hist --input perf -r out.blockio --json | jq '.groups[0].stats'
  latscope hist --input text -r out.lat_ms --unitslat ms     # trace2heatmap.pl's two columns")]
pub struct Args {
    #[command(flatten)]
    pub read: ReadArgs,
    /// Block requests instead of syscalls (implied by --input perf).
    #[arg(long)]
    pub block: bool,
    /// Count idle waits (nanosleep, poll, select, futex, epoll_wait, wait4, ...) with the work.
    #[arg(long)]
    pub waits: bool,
    /// Text input: the unit of the values (s, ms, us, ns: printed as times; else a label).
    #[arg(long, visible_alias = "unitslabel", default_value = "", value_name = "UNIT")]
    pub unitslat: String,
    /// What to count: latency, size (bytes), qtime (block queue time), offset.
    #[arg(long, default_value = "latency", value_parser = YField::parse)]
    pub field: YField,
    /// One histogram per group: proc, syscall, file, disk, op, class, container, pod, cgroup (also
    /// pid, dir, client).
    #[arg(long, value_name = "GROUP", value_parser = GroupBy::parse)]
    pub by: Option<GroupBy>,
    /// With --by: the groups with the most events, at most this many.
    #[arg(short = 'n', long, default_value_t = 10)]
    pub limit: usize,
    /// Linear bins instead of logarithmic ones.
    #[arg(long)]
    pub linear: bool,
    /// Linear bins wanted (the width is rounded to 1, 2 or 5 times a power of ten).
    #[arg(long, default_value_t = 40)]
    pub bins: usize,
    /// Linear: smallest value shown, with units (0, 100us, 4KiB).
    #[arg(long, value_name = "VALUE")]
    pub min: Option<String>,
    /// Linear: largest value shown, with units.
    #[arg(long, value_name = "VALUE")]
    pub max: Option<String>,
    /// Logarithmic bins per decade (20 = bins 12 % wide).
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub per_decade: u32,
    /// Every non-empty bucket of the histogram (1/128 wide) instead of bins.
    #[arg(long, conflicts_with = "linear")]
    pub full: bool,
    /// Width of the longest bar, in characters.
    #[arg(long, default_value_t = 40)]
    pub width: usize,
    /// Also draw the histogram(s) to this SVG file (with --by, one panel per group, all on one
    /// value axis so that they compare at a glance).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// SVG: give each panel the value axis of its own data instead of one shared by all.
    #[arg(long, requires = "svg")]
    pub own_x: bool,
    /// SVG: counts on a logarithmic axis, so that tails of a few events stay visible.
    #[arg(long, requires = "svg")]
    pub log_y: bool,
    /// SVG: the picture's width in pixels (400 to 4000).
    #[arg(long, requires = "svg", default_value_t = 900, value_parser = clap::value_parser!(u32).range(400..=4000), value_name = "PX")]
    pub svg_width: u32,
    #[command(flatten)]
    pub json: JsonArg,
}

impl Args {
    fn scale(&self, unit: &YUnit) -> Result<HistScale> {
        if self.full {
            return Ok(HistScale::Full);
        }
        let value = |o: &Option<String>, flag: &str| -> Result<Option<u64>> {
            o.as_deref()
                .map(|s| unit.parse_value(s).map(|v| v.max(0.0).round() as u64).map_err(anyhow::Error::msg))
                .transpose()
                .context(flag.to_string())
        };
        let (min, max) = (value(&self.min, "--min")?, value(&self.max, "--max")?);
        let f = |v: Option<u64>| v.map(|v| v as f64);
        check_range(("--min", f(min)), ("--max", f(max)), false, |v| unit.fmt_short(v))?;
        if !self.linear {
            if min.is_some() || max.is_some() {
                bail!("--min/--max set the range of linear bins: add --linear");
            }
            return Ok(HistScale::Log { per_decade: histview::clamp_per_decade(self.per_decade) });
        }
        Ok(HistScale::Linear { bins: self.bins.max(1), min, max })
    }
}

pub fn run(a: Args) -> Result<ExitCode> {
    crate::args::check_output(Some(&a.read.file), a.svg.as_deref())?;
    let by = a.by.unwrap_or(GroupBy::All);
    let mut note: Option<serde_json::Value> = None;
    let mut note_text: Option<String> = None;
    let headline: Option<String>;
    let mut counted: Option<serde_json::Value> = None;
    let (mut groups, unit, what, code) = if a.read.input == InputArg::Text {
        a.read.text_takes_no_filter()?;
        if a.by.is_some() {
            bail!("two-column text input takes no --by");
        }
        let pts = parse_two_columns(&latscope_scan::read_input(&a.read.file)?, &a.read.file.display().to_string())?;
        let (h, unit) = from_pairs(&pts.y, &a.unitslat);
        let what = if unit == YUnit::Nanos { "latency" } else { "value" };
        headline = Some(format!("{} values", h.count()));
        (vec![("all".to_string(), h)], unit, what.to_string(), ExitCode::SUCCESS)
    } else {
        let kind = a.read.kind(a.block);
        if a.field == YField::Qtime && kind != EventKind::Block {
            bail!("--field qtime is the block queue time: add --block");
        }
        if a.field == YField::Subsecond {
            bail!("--field subsecond is for heat maps");
        }
        let mut hb = HistBuilder::new(kind, a.field, by).with_waits(a.waits);
        let mut scan = a.read.open("hist", ScanPlan { columns: &hb.columns(), zone: hb.zone_plan() })?;
        scan.for_each_with_header(|c, header| {
            hb.add(c, header);
            Ok::<(), anyhow::Error>(())
        })?;
        let noun = if kind == EventKind::Block { "block I/O" } else { "syscall" };
        let what = format!("{noun} {}", a.field.label().to_lowercase());
        let hists = hb.finish();
        note_text = hists.note();
        headline = Some(hists.headline(kind));
        counted = Some(hists.counted.to_json());
        if !a.waits && !hists.only_waits && hists.left_out().count() > 0 {
            note = Some(hists.left_out().to_json());
        }
        (hists.groups, a.field.unit(), what, finish_scan(&scan.report()))
    };
    let hidden = keep_largest(&mut groups, a.limit);
    let filter = a.read.filter.filter.clone().filter(|f| !f.trim().is_empty());
    let o = HistOptions {
        scale: a.scale(&unit)?,
        unit,
        bar_width: a.width.clamp(1, 400),
        what,
        filter,
        note: [headline.clone(), note_text.clone()].into_iter().flatten().reduce(|a, b| format!("{a}; {b}")),
        shared_x: !a.own_x,
        log_y: a.log_y,
        svg_width: f64::from(a.svg_width),
        ..Default::default()
    };
    let heading = |name: &str| match by {
        GroupBy::All | GroupBy::Syscall | GroupBy::Op => name.to_string(),
        _ => format!("{} {name}", by.name()),
    };
    if let Some(p) = &a.svg {
        refuse_terminal(Some(p), "the histogram chart", "--svg FILE")?;
        let refs: Vec<(String, &Histogram)> = groups.iter().map(|(n, h)| (heading(n), h)).collect();
        let title = histview::svg_title(&o, &a.read.file.display().to_string());
        write_output(Some(p), histview::render_svg(&refs, &o, &title).as_bytes())?;
        eprintln!("latscope: wrote {}", p.display());
    }
    let out = if a.json.json {
        let groups: Vec<_> = groups.iter().map(|(n, h)| histview::to_json(n, h, &o)).collect();
        let j = serde_json::json!({ "what": o.what, "filter": o.filter, "by": by.name(), "groups": groups,
            "groups_not_shown": hidden, "counted": counted, "waits_left_out": note, "note": note_text });
        format!("{}\n", latscope_event::escape::json_ascii_controls(serde_json::to_string(&j)?))
    } else {
        let texts: Vec<String> = groups.iter().map(|(n, h)| histview::render_text(&heading(n), h, &o)).collect();
        let f = o.filter.as_deref().map_or(String::new(), |f| format!(" matching '{f}'"));
        let mut s = format!("{} from {}{f}\n\n", headline.unwrap_or_default(), a.read.file.display());
        s.push_str(&texts.join("\n"));
        if hidden > 0 {
            s.push_str(&format!("\n({hidden} more {} groups; -n to show more)\n", by.name()));
        }
        if let Some(n) = &note_text {
            s.push_str(&format!("\n({n})\n"));
        }
        s
    };
    write_output(None, out.as_bytes())?;
    Ok(code)
}
