//! Holders that block: a lock whose holders spent a good part of the holds others waited
//! for blocked in a call (a sleep, a poll, a wait for a signal, another lock or an event):
//! its waiters wait for that call, not for work, so no shortening of the work inside helps,
//! and moving the call out of the critical section does (issue 41).
//!
//! Job: [`blocked_holds`] reads a lock's `held.blocked` (`Counts::blocked_ns`, per call
//! site in `LockRow::blocked`) against the wall time of its timed contended holds, or its
//! blame when those are not timed. Pure; not async-signal-safe; single-threaded.

use super::subject::{largest_site, Subject};
use super::{ratio, Finding, Kind, Value, MIN_CONTENDED, MIN_PRESSURE};

/// The least share of a lock's timed holds others waited for (wall time) its holders
/// spent blocked in calls for them to be the finding: a quarter, as long critical
/// sections need a quarter of them computing (`ON_CPU_SHARE`).
pub const BLOCKED_SHARE: f64 = 0.25;

/// Holders that block inside the lock, or `None`: at least [`MIN_CONTENDED`] contended
/// acquisitions, pressure at least [`MIN_PRESSURE`], and its holders blocked in calls for
/// at least [`BLOCKED_SHARE`] of the holds others waited for. Its cost is the share of the
/// lock's blame those blocked stretches make, by their share of the holds.
pub(super) fn blocked_holds(s: &Subject) -> Option<Finding> {
    let c = s.counts;
    let blocked = c.blocked_ns;
    if blocked == 0
        || c.runtime.contended < MIN_CONTENDED
        || s.pressure.unwrap_or(0.0) < MIN_PRESSURE
    {
        return None;
    }
    // The holds' wall time where timed; else the blame, which is at least the holds'
    // time while one waited.
    let holds = match c.runtime.contended_hold_ns {
        0 => c.blame_ns,
        ns => ns,
    };
    let share = ratio(blocked as f64, holds as f64).min(1.0);
    if holds == 0 || share < BLOCKED_SHARE {
        return None;
    }
    let (site, in_site, _) = largest_site(s.rows.iter().flat_map(|r| r.blocked()))?;
    let cost = (c.blame_ns as f64 * share) as u64;
    let evidence = vec![
        ("blocked_ns", Value::Ns(blocked)),
        ("blocked_share", Value::Share(share)),
        ("holds_ns", Value::Ns(holds)),
        ("blocked_in", Value::Name(site.label())),
        ("blocked_in_ns", Value::Ns(in_site)),
        ("wait_ns", Value::Ns(c.runtime.wait_ns)),
    ];
    let text = "its holders were blocked in calls for {blocked_ns} inside the holds others \
                waited for ({blocked_share} of their {holds_ns}), {blocked_in_ns} of it in \
                {blocked_in}; others waited {wait_ns} for it"
        .to_owned();
    let fix = "move {blocked_in} out of the critical section: do the I/O, sleep or wait \
               before taking the lock or after releasing it (copy what it needs while \
               holding it), or hand it to another thread"
        .to_owned();
    Some(s.finding(Kind::BlockedHolds, evidence, (text, fix), cost))
}
