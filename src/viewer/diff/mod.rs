//! `blameprof diff BEFORE AFTER`: what changed between two runs (docs/diff.md).
//!
//! Job: read and analyse both profiles, check the metric, build the comparison per function
//! (exclusive and inclusive cost in the metric) and per lock (blame, waiting, acquisitions)
//! with [`compare`] ([`build`], from the plain [`DiffOptions`] the command gives), and show
//! it as text or JSON ([`write_text`], [`write_json`]) or as a differential flame graph
//! ([`write_flamegraph`]). Every failure is one line naming the profile it is
//! about (BEFORE or AFTER) and the fix.
//!
//! Invariants: both runs are normalised the same way ([`Normalize`], shares of each run's
//! own total by default) and the output says which; a metric one run did not record is an
//! error, except a derived per-kind metric (`idleness.mutex`) of a base metric the run has,
//! which that run simply had no samples of: it counts as 0 there, with a note. Not
//! async-signal-safe (allocates, does I/O).

mod compare;
mod render;
mod svg;

pub use compare::Normalize;
pub use render::{write_json, write_text};
pub use svg::Widths;

use crate::attribution::loaded::Loaded;
use crate::attribution::locks::LockTable;
use crate::attribution::metrics::MetricTable;
use crate::attribution::{metric_table, Analysis, Filter};
use crate::format::read::{read_profile, Profile, ReadError, ReadOptions};
use crate::format::MetricDef;
use anyhow::{anyhow, bail};
use compare::{LockKey, Row};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What to compare, and how.
#[derive(Debug, Clone)]
pub struct DiffOptions {
    /// The profile before the change, and after.
    pub before: PathBuf,
    pub after: PathBuf,
    /// The metric functions are compared by.
    pub metric: String,
    pub normalize: Normalize,
    pub sort: Rank,
    /// Rows shown per table (`None`: all).
    pub top: Option<usize>,
    /// Where the differential flame graph is to be written, if anywhere.
    pub flamegraph: Option<PathBuf>,
    /// Whose values its frames' widths are.
    pub widths: Widths,
    /// Read the intact part of damaged profiles.
    pub salvage: bool,
}

/// Which cost ranks the functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rank {
    /// The cost in the function itself.
    Exclusive,
    /// The cost in the function and its callees.
    Inclusive,
}

/// One of the two profiles, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Before,
    After,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Before => "BEFORE",
            Side::After => "AFTER",
        }
    }
}

/// One analysed run.
pub struct Run {
    pub side: Side,
    pub path: PathBuf,
    pub analysis: Analysis,
    pub locks: LockTable,
    /// From its first thread's start to its last thread's (or process's) end, in ns, when
    /// the profile says.
    pub run_ns: Option<u64>,
    /// Merged id of the metric compared; `None` when the run has no samples of it.
    pub metric: Option<usize>,
}

impl Run {
    /// The run's total of the compared metric.
    pub fn total(&self) -> u64 {
        self.metric.map_or(0, |m| self.analysis.totals[m])
    }

    /// What this run's values of columns with `totals` are multiplied by (see
    /// [`compare::scales`]).
    fn scales<const N: usize>(&self, normalize: Normalize, totals: [u64; N]) -> [f64; N] {
        compare::scales(normalize, totals, self.run_ns.unwrap_or(0))
    }

    /// This run's side of a comparison: its `costs`, with the scales that normalise them
    /// and those that make them shares of the columns' `totals`.
    fn side<'a, K, const N: usize>(
        &self,
        costs: &'a BTreeMap<K, [u64; N]>,
        normalize: Normalize,
        totals: [u64; N],
    ) -> compare::Side<'a, K, N> {
        (
            costs,
            self.scales(normalize, totals),
            self.scales(Normalize::Total, totals),
        )
    }
}

/// The comparison, ready to render.
pub struct Diff {
    pub metric: String,
    pub unit: String,
    pub description: String,
    pub normalize: Normalize,
    pub sort: Rank,
    pub before: Run,
    pub after: Run,
    /// Every function row, ranked.
    pub functions: Vec<Row<String, 2>>,
    /// The module (file name) of each function, from AFTER, else BEFORE.
    pub modules: HashMap<String, String>,
    /// Every lock row, ranked by blame; empty when either run predates lock tables.
    pub locks: Vec<Row<LockKey, 3>>,
    /// Whether both runs could hold lock tables.
    pub locks_available: bool,
    /// Rows shown per table (`None`: all).
    pub top: Option<usize>,
    /// The differential flame graph written, if any.
    pub flamegraph: Option<PathBuf>,
    /// Whose values its frames' widths are.
    pub widths: Widths,
    /// Things the reader must know (a metric one run lacks, damage, missing lock tables).
    pub notes: Vec<String>,
}

/// Writes the differential flame graph of `diff` (an SVG) to `out`; returns BEFORE's cost
/// in call paths AFTER does not have that it could not draw (its widths AFTER's).
pub fn write_flamegraph(diff: &Diff, out: &mut dyn Write) -> anyhow::Result<u64> {
    svg::write(diff, out)
}

/// Reads, analyses and compares the two profiles `args` names.
pub fn build(args: &DiffOptions) -> anyhow::Result<Diff> {
    let opts = ReadOptions {
        salvage: args.salvage,
        ..Default::default()
    };
    let before = read(Side::Before, &args.before, opts)?;
    let after = read(Side::After, &args.after, opts)?;
    let tables = (
        metric_table(&before, Filter::default())?,
        metric_table(&after, Filter::default())?,
    );
    let Resolved { ids, def, notes } = resolve_metric(&args.metric, (&tables.0, &tables.1))?;
    let before_ns = duration(Side::Before, &args.before, &before, args.normalize)?;
    let after_ns = duration(Side::After, &args.after, &after, args.normalize)?;
    let before = analysed(Side::Before, &args.before, before, ids.0, before_ns)?;
    let after = analysed(Side::After, &args.after, after, ids.1, after_ns)?;
    let mut notes = notes;
    notes.extend(run_notes(&before).chain(run_notes(&after)));
    let (functions, modules) = compare_functions(&before, &after, args);
    let locks_available = before.locks.available && after.locks.available;
    let locks = match locks_available {
        true => compare_locks(&before, &after, args.normalize),
        false => Vec::new(),
    };
    Ok(Diff {
        metric: def.name,
        unit: def.unit,
        description: def.description,
        normalize: args.normalize,
        sort: args.sort,
        before,
        after,
        functions,
        modules,
        locks,
        locks_available,
        top: args.top,
        flamegraph: args.flamegraph.clone(),
        widths: args.widths,
        notes,
    })
}

/// The function rows of the two runs, ranked by `args.sort`, and each function's module.
fn compare_functions(
    before: &Run,
    after: &Run,
    args: &DiffOptions,
) -> (Vec<Row<String, 2>>, HashMap<String, String>) {
    let (fb, fa) = (
        compare::function_costs(&before.analysis, before.metric),
        compare::function_costs(&after.analysis, after.metric),
    );
    let sort = match args.sort {
        Rank::Exclusive => compare::EXCLUSIVE,
        Rank::Inclusive => compare::INCLUSIVE,
    };
    let rows = compare::compare(
        before.side(&fb.costs, args.normalize, [before.total(); 2]),
        after.side(&fa.costs, args.normalize, [after.total(); 2]),
        sort,
    );
    let mut modules = fb.modules;
    modules.extend(fa.modules);
    (rows, modules)
}

/// The lock rows of the two runs, ranked by blame.
fn compare_locks(before: &Run, after: &Run, normalize: Normalize) -> Vec<Row<LockKey, 3>> {
    let (lb, la) = (
        compare::lock_costs(&before.locks),
        compare::lock_costs(&after.locks),
    );
    compare::compare(
        before.side(&lb, normalize, lock_totals(before, &lb)),
        after.side(&la, normalize, lock_totals(after, &la)),
        compare::BLAME,
    )
}

/// Reads the profile of `side`; its errors name the side (and the fix, where the reader's
/// message has none).
fn read(side: Side, path: &Path, opts: ReadOptions) -> anyhow::Result<Profile> {
    read_profile(path, opts).map_err(|e| {
        let fix = match e {
            ReadError::NotAProfile(_) => format!(
                ": pass a profile directory written by 'blameprof run' as {}",
                side.name()
            ),
            _ => String::new(),
        };
        anyhow!("{} profile: {e}{fix}", side.name())
    })
}

/// What a run's lock columns are shares of: blame and waiting of the run's threads' running
/// time (the base of the lock view's pressure, which grows with the run but not with the
/// other locks' waiting), acquisitions of its acquisitions of all locks.
fn lock_totals(run: &Run, costs: &BTreeMap<LockKey, [u64; 3]>) -> [u64; 3] {
    let running = run.locks.running_ns;
    let mut totals = [running; 3];
    totals[compare::ACQUISITIONS] = compare::column_totals(costs)[compare::ACQUISITIONS];
    totals
}

/// The duration of a run (see [`run_ns`]); an error when `normalize` needs it and the
/// profile does not say.
fn duration(
    side: Side,
    path: &Path,
    profile: &Profile,
    normalize: Normalize,
) -> anyhow::Result<Option<u64>> {
    let ns = run_ns(profile);
    if normalize == Normalize::Time && ns.is_none() {
        bail!(
            "the {} profile '{}' does not say how long the run took (no thread start and end \
             times: it predates format version 2, or was cut short): pass --normalize total \
             or --normalize none",
            side.name(),
            path.display()
        );
    }
    Ok(ns)
}

/// Analyses the profile of `side`, with `metric` (merged id) compared, and its lock table.
fn analysed(
    side: Side,
    path: &Path,
    profile: Profile,
    metric: Option<usize>,
    run_ns: Option<u64>,
) -> anyhow::Result<Run> {
    let mut loaded = Loaded::new(profile, Filter::default());
    let analysis = loaded.analysis()?;
    let locks = loaded.lock_table()?;
    Ok(Run {
        side,
        path: path.to_owned(),
        analysis,
        locks,
        run_ns,
        metric,
    })
}

/// The metric compared, as both runs have it.
#[derive(Debug)]
struct Resolved {
    /// Its merged ids in BEFORE and AFTER (`None`: the run has no samples of it).
    ids: (Option<usize>, Option<usize>),
    def: MetricDef,
    notes: Vec<String>,
}

/// Metric `name` in the BEFORE and AFTER tables. A run that lacks the metric but has its
/// base metric (`idleness` for `idleness.mutex`) had no samples of it: `None`, with a
/// note. Errors when neither run has it, or one lacks the metric and its base (a profile
/// recorded without it).
fn resolve_metric(
    name: &str,
    (before, after): (&MetricTable, &MetricTable),
) -> anyhow::Result<Resolved> {
    let ids = (before.id(name).ok(), after.id(name).ok());
    let def = match ids {
        (Some(id), _) => before.defs()[id].clone(),
        (None, Some(id)) => after.defs()[id].clone(),
        (None, None) => bail!(
            "unknown metric '{name}': neither profile has it (BEFORE has {}; AFTER has {}); \
             pass one of them to --metric",
            names(before),
            names(after)
        ),
    };
    let mut notes = Vec::new();
    for (side, table, id) in [(Side::Before, before, ids.0), (Side::After, after, ids.1)] {
        if id.is_some() {
            continue;
        }
        let derived = table
            .base_ids()
            .any(|b| name.starts_with(&format!("{}.", table.defs()[b].name)));
        if !derived {
            bail!(
                "the {} profile has no metric '{name}' (it has {}): it was recorded without \
                 it; pass a metric both profiles have to --metric, or record {} again",
                side.name(),
                names(table),
                side.name()
            );
        }
        notes.push(format!(
            "{} recorded no {name} (no such samples): counted as 0 there",
            side.name()
        ));
    }
    Ok(Resolved { ids, def, notes })
}

/// The metric names of `table`, comma-separated.
fn names(table: &MetricTable) -> String {
    match table.defs() {
        [] => "none".to_owned(),
        defs => defs
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// From the first thread's start to the last end of a thread or process (monotonic ns);
/// `None` when the profile has no such times (format version 1) or they span nothing.
fn run_ns(profile: &Profile) -> Option<u64> {
    let threads = || profile.processes.iter().flat_map(|p| &p.threads);
    let start = threads().filter_map(|t| t.start_ns).min()?;
    let end = threads()
        .filter_map(|t| t.end_ns)
        .chain(profile.processes.iter().filter_map(|p| p.end_ns))
        .max()?;
    end.checked_sub(start).filter(|&ns| ns > 0)
}

/// Notes about one run: damage read around, and a lock table it cannot have.
fn run_notes(run: &Run) -> impl Iterator<Item = String> + '_ {
    let damage = run.analysis.damage.iter().map(move |d| {
        format!(
            "{} is damaged: {d} (comparing its intact part)",
            run.side.name()
        )
    });
    let locks = (!run.locks.available).then(|| {
        format!(
            "{} was recorded by a blameprof older than lock tables (format version 1): no \
             lock comparison; record it again to compare locks",
            run.side.name()
        )
    });
    damage.chain(locks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::testutil::{metric, process};
    use crate::format::read::ThreadInfo;

    fn table(names: &[&str]) -> MetricTable {
        let mut t = MetricTable::default();
        t.add_process(&names.iter().map(|n| metric(n)).collect::<Vec<_>>());
        t
    }

    #[test]
    fn a_metric_both_runs_have_is_compared() {
        let (b, a) = (table(&["work", "idleness"]), table(&["idleness", "work"]));
        let r = resolve_metric("work", (&b, &a)).unwrap();
        assert_eq!(r.ids, (Some(0), Some(1)));
        assert_eq!(r.def.name, "work");
        assert!(r.notes.is_empty());
    }

    #[test]
    fn a_per_kind_metric_one_run_never_sampled_counts_as_zero_with_a_note() {
        let (b, a) = (
            table(&["work", "idleness"]),
            table(&["work", "idleness", "idleness.mutex"]),
        );
        let r = resolve_metric("idleness.mutex", (&b, &a)).unwrap();
        assert_eq!(r.ids, (None, Some(2)));
        assert_eq!(r.def.name, "idleness.mutex");
        assert_eq!(
            r.notes,
            ["BEFORE recorded no idleness.mutex (no such samples): counted as 0 there"]
        );
    }

    #[test]
    fn a_metric_one_run_was_recorded_without_is_an_error_naming_it() {
        let (b, a) = (
            table(&["work", "idleness", "held.contended"]),
            table(&["work", "idleness"]),
        );
        let e = resolve_metric("held.contended", (&b, &a)).unwrap_err();
        let e = e.to_string();
        assert!(
            e.starts_with(
                "the AFTER profile has no metric 'held.contended' (it has work, idleness)"
            ),
            "{e}"
        );
        let e = resolve_metric("nonsense", (&b, &a))
            .unwrap_err()
            .to_string();
        assert!(e.contains("neither profile has it"), "{e}");
        assert!(e.contains("pass one of them to --metric"), "{e}");
    }

    #[test]
    fn the_run_lasts_from_the_first_thread_start_to_the_last_end() {
        let mut p = process(1, &["work"]);
        p.threads[0].start_ns = Some(1_000);
        p.threads[0].end_ns = Some(5_000);
        p.threads.push(ThreadInfo {
            tid: 2,
            start_ns: Some(2_000),
            end_ns: None,
            ..Default::default()
        });
        p.end_ns = Some(7_000);
        let mut profile = Profile {
            processes: vec![p],
            ..Default::default()
        };
        assert_eq!(run_ns(&profile), Some(6_000));
        profile.processes[0].end_ns = None;
        assert_eq!(run_ns(&profile), Some(4_000));
        profile.processes[0]
            .threads
            .iter_mut()
            .for_each(|t| t.start_ns = None);
        assert_eq!(run_ns(&profile), None);
    }
}
