//! The comparison of two runs: costs per function and per lock, matched between the runs
//! by name, made comparable (normalised) run by run, and ranked by their change.
//!
//! Job: [`function_costs`] adds up a run's exclusive and inclusive cost in one metric per
//! function name; [`lock_costs`] adds up a run's lock table (blame, waiting, acquisitions)
//! per lock name and kind; [`compare`] matches the two runs' keys, scales every value by its
//! run's [`scales`] for its column and ranks the rows by the absolute change of one column.
//!
//! Invariants: a key is one row (a function's inclusive cost counts a sample once, however
//! often the name is on its path); a row is [`Status::New`] exactly when its key is absent
//! from the before run and [`Status::Gone`] when absent from the after run; a normalised
//! value is the raw value times its run's scale for the column; the order is total (ties:
//! the other columns' changes, then the key). Not async-signal-safe (allocates).

use crate::attribution::locks::{LockTable, Naming};
use crate::attribution::symbolize::module_name;
use crate::attribution::Analysis;
use crate::format::WaitKind;
use std::collections::{BTreeMap, HashMap, HashSet};

/// How the values of the two runs are made comparable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Normalize {
    /// Each value as a share (%) of its own run's total
    Total,
    /// Each value per second of its own run's duration
    Time,
    /// Raw values
    None,
}

impl Normalize {
    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Normalize::Total => "total",
            Normalize::Time => "time",
            Normalize::None => "none",
        }
    }
}

/// Whether a row's key was seen in both runs, only after, or only before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Both,
    New,
    Gone,
}

/// One measure of a row in both runs, raw and normalised, and its share (%) of its run's
/// total, whatever the normalisation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    pub raw_before: u64,
    pub raw_after: u64,
    pub before: f64,
    pub after: f64,
    pub share_before: f64,
    pub share_after: f64,
}

impl Change {
    /// After minus before, normalised.
    pub fn delta(&self) -> f64 {
        self.after - self.before
    }

    /// The change in percent of the before value; `None` when that is 0.
    pub fn relative(&self) -> Option<f64> {
        (self.before != 0.0).then(|| self.delta() * 100.0 / self.before)
    }
}

/// A key's measures in both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Row<K, const N: usize> {
    pub key: K,
    pub status: Status,
    pub changes: [Change; N],
}

/// Per column, the factor a run's raw values are multiplied by: 100 / the column's total
/// (0 when the total is 0), 10⁹ / the run's duration in ns (`run_ns`, which the caller has
/// checked is known and not 0 for [`Normalize::Time`]), or 1.
pub fn scales<const N: usize>(normalize: Normalize, totals: [u64; N], run_ns: u64) -> [f64; N] {
    totals.map(|total| match normalize {
        Normalize::Total if total == 0 => 0.0,
        Normalize::Total => 100.0 / total as f64,
        Normalize::Time => 1e9 / run_ns.max(1) as f64,
        Normalize::None => 1.0,
    })
}

/// The sum of each column over the rows of `costs`.
pub fn column_totals<K, const N: usize>(costs: &BTreeMap<K, [u64; N]>) -> [u64; N] {
    let mut totals = [0u64; N];
    for values in costs.values() {
        for (total, v) in totals.iter_mut().zip(values) {
            *total = total.saturating_add(*v);
        }
    }
    totals
}

/// A run's values per key, the scales that normalise them and the scales that make them
/// shares (`scales` of [`Normalize::Total`]).
pub type Side<'a, K, const N: usize> = (&'a BTreeMap<K, [u64; N]>, [f64; N], [f64; N]);

/// Matches the keys of `before` and `after`, normalises each run's values by its scales
/// (and makes them shares by its share scales) and ranks the rows by the absolute change
/// of column `sort` (largest first).
pub fn compare<K: Ord + Clone, const N: usize>(
    (before, scale_before, share_before): Side<'_, K, N>,
    (after, scale_after, share_after): Side<'_, K, N>,
    sort: usize,
) -> Vec<Row<K, N>> {
    let keys: std::collections::BTreeSet<&K> = before.keys().chain(after.keys()).collect();
    let mut rows: Vec<Row<K, N>> = keys
        .into_iter()
        .map(|key| {
            let (b, a) = (before.get(key), after.get(key));
            let status = match (b, a) {
                (None, _) => Status::New,
                (_, None) => Status::Gone,
                _ => Status::Both,
            };
            let (b, a) = (b.copied().unwrap_or([0; N]), a.copied().unwrap_or([0; N]));
            let changes = std::array::from_fn(|i| Change {
                raw_before: b[i],
                raw_after: a[i],
                before: b[i] as f64 * scale_before[i],
                after: a[i] as f64 * scale_after[i],
                share_before: b[i] as f64 * share_before[i],
                share_after: a[i] as f64 * share_after[i],
            });
            Row {
                key: key.clone(),
                status,
                changes,
            }
        })
        .collect();
    let order: Vec<usize> = std::iter::once(sort)
        .chain((0..N).filter(|&i| i != sort))
        .collect();
    rows.sort_by(|x, y| {
        order
            .iter()
            .map(|&i| {
                y.changes[i]
                    .delta()
                    .abs()
                    .total_cmp(&x.changes[i].delta().abs())
            })
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| x.key.cmp(&y.key))
    });
    rows
}

/// Column of a function row: its exclusive cost.
pub const EXCLUSIVE: usize = 0;
/// Column of a function row: its inclusive cost.
pub const INCLUSIVE: usize = 1;

/// A run's cost per function name in one metric, and the module each name was first seen
/// in (its file name), for display.
#[derive(Debug, Default)]
pub struct FunctionCosts {
    /// [exclusive, inclusive] per name; only names with some inclusive cost.
    pub costs: BTreeMap<String, [u64; 2]>,
    pub modules: HashMap<String, String>,
}

/// The cost of every function of `analysis` in merged metric `metric` (`None`: a metric the
/// run did not record, so no cost): exclusive at the innermost frame of each path, and
/// inclusive once per path for every distinct name on it. Functions are matched by name
/// alone, so that two builds of a program at different paths still match.
pub fn function_costs(analysis: &Analysis, metric: Option<usize>) -> FunctionCosts {
    let mut out = FunctionCosts::default();
    let Some(metric) = metric else {
        return out;
    };
    let mut seen: HashSet<&str> = HashSet::new();
    for path in &analysis.paths {
        let value = path.values[metric];
        if value == 0 {
            continue;
        }
        seen.clear();
        let leaf = path.locs.len() - 1;
        for (i, loc) in path.locs.iter().enumerate().rev() {
            let function = analysis.names.function(loc.function);
            let name = function.name.as_str();
            let first = seen.insert(name);
            let costs = out.costs.entry(name.to_owned()).or_insert([0, 0]);
            if i == leaf {
                costs[EXCLUSIVE] = costs[EXCLUSIVE].saturating_add(value);
            }
            if first {
                costs[INCLUSIVE] = costs[INCLUSIVE].saturating_add(value);
                if !out.modules.contains_key(name) {
                    let module = module_name(&function.module).to_owned();
                    out.modules.insert(name.to_owned(), module);
                }
            }
        }
    }
    out
}

/// Column of a lock row: the blame its holders took.
pub const BLAME: usize = 0;
/// Column of a lock row: its waiting.
pub const WAITING: usize = 1;
/// Column of a lock row: its acquisitions (sampled and scaled).
pub const ACQUISITIONS: usize = 2;

/// A lock as the runs are matched by: its name and kind.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LockKey {
    pub name: String,
    pub kind: Option<&'static str>,
}

/// A run's lock table as [blame, waiting, acquisitions] per lock name and kind: locks of one
/// name (made at one init site, in several processes) are added up. A lock known only by
/// its address, which changes from run to run, is added to its kind's `<kind>@*`.
pub fn lock_costs(table: &LockTable) -> BTreeMap<LockKey, [u64; 3]> {
    let mut out: BTreeMap<LockKey, [u64; 3]> = BTreeMap::new();
    for row in &table.locks {
        let kind = row.kind.map(WaitKind::name);
        let name = match row.naming {
            Naming::Address => format!("{}@*", kind.unwrap_or("object")),
            Naming::Symbol | Naming::InitSite | Naming::FirstWait => row.name.clone(),
        };
        let c = &row.counts;
        let sums = out.entry(LockKey { name, kind }).or_insert([0; 3]);
        for (sum, v) in sums
            .iter_mut()
            .zip([c.blame_ns, c.runtime.wait_ns, c.runtime.acquisitions])
        {
            *sum = sum.saturating_add(v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::locks::{Counts, LockRow};
    use crate::attribution::testutil::analysis_of;
    use crate::format::LockStats;

    fn map<const N: usize>(entries: &[(&str, [u64; N])]) -> BTreeMap<String, [u64; N]> {
        entries.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    fn keys<const N: usize>(rows: &[Row<String, N>]) -> Vec<(&str, Status)> {
        rows.iter().map(|r| (r.key.as_str(), r.status)).collect()
    }

    #[test]
    fn matches_keys_and_marks_new_and_gone() {
        let before = map(&[("kept", [5]), ("gone", [3])]);
        let after = map(&[("kept", [6]), ("new", [4])]);
        let rows = compare((&before, [1.0], [1.0]), (&after, [1.0], [1.0]), 0);
        assert_eq!(
            keys(&rows),
            [
                ("new", Status::New),
                ("gone", Status::Gone),
                ("kept", Status::Both)
            ]
        );
        let new = &rows[0].changes[0];
        assert_eq!(
            (new.raw_before, new.raw_after, new.relative()),
            (0, 4, None)
        );
        let gone = &rows[1].changes[0];
        assert_eq!((gone.delta(), gone.relative()), (-3.0, Some(-100.0)));
        let kept = &rows[2].changes[0];
        assert_eq!((kept.delta(), kept.relative()), (1.0, Some(20.0)));
    }

    #[test]
    fn ranks_by_the_absolute_change_of_the_sort_column_then_the_others() {
        let before = map(&[
            ("a", [10, 0]),
            ("b", [10, 0]),
            ("c", [10, 9]),
            ("d", [1, 1]),
        ]);
        let after = map(&[("a", [12, 0]), ("b", [3, 0]), ("c", [12, 0]), ("d", [1, 1])]);
        let rows = compare(
            (&before, [1.0; 2], [1.0; 2]),
            (&after, [1.0; 2], [1.0; 2]),
            0,
        );
        // b fell by 7; a and c rose by 2, c's other column changed more; d did not change.
        let order: Vec<&str> = rows.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(order, ["b", "c", "a", "d"]);
        let by_second = compare(
            (&before, [1.0; 2], [1.0; 2]),
            (&after, [1.0; 2], [1.0; 2]),
            1,
        );
        assert_eq!(by_second[0].key, "c");
    }

    #[test]
    fn shares_of_the_total_make_a_run_twice_as_long_the_same() {
        let before = map(&[("f", [30, 60]), ("g", [70, 100])]);
        let after = map(&[("f", [60, 120]), ("g", [140, 200])]);
        let (tb, ta) = ([100, 100], [200, 200]);
        let share = |t| scales(Normalize::Total, t, 1);
        let rows = compare(
            (&before, share(tb), share(tb)),
            (&after, share(ta), share(ta)),
            EXCLUSIVE,
        );
        for r in &rows {
            for c in &r.changes {
                assert_eq!(c.delta(), 0.0, "{r:?}");
            }
        }
        let f = rows.iter().find(|r| r.key == "f").unwrap();
        assert_eq!((f.changes[0].after, f.changes[1].after), (30.0, 60.0));
        // Raw values see the doubling.
        let raw = compare(
            (&before, scales(Normalize::None, tb, 1), share(tb)),
            (&after, scales(Normalize::None, ta, 1), share(ta)),
            EXCLUSIVE,
        );
        assert_eq!(raw[0].key, "g");
        assert_eq!(raw[0].changes[0].relative(), Some(100.0));
        // Beside the raw values, the shares, which did not move.
        let g = raw[0].changes[0];
        assert_eq!((g.share_before, g.share_after), (70.0, 70.0));
    }

    #[test]
    fn time_normalises_per_second_of_each_run() {
        let before = map(&[("f", [500_000_000])]);
        let after = map(&[("f", [1_500_000_000])]);
        let rows = compare(
            (&before, scales(Normalize::Time, [0], 1_000_000_000), [0.0]),
            (&after, scales(Normalize::Time, [0], 2_000_000_000), [0.0]),
            0,
        );
        let c = rows[0].changes[0];
        assert_eq!((c.before, c.after), (500_000_000.0, 750_000_000.0));
        assert_eq!(c.relative(), Some(50.0));
        assert_eq!(scales(Normalize::Total, [0, 4], 1), [0.0, 25.0]);
        assert_eq!(column_totals(&map(&[("a", [1, 2]), ("b", [3, 4])])), [4, 6]);
    }

    #[test]
    fn a_function_is_charged_once_per_path_by_name() {
        // main -> f -> f -> g 5; main -> f -> f 3; main -> g 2.
        let a = analysis_of(&[
            (&[0x30, 0x20, 0x20, 0x10], 5),
            (&[0x30, 0x20, 0x20], 3),
            (&[0x30, 0x10], 2),
        ]);
        let costs = function_costs(&a, Some(0)).costs;
        assert_eq!(costs["main"], [0, 10]);
        assert_eq!(costs["f"], [3, 8]);
        assert_eq!(costs["g"], [7, 7]);
        assert_eq!(costs.len(), 3);
        assert!(function_costs(&a, None).costs.is_empty());
    }

    fn row(name: &str, naming: Naming, kind: Option<WaitKind>, blame: u64) -> LockRow {
        LockRow {
            pid: 1,
            address: 0x1000,
            kind,
            name: name.to_owned(),
            naming,
            group: None,
            instances: 1,
            counts: Counts {
                blame_ns: blame,
                runtime: LockStats {
                    wait_ns: blame + 1,
                    acquisitions: 10,
                    ..LockStats::default()
                },
                ..Counts::default()
            },
            pressure: None,
            running_ns: 0,
            detail: None,
        }
    }

    #[test]
    fn locks_of_one_name_add_up_and_addresses_pool_by_kind() {
        let mutex = Some(WaitKind::Mutex);
        let table = LockTable {
            available: true,
            locks: vec![
                row("table_lock", Naming::Symbol, mutex, 100),
                row(
                    "new_cache -> pthread_mutex_init",
                    Naming::InitSite,
                    mutex,
                    5,
                ),
                row(
                    "new_cache -> pthread_mutex_init",
                    Naming::InitSite,
                    mutex,
                    7,
                ),
                row("mutex@0x7f00", Naming::Address, mutex, 0),
                row("mutex@0x7f80", Naming::Address, mutex, 0),
                row("table_lock", Naming::Symbol, Some(WaitKind::Spin), 1),
            ],
            ..LockTable::default()
        };
        let costs = lock_costs(&table);
        let key = |name: &str, kind| LockKey {
            name: name.to_owned(),
            kind: Some(kind),
        };
        assert_eq!(
            costs[&key("new_cache -> pthread_mutex_init", "mutex")],
            [12, 14, 20]
        );
        assert_eq!(costs[&key("mutex@*", "mutex")], [0, 2, 20]);
        assert_eq!(costs[&key("table_lock", "mutex")], [100, 101, 10]);
        assert_eq!(costs[&key("table_lock", "spin")], [1, 2, 10]);
        assert_eq!(costs.len(), 4);
    }
}
