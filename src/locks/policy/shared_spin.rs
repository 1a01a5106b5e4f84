//! The registry of process-shared spin locks (`pthread_spin_init(.., PTHREAD_PROCESS_SHARED)`).
//!
//! Job: remember their addresses so the policy never converts them: their words are seen by
//! other processes, which could not resolve a monitored reference. A fixed table of 256
//! addresses; a shared lock that finds it full is counted
//! (`shared_spin_locks_untracked`) and then treated as private, as before this registry.
//!
//! Lock-free and allocation-free; [`spin_is_shared`] is a bounded scan.

use crate::sampler::counters::{self, Counter};
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

pub fn spin_is_shared(address: usize) -> bool {
    SHARED_SPIN_LOCKS
        .iter()
        .any(|s| s.load(Ordering::Acquire) == address)
}
