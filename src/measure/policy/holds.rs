//! The holder's side of a hold of a lock others wait for: when it started, and the blame it
//! takes when it ends.
//!
//! Job: [`hold_started`] notes a mutex's hold start in the thread's own state
//! (`locks::hold_starts`) or tells the wait table an rwlock is held again; [`mutex_hold_ends`]
//! reads a mutex hold's waiter-time from the mutex's history (`wait_table::hold_blame`)
//! without a lock; [`sampled_hold_ends`] does the same for a hold the hold sampling kept
//! (`locks::hold_sampling`), counted as many times as it stands for. None of them writes
//! anything the waiters write.
//!
//! Not async-signal-safe (not called from the handler); allocation-free.

use super::bookkeeping::Bookkeeping;
use crate::format::WaitKind;
use crate::locks::hold_sampling;
use crate::locks::wait_table::{self as table, WaiterTime};
use crate::sampler::counters::{self, Counter};
use crate::sampler::thread_state::ThreadState;

/// The calling thread's hold of the object at `address` started at `now`, while others may
/// be waiting for it: a mutex's is noted in the thread's own state, an rwlock's told to the
/// wait table.
pub(super) fn hold_started(state: &'static ThreadState, address: usize, kind: WaitKind, now: u64) {
    let _busy = Bookkeeping::enter(state);
    if kind == WaitKind::Mutex {
        // Noted here, the hold sampling keeps nothing of it (what it kept has ended).
        hold_sampling::with(|s| s.forget(address));
        // SAFETY: on the owner thread with `in_runtime` raised (thread_state's rule).
        if !unsafe { (*state.owner.get()).holds.start(address, now) } {
            counters::add(Counter::HoldsApproximated, 1);
        }
    } else {
        table::acquired(address, kind, || now);
    }
}

/// The calling thread's hold of the mutex at `address` ends at `end`: the waiter-time it
/// takes (`None`: nobody waited for the mutex), read from the mutex's history, with when
/// that waiting began to count, and when the hold started (`None`: not noted).
pub(super) fn mutex_hold_ends(
    state: &'static ThreadState,
    address: usize,
    end: u64,
) -> (Option<(WaiterTime, u64)>, Option<u64>) {
    let _busy = Bookkeeping::enter(state);
    // SAFETY: on the owner thread with `in_runtime` raised (thread_state's rule).
    let start = unsafe { (*state.owner.get()).holds.end(address) };
    let blame = table::hold_blame(address, start, end);
    if blame.is_some_and(|b| b.approximate) {
        counters::add(Counter::HoldsApproximated, 1);
    }
    (blame.map(|b| (b.taken, b.since)), start)
}

/// The calling thread's hold of the mutex at `address`, kept by the hold sampling from
/// `start` and standing for `weight` holds, ends at `end`: the waiter-time it takes
/// (`None`: nobody waited), counted `weight` times. Hands the thread's hold sampling counts
/// on to the process's counters when due (here, outside the critical section).
pub(super) fn sampled_hold_ends(
    state: &'static ThreadState,
    address: usize,
    start: u64,
    end: u64,
    weight: u32,
) -> Option<WaiterTime> {
    let _busy = Bookkeeping::enter(state);
    fold(hold_sampling::with(|s| s.take_report_due(end)));
    let blame = table::hold_blame(address, Some(start), end)?;
    if blame.approximate {
        counters::add(Counter::HoldsApproximated, 1);
    }
    Some(blame.taken.times(weight))
}

/// Adds the calling thread's hold sampling counts since the last call to the process's
/// counters.
pub fn fold_hold_sampling() {
    fold(hold_sampling::with(|s| s.take_report()));
}

fn fold(report: hold_sampling::Report) {
    if report.drawn > 0 {
        counters::add(Counter::ContendedHolds, report.drawn);
        counters::add(Counter::ContendedHoldsNoted, report.noted);
        counters::raise(Counter::ContendedHoldPeriodPeak, report.peak_period);
    }
}
