//! `latscope hist`: events -> high-resolution histogram(s) with statistics and peaks, as text, SVG
//! or JSON.

use crate::cmd::viewinput::{columns, read_all, write_output, InputFormat, Kinds, Source, Zone};
use anyhow::{bail, Result};
use latscope_event::units::{parse_duration_ns, parse_size};
use latscope_hist::Histogram;
use latscope_trace::BlockMeta;
use latscope_view::group::{GroupBy, Grouper};
use latscope_view::heatmap::text::parse_two_columns;
use latscope_view::heatmap::{EventPoints, YField, YUnit};
use latscope_view::histview::{self, HistOptions, HistScale};
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// High-resolution latency histogram with percentiles and peaks (text, SVG, JSON).
///
/// Prints a latency histogram at full resolution (buckets 1/128 wide: percentiles within 0.78 %):
/// count, min, mean, p50, p90, p99, p99.9, p99.99, max, the distribution on a log (default) or
/// linear axis, and every peak with its mode, share of events and width — each peak is a population
/// worth explaining (a cache tier, a device, a lock, a retry timeout, a clock's granularity).
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope hist -r trace.lst                                  # all syscalls' latency
  latscope hist -r trace.lst 'evt.type = pread64 and fd.type = file'
  latscope hist -r trace.lst --by syscall -n 5                # one histogram per syscall
  latscope hist -r trace.lst --block --by disk --svg disks.svg
  latscope hist -r trace.lst --block --field qtime
  latscope hist -r trace.lst --linear --min 0 --max 2ms --bins 40
  latscope hist -r trace.lst --full                           # every non-empty bucket
  latscope hist --input perf -r out.blockio --json | jq '.groups[0].stats'")]
pub struct Args {
    /// Input file (a trace, or text with --input; '-' reads stdin).
    #[arg(short = 'r', long = "read", value_name = "FILE")]
    pub file: PathBuf,
    /// Filter expression (see 'latscope fields').
    #[arg(value_name = "FILTER")]
    pub filter: Option<String>,
    /// Input format (text: the second column of "time value" lines, rounded to integers, in its own unit).
    #[arg(long, value_enum, default_value = "trace")]
    pub input: InputFormat,
    /// Block requests instead of syscalls (implied by --input perf).
    #[arg(long)]
    pub block: bool,
    /// What to count: latency, size (bytes), qtime (block queue time), offset.
    #[arg(long, default_value = "latency", value_parser = YField::parse)]
    pub field: YField,
    /// One histogram per group: proc, syscall, file, disk, op (also pid, dir, client).
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
    /// Also draw the histogram(s) to this SVG file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// JSON on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

fn parse_value(s: &str, unit: &YUnit) -> Result<u64> {
    if let Ok(v) = s.trim().parse::<u64>() {
        return Ok(v);
    }
    match unit {
        YUnit::Nanos => parse_duration_ns(s).map_err(anyhow::Error::msg),
        YUnit::Bytes => parse_size(s).map_err(anyhow::Error::msg),
        YUnit::Raw(_) => bail!("'{s}' is not a whole number"),
    }
}

pub fn run(a: Args) -> Result<ExitCode> {
    let by = a.by.unwrap_or(GroupBy::All);
    let mut groups: Vec<(String, Histogram)>;
    let unit;
    let what;
    let mut code = ExitCode::SUCCESS;
    if a.input == InputFormat::Text {
        if a.filter.is_some() || a.by.is_some() {
            bail!("two-column text input takes no filter and no --by");
        }
        let pts = parse_two_columns(&read_all(&a.file)?, &a.file.display().to_string())?;
        let mut h = Histogram::new();
        for &v in &pts.y {
            h.record_signed(v.round() as i64);
        }
        groups = vec![("all".into(), h)];
        unit = YUnit::Raw(String::new());
        what = "value".to_string();
    } else {
        let kinds = Kinds::new(a.block, a.input);
        if a.field == YField::Qtime && kinds != Kinds::Block {
            bail!("--field qtime is the block queue time: add --block");
        }
        if a.field == YField::Subsecond {
            bail!("--field subsecond is for heat maps");
        }
        let mut cols = vec!["kind"];
        cols.extend(a.field.columns());
        cols.extend(by.columns());
        let mut src = Source::open(&a.file, a.input, a.filter.as_deref(), &columns(&cols))?;
        let mut grouper = Grouper::new(by);
        let mut hs: Vec<Histogram> = Vec::new();
        let field = a.field;
        let fast = by == GroupBy::All && field == YField::Latency;
        let kind = kinds.code();
        // Zone maps: a block of syscalls only is counted from `lat` alone, one without
        // syscalls not at all (a histogram has no time axis).
        let zone = |m: &BlockMeta| if fast { Zone::of(m, kind, false, false, |_| None) } else { Default::default() };
        src.for_each_zoned(zone, |b, rows, h, z| {
            if fast {
                // One latency histogram: only two columns touched.
                if hs.is_empty() {
                    hs.push(Histogram::new());
                    grouper.group(b, 0, h);
                }
                let hist = &mut hs[0];
                if z.empty {
                    return Ok(());
                }
                if z.all_kind {
                    hist.record_slice(&b.lat);
                } else if rows.len() == b.len() {
                    for (&k, &lat) in b.kind.iter().zip(&b.lat) {
                        if k == kind {
                            hist.record(lat);
                        }
                    }
                } else {
                    for &i in rows {
                        if b.kind[i as usize] == kind {
                            hist.record(b.lat[i as usize]);
                        }
                    }
                }
                return Ok(());
            }
            for &i in rows {
                let i = i as usize;
                if !kinds.takes(b, i) {
                    continue;
                }
                let Some(v) = EventPoints::value(field, b, i, h) else { continue };
                let g = grouper.group(b, i, h);
                while hs.len() <= g {
                    hs.push(Histogram::new());
                }
                hs[g].record(v as u64);
            }
            Ok(())
        })?;
        groups = hs.into_iter().enumerate().map(|(g, h)| (grouper.names()[g].clone(), h)).collect();
        if groups.is_empty() {
            groups.push(("all".into(), Histogram::new()));
        }
        unit = field.unit();
        what = format!("{} {}", kinds.noun(), field.label().to_lowercase());
        code = src.finish();
    }
    groups.sort_by(|x, y| y.1.count().cmp(&x.1.count()).then_with(|| x.0.cmp(&y.0)));
    let hidden = groups.len().saturating_sub(a.limit.max(1));
    groups.truncate(a.limit.max(1));
    let scale = if a.full {
        HistScale::Full
    } else if a.linear {
        HistScale::Linear {
            bins: a.bins.max(1),
            min: a.min.as_deref().map(|s| parse_value(s, &unit)).transpose()?,
            max: a.max.as_deref().map(|s| parse_value(s, &unit)).transpose()?,
        }
    } else {
        if a.min.is_some() || a.max.is_some() {
            bail!("--min/--max set the range of linear bins: add --linear");
        }
        HistScale::Log { per_decade: histview::clamp_per_decade(a.per_decade) }
    };
    let o = HistOptions { scale, unit, bar_width: a.width.clamp(1, 400), what: what.clone(), ..Default::default() };
    let heading = |name: &str| match by {
        GroupBy::All | GroupBy::Syscall | GroupBy::Op => name.to_string(),
        _ => format!("{} {name}", by.name()),
    };
    if let Some(p) = &a.svg {
        let refs: Vec<(String, &Histogram)> = groups.iter().map(|(n, h)| (heading(n), h)).collect();
        let title = format!("{} histogram — {}", capitalize(&what), a.file.display());
        std::fs::write(p, histview::render_svg(&refs, &o, &title))
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))?;
        eprintln!("latscope: wrote {}", p.display());
    }
    if a.json {
        let j = json!({
            "what": what,
            "by": by.name(),
            "groups": groups.iter().map(|(n, h)| histview::to_json(n, h, &o)).collect::<Vec<_>>(),
            "groups_not_shown": hidden,
        });
        let mut s = serde_json::to_string(&j)?;
        s.push('\n');
        write_output(None, s.as_bytes())?;
    } else {
        let mut out = String::new();
        for (k, (n, h)) in groups.iter().enumerate() {
            if k > 0 {
                out.push('\n');
            }
            out.push_str(&histview::render_text(&heading(n), h, &o));
        }
        if hidden > 0 {
            out.push_str(&format!("\n({hidden} more {} groups; -n to show more)\n", by.name()));
        }
        let mut so = std::io::stdout().lock();
        so.write_all(out.as_bytes())?;
        so.flush()?;
    }
    Ok(code)
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}
