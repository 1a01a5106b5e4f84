//! The holder's side of a hold of a lock others wait for: when it started, and the blame it
//! takes when it ends.
//!
//! Job: [`hold_started`] notes a mutex's hold start in the thread's own state
//! (`locks::hold_starts`) or tells the wait table an rwlock is held again; [`mutex_hold_ends`]
//! reads a mutex hold's waiter-time from the mutex's history (`wait_table::hold_blame`)
//! without a lock. Neither writes anything the waiters write.
//!
//! Not async-signal-safe (not called from the handler); allocation-free.

use super::bookkeeping::Bookkeeping;
use crate::format::WaitKind;
use crate::locks::wait_table::{self as table, WaiterTime};
use crate::sampler::counters::{self, Counter};
use crate::sampler::thread_state::ThreadState;

/// The calling thread's hold of the object at `address` started at `now`, while others may
/// be waiting for it: a mutex's is noted in the thread's own state, an rwlock's told to the
/// wait table.
pub(super) fn hold_started(state: &'static ThreadState, address: usize, kind: WaitKind, now: u64) {
    let _busy = Bookkeeping::enter(state);
    if kind == WaitKind::Mutex {
        // SAFETY: on the owner thread with `in_runtime` raised (thread_state's rule).
        if !unsafe { (*state.owner.get()).holds.start(address, now) } {
            counters::add(Counter::HoldsApproximated, 1);
        }
    } else {
        table::acquired(address, kind, || now);
    }
}

/// The calling thread's hold of the mutex at `address` ends at `end`: the waiter-time it
/// takes (`None`: nobody waited for the mutex), read from the mutex's history, and when the
/// hold started (`None`: not noted).
pub(super) fn mutex_hold_ends(
    state: &'static ThreadState,
    address: usize,
    end: u64,
) -> (Option<WaiterTime>, Option<u64>) {
    let _busy = Bookkeeping::enter(state);
    // SAFETY: on the owner thread with `in_runtime` raised (thread_state's rule).
    let start = unsafe { (*state.owner.get()).holds.end(address) };
    let blame = table::hold_blame(address, start, end);
    if blame.is_some_and(|b| b.approximate) {
        counters::add(Counter::HoldsApproximated, 1);
    }
    (blame.map(|b| b.taken), start)
}
