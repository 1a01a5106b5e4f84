//! Presentation of an [`Analysis`]: text views, JSON, flamegraphs and the post-run summary.
//!
//! Job: a [`Report`] is one view (top-down, bottom-up, flat, threads) of an analysis, sorted
//! by one metric, with the pruning and hot-path marking every output shares. Outputs are
//! sinks behind the small [`Renderer`] trait ([`text::Text`], [`json::Json`]);
//! [`flamegraph`] draws SVGs; the other views and exports have a module each. Every one
//! takes data already loaded and analysed, and plain options: the commands that parse
//! arguments and load profiles are `crate::cli`'s.
//!
//! A report shows one or more metric *columns* and gives percentages either of each
//! metric's own total or of the effort (work + idleness, see [`PercentOf`]).
//!
//! Invariants: tree views sort by inclusive cost and the flat view by exclusive cost of the
//! chosen metric; a shown node's parent is shown; hot-path nodes are shown at any depth;
//! pruning by percentage uses the same base as the percentages shown.
//!
//! Not async-signal-safe (allocates, does I/O); single-threaded.

pub mod diff;
pub mod export;
pub mod firefox;
pub mod flamegraph;
pub mod html;
pub mod json;
pub mod locks;
pub mod pprof;
pub mod progress;
pub mod source;
pub mod style;
pub mod summary;
pub mod text;
pub mod timeline;
pub mod timeline_svg;
pub mod units;

use crate::attribution::cct::{self, NodeId, SortBy, Tree};
use crate::attribution::{callers, Analysis, AttributionError};
use std::io;

/// Which view of the analysis to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// The calling-context tree, from the outermost frames down.
    TopDown,
    /// Every function with its callers below it, costs apportioned along each path.
    BottomUp,
    /// Every function once, by exclusive cost.
    Flat,
    /// Threads with their totals.
    Threads,
}

impl View {
    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            View::TopDown => "top-down",
            View::BottomUp => "bottom-up",
            View::Flat => "flat",
            View::Threads => "threads",
        }
    }
}

/// What percentages are of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PercentOf {
    /// The total of the metric the value is in.
    #[default]
    Total,
    /// The effort, work + idleness (as HPCToolkit's blame-shifting analysis shows waiting
    /// and blame).
    Effort,
}

/// Limits on what a view shows; `None` shows everything.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Prune {
    /// Tree levels to show (roots are level 1); the hot path is exempt.
    pub depth: Option<usize>,
    /// Hide nodes below this percentage (of the report's percentage base).
    pub min_percent: Option<f64>,
}

/// One view of an analysis, ready to render.
pub struct Report<'a> {
    pub analysis: &'a Analysis,
    pub view: View,
    /// Merged id of the metric the view is sorted and pruned by.
    pub metric: usize,
    pub prune: Prune,
    /// The view's sorted tree; empty for the threads view.
    pub tree: Tree,
    /// Merged ids of the metrics shown, in order: by default the sort metric (threads
    /// view: every metric the profile declares; derived ones only when asked for).
    pub columns: Vec<usize>,
    /// The effort, when percentages are of effort; `None`: of each metric's total.
    effort: Option<u64>,
    hot: Vec<bool>,
    /// Styling, and the width rows are cut to (text on a terminal).
    pub paint: style::Paint,
    pub width: Option<usize>,
}

impl<'a> Report<'a> {
    /// Builds and sorts the view. `metric` must be a merged metric id of `analysis` (see
    /// [`crate::attribution::metrics::MetricTable::id`]); it panics otherwise.
    pub fn new(analysis: &'a Analysis, view: View, metric: usize, prune: Prune) -> Report<'a> {
        let mut tree = match view {
            View::TopDown => cct::top_down(analysis),
            View::BottomUp => callers::bottom_up(analysis),
            View::Flat => callers::flat(analysis),
            View::Threads => Tree::empty(analysis.metrics.len()),
        };
        let sort_by = sort_order(view);
        tree.sort(&analysis.names, metric, sort_by);
        let hot = match view {
            View::TopDown | View::BottomUp => tree.hot_path(metric, analysis.totals[metric]),
            View::Flat | View::Threads => vec![false; tree.len()],
        };
        let columns = match view {
            View::Threads => analysis.metrics.base_ids().collect(),
            View::TopDown | View::BottomUp | View::Flat => vec![metric],
        };
        Report {
            analysis,
            view,
            metric,
            prune,
            tree,
            columns,
            effort: None,
            hot,
            paint: style::Paint::none(),
            width: None,
        }
    }

    /// Styles the text view with `paint` and cuts its rows to `width` characters.
    pub fn for_terminal(mut self, paint: style::Paint, width: Option<usize>) -> Report<'a> {
        self.paint = paint;
        self.width = width;
        self
    }

    /// Shows the metrics `columns` (merged ids) instead of the default.
    pub fn with_columns(mut self, columns: Vec<usize>) -> Report<'a> {
        self.columns = columns;
        self
    }

    /// Gives percentages (and prunes by percentage) of `base`. Errors when percentages of
    /// effort are asked for and the profile lacks the work or idleness metric.
    pub fn with_percent_of(mut self, base: PercentOf) -> Result<Report<'a>, AttributionError> {
        self.effort = match base {
            PercentOf::Total => None,
            PercentOf::Effort => Some(self.analysis.effort()?),
        };
        Ok(self)
    }

    /// What percentages are of.
    pub fn percent_of(&self) -> PercentOf {
        match self.effort {
            Some(_) => PercentOf::Effort,
            None => PercentOf::Total,
        }
    }

    /// The total of the chosen metric.
    pub fn total(&self) -> u64 {
        self.analysis.totals[self.metric]
    }

    /// What a value of merged metric `metric` is a percentage of.
    pub fn percent_base(&self, metric: usize) -> u64 {
        self.effort.unwrap_or(self.analysis.totals[metric])
    }

    /// `value` of merged metric `metric` as a percentage of the report's base.
    pub fn percent(&self, value: u64, metric: usize) -> f64 {
        units::percent(value, self.percent_base(metric))
    }

    /// Whether `id` is on the hot path.
    pub fn is_hot(&self, id: NodeId) -> bool {
        self.hot[id as usize]
    }

    /// Whether `id`, at `level` (roots: 1), passes the pruning limits: within the depth
    /// (or on the hot path), and with an inclusive cost in the chosen metric of at least
    /// `min_percent` of the percentage base (in the flat view, too: a function is kept when
    /// either of its costs is).
    pub fn shown(&self, id: NodeId, level: usize) -> bool {
        if self.prune.depth.is_some_and(|d| level > d) && !self.is_hot(id) {
            return false;
        }
        self.prune.min_percent.map_or(true, |min| {
            self.percent(self.tree.inclusive(id)[self.metric], self.metric) >= min
        })
    }
}

/// Top-down by inclusive cost; bottom-up and flat by exclusive, as `perf report` and pprof
/// do: the functions that carry the cost themselves first (a bottom-up view by inclusive
/// cost would open with `main` and `_start`), callers beneath by the part of it they passed.
fn sort_order(view: View) -> SortBy {
    match view {
        View::Flat | View::BottomUp => SortBy::Exclusive,
        View::TopDown | View::Threads => SortBy::Inclusive,
    }
}

/// An output format for reports.
pub trait Renderer {
    fn render(&self, report: &Report, out: &mut dyn io::Write) -> io::Result<()>;
}

/// "perf-task-clock, requested 200 Hz, effective 199.8 Hz", one entry per distinct setting.
/// The effective rate is measured: timer samples per second of sampled CPU time.
pub fn describe_sources(analysis: &Analysis) -> String {
    let mut seen: Vec<(&str, u64, u64, u64)> = Vec::new();
    for p in &analysis.processes {
        match seen
            .iter_mut()
            .find(|(s, hz, _, _)| *s == p.sample_source && *hz == p.requested_hz)
        {
            Some(entry) => {
                entry.2 += p.timer_samples;
                entry.3 += p.timer_ns;
            }
            None => seen.push((
                &p.sample_source,
                p.requested_hz,
                p.timer_samples,
                p.timer_ns,
            )),
        }
    }
    if seen.is_empty() {
        return "none (no process selected)".to_owned();
    }
    let describe = |&(source, hz, samples, ns): &(&str, u64, u64, u64)| {
        let source = if source.is_empty() { "unknown" } else { source };
        match ns {
            0 => format!("{source}, requested {hz} Hz, effective rate unknown"),
            ns => format!(
                "{source}, requested {hz} Hz, effective {:.1} Hz",
                samples as f64 * 1e9 / ns as f64
            ),
        }
    };
    seen.iter().map(describe).collect::<Vec<_>>().join("; ")
}

/// How the contended lock acquisitions were measured, when there were any: "1200, all
/// measured", or how many were and the sampling that picked them.
pub fn describe_contention(analysis: &Analysis) -> Option<String> {
    use crate::format::counters::{
        CONTENDED_ACQUISITIONS, CONTENDED_MEASURED, CONTENDED_PERIOD_PEAK,
    };
    let (seen, measured) = (
        analysis.counter(CONTENDED_ACQUISITIONS),
        analysis.counter(CONTENDED_MEASURED),
    );
    if seen == 0 {
        return None;
    }
    if measured >= seen {
        return Some(format!("{seen}, all measured"));
    }
    Some(format!(
        "{seen}, {measured} measured (sampled: past its budget a thread measures 1 in up to \
         {} of them at random and scales each by its period, so lock idleness and blame \
         are unbiased estimates; `blameprof run --contended-per-ms 0` measures all)",
        analysis.counter(CONTENDED_PERIOD_PEAK).max(2)
    ))
}

/// How the blame of mutex holds that began without waiting while others waited was
/// measured, when some were sampled (`None` when every one was noted, or there were none):
/// how many there were and were noted, and the sampling.
pub fn describe_held(analysis: &Analysis) -> Option<String> {
    use crate::format::counters::{
        CONTENDED_HOLDS, CONTENDED_HOLDS_NOTED, CONTENDED_HOLD_PERIOD_PEAK,
    };
    let (seen, noted) = (
        analysis.counter(CONTENDED_HOLDS),
        analysis.counter(CONTENDED_HOLDS_NOTED),
    );
    (noted < seen).then(|| {
        format!(
            "{seen} began without waiting while others waited, {noted} noted (sampled: past \
             its budget a thread notes 1 in up to {} at random, and scales the blame of each \
             noted one by its period; the others take none)",
            analysis.counter(CONTENDED_HOLD_PERIOD_PEAK).max(2)
        )
    })
}

/// "12 (samples_dropped_busy 10, samples_dropped_no_thread_state 2)" or "0".
pub fn describe_lost(analysis: &Analysis) -> String {
    let reasons = lost_reasons(analysis.counters.iter().map(|(n, v)| (n.as_str(), *v)));
    if reasons.is_empty() {
        analysis.lost_samples.to_string()
    } else {
        format!("{} ({reasons})", analysis.lost_samples)
    }
}

/// The lost-sample counters among `counters` that are not zero, as
/// "samples_dropped_busy 10, samples_dropped_no_thread_state 2" ("" when none is).
fn lost_reasons<'a>(counters: impl IntoIterator<Item = (&'a str, u64)>) -> String {
    counters
        .into_iter()
        .filter(|&(name, v)| v > 0 && crate::format::counters::LOST_SAMPLE_COUNTERS.contains(&name))
        .map(|(name, v)| format!("{name} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The command line of the first selected process, for titles.
pub fn command_line(analysis: &Analysis) -> String {
    analysis
        .processes
        .first()
        .map(|p| match p.argv.is_empty() {
            true => p.exe.clone(),
            false => p.argv.join(" "),
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod golden_tests;
#[cfg(test)]
mod kind_tests;
#[cfg(test)]
mod lock_tests;
#[cfg(test)]
mod tests;
