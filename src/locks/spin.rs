//! Dual-representation spin locks (Tallent et al., PPoPP'10, Algorithms 2-5).
//!
//! Job: implement `pthread_spin_*` on the program's own 32-bit lock words so that a waiter's
//! spinning can be charged to the lock and the holder can take it as blame at unlock.
//!
//! Representation of a lock word:
//! - native, as glibc writes it on x86-64: [`NATIVE_UNLOCKED`] (1) and [`NATIVE_LOCKED`] (0)
//!   (glibc's x86 spin locks decrement to lock, so a zero-filled, never initialised word is
//!   *locked*, and programs that use one behave as under glibc);
//! - monitored: `MONITORED | HELD? | turn | index`, naming a [`MonSpin`] in the slab, which
//!   carries the spinners' waiter integral. The lock itself stays *in the program's word*:
//!   the held bit is taken by a compare-exchange on it, as glibc takes its word, and
//!   released by a store. (Until session 33 the monitored lock was a word of the record's
//!   own: a hold then took two cache lines from the last holder where glibc's takes one,
//!   and every operation read the program's word, which the holder's writes to its data
//!   beside the lock kept taking away: the program contended 5-10 times as often.)
//!   `turn` counts acquisitions modulo 64 (see [`take_free`]).
//!
//! A native word is converted (by CAS) once a thread that found it locked while the runtime
//! is active sees it released: only an unlocked word is ever converted (into an unlocked
//! monitored word), so nobody changes a word its holder holds natively, and the native
//! unlock is a plain store, as glibc's is; it does not even read the word while no monitored
//! word shares its bucket of [`CONVERTED`]. The spin that waited for a native holder's
//! release is not measured as anyone's blame (its hold has no record to feed): counted as an
//! unmonitored wait, once per lock until it is recycled. Every protocol below stays correct
//! while another thread converts the word, takes the lock or spins on it: a native CAS fails
//! when the word was converted meanwhile, and the operation retries on the monitored form.
//! A monitored word stays monitored until `pthread_spin_destroy` or `pthread_spin_init`,
//! which recycle its record.
//!
//! Spinning and blame: the waiter measures its spin (wall time, from its first failed
//! attempt to its acquisition) and records it as idleness at its own context; its CPU-time
//! samples meanwhile record nothing, as for a blocked waiter. (The paper counts the
//! spinner's CPU samples instead, which misses the time a spinner is descheduled on a busy
//! machine: about 30% of it with more spinners than cores.) It also counts itself in the
//! record's waiter integral `W(t)` (`locks::waiter_integral`) from its first failed attempt
//! until it sees the lock free and goes for it. A holder reads `W` as its hold begins (the
//! mark, on a cache line of its own in the record) and again just before its release; the
//! difference is exactly the spinners' waiting during its hold, which it charges as blame
//! to the unlock's calling context (a synchronous unwind, outside the critical section).
//! The holder pays two loads and, only while someone spins, two clock reads: no lock, no
//! read-modify-write of anything shared but the program's word. Waiting between a release
//! and the next acquisition falls between two holds' marks: nobody's. (The paper feeds a
//! counter with the spinners' samples instead; a sample is handled microseconds after its
//! timer fires, and when the holder released meanwhile the next holder took it: a quarter
//! of the blame, with 80 µs holds on a busy machine.)
//!
//! Everything here is allocation-free; nothing is called from the signal handler.

use super::slab::{Linked, Slab};
use super::waiter_integral::{elapsed, value_at, waiters, Integral};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Tag of a monitored lock word (native words are 0 or 1, or below zero).
const MONITORED: u32 = 0x8000_0000;
/// A monitored word's lock bit: set while the lock is held.
const HELD: u32 = 0x4000_0000;
/// A monitored word's count of acquisitions (modulo 64), bumped by each one: a thread that
/// read the lock's integral before taking the word takes it only if nobody held it
/// meanwhile.
const TURN: u32 = 0x3F00_0000;
const TURN_ONE: u32 = 0x0100_0000;
/// A monitored word's record index (the slab holds at most 2^24 records).
const INDEX: u32 = 0x00FF_FFFF;
/// glibc's x86-64 spin-lock word values (`pthread_spin_init` stores 1, lock takes it to 0).
pub const NATIVE_UNLOCKED: u32 = 1;
pub const NATIVE_LOCKED: u32 = 0;

/// A word alone on its cache line.
#[derive(Default)]
#[repr(align(64))]
struct OwnLine(AtomicU64);

/// The out-of-band state of a converted spin lock: its spinners' waiter integral, and the
/// holder's reading of it as its hold began.
#[derive(Default)]
#[repr(align(64))]
pub struct MonSpin {
    /// The spinners' waiter-time integral (`locks::waiter_integral`).
    waiters: Integral,
    next: AtomicU32,
    /// Address of the native word this slot belongs to (to recognise stale references).
    owner: AtomicUsize,
    /// `W` as the current hold began (written by each holder, read by its unlock). On a
    /// line of its own: spinners write `waiters`' line, and a holder's store there would
    /// wait for it inside the hold.
    mark: OwnLine,
}

impl MonSpin {
    /// The spinners' integral `W` now: the clock is read only while someone waits (else
    /// `W` does not grow, and its value is the word's own).
    #[inline(always)]
    fn value_now(&self, hooks: &impl SpinHooks) -> u64 {
        let word = self.waiters.load();
        value_at(word, if waiters(word) > 0 { hooks.now() } else { 0 })
    }

    /// The hold that just began counts waiting from the integral's value `mark`.
    #[inline(always)]
    fn begin_hold(&self, mark: u64) {
        self.mark.0.store(mark, Ordering::Relaxed);
    }
}

impl Linked for MonSpin {
    fn next(&self) -> &AtomicU32 {
        &self.next
    }
}

static SLAB: Slab<MonSpin> = Slab::new();

/// Buckets of [`CONVERTED`] (a power of two).
const CONVERTED_BUCKETS: usize = 4096;

/// Monitored words, by a hash of their address: counted before a word is converted
/// (published by the conversion's CAS), uncounted once its record is freed. An unlock whose
/// bucket counts none holds a native word and stores, without reading its word: a load of
/// the lock's own cache line right after the lock's locked instruction waits for it, 10 ns
/// a pair back to back (a load of another line does not). Words that share a bucket share
/// its count (their unlocks read their word).
static CONVERTED: [AtomicU32; CONVERTED_BUCKETS] = [const { AtomicU32::new(0) }; CONVERTED_BUCKETS];

fn converted_bucket(address: usize) -> &'static AtomicU32 {
    let h = (address as u64 >> 2).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52;
    &CONVERTED[h as usize % CONVERTED_BUCKETS]
}

/// The record a monitored `word` of the lock at `address` names; `None` for a native word
/// (glibc's values below zero carry the tag too, but no record of theirs names the lock).
fn monitored(word: u32, address: usize) -> Option<&'static MonSpin> {
    if word & MONITORED == 0 {
        return None;
    }
    SLAB.get(word & INDEX)
        .filter(|m| m.owner.load(Ordering::Acquire) == address)
}

/// What the lock operations need from the sampler.
pub trait SpinHooks {
    /// Whether the runtime is active (conversion happens only then).
    fn active(&self) -> bool;
    /// The calling thread starts spinning on a lock: CPU samples taken meanwhile are
    /// covered by the measured spin and record nothing.
    fn spin_begins(&self);
    /// [`spin_begins`](Self::spin_begins) on a monitored lock, whose spin
    /// [`spin_ends`](Self::spin_ends) records: what can be prepared for that record is
    /// prepared now, while the thread waits, rather than after, while it holds the lock.
    fn monitored_spin_begins(&self) {
        self.spin_begins();
    }
    /// The calling thread got the lock (or gave up on a lock destroyed under it) at `end`
    /// after spinning `ns` (wall time): its idleness. Called inside the hold: what can wait
    /// until [`released`](Self::released) should.
    fn spin_ends(&self, ns: u64, end: u64);
    /// The calling thread has released a monitored lock whose spinners waited `ns` during
    /// its hold: charges that blame to the calling context (or counts it as unsettled when
    /// it cannot), after writing anything deferred from the hold's start.
    fn released(&self, ns: u64);
    /// The calling thread waited `ns` (wall time, since [`spin_begins`](Self::spin_begins))
    /// for a native holder's release: its idleness, which nobody can be blamed for (the
    /// hold had no record to feed).
    fn spun_natively(&self, ns: u64);
    /// Monotonic time in ns.
    fn now(&self) -> u64;
}

/// Converts `lock` to the monitored form if it is native and unlocked (into an unlocked
/// record), and returns its record; `None` when it is native and held (taken meanwhile) or
/// no record can be had.
fn demand_monitored(lock: &AtomicU32, address: usize) -> Option<&'static MonSpin> {
    let current = lock.load(Ordering::Acquire);
    if current != NATIVE_UNLOCKED {
        return monitored(current, address);
    }
    let index = SLAB.alloc()?;
    let slot = SLAB.get(index).filter(|_| index <= INDEX)?;
    slot.waiters.clear();
    slot.mark.0.store(0, Ordering::Relaxed);
    slot.owner.store(address, Ordering::Relaxed);
    // Counted before it is published: whoever takes the lock through the record (after an
    // Acquire load of the word) finds the count when it unlocks.
    let bucket = converted_bucket(address);
    bucket.fetch_add(1, Ordering::Relaxed);
    match lock.compare_exchange(
        NATIVE_UNLOCKED,
        MONITORED | index,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => Some(slot),
        Err(now) => {
            // Taken natively, or converted by another thread first.
            slot.owner.store(0, Ordering::Relaxed);
            SLAB.free(index);
            bucket.fetch_sub(1, Ordering::Relaxed);
            monitored(now, address)
        }
    }
}

/// `pthread_spin_lock`: a free native word is taken as glibc takes it, by one locked
/// instruction (no load first); anything else out of line.
#[inline(always)]
pub fn lock(lock: &AtomicU32, hooks: &impl SpinHooks) -> i32 {
    if lock
        .compare_exchange(
            NATIVE_UNLOCKED,
            NATIVE_LOCKED,
            Ordering::Acquire,
            Ordering::Relaxed,
        )
        .is_ok()
    {
        return 0;
    }
    lock_slow(lock, hooks)
}

/// The rest of [`lock`]: a monitored word, or a native one found held.
#[cold]
#[inline(never)]
fn lock_slow(lock: &AtomicU32, hooks: &impl SpinHooks) -> i32 {
    let address = lock as *const AtomicU32 as usize;
    loop {
        // Acquire: a monitored word's record was initialised before the word was published.
        let current = lock.load(Ordering::Acquire);
        if let Some(m) = monitored(current, address) {
            if lock_monitored(lock, current, m, hooks) {
                return 0;
            }
            continue;
        }
        if current == NATIVE_UNLOCKED {
            if lock
                .compare_exchange_weak(
                    NATIVE_UNLOCKED,
                    NATIVE_LOCKED,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                return 0;
            }
            continue;
        }
        // Native and held: contended. Its holder releases by a plain store, so the word is
        // left alone until then; once released it is converted (runtime active) and taken
        // in the monitored form, so that the waits to come can be charged.
        let active = hooks.active();
        let start = if active {
            hooks.spin_begins();
            hooks.now()
        } else {
            0
        };
        let now = loop {
            let now = lock.load(Ordering::Relaxed);
            if now == NATIVE_UNLOCKED || monitored(now, address).is_some() {
                break now;
            }
            std::hint::spin_loop();
        };
        if active {
            hooks.spun_natively(hooks.now().saturating_sub(start));
            if now == NATIVE_UNLOCKED {
                demand_monitored(lock, address);
            }
        }
    }
}

/// Takes the monitored lock `m` whose word read `seen` (free or held), spinning while it is
/// held. False when the word stopped naming `m` meanwhile (destroyed or initialised under a
/// waiter, which the program may not do): the caller starts again from the word as it is.
fn lock_monitored(lock: &AtomicU32, seen: u32, m: &MonSpin, hooks: &impl SpinHooks) -> bool {
    if seen & HELD == 0 && take_free(lock, seen, m, hooks) {
        return true;
    }
    let name = seen & (MONITORED | INDEX);
    hooks.monitored_spin_begins();
    let start = hooks.now();
    m.waiters.arrive(start);
    let won = loop {
        let current = lock.load(Ordering::Relaxed);
        if current & (MONITORED | INDEX) != name {
            let now = hooks.now();
            m.waiters.depart(now);
            hooks.spin_ends(now.saturating_sub(start), now);
            return false;
        }
        if current & HELD != 0 {
            std::hint::spin_loop();
            continue;
        }
        // Free: it stops waiting now, and takes the lock unless another thread does first
        // (it then waits again). The departure comes before the take, so that the hold does
        // not begin with a locked instruction on the integral's line, which other spinners
        // keep writing; the few ns from the departure to the take are nobody's.
        let now = hooks.now();
        m.waiters.depart(now);
        if lock
            .compare_exchange(
                current,
                taken(current),
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            break now;
        }
        m.waiters.arrive(hooks.now());
    };
    hold_after_spin(m, start, won, hooks);
    true
}

/// A monitored word `free` as its next acquisition leaves it: held, one turn later.
#[inline(always)]
fn taken(free: u32) -> u32 {
    (free & !TURN) | (free.wrapping_add(TURN_ONE) & TURN) | HELD
}

/// An acquisition without spinning of `m`, whose word read `free` (not held): reads the
/// integral, then takes the word only if it is still `free` (nobody took the lock between
/// the two, or the integral's value would count the waiting of their holds too). Reading
/// first keeps the read out of the hold: spinners write the integral's line. True when
/// the lock was taken; its hold counts the waiting from the read on (the few ns before the
/// take are the hold's).
#[inline(always)]
fn take_free(lock: &AtomicU32, free: u32, m: &MonSpin, hooks: &impl SpinHooks) -> bool {
    let mark = m.value_now(hooks);
    if lock
        .compare_exchange(free, taken(free), Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return false;
    }
    m.begin_hold(mark);
    true
}

/// A spinner that spun from `start` has just taken `m` (at `won`): records its spin, then
/// starts its hold. The spin is recorded before the hold counts, so the profiler's own work
/// is nobody's blame: for the program, the hold starts when the lock call returns.
fn hold_after_spin(m: &MonSpin, start: u64, won: u64, hooks: &impl SpinHooks) {
    hooks.spin_ends(won.saturating_sub(start), won);
    m.begin_hold(m.value_now(hooks));
}

/// `pthread_spin_trylock`: 0, or EBUSY. Like glibc's, a try is one locked instruction on
/// the program's word, whether or not the lock is free: while no word of its bucket is
/// monitored ([`CONVERTED`]) that instruction is all (no load of the word first, which
/// would take its line shared before the compare-exchange takes it again); else the word
/// is read first, out of line.
#[inline(always)]
pub fn trylock(lock: &AtomicU32, hooks: &impl SpinHooks) -> i32 {
    let address = lock as *const AtomicU32 as usize;
    if converted_bucket(address).load(Ordering::Relaxed) == 0 {
        // `None`: converted meanwhile (its count was published after the bucket was read).
        if let Some(rc) = try_native(lock, address) {
            return rc;
        }
    }
    trylock_read(lock, hooks)
}

/// One try of the lock at `address` as a native word, glibc's one compare-exchange: 0
/// (taken) or EBUSY, or `None` when the word is monitored (converted meanwhile): try
/// that form.
#[inline(always)]
fn try_native(lock: &AtomicU32, address: usize) -> Option<i32> {
    match lock.compare_exchange(
        NATIVE_UNLOCKED,
        NATIVE_LOCKED,
        Ordering::Acquire,
        Ordering::Relaxed,
    ) {
        Ok(_) => Some(0),
        Err(now) if monitored(now, address).is_some() => None,
        // 0, or another locked value glibc writes (an unprofiled process sharing the lock
        // decrements it below zero when contended).
        Err(_) => Some(libc::EBUSY),
    }
}

/// [`trylock`] of a word that may be monitored.
#[cold]
#[inline(never)]
fn trylock_read(lock: &AtomicU32, hooks: &impl SpinHooks) -> i32 {
    let address = lock as *const AtomicU32 as usize;
    loop {
        // Acquire: a monitored word's record was initialised before the word was published.
        let current = lock.load(Ordering::Acquire);
        if let Some(m) = monitored(current, address) {
            if current & HELD == 0 {
                if take_free(lock, current, m, hooks) {
                    return 0;
                }
                // Taken meanwhile: try the word as it is now.
                continue;
            }
            // Held: the try's locked instruction, as glibc's, and the hold it wins if the
            // lock was released meanwhile.
            let free = current & !HELD;
            match lock.compare_exchange(free, taken(free), Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => {
                    m.begin_hold(m.value_now(hooks));
                    return 0;
                }
                Err(now) if now & (MONITORED | INDEX) == free & (MONITORED | INDEX) => {
                    return libc::EBUSY
                }
                // Recycled meanwhile: try the word as it is.
                Err(_) => continue,
            }
        }
        if let Some(rc) = try_native(lock, address) {
            return rc;
        }
        // Converted meanwhile: try the monitored form.
    }
}

/// `pthread_spin_unlock`: reads the spinners' integral, releases, then charges the waiting
/// since its hold began as blame ([`SpinHooks::released`]).
///
/// The integral is read before the release: after it, the next holder's hold begins.
/// Nothing is written to the record, before or after the release: the program may destroy
/// the lock as soon as it is unlocked.
///
/// A native word is released by a plain store, as glibc's unlock does: nobody converts a
/// word while it is held ([`demand_monitored`]). While no word of its bucket is monitored
/// ([`CONVERTED`]) the word is not even read; else it is, out of line.
#[inline(always)]
pub fn unlock(lock: &AtomicU32, hooks: &impl SpinHooks) -> i32 {
    let address = lock as *const AtomicU32 as usize;
    if converted_bucket(address).load(Ordering::Relaxed) == 0 {
        lock.store(NATIVE_UNLOCKED, Ordering::Release);
        return 0;
    }
    unlock_read(lock, hooks)
}

/// [`unlock`] of a word that may be monitored: its record's release, or the native store.
#[cold]
#[inline(never)]
fn unlock_read(lock: &AtomicU32, hooks: &impl SpinHooks) -> i32 {
    let address = lock as *const AtomicU32 as usize;
    // Acquire: a monitored word's record was initialised before the word was published.
    let current = lock.load(Ordering::Acquire);
    let Some(m) = monitored(current, address) else {
        lock.store(NATIVE_UNLOCKED, Ordering::Release);
        return 0;
    };
    let end = m.value_now(hooks);
    let start = m.mark.0.load(Ordering::Relaxed);
    lock.store(current & !HELD, Ordering::Release);
    hooks.released(elapsed(end, start));
    0
}

/// `pthread_spin_init` (`to` = [`NATIVE_UNLOCKED`]) and `pthread_spin_destroy` (`to` = the
/// word's native equivalent): recycle a monitored slot that belongs to this word. Returns
/// the waiting its holder would have taken up to now (ns), which nobody can be charged
/// for any more: a lock destroyed or initialised while held with spinners. The caller
/// counts it.
pub fn reset(lock: &AtomicU32, to: u32, hooks: &impl SpinHooks) -> u64 {
    let address = lock as *const AtomicU32 as usize;
    if converted_bucket(address).load(Ordering::Acquire) == 0 {
        // The word is native (a conversion of it is counted in its bucket before it is
        // published, and the program orders this call after every use of the lock): it is
        // stored as glibc's init stores it, without a locked read-modify-write of what is
        // usually fresh memory (a churn of millions of spin locks paid a cache-missing
        // exchange for each).
        lock.store(to, Ordering::Release);
        return 0;
    }
    let current = lock.swap(to, Ordering::AcqRel);
    let Some(m) = monitored(current, address) else {
        return 0;
    };
    let left = if current & HELD != 0 {
        elapsed(m.value_now(hooks), m.mark.0.load(Ordering::Relaxed))
    } else {
        0
    };
    m.owner.store(0, Ordering::Release);
    SLAB.free(current & INDEX);
    converted_bucket(address).fetch_sub(1, Ordering::Relaxed);
    left
}

/// `pthread_spin_destroy`: recycles the monitored slot, leaving the native equivalent of the
/// lock's state (glibc's destroy changes nothing, so a destroyed word keeps its state).
/// Returns what [`reset`] returns.
pub fn destroy(lock: &AtomicU32, hooks: &impl SpinHooks) -> u64 {
    let current = lock.load(Ordering::Acquire);
    if monitored(current, lock as *const AtomicU32 as usize).is_none() {
        return 0;
    }
    let native = if current & HELD == 0 {
        NATIVE_UNLOCKED
    } else {
        NATIVE_LOCKED
    };
    reset(lock, native, hooks)
}

/// Monitored spin locks ever needed at once (the slab's high-water mark).
pub fn monitored_high_water() -> u32 {
    SLAB.high_water()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    struct Hooks {
        blamed: AtomicU64,
        /// A fake clock: each reading advances it by 1 ns.
        clock: AtomicU64,
    }
    impl Hooks {
        fn new() -> Hooks {
            Hooks {
                blamed: AtomicU64::new(0),
                clock: AtomicU64::new(1),
            }
        }
    }
    impl SpinHooks for Hooks {
        fn active(&self) -> bool {
            true
        }
        fn spin_begins(&self) {}
        fn spin_ends(&self, _ns: u64, _end: u64) {}
        fn released(&self, ns: u64) {
            self.blamed.fetch_add(ns, Ordering::Relaxed);
        }
        fn spun_natively(&self, _ns: u64) {}
        fn now(&self) -> u64 {
            self.clock.fetch_add(1, Ordering::Relaxed)
        }
    }

    #[test]
    fn uncontended_locks_stay_native_with_glibcs_values() {
        let word = AtomicU32::new(NATIVE_UNLOCKED);
        let hooks = Hooks::new();
        assert_eq!(lock(&word, &hooks), 0);
        assert_eq!(word.load(Ordering::Relaxed), NATIVE_LOCKED);
        assert_eq!(trylock(&word, &hooks), libc::EBUSY);
        assert_eq!(unlock(&word, &hooks), 0);
        assert_eq!(word.load(Ordering::Relaxed), NATIVE_UNLOCKED);
        // A zero-filled word is locked, as with glibc on x86-64, and so is a word glibc took
        // below zero (contended, in an unprofiled process sharing it).
        assert_eq!(trylock(&AtomicU32::new(0), &hooks), libc::EBUSY);
        assert_eq!(trylock(&AtomicU32::new(u32::MAX), &hooks), libc::EBUSY);
    }

    /// `word` (native and free) converted, then held in the monitored form (as a thread
    /// that converted it and took its word holds it), the hold beginning at `hooks`' clock.
    fn held_monitored(word: &AtomicU32, hooks: &impl SpinHooks) -> &'static MonSpin {
        let address = word as *const AtomicU32 as usize;
        let m = demand_monitored(word, address).unwrap();
        assert_eq!(word.load(Ordering::Relaxed) & (MONITORED | HELD), MONITORED);
        assert_eq!(trylock(word, hooks), 0, "converted unlocked");
        assert_eq!(word.load(Ordering::Relaxed) & HELD, HELD, "held in-band");
        m
    }

    #[test]
    fn a_held_native_word_is_not_converted_and_its_unlock_is_a_store() {
        let word = AtomicU32::new(NATIVE_LOCKED); // held since before the runtime started
        assert!(
            demand_monitored(&word, 0x1000).is_none(),
            "held: left alone"
        );
        assert_eq!(word.load(Ordering::Relaxed), NATIVE_LOCKED);
        let hooks = Hooks::new();
        assert_eq!(unlock(&word, &hooks), 0);
        assert_eq!(word.load(Ordering::Relaxed), NATIVE_UNLOCKED);
    }

    #[test]
    fn glibcs_values_below_zero_are_not_taken_for_monitored_words() {
        // An unprofiled process sharing the lock takes it below zero: the tag bit is set,
        // but no record names this lock.
        let word = AtomicU32::new(u32::MAX - 1);
        let hooks = Hooks::new();
        assert!(monitored(word.load(Ordering::Relaxed), 0x1000).is_none());
        assert_eq!(trylock(&word, &hooks), libc::EBUSY);
        assert_eq!(destroy(&word, &hooks), 0);
        assert_eq!(word.load(Ordering::Relaxed), u32::MAX - 1, "left as it was");
    }

    #[test]
    fn conversion_keeps_a_held_lock_held_and_blame_reaches_the_holder() {
        let word = AtomicU32::new(NATIVE_UNLOCKED);
        let hooks = Hooks::new();
        hooks.clock.store(5, Ordering::Relaxed);
        let m = held_monitored(&word, &hooks);
        assert_eq!(trylock(&word, &hooks), libc::EBUSY);
        // A spinner arrives at 10 (as `lock_monitored` counts it when the lock is held);
        // the holder unlocks at 50 and takes the 40 ns of its hold.
        m.waiters.arrive(10);
        hooks.clock.store(50, Ordering::Relaxed);
        assert_eq!(unlock(&word, &hooks), 0);
        assert_eq!(hooks.blamed.load(Ordering::Relaxed), 40);
        // The spinner stops waiting at 60 and takes the lock (the 10 ns since the release
        // are nobody's), then unlocks with nobody waiting: no more blame.
        m.waiters.depart(60);
        let free = word.load(Ordering::Relaxed);
        assert_eq!(free & HELD, 0);
        assert!(word
            .compare_exchange(free, taken(free), Ordering::Acquire, Ordering::Relaxed)
            .is_ok());
        hooks.clock.store(60, Ordering::Relaxed);
        hold_after_spin(m, 10, 60, &hooks);
        hooks.clock.store(70, Ordering::Relaxed);
        assert_eq!(unlock(&word, &hooks), 0);
        assert_eq!(hooks.blamed.load(Ordering::Relaxed), 40);
        assert_eq!(trylock(&word, &hooks), 0);
        assert_eq!(unlock(&word, &hooks), 0);
        assert_eq!(destroy(&word, &hooks), 0);
        assert_eq!(word.load(Ordering::Relaxed), NATIVE_UNLOCKED);
    }

    /// Hooks whose `spin_ends` takes `unwind_ns` of the fake clock, during which another
    /// thread starts spinning on `lock`.
    struct SlowRecord {
        inner: Hooks,
        lock: &'static MonSpin,
        unwind_ns: u64,
    }
    impl SpinHooks for SlowRecord {
        fn active(&self) -> bool {
            true
        }
        fn spin_begins(&self) {}
        fn spin_ends(&self, _ns: u64, _end: u64) {
            self.lock.waiters.arrive(self.now());
            self.inner
                .clock
                .fetch_add(self.unwind_ns, Ordering::Relaxed);
        }
        fn released(&self, ns: u64) {
            self.inner.released(ns)
        }
        fn spun_natively(&self, _ns: u64) {}
        fn now(&self) -> u64 {
            self.inner.now()
        }
    }

    #[test]
    fn a_spin_being_recorded_is_not_the_next_hold() {
        let word = AtomicU32::new(NATIVE_UNLOCKED);
        let plain = Hooks::new();
        let m = held_monitored(&word, &plain);
        let hooks = SlowRecord {
            inner: Hooks::new(),
            lock: m,
            unwind_ns: 1000,
        };
        // A spinner arrives at 10; the holder unlocks at 50 and takes 40 ns.
        m.waiters.arrive(10);
        hooks.inner.clock.store(50, Ordering::Relaxed);
        assert_eq!(unlock(&word, &hooks), 0);
        assert_eq!(hooks.inner.blamed.load(Ordering::Relaxed), 40);
        // The spinner takes the lock at 60 and records its spin until 1062, while a second
        // thread arrives at 61. Its hold starts at 1062: unlocked at 1100, it takes 38 ns,
        // not the 1039 the second thread has waited.
        m.waiters.depart(60);
        let free = word.load(Ordering::Relaxed);
        assert!(word
            .compare_exchange(free, taken(free), Ordering::Acquire, Ordering::Relaxed)
            .is_ok());
        hooks.inner.clock.store(61, Ordering::Relaxed);
        hold_after_spin(m, 10, 60, &hooks);
        hooks.inner.clock.store(1100, Ordering::Relaxed);
        assert_eq!(unlock(&word, &hooks), 0);
        assert_eq!(hooks.inner.blamed.load(Ordering::Relaxed), 40 + 38);
        m.waiters.depart(1100);
        assert_eq!(destroy(&word, &hooks), 0);
    }

    #[test]
    fn a_spinner_that_arrives_after_the_release_charges_nobody_for_the_free_lock() {
        let word = AtomicU32::new(NATIVE_UNLOCKED);
        let hooks = Hooks::new();
        let m = held_monitored(&word, &hooks);
        // The holder releases at 10 with nobody waiting; a spinner that found the lock held
        // during that hold is counted only at 20, when the lock is free.
        hooks.clock.store(10, Ordering::Relaxed);
        assert_eq!(unlock(&word, &hooks), 0);
        m.waiters.arrive(20);
        // Another thread takes it at 30 (a try) and releases at 50: its hold kept the
        // spinner waiting 20 ns, not the 30 since the spinner arrived.
        hooks.clock.store(30, Ordering::Relaxed);
        assert_eq!(trylock(&word, &hooks), 0);
        hooks.clock.store(50, Ordering::Relaxed);
        assert_eq!(unlock(&word, &hooks), 0);
        assert_eq!(hooks.blamed.load(Ordering::Relaxed), 20);
        m.waiters.depart(60);
        assert_eq!(destroy(&word, &hooks), 0);
    }

    #[test]
    fn an_integral_read_before_another_hold_is_refused() {
        // A thread reads the word and the integral, then is preempted while another thread
        // holds the lock (for which a spinner waits): its take must fail, or its hold would
        // count the other hold's waiting as well.
        let word = AtomicU32::new(NATIVE_UNLOCKED);
        let hooks = Hooks::new();
        let m = held_monitored(&word, &hooks);
        assert_eq!(unlock(&word, &hooks), 0);
        let seen = word.load(Ordering::Relaxed);
        assert_eq!(trylock(&word, &hooks), 0, "the other thread's hold");
        m.waiters.arrive(hooks.now());
        assert_eq!(unlock(&word, &hooks), 0);
        assert_eq!(word.load(Ordering::Relaxed) & HELD, 0, "free again");
        assert!(!take_free(&word, seen, m, &hooks), "a turn later: refused");
        assert!(take_free(&word, word.load(Ordering::Relaxed), m, &hooks));
        assert_eq!(unlock(&word, &hooks), 0);
        m.waiters.depart(hooks.now());
        assert_eq!(destroy(&word, &hooks), 0);
    }

    #[test]
    fn destroying_a_lock_held_with_spinners_returns_the_waiting_nobody_took() {
        let word = AtomicU32::new(NATIVE_UNLOCKED);
        let hooks = Hooks::new();
        hooks.clock.store(5, Ordering::Relaxed);
        let m = held_monitored(&word, &hooks);
        m.waiters.arrive(10);
        // Destroyed at 40: 30 ns of waiting its holder will never take.
        hooks.clock.store(40, Ordering::Relaxed);
        assert_eq!(destroy(&word, &hooks), 30);
        assert_eq!(word.load(Ordering::Relaxed), NATIVE_LOCKED, "still held");
    }

    #[test]
    fn mutual_exclusion_holds_while_locks_convert_under_contention() {
        static WORDS: [AtomicU32; 4] = [const { AtomicU32::new(NATIVE_UNLOCKED) }; 4];
        static COUNTS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];
        static INSIDE: [AtomicBool; 4] = [const { AtomicBool::new(false) }; 4];
        let threads: Vec<_> = (0..4)
            .map(|t| {
                std::thread::spawn(move || {
                    let hooks = Hooks::new();
                    for i in 0..50_000usize {
                        let k = (i + t) % 4;
                        if i % 3 == 0 {
                            while trylock(&WORDS[k], &hooks) != 0 {
                                std::hint::spin_loop();
                            }
                        } else {
                            lock(&WORDS[k], &hooks);
                        }
                        assert!(!INSIDE[k].swap(true, Ordering::AcqRel), "two holders");
                        let c = COUNTS[k].load(Ordering::Relaxed);
                        COUNTS[k].store(c + 1, Ordering::Relaxed);
                        INSIDE[k].store(false, Ordering::Release);
                        unlock(&WORDS[k], &hooks);
                    }
                    hooks.blamed.load(Ordering::Relaxed)
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let total: u64 = COUNTS.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        assert_eq!(total, 4 * 50_000);
    }
}
