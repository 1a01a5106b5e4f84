//! How a wait's return value ends it (success, time-out, interruption, no wait at all), and
//! the `errno` every measured call keeps as the real call left it.
//!
//! Async-signal-safe (pure functions and the thread's own `errno` slot).

use crate::locks::wait_table::Outcome;

/// How a pthread-style return code ends a wait.
pub fn outcome_of_rc(rc: i32) -> Outcome {
    match rc {
        0 | libc::EOWNERDEAD => Outcome::Success,
        libc::ETIMEDOUT => Outcome::TimedOut,
        libc::EINTR => Outcome::Interrupted,
        _ => Outcome::NoWait,
    }
}

/// How a `-1`/`errno` style return ends a wait (`errno` read right after the call).
pub fn outcome_of_errno(rc: i64, errno: i32) -> Outcome {
    if rc != -1 {
        return Outcome::Success;
    }
    match errno {
        libc::ETIMEDOUT => Outcome::TimedOut,
        libc::EINTR => Outcome::Interrupted,
        _ => Outcome::NoWait,
    }
}

pub(super) fn errno() -> i32 {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() }
}

pub(super) fn set_errno(value: i32) {
    // SAFETY: as in `errno`.
    unsafe { *libc::__errno_location() = value };
}
