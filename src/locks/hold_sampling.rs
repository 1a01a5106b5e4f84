//! Which holds of a mutex taken without waiting, while others wait for it, have their start
//! noted: all of them while a thread takes few, an unbiased random subset, scaled, when it
//! takes many; and where those starts are kept.
//!
//! Job: a hold's blame is the waiting that accrued during it, read at its release from its
//! start; a hold that began with a successful try or lock while others waited has no time
//! of its own (a contended acquisition has its wait's end), so the thread reads the clock
//! inside the program's critical section to note it. That clock read, at millions of such
//! holds a second, made a one-mutex program with 8 threads on 2 CPUs 1.5-1.7 times as
//! contended as without the profiler (docs/benchmarks.md, session 18). So each thread
//! counts these holds, and when it had more than its budget a millisecond
//! ([`BUDGET_PER_CONTENDED`] times the contention sampling's), notes each with probability
//! 2^-shift and counts the blame of a noted one 2^shift times (Horvitz-Thompson: each
//! hold's expected blame is exact). A hold left unnoted is marked, and its release takes no
//! blame and reads no clock. Both the marks and the noted starts live here, in thread-local storage, so that
//! what the critical section pays is a thread-local write and, for a noted hold, the
//! clock: a noted hold must not last longer than the holds it stands for.
//!
//! The rate: the draw itself reads no clock, so the rate is measured between noted holds
//! (which read it anyway): when a noted hold finds its window at least
//! `contention_sampling::WINDOW_NS` old, the holds drawn in it set the next shift.
//!
//! Invariants:
//! - An entry (mark, or start and weight) lives until its hold's release takes it. A hold
//!   released while nobody waited for its mutex any more (its waiters gone, or its
//!   wait-table bucket dirty only through another lock when the hold began) takes the fast
//!   unlock, which does not look here (a thread-local read there cost the uncontended pair
//!   2 ns, docs/benchmarks.md), and leaves its entry until the thread next starts a hold of
//!   that mutex, here or elsewhere. If the thread's next measured release of that mutex
//!   comes first (a hold that began while nobody waited, during which others came), it
//!   takes no blame (an old mark) or counts its blame, read from the mutex's latest
//!   revival, the old entry's weight times (an old start). Stale entries also occupy
//!   places: with all [`ENTRIES`] taken, holds are noted elsewhere, exactly.
//! - A hold noted elsewhere drops the mutex's entry, if any.
//! - At most [`ENTRIES`] at once: a hold that finds them all taken is the caller's to note
//!   elsewhere, with weight 1 (its inclusion probability is then 1).
//! - Owner thread only, outside the sampling signal handler. A program's signal handler
//!   that takes or releases a mutex while the interrupted code is inside this state finds
//!   it busy: its hold is noted elsewhere, and entries are never half-written.
//!
//! Allocation-free, no locks; the seed of a thread's first draw may cost a `gettid`.

use crate::arrivals::{self, Mark};
use crate::contention_sampling::{budget, shift_within, xorshift, WINDOW_NS};
use std::cell::Cell;

/// Holds a thread can keep here at once (nested holds of contended mutexes).
pub const ENTRIES: usize = 4;

/// Holds noted a millisecond per thread before sampling starts, per contended acquisition
/// of the contention sampling's budget: a noted hold costs a clock read, a measured
/// acquisition a registration and an unwind, so holds get the larger budget (and the
/// smaller variance). 0 with the contention budget 0: every hold is noted.
pub const BUDGET_PER_CONTENDED: u64 = 16;

/// How a hold that began without waiting while others waited was started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Started {
    /// Noted here, at `start`, when the mutex's integral read `mark`
    /// (`arrivals`): its blame counts `weight` times.
    Noted { start: u64, weight: u32, mark: Mark },
    /// Left unnoted (marked): its release takes no blame.
    Unnoted,
    /// Not kept here (no entry free, or the state busy): the caller notes it elsewhere,
    /// with weight 1.
    Elsewhere,
}

/// What a thread's holds hand on to the process's counters: the holds drawn, the ones
/// noted, and the longest sampling period in force, since the last hand-over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Report {
    pub drawn: u64,
    pub noted: u64,
    pub peak_period: u64,
}

/// A thread's hold sampling state.
#[derive(Debug)]
pub struct HoldSampler {
    shift: Cell<u32>,
    /// Start of the current rate window (a noted hold's time; 0: none yet) and the holds
    /// drawn since.
    window_start: Cell<u64>,
    in_window: Cell<u64>,
    /// Not yet handed on ([`Report`]), and when the last was (monotonic ns).
    report: Cell<Report>,
    handed_on: Cell<u64>,
    /// xorshift64 state (0: not seeded yet).
    rng: Cell<u64>,
    /// (mutex address, start, weight) of the thread's holds kept here; address 0: a free
    /// entry; weight 0: unnoted.
    entries: [Cell<(usize, u64, u32, Mark)>; ENTRIES],
    busy: Cell<bool>,
}

impl HoldSampler {
    pub const fn new() -> HoldSampler {
        HoldSampler {
            shift: Cell::new(0),
            window_start: Cell::new(0),
            in_window: Cell::new(0),
            report: Cell::new(Report {
                drawn: 0,
                noted: 0,
                peak_period: 0,
            }),
            handed_on: Cell::new(0),
            rng: Cell::new(0),
            entries: [const { Cell::new((0, 0, 0, Mark::NONE)) }; ENTRIES],
            busy: Cell::new(false),
        }
    }

    /// A hold of the mutex at `address` began without waiting while others waited: draws
    /// whether its start is noted, and if so reads `clock` (monotonic ns) and keeps it.
    /// `seed` seeds the generator at the thread's first draw.
    pub fn start(
        &self,
        address: usize,
        seed: impl FnOnce() -> u64,
        clock: impl FnOnce() -> u64,
    ) -> Started {
        self.exclusive(|| self.start_here(address, seed, clock))
            .unwrap_or(Started::Elsewhere)
    }

    /// [`HoldSampler::start`], the state marked busy.
    fn start_here(
        &self,
        address: usize,
        seed: impl FnOnce() -> u64,
        clock: impl FnOnce() -> u64,
    ) -> Started {
        self.forget_entry(address);
        match self.entries.iter().find(|e| e.get().0 == 0) {
            None => {
                // Noted elsewhere, with weight 1: counted as drawn and noted.
                let mut report = self.report.get();
                report.drawn += 1;
                report.noted += 1;
                report.peak_period = report.peak_period.max(1);
                self.report.set(report);
                Started::Elsewhere
            }
            Some(entry) => {
                self.in_window.set(self.in_window.get() + 1);
                let shift = self.shift.get();
                let mut report = self.report.get();
                report.drawn += 1;
                let started = if shift > 0 && self.next_random(seed) >> (64 - shift) != 0 {
                    entry.set((address, 0, 0, Mark::NONE));
                    Started::Unnoted
                } else {
                    let (now, mark) = arrivals::mark_then(address, clock);
                    self.rate_at(now);
                    let weight = 1 << shift;
                    entry.set((address, now, weight, mark));
                    report.noted += 1;
                    report.peak_period = report.peak_period.max(u64::from(weight));
                    Started::Noted {
                        start: now,
                        weight,
                        mark,
                    }
                };
                self.report.set(report);
                started
            }
        }
    }

    /// At a noted hold's time `now`: closes the rate window if it is old enough.
    fn rate_at(&self, now: u64) {
        let start = self.window_start.get();
        if start == 0 || now.saturating_sub(start) >= WINDOW_NS {
            if start != 0 {
                self.shift.set(shift_within(
                    self.in_window.get(),
                    now - start,
                    budget() * BUDGET_PER_CONTENDED,
                ));
            }
            self.window_start.set(now);
            self.in_window.set(0);
        }
    }

    /// How the thread's hold of the mutex at `address` was started, if it is kept here;
    /// the entry is taken (the hold ends). `None` while the state is busy (a signal
    /// handler's release inside another call here: its hold was noted elsewhere).
    pub fn take(&self, address: usize) -> Option<Started> {
        self.exclusive(|| {
            let entry = self.entries.iter().find(|e| e.get().0 == address)?;
            let (_, start, weight, mark) = entry.replace((0, 0, 0, Mark::NONE));
            Some(match weight {
                0 => Started::Unnoted,
                weight => Started::Noted {
                    start,
                    weight,
                    mark,
                },
            })
        })
        .flatten()
    }

    /// Keeps a hold taken by [`HoldSampler::take`] again (its release failed).
    pub fn put_back(&self, address: usize, started: Started) {
        let value = match started {
            Started::Noted {
                start,
                weight,
                mark,
            } => (address, start, weight, mark),
            Started::Unnoted => (address, 0, 0, Mark::NONE),
            Started::Elsewhere => return,
        };
        self.exclusive(|| {
            if let Some(entry) = self.entries.iter().find(|e| e.get().0 == 0) {
                entry.set(value);
            }
        });
    }

    /// Drops the entry of the mutex at `address`, if any: its hold is noted elsewhere now,
    /// so a hold kept here has ended.
    pub fn forget(&self, address: usize) {
        self.exclusive(|| self.forget_entry(address));
    }

    fn forget_entry(&self, address: usize) {
        if let Some(entry) = self.entries.iter().find(|e| e.get().0 == address) {
            entry.set((0, 0, 0, Mark::NONE));
        }
    }

    /// The holds drawn and noted since the last call, and the longest period; reset.
    /// Nothing while the state is busy.
    pub fn take_report(&self) -> Report {
        self.exclusive(|| self.report.take()).unwrap_or_default()
    }

    /// Runs `f` with the state marked busy; `None` (and `f` not run) if it already was: a
    /// program's signal handler that came here while the interrupted code was inside.
    fn exclusive<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        if self.busy.replace(true) {
            return None;
        }
        let r = f();
        self.busy.set(false);
        Some(r)
    }

    /// [`HoldSampler::take_report`] if the last was handed on [`WINDOW_NS`] or more before
    /// `now`: the process's counters, which every thread's folds write, are written a
    /// thousand times a second at most, not at every noted release (issue 22).
    pub fn take_report_due(&self, now: u64) -> Report {
        if now.saturating_sub(self.handed_on.get()) < WINDOW_NS {
            return Report::default();
        }
        self.handed_on.set(now);
        self.take_report()
    }

    /// In a fork child: the parent's counts are the parent's, and the generator must not
    /// repeat the parent's draws. The entries stay: the child's thread still holds those
    /// mutexes.
    pub fn after_fork(&self) {
        self.report.take();
        self.handed_on.set(0);
        self.rng.set(0);
    }

    fn next_random(&self, seed: impl FnOnce() -> u64) -> u64 {
        let x = xorshift(match self.rng.get() {
            0 => seed() | 1,
            x => x,
        });
        self.rng.set(x);
        x
    }
}

impl Default for HoldSampler {
    fn default() -> HoldSampler {
        HoldSampler::new()
    }
}

std::thread_local! {
    /// The calling thread's hold sampler. Constant-initialised and without a destructor:
    /// in the preloaded library's static TLS block, no allocation.
    static SAMPLER: HoldSampler = const { HoldSampler::new() };
}

/// Runs `f` on the calling thread's hold sampler.
#[inline(always)]
pub fn with<R>(f: impl FnOnce(&HoldSampler) -> R) -> R {
    SAMPLER.with(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Starts `n` holds of `address` `gap` ns apart from `now`, releasing each (taking its
    /// entry) before the next: the weights of the noted ones.
    fn run(s: &HoldSampler, address: usize, n: u64, gap: u64, now: &mut u64) -> Vec<u32> {
        let mut weights = Vec::new();
        for _ in 0..n {
            *now += gap;
            let at = *now;
            let started = s.start(address, || 42, || at);
            assert_eq!(s.take(address), Some(started), "kept until its release");
            match started {
                Started::Noted { start, weight, .. } => {
                    assert_eq!(start, at);
                    weights.push(weight);
                }
                Started::Unnoted => {}
                Started::Elsewhere => panic!("entries are free"),
            }
        }
        weights
    }

    #[test]
    fn holds_are_noted_while_few_and_sampled_with_weights_that_keep_the_total_when_many() {
        let s = HoldSampler::new();
        let mut now = 1;
        // One a millisecond: every hold noted, weight 1.
        let few = run(&s, 0x10, 100, WINDOW_NS, &mut now);
        assert_eq!(few, vec![1; 100]);
        // 10 a microsecond for 0.1 s, far past the budget: a random subset, at most about
        // the budget a millisecond, weights adding up to all.
        let per_ms = budget() * BUDGET_PER_CONTENDED;
        let n = 1_000_000;
        let many = run(&s, 0x10, n, 100, &mut now);
        let total: u64 = many.iter().map(|&w| u64::from(w)).sum();
        let ceiling = 2 * per_ms * 100 + 2 * 1024;
        assert!(
            (many.len() as u64) < ceiling,
            "{} noted, over {ceiling}",
            many.len()
        );
        let err = (total as f64 - n as f64).abs() / n as f64;
        assert!(err < 0.1, "weights add to {total} for {n} holds");
        let report = s.take_report();
        assert_eq!(report.drawn, 100 + n);
        assert_eq!(report.noted, 100 + many.len() as u64);
        assert!(report.peak_period >= 64, "{report:?}");
        assert_eq!(s.take_report(), Report::default(), "handed on once");
        // Quiet again: the next noted hold closes the busy window, the one after a quiet one.
        let quiet = run(&s, 0x10, 2_000, 5 * WINDOW_NS, &mut now);
        assert_eq!(quiet.last(), Some(&1));
    }

    #[test]
    fn counts_are_handed_on_at_most_once_a_window() {
        let s = HoldSampler::new();
        let mut now = WINDOW_NS;
        run(&s, 0x10, 10, 1, &mut now);
        assert_eq!(s.take_report_due(now).drawn, 10, "the first is due");
        run(&s, 0x10, 10, 1, &mut now);
        assert_eq!(s.take_report_due(now), Report::default(), "not due yet");
        run(&s, 0x10, 10, 1, &mut now);
        let due = now + WINDOW_NS;
        assert_eq!(s.take_report_due(due).drawn, 20, "nothing lost meanwhile");
        assert_eq!(s.take_report(), Report::default());
    }

    #[test]
    fn entries_are_bounded_and_belong_to_their_mutex() {
        let s = HoldSampler::new();
        s.shift.set(10); // 1 in 1024 noted
        for i in 1..=ENTRIES {
            assert_ne!(s.start(i * 0x100, || 99, || 5), Started::Elsewhere);
        }
        assert_eq!(
            s.start(0x9999, || 99, || 5),
            Started::Elsewhere,
            "no entry free: noted elsewhere"
        );
        assert_eq!(
            s.take(0x7777),
            None,
            "nothing kept for a mutex never started"
        );
        for i in 1..=ENTRIES {
            assert!(s.take(i * 0x100).is_some());
            assert_eq!(s.take(i * 0x100), None, "taken once");
        }
        // An entry is dropped when the thread starts or waits for the same mutex again.
        let a = 0x4000;
        let first = s.start(a, || 99, || 5);
        s.forget(a);
        assert_eq!(s.take(a), None);
        // A failed release keeps it again.
        s.put_back(a, first);
        assert_eq!(s.take(a), Some(first));
    }

    #[test]
    fn a_hold_started_inside_another_start_is_noted_elsewhere() {
        let s = HoldSampler::new();
        s.busy.set(true);
        assert_eq!(s.start(0x30, || 5, || 5), Started::Elsewhere);
        assert_eq!(s.take(0x30), None);
        s.busy.set(false);
    }
}
