//! The pictures `diff` writes: histograms overlaid, heat maps and their difference, differential
//! flame graphs and folded stacks.

use super::Args;
use crate::args::write_output;
use anyhow::{Context, Result};
use latscope_view::diff::{self, svg, DiffOptions, Dim, Run};

/// Writes the pictures asked for.
pub(super) fn pictures(a: &Args, ra: &[Run], rb: &[Run], o: &DiffOptions, d: &diff::Diff, sub: &str) -> Result<()> {
    let noun = if a.block { "Block I/O" } else { "Syscall" };
    if let Some(p) = &a.svg {
        let (k, first) = if a.block {
            (1, o.dims.iter().position(|d| *d == Dim::Disk))
        } else {
            (0, (!o.dims.is_empty() && o.dims[0] != Dim::Cause && o.dims[0] != Dim::Disk).then_some(0))
        };
        let mut panels = vec![svg::Panel {
            name: format!("all {}", noun.to_lowercase()),
            a: svg::merged(ra, &|r| Some(&r.totals[k]), "all"),
            b: svg::merged(rb, &|r| Some(&r.totals[k]), "all"),
        }];
        if let Some(di) = first {
            let by = o.dims[di].name();
            if let Some(dd) = d.dims.iter().find(|x| x.by == by) {
                for g in dd.groups.iter().take(6) {
                    panels.push(svg::Panel {
                        name: format!("{by} {}", g.name),
                        a: svg::merged(ra, &|r| r.dims.get(di), &g.name),
                        b: svg::merged(rb, &|r| r.dims.get(di), &g.name),
                    });
                }
            }
        }
        write_output(Some(p), svg::histograms(&panels, &format!("{noun} latency, A and B"), sub).as_bytes())?;
        eprintln!("latscope: wrote {}", p.display());
    }
    if let Some(p) = &a.heatmap {
        let (ma, mb) = svg::heat_maps(ra, rb).map_err(anyhow::Error::msg)?.context("no heat map was kept")?;
        let title = format!("{noun} latency heat maps: A, B and B - A");
        write_output(Some(p), svg::heat_svg(&ma, &mb, &title, sub).as_bytes())?;
        eprintln!("latscope: wrote {}", p.display());
    }
    let folded = |cpu: bool, runs: &[Run]| -> Vec<(String, f64)> {
        let pick = |r: &Run| r.stacks.as_ref().map(|s| if cpu { s.1.clone() } else { s.0.clone() });
        runs.iter().map(|r| (pick(r).unwrap_or_default(), r.secs)).collect()
    };
    // (on CPU, file, drawn as a flame graph rather than written as folded stacks)
    for (cpu, file, draw) in [(false, &a.flame, true), (true, &a.flame_cpu, true), (false, &a.folded, false)] {
        let Some(p) = file else { continue };
        let (fa, fb) = (folded(cpu, ra), folded(cpu, rb));
        let ta: Vec<(&str, f64)> = fa.iter().map(|(s, t)| (s.as_str(), *t)).collect();
        let tb: Vec<(&str, f64)> = fb.iter().map(|(s, t)| (s.as_str(), *t)).collect();
        let df = svg::diff_folded(&ta, &tb);
        if draw {
            let (title, count) = if cpu {
                ("On-CPU time in calls by stack, B against A", "us on CPU")
            } else {
                ("Blocked time by stack, B against A", "us blocked")
            };
            let svg =
                svg::diff_flame(&df, title, count).map_err(|e| anyhow::anyhow!("cannot draw the flame graph: {e}"))?;
            write_output(Some(p), &svg)?;
        } else {
            write_output(Some(p), df.as_bytes())?;
        }
        if df.is_empty() {
            eprintln!("latscope: no call carries a stack on either side: record with `latscope record --why --stacks`");
        }
        eprintln!("latscope: wrote {}", p.display());
    }
    Ok(())
}
