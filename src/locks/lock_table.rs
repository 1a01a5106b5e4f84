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
//! Invariants: an open-addressed table of keys in `.bss` maps a lock's address to its row,
//! a [`Slot`] in a slab (`locks::slab`: rows are packed, so memory follows the locks with
//! rows, not the table's size). A key is 0 (never used), [`GONE`] (freed: probing goes on
//! past it) or the address and the row's index packed in one word; the locks of one page
//! of memory have their keys in one block of the table, so an array of locks touches one
//! or two pages of keys. A lock has at most one key: lookups and frees are lock-free,
//! claims take [`INSERT`] (once per lock), a try-lock tried a bounded number of times, so a
//! caller that still finds it busy (its own interrupted claim, when a signal handler takes
//! a lock) gives up and counts the event as untabled: nothing here waits unboundedly. Each
//! row's generation changes when it is freed, so counts kept elsewhere for a lock that has
//! since been destroyed (`locks::pending_counts`) are recognised and not given to the next lock. Counts that find no slot are counted by the caller, never dropped silently. A
//! destroyed lock's slot is freed, so the table is bounded by the locks live at once (and
//! the objects that are never destroyed: futex words, joined threads, mutexes freed without
//! `pthread_mutex_destroy`), not by those ever used.
//!
//! Each row also counts its acquisitions and failed trylocks per interval of
//! [`LOCK_INTERVAL_NS`] (the timeline's, which samples cannot tell: a wait's and a
//! release's samples carry their own times): the first count of a new interval swaps the
//! old interval's counts out for the caller to write ([`Slot::acquired`],
//! [`Slot::try_failed`]), and [`take`] and [`drain`] hand out the last one. A count racing
//! the swap may land in the next interval; nothing is lost.
//!
//! Allocation-free; not used by the signal handler.

use super::slab::{Linked, Slab};
use crate::format::{LockInterval, LockStats, LOCK_INTERVAL_NS, TRY_SITES_MANY};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Keys (a power of two): 64 Ki locks with rows at once, 512 KiB of address space.
const CAPACITY: usize = 1 << 16;
/// Keys looked at from a lock's home before it is declared absent (or the table full for
/// it).
const PROBES: usize = 32;
/// Key of a freed entry.
const GONE: u64 = 1;
/// Bits of a key that hold the row's index.
const INDEX_BITS: u32 = 19;
/// Keys of the locks in one page of memory lie in one block of this many.
const BLOCK: usize = 256;

/// One lock's row: its counters. All relaxed atomics: counts, not synchronisation. Valid
/// when zeroed (slab memory); its counters are zero again when it is freed.
pub struct Slot {
    /// The slab's free-list link.
    next: AtomicU32,
    /// Its own index in the slab.
    me: AtomicU32,
    /// 1 while the row counts in [`ACQUISITION_ROWS`]: claimed for sampled acquisitions,
    /// and no wait or failed trylock of its lock counted yet.
    acquisitions_only: AtomicU32,
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
    contended_holds: AtomicU64,
    timed_holds: AtomicU64,
    contended_hold_ns: AtomicU64,
    /// Where its failed trylocks were called from ([`LockStats::try_fail_site`]).
    try_fail_site: AtomicU64,
    /// The interval the `interval_` counts belong to: its index + 1 (0: none yet).
    interval: AtomicU64,
    interval_acquisitions: AtomicU64,
    interval_samples: AtomicU64,
    interval_try_failed: AtomicU64,
}

impl Slot {
    fn counters(&self) -> [&AtomicU64; LockStats::COUNTS] {
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
            &self.contended_holds,
            &self.timed_holds,
            &self.contended_hold_ns,
            &self.try_fail_site,
        ]
    }

    /// `weight` acquisitions (one sampled one standing for `weight`), by a trylock or not,
    /// at `now` (monotonic ns). Returns the counts of the row's previous interval when this
    /// is the first count of a new one (the caller writes them).
    pub fn acquired(&self, weight: u32, by_try: bool, now: u64) -> Option<IntervalCounts> {
        let ended = self.roll(now);
        self.acquisitions
            .fetch_add(u64::from(weight), Ordering::Relaxed);
        self.acquisition_samples.fetch_add(1, Ordering::Relaxed);
        if by_try {
            self.try_acquired
                .fetch_add(u64::from(weight), Ordering::Relaxed);
        }
        self.interval_acquisitions
            .fetch_add(u64::from(weight), Ordering::Relaxed);
        self.interval_samples.fetch_add(1, Ordering::Relaxed);
        ended
    }

    /// `n` trylocks called from `site` (a return address; 0 unknown) that found the lock
    /// held, by `now`. Returns the previous interval's counts as [`Slot::acquired`] does.
    pub fn try_failed(&self, n: u64, site: u64, now: u64) -> Option<IntervalCounts> {
        not_only_acquisitions(self);
        let ended = self.roll(now);
        self.try_failed.fetch_add(n, Ordering::Relaxed);
        self.interval_try_failed.fetch_add(n, Ordering::Relaxed);
        // The first failing site, or "several" once another one fails (a stable value is
        // left alone: no write to the shared line in a trylock loop of one site).
        let had = self.try_fail_site.load(Ordering::Relaxed);
        if site != 0 && had != site && had != TRY_SITES_MANY {
            let new = if had == 0 { site } else { TRY_SITES_MANY };
            // Lost to another thread's update: either way the row's answer stays right
            // or becomes "several" at that thread's next failure.
            let _ =
                self.try_fail_site
                    .compare_exchange(had, new, Ordering::Relaxed, Ordering::Relaxed);
        }
        ended
    }

    /// Moves the row to the interval of `now`: the first count of a new interval takes the
    /// old one's counts (returned when any). A count made with an older time than the
    /// row's interval (its thread was preempted after reading the clock) joins the row's
    /// interval.
    fn roll(&self, now: u64) -> Option<IntervalCounts> {
        let index = now / LOCK_INTERVAL_NS + 1;
        let had = self.interval.load(Ordering::Relaxed);
        if had >= index
            || self
                .interval
                .compare_exchange(had, index, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return None;
        }
        self.take_interval(had)
    }

    /// The counts of interval `index` (+ 1), which it resets; `None` when there are none.
    fn take_interval(&self, index: u64) -> Option<IntervalCounts> {
        let counts = IntervalCounts {
            index: index.checked_sub(1)?,
            acquisitions: self.interval_acquisitions.swap(0, Ordering::Relaxed),
            samples: self.interval_samples.swap(0, Ordering::Relaxed),
            try_failed: self.interval_try_failed.swap(0, Ordering::Relaxed),
        };
        (counts.samples + counts.try_failed > 0).then_some(counts)
    }

    /// Takes back `n` acquisitions a sampled one counted (by a trylock: `by_try`) that did
    /// not come (`locks::acquisition_sampling::take_back`), from its interval's counts too
    /// (as far as they go: the interval may have ended since).
    pub fn acquired_back(&self, n: u32, by_try: bool) {
        let n = u64::from(n);
        let less = |c: &AtomicU64| {
            let _ = c.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v.saturating_sub(n))
            });
        };
        less(&self.acquisitions);
        less(&self.interval_acquisitions);
        if by_try {
            less(&self.try_acquired);
        }
    }

    /// A wait registered with the lock (measured for the blame), with `waiters` measured
    /// waiters registered (itself included).
    pub fn measured(&self, waiters: u32) {
        self.measured_many(1, waiters);
    }

    /// `count` waits registered with it (measured for the blame), the most waiters
    /// registered at once `waiters`.
    pub(super) fn measured_many(&self, count: u64, waiters: u32) {
        not_only_acquisitions(self);
        self.contended_measured.fetch_add(count, Ordering::Relaxed);
        self.peak_waiters
            .fetch_max(u64::from(waiters), Ordering::Relaxed);
    }

    /// `count` waits that lasted `ns` in all, the longest `max_ns`.
    pub fn waited(&self, count: u64, ns: u64, max_ns: u64) {
        not_only_acquisitions(self);
        self.contended.fetch_add(count, Ordering::Relaxed);
        self.wait_ns.fetch_add(ns, Ordering::Relaxed);
        self.max_wait_ns.fetch_max(max_ns, Ordering::Relaxed);
    }

    /// A hold others waited for ended, standing for `weight` holds; `ns`: its length, if
    /// timed.
    pub fn held(&self, weight: u32, ns: Option<u64>) {
        let weight = u64::from(weight);
        let (timed, ns) = ns.map_or((0, 0), |ns| (weight, ns.saturating_mul(weight)));
        self.held_many([weight, timed, ns]);
    }

    /// `[holds, timed holds, their ns]` of holds others waited for, as [`Slot::held`]
    /// counts them.
    pub(super) fn held_many(&self, [holds, timed, ns]: [u64; 3]) {
        not_only_acquisitions(self);
        self.contended_holds.fetch_add(holds, Ordering::Relaxed);
        self.timed_holds.fetch_add(timed, Ordering::Relaxed);
        self.contended_hold_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Its counts, which it resets, and its current interval's.
    fn take_counts(&self, address: usize, flags: u8) -> (LockStats, Option<LockInterval>) {
        let interval = self
            .take_interval(self.interval.swap(0, Ordering::Relaxed))
            .map(|c| c.record(address));
        let counts = self.counters().map(|c| c.swap(0, Ordering::Relaxed));
        let kind = self.kind.load(Ordering::Relaxed) as u8;
        let site = super::init_sites::site_of(address) as u64;
        let stats = LockStats::from_counts((address as u64, kind, flags, site), counts);
        (stats, interval)
    }
}

/// What a row counted in one interval, swapped out by the first count of the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntervalCounts {
    /// The interval: its start over [`LOCK_INTERVAL_NS`].
    pub index: u64,
    pub acquisitions: u64,
    pub samples: u64,
    pub try_failed: u64,
}

impl IntervalCounts {
    /// The record of these counts for the lock at `address`.
    pub fn record(&self, address: usize) -> LockInterval {
        LockInterval {
            address: address as u64,
            start_ns: self.index * LOCK_INTERVAL_NS,
            length_ns: LOCK_INTERVAL_NS,
            acquisitions: self.acquisitions,
            acquisition_samples: self.samples,
            try_failed: self.try_failed,
        }
    }
}

impl Linked for Slot {
    fn next(&self) -> &AtomicU32 {
        &self.next
    }
}

/// The keys. Zero-initialised: they live in `.bss`.
static KEYS: [AtomicU64; CAPACITY] = [const { AtomicU64::new(0) }; CAPACITY];
/// The rows.
static ROWS: Slab<Slot> = Slab::new();
/// Held while a key is claimed (a try-lock: nobody waits for it long).
static INSERT: AtomicBool = AtomicBool::new(false);
/// Live keys by their lock's home block ([`home`]): a lock whose home block counts none
/// has no key, which a look-up learns from a counter in a 1 KiB array instead of a line of
/// the 512 KiB table (a destroy of each of millions of locks without a row missed the cache
/// there). Raised before a key is published, lowered after it is freed.
static HOME_KEYS: [AtomicU32; CAPACITY / BLOCK] = [const { AtomicU32::new(0) }; CAPACITY / BLOCK];

fn home_keys(address: usize) -> &'static AtomicU32 {
    &HOME_KEYS[home(address) / BLOCK]
}

/// Rows held by a lock now, and the most at once.
static LIVE: AtomicU32 = AtomicU32::new(0);
static PEAK: AtomicU32 = AtomicU32::new(0);

/// The key of the lock at `address` with row `index`; `None` for an address too high to
/// pack (none is, in x86-64 user space).
fn key(address: usize, index: u32) -> Option<u64> {
    let high = (address as u64) >> 2;
    (high >> (64 - INDEX_BITS) == 0 && high != 0).then_some(high << INDEX_BITS | u64::from(index))
}

/// Whether `k` is the key of the lock at `address`.
fn is_key_of(k: u64, address: usize) -> bool {
    k > GONE && k >> INDEX_BITS == (address as u64) >> 2
}

/// The row a key points to.
fn row_of(k: u64) -> Option<&'static Slot> {
    ROWS.get((k & ((1 << INDEX_BITS) - 1)) as u32)
}

/// Where the lock at `address` is looked for first: a block per page of memory (pages
/// spread by Fibonacci hashing), the position in the block by 16-byte granule.
fn home(address: usize) -> usize {
    let page = (address >> 12) as u64;
    let block = (page.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize;
    (block * BLOCK + (address >> 4) % BLOCK) % CAPACITY
}

fn probe(address: usize) -> impl Iterator<Item = &'static AtomicU64> {
    let start = home(address);
    (0..PROBES).map(move |i| &KEYS[(start + i) % CAPACITY])
}

/// The key of the lock at `address`, and its value, if it has one. Lock-free.
#[inline]
fn find_key(address: usize) -> Option<(&'static AtomicU64, u64)> {
    if home_keys(address).load(Ordering::Acquire) == 0 {
        return None;
    }
    for entry in probe(address) {
        match entry.load(Ordering::Acquire) {
            0 => return None,
            k if is_key_of(k, address) => return Some((entry, k)),
            _ => {}
        }
    }
    None
}

/// The row of the lock at `address`, if it has one. Lock-free.
#[inline]
pub fn find(address: usize) -> Option<&'static Slot> {
    find_key(address).and_then(|(_, k)| row_of(k))
}

/// The row of the lock at `address` of kind `kind` (a `WaitKind` code), claimed if it has
/// none. `None` when no key is free near its home, no row can be had, or the claim could
/// not be had: the caller counts the event as untabled.
pub fn slot(address: usize, kind: u8) -> Option<&'static Slot> {
    key(address, 0)?;
    if let Some(slot) = find(address) {
        let had = slot.kind.load(Ordering::Relaxed);
        if had != u32::from(kind) && kind != 0 {
            // Another kind of object at the address of a lock freed without its destroy:
            // the old lock's counts are dropped (counted) and the row is the new one's.
            slot.kind.store(u32::from(kind), Ordering::Relaxed);
            stray(slot);
        }
        return Some(slot);
    }
    let _claim = Claim::try_take()?;
    // Claimed by another thread meanwhile? (The whole probe window: a freed key before the
    // lock's own does not end the search.)
    if let Some(k) = probe(address)
        .map(|e| e.load(Ordering::Acquire))
        .find(|&k| is_key_of(k, address))
    {
        return row_of(k);
    }
    let entry = probe(address).find(|e| e.load(Ordering::Relaxed) <= GONE)?;
    // Mapping a new chunk of rows may fail and set errno: the program's stays.
    // SAFETY: errno is the calling thread's own.
    let saved = unsafe { *libc::__errno_location() };
    let index = ROWS.alloc();
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
    let index = index?;
    let Some((row, k)) = ROWS.get(index).zip(key(address, index)) else {
        ROWS.free(index);
        return None;
    };
    row.me.store(index, Ordering::Relaxed);
    row.kind.store(u32::from(kind), Ordering::Relaxed);
    // Counts a late update left in the row after it was freed (an event racing its
    // object's destroy): not this lock's.
    stray(row);
    home_keys(address).fetch_add(1, Ordering::Relaxed);
    entry.store(k, Ordering::Release);
    let live = LIVE.fetch_add(1, Ordering::Relaxed) + 1;
    PEAK.fetch_max(live, Ordering::Relaxed);
    Some(row)
}

/// Rows claimed for locks known only from sampled acquisitions, at most
/// [`ACQUISITION_ROWS_MAX`]: a program with a hundred thousand uncontended locks does not
/// get a row for each (6.5 MiB of rows, `syncperf_fine`); past the budget, sampled
/// acquisitions of locks without a row are counted as untabled. A lock that is waited for,
/// or whose trylock fails, always gets a row.
static ACQUISITION_ROWS: AtomicU32 = AtomicU32::new(0);
const ACQUISITION_ROWS_MAX: u32 = 4096;

/// The row of the lock at `address` for a sampled acquisition: as [`slot`], but a new row
/// only within the budget of rows for locks known only from their acquisitions.
pub fn slot_for_acquisition(address: usize, kind: u8) -> Option<&'static Slot> {
    if let Some(row) = find(address) {
        return Some(row);
    }
    if ACQUISITION_ROWS.load(Ordering::Relaxed) >= ACQUISITION_ROWS_MAX {
        return None;
    }
    let row = slot(address, kind)?;
    if row.acquisitions_only.swap(1, Ordering::Relaxed) == 0 {
        ACQUISITION_ROWS.fetch_add(1, Ordering::Relaxed);
    }
    Some(row)
}

/// A row's lock was waited for or failed a trylock: it leaves the budget of
/// [`slot_for_acquisition`].
fn not_only_acquisitions(row: &Slot) {
    if row.acquisitions_only.load(Ordering::Relaxed) != 0
        && row.acquisitions_only.swap(0, Ordering::Relaxed) == 1
    {
        ACQUISITION_ROWS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Events counted in rows that were not theirs to keep (see [`stray`]).
static STRAYS: AtomicU64 = AtomicU64::new(0);

/// Empties a row of counts that belong to no live lock, counting its events in
/// [`strays`].
fn stray(row: &Slot) {
    let (c, _) = row.take_counts(0, 0);
    let events = c.acquisition_samples + c.try_failed + c.contended + c.contended_measured;
    STRAYS.fetch_add(events, Ordering::Relaxed);
}

/// Events the table dropped because their lock was gone (counted as untabled at the end).
pub fn strays() -> u64 {
    STRAYS.load(Ordering::Relaxed)
}

/// The row's index and generation, to find it again ([`at`]) only if it still belongs to
/// the same lock.
pub fn ticket(slot: &'static Slot) -> (usize, u32) {
    (
        slot.me.load(Ordering::Relaxed) as usize,
        slot.generation.load(Ordering::Acquire),
    )
}

/// The row of a [`ticket`], if it has not been freed since.
pub fn at((index, generation): (usize, u32)) -> Option<&'static Slot> {
    let slot = ROWS.get(u32::try_from(index).ok()?)?;
    (slot.generation.load(Ordering::Acquire) == generation).then_some(slot)
}

/// Frees the row of the lock at `address` (destroyed, or initialised again) and returns its
/// counters, flagged [`crate::format::LOCK_DESTROYED`], and its last interval's counts;
/// `None` when it had none.
pub fn take(address: usize) -> Option<(LockStats, Option<LockInterval>)> {
    let (entry, k) = find_key(address)?;
    // Lost to a racing take of the same lock (a program's double destroy): its counts go
    // with the other.
    entry
        .compare_exchange(k, GONE, Ordering::AcqRel, Ordering::Relaxed)
        .ok()?;
    home_keys(address).fetch_sub(1, Ordering::Relaxed);
    clear_tombstones(address);
    let row = row_of(k)?;
    not_only_acquisitions(row);
    row.generation.fetch_add(1, Ordering::AcqRel);
    LIVE.fetch_sub(1, Ordering::Relaxed);
    let taken = row.take_counts(address, crate::format::LOCK_DESTROYED);
    ROWS.free(row.me.load(Ordering::Relaxed));
    Some(taken)
}

/// Turns the freed keys in `address`'s probe window that end a run (the key after them is
/// 0) back into 0, so that a search for a lock without a row stops at the first key of its
/// window instead of looking past every freed key: a program that makes and destroys
/// millions of locks would otherwise leave whole blocks of [`GONE`] keys. Only under the
/// insert claim (one attempt: when another thread holds it, the keys stay freed, which is
/// always correct), since no key may be claimed meanwhile. Sound because a live key lies
/// after its home with no 0 key between: it was claimed at the first free key of its
/// window, and a key is cleared only when the one after it is 0.
fn clear_tombstones(address: usize) {
    let Some(_claim) = Claim::try_once() else {
        return;
    };
    let start = home(address);
    for i in (0..PROBES).rev() {
        let entry = &KEYS[(start + i) % CAPACITY];
        let next = &KEYS[(start + i + 1) % CAPACITY];
        if entry.load(Ordering::Relaxed) == GONE && next.load(Ordering::Relaxed) == 0 {
            entry.store(0, Ordering::Release);
        }
    }
}

/// Calls `f` with the counts of every lock in the table since the last call (at the end
/// of the process image), and its last interval's, resetting them.
pub fn drain(mut f: impl FnMut(LockStats, Option<LockInterval>)) {
    if PEAK.load(Ordering::Relaxed) == 0 {
        return;
    }
    for entry in &KEYS {
        let k = entry.load(Ordering::Acquire);
        if let Some(row) = row_of(k).filter(|_| k > GONE) {
            let address = ((k >> INDEX_BITS) << 2) as usize;
            let (stats, interval) = row.take_counts(address, 0);
            f(stats, interval);
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
    for entry in &KEYS {
        let k = entry.load(Ordering::Relaxed);
        if let Some(row) = row_of(k).filter(|_| k > GONE) {
            row.take_counts(0, 0);
            row.acquisitions_only.store(0, Ordering::Relaxed);
            row.generation.fetch_add(1, Ordering::Relaxed);
            ROWS.free(row.me.load(Ordering::Relaxed));
            entry.store(GONE, Ordering::Relaxed);
        }
    }
    for count in &HOME_KEYS {
        count.store(0, Ordering::Relaxed);
    }
    LIVE.store(0, Ordering::Relaxed);
    PEAK.store(0, Ordering::Relaxed);
    ACQUISITION_ROWS.store(0, Ordering::Relaxed);
}

/// Attempts at the insert try-lock before giving up, the later ones after yielding the
/// CPU. It is held for a few instructions, so another thread's claim ends within a few
/// attempts unless that thread was preempted (then it runs again when this one yields);
/// the caller's own claim (a signal handler taking a lock while it inserts) never does,
/// so the attempts are bounded.
const CLAIM_ATTEMPTS: u32 = 256;
const CLAIM_YIELDS: u32 = 64;

/// The insert try-lock, released on drop.
struct Claim;

impl Claim {
    /// The claim if it is free now.
    fn try_once() -> Option<Claim> {
        (!INSERT.swap(true, Ordering::Acquire)).then_some(Claim)
    }

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
        assert_eq!(s.acquired(256, false, 5), None, "the row's first interval");
        assert_eq!(s.acquired(100, true, 6), None);
        assert_eq!(s.try_failed(1, 0x4000, 7), None);
        s.measured(3);
        s.waited(1, 500, 500);
        s.measured(2);
        s.waited(4, 4000, 1000);
        s.held(16, Some(300));
        s.held(1, None);
        assert!(std::ptr::eq(s, slot(a, 2).unwrap()), "one slot per lock");
        let (got, interval) = take(a).expect("counted");
        assert_eq!(got.address, a as u64);
        assert_eq!(got.kind, 2);
        assert_eq!(got.flags, crate::format::LOCK_DESTROYED);
        assert_eq!((got.acquisitions, got.acquisition_samples), (356, 2));
        assert_eq!((got.try_acquired, got.try_failed), (100, 1));
        assert_eq!((got.contended, got.contended_measured), (5, 2));
        assert_eq!(got.wait_ns, 4500);
        assert_eq!((got.max_wait_ns, got.peak_waiters), (1000, 3));
        assert_eq!(
            (got.contended_holds, got.timed_holds, got.contended_hold_ns),
            (17, 16, 4800),
            "a hold standing for 16, timed, and one untimed"
        );
        assert_eq!(got.try_fail_site, 0x4000, "one failing site");
        let interval = interval.expect("the last interval's counts");
        assert_eq!(
            (interval.start_ns, interval.length_ns, interval.address),
            (0, LOCK_INTERVAL_NS, a as u64)
        );
        assert_eq!(
            (
                interval.acquisitions,
                interval.acquisition_samples,
                interval.try_failed
            ),
            (356, 2, 1)
        );
        assert!(find(a).is_none(), "freed");
        let again = slot(a, 2).expect("room again");
        again.try_failed(1, 0, 1);
        let mut seen = Vec::new();
        drain(|l, _| seen.push(l));
        let l = seen.iter().find(|l| l.address == a as u64).expect("live");
        assert_eq!(
            (l.try_failed, l.acquisitions, l.flags),
            (1, 0, 0),
            "a new lock"
        );
        take(a);
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
        slot(y, 2).unwrap().try_failed(1, 0, 1);
        take(x).unwrap();
        slot(y, 2).unwrap().try_failed(1, 0, 1);
        let (counts, _) = take(y).unwrap();
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
            slot(a, 2)
                .expect("within the probe window")
                .try_failed(1, 0, 1);
        }
        assert!(
            slot(crowd[PROBES], 2).is_none(),
            "no room: the caller counts it"
        );
        for &a in &crowd[..PROBES] {
            assert_eq!(take(a).expect("kept").0.try_failed, 1);
        }
        assert!(slot(crowd[PROBES], 2).is_some(), "freed slots are reused");
        take(crowd[PROBES]);
    }

    #[test]
    fn each_interval_is_handed_out_once_by_the_first_count_of_the_next() {
        let a = 0x7500_0000_1000usize;
        let s = slot(a, 2).expect("room");
        let iv = LOCK_INTERVAL_NS;
        assert_eq!(s.acquired(10, false, 3 * iv + 1), None);
        assert_eq!(s.try_failed(1, 0x10, 3 * iv + 2), None);
        assert_eq!(s.try_failed(1, 0x10, 4 * iv - 1), None, "the same interval");
        let third = s.acquired(5, false, 5 * iv).expect("interval 3 ended");
        assert_eq!(
            third,
            IntervalCounts {
                index: 3,
                acquisitions: 10,
                samples: 1,
                try_failed: 2,
            }
        );
        assert_eq!(third.record(a).start_ns, 3 * iv);
        assert_eq!(
            s.acquired(7, false, 5 * iv - 1),
            None,
            "an older time joins the row's interval"
        );
        assert_eq!(s.try_failed(1, 0x20, 5 * iv + 3), None);
        let (stats, last) = take(a).expect("counted");
        assert_eq!(stats.try_fail_site, TRY_SITES_MANY, "two failing sites");
        let last = last.expect("interval 5");
        assert_eq!(
            (
                last.start_ns,
                last.acquisitions,
                last.acquisition_samples,
                last.try_failed
            ),
            (5 * iv, 12, 2, 1)
        );
    }
}
