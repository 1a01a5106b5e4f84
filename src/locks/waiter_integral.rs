//! The waiter-time integral of one lock (or one counter of locks): `W(t)`, the
//! waiter-nanoseconds accumulated up to `t`, kept as `n × t + Q` in one word.
//!
//! Job: let a holder learn exactly how long others waited during its hold from two reads of
//! one word, one as its hold starts and one as it ends ([`Integral::value_at`]), while each
//! waiter pays one compare-exchange as it starts waiting ([`Integral::arrive`]) and one as
//! it stops ([`Integral::depart`]). An arrival at `s` adds a waiter and subtracts `s` from
//! `Q`; a departure at `d` removes one and adds `d`: `W` is continuous and never decreases,
//! and its difference between two instants is the waiting done between them, whoever did it.
//!
//! Invariants: `n` is the high 16 bits (at most 65,535 waiters at once: more are not
//! counted), `Q` the low 48, modulo 2^48 ns (78 hours): a difference is exact below that.
//! A departure never takes `n` below zero (a fork child's reset may fall between a pair).
//! Arrival and departure times are read by different threads a few ns apart, so a
//! difference can come out a few ns below zero when nothing waited: [`elapsed`] reads it
//! as zero.
//!
//! Lock-free, allocation-free; [`Integral::load`] is one load (async-signal-safe), the
//! others bounded compare-exchange loops (one retry per concurrent change).

use std::sync::atomic::{AtomicU64, Ordering};

/// The low bits of the word: `Q` modulo 2^48; the high 16: the waiters `n`.
const TIME_BITS: u32 = 48;
/// `Q`'s and `W`'s modulus, less one.
pub const TIME_MASK: u64 = (1 << TIME_BITS) - 1;

/// One integral word: `n << 48 | Q mod 2^48`.
#[derive(Debug, Default)]
pub struct Integral(AtomicU64);

impl Integral {
    pub const fn new() -> Integral {
        Integral(AtomicU64::new(0))
    }

    /// A waiter starts waiting at `since` (monotonic ns).
    pub fn arrive(&self, since: u64) {
        let _ = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| {
                let n = w >> TIME_BITS;
                (n < u64::from(u16::MAX))
                    .then(|| (n + 1) << TIME_BITS | (w.wrapping_sub(since) & TIME_MASK))
            });
    }

    /// A waiter [`arrive`](Self::arrive) counted stops waiting at `now`.
    pub fn depart(&self, now: u64) {
        let _ = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| {
                let n = (w >> TIME_BITS).checked_sub(1)?;
                Some(n << TIME_BITS | (w.wrapping_add(now) & TIME_MASK))
            });
    }

    /// The word as it is now (for [`waiters`] and [`value_at`]).
    #[inline(always)]
    pub fn load(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }

    /// Nobody waits (a fork child's start, a recycled record).
    pub fn clear(&self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

/// The waiters counted in a word [`Integral::load`] read.
#[inline(always)]
pub fn waiters(word: u64) -> u64 {
    word >> TIME_BITS
}

/// `W(now)` modulo 2^48 from a word read at about `now` (while nobody waits, `W` is constant
/// and `now` does not matter).
#[inline(always)]
pub fn value_at(word: u64, now: u64) -> u64 {
    waiters(word).wrapping_mul(now).wrapping_add(word) & TIME_MASK
}

/// The waiting from the value `earlier` to the value `later` (both of [`value_at`]); zero
/// when the difference is below zero (clocks read by different threads a few ns apart).
#[inline(always)]
pub fn elapsed(later: u64, earlier: u64) -> u64 {
    let waited = later.wrapping_sub(earlier) & TIME_MASK;
    if waited >> (TIME_BITS - 1) != 0 {
        0
    } else {
        waited
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_difference_of_two_values_is_the_waiting_between_them() {
        let w = Integral::new();
        let t0 = 1_000_000_000_000u64;
        w.arrive(t0 - 500); // waiting before the first reading: not between them
        let start = value_at(w.load(), t0);
        w.arrive(t0 + 100);
        w.arrive(t0 + 200);
        w.depart(t0 + 250);
        let end = value_at(w.load(), t0 + 1000);
        // 1000 + 900 + 50
        assert_eq!(elapsed(end, start), 1950);
        assert_eq!(waiters(w.load()), 2);
        w.depart(t0 + 1000);
        w.depart(t0 + 1000);
        assert_eq!(waiters(w.load()), 0);
        assert_eq!(value_at(w.load(), 0), end, "constant while nobody waits");
        w.depart(t0 + 2000);
        assert_eq!(waiters(w.load()), 0, "never below zero");
    }

    #[test]
    fn a_difference_slightly_below_zero_reads_as_none() {
        assert_eq!(elapsed(5, 8), 0);
        assert_eq!(elapsed(3, TIME_MASK), 4, "across the modulus");
    }
}
