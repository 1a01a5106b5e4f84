//! A lock's counts, or a group's: what the runtime counted (its `LockStats` records) and
//! what the lock's samples add, with the figures derived from them (the contention rate,
//! the acquisitions' stated interval, the average contended hold).
//!
//! Invariants: counts only add up ([`Counts::add`]); nothing here reads a profile.

use crate::format::LockStats;

/// Counts of one lock, or summed over a group: what the runtime counted and what the
/// lock's samples add.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    /// The runtime's counts: its `LockStats` records summed ([`LockStats::add_counts`];
    /// their address, kind, flags and sites are not kept here: 0). Its `wait_ns` is the
    /// calibrated samples' sum when the runtime wrote no counts (a process killed first).
    pub runtime: LockStats,
    /// Blame taken by its holders or event providers (ns).
    pub blame_ns: u64,
    /// CPU time of its holders while others waited for it (ns; timer samples,
    /// `held.contended`).
    pub held_ns: u64,
    /// Time its holders spent blocked in a call (a sleep, a poll, a wait) inside holds
    /// others waited for (ns; `held.blocked`).
    pub blocked_ns: u64,
    /// Of its waiting, the part whose callers name a lock or have no name
    /// ([`path_of_a_lock`](crate::attribution::wait_class::path_of_a_lock); its waiting's share by the samples): what tells a lock built on
    /// a condition variable, a semaphore or a futex word (CPython's GIL) from an event's.
    pub lock_use_ns: u64,
}

impl Counts {
    pub(super) fn add(&mut self, o: &Counts) {
        self.runtime.add_counts(&o.runtime);
        self.blame_ns = self.blame_ns.saturating_add(o.blame_ns);
        self.held_ns = self.held_ns.saturating_add(o.held_ns);
        self.blocked_ns = self.blocked_ns.saturating_add(o.blocked_ns);
        self.lock_use_ns = self.lock_use_ns.saturating_add(o.lock_use_ns);
    }

    /// Contended acquisitions over acquisitions (a sampled estimate of the latter can make
    /// it exceed 1 on rarely taken locks: capped).
    pub fn contention_rate(&self) -> Option<f64> {
        (self.runtime.acquisitions > 0)
            .then(|| (self.runtime.contended as f64 / self.runtime.acquisitions as f64).min(1.0))
    }

    /// The estimate of acquisitions within `standard_errors` standard errors of its
    /// sampling, never below the contended ones: (`low`, `high`). Exact (both the count)
    /// when every acquisition was counted, as in threads that take fewer than about 10,000
    /// locks a second. The standard error is `sqrt(4/3 / samples)` of the estimate: a lock
    /// that gets a share `p` of its threads' acquisitions gets that share of the samples,
    /// each weighing a period uniform in `1..2M` (variance `M²/3`), so the estimate's
    /// relative variance is about `(1 - p + 1/3) / samples`, at most that.
    pub fn acquisitions_interval(&self, standard_errors: f64) -> (u64, u64) {
        let (n, samples) = (self.runtime.acquisitions, self.runtime.acquisition_samples);
        if samples >= n {
            return (n, n);
        }
        let error = standard_errors * (4.0 / 3.0 / samples.max(1) as f64).sqrt();
        let low = (n as f64 * (1.0 - error)).max(self.runtime.contended as f64);
        (
            low.round() as u64,
            (n as f64 * (1.0 + error)).round() as u64,
        )
    }

    /// The average length of the holds others waited for whose length is known (ns).
    pub fn contended_hold_avg(&self) -> Option<u64> {
        self.runtime
            .contended_hold_ns
            .checked_div(self.runtime.timed_holds)
    }

    /// Trylocks: successful ones (sampled) plus failed ones (exact).
    pub fn try_attempts(&self) -> u64 {
        self.runtime.try_acquired + self.runtime.try_failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampled(acquisitions: u64, samples: u64, contended: u64) -> Counts {
        let mut c = Counts::default();
        c.runtime.acquisitions = acquisitions;
        c.runtime.acquisition_samples = samples;
        c.runtime.contended = contended;
        c
    }

    #[test]
    fn acquisitions_counted_one_by_one_are_stated_exactly() {
        assert_eq!(sampled(500, 500, 20).acquisitions_interval(3.0), (500, 500));
    }

    #[test]
    fn an_estimate_is_stated_within_its_standard_errors_never_under_the_contended_ones() {
        // 1200 samples: a standard error of sqrt(4/3 / 1200) = 1/30 of the estimate.
        assert_eq!(
            sampled(300_000, 1200, 10).acquisitions_interval(3.0),
            (270_000, 330_000)
        );
        // One sample says little: the low edge is the contended acquisitions.
        assert_eq!(sampled(400, 1, 150).acquisitions_interval(3.0).0, 150);
    }
}
