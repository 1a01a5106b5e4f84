//! The runtime's own file descriptors, kept out of the program's reach.
//!
//! Job: open-time placement and bookkeeping of every descriptor the runtime owns (the
//! process's part file, perf timers). They are moved to [`MIN_FD`] and above, where programs
//! that count on small numbers do not look, and marked here, so that the interposed `close`,
//! `close_range`, `closefrom`, `dup2` and `dup3` can leave them alone or move them out of the
//! way: a daemon that closes every inherited descriptor must not end the profile.
//!
//! Invariants: a descriptor is marked from just after the runtime creates it until just
//! before the runtime closes it with [`close_owned`] (a raw system call: the runtime's own
//! `close` calls would reach the interposed one, which refuses owned descriptors). Numbers at
//! or above [`LIMIT`] cannot be marked; [`own`] says so and the caller counts it.
//!
//! Async-signal-safe: all of it (atomics and raw system calls; [`raise`] uses `fcntl`,
//! which is).

use super::counters::{self, Counter};
use std::sync::atomic::{AtomicU64, Ordering};

/// Lowest descriptor number the runtime keeps, to stay out of the way of programs that assume
/// small ones.
pub const MIN_FD: libc::c_int = 500;

/// Descriptors at or above this number are not tracked.
pub const LIMIT: usize = 1 << 16;

static OWNED: [AtomicU64; LIMIT / 64] = [const { AtomicU64::new(0) }; LIMIT / 64];

fn slot(fd: libc::c_int) -> Option<(&'static AtomicU64, u64)> {
    let fd = usize::try_from(fd).ok().filter(|&fd| fd < LIMIT)?;
    Some((&OWNED[fd / 64], 1u64 << (fd % 64)))
}

/// Marks `fd` as the runtime's; false when its number is too high to be tracked.
pub fn own(fd: libc::c_int) -> bool {
    slot(fd)
        .map(|(word, bit)| word.fetch_or(bit, Ordering::AcqRel))
        .is_some()
}

/// Forgets that `fd` is the runtime's (it is about to be closed or was taken over).
pub fn disown(fd: libc::c_int) {
    if let Some((word, bit)) = slot(fd) {
        word.fetch_and(!bit, Ordering::AcqRel);
    }
}

/// Whether `fd` is one of the runtime's descriptors.
#[inline]
pub fn is_owned(fd: libc::c_int) -> bool {
    slot(fd).is_some_and(|(word, bit)| word.load(Ordering::Acquire) & bit != 0)
}

/// The lowest owned descriptor in `from..=to`, if any. Bounded: one pass over the bitmap.
pub fn next_owned(from: u32, to: u32) -> Option<u32> {
    let last = (to as usize).min(LIMIT - 1);
    let mut fd = from as usize;
    while fd <= last {
        let word = OWNED[fd / 64].load(Ordering::Acquire) >> (fd % 64);
        if word != 0 {
            let found = fd + word.trailing_zeros() as usize;
            return (found <= last).then_some(found as u32);
        }
        fd = (fd / 64 + 1) * 64;
    }
    None
}

/// Every owned descriptor, lowest first.
pub fn for_each_owned(mut f: impl FnMut(libc::c_int)) {
    let mut from = 0;
    while let Some(fd) = next_owned(from, u32::MAX) {
        f(fd as libc::c_int);
        from = fd + 1;
    }
}

/// Moves a descriptor the runtime just opened to [`MIN_FD`] or above (close-on-exec) and
/// marks it owned. Returns the descriptor to use: the original one if it could not be moved.
pub fn raise(fd: libc::c_int) -> libc::c_int {
    // SAFETY: `fd` is the caller's; F_DUPFD_CLOEXEC returns a new descriptor >= MIN_FD.
    let high = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, MIN_FD) };
    let fd = if high >= 0 {
        crate::sys::close(fd);
        high
    } else {
        fd
    };
    own_or_count(fd);
    fd
}

fn own_or_count(fd: libc::c_int) {
    if !own(fd) {
        counters::add(Counter::DescriptorsUntracked, 1);
    }
}

/// Moves owned `fd` to another number (at or above [`MIN_FD`], close-on-exec), marks the new
/// one owned and the old one not: the program is about to take the old number with `dup2`.
/// The old descriptor stays open (the caller's `dup2` closes it). `None` if no descriptor
/// was free.
pub fn step_aside(fd: libc::c_int) -> Option<libc::c_int> {
    // SAFETY: `fd` is an open descriptor of the runtime's; the new one is a copy.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, MIN_FD) };
    disown(fd); // the program's from now on, whatever happens to the copy
    if new < 0 {
        return None;
    }
    own_or_count(new);
    counters::add(Counter::DescriptorsMoved, 1);
    Some(new)
}

/// Closes an owned descriptor.
pub fn close_owned(fd: libc::c_int) {
    disown(fd);
    crate::sys::close(fd);
}

/// Sets close-on-exec again on every owned descriptor (a program may have cleared it with
/// `fcntl`), before an `exec`.
pub fn keep_from_exec() {
    for_each_owned(|fd| {
        // SAFETY: F_SETFD on a descriptor of the runtime's.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_found_in_ranges_and_forgotten() {
        // Numbers far above anything this test process opens, distinct from other tests'.
        assert!(own(40_000) && own(40_063) && own(40_064) && own(40_200));
        assert!(is_owned(40_000) && !is_owned(40_001));
        assert_eq!(next_owned(39_000, 60_000), Some(40_000));
        assert_eq!(next_owned(40_001, 60_000), Some(40_063));
        assert_eq!(next_owned(40_064, 40_064), Some(40_064));
        assert_eq!(next_owned(40_065, 40_199), None);
        assert_eq!(next_owned(40_065, u32::MAX), Some(40_200));
        assert!(!own(LIMIT as libc::c_int) && !is_owned(LIMIT as libc::c_int) && !is_owned(-1));
        for fd in [40_000, 40_063, 40_064, 40_200] {
            disown(fd);
        }
        assert_eq!(next_owned(39_000, 41_000), None);
    }
}
