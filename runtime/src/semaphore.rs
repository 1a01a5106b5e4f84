//! Interposed POSIX semaphores (`sem_*`): thin entry points over
//! `blameprof_measure::locks::policy`.
//!
//! A wait first tries (`sem_trywait`); only when the count is zero is it measured around the
//! real wait, which runs with the sampling signal blocked (a semaphore wait fails with
//! `EINTR` whenever a handler runs, whatever `SA_RESTART` says). The waiting is blamed on
//! the `sem_post` that ends it. A timed wait whose clock or deadline glibc refuses is
//! glibc's at once, without the try: glibc checks them before it looks at the count
//! ([`timeouts`](crate::timeouts)), so a try would take a unit where glibc fails.

use crate::init_site::export_with_site;
use crate::real;
#[cfg(test)]
use crate::tests::support::sampling_enabled;
use crate::timeouts;
use blameprof_format::WaitKind;
use blameprof_measure::locks::policy;
#[cfg(not(test))]
use blameprof_measure::sampler::process::sampling_enabled;
use blameprof_measure::sampler::quiet::Quiet;
use libc::{c_int, sem_t, timespec};

fn errno() -> *mut c_int {
    // SAFETY: __errno_location returns the calling thread's errno slot; always valid.
    unsafe { libc::__errno_location() }
}

/// A wait: `sem_trywait` first; when the count is zero, `block` measured and quiet.
/// `refused`: glibc refuses the call's clock or deadline before it looks at the count;
/// `block` is then called as is.
fn wait(sem: *mut sem_t, refused: bool, block: impl FnOnce() -> c_int) -> c_int {
    if !sampling_enabled() || refused {
        let _quiet = Quiet::new();
        return block();
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
    wait(sem, false, || unsafe { real::sem_wait()(sem) })
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
    let refused = unsafe { refused(libc::CLOCK_REALTIME, abstime) };
    // SAFETY: forwarding the caller's arguments unchanged.
    wait(sem, refused, || unsafe {
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
    let refused = unsafe { refused(clock, abstime) };
    // SAFETY: forwarding the caller's arguments unchanged.
    wait(sem, refused, || unsafe {
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
