//! The monitoring state of one waited-on object, and the arithmetic of its waiter-time
//! integral (see the parent module for what is blamed on whom).
//!
//! Invariant: every field is guarded by the lock of the bucket whose chain holds the
//! object's entry (`buckets::Locked`). Pure; allocation-free.

use crate::format::WaitKind;

/// The monitoring state of one object. Every field is guarded by its bucket's lock.
#[derive(Default)]
pub(super) struct State {
    /// A [`WaitKind`] code.
    pub(super) kind: u8,
    /// Kept while clean (barriers: their size is only known at init).
    pub(super) retained: bool,
    /// Waiter-time accrues only while this is set: hold kinds while held, event kinds always.
    pub(super) gate: bool,
    pub(super) waiters: u32,
    /// What the waiters count for: the sum of their weights (1 each, but a sampled
    /// contended acquisition counts for the acquisitions it stands for; see
    /// `locks::contention_sampling`). Waiter-time accrues at this rate.
    pub(super) weight: u64,
    /// Waiters an event has woken that have not departed yet. They go on accruing until they
    /// depart (one may have lost the race for what it was woken for and wait on inside the
    /// real call); a departure withdraws what accrued since the last event.
    pub(super) woken: u32,
    /// Waiter-nanoseconds accumulated since the last settlement.
    pub(super) integral: u64,
    /// Time (monotonic ns) the integral was last brought up to date.
    pub(super) stamp: u64,
    /// Nanoseconds the gate has been open, ever: a waiter's contribution since it arrived is
    /// `gated − gated at its arrival`.
    pub(super) gated: u64,
    /// `gated` at the last settlement.
    pub(super) gated_at_settle: u64,
    /// Time of the last event (condition variables: when the waiter's wait for the signal
    /// ended and its wait for the mutex began).
    pub(super) last_wake: u64,
    /// Condition variables: the mutex their waiters wait with.
    pub(super) partner: usize,
    /// Condition variables: woken waiters registered with `partner` on their behalf.
    pub(super) proxied: u32,
    /// Barriers: the number of threads that must arrive.
    pub(super) parties: u32,
    /// The latest event's provider.
    pub(super) last_waker: WakerId,
}

/// Identifies an event's provider: its thread and its own count of events, so a thread
/// it woke can find the call path it published for that event (`sampler::wake_chain`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WakerId {
    pub tid: u32,
    pub seq: u64,
}

pub(super) fn is_dirty(s: &State) -> bool {
    s.waiters > 0 || s.integral > 0 || s.proxied > 0
}

/// Whether waiters of `kind` wait for a holder's release (rather than for an event).
pub fn is_hold_kind(kind: WaitKind) -> bool {
    is_hold_code(kind as u8)
}

/// [`is_hold_kind`] of a kind's code (as [`State`] keeps it).
#[inline(always)]
pub(super) fn is_hold_code(code: u8) -> bool {
    code == WaitKind::Mutex as u8 || code == WaitKind::RwLock as u8
}

impl State {
    /// Brings the integral up to `now`.
    pub(super) fn advance(&mut self, now: u64) {
        if now > self.stamp && self.gate {
            let dt = now - self.stamp;
            self.gated += dt;
            self.integral += self.weight * dt;
        }
        self.stamp = self.stamp.max(now);
    }

    /// Takes the accumulated waiter-time.
    pub(super) fn take(&mut self) -> u64 {
        self.gated_at_settle = self.gated;
        std::mem::take(&mut self.integral)
    }

    /// A waiter has acquired the object (hold kinds): the waiting accrues to its hold from
    /// now. A mutex has one owner, so anything left from before was released outside the
    /// wrappers and cannot be placed.
    pub(super) fn acquired_by_waiter(&mut self) {
        if self.kind == WaitKind::Mutex as u8 {
            self.take();
        }
        self.gate = true;
    }

    /// Removes the unsettled contribution of a waiter of `weight` that arrived at
    /// `gated_mark`.
    pub(super) fn withdraw(&mut self, gated_mark: u64, weight: u32) {
        let since = gated_mark.max(self.gated_at_settle);
        let mine = self.gated.saturating_sub(since) * u64::from(weight);
        self.integral = self.integral.saturating_sub(mine);
    }

    /// A waiter of `weight` comes.
    pub(super) fn add_waiter(&mut self, weight: u32) {
        self.waiters += 1;
        self.weight += u64::from(weight);
    }

    /// A waiter of `weight` goes.
    pub(super) fn remove_waiter(&mut self, weight: u32) {
        self.waiters = self.waiters.saturating_sub(1);
        self.weight = self.weight.saturating_sub(u64::from(weight));
    }
}
