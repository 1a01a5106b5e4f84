//! What glibc checks of a timed wait's clock and deadline before it looks at the object:
//! the interposers that try the object first (semaphores, reader-writer locks) must not
//! take it where glibc would have refused the call.
//!
//! Found against glibc 2.36 (`runtime/src/tests.rs`, `runtime/src/rwlock/tests.rs`):
//! `sem_timedwait` and `sem_clockwait` check the clock and the deadline's nanoseconds
//! first, always (EINVAL even when a unit is there); the timed and clock reader-writer
//! locks check both first when given a deadline (EINVAL even on a free lock; a null
//! deadline waits without one); the timed and clock mutex locks check the nanoseconds
//! only when they would wait, but `pthread_mutex_clocklock` checks the clock first.

use libc::{clockid_t, timespec};

/// Whether glibc accepts `clock` for a timed wait (its
/// `futex_abstimed_supported_clockid`): the realtime and the monotonic clock only.
pub fn supported_clock(clock: clockid_t) -> bool {
    clock == libc::CLOCK_REALTIME || clock == libc::CLOCK_MONOTONIC
}

/// Whether the nanoseconds of `abstime` are in range, 0 to 999,999,999 (glibc's
/// `valid_nanoseconds`).
///
/// # Safety
/// `abstime` must point at a readable timespec.
pub unsafe fn valid_nanoseconds(abstime: *const timespec) -> bool {
    // SAFETY: per this function's contract.
    (0..1_000_000_000).contains(&unsafe { (*abstime).tv_nsec })
}
