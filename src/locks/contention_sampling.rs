//! Which contended lock acquisitions are measured: all of them while a thread has few, an
//! unbiased random subset, scaled, when it has many.
//!
//! Job: a measured contended acquisition registers with the wait table, reads clocks and
//! records samples; at tens of thousands a second per thread that bookkeeping is what makes
//! a contended program slower and more contended under the profiler than without it. Each
//! thread therefore counts its contended acquisitions in windows of at least
//! [`WINDOW_NS`]; when a window had more than the budget (by default
//! `CONTENDED_MEASURED_PER_MS`, 4) a millisecond, the next
//! windows measure each acquisition with probability 2^-shift (the smallest shift that
//! brings the expected measured rate within the budget) and count the waiting of each one
//! measured 2^shift times, as idleness at the waiter and in the waiter-time the holder is
//! blamed for. Whether an acquisition is measured is drawn before it waits and does not
//! depend on how long it will wait, so every context's expected idleness and blame are
//! exact (Horvitz-Thompson); the period in force is chosen from past windows only. While a
//! thread stays under the budget every acquisition is measured, exactly.
//!
//! Exact in expectation only if a measured wait lasts as long as an unmeasured one would
//! have, and it does not: a measured waiter unwinds before it blocks and registers with the
//! lock, so the holds while it waits read the clock and note their starts, and those
//! holds, and so its wait, grow longer (on a 2-CPU machine with 4 threads on one lock,
//! measured waits ran 4-7 times longer than the ones they stood for). So the sampler also times every wait it samples
//! from, measured or not (the clock was read at its start anyway; one more read at its
//! end), and sums that waiting and its estimate by the measured ones ([`Taken`]); the
//! analysis multiplies the scaled idleness by their ratio (a ratio estimator: the totals
//! are exact, the split between call paths comes from the measured ones). That ratio did
//! not carry over to blame (a measured wait overlaps holds unlike the ones it stands for:
//! blame read 0.78-0.91 of the truth), so a mutex's blame does not come from the measured
//! waits' weights but from the exact waiter integral every unregistered wait keeps
//! (`arrivals`); the scaled blame is left only where that integral was shared.
//!
//! Invariants: a [`ContentionSampler`] is touched only by its owner thread, outside the
//! signal handler (its atomics are relaxed: plain loads and stores). Async-signal-safe,
//! allocation-free, no clock of its own (callers pass the time).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Shortest window over which a thread's rate of contended acquisitions is counted.
pub const WINDOW_NS: u64 = 1_000_000;

/// Measured contended acquisitions a millisecond per thread that the sampling aims at
/// (when a thread has more, it measures a random subset of about this many); 0: no limit.
/// Set once at start-up from the configuration ([`set_budget`]).
static MEASURED_PER_MS: AtomicU64 =
    AtomicU64::new(crate::format::protocol::CONTENDED_MEASURED_PER_MS);

/// Sets the budget of measured contended acquisitions a millisecond per thread (0: every
/// one is measured).
pub fn set_budget(per_ms: u64) {
    MEASURED_PER_MS.store(per_ms, Ordering::Relaxed);
}

/// Largest sampling shift: at least 1 contended acquisition in 2^10 is measured, so that
/// no single one stands for more than 1024 (the estimates' variance stays bounded; past
/// that, the runtime measures more than its budget rather than less).
pub const MAX_SHIFT: u32 = 10;

/// A thread's contended-acquisition sampling state. Owner only.
#[derive(Default)]
pub struct ContentionSampler {
    /// Start of the current window (monotonic ns; 0: none yet).
    window_start: AtomicU64,
    /// Contended acquisitions seen in the current window.
    in_window: AtomicU64,
    /// The shift in force: each acquisition is measured with probability 2^-shift.
    shift: AtomicU32,
    /// The largest shift since the last [`ContentionSampler::take`].
    peak_shift: AtomicU32,
    /// xorshift64 state (0: not seeded yet).
    rng: AtomicU64,
    /// Contended acquisitions seen and measured since the last [`ContentionSampler::take`].
    seen: AtomicU64,
    measured: AtomicU64,
    /// Since the last take: nanoseconds waited by the acquisitions drawn with a period over
    /// 1, and their estimate by the measured ones (each weighted by its period).
    sampled_wait_ns: AtomicU64,
    scaled_wait_ns: AtomicU64,
}

/// What [`ContentionSampler::take`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    pub seen: u64,
    pub measured: u64,
    pub peak_period: u64,
    /// Waiting of the acquisitions drawn while sampling, all of them and as estimated.
    pub sampled_wait_ns: u64,
    pub scaled_wait_ns: u64,
}

/// Whether one contended acquisition is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Draw {
    /// Measure it; its waiting counts `weight` times.
    Measure { weight: u32 },
    /// Let it wait unmeasured.
    Skip,
}

impl ContentionSampler {
    /// Draws for a contended acquisition at `now` (monotonic ns). `seed` seeds the thread's
    /// generator at its first draw.
    pub fn draw(&self, now: u64, seed: u64) -> Draw {
        let start = self.window_start.load(Ordering::Relaxed);
        let in_window = self.in_window.load(Ordering::Relaxed);
        if start == 0 || now.saturating_sub(start) >= WINDOW_NS {
            if start != 0 {
                // The window just closed sets the shift of the next.
                self.shift
                    .store(shift_for(in_window, now - start), Ordering::Relaxed);
            }
            self.window_start.store(now, Ordering::Relaxed);
            self.in_window.store(1, Ordering::Relaxed);
        } else {
            self.in_window.store(in_window + 1, Ordering::Relaxed);
        }
        add(&self.seen, 1);
        let shift = self.shift.load(Ordering::Relaxed);
        if shift > self.peak_shift.load(Ordering::Relaxed) {
            self.peak_shift.store(shift, Ordering::Relaxed);
        }
        if shift > 0 && self.next_random(seed) >> (64 - shift) != 0 {
            return Draw::Skip;
        }
        add(&self.measured, 1);
        Draw::Measure { weight: 1 << shift }
    }

    /// A contended acquisition measured outside the draw: a woken condition variable
    /// waiter that waited to retake its mutex (always measured, as its wait is timed by
    /// the condition wait's own clock reads). Counted so that the acquisitions seen are
    /// the lock table's.
    #[inline]
    pub fn note_measured(&self) {
        add(&self.seen, 1);
        add(&self.measured, 1);
    }

    /// A contended acquisition drawn while sampling (`Skip`, or `Measure` with a weight over
    /// 1) waited `ns`; `weight`: what it was measured for (0: not measured).
    pub fn note_sampled_wait(&self, ns: u64, weight: u32) {
        add(&self.sampled_wait_ns, ns);
        add(&self.scaled_wait_ns, ns.saturating_mul(u64::from(weight)));
    }

    /// The acquisitions seen and measured since the last call, the longest sampling
    /// period in force meanwhile and the sampled waiting; resets them.
    pub fn take(&self) -> Taken {
        Taken {
            seen: self.seen.swap(0, Ordering::Relaxed),
            measured: self.measured.swap(0, Ordering::Relaxed),
            peak_period: 1 << self.peak_shift.swap(0, Ordering::Relaxed),
            sampled_wait_ns: self.sampled_wait_ns.swap(0, Ordering::Relaxed),
            scaled_wait_ns: self.scaled_wait_ns.swap(0, Ordering::Relaxed),
        }
    }

    /// The sampling period in force (1: every acquisition is measured).
    #[cfg(test)]
    fn period(&self) -> u64 {
        1 << self.shift.load(Ordering::Relaxed)
    }

    /// Back to measuring everything (a recycled state, a fork child).
    pub fn reset(&self) {
        self.window_start.store(0, Ordering::Relaxed);
        self.in_window.store(0, Ordering::Relaxed);
        self.shift.store(0, Ordering::Relaxed);
        self.take();
    }

    fn next_random(&self, seed: u64) -> u64 {
        let x = xorshift(match self.rng.load(Ordering::Relaxed) {
            0 => seed | 1,
            x => x,
        });
        self.rng.store(x, Ordering::Relaxed);
        x
    }
}

/// The next state (and draw) of a xorshift64 generator whose state is `x` (not 0): the
/// contention and hold sampling's source of randomness, cheap and with no state but `x`.
pub fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

/// Adds to an owner-only counter (a plain load and store: nobody else writes it).
fn add(counter: &AtomicU64, n: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).saturating_add(n),
        Ordering::Relaxed,
    );
}

/// The shift for a thread that saw `seen` contended acquisitions in `elapsed` ns: the
/// smallest that keeps the expected measured rate within the budget ([`set_budget`]).
pub fn shift_for(seen: u64, elapsed: u64) -> u32 {
    shift_within(seen, elapsed, budget())
}

/// The smallest shift that brings `seen` events in `elapsed` ns within `per_ms` a
/// millisecond (0: no limit), at most [`MAX_SHIFT`].
pub fn shift_within(seen: u64, elapsed: u64, per_ms: u64) -> u32 {
    if per_ms == 0 {
        return 0;
    }
    let rate = u128::from(seen) * 1_000_000 / u128::from(elapsed.max(1));
    (0..MAX_SHIFT)
        .find(|&shift| rate >> shift <= u128::from(per_ms))
        .unwrap_or(MAX_SHIFT)
}

/// The budget of measured contended acquisitions a millisecond per thread (0: no limit).
pub fn budget() -> u64 {
    MEASURED_PER_MS.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_acquisitions_are_all_measured() {
        let s = ContentionSampler::default();
        for i in 0..100u64 {
            // One a millisecond: under the budget.
            assert_eq!(s.draw(1 + i * WINDOW_NS, 7), Draw::Measure { weight: 1 });
        }
        assert_eq!(
            s.take(),
            Taken {
                seen: 100,
                measured: 100,
                peak_period: 1,
                sampled_wait_ns: 0,
                scaled_wait_ns: 0,
            }
        );
        assert_eq!(s.period(), 1);
    }

    #[test]
    fn the_shift_keeps_the_measured_rate_within_the_budget() {
        assert_eq!(shift_for(0, WINDOW_NS), 0);
        assert_eq!(shift_for(4, WINDOW_NS), 0);
        assert_eq!(shift_for(5, WINDOW_NS), 1);
        assert_eq!(shift_for(1000, WINDOW_NS), 8); // 1000 >> 8 = 3
        assert_eq!(shift_for(1000, 250 * WINDOW_NS), 0); // 4 a millisecond
        assert_eq!(shift_for(u64::MAX / 2, 1), MAX_SHIFT);
        assert_eq!(shift_for(1_000_000, WINDOW_NS), MAX_SHIFT);
    }

    #[test]
    fn many_acquisitions_are_sampled_with_weights_that_keep_the_total() {
        let s = ContentionSampler::default();
        // 100 acquisitions a millisecond for a second: the first window measures all.
        let (mut weighted, mut measured) = (0u64, 0u64);
        let n = 100_000u64;
        for i in 0..n {
            if let Draw::Measure { weight } = s.draw(1 + i * 10_000, 12345) {
                weighted += u64::from(weight);
                measured += 1;
            }
        }
        assert_eq!(s.period(), 32); // 100 >> 5 = 3 within the budget of 4
        let taken = s.take();
        assert_eq!((taken.seen, taken.measured), (n, measured));
        assert_eq!(taken.peak_period, 32);
        // About MEASURED_PER_MS a millisecond after the first window, 4 of the 1000 ms...
        assert!(measured < 5_000, "{measured} measured");
        // ... and the weights add up to the acquisitions seen, within sampling error
        // (about 1/sqrt(3000) relative: 5 sd is under 10%).
        let err = (weighted as f64 - n as f64).abs() / n as f64;
        assert!(err < 0.1, "weighted {weighted} of {n}");
    }

    #[test]
    fn estimates_hold_across_changes_of_the_period() {
        let s = ContentionSampler::default();
        // `truth`: the waiting of the acquisitions drawn while sampling.
        let (mut now, mut truth, mut exact) = (1u64, 0u64, 0u64);
        let mut i = 0u64;
        // 1000, 50, 3 (under the budget: all measured) and 300 a millisecond, 0.2 s each.
        for gap in [1_000, 20_000, 333_333, 3_333] {
            for _ in 0..200_000_000 / gap {
                now += gap;
                i += 1;
                let ns = 500 + (i * 7919) % 20_000;
                match s.draw(now, 5) {
                    // Only while the thread measures all: not part of the sampled totals.
                    Draw::Measure { weight: 1 } => {
                        exact += 1;
                        continue;
                    }
                    Draw::Measure { weight } => s.note_sampled_wait(ns, weight),
                    Draw::Skip => s.note_sampled_wait(ns, 0),
                }
                truth += ns;
            }
        }
        let taken = s.take();
        assert!(exact > 100, "the quiet phase measures all ({exact})");
        assert!(taken.peak_period >= 256, "{taken:?}");
        assert_eq!(taken.sampled_wait_ns, truth, "every sampled wait is timed");
        let err = (taken.scaled_wait_ns as f64 - truth as f64).abs() / truth as f64;
        assert!(err < 0.1, "{} estimated for {truth}", taken.scaled_wait_ns);
    }

    #[test]
    fn the_period_falls_again_when_the_rate_does() {
        let s = ContentionSampler::default();
        let mut now = 1;
        for _ in 0..10_000 {
            now += 1_000; // 1000 a millisecond
            s.draw(now, 3);
        }
        assert!(s.period() >= 256);
        // The first acquisition after a quiet spell closes the busy window; the next closes
        // a quiet one of 5 ms with one acquisition in it.
        for _ in 0..2 {
            now += 5 * WINDOW_NS;
            s.draw(now, 3);
        }
        assert_eq!(s.period(), 1);
        s.reset();
        assert_eq!(s.take().seen, 0);
    }
}
