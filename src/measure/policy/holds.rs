//! The holder's side of a hold of a lock others wait for: when it started, and the blame it
//! takes when it ends.
//!
//! Job: [`hold_started`] notes a mutex's hold start in the thread's own state
//! (`locks::hold_starts`), with its mark of the mutex's waiter integral (`locks::arrivals`),
//! or tells the wait table an rwlock is held again; [`mutex_hold_ends`] reads a mutex hold's
//! waiter-time: the waiters registered one by one from the mutex's history
//! (`wait_table::hold_blame`) without a lock, the others from the integral, exactly (the
//! history's estimate of them, scaled from the measured ones, only when the integral
//! counted another mutex's waiters too); [`sampled_hold_ends`] does the same for a hold the
//! hold sampling kept (`locks::hold_sampling`), counted as many times as it stands for.
//! None of them writes anything the waiters write.
//!
//! Not async-signal-safe (not called from the handler); allocation-free.

use super::bookkeeping::{may_be_pending, Bookkeeping};
use crate::format::WaitKind;
use crate::locks::arrivals::{self, Mark};
use crate::locks::hold_sampling;
use crate::locks::wait_table::{self as table, WaiterTime};
use crate::sampler::counters::{self, Counter};
use crate::sampler::thread_state::ThreadState;

/// A noted hold's start, and its mark of its mutex's integral then (`None`: not known).
pub(super) type NotedStart = (u64, Option<Mark>);

/// Whether a hold of the mutex at `address` starting or ending now may take blame: measured
/// waiters are registered with it (or with another object of its wait-table bucket), or the
/// integral of the others counts one. One or three loads.
#[inline(always)]
pub fn mutex_may_be_waited_for(address: usize) -> bool {
    may_be_pending(address, WaitKind::Mutex) || arrivals::unregistered_waiting(address)
}

/// The calling thread's hold of the object at `address` starts now, while others may be
/// waiting for it: a mutex's is noted in the thread's own state, with the time `clock`
/// reads last, after the loads of the note's place and of the mutex's integral
/// (`arrivals::mark_then`); an rwlock's told to the wait table. Returns the hold's start.
/// The clock comes last because a thread that has just taken a mutex it waited for has
/// usually just woken, and the lines it touches may be in another CPU's cache: misses
/// after the clock read would count in the hold (see `acquire::mutex_hold_begins`).
pub(super) fn hold_started(
    state: &'static ThreadState,
    address: usize,
    kind: WaitKind,
    clock: impl FnOnce() -> u64,
) -> u64 {
    if kind != WaitKind::Mutex {
        let now = clock();
        hold_resumed(state, address, kind, now, None);
        return now;
    }
    note_hold(state, address, || {
        let (now, mark) = arrivals::mark_then(address, clock);
        (now, Some(mark))
    })
}

/// [`hold_started`] for a hold that started at `now` and is noted again (its release
/// failed), with its mark of the mutex's integral if it had one.
pub(super) fn hold_resumed(
    state: &'static ThreadState,
    address: usize,
    kind: WaitKind,
    now: u64,
    mark: Option<Mark>,
) {
    if kind == WaitKind::Mutex {
        note_hold(state, address, || (now, mark));
    } else {
        let _busy = Bookkeeping::enter(state);
        table::acquired(address, kind, || now);
    }
}

/// Notes a mutex's hold start, and its mark, that `note` gives once the note's place is
/// loaded, in the thread's own state; returns the start.
fn note_hold(
    state: &'static ThreadState,
    address: usize,
    note: impl FnOnce() -> (u64, Option<Mark>),
) -> u64 {
    let _busy = Bookkeeping::enter(state);
    // Noted here, the hold sampling keeps nothing of it (what it kept has ended).
    hold_sampling::with(|s| s.forget(address));
    // SAFETY: on the owner thread with `in_runtime` raised (thread_state's rule).
    let (now, kept_all) = unsafe { (*state.owner.get()).holds.start_then(address, note) };
    if !kept_all {
        counters::add(Counter::HoldsApproximated, 1);
    }
    now
}

/// The calling thread's hold of the mutex at `address` ends at `end`, when the mutex's
/// integral read `end_mark`: the waiter-time it takes (`None`: nobody waited for the
/// mutex), with when that waiting began to count, and when the hold started and its mark
/// (`None`: not noted).
pub(super) fn mutex_hold_ends(
    state: &'static ThreadState,
    address: usize,
    (end, end_mark): (u64, Mark),
) -> (Option<(WaiterTime, u64)>, Option<NotedStart>) {
    let _busy = Bookkeeping::enter(state);
    // SAFETY: on the owner thread with `in_runtime` raised (thread_state's rule).
    let noted = unsafe { (*state.owner.get()).holds.end(address) };
    let start = noted.map(|(start, _)| start);
    let blame = table::hold_blame(address, start, end);
    if blame.is_some_and(|b| b.approximate) {
        counters::add(Counter::HoldsApproximated, 1);
    }
    let registered = blame.map(|b| b.taken);
    let since = blame.map_or(start.unwrap_or(end), |b| b.since);
    let unregistered = match noted {
        Some((_, Some(start_mark))) => end_mark.waited_since(start_mark, address),
        // Not noted: it began with nobody counted in the integral.
        None => end_mark.waited_in_episode(address),
        // Evicted: its start is not known.
        Some((_, None)) => None,
    };
    (
        with_unregistered(registered, unregistered).map(|t| (t, since)),
        noted,
    )
}

/// The calling thread's hold of the mutex at `address`, kept by the hold sampling from
/// `start` (the integral's mark then) and standing for `weight` holds, ends at `end` (the
/// integral's mark then): the waiter-time it takes (`None`: nobody waited), counted
/// `weight` times. Hands the thread's hold sampling counts on to the process's counters
/// when due (here, outside the critical section).
pub(super) fn sampled_hold_ends(
    state: &'static ThreadState,
    address: usize,
    (start, start_mark): (u64, Mark),
    (end, end_mark): (u64, Mark),
    weight: u32,
) -> Option<WaiterTime> {
    let _busy = Bookkeeping::enter(state);
    fold(hold_sampling::with(|s| s.take_report_due(end)));
    let blame = table::hold_blame(address, Some(start), end);
    if blame.is_some_and(|b| b.approximate) {
        counters::add(Counter::HoldsApproximated, 1);
    }
    let unregistered = end_mark.waited_since(start_mark, address);
    with_unregistered(blame.map(|b| b.taken), unregistered).map(|t| t.times(weight))
}

/// A mutex hold's waiter-time from the wait table's history (`registered`) and the
/// integral (`unregistered`: the waiting of the waiters it counts during the hold): the
/// waiters the history knows one by one (its exact part) and, exactly, the others; when the
/// integral cannot tell this mutex's waiters from another's (or the hold's start is not
/// known), the history's own estimate of them (its scaled part, calibrated by the
/// analysis), counted.
fn with_unregistered(
    registered: Option<WaiterTime>,
    unregistered: Option<u64>,
) -> Option<WaiterTime> {
    match unregistered {
        Some(others) => {
            let exact = registered.map_or(0, |r| r.exact).saturating_add(others);
            (exact > 0).then_some(WaiterTime::exact(exact))
        }
        None => {
            if registered.is_some_and(|r| r.scaled > 0) {
                counters::add(Counter::HoldsBlameEstimated, 1);
            }
            registered
        }
    }
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
