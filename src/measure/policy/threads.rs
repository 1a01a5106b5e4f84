//! Thread ends: a joined thread is blamed for its joiner's wait, and a thread cancelled inside
//! a measured wait leaves it, unblamed.
//!
//! Not async-signal-safe; allocation-free.

use super::bookkeeping::pending;
use super::record::{blame, count_unblamed};
use crate::format::WaitKind;
use crate::locks::wait_table::{self as table, Outcome, WakerId};
use crate::sampler::clock::monotonic_ns;
use crate::sampler::counters::{self, Counter};
use crate::sampler::sync_sample::{record_at_function, record_here};
use crate::sampler::thread_state::ThreadState;
use crate::sampler::wait_cpu;

/// A thread is ending: whoever waits to join it (`thread`: its `pthread_t`) was waiting for
/// this. The blame is recorded at the caller's context (`pthread_exit`), or, when the thread
/// returned from its start routine, at `routine`.
pub fn thread_exiting(thread: usize, routine: Option<usize>) {
    let woke = pending(thread, WaitKind::Join, || {
        table::wake(
            thread,
            WaitKind::Join,
            monotonic_ns,
            u32::MAX,
            WakerId::default(),
        )
    });
    let Some(taken) = woke.map(|w| w.taken) else {
        return;
    };
    if taken == 0 {
        return;
    }
    let sample = [blame(WaitKind::Join, thread, taken)];
    let recorded = match routine {
        Some(routine) => record_at_function(&sample, routine),
        None => record_here(&sample),
    };
    if !recorded {
        counters::add(Counter::BlameUnsettled, taken);
    }
}

/// At the exit of a thread cancelled inside a measured wait (the wait never returned): the
/// wait ends now, interrupted, and nobody is blamed (the wait table ends the registration
/// a condvar signal made for it on the mutex, if any). Call on the owner thread with
/// `in_runtime` raised.
pub fn abandon_wait(state: &ThreadState) {
    // SAFETY: per the contract, on the owner thread with `in_runtime` raised.
    let wait = unsafe { (*state.owner.get()).wait.take() };
    if let Some(wait) = wait {
        wait_cpu::end(state);
        count_unblamed(table::depart(wait, monotonic_ns(), Outcome::Interrupted).0);
        // The waiting it carried in from earlier waits on the object is not recorded.
        counters::add(Counter::IdlenessUnrecorded, wait.carried.total);
    }
}
