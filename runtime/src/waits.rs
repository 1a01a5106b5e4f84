//! Interposed waits that a signal would break (see `blameprof_measure::sampler::quiet`).
//!
//! Each wrapper holds the sampling signal blocked while the real function waits, and keeps it
//! out of masks and wait-sets the program passes, then forwards unchanged; the call is timed
//! as a blocking call, `held.blocked` when it blocks a lock others wait for
//! (`blameprof_measure::policy::blocking`). glibc's `sleep`
//! and `usleep` call its internal `nanosleep` directly, so they are wrapped too.

use crate::real;
use blameprof_measure::policy::blocking;
use blameprof_measure::sampler::quiet::{mask_with_sampling, set_without_sampling, Quiet};
use libc::{c_int, c_uint, sigset_t, timespec};

fn or_own(copy: &Option<sigset_t>, own: *const sigset_t) -> *const sigset_t {
    copy.as_ref().map_or(own, |c| c as *const sigset_t)
}

/// # Safety
/// Same contract as `nanosleep(2)`.
#[no_mangle]
pub unsafe extern "C" fn nanosleep(req: *const timespec, rem: *mut timespec) -> c_int {
    let _quiet = Quiet::new();
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { blocking(|| real::nanosleep()(req, rem)) }
}

/// # Safety
/// Same contract as `clock_nanosleep(2)`.
#[no_mangle]
pub unsafe extern "C" fn clock_nanosleep(
    clock: libc::clockid_t,
    flags: c_int,
    req: *const timespec,
    rem: *mut timespec,
) -> c_int {
    let _quiet = Quiet::new();
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { blocking(|| real::clock_nanosleep()(clock, flags, req, rem)) }
}

/// # Safety
/// Same contract as `usleep(3)`.
#[no_mangle]
pub unsafe extern "C" fn usleep(usec: libc::useconds_t) -> c_int {
    let _quiet = Quiet::new();
    // SAFETY: forwarding the caller's argument unchanged.
    unsafe { blocking(|| real::usleep()(usec)) }
}

/// # Safety
/// Same contract as `sleep(3)`.
#[no_mangle]
pub unsafe extern "C" fn sleep(seconds: c_uint) -> c_uint {
    let _quiet = Quiet::new();
    // SAFETY: forwarding the caller's argument unchanged.
    unsafe { blocking(|| real::sleep()(seconds)) }
}

/// # Safety
/// Same contract as `poll(2)`.
#[no_mangle]
pub unsafe extern "C" fn poll(fds: *mut libc::pollfd, nfds: libc::nfds_t, timeout: c_int) -> c_int {
    let _quiet = Quiet::new();
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { blocking(|| real::poll()(fds, nfds, timeout)) }
}

/// # Safety
/// Same contract as `ppoll(2)`.
#[no_mangle]
pub unsafe extern "C" fn ppoll(
    fds: *mut libc::pollfd,
    nfds: libc::nfds_t,
    timeout: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    let _quiet = Quiet::new();
    // SAFETY: `mask` is the caller's (null or valid); the rest is forwarded unchanged.
    unsafe {
        let copy = mask_with_sampling(mask);
        blocking(|| real::ppoll()(fds, nfds, timeout, or_own(&copy, mask)))
    }
}

/// # Safety
/// Same contract as `select(2)`.
#[no_mangle]
pub unsafe extern "C" fn select(
    nfds: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    timeout: *mut libc::timeval,
) -> c_int {
    let _quiet = Quiet::new();
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { blocking(|| real::select()(nfds, r, w, e, timeout)) }
}

/// # Safety
/// Same contract as `pselect(2)`.
#[no_mangle]
pub unsafe extern "C" fn pselect(
    nfds: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    timeout: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    let _quiet = Quiet::new();
    // SAFETY: `mask` is the caller's (null or valid); the rest is forwarded unchanged.
    unsafe {
        let copy = mask_with_sampling(mask);
        blocking(|| real::pselect()(nfds, r, w, e, timeout, or_own(&copy, mask)))
    }
}

/// # Safety
/// Same contract as `epoll_wait(2)`.
#[no_mangle]
pub unsafe extern "C" fn epoll_wait(
    epfd: c_int,
    events: *mut libc::epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    let _quiet = Quiet::new();
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { blocking(|| real::epoll_wait()(epfd, events, max, timeout)) }
}

/// # Safety
/// Same contract as `epoll_pwait(2)`.
#[no_mangle]
pub unsafe extern "C" fn epoll_pwait(
    epfd: c_int,
    events: *mut libc::epoll_event,
    max: c_int,
    timeout: c_int,
    mask: *const sigset_t,
) -> c_int {
    let _quiet = Quiet::new();
    // SAFETY: `mask` is the caller's (null or valid); the rest is forwarded unchanged.
    unsafe {
        let copy = mask_with_sampling(mask);
        blocking(|| real::epoll_pwait()(epfd, events, max, timeout, or_own(&copy, mask)))
    }
}

/// # Safety
/// Same contract as `epoll_pwait2(2)`.
#[no_mangle]
pub unsafe extern "C" fn epoll_pwait2(
    epfd: c_int,
    events: *mut libc::epoll_event,
    max: c_int,
    timeout: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    let Some(real) = real::epoll_pwait2() else {
        // Only a program that found no epoll_pwait2 in its libc either gets here.
        // SAFETY: the calling thread's errno slot.
        unsafe { *libc::__errno_location() = libc::ENOSYS };
        return -1;
    };
    let _quiet = Quiet::new();
    // SAFETY: `mask` is the caller's (null or valid); the rest is forwarded unchanged.
    unsafe {
        let copy = mask_with_sampling(mask);
        blocking(|| real(epfd, events, max, timeout, or_own(&copy, mask)))
    }
}

/// # Safety
/// Same contract as `pause(2)`.
#[no_mangle]
pub unsafe extern "C" fn pause() -> c_int {
    let _quiet = Quiet::new();
    // SAFETY: no arguments.
    unsafe { blocking(|| real::pause()()) }
}

/// # Safety
/// Same contract as `sigsuspend(2)`.
#[no_mangle]
pub unsafe extern "C" fn sigsuspend(mask: *const sigset_t) -> c_int {
    // SAFETY: `mask` is the caller's (valid per sigsuspend's contract).
    unsafe {
        let copy = mask_with_sampling(mask);
        blocking(|| real::sigsuspend()(or_own(&copy, mask)))
    }
}

/// # Safety
/// Same contract as `sigtimedwait(2)`.
#[no_mangle]
pub unsafe extern "C" fn sigtimedwait(
    set: *const sigset_t,
    info: *mut libc::siginfo_t,
    timeout: *const timespec,
) -> c_int {
    let _quiet = Quiet::new();
    // SAFETY: `set` is the caller's (valid per the contract); the rest is forwarded.
    unsafe {
        let copy = set_without_sampling(set);
        blocking(|| real::sigtimedwait()(or_own(&copy, set), info, timeout))
    }
}

/// # Safety
/// Same contract as `sigwaitinfo(2)`.
#[no_mangle]
pub unsafe extern "C" fn sigwaitinfo(set: *const sigset_t, info: *mut libc::siginfo_t) -> c_int {
    let _quiet = Quiet::new();
    // SAFETY: `set` is the caller's (valid per the contract); the rest is forwarded.
    unsafe {
        let copy = set_without_sampling(set);
        blocking(|| real::sigwaitinfo()(or_own(&copy, set), info))
    }
}

/// # Safety
/// Same contract as `sigwait(3)`.
#[no_mangle]
pub unsafe extern "C" fn sigwait(set: *const sigset_t, sig: *mut c_int) -> c_int {
    let _quiet = Quiet::new();
    // SAFETY: `set` is the caller's (valid per the contract); the rest is forwarded.
    unsafe {
        let copy = set_without_sampling(set);
        blocking(|| real::sigwait()(or_own(&copy, set), sig))
    }
}
