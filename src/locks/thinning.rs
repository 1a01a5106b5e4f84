//! Thinning of short synchronous samples: stratified sampling of the waiting a thread's
//! lock samples carry, so that a hot lock costs about one unwind per window of waiting
//! rather than one per wait, with every calling context's total unbiased.
//!
//! Job: the arithmetic of the thread's lines of windows ([`Window`]), their size classes
//! ([`thin_class`]) and their length ([`rescale`]); the lock policy (`policy::record`) keeps
//! the state per thread and lays its samples. Pure: no clock, no sampler, no allocation;
//! async-signal-safe.

/// How much waiting a thread's synchronous samples carry, and so how long its thinning
/// windows are (see [`THIN_BUDGET_PER_MS`]). Owner only.
#[derive(Debug, Default, Clone, Copy)]
pub struct ThinRate {
    /// Windows are `THIN_NS << scale` long.
    pub scale: u32,
    /// Samples laid since `since` (CLOCK_MONOTONIC, ns), and their total value.
    pub laid: u32,
    pub laid_ns: u64,
    pub since: u64,
}

/// Thinning not started yet (the first window's point is drawn at the first sample).
pub const THIN_UNSTARTED: u64 = u64::MAX;

/// Size classes of synchronous samples, each thinned on its own line (see
/// [`thin_class`]).
pub const THIN_CLASSES: usize = 16;

/// The shortest thinning window. Synchronous samples (each one an unwind, 1–2 µs) shorter
/// than their line's window are thinned by stratified sampling: each thread lays the values
/// of its samples end to end, per metric and size class ([`thin_class`]), cuts each line
/// into windows (`THIN_NS` long while its samples carry little waiting, longer past
/// [`THIN_BUDGET_PER_MS`]), and picks one point at random in each window; a sample is kept,
/// carrying the window's length per point it covers. A sample as long as its line's window
/// or longer is kept whole. Every nanosecond of waiting has the same chance of being
/// picked, so every calling context's total is unbiased, as with Go's mutex profile, which
/// keeps each event with probability value / rate; but a context's count varies less (one
/// point per window exactly rather than on average: a millisecond of 300 ns holds showed
/// ±20% with independent coin flips), and, unlike a fixed period, the random point in each
/// window cannot fall into step with a program that repeats the same sequence of waits.
/// The size classes keep the short holds of one function off the line of another's longer
/// ones, so that the first's total is not decided by where the points fall among the
/// second's samples: it is off by at most a window per class and thread. The unwinds stay
/// bounded at about one per `THIN_NS` of waiting however many short waits a hot lock has,
/// and by [`THIN_BUDGET_PER_MS`] however many threads wait.
pub const THIN_NS: u64 = 10_000;

/// About how many windows a thread's samples fill per millisecond: its windows are sized to
/// the waiting it lays ([`rescale`]). A lock that several threads queue on has
/// (threads − 1) seconds of waiting a second to blame, and one unwind per 10 µs of it was
/// most of the cost of such a program (8 threads on one lock: 14× slower, 31 MiB of
/// profile). All samples count, the long ones too: with 5 µs holds and queues of a few
/// threads (`ssca2`), most waits and blames are 10–40 µs, and recording each of them, 30 a
/// millisecond per thread, made 85,000 unwinds and 670 KB of profile in a one-second run.
/// The length of a window is chosen before any of its samples is laid, so totals stay
/// unbiased.
pub const THIN_BUDGET_PER_MS: u64 = 16;

/// Samples laid between two checks of a thread's rate.
pub const THIN_RATE_EPOCH: u32 = 64;

/// The longest window: `THIN_NS << THIN_MAX_SCALE`, 41 ms.
pub const THIN_MAX_SCALE: u32 = 12;

/// The size class of a sample of `value` ns: its octave from 128 ns up, with all shorter
/// ones in class 0 and all from 2 ms up in the last (`0..THIN_CLASSES`). Stratifying by
/// size is unbiased whatever the classes, as each class is thinned on its own; octaves
/// separate critical sections whose lengths differ by twice or more.
pub fn thin_class(value: u64) -> usize {
    let octave = (u64::BITS - value.leading_zeros()) as usize;
    octave.saturating_sub(7).min(THIN_CLASSES - 1)
}

/// How much of a sample of `value` ns counts towards its thread's rate at window scale
/// `scale`: at most two windows. Windows are there to bound the unwinds of short samples;
/// one longer than a window is kept whole and costs one unwind however long it is. Counted
/// whole, a single long one (the blame of a condition variable's signal for a wait of
/// seconds) would stretch the thread's windows to 20 ms or more for an epoch, and its
/// short samples would read 0 or a window; capped, windows still double each epoch while
/// the waiting fills them.
pub fn rate_weight(value: u64, scale: u32) -> u64 {
    value.min(2 * (THIN_NS << scale))
}

/// The window scale for a thread that laid `laid_ns` of samples in `elapsed` ns: the
/// shortest window (`THIN_NS << scale`, up to [`THIN_MAX_SCALE`]) that this much waiting
/// fills at most [`THIN_BUDGET_PER_MS`] times a millisecond. Samples as long as a window are
/// kept whole, so a thread keeps more than that when most of its waiting comes in samples
/// longer than the window; but windows follow the waiting itself, and so shrink again as
/// soon as it slows. (Sizing them by the samples *kept* instead let a thread whose long
/// waits are kept whole ratchet its windows up to 41 ms; its short waits, thinned at that
/// length, then read 0 or a window: `uts` `push_shared`, 8 ms of short waits, read
/// 0.01–5 ms.)
pub fn rescale(laid_ns: u64, elapsed: u64) -> u32 {
    let per_window = u128::from(laid_ns) * 1_000_000
        / (u128::from(THIN_BUDGET_PER_MS) * u128::from(elapsed.max(1)));
    (0..THIN_MAX_SCALE)
        .find(|&scale| u128::from(THIN_NS << scale) >= per_window)
        .unwrap_or(THIN_MAX_SCALE)
}

/// A thinning window: its length, how far into it the samples have got, and its picked
/// point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub pos: u64,
    pub point: u64,
    pub len: u64,
}

impl Window {
    /// The window a thread's `thinned` cell holds, `None` before the first sample.
    pub fn unpack(packed: u64) -> Option<Window> {
        (packed != THIN_UNSTARTED).then_some(Window {
            pos: packed & 0xFFFF_FFFF,
            point: packed >> 32 & 0x0FFF_FFFF,
            len: THIN_NS << (packed >> 60),
        })
    }

    /// The form a thread's `thinned` cell holds: the length's scale in the top 4 bits, the
    /// point (under 2^28: the longest window is 41 ms) and the position.
    pub fn pack(self) -> u64 {
        let scale = u64::from((self.len / THIN_NS).trailing_zeros());
        scale << 60 | self.point << 32 | self.pos
    }

    /// Whether this window's point lies in `pos..end` (`end` at most its length).
    pub fn covers(self, end: u64) -> bool {
        self.pos <= self.point && self.point < end
    }

    /// Whether a sample of `value` laid now may be kept: it covers this window's point or
    /// reaches the next window, whose point is not drawn yet.
    pub fn may_keep(self, value: u64) -> bool {
        let end = self.pos + value;
        end >= self.len || self.covers(end)
    }

    /// Lays `value` from `pos`: the value kept for the points it covers, and the window after
    /// it (`next` gives a new one). A value as long as this window or longer is not laid but
    /// kept whole (laying it could cover more than the next window, whose length would then
    /// have to be known in advance).
    pub fn lay(self, value: u64, next: impl FnOnce() -> Window) -> (u64, Window) {
        if value >= self.len {
            return (value, self);
        }
        let end = self.pos + value;
        let mut kept = if self.covers(end.min(self.len)) {
            self.len
        } else {
            0
        };
        if end < self.len {
            return (kept, Window { pos: end, ..self });
        }
        let next = next();
        let pos = end - self.len;
        if next.point < pos {
            kept += next.len;
        }
        (kept, Window { pos, ..next })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new window of `THIN_NS << scale`, its point from a test's own xorshift generator.
    fn window(rng: &mut u64, scale: u32) -> Window {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        let len = THIN_NS << scale;
        Window {
            pos: 0,
            point: *rng % len,
            len,
        }
    }

    /// Thins a repeating sequence of waits of `lengths` ns, `rounds` times, as a thread
    /// does: on the line `line_of` gives each length, the n-th new window of all
    /// `THIN_NS << scales(n)` long. The kept total of each position in the sequence.
    fn thin(
        lengths: &[u64],
        rounds: usize,
        seed: u64,
        line_of: fn(u64) -> usize,
        mut scales: impl FnMut(usize) -> u32,
    ) -> Vec<u64> {
        let mut rng = seed | 1;
        let mut windows = 0;
        let mut new_window = |rng: &mut u64| {
            let w = window(rng, scales(windows));
            windows += 1;
            w
        };
        let mut lines: [Option<Window>; THIN_CLASSES] = [None; THIN_CLASSES];
        let mut kept = vec![0; lengths.len()];
        for _ in 0..rounds {
            for (i, &v) in lengths.iter().enumerate() {
                let line = &mut lines[line_of(v)];
                let current = line.unwrap_or_else(|| new_window(&mut rng));
                let (value, next) = current.lay(v, || new_window(&mut rng));
                kept[i] += value;
                *line = Some(next);
            }
        }
        kept
    }

    /// [`thin`] on one line of 10 µs windows.
    fn thin_sequence(lengths: &[u64], rounds: usize, seed: u64) -> Vec<u64> {
        thin(lengths, rounds, seed, |_| 0, |_| 0)
    }

    #[test]
    fn thinning_is_unbiased_even_for_a_sequence_in_step_with_the_window() {
        // 2 µs + 8 µs = one window per round: a fixed period would give either function
        // all of it or nothing, depending on where it started.
        for seed in [1, 2, 3, 99] {
            let kept = thin_sequence(&[2_000, 8_000], 10_000, seed);
            let (a, b) = (kept[0] as f64, kept[1] as f64);
            assert!(
                (a / 20e6 - 1.0).abs() < 0.05,
                "seed {seed}: 2 µs waits kept {a}"
            );
            assert!(
                (b / 80e6 - 1.0).abs() < 0.02,
                "seed {seed}: 8 µs waits kept {b}"
            );
        }
    }

    #[test]
    fn windows_of_varying_length_keep_totals_unbiased() {
        // Lengths from 10 to 320 µs, changing from window to window (as the rate budget
        // does, before any sample of the window is laid).
        for seed in [5, 6, 7] {
            let scales = |n: usize| [0, 3, 1, 5][n % 4];
            let kept = thin(&[2_000, 8_000, 500], 1_000_000, seed, |_| 0, scales);
            let truth = [2e9, 8e9, 0.5e9];
            for (k, t) in kept.iter().zip(truth) {
                let err = *k as f64 / t - 1.0;
                assert!(err.abs() < 0.06, "seed {seed}: kept {k} of {t}");
            }
        }
    }

    #[test]
    fn windows_follow_the_waiting_laid() {
        let ms = 1_000_000;
        // 16 windows of 10 µs a millisecond: the shortest window.
        assert_eq!(rescale(160_000, ms), 0);
        assert_eq!(rescale(320_000, ms), 1);
        // A thread blocked all the time: 1 ms a millisecond, 62.5 µs a window -> 80 µs.
        assert_eq!(rescale(4 * ms, 4 * ms), 3);
        // Whatever came before, little waiting means short windows again.
        assert_eq!(rescale(10_000, 100 * ms), 0);
        assert_eq!(rescale(0, 0), 0);
        assert_eq!(rescale(u64::MAX, 1), THIN_MAX_SCALE);
        assert_eq!(THIN_NS << THIN_MAX_SCALE, 40_960_000);
    }

    #[test]
    fn one_long_sample_does_not_stretch_the_windows() {
        let ms = 1_000_000;
        // An epoch of 63 short samples and one blame of 2 s, over 10 ms.
        let laid = |scale| 63 * 5_000 + rate_weight(2_000 * ms, scale);
        assert_eq!(rescale(laid(0), 10 * ms), 0);
        // Counted whole, it would stretch them to 20 ms.
        assert_eq!(rescale(63 * 5_000 + 2_000 * ms, 10 * ms), 11);
        // Samples longer than the window still let it grow, an octave an epoch.
        let all_long = |scale| 64 * rate_weight(40_000, scale);
        assert_eq!(rescale(all_long(0), 4 * ms), 1);
        assert_eq!(rescale(all_long(1), 4 * ms), 2);
        assert_eq!(rate_weight(7_000, 0), 7_000);
    }

    #[test]
    fn samples_as_long_as_the_window_are_kept_whole_among_thinned_ones() {
        // ssca2's pattern: waits on both sides of the window's length, on one line.
        for seed in [11, 12, 13] {
            let kept = thin(&[4_000, 25_000, 9_000, 10_000], 100_000, seed, |_| 0, |_| 0);
            assert_eq!(kept[1], 25_000 * 100_000, "seed {seed}");
            assert_eq!(kept[3], 10_000 * 100_000, "seed {seed}");
            for (k, t) in [(kept[0], 4e8), (kept[2], 9e8)] {
                assert!(
                    (k as f64 / t - 1.0).abs() < 0.02,
                    "seed {seed}: kept {k} of {t}"
                );
            }
        }
        let w = Window {
            pos: 3,
            point: 5,
            len: THIN_NS,
        };
        assert_eq!(w.lay(THIN_NS, || unreachable!()), (THIN_NS, w));
    }

    #[test]
    fn a_window_packs_with_its_length() {
        for scale in [0, 1, 7, THIN_MAX_SCALE] {
            let len = THIN_NS << scale;
            let w = Window {
                pos: len - 1,
                point: len - 1,
                len,
            };
            assert_eq!(Window::unpack(w.pack()), Some(w));
            assert_ne!(w.pack(), THIN_UNSTARTED);
        }
    }

    #[test]
    fn size_classes_are_octaves_from_128_ns() {
        assert_eq!(thin_class(0), 0);
        assert_eq!(thin_class(127), 0);
        assert_eq!(thin_class(128), 1);
        assert_eq!(thin_class(300), 2);
        assert_eq!(thin_class(4_095), 5);
        assert_eq!(thin_class(8_192), 7);
        assert_eq!(thin_class(THIN_NS - 1), 7);
        assert_eq!(thin_class(2_097_151), 14);
        assert_eq!(thin_class(2_097_152), THIN_CLASSES - 1);
        assert_eq!(thin_class(u64::MAX), THIN_CLASSES - 1);
    }

    #[test]
    fn short_holds_among_longer_ones_are_counted_to_within_a_window() {
        // syncperf_fine's pattern: 300 ns holds, 1 ms of them, among 5 µs ones of another
        // function. On one line, where the points fell among the 5 µs samples decided the
        // 300 ns function's count (a standard error of ~8% here); on a line of its own its
        // count is exact to one window.
        for seed in 1..40 {
            let kept = thin(&[300, 5_000, 300, 300], 1_111, seed, thin_class, |_| 0);
            let short = kept[0] + kept[2] + kept[3];
            assert!(
                short.abs_diff(3 * 300 * 1_111) <= THIN_NS,
                "seed {seed}: 300 ns holds kept {short}"
            );
            assert!(
                kept[1].abs_diff(5_000 * 1_111) <= THIN_NS,
                "seed {seed}: 5 µs holds kept {}",
                kept[1]
            );
        }
    }

    #[test]
    fn thinning_keeps_about_one_sample_per_window_of_short_waits() {
        // 300 ns waits, 1 ms of them: 100 windows, so 100 kept, ±0 (stratified).
        let kept = thin_sequence(&[300], 3_334, 7);
        let total: u64 = kept.iter().sum();
        assert!(total.abs_diff(1_000_200) <= THIN_NS, "{total}");
    }
}
