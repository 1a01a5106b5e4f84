//! Unit tests of the runtime's entry points that have no test file of their own:
//! semaphores, condition variables, barriers, `syscall` (futexes), thread joins, the waits
//! a signal would break, `sigaction`, `dlopen` and the exec family; and of how the test
//! executable links them.
//!
//! Each test makes the same calls through our function and through glibc's real one and
//! asserts the same return codes, the same `errno` (a call that succeeds must leave it as it
//! was) and, where the call works on an object, the same bytes in a twin pair of objects.
//! Ours is the crate's own `#[no_mangle]` function (`crate::semaphore::sem_wait`, ...),
//! which is also what `libc::sem_wait` links to in this executable; glibc's is
//! `crate::real::*`, what the runtime itself forwards to
//! ([`calls_reach_our_functions_and_real_ones_reach_libc`] checks both).
//!
//! The test process is not profiled (no `BLAMEPROF_OUTPUT`): the runtime's start-up leaves
//! sampling off, so the interposers take their pass-through paths (no try before a wait,
//! no measurement, no blocked sampling signal); the semaphore tests run again with the
//! waits on their profiled path ([`support::as_profiled`]: a try first, the measuring
//! passing through). What a profiled process adds is tested by the integration tests,
//! which preload the built library.
//!
//! Layout of the runtime's unit tests: this module (declared by `mod tests;` in `lib.rs`,
//! and compiled only for tests by its `#![cfg(test)]`, as each of them is) and the `tests`
//! modules of [`plain_mutex`](crate::plain_mutex), [`locks`](crate::locks) and
//! [`rwlock`](crate::rwlock), in `plain_mutex/tests.rs`, ..., which test private items of
//! those files too; [`support`] holds the twin objects and glibc's layouts they share.

#![cfg(test)]

pub(crate) mod support;

use crate::real;
use libc::{c_char, c_int, c_long, c_uint, c_void, sem_t, timespec};
use libc::{EAGAIN, EDEADLK, EINVAL, ETIMEDOUT};
use std::ptr::{null, null_mut};
use support::{
    as_profiled, assert_unprofiled, errno, gettid, glibc_symbol, object_of, set_errno,
    supported_clock, valid_nanoseconds, MutexAttr, MutexOp, MutexTwin, Raw, Twin, BAD_NSEC, CLOCKS,
    DEADLINES, ERRNO_SENTINEL, PAST, UNSUPPORTED_CLOCK,
};

/// Runs `f` with `errno` set to [`ERRNO_SENTINEL`]; its result and `errno` after.
fn with_errno<R>(f: impl FnOnce() -> R) -> (R, c_int) {
    set_errno(ERRNO_SENTINEL);
    let r = f();
    (r, errno())
}

/// `(seconds, nanoseconds)` as a timespec.
fn ts(s: i64, ns: i64) -> timespec {
    timespec {
        tv_sec: s,
        tv_nsec: ns,
    }
}

/// Asserts, for each named function, that `libc::name` (what a call in this executable
/// links to) is the crate's function, and that the real one the crate forwards to is
/// another function, in libc.
macro_rules! assert_linked {
    ($($name:ident: $ours:path, $real:expr;)*) => {$(
        let ours = $ours as *const () as usize;
        assert_eq!(libc::$name as *const () as usize, ours,
            concat!("libc::", stringify!($name), " does not link to the crate's"));
        let real: usize = $real;
        assert_ne!(real, ours, concat!(stringify!($name), ": real is ours"));
        let object = object_of(real);
        assert!(object.contains("libc.so"),
            concat!("real ", stringify!($name), " is in {:?}"), object);
    )*};
}

#[test]
fn calls_reach_our_functions_and_real_ones_reach_libc() {
    assert_unprofiled();
    assert_linked! {
        pthread_mutex_lock: crate::locks::pthread_mutex_lock, real::pthread_mutex_lock() as usize;
        pthread_mutex_trylock: crate::locks::pthread_mutex_trylock,
            real::pthread_mutex_trylock() as usize;
        pthread_mutex_timedlock: crate::locks::pthread_mutex_timedlock,
            real::pthread_mutex_timedlock() as usize;
        pthread_mutex_unlock: crate::locks::pthread_mutex_unlock,
            real::pthread_mutex_unlock() as usize;
        pthread_mutex_init: crate::locks::pthread_mutex_init, real::pthread_mutex_init() as usize;
        pthread_mutex_destroy: crate::locks::pthread_mutex_destroy,
            real::pthread_mutex_destroy() as usize;
        pthread_spin_lock: crate::locks::pthread_spin_lock, glibc_symbol(c"pthread_spin_lock");
        pthread_spin_trylock: crate::locks::pthread_spin_trylock,
            glibc_symbol(c"pthread_spin_trylock");
        pthread_spin_unlock: crate::locks::pthread_spin_unlock,
            glibc_symbol(c"pthread_spin_unlock");
        pthread_spin_init: crate::locks::pthread_spin_init, glibc_symbol(c"pthread_spin_init");
        pthread_spin_destroy: crate::locks::pthread_spin_destroy,
            glibc_symbol(c"pthread_spin_destroy");
        pthread_rwlock_rdlock: crate::rwlock::pthread_rwlock_rdlock,
            real::pthread_rwlock_rdlock() as usize;
        pthread_rwlock_wrlock: crate::rwlock::pthread_rwlock_wrlock,
            real::pthread_rwlock_wrlock() as usize;
        pthread_rwlock_tryrdlock: crate::rwlock::pthread_rwlock_tryrdlock,
            real::pthread_rwlock_tryrdlock() as usize;
        pthread_rwlock_trywrlock: crate::rwlock::pthread_rwlock_trywrlock,
            real::pthread_rwlock_trywrlock() as usize;
        pthread_rwlock_unlock: crate::rwlock::pthread_rwlock_unlock,
            real::pthread_rwlock_unlock() as usize;
        sem_wait: crate::semaphore::sem_wait, real::sem_wait() as usize;
        sem_timedwait: crate::semaphore::sem_timedwait, real::sem_timedwait() as usize;
        sem_post: crate::semaphore::sem_post, real::sem_post() as usize;
        sem_init: crate::semaphore::sem_init, real::sem_init() as usize;
        sem_destroy: crate::semaphore::sem_destroy, real::sem_destroy() as usize;
        pthread_cond_wait: crate::condvar::pthread_cond_wait, real::pthread_cond_wait() as usize;
        pthread_cond_timedwait: crate::condvar::pthread_cond_timedwait,
            real::pthread_cond_timedwait() as usize;
        pthread_cond_signal: crate::condvar::pthread_cond_signal,
            real::pthread_cond_signal() as usize;
        pthread_cond_broadcast: crate::condvar::pthread_cond_broadcast,
            real::pthread_cond_broadcast() as usize;
        pthread_cond_init: crate::condvar::pthread_cond_init, real::pthread_cond_init() as usize;
        pthread_cond_destroy: crate::condvar::pthread_cond_destroy,
            real::pthread_cond_destroy() as usize;
        pthread_barrier_init: crate::barrier::pthread_barrier_init,
            real::pthread_barrier_init() as usize;
        pthread_barrier_wait: crate::barrier::pthread_barrier_wait,
            real::pthread_barrier_wait() as usize;
        pthread_barrier_destroy: crate::barrier::pthread_barrier_destroy,
            real::pthread_barrier_destroy() as usize;
        syscall: crate::futex::syscall, real::syscall() as usize;
        pthread_create: crate::threads::pthread_create, real::pthread_create() as usize;
        pthread_join: crate::threads::pthread_join, real::pthread_join() as usize;
        pthread_timedjoin_np: crate::threads::pthread_timedjoin_np,
            real::pthread_timedjoin_np() as usize;
        pthread_exit: crate::threads::pthread_exit, real::pthread_exit() as usize;
        nanosleep: crate::waits::nanosleep, real::nanosleep() as usize;
        clock_nanosleep: crate::waits::clock_nanosleep, real::clock_nanosleep() as usize;
        usleep: crate::waits::usleep, real::usleep() as usize;
        sleep: crate::waits::sleep, real::sleep() as usize;
        poll: crate::waits::poll, real::poll() as usize;
        select: crate::waits::select, real::select() as usize;
        epoll_wait: crate::waits::epoll_wait, real::epoll_wait() as usize;
        sigwait: crate::waits::sigwait, real::sigwait() as usize;
        sigaction: crate::sigaction, real::sigaction() as usize;
        dlopen: crate::dlopen, real::dlopen() as usize;
        dlclose: crate::dlclose, real::dlclose() as usize;
        execve: crate::execve, real::execve() as usize;
        execvp: crate::execvp, real::execvp() as usize;
        _exit: crate::_exit, real::exit_now() as usize;
    }
    // A function the runtime does not define stays glibc's, at the address the runtime
    // resolves for its own use.
    assert_eq!(
        libc::sem_trywait as *const () as usize,
        real::sem_trywait() as usize
    );
    // The variadic execs are naked functions in a private module: only different from
    // glibc's can be checked here.
    for (ours, name) in [
        (libc::execl as *const () as usize, c"execl"),
        (libc::execlp as *const () as usize, c"execlp"),
    ] {
        assert_ne!(ours, glibc_symbol(name), "{name:?} is glibc's");
        assert!(!object_of(ours).contains("libc.so"), "{name:?} is glibc's");
    }
}

/// One side's semaphore functions.
#[derive(Clone, Copy)]
struct SemApi {
    init: unsafe extern "C" fn(*mut sem_t, c_int, c_uint) -> c_int,
    wait: unsafe extern "C" fn(*mut sem_t) -> c_int,
    timedwait: unsafe extern "C" fn(*mut sem_t, *const timespec) -> c_int,
    clockwait: unsafe extern "C" fn(*mut sem_t, libc::clockid_t, *const timespec) -> c_int,
    post: unsafe extern "C" fn(*mut sem_t) -> c_int,
    destroy: unsafe extern "C" fn(*mut sem_t) -> c_int,
}

fn our_sem() -> SemApi {
    SemApi {
        init: crate::semaphore::sem_init,
        wait: crate::semaphore::sem_wait,
        timedwait: crate::semaphore::sem_timedwait,
        clockwait: crate::semaphore::sem_clockwait,
        post: crate::semaphore::sem_post,
        destroy: crate::semaphore::sem_destroy,
    }
}

fn glibc_sem() -> SemApi {
    SemApi {
        init: real::sem_init(),
        wait: real::sem_wait(),
        timedwait: real::sem_timedwait(),
        clockwait: real::sem_clockwait(),
        post: real::sem_post(),
        destroy: real::sem_destroy(),
    }
}

/// A call on a semaphore; times are (seconds, nanoseconds).
#[derive(Clone, Copy, Debug)]
enum SemOp {
    Init(c_uint),
    /// Not interposed (glibc's on both sides), but the runtime's waits call it.
    TryWait,
    Wait,
    TimedWait(i64, i64),
    ClockWait(libc::clockid_t, i64, i64),
    Post,
    Destroy,
}

/// Performs `op` on both semaphores (ours first): asserts equal results, `errno` and bytes
/// after; returns (result, errno).
fn sem_step(t: &Twin<sem_t>, op: SemOp) -> (c_int, c_int) {
    let apply = |api: SemApi, s: *mut sem_t| {
        // SAFETY: `s` lives as long as `t`; tests step only calls that return at once.
        with_errno(|| unsafe {
            match op {
                SemOp::Init(value) => (api.init)(s, 0, value),
                SemOp::TryWait => libc::sem_trywait(s),
                SemOp::Wait => (api.wait)(s),
                SemOp::TimedWait(sec, ns) => (api.timedwait)(s, &ts(sec, ns)),
                SemOp::ClockWait(c, sec, ns) => (api.clockwait)(s, c, &ts(sec, ns)),
                SemOp::Post => (api.post)(s),
                SemOp::Destroy => (api.destroy)(s),
            }
        })
    };
    let ours = apply(our_sem(), t.ours.ptr());
    let glibc = apply(glibc_sem(), t.glibc.ptr());
    assert_eq!(ours, glibc, "(result, errno) of {op:?}: ours vs glibc's");
    t.assert_same_image(&op);
    ours
}

fn sem_value(s: &Raw<sem_t>) -> c_int {
    let mut v = -1;
    // SAFETY: an initialised semaphore; `v` is writable.
    assert_eq!(unsafe { libc::sem_getvalue(s.ptr(), &mut v) }, 0);
    v
}

/// Our semaphores answer as glibc's, unprofiled and on the profiled path (a try first).
#[test]
fn semaphores_answer_as_glibc_does() {
    assert_unprofiled();
    for profiled in [false, true] {
        as_profiled(profiled, semaphore_answers);
    }
}

fn semaphore_answers() {
    use SemOp::*;
    let t = Twin::<sem_t>::zeroed();
    let ok = (0, ERRNO_SENTINEL);
    let failed = |e| (-1, e);
    let (p, pn) = (PAST.tv_sec, PAST.tv_nsec);
    let (b, bn) = (BAD_NSEC.tv_sec, BAD_NSEC.tv_nsec);
    let mono = libc::CLOCK_MONOTONIC;
    assert_eq!(sem_step(&t, Init(0)), ok);
    assert_eq!(sem_step(&t, TryWait), failed(EAGAIN));
    assert_eq!(sem_step(&t, TimedWait(p, pn)), failed(ETIMEDOUT));
    assert_eq!(sem_step(&t, ClockWait(mono, p, pn)), failed(ETIMEDOUT));
    assert_eq!(sem_step(&t, TimedWait(b, bn)), failed(EINVAL));
    assert_eq!(
        sem_step(&t, ClockWait(UNSUPPORTED_CLOCK, p, pn)),
        failed(EINVAL)
    );
    assert_eq!(sem_step(&t, Post), ok);
    assert_eq!(sem_value(&t.ours), 1);
    // glibc checks the deadline and the clock before the count: these fail although a
    // unit is there (a profiled process's try would take it; see semaphore.rs).
    assert_eq!(sem_step(&t, TimedWait(b, bn)), failed(EINVAL));
    assert_eq!(
        sem_step(&t, ClockWait(UNSUPPORTED_CLOCK, p, pn)),
        failed(EINVAL)
    );
    assert_eq!(sem_value(&t.ours), 1, "a failed wait took a unit");
    // A past deadline does not stop a wait that need not wait.
    assert_eq!(sem_step(&t, TimedWait(p, pn)), ok);
    assert_eq!(sem_step(&t, Post), ok);
    assert_eq!(sem_step(&t, Post), ok);
    assert_eq!(sem_value(&t.ours), 2);
    assert_eq!(sem_step(&t, Wait), ok);
    assert_eq!(sem_step(&t, ClockWait(mono, p, pn)), ok);
    assert_eq!(sem_value(&t.ours), 0);
    assert_eq!(sem_step(&t, Destroy), ok);
    // The count's limits.
    let max = libc::c_int::MAX as c_uint; // SEM_VALUE_MAX
    assert_eq!(sem_step(&t, Init(max + 1)), failed(EINVAL));
    assert_eq!(sem_step(&t, Init(max)), ok);
    assert_eq!(sem_step(&t, Post), failed(libc::EOVERFLOW));
    assert_eq!(sem_value(&t.ours), c_int::MAX);
    assert_eq!(sem_step(&t, Destroy), ok);
}

/// Every clock and deadline through our `sem_timedwait` and `sem_clockwait` and glibc's,
/// with a unit there and without, unprofiled and on the profiled path: glibc refuses a
/// clock it does not wait on and nanoseconds out of range (EINVAL) before it looks at the
/// count, and a valid past deadline only stops a wait that would wait (ETIMEDOUT).
#[test]
fn timed_semaphore_waits_check_clock_and_deadline_as_glibc_does() {
    use SemOp::*;
    for profiled in [false, true] {
        as_profiled(profiled, || {
            let t = Twin::<sem_t>::zeroed();
            assert_eq!(sem_step(&t, Init(0)), (0, ERRNO_SENTINEL));
            for units in [0, 1] {
                for (sec, ns) in DEADLINES {
                    let valid = valid_nanoseconds(ns);
                    for clock in CLOCKS {
                        let clocked = ClockWait(clock, sec, ns);
                        let realtime = clock == libc::CLOCK_REALTIME;
                        let ops = [Some(clocked), realtime.then_some(TimedWait(sec, ns))];
                        for op in ops.into_iter().flatten() {
                            let expected = match (supported_clock(clock) && valid, units) {
                                (false, _) => (-1, EINVAL),
                                (true, 0) => (-1, ETIMEDOUT),
                                (true, _) => (0, ERRNO_SENTINEL),
                            };
                            let what = format!("{op:?}, {units} unit(s), profiled {profiled}");
                            assert_eq!(sem_step(&t, op), expected, "{what}");
                            if expected.0 == 0 {
                                assert_eq!(sem_step(&t, Post), (0, ERRNO_SENTINEL));
                            }
                            assert_eq!(sem_value(&t.ours), units, "{what}");
                        }
                    }
                }
                assert_eq!(sem_step(&t, Post), (0, ERRNO_SENTINEL));
            }
            assert_eq!(sem_step(&t, Destroy), (0, ERRNO_SENTINEL));
        });
    }
}

/// The signal [`interrupted`] sends: one no other test uses, whose default action (ignore)
/// is harmless should it arrive before the handler is installed.
const INTERRUPT: c_int = libc::SIGURG;

extern "C" fn on_interrupt(_: c_int) {}

/// (result, errno) of `wait` (a semaphore wait that would block for good) on a new thread,
/// on the profiled path or not, which the program's own signal interrupts: a handler
/// installed without `SA_RESTART`, sent until the wait returns (one sent before the wait
/// blocks only runs the handler). After 10 s, `sem` is posted, so a wait the signal does
/// not end returns, with success.
fn interrupted(
    profiled: bool,
    sem: &Raw<sem_t>,
    wait: impl Fn() -> c_int + Sync,
) -> (c_int, c_int) {
    // SAFETY: an all-zero sigaction is valid (empty mask, no flags); it then names a
    // handler that does nothing, for a signal no other test uses.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_interrupt as extern "C" fn(c_int) as usize;
        assert_eq!(libc::sigaction(INTERRUPT, &action, null_mut()), 0);
    }
    let waiter_id = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            // SAFETY: pthread_self has no preconditions.
            let me = unsafe { libc::pthread_self() };
            waiter_id.store(me, std::sync::atomic::Ordering::Release);
            as_profiled(profiled, || with_errno(&wait))
        });
        let thread = loop {
            match waiter_id.load(std::sync::atomic::Ordering::Acquire) {
                0 => std::thread::yield_now(),
                id => break id,
            }
        };
        for _ in 0..2_000 {
            if waiter.is_finished() {
                break;
            }
            // SAFETY: `thread` is joinable until the scope joins it, so it names a thread.
            assert_eq!(unsafe { libc::pthread_kill(thread, INTERRUPT) }, 0);
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        if !waiter.is_finished() {
            // SAFETY: an initialised semaphore the waiter waits on.
            assert_eq!(unsafe { libc::sem_post(sem.ptr()) }, 0);
        }
        waiter.join().expect("the waiter")
    })
}

/// A semaphore wait that blocks is interrupted by the program's own signal: -1 and EINTR
/// from our `sem_wait`, `sem_timedwait` and `sem_clockwait` as from glibc's, unprofiled
/// and on the profiled path (which blocks only the sampling signal while it waits).
#[test]
fn a_semaphore_wait_interrupted_by_a_signal_fails_as_glibcs_does() {
    let sem = Raw::<sem_t>::zeroed();
    // SAFETY: a fresh semaphore, with no unit.
    assert_eq!(unsafe { libc::sem_init(sem.ptr(), 0, 0) }, 0);
    let later = support::deadline(libc::CLOCK_REALTIME, 60);
    let later_mono = support::deadline(libc::CLOCK_MONOTONIC, 60);
    for profiled in [false, true] {
        for (side, api) in [("ours", our_sem()), ("glibc's", glibc_sem())] {
            let sem = &sem;
            // SAFETY: the semaphore is initialised and outlives the waits; the deadlines
            // live across them.
            let waits: [(&str, &(dyn Fn() -> c_int + Sync)); 3] = [
                ("sem_wait", &|| unsafe { (api.wait)(sem.ptr()) }),
                ("sem_timedwait", &|| unsafe {
                    (api.timedwait)(sem.ptr(), &later)
                }),
                ("sem_clockwait", &|| unsafe {
                    (api.clockwait)(sem.ptr(), libc::CLOCK_MONOTONIC, &later_mono)
                }),
            ];
            for (name, wait) in waits {
                assert_eq!(
                    interrupted(profiled, sem, wait),
                    (-1, libc::EINTR),
                    "{side} {name}, profiled {profiled}"
                );
                assert_eq!(sem_value(sem), 0);
            }
        }
    }
    // SAFETY: nobody waits on it any more.
    assert_eq!(unsafe { libc::sem_destroy(sem.ptr()) }, 0);
}

/// Units posted by one thread through our `sem_post` reach a thread blocked in our
/// `sem_wait`, one for one.
#[test]
fn a_semaphore_hands_units_over_between_threads() {
    const UNITS: usize = 200;
    let (items, room) = (Raw::<sem_t>::zeroed(), Raw::<sem_t>::zeroed());
    let api = our_sem();
    // SAFETY: fresh semaphores, used only below.
    unsafe {
        assert_eq!((api.init)(items.ptr(), 0, 0), 0);
        assert_eq!((api.init)(room.ptr(), 0, 1), 0);
    }
    let got = std::thread::scope(|s| {
        let consumer = s.spawn(|| {
            (0..UNITS)
                .map(|_| {
                    // SAFETY: initialised semaphores for the whole scope.
                    let rc = unsafe { (api.wait)(items.ptr()) };
                    // SAFETY: as above.
                    assert_eq!(unsafe { (api.post)(room.ptr()) }, 0);
                    rc
                })
                .filter(|&rc| rc == 0)
                .count()
        });
        for _ in 0..UNITS {
            // SAFETY: as above.
            unsafe {
                assert_eq!((api.wait)(room.ptr()), 0);
                assert_eq!((api.post)(items.ptr()), 0);
            }
        }
        consumer.join().unwrap()
    });
    assert_eq!(got, UNITS);
    assert_eq!((sem_value(&items), sem_value(&room)), (0, 1));
    // SAFETY: nobody uses them any more.
    unsafe {
        assert_eq!((api.destroy)(items.ptr()), 0);
        assert_eq!((api.destroy)(room.ptr()), 0);
    }
}

/// One side's condition-variable functions.
#[derive(Clone, Copy)]
struct CondApi {
    init: unsafe extern "C" fn(*mut libc::pthread_cond_t, *const libc::pthread_condattr_t) -> c_int,
    wait: unsafe extern "C" fn(*mut libc::pthread_cond_t, *mut libc::pthread_mutex_t) -> c_int,
    timedwait: unsafe extern "C" fn(
        *mut libc::pthread_cond_t,
        *mut libc::pthread_mutex_t,
        *const timespec,
    ) -> c_int,
    clockwait: unsafe extern "C" fn(
        *mut libc::pthread_cond_t,
        *mut libc::pthread_mutex_t,
        libc::clockid_t,
        *const timespec,
    ) -> c_int,
    signal: unsafe extern "C" fn(*mut libc::pthread_cond_t) -> c_int,
    broadcast: unsafe extern "C" fn(*mut libc::pthread_cond_t) -> c_int,
    destroy: unsafe extern "C" fn(*mut libc::pthread_cond_t) -> c_int,
}

fn our_cond() -> CondApi {
    CondApi {
        init: crate::condvar::pthread_cond_init,
        wait: crate::condvar::pthread_cond_wait,
        timedwait: crate::condvar::pthread_cond_timedwait,
        clockwait: crate::condvar::pthread_cond_clockwait,
        signal: crate::condvar::pthread_cond_signal,
        broadcast: crate::condvar::pthread_cond_broadcast,
        destroy: crate::condvar::pthread_cond_destroy,
    }
}

fn glibc_cond() -> CondApi {
    CondApi {
        init: real::pthread_cond_init(),
        wait: real::pthread_cond_wait(),
        timedwait: real::pthread_cond_timedwait(),
        clockwait: real::pthread_cond_clockwait(),
        signal: real::pthread_cond_signal(),
        broadcast: real::pthread_cond_broadcast(),
        destroy: real::pthread_cond_destroy(),
    }
}

/// A call on a condition variable (the waits with the twin's mutex).
#[derive(Clone, Copy, Debug)]
enum CondOp {
    Init,
    TimedWait(i64, i64),
    ClockWait(libc::clockid_t, i64, i64),
    Signal,
    Broadcast,
    Destroy,
}

/// Condition variables and the mutexes their waits use, ours and glibc's.
struct CondTwin {
    cond: Twin<libc::pthread_cond_t>,
    mutex: MutexTwin,
}

impl CondTwin {
    /// Performs `op` on both sides (ours first): asserts equal codes, and equal condition
    /// variables and mutexes after.
    fn step(&self, op: CondOp) -> c_int {
        let apply = |api: CondApi, c, m| {
            // SAFETY: `c` and `m` live as long as `self`; tests step only waits that return
            // at once (past deadlines, errors) and only with the mutex in the state the
            // call requires of it.
            unsafe {
                match op {
                    CondOp::Init => (api.init)(c, null()),
                    CondOp::TimedWait(s, ns) => (api.timedwait)(c, m, &ts(s, ns)),
                    CondOp::ClockWait(k, s, ns) => (api.clockwait)(c, m, k, &ts(s, ns)),
                    CondOp::Signal => (api.signal)(c),
                    CondOp::Broadcast => (api.broadcast)(c),
                    CondOp::Destroy => (api.destroy)(c),
                }
            }
        };
        let ours = apply(our_cond(), self.cond.ours.ptr(), self.mutex.twin.ours.ptr());
        let glibc = apply(
            glibc_cond(),
            self.cond.glibc.ptr(),
            self.mutex.twin.glibc.ptr(),
        );
        assert_eq!(ours, glibc, "return code of {op:?}: ours vs glibc's");
        self.cond.assert_same_image(&op);
        self.mutex.assert_same_state(&op);
        ours
    }
}

#[test]
fn condition_variables_answer_as_glibc_does() {
    use CondOp::*;
    assert_unprofiled();
    let (p, pn) = (PAST.tv_sec, PAST.tv_nsec);
    let mono = libc::CLOCK_MONOTONIC;
    for attr in [
        None,
        Some(MutexAttr::of_kind(libc::PTHREAD_MUTEX_ERRORCHECK)),
        Some(MutexAttr::of_kind(libc::PTHREAD_MUTEX_RECURSIVE)),
        Some(MutexAttr {
            protocol: libc::PTHREAD_PRIO_INHERIT,
            ..MutexAttr::of_kind(libc::PTHREAD_MUTEX_NORMAL)
        }),
    ] {
        let t = CondTwin {
            cond: Twin::zeroed(),
            mutex: MutexTwin::new(attr),
        };
        assert_eq!(t.step(Init), 0);
        assert_eq!(t.mutex.step(MutexOp::Lock), 0);
        assert_eq!(t.step(TimedWait(p, pn)), ETIMEDOUT, "{attr:?}");
        assert_eq!(t.step(ClockWait(mono, p, pn)), ETIMEDOUT, "{attr:?}");
        // Rejected before the mutex is released.
        assert_eq!(
            t.step(ClockWait(UNSUPPORTED_CLOCK, p, pn)),
            EINVAL,
            "{attr:?}"
        );
        assert_eq!(t.step(TimedWait(BAD_NSEC.tv_sec, BAD_NSEC.tv_nsec)), EINVAL);
        // Every clock and (past) deadline: glibc refuses nanoseconds out of range and a
        // clock it does not wait on before it releases the mutex; a valid one times out.
        for (sec, ns) in DEADLINES {
            let clocked = CLOCKS.map(|clock| (ClockWait(clock, sec, ns), supported_clock(clock)));
            let ops = clocked.into_iter().chain([(TimedWait(sec, ns), true)]);
            for (op, supported) in ops {
                let expected = if supported && valid_nanoseconds(ns) {
                    ETIMEDOUT
                } else {
                    EINVAL
                };
                assert_eq!(t.step(op), expected, "{op:?} with {attr:?}");
            }
        }
        assert_eq!(
            t.mutex.ours_fields().owner,
            gettid(),
            "{attr:?}: the mutex is held again"
        );
        assert_eq!(t.step(Signal), 0);
        assert_eq!(t.step(Broadcast), 0);
        assert_eq!(t.mutex.step(MutexOp::Unlock), 0, "{attr:?}");
        assert_eq!(t.mutex.ours_fields().owner, 0, "{attr:?}");
        assert_eq!(t.mutex.ours_fields().nusers, 0, "{attr:?}");
        if attr.is_some_and(|a| a.kind == libc::PTHREAD_MUTEX_ERRORCHECK) {
            // Waiting without holding an error-checking mutex.
            assert_eq!(t.step(TimedWait(p, pn)), libc::EPERM);
        }
        assert_eq!(t.step(Destroy), 0);
    }
}

/// A waiter blocked in our `pthread_cond_wait` is woken by our `pthread_cond_signal` and
/// `pthread_cond_broadcast`, and holds the mutex when it returns.
#[test]
fn condition_variables_wake_waiters() {
    const WAITERS: usize = 3;
    let cond = Raw::<libc::pthread_cond_t>::zeroed();
    let mutex = Raw::<libc::pthread_mutex_t>::zeroed();
    // Generations published under the mutex: a waiter waits for the one after it saw.
    let generation = Raw::<u64>::zeroed();
    let (c, m) = (our_cond(), support::our_mutex());
    let rounds = |broadcast: bool| {
        std::thread::scope(|s| {
            let waiters: Vec<_> = (0..WAITERS)
                .map(|_| {
                    s.spawn(|| {
                        // SAFETY: initialised (zeroed) objects for the whole scope; the
                        // generation is read and written only under the mutex.
                        unsafe {
                            assert_eq!((m.lock)(mutex.ptr()), 0);
                            let seen = *generation.ptr();
                            while *generation.ptr() == seen {
                                assert_eq!((c.wait)(cond.ptr(), mutex.ptr()), 0);
                                assert_eq!(support::mutex_fields(&mutex).owner, gettid());
                            }
                            assert_eq!((m.unlock)(mutex.ptr()), 0);
                        }
                    })
                })
                .collect();
            // Publish a new generation until every waiter has seen one.
            while !waiters.iter().all(|w| w.is_finished()) {
                // SAFETY: as above.
                unsafe {
                    assert_eq!((m.lock)(mutex.ptr()), 0);
                    *generation.ptr() += 1;
                    let rc = if broadcast {
                        (c.broadcast)(cond.ptr())
                    } else {
                        (c.signal)(cond.ptr())
                    };
                    assert_eq!(rc, 0);
                    assert_eq!((m.unlock)(mutex.ptr()), 0);
                }
                std::thread::yield_now();
            }
            for w in waiters {
                w.join().unwrap();
            }
        })
    };
    rounds(false);
    rounds(true);
    assert_eq!(support::mutex_fields(&mutex).owner, 0);
}

type BarrierFn = unsafe extern "C" fn(*mut libc::pthread_barrier_t) -> c_int;

/// One side's barrier functions.
#[derive(Clone, Copy)]
struct BarrierApi {
    init: unsafe extern "C" fn(
        *mut libc::pthread_barrier_t,
        *const libc::pthread_barrierattr_t,
        c_uint,
    ) -> c_int,
    wait: BarrierFn,
    destroy: BarrierFn,
}

fn our_barrier() -> BarrierApi {
    BarrierApi {
        init: crate::barrier::pthread_barrier_init,
        wait: crate::barrier::pthread_barrier_wait,
        destroy: crate::barrier::pthread_barrier_destroy,
    }
}

fn glibc_barrier() -> BarrierApi {
    BarrierApi {
        init: real::pthread_barrier_init(),
        wait: real::pthread_barrier_wait(),
        destroy: real::pthread_barrier_destroy(),
    }
}

/// A call on a barrier.
#[derive(Clone, Copy, Debug)]
enum BarrierOp {
    Init(c_uint),
    Wait,
    Destroy,
}

/// Performs `op` on both barriers (ours first); asserts equal codes and bytes after.
fn barrier_step(t: &Twin<libc::pthread_barrier_t>, op: BarrierOp) -> c_int {
    let apply = |api: BarrierApi, b| {
        // SAFETY: `b` lives as long as `t`; tests wait only on a barrier of one thread,
        // which returns at once.
        unsafe {
            match op {
                BarrierOp::Init(n) => (api.init)(b, null(), n),
                BarrierOp::Wait => (api.wait)(b),
                BarrierOp::Destroy => (api.destroy)(b),
            }
        }
    };
    let ours = apply(our_barrier(), t.ours.ptr());
    let glibc = apply(glibc_barrier(), t.glibc.ptr());
    assert_eq!(ours, glibc, "return code of {op:?}: ours vs glibc's");
    t.assert_same_image(&op);
    ours
}

#[test]
fn barriers_answer_as_glibc_does() {
    use BarrierOp::*;
    assert_unprofiled();
    let t = Twin::<libc::pthread_barrier_t>::zeroed();
    assert_eq!(barrier_step(&t, Init(0)), EINVAL);
    // glibc counts arrivals in an unsigned int, and refuses more parties than half of it
    // holds (it treats the other half as overflow).
    for (count, expected) in [
        (c_uint::MAX, EINVAL),
        (0x8000_0000, EINVAL),
        (0x7fff_ffff, EINVAL),
        (0x7fff_fffe, 0),
    ] {
        assert_eq!(
            barrier_step(&t, Init(count)),
            expected,
            "{count:#x} parties"
        );
    }
    assert_eq!(barrier_step(&t, Destroy), 0);
    assert_eq!(barrier_step(&t, Init(1)), 0);
    for _ in 0..3 {
        assert_eq!(barrier_step(&t, Wait), libc::PTHREAD_BARRIER_SERIAL_THREAD);
    }
    assert_eq!(barrier_step(&t, Destroy), 0);
}

/// Threads meeting at a barrier, through our functions and through glibc's: each round
/// releases all of them, exactly one with `PTHREAD_BARRIER_SERIAL_THREAD`.
#[test]
fn barriers_release_one_serial_thread_per_round() {
    const PARTIES: usize = 3;
    const ROUNDS: usize = 20;
    for api in [our_barrier(), glibc_barrier()] {
        let barrier = Raw::<libc::pthread_barrier_t>::zeroed();
        // SAFETY: a fresh barrier.
        let rc = unsafe { (api.init)(barrier.ptr(), null(), PARTIES as c_uint) };
        assert_eq!(rc, 0);
        let serials: Vec<Vec<bool>> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..PARTIES)
                .map(|_| {
                    s.spawn(|| {
                        (0..ROUNDS)
                            .map(|_| {
                                // SAFETY: an initialised barrier for the whole scope, which
                                // every party waits on the same number of times.
                                let rc = unsafe { (api.wait)(barrier.ptr()) };
                                assert!(rc == 0 || rc == libc::PTHREAD_BARRIER_SERIAL_THREAD);
                                rc != 0
                            })
                            .collect()
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        for round in 0..ROUNDS {
            let n = serials.iter().filter(|s| s[round]).count();
            assert_eq!(n, 1, "round {round}: serial threads");
        }
        // SAFETY: nobody waits on it any more.
        assert_eq!(unsafe { (api.destroy)(barrier.ptr()) }, 0);
    }
}

use crate::futex::{
    FUTEX_CMP_REQUEUE, FUTEX_LOCK_PI, FUTEX_REQUEUE, FUTEX_UNLOCK_PI, FUTEX_WAIT,
    FUTEX_WAIT_BITSET, FUTEX_WAKE, FUTEX_WAKE_BITSET, FUTEX_WAKE_OP,
};

/// The futex flag for process-private futexes (`linux/futex.h`).
const FUTEX_PRIVATE: c_long = 128;
const MATCH_ANY: c_long = 0xffff_ffff;
/// `FUTEX_OP(FUTEX_OP_SET, 1, FUTEX_OP_CMP_EQ, 0)`: set the second word to 1, and wake its
/// waiters if it was 0.
const SET_1_IF_WAS_0: c_long = 1 << 12;

/// A `syscall` with all six arguments, through our function or glibc's.
fn syscall_of(ours: bool, n: c_long, a: [c_long; 6]) -> (c_long, c_int) {
    let [a1, a2, a3, a4, a5, a6] = a;
    // SAFETY: the tests pass arguments that suit system call `n` (futex words that live
    // across the call, null or valid timespecs), or calls that only fail.
    with_errno(|| unsafe {
        if ours {
            crate::futex::syscall(n, a1, a2, a3, a4, a5, a6)
        } else {
            real::syscall()(n, a1, a2, a3, a4, a5, a6)
        }
    })
}

/// Per side, a futex word and a second one (the requeue and wake-op target).
struct FutexSide {
    words: Raw<[u32; 2]>,
}

impl FutexSide {
    fn addr(&self, i: usize) -> c_long {
        // SAFETY: in bounds of the two-word array.
        unsafe { (self.words.ptr() as *mut u32).add(i) as c_long }
    }
}

#[test]
fn futex_calls_through_syscall_answer_as_glibc_does() {
    assert_unprofiled();
    let sides = [
        FutexSide {
            words: Raw::zeroed(),
        },
        FutexSide {
            words: Raw::zeroed(),
        },
    ];
    let tiny = ts(0, 1_000); // relative: 1 µs
    let past = PAST;
    let (tiny, past) = (
        &tiny as *const timespec as c_long,
        &past as *const timespec as c_long,
    );
    let me = gettid() as c_long;
    // (op, val, timeout or val2, uaddr2 is word 1, val3), expected (result, errno)
    type Case = (c_long, c_long, c_long, bool, c_long);
    let cases: &[(&str, Case, (c_long, c_int))] = &[
        (
            "wait, value changed",
            (FUTEX_WAIT, 7, 0, false, 0),
            (-1, EAGAIN),
        ),
        (
            "private wait, value changed",
            (FUTEX_WAIT | FUTEX_PRIVATE, 7, 0, false, 0),
            (-1, EAGAIN),
        ),
        (
            "wait, timed out",
            (FUTEX_WAIT, 0, tiny, false, 0),
            (-1, ETIMEDOUT),
        ),
        (
            "bitset wait, past",
            (FUTEX_WAIT_BITSET, 0, past, false, MATCH_ANY),
            (-1, ETIMEDOUT),
        ),
        (
            "bitset wait, empty set",
            (FUTEX_WAIT_BITSET, 0, past, false, 0),
            (-1, EINVAL),
        ),
        (
            "wake, nobody",
            (FUTEX_WAKE, 1, 0, false, 0),
            (0, ERRNO_SENTINEL),
        ),
        (
            "private wake, nobody",
            (FUTEX_WAKE | FUTEX_PRIVATE, i32::MAX as c_long, 0, false, 0),
            (0, ERRNO_SENTINEL),
        ),
        (
            "bitset wake",
            (FUTEX_WAKE_BITSET, 1, 0, false, MATCH_ANY),
            (0, ERRNO_SENTINEL),
        ),
        (
            "wake op",
            (FUTEX_WAKE_OP, 1, 1, true, SET_1_IF_WAS_0),
            (0, ERRNO_SENTINEL),
        ),
        (
            "requeue",
            (FUTEX_REQUEUE, 1, 1, true, 0),
            (0, ERRNO_SENTINEL),
        ),
        (
            "cmp requeue, value changed",
            (FUTEX_CMP_REQUEUE, 1, 1, true, 9),
            (-1, EAGAIN),
        ),
        (
            "cmp requeue",
            (FUTEX_CMP_REQUEUE, 1, 1, true, 0),
            (0, ERRNO_SENTINEL),
        ),
        (
            "lock pi",
            (FUTEX_LOCK_PI, 0, 0, false, 0),
            (0, ERRNO_SENTINEL),
        ),
        (
            "lock pi, own",
            (FUTEX_LOCK_PI, 0, 0, false, 0),
            (-1, EDEADLK),
        ),
        (
            "unlock pi",
            (FUTEX_UNLOCK_PI, 0, 0, false, 0),
            (0, ERRNO_SENTINEL),
        ),
        (
            "unlock pi, not owner",
            (FUTEX_UNLOCK_PI, 0, 0, false, 0),
            (-1, libc::EPERM),
        ),
        (
            "no such operation",
            (99, 0, 0, false, 0),
            (-1, libc::ENOSYS),
        ),
    ];
    for &(what, (op, val, timeout, second, val3), expected) in cases {
        let mut results = Vec::new();
        for (i, side) in sides.iter().enumerate() {
            let uaddr2 = if second { side.addr(1) } else { 0 };
            let args = [side.addr(0), op, val, timeout, uaddr2, val3];
            results.push(syscall_of(i == 0, libc::SYS_futex, args));
        }
        assert_eq!(results[0], results[1], "{what}: ours vs glibc's");
        assert_eq!(results[0], expected, "{what}");
        // SAFETY: the words are plain memory no other thread uses.
        let words = sides.each_ref().map(|s| unsafe { *s.words.ptr() });
        assert_eq!(words[0], words[1], "{what}: futex words");
        if what == "lock pi" {
            assert_eq!(
                words[0][0] as c_long, me,
                "the PI lock word holds the owner"
            );
        }
        if what == "wake op" {
            assert_eq!(words[0][1], 1, "the wake op set the second word");
        }
    }
    // A misaligned address.
    let results = sides.each_ref().map(|s| {
        syscall_of(
            std::ptr::eq(s, &sides[0]),
            libc::SYS_futex,
            [s.addr(0) + 1, FUTEX_WAKE, 1, 0, 0, 0],
        )
    });
    assert_eq!(results, [(-1, EINVAL); 2]);
    // Other system calls pass through unchanged.
    for ours in [true, false] {
        assert_eq!(
            syscall_of(ours, libc::SYS_gettid, [0; 6]),
            (me, ERRNO_SENTINEL)
        );
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() } as c_long;
        assert_eq!(
            syscall_of(ours, libc::SYS_getpid, [0; 6]),
            (pid, ERRNO_SENTINEL)
        );
        assert_eq!(
            syscall_of(ours, libc::SYS_close, [-1, 0, 0, 0, 0, 0]),
            (-1, libc::EBADF)
        );
        assert_eq!(syscall_of(ours, 100_000, [0; 6]), (-1, libc::ENOSYS));
    }
}

/// A thread blocked in a futex wait through our `syscall` is woken by a wake through it.
#[test]
fn a_futex_wait_is_woken_through_our_syscall() {
    let word = Raw::<u32>::zeroed();
    let addr = word.ptr() as c_long;
    let flag = |ordering| {
        // SAFETY: the word is aligned and lives for the whole test; all accesses are
        // atomic.
        unsafe { &*(word.ptr() as *const std::sync::atomic::AtomicU32) }.load(ordering)
    };
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let mut waits = 0;
            while flag(std::sync::atomic::Ordering::Acquire) == 0 {
                let r = syscall_of(true, libc::SYS_futex, [addr, FUTEX_WAIT, 0, 0, 0, 0]);
                assert!(r.0 == 0 || r == (-1, EAGAIN), "futex wait: {r:?}");
                waits += 1;
            }
            waits
        });
        while !waiter.is_finished() {
            // SAFETY: as above.
            unsafe { &*(word.ptr() as *const std::sync::atomic::AtomicU32) }
                .store(1, std::sync::atomic::Ordering::Release);
            let (woken, _) = syscall_of(true, libc::SYS_futex, [addr, FUTEX_WAKE, 1, 0, 0, 0]);
            assert!(woken == 0 || woken == 1);
            std::thread::yield_now();
        }
        waiter.join().unwrap();
    });
}

extern "C" fn returns_its_argument(arg: *mut c_void) -> *mut c_void {
    arg
}

/// Waits on the semaphore `arg` points at, then returns null.
extern "C" fn waits_for_its_semaphore(arg: *mut c_void) -> *mut c_void {
    // SAFETY: `arg` is an initialised semaphore that outlives this thread's wait.
    while unsafe { libc::sem_wait(arg as *mut sem_t) } != 0 {}
    null_mut()
}

/// A thread created with glibc's `pthread_create` running `routine(arg)`.
fn spawn_raw(
    routine: extern "C" fn(*mut c_void) -> *mut c_void,
    arg: *mut c_void,
) -> libc::pthread_t {
    let mut thread: libc::pthread_t = 0;
    // SAFETY: `thread` is writable; null attributes; `routine` takes `arg` as it expects.
    let rc = unsafe { real::pthread_create()(&mut thread, null(), routine, arg) };
    assert_eq!(rc, 0);
    thread
}

#[test]
fn joins_answer_as_glibc_does() {
    assert_unprofiled();
    type Join = unsafe extern "C" fn(libc::pthread_t, *mut *mut c_void) -> c_int;
    type TimedJoin =
        unsafe extern "C" fn(libc::pthread_t, *mut *mut c_void, *const timespec) -> c_int;
    type ClockJoin = unsafe extern "C" fn(
        libc::pthread_t,
        *mut *mut c_void,
        libc::clockid_t,
        *const timespec,
    ) -> c_int;
    let sides: [(Join, TimedJoin, ClockJoin); 2] = [
        (
            crate::threads::pthread_join,
            crate::threads::pthread_timedjoin_np,
            crate::threads::pthread_clockjoin_np,
        ),
        (
            real::pthread_join(),
            real::pthread_timedjoin_np(),
            real::pthread_clockjoin_np(),
        ),
    ];
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() };
    let blocker = Raw::<sem_t>::zeroed();
    // SAFETY: a fresh semaphore.
    assert_eq!(unsafe { libc::sem_init(blocker.ptr(), 0, 0) }, 0);
    let running = spawn_raw(waits_for_its_semaphore, blocker.ptr().cast());
    let detached = spawn_raw(waits_for_its_semaphore, blocker.ptr().cast());
    // SAFETY: `detached` is running (it waits for the semaphore).
    assert_eq!(unsafe { libc::pthread_detach(detached) }, 0);
    let mut answers = Vec::new();
    for (join, timedjoin, clockjoin) in sides {
        let mut ret = null_mut();
        // SAFETY: `running` and `detached` run until the semaphore is posted below, so
        // they stay valid to name; none of these calls waits.
        answers.push(unsafe {
            [
                join(me, &mut ret),
                timedjoin(me, &mut ret, &PAST),
                timedjoin(running, &mut ret, &PAST),
                clockjoin(running, &mut ret, libc::CLOCK_MONOTONIC, &PAST),
                clockjoin(running, &mut ret, UNSUPPORTED_CLOCK, &PAST),
                // Not with BAD_NSEC: glibc 2.36's join then retries its futex wait (EINVAL)
                // forever.
                join(detached, &mut ret),
            ]
        });
        assert!(ret.is_null(), "a failed join returned a value");
    }
    assert_eq!(answers[0], answers[1], "ours vs glibc's");
    assert_eq!(
        answers[0],
        [EDEADLK, EDEADLK, ETIMEDOUT, ETIMEDOUT, EINVAL, EINVAL]
    );
    // Every clock and deadline: glibc's clock join refuses a clock it does not wait on
    // first; else a join of the caller itself is a deadlock whatever the deadline, a
    // detached thread cannot be joined, and a running thread's join times out (not tried
    // with nanoseconds out of range, as above).
    for (sec, ns) in DEADLINES {
        let deadline = ts(sec, ns);
        for clock in CLOCKS {
            let cases = [(me, EDEADLK), (detached, EINVAL), (running, ETIMEDOUT)];
            for (thread, expected) in cases {
                if thread == running && !valid_nanoseconds(ns) {
                    continue;
                }
                let realtime = clock == libc::CLOCK_REALTIME;
                let answers = sides.map(|(_, timedjoin, clockjoin)| {
                    let mut ret = null_mut();
                    // SAFETY: as above; `deadline` lives across the calls.
                    let rcs = unsafe {
                        (
                            clockjoin(thread, &mut ret, clock, &deadline),
                            realtime.then(|| timedjoin(thread, &mut ret, &deadline)),
                        )
                    };
                    assert!(ret.is_null(), "a failed join returned a value");
                    rcs
                });
                let what = format!("join with clock {clock} until ({sec}, {ns})");
                assert_eq!(answers[0], answers[1], "{what}: ours vs glibc's");
                let (clocked, timed) = answers[0];
                let refused = if supported_clock(clock) {
                    expected
                } else {
                    EINVAL
                };
                assert_eq!(clocked, refused, "{what}");
                assert_eq!(timed.unwrap_or(expected), expected, "{what}");
            }
        }
    }
    // Joins that succeed, each side on a thread of its own.
    for (i, (join, _, _)) in sides.into_iter().enumerate() {
        let value = (0x1000 + i) as *mut c_void;
        let thread = spawn_raw(returns_its_argument, value);
        let mut ret = null_mut();
        // SAFETY: a joinable thread nobody else joins.
        assert_eq!(unsafe { join(thread, &mut ret) }, 0);
        assert_eq!(ret, value);
    }
    // SAFETY: an initialised semaphore; each post releases one waiting thread.
    unsafe {
        assert_eq!(libc::sem_post(blocker.ptr()), 0);
        assert_eq!(libc::sem_post(blocker.ptr()), 0);
    }
    // Not null: the join must store the thread's null result.
    let mut ret: *mut c_void = std::ptr::NonNull::dangling().as_ptr();
    // SAFETY: `running` is joinable and nobody else joins it.
    let rc = unsafe { crate::threads::pthread_join(running, &mut ret) };
    assert_eq!(rc, 0);
    assert!(ret.is_null());
    // The detached thread may still be waking: the semaphore must outlive it.
    std::mem::forget(blocker);
}

/// Our `pthread_create` starts threads that run their routine with its argument.
#[test]
fn our_pthread_create_runs_the_routine() {
    let value = 0x2000 as *mut c_void;
    let mut thread: libc::pthread_t = 0;
    // SAFETY: `thread` is writable; null attributes; the routine returns its argument.
    let rc =
        unsafe { crate::threads::pthread_create(&mut thread, null(), returns_its_argument, value) };
    assert_eq!(rc, 0);
    let mut ret = null_mut();
    // SAFETY: a joinable thread nobody else joins.
    assert_eq!(unsafe { real::pthread_join()(thread, &mut ret) }, 0);
    assert_eq!(ret, value);
}

/// Both sides' answers to `f`, with `errno` (preset to the sentinel) after each.
fn both_sides<R: PartialEq + std::fmt::Debug>(what: &str, f: impl Fn(bool) -> R) -> (R, c_int) {
    let ours = with_errno(|| f(true));
    let glibc = with_errno(|| f(false));
    assert_eq!(ours, glibc, "{what}: (result, errno), ours vs glibc's");
    ours
}

/// A `pollfd` asking whether `fd` is readable.
fn readable(fd: c_int) -> [libc::pollfd; 1] {
    [libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }]
}

/// An `fd_set` holding `fd`.
fn fd_set_of(fd: c_int) -> libc::fd_set {
    // SAFETY: an all-zero fd_set is a valid, empty set.
    let mut set: libc::fd_set = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid fd_set and `fd` (a fresh pipe's) is below FD_SETSIZE.
    unsafe { libc::FD_SET(fd, &mut set) };
    set
}

#[test]
fn waits_answer_as_glibc_does() {
    assert_unprofiled();
    let ok = (0, ERRNO_SENTINEL);
    let zero = ts(0, 0);
    let mono = libc::CLOCK_MONOTONIC;

    let nanosleep = |t: timespec| {
        move |ours: bool| {
            let f = if ours {
                crate::waits::nanosleep
            } else {
                real::nanosleep()
            };
            // SAFETY: `t` lives for the call and the remainder may be null; a zero or
            // invalid duration returns at once.
            unsafe { f(&t, null_mut()) }
        }
    };
    assert_eq!(both_sides("nanosleep 0", nanosleep(zero)), ok);
    assert_eq!(
        both_sides("nanosleep bad", nanosleep(BAD_NSEC)),
        (-1, EINVAL)
    );
    assert_eq!(
        both_sides("nanosleep negative", nanosleep(ts(-1, 0))),
        (-1, EINVAL)
    );
    let clock_nanosleep = |clock, flags, t: timespec| {
        move |ours: bool| {
            let f = if ours {
                crate::waits::clock_nanosleep
            } else {
                real::clock_nanosleep()
            };
            // SAFETY: as for nanosleep; a past absolute time returns at once too.
            unsafe { f(clock, flags, &t, null_mut()) }
        }
    };
    // clock_nanosleep returns its error; errno stays.
    assert_eq!(
        both_sides("clock_nanosleep 0", clock_nanosleep(mono, 0, zero)),
        ok
    );
    assert_eq!(
        both_sides(
            "clock_nanosleep past",
            clock_nanosleep(mono, libc::TIMER_ABSTIME, PAST)
        ),
        ok
    );
    assert_eq!(
        both_sides("clock_nanosleep bad", clock_nanosleep(mono, 0, BAD_NSEC)),
        (EINVAL, ERRNO_SENTINEL)
    );
    assert_eq!(
        both_sides(
            "clock_nanosleep on a thread's CPU clock",
            clock_nanosleep(libc::CLOCK_THREAD_CPUTIME_ID, 0, zero)
        ),
        (EINVAL, ERRNO_SENTINEL)
    );
    let usleep = |ours: bool| {
        let f = if ours {
            crate::waits::usleep
        } else {
            real::usleep()
        };
        // SAFETY: no pointers; a zero sleep returns at once.
        unsafe { f(0) }
    };
    assert_eq!(both_sides("usleep 0", usleep), ok);
    let sleep = |ours: bool| {
        let f = if ours {
            crate::waits::sleep
        } else {
            real::sleep()
        };
        // SAFETY: no pointers; a zero sleep returns at once.
        unsafe { f(0) }
    };
    assert_eq!(both_sides("sleep 0", sleep), (0, ERRNO_SENTINEL));

    // A pipe with a byte to read: poll, ppoll, select and pselect see it at once.
    let mut fds = [0; 2];
    // SAFETY: `fds` is writable for two descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: writes one byte from a valid buffer to the pipe just made.
    assert_eq!(unsafe { libc::write(fds[1], b"x".as_ptr().cast(), 1) }, 1);
    let poll = |nfds| {
        move |ours: bool| {
            let f = if ours {
                crate::waits::poll
            } else {
                real::poll()
            };
            let mut p = readable(fds[0]);
            // SAFETY: `p` holds `nfds` (at most one) pollfds; a zero timeout never waits.
            let rc = unsafe { f(p.as_mut_ptr(), nfds, 0) };
            (rc, p[0].revents)
        }
    };
    assert_eq!(
        both_sides("poll, readable", poll(1)),
        ((1, libc::POLLIN), ERRNO_SENTINEL)
    );
    assert_eq!(
        both_sides("poll, no fds", poll(0)),
        ((0, 0), ERRNO_SENTINEL)
    );
    // SAFETY: an all-zero sigset_t is a valid, empty set.
    let empty: libc::sigset_t = unsafe { std::mem::zeroed() };
    let ppoll = |mask: bool| {
        move |ours: bool| {
            let f = if ours {
                crate::waits::ppoll
            } else {
                real::ppoll()
            };
            let mut p = readable(fds[0]);
            let mask = if mask { &empty as *const _ } else { null() };
            // SAFETY: one valid pollfd, a zero timeout that lives for the call, and a null
            // or valid signal mask.
            let rc = unsafe { f(p.as_mut_ptr(), 1, &zero, mask) };
            (rc, p[0].revents)
        }
    };
    assert_eq!(
        both_sides("ppoll", ppoll(false)),
        ((1, libc::POLLIN), ERRNO_SENTINEL)
    );
    assert_eq!(
        both_sides("ppoll, mask", ppoll(true)),
        ((1, libc::POLLIN), ERRNO_SENTINEL)
    );
    let select = |nfds: c_int| {
        move |ours: bool| {
            let f = if ours {
                crate::waits::select
            } else {
                real::select()
            };
            let mut r = fd_set_of(fds[0]);
            let mut t = libc::timeval {
                tv_sec: 0,
                tv_usec: 0,
            };
            // SAFETY: a valid read set and a zero timeout, both live for the call; the other
            // sets may be null.
            let rc = unsafe { f(nfds, &mut r, null_mut(), null_mut(), &mut t) };
            // SAFETY: `r` is a valid fd_set.
            (rc, unsafe { libc::FD_ISSET(fds[0], &r) })
        }
    };
    assert_eq!(
        both_sides("select", select(fds[0] + 1)),
        ((1, true), ERRNO_SENTINEL)
    );
    assert_eq!(both_sides("select, bad nfds", select(-1)).1, EINVAL);
    let pselect = |ours: bool| {
        let f = if ours {
            crate::waits::pselect
        } else {
            real::pselect()
        };
        let mut r = fd_set_of(fds[0]);
        // SAFETY: as for select, with a null mask.
        unsafe { f(fds[0] + 1, &mut r, null_mut(), null_mut(), &zero, null()) }
    };
    assert_eq!(both_sides("pselect", pselect), (1, ERRNO_SENTINEL));

    // epoll: a bad descriptor, and an empty set.
    // SAFETY: creates a descriptor, closed below.
    let epfd = unsafe { libc::epoll_create1(0) };
    assert!(epfd >= 0);
    let epoll_wait = |fd: c_int| {
        move |ours: bool| {
            let f = if ours {
                crate::waits::epoll_wait
            } else {
                real::epoll_wait()
            };
            let mut events = [libc::epoll_event { events: 0, u64: 0 }];
            // SAFETY: room for one event; a zero timeout never waits.
            unsafe { f(fd, events.as_mut_ptr(), 1, 0) }
        }
    };
    let epoll_pwait = |fd: c_int| {
        move |ours: bool| {
            let f = if ours {
                crate::waits::epoll_pwait
            } else {
                real::epoll_pwait()
            };
            let mut events = [libc::epoll_event { events: 0, u64: 0 }];
            // SAFETY: as for epoll_wait, with a null mask.
            unsafe { f(fd, events.as_mut_ptr(), 1, 0, null()) }
        }
    };
    assert_eq!(
        both_sides("epoll_wait, bad fd", epoll_wait(-1)),
        (-1, libc::EBADF)
    );
    assert_eq!(both_sides("epoll_wait, empty", epoll_wait(epfd)), ok);
    assert_eq!(
        both_sides("epoll_pwait, bad fd", epoll_pwait(-1)),
        (-1, libc::EBADF)
    );
    assert_eq!(both_sides("epoll_pwait, empty", epoll_pwait(epfd)), ok);
    // glibc 2.35 on: resolved at the first call, and only compared where glibc has it.
    if let Some(real_pwait2) = real::epoll_pwait2() {
        let epoll_pwait2 = |fd: c_int| {
            move |ours: bool| {
                let f = if ours {
                    crate::waits::epoll_pwait2
                } else {
                    real_pwait2
                };
                let mut events = [libc::epoll_event { events: 0, u64: 0 }];
                let zero = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // SAFETY: room for one event; a zero timeout never waits; a null mask.
                unsafe { f(fd, events.as_mut_ptr(), 1, &zero, null()) }
            }
        };
        assert_eq!(
            both_sides("epoll_pwait2, bad fd", epoll_pwait2(-1)),
            (-1, libc::EBADF)
        );
        assert_eq!(both_sides("epoll_pwait2, empty", epoll_pwait2(epfd)), ok);
    }
    for fd in [epfd, fds[0], fds[1]] {
        // SAFETY: closes a descriptor opened above, used no more.
        assert_eq!(unsafe { libc::close(fd) }, 0);
    }
}

/// The signal waits return at once for a signal already pending. On a thread of its own,
/// which blocks SIGUSR2 and sends it to itself before each call (a blocked signal is
/// never delivered, so the process needs no handler).
#[test]
fn signal_waits_answer_as_glibc_does() {
    std::thread::spawn(|| {
        // SAFETY: an all-zero sigset_t is a valid, empty set.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a valid set; the mask change is this thread's only.
        let rc = unsafe {
            libc::sigaddset(&mut set, libc::SIGUSR2);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, null_mut())
        };
        assert_eq!(rc, 0);
        let raise = || {
            // SAFETY: sends this thread a signal it blocks.
            let rc = unsafe { libc::tgkill(libc::getpid(), gettid(), libc::SIGUSR2) };
            assert_eq!(rc, 0);
        };
        let zero = ts(0, 0);
        let sigtimedwait = |pending: bool| {
            move |ours: bool| {
                let f = if ours {
                    crate::waits::sigtimedwait
                } else {
                    real::sigtimedwait()
                };
                if pending {
                    raise();
                }
                // SAFETY: an all-zero siginfo_t is a valid value to overwrite.
                let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
                // SAFETY: `set`, `info` and `zero` are valid for the call; with the signal
                // pending or a zero timeout it returns at once.
                let rc = unsafe { f(&set, &mut info, &zero) };
                (rc, info.si_signo)
            }
        };
        assert_eq!(
            both_sides("sigtimedwait, pending", sigtimedwait(true)),
            ((libc::SIGUSR2, libc::SIGUSR2), ERRNO_SENTINEL)
        );
        assert_eq!(
            both_sides("sigtimedwait, none", sigtimedwait(false)),
            ((-1, 0), EAGAIN)
        );
        let sigwaitinfo = |ours: bool| {
            let f = if ours {
                crate::waits::sigwaitinfo
            } else {
                real::sigwaitinfo()
            };
            raise();
            // SAFETY: an all-zero siginfo_t is a valid value to overwrite.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: `set` and `info` are valid; the signal is pending, so no wait.
            let rc = unsafe { f(&set, &mut info) };
            (rc, info.si_signo)
        };
        assert_eq!(
            both_sides("sigwaitinfo", sigwaitinfo),
            ((libc::SIGUSR2, libc::SIGUSR2), ERRNO_SENTINEL)
        );
        let sigwait = |ours: bool| {
            let f = if ours {
                crate::waits::sigwait
            } else {
                real::sigwait()
            };
            raise();
            let mut sig = 0;
            // SAFETY: `set` and `sig` are valid; the signal is pending, so no wait.
            let rc = unsafe { f(&set, &mut sig) };
            (rc, sig)
        };
        assert_eq!(
            both_sides("sigwait", sigwait),
            ((0, libc::SIGUSR2), ERRNO_SENTINEL)
        );
    })
    .join()
    .unwrap();
}

#[test]
fn sigaction_dlopen_and_failed_execs_answer_as_glibc_does() {
    assert_unprofiled();
    // sigaction: reading a disposition (changing one would touch the whole test process).
    let sigaction = |sig: c_int| {
        move |ours: bool| {
            let f = if ours {
                crate::sigaction
            } else {
                real::sigaction()
            };
            // SAFETY: an all-zero sigaction is a valid value to overwrite.
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: a null new action (read only) and a writable old one.
            let rc = unsafe { f(sig, null(), &mut old) };
            (rc, old.sa_sigaction, old.sa_flags)
        }
    };
    for sig in [libc::SIGUSR1, libc::SIGSEGV, libc::SIGRTMIN() + 8] {
        assert_eq!(both_sides("sigaction", sigaction(sig)).0 .0, 0);
    }
    assert_eq!(
        both_sides("sigaction, no such signal", sigaction(0)).1,
        EINVAL
    );

    // dlopen: the same handle for a library, and the same failure for a missing one.
    let dlopen = |name: &'static std::ffi::CStr| {
        move |ours: bool| {
            let f = if ours { crate::dlopen } else { real::dlopen() };
            // SAFETY: a NUL-terminated name; the library loaded is libc's own libm, whose
            // constructors are harmless.
            unsafe { f(name.as_ptr(), libc::RTLD_NOW) as usize }
        }
    };
    let handle = both_sides("dlopen libm", dlopen(c"libm.so.6")).0;
    assert_ne!(handle, 0);
    for close in [crate::dlclose, real::dlclose()] {
        // SAFETY: drops one of the two references taken above.
        assert_eq!(unsafe { close(handle as *mut c_void) }, 0);
    }
    assert_eq!(
        both_sides("dlopen missing", dlopen(c"/nonexistent/libnothing.so")).0,
        0
    );

    // exec: failures come back with glibc's errno (success would end the test process).
    let argv: [*const c_char; 2] = [c"blameprof-missing".as_ptr(), null()];
    let envp: [*const c_char; 1] = [null()];
    let (argv, envp) = (argv.as_ptr(), envp.as_ptr());
    let missing = c"/nonexistent/blameprof-missing".as_ptr();
    let not_on_path = c"blameprof-no-such-program".as_ptr();
    let enoent = (-1, libc::ENOENT);
    let execve = |ours: bool| {
        let f = if ours { crate::execve } else { real::execve() };
        // SAFETY: a NUL-terminated path and null-terminated vectors that live for the
        // call, which fails (no such file).
        unsafe { f(missing, argv, envp) }
    };
    assert_eq!(both_sides("execve", execve), enoent);
    let execv = |ours: bool| {
        let f = if ours { crate::execv } else { real::execv() };
        // SAFETY: as for execve.
        unsafe { f(missing, argv) }
    };
    assert_eq!(both_sides("execv", execv), enoent);
    let execvp = |ours: bool| {
        let f = if ours { crate::execvp } else { real::execvp() };
        // SAFETY: as for execve; no program of that name is on any PATH.
        unsafe { f(not_on_path, argv) }
    };
    assert_eq!(both_sides("execvp", execvp), enoent);
    let execvpe = |ours: bool| {
        let f = if ours {
            crate::execvpe
        } else {
            real::execvpe()
        };
        // SAFETY: as for execvp.
        unsafe { f(not_on_path, argv, envp) }
    };
    assert_eq!(both_sides("execvpe", execvpe), enoent);
    let fexecve = |ours: bool| {
        let f = if ours {
            crate::fexecve
        } else {
            real::fexecve()
        };
        // SAFETY: as for execve, on no descriptor at all.
        unsafe { f(-1, argv, envp) }
    };
    let (rc, err) = both_sides("fexecve", fexecve);
    assert_eq!(rc, -1);
    assert_ne!(err, ERRNO_SENTINEL);

    // The variadic ones: ours are naked jumps into C (exec_variadic.rs), reached here the
    // way a program reaches them, through the symbol.
    type Execl = unsafe extern "C" fn(*const c_char, *const c_char, ...) -> c_int;
    let glibc_execl = |name| {
        // SAFETY: glibc's execl and execlp have this C signature.
        unsafe { std::mem::transmute::<usize, Execl>(glibc_symbol(name)) }
    };
    let arg0 = c"blameprof-missing".as_ptr();
    for (ours, glibc, file) in [
        (libc::execl as Execl, glibc_execl(c"execl"), missing),
        (libc::execlp as Execl, glibc_execl(c"execlp"), not_on_path),
    ] {
        let exec = |ours_side: bool| {
            let f = if ours_side { ours } else { glibc };
            // SAFETY: as for execve, the argument list ending with a null pointer.
            unsafe { f(file, arg0, null::<c_char>()) }
        };
        assert_eq!(both_sides("execl/execlp", exec), enoent);
    }
}
