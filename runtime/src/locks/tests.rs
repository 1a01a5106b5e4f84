//! Unit tests of the interposed mutexes and spin locks ([`locks`](super)) against glibc.
//!
//! Mutexes: every type, robustness, sharing and protocol a program can ask for goes through
//! our `pthread_mutex_*` on one mutex of a twin pair and through glibc's real functions
//! (`crate::real`) on the other, call by call on the same threads: the return codes and the
//! mutexes' bytes must stay equal. Spin locks are the runtime's own implementation; they
//! are compared with glibc's `pthread_spin_*` (found with `dlsym(RTLD_NEXT)`, as the crate
//! never calls them) in the same way, on the lock word.
//!
//! The test process is not profiled (no `BLAMEPROF_OUTPUT`): sampling is off, so the
//! interposers take their pass-through paths (and spin locks never convert to their
//! monitored form); the default mutex's inline fast path is on, as when profiled.

#![cfg(test)]

use super::unlock_releases;
use crate::tests::support::{
    assert_unprofiled, gettid, glibc_mutex, glibc_symbol, mutex_fields, our_mutex, supported_clock,
    MutexAttr, MutexOp, MutexTwin, Raw, Twin, CLOCKS, DEADLINES, MUTEX_COUNT_AT, PAST,
    PTHREAD_MUTEX_ADAPTIVE_NP,
};
use libc::{c_int, pthread_mutex_t, pthread_spinlock_t, EBUSY, EDEADLK, EINVAL, EPERM, ETIMEDOUT};
use std::sync::atomic::{AtomicBool, Ordering};

const PAST_TIMED: MutexOp = MutexOp::TimedLock(PAST.tv_sec, PAST.tv_nsec);
const PAST_CLOCKED: MutexOp = MutexOp::ClockLock(libc::CLOCK_MONOTONIC, PAST.tv_sec, PAST.tv_nsec);
/// The owner field of a robust mutex whose owner died and that nobody made consistent
/// (glibc's `PTHREAD_MUTEX_INCONSISTENT`), and of one unlocked in that state
/// (`PTHREAD_MUTEX_NOTRECOVERABLE`).
const INCONSISTENT: i32 = i32::MAX;
const NOT_RECOVERABLE: i32 = i32::MAX - 1;
/// The kernel's mask of the thread id in a robust or priority-inheritance lock word.
const FUTEX_TID_MASK: i32 = 0x3fff_ffff;

/// Every kind of mutex glibc offers, but priority protection (`PTHREAD_PRIO_PROTECT`,
/// whose lock changes the thread's scheduling policy when permitted).
fn every_kind() -> Vec<MutexAttr> {
    let mut all = Vec::new();
    for kind in [
        libc::PTHREAD_MUTEX_NORMAL,
        libc::PTHREAD_MUTEX_RECURSIVE,
        libc::PTHREAD_MUTEX_ERRORCHECK,
        PTHREAD_MUTEX_ADAPTIVE_NP,
    ] {
        for robust in [false, true] {
            for pshared in [false, true] {
                for protocol in [libc::PTHREAD_PRIO_NONE, libc::PTHREAD_PRIO_INHERIT] {
                    all.push(MutexAttr {
                        kind,
                        robust,
                        pshared,
                        protocol,
                    });
                }
            }
        }
    }
    all
}

#[test]
fn every_kind_of_mutex_answers_as_glibc_does() {
    use MutexOp::*;
    assert_unprofiled();
    for attr in every_kind() {
        let t = MutexTwin::new(Some(attr));
        assert_eq!(t.step(Lock), 0, "{attr:?}");
        let held = t.ours_fields();
        assert_eq!(held.owner, gettid(), "{attr:?}");
        if attr.robust || attr.protocol == libc::PTHREAD_PRIO_INHERIT {
            assert_eq!(held.lock & FUTEX_TID_MASK, gettid(), "{attr:?}: lock word");
        }
        // Relocking while held: 0 for a recursive mutex (which then counts 2 or 3 holds),
        // EBUSY, EDEADLK or ETIMEDOUT for the others, as glibc decides.
        let mut holds = 1;
        for op in [TryLock, PAST_TIMED, PAST_CLOCKED] {
            if t.step(op) == 0 {
                holds += 1;
            }
        }
        assert_eq!(
            holds > 1,
            attr.kind == libc::PTHREAD_MUTEX_RECURSIVE,
            "{attr:?}"
        );
        assert_eq!(
            t.steps_elsewhere(&[TryLock, PAST_TIMED]),
            [EBUSY, ETIMEDOUT],
            "{attr:?}"
        );
        for _ in 0..holds {
            assert_eq!(t.step(Unlock), 0, "{attr:?}");
        }
        assert_eq!(t.ours_fields().owner, 0, "{attr:?}");
        assert_eq!(t.ours_fields().nusers, 0, "{attr:?}");
        assert_eq!(t.step(TryLock), 0, "{attr:?}");
        assert_eq!(t.step(Unlock), 0, "{attr:?}");
        assert_eq!(t.step(Destroy), 0, "{attr:?}");
    }
}

#[test]
fn an_error_checking_mutex_reports_misuse_as_glibc_does() {
    use MutexOp::*;
    let t = MutexTwin::new(Some(MutexAttr::of_kind(libc::PTHREAD_MUTEX_ERRORCHECK)));
    assert_eq!(t.step(Lock), 0);
    assert_eq!(t.step(Lock), EDEADLK);
    assert_eq!(t.step(TryLock), EBUSY);
    assert_eq!(t.step(PAST_TIMED), EDEADLK);
    assert_eq!(t.step(PAST_CLOCKED), EDEADLK);
    assert_eq!(
        t.steps_elsewhere(&[Unlock, TryLock, PAST_TIMED]),
        [EPERM, EBUSY, ETIMEDOUT]
    );
    let f = t.ours_fields();
    assert_eq!((f.owner, f.nusers, f.count), (gettid(), 1, 0));
    assert_eq!(t.step(Destroy), EBUSY);
    assert_eq!(t.step(Unlock), 0);
    assert_eq!(
        t.step(Unlock),
        EPERM,
        "unlocking an unlocked error-checking mutex"
    );
    assert_eq!(t.ours_fields().nusers, 0, "a refused unlock counts nothing");
    assert_eq!(t.step(Destroy), 0);
}

#[test]
fn a_recursive_mutex_counts_holds_as_glibc_does() {
    use MutexOp::*;
    let t = MutexTwin::new(Some(MutexAttr::of_kind(libc::PTHREAD_MUTEX_RECURSIVE)));
    let m = t.twin.ours.ptr();
    for (i, op) in [Lock, Lock, TryLock, PAST_TIMED].into_iter().enumerate() {
        assert_eq!(t.step(op), 0, "{op:?}");
        let f = t.ours_fields();
        assert_eq!((f.count, f.owner, f.nusers), (i as u32 + 1, gettid(), 1));
        // SAFETY: `m` is an initialised mutex this thread holds.
        let releases = unsafe { unlock_releases(m) };
        assert_eq!(releases, i == 0, "held {} times", i + 1);
    }
    assert_eq!(t.steps_elsewhere(&[TryLock, Unlock]), [EBUSY, EPERM]);
    assert_eq!(t.step(Destroy), EBUSY);
    for left in (1..4).rev() {
        assert_eq!(t.step(Unlock), 0);
        assert_eq!(t.ours_fields().count, left);
    }
    // SAFETY: as above.
    assert!(unsafe { unlock_releases(m) });
    assert_eq!(t.step(Unlock), 0);
    let f = t.ours_fields();
    assert_eq!((f.lock, f.count, f.owner, f.nusers), (0, 0, 0, 0));
    assert_eq!(t.step(Unlock), EPERM);
    // The count is full (glibc would get there after 2^32 - 1 locks): EAGAIN.
    assert_eq!(t.step(Lock), 0);
    t.twin.ours.set_word(MUTEX_COUNT_AT, -1);
    t.twin.glibc.set_word(MUTEX_COUNT_AT, -1);
    assert_eq!(t.step(Lock), libc::EAGAIN);
    assert_eq!(t.step(TryLock), libc::EAGAIN);
    assert_eq!(t.step(PAST_TIMED), libc::EAGAIN);
    t.twin.ours.set_word(MUTEX_COUNT_AT, 1);
    t.twin.glibc.set_word(MUTEX_COUNT_AT, 1);
    assert_eq!(t.step(Unlock), 0);
    assert_eq!(t.step(Destroy), 0);
}

#[test]
fn a_robust_mutex_whose_owner_died_recovers_as_glibc_does() {
    use MutexOp::*;
    let attr = MutexAttr {
        robust: true,
        ..MutexAttr::of_kind(libc::PTHREAD_MUTEX_NORMAL)
    };
    // Not made consistent: unusable after its unlock (the lock calls on it are in
    // `a_lock_of_an_unrecoverable_mutex_leaves_it_free`).
    let t = MutexTwin::new(Some(attr));
    assert_eq!(t.steps_elsewhere(&[Lock]), [0]); // that thread ends holding both
    assert_eq!(t.step(Lock), libc::EOWNERDEAD);
    let f = t.ours_fields();
    assert_eq!((f.lock & FUTEX_TID_MASK, f.owner), (gettid(), INCONSISTENT));
    assert_eq!(t.step(Unlock), 0);
    assert_eq!(t.ours_fields().owner, NOT_RECOVERABLE);
    assert_eq!(t.ours_fields().lock, 0);
    assert_eq!(t.step(TryLock), libc::ENOTRECOVERABLE);
    assert_eq!(t.step(Destroy), 0);

    // Made consistent: usable again. Found by a try, and by a timed lock.
    for found_by in [TryLock, PAST_TIMED] {
        let t = MutexTwin::new(Some(attr));
        assert_eq!(t.steps_elsewhere(&[Lock]), [0]);
        assert_eq!(t.step(found_by), libc::EOWNERDEAD, "{found_by:?}");
        assert_eq!(t.step(Consistent), 0);
        assert_eq!(t.ours_fields().owner, gettid());
        assert_eq!(t.step(Unlock), 0);
        assert_eq!(t.step(Lock), 0);
        assert_eq!(t.step(Unlock), 0);
        assert_eq!(t.ours_fields().owner, 0);
        assert_eq!(t.step(Destroy), 0);
    }
}

/// A robust mutex nobody made consistent before its unlock cannot be locked again: glibc's
/// `pthread_mutex_lock`, `pthread_mutex_timedlock` and `pthread_mutex_clocklock` say
/// ENOTRECOVERABLE and leave it free. glibc's `pthread_mutex_trylock` says ENOTRECOVERABLE
/// too, but leaves the lock word set to the caller's thread id (glibc 2.36 unlocks only
/// `if (oldval == id)`, and `oldval` is the 0 it replaced); our lock calls try first, and
/// must release the word again (`release_unrecoverable`), or any later lock of the mutex
/// would wait forever where glibc's fails. Every robust type, private and shared, and
/// priority-inheritance ones (whose trylock releases the word itself).
#[test]
fn a_lock_of_an_unrecoverable_mutex_leaves_it_free() {
    use MutexOp::*;
    let robust = every_kind().into_iter().filter(|a| a.robust);
    for attr in robust {
        for op in [Lock, PAST_TIMED, PAST_CLOCKED] {
            let t = MutexTwin::new(Some(attr));
            assert_eq!(t.steps_elsewhere(&[Lock]), [0]);
            assert_eq!(t.step(Lock), libc::EOWNERDEAD);
            assert_eq!(t.step(Unlock), 0);
            // Asserts equal states: the word is free.
            assert_eq!(t.step(op), libc::ENOTRECOVERABLE, "{attr:?} {op:?}");
            assert_eq!(t.ours_fields().lock, 0, "{attr:?} {op:?}");
            // Again, and from another thread, whose lock would hang on a word left set.
            assert_eq!(t.step(op), libc::ENOTRECOVERABLE, "{attr:?} {op:?}");
            assert_eq!(
                t.steps_elsewhere(&[op, Lock]),
                [libc::ENOTRECOVERABLE; 2],
                "{attr:?} {op:?}"
            );
            // The trylock keeps glibc's own answer and state (the word left set).
            assert_eq!(t.step(TryLock), libc::ENOTRECOVERABLE, "{attr:?}");
            assert_eq!(t.step(Destroy), 0);
        }
    }
}

/// How a mutex of a twin is held when the calling thread makes a timed lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    Free,
    ByCaller,
    Elsewhere,
    Destroyed,
}

/// Runs `f` while another thread holds both mutexes of `t` (taken and, once `f` is done or
/// has failed, released by that thread's own steps).
fn while_held_elsewhere<R>(t: &MutexTwin, f: impl FnOnce() -> R) -> R {
    let (taken, wait_taken) = std::sync::mpsc::channel();
    let (done, wait_done) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        s.spawn(move || {
            assert_eq!(t.step(MutexOp::Lock), 0);
            taken.send(()).expect("the test waits");
            // Ok when `f` is done, Err when it failed: either way, release.
            let _ = wait_done.recv();
            assert_eq!(t.step(MutexOp::Unlock), 0);
        });
        wait_taken.recv().expect("the holder took both mutexes");
        let r = f();
        drop(done);
        r
    })
}

/// Every deadline and clock through our timed and clock locks and glibc's, on every kind of
/// mutex, free, held by the caller, held by another thread and destroyed: the same answers
/// and states. glibc checks the clock of `pthread_mutex_clocklock` first (EINVAL whatever
/// the mutex), and a deadline's nanoseconds only when it would wait, after the checks of
/// the caller's own hold (EDEADLK, or a recursive count).
#[test]
fn timed_locks_of_every_kind_check_clock_and_deadline_as_glibc_does() {
    use MutexOp::*;
    let mut ops = Vec::new();
    for (sec, ns) in DEADLINES {
        ops.push(TimedLock(sec, ns));
        ops.extend(CLOCKS.map(|clock| ClockLock(clock, sec, ns)));
    }
    let attrs = every_kind().into_iter().map(Some);
    for attr in std::iter::once(None).chain(attrs) {
        for held in [Held::Free, Held::ByCaller, Held::Elsewhere, Held::Destroyed] {
            let t = MutexTwin::new(attr);
            let answers = |t: &MutexTwin| {
                for &op in &ops {
                    let rc = t.step(op);
                    let what = format!("{op:?} on {attr:?}, {held:?}");
                    if let ClockLock(clock, ..) = op {
                        if !supported_clock(clock) {
                            assert_eq!(rc, EINVAL, "{what}");
                        }
                    }
                    match held {
                        Held::Elsewhere => assert_ne!(rc, 0, "{what}"),
                        Held::Destroyed => assert_eq!(rc, EINVAL, "{what}"),
                        // Free, or a recursive mutex counting one more hold.
                        _ if rc == 0 => assert_eq!(t.step(Unlock), 0, "{what}"),
                        _ => {}
                    }
                }
            };
            match held {
                Held::Free => answers(&t),
                Held::ByCaller => {
                    assert_eq!(t.step(Lock), 0);
                    answers(&t);
                    assert_eq!(t.step(Unlock), 0);
                }
                Held::Elsewhere => while_held_elsewhere(&t, || answers(&t)),
                Held::Destroyed => {
                    assert_eq!(t.step(Destroy), 0);
                    answers(&t);
                    for op in [Lock, TryLock, Unlock] {
                        assert_eq!(t.step(op), EINVAL, "{op:?} on {attr:?}, destroyed");
                    }
                }
            }
            let f = t.ours_fields();
            assert_eq!((f.lock, f.owner, f.nusers), (0, 0, 0), "{attr:?}, {held:?}");
            t.step(Destroy);
        }
    }
}

/// Unlocks that POSIX calls errors, on every kind of mutex: of a mutex another thread holds
/// (EPERM where glibc checks the owner; a normal one it just releases), and of a free one.
/// Each side then unlocks it again, and destroys it; every answer and state as glibc's.
#[test]
fn misplaced_unlocks_answer_as_glibc_does() {
    use MutexOp::*;
    let attrs = every_kind().into_iter().map(Some);
    for attr in std::iter::once(None).chain(attrs) {
        let t = MutexTwin::new(attr);
        assert_eq!(t.step(Lock), 0, "{attr:?}");
        let checks_owner = attr.is_some_and(|a| {
            a.robust
                || a.protocol == libc::PTHREAD_PRIO_INHERIT
                || a.kind == libc::PTHREAD_MUTEX_ERRORCHECK
                || a.kind == libc::PTHREAD_MUTEX_RECURSIVE
        });
        let [elsewhere] = t.steps_elsewhere(&[Unlock])[..] else {
            unreachable!("one step");
        };
        if checks_owner {
            assert_eq!(elsewhere, EPERM, "{attr:?}");
        }
        for op in [Unlock, Unlock, TryLock, Unlock, Destroy] {
            t.step(op);
        }
    }
}

/// A robust mutex cannot protect priorities (`PTHREAD_PRIO_PROTECT`): our
/// `pthread_mutex_init` refuses it as glibc's does, and makes a priority-protecting one
/// that is not robust as glibc's does. (Not locked here: its lock may change the calling
/// thread's scheduling policy.)
#[test]
fn mutex_init_refuses_what_glibcs_refuses() {
    for robust in [false, true] {
        let attr = MutexAttr {
            robust,
            protocol: libc::PTHREAD_PRIO_PROTECT,
            ..MutexAttr::of_kind(libc::PTHREAD_MUTEX_NORMAL)
        };
        let t = Twin::<pthread_mutex_t>::zeroed();
        let rcs = attr.with(|a| {
            // SAFETY: both mutexes are writable and unused; `a` is initialised.
            unsafe {
                (
                    (our_mutex().init)(t.ours.ptr(), a),
                    (glibc_mutex().init)(t.glibc.ptr(), a),
                )
            }
        });
        let expected = if robust { libc::ENOTSUP } else { 0 };
        assert_eq!(rcs, (expected, expected), "{attr:?}");
        t.assert_same_image(&attr);
    }
}

/// Threads increment a counter under one mutex of each kind through our functions (a
/// recursive one taken twice each time): no two hold it at once and no increment is lost.
#[test]
fn every_kind_of_mutex_excludes_under_contention() {
    const THREADS: usize = 3;
    const ROUNDS: usize = 2_000;
    for attr in MutexAttr::other_than_default() {
        let t = MutexTwin::new(Some(attr));
        let mutex = &t.twin.ours;
        let counter = Raw::<u64>::zeroed();
        let inside = AtomicBool::new(false);
        let nested = attr.kind == libc::PTHREAD_MUTEX_RECURSIVE;
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                let (counter, inside) = (&counter, &inside);
                s.spawn(move || {
                    let ours = our_mutex();
                    let m = mutex.ptr();
                    for i in 0..ROUNDS {
                        // SAFETY: `m` is an initialised mutex for the whole scope; each
                        // acquisition is released by this thread before the next round.
                        unsafe {
                            if i % 4 == 0 {
                                while (ours.trylock)(m) != 0 {
                                    std::hint::spin_loop();
                                }
                            } else {
                                assert_eq!((ours.lock)(m), 0, "{attr:?}");
                            }
                            if nested {
                                assert_eq!((ours.lock)(m), 0);
                            }
                        }
                        assert!(
                            !inside.swap(true, Ordering::Acquire),
                            "{attr:?}: two holders"
                        );
                        // SAFETY: the mutex serialises every access to the counter.
                        unsafe { *counter.ptr() += 1 };
                        inside.store(false, Ordering::Release);
                        // SAFETY: this thread holds `m` (twice if nested).
                        unsafe {
                            if nested {
                                assert_eq!((ours.unlock)(m), 0);
                            }
                            assert_eq!((ours.unlock)(m), 0, "{attr:?}");
                        }
                    }
                });
            }
        });
        // SAFETY: every thread has finished.
        let total = unsafe { *counter.ptr() };
        assert_eq!(total, (THREADS * ROUNDS) as u64, "{attr:?}");
        let f = mutex_fields(mutex);
        assert_eq!((f.lock, f.owner, f.nusers), (0, 0, 0), "{attr:?}");
        if nested {
            assert_eq!(f.count, 0);
        }
    }
}

type SpinFn = unsafe extern "C" fn(*mut pthread_spinlock_t) -> c_int;

/// One side's spin-lock functions.
#[derive(Clone, Copy)]
struct SpinApi {
    init: unsafe extern "C" fn(*mut pthread_spinlock_t, c_int) -> c_int,
    lock: SpinFn,
    trylock: SpinFn,
    unlock: SpinFn,
    destroy: SpinFn,
}

fn our_spin() -> SpinApi {
    SpinApi {
        init: super::pthread_spin_init,
        lock: super::pthread_spin_lock,
        trylock: super::pthread_spin_trylock,
        unlock: super::pthread_spin_unlock,
        destroy: super::pthread_spin_destroy,
    }
}

fn glibc_spin() -> SpinApi {
    let f = |name| {
        let p = glibc_symbol(name);
        // SAFETY: `p` is glibc's pthread_spin_lock, _trylock, _unlock or _destroy, all
        // `int (pthread_spinlock_t *)`.
        unsafe { std::mem::transmute::<usize, SpinFn>(p) }
    };
    let init = glibc_symbol(c"pthread_spin_init");
    SpinApi {
        // SAFETY: `init` is glibc's `int pthread_spin_init(pthread_spinlock_t *, int)`.
        init: unsafe {
            std::mem::transmute::<
                usize,
                unsafe extern "C" fn(*mut pthread_spinlock_t, c_int) -> c_int,
            >(init)
        },
        lock: f(c"pthread_spin_lock"),
        trylock: f(c"pthread_spin_trylock"),
        unlock: f(c"pthread_spin_unlock"),
        destroy: f(c"pthread_spin_destroy"),
    }
}

#[derive(Clone, Copy, Debug)]
enum SpinOp {
    Init(c_int),
    Lock,
    TryLock,
    Unlock,
    Destroy,
}

impl SpinApi {
    /// # Safety
    /// `l` must point at a valid spin lock; a `Lock` must be able to succeed.
    unsafe fn apply(&self, l: *mut pthread_spinlock_t, op: SpinOp) -> c_int {
        // SAFETY: per this function's contract.
        unsafe {
            match op {
                SpinOp::Init(shared) => (self.init)(l, shared),
                SpinOp::Lock => (self.lock)(l),
                SpinOp::TryLock => (self.trylock)(l),
                SpinOp::Unlock => (self.unlock)(l),
                SpinOp::Destroy => (self.destroy)(l),
            }
        }
    }
}

/// Performs `op` on both spin locks of `t` (ours first); asserts equal return codes and
/// lock words after, and returns (code, word).
fn spin_step(t: &Twin<pthread_spinlock_t>, op: SpinOp) -> (c_int, i32) {
    // SAFETY: both locks live as long as `t`; tests step a `Lock` only on a free lock.
    let (ours, glibc) = unsafe {
        (
            our_spin().apply(t.ours.ptr(), op),
            glibc_spin().apply(t.glibc.ptr(), op),
        )
    };
    assert_eq!(ours, glibc, "return code of {op:?}: ours vs glibc's");
    t.assert_same_image(&op);
    (ours, t.ours.word(0))
}

#[test]
fn spin_locks_answer_and_store_as_glibc_does() {
    use SpinOp::*;
    assert_unprofiled();
    let t = Twin::<pthread_spinlock_t>::zeroed();
    // glibc's x86-64 spin locks count down to lock: 1 is free, 0 is held, so a zero-filled,
    // never initialised lock is held.
    assert_eq!(spin_step(&t, TryLock), (EBUSY, 0));
    assert_eq!(spin_step(&t, Init(libc::PTHREAD_PROCESS_PRIVATE)), (0, 1));
    assert_eq!(spin_step(&t, Lock), (0, 0));
    assert_eq!(spin_step(&t, TryLock), (EBUSY, 0));
    let elsewhere = std::thread::scope(|s| s.spawn(|| spin_step(&t, TryLock)).join().unwrap());
    assert_eq!(elsewhere, (EBUSY, 0));
    assert_eq!(spin_step(&t, Unlock), (0, 1));
    assert_eq!(spin_step(&t, Unlock), (0, 1), "unlocking a free lock");
    assert_eq!(spin_step(&t, TryLock), (0, 0));
    // Any thread may unlock it (glibc just stores 1).
    let elsewhere = std::thread::scope(|s| s.spawn(|| spin_step(&t, Unlock)).join().unwrap());
    assert_eq!(elsewhere, (0, 1));
    assert_eq!(spin_step(&t, Lock), (0, 0));
    assert_eq!(
        spin_step(&t, Destroy),
        (0, 0),
        "destroy leaves the word as it is"
    );
    assert_eq!(spin_step(&t, Init(libc::PTHREAD_PROCESS_SHARED)), (0, 1));
    assert_eq!(spin_step(&t, Destroy), (0, 1));
    // glibc does not look at the sharing it is given, nor at the lock's state: any value
    // initialises it, held or not.
    for shared in [2, -1, c_int::MAX] {
        assert_eq!(spin_step(&t, Lock), (0, 0));
        assert_eq!(spin_step(&t, Init(shared)), (0, 1), "sharing {shared}");
        assert_eq!(spin_step(&t, Destroy), (0, 1));
    }
}

/// Threads increment a counter under one spin lock taken by our lock and trylock.
#[test]
fn spin_locks_exclude_under_contention() {
    const THREADS: usize = 3;
    const ROUNDS: usize = 5_000;
    let lock = Raw::<pthread_spinlock_t>::zeroed();
    let counter = Raw::<u64>::zeroed();
    let inside = AtomicBool::new(false);
    let ours = our_spin();
    // SAFETY: a valid lock word nobody else uses yet.
    let rc = unsafe { (ours.init)(lock.ptr(), libc::PTHREAD_PROCESS_PRIVATE) };
    assert_eq!(rc, 0);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            let (lock, counter, inside) = (&lock, &counter, &inside);
            s.spawn(move || {
                for i in 0..ROUNDS {
                    // SAFETY: an initialised spin lock for the whole scope, released by this
                    // thread before its next round.
                    unsafe {
                        if i % 3 == 0 {
                            while (ours.trylock)(lock.ptr()) != 0 {
                                std::hint::spin_loop();
                            }
                        } else {
                            assert_eq!((ours.lock)(lock.ptr()), 0);
                        }
                    }
                    assert!(!inside.swap(true, Ordering::Acquire), "two holders");
                    // SAFETY: the lock serialises every access to the counter.
                    unsafe { *counter.ptr() += 1 };
                    inside.store(false, Ordering::Release);
                    // SAFETY: this thread holds the lock.
                    assert_eq!(unsafe { (ours.unlock)(lock.ptr()) }, 0);
                }
            });
        }
    });
    // SAFETY: every thread has finished.
    assert_eq!(unsafe { *counter.ptr() }, (THREADS * ROUNDS) as u64);
    assert_eq!(
        lock.word(0),
        1,
        "unprofiled, the lock stays in glibc's form"
    );
    // SAFETY: nobody uses the lock any more.
    assert_eq!(unsafe { (ours.destroy)(lock.ptr()) }, 0);
}

/// A mutex initialised by our `pthread_mutex_init` and one by glibc's are alike, and a
/// zero-filled one (`PTHREAD_MUTEX_INITIALIZER`) is what both make of default attributes.
#[test]
fn our_init_makes_the_mutex_glibc_makes() {
    let t = MutexTwin::new(None);
    assert_eq!(
        t.twin.ours.image(),
        vec![0; std::mem::size_of::<pthread_mutex_t>()]
    );
    for attr in every_kind() {
        let t = MutexTwin::new(Some(attr)); // asserts equal images
        let kind = t.ours_fields().kind;
        assert_eq!(kind & 3, attr.kind, "{attr:?}");
        assert_eq!(kind & 16 != 0, attr.robust, "{attr:?}: glibc's robust bit");
        // glibc marks robust mutexes shared too: the kernel's wake of a dead owner's
        // waiters is never a private one.
        assert_eq!(
            kind & 128 != 0,
            attr.pshared || attr.robust,
            "{attr:?}: glibc's shared bit"
        );
        assert_eq!(t.step(MutexOp::Destroy), 0);
    }
}
