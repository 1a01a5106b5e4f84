//! `exec` under the runtime: the image that calls it ends its part, and the new one starts
//! its own, or, when the exec fails, this one carries on.
//!
//! Job: [`exec_environment`] counts an exec whose environment does not pass profiling on,
//! [`before_exec`] finishes the image's part (`lifecycle::finish`), stops the calling
//! thread's timer and consumes its queued sampling signals, [`exec_failed`] resumes
//! sampling. The preloaded library's exec functions call them around the real exec.
//!
//! Invariants: a sampling signal never survives into the new image (whose disposition for
//! it is the default, which kills); the program's environment is read, never changed. Not
//! async-signal-safe; [`exec_environment`] only reads, and is safe in a `vfork` child.

use crate::lifecycle::{finish, source, start_timer, stop_timer};
use crate::sampler::counters::{self, Counter};
use crate::sampler::descriptors;
use crate::sampler::process;
use crate::sampler::thread_state;
use crate::sys::{self, gettid};
use std::sync::atomic::Ordering;

/// Before an `exec` with environment `envp`: counts it ([`Counter::ExecsUnprofiled`]) if that
/// environment does not pass profiling on, so that an image missing from the profile is
/// named rather than lost without a word (the program cleared its environment, or gave
/// exec one of its own making). The environment is the program's: it is not changed. Call
/// before [`before_exec`], which writes the count to the part it finishes.
///
/// # Safety
/// `envp` is null or a null-terminated array of NUL-terminated strings (exec's contract).
pub unsafe fn exec_environment(envp: *const *const libc::c_char) {
    if process::config().is_none() {
        return;
    }
    // SAFETY: per the contract.
    if !unsafe { passes_profiling_on(envp) } {
        counters::add(Counter::ExecsUnprofiled, 1);
    }
}

/// Whether `envp` preloads the runtime and names the profile directory. Reads only: safe in
/// a `vfork` child.
///
/// # Safety
/// As [`exec_environment`].
unsafe fn passes_profiling_on(envp: *const *const libc::c_char) -> bool {
    use crate::format::protocol::{ENV_OUTPUT, RUNTIME_LIBRARY};
    let (mut preload, mut output) = (false, false);
    let mut entry = envp;
    // SAFETY: `envp` is null or null-terminated, each entry NUL-terminated (the contract).
    unsafe {
        while !entry.is_null() && !(*entry).is_null() {
            let text = std::ffi::CStr::from_ptr(*entry).to_bytes();
            if let Some(value) = text.strip_prefix(b"LD_PRELOAD=") {
                preload |= value
                    .windows(RUNTIME_LIBRARY.len())
                    .any(|w| w == RUNTIME_LIBRARY.as_bytes());
            } else if text.len() > ENV_OUTPUT.len()
                && text.starts_with(ENV_OUTPUT.as_bytes())
                && text[ENV_OUTPUT.len()] == b'='
            {
                output = true;
            }
            entry = entry.add(1);
        }
    }
    preload && output
}

/// Before an `exec`: the new image starts a part of its own. The calling thread's timer is
/// stopped and its queued sampling signals are consumed: a pending signal survives `exec`,
/// and the new image, whose disposition for it is the default, would be killed by it.
pub fn before_exec() -> bool {
    if !finish(1) {
        return false;
    }
    // The program may have cleared close-on-exec on them (an `fcntl` over every descriptor).
    descriptors::keep_from_exec();
    if let (Some(cfg), Some(state)) = (process::config(), thread_state::lookup(gettid())) {
        state.in_runtime.store(true, Ordering::Relaxed);
        stop_timer(state);
        state.in_runtime.store(false, Ordering::Relaxed);
        drain_pending(cfg.signal);
    }
    true
}

/// Consumes instances of `signal` queued for the calling thread, without running the handler.
fn drain_pending(signal: i32) {
    // SAFETY: plain signal-mask and sigtimedwait calls on valid, initialised sigsets; the
    // original mask is restored before returning.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signal);
        sys::sigmask(libc::SIG_BLOCK, &set, &mut old);
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // Bounded: the timer is stopped, so at most the already queued instances remain.
        for _ in 0..64 {
            if libc::sigtimedwait(&set, std::ptr::null_mut(), &zero) != signal {
                break;
            }
        }
        sys::sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
}

/// After an `exec` that failed: carry on sampling this image.
pub fn exec_failed(was_finished: bool) {
    if !was_finished {
        return;
    }
    if let (Some(cfg), Some(state)) = (process::config(), thread_state::lookup(gettid())) {
        start_timer(state, cfg, source());
    }
    process::enable();
}
