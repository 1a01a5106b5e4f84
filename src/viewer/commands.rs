//! Command-line entry points of the analysis: `report`, `flamegraph`, and the summary
//! printed after `blameprof run`. The only place in the analysis that uses `anyhow`.
//!
//! Job: map options to library calls (read, analyse, view, render) and turn every failure
//! into one line naming the problem and the fix.
//!
//! Invariants: the profile path defaults to the newest `blameprof-*` directory in the
//! current directory; text reports prune by default, JSON only when asked. Not
//! async-signal-safe (allocates, does I/O).

use super::json::Json;
use super::locks::{self as lock_view, Findings, LockOptions, SortBy};
use super::progress::Progress;
use super::style::{terminal_width, Paint};
use super::text::Text;
use super::{PercentOf, Prune, Renderer, Report, ViewChoice};
use crate::attribution::findings::{findings, Thresholds};
use crate::attribution::locks::lock_table;
use crate::attribution::metrics::WORK;
use crate::attribution::symbolize::Symbolizer;
use crate::attribution::{analyze, cct, metric_table, Analysis, Filter};
use crate::format::read::{read_profile, Profile, ReadOptions};
use anyhow::{anyhow, bail};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Tree levels a text report shows when `--depth` is not given.
pub const DEFAULT_DEPTH: usize = 16;
/// Smallest share of the total a text report shows when `--min-percent` is not given.
pub const DEFAULT_MIN_PERCENT: f64 = 1.0;

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

/// Options of `blameprof report`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// Profile directory [default: the newest blameprof-* directory here]
    pub path: Option<PathBuf>,
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
    #[arg(long, value_enum, default_value_t = PercentOf::Total)]
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
    /// Only this process (all images it exec'd)
    #[arg(long)]
    pub pid: Option<u32>,
    /// Read the intact part of a damaged profile instead of failing
    #[arg(long)]
    pub salvage: bool,
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
    pub timeline: super::timeline::TimelineFlags,
}

/// Options of `blameprof flamegraph`.
#[derive(Debug, Clone, clap::Args)]
pub struct FlamegraphArgs {
    /// Profile directory [default: the newest blameprof-* directory here]
    pub path: Option<PathBuf>,
    /// Metric to draw: work, idleness (lock waiting, at the waiter), blame (lock waiting,
    /// at the holder) or held.contended (the holders' computing while others waited), or
    /// one of them by primitive, e.g. blame.mutex
    #[arg(long, default_value = "work")]
    pub metric: String,
    /// Where to write the SVG
    #[arg(short, long, default_value = "flamegraph.svg")]
    pub output: PathBuf,
    /// Only samples of this thread
    #[arg(long, value_name = "TID")]
    pub thread: Option<u32>,
    /// Only this process (all images it exec'd)
    #[arg(long)]
    pub pid: Option<u32>,
    /// Read the intact part of a damaged profile instead of failing
    #[arg(long)]
    pub salvage: bool,
}

impl ReportArgs {
    /// The samples `--pid` and `--thread` select.
    pub(super) fn filter(&self) -> Filter {
        Filter {
            pid: self.pid,
            tid: self.thread,
        }
    }

    /// The metric to sort by: `--metric`, else the first of `--metrics`, else `default`.
    pub(super) fn sort_metric<'a>(&'a self, default: &'a str) -> &'a str {
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
    let mut f = std::fs::File::create(&file).map_err(|e| {
        anyhow!(
            "cannot create '{}': {e}; pass a writable path with -o",
            file.display()
        )
    })?;
    report_to(args, &mut f, false)?;
    Ok(Some(file))
}

/// Writes the report to `out`, which is standard output when `to_stdout` (text on a
/// terminal is then styled and cut to its width).
fn report_to(args: &ReportArgs, out: &mut dyn Write, to_stdout: bool) -> anyhow::Result<()> {
    if let Some(function) = &args.source {
        return super::source::write(args, function, out);
    }
    if !args.format.is_view() {
        return super::export::write(args, out);
    }
    let Some(view) = args.view.analysis_view() else {
        return match args.view {
            ViewChoice::Timeline => super::timeline::report(args, out),
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
    let (analysis, ids) = load(
        args.path.as_deref(),
        args.salvage,
        args.filter(),
        &names,
        args.percent_of == PercentOf::Effort,
    )?;
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

/// The end of writing a report: a closed pipe ends it quietly.
pub(super) fn finish_output(result: io::Result<()>) -> anyhow::Result<()> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(anyhow!("cannot write the report: {e}")),
        Ok(()) => Ok(()),
    }
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
    let profile = read_named(args.path.as_deref(), args.salvage)?;
    let mut symbolizer = Symbolizer::new();
    let table = lock_table(&profile, args.filter(), &mut symbolizer)?;
    if let Some(name) = args.lock.as_ref().filter(|_| table.available) {
        let mut names = table
            .locks
            .iter()
            .map(|l| l.name.as_str())
            .chain(table.groups.iter().map(|g| g.name.as_str()));
        if !names.any(|n| n == name) {
            let names: Vec<&str> = table
                .locks
                .iter()
                .map(|l| l.name.as_str())
                .take(10)
                .collect();
            bail!(
                "no lock or group named '{name}' in this profile: pass one of the names the \
                 locks view shows ({})",
                if names.is_empty() {
                    "it has none".to_owned()
                } else {
                    names.join(", ")
                }
            );
        }
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
    let thresholds = Thresholds {
        contention: args.contention_threshold / 100.0,
        rate: args.rate_threshold,
    };
    let phases = super::timeline::lock_phases(&profile, args.filter(), &table, &args.timeline);
    let list = findings(
        &profile,
        args.filter(),
        &table,
        &phases,
        thresholds,
        &mut symbolizer,
    )?;
    let found = Findings {
        list: &list,
        thresholds,
    };
    let mut out = io::BufWriter::new(out);
    let written = if text {
        lock_view::write_text(&table, &opts, &mut out)
            .and_then(|()| lock_view::write_findings_text(&table, found, &opts, &mut out))
    } else {
        lock_view::write_json_with(&table, &opts, Some(found), &mut out)
    };
    finish_output(written.and_then(|()| out.flush()))
}

/// `blameprof flamegraph`: writes an SVG flamegraph of the chosen metric.
pub fn flamegraph(args: &FlamegraphArgs) -> anyhow::Result<()> {
    let (analysis, ids) = load(
        args.path.as_deref(),
        args.salvage,
        Filter {
            pid: args.pid,
            tid: args.thread,
        },
        &[&args.metric],
        false,
    )?;
    let metric = ids[0];
    if analysis.totals[metric] == 0 {
        anyhow::bail!(
            "metric '{}' has no cost in the selected samples, so there is nothing to draw: \
             choose another --metric, --thread or --pid",
            args.metric
        );
    }
    let tree = cct::top_down(&analysis);
    let mut svg = Vec::new();
    super::flamegraph::render_svg(&analysis, &tree, metric, &mut svg)
        .map_err(|e| anyhow!("cannot draw the flamegraph: {e}"))?;
    std::fs::write(&args.output, svg).map_err(|e| {
        anyhow!(
            "cannot write the flamegraph to '{}': {e}; pass a writable path with -o",
            args.output.display()
        )
    })
}

/// The summary `blameprof run` prints after the run (every line starts with `blameprof: `).
/// Reads damaged profiles in salvage mode and says so.
pub fn summary(profile_dir: &Path, top: usize, out: &mut dyn Write) -> anyhow::Result<()> {
    let opts = ReadOptions {
        salvage: true,
        ..Default::default()
    };
    let progress = Progress::start("reading the profile");
    let profile = read_profile(profile_dir, opts)?;
    let mut symbolizer = Symbolizer::new();
    progress.step("symbolizing", Some((symbolizer.resolved(), "addresses")));
    let analysis = analyze(&profile, Filter::default(), &mut symbolizer)?;
    let locks = lock_table(&profile, Filter::default(), &mut symbolizer)?;
    let phases = super::timeline::lock_phases(
        &profile,
        Filter::default(),
        &locks,
        &super::timeline::TimelineFlags::default(),
    );
    let found = findings(
        &profile,
        Filter::default(),
        &locks,
        &phases,
        Thresholds::default(),
        &mut symbolizer,
    )?;
    drop(progress);
    super::summary::write(
        &analysis,
        Some((&locks, &found)),
        top,
        Paint::for_stderr(),
        out,
    )
    .map_err(|e| anyhow!("cannot write the summary: {e}"))
}

/// What `blameprof run -q` still prints: warnings of damage and lost samples, from the
/// profile's counters alone (its samples are skipped, nothing is symbolized).
pub fn warn_losses(profile_dir: &Path, out: &mut dyn Write) -> anyhow::Result<()> {
    let opts = ReadOptions {
        salvage: true,
        skip_samples: true,
    };
    let profile = read_profile(profile_dir, opts)?;
    super::summary::write_losses(&profile, out)
        .map_err(|e| anyhow!("cannot write the warnings: {e}"))
}

/// Reads and analyses a profile; returns the merged ids of the metrics called `metrics`.
/// Checks the metric names (and, with `need_effort`, that the profile has the metrics of
/// effort) before the (slower) analysis.
pub(super) fn load(
    path: Option<&Path>,
    salvage: bool,
    filter: Filter,
    metrics: &[&str],
    need_effort: bool,
) -> anyhow::Result<(Analysis, Vec<usize>)> {
    let progress = Progress::start("reading the profile");
    let profile = read_named(path, salvage)?;
    // Merged and derived exactly as `analyze` does, so the ids agree.
    let table = metric_table(&profile, filter)?;
    let ids = metrics
        .iter()
        .map(|name| table.id(name))
        .collect::<Result<Vec<usize>, _>>()?;
    if need_effort {
        table.effort_ids()?;
    }
    let mut symbolizer = Symbolizer::new();
    progress.step("symbolizing", Some((symbolizer.resolved(), "addresses")));
    let analysis = analyze(&profile, filter, &mut symbolizer)?;
    Ok((analysis, ids))
}

/// The profile at `path` (default: the newest `blameprof-*` directory here), all of it
/// (`salvage`: its intact part).
pub(super) fn read_named(path: Option<&Path>, salvage: bool) -> anyhow::Result<Profile> {
    let path = match path {
        Some(p) => p.to_owned(),
        None => default_profile()?,
    };
    let opts = ReadOptions {
        salvage,
        ..Default::default()
    };
    Ok(read_profile(&path, opts)?)
}

/// The newest `blameprof-*` directory in the current directory.
fn default_profile() -> anyhow::Result<PathBuf> {
    let cwd = std::env::current_dir()
        .map_err(|e| anyhow!("cannot read the current directory ({e}): pass a profile path"))?;
    newest_profile(&cwd).ok_or_else(|| {
        anyhow!(
            "no profile given and no blameprof-* directory in {}: pass a profile path, or \
             record one with 'blameprof run'",
            cwd.display()
        )
    })
}

/// The most recently modified `blameprof-*` directory in `dir` (ties: the greatest name).
pub fn newest_profile(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("blameprof-"))
        .filter_map(|e| {
            let meta = e.metadata().ok().filter(|m| m.is_dir())?;
            Some((meta.modified().ok()?, e.file_name(), e.path()))
        })
        .max()
        .map(|(_, _, path)| path)
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

fn parse_percent(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(p),
        _ => Err(format!(
            "'{s}' is not a percentage: pass a number from 0 to 100"
        )),
    }
}
