//! Unit tests of the interposed reader-writer locks ([`rwlock`](super)) against glibc: the
//! same calls on a twin pair of locks, one through our `pthread_rwlock_*` (the crate's
//! functions), the other through glibc's real ones (`crate::real`), must give the same
//! return codes and leave the same bytes; and [`others_hold`](super::others_hold) must read
//! glibc's layout right.
//!
//! The test process is not profiled (no `BLAMEPROF_OUTPUT`): sampling is off, so the
//! acquisitions go straight to glibc's blocking calls; the tests that compare answers run
//! again on the profiled path ([`as_profiled`]), which tries first.

#![cfg(test)]

use super::others_hold;
use crate::real;
use crate::tests::support::{
    as_profiled, assert_unprofiled, gettid, profiled, supported_clock, valid_nanoseconds, Raw,
    Twin, BAD_NSEC, CLOCKS, DEADLINES, PAST, UNSUPPORTED_CLOCK,
};
use libc::{c_int, clockid_t, pthread_rwlock_t, timespec, EBUSY, EDEADLK, EINVAL, ETIMEDOUT};

type RwFn = unsafe extern "C" fn(*mut pthread_rwlock_t) -> c_int;
type TimedFn = unsafe extern "C" fn(*mut pthread_rwlock_t, *const timespec) -> c_int;
type ClockFn = unsafe extern "C" fn(*mut pthread_rwlock_t, clockid_t, *const timespec) -> c_int;

/// One side's reader-writer lock functions.
#[derive(Clone, Copy)]
struct RwApi {
    init: unsafe extern "C" fn(*mut pthread_rwlock_t, *const libc::pthread_rwlockattr_t) -> c_int,
    rdlock: RwFn,
    wrlock: RwFn,
    tryrdlock: RwFn,
    trywrlock: RwFn,
    timedrdlock: TimedFn,
    timedwrlock: TimedFn,
    clockrdlock: ClockFn,
    clockwrlock: ClockFn,
    unlock: RwFn,
    destroy: RwFn,
}

fn ours() -> RwApi {
    RwApi {
        init: super::pthread_rwlock_init,
        rdlock: super::pthread_rwlock_rdlock,
        wrlock: super::pthread_rwlock_wrlock,
        tryrdlock: super::pthread_rwlock_tryrdlock,
        trywrlock: super::pthread_rwlock_trywrlock,
        timedrdlock: super::pthread_rwlock_timedrdlock,
        timedwrlock: super::pthread_rwlock_timedwrlock,
        clockrdlock: super::pthread_rwlock_clockrdlock,
        clockwrlock: super::pthread_rwlock_clockwrlock,
        unlock: super::pthread_rwlock_unlock,
        destroy: super::pthread_rwlock_destroy,
    }
}

fn glibc() -> RwApi {
    RwApi {
        init: real::pthread_rwlock_init(),
        rdlock: real::pthread_rwlock_rdlock(),
        wrlock: real::pthread_rwlock_wrlock(),
        tryrdlock: real::pthread_rwlock_tryrdlock(),
        trywrlock: real::pthread_rwlock_trywrlock(),
        timedrdlock: real::pthread_rwlock_timedrdlock(),
        timedwrlock: real::pthread_rwlock_timedwrlock(),
        clockrdlock: real::pthread_rwlock_clockrdlock(),
        clockwrlock: real::pthread_rwlock_clockwrlock(),
        unlock: real::pthread_rwlock_unlock(),
        destroy: real::pthread_rwlock_destroy(),
    }
}

/// A call on a reader-writer lock; times are (seconds, nanoseconds).
#[derive(Clone, Copy, Debug)]
enum RwOp {
    RdLock,
    WrLock,
    TryRd,
    TryWr,
    TimedRd(i64, i64),
    TimedWr(i64, i64),
    ClockRd(clockid_t, i64, i64),
    ClockWr(clockid_t, i64, i64),
    /// `pthread_rwlock_clockrdlock` and `_clockwrlock` with a null deadline (none).
    ClockRdForever(clockid_t),
    ClockWrForever(clockid_t),
    Unlock,
    Destroy,
}

impl RwApi {
    /// # Safety
    /// `rw` must point at a valid lock, and blocking calls must be able to finish.
    unsafe fn apply(&self, rw: *mut pthread_rwlock_t, op: RwOp) -> c_int {
        let ts = |s, ns| timespec {
            tv_sec: s,
            tv_nsec: ns,
        };
        // SAFETY: per this function's contract; the timespecs live for the call.
        unsafe {
            match op {
                RwOp::RdLock => (self.rdlock)(rw),
                RwOp::WrLock => (self.wrlock)(rw),
                RwOp::TryRd => (self.tryrdlock)(rw),
                RwOp::TryWr => (self.trywrlock)(rw),
                RwOp::TimedRd(s, ns) => (self.timedrdlock)(rw, &ts(s, ns)),
                RwOp::TimedWr(s, ns) => (self.timedwrlock)(rw, &ts(s, ns)),
                RwOp::ClockRd(c, s, ns) => (self.clockrdlock)(rw, c, &ts(s, ns)),
                RwOp::ClockWr(c, s, ns) => (self.clockwrlock)(rw, c, &ts(s, ns)),
                RwOp::ClockRdForever(c) => (self.clockrdlock)(rw, c, std::ptr::null()),
                RwOp::ClockWrForever(c) => (self.clockwrlock)(rw, c, std::ptr::null()),
                RwOp::Unlock => (self.unlock)(rw),
                RwOp::Destroy => (self.destroy)(rw),
            }
        }
    }
}

/// Performs `op` on both locks (ours first); asserts equal codes and bytes after.
fn step(t: &Twin<pthread_rwlock_t>, op: RwOp) -> c_int {
    // SAFETY: both locks live as long as `t`; tests step only calls that return at once.
    let (a, b) = unsafe {
        (
            ours().apply(t.ours.ptr(), op),
            glibc().apply(t.glibc.ptr(), op),
        )
    };
    assert_eq!(a, b, "return code of {op:?}: ours vs glibc's");
    t.assert_same_image(&op);
    a
}

/// [`step`]s `ops` on a new thread, on the calling thread's path (profiled or not).
fn steps_elsewhere(t: &Twin<pthread_rwlock_t>, ops: &[RwOp]) -> Vec<c_int> {
    let profiled = profiled();
    std::thread::scope(|s| {
        s.spawn(|| as_profiled(profiled, || ops.iter().map(|&op| step(t, op)).collect()))
            .join()
            .unwrap()
    })
}

/// glibc's x86-64 `__cur_writer` (the writing holder's thread id), at byte 24.
const CUR_WRITER_AT: usize = 24;

/// A twin pair of locks, each initialised by its side's `pthread_rwlock_init` (default
/// attributes).
fn initialised() -> Twin<pthread_rwlock_t> {
    let t = Twin::<pthread_rwlock_t>::zeroed();
    // SAFETY: both locks are writable and unused; null asks for default attributes.
    let (a, b) = unsafe {
        (
            (ours().init)(t.ours.ptr(), std::ptr::null()),
            (glibc().init)(t.glibc.ptr(), std::ptr::null()),
        )
    };
    assert_eq!((a, b), (0, 0));
    t.assert_same_image(&"init");
    t
}

/// Our reader-writer locks answer as glibc's, unprofiled and on the profiled path (a try
/// first).
#[test]
fn reader_writer_locks_answer_as_glibc_does() {
    assert_unprofiled();
    for profiled in [false, true] {
        as_profiled(profiled, reader_writer_lock_answers);
    }
}

fn reader_writer_lock_answers() {
    use RwOp::*;
    let t = initialised();
    let (p, pn) = (PAST.tv_sec, PAST.tv_nsec);
    let (b, bn) = (BAD_NSEC.tv_sec, BAD_NSEC.tv_nsec);
    let mono = libc::CLOCK_MONOTONIC;

    // Read-held (twice, by this thread): more readers get in, writers do not.
    assert_eq!(step(&t, RdLock), 0);
    assert_eq!(step(&t, TryRd), 0);
    assert_eq!(step(&t, TryWr), EBUSY);
    assert_eq!(step(&t, TimedWr(p, pn)), ETIMEDOUT);
    assert_eq!(step(&t, ClockWr(mono, p, pn)), ETIMEDOUT);
    assert_eq!(
        steps_elsewhere(
            &t,
            &[TryRd, TimedRd(p, pn), Unlock, Unlock, TryWr, TimedWr(p, pn)]
        ),
        [0, 0, 0, 0, EBUSY, ETIMEDOUT]
    );
    assert_eq!(step(&t, Unlock), 0);
    assert_eq!(step(&t, Unlock), 0);

    // Write-held: nobody else gets in, and this thread's own relock is a deadlock.
    assert_eq!(step(&t, WrLock), 0);
    assert_eq!(t.ours.word(CUR_WRITER_AT), gettid());
    assert_eq!(step(&t, WrLock), EDEADLK);
    assert_eq!(step(&t, RdLock), EDEADLK);
    assert_eq!(step(&t, TimedRd(p, pn)), EDEADLK);
    assert_eq!(step(&t, TimedWr(p, pn)), EDEADLK);
    assert_eq!(step(&t, TryRd), EBUSY);
    assert_eq!(step(&t, TryWr), EBUSY);
    assert_eq!(
        steps_elsewhere(
            &t,
            &[
                TryRd,
                TryWr,
                TimedRd(p, pn),
                TimedWr(p, pn),
                ClockRd(mono, p, pn),
                ClockRd(UNSUPPORTED_CLOCK, p, pn),
                TimedWr(b, bn),
            ]
        ),
        [EBUSY, EBUSY, ETIMEDOUT, ETIMEDOUT, ETIMEDOUT, EINVAL, EINVAL]
    );
    assert_eq!(step(&t, Unlock), 0);
    assert_eq!(t.ours.word(CUR_WRITER_AT), 0);

    // Free: glibc checks the clock and the deadline before it looks at the lock (unlike
    // its mutexes), so these fail even though nothing would wait.
    assert_eq!(step(&t, ClockRd(UNSUPPORTED_CLOCK, p, pn)), EINVAL);
    assert_eq!(step(&t, ClockWr(UNSUPPORTED_CLOCK, p, pn)), EINVAL);
    assert_eq!(step(&t, TimedRd(b, bn)), EINVAL);
    assert_eq!(step(&t, TimedWr(b, bn)), EINVAL);
    // A past but valid deadline does not stop a free lock from being taken.
    assert_eq!(step(&t, TimedWr(p, pn)), 0);
    assert_eq!(step(&t, Unlock), 0);
    assert_eq!(step(&t, ClockRd(mono, p, pn)), 0);
    assert_eq!(step(&t, Unlock), 0);
    assert_eq!(step(&t, Destroy), 0);
}

/// How the calling thread holds the lock of a twin before a timed acquisition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    Free,
    Reading,
    Writing,
}

/// Every clock and deadline through our timed and clock locks and glibc's, on a free lock,
/// one this thread reads and one it writes, unprofiled and on the profiled path: glibc
/// refuses a clock it does not wait on and nanoseconds out of range (EINVAL) before it
/// looks at the lock, even before it reports the caller's own write hold (EDEADLK), and a
/// valid past deadline only stops an acquisition that would wait (ETIMEDOUT). With no
/// deadline (null), the clock goes unchecked.
#[test]
fn timed_acquisitions_check_clock_and_deadline_as_glibc_does() {
    use RwOp::*;
    for profiled in [false, true] {
        as_profiled(profiled, || {
            let t = initialised();
            for held in [Held::Free, Held::Reading, Held::Writing] {
                let hold = match held {
                    Held::Free => None,
                    Held::Reading => Some(RdLock),
                    Held::Writing => Some(WrLock),
                };
                if let Some(op) = hold {
                    assert_eq!(step(&t, op), 0);
                }
                for (sec, ns) in DEADLINES {
                    for clock in CLOCKS {
                        let mut ops = vec![ClockRd(clock, sec, ns), ClockWr(clock, sec, ns)];
                        if clock == libc::CLOCK_REALTIME {
                            ops.extend([TimedRd(sec, ns), TimedWr(sec, ns)]);
                        }
                        for op in ops {
                            let write = matches!(op, ClockWr(..) | TimedWr(..));
                            let expected = if !supported_clock(clock) || !valid_nanoseconds(ns) {
                                EINVAL
                            } else {
                                match held {
                                    Held::Free => 0,
                                    Held::Reading if write => ETIMEDOUT,
                                    Held::Reading => 0,
                                    Held::Writing => EDEADLK,
                                }
                            };
                            let what = format!("{op:?} while {held:?}, profiled {profiled}");
                            assert_eq!(step(&t, op), expected, "{what}");
                            if expected == 0 {
                                assert_eq!(step(&t, Unlock), 0, "{what}");
                            }
                        }
                    }
                }
                if held == Held::Free {
                    for clock in CLOCKS {
                        for op in [ClockRdForever(clock), ClockWrForever(clock)] {
                            assert_eq!(step(&t, op), 0, "{op:?}, profiled {profiled}");
                            assert_eq!(step(&t, Unlock), 0);
                        }
                    }
                } else {
                    assert_eq!(step(&t, Unlock), 0);
                }
            }
            assert_eq!(step(&t, Destroy), 0);
        });
    }
}

/// glibc's x86-64 `__readers` (the reader count above 3 flag bits), at byte 0, when it
/// counts all the readers it can: one more would reach `PTHREAD_RWLOCK_READER_OVERFLOW`
/// (bit 31).
const ALL_READERS: i32 = 0x7fff_fff8;

/// A lock that counts all the readers it can (glibc would get there after 2^28 - 1 read
/// locks) refuses one more, by every read acquisition, with EAGAIN (the profiled path's
/// try says so too, and the blocking call then decides); a writer finds it held.
#[test]
fn a_lock_full_of_readers_answers_as_glibc_does() {
    use RwOp::*;
    let (p, pn) = (PAST.tv_sec, PAST.tv_nsec);
    for profiled in [false, true] {
        as_profiled(profiled, || {
            let t = initialised();
            t.ours.set_word(0, ALL_READERS);
            t.glibc.set_word(0, ALL_READERS);
            for op in [
                RdLock,
                TryRd,
                TimedRd(p, pn),
                ClockRd(libc::CLOCK_MONOTONIC, p, pn),
                ClockRdForever(libc::CLOCK_REALTIME),
            ] {
                assert_eq!(step(&t, op), libc::EAGAIN, "{op:?}, profiled {profiled}");
            }
            assert_eq!(step(&t, TryWr), EBUSY);
            assert_eq!(step(&t, TimedWr(p, pn)), ETIMEDOUT);
            assert_eq!(t.ours.word(0), ALL_READERS);
            // A deadline glibc refuses still comes first.
            assert_eq!(step(&t, TimedRd(BAD_NSEC.tv_sec, BAD_NSEC.tv_nsec)), EINVAL);
            t.ours.set_word(0, 0);
            t.glibc.set_word(0, 0);
            assert_eq!(step(&t, Destroy), 0);
        });
    }
}

#[test]
fn others_hold_reads_glibcs_reader_count_and_writer() {
    let lock = Raw::<pthread_rwlock_t>::zeroed(); // PTHREAD_RWLOCK_INITIALIZER
    let rw = lock.ptr();
    let api = ours();
    // SAFETY: `rw` is an initialised lock used as a C program would: every check of
    // `others_hold` is made while this thread holds it.
    unsafe {
        assert_eq!((api.rdlock)(rw), 0);
        assert!(!others_hold(rw), "the only reader");
        assert_eq!((api.tryrdlock)(rw), 0);
        assert!(others_hold(rw), "two read holds");
        assert_eq!((api.unlock)(rw), 0);
        assert!(!others_hold(rw), "back to one");
        // Another thread's read hold counts too.
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let lock_ref = &lock;
        std::thread::scope(|s| {
            s.spawn(move || {
                // SAFETY: as above.
                assert_eq!((api.rdlock)(lock_ref.ptr()), 0);
                tx.send(()).unwrap();
                done_rx.recv().unwrap();
                // SAFETY: this thread holds it.
                assert_eq!((api.unlock)(lock_ref.ptr()), 0);
            });
            rx.recv().unwrap();
            assert!(others_hold(rw), "another thread reads too");
            done_tx.send(()).unwrap();
        });
        assert!(!others_hold(rw));
        assert_eq!((api.unlock)(rw), 0);
        assert_eq!((api.wrlock)(rw), 0);
        assert!(!others_hold(rw), "the writer");
        assert_eq!((api.unlock)(rw), 0);
    }
}

/// Writers keep two counters equal under the write lock; readers, under the read lock,
/// never see them differ.
#[test]
fn reader_writer_locks_exclude_under_contention() {
    const ROUNDS: usize = 2_000;
    let lock = Raw::<pthread_rwlock_t>::zeroed();
    let pair = Raw::<[u64; 2]>::zeroed();
    let api = ours();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (lock, pair) = (&lock, &pair);
            s.spawn(move || {
                let rw = lock.ptr();
                for i in 0..ROUNDS {
                    // SAFETY: an initialised lock for the whole scope, released before the
                    // next round; `pair` is written only under the write lock.
                    unsafe {
                        if t % 2 == 0 {
                            let rc = if i % 3 == 0 {
                                (api.timedwrlock)(
                                    rw,
                                    &crate::tests::support::deadline(libc::CLOCK_REALTIME, 3600),
                                )
                            } else {
                                (api.wrlock)(rw)
                            };
                            assert_eq!(rc, 0);
                            let p = pair.ptr();
                            (*p)[0] += 1;
                            std::hint::black_box(&*p);
                            (*p)[1] += 1;
                        } else {
                            if i % 3 == 0 {
                                while (api.tryrdlock)(rw) != 0 {
                                    std::hint::spin_loop();
                                }
                            } else {
                                assert_eq!((api.rdlock)(rw), 0);
                            }
                            let [a, b] = std::ptr::read_volatile(pair.ptr());
                            assert_eq!(a, b, "a reader saw a write in progress");
                        }
                        assert_eq!((api.unlock)(rw), 0);
                    }
                }
            });
        }
    });
    // SAFETY: every thread has finished.
    assert_eq!(unsafe { *pair.ptr() }, [2 * ROUNDS as u64; 2]);
    // SAFETY: every thread has finished; the lock is free.
    unsafe {
        assert_eq!((api.trywrlock)(lock.ptr()), 0, "left held");
        assert_eq!((api.unlock)(lock.ptr()), 0);
        assert_eq!((api.destroy)(lock.ptr()), 0);
    }
}
