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
//!   lock* (quadrant 2), unless its holders computed inside it, others waiting, for at least
//!   [`SERIAL_SHARE`] of the run: then the work inside it is what the program waits for, one
//!   thread at a time, and its critical sections are long whatever the rate (four threads
//!   doing two thirds of their work inside one mutex are helped by moving work out of it,
//!   not by atomics or stripes); a lock whose waiting is at least [`CONTENTION_PRESSURE`] of its
//!   threads' running time is a contention problem whatever its contention rate, and under
//!   the contention threshold it has long critical sections (its holders take it back
//!   before the woken waiters run, who wait through many holds: rarely contended, costly);
//! - a contention problem whose waiting is mostly, at least [`RETAKE_SHARE`], threads woken
//!   from a condition variable retaking its mutex (inside `pthread_cond_wait`) is *woken
//!   waiters retake the mutex*: the waker holds it after waking them (RocksDB's per-writer
//!   mutexes, signalled under the lock), or a broadcast wakes many for one mutex; neither
//!   a stripe nor shorter critical sections of the waiters help, waking after the unlock does;
//! - one under the contention threshold, and under [`CONTENTION_PRESSURE`], but taken at
//!   least the rate threshold a second is *lock overhead* (quadrant 4), found through its
//!   group when no member is on its own;
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
//! Every finding states what it costs the program ([`Finding::cost_ns`]: the threads' time
//! the problem takes, the waiting it explains or the work it adds), and findings are ranked
//! by it, the costliest first: a rule's rate or ratio decides *whether* something is a
//! problem and *which*, never how much it matters.
//!
//! Invariants: a lock table that is unavailable, a process whose acquisitions were not
//! counted, or a profile without thread times gives no lock finding that needs what is
//! missing (no trylock site: the finding names none); a group's finding stands for its
//! members' of the same kind (they get none); findings come ordered by cost, the costliest
//! first, equal costs by [`Kind`], then groups before locks, each in the lock table's order
//! (blame first). Every `{key}` of a finding's words names an entry of its evidence. Not
//! async-signal-safe (allocates); single-threaded.
//!
//! Files: this one holds the thresholds, the finding's types and [`findings`]; the rules
//! are in `lock_rules.rs` (the lock table, with `retake.rs`, `blocked_holds.rs`,
//! `chained_holds.rs` and `asymmetry.rs`; `subject.rs` is what they read), `phases.rs` (the
//! timeline's phases) and `imbalance.rs` (threads and stages).

mod asymmetry;
mod blocked_holds;
mod chained_holds;
mod imbalance;
mod lock_rules;
mod phases;
mod retake;
mod roles;
mod subject;
#[cfg(test)]
mod tests;

use super::locks::LockTable;
use super::symbolize::Symbolizer;
use super::timeline::Timeline;
use super::{select_processes, AttributionError, Filter};
use crate::format::read::{ProcessProfile, Profile};
use crate::format::WaitKind;
use imbalance::{imbalance_findings, thread_loads};
use lock_rules::{lock_findings, wall_times};
use phases::phase_findings;

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
/// The critical section pressure at and above which a lock is a contention problem
/// whatever its contention rate: its waiting costs a tenth of its threads' running time.
/// (A lock its holders take back before the woken waiters run is contended on few of its
/// acquisitions, yet its waiters wait through many holds.)
pub const CONTENTION_PRESSURE: f64 = 0.10;
/// The least share of the run's wall time a lock's holders must compute inside it while
/// others wait (`held.contended` over wall time: the lock's serial work) for its contention
/// to be long critical sections at any acquisition rate: work the program runs one thread
/// at a time for a quarter of its run caps its speedup under 4x (Amdahl).
pub const SERIAL_SHARE: f64 = 0.25;
/// How many times as long as every other holder site's, on average, the holds of a lock's
/// culprit (the holder site that took most of its blame, at least [`CULPRIT_SHARE`] of it)
/// must last for its contention to be that site's long critical sections, whatever the
/// rate (an auditor holding a ledger for milliseconds among thousands of short sales: a
/// rate diluted by short acquirers called it a coarse lock to stripe).
pub const LONG_HOLD_FACTOR: f64 = 4.0;
/// The least share of a lock's timed holds others waited for that its holders must have
/// spent computing (`held.contended`) for one holder site's long holds to be its long
/// critical sections (see [`LONG_HOLD_FACTOR`]): memcached's workers, descheduled mid-hold
/// on a busy machine, hold its mutexes for milliseconds of which they compute microseconds.
pub const ON_CPU_SHARE: f64 = 0.25;
/// The least wall time of a lock's timed holds others waited for over which
/// [`ON_CPU_SHARE`] is judged: 20 of the CPU timer's samples at its default 200 Hz.
pub const JUDGED_HOLD_NS: u64 = 100_000_000;
/// The least share of a lock's blame its culprit holder site takes (see
/// [`LONG_HOLD_FACTOR`]).
pub const CULPRIT_SHARE: f64 = 0.5;
/// The least share of a contended mutex's waiting that threads woken from a condition
/// variable spend retaking it (waiter sites in `pthread_cond_*wait`) for the contention to
/// be theirs: woken waiters retaking the mutex.
pub const RETAKE_SHARE: f64 = 0.5;
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
/// [`LOCK_PAIR_NS`] each, must cost for lock overhead: under 1% no change to the locking
/// repays its risk (memcached's item locks and RocksDB's mutexes cost about 0.1%).
pub const MIN_OVERHEAD_SHARE: f64 = 0.01;
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
    WokenRetake,
    AsymmetricContention,
    TrylockSpin,
    LockOverhead,
    PhasedContention,
    LoadImbalance,
    BlockedHolds,
    ChainedHolds,
}

impl Kind {
    /// The stable, machine-readable name (JSON `kind`).
    pub fn id(self) -> &'static str {
        match self {
            Kind::LongCriticalSections => "long_critical_sections",
            Kind::CoarseLock => "coarse_lock",
            Kind::WokenRetake => "woken_retake",
            Kind::AsymmetricContention => "asymmetric_contention",
            Kind::TrylockSpin => "trylock_spin",
            Kind::LockOverhead => "lock_overhead",
            Kind::PhasedContention => "phased_contention",
            Kind::LoadImbalance => "load_imbalance",
            Kind::BlockedHolds => "blocked_holds",
            Kind::ChainedHolds => "chained_holds",
        }
    }

    /// The name in words.
    pub fn title(self) -> &'static str {
        match self {
            Kind::LongCriticalSections => "long critical sections",
            Kind::CoarseLock => "coarse lock",
            Kind::WokenRetake => "woken waiters retake the mutex",
            Kind::AsymmetricContention => "asymmetric contention",
            Kind::TrylockSpin => "trylock spin",
            Kind::LockOverhead => "lock overhead",
            Kind::PhasedContention => "phased contention",
            Kind::LoadImbalance => "load imbalance",
            Kind::BlockedHolds => "holders block inside the lock",
            Kind::ChainedHolds => "holders wait for another lock inside the lock",
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
    /// What the problem costs the program (ns of its threads' time), what findings are
    /// ranked by: the lock's waiting (contention, asymmetry, phases: the waiting of the
    /// high phases), the acquisitions' cost at [`LOCK_PAIR_NS`] (lock overhead; failed
    /// trylocks at the same price, with the lock's waiting, for a trylock spin), the waiting
    /// stage's waiting or the least loaded thread's idle time (load imbalance).
    pub cost_ns: u64,
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

/// The findings of the processes `filter` selects (a thread filter selects its process:
/// findings are about locks and stages, not one thread), with `table` their lock table and
/// `timeline` the timeline of all their locks ([`super::timeline::of_every_lock`]; none when not laid out).
pub fn findings(
    profile: &Profile,
    filter: Filter,
    table: &LockTable,
    timeline: Option<&Timeline>,
    thresholds: Thresholds,
    symbolizer: &mut Symbolizer,
) -> Result<Vec<Finding>, AttributionError> {
    let selected = select_processes(profile, filter)?;
    let procs: Vec<&ProcessProfile> = selected.iter().map(|&p| &profile.processes[p]).collect();
    let mut out = lock_findings(table, &wall_times(&procs), thresholds);
    out.extend(timeline.map_or_else(Vec::new, phase_findings));
    out.extend(imbalance_findings(&thread_loads(&procs, symbolizer)));
    rank(&mut out);
    Ok(out)
}

/// Orders findings by cost, the costliest first, equal costs by [`Kind`]; stable, so that
/// equal ones keep the rules' order (groups before locks, the lock table's order).
fn rank(found: &mut [Finding]) {
    found.sort_by(|a, b| b.cost_ns.cmp(&a.cost_ns).then(a.kind.cmp(&b.kind)));
}

/// `part / whole` (0 when `whole` is 0).
fn ratio(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        part / whole
    } else {
        0.0
    }
}
