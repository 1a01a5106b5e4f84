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
    /// What the waiters count for, exact ones (`[0]`, 1 each) and sampled ones (`[1]`: a
    /// sampled contended acquisition counts for the acquisitions it stands for; see
    /// `locks::contention_sampling`). Waiter-time accrues at these rates, into
    /// `integral[0]` and `integral[1]`, kept apart so that the blame estimated from sampled
    /// waiters can be calibrated on its own ([`WaiterTime`]).
    pub(super) weight: [u64; 2],
    /// Waiters an event has woken that have not departed yet. They go on accruing until they
    /// depart (one may have lost the race for what it was woken for and wait on inside the
    /// real call); a departure withdraws what accrued since the last event.
    pub(super) woken: u32,
    /// Waiter-nanoseconds accumulated since the last settlement: exact, sampled.
    pub(super) integral: [u64; 2],
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

/// Waiter-time taken from an object: `exact` from waiters that stand for themselves,
/// `scaled` from sampled contended acquisitions, each counted for the ones it stands for
/// (an estimate the analysis calibrates).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WaiterTime {
    pub exact: u64,
    pub scaled: u64,
}

impl WaiterTime {
    /// Exact waiter-time only.
    pub fn exact(ns: u64) -> WaiterTime {
        WaiterTime {
            exact: ns,
            scaled: 0,
        }
    }

    pub fn total(self) -> u64 {
        self.exact.saturating_add(self.scaled)
    }

    /// Both parts counted `weight` times (a hold that stands for others,
    /// `locks::hold_sampling`).
    pub fn times(self, weight: u32) -> WaiterTime {
        WaiterTime {
            exact: self.exact.saturating_mul(u64::from(weight)),
            scaled: self.scaled.saturating_mul(u64::from(weight)),
        }
    }
}

pub(super) fn is_dirty(s: &State) -> bool {
    s.waiters > 0 || s.integral != [0, 0] || s.proxied > 0
}

/// Which part of [`State::weight`] and [`State::integral`] a waiter of `weight` counts in.
pub(super) fn part(weight: u32) -> usize {
    usize::from(weight > 1)
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
            for (sum, rate) in self.integral.iter_mut().zip(self.weight) {
                *sum += rate * dt;
            }
        }
        self.stamp = self.stamp.max(now);
    }

    /// Takes the accumulated waiter-time.
    pub(super) fn take(&mut self) -> WaiterTime {
        self.gated_at_settle = self.gated;
        let [exact, scaled] = std::mem::take(&mut self.integral);
        WaiterTime { exact, scaled }
    }

    /// Adds waiter-time back (a release that could not record it).
    pub(super) fn give(&mut self, t: WaiterTime) {
        self.integral[0] += t.exact;
        self.integral[1] += t.scaled;
    }

    /// A waiter has acquired an rwlock: the waiting accrues to its hold from now. (A
    /// mutex's holders read its history instead.)
    pub(super) fn acquired_by_waiter(&mut self) {
        if !self.is_mutex() {
            self.gate = true;
        }
    }

    /// A mutex: its waiter-time is kept as a history its holders read (`super::history`),
    /// not as an integral behind a gate, which stays closed.
    pub(super) fn is_mutex(&self) -> bool {
        self.kind == WaitKind::Mutex as u8
    }

    /// Removes the unsettled contribution of a waiter of `weight` that arrived at
    /// `gated_mark`; returns what it removed.
    pub(super) fn withdraw(&mut self, gated_mark: u64, weight: u32) -> u64 {
        let since = gated_mark.max(self.gated_at_settle);
        let mine = self.gated.saturating_sub(since) * u64::from(weight);
        let sum = &mut self.integral[part(weight)];
        let removed = mine.min(*sum);
        *sum -= removed;
        removed
    }

    /// Removes the waiting `carried` in by a waiter (of weight 1) that arrived at
    /// `gated_mark`, unless an event has taken it since; returns what it removed.
    pub(super) fn withdraw_carried(&mut self, gated_mark: u64, carried: u64) -> u64 {
        if self.gated_at_settle > gated_mark {
            return 0;
        }
        let removed = carried.min(self.integral[0]);
        self.integral[0] -= removed;
        removed
    }

    /// A waiter of `weight` comes.
    pub(super) fn add_waiter(&mut self, weight: u32) {
        self.waiters += 1;
        self.weight[part(weight)] += u64::from(weight);
    }

    /// A waiter of `weight` goes.
    pub(super) fn remove_waiter(&mut self, weight: u32) {
        self.waiters = self.waiters.saturating_sub(1);
        let rate = &mut self.weight[part(weight)];
        *rate = rate.saturating_sub(u64::from(weight));
    }
}
