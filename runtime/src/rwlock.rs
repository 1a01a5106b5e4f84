//! Interposed reader-writer locks (`pthread_rwlock_*`): thin entry points over
//! `blameprof_measure::policy`.
//!
//! As with mutexes, an acquisition first tries (glibc's try call); only when that says
//! EBUSY is the wait measured around the real blocking call, so glibc keeps every
//! semantics and return code. A timed acquisition whose clock or deadline glibc refuses is
//! glibc's at once, without the try: glibc checks them before it looks at the lock
//! ([`timeouts`](crate::timeouts)), so a try would take a free lock where glibc fails.
//!
//! At an unlock, the releasing holder takes the waiter-time of its hold; a reader that
//! leaves other readers holding keeps the lock counted as held, so a writer blocked by
//! several readers blames each of them in turn.

use crate::init_site::export_with_site;
use crate::real;
#[cfg(test)]
use crate::tests::support::sampling_enabled;
use crate::timeouts;
use blameprof_format::WaitKind;
use blameprof_measure::policy;
use blameprof_measure::sampler::clock::current_tid;
#[cfg(not(test))]
use blameprof_measure::sampler::process::sampling_enabled;
use libc::{c_int, pthread_rwlock_t, timespec};

/// An acquisition: `try_` first; on EBUSY, `block` measured. `refused`: glibc refuses the
/// call's clock or deadline before it looks at the lock; `block` is then called as is.
fn acquire(
    rw: *mut pthread_rwlock_t,
    refused: bool,
    try_: impl FnOnce() -> c_int,
    block: impl FnOnce() -> c_int,
) -> c_int {
    if !sampling_enabled() || refused {
        return block();
    }
    match try_() {
        0 => {
            policy::acquired(rw as usize, WaitKind::RwLock);
            policy::acquisition(rw as usize, WaitKind::RwLock, false);
            0
        }
        libc::EBUSY => {
            // Once registered, marks the writer holding it (`held.contended`).
            let block = || {
                // SAFETY: `rw` is the caller's lock, which it is about to wait for.
                let owner = unsafe { writer(rw) };
                policy::waiting_behind(owner, rw as usize, WaitKind::RwLock);
                block()
            };
            let rc = policy::wait(rw as usize, WaitKind::RwLock, block, |rc, _| {
                policy::outcome_of_rc(rc)
            });
            if rc == 0 {
                policy::acquisition(rw as usize, WaitKind::RwLock, false);
            }
            rc
        }
        // EAGAIN (too many readers), EDEADLK...: glibc's blocking call decides.
        _ => block(),
    }
}

/// The end of a trylock called from `site` that returned `rc`: an acquisition, or a failure
/// to count.
fn tried(rw: *mut pthread_rwlock_t, rc: c_int, site: usize) -> c_int {
    match rc {
        0 => {
            policy::acquired(rw as usize, WaitKind::RwLock);
            policy::acquisition(rw as usize, WaitKind::RwLock, true);
        }
        libc::EBUSY => policy::try_failed(rw as usize, WaitKind::RwLock, site),
        _ => {}
    }
    rc
}

/// Whether glibc's timed acquisition on `clock` until `abstime` fails with EINVAL before it
/// looks at the lock: given a deadline (null is none), a clock it does not wait on or
/// nanoseconds out of range.
///
/// # Safety
/// `abstime` must be null or point at a readable timespec.
unsafe fn refused(clock: libc::clockid_t, abstime: *const timespec) -> bool {
    // SAFETY: a non-null `abstime` is readable (this function's contract).
    !abstime.is_null()
        && (!timeouts::supported_clock(clock) || !unsafe { timeouts::valid_nanoseconds(abstime) })
}

fn try_read(rw: *mut pthread_rwlock_t) -> impl FnOnce() -> c_int {
    // SAFETY: forwarding the caller's lock to glibc unchanged.
    move || unsafe { real::pthread_rwlock_tryrdlock()(rw) }
}

fn try_write(rw: *mut pthread_rwlock_t) -> impl FnOnce() -> c_int {
    // SAFETY: forwarding the caller's lock to glibc unchanged.
    move || unsafe { real::pthread_rwlock_trywrlock()(rw) }
}

/// # Safety
/// Same contract as `pthread_rwlock_rdlock(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_rdlock(rw: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: forwarding the caller's lock to glibc unchanged.
    acquire(rw, false, try_read(rw), || unsafe {
        real::pthread_rwlock_rdlock()(rw)
    })
}

/// # Safety
/// Same contract as `pthread_rwlock_wrlock(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_wrlock(rw: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: forwarding the caller's lock to glibc unchanged.
    acquire(rw, false, try_write(rw), || unsafe {
        real::pthread_rwlock_wrlock()(rw)
    })
}

/// # Safety
/// Same contract as `pthread_rwlock_timedrdlock(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_timedrdlock(
    rw: *mut pthread_rwlock_t,
    abstime: *const timespec,
) -> c_int {
    // SAFETY: `abstime` is null or readable (this function's contract).
    let refused = unsafe { refused(libc::CLOCK_REALTIME, abstime) };
    // SAFETY: forwarding the caller's arguments to glibc unchanged.
    acquire(rw, refused, try_read(rw), || unsafe {
        real::pthread_rwlock_timedrdlock()(rw, abstime)
    })
}

/// # Safety
/// Same contract as `pthread_rwlock_timedwrlock(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_timedwrlock(
    rw: *mut pthread_rwlock_t,
    abstime: *const timespec,
) -> c_int {
    // SAFETY: `abstime` is null or readable (this function's contract).
    let refused = unsafe { refused(libc::CLOCK_REALTIME, abstime) };
    // SAFETY: forwarding the caller's arguments to glibc unchanged.
    acquire(rw, refused, try_write(rw), || unsafe {
        real::pthread_rwlock_timedwrlock()(rw, abstime)
    })
}

/// # Safety
/// Same contract as `pthread_rwlock_clockrdlock(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_clockrdlock(
    rw: *mut pthread_rwlock_t,
    clock: libc::clockid_t,
    abstime: *const timespec,
) -> c_int {
    // SAFETY: `abstime` is null or readable (this function's contract).
    let refused = unsafe { refused(clock, abstime) };
    // SAFETY: forwarding the caller's arguments to glibc unchanged.
    acquire(rw, refused, try_read(rw), || unsafe {
        real::pthread_rwlock_clockrdlock()(rw, clock, abstime)
    })
}

/// # Safety
/// Same contract as `pthread_rwlock_clockwrlock(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_clockwrlock(
    rw: *mut pthread_rwlock_t,
    clock: libc::clockid_t,
    abstime: *const timespec,
) -> c_int {
    // SAFETY: `abstime` is null or readable (this function's contract).
    let refused = unsafe { refused(clock, abstime) };
    // SAFETY: forwarding the caller's arguments to glibc unchanged.
    acquire(rw, refused, try_write(rw), || unsafe {
        real::pthread_rwlock_clockwrlock()(rw, clock, abstime)
    })
}

export_with_site! {
    /// # Safety
    /// Same contract as `pthread_rwlock_tryrdlock(3)`.
    pthread_rwlock_tryrdlock(rw: *mut pthread_rwlock_t) => tryrdlock_at, "rsi"
}

/// `pthread_rwlock_tryrdlock` called from `site`.
///
/// # Safety
/// Same contract as `pthread_rwlock_tryrdlock(3)`.
unsafe extern "C" fn tryrdlock_at(rw: *mut pthread_rwlock_t, site: usize) -> c_int {
    tried(rw, try_read(rw)(), site)
}

export_with_site! {
    /// # Safety
    /// Same contract as `pthread_rwlock_trywrlock(3)`.
    pthread_rwlock_trywrlock(rw: *mut pthread_rwlock_t) => trywrlock_at, "rsi"
}

/// `pthread_rwlock_trywrlock` called from `site`.
///
/// # Safety
/// Same contract as `pthread_rwlock_trywrlock(3)`.
unsafe extern "C" fn trywrlock_at(rw: *mut pthread_rwlock_t, site: usize) -> c_int {
    tried(rw, try_write(rw)(), site)
}

/// The thread id of `rw`'s writer, 0 when readers hold it or nobody does (glibc's
/// `__cur_writer`, at byte 24 on x86-64).
///
/// # Safety
/// `rw` must point at a valid, initialised glibc rwlock.
unsafe fn writer(rw: *mut pthread_rwlock_t) -> i32 {
    // SAFETY: the field lies within the 56-byte pthread_rwlock_t (the caller's contract);
    // others write it meanwhile, hence the volatile read of a possibly stale value.
    unsafe { std::ptr::read_volatile((rw as *const u8).add(24) as *const i32) }
}

/// Whether the lock stays held by others after the caller's unlock: the caller is a reader
/// and other readers hold it too.
///
/// # Safety
/// `rw` must point at a valid, initialised glibc rwlock the caller holds.
unsafe fn others_hold(rw: *mut pthread_rwlock_t) -> bool {
    // glibc's x86-64 layout (its static initialiser fixes it): `__readers` at byte 0 (the
    // reader count above 3 flag bits) and `__cur_writer` (the writing owner's tid) at 24.
    // SAFETY: both fields lie within the 56-byte pthread_rwlock_t the caller holds.
    let (readers, writer) = unsafe { (std::ptr::read_volatile(rw as *const u32), writer(rw)) };
    let me = current_tid() as i32;
    writer != me && (readers >> 3) > 1
}

/// # Safety
/// Same contract as `pthread_rwlock_unlock(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_unlock(rw: *mut pthread_rwlock_t) -> c_int {
    if !blameprof_measure::locks::wait_table::maybe_dirty(rw as usize, WaitKind::RwLock) {
        // SAFETY: forwarding the caller's lock to glibc unchanged.
        return unsafe { real::pthread_rwlock_unlock()(rw) };
    }
    // SAFETY: per this function's contract, the caller holds `rw`.
    let still_held = unsafe { others_hold(rw) };
    // SAFETY: forwarding the caller's lock to glibc unchanged.
    policy::release(rw as usize, WaitKind::RwLock, still_held, || unsafe {
        real::pthread_rwlock_unlock()(rw)
    })
}

export_with_site! {
    /// # Safety
    /// Same contract as `pthread_rwlock_init(3)`.
    pthread_rwlock_init(rw: *mut pthread_rwlock_t, attr: *const libc::pthread_rwlockattr_t)
        => rwlock_init_at, "rdx"
}

/// `pthread_rwlock_init` called from `site`.
///
/// # Safety
/// Same contract as `pthread_rwlock_init(3)`.
unsafe extern "C" fn rwlock_init_at(
    rw: *mut pthread_rwlock_t,
    attr: *const libc::pthread_rwlockattr_t,
    site: usize,
) -> c_int {
    policy::lock_initialised(rw as usize, site);
    // SAFETY: forwarding the caller's arguments to glibc unchanged.
    unsafe { real::pthread_rwlock_init()(rw, attr) }
}

/// # Safety
/// Same contract as `pthread_rwlock_destroy(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_destroy(rw: *mut pthread_rwlock_t) -> c_int {
    policy::forget(rw as usize);
    // SAFETY: forwarding the caller's lock to glibc unchanged.
    unsafe { real::pthread_rwlock_destroy()(rw) }
}
mod tests;
