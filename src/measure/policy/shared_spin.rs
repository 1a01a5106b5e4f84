//! The registry of process-shared spin locks (`pthread_spin_init(.., PTHREAD_PROCESS_SHARED)`).
//!
//! Job: remember their addresses so the policy never converts them: their words are seen by
//! other processes, which could not resolve a monitored reference. A fixed table of 256
//! addresses; a shared lock that finds it full is counted
//! (`shared_spin_locks_untracked`) and then treated as private, as before this registry.
//!
//! Private spin locks never touch the table: while no shared lock is registered (the
//! common case), forgetting an address and asking whether one is shared read one counter
//! and return, so a program that creates and destroys millions of private spin locks pays
//! one load per init and destroy. Only a registered address is ever written back.
//!
//! Lock-free and allocation-free; [`spin_is_shared`] is a bounded scan, done only while a
//! shared lock is registered.

use crate::sampler::counters::{self, Counter};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Process-shared spin locks: their words are seen by other processes, which could not
/// resolve a monitored reference, so they are never converted.
static SHARED_SPIN_LOCKS: [AtomicUsize; 256] = [const { AtomicUsize::new(0) }; 256];

/// Slots of [`SHARED_SPIN_LOCKS`] claimed or being claimed: raised before a slot is
/// taken and lowered after one is given back, so while it reads 0 no slot holds an
/// address.
static REGISTERED: AtomicUsize = AtomicUsize::new(0);

/// Remembers (`shared`) or forgets a process-shared spin lock's address.
pub fn note_spin_sharing(address: usize, shared: bool) {
    if shared {
        REGISTERED.fetch_add(1, Ordering::SeqCst);
        for slot in &SHARED_SPIN_LOCKS {
            if slot
                .compare_exchange(0, address, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return;
            }
        }
        REGISTERED.fetch_sub(1, Ordering::SeqCst);
        counters::add(Counter::SharedSpinLocksUntracked, 1);
    } else if REGISTERED.load(Ordering::Acquire) != 0 {
        for slot in &SHARED_SPIN_LOCKS {
            if slot.load(Ordering::Relaxed) == address
                && slot
                    .compare_exchange(address, 0, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                REGISTERED.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

/// Whether `address` is a registered process-shared spin lock: one load while none is.
pub fn spin_is_shared(address: usize) -> bool {
    REGISTERED.load(Ordering::Acquire) != 0
        && SHARED_SPIN_LOCKS
            .iter()
            .any(|s| s.load(Ordering::Acquire) == address)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_lock_is_remembered_until_forgotten_and_private_ones_leave_no_trace() {
        // Addresses no other test registers (the table is process-wide).
        let (shared, private) = (0x5eed_0000_usize, 0x5eed_0040_usize);
        note_spin_sharing(private, false);
        assert!(!spin_is_shared(private));
        note_spin_sharing(shared, true);
        assert!(spin_is_shared(shared));
        assert!(!spin_is_shared(private));
        note_spin_sharing(private, false);
        assert!(
            spin_is_shared(shared),
            "forgetting another address keeps it"
        );
        note_spin_sharing(shared, false);
        assert!(!spin_is_shared(shared));
        assert!(SHARED_SPIN_LOCKS
            .iter()
            .all(|s| s.load(Ordering::Relaxed) != shared));
    }
}
