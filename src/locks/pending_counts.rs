//! A thread's lock counts on their way to the lock table (`locks::lock_table`): its
//! contended acquisitions of the lock it last waited for ([`PendingWaits`]) and its failed
//! trylocks of one lock from one site ([`PendingTries`]), kept in the thread's state and
//! added to the lock's shared row once in a while, never inside the program's critical
//! section.
//!
//! Invariants: each is written by its owner thread only, with plain loads and stores of
//! relaxed atomics ([`bump`]), but for [`PendingWaits::flush`] and [`PendingTries::take`] at
//! the process's end, which race with an owner still running (a count it adds meanwhile
//! may be lost, and nothing else). Pending waits hold their row's ticket, so the waits of a
//! lock destroyed meanwhile go to no other lock (they are counted untabled by the caller).
//!
//! Allocation-free; not used by the signal handler.

use super::lock_table::{at, slot, ticket};
use crate::format::LOCK_INTERVAL_NS;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// A thread's contended acquisitions of the lock it last waited for, not yet added to the
/// lock's row: a thread that waits for one lock thousands of times a second adds its
/// counts to the shared row once a millisecond, or when it waits for another lock, and
/// before it waits ([`PendingWaits::prepare`]), never after (a wait ends in an acquisition,
/// and a shared row's cache line taken inside the program's critical section would
/// lengthen it). It holds the row's [`ticket`], so that waits of a lock destroyed meanwhile
/// are not given to the next lock in its row. Owner only (its atomics are plain loads and
/// stores), but for [`PendingWaits::flush`] at the process's end.
#[derive(Default)]
pub struct PendingWaits {
    address: AtomicUsize,
    /// The row's ticket: index + 1 (0: none, the waits are untabled), generation.
    slot: AtomicUsize,
    generation: AtomicU32,
    count: AtomicU64,
    /// Of `count`, the waits measured for the blame, each alone ([`PendingWaits::add_measured`]).
    measured: AtomicU64,
    ns: AtomicU64,
    max_ns: AtomicU64,
    since: AtomicU64,
    /// Holds of the lock others waited for (`Slot::held`'s counts).
    holds: AtomicU64,
    timed_holds: AtomicU64,
    hold_ns: AtomicU64,
}

/// How often a thread's pending waits reach the table at least (while it waits).
const PENDING_NS: u64 = 1_000_000;

impl PendingWaits {
    /// The row's ticket the pending counts are for (see [`ticket`]).
    fn ticket(&self) -> (usize, u32) {
        (
            self.slot.load(Ordering::Relaxed).wrapping_sub(1),
            self.generation.load(Ordering::Relaxed),
        )
    }

    /// Before a contended acquisition of the lock at `address` (kind code `kind`) waits, at
    /// `now`: the waits pending for another lock, or for a millisecond, go to their row,
    /// and this lock's row is found (or claimed). `Err(n)`: `n` earlier waits found no row
    /// (count them untabled).
    pub fn prepare(&self, address: usize, kind: u8, now: u64) -> Result<(), u64> {
        let held = self.ticket();
        // The same lock, whose row is still its own (not destroyed since, a new lock at
        // the address then needing a row of its own; not missing, a claim then retried).
        if self.address.load(Ordering::Relaxed) == address && at(held).is_some() {
            if now.saturating_sub(self.since.load(Ordering::Relaxed)) < PENDING_NS {
                return Ok(());
            }
            self.since.store(now, Ordering::Relaxed);
            return self.flush();
        }
        let flushed = self.flush();
        let (index, generation) = slot(address, kind).map_or((usize::MAX, 0), ticket);
        self.slot.store(index.wrapping_add(1), Ordering::Relaxed);
        self.generation.store(generation, Ordering::Relaxed);
        self.address.store(address, Ordering::Relaxed);
        self.since.store(now, Ordering::Relaxed);
        flushed
    }

    /// The contended acquisition of `address` that [`PendingWaits::prepare`] was called
    /// for waited `ns`. False when the pending waits are another lock's now (a signal
    /// handler's wait came in between): the caller counts it as untabled.
    pub fn add(&self, address: usize, ns: u64) -> bool {
        if self.address.load(Ordering::Relaxed) != address {
            return false;
        }
        bump(&self.count, 1);
        bump(&self.ns, ns);
        if ns > self.max_ns.load(Ordering::Relaxed) {
            self.max_ns.store(ns, Ordering::Relaxed);
        }
        true
    }

    /// [`PendingWaits::add`] for a wait that was also measured for the blame, the only
    /// waiter it registered (a spin on a monitored spin lock): its row's counts of measured
    /// waits, kept with the rest, so that nothing shared is written while the lock is held.
    pub fn add_measured(&self, address: usize, ns: u64) -> bool {
        if !self.add(address, ns) {
            return false;
        }
        bump(&self.measured, 1);
        true
    }

    /// A hold of the lock at `address` that others waited for ended at `now`, standing for
    /// `weight` holds, `ns` long if timed: kept with the pending waits when they are that
    /// lock's and its row is still its own (false otherwise: the caller adds it to the row
    /// itself), and all of them go to the row once a millisecond.
    pub fn add_hold(&self, address: usize, weight: u32, ns: Option<u64>, now: u64) -> bool {
        let ticket = self.ticket();
        if address == 0 || self.address.load(Ordering::Relaxed) != address || at(ticket).is_none() {
            return false;
        }
        let weight = u64::from(weight);
        bump(&self.holds, weight);
        if let Some(ns) = ns {
            bump(&self.timed_holds, weight);
            bump(&self.hold_ns, ns.saturating_mul(weight));
        }
        if now.saturating_sub(self.since.load(Ordering::Relaxed)) >= PENDING_NS {
            self.since.store(now, Ordering::Relaxed);
            // The row is this lock's (checked above): nothing can be untabled.
            let _ = self.flush();
        }
        true
    }

    /// Adds the pending waits to their lock's row. `Err(n)`: no row for them (`n` waits:
    /// none could be had, or the lock was destroyed since). Called by the owner, and at the
    /// process's end by the thread that ends it, racing with an owner still running: a
    /// wait it adds meanwhile may be lost, or counted on the lock it waited for before.
    pub fn flush(&self) -> Result<(), u64> {
        let ticket = self.ticket();
        let count = self.count.swap(0, Ordering::Relaxed);
        let measured = self.measured.swap(0, Ordering::Relaxed);
        let ns = self.ns.swap(0, Ordering::Relaxed);
        let max_ns = self.max_ns.swap(0, Ordering::Relaxed);
        let holds =
            [&self.holds, &self.timed_holds, &self.hold_ns].map(|c| c.swap(0, Ordering::Relaxed));
        if count == 0 && holds[0] == 0 {
            return Ok(());
        }
        match at(ticket) {
            Some(s) => {
                if count > 0 {
                    s.waited(count, ns, max_ns);
                }
                if measured > 0 {
                    s.measured_many(measured, 1);
                }
                if holds[0] > 0 {
                    s.held_many(holds);
                }
                Ok(())
            }
            None => Err(count + holds[0]),
        }
    }

    /// Drops what is pending (a recycled thread state, a fork child).
    pub fn reset(&self) {
        self.count.store(0, Ordering::Relaxed);
        self.measured.store(0, Ordering::Relaxed);
        self.ns.store(0, Ordering::Relaxed);
        self.max_ns.store(0, Ordering::Relaxed);
        for c in [&self.holds, &self.timed_holds, &self.hold_ns] {
            c.store(0, Ordering::Relaxed);
        }
        self.address.store(0, Ordering::Relaxed);
        self.slot.store(0, Ordering::Relaxed);
    }
}

/// A thread's failed trylocks of one lock from one call site, not yet added to the lock's
/// row: a trylock loop adds its failures to the shared row once in a while, not with a
/// shared cache line's write and a clock reading per failure (63 ns a failure, against
/// 3.6 ns unprofiled). The clock is read every `every` failures (1 at first, doubling up to
/// [`TRY_READ_MAX`] while they come less than [`TRY_READ_NS`] apart in all, back to 1 when
/// they come slower), and the failures counted by the previous reading go to the row when
/// a reading finds the row's interval ended since, at the thread's next failure of another
/// lock or site, and at its end (or its lock's destroy): all of them are counted, each in
/// the interval of a reading after it at most `every` failures later. Owner only (plain
/// loads and stores), but for [`PendingTries::take`] at the process's end, which races with
/// an owner still failing (a failure counted meanwhile may be lost).
#[derive(Default)]
pub struct PendingTries {
    address: AtomicUsize,
    site: AtomicU64,
    kind: AtomicU32,
    /// Failures until the next reading, and the readings' distance (in failures).
    left: AtomicU32,
    every: AtomicU32,
    count: AtomicU64,
    /// The latest reading (monotonic ns).
    read_at: AtomicU64,
}

/// The most failures between two clock readings of [`PendingTries`].
const TRY_READ_MAX: u32 = 64;
/// Readings closer than this (ns) read less often.
const TRY_READ_NS: u64 = 20_000;

/// What [`PendingTries::note`] did with a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TryNoted {
    /// Counted: nothing more to do.
    Counted,
    /// Counted, and the clock is due: call [`PendingTries::read`].
    ReadDue,
    /// Not counted (another lock or site is pending): call [`PendingTries::start`].
    Other,
}

/// Failed trylocks handed out by [`PendingTries`], for the lock's row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TriesFailed {
    pub address: usize,
    pub kind: u8,
    pub site: u64,
    pub count: u64,
    /// The time they were counted by.
    pub at: u64,
}

impl PendingTries {
    /// A trylock of `address` from `site` failed: counted if they are the pending lock and
    /// site. A few loads and stores.
    #[inline(always)]
    pub fn note(&self, address: usize, site: usize) -> TryNoted {
        if self.address.load(Ordering::Relaxed) != address
            || self.site.load(Ordering::Relaxed) != site as u64
        {
            return TryNoted::Other;
        }
        bump(&self.count, 1);
        let left = self.left.load(Ordering::Relaxed).saturating_sub(1);
        self.left.store(left, Ordering::Relaxed);
        if left == 0 {
            TryNoted::ReadDue
        } else {
            TryNoted::Counted
        }
    }

    /// The clock read `now` after [`PendingTries::note`] said [`TryNoted::ReadDue`]: the
    /// failures counted by the previous reading, if the row's interval ended since it;
    /// sets the next reading's distance.
    pub fn read(&self, now: u64) -> Option<TriesFailed> {
        let at = self.read_at.load(Ordering::Relaxed);
        let every = self.every.load(Ordering::Relaxed).max(1);
        let next = if now.saturating_sub(at) < TRY_READ_NS {
            every.saturating_mul(2).min(TRY_READ_MAX)
        } else {
            1
        };
        self.every.store(next, Ordering::Relaxed);
        self.left.store(next, Ordering::Relaxed);
        self.read_at.store(now, Ordering::Relaxed);
        if now / LOCK_INTERVAL_NS == at / LOCK_INTERVAL_NS {
            return None;
        }
        // The last `every` failures came after the previous reading: they stay, for the
        // interval of this one.
        let count = self.count.load(Ordering::Relaxed);
        let before = count.saturating_sub(u64::from(every));
        self.count.store(count - before, Ordering::Relaxed);
        (before > 0).then(|| self.tries(before, at))
    }

    /// A failure of `address` (kind code `kind`) from `site` at `now` that
    /// [`PendingTries::note`] did not count: it becomes the pending one, and the failures
    /// pending before are handed out.
    pub fn start(&self, address: usize, kind: u8, site: usize, now: u64) -> Option<TriesFailed> {
        let before = self.take();
        self.address.store(address, Ordering::Relaxed);
        self.site.store(site as u64, Ordering::Relaxed);
        self.kind.store(u32::from(kind), Ordering::Relaxed);
        self.count.store(1, Ordering::Relaxed);
        self.every.store(1, Ordering::Relaxed);
        self.left.store(1, Ordering::Relaxed);
        self.read_at.store(now, Ordering::Relaxed);
        before
    }

    /// Hands out every pending failure (at the latest reading); the lock and site stay
    /// pending.
    pub fn take(&self) -> Option<TriesFailed> {
        let count = self.count.swap(0, Ordering::Relaxed);
        (count > 0).then(|| self.tries(count, self.read_at.load(Ordering::Relaxed)))
    }

    fn tries(&self, count: u64, at: u64) -> TriesFailed {
        TriesFailed {
            address: self.address.load(Ordering::Relaxed),
            kind: self.kind.load(Ordering::Relaxed) as u8,
            site: self.site.load(Ordering::Relaxed),
            count,
            at,
        }
    }

    /// Drops what is pending (a recycled thread state, a fork child).
    pub fn reset(&self) {
        self.address.store(0, Ordering::Relaxed);
        self.count.store(0, Ordering::Relaxed);
        self.left.store(0, Ordering::Relaxed);
    }
}

/// Adds `v` to a counter only its owner thread writes (a load and a store, no locked
/// instruction).
fn bump(c: &AtomicU64, v: u64) {
    c.store(
        c.load(Ordering::Relaxed).saturating_add(v),
        Ordering::Relaxed,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock_table::take;

    // The lock table is process-wide: each test uses addresses of its own.

    #[test]
    fn waits_pending_for_a_destroyed_lock_go_to_no_other_lock() {
        let a = 0x7300_0000_1000usize;
        let pending = PendingWaits::default();
        assert_eq!(pending.prepare(a, 2, 1), Ok(()));
        assert!(pending.add(a, 500));
        let (first, _) = take(a).expect("the wait claimed a row");
        assert_eq!(first.contended, 0, "still pending");
        // Another lock at the same address, then the pending wait is flushed.
        slot(a, 2).expect("room").try_failed(1, 0, 1);
        assert_eq!(pending.flush(), Err(1), "counted as untabled");
        let (second, _) = take(a).expect("the new lock's row");
        assert_eq!((second.contended, second.try_failed), (0, 1));
        // A wait of a live lock reaches its row.
        assert_eq!(pending.prepare(a + 8, 2, 2), Ok(()));
        assert!(pending.add(a + 8, 700));
        assert!(!pending.add(a, 1), "another lock's now");
        assert_eq!(pending.flush(), Ok(()));
        let (third, _) = take(a + 8).unwrap();
        assert_eq!(
            (third.contended, third.wait_ns, third.max_wait_ns),
            (1, 700, 700)
        );
    }
}
