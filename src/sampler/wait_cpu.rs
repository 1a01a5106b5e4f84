//! The CPU time a thread used before a measured wait, when its sample lands inside the wait.
//!
//! Job: a thread's work sample weighs the CPU time it used since its previous sample
//! (`handler`). A sample that lands while the thread is in a measured wait (blocked, or
//! spinning on a spin lock) records nothing there: the wait's measurement covers the time
//! inside it, as idleness. But the CPU time since the previous sample is mostly the work the
//! thread did *before* the wait; dropping it with the sample lost that work. It mattered
//! most where it is least visible: a thread that wakes for a few microseconds of work
//! between blocking calls uses much of its CPU time in the kernel, and the timer's signal
//! reaches it on the way back from the blocking call, inside the wait (about a third of such
//! threads' work was lost; `tests/diff.rs`'s normalisation test saw it as a share of a
//! few points that moved from run to run).
//!
//! So the first sample inside each wait carries the part of its time that came before the
//! wait to the thread's next work sample, and only the rest (inside the wait, which the
//! wait's idleness counts) is dropped. That part is estimated from below: the time less the
//! wall time the wait has lasted (the thread's CPU time inside the wait is at most that).
//! For a spin, or a mutex's spin before it sleeps, the two are the same; for a wait the
//! thread slept in, the estimate is usually nothing (the sample is taken on its way back,
//! after the sleep), as before. A later sample inside the same wait carries nothing. No
//! wait's CPU time is ever counted as work this way.
//!
//! The carried time is charged at the path of the thread's next work sample, as time
//! deferred from inside the runtime is: the sampling's usual approximation (a sample stands
//! for the CPU time since the one before). It is work only: not `held.contended`, which a
//! sample charges for the lock held at its own instant.
//!
//! Async-signal-safe: atomics of the thread's own state; the handler and the owner thread
//! are the only users, and the handler runs on the owner thread.

use super::clock::monotonic_ns;
use super::thread_state::ThreadState;
use std::sync::atomic::Ordering;

/// [`ThreadState::wait_began_ns`] when no sample is owed a part: not in a wait, or its first
/// sample has been taken.
const TAKEN: u64 = 0;

/// The thread enters a measured wait (blocking or spinning) that began at `start`
/// (monotonic ns): a sample landing in it is covered by the wait's measurement.
pub fn begin(state: &ThreadState, start: u64) {
    state.wait_began_ns.store(start.max(1), Ordering::Relaxed);
    state.blocked.store(true, Ordering::Relaxed);
}

/// The thread's measured wait ended.
pub fn end(state: &ThreadState) {
    state.blocked.store(false, Ordering::Relaxed);
    state.wait_began_ns.store(TAKEN, Ordering::Relaxed);
}

/// A sample landed inside a measured wait, with `cpu_ns` of the thread's CPU time since its
/// previous sample: keeps the part that came before the wait for the next work sample.
/// Called by the handler only.
pub fn sampled_inside(state: &ThreadState, cpu_ns: u64) {
    let before = match state.wait_began_ns.swap(TAKEN, Ordering::Relaxed) {
        TAKEN => 0,
        start => cpu_ns.saturating_sub(monotonic_ns().saturating_sub(start)),
    };
    if before > 0 {
        state.carried_cpu_ns.fetch_add(before, Ordering::Relaxed);
    }
}

/// The CPU time carried from before the thread's waits, for its work sample to add (and
/// no longer carried). Called by the handler only.
pub fn take_carried(state: &ThreadState) -> u64 {
    state.carried_cpu_ns.swap(0, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thread_state::ThreadState;

    #[test]
    fn a_waits_first_sample_carries_what_came_before_the_wait_and_a_second_none() {
        let s = ThreadState::new();
        let now = monotonic_ns();
        // Waiting for 1 ms so far (at least: the clock moves on), of 3 ms since the
        // previous sample: at most 2 ms came before it.
        begin(&s, now - 1_000_000);
        sampled_inside(&s, 3_000_000);
        sampled_inside(&s, 3_000_000);
        end(&s);
        let carried = take_carried(&s);
        assert!(
            (1_900_000..=2_000_000).contains(&carried),
            "carried {carried}"
        );
        assert_eq!(take_carried(&s), 0, "taken once");
    }

    #[test]
    fn a_wait_longer_than_the_time_since_the_previous_sample_carries_nothing() {
        let s = ThreadState::new();
        begin(&s, monotonic_ns() - 5_000_000);
        sampled_inside(&s, 3_000_000);
        end(&s);
        assert_eq!(take_carried(&s), 0);
    }

    #[test]
    fn outside_a_wait_nothing_is_carried() {
        let s = ThreadState::new();
        begin(&s, monotonic_ns());
        end(&s);
        sampled_inside(&s, 500);
        assert_eq!(take_carried(&s), 0);
    }
}
