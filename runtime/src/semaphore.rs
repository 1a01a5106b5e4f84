//! Interposed POSIX semaphores (`sem_*`): thin entry points over
//! `blameprof_measure::policy`.
//!
//! A wait first tries (`sem_trywait`); only when the count is zero is it measured around the
//! real wait, which runs with the sampling signal blocked (a semaphore wait fails with
//! `EINTR` whenever a handler runs, whatever `SA_RESTART` says). The waiting is blamed on
//! the `sem_post` that ends it.
//!
//! Before the try, what glibc checks before it looks at the count ([`Checks`]): a timed
//! wait whose clock or deadline glibc refuses is glibc's at once, without the try
//! ([`timeouts`](crate::timeouts)); and `sem_wait` and `sem_timedwait` act on a pending
//! cancellation request first, as glibc's do (a try would take a unit, and the thread would
//! be cancelled later, somewhere else).

use crate::init_site::export_with_site;
use crate::real;
#[cfg(test)]
use crate::tests::support::sampling_enabled;
use crate::timeouts;
use blameprof_format::WaitKind;
use blameprof_measure::policy;
#[cfg(not(test))]
use blameprof_measure::sampler::process::sampling_enabled;
use blameprof_measure::sampler::quiet::Quiet;
use libc::{c_int, sem_t, timespec};

fn errno() -> *mut c_int {
    // SAFETY: __errno_location returns the calling thread's errno slot; always valid.
    unsafe { libc::__errno_location() }
}

/// What glibc's wait checks before it looks at the count (glibc 2.36).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Checks {
    /// A pending cancellation request, which ends the thread (`sem_wait`, and
    /// `sem_timedwait` with a valid deadline).
    Cancellation,
    /// Nothing (`sem_clockwait` with a valid clock and deadline: its only cancellation
    /// point is its sleep).
    Nothing,
    /// The clock or the deadline, which it refuses: the wait ends there.
    Refused,
}

/// A wait: `sem_trywait` first, after the `checks` glibc makes first; when the count is
/// zero, `block` measured and quiet. Refused, `block` is called as is.
fn wait(sem: *mut sem_t, checks: Checks, block: impl FnOnce() -> c_int) -> c_int {
    if !sampling_enabled() || checks == Checks::Refused {
        let _quiet = Quiet::new();
        return block();
    }
    if checks == Checks::Cancellation {
        // SAFETY: no preconditions. With a request pending, the thread ends here, by an
        // unwind through frames that hold nothing (none of the runtime's locks or guards),
        // where glibc's wait would have ended it.
        unsafe { real::pthread_testcancel()() };
    }
    // SAFETY: reading and restoring the thread's own errno around the try.
    let saved = unsafe { *errno() };
    // SAFETY: forwarding the caller's semaphore to glibc unchanged.
    if unsafe { real::sem_trywait()(sem) } == 0 {
        return 0;
    }
    // SAFETY: as above.
    let busy = unsafe { *errno() } == libc::EAGAIN;
    // SAFETY: as above: the try's EAGAIN is not the program's business.
    unsafe { *errno() = saved };
    let quiet_block = || {
        let _quiet = Quiet::new();
        block()
    };
    if !busy {
        return quiet_block();
    }
    policy::wait(sem as usize, WaitKind::Semaphore, quiet_block, |rc, err| {
        policy::outcome_of_errno(i64::from(rc), err)
    })
}

/// # Safety
/// Same contract as `sem_wait(3)`.
#[no_mangle]
pub unsafe extern "C" fn sem_wait(sem: *mut sem_t) -> c_int {
    // SAFETY: forwarding the caller's semaphore unchanged.
    wait(sem, Checks::Cancellation, || unsafe {
        real::sem_wait()(sem)
    })
}

/// Whether glibc's timed wait on `clock` until `abstime` ends before it looks at the
/// semaphore: EINVAL for a clock it does not wait on or nanoseconds out of range, and a
/// fault for a null deadline on a clock it accepts.
///
/// # Safety
/// `abstime` must be null or point at a readable timespec.
unsafe fn refused(clock: libc::clockid_t, abstime: *const timespec) -> bool {
    // SAFETY: a non-null `abstime` is readable (this function's contract).
    !timeouts::supported_clock(clock)
        || abstime.is_null()
        || !unsafe { timeouts::valid_nanoseconds(abstime) }
}

/// # Safety
/// Same contract as `sem_timedwait(3)`.
#[no_mangle]
pub unsafe extern "C" fn sem_timedwait(sem: *mut sem_t, abstime: *const timespec) -> c_int {
    // SAFETY: `abstime` is null or readable (this function's contract).
    let checks = match unsafe { refused(libc::CLOCK_REALTIME, abstime) } {
        true => Checks::Refused,
        false => Checks::Cancellation,
    };
    // SAFETY: forwarding the caller's arguments unchanged.
    wait(sem, checks, || unsafe {
        real::sem_timedwait()(sem, abstime)
    })
}

/// # Safety
/// Same contract as `sem_clockwait(3)`.
#[no_mangle]
pub unsafe extern "C" fn sem_clockwait(
    sem: *mut sem_t,
    clock: libc::clockid_t,
    abstime: *const timespec,
) -> c_int {
    // SAFETY: `abstime` is null or readable (this function's contract).
    let checks = match unsafe { refused(clock, abstime) } {
        true => Checks::Refused,
        false => Checks::Nothing,
    };
    // SAFETY: forwarding the caller's arguments unchanged.
    wait(sem, checks, || unsafe {
        real::sem_clockwait()(sem, clock, abstime)
    })
}

/// # Safety
/// Same contract as `sem_post(3)`.
#[no_mangle]
pub unsafe extern "C" fn sem_post(sem: *mut sem_t) -> c_int {
    policy::event(
        sem as usize,
        WaitKind::Semaphore,
        1,
        // SAFETY: forwarding the caller's semaphore unchanged.
        || unsafe { real::sem_post()(sem) },
        |rc| rc == 0,
    )
}

export_with_site! {
    /// # Safety
    /// Same contract as `sem_init(3)`.
    sem_init(sem: *mut sem_t, pshared: c_int, value: libc::c_uint) => sem_init_at, "rcx"
}

/// `sem_init` called from `site`.
///
/// # Safety
/// Same contract as `sem_init(3)`.
unsafe extern "C" fn sem_init_at(
    sem: *mut sem_t,
    pshared: c_int,
    value: libc::c_uint,
    site: usize,
) -> c_int {
    policy::lock_initialised(sem as usize, site);
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { real::sem_init()(sem, pshared, value) }
}

/// # Safety
/// Same contract as `sem_destroy(3)`.
#[no_mangle]
pub unsafe extern "C" fn sem_destroy(sem: *mut sem_t) -> c_int {
    policy::forget(sem as usize);
    // SAFETY: forwarding the caller's semaphore unchanged.
    unsafe { real::sem_destroy()(sem) }
}
