//! Glue between the lock logic (`crate::locks`) and the sampler: thread wait states, measured
//! waits, synchronous blame and idleness samples.
//!
//! Job: what the interposed lock functions in `runtime/` call. Fast paths (uncontended
//! acquisitions, unlocks of mutexes nobody waited for) touch nothing here but a bucket
//! counter; everything else runs only when a thread actually waited.
//!
//! Lock calls made while the thread is inside the runtime pass straight through unmonitored.
//! Not async-signal-safe (not called from the handler); allocation-free.

use super::clock::{gettid, monotonic_ns};
use super::counters::{self, Counter};
use super::handler::{METRIC_BLAME, METRIC_IDLENESS};
use super::lifecycle::sampling_enabled;
use super::sync_sample::record_here;
use super::thread_state::{lookup, ThreadState};
use crate::locks::{mutex, spin};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Process-shared spin locks: their words are seen by other processes, which could not
/// resolve a monitored reference, so they are never converted.
static SHARED_SPIN_LOCKS: [AtomicUsize; 256] = [const { AtomicUsize::new(0) }; 256];

/// Remembers (`shared`) or forgets a process-shared spin lock's address.
pub fn note_spin_sharing(address: usize, shared: bool) {
    if shared {
        for slot in &SHARED_SPIN_LOCKS {
            if slot
                .compare_exchange(0, address, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return;
            }
        }
        counters::add(Counter::SharedSpinLocksUntracked, 1);
    } else {
        for slot in &SHARED_SPIN_LOCKS {
            let _ = slot.compare_exchange(address, 0, Ordering::AcqRel, Ordering::Acquire);
        }
    }
}

fn spin_is_shared(address: usize) -> bool {
    SHARED_SPIN_LOCKS
        .iter()
        .any(|s| s.load(Ordering::Acquire) == address)
}

/// The sampler's side of the spin-lock protocols.
pub struct SpinGlue {
    pub address: usize,
}

impl spin::SpinHooks for SpinGlue {
    fn active(&self) -> bool {
        sampling_enabled() && !spin_is_shared(self.address)
    }

    fn spinning(&self, token: Option<u32>) {
        if let Some(state) = lookup(gettid()) {
            state
                .spin_token
                .store(token.unwrap_or(0), Ordering::Relaxed);
        }
    }

    fn blame(&self, ns: u64) -> bool {
        record_here(METRIC_BLAME, ns)
    }
}

/// The calling thread's state, unless it has none or is inside the runtime.
fn monitored_thread() -> Option<&'static ThreadState> {
    if !sampling_enabled() {
        return None;
    }
    lookup(gettid()).filter(|s| !s.in_runtime.load(Ordering::Relaxed))
}

/// A contended mutex acquisition (the caller's try failed): `lock` performs the real,
/// blocking call. Measures the wait, registers it with the mutex for the holders' blame,
/// and records it as the waiter's idleness.
pub fn mutex_wait(address: usize, lock: impl FnOnce() -> i32) -> i32 {
    let Some(state) = monitored_thread() else {
        return lock();
    };
    let start = monotonic_ns();
    let Some(wait) = mutex::arrive(address, start) else {
        return lock();
    };
    state.blocked.store(true, Ordering::Relaxed);
    let rc = lock();
    state.blocked.store(false, Ordering::Relaxed);
    let end = monotonic_ns();
    let acquired = rc == 0 || rc == libc::EOWNERDEAD;
    mutex::depart(wait, end, acquired);
    if rc == libc::ETIMEDOUT {
        counters::add(Counter::LockWaitsTimedOut, 1);
    }
    // EDEADLK/EINVAL/EAGAIN come back at once: nothing was waited for.
    let waited = acquired || rc == libc::ETIMEDOUT;
    if waited && end > start && !record_here(METRIC_IDLENESS, end - start) {
        counters::add(Counter::IdlenessUnrecorded, end - start);
    }
    rc
}

/// A successful try (the uncontended path): tells a mutex others wait for that it is held
/// again. One counter read when nobody waits.
pub fn mutex_acquired(address: usize) {
    if sampling_enabled() {
        mutex::acquired(address, monotonic_ns);
    }
}

/// A mutex unlock: takes the holder's blame just before the real unlock (`unlock`) and
/// charges it to the calling context after it.
pub fn mutex_unlock(address: usize, unlock: impl FnOnce() -> i32) -> i32 {
    let settled = if sampling_enabled() {
        mutex::settle(address, monotonic_ns)
    } else {
        None
    };
    let rc = unlock();
    match settled {
        // The caller did not release it (e.g. EPERM): the owner's hold goes on.
        Some(taken) if rc != 0 => mutex::unsettle(address, taken, true),
        Some(taken) if taken > 0 && !record_here(METRIC_BLAME, taken) => {
            mutex::unsettle(address, taken, false)
        }
        _ => {}
    }
    rc
}

/// `pthread_mutex_init`/`destroy`: the mutex at `address` starts afresh.
pub fn mutex_forget(address: usize) {
    let unsettled = mutex::forget(address);
    if unsettled > 0 {
        counters::add(Counter::BlameUnsettled, unsettled);
    }
}
