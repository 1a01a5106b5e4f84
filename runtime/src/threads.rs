//! Interposed thread creation, exit and joins.
//!
//! `pthread_create` runs every new thread through a trampoline that sets up its sampling
//! state. A joiner's wait (`pthread_join`, `pthread_timedjoin_np`, `pthread_clockjoin_np`)
//! is join idleness; the joined thread takes it as blame as it ends: at its `pthread_exit`
//! call, or, when its start routine returns, at that routine (which stands for the thread).

use crate::real;
use blameprof_format::WaitKind;
use blameprof_measure::lifecycle;
use blameprof_measure::policy;
use libc::{c_int, c_void, pthread_t, timespec};

pub type StartRoutine = extern "C" fn(*mut c_void) -> *mut c_void;

struct Start {
    routine: StartRoutine,
    arg: *mut c_void,
}

extern "C" fn thread_trampoline(start: *mut c_void) -> *mut c_void {
    // SAFETY: `start` is the Box<Start> leaked by `pthread_create` below, handed to exactly
    // one new thread.
    let Start { routine, arg } = *unsafe { Box::from_raw(start as *mut Start) };
    // Its address lies in this frame, which stays below `start_thread`'s while the routine
    // runs: the thread's unwinds end there (`StackBounds::root`).
    let in_this_frame = 0u8;
    let root = std::hint::black_box(&in_this_frame) as *const u8 as u64;
    lifecycle::thread_started(routine as usize, root);
    let result = routine(arg);
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() };
    policy::thread_exiting(me as usize, Some(routine as usize));
    lifecycle::thread_routine_returned();
    result
}

/// # Safety
/// Same contract as POSIX `pthread_create`.
#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    thread: *mut pthread_t,
    attr: *const libc::pthread_attr_t,
    routine: StartRoutine,
    arg: *mut c_void,
) -> c_int {
    let real = real::pthread_create();
    if !blameprof_measure::sampler::process::sampling_enabled() {
        // SAFETY: forwarding the caller's arguments unchanged.
        return unsafe { real(thread, attr, routine, arg) };
    }
    lifecycle::before_thread_create();
    let start = Box::into_raw(Box::new(Start { routine, arg }));
    // SAFETY: forwarding the caller's arguments; the trampoline takes ownership of `start`.
    let rc = unsafe { real(thread, attr, thread_trampoline, start.cast()) };
    if rc != 0 {
        // SAFETY: the thread was not created, so `start` is still ours.
        drop(unsafe { Box::from_raw(start) });
    }
    rc
}

/// # Safety
/// Same contract as `pthread_exit(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_exit(value: *mut c_void) -> ! {
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() };
    policy::thread_exiting(me as usize, None);
    // The trampoline's frame goes with the routine's, and glibc's exit handlers run where it was.
    lifecycle::thread_routine_returned();
    // SAFETY: forwarding the caller's value unchanged.
    unsafe { real::pthread_exit()(value) }
}

/// A join of `thread`, measured around `block`.
fn join(thread: pthread_t, block: impl FnOnce() -> c_int) -> c_int {
    // SAFETY: pthread_self has no preconditions.
    if thread == unsafe { libc::pthread_self() } {
        return block(); // EDEADLK, from glibc
    }
    policy::wait(thread as usize, WaitKind::Join, block, |rc, _| {
        policy::outcome_of_rc(rc)
    })
}

/// # Safety
/// Same contract as `pthread_join(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_join(thread: pthread_t, ret: *mut *mut c_void) -> c_int {
    // SAFETY: forwarding the caller's arguments unchanged.
    join(thread, || unsafe { real::pthread_join()(thread, ret) })
}

/// # Safety
/// Same contract as `pthread_timedjoin_np(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_timedjoin_np(
    thread: pthread_t,
    ret: *mut *mut c_void,
    abstime: *const timespec,
) -> c_int {
    // SAFETY: forwarding the caller's arguments unchanged.
    join(thread, || unsafe {
        real::pthread_timedjoin_np()(thread, ret, abstime)
    })
}

/// # Safety
/// Same contract as `pthread_clockjoin_np(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_clockjoin_np(
    thread: pthread_t,
    ret: *mut *mut c_void,
    clock: libc::clockid_t,
    abstime: *const timespec,
) -> c_int {
    // SAFETY: forwarding the caller's arguments unchanged.
    join(thread, || unsafe {
        real::pthread_clockjoin_np()(thread, ret, clock, abstime)
    })
}
