//! Dual-representation spin locks (Tallent et al., PPoPP'10, Algorithms 2-5).
//!
//! Job: implement `pthread_spin_*` on the program's own 32-bit lock words so that a waiter's
//! spinning can be charged to the lock and the holder can take it as blame at unlock.
//!
//! Representation of a lock word:
//! - native, as glibc writes it on x86-64: [`NATIVE_UNLOCKED`] (1) and [`NATIVE_LOCKED`] (0)
//!   (glibc's x86 spin locks decrement to lock, so a zero-filled, never initialised word is
//!   *locked*, and programs that use one behave as under glibc);
//! - monitored: `MONITORED | index`, naming a [`MonSpin`] in the slab, whose own word is the
//!   real lock and which carries the idleness counter.
//!
//! A native word is converted (by CAS) once a thread that found it locked while the runtime
//! is active sees it released: only an unlocked word is ever converted (into an unlocked
//! record), so nobody changes a word its holder holds natively, and the native unlock is a
//! plain store, as glibc's is; it does not even read the word while no monitored word
//! shares its bucket of [`CONVERTED`]. An uncontended pair costs a CAS and a store, like
//! glibc's (an unlock by CAS, because the word might have been converted under its holder,
//! cost a second locked instruction, and a read of the word right after the lock's CAS
//! waited for it: about 10 ns a pair each). The spin that waited for the release is
//! not measured (its hold has no record to feed): counted as an unmonitored wait, once per
//! lock until it is recycled. Every protocol below stays correct while another thread
//! converts the word, takes the lock or spins on it: a native CAS fails when the word was
//! converted meanwhile, and the operation retries on the monitored form. A monitored word
//! stays monitored until `pthread_spin_destroy` or `pthread_spin_init`, which recycle its
//! slot.
//!
//! Spinning: the waiter measures its spin (wall time, from its first failed attempt to its
//! acquisition) and records it as idleness at its own context; its CPU-time samples
//! meanwhile record nothing, as for a blocked waiter. The paper counts the spinner's CPU
//! samples instead, which misses the time a spinner is descheduled on a busy machine (about
//! 30% of it with more spinners than cores). It also registers with the lock's record,
//! which carries the waiting counter: while the lock is held, the counter
//! grows by spinners × elapsed time. The holder swaps the counter with zero and releases,
//! both under the record's meta lock, and charges it as blame to the unlock's calling
//! context (a synchronous unwind, outside the critical section). The meta lock makes the
//! gate (`held`) exact: a spinner opens it only if it finds the word held, so waiting never
//! accrues behind a release (`locks::model_check` checks that every unit charged accrued
//! during its charger's hold). The paper feeds the counter with the spinners' samples
//! instead; a sample is handled microseconds after its timer fires, and when the holder
//! released meanwhile the next holder took it — a quarter of the blame, with 80 µs holds on
//! a busy machine. Measured, the counter is exact, and the time between a release and the
//! next acquisition is nobody's.
//!
//! Everything here is allocation-free; nothing is called from the signal handler.

use super::slab::{Linked, Slab};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Tag of a monitored lock word (native words are 0 or 1).
const MONITORED: u32 = 0x8000_0000;
/// glibc's x86-64 spin-lock word values (`pthread_spin_init` stores 1, lock takes it to 0).
pub const NATIVE_UNLOCKED: u32 = 1;
pub const NATIVE_LOCKED: u32 = 0;

/// A lock word alone on its cache line.
#[derive(Default)]
#[repr(align(64))]
struct OwnLine(AtomicU32);

impl std::ops::Deref for OwnLine {
    type Target = AtomicU32;
    fn deref(&self) -> &AtomicU32 {
        &self.0
    }
}

/// The out-of-band state of a converted spin lock.
///
/// The real lock word has a cache line of its own: spinners read it in a loop, and a
/// holder's meta-locked bookkeeping (the unlock's, a spinner's registration) would
/// otherwise take that line from them, and they it back, several times a release: each
/// hold of a contended lock grew by that much, and with short holds the program contended
/// several times as often as without the profiler.
#[derive(Default)]
pub struct MonSpin {
    /// The real lock: 0 unlocked, 1 locked.
    word: OwnLine,
    next: AtomicU32,
    /// Spin-wait (spinner-ns) accumulated since the last unlock took it.
    idleness: AtomicU64,
    /// Address of the native word this slot belongs to (to recognise stale references).
    owner: AtomicUsize,
    /// Guards `spinners`, `held`, `stamp` and the growth of `idleness` (held for a few
    /// instructions).
    meta: AtomicBool,
    /// Threads spinning on the lock.
    spinners: AtomicU32,
    /// Whether the lock is held (waiting accrues only then).
    held: AtomicBool,
    /// A spinner has taken the lock and is recording its spin (an unwind, microseconds):
    /// its hold starts only after that, so a waiter that registers meanwhile leaves `held`
    /// false.
    acquiring: AtomicBool,
    /// Time (monotonic ns) `idleness` was last brought up to date.
    stamp: AtomicU64,
}

impl MonSpin {
    /// Takes the meta lock (held for a few instructions by whoever has it).
    fn lock_meta(&self) {
        while self
            .meta
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
    }

    /// Runs `f` with the record's meta lock, after bringing the counter up to `now`.
    fn update<R>(&self, now: u64, f: impl FnOnce(&MonSpin) -> R) -> R {
        self.lock_meta();
        self.accrue(now);
        let r = f(self);
        self.meta.store(false, Ordering::Release);
        r
    }

    /// Whether waiting accrues now: spinners wait while the lock is held. Meta lock held.
    #[inline(always)]
    fn accruing(&self) -> bool {
        self.spinners.load(Ordering::Relaxed) > 0 && self.held.load(Ordering::Relaxed)
    }

    /// Brings the counter and the stamp up to `now`. Meta lock held.
    #[inline(always)]
    fn accrue(&self, now: u64) {
        let stamp = self.stamp.load(Ordering::Relaxed);
        if now > stamp {
            if self.accruing() {
                let spinners = u64::from(self.spinners.load(Ordering::Relaxed));
                self.idleness
                    .fetch_add(spinners * (now - stamp), Ordering::Relaxed);
            }
            self.stamp.store(now, Ordering::Relaxed);
        }
    }

    /// [`update`](Self::update) for a release: `f` must leave the record not accruing
    /// (`held` false). The clock is read, under the meta lock, only when waiting accrues up
    /// to now: an uncontended release reads no clock. The stamp it leaves behind may be
    /// old; every update that starts accruing again brings it up to date first.
    fn update_releasing<R>(&self, now: impl FnOnce() -> u64, f: impl FnOnce(&MonSpin) -> R) -> R {
        self.lock_meta();
        if self.accruing() {
            self.accrue(now());
        }
        let r = f(self);
        debug_assert!(!self.held.load(Ordering::Relaxed));
        self.meta.store(false, Ordering::Release);
        r
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

fn monitored(word: u32) -> Option<&'static MonSpin> {
    if word & MONITORED == 0 {
        return None;
    }
    SLAB.get(word & !MONITORED)
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
    /// The calling thread got the lock after spinning `ns` (wall time): its idleness.
    fn spin_ends(&self, ns: u64);
    /// Charges `ns` of blame to the calling context, or counts it as unsettled when it
    /// cannot (the lock is released by then: nothing may be given back to its record).
    fn blame(&self, ns: u64);
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
        return monitored(current);
    }
    let index = SLAB.alloc()?;
    let slot = SLAB.get(index)?;
    slot.idleness.store(0, Ordering::Relaxed);
    slot.spinners.store(0, Ordering::Relaxed);
    slot.held.store(false, Ordering::Relaxed);
    slot.acquiring.store(false, Ordering::Relaxed);
    slot.stamp.store(0, Ordering::Relaxed);
    slot.meta.store(false, Ordering::Relaxed);
    slot.owner.store(address, Ordering::Relaxed);
    slot.word.store(0, Ordering::Relaxed);
    // Counted before it is published: whoever takes the lock through the record (after an
    // Acquire load of the word) finds the count when it unlocks.
    let bucket = converted_bucket(lock as *const AtomicU32 as usize);
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
            SLAB.free(index);
            bucket.fetch_sub(1, Ordering::Relaxed);
            monitored(now)
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
        if let Some(m) = monitored(current) {
            lock_monitored(m, hooks);
            return 0;
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
            if now == NATIVE_UNLOCKED || monitored(now).is_some() {
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

fn lock_monitored(m: &MonSpin, hooks: &impl SpinHooks) {
    // SeqCst: see `register_spinner`.
    if m.word.swap(1, Ordering::SeqCst) == 0 {
        acquired(m, hooks);
        return;
    }
    hooks.monitored_spin_begins();
    let start = hooks.now();
    register_spinner(m, start);
    loop {
        while m.word.load(Ordering::Relaxed) != 0 {
            std::hint::spin_loop();
        }
        if m.word.swap(1, Ordering::Acquire) == 0 {
            break;
        }
    }
    hold_after_spin(m, start, hooks);
}

/// A thread starts spinning on `m` at `now`: waiting accrues from now on if the lock is
/// held (its holder's start may be unknown: a try that found nobody waiting tells nobody),
/// unless a spinner that took it has not started its hold yet. The word is read under the
/// meta lock, inside which every monitored unlock releases: a holder that released before
/// this registration leaves the gate shut (its hold is over, and nobody would close the
/// gate again), one that releases after it finds the gate open and closes it.
///
/// With an acquisition that does not spin ([`acquired`]) this is a handshake: the spinner
/// counts itself, then reads the word; the acquirer takes the word, then reads the count.
/// Both pairs are `SeqCst`, so at least one side sees the other: either the spinner finds
/// the lock held and opens the gate, or the acquirer finds a spinner and opens it (free on
/// x86-64: the swap and the add are locked instructions, the loads plain moves).
fn register_spinner(m: &MonSpin, now: u64) {
    m.update(now, |m| {
        m.spinners.fetch_add(1, Ordering::SeqCst);
        if m.word.load(Ordering::SeqCst) != 0 && !m.acquiring.load(Ordering::Relaxed) {
            m.held.store(true, Ordering::Relaxed);
        }
    });
}

/// A spinner that began at `start` has just taken `m`: records its spin, then starts its
/// hold. The spin is recorded before the hold counts (the lock is not marked held until
/// after it, even if another spinner registers meanwhile), so the profiler's own work is
/// nobody's blame: for the program, the hold starts when the lock call returns.
fn hold_after_spin(m: &MonSpin, start: u64, hooks: &impl SpinHooks) {
    let won = hooks.now();
    m.update(won, |m| {
        m.spinners.fetch_sub(1, Ordering::Relaxed);
        m.held.store(false, Ordering::Relaxed);
        m.acquiring.store(true, Ordering::Relaxed);
    });
    hooks.spin_ends(won.saturating_sub(start));
    m.update(hooks.now(), |m| {
        m.acquiring.store(false, Ordering::Relaxed);
        m.held.store(true, Ordering::Relaxed);
    });
}

/// An acquisition without spinning: if others spin on the lock, it is held again from now
/// (the time since the last release was nobody's).
fn acquired(m: &MonSpin, hooks: &impl SpinHooks) {
    // SeqCst: the acquirer's half of the handshake with `register_spinner`.
    if m.spinners.load(Ordering::SeqCst) > 0 {
        m.update(hooks.now(), |m| m.held.store(true, Ordering::Relaxed));
    }
}

/// `pthread_spin_trylock`: 0, or EBUSY.
pub fn trylock(lock: &AtomicU32, hooks: &impl SpinHooks) -> i32 {
    loop {
        // Acquire: a monitored word's record was initialised before the word was published.
        let current = lock.load(Ordering::Acquire);
        if let Some(m) = monitored(current) {
            // SeqCst: see `register_spinner`.
            return if m.word.swap(1, Ordering::SeqCst) == 0 {
                acquired(m, hooks);
                0
            } else {
                libc::EBUSY
            };
        }
        match lock.compare_exchange(
            NATIVE_UNLOCKED,
            NATIVE_LOCKED,
            Ordering::Acquire,
            Ordering::Relaxed,
        ) {
            Ok(_) => return 0,
            // Converted meanwhile: try the monitored form.
            Err(now) if monitored(now).is_some() => continue,
            // 0, or another locked value glibc writes (an unprofiled process sharing the
            // lock decrements it below zero when contended).
            Err(_) => return libc::EBUSY,
        }
    }
}

/// `pthread_spin_unlock`: takes the blame accumulated during the hold and releases, both
/// under the record's meta lock, then charges the blame.
///
/// Taking it before the release: after the release, the next holder's hold begins. Under
/// the meta lock: a spinner whose swap failed during this hold but that registers only now
/// must not open the gate (`held`) behind the release, or waiting would accrue while the
/// lock is free and be charged to the next unlock. Nothing is given back to the record
/// after the release: the program may destroy the lock as soon as it is unlocked.
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
    // Acquire: a monitored word's record was initialised before the word was published.
    let Some(m) = monitored(lock.load(Ordering::Acquire)) else {
        lock.store(NATIVE_UNLOCKED, Ordering::Release);
        return 0;
    };
    let blame = m.update_releasing(
        || hooks.now(),
        |m| {
            m.held.store(false, Ordering::Relaxed);
            let blame = m.idleness.swap(0, Ordering::Relaxed);
            m.word.store(0, Ordering::Release);
            blame
        },
    );
    if blame > 0 {
        hooks.blame(blame);
    }
    0
}

/// `pthread_spin_init` (`to` = [`NATIVE_UNLOCKED`]) and `pthread_spin_destroy` (`to` = the
/// word's native equivalent): recycle a monitored slot that belongs to this word. Returns
/// the waiting its counter still held (ns), which nobody can be charged for any more: a
/// lock destroyed or initialised while held with spinners. The caller counts it.
pub fn reset(lock: &AtomicU32, to: u32) -> u64 {
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
    if current & MONITORED != 0 {
        let index = current & !MONITORED;
        if let Some(m) = SLAB.get(index) {
            if m.owner.load(Ordering::Acquire) == address {
                m.owner.store(0, Ordering::Release);
                // Under the meta lock: an unlock that released the word may still be in its
                // meta section (a lock taken and destroyed at once after it); the record
                // is freed only once that section is over.
                let left = m.update(0, |m| m.idleness.swap(0, Ordering::Relaxed));
                SLAB.free(index);
                converted_bucket(address).fetch_sub(1, Ordering::Relaxed);
                return left;
            }
        }
    }
    0
}

/// `pthread_spin_destroy`: recycles the monitored slot, leaving the native equivalent of the
/// lock's state (glibc's destroy changes nothing, so a destroyed word keeps its state).
/// Returns what [`reset`] returns.
pub fn destroy(lock: &AtomicU32) -> u64 {
    let current = lock.load(Ordering::Acquire);
    let native = match monitored(current) {
        Some(m) if m.word.load(Ordering::Acquire) == 0 => NATIVE_UNLOCKED,
        Some(_) => NATIVE_LOCKED,
        None => return 0,
    };
    reset(lock, native)
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
        fn spin_ends(&self, _ns: u64) {}
        fn blame(&self, ns: u64) {
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
    /// that converted it and swapped its word holds it).
    fn held_monitored(word: &AtomicU32, address: usize) -> &'static MonSpin {
        let m = demand_monitored(word, address).unwrap();
        assert!(word.load(Ordering::Relaxed) & MONITORED != 0);
        assert_eq!(m.word.swap(1, Ordering::Relaxed), 0, "converted unlocked");
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
    fn conversion_keeps_a_held_lock_held_and_blame_reaches_the_holder() {
        let word = AtomicU32::new(NATIVE_UNLOCKED);
        let m = held_monitored(&word, 0x1000);
        let hooks = Hooks::new();
        assert_eq!(trylock(&word, &hooks), libc::EBUSY);
        // A spinner arrives at 10 (as `lock_monitored` registers it when its swap fails);
        // the holder unlocks at 50 and takes the 40 ns of its hold.
        register_spinner(m, 10);
        hooks.clock.store(50, Ordering::Relaxed);
        assert_eq!(unlock(&word, &hooks), 0);
        assert_eq!(hooks.blamed.load(Ordering::Relaxed), 40);
        // The spinner acquires at 60 (the 10 ns since the release are nobody's) and unlocks
        // with nobody waiting: no more blame.
        m.word.store(1, Ordering::Relaxed);
        hooks.clock.store(60, Ordering::Relaxed);
        hold_after_spin(m, 10, &hooks);
        hooks.clock.store(70, Ordering::Relaxed);
        assert_eq!(unlock(&word, &hooks), 0);
        assert_eq!(hooks.blamed.load(Ordering::Relaxed), 40);
        assert_eq!(trylock(&word, &hooks), 0);
        assert_eq!(unlock(&word, &hooks), 0);
        assert_eq!(destroy(&word), 0);
        assert_eq!(word.load(Ordering::Relaxed), NATIVE_UNLOCKED);
    }

    /// Hooks whose `spin_ends` takes `unwind_ns` of the fake clock, during which another
    /// thread registers as a spinner on `lock`.
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
        fn spin_ends(&self, _ns: u64) {
            register_spinner(self.lock, self.now());
            self.inner
                .clock
                .fetch_add(self.unwind_ns, Ordering::Relaxed);
        }
        fn blame(&self, ns: u64) {
            self.inner.blame(ns)
        }
        fn spun_natively(&self, _ns: u64) {}
        fn now(&self) -> u64 {
            self.inner.now()
        }
    }

    #[test]
    fn a_spin_being_recorded_is_not_the_next_hold() {
        let word = AtomicU32::new(NATIVE_UNLOCKED);
        let m = held_monitored(&word, 0x2000);
        let hooks = SlowRecord {
            inner: Hooks::new(),
            lock: m,
            unwind_ns: 1000,
        };
        // A spinner registers at 10; the holder unlocks at 50 and takes 40 ns.
        register_spinner(m, 10);
        hooks.inner.clock.store(50, Ordering::Relaxed);
        assert_eq!(unlock(&word, &hooks), 0);
        assert_eq!(hooks.inner.blamed.load(Ordering::Relaxed), 40);
        // The spinner takes the lock at 60 and records its spin until 1062, while a second
        // thread registers at 61. Its hold starts at 1062: unlocked at 1100, it takes 38 ns,
        // not the 1039 the second thread has waited.
        m.word.store(1, Ordering::Relaxed);
        hooks.inner.clock.store(60, Ordering::Relaxed);
        hold_after_spin(m, 10, &hooks);
        hooks.inner.clock.store(1100, Ordering::Relaxed);
        assert_eq!(unlock(&word, &hooks), 0);
        assert_eq!(hooks.inner.blamed.load(Ordering::Relaxed), 40 + 38);
        assert_eq!(destroy(&word), 0);
    }

    #[test]
    fn a_spinner_registering_after_the_release_charges_nobody_for_the_free_lock() {
        let word = AtomicU32::new(NATIVE_UNLOCKED);
        let m = held_monitored(&word, &word as *const AtomicU32 as usize);
        let hooks = Hooks::new();
        // The holder releases at 10 with nobody registered; a spinner whose swap failed
        // during that hold registers only at 20, when the lock is free: nothing accrues.
        hooks.clock.store(10, Ordering::Relaxed);
        assert_eq!(unlock(&word, &hooks), 0);
        register_spinner(m, 20);
        // Another thread takes it at 30 (a try, which sees the spinner and opens the gate)
        // and releases at 50: its hold kept the spinner waiting 20 ns, not the 30 since
        // the spinner registered.
        hooks.clock.store(30, Ordering::Relaxed);
        assert_eq!(trylock(&word, &hooks), 0);
        hooks.clock.store(50, Ordering::Relaxed);
        assert_eq!(unlock(&word, &hooks), 0);
        assert_eq!(hooks.blamed.load(Ordering::Relaxed), 20);
        m.spinners.store(0, Ordering::Relaxed);
        assert_eq!(destroy(&word), 0);
    }

    #[test]
    fn destroying_a_lock_held_with_spinners_returns_the_waiting_nobody_took() {
        let word = AtomicU32::new(NATIVE_UNLOCKED);
        let m = held_monitored(&word, &word as *const AtomicU32 as usize);
        register_spinner(m, 10);
        // A later update brings the counter up to 40: 30 ns of waiting, in the record.
        m.update(40, |_| {});
        assert_eq!(destroy(&word), 30);
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
