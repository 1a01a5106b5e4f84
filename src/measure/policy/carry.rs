//! Waits that end without their event and begin again: a timed-wait loop (CPython's GIL,
//! a pool thread that checks a flag every few milliseconds, a timed `sem_wait` retry) is
//! one wait for one event, and whoever provides it is blamed for all of it (issue 41).
//!
//! Job: when an event wait (condition variable, semaphore, futex, join) times out, is
//! interrupted or wakes with no event, [`carry_out`] keeps its waiting as the thread's
//! deferred wait record, at the path captured now, instead of recording it as nobody's.
//! The thread's next wait takes it in ([`carry_in`]) when it is on the same object from the
//! same call site (the same stack pointer, and the same path beyond the runtime's frames,
//! one unwind): its unclaimed part is added to the object's
//! waiter-time for the next event to take, and the whole is recorded with that wait's
//! outcome. Any other next wait, the thread's end and the process's write it as it stands
//! (`blocked::record_deferred_wait`, with [`given_up`]'s samples): what events took while it waited is blamed idleness,
//! the rest nobody's, counted under the reason its last wait ended. A hold's release does
//! not: a loop may take and release a lock between its waits.
//!
//! Invariants: at most one carried wait per thread, in the thread's one deferred record
//! slot (a lock wait's deferred record and a carried wait never coexist: every wait first
//! writes or takes in the pending one); the captured path is the carried wait's until it
//! is written or taken in. Not async-signal-safe; allocation-free.

use super::bookkeeping::Bookkeeping;
use super::record::{count_unblamed, idleness};
use crate::format::{WaitKind, SAMPLE_UNBLAMED};
use crate::locks::wait_table::{is_hold_kind, Carried, Carry, Departed};
use crate::sampler::counters::{self, Counter};
use crate::sampler::path::Sample;
use crate::sampler::sync_sample::{capture_wait_path, captured_path_is_here};
use crate::sampler::thread_state::ThreadState;
use std::sync::atomic::Ordering;

/// The stack pointer here: the same in every iteration of a loop that calls one wait from
/// one frame, so it tells a wait begun again from a new one.
#[inline(always)]
pub(super) fn call_site() -> usize {
    let sp: usize;
    // SAFETY: reads the stack pointer into a register; no memory is touched and no flags
    // are changed.
    unsafe {
        std::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags));
    }
    sp
}

/// At the start of a wait on `object` of `kind` from `site`: the waiting the thread carries
/// into it, when its pending carried wait was on the same object from the same call site;
/// `None` otherwise, and then the caller writes the pending record (carried or a lock
/// wait's) first (`blocked::record_deferred_wait`).
pub(super) fn carry_in(
    state: &'static ThreadState,
    object: usize,
    kind: WaitKind,
    site: usize,
) -> Option<Carried> {
    // SAFETY: reading the owner part on the owner thread, outside the handler.
    let (pending, same_object, (at, span)) = unsafe {
        let owner = &*state.owner.get();
        let same = owner.deferred_wait_object == object
            && WaitKind::from_flags(owner.deferred_wait_flags) == Some(kind);
        (owner.carry, same, owner.deferred_wait_time)
    };
    // The same object from a frame at the same stack depth, and, to tell frames of equal
    // depth apart (a helper's wait and its caller's), the same path beyond the runtime:
    // one unwind, only for a wait that may go on a loop's.
    let c = pending.filter(|c| same_object && c.site == site && captured_path_is_here())?;
    {
        let _busy = Bookkeeping::enter(state);
        // SAFETY: on the owner thread with `in_runtime` raised (thread_state's rule).
        unsafe { (*state.owner.get()).carry = None };
    }
    // Taken back whole; 0 if the process's end took it meanwhile (then nothing is carried).
    let total = state.deferred_wait_ns.swap(0, Ordering::Relaxed);
    if total > 0 {
        counters::add(Counter::WaitsCarried, 1);
    }
    Some(Carried {
        since: at.saturating_sub(span),
        total,
        unclaimed: c.unclaimed.min(total),
    })
}

/// How an event wait's idleness is recorded when it ends.
pub(super) struct Ended {
    pub(super) kind: WaitKind,
    pub(super) object: usize,
    pub(super) site: usize,
    pub(super) carried: Carried,
    /// Its own waiting for the event: when that ended, and how long it lasted.
    pub(super) at: u64,
    pub(super) ns: u64,
    pub(super) departed: Departed,
    /// How much of its waiting, the carried part included, no event took (see
    /// `wait_table::depart`).
    pub(super) unclaimed: u64,
}

impl Ended {
    /// Its idleness samples to record now (blamed, and nobody's), or `None` when it is
    /// carried into the thread's next wait instead: it ended without its event and its
    /// path could be kept. Counts an unblamed end it does not carry.
    pub(super) fn settle(self, state: &'static ThreadState) -> Option<[Sample; 2]> {
        let total = self.carried.total.saturating_add(self.ns);
        let since = if self.carried.total > 0 {
            self.carried.since
        } else {
            self.at.saturating_sub(self.ns)
        };
        let (at, span) = (self.at, self.at.saturating_sub(since));
        // Of the whole, the part no event took.
        let unclaimed = match self.departed {
            Departed::Blamed { .. } => 0,
            Departed::NoWait => self.carried.unclaimed,
            _ => {
                let unclaimed = self.unclaimed.min(total);
                if carries(self.kind) && self.carry_out(state, since, total, unclaimed) {
                    return None;
                }
                unclaimed
            }
        };
        match self.departed {
            // A carried wait's event came before the thread waited again: nobody's, as
            // a wake the runtime did not see.
            Departed::NoWait if unclaimed > 0 => count_unblamed(Departed::Spurious),
            departed => count_unblamed(departed),
        }
        let whole = idleness(self.kind, self.object, total, true).timed(at, span);
        Some(split(whole, unclaimed))
    }

    /// Keeps the wait as the thread's deferred record, at the path captured now (unless one
    /// is captured already: the loop's, from its first wait). False when no path could be
    /// captured.
    fn carry_out(
        &self,
        state: &'static ThreadState,
        since: u64,
        total: u64,
        unclaimed: u64,
    ) -> bool {
        // SAFETY: reading the owner part on the owner thread, outside the handler.
        if unsafe { (*state.owner.get()).wait_capture.is_none() } {
            capture_wait_path();
        }
        let _busy = Bookkeeping::enter(state);
        // SAFETY: on the owner thread with `in_runtime` raised (thread_state's rule).
        let owner = unsafe { &mut *state.owner.get() };
        if owner.wait_capture.is_none() || total == 0 {
            return false;
        }
        owner.deferred_wait_flags = self.kind.flags();
        owner.deferred_wait_object = self.object;
        owner.deferred_wait_time = (self.at, self.at.saturating_sub(since));
        owner.carry = Some(Carry {
            site: self.site,
            unclaimed,
            ended: self.departed,
        });
        state.deferred_wait_ns.store(total, Ordering::Relaxed);
        true
    }
}

/// Whether waits of `kind` that end without their event are carried into the next one:
/// event kinds a thread can wait on again (not barriers, whose waits cannot time out).
fn carries(kind: WaitKind) -> bool {
    !is_hold_kind(kind) && kind != WaitKind::Barrier
}

/// The samples of the thread's pending carried wait `c`, whose deferred record is `whole`,
/// written as it stands (its loop ended, or the thread waits on something else): the part
/// events took blamed, the rest nobody's, counted under its last wait's reason.
pub(super) fn given_up(c: &Carry, whole: Sample) -> [Sample; 2] {
    count_unblamed(c.ended);
    split(whole, c.unclaimed)
}

/// The idleness sample `whole` as two: the part events took (blamed) and `unclaimed`,
/// nobody's (flagged unblamed).
fn split(whole: Sample, unclaimed: u64) -> [Sample; 2] {
    let unclaimed = unclaimed.min(whole.value);
    [
        Sample {
            value: whole.value - unclaimed,
            ..whole
        },
        Sample {
            value: unclaimed,
            flags: whole.flags | SAMPLE_UNBLAMED,
            ..whole
        },
    ]
}
