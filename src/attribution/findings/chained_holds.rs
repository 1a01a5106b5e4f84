//! Holders that wait for another lock: a lock whose holders, inside the holds others waited
//! for, were themselves waiting for a second lock (or an event), so that most of the
//! waiting for the first is the second's holder's doing (a chain of waits, the `root`
//! metric's hop: `attribution::chains`). Shortening the first lock's work does not help
//! (its holders hardly computed); taking the second lock outside the first, or shortening
//! the second's holds, does (issue 41).
//!
//! Job: [`chained_holds`] reads a lock's chains (`LockRow::chains`: its releases' blame
//! passed on, by holder site and the lock waited for) against its blame.
//!
//! Invariants: the blame passed on is part of the lock's blame (a chain carries part of a
//! release's blame, never more), so the finding costs at most what the lock's contention
//! findings would; its names (`holder`, `waited_for`, `root_holder`) are the largest hop's.
//! Pure; not async-signal-safe; single-threaded.

use super::blocked_holds::BLOCKED_SHARE;
use super::subject::Subject;
use super::{ratio, Finding, Kind, Value, MIN_CONTENDED, MIN_PRESSURE};
use crate::attribution::locks::Chain;

/// Holders that wait inside the lock, or `None`: at least [`MIN_CONTENDED`] contended
/// acquisitions, pressure at least [`MIN_PRESSURE`], and at least [`BLOCKED_SHARE`] of its
/// blame passed on along its chains (its holders waited for something else during that
/// part of the holds others waited for). Its cost is that passed-on blame: the waiting the
/// second lock's holder made through this one.
pub(super) fn chained_holds(s: &Subject) -> Option<Finding> {
    let c = s.counts;
    if c.blame_ns == 0
        || c.runtime.contended < MIN_CONTENDED
        || s.pressure.unwrap_or(0.0) < MIN_PRESSURE
    {
        return None;
    }
    let chains: Vec<&Chain> = s.rows.iter().flat_map(|r| r.chains()).collect();
    let passed = chains.iter().fold(0u64, |sum, c| sum.saturating_add(c.ns));
    let share = ratio(passed as f64, c.blame_ns as f64).min(1.0);
    if share < BLOCKED_SHARE {
        return None;
    }
    // Chains come largest first per row; across a group's rows, the largest of all.
    let top = chains
        .iter()
        .copied()
        .max_by(|a, b| a.ns.cmp(&b.ns).then_with(|| b.holder.cmp(&a.holder)))?;
    let evidence = vec![
        ("passed_ns", Value::Ns(passed)),
        ("passed_share", Value::Share(share)),
        ("blame_ns", Value::Ns(c.blame_ns)),
        ("holder", Value::Name(top.holder.caller.clone())),
        ("waited_for", Value::Name(top.to_lock.clone())),
        ("root_holder", Value::Name(top.to_holder.caller.clone())),
        ("root_ns", Value::Ns(top.ns)),
        ("wait_ns", Value::Ns(c.runtime.wait_ns)),
    ];
    let text = "its holders were waiting themselves inside the holds others waited for: \
                {passed_share} of its blame ({passed_ns} of {blame_ns}) passes on, {root_ns} \
                of it from {holder}, which waited for {waited_for}, held by {root_holder}; \
                others waited {wait_ns} for it"
        .to_owned();
    let fix = "the cause is {waited_for}'s holder, not this lock's work: in {holder}, take \
               {waited_for} before this lock or after releasing it (never wait for it while \
               holding this one), or shorten {root_holder}'s hold of {waited_for}"
        .to_owned();
    Some(s.finding(Kind::ChainedHolds, evidence, (text, fix), passed))
}
