//! Calibration of sampled contended-lock estimates: the idleness and blame samples a
//! process flagged [`SAMPLE_SCALED`] are multiplied by its ratio of the contended waiting
//! it timed to the waiting its measured acquisitions estimated (see the runtime's
//! `locks::contention_sampling`).
//!
//! Invariants: a process without sampled acquisitions, or a profile written before the
//! counters existed, has the identity; a sample without the flag is never changed. Pure.

use crate::format::counters as names;
use crate::format::read::ProcessProfile;
use crate::format::SAMPLE_SCALED;

/// One process's calibration: scaled values are multiplied by `num / den`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Calibration {
    num: u64,
    den: u64,
}

impl Calibration {
    /// The calibration of `proc`, from its counters.
    pub fn of(proc: &ProcessProfile) -> Calibration {
        Calibration::new(
            proc.counter(names::CONTENDED_SAMPLED_WAIT),
            proc.counter(names::CONTENDED_SCALED_WAIT),
        )
    }

    /// Waiting `timed` by all sampled acquisitions, `estimated` by the measured ones; the
    /// identity when there is no estimate to correct.
    pub fn new(timed: u64, estimated: u64) -> Calibration {
        match estimated {
            0 => Calibration { num: 1, den: 1 },
            den => Calibration { num: timed, den },
        }
    }

    /// The value a sample with `flags` counts for.
    pub fn apply(self, value: u64, flags: u8) -> u64 {
        if flags & SAMPLE_SCALED == 0 {
            return value;
        }
        let v = u128::from(value) * u128::from(self.num) / u128::from(self.den);
        u64::try_from(v).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_scaled_samples_are_calibrated() {
        let c = Calibration::new(1_000, 4_000);
        assert_eq!(c.apply(800, SAMPLE_SCALED), 200);
        assert_eq!(c.apply(800, SAMPLE_SCALED | 0x40), 200);
        assert_eq!(c.apply(800, 0x40), 800);
    }

    #[test]
    fn no_estimate_is_the_identity() {
        assert_eq!(Calibration::new(0, 0).apply(77, SAMPLE_SCALED), 77);
        assert_eq!(Calibration::new(5, 0).apply(77, SAMPLE_SCALED), 77);
    }

    #[test]
    fn large_values_do_not_overflow() {
        let c = Calibration::new(u64::MAX, 1);
        assert_eq!(c.apply(u64::MAX, SAMPLE_SCALED), u64::MAX);
    }
}
