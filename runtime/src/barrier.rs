//! Interposed barriers (`pthread_barrier_*`): thin entry points over
//! `blameprof_measure::policy`.
//!
//! The runtime learns each barrier's size at `pthread_barrier_init`; in every round the
//! last thread to arrive takes the others' waiting as blame, at its own call of
//! `pthread_barrier_wait`. glibc does the real synchronisation.

use crate::init_site::export_with_site;
use crate::real;
use blameprof_measure::policy;
use libc::{c_int, c_uint, pthread_barrier_t, pthread_barrierattr_t};

export_with_site! {
    /// # Safety
    /// Same contract as `pthread_barrier_init(3)`.
    pthread_barrier_init(b: *mut pthread_barrier_t, attr: *const pthread_barrierattr_t, count: c_uint)
        => barrier_init_at, "rcx"
}

/// `pthread_barrier_init` called from `site`.
///
/// # Safety
/// Same contract as `pthread_barrier_init(3)`.
unsafe extern "C" fn barrier_init_at(
    b: *mut pthread_barrier_t,
    attr: *const pthread_barrierattr_t,
    count: c_uint,
    site: usize,
) -> c_int {
    // SAFETY: forwarding the caller's arguments to glibc unchanged.
    let rc = unsafe { real::pthread_barrier_init()(b, attr, count) };
    if rc == 0 {
        policy::barrier_init(b as usize, count);
        policy::init_site(b as usize, site);
    }
    rc
}

/// # Safety
/// Same contract as `pthread_barrier_wait(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_barrier_wait(b: *mut pthread_barrier_t) -> c_int {
    // SAFETY: forwarding the caller's barrier to glibc unchanged.
    policy::barrier_wait(b as usize, || unsafe { real::pthread_barrier_wait()(b) })
}

/// # Safety
/// Same contract as `pthread_barrier_destroy(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_barrier_destroy(b: *mut pthread_barrier_t) -> c_int {
    policy::forget(b as usize);
    // SAFETY: forwarding the caller's barrier to glibc unchanged.
    unsafe { real::pthread_barrier_destroy()(b) }
}
