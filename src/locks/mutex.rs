//! Blame for blocking mutexes: who held the lock while others slept on it.
//!
//! Job: for a contended `pthread_mutex_*` acquisition, measure the waiter's blocked time, and
//! charge each holder exactly the waiter-time that passed during its own hold: the integral
//! over its hold of the number of blocked waiters (waiters × duration). When several holders
//! come in turn, each settles its own share at its unlock; a waiter never pays for itself.
//!
//! State lives out of band, in a table keyed by the mutex's address, created on first
//! contention and recycled by `pthread_mutex_destroy`/`init` (glibc's mutex has no spare bits
//! to overlay). The table is a fixed array of buckets, each a chain of slab entries, so no
//! entry is ever lost to a collision and memory follows the number of contended mutexes. Every
//! bucket keeps a count of its *dirty* mutexes (waiters registered, blame not yet settled):
//! an unlock reads that one counter and returns at once when it is zero, which is the
//! uncontended fast path.
//!
//! Protocol per monitored mutex, under its small meta lock (held for a few instructions, never
//! across a blocking call):
//! - every event first brings `integral` up to date: while the mutex is *held*, it grows by
//!   `waiters × (now − stamp)`; while it is free (between an unlock and the next acquisition,
//!   blocked waiters not yet scheduled) nobody is to blame and it does not grow;
//! - a waiter's arrival marks the mutex held (its try just failed);
//! - any acquisition marks it held: a waiter's, and a fast-path one (a successful try) while
//!   the mutex is dirty, which costs that path one counter read otherwise — so a holder that
//!   barges in ahead of woken waiters is charged for exactly its own hold;
//! - a waiter that acquires drops any integral left from before (only a holder that released
//!   outside these wrappers could have left some);
//! - a holder, just before its real unlock, brings the integral up to date, takes it, and
//!   marks the mutex free: exactly its hold's waiter-time (taking it after the real unlock
//!   would race with the next owner); the expensive part (the unwind) happens after.
//!
//! Allocation-free. Not used by the signal handler.

use super::slab::{Linked, Slab};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

const BUCKETS: usize = 1 << 16;
const NONE: u32 = u32::MAX;

#[derive(Default)]
pub struct MonMutex {
    /// Address of the mutex (0 = free slot).
    key: AtomicUsize,
    /// Next entry in the bucket chain, or the free list.
    next: AtomicU32,
    meta: AtomicBool,
    /// Whether the mutex is held (waiter-time accrues only then).
    held: AtomicBool,
    waiters: AtomicU32,
    dirty: AtomicBool,
    /// Waiter-nanoseconds accumulated since the last settlement.
    integral: AtomicU64,
    /// Time (monotonic ns) the integral was last brought up to date.
    stamp: AtomicU64,
}

impl Linked for MonMutex {
    fn next(&self) -> &AtomicU32 {
        &self.next
    }
}

struct Bucket {
    lock: AtomicBool,
    head: AtomicU32,
    /// Mutexes in this chain that are dirty.
    dirty: AtomicU32,
}

static SLAB: Slab<MonMutex> = Slab::new();
static TABLE: [Bucket; BUCKETS] = [const {
    Bucket {
        lock: AtomicBool::new(false),
        head: AtomicU32::new(NONE),
        dirty: AtomicU32::new(0),
    }
}; BUCKETS];

fn bucket(address: usize) -> &'static Bucket {
    // Fibonacci hashing of the address (mutexes are at least 8-byte aligned).
    let h = (address as u64 >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 48;
    &TABLE[h as usize % BUCKETS]
}

fn spin_lock(flag: &AtomicBool) {
    while flag
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::hint::spin_loop();
    }
}

fn spin_unlock(flag: &AtomicBool) {
    flag.store(false, Ordering::Release);
}

impl Bucket {
    fn find(&self, address: usize) -> Option<&'static MonMutex> {
        let mut i = self.head.load(Ordering::Acquire);
        while i != NONE {
            let m = SLAB.get(i)?;
            if m.key.load(Ordering::Acquire) == address {
                return Some(m);
            }
            i = m.next.load(Ordering::Acquire);
        }
        None
    }
}

/// The monitoring state of the mutex at `address`, created if needed (`None` only when no
/// memory is left).
fn get_or_create(address: usize) -> Option<&'static MonMutex> {
    let b = bucket(address);
    spin_lock(&b.lock);
    let found = b.find(address).or_else(|| {
        let index = SLAB.alloc()?;
        let m = SLAB.get(index)?;
        m.waiters.store(0, Ordering::Relaxed);
        m.held.store(false, Ordering::Relaxed);
        m.dirty.store(false, Ordering::Relaxed);
        m.integral.store(0, Ordering::Relaxed);
        m.stamp.store(0, Ordering::Relaxed); // a recycled slot keeps its last user's time
        m.meta.store(false, Ordering::Relaxed);
        m.key.store(address, Ordering::Release);
        m.next
            .store(b.head.load(Ordering::Relaxed), Ordering::Release);
        b.head.store(index, Ordering::Release);
        Some(m)
    });
    spin_unlock(&b.lock);
    found
}

impl MonMutex {
    /// Brings the integral up to `now`. Call with `meta` held.
    fn advance(&self, now: u64) {
        let stamp = self.stamp.load(Ordering::Relaxed);
        let waiters = u64::from(self.waiters.load(Ordering::Relaxed));
        if waiters > 0 && now > stamp && self.held.load(Ordering::Relaxed) {
            self.integral
                .fetch_add(waiters * (now - stamp), Ordering::Relaxed);
        }
        self.stamp.store(now.max(stamp), Ordering::Relaxed);
    }
}

/// A waiter's registration, from [`arrive`] to [`depart`].
pub struct Wait {
    m: &'static MonMutex,
    pub start_ns: u64,
}

/// Registers the calling thread as blocked on the mutex at `address` from `now`.
pub fn arrive(address: usize, now: u64) -> Option<Wait> {
    let m = get_or_create(address)?;
    spin_lock(&m.meta);
    m.advance(now);
    m.waiters.fetch_add(1, Ordering::Relaxed);
    m.held.store(true, Ordering::Relaxed);
    if !m.dirty.swap(true, Ordering::Relaxed) {
        bucket(address).dirty.fetch_add(1, Ordering::AcqRel);
    }
    spin_unlock(&m.meta);
    Some(Wait { m, start_ns: now })
}

/// Ends a wait at `now`; `acquired` says whether the waiter now owns the mutex.
pub fn depart(wait: Wait, now: u64, acquired: bool) {
    let m = wait.m;
    spin_lock(&m.meta);
    m.advance(now);
    m.waiters.fetch_sub(1, Ordering::Relaxed);
    if acquired {
        m.integral.store(0, Ordering::Relaxed);
        m.held.store(true, Ordering::Relaxed);
    }
    spin_unlock(&m.meta);
}

/// After a successful try (the fast path): if the mutex is dirty, mark it held from `now`.
/// Costs one counter read when nobody has waited for mutexes of its bucket.
pub fn acquired(address: usize, now: impl FnOnce() -> u64) {
    let Some((_, m)) = dirty_entry(address) else {
        return;
    };
    spin_lock(&m.meta);
    m.advance(now());
    m.held.store(true, Ordering::Relaxed);
    spin_unlock(&m.meta);
}

/// The bucket and monitoring state of the mutex at `address` if it is dirty; one counter
/// read (and `None`) when no mutex of its bucket is.
fn dirty_entry(address: usize) -> Option<(&'static Bucket, &'static MonMutex)> {
    let b = bucket(address);
    if b.dirty.load(Ordering::Acquire) == 0 {
        return None;
    }
    spin_lock(&b.lock);
    let found = b.find(address);
    spin_unlock(&b.lock);
    let m = found?;
    m.dirty.load(Ordering::Acquire).then_some((b, m))
}

/// Before a real unlock: the blame the unlocking holder takes, or `None` on the fast path
/// (nobody waited: nothing was touched).
pub fn settle(address: usize, now: impl FnOnce() -> u64) -> Option<u64> {
    let (b, m) = dirty_entry(address)?;
    spin_lock(&m.meta);
    m.advance(now());
    let taken = m.integral.swap(0, Ordering::Relaxed);
    m.held.store(false, Ordering::Relaxed);
    if m.waiters.load(Ordering::Relaxed) == 0 && m.dirty.swap(false, Ordering::Relaxed) {
        b.dirty.fetch_sub(1, Ordering::AcqRel);
    }
    spin_unlock(&m.meta);
    Some(taken)
}

/// Gives back blame that could not be charged, so a later unlock of the same mutex takes it:
/// when the unlock failed (`still_held`: e.g. EPERM, the caller was not the owner, whose hold
/// goes on) or when it succeeded where no context can be recorded.
pub fn unsettle(address: usize, ns: u64, still_held: bool) {
    if ns == 0 && !still_held {
        return;
    }
    if let Some(m) = get_or_create(address) {
        spin_lock(&m.meta);
        if still_held {
            m.held.store(true, Ordering::Relaxed);
        }
        m.integral.fetch_add(ns, Ordering::Relaxed);
        if !m.dirty.swap(true, Ordering::Relaxed) {
            bucket(address).dirty.fetch_add(1, Ordering::AcqRel);
        }
        spin_unlock(&m.meta);
    }
}

/// `pthread_mutex_destroy`/`init`: forget the mutex at `address`, recycling its entry.
/// Returns blame that was still unsettled (0 normally).
pub fn forget(address: usize) -> u64 {
    let b = bucket(address);
    if b.head.load(Ordering::Acquire) == NONE {
        return 0;
    }
    spin_lock(&b.lock);
    let mut prev: Option<&MonMutex> = None;
    let mut i = b.head.load(Ordering::Acquire);
    let mut unsettled = 0;
    while i != NONE {
        let Some(m) = SLAB.get(i) else { break };
        let next = m.next.load(Ordering::Acquire);
        if m.key.load(Ordering::Acquire) == address {
            match prev {
                Some(p) => p.next.store(next, Ordering::Release),
                None => b.head.store(next, Ordering::Release),
            }
            if m.dirty.load(Ordering::Acquire) {
                b.dirty.fetch_sub(1, Ordering::AcqRel);
            }
            unsettled = m.integral.load(Ordering::Acquire);
            m.key.store(0, Ordering::Release);
            SLAB.free(i);
            break;
        }
        prev = Some(m);
        i = next;
    }
    spin_unlock(&b.lock);
    unsettled
}

/// Contended mutexes ever monitored at once (the slab's high-water mark).
pub fn monitored_high_water() -> u32 {
    SLAB.high_water()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_holder_takes_the_waiter_time_of_its_own_hold() {
        let mutex = 0x7000_0000usize;
        // Holder A holds from 0; W1 blocks at 10, W2 at 20; A unlocks at 30.
        let w1 = arrive(mutex, 10).unwrap();
        let w2 = arrive(mutex, 20).unwrap();
        let a = settle(mutex, || 30).unwrap();
        assert_eq!(a, (30 - 10) + (30 - 20));
        // W1 acquires at 32 (2 ns of hand-off, charged to nobody), holds until 50.
        depart(w1, 32, true);
        let w1_blame = settle(mutex, || 50).unwrap();
        assert_eq!(w1_blame, 50 - 32, "only W2 waited during W1's hold");
        // W2 acquires at 51 and unlocks at 60 with nobody waiting.
        depart(w2, 51, true);
        assert_eq!(settle(mutex, || 60), Some(0));
        // Settled and clean: the fast path applies again.
        assert_eq!(bucket(mutex).dirty.load(Ordering::Acquire), 0);
        assert_eq!(forget(mutex), 0);
    }

    #[test]
    fn a_barging_holder_pays_only_for_its_own_hold() {
        let mutex = 0x7200_0000usize;
        // H holds; W blocks at 0; H unlocks at 10 and takes 10.
        let w = arrive(mutex, 0).unwrap();
        assert_eq!(settle(mutex, || 10), Some(10));
        // The mutex is free from 10 to 40 while W is not yet scheduled: nobody's fault.
        // B barges in with a successful try at 40, holds until 45.
        acquired(mutex, || 40);
        assert_eq!(
            settle(mutex, || 45),
            Some(5),
            "B pays for its own 5 ns, not the free gap"
        );
        depart(w, 50, true);
        assert_eq!(settle(mutex, || 60), Some(0));
        assert_eq!(forget(mutex), 0);
    }

    #[test]
    fn unsettled_blame_waits_for_the_next_unlock() {
        let mutex = 0x7100_0000usize;
        let w = arrive(mutex, 0).unwrap();
        let taken = settle(mutex, || 100).unwrap();
        assert_eq!(taken, 100);
        unsettle(mutex, taken, false); // e.g. no context could be recorded
        depart(w, 101, false); // a timed wait gave up after the unlock: a free mutex's time
        assert_eq!(
            settle(mutex, || 120),
            Some(100),
            "exactly the given-back blame"
        );
        assert_eq!(forget(mutex), 0);
    }
}
