//! Condition variables: a wait that releases and retakes a mutex, and the signals that end
//! it.
//!
//! Job: a waiter's hold of the mutex ends inside `pthread_cond_wait` (its blame is taken
//! there); its wait for the signal is condvar idleness, blamed on the signaller; its wait to
//! retake the mutex is mutex idleness, blamed on the mutex's holder, usually the signaller.
//!
//! Not async-signal-safe; allocation-free.

use super::blocked::{record_wait, register_wait, start_wait};
use super::bookkeeping::{bookkeeping, pending};
use super::carry::{call_site, Ended};
use super::holds::{hold_started, mutex_hold_ends, mutex_may_be_waited_for, sampled_hold_ends};
use super::lock_counts;
use super::outcome::outcome_of_rc;
use super::record::{blames, charge, idleness, record};
use crate::format::WaitKind;
use crate::locks::arrivals;
use crate::locks::hold_sampling::{self, Started};
use crate::locks::wait_table::{self as table, Departed, WaiterTime};
use crate::sampler::clock::monotonic_ns;

/// `pthread_cond_wait`/`timedwait` of `cond` with `mutex` held: `block` is the real call.
/// The caller's hold of `mutex` ends inside it (its blame is taken there and recorded at
/// this context after the wait); its wait for the signal is condvar idleness, blamed on the
/// signaller; its wait to retake the mutex afterwards is mutex idleness, blamed on the
/// mutex's holder.
pub fn cond_wait(cond: usize, mutex: usize, block: impl FnOnce() -> i32) -> i32 {
    // The hold of `mutex` ends in the real call, which releases it outside the wrappers:
    // its blame is taken now, and recorded at this call's path after the wait; a hold the
    // hold sampling left unnoted takes none.
    let kept = hold_sampling::with(|s| s.take(mutex));
    let site = call_site();
    let Some((state, start, carried)) = start_wait(cond, WaitKind::CondVar, site) else {
        return block();
    };
    // The hold's blame, how many holds it stands for, and when it began (or its waiting).
    let (held, weight, held_from) = match kept {
        _ if !mutex_may_be_waited_for(mutex) => (None, 1, start),
        Some(Started::Unnoted) => (None, 1, start),
        Some(Started::Noted {
            start: from,
            weight,
            mark,
        }) => {
            let end = (start, arrivals::mark(mutex, start));
            let taken = sampled_hold_ends(state, mutex, (from, mark), end, weight);
            (taken, weight, from)
        }
        _ => match mutex_hold_ends(state, mutex, (start, arrivals::mark(mutex, start))) {
            (Some((taken, since)), noted) => {
                (Some(taken), 1, noted.map_or(since, |(from, _)| from))
            }
            (None, _) => (None, 1, start),
        },
    };
    let held = held.unwrap_or_default();
    let hold_span = start.saturating_sub(held_from);
    // The hold ends in the real call: its marks (`held.contended`) with it. glibc retakes
    // the mutex with its word at 2 whether or not anyone waits, so a mark left over would
    // count the next hold as contended.
    state.held.forget(mutex);
    let held_blames = blames(WaitKind::Mutex, mutex, held).map(|b| b.timed(start, hold_span));
    // Counted after the wait, outside the critical section.
    let count_hold = || {
        if held.total() > 0 {
            let span = Some(hold_span);
            lock_counts::contended_hold(mutex, WaitKind::Mutex, weight, span, start);
        }
    };
    let Some(blocked) = register_wait(state, cond, WaitKind::CondVar, (start, 1), (carried, site))
    else {
        let rc = block();
        count_hold();
        record(&held_blames);
        return rc;
    };
    bookkeeping(|| table::set_partner(cond, mutex));
    let rc = block();
    let (end, departed, unclaimed) = blocked.end(outcome_of_rc(rc));
    count_hold();
    let (cond_ns, mutex_ns) = match departed {
        Departed::NoWait => (0, 0),
        Departed::Blamed { woken_at, .. } => {
            (woken_at.saturating_sub(start), end.saturating_sub(woken_at))
        }
        _ => (end.saturating_sub(start), 0),
    };
    if cond_ns > 0 {
        lock_counts::waited(cond, WaitKind::CondVar, cond_ns);
    }
    // Its wait to retake the mutex, which its idleness sample names, counts for the mutex.
    if mutex_ns > 0 {
        lock_counts::waited(mutex, WaitKind::Mutex, mutex_ns);
        state.contention.note_measured();
    }
    // Its wait for the signal: recorded now, or carried into its next wait on `cond` when
    // it ended without one (the hold's blame is recorded now all the same).
    let ended = Ended {
        kind: WaitKind::CondVar,
        object: cond,
        site,
        carried: blocked.wait.carried,
        at: start + cond_ns,
        ns: cond_ns,
        departed,
        unclaimed,
    };
    let [held_exact, held_scaled] = held_blames;
    match ended.settle(state) {
        Some([cond_blamed, cond_unblamed]) => {
            let samples = [
                held_exact,
                held_scaled,
                cond_blamed,
                cond_unblamed,
                idleness(WaitKind::Mutex, mutex, mutex_ns, true).timed(end, mutex_ns),
            ];
            record_wait(state, &samples);
        }
        // Carried: the path captured stays the carried wait's.
        None => record(&held_blames),
    }
    // It holds the mutex again: its wait to retake it (as a proxy) ends now.
    if let Departed::Blamed {
        retake: Some(retaken),
        ..
    } = departed
    {
        bookkeeping(|| table::depart_proxy(retaken, monotonic_ns()));
    }
    // Waiter-time of others accrues to the new hold from a clock read last, after the
    // record and the departure, whose cache misses (the thread has just woken) would
    // otherwise count in the hold, as `acquire::mutex_hold_begins` says of a mutex's.
    if mutex_may_be_waited_for(mutex) {
        hold_started(state, mutex, WaitKind::Mutex, monotonic_ns);
    }
    rc
}

/// `pthread_cond_signal` (`n` = 1) or `broadcast` (all) of `cond`: `op` is the real call.
/// The signaller takes the waiting since the previous signal; the waiters it wakes are
/// registered as waiting for their mutex, whose holder (usually the signaller) is blamed for
/// that part.
pub fn cond_wake(cond: usize, n: u32, op: impl FnOnce() -> i32) -> i32 {
    let woke_at = std::cell::Cell::new(0);
    let taken = pending(cond, WaitKind::CondVar, || {
        let now = || {
            let now = monotonic_ns();
            woke_at.set(now);
            now
        };
        table::wake_with_proxies(cond, now, n)
    });
    let rc = op();
    if let Some(taken) = taken {
        let at = woke_at.get();
        charge(cond, WaitKind::CondVar, WaiterTime::exact(taken), (at, 0));
    }
    rc
}
