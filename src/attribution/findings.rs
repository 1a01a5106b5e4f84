//! Findings: the diagnosis at the end of the lock view, each naming a lock, a group of
//! locks or a set of threads, the evidence (numbers of the report) and the usual fixes.
//!
//! Job: apply SyncPerf's rules (Alam et al., "SyncPerf: categorizing, detecting, and
//! diagnosing synchronization performance bugs") to the lock table, to the per-lock phases of
//! the timeline, and to each thread's work and waiting:
//! - a lock (or group: locks of one array symbol or init site) whose contention rate is at
//!   least the contention threshold is a contention problem, told apart by its acquisition
//!   rate: few acquisitions make *long critical sections* (SyncPerf's quadrant 1: when the
//!   holds others waited for, where timed, are long enough for the waits), many a *coarse
//!   lock* (quadrant 2);
//! - one under the contention threshold but taken at least the rate threshold a second is
//!   *lock overhead* (quadrant 4), found through its group when no member is on its own;
//! - a group member contended [`ASYMMETRY`] times as often as the other members together is
//!   *asymmetric contention* (a hot hash bucket); the group and its members then get no
//!   other lock finding: the skew explains their contention;
//! - a lock whose trylocks fail many times a second, mostly, and repeatedly for each
//!   acquisition is a *trylock spin*;
//! - a lock over the timeline's pressure threshold in some phases and under it in others is
//!   *phased contention*;
//! - threads of one start routine whose work differs much, or stages (threads grouped by
//!   start routine) of which one waits while another computes, are *load imbalance*, with
//!   SyncPerf's thread split: threads per stage in proportion to its work.
//!
//! A finding must not fire on noise: acquisitions are sampled estimates (a relative error of
//! about `1/sqrt(acquisition_samples)`, the runtime's acquisition sampling; a lock taken a
//! few hundred times is estimated from a handful of samples, mostly too low, as each
//! thread's last period goes uncounted), so every lock finding needs evidence the exact
//! counts give: contention findings a lock whose waiting is at least [`MIN_PRESSURE`] of the
//! running time, at least [`MIN_CONTENDED`] contended acquisitions, and for long critical
//! sections holds long enough for the waits (a rate made too high by a low estimate cannot
//! then name a lock that costs nothing); rate findings at least
//! [`MIN_ACQUISITION_SAMPLES`] sampled acquisitions and the rate still over the threshold
//! two standard errors below the estimate; asymmetry the edges of both estimates apart. An
//! acquisition estimate is never taken below the contended acquisitions, which are exact and
//! acquisitions too. docs/findings.md tells each rule.
//!
//! Invariants: a lock table that is unavailable, a process whose acquisitions were not
//! counted, or a profile without thread times gives no lock finding that needs what is
//! missing (no trylock site: the finding names none); a group's finding stands for its
//! members' of the same kind (they get none); findings come ordered by [`Kind`], within a
//! kind groups before locks, each in the lock table's order (blame first). Every `{key}` of
//! a finding's words names an entry of its evidence. Not async-signal-safe (allocates);
//! single-threaded.

use super::calibration::Calibration;
use super::locks::{is_lock_kind, Counts, LockGroup, LockRow, LockTable, Naming, Site};
use super::symbolize::{CodeAddress, Symbolizer};
use super::{select_processes, AttributionError, Filter};
use crate::format::read::{ProcessProfile, Profile};
use crate::format::{protocol, WaitKind};
use std::collections::{BTreeMap, HashMap, HashSet};

/// The thresholds a user sets (`--contention-threshold`, `--rate-threshold`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// The contention rate (contended acquisitions over acquisitions, a fraction) at and
    /// above which a lock is highly contended.
    pub contention: f64,
    /// Acquisitions per second of the process's wall time at and above which a lock is taken
    /// often (and failed trylocks per second at which they are many).
    pub rate: f64,
}

impl Default for Thresholds {
    /// SyncPerf's: 10% contention, 1000 acquisitions a second.
    fn default() -> Thresholds {
        Thresholds {
            contention: 0.10,
            rate: 1000.0,
        }
    }
}

/// The least critical section pressure (waiting over running time) of a lock that a
/// contention finding names: less is no problem whatever the rate says.
pub const MIN_PRESSURE: f64 = 0.01;
/// The fewest contended acquisitions (exact) of a lock that a contention finding names.
pub const MIN_CONTENDED: u64 = 20;
/// How many times the holds of the waiters ahead of it (the average contended hold times the
/// most waiters at once) a wait may last for long critical sections to explain it.
pub const WAIT_PER_HOLDS: f64 = 2.0;
/// The fewest sampled acquisitions an acquisition rate is trusted from.
pub const MIN_ACQUISITION_SAMPLES: u64 = 10;
/// How many standard errors of an acquisition estimate a rate must clear its threshold by.
pub const STANDARD_ERRORS: f64 = 2.0;
/// How many times as often as the other members of its group a hot member is contended.
pub const ASYMMETRY: f64 = 2.0;
/// The least share of a lock's trylocks that fail for a trylock spin.
pub const TRY_FAILURE_RATIO: f64 = 0.5;
/// The least failed trylocks per acquisition for a trylock spin: a caller that tries once
/// and then blocks fails at most once per acquisition.
pub const TRY_FAILURES_PER_ACQUISITION: f64 = 2.0;
/// A stage waiting at least this share of its time (waiting over work and waiting)...
pub const STAGE_WAITING: f64 = 0.30;
/// ...while another waits at most this share is imbalanced.
pub const STAGE_COMPUTING: f64 = 0.10;
/// The least waiting of the waiting stage, and work of the computing one (ns).
pub const MIN_STAGE_NS: u64 = 100_000_000;
/// Threads of one start routine are imbalanced when the most loaded one's work exceeds the
/// least loaded one's by more than this share...
pub const THREAD_IMBALANCE: f64 = 0.20;
/// ...by at least this much (ns)...
pub const MIN_IMBALANCE_NS: u64 = 50_000_000;
/// ...and by at least this share of their mean work.
pub const MIN_IMBALANCE_OF_MEAN: f64 = 0.10;
/// What one uncontended lock and unlock costs, about (ns: glibc's mutex pair on current
/// x86-64, docs/benchmarks.md), to weigh a lock's acquisitions against running time.
pub const LOCK_PAIR_NS: f64 = 20.0;
/// The least share of the threads' running time that a lock's acquisitions, at
/// [`LOCK_PAIR_NS`] each, must cost for lock overhead.
pub const MIN_OVERHEAD_SHARE: f64 = 0.001;
/// A lock whose high phases cover less than this share of the run is phased...
pub const MAX_HIGH_COVERAGE: f64 = 0.80;
/// ...when they hold at least this share of its waiting (pressure times length): the
/// contention belongs to them. (A partial last interval of a few hundred microseconds in
/// which one wait ended read 15% pressure, and made a phase of 0.03% of the run.)
pub const MIN_HIGH_WAITING_SHARE: f64 = 0.5;

/// What a finding diagnoses. Ordered as findings are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    LongCriticalSections,
    CoarseLock,
    AsymmetricContention,
    TrylockSpin,
    LockOverhead,
    PhasedContention,
    LoadImbalance,
}

impl Kind {
    /// The stable, machine-readable name (JSON `kind`).
    pub fn id(self) -> &'static str {
        match self {
            Kind::LongCriticalSections => "long_critical_sections",
            Kind::CoarseLock => "coarse_lock",
            Kind::AsymmetricContention => "asymmetric_contention",
            Kind::TrylockSpin => "trylock_spin",
            Kind::LockOverhead => "lock_overhead",
            Kind::PhasedContention => "phased_contention",
            Kind::LoadImbalance => "load_imbalance",
        }
    }

    /// The name in words.
    pub fn title(self) -> &'static str {
        match self {
            Kind::LongCriticalSections => "long critical sections",
            Kind::CoarseLock => "coarse lock",
            Kind::AsymmetricContention => "asymmetric contention",
            Kind::TrylockSpin => "trylock spin",
            Kind::LockOverhead => "lock overhead",
            Kind::PhasedContention => "phased contention",
            Kind::LoadImbalance => "load imbalance",
        }
    }
}

/// One number (or name) of a finding's evidence; the view formats it by its type.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Count(u64),
    /// A duration, or a time from the run's start.
    Ns(u64),
    /// A fraction, shown as a percentage.
    Share(f64),
    PerSecond(f64),
    /// A ratio of two numbers, shown as `2.5x`.
    Factor(f64),
    Name(String),
    /// An identifier (a thread's), shown as it is.
    Id(u64),
    /// Threads per start routine.
    Threads(Vec<(String, u64)>),
}

/// One diagnosis.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub kind: Kind,
    /// The lock or group as the lock view names it, or the start routines.
    pub subject: String,
    pub pid: u32,
    /// The kind of the lock (none for load imbalance).
    pub lock_kind: Option<WaitKind>,
    /// The lock view's names (locks and groups) the finding is about: what `--lock` selects.
    pub locks: Vec<String>,
    /// The numbers, by key (the JSON keys; durations end in `_ns`).
    pub evidence: Vec<(&'static str, Value)>,
    /// The evidence and the fix in words: templates whose `{key}`s stand for the entries of
    /// `evidence` (the view fills them in).
    pub text: String,
    pub fix: String,
}

impl Finding {
    /// The evidence under `key`.
    pub fn value(&self, key: &str) -> Option<&Value> {
        self.evidence
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }
}

/// One lock's phases, from the timeline: what [`findings`] needs of it.
#[derive(Debug, Clone, PartialEq)]
pub struct LockPhases {
    pub pid: u32,
    pub address: u64,
    /// Its name in the lock view.
    pub name: String,
    /// Its waiting over the running time, over the whole run.
    pub overall_pressure: f64,
    /// Consecutive runs of intervals on one side of the timeline's pressure threshold.
    pub phases: Vec<PhaseSpan>,
}

/// A phase: its times (ns from the profile's start), the lock's pressure in it, and whether
/// that was at or over the threshold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhaseSpan {
    pub start_ns: u64,
    pub end_ns: u64,
    pub pressure: f64,
    pub high: bool,
}

/// One thread's work and waiting (calibrated ns; waiting without its joins), and its
/// lifetime (ns; none without thread times).
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadLoad {
    pub pid: u32,
    pub tid: u32,
    /// Its start routine's function.
    pub routine: String,
    pub work_ns: u64,
    pub wait_ns: u64,
    pub life_ns: Option<u64>,
}

/// The findings of the processes `filter` selects (a thread filter selects its process:
/// findings are about locks and stages, not one thread), with `table` their lock table and
/// `phases` the timeline's phases of their locks (empty when not laid out).
pub fn findings(
    profile: &Profile,
    filter: Filter,
    table: &LockTable,
    phases: &[LockPhases],
    thresholds: Thresholds,
    symbolizer: &mut Symbolizer,
) -> Result<Vec<Finding>, AttributionError> {
    let selected = select_processes(profile, filter)?;
    let procs: Vec<&ProcessProfile> = selected.iter().map(|&p| &profile.processes[p]).collect();
    let mut out = lock_findings(table, &wall_times(&procs), thresholds);
    out.extend(phase_findings(table, phases));
    out.extend(imbalance_findings(&thread_loads(&procs, symbolizer)));
    out.sort_by_key(|f| f.kind);
    Ok(out)
}

/// Each pid's wall time (ns): from its first thread's start to its end, summed over its
/// images; none without thread times.
fn wall_times(procs: &[&ProcessProfile]) -> HashMap<u32, u64> {
    let mut walls: HashMap<u32, u64> = HashMap::new();
    for p in procs {
        let Some(start) = p.threads.iter().filter_map(|t| t.start_ns).min() else {
            continue;
        };
        let last_thread = p.threads.iter().filter_map(|t| t.end_ns.or(t.start_ns));
        let end = last_thread.chain(p.end_ns).max().unwrap_or(start);
        let wall = walls.entry(p.header.pid).or_default();
        *wall = wall.saturating_add(end.saturating_sub(start));
    }
    walls
}

/// A lock or a group, as the lock rules read it.
struct Subject<'a> {
    name: &'a str,
    pid: u32,
    kind: Option<WaitKind>,
    counts: &'a Counts,
    pressure: Option<f64>,
    /// Itself, or the group's members.
    rows: Vec<&'a LockRow>,
    group: bool,
    /// Seconds of its process's wall time (none when unknown).
    seconds: Option<f64>,
}

impl Subject<'_> {
    fn per_second(&self, count: f64) -> Option<f64> {
        self.seconds.map(|s| count / s)
    }

    /// The lock view's names its findings are about (what `--lock` selects them by).
    fn names(&self) -> Vec<String> {
        vec![self.name.to_owned()]
    }
}

/// Acquisitions as the rules read them: the estimate, never below the contended ones (exact,
/// and acquisitions too); `None` when they were not counted.
fn acquisitions(c: &Counts, counted: bool) -> Option<u64> {
    counted.then(|| c.acquisitions.max(c.contended))
}

/// The estimate of acquisitions less [`STANDARD_ERRORS`] standard errors, never below the
/// contended ones (all it is from fewer than [`MIN_ACQUISITION_SAMPLES`] samples).
fn acquisitions_low(c: &Counts) -> f64 {
    if c.acquisition_samples < MIN_ACQUISITION_SAMPLES {
        return c.contended as f64;
    }
    let error = STANDARD_ERRORS / (c.acquisition_samples as f64).sqrt();
    (c.acquisitions as f64 * (1.0 - error)).max(c.contended as f64)
}

/// The contended acquisitions over the estimate of acquisitions plus [`STANDARD_ERRORS`]
/// standard errors: the low edge of the contention rate.
fn contention_low(c: &Counts) -> f64 {
    let error = STANDARD_ERRORS / (c.acquisition_samples.max(1) as f64).sqrt();
    let high = (c.acquisitions as f64 * (1.0 + error)).max(c.contended as f64);
    ratio(c.contended as f64, high)
}

/// `part / whole` (0 when `whole` is 0).
fn ratio(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        part / whole
    } else {
        0.0
    }
}

/// The lock findings of a table: groups first, so that a group's finding stands for its
/// members'.
fn lock_findings(
    table: &LockTable,
    walls: &HashMap<u32, u64>,
    thresholds: Thresholds,
) -> Vec<Finding> {
    if !table.available {
        return Vec::new();
    }
    let seconds = |pid: u32| {
        walls
            .get(&pid)
            .filter(|&&ns| ns > 0)
            .map(|&ns| ns as f64 / 1e9)
    };
    let counted = table.acquisitions_counted;
    let mut out = Vec::new();
    // Rows (indices into the table) whose finding of a kind their group's stands for.
    let mut covered: HashSet<(Kind, usize)> = HashSet::new();
    for g in table
        .groups
        .iter()
        .filter(|g| g.kind.is_some_and(is_lock_kind))
    {
        let subject = Subject {
            name: &g.name,
            pid: g.pid,
            kind: g.kind,
            counts: &g.counts,
            pressure: g.pressure,
            rows: g.members.iter().map(|&m| &table.locks[m]).collect(),
            group: true,
            seconds: seconds(g.pid),
        };
        if let Some(f) = asymmetric(table, g, &subject, thresholds, counted) {
            // The skew explains the group's and its members' contention and rates.
            for kind in [
                Kind::LongCriticalSections,
                Kind::CoarseLock,
                Kind::LockOverhead,
            ] {
                covered.extend(g.members.iter().map(|&m| (kind, m)));
            }
            out.push(f);
            continue;
        }
        for f in [
            contention(&subject, thresholds, counted),
            overhead(&subject, thresholds, counted),
        ]
        .into_iter()
        .flatten()
        {
            covered.extend(g.members.iter().map(|&m| (f.kind, m)));
            out.push(f);
        }
    }
    for (i, r) in table.locks.iter().enumerate() {
        if !r.kind.is_some_and(is_lock_kind) {
            continue;
        }
        let subject = Subject {
            name: &r.name,
            pid: r.pid,
            kind: r.kind,
            counts: &r.counts,
            pressure: r.pressure,
            rows: vec![r],
            group: false,
            seconds: seconds(r.pid),
        };
        let found = [
            contention(&subject, thresholds, counted),
            overhead(&subject, thresholds, counted),
            trylock_spin(&subject, r.try_site.as_ref(), thresholds, counted),
        ];
        out.extend(
            found
                .into_iter()
                .flatten()
                .filter(|f| !covered.contains(&(f.kind, i))),
        );
    }
    out
}

/// Long critical sections or a coarse lock: a lock that makes threads wait (pressure and
/// contended acquisitions) and is contended at least the threshold's share of its
/// acquisitions; its acquisition rate tells which.
fn contention(s: &Subject, thresholds: Thresholds, counted: bool) -> Option<Finding> {
    let c = s.counts;
    let acquisitions = acquisitions(c, counted).filter(|&a| a > 0)?;
    let rate = c.contended as f64 / acquisitions as f64;
    let pressure = s.pressure.unwrap_or(0.0);
    if c.contended < MIN_CONTENDED || pressure < MIN_PRESSURE || rate < thresholds.contention {
        return None;
    }
    // Both kinds are contention the numbers prove; the rate, an estimate, only tells them
    // apart, so its point estimate decides.
    let per_second = s.per_second(acquisitions as f64)?;
    let coarse = per_second >= thresholds.rate;
    let wait_avg = c.wait_ns.checked_div(c.contended).unwrap_or(0);
    if !coarse && !holds_explain_waits(c, wait_avg) {
        return None;
    }
    let mut evidence = vec![
        ("contention_rate", Value::Share(rate)),
        ("acquisitions", Value::Count(acquisitions)),
        ("acquisition_samples", Value::Count(c.acquisition_samples)),
        ("contended", Value::Count(c.contended)),
        ("acquisitions_per_s", Value::PerSecond(per_second)),
        ("pressure", Value::Share(pressure)),
        ("wait_ns", Value::Ns(c.wait_ns)),
        ("wait_avg_ns", Value::Ns(wait_avg)),
        ("peak_waiters", Value::Count(c.peak_waiters)),
    ];
    let mut text = "{contention_rate} of ~{acquisitions} acquisitions contended ({contended}), \
                    {acquisitions_per_s} acquisitions/s, pressure {pressure}, avg wait \
                    {wait_avg_ns}"
        .to_owned();
    if let Some(hold) = c.contended_hold_avg() {
        evidence.push(("hold_avg_ns", Value::Ns(hold)));
        text.push_str(", holds avg {hold_avg_ns}");
    }
    if s.group {
        evidence.push(("members", Value::Count(s.rows.len() as u64)));
        text.push_str(" over its {members} locks");
        if let Some(top) = s.rows.iter().max_by_key(|r| r.counts.wait_ns) {
            evidence.push(("most_waited_member", Value::Name(top.name.clone())));
            text.push_str(" (most waited for: {most_waited_member})");
        }
    }
    let fix = match (coarse, s.group) {
        (true, true) => "use more or finer locks for the data the group guards (stripe it \
                         further), shorten the critical sections, or go lock-free (atomics, \
                         per-thread copies merged later)"
            .to_owned(),
        (true, false) => "stripe or split the lock (one lock per part of the data it guards), \
                          shorten its critical sections, or go lock-free (atomics, per-thread \
                          copies merged later)"
            .to_owned(),
        (false, _) => {
            let mut fix = "shorten or split its critical sections: move work that needs no \
                           lock out of them"
                .to_owned();
            if let Some(code) = holders_code(&s.rows) {
                evidence.push(("holders_compute_in", Value::Name(code)));
                fix.push_str("; the holders compute in {holders_compute_in}");
            } else if let Some(site) = top_site(s.rows.iter().flat_map(|r| &r.holders)) {
                evidence.push(("holds_end_in", Value::Name(site)));
                fix.push_str("; the holds others waited for end in {holds_end_in}");
            }
            fix
        }
    };
    Some(Finding {
        kind: match coarse {
            true => Kind::CoarseLock,
            false => Kind::LongCriticalSections,
        },
        subject: s.name.to_owned(),
        pid: s.pid,
        lock_kind: s.kind,
        locks: s.names(),
        evidence,
        text,
        fix,
    })
}

/// Whether the holds others waited for are long enough for the waits (the claim of long
/// critical sections): a wait lasts at most [`WAIT_PER_HOLDS`] times the holds of the
/// waiters ahead of it (the average such hold times the most waiters at once). Waits far
/// longer were spent on something else, waking up and getting a CPU back (more threads than
/// CPUs), with the lock free. Holds not timed (spin locks, rwlocks, older profiles) cannot
/// tell: no objection.
fn holds_explain_waits(c: &Counts, wait_avg: u64) -> bool {
    c.contended_hold_avg().map_or(true, |hold| {
        wait_avg as f64 <= WAIT_PER_HOLDS * hold.saturating_mul(c.peak_waiters.max(1)) as f64
    })
}

/// Where the holders computed while others waited, summed over `rows`: the two largest
/// sites, `function <- caller (share)`.
fn holders_code(rows: &[&LockRow]) -> Option<String> {
    let mut by: BTreeMap<&Site, u64> = BTreeMap::new();
    for (site, ns) in rows.iter().flat_map(|r| &r.inside) {
        let sum = by.entry(site).or_default();
        *sum = sum.saturating_add(*ns);
    }
    let total = by.values().fold(0u64, |t, &ns| t.saturating_add(ns));
    let mut sites: Vec<(&Site, u64)> = by.into_iter().filter(|&(_, ns)| ns > 0).collect();
    sites.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let named: Vec<String> = sites
        .iter()
        .take(2)
        .map(|(s, ns)| {
            let code = match s.lock_function.as_str() {
                "" => s.caller.clone(),
                function => format!("{function} <- {}", s.caller),
            };
            format!("{code} ({:.0}%)", 100.0 * ratio(*ns as f64, total as f64))
        })
        .collect();
    (!named.is_empty()).then(|| named.join(", "))
}

/// The largest of `sites` summed by site, as `caller -> function`.
fn top_site<'a>(sites: impl Iterator<Item = &'a (Site, u64)>) -> Option<String> {
    let mut by: BTreeMap<&Site, u64> = BTreeMap::new();
    for (site, ns) in sites {
        let sum = by.entry(site).or_default();
        *sum = sum.saturating_add(*ns);
    }
    let top = by
        .into_iter()
        .filter(|&(_, ns)| ns > 0)
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)))?;
    Some(top.0.label())
}

/// Lock overhead: a lock contended under the threshold but taken at least the rate
/// threshold a second, even at the low edge of the estimate.
fn overhead(s: &Subject, thresholds: Thresholds, counted: bool) -> Option<Finding> {
    let c = s.counts;
    let acquisitions = acquisitions(c, counted).filter(|&a| a > 0)?;
    let rate = c.contended as f64 / acquisitions as f64;
    if rate >= thresholds.contention || c.acquisition_samples < MIN_ACQUISITION_SAMPLES {
        return None;
    }
    let low = s.per_second(acquisitions_low(c))?;
    if low < thresholds.rate {
        return None;
    }
    // What taking the lock costs at all must matter: SyncPerf's rate alone calls a few
    // thousand uncontended acquisitions a second a problem, a few microseconds of a second.
    let running = s.rows.iter().map(|r| r.running_ns).max().unwrap_or(0);
    let cost_share = acquisitions_low(c) * LOCK_PAIR_NS / running.max(1) as f64;
    if running > 0 && cost_share < MIN_OVERHEAD_SHARE {
        return None;
    }
    let per_second = s.per_second(acquisitions as f64)?;
    let mut evidence = vec![
        ("acquisitions_per_s", Value::PerSecond(per_second)),
        ("acquisitions_per_s_low", Value::PerSecond(low)),
        ("acquisitions", Value::Count(acquisitions)),
        ("acquisition_samples", Value::Count(c.acquisition_samples)),
        ("contention_rate", Value::Share(rate)),
        ("contended", Value::Count(c.contended)),
        ("cost_share", Value::Share(cost_share)),
    ];
    let mut text = "{acquisitions_per_s} acquisitions/s (~{acquisitions}, at least \
                    {acquisitions_per_s_low}/s within the estimate's error), only \
                    {contention_rate} contended; taking it costs about {cost_share} of the \
                    threads' running time"
        .to_owned();
    if s.group {
        // Members that are over the threshold on their own, by the same evidence; and the
        // busiest member's estimate (rough: a member's few samples each stand for all the
        // acquisitions of its thread since the one before).
        let over = s
            .rows
            .iter()
            .filter(|r| r.counts.acquisition_samples >= MIN_ACQUISITION_SAMPLES)
            .filter_map(|r| s.per_second(acquisitions_low(&r.counts)))
            .filter(|&low| low >= thresholds.rate)
            .count() as u64;
        let busiest = s
            .rows
            .iter()
            .filter_map(|r| s.per_second(r.counts.acquisitions as f64))
            .fold(0.0, f64::max);
        evidence.extend([
            ("members", Value::Count(s.rows.len() as u64)),
            ("members_over_rate", Value::Count(over)),
            ("busiest_member_per_s", Value::PerSecond(busiest)),
        ]);
        text.push_str(match over {
            0 => {
                "; found only through the group: none of its {members} locks is taken that \
                 often on its own (the busiest ~{busiest_member_per_s}/s by its estimate)"
            }
            _ => {
                "; over its {members} locks, {members_over_rate} of them that often on their \
                 own"
            }
        });
    }
    Some(Finding {
        kind: Kind::LockOverhead,
        subject: s.name.to_owned(),
        pid: s.pid,
        lock_kind: s.kind,
        locks: s.names(),
        evidence,
        text,
        fix: match s.group {
            true => {
                "the cost is in taking these locks at all: use atomics or per-thread data \
                     for what they guard, a cheaper lock (a spin lock for a few instructions), \
                     or take them less often (batch the updates)"
            }
            false => {
                "the cost is in taking the lock at all: use atomics or per-thread data for \
                      what it guards, a cheaper lock (a spin lock for a few instructions), or \
                      take it less often (batch the updates)"
            }
        }
        .to_owned(),
    })
}

/// Asymmetric contention in group `g`: the most contended member (among those with the
/// evidence of a contention finding and enough sampled acquisitions) contended at least
/// [`ASYMMETRY`] times as often as the other members together, comparing the low edge of its
/// rate's estimate with the high edge of theirs.
fn asymmetric(
    table: &LockTable,
    g: &LockGroup,
    s: &Subject,
    thresholds: Thresholds,
    counted: bool,
) -> Option<Finding> {
    if !counted || g.members.len() < 2 {
        return None;
    }
    let hot = g
        .members
        .iter()
        .filter_map(|&m| {
            let r = &table.locks[m];
            let c = &r.counts;
            let low_rate = contention_low(c);
            let evident = c.acquisition_samples >= MIN_ACQUISITION_SAMPLES
                && c.contended >= MIN_CONTENDED
                && r.pressure.unwrap_or(0.0) >= MIN_PRESSURE
                && low_rate >= thresholds.contention;
            evident.then_some((m, low_rate))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let (m, low_rate) = hot;
    let others = g
        .members
        .iter()
        .filter(|&&o| o != m)
        .map(|&o| &table.locks[o]);
    let mut rest = Counts::default();
    for o in others {
        rest.acquisitions = rest.acquisitions.saturating_add(o.counts.acquisitions);
        rest.acquisition_samples = rest
            .acquisition_samples
            .saturating_add(o.counts.acquisition_samples);
        rest.contended = rest.contended.saturating_add(o.counts.contended);
    }
    if rest.acquisition_samples < MIN_ACQUISITION_SAMPLES {
        return None;
    }
    let rest_high_rate = ratio(rest.contended as f64, acquisitions_low(&rest));
    if low_rate < ASYMMETRY * rest_high_rate {
        return None;
    }
    let r = &table.locks[m];
    let member_acquisitions = r.counts.acquisitions.max(r.counts.contended);
    let member_rate = r.counts.contended as f64 / member_acquisitions as f64;
    let rest_acquisitions = rest.acquisitions.max(rest.contended);
    let rest_rate = ratio(rest.contended as f64, rest_acquisitions as f64);
    let element = element_name(table, g, m).unwrap_or_else(|| r.name.clone());
    let evidence = vec![
        ("member", Value::Name(r.name.clone())),
        ("element", Value::Name(element)),
        ("member_contention_rate", Value::Share(member_rate)),
        ("member_acquisitions", Value::Count(member_acquisitions)),
        ("member_contended", Value::Count(r.counts.contended)),
        (
            "member_share_of_acquisitions",
            Value::Share(ratio(
                member_acquisitions as f64,
                member_acquisitions.saturating_add(rest_acquisitions) as f64,
            )),
        ),
        ("member_pressure", Value::Share(r.pressure.unwrap_or(0.0))),
        ("others", Value::Count(g.members.len() as u64 - 1)),
        ("others_contention_rate", Value::Share(rest_rate)),
        ("others_acquisitions", Value::Count(rest_acquisitions)),
        (
            "factor",
            Value::Factor(if rest_rate > 0.0 {
                member_rate / rest_rate
            } else {
                f64::INFINITY
            }),
        ),
    ];
    Some(Finding {
        kind: Kind::AsymmetricContention,
        subject: s.name.to_owned(),
        pid: s.pid,
        lock_kind: s.kind,
        locks: vec![s.name.to_owned(), r.name.clone()],
        evidence,
        text: "a hot member: {element} is contended in {member_contention_rate} of its \
               ~{member_acquisitions} acquisitions ({member_share_of_acquisitions} of the \
               group's; pressure {member_pressure}), the other {others} members in \
               {others_contention_rate} of theirs"
            .to_owned(),
        fix: "distribute the contention: a better hash, more buckets, or split the hot data \
              {element} guards"
            .to_owned(),
    })
}

/// `array[i]` for member `m` of a group of one array symbol, the element size being the
/// greatest common divisor of the members' distances (none for other groups).
fn element_name(table: &LockTable, g: &LockGroup, m: usize) -> Option<String> {
    let base = g.name.strip_suffix("[]")?;
    let offset = |i: usize| -> Option<u64> {
        let r = &table.locks[i];
        if r.naming != Naming::Symbol {
            return None;
        }
        match r.name.strip_prefix(base)? {
            "" => Some(0),
            rest => u64::from_str_radix(rest.strip_prefix("+0x")?, 16).ok(),
        }
    };
    let offsets: Vec<u64> = g
        .members
        .iter()
        .map(|&i| offset(i))
        .collect::<Option<_>>()?;
    let first = *offsets.iter().min()?;
    let stride = offsets.iter().fold(0, |d, &o| gcd(d, o - first));
    let index = offset(m)?.checked_div(stride)?;
    Some(format!("{base}[{index}]"))
}

fn gcd(a: u64, b: u64) -> u64 {
    match b {
        0 => a,
        _ => gcd(b, a % b),
    }
}

/// A trylock spin: failed trylocks at least the rate threshold a second, at least
/// [`TRY_FAILURE_RATIO`] of the tries, and at least [`TRY_FAILURES_PER_ACQUISITION`] per
/// acquisition (which needs the acquisitions counted).
fn trylock_spin(
    s: &Subject,
    site: Option<&Site>,
    thresholds: Thresholds,
    counted: bool,
) -> Option<Finding> {
    let c = s.counts;
    let failed_per_second = s.per_second(c.try_failed as f64)?;
    let failure_ratio = ratio(c.try_failed as f64, c.try_attempts() as f64);
    let acquisitions = acquisitions(c, counted)?;
    let per_acquisition = c.try_failed as f64 / acquisitions.max(1) as f64;
    if failed_per_second < thresholds.rate
        || failure_ratio < TRY_FAILURE_RATIO
        || per_acquisition < TRY_FAILURES_PER_ACQUISITION
    {
        return None;
    }
    let mut evidence = vec![
        ("try_failed", Value::Count(c.try_failed)),
        ("try_failed_per_s", Value::PerSecond(failed_per_second)),
        ("try_attempts", Value::Count(c.try_attempts())),
        ("failure_ratio", Value::Share(failure_ratio)),
        ("failures_per_acquisition", Value::Factor(per_acquisition)),
    ];
    let mut text = "{try_failed} failed trylocks ({try_failed_per_s}/s), {failure_ratio} of \
                    ~{try_attempts} tries, {failures_per_acquisition} per acquisition"
        .to_owned();
    let fix = match site {
        Some(site) => {
            evidence.push(("site", Value::Name(site.label())));
            text.push_str(", all from {site}");
            "block instead of spinning on trylock in {site}: take the lock with its blocking \
             call, or wait on a condition variable for what the spinning waits for"
        }
        None => {
            "block instead of spinning on trylock: take the lock with its blocking call, or \
             wait on a condition variable for what the spinning waits for"
        }
    };
    Some(Finding {
        kind: Kind::TrylockSpin,
        subject: s.name.to_owned(),
        pid: s.pid,
        lock_kind: s.kind,
        locks: s.names(),
        evidence,
        text,
        fix: fix.to_owned(),
    })
}

/// Phased contention: a lock with high and low phases whose high phases cover less than
/// [`MAX_HIGH_COVERAGE`] of the run, and make threads wait there.
fn phase_findings(table: &LockTable, phases: &[LockPhases]) -> Vec<Finding> {
    phases
        .iter()
        .filter_map(|l| {
            let length = |p: &&PhaseSpan| p.end_ns.saturating_sub(p.start_ns);
            let total = l
                .phases
                .iter()
                .fold(0u64, |t, p| t.saturating_add(length(&p)));
            let high: Vec<&PhaseSpan> = l.phases.iter().filter(|p| p.high).collect();
            let high_ns = high.iter().fold(0u64, |t, p| t.saturating_add(length(p)));
            let weighted = |spans: &mut dyn Iterator<Item = &PhaseSpan>| {
                let (w, ns) = spans.fold((0.0, 0u64), |(w, ns), p| {
                    let n = length(&p);
                    (w + p.pressure * n as f64, ns + n)
                });
                ratio(w, ns as f64)
            };
            let high_pressure = weighted(&mut high.iter().copied());
            let low_pressure = weighted(&mut l.phases.iter().filter(|p| !p.high));
            let coverage = ratio(high_ns as f64, total as f64);
            let high_waiting = high_pressure * high_ns as f64;
            let waiting_share = ratio(
                high_waiting,
                high_waiting + low_pressure * total.saturating_sub(high_ns) as f64,
            );
            let first = high.first()?;
            let phased = high_ns < total
                && coverage < MAX_HIGH_COVERAGE
                && high_pressure >= MIN_PRESSURE
                && waiting_share >= MIN_HIGH_WAITING_SHARE;
            if !phased {
                return None;
            }
            let kind = table
                .locks
                .iter()
                .find(|r| r.pid == l.pid && r.address == l.address)
                .and_then(|r| r.kind);
            Some(Finding {
                kind: Kind::PhasedContention,
                subject: l.name.clone(),
                pid: l.pid,
                lock_kind: kind,
                locks: vec![l.name.clone()],
                evidence: vec![
                    ("high_pressure", Value::Share(high_pressure)),
                    ("low_pressure", Value::Share(low_pressure)),
                    ("overall_pressure", Value::Share(l.overall_pressure)),
                    ("high_phases", Value::Count(high.len() as u64)),
                    ("high_share_of_run", Value::Share(coverage)),
                    ("first_high_start_ns", Value::Ns(first.start_ns)),
                    ("first_high_end_ns", Value::Ns(first.end_ns)),
                ],
                text: "pressure {high_pressure} in {high_phases} high phase(s) covering \
                       {high_share_of_run} of the run (the first from {first_high_start_ns} \
                       to {first_high_end_ns}), {low_pressure} elsewhere ({overall_pressure} \
                       over the whole run)"
                    .to_owned(),
                fix: "the contention belongs to a phase of the run: look at what the program \
                      does then ('report --view timeline') and fix that phase's critical \
                      sections or thread count rather than the lock everywhere"
                    .to_owned(),
            })
        })
        .collect()
}

/// Each non-main thread with a known start routine: its work and its waiting, but for its
/// joins (a parent waiting for its children is not imbalance).
fn thread_loads(procs: &[&ProcessProfile], symbolizer: &mut Symbolizer) -> Vec<ThreadLoad> {
    let mut out = Vec::new();
    for p in procs {
        let metric = |name: &str| p.header.metrics.iter().position(|m| m.name == name);
        let (work, idleness) = (metric(protocol::WORK.name), metric(protocol::IDLENESS.name));
        let calibration = Calibration::of(p);
        // A process that did not end cleanly wrote no end: its last known time stands for it.
        let end_of_process = p.end_ns.or_else(|| {
            p.threads
                .iter()
                .flat_map(|t| [t.start_ns, t.end_ns])
                .flatten()
                .max()
        });
        let mut sums: HashMap<u32, (u64, u64)> = HashMap::new();
        for s in &p.samples {
            let m = Some(usize::from(s.metric));
            let value = calibration.apply(s.value, s.flags);
            let sum = sums.entry(s.tid).or_default();
            if m == work {
                sum.0 = sum.0.saturating_add(value);
            } else if m == idleness && WaitKind::from_flags(s.flags) != Some(WaitKind::Join) {
                sum.1 = sum.1.saturating_add(value);
            }
        }
        for t in p.threads.iter().filter(|t| !t.is_main) {
            let Some(frame) = t.start_routine else {
                continue;
            };
            let chain = symbolizer.symbolize(
                p.module(frame.module),
                CodeAddress::InstructionPointer(frame.offset),
            );
            // The outermost function of the chain: the routine itself, not what it inlined.
            let Some(routine) = chain.last().map(|f| f.function.clone()) else {
                continue;
            };
            let (work_ns, wait_ns) = sums.get(&t.tid).copied().unwrap_or_default();
            let life_ns = t
                .start_ns
                .zip(t.end_ns.or(end_of_process))
                .map(|(start, end)| end.saturating_sub(start));
            out.push(ThreadLoad {
                pid: p.header.pid,
                tid: t.tid,
                routine,
                work_ns,
                wait_ns,
                life_ns,
            });
        }
    }
    out
}

/// A stage: the threads of one start routine in one process.
struct Stage<'a> {
    routine: &'a str,
    threads: Vec<&'a ThreadLoad>,
    work_ns: u64,
    wait_ns: u64,
}

impl Stage<'_> {
    /// Its waiting over its work and waiting.
    fn waiting_share(&self) -> f64 {
        ratio(
            self.wait_ns as f64,
            self.work_ns.saturating_add(self.wait_ns) as f64,
        )
    }
}

/// Load imbalance between the stages of each process, and between the threads of each
/// stage.
fn imbalance_findings(loads: &[ThreadLoad]) -> Vec<Finding> {
    let mut by: BTreeMap<(u32, &str), Vec<&ThreadLoad>> = BTreeMap::new();
    for t in loads {
        by.entry((t.pid, &t.routine)).or_default().push(t);
    }
    let mut processes: BTreeMap<u32, Vec<Stage>> = BTreeMap::new();
    for ((pid, routine), threads) in by {
        let work_ns = threads
            .iter()
            .fold(0u64, |t, l| t.saturating_add(l.work_ns));
        let wait_ns = threads
            .iter()
            .fold(0u64, |t, l| t.saturating_add(l.wait_ns));
        processes.entry(pid).or_default().push(Stage {
            routine,
            threads,
            work_ns,
            wait_ns,
        });
    }
    let mut out = Vec::new();
    for (pid, stages) in &processes {
        out.extend(stage_imbalance(*pid, stages));
        out.extend(stages.iter().filter_map(|s| thread_imbalance(*pid, s)));
    }
    out
}

/// One stage waits at least [`STAGE_WAITING`] of its time while another waits at most
/// [`STAGE_COMPUTING`] (the one waiting most against the one waiting least), and threads in
/// proportion to the stages' work would be another split than theirs (else there is nothing
/// to move: a stage of one thread waiting for events is no imbalance).
fn stage_imbalance(pid: u32, stages: &[Stage]) -> Option<Finding> {
    let by_share = |a: &&Stage, b: &&Stage| a.waiting_share().total_cmp(&b.waiting_share());
    let waiting = stages.iter().max_by(by_share)?;
    let computing = stages.iter().min_by(by_share)?;
    let imbalanced = waiting.waiting_share() >= STAGE_WAITING
        && computing.waiting_share() <= STAGE_COMPUTING
        && waiting.wait_ns >= MIN_STAGE_NS
        && computing.work_ns >= MIN_STAGE_NS;
    if !imbalanced {
        return None;
    }
    let threads = |s: &Stage| s.threads.len() as u64;
    let current: Vec<(String, u64)> = stages
        .iter()
        .map(|s| (s.routine.to_owned(), threads(s)))
        .collect();
    let suggested = split_threads(stages);
    if suggested == current {
        return None;
    }
    Some(Finding {
        kind: Kind::LoadImbalance,
        subject: format!("{} vs {}", waiting.routine, computing.routine),
        pid,
        lock_kind: None,
        locks: Vec::new(),
        evidence: vec![
            ("waiting_stage", Value::Name(waiting.routine.to_owned())),
            ("waiting_stage_threads", Value::Count(threads(waiting))),
            ("waiting_stage_share", Value::Share(waiting.waiting_share())),
            ("waiting_stage_work_ns", Value::Ns(waiting.work_ns)),
            ("waiting_stage_wait_ns", Value::Ns(waiting.wait_ns)),
            ("computing_stage", Value::Name(computing.routine.to_owned())),
            ("computing_stage_threads", Value::Count(threads(computing))),
            (
                "computing_stage_share",
                Value::Share(computing.waiting_share()),
            ),
            ("computing_stage_work_ns", Value::Ns(computing.work_ns)),
            ("computing_stage_wait_ns", Value::Ns(computing.wait_ns)),
            ("threads", Value::Threads(current)),
            ("suggested_threads", Value::Threads(suggested)),
        ],
        text: "stage {waiting_stage} ({waiting_stage_threads} threads) waits \
               {waiting_stage_share} of its time ({waiting_stage_wait_ns}; work \
               {waiting_stage_work_ns}) while stage {computing_stage} \
               ({computing_stage_threads} threads) computes (work {computing_stage_work_ns}, \
               waiting {computing_stage_share})"
            .to_owned(),
        fix: "give each stage threads in proportion to its work: {suggested_threads} (now \
              {threads}; same total), or move work from {computing_stage} to {waiting_stage}"
            .to_owned(),
    })
}

/// SyncPerf's split: the stages' threads (the same total) in proportion to each stage's
/// work, at least one each (largest remainders).
fn split_threads(stages: &[Stage]) -> Vec<(String, u64)> {
    let total: u64 = stages.iter().map(|s| s.threads.len() as u64).sum();
    let work: f64 = stages.iter().map(|s| s.work_ns as f64).sum();
    let ideal: Vec<f64> = stages
        .iter()
        .map(|s| total as f64 * ratio(s.work_ns as f64, work))
        .collect();
    let mut seats: Vec<u64> = ideal.iter().map(|&i| (i.floor() as u64).max(1)).collect();
    // Every stage has a thread, so `total` covers one seat each; more than `total` only
    // when a stage was rounded up to one: taken back from the largest.
    while seats.iter().sum::<u64>() > total {
        let Some(largest) = (0..seats.len()).max_by_key(|&i| seats[i]) else {
            break;
        };
        seats[largest] -= 1;
    }
    let mut order: Vec<usize> = (0..seats.len()).collect();
    order.sort_by(|&a, &b| {
        let frac = |i: usize| ideal[i] - ideal[i].floor();
        frac(b).total_cmp(&frac(a)).then(a.cmp(&b))
    });
    for &i in order.iter().cycle().take(stages.len() * total as usize) {
        if seats.iter().sum::<u64>() >= total {
            break;
        }
        seats[i] += 1;
    }
    stages
        .iter()
        .zip(seats)
        .map(|(s, n)| (s.routine.to_owned(), n))
        .collect()
}

/// The threads of one stage: the most loaded one's work exceeds the least loaded one's by
/// more than [`THREAD_IMBALANCE`], by at least [`MIN_IMBALANCE_NS`] and
/// [`MIN_IMBALANCE_OF_MEAN`] of their mean, and the least loaded one spent at least half
/// that difference not computing where the other computed: waiting more, or ending sooner
/// (threads that only got unequal shares of the CPUs, runnable all along, are not
/// imbalanced: the scheduler, not the program, divided their time); and the most loaded one
/// computed at least as long as it waited (threads that mostly wait have time to spare).
fn thread_imbalance(pid: u32, s: &Stage) -> Option<Finding> {
    if s.threads.len() < 2 {
        return None;
    }
    let most = s.threads.iter().max_by_key(|t| (t.work_ns, t.tid))?;
    let least = s.threads.iter().min_by_key(|t| (t.work_ns, t.tid))?;
    let mean = s.work_ns / s.threads.len() as u64;
    let difference = most.work_ns - least.work_ns;
    let idle = least.wait_ns.saturating_sub(most.wait_ns).saturating_add(
        most.life_ns
            .zip(least.life_ns)
            .map_or(0, |(m, l)| m.saturating_sub(l)),
    );
    let imbalanced = most.work_ns as f64 > (1.0 + THREAD_IMBALANCE) * least.work_ns as f64
        && difference >= MIN_IMBALANCE_NS
        && difference as f64 >= MIN_IMBALANCE_OF_MEAN * mean as f64
        && idle >= difference / 2
        && most.wait_ns <= most.work_ns;
    if !imbalanced {
        return None;
    }
    Some(Finding {
        kind: Kind::LoadImbalance,
        subject: s.routine.to_owned(),
        pid,
        lock_kind: None,
        locks: Vec::new(),
        evidence: vec![
            ("stage", Value::Name(s.routine.to_owned())),
            ("threads", Value::Count(s.threads.len() as u64)),
            ("max_work_ns", Value::Ns(most.work_ns)),
            ("max_work_tid", Value::Id(u64::from(most.tid))),
            ("min_work_ns", Value::Ns(least.work_ns)),
            ("min_work_tid", Value::Id(u64::from(least.tid))),
            ("mean_work_ns", Value::Ns(mean)),
            ("min_work_idle_ns", Value::Ns(idle)),
            (
                "factor",
                Value::Factor(ratio(most.work_ns as f64, least.work_ns as f64)),
            ),
        ],
        text: "its {threads} threads computed from {min_work_ns} (thread {min_work_tid}) to \
               {max_work_ns} (thread {max_work_tid}); mean {mean_work_ns}; the least loaded \
               one spent {min_work_idle_ns} more waiting or ended that much sooner"
            .to_owned(),
        fix: "divide the work of {stage} evenly: smaller tasks from a shared queue (dynamic \
              scheduling) rather than a fixed share per thread"
            .to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;
    const PID: u32 = 7;

    fn site(caller: &str, function: &str) -> Site {
        Site {
            caller: caller.to_owned(),
            lock_function: function.to_owned(),
        }
    }

    /// `rows` in a process that ran 10 ms in all, so that their acquisitions' cost, not
    /// their running time, decides lock overhead.
    fn briefly(rows: Vec<LockRow>) -> Vec<LockRow> {
        rows.into_iter()
            .map(|r| LockRow {
                running_ns: 10_000_000,
                ..r
            })
            .collect()
    }

    /// A mutex row of process [`PID`] named `name` (by symbol) with `counts`, its pressure
    /// over 10 s of running time.
    fn row(name: &str, counts: Counts) -> LockRow {
        let running_ns = 10 * SECOND;
        LockRow {
            pid: PID,
            address: 0x1000,
            kind: Some(WaitKind::Mutex),
            name: name.to_owned(),
            naming: Naming::Symbol,
            group: None,
            instances: 1,
            pressure: Some(counts.wait_ns as f64 / running_ns as f64),
            counts,
            running_ns,
            waiters: Vec::new(),
            holders: Vec::new(),
            pairs: Vec::new(),
            inside: Vec::new(),
            try_site: None,
        }
    }

    /// Counts of `acquisitions` (from `samples` sampled ones), `contended` of them, each
    /// wait `wait_each` ns.
    fn counts(acquisitions: u64, samples: u64, contended: u64, wait_each: u64) -> Counts {
        Counts {
            acquisitions,
            acquisition_samples: samples,
            contended,
            contended_measured: contended,
            wait_ns: contended * wait_each,
            ..Counts::default()
        }
    }

    fn table(locks: Vec<LockRow>) -> LockTable {
        LockTable {
            available: true,
            locks,
            groups: Vec::new(),
            running_ns: 10 * SECOND,
            acquisitions_counted: true,
            untabled_events: 0,
        }
    }

    /// `table` with one group of all its rows, named `name`.
    fn grouped(mut locks: Vec<LockRow>, name: &str) -> LockTable {
        let mut sum = Counts::default();
        for l in &mut locks {
            l.group = Some(name.to_owned());
            sum.acquisitions += l.counts.acquisitions;
            sum.acquisition_samples += l.counts.acquisition_samples;
            sum.contended += l.counts.contended;
            sum.wait_ns += l.counts.wait_ns;
        }
        let mut t = table(locks);
        t.groups.push(LockGroup {
            pid: PID,
            name: name.to_owned(),
            kind: Some(WaitKind::Mutex),
            members: (0..t.locks.len()).collect(),
            pressure: Some(sum.wait_ns as f64 / t.running_ns as f64),
            counts: sum,
        });
        t
    }

    /// The findings of `t` for a process of `wall` seconds, default thresholds.
    fn found(t: &LockTable, wall: u64) -> Vec<Finding> {
        let walls = HashMap::from([(PID, wall * SECOND)]);
        let mut f = lock_findings(t, &walls, Thresholds::default());
        f.sort_by_key(|f| f.kind);
        f
    }

    fn kinds(f: &[Finding]) -> Vec<(Kind, &str)> {
        f.iter().map(|f| (f.kind, f.subject.as_str())).collect()
    }

    fn share(f: &Finding, key: &str) -> f64 {
        match f.value(key) {
            Some(Value::Share(v) | Value::PerSecond(v) | Value::Factor(v)) => *v,
            other => panic!("{key}: {other:?}"),
        }
    }

    fn name<'a>(f: &'a Finding, key: &str) -> &'a str {
        match f.value(key) {
            Some(Value::Name(v)) => v,
            other => panic!("{key}: {other:?}"),
        }
    }

    #[test]
    fn few_contended_acquisitions_are_long_critical_sections_naming_the_code_inside() {
        // 400 acquisitions in 2 s, 350 contended, 5 ms each: pressure 17.5%.
        let mut r = row("config_lock", counts(30, 3, 350, 5_000_000));
        r.inside = vec![
            (site("reload_config", "parse"), 900),
            (site("reload_config", ""), 100),
        ];
        r.holders = vec![(site("reload_config", "pthread_mutex_unlock"), 5)];
        let f = found(&table(vec![r]), 2);
        assert_eq!(kinds(&f), [(Kind::LongCriticalSections, "config_lock")]);
        let f = &f[0];
        assert_eq!(
            f.value("acquisitions"),
            Some(&Value::Count(350)),
            "never below the contended"
        );
        assert_eq!(share(f, "contention_rate"), 1.0);
        assert_eq!(share(f, "acquisitions_per_s"), 175.0);
        assert_eq!(
            name(f, "holders_compute_in"),
            "parse <- reload_config (90%), reload_config (10%)"
        );
        assert!(f.fix.contains("{holders_compute_in}"), "{}", f.fix);
    }

    #[test]
    fn without_code_inside_the_fix_names_where_the_holds_end() {
        let mut r = row("config_lock", counts(30, 3, 350, 5_000_000));
        r.holders = vec![
            (site("reload_config", "pthread_mutex_unlock"), 5),
            (site("other", "pthread_mutex_unlock"), 1),
        ];
        let f = found(&table(vec![r]), 2);
        assert_eq!(
            name(&f[0], "holds_end_in"),
            "reload_config -> pthread_mutex_unlock"
        );
    }

    #[test]
    fn many_contended_acquisitions_are_a_coarse_lock() {
        let f = found(
            &table(vec![row(
                "stats_lock",
                counts(2_000_000, 5000, 600_000, 2000),
            )]),
            2,
        );
        assert_eq!(kinds(&f), [(Kind::CoarseLock, "stats_lock")]);
        assert!((share(&f[0], "contention_rate") - 0.3).abs() < 1e-9);
        assert_eq!(share(&f[0], "acquisitions_per_s"), 1_000_000.0);
    }

    #[test]
    fn contention_needs_pressure_contended_acquisitions_and_the_rate() {
        // 3 acquisitions, 1 contended: noise, however long the wait.
        let noise = found(&table(vec![row("a", counts(3, 1, 1, 5 * SECOND))]), 2);
        assert!(noise.is_empty(), "{noise:?}");
        // 19 contended (one short of the minimum), 20.
        let one = |c: Counts| found(&table(vec![row("a", c)]), 2);
        let f = one(counts(100, 1, 19, 100_000_000));
        assert!(f.is_empty(), "{f:?}");
        let f = one(counts(100, 1, 20, 100_000_000));
        assert_eq!(kinds(&f), [(Kind::LongCriticalSections, "a")]);
        // Pressure just under 1% (of 10 s), and at 1%.
        let f = one(counts(100, 1, 50, 1_999_999));
        assert!(f.is_empty(), "{f:?}");
        let f = one(counts(100, 1, 50, 2_000_000));
        assert_eq!(f.len(), 1);
        // A contention rate just under 10%: not contended, and too rare for overhead; at
        // 10%.
        let f = one(counts(1001, 20, 100, 10_000_000));
        assert!(f.is_empty(), "{f:?}");
        let f = one(counts(1000, 20, 100, 10_000_000));
        assert_eq!(kinds(&f), [(Kind::LongCriticalSections, "a")]);
        // The rate threshold splits the two kinds: 1999 and 2000 acquisitions in 2 s.
        let f = one(counts(1999, 50, 500, 1_000_000));
        assert_eq!(f[0].kind, Kind::LongCriticalSections);
        let f = one(counts(2000, 50, 500, 1_000_000));
        assert_eq!(f[0].kind, Kind::CoarseLock);
    }

    #[test]
    fn long_critical_sections_need_holds_as_long_as_the_waits() {
        // 350 waits of 5 ms behind holds of 1.25 ms with up to 2 waiters: 2 x 2.5 ms.
        let mut c = counts(30, 3, 350, 5_000_000);
        (c.timed_holds, c.contended_hold_ns, c.peak_waiters) = (100, 125_000_000, 2);
        let f = found(&table(vec![row("q", c.clone())]), 2);
        assert_eq!(kinds(&f), [(Kind::LongCriticalSections, "q")]);
        assert_eq!(f[0].value("hold_avg_ns"), Some(&Value::Ns(1_250_000)));
        // Holds of 1.2 ms: the waits were mostly for something else (a CPU).
        c.contended_hold_ns = 120_000_000;
        let f = found(&table(vec![row("q", c.clone())]), 2);
        assert!(f.is_empty(), "{f:?}");
        // A coarse lock needs no such proof: many acquisitions, mostly contended.
        c.acquisitions = 100_000;
        c.acquisition_samples = 400;
        c.contended = 60_000;
        c.wait_ns = 60_000 * 5_000_000;
        let f = found(&table(vec![row("q", c)]), 2);
        assert_eq!(kinds(&f), [(Kind::CoarseLock, "q")]);
    }

    #[test]
    fn a_rare_locks_rate_made_too_high_by_its_estimate_needs_real_waiting() {
        // 2000 acquisitions, 100 contended (5%), estimated from 3 samples as 400 (25%): no
        // finding unless the waits cost, and then long holds are what it has.
        let f = found(&table(vec![row("a", counts(400, 3, 100, 100_000))]), 2);
        assert!(f.is_empty(), "pressure 0.1%: {f:?}");
        let mut c = counts(400, 3, 100, 2_000_000);
        (c.timed_holds, c.contended_hold_ns, c.peak_waiters) = (100, 99_000_000, 1);
        let f = found(&table(vec![row("a", c.clone())]), 2);
        assert!(f.is_empty(), "waits of 2 ms behind holds of 0.99 ms: {f:?}");
        c.contended_hold_ns = 100_000_000;
        let f = found(&table(vec![row("a", c)]), 2);
        assert_eq!(kinds(&f), [(Kind::LongCriticalSections, "a")]);
    }

    #[test]
    fn an_uncontended_table_has_no_findings() {
        let t = table(vec![
            row("a", counts(500, 4, 0, 0)),
            row("b", counts(100, 2, 0, 0)),
            row("c", counts(0, 0, 0, 0)),
        ]);
        assert!(found(&t, 2).is_empty());
        assert!(found(&grouped(t.locks.clone(), "x[]"), 2).is_empty());
    }

    #[test]
    fn frequent_uncontended_acquisitions_are_lock_overhead_at_the_low_edge_of_the_estimate() {
        // 4000 acquisitions in 2 s from 100 samples: 2000/s, 1600/s at two standard errors.
        let a = |c| table(briefly(vec![row("a", c)]));
        let f = found(&a(counts(4000, 100, 10, 1000)), 2);
        assert_eq!(kinds(&f), [(Kind::LockOverhead, "a")]);
        assert!((share(&f[0], "acquisitions_per_s_low") - 1600.0).abs() < 1e-6);
        // 2500 from 100 samples: 1250/s, but 1000/s is within the error.
        let f = found(&a(counts(2500, 100, 0, 0)), 2);
        assert_eq!(f.len(), 1, "exactly 1000/s at the low edge");
        let f = found(&a(counts(2490, 100, 0, 0)), 2);
        assert!(f.is_empty(), "{f:?}");
        // The same rate in 10 s of running time costs 0.06% of it: no problem.
        let f = found(&table(vec![row("a", counts(4000, 100, 10, 1000))]), 2);
        assert!(f.is_empty(), "{f:?}");
        // A large estimate from 9 samples says nothing.
        let f = found(&table(vec![row("a", counts(900_000, 9, 0, 0))]), 2);
        assert!(f.is_empty(), "{f:?}");
        // Uncounted acquisitions say nothing either.
        let mut t = table(vec![row("a", counts(900_000, 1000, 0, 0))]);
        t.acquisitions_counted = false;
        assert!(found(&t, 2).is_empty());
    }

    #[test]
    fn lock_overhead_is_found_only_through_the_group_and_not_again_for_members() {
        // 100 locks of 1500 acquisitions each in 2 s (750/s), 6 samples each.
        let members: Vec<LockRow> = briefly(
            (0..100)
                .map(|i| row(&format!("objects+{:#x}", i * 64), counts(1500, 6, 0, 0)))
                .collect(),
        );
        let f = found(&table(members.clone()), 2);
        assert!(f.is_empty(), "no member on its own: {f:?}");
        let t = grouped(members, "objects[]");
        let f = found(&t, 2);
        assert_eq!(kinds(&f), [(Kind::LockOverhead, "objects[]")]);
        assert_eq!(f[0].value("members_over_rate"), Some(&Value::Count(0)));
        assert!(
            f[0].text.contains("found only through the group"),
            "{}",
            f[0].text
        );
        // A member over the rate on its own: the group's finding stands for it.
        let mut members = t.locks.clone();
        members[3].counts = counts(100_000, 400, 0, 0);
        let f = found(&grouped(members, "objects[]"), 2);
        assert_eq!(kinds(&f), [(Kind::LockOverhead, "objects[]")]);
        assert_eq!(f[0].value("members_over_rate"), Some(&Value::Count(1)));
    }

    /// A group of 16 buckets with `hot` acquisitions (`hot_contended` contended) of bucket 0
    /// and `cold` (`cold_contended`) of each other one, 2 ms waits, 40 bytes apart.
    fn buckets(hot: u64, hot_contended: u64, cold: u64, cold_contended: u64) -> LockTable {
        let mut locks = vec![row(
            "buckets",
            counts(hot, hot / 256, hot_contended, 200_000),
        )];
        for i in 1..16 {
            let c = counts(cold, cold / 256, cold_contended, 200_000);
            locks.push(row(&format!("buckets+{:#x}", i * 40), c));
        }
        grouped(locks, "buckets[]")
    }

    #[test]
    fn a_hot_member_is_asymmetric_contention_and_nothing_else_of_its_group() {
        // Bucket 0: 30% of 256 000; the others 5% of 25 600 each.
        let t = buckets(256_000, 76_800, 25_600, 1280);
        let f = found(&t, 2);
        assert_eq!(kinds(&f), [(Kind::AsymmetricContention, "buckets[]")]);
        let f = &f[0];
        assert_eq!(name(f, "member"), "buckets");
        assert_eq!(name(f, "element"), "buckets[0]");
        assert!((share(f, "factor") - 6.0).abs() < 1e-9);
        assert_eq!(f.locks, ["buckets[]", "buckets"]);
        // The others as hot as bucket 0 is: a coarse group, no asymmetry.
        let f = found(&buckets(256_000, 76_800, 25_600, 7680), 2);
        assert_eq!(kinds(&f), [(Kind::CoarseLock, "buckets[]")]);
    }

    #[test]
    fn asymmetry_must_hold_at_the_edges_of_the_estimates() {
        // Twice as contended by the point estimates (20% against 10%), but not beyond
        // their errors.
        let f = found(&buckets(25_600, 5120, 25_600, 2560), 2);
        assert!(
            f.iter().all(|f| f.kind != Kind::AsymmetricContention),
            "{f:?}"
        );
        // Three times: beyond them.
        let f = found(&buckets(25_600, 7680, 25_600, 2560), 2);
        assert_eq!(f[0].kind, Kind::AsymmetricContention, "{f:?}");
        // A hot member under the contention threshold is no problem.
        let f = found(&buckets(256_000, 12_800, 25_600, 128), 2);
        assert!(
            f.iter().all(|f| f.kind != Kind::AsymmetricContention),
            "{f:?}"
        );
    }

    #[test]
    fn array_elements_are_numbered_by_the_members_distances() {
        // A mutex at offset 8 of 72-byte elements, elements 0, 2 and 3.
        let locks = ["w+0x8", "w+0x98", "w+0xe0"]
            .iter()
            .map(|n| row(n, Counts::default()))
            .collect();
        let t = grouped(locks, "w[]");
        let g = &t.groups[0];
        let names: Vec<Option<String>> = (0..3).map(|m| element_name(&t, g, m)).collect();
        assert_eq!(
            names,
            [
                Some("w[0]".into()),
                Some("w[2]".into()),
                Some("w[3]".into())
            ]
        );
        let mut t = t;
        t.locks[1].naming = Naming::InitSite;
        assert_eq!(element_name(&t, &t.groups[0], 0), None);
    }

    fn trylocks(failed: u64, acquired: u64, acquisitions: u64, contended: u64) -> Counts {
        Counts {
            try_failed: failed,
            try_acquired: acquired,
            ..counts(acquisitions, acquisitions / 256, contended, 1000)
        }
    }

    #[test]
    fn many_failed_trylocks_per_acquisition_are_a_trylock_spin_named_by_its_site() {
        let mut r = row("slot_lock", trylocks(30_000_000, 50, 100, 0));
        r.try_site = Some(site("poll_for_slot", "pthread_mutex_trylock"));
        let f = found(&table(vec![r.clone()]), 2);
        assert_eq!(kinds(&f), [(Kind::TrylockSpin, "slot_lock")]);
        assert_eq!(
            name(&f[0], "site"),
            "poll_for_slot -> pthread_mutex_trylock"
        );
        assert!(f[0].fix.contains("{site}"));
        // Several sites (or an older profile): found, naming none.
        r.try_site = None;
        let f = found(&table(vec![r]), 2);
        assert_eq!(kinds(&f), [(Kind::TrylockSpin, "slot_lock")]);
        assert_eq!(f[0].value("site"), None);
        assert!(!f[0].fix.contains('{'), "{}", f[0].fix);
    }

    #[test]
    fn a_trylock_before_blocking_is_no_spin() {
        // Each contended acquisition tried once first: 75% of tries fail, one failure per
        // contended acquisition (a coarse lock, not a spin).
        let f = found(
            &table(vec![row(
                "stats",
                trylocks(750_000, 250_000, 1_000_000, 750_000),
            )]),
            2,
        );
        assert_eq!(kinds(&f), [(Kind::CoarseLock, "stats")]);
        // The same with the acquisitions under-estimated: the contended ones bound them.
        let f = found(&table(vec![row("stats", trylocks(7000, 10, 100, 6990))]), 2);
        assert!(f.iter().all(|f| f.kind != Kind::TrylockSpin), "{f:?}");
        // 1999 failures in 2 s: under the rate; half the tries fail, twice per acquisition.
        let f = found(&table(vec![row("t", trylocks(1999, 1999, 999, 0))]), 2);
        assert!(f.is_empty(), "{f:?}");
        let f = found(&table(vec![row("t", trylocks(2000, 2000, 1000, 0))]), 2);
        assert_eq!(kinds(&f), [(Kind::TrylockSpin, "t")]);
        let f = found(&table(vec![row("t", trylocks(2000, 2001, 1000, 0))]), 2);
        assert!(f.is_empty(), "under half: {f:?}");
        let f = found(&table(vec![row("t", trylocks(2000, 2000, 1001, 0))]), 2);
        assert!(f.is_empty(), "under two per acquisition: {f:?}");
        // Without counted acquisitions nothing tells a spin from a try before blocking.
        let mut t = table(vec![row("t", trylocks(2_000_000, 0, 0, 0))]);
        t.acquisitions_counted = false;
        assert!(found(&t, 2).is_empty());
    }

    #[test]
    fn no_lock_data_no_wall_time_no_lock_findings() {
        let t = table(vec![row(
            "stats_lock",
            counts(2_000_000, 5000, 600_000, 2000),
        )]);
        assert!(lock_findings(&t, &HashMap::new(), Thresholds::default()).is_empty());
        let old = LockTable::default();
        assert!(found(&old, 2).is_empty());
    }

    #[test]
    fn events_are_not_locks() {
        let mut r = row("not_full", counts(0, 0, 5000, 1_000_000));
        r.kind = Some(WaitKind::CondVar);
        r.pressure = None;
        assert!(found(&table(vec![r]), 2).is_empty());
    }

    fn phase(start_ms: u64, end_ms: u64, pressure: f64, high: bool) -> PhaseSpan {
        PhaseSpan {
            start_ns: start_ms * 1_000_000,
            end_ns: end_ms * 1_000_000,
            pressure,
            high,
        }
    }

    fn phased(phases: Vec<PhaseSpan>) -> Vec<Finding> {
        let t = table(vec![row("phase_lock", Counts::default())]);
        let l = LockPhases {
            pid: PID,
            address: 0x1000,
            name: "phase_lock".into(),
            overall_pressure: 0.3,
            phases,
        };
        phase_findings(&t, &[l])
    }

    #[test]
    fn a_lock_high_in_part_of_the_run_is_phased() {
        let f = phased(vec![
            phase(0, 1000, 0.6, true),
            phase(1000, 2000, 0.001, false),
        ]);
        assert_eq!(kinds(&f), [(Kind::PhasedContention, "phase_lock")]);
        assert_eq!(f[0].lock_kind, Some(WaitKind::Mutex));
        assert!((share(&f[0], "high_share_of_run") - 0.5).abs() < 1e-9);
        assert_eq!(
            f[0].value("first_high_end_ns"),
            Some(&Value::Ns(1_000_000_000))
        );
        // High 80% of the run: not a phase, the lock's contention throughout.
        let f = phased(vec![phase(0, 800, 0.6, true), phase(800, 1000, 0.0, false)]);
        assert!(f.is_empty(), "{f:?}");
        let f = phased(vec![phase(0, 799, 0.6, true), phase(799, 1000, 0.0, false)]);
        assert_eq!(f.len(), 1);
        // Only high, only low, none (an older profile).
        assert!(phased(vec![phase(0, 1000, 0.6, true)]).is_empty());
        assert!(phased(vec![phase(0, 1000, 0.01, false)]).is_empty());
        assert!(phased(Vec::new()).is_empty());
    }

    /// A thread of `routine` that lived 2 s.
    fn load(tid: u32, routine: &str, work_ms: u64, wait_ms: u64) -> ThreadLoad {
        ThreadLoad {
            pid: PID,
            tid,
            routine: routine.to_owned(),
            work_ns: work_ms * 1_000_000,
            wait_ns: wait_ms * 1_000_000,
            life_ns: Some(2 * SECOND),
        }
    }

    /// [`load`] for a thread that lived `life_ms`.
    fn lived(tid: u32, work_ms: u64, wait_ms: u64, life_ms: u64) -> ThreadLoad {
        ThreadLoad {
            life_ns: Some(life_ms * 1_000_000),
            ..load(tid, "w", work_ms, wait_ms)
        }
    }

    #[test]
    fn a_stage_waiting_while_another_computes_is_imbalance_with_a_split_by_work() {
        let loads = [
            load(1, "parse", 130, 1800),
            load(2, "parse", 130, 1800),
            load(3, "parse", 130, 1800),
            load(4, "render", 520, 40),
            load(5, "render", 520, 40),
            load(6, "render", 520, 40),
        ];
        let f = imbalance_findings(&loads);
        assert_eq!(kinds(&f), [(Kind::LoadImbalance, "parse vs render")]);
        let split = f[0].value("suggested_threads");
        let want = vec![("parse".to_owned(), 1), ("render".to_owned(), 5)];
        assert_eq!(split, Some(&Value::Threads(want)));
        // The computing stage waiting 10%, and just over.
        let mut loads = loads;
        for l in &mut loads[3..] {
            l.wait_ns = l.work_ns / 9;
        }
        assert_eq!(imbalance_findings(&loads).len(), 1);
        for l in &mut loads[3..] {
            l.wait_ns += 1_000_000;
        }
        assert!(imbalance_findings(&loads).is_empty());
    }

    fn stage<'a>(routine: &'a str, threads: &'a [ThreadLoad], work_ns: u64) -> Stage<'a> {
        Stage {
            routine,
            threads: threads.iter().collect(),
            work_ns,
            wait_ns: 0,
        }
    }

    #[test]
    fn a_split_keeps_the_thread_count_and_a_thread_per_stage() {
        let loads: Vec<ThreadLoad> = (0..3).map(|i| load(i, "x", 1, 0)).collect();
        let seats =
            |stages: &[Stage]| -> Vec<u64> { split_threads(stages).iter().map(|s| s.1).collect() };
        let stages = [
            stage("a", &loads[..1], 1),
            stage("b", &loads[1..2], 1),
            stage("c", &loads[2..], 1_000_000),
        ];
        assert_eq!(seats(&stages), [1, 1, 1], "one each, however little work");
        let stages = [stage("a", &loads[..2], 3), stage("b", &loads[2..], 1)];
        assert_eq!(seats(&stages), [2, 1]);
        let stages = [stage("a", &loads[..1], 1), stage("b", &loads[1..], 3)];
        assert_eq!(seats(&stages), [1, 2]);
    }

    #[test]
    fn balanced_stages_and_threads_are_no_imbalance() {
        // All waiting alike (a latency-bound pipeline), or all computing.
        let f = imbalance_findings(&[load(1, "parse", 130, 1800), load(2, "render", 500, 900)]);
        assert!(f.is_empty(), "{f:?}");
        let f = imbalance_findings(&[
            load(1, "w", 790, 0),
            load(2, "w", 785, 0),
            load(3, "w", 821, 0),
            load(4, "x", 10, 0),
        ]);
        assert!(f.is_empty(), "{f:?}");
        // Short stages: their time is too short to tell.
        let f = imbalance_findings(&[load(1, "a", 1, 90), load(2, "b", 90, 0)]);
        assert!(f.is_empty(), "{f:?}");
        // A dispatcher waiting for requests while two workers compute: it already has the
        // one thread the split would give it.
        let f = imbalance_findings(&[
            load(1, "dispatch", 50, 1900),
            load(2, "work", 1900, 50),
            load(3, "work", 1900, 50),
        ]);
        assert!(f.is_empty(), "{f:?}");
    }

    #[test]
    fn threads_of_one_routine_with_uneven_work_are_imbalance() {
        // The lighter thread ended sooner (fork-join), or waited (a barrier).
        let f = imbalance_findings(&[lived(1, 400, 0, 1800), lived(2, 600, 0, 2000)]);
        assert_eq!(kinds(&f), [(Kind::LoadImbalance, "w")]);
        assert_eq!(f[0].value("max_work_tid"), Some(&Value::Id(2)));
        let f = imbalance_findings(&[lived(1, 400, 100, 2000), lived(2, 600, 0, 2000)]);
        assert_eq!(f.len(), 1);
        // Unequal shares of the CPUs, both runnable all along: the scheduler's doing.
        let f = imbalance_findings(&[lived(1, 400, 99, 2000), lived(2, 600, 0, 2000)]);
        assert!(f.is_empty(), "{f:?}");
        // 20% more exactly: not more than 20%.
        let f = imbalance_findings(&[lived(1, 500, 0, 1000), lived(2, 600, 0, 2000)]);
        assert!(f.is_empty(), "{f:?}");
        // Over 20% but under 50 ms.
        let f = imbalance_findings(&[lived(1, 100, 0, 1000), lived(2, 149, 0, 2000)]);
        assert!(f.is_empty(), "{f:?}");
        // Threads that mostly wait have time to spare, whatever their work.
        let f = imbalance_findings(&[lived(1, 260, 1700, 2000), lived(2, 400, 1500, 2000)]);
        assert!(f.is_empty(), "{f:?}");
        // One thread.
        assert!(imbalance_findings(&[load(1, "w", 100, 0)]).is_empty());
    }

    /// A process of stages `parse` (three threads waiting on a condition variable most of
    /// their time) and `render` (two computing), its main thread waiting to join them: read
    /// from its samples, through [`findings`].
    #[test]
    fn stages_are_read_from_the_samples_without_joins_or_the_main_thread() {
        use crate::attribution::testutil::{add_flagged, app, process};
        use crate::format::read::ThreadInfo;
        let ms = 1_000_000;
        let mut p = process(PID, &["work", "idleness"]);
        p.version = crate::format::FORMAT_VERSION;
        let stage = |tid, routine| ThreadInfo {
            tid,
            start_routine: Some(app(routine)),
            start_ns: Some(0),
            end_ns: Some(2 * SECOND),
            ..Default::default()
        };
        p.threads
            .extend([stage(11, 0x60), stage(12, 0x60), stage(13, 0x60)]);
        p.threads.extend([stage(21, 0x70), stage(22, 0x70)]);
        let condvar = WaitKind::CondVar.flags();
        let join = WaitKind::Join.flags();
        for tid in [11, 12, 13] {
            add_flagged(&mut p, tid, 0, &[app(0x60)], 100 * ms, 0);
            add_flagged(&mut p, tid, 1, &[app(0x60)], 900 * ms, condvar);
        }
        for tid in [21, 22] {
            add_flagged(&mut p, tid, 0, &[app(0x70)], 1500 * ms, 0);
            // A join does not count: it would make the renderers wait as long.
            add_flagged(&mut p, tid, 1, &[app(0x70)], 1500 * ms, join);
        }
        // Main waits 2 s in joins: not a stage, and no waiting.
        add_flagged(&mut p, PID, 1, &[app(0x30)], 2 * SECOND, join);
        let profile = Profile {
            path: "test".into(),
            processes: vec![p],
            skipped: Vec::new(),
        };
        let found = findings(
            &profile,
            Filter::default(),
            &LockTable::default(),
            &[],
            Thresholds::default(),
            &mut Symbolizer::new(),
        )
        .expect("findings");
        assert_eq!(found.len(), 1, "{found:?}");
        let f = &found[0];
        assert_eq!(f.kind, Kind::LoadImbalance);
        assert_eq!(f.value("waiting_stage_share"), Some(&Value::Share(0.9)));
        assert_eq!(f.value("computing_stage_share"), Some(&Value::Share(0.0)));
        assert_eq!(
            f.value("computing_stage_work_ns"),
            Some(&Value::Ns(3 * SECOND))
        );
        // 300 ms of parsing against 3 s of rendering: one parser, four renderers.
        let Some(Value::Threads(split)) = f.value("suggested_threads") else {
            panic!("{f:?}");
        };
        let seats: Vec<u64> = split.iter().map(|s| s.1).collect();
        assert_eq!(seats, [1, 4], "{split:?}");
    }

    /// Every `{key}` of a finding's words names an entry of its evidence.
    #[test]
    fn templates_name_only_their_evidence() {
        let mut r = row("slot_lock", trylocks(30_000_000, 50, 100, 0));
        r.try_site = Some(site("poll_for_slot", "pthread_mutex_trylock"));
        let mut all = found(&table(vec![r]), 2);
        let mut cs = row("config_lock", counts(30, 3, 350, 5_000_000));
        (cs.counts.timed_holds, cs.counts.contended_hold_ns) = (10, 50_000_000);
        all.extend(found(&table(vec![cs]), 2));
        all.extend(found(&buckets(256_000, 76_800, 25_600, 1280), 2));
        all.extend(found(&buckets(256_000, 76_800, 25_600, 7680), 2));
        let members = briefly(
            (0..100)
                .map(|i| row(&format!("o+{:#x}", i * 64), counts(1500, 6, 0, 0)))
                .collect(),
        );
        all.extend(found(&grouped(members, "o[]"), 2));
        all.extend(phased(vec![
            phase(0, 1000, 0.6, true),
            phase(1000, 2000, 0.0, false),
        ]));
        all.extend(imbalance_findings(&[
            load(1, "p", 130, 1800),
            load(2, "r", 520, 40),
            load(3, "r", 300, 40),
        ]));
        all.extend(imbalance_findings(&[
            lived(4, 400, 0, 1800),
            lived(5, 600, 0, 2000),
        ]));
        let kinds: HashSet<Kind> = all.iter().map(|f| f.kind).collect();
        assert_eq!(kinds.len(), 7, "every kind: {kinds:?}");
        for f in &all {
            for words in [&f.text, &f.fix] {
                let mut rest = words.as_str();
                while let Some(open) = rest.find('{') {
                    let close = rest[open..].find('}').expect("closed") + open;
                    let key = &rest[open + 1..close];
                    assert!(f.value(key).is_some(), "{:?}: no {key} for {words}", f.kind);
                    rest = &rest[close + 1..];
                }
            }
        }
    }
}
