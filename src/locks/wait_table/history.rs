//! A mutex's waiter-time as a function of time, kept by its waiters and read by its holders
//! without a lock.
//!
//! Job: a mutex's entry records `C(t)`, the waiter-nanoseconds accumulated from the entry's
//! creation to `t` (exact and sampled parts apart), as a short history of its changes: each
//! arrival or departure of a waiter appends the value of `C` at that moment and the rate it
//! grows at from then on. A holder reads, after its release, `C(end) − C(start)` for its
//! hold: the integral of the blocked waiters over the hold, with no write to anything the
//! waiters write and nothing but its two clock reads inside its critical section
//! (issue 22). A waiter that gives up (timed out, interrupted) appends its *withdrawal*: its
//! contribution over the part of a hold it overlaps is taken out of that hold's blame.
//!
//! Invariants: written only with the entry's bucket lock held, inside the sequence lock's
//! write section (`seq` odd); read lock-free by copying what is needed and checking that
//! `seq` did not move. Stamps never decrease (a waiter's clock read earlier than the last
//! change counts as at the last change). The history keeps the last [`DEPTH`] changes: a
//! hold that outlived more is reconstructed approximately, and counted. Allocation-free;
//! not used by the signal handler.

use super::seq_count::SeqCount;
use super::state::WaiterTime;
use std::sync::atomic::{AtomicU64, Ordering};

/// Changes kept. A change is an arrival or a departure of a waiter that is measured (at a
/// high event rate, a small sample of the contended acquisitions); a hold that outlives
/// eight of them is a long hold among many waiters.
pub(super) const DEPTH: usize = 8;

/// One change: from `stamp` on, `C(t) = at + rate × (t − stamp)`, per part (exact,
/// sampled). A withdrawal (`withdrawn > 0`) also takes `withdrawn × (stamp − max(since,
/// hold start))` out of the hold that contains `stamp`. A cache line each: a holder reads
/// one or two.
#[derive(Default)]
#[repr(align(64))]
struct Change {
    stamp: AtomicU64,
    at: [AtomicU64; 2],
    rate: [AtomicU64; 2],
    since: AtomicU64,
    /// Weight withdrawn, with the part it counted in as its top bit.
    withdrawn: AtomicU64,
}

const SCALED_BIT: u64 = 1 << 63;

/// What a change records, as the writer sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Point {
    pub(super) stamp: u64,
    pub(super) at: [u64; 2],
    pub(super) rate: [u64; 2],
}

/// A departing waiter's withdrawal: it counted `weight` in `part` from `since`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Withdrawal {
    pub(super) since: u64,
    pub(super) weight: u64,
    pub(super) part: usize,
}

/// The history of one entry (all zero: empty).
#[derive(Default)]
pub struct History {
    /// Odd while a writer is changing the history or the entry's key.
    pub(super) seq: SeqCount,
    /// Changes appended since the entry was created.
    len: AtomicU64,
    /// The stamps of the latest two *revivals* (changes that gave waiters to a mutex that
    /// had none, the first change among them), latest first; 0: none.
    revived: [AtomicU64; 2],
    ring: [Change; DEPTH],
}

/// The value of a hold's blame, and whether the history was too short to know it exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HoldBlame {
    pub taken: WaiterTime,
    pub approximate: bool,
    /// When the waiting it takes began to count: the hold's start, or the arrival of the
    /// mutex's first waiter after none, whichever came later.
    pub since: u64,
}

impl History {
    /// Empties the history (inside a write section).
    pub(super) fn clear(&self) {
        self.len.store(0, Ordering::Relaxed);
        for r in &self.revived {
            r.store(0, Ordering::Relaxed);
        }
    }

    /// The latest point, or the empty one.
    pub(super) fn last(&self) -> Point {
        let len = self.len.load(Ordering::Relaxed);
        if len == 0 {
            return Point::default();
        }
        read_point(&self.ring[slot(len - 1)])
    }

    /// Appends a change at `now` to the rates `rate` (inside a write section): `C` is
    /// carried forward from the last change at the old rates. Returns the change's stamp.
    pub(super) fn push(&self, now: u64, rate: [u64; 2], withdrawal: Option<Withdrawal>) -> u64 {
        let last = self.last();
        let stamp = now.max(last.stamp);
        let at = last.value_at(stamp);
        let len = self.len.load(Ordering::Relaxed);
        let c = &self.ring[slot(len)];
        c.stamp.store(stamp, Ordering::Relaxed);
        for i in 0..2 {
            c.at[i].store(at[i], Ordering::Relaxed);
            c.rate[i].store(rate[i], Ordering::Relaxed);
        }
        if last.rate == [0, 0] && rate != [0, 0] {
            let latest = self.revived[0].load(Ordering::Relaxed);
            self.revived[1].store(latest, Ordering::Relaxed);
            self.revived[0].store(stamp, Ordering::Relaxed);
        }
        let (since, withdrawn) = match withdrawal {
            Some(w) if w.weight > 0 => (
                w.since,
                w.weight.min(SCALED_BIT - 1) | if w.part == 1 { SCALED_BIT } else { 0 },
            ),
            _ => (0, 0),
        };
        c.since.store(since, Ordering::Relaxed);
        c.withdrawn.store(withdrawn, Ordering::Relaxed);
        self.len.store(len + 1, Ordering::Relaxed);
        stamp
    }

    /// The waiter-time of a hold from `start` (`None`: from before anyone waited) to `end`.
    /// Inside a read section or with the bucket lock held; the caller validates.
    ///
    /// Only the waiting since the mutex's latest *revival* before `end` (a first waiter
    /// after none) counts: a hold that began before it either saw its earlier waiters give
    /// up (withdrawn anyway) or was noted by a thread whose release was not measured then,
    /// a note that must not reach back into other holds.
    pub(super) fn hold_blame(&self, start: Option<u64>, end: u64) -> HoldBlame {
        let len = self.len.load(Ordering::Relaxed);
        let oldest = len.saturating_sub(DEPTH as u64);
        let mut approximate = false;
        let from = start
            .unwrap_or(0)
            .max(self.revival_before(end, &mut approximate));
        if from >= end {
            return HoldBlame {
                approximate,
                since: end,
                ..HoldBlame::default()
            };
        }
        let c_end = self.value_at(len, oldest, end, &mut approximate);
        let c_start = self.value_at(len, oldest, from, &mut approximate);
        let mut taken = [
            c_end[0].saturating_sub(c_start[0]),
            c_end[1].saturating_sub(c_start[1]),
        ];
        // Withdrawals inside the hold: from the newest change back to the hold's start.
        let mut k = len;
        while k > oldest {
            k -= 1;
            let c = &self.ring[slot(k)];
            let stamp = c.stamp.load(Ordering::Relaxed);
            if stamp <= from {
                break;
            }
            if k == oldest && oldest > 0 {
                // Changes older than this one, still inside the hold, are gone.
                approximate = true;
            }
            let w = c.withdrawn.load(Ordering::Relaxed);
            if stamp > end || w == 0 {
                continue;
            }
            let part = usize::from(w & SCALED_BIT != 0);
            let since = c.since.load(Ordering::Relaxed).max(from);
            let mine = (w & !SCALED_BIT).saturating_mul(stamp.saturating_sub(since));
            taken[part] = taken[part].saturating_sub(mine);
        }
        HoldBlame {
            taken: WaiterTime {
                exact: taken[0],
                scaled: taken[1],
            },
            approximate,
            since: from,
        }
    }

    /// The stamp of the latest revival at or before `t`; `t` itself (nothing to take) when
    /// the mutex's waiting all came after `t`, or, approximately, when the two revivals kept
    /// both came after it.
    fn revival_before(&self, t: u64, approximate: &mut bool) -> u64 {
        let [latest, previous] = [0, 1].map(|i| self.revived[i].load(Ordering::Relaxed));
        if latest <= t {
            return latest;
        }
        if previous == 0 {
            // The first change came after `t`.
            return t;
        }
        if previous <= t {
            return previous;
        }
        *approximate = true;
        t
    }

    /// `C(t)` from the changes `oldest..len`; sets `approximate` when `t` is older than the
    /// oldest kept change but not older than the entry.
    fn value_at(&self, len: u64, oldest: u64, t: u64, approximate: &mut bool) -> [u64; 2] {
        let mut k = len;
        while k > oldest {
            k -= 1;
            let p = read_point(&self.ring[slot(k)]);
            if p.stamp <= t {
                return p.value_at(t);
            }
            if k == oldest {
                if oldest == 0 {
                    // Before the first change: the entry did not exist.
                    return [0, 0];
                }
                // Older changes are gone: extrapolate back at the oldest kept rate.
                *approximate = true;
                let back = p.stamp - t;
                return [
                    p.at[0].saturating_sub(p.rate[0].saturating_mul(back)),
                    p.at[1].saturating_sub(p.rate[1].saturating_mul(back)),
                ];
            }
        }
        [0, 0]
    }
}

impl Point {
    /// `C(t)` for `t` at or after this change (until the next).
    fn value_at(&self, t: u64) -> [u64; 2] {
        let dt = t.saturating_sub(self.stamp);
        [
            self.at[0].saturating_add(self.rate[0].saturating_mul(dt)),
            self.at[1].saturating_add(self.rate[1].saturating_mul(dt)),
        ]
    }
}

fn read_point(c: &Change) -> Point {
    Point {
        stamp: c.stamp.load(Ordering::Relaxed),
        at: [
            c.at[0].load(Ordering::Relaxed),
            c.at[1].load(Ordering::Relaxed),
        ],
        rate: [
            c.rate[0].load(Ordering::Relaxed),
            c.rate[1].load(Ordering::Relaxed),
        ],
    }
}

fn slot(k: u64) -> usize {
    (k % DEPTH as u64) as usize
}
