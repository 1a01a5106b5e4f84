//! Woken waiters retake the mutex: a lock whose waiting is mostly threads woken from a
//! condition variable that must take its mutex again inside `pthread_cond_wait` (the waker
//! holds it after waking them, or a broadcast wakes many for one mutex). Neither a stripe
//! nor shorter critical sections of the waiters help; waking after the unlock does.
//!
//! Pure; not async-signal-safe; single-threaded.

use super::subject::{top_site, Subject};
use super::{ratio, Finding, Kind, Value, RETAKE_SHARE};
use std::collections::BTreeMap;

/// Woken waiters retaking the mutex: at least [`RETAKE_SHARE`] of the lock's waiting (by its
/// waiter sites, from samples) is inside `pthread_cond_*wait`, threads woken from a
/// condition variable waiting again for its mutex. Its cost is the lock's waiting.
pub(super) fn woken_retake(s: &Subject, pressure: f64) -> Option<Finding> {
    let mut by: BTreeMap<&str, u64> = BTreeMap::new();
    let mut total = 0u64;
    for (site, ns) in s.rows.iter().flat_map(|r| r.waiters()) {
        total = total.saturating_add(*ns);
        if is_condvar_wait(&site.lock_function) {
            let sum = by.entry(&site.caller).or_default();
            *sum = sum.saturating_add(*ns);
        }
    }
    let retake = by.values().fold(0u64, |t, &ns| t.saturating_add(ns));
    let share = ratio(retake as f64, total as f64);
    if share < RETAKE_SHARE {
        return None;
    }
    let c = s.counts;
    let (woken_in, in_site) = by
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)))
        .map(|(caller, ns)| (caller.to_owned(), ns))?;
    // The lock's exact waiting, split by the waiter sites' shares of its samples.
    let of_waiting = |ns: u64| (c.runtime.wait_ns as f64 * ratio(ns as f64, total as f64)) as u64;
    let mut evidence = vec![
        ("retake_share", Value::Share(share)),
        ("retake_wait_ns", Value::Ns(of_waiting(retake))),
        ("woken_in", Value::Name(woken_in)),
        ("woken_in_ns", Value::Ns(of_waiting(in_site))),
        ("contended", Value::Count(c.runtime.contended)),
        ("pressure", Value::Share(pressure)),
        ("wait_ns", Value::Ns(c.runtime.wait_ns)),
        ("peak_waiters", Value::Count(c.runtime.peak_waiters)),
    ];
    // A group's waiting is for its members: said where the mutex is named.
    let mutex = match s.group {
        true => {
            evidence.push(("members", Value::Count(s.rows.len() as u64)));
            "one of its {members} mutexes"
        }
        false => "this mutex",
    };
    let mut text = format!(
        "{{retake_share}} of its waiting ({{retake_wait_ns}}) is threads woken from a \
         condition variable waiting again for {mutex}, {{woken_in_ns}} of it in \
         {{woken_in}}; {{contended}} contended acquisitions, pressure {{pressure}}"
    );
    if let Some(hold) = c.contended_hold_avg() {
        evidence.push(("hold_avg_ns", Value::Ns(hold)));
        text.push_str(", holds avg {hold_avg_ns}");
    }
    let mut fix = "wake after unlocking: call pthread_cond_signal or _broadcast \
                   (notify_one, notify_all) once the mutex is released, and move work done \
                   under it after the wake out of it"
        .to_owned();
    if let Some(site) = top_site(s.rows.iter().flat_map(|r| r.holders())) {
        evidence.push(("holds_end_in", Value::Name(site)));
        text.push_str("; the holds they waited for end in {holds_end_in}");
        fix.push_str(" ({holds_end_in})");
    }
    if c.runtime.peak_waiters > 1 {
        // Several waited for it at once: a broadcast's herd, each woken one in turn.
        fix.push_str(
            "; wake only the threads that can go on (signal rather than broadcast): the \
             woken all need the mutex, {peak_waiters} at once",
        );
    }
    Some(s.finding(Kind::WokenRetake, evidence, (text, fix), c.runtime.wait_ns))
}

/// Whether an interposed function is a condition variable's wait (whose mutex waiting is
/// the retake after the wake).
fn is_condvar_wait(function: &str) -> bool {
    function.starts_with("pthread_cond_") && function.ends_with("wait")
}
