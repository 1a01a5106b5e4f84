//! Unit tests of [`plain_mutex`](super), glibc's fast path for default-type mutexes that the
//! runtime takes itself: it must leave every mutex exactly as glibc would (lock word,
//! `__owner`, `__nusers`, every other byte) and decline everything else.
//!
//! Each test runs the same calls on a twin pair of mutexes: one through our side (the
//! fast path directly, or our interposed `pthread_mutex_*`, the crate's own functions), the
//! other through glibc's real functions (`crate::real`), on the same threads in the same
//! order, and compares return codes and raw bytes after every call. The test process is
//! not profiled (no `BLAMEPROF_OUTPUT`): sampling is off, so the interposers take their
//! pass-through paths, but the fast path is on, as in a profiled process (`on_load` runs
//! from the test executable's `.init_array` too); [`the_fast_path_is_on_in_the_test_process`]
//! makes sure of that, since otherwise these tests would compare glibc with itself.

#![cfg(test)]

use super::{
    enabled, lock, published_tid_offset, thread_id_at, try_lock, unlock, LOCK_WAIT, TID_OFFSET,
};
use crate::real;
use crate::tests::support::{
    assert_unprofiled, gettid, glibc_mutex, mutex_fields, our_mutex, MutexAttr, MutexFields,
    MutexOp, MutexTwin, Raw, BAD_NSEC, MUTEX_LOCK_AT, PAST, UNSUPPORTED_CLOCK,
};
use libc::{pthread_mutex_t, EBUSY, EINVAL, ETIMEDOUT};
use std::sync::atomic::{AtomicBool, Ordering};

/// The state of an unlocked default mutex: glibc's `PTHREAD_MUTEX_INITIALIZER`, all zeros.
const UNLOCKED: MutexFields = MutexFields {
    lock: 0,
    count: 0,
    owner: 0,
    nusers: 0,
    kind: 0,
    spins: 0,
    elision: 0,
};

/// The state of a default mutex the thread `tid` holds, uncontended.
fn held_by(tid: i32) -> MutexFields {
    MutexFields {
        lock: 1,
        owner: tid,
        nusers: 1,
        ..UNLOCKED
    }
}

#[test]
fn the_fast_path_is_on_in_the_test_process() {
    assert_unprofiled();
    assert!(
        enabled(),
        "plain_mutex is off in the test process: its tests would compare glibc with itself"
    );
    let offset = published_tid_offset().expect("glibc publishes _thread_db_pthread_tid");
    assert_eq!(offset, TID_OFFSET.load(Ordering::Relaxed));
    assert_eq!(thread_id_at(offset), gettid());
    // Every thread finds its own id there, not the main thread's.
    let (theirs, read) = std::thread::spawn(move || (gettid(), thread_id_at(offset)))
        .join()
        .unwrap();
    assert_eq!(read, theirs);
    assert_ne!(theirs, gettid());
}

#[test]
fn the_fast_path_writes_what_glibc_writes() {
    let t = MutexTwin::new(None);
    let (ours, glibc) = (t.twin.ours.ptr(), t.twin.glibc.ptr());
    let real_try = real::pthread_mutex_trylock();
    let real_unlock = real::pthread_mutex_unlock();

    // SAFETY: both mutexes are valid, initialised default mutexes, used by this thread only.
    let (a, b) = unsafe { (try_lock(ours), real_try(glibc)) };
    assert_eq!((a, b), (Some(0), 0));
    t.assert_same_state(&"the first trylock");
    assert_eq!(t.ours_fields(), held_by(gettid()));

    // SAFETY: as above.
    let (a, b) = unsafe { (try_lock(ours), real_try(glibc)) };
    assert_eq!((a, b), (Some(EBUSY), EBUSY), "a trylock of a held mutex");
    t.assert_same_state(&"a trylock of a held mutex");

    // SAFETY: as above; this thread holds both.
    let (a, b) = unsafe { (unlock(ours), real_unlock(glibc)) };
    assert_eq!((a, b), (true, 0));
    t.assert_same_state(&"the unlock");
    assert_eq!(t.ours_fields(), UNLOCKED);

    // Held by another thread: EBUSY here, and that thread's id in the owner field.
    let theirs = std::thread::scope(|s| {
        s.spawn(|| {
            let (ours, glibc) = (t.twin.ours.ptr(), t.twin.glibc.ptr());
            // SAFETY: as above; the mutexes outlive the scope.
            let (a, b) = unsafe { (try_lock(ours), real_try(glibc)) };
            assert_eq!((a, b), (Some(0), 0));
            gettid()
        })
        .join()
        .unwrap()
    });
    t.assert_same_state(&"a trylock on another thread");
    assert_eq!(t.ours_fields(), held_by(theirs));
    // SAFETY: as above.
    let (a, b) = unsafe { (try_lock(ours), real_try(glibc)) };
    assert_eq!((a, b), (Some(EBUSY), EBUSY));
    // glibc lets any thread unlock a default mutex; so does the fast path.
    // SAFETY: as above (a default mutex may be unlocked by any thread under glibc).
    let (a, b) = unsafe { (unlock(ours), real_unlock(glibc)) };
    assert_eq!((a, b), (true, 0));
    t.assert_same_state(&"an unlock by another thread than the holder");
    assert_eq!(t.ours_fields(), UNLOCKED);
}

#[test]
fn the_fast_path_declines_every_other_mutex() {
    for attr in MutexAttr::other_than_default() {
        let t = MutexTwin::new(Some(attr));
        let m = t.twin.ours.ptr();
        assert_ne!(t.ours_fields().kind, 0, "{attr:?}");
        let before = t.twin.ours.image();
        // SAFETY: an initialised mutex used by this thread only.
        assert_eq!(unsafe { try_lock(m) }, None, "{attr:?}");
        assert_eq!(t.twin.ours.image(), before, "{attr:?}: touched");
        // Held (by glibc's lock): the unlock is glibc's too.
        // SAFETY: as above.
        assert_eq!(unsafe { (glibc_mutex().lock)(m) }, 0, "{attr:?}");
        let held = t.twin.ours.image();
        // SAFETY: as above; this thread holds it.
        assert!(!unsafe { unlock(m) }, "{attr:?}");
        assert_eq!(t.twin.ours.image(), held, "{attr:?}: touched");
        // SAFETY: as above.
        assert_eq!(unsafe { (glibc_mutex().unlock)(m) }, 0, "{attr:?}");
    }
}

#[test]
fn an_unlock_with_a_waiter_marked_leaves_what_glibc_leaves() {
    // A waiter sets the lock word to 2 before it sleeps: the unlock releases the mutex as
    // glibc's does (one exchange) and wakes a sleeper.
    let t = MutexTwin::new(None);
    assert_eq!(t.step(MutexOp::Lock), 0);
    t.twin.ours.set_word(MUTEX_LOCK_AT, 2);
    t.twin.glibc.set_word(MUTEX_LOCK_AT, 2);
    let real_unlock = real::pthread_mutex_unlock();
    // SAFETY: initialised mutexes this thread holds.
    let (a, b) = unsafe { (unlock(t.twin.ours.ptr()), real_unlock(t.twin.glibc.ptr())) };
    assert!(a, "a plain mutex with a waiter is the fast path's");
    assert_eq!(b, 0);
    t.assert_same_state(&"an unlock with a waiter marked");
    assert_eq!(t.ours_fields(), UNLOCKED);
}

/// A thread that starts and then waits for `mutex` (its `wait`); returns with its id once
/// the mutex is marked contended (2) and the thread is asleep (state S: in the futex wait,
/// the only sleep on its way).
fn waiter_asleep_on<R: Send + 'static>(
    mutex: &Raw<pthread_mutex_t>,
    wait: impl FnOnce() -> R + Send + 'static,
) -> (i32, std::thread::JoinHandle<R>) {
    let waiter_tid = std::sync::Arc::new(std::sync::atomic::AtomicI32::new(0));
    let tid = waiter_tid.clone();
    let waiter = std::thread::spawn(move || {
        tid.store(gettid(), Ordering::Release);
        wait()
    });
    let tid = loop {
        match waiter_tid.load(Ordering::Acquire) {
            0 => std::thread::yield_now(),
            tid => break tid,
        }
    };
    let stat = format!("/proc/self/task/{tid}/stat");
    let asleep = || {
        let s = std::fs::read_to_string(&stat).unwrap_or_default();
        s.rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().next())
            == Some("S")
    };
    while mutex_fields(mutex).lock != 2 || !asleep() {
        std::thread::yield_now();
    }
    (tid, waiter)
}

#[test]
fn an_unlock_wakes_a_waiter_asleep_in_glibc() {
    // The waiter blocks in glibc's own timedlock (a futex wait on the lock word, which it
    // sets to 2). Only a wake lets it take the mutex before its deadline: after the
    // exchange to 0 it sleeps on until woken or timed out.
    let mutex = Raw::<pthread_mutex_t>::zeroed();
    let m = mutex.ptr() as usize;
    let glibc = glibc_mutex();
    // SAFETY: a valid default mutex, free.
    assert_eq!(unsafe { (glibc.lock)(m as *mut pthread_mutex_t) }, 0);
    let (_, waiter) = waiter_asleep_on(&mutex, move || {
        let soon = crate::tests::support::deadline(libc::CLOCK_REALTIME, 20);
        // SAFETY: the mutex outlives this thread (joined below); released at once.
        unsafe {
            let rc = (glibc_mutex().timedlock)(m as *mut pthread_mutex_t, &soon);
            if rc == 0 {
                (glibc_mutex().unlock)(m as *mut pthread_mutex_t);
            }
            rc
        }
    });
    // SAFETY: this thread holds the mutex.
    assert!(unsafe { unlock(m as *mut pthread_mutex_t) });
    assert_eq!(waiter.join().unwrap(), 0, "the waiter was never woken");
    assert_eq!(mutex_fields(&mutex), UNLOCKED);
}

#[test]
fn a_lock_that_finds_the_mutex_held_waits_as_glibcs_does() {
    // The same contended lock on twin mutexes, the waiter in our lock and in glibc's: each
    // sleeps marked (2), is woken by the other side's unlock, and holds its mutex with the
    // same fields; the state after the waiter's own unlock is the same too.
    assert!(
        !LOCK_WAIT.load(Ordering::Relaxed).is_null(),
        "glibc's __lll_lock_wait_private was not found: our lock would be glibc's call"
    );
    let twin = MutexTwin::new(None);
    for (side, waiter_side, releaser) in [
        (&twin.twin.ours, our_mutex(), glibc_mutex()),
        (&twin.twin.glibc, glibc_mutex(), our_mutex()),
    ] {
        let m = side.ptr() as usize;
        // SAFETY: a valid default mutex, free.
        assert_eq!(unsafe { (waiter_side.lock)(m as *mut pthread_mutex_t) }, 0);
        // Our lock of it takes the plain path: its attempt finds it held.
        // SAFETY: a valid default mutex.
        assert_eq!(unsafe { lock(m as *mut pthread_mutex_t) }, Some(EBUSY));
        let (holds, release) = (
            std::sync::Arc::new(std::sync::Barrier::new(2)),
            std::sync::Arc::new(std::sync::Barrier::new(2)),
        );
        let (in_hold, may_release) = (holds.clone(), release.clone());
        let (tid, waiter) = waiter_asleep_on(side, move || {
            // SAFETY: the mutex outlives this thread (joined below).
            let rc = unsafe { (waiter_side.lock)(m as *mut pthread_mutex_t) };
            in_hold.wait();
            may_release.wait();
            // SAFETY: this thread holds the mutex.
            (rc, unsafe {
                (waiter_side.unlock)(m as *mut pthread_mutex_t)
            })
        });
        // SAFETY: this thread holds the mutex.
        assert_eq!(unsafe { (releaser.unlock)(m as *mut pthread_mutex_t) }, 0);
        holds.wait();
        assert_eq!(
            mutex_fields(side),
            MutexFields {
                lock: 2,
                owner: tid,
                nusers: 1,
                ..UNLOCKED
            },
            "the woken waiter holds the mutex, still marked contended"
        );
        release.wait();
        assert_eq!(waiter.join().unwrap(), (0, 0));
        assert_eq!(mutex_fields(side), UNLOCKED);
    }
    twin.assert_same_state(&"the waiters' unlocks");
}

#[test]
fn our_entry_points_match_glibc_on_a_default_mutex() {
    use MutexOp::*;
    let t = MutexTwin::new(None);
    let me = gettid();
    assert_eq!(t.step(Lock), 0);
    assert_eq!(t.ours_fields(), held_by(me));
    assert_eq!(t.step(TryLock), EBUSY, "a default mutex is not recursive");
    assert_eq!(t.steps_elsewhere(&[TryLock]), [EBUSY]);
    assert_eq!(
        t.step(Destroy),
        EBUSY,
        "glibc refuses to destroy a held mutex"
    );
    assert_eq!(t.ours_fields(), held_by(me), "a refused destroy changed it");
    // Another thread's deadline passes while it waits (a past one: no waiting at all), and
    // one with nanoseconds out of range is an error only when it would wait.
    let (s, ns) = (PAST.tv_sec, PAST.tv_nsec);
    let (bs, bns) = (BAD_NSEC.tv_sec, BAD_NSEC.tv_nsec);
    assert_eq!(
        t.steps_elsewhere(&[
            TimedLock(s, ns),
            ClockLock(libc::CLOCK_MONOTONIC, s, ns),
            TimedLock(bs, bns),
            ClockLock(UNSUPPORTED_CLOCK, s, ns),
        ]),
        [ETIMEDOUT, ETIMEDOUT, EINVAL, EINVAL]
    );
    assert_eq!(t.step(Unlock), 0);
    assert_eq!(t.ours_fields(), UNLOCKED);
    // A free mutex is taken whatever the deadline: glibc checks it only before waiting.
    assert_eq!(t.step(TimedLock(bs, bns)), 0);
    assert_eq!(t.step(Unlock), 0);
    assert_eq!(t.step(ClockLock(libc::CLOCK_MONOTONIC, s, ns)), 0);
    assert_eq!(t.ours_fields(), held_by(me));
    // Unlocked by another thread than its holder: glibc allows that for this type.
    assert_eq!(t.steps_elsewhere(&[Unlock, Lock]), [0, 0]);
    assert_ne!(t.ours_fields().owner, me);
    assert_eq!(t.ours_fields().nusers, 1);
    assert_eq!(t.step(Unlock), 0);
    assert_eq!(t.ours_fields(), UNLOCKED);
    // A stray unlock (undefined for POSIX): glibc still decrements __nusers, which wraps,
    // and its destroy then reports the mutex busy.
    assert_eq!(t.step(Unlock), 0);
    assert_eq!(t.ours_fields().nusers, u32::MAX);
    assert_eq!(t.step(Destroy), EBUSY);
    // The next hold counts from there (and the fast path takes it: the word is 0).
    assert_eq!(t.step(Lock), 0);
    assert_eq!(
        t.ours_fields(),
        MutexFields {
            nusers: 0,
            ..held_by(me)
        }
    );
    assert_eq!(t.step(Unlock), 0);
    assert_eq!(t.ours_fields().nusers, u32::MAX);
    // A destroyed mutex: glibc marks it (kind -1) so that every later call fails.
    let t = MutexTwin::new(None);
    assert_eq!(t.step(Destroy), 0);
    assert_eq!(t.ours_fields().kind, -1);
    assert_eq!(t.step(Lock), EINVAL);
    assert_eq!(t.step(TryLock), EINVAL);
    assert_eq!(t.step(Unlock), EINVAL);
}

/// glibc rejects a clock it cannot wait on before it looks at the mutex: even a free mutex
/// is not taken (EINVAL), and ours, which otherwise tries the mutex first, must not take it.
#[test]
fn clocklock_with_an_unsupported_clock_fails_even_on_a_free_mutex() {
    let t = MutexTwin::new(None);
    assert_eq!(
        t.step(MutexOp::ClockLock(
            UNSUPPORTED_CLOCK,
            PAST.tv_sec,
            PAST.tv_nsec
        )),
        EINVAL
    );
}

/// The state of a mutex as glibc leaves it after a holder's `pthread_cond_wait`: glibc
/// retakes the mutex as if contended (lock word 2), and without counting a new user.
#[test]
fn a_mutex_retaken_by_a_condition_wait_is_released_as_glibc_does() {
    let t = MutexTwin::new(None);
    let cond = crate::tests::support::Twin::<libc::pthread_cond_t>::zeroed();
    assert_eq!(t.step(MutexOp::Lock), 0);
    // SAFETY: initialised (zeroed: PTHREAD_COND_INITIALIZER) condition variables and
    // mutexes this thread holds; the past deadline makes the waits return at once.
    let (a, b) = unsafe {
        (
            crate::condvar::pthread_cond_timedwait(cond.ours.ptr(), t.twin.ours.ptr(), &PAST),
            real::pthread_cond_timedwait()(cond.glibc.ptr(), t.twin.glibc.ptr(), &PAST),
        )
    };
    assert_eq!((a, b), (ETIMEDOUT, ETIMEDOUT));
    t.assert_same_state(&"pthread_cond_timedwait");
    assert_eq!(
        t.ours_fields(),
        MutexFields {
            lock: 2,
            ..held_by(gettid())
        }
    );
    assert_eq!(t.step(MutexOp::Unlock), 0);
    assert_eq!(t.ours_fields(), UNLOCKED);
    assert_eq!(t.step(MutexOp::Lock), 0);
    assert_eq!(t.ours_fields(), held_by(gettid()), "the fast path again");
    assert_eq!(t.step(MutexOp::Unlock), 0);
}

/// Several threads increment a counter under one default mutex, each acquisition by our
/// lock, trylock or timedlock, or now and then by glibc's own lock (as glibc's internal
/// callers do, which the interposers never see): no two ever hold it at once, no increment
/// is lost, and the mutex ends as it began.
#[test]
fn mutual_exclusion_holds_under_contention() {
    const THREADS: usize = 4;
    const ROUNDS: usize = 10_000;
    let mutex = Raw::<pthread_mutex_t>::zeroed();
    let counter = Raw::<u64>::zeroed();
    let inside = AtomicBool::new(false);
    let far = crate::tests::support::deadline(libc::CLOCK_REALTIME, 3600);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (mutex, counter, inside) = (&mutex, &counter, &inside);
            s.spawn(move || {
                let (ours, glibc) = (our_mutex(), glibc_mutex());
                let m = mutex.ptr();
                for i in 0..ROUNDS {
                    // SAFETY: `m` is a valid default mutex for the whole scope; every
                    // acquisition below is released by this thread before the next.
                    unsafe {
                        match (i + t) % 5 {
                            0 => {
                                while (ours.trylock)(m) != 0 {
                                    std::hint::spin_loop()
                                }
                            }
                            1 => assert_eq!((ours.timedlock)(m, &far), 0),
                            2 if i % 7 == 0 => assert_eq!((glibc.lock)(m), 0),
                            _ => assert_eq!((ours.lock)(m), 0),
                        }
                    }
                    assert!(!inside.swap(true, Ordering::Acquire), "two holders");
                    assert_eq!(mutex_fields(mutex).owner, gettid());
                    // SAFETY: the mutex serialises every access to the counter.
                    unsafe { *counter.ptr() += 1 };
                    inside.store(false, Ordering::Release);
                    // SAFETY: this thread holds `m`.
                    let rc = unsafe {
                        if i % 11 == 0 {
                            (glibc.unlock)(m)
                        } else {
                            (ours.unlock)(m)
                        }
                    };
                    assert_eq!(rc, 0);
                }
            });
        }
    });
    // SAFETY: every thread has finished.
    assert_eq!(unsafe { *counter.ptr() }, (THREADS * ROUNDS) as u64);
    assert_eq!(mutex_fields(&mutex), UNLOCKED);
    assert_eq!(
        mutex.image(),
        vec![0; std::mem::size_of::<pthread_mutex_t>()]
    );
}

/// What the fork child checks: 0 when all is well, else the number of the failed check.
/// Runs in a child of a multithreaded process: no allocation, no panics.
fn in_fork_child(m: *mut pthread_mutex_t, parent: i32) -> i32 {
    let me = gettid();
    if me == parent {
        return 1;
    }
    // SAFETY: `m` is an initialised default mutex that nobody else in the child uses.
    if unsafe { crate::locks::pthread_mutex_lock(m) } != 0 {
        return 2;
    }
    // SAFETY: as above; the field lies within the mutex.
    let owner = unsafe { super::field(m, super::OWNER) }.load(Ordering::Relaxed);
    if owner != me {
        return 3;
    }
    // SAFETY: as above; the child holds it.
    if unsafe { crate::locks::pthread_mutex_unlock(m) } != 0 {
        return 4;
    }
    // SAFETY: as above.
    if unsafe { super::field(m, super::OWNER) }.load(Ordering::Relaxed) != 0 {
        return 5;
    }
    0
}

#[test]
fn a_fork_child_finds_its_own_thread_id_in_the_owner_field() {
    assert!(enabled());
    let mutex = Raw::<pthread_mutex_t>::zeroed();
    let parent = gettid();
    // SAFETY: the child runs only `in_fork_child` (system calls and the fast path on memory
    // mapped before the fork, no locks another thread could hold) and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = in_fork_child(mutex.ptr(), parent);
        // SAFETY: ends the child at once, without running the harness's exit handlers.
        unsafe { real::exit_now()(code) };
    }
    assert!(pid > 0, "fork failed");
    let mut status = 0;
    // SAFETY: waits for our own child; `status` is writable.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "child status {status:#x}");
    assert_eq!(libc::WEXITSTATUS(status), 0, "the child's failed check");
    assert_eq!(
        mutex_fields(&mutex),
        UNLOCKED,
        "the parent's copy is untouched"
    );
}
