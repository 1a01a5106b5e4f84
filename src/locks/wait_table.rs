//! Blame for blocking waits: who kept a thread waiting on a mutex, rwlock, condition
//! variable, semaphore, barrier, join or futex.
//!
//! Job: per waited-on object (keyed by its address), measure the blocked waiters and hand
//! their waiting time, exactly once, to the threads responsible for it, in turn:
//! - *hold* kinds (mutex, rwlock): the object accrues waiter-time only while it is *held*;
//!   each holder takes, at its release ([`settle`]), the integral over its hold of the number
//!   of blocked waiters. Time a waiter spends blocked while the object is free (woken, not yet
//!   scheduled) is nobody's fault and accrues to nobody. A waiter registers ([`arrive`]) only
//!   after its try failed, so it can register after the release of the hold it failed
//!   against looked for waiters (it was descheduled in between): that hold has been settled
//!   without it, and the object is free. A mutex's next hold therefore starts accruing when
//!   it is reported ([`acquired`], or the waiter's own departure), never earlier.
//! - *event* kinds (condition variable, semaphore, barrier, join, futex): waiters wait for an
//!   event; whoever provides it ([`wake`]: a signal, post, last barrier arrival, thread exit,
//!   `FUTEX_WAKE`) takes the waiting accumulated since the previous event on that object,
//!   and counts as many waiters *woken* as it wakes. A woken waiter may lose the race for
//!   what it was woken for and go on waiting inside the real call, so it accrues until it
//!   departs; then its time since the last event (being scheduled) is withdrawn: nobody's.
//!
//! A wait that ends without what it waited for (timed out, interrupted, woken with no event
//! the runtime saw) is never blamed: its contribution since the last settlement is taken
//! back out of the integral when it departs ([`Outcome`]). Contributions already taken by an
//! earlier holder or event stay where they are: during that time the taker did hold the
//! object up, and other waiters' progress depended on it.
//!
//! State lives out of band in a fixed table of buckets keyed by the object's address. An
//! entry is created at the first wait and freed as soon as nothing is pending (no waiters,
//! no unsettled time), so memory follows the waits in progress, not the objects ever used;
//! barrier entries, which carry the barrier's size, are kept from init to destroy. Every
//! bucket counts its *dirty* entries (something to settle), and so does the table:
//! releases and wakes of objects nobody waits for read the table's counter (when nothing
//! anywhere is pending) or their bucket's, and return: the uncontended fast path.
//!
//! Each bucket's spin lock guards its chain and every entry in it; it is held for a few
//! instructions, never across a blocking call, and never two at once except in
//! [`wake_with_proxies`], which takes two in address order.
//!
//! Allocation-free. Not used by the signal handler: a thread that interrupts itself (a
//! program's signal handler posting a semaphore) must not come here while it holds a bucket
//! lock; the glue in `sampler::lock_glue` passes such nested calls through unmonitored.

use super::slab::{Linked, Slab};
use crate::format::WaitKind;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Buckets: 2^10. An entry lives only while its object has waiting in progress, so the
/// table holds about one entry per blocked thread, not one per lock. A larger table would
/// not shorten chains, but it would spread the objects a program waits on over more pages
/// of it, each resident from its first use: with 64K buckets, a program contending a
/// thousand locks kept the whole 768 KiB table resident, and with 4096 (48 KiB) a program
/// of 9 threads (3 mutexes, 9 joins) had 11 of its 12 pages resident. 1024 buckets are 12 KiB.
const BUCKET_BITS: u32 = 10;
const BUCKETS: usize = 1 << BUCKET_BITS;
const NONE: u32 = u32::MAX;

/// The monitoring state of one object. Every field is guarded by its bucket's lock.
#[derive(Default)]
struct State {
    /// A [`WaitKind`] code.
    kind: u8,
    /// Kept while clean (barriers: their size is only known at init).
    retained: bool,
    /// Waiter-time accrues only while this is set: hold kinds while held, event kinds always.
    gate: bool,
    waiters: u32,
    /// Waiters an event has woken that have not departed yet. They go on accruing until they
    /// depart (one may have lost the race for what it was woken for and wait on inside the
    /// real call); a departure withdraws what accrued since the last event.
    woken: u32,
    /// Waiter-nanoseconds accumulated since the last settlement.
    integral: u64,
    /// Time (monotonic ns) the integral was last brought up to date.
    stamp: u64,
    /// Nanoseconds the gate has been open, ever: a waiter's contribution since it arrived is
    /// `gated − gated at its arrival`.
    gated: u64,
    /// `gated` at the last settlement.
    gated_at_settle: u64,
    /// Time of the last event (condition variables: when the waiter's wait for the signal
    /// ended and its wait for the mutex began).
    last_wake: u64,
    /// Condition variables: the mutex their waiters wait with.
    partner: usize,
    /// Condition variables: woken waiters registered with `partner` on their behalf.
    proxied: u32,
    /// Barriers: the number of threads that must arrive.
    parties: u32,
    /// The latest event's provider.
    last_waker: WakerId,
}

/// Identifies an event's provider: its thread and its own count of events, so a thread
/// it woke can find the call path it published for that event (`sampler::wake_chain`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WakerId {
    pub tid: u32,
    pub seq: u64,
}

#[derive(Default)]
pub struct Entry {
    /// Address of the object (0 = free slot).
    key: AtomicUsize,
    /// Next entry in the bucket chain, or the free list.
    next: AtomicU32,
    state: UnsafeCell<State>,
}

// SAFETY: `state` is only accessed with the lock of the bucket whose chain holds the entry
// (see `Locked`), and slots are never freed, only recycled under that lock.
unsafe impl Sync for Entry {}

impl Linked for Entry {
    fn next(&self) -> &AtomicU32 {
        &self.next
    }
}

struct Bucket {
    lock: AtomicBool,
    /// The first entry's index plus one (0: empty), so the table is all zeroes and lives in
    /// `.bss`: its pages cost no memory until a bucket is used.
    head: AtomicU32,
    /// Entries in this chain that are dirty.
    dirty: AtomicU32,
}

impl Bucket {
    /// The first entry's index, or `NONE`.
    fn first(&self, order: Ordering) -> u32 {
        self.head.load(order).wrapping_sub(1)
    }

    /// Makes `index` (or `NONE`) the first entry.
    fn set_first(&self, index: u32, order: Ordering) {
        self.head.store(index.wrapping_add(1), order);
    }
}

static SLAB: Slab<Entry> = Slab::new();

/// Dirty entries in the whole table, of hold kinds (`[0]`) and of event kinds (`[1]`), on
/// a cache line of their own: while no lock has waiters (the common case in lock-heavy
/// code, even with threads parked on condition variables or joins), a lock's fast path
/// reads only this, not the bucket of the lock, which for many fine-grained locks is a
/// cache miss of its own.
#[repr(align(64))]
struct TableDirty([AtomicU32; 2]);
static ANY_DIRTY: TableDirty = TableDirty([AtomicU32::new(0), AtomicU32::new(0)]);

/// One bit per bucket, set while its dirty count is not zero: the fast path reads this
/// (128 bytes, which stay in cache) rather than the bucket itself.
static DIRTY_BITS: [AtomicU64; BUCKETS / 64] = [const { AtomicU64::new(0) }; BUCKETS / 64];

/// Marks bucket `index` dirty or clean in [`DIRTY_BITS`]; called with its lock held, as its
/// count goes from 0 to 1 (`dirty`) or from 1 to 0.
fn mark_bucket(index: usize, dirty: bool) {
    let (word, bit) = dirty_bit(index);
    if dirty {
        word.fetch_or(bit, Ordering::AcqRel);
    } else {
        word.fetch_and(!bit, Ordering::AcqRel);
    }
}

/// Bucket `index`'s word in [`DIRTY_BITS`] and its bit there.
#[inline(always)]
fn dirty_bit(index: usize) -> (&'static AtomicU64, u64) {
    (&DIRTY_BITS[index / 64], 1u64 << (index % 64))
}

/// The [`ANY_DIRTY`] counter of objects of `kind`'s class.
#[inline(always)]
fn any_dirty(kind_code: u8) -> &'static AtomicU32 {
    &ANY_DIRTY.0[usize::from(!is_hold_code(kind_code))]
}

static TABLE: [Bucket; BUCKETS] = [const {
    Bucket {
        lock: AtomicBool::new(false),
        head: AtomicU32::new(0),
        dirty: AtomicU32::new(0),
    }
}; BUCKETS];

fn bucket_index(address: usize) -> usize {
    // Fibonacci hashing of the address (the objects are at least 4-byte aligned).
    ((address as u64 >> 2).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - BUCKET_BITS)) as usize
}

/// A bucket with its lock held; released on drop.
struct Locked {
    bucket: &'static Bucket,
    index: usize,
}

impl Locked {
    fn new(index: usize) -> Locked {
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

    fn of(address: usize) -> Locked {
        Locked::new(bucket_index(address))
    }

    fn find(&self, address: usize) -> Option<(u32, &'static Entry)> {
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

    fn create(&self, address: usize, kind: WaitKind) -> Option<(u32, &'static Entry)> {
        let index = SLAB.alloc()?;
        let e = SLAB.get(index)?;
        // SAFETY: the slot was just allocated: nobody else can reach it yet.
        unsafe {
            *e.state.get() = State {
                kind: kind as u8,
                gate: !is_hold_kind(kind),
                ..State::default()
            };
        }
        e.key.store(address, Ordering::Relaxed);
        e.next
            .store(self.bucket.first(Ordering::Relaxed), Ordering::Relaxed);
        self.bucket.set_first(index, Ordering::Release);
        Some((index, e))
    }

    /// Runs `f` on the state of the entry for `address` (created for `create` when missing
    /// and `create` is given), then keeps the bucket's dirty count right and frees the entry
    /// once it is clean and not retained. `None`: no entry (or no memory for one).
    fn update<R>(
        &self,
        address: usize,
        create: Option<WaitKind>,
        f: impl FnOnce(&mut State) -> R,
    ) -> Option<R> {
        let (index, e) = match self.find(address) {
            Some(found) => found,
            None => self.create(address, create?)?,
        };
        let (result, dirty, retained) = {
            // SAFETY: we hold the lock of the bucket whose chain holds `e`, which guards its
            // state, and this is the only reference to it while `f` runs.
            let s = unsafe { &mut *e.state.get() };
            let was_dirty = is_dirty(s);
            let result = f(s);
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
            (result, dirty, s.retained)
        };
        if !dirty && !retained {
            self.unlink(index, e);
        }
        Some(result)
    }

    fn unlink(&self, index: u32, e: &'static Entry) {
        let next = e.next.load(Ordering::Relaxed);
        let mut i = self.bucket.first(Ordering::Relaxed);
        if i == index {
            self.bucket.set_first(next, Ordering::Release);
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
        e.key.store(0, Ordering::Relaxed);
        SLAB.free(index);
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        self.bucket.lock.store(false, Ordering::Release);
    }
}

fn is_dirty(s: &State) -> bool {
    s.waiters > 0 || s.integral > 0 || s.proxied > 0
}

/// Whether waiters of `kind` wait for a holder's release (rather than for an event).
pub fn is_hold_kind(kind: WaitKind) -> bool {
    is_hold_code(kind as u8)
}

/// [`is_hold_kind`] of a kind's code (as [`State`] keeps it).
#[inline(always)]
fn is_hold_code(code: u8) -> bool {
    code == WaitKind::Mutex as u8 || code == WaitKind::RwLock as u8
}

impl State {
    /// Brings the integral up to `now`.
    fn advance(&mut self, now: u64) {
        if now > self.stamp && self.gate {
            let dt = now - self.stamp;
            self.gated += dt;
            self.integral += u64::from(self.waiters) * dt;
        }
        self.stamp = self.stamp.max(now);
    }

    /// Takes the accumulated waiter-time.
    fn take(&mut self) -> u64 {
        self.gated_at_settle = self.gated;
        std::mem::take(&mut self.integral)
    }

    /// A waiter has acquired the object (hold kinds): the waiting accrues to its hold from
    /// now. A mutex has one owner, so anything left from before was released outside the
    /// wrappers and cannot be placed.
    fn acquired_by_waiter(&mut self) {
        if self.kind == WaitKind::Mutex as u8 {
            self.take();
        }
        self.gate = true;
    }

    /// Removes the unsettled contribution of a waiter that arrived at `gated_mark`.
    fn withdraw(&mut self, gated_mark: u64) {
        let since = gated_mark.max(self.gated_at_settle);
        let mine = self.gated.saturating_sub(since);
        self.integral = self.integral.saturating_sub(mine);
    }
}

/// A waiter's registration, from [`arrive`] to [`depart`].
#[derive(Debug, Clone, Copy)]
pub struct Wait {
    pub address: usize,
    pub start_ns: u64,
    gated_mark: u64,
}

/// How a wait ended, as the caller saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It got what it waited for (acquired the lock, returned from the wait with success).
    Success,
    /// A timed wait gave up.
    TimedOut,
    /// Interrupted by a signal (EINTR).
    Interrupted,
    /// Returned at once without waiting (EAGAIN from a futex whose value had changed,
    /// EDEADLK...): no idleness at all.
    NoWait,
}

/// How a departed wait is accounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Departed {
    /// Blamed on whoever held the object or provided the event. For condition variables,
    /// `mutex_wait` says whether the waiter then waited for the mutex on a registration the
    /// signaller made for it, from `woken_at` on.
    Blamed {
        woken_at: u64,
        mutex_wait: bool,
        /// The event's provider (default for hold kinds).
        waker: WakerId,
    },
    /// Success, but no event the runtime saw woke it (a spurious wake-up, or an event from
    /// outside the runtime's view): nobody is blamed.
    Spurious,
    TimedOut,
    Interrupted,
    NoWait,
}

/// Registers the calling thread as blocked on the object at `address` from `now`. For hold
/// kinds, the caller's try just failed, so the object is held. `None` when no memory is left.
pub fn arrive(address: usize, kind: WaitKind, now: u64) -> Option<Wait> {
    Locked::of(address).update(address, Some(kind), |s| {
        s.advance(now);
        s.waiters += 1;
        if is_hold_kind(kind) {
            s.gate = true;
        }
        Wait {
            address,
            start_ns: now,
            gated_mark: s.gated,
        }
    })
}

/// Ends a wait at `now`.
pub fn depart(wait: Wait, now: u64, outcome: Outcome) -> Departed {
    Locked::of(wait.address)
        .update(wait.address, None, |s| {
            s.advance(now);
            s.waiters = s.waiters.saturating_sub(1);
            let departed = match outcome {
                Outcome::Success if is_hold_code(s.kind) => {
                    s.acquired_by_waiter();
                    Departed::Blamed {
                        woken_at: now,
                        mutex_wait: false,
                        waker: WakerId::default(),
                    }
                }
                Outcome::Success if s.woken > 0 => {
                    // Its time since the event (being scheduled) is nobody's fault.
                    s.withdraw(wait.gated_mark);
                    s.woken -= 1;
                    let mutex_wait = s.proxied > 0;
                    if mutex_wait {
                        s.proxied -= 1;
                    }
                    Departed::Blamed {
                        woken_at: s.last_wake.clamp(wait.start_ns, now),
                        mutex_wait,
                        waker: s.last_waker,
                    }
                }
                other => {
                    s.withdraw(wait.gated_mark);
                    unblamed(other)
                }
            };
            s.woken = s.woken.min(s.waiters);
            s.proxied = s.proxied.min(s.woken);
            departed
        })
        .unwrap_or_else(|| unblamed(outcome))
}

fn unblamed(outcome: Outcome) -> Departed {
    match outcome {
        Outcome::Success => Departed::Spurious,
        Outcome::TimedOut => Departed::TimedOut,
        Outcome::Interrupted => Departed::Interrupted,
        Outcome::NoWait => Departed::NoWait,
    }
}

/// The bucket of `address`, an object of `kind`, if something in it is dirty: one or two
/// counter reads otherwise (the table's for the kind's class, then the bucket's).
#[inline(always)]
fn dirty_bucket(address: usize, kind: WaitKind) -> Option<usize> {
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

/// After an acquisition that did not wait (a successful try, or a mutex retaken inside a
/// condition-variable wait): if others wait for the object, it is held again from `now`. One
/// counter read when nobody waits.
///
/// For a mutex, callers report only acquisitions that start a hold (not a recursive mutex's
/// inner ones), and the hold starts at `now`: nothing that accrued before it is the new
/// holder's. A try that succeeds proves the mutex was free, yet its gate can be open: a
/// waiter whose try failed against the previous hold registered only after that hold's
/// release had looked for waiters (it was descheduled in between, or it registered between
/// the release's settlement and the real unlock), or registered after this acquisition but
/// before this call. The time since is nobody's hold: the previous holder has settled, and
/// the program sees this hold begin when its call returns. Rwlocks keep their gate: a
/// reader's acquisition may join other readers' hold.
pub fn acquired(address: usize, kind: WaitKind, now: impl FnOnce() -> u64) {
    let Some(index) = dirty_bucket(address, kind) else {
        return;
    };
    Locked::new(index).update(address, None, |s| {
        if kind == WaitKind::Mutex {
            s.gate = false;
        }
        s.advance(now());
        s.gate = true;
    });
}

/// Just before a holder's release: the waiter-time it takes, or `None` on the fast path
/// (nobody waited: nothing was touched). `still_held`: other holders keep it held (a reader
/// of an rwlock that is not the last).
pub fn settle(
    address: usize,
    kind: WaitKind,
    now: impl FnOnce() -> u64,
    still_held: bool,
) -> Option<u64> {
    let index = dirty_bucket(address, kind)?;
    Locked::new(index).update(address, None, |s| {
        s.advance(now());
        s.gate = still_held;
        s.take()
    })
}

/// What an event took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Woke {
    /// The waiting time since the previous event.
    pub taken: u64,
    /// With one waiter only: since when that time accrued (its arrival, the previous event,
    /// or the last departure of another), so the part of it another interval covers can be
    /// told apart.
    pub solo_since: Option<u64>,
}

/// Just before an event by `waker` that wakes up to `n` waiters of the object: what it
/// takes, or `None` on the fast path (nobody waits).
pub fn wake(
    address: usize,
    kind: WaitKind,
    now: impl FnOnce() -> u64,
    n: u32,
    waker: WakerId,
) -> Option<Woke> {
    let index = dirty_bucket(address, kind)?;
    let now = now();
    Locked::new(index).update(address, None, |s| {
        s.last_waker = waker;
        let solo = s.waiters == 1;
        let (taken, _) = wake_state(s, now, n);
        // With one waiter, the waiting taken is its alone: every departure withdraws what the
        // departing waiter accrued since the last settlement, and the gate of event kinds is
        // always open, so it accrued over exactly the last `taken` ns.
        let solo_since = (solo && taken > 0).then(|| now - taken);
        Woke { taken, solo_since }
    })
}

/// An event at `now` that wakes up to `n` waiters; returns the time taken and the number
/// newly woken.
fn wake_state(s: &mut State, now: u64, n: u32) -> (u64, u32) {
    s.advance(now);
    let taken = s.take();
    let before = s.woken;
    s.woken = s.woken.saturating_add(n).min(s.waiters);
    s.last_wake = now;
    (taken, s.woken - before)
}

/// A condition variable's waiter is about to wait with `mutex`.
pub fn set_partner(cond: usize, mutex: usize) {
    Locked::of(cond).update(cond, None, |s| s.partner = mutex);
}

/// A condition variable's signal or broadcast (`n` = 1 or all): like [`wake`], and each
/// newly woken waiter is registered as waiting for the partner mutex, which it must retake
/// (`mutex_held`: the signaller holds it, so that wait accrues to its hold from now).
pub fn wake_with_proxies(
    cond: usize,
    now: impl FnOnce() -> u64,
    n: u32,
    mutex_held: impl FnOnce(usize) -> bool,
) -> Option<u64> {
    let ci = dirty_bucket(cond, WaitKind::CondVar)?;
    let now = now();
    let partner = Locked::new(ci).update(cond, None, |s| s.partner)?;
    let held = partner != 0 && mutex_held(partner);
    let mi = bucket_index(partner);
    // Both buckets, locked in index order (the only place that holds two).
    let first = Locked::new(ci.min(mi));
    let second = (ci != mi).then(|| Locked::new(ci.max(mi)));
    let pick = |index: usize| match &second {
        Some(b) if index == ci.max(mi) => b,
        _ => &first,
    };
    let (cond_lock, mutex_lock) = (pick(ci), pick(mi));
    let (taken, newly) = cond_lock.update(cond, None, |s| {
        let (taken, mut newly) = wake_state(s, now, n);
        if s.partner != partner || partner == 0 {
            newly = 0;
        }
        s.proxied += newly;
        (taken, newly)
    })?;
    if newly > 0 {
        let registered = mutex_lock.update(partner, Some(WaitKind::Mutex), |m| {
            m.advance(now);
            m.waiters += newly;
            m.gate = held;
        });
        if registered.is_none() {
            cond_lock.update(cond, None, |s| s.proxied -= newly.min(s.proxied));
        }
    }
    Some(taken)
}

/// A woken condition-variable waiter retook `mutex` at `now` on the registration its
/// signaller made for it.
pub fn depart_proxy(mutex: usize, now: u64) {
    Locked::of(mutex).update(mutex, None, |s| {
        s.advance(now);
        s.waiters = s.waiters.saturating_sub(1);
        s.acquired_by_waiter();
    });
}

/// Gives back waiter-time that could not be charged, so the next settlement of the object
/// takes it (`still_held`: the release failed, e.g. EPERM, and the hold goes on).
pub fn unsettle(address: usize, kind: WaitKind, ns: u64, still_held: bool) {
    if ns == 0 && !still_held {
        return;
    }
    Locked::of(address).update(address, Some(kind), |s| {
        s.gate |= still_held;
        s.integral += ns;
    });
}

/// `pthread_barrier_init`: a barrier of `parties` threads at `address`.
pub fn barrier_init(address: usize, parties: u32) {
    Locked::of(address).update(address, Some(WaitKind::Barrier), |s| {
        s.retained = true;
        s.parties = parties;
    });
}

/// What a thread arriving at a barrier does.
#[derive(Debug)]
pub enum BarrierArrival {
    /// Others are still to come: it waits.
    Wait(Wait),
    /// It is the last: it takes the others' waiting, and the real wait releases them.
    Last(u64),
    /// The barrier's size is unknown (not initialised through the runtime).
    Unknown,
}

/// A thread arrives at the barrier at `address` at `now`.
pub fn barrier_arrive(address: usize, now: u64) -> BarrierArrival {
    Locked::of(address)
        .update(address, None, |s| {
            if s.parties == 0 {
                return BarrierArrival::Unknown;
            }
            if s.waiters - s.woken + 1 >= s.parties {
                return BarrierArrival::Last(wake_state(s, now, u32::MAX).0);
            }
            s.advance(now);
            s.waiters += 1;
            BarrierArrival::Wait(Wait {
                address,
                start_ns: now,
                gated_mark: s.gated,
            })
        })
        .unwrap_or(BarrierArrival::Unknown)
}

/// `pthread_*_init`/`destroy`: forget the object at `address`, recycling its entry. Returns
/// waiter-time that was still unsettled (0 normally).
pub fn forget(address: usize) -> u64 {
    let index = bucket_index(address);
    if TABLE[index].first(Ordering::Acquire) == NONE {
        return 0;
    }
    let locked = Locked::new(index);
    locked
        .update(address, None, |s| {
            s.retained = false;
            s.waiters = 0;
            s.woken = 0;
            s.proxied = 0;
            std::mem::take(&mut s.integral)
        })
        .unwrap_or(0)
}

/// In a fork child: only the forking thread survives, so no wait is in progress, and a
/// bucket lock another thread held at the fork would never be released. Start afresh; the
/// parent's entries are abandoned (their slots are not reused).
pub fn reset_after_fork() {
    for b in &TABLE {
        b.set_first(NONE, Ordering::Relaxed);
        b.dirty.store(0, Ordering::Relaxed);
        b.lock.store(false, Ordering::Release);
    }
    for bits in &DIRTY_BITS {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn wake_taken(address: usize, now: u64, n: u32) -> Option<u64> {
        wake(address, WaitKind::Semaphore, || now, n, WakerId::default()).map(|w| w.taken)
    }

    fn dirty_count(address: usize) -> u32 {
        TABLE[bucket_index(address)].dirty.load(Ordering::Acquire)
    }

    #[test]
    fn each_holder_takes_the_waiter_time_of_its_own_hold() {
        let mutex = 0x7000_0000usize;
        // Holder A holds from 0; W1 blocks at 10, W2 at 20; A unlocks at 30.
        let w1 = arrive(mutex, WaitKind::Mutex, 10).unwrap();
        let w2 = arrive(mutex, WaitKind::Mutex, 20).unwrap();
        assert_eq!(
            settle(mutex, WaitKind::Mutex, || 30, false),
            Some((30 - 10) + (30 - 20))
        );
        // W1 acquires at 32 (2 ns of hand-off, charged to nobody), holds until 50.
        depart(w1, 32, Outcome::Success);
        assert_eq!(
            settle(mutex, WaitKind::Mutex, || 50, false),
            Some(50 - 32),
            "only W2 waited"
        );
        // W2 acquires at 51: nothing is pending any more, so the entry is gone and the
        // unlock takes the fast path.
        depart(w2, 51, Outcome::Success);
        assert_eq!(settle(mutex, WaitKind::Mutex, || 60, false), None);
        assert_eq!(dirty_count(mutex), 0);
    }

    #[test]
    fn a_barging_holder_pays_only_for_its_own_hold() {
        let mutex = 0x7200_0000usize;
        let w = arrive(mutex, WaitKind::Mutex, 0).unwrap();
        assert_eq!(settle(mutex, WaitKind::Mutex, || 10, false), Some(10));
        // Free from 10 to 40 while W is not yet scheduled: nobody's fault. B barges in.
        acquired(mutex, WaitKind::Mutex, || 40);
        assert_eq!(
            settle(mutex, WaitKind::Mutex, || 45, false),
            Some(5),
            "B pays its own 5 ns only"
        );
        depart(w, 50, Outcome::Success);
        assert_eq!(settle(mutex, WaitKind::Mutex, || 60, false), None);
    }

    #[test]
    fn a_waiter_registered_after_the_release_is_not_the_next_holders() {
        let mutex = 0x7b00_0000usize;
        // W's try fails at 0 while A holds; A's release looks for waiters before W registers
        // (W is descheduled in between), so it settles nothing. B's try succeeds at 40 and
        // B holds to 45; W, scheduled again, waits for B and gets the mutex at 50.
        let w = arrive(mutex, WaitKind::Mutex, 0).unwrap();
        acquired(mutex, WaitKind::Mutex, || 40);
        assert_eq!(
            settle(mutex, WaitKind::Mutex, || 45, false),
            Some(5),
            "B pays for its own 5 ns, not for the free mutex's 40"
        );
        depart(w, 50, Outcome::Success);
        assert_eq!(settle(mutex, WaitKind::Mutex, || 60, false), None);
        assert_eq!(dirty_count(mutex), 0);
    }

    #[test]
    fn a_waiter_registered_between_the_settlement_and_the_unlock_is_not_the_next_holders() {
        let mutex = 0x7c00_0000usize;
        // W1 waits from 0; A's release settles at 10 (W1's 10 ns) and unlocks at 13. W2's
        // try failed against A's hold, but it registers at 12, after the settlement. B's try
        // succeeds at 30, before the woken W1 runs, and B holds to 35.
        let w1 = arrive(mutex, WaitKind::Mutex, 0).unwrap();
        assert_eq!(settle(mutex, WaitKind::Mutex, || 10, false), Some(10));
        let w2 = arrive(mutex, WaitKind::Mutex, 12).unwrap();
        acquired(mutex, WaitKind::Mutex, || 30);
        assert_eq!(
            settle(mutex, WaitKind::Mutex, || 35, false),
            Some(2 * 5),
            "B pays for its hold's 5 ns of two waiters, not for the 18 ns before it"
        );
        depart(w1, 36, Outcome::Success);
        assert_eq!(settle(mutex, WaitKind::Mutex, || 40, false), Some(40 - 36));
        depart(w2, 41, Outcome::Success);
        assert_eq!(dirty_count(mutex), 0);
    }

    #[test]
    fn a_reader_joining_a_held_rwlock_does_not_end_the_others_hold() {
        let rw = 0x7d00_0000usize;
        // R1 reads; writer W blocks at 0; R2's try-read succeeds at 10, joining R1's hold.
        // R1 leaves at 20 (R2 still reads), R2 at 30; W gets it at 31.
        let w = arrive(rw, WaitKind::RwLock, 0).unwrap();
        acquired(rw, WaitKind::RwLock, || 10);
        assert_eq!(settle(rw, WaitKind::RwLock, || 20, true), Some(20));
        assert_eq!(settle(rw, WaitKind::RwLock, || 30, false), Some(10));
        depart(w, 31, Outcome::Success);
        assert_eq!(dirty_count(rw), 0);
    }

    #[test]
    fn a_timed_out_waiter_is_not_blamed_for_its_current_stretch() {
        let mutex = 0x7300_0000usize;
        let w1 = arrive(mutex, WaitKind::Mutex, 0).unwrap();
        let w2 = arrive(mutex, WaitKind::Mutex, 0).unwrap();
        // W2 gives up at 30; W1 keeps waiting until the unlock at 50.
        assert_eq!(depart(w2, 30, Outcome::TimedOut), Departed::TimedOut);
        assert_eq!(
            settle(mutex, WaitKind::Mutex, || 50, false),
            Some(50),
            "W1's 50 ns, none of W2's"
        );
        depart(w1, 51, Outcome::Success);
        assert_eq!(dirty_count(mutex), 0);
    }

    #[test]
    fn readers_in_turn_share_a_blocked_writer() {
        let rw = 0x7400_0000usize;
        // Readers R1 and R2 hold; writer W blocks at 0; R1 leaves at 10 (R2 still holds),
        // R2 leaves at 25; W gets it at 26.
        let w = arrive(rw, WaitKind::RwLock, 0).unwrap();
        assert_eq!(settle(rw, WaitKind::RwLock, || 10, true), Some(10));
        assert_eq!(settle(rw, WaitKind::RwLock, || 25, false), Some(15));
        depart(w, 26, Outcome::Success);
        assert_eq!(settle(rw, WaitKind::RwLock, || 40, false), None);
    }

    #[test]
    fn an_event_takes_the_waiting_since_the_previous_one() {
        let cond = 0x7500_0000usize;
        let c1 = arrive(cond, WaitKind::CondVar, 0).unwrap();
        let c2 = arrive(cond, WaitKind::CondVar, 10).unwrap();
        // A signal at 20 wakes one and takes both waits so far.
        assert_eq!(wake_taken(cond, 20, 1), Some(20 + 10));
        // The woken one departs at 25: blamed, woken at 20. The other waits on.
        assert_eq!(
            depart(c1, 25, Outcome::Success),
            Departed::Blamed {
                woken_at: 20,
                mutex_wait: false,
                waker: WakerId::default(),
            }
        );
        // A broadcast at 50 takes c2's 30 ns since the last signal.
        assert_eq!(wake_taken(cond, 50, u32::MAX), Some(30));
        assert!(matches!(
            depart(c2, 52, Outcome::Success),
            Departed::Blamed { .. }
        ));
        assert_eq!(wake_taken(cond, 60, 1), None, "nobody waits: fast path");
    }

    #[test]
    fn a_woken_waiter_that_lost_the_race_is_blamed_on_the_next_event() {
        let sem = 0x7900_0000usize;
        let w = arrive(sem, WaitKind::Semaphore, 0).unwrap();
        // A post at 20 whose token another thread takes at once: the waiter sleeps on.
        assert_eq!(wake_taken(sem, 20, 1), Some(20));
        // The post at 120 ends its wait: the 100 ns since the first are this post's doing.
        assert_eq!(wake_taken(sem, 120, 1), Some(100));
        assert!(matches!(
            depart(w, 125, Outcome::Success),
            Departed::Blamed { .. }
        ));
        assert_eq!(dirty_count(sem), 0, "its 5 ns of wake-up are nobody's");
    }

    #[test]
    fn a_solo_waiters_accrual_start_and_its_waker_are_known() {
        let futex = 0x7a00_0000usize;
        let w = arrive(futex, WaitKind::Futex, 100).unwrap();
        let waker = WakerId { tid: 42, seq: 7 };
        let woke = wake(futex, WaitKind::Futex, || 150, 1, waker).unwrap();
        assert_eq!(
            woke,
            Woke {
                taken: 50,
                solo_since: Some(100)
            }
        );
        match depart(w, 151, Outcome::Success) {
            Departed::Blamed { waker: by, .. } => assert_eq!(by, waker),
            other => panic!("{other:?}"),
        }
        let a = arrive(futex, WaitKind::Futex, 200).unwrap();
        let b = arrive(futex, WaitKind::Futex, 210).unwrap();
        let woke = wake(futex, WaitKind::Futex, || 250, 1, waker).unwrap();
        assert_eq!(woke.solo_since, None, "two waiters: no single start");
        depart(a, 251, Outcome::Success);
        let woke = wake(futex, WaitKind::Futex, || 300, 1, waker).unwrap();
        assert_eq!(
            woke,
            Woke {
                taken: 50,
                solo_since: Some(250)
            },
            "once the woken one left, the other's accrual since the last wake is alone"
        );
        depart(b, 301, Outcome::Success);
    }

    #[test]
    fn timed_out_and_spurious_waits_are_never_blamed() {
        let sem = 0x7600_0000usize;
        let w = arrive(sem, WaitKind::Semaphore, 0).unwrap();
        assert_eq!(depart(w, 100, Outcome::TimedOut), Departed::TimedOut);
        assert_eq!(wake_taken(sem, 110, 1), None, "its 100 ns went to nobody");
        let w = arrive(sem, WaitKind::Semaphore, 200).unwrap();
        assert_eq!(depart(w, 300, Outcome::Success), Departed::Spurious);
        assert_eq!(dirty_count(sem), 0);
    }

    #[test]
    fn woken_condvar_waiters_wait_for_the_signallers_mutex() {
        let cond = 0x7700_0000usize;
        let mutex = 0x7700_0040usize;
        let c = arrive(cond, WaitKind::CondVar, 0).unwrap();
        set_partner(cond, mutex);
        // The producer signals at 40 holding the mutex, and unlocks at 45.
        assert_eq!(wake_with_proxies(cond, || 40, 1, |m| m == mutex), Some(40));
        assert_eq!(
            settle(mutex, WaitKind::Mutex, || 45, false),
            Some(5),
            "the retake waited 5 ns"
        );
        let d = depart(c, 47, Outcome::Success);
        assert!(matches!(
            d,
            Departed::Blamed {
                woken_at: 40,
                mutex_wait: true,
                ..
            }
        ));
        depart_proxy(mutex, 47);
        assert_eq!(dirty_count(cond), 0);
        assert_eq!(dirty_count(mutex), 0);
    }

    #[test]
    fn the_last_to_arrive_at_a_barrier_takes_the_others_wait() {
        let barrier = 0x7800_0000usize;
        barrier_init(barrier, 3);
        let BarrierArrival::Wait(a) = barrier_arrive(barrier, 0) else {
            panic!("first arrival waits")
        };
        let BarrierArrival::Wait(b) = barrier_arrive(barrier, 10) else {
            panic!("second arrival waits")
        };
        let BarrierArrival::Last(taken) = barrier_arrive(barrier, 30) else {
            panic!("third arrival is the last")
        };
        assert_eq!(taken, 30 + 20);
        assert!(matches!(
            depart(a, 31, Outcome::Success),
            Departed::Blamed { .. }
        ));
        // A new round starts before b has left: the counts stay right.
        let BarrierArrival::Wait(a2) = barrier_arrive(barrier, 40) else {
            panic!("new round")
        };
        assert!(matches!(
            depart(b, 41, Outcome::Success),
            Departed::Blamed { .. }
        ));
        assert_eq!(depart(a2, 50, Outcome::Interrupted), Departed::Interrupted);
        assert_eq!(forget(barrier), 0);
        assert!(matches!(
            barrier_arrive(barrier, 60),
            BarrierArrival::Unknown
        ));
    }

    #[test]
    fn unsettled_blame_waits_for_the_next_release() {
        let mutex = 0x7100_0000usize;
        let w = arrive(mutex, WaitKind::Mutex, 0).unwrap();
        let taken = settle(mutex, WaitKind::Mutex, || 100, false).unwrap();
        assert_eq!(taken, 100);
        unsettle(mutex, WaitKind::Mutex, taken, false);
        depart(w, 101, Outcome::TimedOut);
        assert_eq!(settle(mutex, WaitKind::Mutex, || 120, false), Some(100));
        assert_eq!(forget(mutex), 0);
    }
}
