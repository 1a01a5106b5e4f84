//! Where each lock was initialised: the return address of its `pthread_*_init` call, so
//! that the report can name a lock that lives in no variable (`cache_new ->
//! pthread_mutex_init`) and group the locks made at one site.
//!
//! Job: [`note`] at every init (a few loads and one store: programs make millions of locks),
//! [`site_of`] when a lock's counts are written, [`forget`] at its destroy.
//!
//! Invariants: init sites (distinct return addresses) are interned, lock-free, in a small
//! fixed table ([`SITES`]); each lock's site index is packed with its address into one
//! word of a direct-mapped table ([`LOCKS`] slots), written with one store, so a reader
//! sees either the whole entry or another lock's (and then no site). Two live locks that
//! map to one slot keep the later one's: the other reads no site and is named another way
//! (the report says how each lock was named), and the displacement is counted
//! ([`displaced`], which the lifecycle copies into the profile's counters and the lock view
//! reports: its groups then undercount). Both tables live in `.bss`. The count is kept by
//! each thread in its own [`ThreadDisplaced`] (a plain load and store) and folded into the
//! process's at the thread's end: once more locks live than the table has slots, nearly
//! every init displaces one, and a shared counter cost threads that make locks side by
//! side a cache-line transfer each (a churn of 65M locks on 2 threads: 1.61x its
//! unprofiled time with one counter), and a locked add on a counter of the thread's own
//! waits for the stores of the init before it (see docs/benchmarks.md, session 39).
//! Lock-free, allocation-free, async-signal-safe.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Distinct init sites kept (more are not named).
const SITES: usize = 4096;
/// Bits of a packed entry that hold the site index.
const SITE_BITS: u32 = 12;
/// Slots of the lock-to-site table.
const LOCKS: usize = 1 << 16;
/// Slots probed when interning a site.
const PROBES: usize = 16;

static SITE: [AtomicUsize; SITES] = [const { AtomicUsize::new(0) }; SITES];
/// Inits whose site could not be kept (see [`displaced`]): the ended threads' counts, and
/// those of threads that have no [`ThreadDisplaced`].
static DISPLACED: AtomicU64 = AtomicU64::new(0);
static LOCK: [AtomicU64; LOCKS] = [const { AtomicU64::new(0) }; LOCKS];

/// One thread's count of the inits whose site could not be kept: counted by its owner
/// alone, without a locked instruction, and folded into the process's count
/// ([`ThreadDisplaced::fold`]) at the thread's end, or at the process's for the threads
/// still alive.
#[derive(Default)]
pub struct ThreadDisplaced(AtomicU64);

impl ThreadDisplaced {
    /// Counts one. Owner only.
    fn add_own(&self) {
        self.0
            .store(self.0.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// Moves the count into the process's. By its owner, or once at the process's end by
    /// another thread, which races with an owner still counting (a displacement counted
    /// meanwhile may be lost).
    pub fn fold(&self) {
        let n = self.0.swap(0, Ordering::Relaxed);
        if n > 0 {
            DISPLACED.fetch_add(n, Ordering::Relaxed);
        }
    }
}

fn hash(v: usize) -> usize {
    ((v >> 2) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) as usize >> 20
}

/// The index of `site` in the site table, adding it if new; `None` when its neighbourhood
/// is full.
fn intern(site: usize) -> Option<usize> {
    let home = hash(site);
    for i in 0..PROBES {
        let index = (home + i) % SITES;
        let slot = &SITE[index];
        match slot.load(Ordering::Acquire) {
            s if s == site => return Some(index),
            0 => match slot.compare_exchange(0, site, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(index),
                Err(s) if s == site => return Some(index),
                Err(_) => {}
            },
            _ => {}
        }
    }
    None
}

/// The packed entry of a lock at `address` with site `index`, if the address fits.
fn pack(address: usize, index: usize) -> Option<u64> {
    let high = (address as u64) >> 2;
    (high >> (64 - SITE_BITS) == 0).then_some(high << SITE_BITS | index as u64)
}

/// The locks of one page of memory have their entries in one block of 256 (an array of
/// locks touches a page or two of this table, not one page per lock).
fn slot(address: usize) -> &'static AtomicU64 {
    let block = hash(address >> 12 << 2) % (LOCKS / 256);
    &LOCK[block * 256 + (address >> 4) % 256]
}

/// The lock at `address` was initialised by a call returning to `site`, in a thread that
/// counts what it displaces in `counts` (`None`: in the process's count).
#[inline]
pub fn note(address: usize, site: usize, counts: Option<&ThreadDisplaced>) {
    if site == 0 {
        return;
    }
    let Some(entry) = intern(site).and_then(|index| pack(address, index)) else {
        count_displaced(counts);
        return;
    };
    let slot = slot(address);
    // Another lock's entry (not this one's, re-initialised) is displaced: a plain load of
    // the line the store takes anyway, not a swap (programs make millions of locks).
    let old = slot.load(Ordering::Relaxed);
    slot.store(entry, Ordering::Relaxed);
    if old != 0 && old >> SITE_BITS != entry >> SITE_BITS {
        count_displaced(counts);
    }
}

/// Counts an init whose site could not be kept, in the thread's own count if it has one.
fn count_displaced(counts: Option<&ThreadDisplaced>) {
    match counts {
        Some(c) => c.add_own(),
        None => {
            DISPLACED.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Lock inits whose site the tables could not keep: another lock's entry displaced (its
/// lock then reads no site), or the site table full; of the threads whose counts were
/// folded ([`ThreadDisplaced::fold`]) and those that have none.
pub fn displaced() -> u64 {
    DISPLACED.load(Ordering::Relaxed)
}

/// The return address of the init call of the lock at `address`; 0 when unknown.
pub fn site_of(address: usize) -> usize {
    let entry = slot(address).load(Ordering::Relaxed);
    match pack(address, 0) {
        Some(mine) if entry != 0 && entry >> SITE_BITS == mine >> SITE_BITS => {
            SITE[(entry & ((1 << SITE_BITS) - 1)) as usize].load(Ordering::Acquire)
        }
        _ => 0,
    }
}

/// The lock at `address` was destroyed.
#[inline]
pub fn forget(address: usize) {
    let s = slot(address);
    let entry = s.load(Ordering::Relaxed);
    if pack(address, 0).is_some_and(|mine| entry >> SITE_BITS == mine >> SITE_BITS) {
        // Lost to a racing init of another lock in the slot: then that entry stays.
        let _ = s.compare_exchange(entry, 0, Ordering::Relaxed, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_remembers_its_init_site_until_destroyed() {
        let (a, b) = (0x7200_0000_1000usize, 0x7200_0000_2040usize);
        note(a, 0x40_1234, None);
        note(b, 0x40_5678, None);
        assert_eq!(site_of(a), 0x40_1234);
        assert_eq!(site_of(b), 0x40_5678);
        assert_eq!(site_of(a + 8), 0, "another lock");
        forget(a);
        assert_eq!(site_of(a), 0);
        assert_eq!(site_of(b), 0x40_5678);
        note(b, 0x40_1234, None);
        assert_eq!(site_of(b), 0x40_1234, "initialised again elsewhere");
        forget(b);
    }

    #[test]
    fn a_lock_displaced_from_its_slot_is_counted() {
        let a = 0x7300_0000_0040usize;
        let b = (1..)
            .map(|pages| a + pages * 4096)
            .find(|&b| std::ptr::eq(slot(a), slot(b)))
            .unwrap();
        let own = ThreadDisplaced::default();
        note(a, 0x40_1234, Some(&own));
        let before = displaced();
        note(b, 0x40_1234, Some(&own));
        assert_eq!(site_of(a), 0, "displaced");
        assert_eq!(site_of(b), 0x40_1234);
        assert_eq!(
            own.0.load(Ordering::Relaxed),
            1,
            "and counted by the thread"
        );
        own.fold();
        assert!(displaced() > before, "then in the process's count");
        assert_eq!(own.0.load(Ordering::Relaxed), 0);
        forget(b);
    }
}
