//! Interposed condition variables (`pthread_cond_*`, glibc's 2.3.2 ABI): thin entry points
//! over `blameprof_measure::policy`.
//!
//! A waiter's wait for the signal is condvar idleness blamed on the signalling context; its
//! retake of the mutex afterwards is mutex idleness blamed on the mutex's holder; and the
//! wait ends the caller's own hold of the mutex (glibc releases it internally), so that
//! hold's blame is taken at the wait. glibc does all the real work, so semantics and return
//! codes are unchanged.

use crate::init_site::export_with_site;
use crate::real;
use blameprof_measure::policy;
use libc::{c_int, pthread_cond_t, pthread_mutex_t, timespec};

/// # Safety
/// Same contract as `pthread_cond_wait(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_cond_wait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
) -> c_int {
    // SAFETY: forwarding the caller's arguments to glibc unchanged.
    policy::cond_wait(c as usize, m as usize, || unsafe {
        real::pthread_cond_wait()(c, m)
    })
}

/// # Safety
/// Same contract as `pthread_cond_timedwait(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_cond_timedwait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    abstime: *const timespec,
) -> c_int {
    // SAFETY: forwarding the caller's arguments to glibc unchanged.
    policy::cond_wait(c as usize, m as usize, || unsafe {
        real::pthread_cond_timedwait()(c, m, abstime)
    })
}

/// # Safety
/// Same contract as `pthread_cond_clockwait(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_cond_clockwait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    clock: libc::clockid_t,
    abstime: *const timespec,
) -> c_int {
    // SAFETY: forwarding the caller's arguments to glibc unchanged.
    policy::cond_wait(c as usize, m as usize, || unsafe {
        real::pthread_cond_clockwait()(c, m, clock, abstime)
    })
}

/// # Safety
/// Same contract as `pthread_cond_signal(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_cond_signal(c: *mut pthread_cond_t) -> c_int {
    // SAFETY: forwarding the caller's condition variable to glibc unchanged.
    policy::cond_wake(c as usize, 1, || unsafe { real::pthread_cond_signal()(c) })
}

/// # Safety
/// Same contract as `pthread_cond_broadcast(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_cond_broadcast(c: *mut pthread_cond_t) -> c_int {
    // SAFETY: forwarding the caller's condition variable to glibc unchanged.
    policy::cond_wake(c as usize, u32::MAX, || unsafe {
        real::pthread_cond_broadcast()(c)
    })
}

export_with_site! {
    /// # Safety
    /// Same contract as `pthread_cond_init(3)`.
    pthread_cond_init(c: *mut pthread_cond_t, attr: *const libc::pthread_condattr_t)
        => cond_init_at, "rdx"
}

/// `pthread_cond_init` called from `site`.
///
/// # Safety
/// Same contract as `pthread_cond_init(3)`.
unsafe extern "C" fn cond_init_at(
    c: *mut pthread_cond_t,
    attr: *const libc::pthread_condattr_t,
    site: usize,
) -> c_int {
    policy::lock_initialised(c as usize, site);
    // SAFETY: forwarding the caller's arguments to glibc unchanged.
    unsafe { real::pthread_cond_init()(c, attr) }
}

/// # Safety
/// Same contract as `pthread_cond_destroy(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_cond_destroy(c: *mut pthread_cond_t) -> c_int {
    policy::forget(c as usize);
    // SAFETY: forwarding the caller's condition variable to glibc unchanged.
    unsafe { real::pthread_cond_destroy()(c) }
}
