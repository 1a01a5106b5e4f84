//! The wait table's storage: a fixed table of buckets keyed by an object's address, each a
//! spin-locked chain of entries from an allocation-free slab, with dirty counters and bits
//! that let the uncontended fast path return after one or two counter reads.
//!
//! Invariants: an entry's state is touched only with its bucket's lock held ([`Locked`]);
//! its history (`super::history`) and key are written only so, inside the history's
//! sequence count, and read without the lock by a mutex's releasing holder
//! ([`find_lock_free`]), as is the chain, under the bucket's; a lock is held for a few
//! instructions, never across a blocking call, and never two at once except in
//! `wake_with_proxies`, which takes two in address order; the table and the slab live in
//! `.bss` and cost no memory until used. [`maybe_dirty`] is wait-free;
//! nothing here allocates.

use super::history::History;
use super::seq_count::SeqCount;
use super::state::{is_dirty, is_hold_code, is_hold_kind, State};
use crate::format::WaitKind;
use crate::slab::{Linked, Slab};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Buckets: 2^10. An entry lives only while its object has waiting in progress, so the
/// table holds about one entry per blocked thread, not one per lock. A larger table would
/// not shorten chains, but it would spread the objects a program waits on over more pages
/// of it, each resident from its first use: with 64K buckets, a program contending a
/// thousand locks kept the whole 768 KiB table resident, and with 4096 (48 KiB) a program
/// of 9 threads (3 mutexes, 9 joins) had 11 of its 12 pages resident. 1024 buckets are 16 KiB.
pub(super) const BUCKET_BITS: u32 = 10;
pub(super) const BUCKETS: usize = 1 << BUCKET_BITS;
pub(super) const NONE: u32 = u32::MAX;

/// How long a mutex's entry is kept at least once nobody waits for it: a holder reads the
/// mutex's history just after its release (`super::hold_blame`), when the waiter it
/// released may already have departed; and a mutex waited for again soon goes on with the
/// same history. Each wait sweeps its own bucket and one more in turn.
pub(super) const LINGER_NS: u64 = 2_000_000;

/// The next bucket a wait sweeps besides its own ([`sweep_another`]): lingering entries of
/// mutexes whose buckets see no more waits are freed too.
static SWEEP_CURSOR: AtomicU32 = AtomicU32::new(0);

/// Sweeps one more bucket, in turn, if its lock is free at once (no bucket lock held).
pub(super) fn sweep_another(now: u64) {
    let index = SWEEP_CURSOR.fetch_add(1, Ordering::Relaxed) as usize % BUCKETS;
    if TABLE[index].first(Ordering::Relaxed) == NONE {
        return;
    }
    if let Some(locked) = Locked::try_new(index) {
        locked.sweep(now);
    }
}

#[derive(Default)]
pub struct Entry {
    /// Address of the object (0 = free slot).
    pub(super) key: AtomicUsize,
    /// Next entry in the bucket chain, or the free list.
    pub(super) next: AtomicU32,
    pub(super) state: UnsafeCell<State>,
    /// A mutex's waiter-time over time, which its holders read without the lock; its
    /// sequence lock also covers `key`.
    pub(super) history: History,
}

// SAFETY: `state` is only accessed with the lock of the bucket whose chain holds the entry
// (see `Locked`), and slots are never freed, only recycled under that lock; `history` is
// atomics only.
unsafe impl Sync for Entry {}

impl Linked for Entry {
    fn next(&self) -> &AtomicU32 {
        &self.next
    }
}

pub(super) struct Bucket {
    pub(super) lock: AtomicBool,
    /// The first entry's index plus one (0: empty), so the table is all zeroes and lives in
    /// `.bss`: its pages cost no memory until a bucket is used.
    pub(super) head: AtomicU32,
    /// Entries in this chain that are dirty.
    pub(super) dirty: AtomicU32,
    /// Changes of the chain (entries linked or unlinked), so a walk without the lock can
    /// tell whether what it saw was the chain.
    pub(super) version: SeqCount,
}

impl Bucket {
    /// The first entry's index, or `NONE`.
    pub(super) fn first(&self, order: Ordering) -> u32 {
        self.head.load(order).wrapping_sub(1)
    }

    /// Makes `index` (or `NONE`) the first entry.
    pub(super) fn set_first(&self, index: u32, order: Ordering) {
        self.head.store(index.wrapping_add(1), order);
    }
}

pub(super) static SLAB: Slab<Entry> = Slab::new();

/// Dirty entries in the whole table, of hold kinds (`[0]`) and of event kinds (`[1]`), on
/// a cache line of their own: while no lock has waiters (the common case in lock-heavy
/// code, even with threads parked on condition variables or joins), a lock's fast path
/// reads only this, not the bucket of the lock, which for many fine-grained locks is a
/// cache miss of its own.
#[repr(align(64))]
pub(super) struct TableDirty([AtomicU32; 2]);
pub(super) static ANY_DIRTY: TableDirty = TableDirty([AtomicU32::new(0), AtomicU32::new(0)]);

/// One bit per bucket, set while its dirty count is not zero: the fast path reads this
/// (128 bytes, which stay in cache) rather than the bucket itself.
pub(super) static DIRTY_BITS: [AtomicU64; BUCKETS / 64] =
    [const { AtomicU64::new(0) }; BUCKETS / 64];

/// Marks bucket `index` dirty or clean in [`DIRTY_BITS`]; called with its lock held, as its
/// count goes from 0 to 1 (`dirty`) or from 1 to 0.
pub(super) fn mark_bucket(index: usize, dirty: bool) {
    let (word, bit) = dirty_bit(index);
    if dirty {
        word.fetch_or(bit, Ordering::AcqRel);
    } else {
        word.fetch_and(!bit, Ordering::AcqRel);
    }
}

/// Bucket `index`'s word in [`DIRTY_BITS`] and its bit there.
#[inline(always)]
pub(super) fn dirty_bit(index: usize) -> (&'static AtomicU64, u64) {
    (&DIRTY_BITS[index / 64], 1u64 << (index % 64))
}

/// The [`ANY_DIRTY`] counter of objects of `kind`'s class.
#[inline(always)]
pub(super) fn any_dirty(kind_code: u8) -> &'static AtomicU32 {
    &ANY_DIRTY.0[usize::from(!is_hold_code(kind_code))]
}

/// One bit per bucket, set while its chain holds an entry (changed with its lock held, as
/// the chain goes from empty to not or back): a lock's init and destroy, which must forget
/// whatever the table keeps for its address, read this (128 bytes, which stay in cache)
/// rather than the bucket: a program that makes and destroys millions of locks missed the
/// cache on a bucket at each.
static OCCUPIED_BITS: [AtomicU64; BUCKETS / 64] = [const { AtomicU64::new(0) }; BUCKETS / 64];

/// Whether bucket `index`'s chain may hold an entry: false means it holds none (the program
/// orders an object's init and destroy after its uses, and so after whatever they linked).
#[inline(always)]
pub(super) fn occupied(index: usize) -> bool {
    OCCUPIED_BITS[index / 64].load(Ordering::Acquire) & 1u64 << (index % 64) != 0
}

/// Marks bucket `index` as holding entries or none; called with its lock held.
fn mark_occupied(index: usize, occupied: bool) {
    let (word, bit) = (&OCCUPIED_BITS[index / 64], 1u64 << (index % 64));
    if occupied {
        word.fetch_or(bit, Ordering::AcqRel);
    } else {
        word.fetch_and(!bit, Ordering::AcqRel);
    }
}

pub(super) static TABLE: [Bucket; BUCKETS] = [const {
    Bucket {
        lock: AtomicBool::new(false),
        head: AtomicU32::new(0),
        dirty: AtomicU32::new(0),
        version: SeqCount::new(),
    }
}; BUCKETS];

pub(super) fn bucket_index(address: usize) -> usize {
    // Fibonacci hashing of the address (the objects are at least 4-byte aligned).
    ((address as u64 >> 2).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - BUCKET_BITS)) as usize
}

/// A bucket with its lock held; released on drop.
pub(super) struct Locked {
    pub(super) bucket: &'static Bucket,
    pub(super) index: usize,
}

impl Locked {
    pub(super) fn new(index: usize) -> Locked {
        let bucket = &TABLE[index];
        while bucket
            .lock
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        Locked { bucket, index }
    }

    /// Bucket `index` locked, if its lock is free at once.
    pub(super) fn try_new(index: usize) -> Option<Locked> {
        let bucket = &TABLE[index];
        bucket
            .lock
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| Locked { bucket, index })
    }

    pub(super) fn of(address: usize) -> Locked {
        Locked::new(bucket_index(address))
    }

    pub(super) fn find(&self, address: usize) -> Option<(u32, &'static Entry)> {
        let mut i = self.bucket.first(Ordering::Acquire);
        while i != NONE {
            let e = SLAB.get(i)?;
            if e.key.load(Ordering::Relaxed) == address {
                return Some((i, e));
            }
            i = e.next.load(Ordering::Relaxed);
        }
        None
    }

    pub(super) fn create(&self, address: usize, kind: WaitKind) -> Option<(u32, &'static Entry)> {
        let index = SLAB.alloc()?;
        let e = SLAB.get(index)?;
        // SAFETY: the slot was just allocated: nobody else can reach its state yet.
        unsafe { reset(e, address, kind) };
        let first = self.bucket.first(Ordering::Relaxed);
        if first == NONE {
            mark_occupied(self.index, true);
        }
        e.next.store(first, Ordering::Relaxed);
        self.bucket.version.begin_write();
        self.bucket.set_first(index, Ordering::Release);
        self.bucket.version.end_write();
        Some((index, e))
    }

    /// Runs `f` on the state of the entry for `address` (created for `create` when missing
    /// and `create` is given), then keeps the bucket's dirty count right and frees the entry
    /// once it is clean and not retained; a mutex's entry lingers clean for [`LINGER_NS`]
    /// (see [`sweep`](Self::sweep)). `None`: no entry (or no memory for one).
    pub(super) fn update<R>(
        &self,
        address: usize,
        create: Option<WaitKind>,
        f: impl FnOnce(&mut State) -> R,
    ) -> Option<R> {
        self.update_with_history(address, create, |s, _| f(s))
    }

    /// [`update`](Self::update), with the entry's history for `f` to append to.
    pub(super) fn update_with_history<R>(
        &self,
        address: usize,
        create: Option<WaitKind>,
        f: impl FnOnce(&mut State, &History) -> R,
    ) -> Option<R> {
        let (index, e) = match self.find(address) {
            Some((i, e)) => {
                // SAFETY: we hold the lock of the bucket whose chain holds `e`.
                let s = unsafe { &*e.state.get() };
                match create {
                    // A clean entry lingering from an object of another kind that used to
                    // live at this address (a mutex freed without being destroyed).
                    Some(kind) if s.kind != kind as u8 && !is_dirty(s) && !s.retained => {
                        // SAFETY: as above, and no reference to the state is alive.
                        unsafe { reset(e, address, kind) };
                    }
                    _ => {}
                }
                (i, e)
            }
            None => self.create(address, create?)?,
        };
        let (result, dirty, retained) = {
            // SAFETY: we hold the lock of the bucket whose chain holds `e`, which guards its
            // state, and this is the only reference to it while `f` runs.
            let s = unsafe { &mut *e.state.get() };
            let was_dirty = is_dirty(s);
            let result = f(s, &e.history);
            let dirty = is_dirty(s);
            if dirty != was_dirty {
                if dirty {
                    if self.bucket.dirty.fetch_add(1, Ordering::AcqRel) == 0 {
                        mark_bucket(self.index, true);
                    }
                    any_dirty(s.kind).fetch_add(1, Ordering::AcqRel);
                } else {
                    if self.bucket.dirty.fetch_sub(1, Ordering::AcqRel) == 1 {
                        mark_bucket(self.index, false);
                    }
                    any_dirty(s.kind).fetch_sub(1, Ordering::AcqRel);
                }
            }
            (result, dirty, s.retained || s.is_mutex())
        };
        if !dirty && !retained {
            self.unlink(index, e);
        }
        Some(result)
    }

    /// Frees the clean mutex entries of the chain whose last change is [`LINGER_NS`] or more
    /// before `now`.
    pub(super) fn sweep(&self, now: u64) {
        let mut i = self.bucket.first(Ordering::Relaxed);
        while let Some(e) = SLAB.get(i) {
            let next = e.next.load(Ordering::Relaxed);
            // SAFETY: we hold the lock of the bucket whose chain holds `e`.
            let s = unsafe { &*e.state.get() };
            if s.is_mutex()
                && !is_dirty(s)
                && e.history.last().stamp.saturating_add(LINGER_NS) <= now
            {
                self.unlink(i, e);
            }
            i = next;
        }
    }

    /// Frees the entry of `address` if it is clean.
    pub(super) fn free_if_clean(&self, address: usize) {
        if let Some((i, e)) = self.find(address) {
            // SAFETY: we hold the lock of the bucket whose chain holds `e`.
            if !is_dirty(unsafe { &*e.state.get() }) {
                self.unlink(i, e);
            }
        }
    }

    pub(super) fn unlink(&self, index: u32, e: &'static Entry) {
        self.bucket.version.begin_write();
        let next = e.next.load(Ordering::Relaxed);
        let mut i = self.bucket.first(Ordering::Relaxed);
        if i == index {
            self.bucket.set_first(next, Ordering::Release);
            if next == NONE {
                mark_occupied(self.index, false);
            }
        } else {
            while let Some(p) = SLAB.get(i) {
                let pn = p.next.load(Ordering::Relaxed);
                if pn == index {
                    p.next.store(next, Ordering::Release);
                    break;
                }
                if pn == NONE {
                    break;
                }
                i = pn;
            }
        }
        e.history.seq.begin_write();
        e.key.store(0, Ordering::Relaxed);
        e.history.seq.end_write();
        SLAB.free(index);
        self.bucket.version.end_write();
    }
}

/// Gives entry `e` a fresh state for an object of `kind` at `address`, and an empty history.
///
/// # Safety
/// Nobody else may reach `e`'s state: the caller holds the lock of the bucket whose chain
/// holds it, or it is not in a chain yet.
unsafe fn reset(e: &Entry, address: usize, kind: WaitKind) {
    // SAFETY: the caller's contract.
    unsafe {
        *e.state.get() = State {
            kind: kind as u8,
            gate: !is_hold_kind(kind),
            ..State::default()
        };
    }
    e.history.seq.begin_write();
    e.history.clear();
    e.key.store(address, Ordering::Relaxed);
    e.history.seq.end_write();
}

/// What a walk of a chain without the bucket lock found.
pub(super) enum Found {
    /// The entry, and the sequence number that validates what is then read of it (its key
    /// included).
    Entry(&'static Entry, u32),
    /// No entry: the chain did not change during the walk.
    Absent,
    /// The chain changed meanwhile, or the entry is being written: ask again.
    Unsure,
}

/// Looks up the entry of `address` without the bucket lock.
pub(super) fn find_lock_free(address: usize) -> Found {
    // Chains hold about one entry per blocked thread; a longer walk has gone astray through
    // a recycled slot.
    const MAX_STEPS: usize = 16;
    let bucket = &TABLE[bucket_index(address)];
    let Some(version) = bucket.version.read_begin() else {
        return Found::Unsure;
    };
    let mut i = bucket.first(Ordering::Acquire);
    for _ in 0..MAX_STEPS {
        if i == NONE {
            return if bucket.version.read_valid(version) {
                Found::Absent
            } else {
                Found::Unsure
            };
        }
        let Some(e) = SLAB.get(i) else {
            return Found::Unsure;
        };
        if e.key.load(Ordering::Acquire) == address {
            return match e.history.seq.read_begin() {
                Some(seq) if e.key.load(Ordering::Relaxed) == address => Found::Entry(e, seq),
                _ => Found::Unsure,
            };
        }
        i = e.next.load(Ordering::Acquire);
    }
    Found::Unsure
}

impl Drop for Locked {
    fn drop(&mut self) {
        self.bucket.lock.store(false, Ordering::Release);
    }
}

/// The bucket of `address`, an object of `kind`, if something in it is dirty: one or two
/// counter reads otherwise (the table's for the kind's class, then the bucket's).
#[inline(always)]
pub(super) fn dirty_bucket(address: usize, kind: WaitKind) -> Option<usize> {
    if any_dirty(kind as u8).load(Ordering::Acquire) == 0 {
        return None;
    }
    let index = bucket_index(address);
    let (word, bit) = dirty_bit(index);
    (word.load(Ordering::Acquire) & bit != 0).then_some(index)
}

/// Whether anything might be pending on the object of `kind` at `address`: false (one or
/// two counter reads) means releases and events on it have nothing to do.
#[inline(always)]
pub fn maybe_dirty(address: usize, kind: WaitKind) -> bool {
    dirty_bucket(address, kind).is_some()
}

/// In a fork child: only the forking thread survives, so no wait is in progress, and a
/// bucket lock another thread held at the fork would never be released. Start afresh; the
/// parent's entries are abandoned (their slots are not reused).
pub fn reset_after_fork() {
    for b in &TABLE {
        b.version.begin_write();
        b.set_first(NONE, Ordering::Relaxed);
        b.version.end_write();
        b.dirty.store(0, Ordering::Relaxed);
        b.lock.store(false, Ordering::Release);
    }
    for bits in DIRTY_BITS.iter().chain(&OCCUPIED_BITS) {
        bits.store(0, Ordering::Relaxed);
    }
    for counter in &ANY_DIRTY.0 {
        counter.store(0, Ordering::Release);
    }
}

/// Most objects monitored at once (the slab's high-water mark).
pub fn monitored_high_water() -> u32 {
    SLAB.high_water()
}
