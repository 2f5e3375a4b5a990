//! `latscope why`: record with attribution (or read a trace) -> the slowest operations and why.

use crate::args::{print_warnings, write_output, FilterArg, JsonArg, LiveArgs};
use anyhow::{Context, Result};
use latscope_event::units::parse_duration_secs_default;
use latscope_event::StackTable;
use latscope_live::{Recorder, RecorderOptions, WRITER_QUEUE_BLOCKS};
use latscope_scan::{InputFormat, Scan, ScanOptions};
use latscope_trace::ThreadedTraceWriter;
use latscope_view::stacks::{self, StackAgg, StackNames};
use latscope_view::threadtime::ThreadTimeAgg;
use latscope_view::why::WhyAgg;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Why was it slow: the slowest operations by total time, each with its causes (on CPU, run
/// queue, block I/O, lock, pipe/socket, timer, page fault, other), the files, disks and threads
/// behind them, on one screen.
///
/// Records the whole machine (or the processes given, or a COMMAND) with attribution for
/// --duration, or reads a trace recorded with `record --why` (-r). Idle waits (poll,
/// epoll_wait, futex, sleeps, wait4: their time is what something else took) are left out
/// unless --waits.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  latscope why                                   # the whole machine for 10 s
  latscope why -d 30s -p \"$(pgrep -o postgres)\" -f
  latscope why -- make -j2                       # a command from start to exit
  latscope why -r slow.lst 'proc.name = nginx'   # a trace recorded with record --why
  latscope why -r slow.lst --json | jq '.operations[0]'
  latscope why -r slow.lst --svg why.svg           # time by cause per operation, by waker: a picture
  latscope why -r slow.lst --stacks -n 3          # blocked time by stack: where it waited, who called
  latscope why --threads -- python3 app.py       # each thread's whole time: CPU, run queue, calls by cause
  latscope why -r slow.lst --flame blocked.svg --folded blocked.folded   # flame graph; flamegraph.pl input
  latscope why --on-cpu --flame cpu.svg -- ./app  # where the CPU time went (samples at 99 Hz)
  latscope why -r prof.lst --hot-cold --flame hotcold.svg   # on CPU and blocked in one graph
  latscope why -r slow.lst --stacks --binaries /srv/copy   # symbolize with the binaries copied from the host")]
pub struct Args {
    /// Read this trace (recorded with `record --why`) instead of recording.
    #[arg(short = 'r', long = "read", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// How long to record (e.g. 10s, 1m; a bare number is seconds).
    #[arg(short = 'd', long, default_value = "10s", value_parser = parse_duration_secs_default, value_name = "DURATION")]
    pub duration: u64,
    #[command(flatten)]
    pub live: LiveArgs,
    /// Operations shown.
    #[arg(short = 'n', long, default_value = "5", value_name = "N")]
    pub top: usize,
    /// Count idle waits (poll, epoll_wait, futex, sleeps, wait4) too.
    #[arg(long)]
    pub waits: bool,
    /// Show blocked time by stack instead: the kernel stack where calls blocked and their user
    /// stack, the -n largest (text, or --json). When recording, stacks are recorded; a trace read
    /// with -r has them if recorded with `record --stacks`.
    #[arg(long)]
    pub stacks: bool,
    /// Show where each thread's whole time went instead, in and outside its calls: user and
    /// kernel CPU, run queue and blocked time outside calls, and its calls' time by cause, per
    /// thread and per process (the -n with the most wall time; --json: all). From the thread
    /// times a recording with attribution reads at its start, at each thread's exit and at its
    /// end.
    #[arg(long)]
    pub threads: bool,
    /// With --stacks, --folded, --flame: on-CPU time by stack instead of blocked time, from the
    /// samples of `record --profile HZ` (when recording: sampled at --profile, default 99 Hz).
    #[arg(long, conflicts_with = "hot_cold")]
    pub on_cpu: bool,
    /// With --folded, --flame: on-CPU samples and blocked time in one graph (Gregg's hot/cold
    /// flame graph): the first frame says which (`[on CPU]`, `[blocked]`), each weighed in
    /// microseconds.
    #[arg(long)]
    pub hot_cold: bool,
    /// When recording: sample each thread on its CPU this many times a second (implied at 99
    /// by --on-cpu and --hot-cold).
    #[arg(long, value_name = "HZ", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub profile: Option<u32>,
    #[command(flatten)]
    pub call_graph: crate::args::CallGraphArg,
    /// Write blocked time by stack as folded stacks ("frame;frame;... microseconds", outermost
    /// first) to FILE ('-' for stdout): flamegraph.pl, inferno and speedscope read it.
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
    /// Write blocked time by stack as an interactive flame graph (SVG) to FILE.
    #[arg(long, value_name = "FILE")]
    pub flame: Option<PathBuf>,
    /// Also draw the breakdown to FILE (SVG): time by cause as a stacked bar per operation,
    /// blocked time by waker, with a legend.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Look up the recorded binaries under DIR (their recorded paths below it, as if DIR were /:
    /// never outside it) to name user frames, e.g. a copy of the recording machine's files; by
    /// default their recorded paths. Only regular files are read; a binary whose build id
    /// differs from the recorded one is not used.
    #[arg(long, value_name = "DIR")]
    pub binaries: Option<PathBuf>,
    #[command(flatten)]
    pub json: JsonArg,
    #[command(flatten)]
    pub filter: FilterArg,
    /// Command to run and record from start to exit (with its children).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// A private directory for the recording, removed with what it holds when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir> {
        use std::os::unix::fs::DirBuilderExt;
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let p = std::env::temp_dir().join(format!("latscope-why-{}-{nanos}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&p)
            .with_context(|| format!("cannot create the temporary directory {} (set TMPDIR elsewhere)", p.display()))?;
        Ok(TempDir(p))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn run(a: Args) -> Result<ExitCode> {
    let filter = a.filter.parse()?;
    let profile = a.profile.or((a.on_cpu || a.hot_cold).then_some(99));
    if a.hot_cold && a.folded.is_none() && a.flame.is_none() {
        anyhow::bail!("--hot-cold draws one graph: give --flame FILE or --folded FILE");
    }
    let tmp;
    let (path, mut status) = match &a.file {
        Some(f) => {
            if !a.command.is_empty() {
                anyhow::bail!("why reads a trace (-r) or records (a COMMAND), not both: drop -r or the COMMAND");
            }
            (f.clone(), ExitCode::SUCCESS)
        }
        None => {
            tmp = TempDir::new()?;
            let path = tmp.0.join("why.lst");
            let session = a
                .live
                .session(filter.clone())
                .block(true)
                .command(a.command.clone())
                .why(Some(0))
                .why_stacks(a.stacks || a.folded.is_some() || a.flame.is_some() || profile.is_some())
                .profile(profile)
                .unwind_copy(a.call_graph.call_graph)
                .start()?;
            print_warnings(session.warnings());
            let writer =
                ThreadedTraceWriter::create_with(&path, session.header(), Default::default(), WRITER_QUEUE_BLOCKS)
                    .context("cannot create the temporary trace")?;
            let opts = RecorderOptions { duration: Some(Duration::from_nanos(a.duration)), ..Default::default() };
            if !a.json.json {
                eprintln!(
                    "latscope: recording {} with attribution (Ctrl-C stops)...",
                    if a.command.is_empty() { "for up to --duration".to_string() } else { a.command.join(" ") }
                );
            }
            let rec = Recorder::new(session, writer, opts).run(|_| {})?;
            if rec.stats.lost > 0 {
                eprintln!("latscope: {} events lost (ring buffer full): totals are short", rec.stats.lost);
            }
            let st = match rec.command_status {
                Some(s) if !a.command.is_empty() => ExitCode::from(s.clamp(0, 255) as u8),
                _ => ExitCode::SUCCESS,
            };
            (path, st)
        }
    };
    // --on-cpu alone prints the on-CPU stacks as --stacks prints the blocked ones.
    let show_stacks = a.stacks || (a.on_cpu && a.folded.is_none() && a.flame.is_none());
    let want_stacks = show_stacks || a.folded.is_some() || a.flame.is_some();
    // The on-CPU samples' stacks (--on-cpu: instead of the blocked ones; --hot-cold: beside them).
    let mut cagg = StackAgg { samples: true, on_cpu: true, ..Default::default() };
    crate::args::check_output(Some(&path), a.svg.as_deref())?;
    if a.svg.is_some() {
        crate::args::refuse_terminal(a.svg.as_deref(), "the breakdown", "--svg FILE")?;
    }
    if want_stacks {
        for o in [&a.folded, &a.flame].into_iter().flatten() {
            crate::args::check_output(Some(&path), Some(o))?;
        }
        if a.flame.as_deref().is_some_and(|p| p.as_os_str() == "-") {
            crate::args::refuse_terminal(a.flame.as_deref(), "the flame graph", "--flame FILE")?;
        }
    }
    if a.threads && (want_stacks || a.svg.is_some()) {
        anyhow::bail!("--threads shows each thread's time, --stacks and --svg the calls' breakdown: one at a time");
    }
    let all_threads = filter.is_match_all();
    let opts = ScanOptions { filter, ..Default::default() };
    let mut scan = Scan::open(&path, InputFormat::Trace, opts)?;
    let header = scan.header().clone();
    let mut agg = WhyAgg { with_waits: a.waits, ..Default::default() };
    let mut sagg = StackAgg { with_waits: a.waits, ..Default::default() };
    // Every call of each block (not only those the filter took): the chains go through them.
    let mut chains = latscope_view::chain::ChainIndex::new();
    let mut tagg = if all_threads { ThreadTimeAgg::all_threads() } else { ThreadTimeAgg::default() };
    let (mut first, mut last) = (u64::MAX, 0u64);
    let mut table = StackTable::default();
    while let Some(c) = scan.next_batch() {
        let c = c?;
        for &i in c.rows {
            let i = i as usize;
            first = first.min(c.batch.ts[i]);
            last = last.max(c.batch.end(i));
        }
        // (the ticket's line on the threads' whole time: without a filter only)
        if a.threads || (all_threads && !want_stacks && a.svg.is_none()) {
            tagg.add(c.batch, c.rows);
        }
        if a.threads {
            // (the samples' stacks name the functions each thread was on CPU in)
            if !c.batch.stacks.is_empty() {
                table
                    .add_lines(&c.batch.stacks)
                    .map_err(|e| anyhow::anyhow!("{}: the trace's stack table: {e}", path.display()))?;
            }
            continue;
        }
        chains.add(c.batch);
        agg.add_with_chains(c.batch, c.rows, Some(&chains));
        if want_stacks {
            if a.on_cpu || a.hot_cold {
                cagg.add(c.batch, c.rows);
            }
            sagg.add(c.batch, c.rows);
            // The stack table is in the metadata of the blocks that first use each stack: read
            // as the blocks come, it works on a trace from standard input too.
            if !c.batch.stacks.is_empty() {
                table
                    .add_lines(&c.batch.stacks)
                    .map_err(|e| anyhow::anyhow!("{}: the trace's stack table: {e}", path.display()))?;
            }
        }
    }
    if a.threads {
        if tagg.has_samples() {
            let mut names = StackNames::new(std::mem::take(&mut table), a.binaries.as_deref());
            tagg.name_samples(|u, k| stacks::sample_leaf(&mut names, u, k));
        }
        if a.json.json {
            println!("{}", latscope_event::escape::json_ascii_controls(tagg.to_json().to_string()));
        } else {
            print!("{}", tagg.render_text(a.top));
        }
        return Ok(if crate::args::finish_scan(&scan.report()) != ExitCode::SUCCESS {
            ExitCode::FAILURE
        } else {
            status
        });
    }
    let mut names = want_stacks.then(|| StackNames::new(table, a.binaries.as_deref()));
    if let Some(p) = &a.svg {
        let title = match &a.file {
            Some(f) => super::top_why::breakdown_title(f, &a.filter),
            None => "Why was it slow".to_string(),
        };
        write_output(Some(p), latscope_view::whysvg::render_svg(&agg, a.top, &title).as_bytes())?;
        if p.as_os_str() == "-" && !want_stacks {
            // The picture is the output: no ticket mixed into it.
            let ok = crate::args::finish_scan(&scan.report()) == ExitCode::SUCCESS;
            return Ok(if ok { status } else { ExitCode::FAILURE });
        }
    }
    if let Some(names) = names.as_mut() {
        let folded = if a.hot_cold {
            stacks::hot_cold_folded(&cagg, &sagg, names)
        } else if a.on_cpu {
            stacks::folded(&cagg, names)
        } else {
            stacks::folded(&sagg, names)
        };
        let (sagg, title) = if a.on_cpu {
            (&cagg, "On-CPU time by stack (latscope why --on-cpu)")
        } else if a.hot_cold {
            (&sagg, "On CPU and blocked time by stack (latscope why --hot-cold)")
        } else {
            (&sagg, "Blocked time by stack (latscope why)")
        };
        if let Some(f) = &a.folded {
            write_output(Some(f), folded.as_bytes())?;
        }
        if let Some(f) = &a.flame {
            let svg =
                stacks::flame_svg(&folded, title).map_err(|e| anyhow::anyhow!("cannot draw the flame graph: {e}"))?;
            write_output(Some(f), &svg)?;
        }
        if show_stacks {
            if a.json.json {
                println!(
                    "{}",
                    latscope_event::escape::json_ascii_controls(stacks::to_json(sagg, names, a.top).to_string())
                );
            } else {
                print!("{}", stacks::render_text(sagg, names, a.top));
            }
        }
        if show_stacks || [&a.folded, &a.flame].into_iter().flatten().any(|p| p.as_os_str() == "-") {
            return Ok(if crate::args::finish_scan(&scan.report()) != ExitCode::SUCCESS {
                ExitCode::FAILURE
            } else {
                status
            });
        }
    }
    if a.json.json {
        let mut j = agg.to_json(a.top);
        j["chain_roots"] = agg.roots_json(Some(&header), a.top);
        println!("{}", latscope_event::escape::json_ascii_controls(j.to_string()));
    } else {
        // Over the time covered: the recording (within the filter's time window), as every view.
        let events = (first <= last).then(|| latscope_event::Span::new(first, last));
        print!("{}", agg.render_ticket(&header, a.top, scan.covered(events).map_or(0, |c| c.ns())));
        if let Some(l) = all_threads.then(|| tagg.summary_line()).flatten() {
            println!("{l}");
        }
    }
    if crate::args::finish_scan(&scan.report()) != ExitCode::SUCCESS {
        status = ExitCode::FAILURE;
    }
    Ok(status)
}
