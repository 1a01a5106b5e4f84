//! What a lock's waiting is for, and the running time its pressure is over.
//!
//! Job: [`waits_for_a_lock`] tells a row (or group) of the lock table waiting for a lock
//! from one waiting for an event, by its kind and, for the kinds a lock may be built on
//! (condition variables, semaphores, futex words), by its use as the summary's classes tell
//! it (`wait_class`); [`a_held_lock`] narrows that to the locks whose holders the runtime
//! knows, what pressure and the lock findings are about; [`running_ns`] is a process's
//! threads' running time, the base of pressure.
//!
//! Invariants: one rule for the lock view's sections, its JSON `waits_for`, the timeline
//! and the findings; pure. Not async-signal-safe (analysis code).

use super::Counts;
use crate::attribution::calibration::Calibration;
use crate::attribution::clock::end_of_image;
use crate::attribution::wait_class::polled;
use crate::format::read::ProcessProfile;
use crate::format::{protocol, WaitKind};

/// Whether the waiting counted in `counts`, of `kind`, is for a lock: a mutex's, rwlock's
/// or spin lock's; a condition variable's, semaphore's or futex word's when its use says so
/// (most of its waiting [`path_of_a_lock`](crate::attribution::wait_class::path_of_a_lock), as the summary's classes tell each path), and
/// for a futex word not [`polled`] (its wakes took its waiting as blame). What critical
/// section pressure is about, and what the lock view lists apart from waits for events.
pub fn waits_for_a_lock(kind: WaitKind, counts: &Counts) -> bool {
    let used_as_a_lock = || counts.lock_use_ns > counts.runtime.wait_ns / 2;
    match kind {
        WaitKind::Mutex | WaitKind::Spin | WaitKind::RwLock => true,
        WaitKind::Barrier | WaitKind::Join => false,
        WaitKind::CondVar | WaitKind::Semaphore => used_as_a_lock(),
        WaitKind::Futex => used_as_a_lock() && !polled(counts.blame_ns, counts.runtime.wait_ns),
    }
}

/// Whether the waiting counted in `counts`, of `kind`, is for a lock whose holders the
/// runtime knows (a mutex, rwlock or spin lock, a futex word used as a lock): what the lock
/// findings are about. A lock built on a condition variable or a semaphore (the GIL) waits
/// for a lock ([`waits_for_a_lock`]) whose holds nobody timed: no advice on them.
pub fn a_held_lock(kind: WaitKind, counts: &Counts) -> bool {
    is_lock_kind(kind) && waits_for_a_lock(kind, counts)
}

/// Kinds whose waiting is for a holder's release: the ones critical section pressure is
/// about.
pub(in crate::attribution) fn is_lock_kind(kind: WaitKind) -> bool {
    matches!(
        kind,
        WaitKind::Mutex | WaitKind::Spin | WaitKind::RwLock | WaitKind::Futex
    )
}

/// The running time of a process's threads: each thread's lifetime (start to end, or to
/// the process's end), less the waits for events (condition variables, semaphores,
/// barriers, joins) its samples record.
pub(super) fn running_ns(proc: &ProcessProfile, calibration: Calibration) -> u64 {
    let end_of_process = end_of_image(proc);
    let lifetimes: u64 = proc
        .threads
        .iter()
        .filter_map(|t| {
            let start = t.start_ns?;
            let end = t.end_ns.or(end_of_process)?;
            Some(end.saturating_sub(start))
        })
        .fold(0u64, u64::saturating_add);
    let idleness = proc
        .header
        .metrics
        .iter()
        .position(|m| m.name == protocol::IDLENESS.name);
    let event_waits: u64 = proc
        .samples
        .iter()
        .filter(|s| Some(usize::from(s.metric)) == idleness)
        .filter(|s| WaitKind::from_flags(s.flags).is_some_and(|k| !is_lock_kind(k)))
        .map(|s| calibration.apply(s.value, s.flags))
        .fold(0u64, u64::saturating_add);
    lifetimes.saturating_sub(event_waits)
}
