//! The lock table: per-lock counters for the report's lock view (`report --view locks`).
//!
//! Job: keep, per lock or other waited-on object (keyed by its address), how often it was
//! acquired (sampled, `locks::acquisition_sampling`), how often a trylock found it held, how
//! often and how long threads waited for it, and the most waiters at once; hand a lock's
//! counters out when it is destroyed ([`take`]) and every live lock's at the end
//! ([`drain`]: the counts since the last records, so that an image that ends twice, at a
//! failed `exec` and at its exit, counts nothing twice), to be written as `LockStats`
//! records.
//!
//! Only contended paths and sampled acquisitions come here, never an uncontended
//! acquisition that was not sampled: the counters are shared atomics, and a shared atomic per
//! acquisition would slow every uncontended lock.
//!
//! Invariants: a fixed open-addressed table in `.bss` (no page resident until a lock
//! lands on it); a slot's key is 0 (never used), [`GONE`] (freed: probing goes on past it)
//! or an address, and a lock has at most one slot: lookups and frees are lock-free, claims
//! take [`INSERT`] (once per lock), a try-lock tried a bounded number of times, so a caller
//! that still finds it busy (its own interrupted claim, when a signal handler takes a
//! lock) gives up and counts the event as untabled: nothing here waits unboundedly. Each
//! slot's generation changes when it is freed, so counts kept elsewhere for a lock that
//! has since been destroyed ([`PendingWaits`]) are recognised and not given to the next
//! lock. Counts that find no slot are counted by the caller, never dropped silently. A
//! destroyed lock's slot is freed, so the table is bounded by the locks live at once (and
//! the objects that are never destroyed: futex words, joined threads, mutexes freed without
//! `pthread_mutex_destroy`), not by those ever used.
//!
//! Allocation-free; not used by the signal handler.

use crate::format::LockStats;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Slots (a power of two): 64 Ki locks live at once, 5.5 MiB of address space, resident
/// only where locks land.
const CAPACITY: usize = 1 << 16;
/// Slots looked at from a lock's home slot before it is declared absent (or the table
/// full for it).
const PROBES: usize = 32;
/// Key of a freed slot.
const GONE: usize = 1;

/// One lock's counters. All relaxed atomics: counts, not synchronisation.
pub struct Slot {
    key: AtomicUsize,
    kind: AtomicU32,
    /// Changes each time the slot is freed.
    generation: AtomicU32,
    acquisitions: AtomicU64,
    acquisition_samples: AtomicU64,
    try_acquired: AtomicU64,
    try_failed: AtomicU64,
    contended: AtomicU64,
    contended_measured: AtomicU64,
    wait_ns: AtomicU64,
    max_wait_ns: AtomicU64,
    peak_waiters: AtomicU64,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            key: AtomicUsize::new(0),
            kind: AtomicU32::new(0),
            generation: AtomicU32::new(0),
            acquisitions: AtomicU64::new(0),
            acquisition_samples: AtomicU64::new(0),
            try_acquired: AtomicU64::new(0),
            try_failed: AtomicU64::new(0),
            contended: AtomicU64::new(0),
            contended_measured: AtomicU64::new(0),
            wait_ns: AtomicU64::new(0),
            max_wait_ns: AtomicU64::new(0),
            peak_waiters: AtomicU64::new(0),
        }
    }

    fn counters(&self) -> [&AtomicU64; 9] {
        [
            &self.acquisitions,
            &self.acquisition_samples,
            &self.try_acquired,
            &self.try_failed,
            &self.contended,
            &self.contended_measured,
            &self.wait_ns,
            &self.max_wait_ns,
            &self.peak_waiters,
        ]
    }

    /// `weight` acquisitions (one sampled one standing for `weight`), by a trylock or not.
    pub fn acquired(&self, weight: u32, by_try: bool) {
        self.acquisitions
            .fetch_add(u64::from(weight), Ordering::Relaxed);
        self.acquisition_samples.fetch_add(1, Ordering::Relaxed);
        if by_try {
            self.try_acquired
                .fetch_add(u64::from(weight), Ordering::Relaxed);
        }
    }

    /// A trylock that found the lock held.
    pub fn try_failed(&self) {
        self.try_failed.fetch_add(1, Ordering::Relaxed);
    }

    /// A wait registered with the lock (measured for the blame), with `waiters` measured
    /// waiters registered (itself included).
    pub fn measured(&self, waiters: u32) {
        self.contended_measured.fetch_add(1, Ordering::Relaxed);
        self.peak_waiters
            .fetch_max(u64::from(waiters), Ordering::Relaxed);
    }

    /// `count` waits that lasted `ns` in all, the longest `max_ns`.
    pub fn waited(&self, count: u64, ns: u64, max_ns: u64) {
        self.contended.fetch_add(count, Ordering::Relaxed);
        self.wait_ns.fetch_add(ns, Ordering::Relaxed);
        self.max_wait_ns.fetch_max(max_ns, Ordering::Relaxed);
    }

    /// Its counts, which it resets.
    fn take_counts(&self, address: usize, flags: u8) -> LockStats {
        let counts = self.counters().map(|c| c.swap(0, Ordering::Relaxed));
        let kind = self.kind.load(Ordering::Relaxed) as u8;
        let site = super::init_sites::site_of(address) as u64;
        LockStats::from_counts((address as u64, kind, flags, site), counts)
    }
}

/// The table. Zero-initialised: it lives in `.bss`.
static TABLE: [Slot; CAPACITY] = [const { Slot::new() }; CAPACITY];
/// Held while a slot is claimed or freed (a try-lock: nobody waits for it).
static INSERT: AtomicBool = AtomicBool::new(false);
/// Slots holding a lock now, and the most at once.
static LIVE: AtomicU32 = AtomicU32::new(0);
static PEAK: AtomicU32 = AtomicU32::new(0);

fn home(address: usize) -> usize {
    // Fibonacci hashing of the address without its alignment bits.
    ((address >> 3) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) as usize >> 16 & (CAPACITY - 1)
}

fn probe(address: usize) -> impl Iterator<Item = &'static Slot> {
    let start = home(address);
    (0..PROBES).map(move |i| &TABLE[(start + i) & (CAPACITY - 1)])
}

/// The slot of the lock at `address`, if it has one. Lock-free.
pub fn find(address: usize) -> Option<&'static Slot> {
    for slot in probe(address) {
        match slot.key.load(Ordering::Acquire) {
            k if k == address => return Some(slot),
            0 => return None,
            _ => {}
        }
    }
    None
}

/// The slot of the lock at `address` of kind `kind` (a `WaitKind` code), claimed if it has
/// none. `None` when no slot is free near its home, or the claim could not be had: the
/// caller counts the event as untabled.
pub fn slot(address: usize, kind: u8) -> Option<&'static Slot> {
    if address <= GONE {
        return None;
    }
    if let Some(slot) = find(address) {
        return Some(slot);
    }
    let _claim = Claim::try_take()?;
    // Claimed by another thread meanwhile? (The whole probe window: a freed slot before
    // the lock's own does not end the search.)
    if let Some(slot) = probe(address).find(|s| s.key.load(Ordering::Acquire) == address) {
        return Some(slot);
    }
    let slot = probe(address).find(|s| s.key.load(Ordering::Relaxed) <= GONE)?;
    slot.kind.store(u32::from(kind), Ordering::Relaxed);
    slot.key.store(address, Ordering::Release);
    let live = LIVE.fetch_add(1, Ordering::Relaxed) + 1;
    PEAK.fetch_max(live, Ordering::Relaxed);
    Some(slot)
}

/// The slot's index and generation, to find it again ([`at`]) only if it still belongs to
/// the same lock.
pub fn ticket(slot: &'static Slot) -> (usize, u32) {
    let index = (slot as *const Slot as usize - TABLE.as_ptr() as usize) / size_of::<Slot>();
    (index, slot.generation.load(Ordering::Acquire))
}

/// The slot of a [`ticket`], if it has not been freed since.
pub fn at((index, generation): (usize, u32)) -> Option<&'static Slot> {
    let slot = TABLE.get(index)?;
    (slot.generation.load(Ordering::Acquire) == generation).then_some(slot)
}

/// Frees the slot of the lock at `address` (destroyed, or initialised again) and returns its
/// counters, flagged [`crate::format::LOCK_DESTROYED`]; `None` when it had none.
pub fn take(address: usize) -> Option<LockStats> {
    let slot = find(address)?;
    // Lost to a racing take of the same lock (a program's double destroy): its counts go
    // with the other.
    slot.key
        .compare_exchange(address, GONE, Ordering::AcqRel, Ordering::Relaxed)
        .ok()?;
    slot.generation.fetch_add(1, Ordering::AcqRel);
    LIVE.fetch_sub(1, Ordering::Relaxed);
    Some(slot.take_counts(address, crate::format::LOCK_DESTROYED))
}

/// Calls `f` with the counts of every lock in the table since the last call (at the end
/// of the process image), resetting them.
pub fn drain(mut f: impl FnMut(LockStats)) {
    if PEAK.load(Ordering::Relaxed) == 0 {
        return;
    }
    for slot in &TABLE {
        let key = slot.key.load(Ordering::Acquire);
        if key > GONE {
            f(slot.take_counts(key, 0));
        }
    }
}

/// The most locks in the table at once.
pub fn peak() -> u32 {
    PEAK.load(Ordering::Relaxed)
}

/// In a fork child: the parent's counts are the parent's to report. Only the calling
/// thread runs.
pub fn reset_after_fork() {
    INSERT.store(false, Ordering::Relaxed);
    if PEAK.load(Ordering::Relaxed) == 0 {
        return;
    }
    for slot in &TABLE {
        if slot.key.load(Ordering::Relaxed) != 0 {
            slot.take_counts(0, 0);
            slot.generation.fetch_add(1, Ordering::Relaxed);
            slot.key.store(GONE, Ordering::Relaxed);
        }
    }
    LIVE.store(0, Ordering::Relaxed);
    PEAK.store(0, Ordering::Relaxed);
}

/// Attempts at the insert try-lock before giving up, the later ones after yielding the
/// CPU. It is held for a few instructions, so another thread's claim ends within a few
/// attempts unless that thread was preempted (then it runs again when this one yields);
/// the caller's own claim (a signal handler taking a lock while it inserts) never does,
/// so the attempts are bounded.
const CLAIM_ATTEMPTS: u32 = 256;
const CLAIM_YIELDS: u32 = 64;

/// A thread's contended acquisitions of the lock it last waited for, not yet added to the
/// lock's row: a thread that waits for one lock thousands of times a second adds its
/// counts to the shared row once a millisecond, or when it waits for another lock, not at
/// every wait (which would put shared atomics in the program's critical section: the wait
/// has just ended in an acquisition). It holds the row's [`ticket`], so that waits of a lock
/// destroyed meanwhile are not given to the next lock in its slot. Owner only (its atomics
/// are plain loads and stores), but for [`PendingWaits::flush`] at the process's end.
#[derive(Default)]
pub struct PendingWaits {
    address: AtomicUsize,
    /// The row's ticket: index + 1 (0: none, the waits are untabled), generation.
    slot: AtomicUsize,
    generation: AtomicU32,
    count: AtomicU64,
    ns: AtomicU64,
    max_ns: AtomicU64,
    since: AtomicU64,
}

/// How often a thread's pending waits reach the table at least.
const PENDING_NS: u64 = 1_000_000;

impl PendingWaits {
    /// A contended acquisition of the lock at `address` (kind code `kind`) that waited `ns`
    /// and ended at `now`. `Err(n)`: `n` earlier waits found no row (count them untabled).
    pub fn add(&self, address: usize, kind: u8, ns: u64, now: u64) -> Result<(), u64> {
        let mut flushed = Ok(());
        if self.address.load(Ordering::Relaxed) != address {
            flushed = self.flush();
            let (index, generation) = slot(address, kind).map_or((usize::MAX, 0), ticket);
            self.slot.store(index.wrapping_add(1), Ordering::Relaxed);
            self.generation.store(generation, Ordering::Relaxed);
            self.address.store(address, Ordering::Relaxed);
            self.since.store(now, Ordering::Relaxed);
        }
        let add = |c: &AtomicU64, v: u64| {
            c.store(
                c.load(Ordering::Relaxed).saturating_add(v),
                Ordering::Relaxed,
            )
        };
        add(&self.count, 1);
        add(&self.ns, ns);
        if ns > self.max_ns.load(Ordering::Relaxed) {
            self.max_ns.store(ns, Ordering::Relaxed);
        }
        if now.saturating_sub(self.since.load(Ordering::Relaxed)) >= PENDING_NS {
            self.since.store(now, Ordering::Relaxed);
            flushed = flushed.and(self.flush());
        }
        flushed
    }

    /// Adds the pending waits to their lock's row. `Err(n)`: no row for them (`n` waits:
    /// none could be had, or the lock was destroyed since). Called by the owner, and at the
    /// process's end by the thread that ends it, racing with an owner still running: a
    /// wait it adds meanwhile may be lost, or counted on the lock it waited for before.
    pub fn flush(&self) -> Result<(), u64> {
        let ticket = (
            self.slot.load(Ordering::Relaxed).wrapping_sub(1),
            self.generation.load(Ordering::Relaxed),
        );
        let count = self.count.swap(0, Ordering::Relaxed);
        let ns = self.ns.swap(0, Ordering::Relaxed);
        let max_ns = self.max_ns.swap(0, Ordering::Relaxed);
        if count == 0 {
            return Ok(());
        }
        match at(ticket) {
            Some(s) => {
                s.waited(count, ns, max_ns);
                Ok(())
            }
            None => Err(count),
        }
    }

    /// Drops what is pending (a recycled thread state, a fork child).
    pub fn reset(&self) {
        self.count.store(0, Ordering::Relaxed);
        self.ns.store(0, Ordering::Relaxed);
        self.max_ns.store(0, Ordering::Relaxed);
        self.address.store(0, Ordering::Relaxed);
        self.slot.store(0, Ordering::Relaxed);
    }
}

/// The insert try-lock, released on drop.
struct Claim;

impl Claim {
    fn try_take() -> Option<Claim> {
        for attempt in 0..CLAIM_ATTEMPTS + CLAIM_YIELDS {
            if !INSERT.swap(true, Ordering::Acquire) {
                return Some(Claim);
            }
            if attempt < CLAIM_ATTEMPTS {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        None
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        INSERT.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The table is process-wide: each test uses addresses of its own.

    #[test]
    fn counts_land_on_the_locks_slot_and_a_destroyed_lock_frees_it() {
        let a = 0x7000_0000_1000usize;
        let s = slot(a, 2).expect("room");
        s.acquired(256, false);
        s.acquired(100, true);
        s.try_failed();
        s.measured(3);
        s.waited(1, 500, 500);
        s.measured(2);
        s.waited(4, 4000, 1000);
        assert!(std::ptr::eq(s, slot(a, 2).unwrap()), "one slot per lock");
        let got = take(a).expect("counted");
        assert_eq!(got.address, a as u64);
        assert_eq!(got.kind, 2);
        assert_eq!(got.flags, crate::format::LOCK_DESTROYED);
        assert_eq!((got.acquisitions, got.acquisition_samples), (356, 2));
        assert_eq!((got.try_acquired, got.try_failed), (100, 1));
        assert_eq!((got.contended, got.contended_measured), (5, 2));
        assert_eq!(got.wait_ns, 4500);
        assert_eq!((got.max_wait_ns, got.peak_waiters), (1000, 3));
        assert!(find(a).is_none(), "freed");
        let again = slot(a, 2).expect("room again");
        again.try_failed();
        let mut seen = Vec::new();
        drain(|l| seen.push(l));
        let l = seen.iter().find(|l| l.address == a as u64).expect("live");
        assert_eq!(
            (l.try_failed, l.acquisitions, l.flags),
            (1, 0, 0),
            "a new lock"
        );
        take(a);
    }

    #[test]
    fn waits_pending_for_a_destroyed_lock_go_to_no_other_lock() {
        let a = 0x7300_0000_1000usize;
        let pending = PendingWaits::default();
        assert_eq!(pending.add(a, 2, 500, 1), Ok(()));
        let first = take(a).expect("the wait claimed a row");
        assert_eq!(first.contended, 0, "still pending");
        // Another lock at the same address, then the pending wait is flushed.
        slot(a, 2).expect("room").try_failed();
        assert_eq!(pending.flush(), Err(1), "counted as untabled");
        let second = take(a).expect("the new lock's row");
        assert_eq!((second.contended, second.try_failed), (0, 1));
        // A wait of a live lock reaches its row.
        assert_eq!(pending.add(a + 8, 2, 700, 2), Ok(()));
        assert_eq!(pending.flush(), Ok(()));
        let third = take(a + 8).unwrap();
        assert_eq!(
            (third.contended, third.wait_ns, third.max_wait_ns),
            (1, 700, 700)
        );
    }

    #[test]
    fn a_lock_behind_a_freed_slot_keeps_its_own_slot() {
        // Two locks with one home: the first is destroyed, leaving a freed slot before the
        // second's.
        let base = 0x7400_0000_0000usize;
        let want = home(base);
        let pair: Vec<usize> = (1..1usize << 26)
            .map(|i| base + i * 8)
            .filter(|&a| home(a) == want)
            .take(2)
            .collect();
        let (x, y) = (pair[0], pair[1]);
        slot(x, 2).unwrap();
        slot(y, 2).unwrap().try_failed();
        take(x).unwrap();
        slot(y, 2).unwrap().try_failed();
        let counts = take(y).unwrap();
        assert_eq!(counts.try_failed, 2, "one slot for y");
        assert!(find(y).is_none(), "and it is freed");
    }

    #[test]
    fn a_crowded_home_is_reported_not_overwritten() {
        // Addresses with the same home slot: the first PROBES fit, the next does not.
        let base = 0x7100_0000_0000usize;
        let want = home(base);
        let crowd: Vec<usize> = (0..1usize << 26)
            .map(|i| base + i * 8)
            .filter(|&a| home(a) == want)
            .take(PROBES + 1)
            .collect();
        assert_eq!(crowd.len(), PROBES + 1);
        for &a in &crowd[..PROBES] {
            slot(a, 2).expect("within the probe window").try_failed();
        }
        assert!(
            slot(crowd[PROBES], 2).is_none(),
            "no room: the caller counts it"
        );
        for &a in &crowd[..PROBES] {
            assert_eq!(take(a).expect("kept").try_failed, 1);
        }
        assert!(slot(crowd[PROBES], 2).is_some(), "freed slots are reused");
        take(crowd[PROBES]);
    }
}
