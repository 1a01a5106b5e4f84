//! Which mutexes have a thread in a contended acquisition right now, measured or not: the
//! evidence of a waiter that the sampling handler's `held.contended` trusts over glibc's
//! lock word where that word says nothing.
//!
//! Job: glibc sets a mutex's word to "waiters may sleep" (2) whenever a woken waiter takes
//! it, whether or not anyone else waits: the hold of a thread that waited for the mutex
//! therefore reads as contended from its start, though its waiters may arrive only later
//! (2 threads taking turns at 20 us holds: +10-15% of `held.contended`, issue 38). And the
//! wait table knows only the measured waiters (contention sampling skips most at a high
//! rate). So every contended acquisition of a mutex, measured or not, counts itself here
//! from just before its real lock call until it returns ([`arrive`], [`depart`]), and the
//! handler asks [`waiting`] for a mutex whose word may be of its holder's own making.
//!
//! Invariants:
//! - A counter per hash of the mutex's address ([`SLOTS`] of them, 4 bytes each): two
//!   mutexes may share one, so [`waiting`] may say yes for a mutex whose waiters are
//!   another's (an over-count, never an under-count, of interposed waiters).
//! - [`arrive`] and [`depart`] pair up on one thread around one real call; a thread that
//!   never returns from the call (killed inside it) leaves its count behind.
//! - A fork child starts from zero ([`reset_after_fork`]): the parent's waiting threads are
//!   not in it.
//!
//! Lock-free and allocation-free; [`waiting`] is a load: async-signal-safe.

use std::sync::atomic::{AtomicU32, Ordering};

/// Counters (a power of two).
pub const SLOTS: usize = 1024;

static WAITING: [AtomicU32; SLOTS] = [const { AtomicU32::new(0) }; SLOTS];

/// The counter of the mutex at `address` (Fibonacci hashing of its 8-byte-aligned address).
fn slot(address: usize) -> &'static AtomicU32 {
    let h = ((address as u64) >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    &WAITING[(h >> (64 - SLOTS.trailing_zeros())) as usize]
}

/// A thread is about to wait in a contended acquisition of the mutex at `address`.
pub fn arrive(address: usize) {
    slot(address).fetch_add(1, Ordering::Relaxed);
}

/// The contended acquisition [`arrive`] announced has returned (acquired or not).
pub fn depart(address: usize) {
    // Never below zero: a fork child's reset may come between a pair.
    let _ = slot(address).fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
}

/// Whether some thread is in a contended acquisition of the mutex at `address` (or of
/// another sharing its counter). One load: async-signal-safe.
pub fn waiting(address: usize) -> bool {
    slot(address).load(Ordering::Relaxed) != 0
}

/// In a fork child: nobody waits.
pub fn reset_after_fork() {
    for c in &WAITING {
        c.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mutex_waits_from_arrival_to_departure() {
        let a = 0x7000_1000usize;
        assert!(!waiting(a));
        arrive(a);
        arrive(a);
        assert!(waiting(a));
        depart(a);
        assert!(waiting(a));
        depart(a);
        assert!(!waiting(a));
        // An unpaired departure (after a fork's reset) leaves the count at zero.
        depart(a);
        arrive(a);
        assert!(waiting(a));
        depart(a);
        assert!(!waiting(a));
    }

    #[test]
    fn neighbouring_mutexes_mostly_have_counters_of_their_own() {
        // 256 mutexes 64 bytes apart (an array of padded locks): Fibonacci hashing spreads
        // them over nearly as many counters.
        let used: std::collections::HashSet<usize> = (0..256usize)
            .map(|i| slot(0x5555_0000 + i * 64) as *const AtomicU32 as usize)
            .collect();
        assert!(used.len() >= 230, "{} counters for 256 mutexes", used.len());
    }
}
