//! The lock table: per-lock counters for the report's lock view (`report --view locks`).
//!
//! Job: keep, per lock or other waited-on object (keyed by its address), how often it was
//! acquired (sampled, `locks::acquisition_sampling`), how often a trylock found it held, how
//! often and how long threads waited for it, and the most waiters at once; hand a lock's
//! counters out when it is destroyed ([`take`]) and every live lock's at the end
//! ([`for_each`]), to be written as `LockStats` records.
//!
//! Only contended paths and sampled acquisitions come here, never an uncontended
//! acquisition that was not sampled: the counters are shared atomics, and a shared atomic per
//! acquisition would slow every uncontended lock.
//!
//! Invariants: a fixed open-addressed table in `.bss` (no page resident until a lock
//! lands on it); a slot's key is 0 (never used), [`GONE`] (freed: probing goes on past it)
//! or an address. Lookups, frees and claims of never-used slots are lock-free; reusing a
//! freed slot takes [`INSERT`], a try-lock tried a bounded number of times: a caller that
//! still finds it busy (its own interrupted claim, when a signal handler takes a lock)
//! gives up and the caller counts the event as untabled, so nothing here waits
//! unboundedly. Counts of a lock that found no room are counted by
//! the caller, never dropped silently. A destroyed lock's slot is freed, so the table is
//! bounded by the locks live at once, not by those ever used.
//!
//! Allocation-free; lock-free (never waits); not used by the signal handler.

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

    fn snapshot(&self, address: usize, flags: u8) -> LockStats {
        let counts = self.counters().map(|c| c.load(Ordering::Relaxed));
        let kind = self.kind.load(Ordering::Relaxed) as u8;
        let site = super::init_sites::site_of(address) as u64;
        LockStats::from_counts((address as u64, kind, flags, site), counts)
    }

    fn clear(&self) {
        for c in self.counters() {
            c.store(0, Ordering::Relaxed);
        }
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
/// none. `None` when no slot is free near its home, or the claim of a freed slot could not
/// be had: the caller counts the event as untabled.
///
/// A never-used slot is claimed by compare-and-swap, lock-free: two threads that claim
/// one lock probe the same slots in the same order, and a never-used slot only ever
/// becomes a lock's, so they meet at the same one. A freed slot ([`GONE`]) is reused only
/// under [`INSERT`], and a lock-free claim that passes one goes there too, so that no
/// lock gets two slots.
pub fn slot(address: usize, kind: u8) -> Option<&'static Slot> {
    if address <= GONE {
        return None;
    }
    for slot in probe(address) {
        match slot.key.load(Ordering::Acquire) {
            k if k == address => return Some(slot),
            0 => match slot
                .key
                .compare_exchange(0, address, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(claimed(slot, kind)),
                Err(k) if k == address => return Some(slot),
                Err(_) => {}
            },
            GONE => break,
            _ => {}
        }
    }
    let _claim = Claim::try_take()?;
    for slot in probe(address) {
        match slot.key.load(Ordering::Acquire) {
            k if k == address => return Some(slot),
            GONE => {
                slot.key.store(address, Ordering::Release);
                return Some(claimed(slot, kind));
            }
            0 => match slot
                .key
                .compare_exchange(0, address, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(claimed(slot, kind)),
                Err(k) if k == address => return Some(slot),
                Err(_) => {}
            },
            _ => {}
        }
    }
    None
}

/// A slot just claimed for a lock of kind `kind`.
fn claimed(slot: &'static Slot, kind: u8) -> &'static Slot {
    slot.kind.store(u32::from(kind), Ordering::Relaxed);
    let live = LIVE.fetch_add(1, Ordering::Relaxed) + 1;
    PEAK.fetch_max(live, Ordering::Relaxed);
    slot
}

/// Frees the slot of the lock at `address` (destroyed, or initialised again) and returns its
/// counters, flagged [`crate::format::LOCK_DESTROYED`]; `None` when it had none.
pub fn take(address: usize) -> Option<LockStats> {
    let slot = find(address)?;
    let stats = slot.snapshot(address, crate::format::LOCK_DESTROYED);
    slot.clear();
    // Lost to a racing take of the same lock (a program's double destroy): its counts
    // went with the other.
    slot.key
        .compare_exchange(address, GONE, Ordering::AcqRel, Ordering::Relaxed)
        .ok()?;
    LIVE.fetch_sub(1, Ordering::Relaxed);
    Some(stats)
}

/// Calls `f` with the counters of every lock in the table (at the process's end).
pub fn for_each(mut f: impl FnMut(LockStats)) {
    if PEAK.load(Ordering::Relaxed) == 0 {
        return;
    }
    for slot in &TABLE {
        let key = slot.key.load(Ordering::Acquire);
        if key > GONE {
            f(slot.snapshot(key, 0));
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
            slot.clear();
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
/// has just ended in an acquisition). Owner only; its atomics are plain loads and stores.
#[derive(Default)]
pub struct PendingWaits {
    address: AtomicUsize,
    kind: AtomicU32,
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
            self.address.store(address, Ordering::Relaxed);
            self.kind.store(u32::from(kind), Ordering::Relaxed);
            self.since.store(now, Ordering::Relaxed);
        }
        let add = |c: &AtomicU64, v: u64| c.store(c.load(Ordering::Relaxed) + v, Ordering::Relaxed);
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

    /// Adds the pending waits to their lock's row. `Err(n)`: no row for them (`n` waits).
    /// Also called, racily, on another thread's pending waits at the process's end.
    pub fn flush(&self) -> Result<(), u64> {
        let count = self.count.swap(0, Ordering::Relaxed);
        let ns = self.ns.swap(0, Ordering::Relaxed);
        let max_ns = self.max_ns.swap(0, Ordering::Relaxed);
        let address = self.address.load(Ordering::Relaxed);
        if count == 0 {
            return Ok(());
        }
        match slot(address, self.kind.load(Ordering::Relaxed) as u8) {
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
        for_each(|l| seen.push(l));
        let l = seen.iter().find(|l| l.address == a as u64).expect("live");
        assert_eq!(
            (l.try_failed, l.acquisitions, l.flags),
            (1, 0, 0),
            "a new lock"
        );
        take(a);
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
