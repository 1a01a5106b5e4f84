//! The findings' lock rules: long critical sections, coarse locks and woken waiters
//! retaking a condition variable's mutex (contention), lock overhead and trylock spins,
//! read off the lock table with each process's wall time; asymmetric contention in a group
//! is `asymmetry`'s.
//!
//! Invariants: a group's finding of a kind stands for its members' of that kind (they get
//! none); an asymmetric group and its members get no other contention or rate finding;
//! nothing is found without lock data, counted acquisitions (rate rules) or a wall time.
//! Not async-signal-safe (allocates); single-threaded.

use super::asymmetry::asymmetric;
use super::blocked_holds::blocked_holds;
use super::chained_holds::chained_holds;
use super::retake::woken_retake;
use super::subject::{
    acquisitions, acquisitions_low, acquisitions_low_by, chance_errors, largest_site, top_site,
    Subject,
};
use super::{
    ratio, Finding, Kind, Thresholds, Value, CONTENTION_PRESSURE, CULPRIT_SHARE, JUDGED_HOLD_NS,
    LOCK_PAIR_NS, LONG_HOLD_FACTOR, MIN_ACQUISITION_SAMPLES, MIN_CONTENDED, MIN_OVERHEAD_SHARE,
    MIN_PRESSURE, ON_CPU_SHARE, SERIAL_SHARE, TRY_FAILURES_PER_ACQUISITION, TRY_FAILURE_RATIO,
    WAIT_PER_HOLDS,
};
use crate::attribution::clock::lifetime;
use crate::attribution::locks::{a_held_lock, Counts, LockRow, LockTable, Site};
use crate::format::read::ProcessProfile;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Each pid's wall time (ns): its images' lifetimes summed; none without thread times.
pub(super) fn wall_times(procs: &[&ProcessProfile]) -> HashMap<u32, u64> {
    let mut walls: HashMap<u32, u64> = HashMap::new();
    for p in procs {
        let Some(life) = lifetime(p) else {
            continue;
        };
        let wall = walls.entry(p.header.pid).or_default();
        *wall = wall.saturating_add(life);
    }
    walls
}

/// The lock findings of a table: groups first, so that a group's finding stands for its
/// members'.
pub(super) fn lock_findings(
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
        .filter(|g| g.kind.is_some_and(|k| a_held_lock(k, &g.counts)))
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
                Kind::WokenRetake,
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
        if !r.kind.is_some_and(|k| a_held_lock(k, &r.counts)) {
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
        // Holders that block, or wait for another lock, make holds long that no shortening
        // of their work helps.
        let blocked = blocked_holds(&subject);
        let chained = chained_holds(&subject);
        let waiting_holders = blocked.is_some() || chained.is_some();
        let contended = contention(&subject, thresholds, counted)
            .filter(|f| !waiting_holders || f.kind != Kind::LongCriticalSections);
        let found = [
            blocked,
            chained,
            contended,
            overhead(&subject, thresholds, counted),
            trylock_spin(&subject, r.try_site(), thresholds, counted),
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
/// acquisitions, or whose waiting costs [`CONTENTION_PRESSURE`] of its threads' running
/// time whatever its contention rate; its acquisition rate tells which (a lock contended
/// under the threshold's share has long critical sections: its waiters wait through many
/// holds), unless its holders computed inside it, others waiting, for [`SERIAL_SHARE`] of
/// the run, or one holder site's long holds made most of its waiting
/// ([`long_holding_culprit`], at any contention rate): its critical sections are then long
/// whatever the rate. Its cost is its waiting.
fn contention(s: &Subject, thresholds: Thresholds, counted: bool) -> Option<Finding> {
    let c = s.counts;
    let acquisitions = acquisitions(c, counted).filter(|&a| a > 0)?;
    let rate = c.runtime.contended as f64 / acquisitions as f64;
    let pressure = s.pressure.unwrap_or(0.0);
    let by_pressure = pressure >= CONTENTION_PRESSURE;
    // One holder site's long holds make the waiting, whatever the rate its many short
    // holds dilute (see `long_holding_culprit`).
    let culprit = long_holding_culprit(s);
    if c.runtime.contended < MIN_CONTENDED
        || pressure < MIN_PRESSURE
        || (rate < thresholds.contention && !by_pressure && culprit.is_none())
    {
        return None;
    }
    if let Some(f) = woken_retake(s, pressure) {
        return Some(f);
    }
    // Both kinds are contention the numbers prove; the rate, an estimate, only tells them
    // apart, so its point estimate decides, unless the holders' computing inside the lock
    // is itself a good part of the run (its serial work).
    let per_second = s.per_second(acquisitions as f64)?;
    let serial_share = s.per_second(c.held_ns as f64 / 1e9).unwrap_or(0.0);
    let serial = serial_share >= SERIAL_SHARE;
    let coarse = per_second >= thresholds.rate
        && rate >= thresholds.contention
        && !serial
        && culprit.is_none();
    let wait_avg = c
        .runtime
        .wait_ns
        .checked_div(c.runtime.contended)
        .unwrap_or(0);
    // Under the contention threshold a waiter waits through several holds (the holders
    // take the lock back first): its waits are not each one hold's. Serial work inside the
    // lock is its own proof: woken waiters that wait for a CPU too (more threads than CPUs)
    // wait longer than the holds, and the holds are still what they wait for.
    let through_holds = by_pressure && rate < thresholds.contention;
    if !coarse
        && !through_holds
        && !serial
        && culprit.is_none()
        && !holds_explain_waits(c, wait_avg)
    {
        return None;
    }
    let mut evidence = vec![
        ("contention_rate", Value::Share(rate)),
        ("acquisitions", Value::Count(acquisitions)),
        (
            "acquisition_samples",
            Value::Count(c.runtime.acquisition_samples),
        ),
        ("contended", Value::Count(c.runtime.contended)),
        ("acquisitions_per_s", Value::PerSecond(per_second)),
        ("pressure", Value::Share(pressure)),
        ("wait_ns", Value::Ns(c.runtime.wait_ns)),
        ("wait_avg_ns", Value::Ns(wait_avg)),
        ("peak_waiters", Value::Count(c.runtime.peak_waiters)),
        ("held_ns", Value::Ns(c.held_ns)),
        ("serial_share", Value::Share(serial_share)),
    ];
    let mut text = "{contention_rate} of ~{acquisitions} acquisitions contended ({contended}), \
                    {acquisitions_per_s} acquisitions/s, pressure {pressure}, avg wait \
                    {wait_avg_ns}"
        .to_owned();
    if let Some(hold) = c.contended_hold_avg() {
        evidence.push(("hold_avg_ns", Value::Ns(hold)));
        text.push_str(", holds avg {hold_avg_ns}");
    }
    let longest = s
        .rows
        .iter()
        .flat_map(|r| r.longest_holds())
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)));
    if let Some((site, ns)) = longest {
        evidence.push(("longest_hold_ns", Value::Ns(*ns)));
        evidence.push(("longest_hold_in", Value::Name(site.label())));
        text.push_str(", longest {longest_hold_ns} (ending in {longest_hold_in})");
    }
    if serial {
        text.push_str(
            "; its holders computed inside it while others waited for {held_ns}, \
             {serial_share} of the run, one thread at a time",
        );
    }
    if s.group {
        evidence.push(("members", Value::Count(s.rows.len() as u64)));
        text.push_str(" over its {members} locks");
        if let Some(top) = s.rows.iter().max_by_key(|r| r.counts.runtime.wait_ns) {
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
            if let Some((site, share, longest)) = &culprit {
                evidence.push(("culprit", Value::Name(site.label())));
                evidence.push(("culprit_blame_share", Value::Share(*share)));
                evidence.push(("culprit_longest_hold_ns", Value::Ns(*longest)));
                fix = "shorten the critical sections that end in {culprit} (it made \
                       {culprit_blame_share} of the waiting, with holds up to \
                       {culprit_longest_hold_ns}): move work that needs no lock out of them"
                    .to_owned();
            }
            if let Some(code) = holders_code(&s.rows) {
                evidence.push(("holders_compute_in", Value::Name(code)));
                fix.push_str("; the holders compute in {holders_compute_in}");
            } else if let Some(site) = top_site(s.rows.iter().flat_map(|r| r.holders())) {
                evidence.push(("holds_end_in", Value::Name(site)));
                fix.push_str("; the holds others waited for end in {holds_end_in}");
            }
            if serial {
                fix.push_str(
                    " (work that must stay under the lock: split the data it guards, so \
                     that threads hold different locks)",
                );
            }
            fix
        }
    };
    let kind = match coarse {
        true => Kind::CoarseLock,
        false => Kind::LongCriticalSections,
    };
    Some(s.finding(kind, evidence, (text, fix), c.runtime.wait_ns))
}

/// The holder site that took at least [`CULPRIT_SHARE`] of a lock's blame and whose
/// recorded holds lasted, on average, [`LONG_HOLD_FACTOR`] times those of every other
/// holder site: one site's long holds, not the lock's many short ones, made the waiting (a
/// mean, not the longest: one preempted hold of a lock everyone holds briefly is no
/// culprit; and a lock held at one site only is that site's, its holds the lock's). With
/// the share of the blame it took and its longest hold.
fn long_holding_culprit(s: &Subject) -> Option<(Site, f64, u64)> {
    let (site, most, total) = largest_site(s.rows.iter().flat_map(|r| r.holders()))?;
    let share = ratio(most as f64, total as f64);
    // The longest of the sites' values in `holds`: the culprit's (`its`) or the others'.
    let longest_of = |holds: fn(&LockRow) -> &[(Site, u64)], its: bool| {
        s.rows
            .iter()
            .flat_map(|r| holds(r))
            .filter(|(held_by, _)| (held_by == site) == its)
            .map(|(_, ns)| *ns)
            .max()
    };
    let mean = longest_of(LockRow::mean_holds, true)?;
    let others = longest_of(LockRow::mean_holds, false)?;
    let longest = longest_of(LockRow::longest_holds, true)?;
    (share >= CULPRIT_SHARE
        && mean as f64 >= LONG_HOLD_FACTOR * others as f64
        && holds_on_cpu(s.counts))
    .then(|| (site.clone(), share, longest))
}

/// Whether a lock's holders were on a CPU for at least [`ON_CPU_SHARE`] of its timed holds
/// others waited for (`held.contended`, their computing inside the lock while others
/// waited, over the holds' wall time), or the holds are too short in all to judge (under
/// [`JUDGED_HOLD_NS`]). Holds mostly spent off a CPU (holders descheduled mid-hold on a busy
/// machine, or blocked inside them) are long by the machine's or a blocking call's doing,
/// not by their work: no long critical sections to shorten.
fn holds_on_cpu(c: &Counts) -> bool {
    let held = c.runtime.contended_hold_ns;
    held < JUDGED_HOLD_NS || c.held_ns as f64 >= ON_CPU_SHARE * held as f64
}

/// Whether the holds others waited for are long enough for the waits (the claim of long
/// critical sections): a wait lasts at most [`WAIT_PER_HOLDS`] times the holds of the
/// waiters ahead of it (the average such hold times the most waiters at once). Waits far
/// longer were spent on something else, waking up and getting a CPU back (more threads than
/// CPUs), with the lock free. Holds not timed (spin locks, rwlocks, older profiles) cannot
/// tell: no objection.
fn holds_explain_waits(c: &Counts, wait_avg: u64) -> bool {
    c.contended_hold_avg().map_or(true, |hold| {
        wait_avg as f64
            <= WAIT_PER_HOLDS * hold.saturating_mul(c.runtime.peak_waiters.max(1)) as f64
    })
}

/// Where the holders computed while others waited, summed over `rows`: the two largest
/// sites, `function <- caller (share)`.
fn holders_code(rows: &[&LockRow]) -> Option<String> {
    let mut by: BTreeMap<&Site, u64> = BTreeMap::new();
    for (site, ns) in rows.iter().flat_map(|r| r.inside()) {
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

/// Lock overhead: a lock contended under the threshold but taken at least the rate
/// threshold a second, even at the low edge of the estimate.
fn overhead(s: &Subject, thresholds: Thresholds, counted: bool) -> Option<Finding> {
    let c = s.counts;
    let acquisitions = acquisitions(c, counted).filter(|&a| a > 0)?;
    let rate = c.runtime.contended as f64 / acquisitions as f64;
    if rate >= thresholds.contention || c.runtime.acquisition_samples < MIN_ACQUISITION_SAMPLES {
        return None;
    }
    // A lock whose waiting costs that much is a contention problem (`contention`), however
    // rarely it is contended: taking it is not what costs.
    if s.pressure.unwrap_or(0.0) >= CONTENTION_PRESSURE {
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
        (
            "acquisition_samples",
            Value::Count(c.runtime.acquisition_samples),
        ),
        ("contention_rate", Value::Share(rate)),
        ("contended", Value::Count(c.runtime.contended)),
        ("cost_share", Value::Share(cost_share)),
    ];
    let mut text = "{acquisitions_per_s} acquisitions/s (~{acquisitions}, at least \
                    {acquisitions_per_s_low}/s within the estimate's error), only \
                    {contention_rate} contended; taking it costs about {cost_share} of the \
                    threads' running time"
        .to_owned();
    if s.group {
        // Members that are over the threshold on their own, by the same evidence widened
        // for their number: among thousands of members some estimates lie several standard
        // errors high by chance (4,000 locks of under 1,000/s each: 9 of them "over" at 2
        // standard errors), so each must clear sqrt(2 ln members) of them, beyond which
        // the largest of that many normal errors rarely lies; and the busiest member's
        // estimate (rough: a member's few samples each stand for all the acquisitions of
        // its thread since the one before).
        let errors = chance_errors(s.rows.len());
        let over = s
            .rows
            .iter()
            .filter(|r| r.counts.runtime.acquisition_samples >= MIN_ACQUISITION_SAMPLES)
            .filter_map(|r| s.per_second(acquisitions_low_by(&r.counts, errors)))
            .filter(|&low| low >= thresholds.rate)
            .count() as u64;
        let busiest = s
            .rows
            .iter()
            .filter_map(|r| s.per_second(r.counts.runtime.acquisitions as f64))
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
    let fix = match s.group {
        true => {
            "the cost is in taking these locks at all: use atomics or per-thread data for what \
             they guard, a cheaper lock (a spin lock for a few instructions), or take them \
             less often (batch the updates)"
        }
        false => {
            "the cost is in taking the lock at all: use atomics or per-thread data for what it \
             guards, a cheaper lock (a spin lock for a few instructions), or take it less \
             often (batch the updates)"
        }
    };
    let cost_ns = (acquisitions_low(c) * LOCK_PAIR_NS) as u64;
    Some(s.finding(
        Kind::LockOverhead,
        evidence,
        (text, fix.to_owned()),
        cost_ns,
    ))
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
    let failed_per_second = s.per_second(c.runtime.try_failed as f64)?;
    let failure_ratio = ratio(c.runtime.try_failed as f64, c.try_attempts() as f64);
    let acquisitions = acquisitions(c, counted)?;
    let per_acquisition = c.runtime.try_failed as f64 / acquisitions.max(1) as f64;
    if failed_per_second < thresholds.rate
        || failure_ratio < TRY_FAILURE_RATIO
        || per_acquisition < TRY_FAILURES_PER_ACQUISITION
    {
        return None;
    }
    let mut evidence = vec![
        ("try_failed", Value::Count(c.runtime.try_failed)),
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
    // The spinning itself is not timed: each failed try at the price of a lock pair (a
    // floor), with the lock's waiting.
    let cost_ns = c
        .runtime
        .wait_ns
        .saturating_add((c.runtime.try_failed as f64 * LOCK_PAIR_NS) as u64);
    Some(s.finding(Kind::TrylockSpin, evidence, (text, fix.to_owned()), cost_ns))
}
