//! Keeping the sampling signal out of waits that a signal would break.
//!
//! Job: `SA_RESTART` restarts most interrupted system calls, but signal(7) lists waits that
//! fail with `EINTR` whenever *any* handler runs (`nanosleep`, `poll`, `select`,
//! `epoll_wait`, `sem_wait`, ...), and waits that would take the sampling signal as the
//! program's own (`pause`, `sigsuspend`, `sigtimedwait`). The runtime's wrappers of those
//! functions hold the sampling signal blocked for the duration ([`Quiet`]) and keep it out of
//! masks and wait-sets the program passes ([`mask_with_sampling`], [`set_without_sampling`]).
//! A sample that falls due meanwhile is delivered right after the wait; as it carries the
//! thread's CPU-clock delta, no CPU time is lost.
//!
//! Not used by the signal handler. Preserves `errno`.

use super::process::{sampling_enabled, sampling_signal};

/// While alive, the sampling signal is blocked in the calling thread.
pub struct Quiet {
    /// The signal to unblock on drop (none when it was blocked already or sampling is off).
    unblock: Option<i32>,
}

fn errno() -> &'static mut i32 {
    // SAFETY: __errno_location returns the calling thread's errno slot, valid for the
    // thread's lifetime; it is only used on this thread.
    unsafe { &mut *libc::__errno_location() }
}

fn single(signal: i32) -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise a local sigset_t.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signal);
        set
    }
}

impl Quiet {
    /// Blocks the sampling signal in the calling thread, if sampling is on.
    pub fn new() -> Quiet {
        let signal = match sampling_signal() {
            Some(s) if sampling_enabled() => s,
            _ => return Quiet { unblock: None },
        };
        let saved = *errno();
        let set = single(signal);
        // SAFETY: `set` and `old` are valid sigsets; pthread_sigmask only changes this
        // thread's mask.
        let was_blocked = unsafe {
            let mut old: libc::sigset_t = std::mem::zeroed();
            crate::sys::sigmask(libc::SIG_BLOCK, &set, &mut old);
            libc::sigismember(&old, signal) == 1
        };
        *errno() = saved;
        Quiet {
            unblock: (!was_blocked).then_some(signal),
        }
    }
}

impl Default for Quiet {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        if let Some(signal) = self.unblock {
            let saved = *errno();
            let set = single(signal);
            // Restores the thread's previous mask for this signal.
            crate::sys::sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            *errno() = saved;
        }
    }
}

/// A copy of the mask the program gives for the duration of a wait (`sigsuspend`, `ppoll`,
/// `pselect`, `epoll_pwait`) with the sampling signal added, or `None` to pass its own.
///
/// # Safety
/// `mask` must be null or point at a valid `sigset_t`.
pub unsafe fn mask_with_sampling(mask: *const libc::sigset_t) -> Option<libc::sigset_t> {
    let signal = sampling_signal().filter(|_| sampling_enabled())?;
    if mask.is_null() {
        return None;
    }
    // SAFETY: `mask` is valid per the contract; the copy is a plain sigset_t.
    unsafe {
        let mut copy = *mask;
        libc::sigaddset(&mut copy, signal);
        Some(copy)
    }
}

/// A copy of a wait-set (`sigtimedwait`, `sigwaitinfo`, `sigwait`) without the sampling
/// signal, so the program never receives it as its own; `None` to pass its own.
///
/// # Safety
/// `set` must be null or point at a valid `sigset_t`.
pub unsafe fn set_without_sampling(set: *const libc::sigset_t) -> Option<libc::sigset_t> {
    let signal = sampling_signal().filter(|_| sampling_enabled())?;
    if set.is_null() {
        return None;
    }
    // SAFETY: `set` is valid per the contract; the copy is a plain sigset_t.
    unsafe {
        let mut copy = *set;
        libc::sigdelset(&mut copy, signal);
        Some(copy)
    }
}
