//! `blameprof report`: a view of a profile (trees, flat, threads, locks, timeline, one
//! function's source) as text or JSON, or an export of the whole profile.
//!
//! Job: its arguments ([`ReportArgs`]), the checks of their combinations, loading what the
//! chosen view needs, and handing it to the viewer; every failure is one line naming the
//! problem and the fix.
//!
//! Invariants: text reports prune by default, JSON only when asked; html, pprof and firefox
//! go to a file of their own when standard output is a terminal. Not async-signal-safe
//! (allocates, does I/O).

use super::profile::{diagnose, finish_output, Diagnosis, ProfileArgs};
use super::source::SourceArgs;
use super::timeline::TimelineFlags;
use crate::attribution::findings::Thresholds;
use crate::attribution::locks::LockTable;
use crate::attribution::metrics::WORK;
use crate::viewer::export::{write_folded, Export};
use crate::viewer::json::Json;
use crate::viewer::locks::{self as lock_view, Findings, LockOptions, SortBy};
use crate::viewer::style::{terminal_width, Paint};
use crate::viewer::text::Text;
use crate::viewer::{self, PercentOf, Prune, Renderer, Report, View};
use anyhow::{anyhow, bail};
use std::io::{self, Write};
use std::path::PathBuf;

/// Tree levels a text report shows when `--depth` is not given.
pub const DEFAULT_DEPTH: usize = 16;
/// Smallest share of the total a text report shows when `--min-percent` is not given.
pub const DEFAULT_MIN_PERCENT: f64 = 1.0;

/// `--percent-of`'s values, as the command line spells them.
const PERCENT_OF: &[(&str, &str, PercentOf)] = &[
    (
        "total",
        "The total of the metric the value is in",
        PercentOf::Total,
    ),
    (
        "effort",
        "The effort, work + idleness (as HPCToolkit's blame-shifting analysis shows waiting \
         and blame)",
        PercentOf::Effort,
    ),
];

/// Output formats of `report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// The chosen view as text
    Text,
    /// The chosen view as JSON (docs/report-json.md)
    Json,
    /// One self-contained, interactive page: trees, flame graphs, locks, threads
    Html,
    /// gzipped pprof profile.proto, one sample type per metric (go tool pprof, pprof.me)
    Pprof,
    /// Folded stacks of --metric, one line per stack (flamegraph.pl, inferno, speedscope)
    Folded,
    /// The Firefox Profiler's processed format, a track per thread (profiler.firefox.com)
    Firefox,
}

impl OutputFormat {
    /// The file a format is written to when no `-o` is given and standard output is a
    /// terminal (`None`: standard output).
    pub fn default_file(self) -> Option<&'static str> {
        match self {
            OutputFormat::Text | OutputFormat::Json | OutputFormat::Folded => None,
            OutputFormat::Html => Some("blameprof-report.html"),
            OutputFormat::Pprof => Some("blameprof.pb.gz"),
            OutputFormat::Firefox => Some("blameprof-firefox.json"),
        }
    }

    /// Whether the format is the chosen view of the analysis (text, JSON) rather than the
    /// whole profile exported.
    fn is_view(self) -> bool {
        matches!(self, OutputFormat::Text | OutputFormat::Json)
    }
}

/// A view `report --view` can show: a view of the analysis ([`View`]), the lock table
/// ([`lock_view`]) or the timeline ([`viewer::timeline`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ViewChoice {
    /// The calling-context tree, from the outermost frames down.
    TopDown,
    /// Every function with its callers below it, costs apportioned along each path.
    BottomUp,
    /// Every function once, by exclusive cost.
    Flat,
    /// Threads with their totals.
    Threads,
    /// Locks: counts, waiting, blame, pressure, and who waited behind whom.
    Locks,
    /// The top locks' pressure, blame and acquisitions per interval, with their phases.
    Timeline,
}

impl ViewChoice {
    /// The view of the analysis, or `None` for the lock table and the timeline.
    pub fn analysis_view(self) -> Option<View> {
        match self {
            ViewChoice::TopDown => Some(View::TopDown),
            ViewChoice::BottomUp => Some(View::BottomUp),
            ViewChoice::Flat => Some(View::Flat),
            ViewChoice::Threads => Some(View::Threads),
            ViewChoice::Locks | ViewChoice::Timeline => None,
        }
    }
}

/// Options of `blameprof report`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// Which view to show
    #[arg(long, value_enum, default_value_t = ViewChoice::TopDown)]
    pub view: ViewChoice,
    /// Locks view: show this lock or group in full (its name as the table shows it)
    #[arg(long, value_name = "NAME")]
    pub lock: Option<String>,
    /// Show the source of FUNCTION (a name or a unique part of one), each line annotated
    /// with its costs in --metrics (default: work, idleness, blame)
    #[arg(long, value_name = "FUNCTION")]
    pub source: Option<String>,
    /// Metric to sort and prune by: work, idleness (lock waiting, at the waiter), blame
    /// (lock waiting, at the holder) or held.contended (the holders' computing while others
    /// waited), or one of them by primitive, e.g. idleness.condvar; the locks view sorts by
    /// blame, idleness, contended, acquisitions or held.contended
    /// [default: the first of --metrics, else work; locks view: blame]
    #[arg(long)]
    pub metric: Option<String>,
    /// Metrics shown side by side in text views, e.g. work,idleness,blame [default: --metric;
    /// threads view: all]. JSON always carries every metric
    #[arg(long, value_name = "M1,M2,...", value_delimiter = ',')]
    pub metrics: Vec<String>,
    /// What percentages (and --min-percent) are of: each metric's own total, or the effort
    /// (work + idleness)
    #[arg(long, default_value = "total", value_parser = super::one_of(PERCENT_OF))]
    pub percent_of: PercentOf,
    /// Output format
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
    /// Write to this file [default: standard output; html, pprof and firefox on a terminal:
    /// blameprof-report.html, blameprof.pb.gz, blameprof-firefox.json]
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Tree levels to show; the hot path is always shown in full [text default: 16; JSON: all]
    #[arg(long, value_parser = parse_depth)]
    pub depth: Option<usize>,
    /// Hide rows under this percentage (see --percent-of) of the --metric [text default: 1.0;
    /// JSON: none]
    #[arg(long, value_name = "PERCENT", value_parser = parse_percent)]
    pub min_percent: Option<f64>,
    /// Only samples of this thread
    #[arg(long, value_name = "TID")]
    pub thread: Option<u32>,
    #[command(flatten)]
    pub profile: ProfileArgs,
    /// Locks view findings: the contention rate (contended acquisitions, percent of all) at
    /// and above which a lock counts as highly contended (docs/findings.md)
    #[arg(long, value_name = "PERCENT", value_parser = parse_percent,
          default_value_t = 100.0 * Thresholds::default().contention)]
    pub contention_threshold: f64,
    /// Locks view findings: acquisitions a second (of the process's wall time) at and above
    /// which a lock counts as taken often, and failed trylocks a second as many
    #[arg(long, value_name = "PER_SECOND", value_parser = parse_rate,
          default_value_t = Thresholds::default().rate)]
    pub rate_threshold: f64,
    #[command(flatten)]
    pub timeline: TimelineFlags,
}

impl ReportArgs {
    /// The metric to sort by: `--metric`, else the first of `--metrics`, else `default`.
    fn sort_metric<'a>(&'a self, default: &'a str) -> &'a str {
        self.metric
            .as_deref()
            .or(self.metrics.first().map(String::as_str))
            .unwrap_or(default)
    }
}

/// `blameprof report`: writes the chosen view, or the export, to `-o`'s file or to
/// `stdout`. A closed pipe ends it quietly. Returns the file written, if any.
pub fn report(args: &ReportArgs, stdout: &mut dyn Write) -> anyhow::Result<Option<PathBuf>> {
    let file = args.output.clone().or_else(|| {
        use std::io::IsTerminal;
        args.format
            .default_file()
            .filter(|_| io::stdout().is_terminal())
            .map(PathBuf::from)
    });
    let Some(file) = file else {
        report_to(args, stdout, true)?;
        return Ok(None);
    };
    // Written beside it and renamed once whole: a report that fails (a missing profile, a
    // bad option) leaves no empty or half-written file, and an older one in its place.
    let partial = partial_path(&file);
    let mut f = std::fs::File::create(&partial).map_err(|e| {
        anyhow!(
            "cannot create '{}': {e}; pass a writable path with -o",
            file.display()
        )
    })?;
    let written = report_to(args, &mut f, false)
        .and_then(|()| f.flush().map_err(anyhow::Error::from))
        .and_then(|()| {
            std::fs::rename(&partial, &file).map_err(|e| {
                anyhow!(
                    "cannot write '{}': {e}; pass a writable path with -o",
                    file.display()
                )
            })
        });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&partial);
        return Err(e);
    }
    Ok(Some(file))
}

/// Where the report to `file` is written until it is whole: a hidden file beside it (so
/// the rename stays on one file system), named for this process.
fn partial_path(file: &std::path::Path) -> PathBuf {
    let name = file
        .file_name()
        .map_or_else(|| "report".into(), |n| n.to_string_lossy().into_owned());
    file.with_file_name(format!(".{name}.{}.partial", std::process::id()))
}

/// Writes the report to `out`, which is standard output when `to_stdout` (text on a
/// terminal is then styled and cut to its width).
fn report_to(args: &ReportArgs, out: &mut dyn Write, to_stdout: bool) -> anyhow::Result<()> {
    if let Some(function) = &args.source {
        check_source_options(args)?;
        let source = SourceArgs {
            profile: &args.profile,
            thread: args.thread,
            metric: args.metric.as_deref(),
            metrics: &args.metrics,
            json: args.format == OutputFormat::Json,
        };
        return super::source::report(&source, function, out);
    }
    if !args.format.is_view() {
        return export(args, out);
    }
    let Some(view) = args.view.analysis_view() else {
        return match args.view {
            ViewChoice::Timeline => report_timeline(args, out),
            _ => report_locks(args, out),
        };
    };
    if args.lock.is_some() {
        bail!("--lock shows one lock of the locks view: add --view locks");
    }
    let sort = args.sort_metric(WORK);
    let mut columns: Vec<&str> = Vec::new();
    for name in &args.metrics {
        if !columns.contains(&name.as_str()) {
            columns.push(name);
        }
    }
    if !columns.is_empty() && !columns.contains(&sort) {
        bail!(
            "--metric {sort} is not among --metrics {}: add it there, or sort by one of them",
            columns.join(",")
        );
    }
    let names: Vec<&str> = std::iter::once(sort).chain(columns).collect();
    let (mut loaded, progress) = args.profile.load_showing(args.thread)?;
    let ids = loaded.metric_ids(&names, args.percent_of == PercentOf::Effort)?;
    let analysis = loaded.analysis()?;
    drop(progress);
    let metric = ids[0];
    let prune = if args.format == OutputFormat::Text {
        Prune {
            depth: Some(args.depth.unwrap_or(DEFAULT_DEPTH)),
            min_percent: Some(args.min_percent.unwrap_or(DEFAULT_MIN_PERCENT)),
        }
    } else {
        Prune {
            depth: args.depth,
            min_percent: args.min_percent,
        }
    };
    let mut report =
        Report::new(&analysis, view, metric, prune).with_percent_of(args.percent_of)?;
    if ids.len() > 1 {
        report = report.with_columns(ids[1..].to_vec());
    }
    if to_stdout && args.format == OutputFormat::Text {
        report = report.for_terminal(Paint::for_stdout(), terminal_width());
    }
    let renderer: &dyn Renderer = if args.format == OutputFormat::Text {
        &Text
    } else {
        &Json
    };
    let mut out = io::BufWriter::new(out);
    finish_output(
        renderer
            .render(&report, &mut out)
            .and_then(|()| out.flush()),
    )
}

/// `report --format html|pprof|folded|firefox`: the whole profile, every metric, with its
/// lock table, under `--pid`/`--thread`.
fn export(args: &ReportArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let (mut loaded, progress) = args.profile.load_showing(args.thread)?;
    let metric = loaded.metric_ids(&[args.sort_metric(WORK)], false)?[0];
    let analysis = loaded.analysis()?;
    progress.step("the lock table", None);
    let locks = loaded.lock_table()?;
    progress.step("writing", None);
    let mut export = Export {
        profile: loaded.profile,
        analysis,
        locks,
        symbolizer: loaded.symbolizer,
        shifts: loaded.shifts,
        metric,
    };
    let mut out = io::BufWriter::new(out);
    let written = match args.format {
        OutputFormat::Folded => write_folded(&export, &mut out),
        OutputFormat::Html => viewer::html::write(&export, &mut out),
        OutputFormat::Pprof => viewer::pprof::write(&mut export, &mut out),
        OutputFormat::Firefox => viewer::firefox::write(&mut export, &mut out),
        OutputFormat::Text | OutputFormat::Json => bail!("not an export format"),
    };
    finish_output(written.and_then(|()| out.flush()))
}

/// `blameprof report --view timeline`.
fn report_timeline(args: &ReportArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let t = super::timeline::load(&args.profile, args.thread, &args.timeline)?;
    let mut out = io::BufWriter::new(out);
    let written = match args.format {
        OutputFormat::Json => viewer::timeline::write_json(&t, &mut out),
        _ => viewer::timeline::write_text(&t, &mut out),
    };
    finish_output(written.and_then(|()| out.flush()))
}

/// Rejects, with `--source`, the options of the other outputs, which it would otherwise
/// ignore.
fn check_source_options(args: &ReportArgs) -> anyhow::Result<()> {
    if !matches!(args.format, OutputFormat::Text | OutputFormat::Json) {
        let format = clap::ValueEnum::to_possible_value(&args.format)
            .map_or_else(String::new, |v| v.get_name().to_owned());
        bail!("--source writes text or JSON, not {format}: pass --format text or --format json");
    }
    let other = [
        (args.view != ViewChoice::TopDown, "--view"),
        (args.lock.is_some(), "--lock"),
        (args.depth.is_some(), "--depth"),
        (args.min_percent.is_some(), "--min-percent"),
        (args.percent_of != PercentOf::Total, "--percent-of"),
    ];
    if let Some((_, flag)) = other.iter().find(|(given, _)| *given) {
        bail!("{flag} belongs to the other views, not to --source (one function's lines): drop it");
    }
    Ok(())
}

/// `blameprof report --view locks`.
fn report_locks(args: &ReportArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let metric = args.sort_metric("blame");
    let Some(sort) = SortBy::parse(metric) else {
        bail!(
            "the locks view sorts by blame, idleness (wait), contended, acquisitions or \
             held.contended, not '{metric}': pass one of them to --metric"
        );
    };
    let thresholds = Thresholds {
        contention: args.contention_threshold / 100.0,
        rate: args.rate_threshold,
    };
    let mut loaded = args.profile.load(args.thread)?;
    let Diagnosis { locks, findings } = diagnose(&mut loaded, args.timeline.options(), thresholds)?;
    if let Some(name) = args.lock.as_ref().filter(|_| locks.available) {
        check_lock_name(&locks, name)?;
    }
    let text = args.format == OutputFormat::Text;
    let opts = LockOptions {
        sort,
        min_percent: args
            .min_percent
            .unwrap_or(if text { DEFAULT_MIN_PERCENT } else { 0.0 }),
        lock: args.lock.clone(),
        pairs_per_lock: 3,
    };
    let found = Findings {
        list: &findings,
        thresholds,
    };
    let mut out = io::BufWriter::new(out);
    let written = if text {
        lock_view::write_text(&locks, &opts, &mut out)
            .and_then(|()| lock_view::write_findings_text(&locks, found, &opts, &mut out))
    } else {
        lock_view::write_json_with(&locks, &opts, Some(found), &mut out)
    };
    finish_output(written.and_then(|()| out.flush()))
}

/// Fails unless a lock or group of `locks` is called `name`, naming some that are.
fn check_lock_name(locks: &LockTable, name: &str) -> anyhow::Result<()> {
    let mut names = locks
        .locks
        .iter()
        .map(|l| l.name.as_str())
        .chain(locks.groups.iter().map(|g| g.name.as_str()));
    if names.any(|n| n == name) {
        return Ok(());
    }
    let names: Vec<&str> = locks
        .locks
        .iter()
        .map(|l| l.name.as_str())
        .take(10)
        .collect();
    bail!(
        "no lock or group named '{name}' in this profile: pass one of the names the locks \
         view shows ({})",
        if names.is_empty() {
            "it has none".to_owned()
        } else {
            names.join(", ")
        }
    );
}

fn parse_depth(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(d) if d >= 1 => Ok(d),
        _ => Err(format!(
            "'{s}' is not a depth: pass a whole number of levels, 1 or more"
        )),
    }
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!(
            "'{s}' is not a rate: pass a number of acquisitions a second, more than 0"
        )),
    }
}

/// `--min-percent`, `--contention-threshold`: a number from 0 to 100.
fn parse_percent(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(p),
        _ => Err(format!(
            "'{s}' is not a percentage: pass a number from 0 to 100"
        )),
    }
}
