//! The merged metric list of a profile, and the metrics derived from sample flags.
//!
//! Job: every process header declares its own metric list; samples refer to metrics by
//! index into it. The analysis merges the lists by metric name, in order of first
//! appearance, and maps each process's indices onto the merged ones.
//!
//! The runtime writes the metrics [`WORK`], [`IDLENESS`], [`BLAME`] and, from format
//! version 2, [`HELD_CONTENDED`] (docs/lock-blame-contract.md); *effort* is work +
//! idleness, the base HPCToolkit's blame-shifting analysis expresses waiting and blame
//! against; held.contended is a part of work.
//!
//! The analysis adds [`ROOT`], a base metric no sample declares: blame after the chains of
//! waits ([`super::chains`]), filled by `paths::weigh`.
//!
//! Idleness, blame and held.contended samples may carry a [`WaitKind`] and, for idleness,
//! the *unblamed* bit in their flags. [`merge`] derives one metric per (base metric, [`Part`]) that occurs
//! in the selected samples, named `<base>.<kind>` (`idleness.condvar`, `blame.futex`) or
//! `idleness.unblamed`, and a [`SampleMap`] per process sends each sample's value to its
//! base metric and to the derived metrics its flags select. Profiles without these bits get
//! no derived metrics and analyse exactly as before.
//!
//! Invariants: names are unique in the merged list; a merged id is an index into it and
//! into every per-metric `Vec<u64>` of the analysis; derived metrics come after every base
//! metric, ordered by base (merged order), then kind ([`WaitKind`] order), then unblamed.
//! Not async-signal-safe (allocates).

use super::AttributionError;
use crate::format::read::Profile;
use crate::format::{MetricDef, WaitKind, SAMPLE_KIND_MASK, SAMPLE_KIND_SHIFT, SAMPLE_UNBLAMED};
use std::collections::{BTreeSet, HashMap};

/// The names of the metrics the runtime writes.
pub const WORK: &str = crate::format::protocol::WORK.name;
pub const IDLENESS: &str = crate::format::protocol::IDLENESS.name;
pub const BLAME: &str = crate::format::protocol::BLAME.name;
pub const HELD_CONTENDED: &str = crate::format::protocol::HELD_CONTENDED.name;

/// The root-cause metric: blame followed along chains of waits ([`super::chains`]),
/// computed by the analysis wherever a profile has [`BLAME`].
pub const ROOT: &str = "root";

/// Suffix of the derived metric of unblamed idleness (`idleness.unblamed`).
pub const UNBLAMED: &str = "unblamed";

/// The share of a base metric's samples a derived metric counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    /// Samples of waits on this kind of primitive.
    Kind(WaitKind),
    /// Idleness samples of waits that ended without the event they waited for.
    Unblamed,
}

impl Part {
    /// The suffix of the derived metric's name.
    pub fn name(self) -> &'static str {
        match self {
            Part::Kind(kind) => kind.name(),
            Part::Unblamed => UNBLAMED,
        }
    }
}

/// The name of the metric derived from base metric `base` by `part`: `idleness.condvar`.
pub fn derived_name(base: &str, part: Part) -> String {
    format!("{base}.{}", part.name())
}

/// Metric definitions merged across processes, then the derived ones.
#[derive(Debug, Clone, Default)]
pub struct MetricTable {
    defs: Vec<MetricDef>,
    /// Per def: the merged id of its base metric and the part, for derived metrics.
    derived: Vec<Option<(usize, Part)>>,
}

impl MetricTable {
    /// Adds a process's metric list; returns, per local index, the merged id. Base metrics
    /// must all be added before any derived one.
    pub fn add_process(&mut self, defs: &[MetricDef]) -> Vec<usize> {
        debug_assert!(self.derived.iter().all(Option::is_none));
        defs.iter()
            .map(
                |def| match self.defs.iter().position(|d| d.name == def.name) {
                    Some(id) => id,
                    None => {
                        self.defs.push(def.clone());
                        self.derived.push(None);
                        self.defs.len() - 1
                    }
                },
            )
            .collect()
    }

    /// Appends the metric derived from merged base metric `base` by `part`; returns its id.
    fn add_derived(&mut self, base: usize, part: Part) -> usize {
        let base_def = &self.defs[base];
        let def = MetricDef {
            name: derived_name(&base_def.name, part),
            unit: base_def.unit.clone(),
            description: describe(&base_def.name, part),
        };
        self.defs.push(def);
        self.derived.push(Some((base, part)));
        self.defs.len() - 1
    }

    /// The merged id of the metric called `name`.
    pub fn id(&self, name: &str) -> Result<usize, AttributionError> {
        self.defs
            .iter()
            .position(|d| d.name == name)
            .ok_or_else(|| AttributionError::UnknownMetric {
                name: name.to_owned(),
                available: self.names(),
            })
    }

    /// The merged ids of [`WORK`] and [`IDLENESS`], whose sum is the effort.
    pub fn effort_ids(&self) -> Result<(usize, usize), AttributionError> {
        match (self.id(WORK), self.id(IDLENESS)) {
            (Ok(work), Ok(idleness)) => Ok((work, idleness)),
            _ => Err(AttributionError::NoEffort {
                available: self.names(),
            }),
        }
    }

    /// The base metric and part of merged metric `id`; `None` for a base metric.
    pub fn derived_from(&self, id: usize) -> Option<(usize, Part)> {
        self.derived[id]
    }

    /// The merged ids of the metrics declared by the processes (not derived), in order.
    pub fn base_ids(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.defs.len()).filter(|&id| self.derived[id].is_none())
    }

    /// All names, comma-separated (for messages).
    fn names(&self) -> String {
        if self.defs.is_empty() {
            return "none: the profile declares no metrics".to_owned();
        }
        self.defs
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn defs(&self) -> &[MetricDef] {
        &self.defs
    }

    pub fn len(&self) -> usize {
        self.defs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }
}

/// The description of the metric derived from `base` by `part`.
fn describe(base: &str, part: Part) -> String {
    let (primitive, culprit) = match part {
        Part::Unblamed => {
            return "idleness of waits that ended without the event they waited for (timed \
                    out, interrupted, spurious wake-up): nobody is blamed for it"
                .to_owned()
        }
        Part::Kind(kind) => match kind {
            WaitKind::Spin => ("spin locks", "the holder at its unlock"),
            WaitKind::Mutex => ("mutexes", "the holder at its unlock"),
            WaitKind::RwLock => ("reader-writer locks", "the holder at its unlock"),
            WaitKind::CondVar => ("condition variables", "the signalling context"),
            WaitKind::Semaphore => ("semaphores", "the posting context"),
            WaitKind::Barrier => ("barriers", "the threads that arrived last"),
            WaitKind::Join => ("thread joins", "the joined thread"),
            WaitKind::Futex => (
                "futexes (Rust std::sync, parking_lot, ...)",
                "the waking context",
            ),
        },
    };
    match base {
        IDLENESS => format!("time threads waited on {primitive}, at the waiter"),
        HELD_CONTENDED => {
            format!("CPU time inside critical sections of {primitive} others waited for")
        }
        _ => format!("waiting on {primitive} charged to {culprit}"),
    }
}

/// Sample flag bits that select derived metrics: the kind, then the unblamed bit.
const KIND_BITS: u8 = SAMPLE_KIND_MASK << SAMPLE_KIND_SHIFT;
const DERIVING_BITS: u8 = KIND_BITS | SAMPLE_UNBLAMED;
/// Distinct values of the deriving bits: every kind code, with and without unblamed.
const KEYS: usize = (SAMPLE_KIND_MASK as usize + 1) * 2;

/// Index of a sample's deriving bits among the [`KEYS`].
fn key(flags: u8) -> usize {
    let code = usize::from((flags & KIND_BITS) >> SAMPLE_KIND_SHIFT);
    code * 2 + usize::from(flags & SAMPLE_UNBLAMED != 0)
}

/// The parts of base metric `base` that a sample with deriving bits `key` counts in.
fn parts(base: &str, key: usize) -> impl Iterator<Item = Part> {
    let deriving = base == IDLENESS || base == BLAME || base == HELD_CONTENDED;
    let kind = WaitKind::from_flags(((key / 2) as u8) << SAMPLE_KIND_SHIFT)
        .filter(|_| deriving)
        .map(Part::Kind);
    let unblamed = (base == IDLENESS && key % 2 == 1).then_some(Part::Unblamed);
    [kind, unblamed].into_iter().flatten()
}

/// The merged metrics a sample's value goes to: its base metric, then derived ones.
#[derive(Debug, Clone, Copy)]
struct Targets {
    ids: [usize; 3],
    len: usize,
}

/// Where the samples of one process go, by local metric index and flags.
#[derive(Debug, Clone)]
pub(super) struct SampleMap {
    /// Indexed by local metric * [`KEYS`] + [`key`].
    targets: Vec<Targets>,
}

impl SampleMap {
    /// The merged ids a sample of local metric `metric` with `flags` adds its value to (the
    /// base metric first); `None` when the process declares no such metric.
    pub fn targets(&self, metric: u8, flags: u8) -> Option<&[usize]> {
        let t = self.targets.get(usize::from(metric) * KEYS + key(flags))?;
        Some(&t.ids[..t.len])
    }
}

/// Merges the metric lists of all processes of `profile`, then derives the metrics that
/// the samples of the `selected` processes (only thread `tid`, if given) call for. Returns
/// the table and one [`SampleMap`] per process of the profile.
pub(super) fn merge(
    profile: &Profile,
    selected: &[usize],
    tid: Option<u32>,
) -> (MetricTable, Vec<SampleMap>) {
    let mut table = MetricTable::default();
    let bases: Vec<Vec<usize>> = profile
        .processes
        .iter()
        .map(|p| table.add_process(&p.header.metrics))
        .collect();
    if let Ok(blame) = table.id(BLAME) {
        let unit = table.defs[blame].unit.clone();
        table.add_process(&[MetricDef {
            name: ROOT.to_owned(),
            unit,
            description: "blame followed along chains of waits to their end: a holder's \
                          blame for the time it was itself waiting inside its hold passes \
                          to what it waited for (the same total as blame)"
                .to_owned(),
        }]);
    }

    // Which (base, part) pairs occur; kind-less samples skip the bookkeeping.
    let mut wanted: BTreeSet<(usize, Part)> = BTreeSet::new();
    for &p in selected {
        let proc = &profile.processes[p];
        let mut seen = vec![false; bases[p].len() * KEYS];
        for s in &proc.samples {
            if s.flags & DERIVING_BITS == 0 || tid.is_some_and(|t| t != s.tid) {
                continue;
            }
            if let Some(slot) = seen.get_mut(usize::from(s.metric) * KEYS + key(s.flags)) {
                *slot = true;
            }
        }
        for (i, _) in seen.iter().enumerate().filter(|(_, &seen)| seen) {
            let base = bases[p][i / KEYS];
            let name = &table.defs[base].name;
            wanted.extend(parts(name, i % KEYS).map(|part| (base, part)));
        }
    }
    let derived: HashMap<(usize, Part), usize> = wanted
        .into_iter()
        .map(|(base, part)| ((base, part), table.add_derived(base, part)))
        .collect();

    let maps = bases
        .iter()
        .map(|bases| SampleMap {
            targets: bases
                .iter()
                .flat_map(|&base| (0..KEYS).map(move |key| (base, key)))
                .map(|(base, key)| {
                    let mut t = Targets {
                        ids: [base; 3],
                        len: 1,
                    };
                    let ids = parts(&table.defs[base].name, key)
                        .filter_map(|part| derived.get(&(base, part)));
                    for &id in ids {
                        t.ids[t.len] = id;
                        t.len += 1;
                    }
                    t
                })
                .collect(),
        })
        .collect();
    (table, maps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::testutil::{
        add_flagged, analyze_renamed, app, kinds_process, lock_profile, process,
    };
    use crate::attribution::{metric_table, Analysis, Filter};
    use crate::format::read::ProcessProfile;
    use crate::format::SAMPLE_FIRST_IS_RETURN;

    fn def(name: &str) -> MetricDef {
        MetricDef {
            name: name.into(),
            unit: "ns".into(),
            description: String::new(),
        }
    }

    #[test]
    fn merges_by_name_in_first_seen_order() {
        let mut t = MetricTable::default();
        assert_eq!(t.add_process(&[def("work"), def("idleness")]), vec![0, 1]);
        assert_eq!(t.add_process(&[def("blame"), def("work")]), vec![2, 0]);
        assert_eq!(t.id("blame").unwrap(), 2);
        let err = t.id("cycles").unwrap_err().to_string();
        assert!(err.contains("work, idleness, blame"), "{err}");
        assert_eq!(t.effort_ids().unwrap(), (0, 1));
    }

    #[test]
    fn effort_needs_work_and_idleness() {
        let mut t = MetricTable::default();
        t.add_process(&[def(WORK)]);
        let err = t.effort_ids().unwrap_err().to_string();
        assert!(
            err.contains("work and idleness") && err.contains("has work;"),
            "{err}"
        );
    }

    fn profile_of(processes: Vec<ProcessProfile>) -> Profile {
        Profile {
            path: "blameprof-kinds".into(),
            processes,
            skipped: Vec::new(),
        }
    }

    fn names(table: &MetricTable) -> Vec<&str> {
        table.defs().iter().map(|d| d.name.as_str()).collect()
    }

    /// Per metric name: total, and the sums over paths and over threads, which must agree.
    fn totals(a: &Analysis) -> Vec<(&str, u64)> {
        for (m, &total) in a.totals.iter().enumerate() {
            let paths: u64 = a.paths.iter().map(|p| p.values[m]).sum();
            let threads: u64 = a.threads.iter().map(|t| t.totals[m]).sum();
            assert_eq!((paths, threads), (total, total), "metric {m}");
        }
        names(&a.metrics)
            .into_iter()
            .zip(a.totals.clone())
            .collect()
    }

    #[test]
    fn values_count_in_the_base_and_the_derived_metrics() {
        let profile = profile_of(vec![kinds_process()]);
        let a = analyze_renamed(&profile);
        assert_eq!(
            totals(&a),
            [
                ("work", 10_000_000),
                ("idleness", 10_750_000),
                ("blame", 8_300_000),
                ("root", 8_300_000),
                ("idleness.mutex", 7_000_000),
                ("idleness.condvar", 3_500_000),
                ("idleness.unblamed", 750_000),
                ("blame.mutex", 6_300_000),
                ("blame.condvar", 2_000_000),
            ]
        );
        let condvar = a.metrics.id("idleness.condvar").unwrap();
        assert_eq!(
            a.metrics.derived_from(condvar),
            Some((1, Part::Kind(WaitKind::CondVar)))
        );
        assert_eq!(a.metrics.base_ids().collect::<Vec<_>>(), [0, 1, 2, 3]);
        let defs = a.metrics.defs();
        assert_eq!(defs[condvar].unit, "ns");
        assert_eq!(
            defs[condvar].description,
            "time threads waited on condition variables, at the waiter"
        );
        assert_eq!(
            defs[a.metrics.id("blame.condvar").unwrap()].description,
            "waiting on condition variables charged to the signalling context"
        );
        // Thread 102: idleness 1 (mutex) + 0.5 (condvar, unblamed); blame 4.8 + 2.
        let t102 = a.threads.iter().find(|t| t.tid == 102).unwrap();
        assert_eq!(
            t102.totals,
            [
                3_000_000, 1_500_000, 6_800_000, 6_800_000, 1_000_000, 500_000, 500_000, 4_800_000,
                2_000_000
            ]
        );
        // The metric table for checking names before the analysis agrees.
        let table = metric_table(&profile, Filter::default()).unwrap();
        assert_eq!(names(&table), names(&a.metrics));
    }

    #[test]
    fn unblamed_counts_in_idleness_and_idleness_unblamed_only() {
        let mut p = process(100, &[WORK, IDLENESS, BLAME]);
        add_flagged(&mut p, 100, 1, &[app(0x30)], 400, SAMPLE_UNBLAMED);
        // The bit means nothing on blame (or work) samples.
        add_flagged(&mut p, 100, 2, &[app(0x30)], 30, SAMPLE_UNBLAMED);
        add_flagged(&mut p, 100, 0, &[app(0x30)], 2, SAMPLE_UNBLAMED);
        let a = analyze_renamed(&profile_of(vec![p]));
        assert_eq!(
            totals(&a),
            [
                ("work", 2),
                ("idleness", 400),
                ("blame", 30),
                ("root", 30),
                ("idleness.unblamed", 400)
            ]
        );
    }

    #[test]
    fn kindless_profiles_have_no_derived_metrics() {
        let a = analyze_renamed(&lock_profile());
        assert_eq!(
            totals(&a),
            [
                ("work", 9_000_000),
                ("idleness", 7_000_000),
                ("blame", 6_300_000),
                ("root", 6_300_000)
            ]
        );
        assert!(a.paths.iter().all(|p| p.values.len() == 4));
        // Kind bits on metrics other than idleness and blame derive nothing.
        let mut p = process(100, &["cycles", WORK]);
        add_flagged(&mut p, 100, 0, &[app(0x30)], 7, WaitKind::Futex.flags());
        add_flagged(&mut p, 100, 1, &[app(0x30)], 5, WaitKind::Mutex.flags());
        let a = analyze_renamed(&profile_of(vec![p]));
        assert_eq!(totals(&a), [("cycles", 7), ("work", 5)]);
    }

    #[test]
    fn derived_metrics_follow_the_selection_and_every_base_metric() {
        // A second process declares another base metric: it still precedes the derived ones.
        let mut second = process(200, &[BLAME, "cycles"]);
        add_flagged(
            &mut second,
            200,
            0,
            &[app(0x30)],
            10,
            WaitKind::Join.flags(),
        );
        add_flagged(&mut second, 200, 1, &[app(0x30)], 3, 0);
        let profile = profile_of(vec![kinds_process(), second]);
        let a = analyze_renamed(&profile);
        assert_eq!(
            names(&a.metrics),
            [
                "work",
                "idleness",
                "blame",
                "cycles",
                "root",
                "idleness.mutex",
                "idleness.condvar",
                "idleness.unblamed",
                "blame.mutex",
                "blame.condvar",
                "blame.join",
            ]
        );
        assert_eq!(a.total_of("blame.join"), 10);
        assert_eq!(a.total_of(BLAME), 8_300_010);
        // Thread 101 waited on mutexes and condition variables, never unblamed, no blame
        // on condition variables; process 200 is not selected.
        let filter = Filter {
            pid: Some(100),
            tid: Some(101),
        };
        let table = metric_table(&profile, filter).unwrap();
        assert_eq!(
            names(&table),
            [
                "work",
                "idleness",
                "blame",
                "cycles",
                "root",
                "idleness.mutex",
                "idleness.condvar",
                "blame.mutex"
            ]
        );
        let err = table.id("blame.condvar").unwrap_err().to_string();
        assert!(
            err.contains(
                "has work, idleness, blame, cycles, root, idleness.mutex, idleness.condvar, \
                 blame.mutex;"
            ),
            "{err}"
        );
    }

    #[test]
    fn sample_maps_send_values_to_base_then_derived() {
        let profile = profile_of(vec![kinds_process()]);
        let (table, maps) = merge(&profile, &[0], None);
        let id = |name| table.id(name).unwrap();
        let condvar = WaitKind::CondVar.flags();
        let map = &maps[0];
        assert_eq!(map.targets(0, condvar), Some(&[id(WORK)][..]));
        assert_eq!(map.targets(1, 0), Some(&[id(IDLENESS)][..]));
        assert_eq!(
            map.targets(1, condvar | SAMPLE_UNBLAMED | SAMPLE_FIRST_IS_RETURN),
            Some(
                &[
                    id(IDLENESS),
                    id("idleness.condvar"),
                    id("idleness.unblamed")
                ][..]
            )
        );
        assert_eq!(
            map.targets(2, condvar | SAMPLE_UNBLAMED),
            Some(&[id(BLAME), id("blame.condvar")][..])
        );
        // Kinds that never occurred (or unknown codes) count in the base metric only.
        assert_eq!(
            map.targets(2, WaitKind::Barrier.flags()),
            Some(&[id(BLAME)][..])
        );
        assert_eq!(
            map.targets(2, 0xF << SAMPLE_KIND_SHIFT),
            Some(&[id(BLAME)][..])
        );
        assert_eq!(map.targets(3, 0), None);
    }
}
