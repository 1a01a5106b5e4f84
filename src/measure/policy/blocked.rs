//! A blocking wait in progress: registered with the wait table, timed, and recorded as the
//! waiter's idleness when it ends.
//!
//! Job: [`start_wait`] and [`register_wait`] register the calling thread as waiting on an
//! object and mark it blocked (the timer's samples meanwhile record nothing: the measurement covers the time);
//! [`Blocked::finish`] ends the wait, departs the object (which says whom to blame, if
//! anyone) and records the idleness, at the path captured before the thread blocked when
//! there is one. A lock acquired after a wait with a captured path has its record deferred
//! ([`record_deferred_wait`]) until the thread comes back into the runtime: outside the
//! program's critical section.
//!
//! Invariants: one registered wait per thread at a time (a wait nested in a signal handler
//! passes through unmonitored); at most one deferred record per thread, whose path is the
//! captured one, written before any other wait of the thread registers. Not
//! async-signal-safe; allocation-free.

use super::bookkeeping::{monitored_thread, Bookkeeping};
use super::carry::{self, Ended};
use super::lock_counts;
use super::record::{count_unblamed, count_unrecorded, weighted_idleness, Kept};
use crate::format::{protocol, WaitKind};
use crate::locks::thinning::{thin_class, Window};
use crate::locks::wait_table::{self as table, Carried, Departed, Outcome, Wait};
use crate::locks::wake_chain::LastWait;
use crate::sampler::clock::monotonic_ns;
use crate::sampler::counters::{self, Counter};
use crate::sampler::path::Sample;
use crate::sampler::sync_sample::record_captured;
use crate::sampler::thread_state::ThreadState;
use crate::sampler::wait_cpu;
use std::sync::atomic::Ordering;

/// A registered wait in progress: the thread is blocked, and samples its timer takes
/// meanwhile record nothing (the measurement covers the time).
pub(super) struct Blocked {
    pub(super) state: &'static ThreadState,
    pub(super) wait: Wait,
    /// A futex wait: remembered as the thread's last one when a wake ends it.
    pub(super) futex: bool,
    /// The frame it waits from ([`carry::call_site`]).
    pub(super) site: usize,
}

/// The calling thread, the start of its wait on `object` of `kind`, and the waiting it
/// carries into it (`None`: not monitored, or a wait nested in another one, from a signal
/// handler). Every wait starts here: it first writes the thread's deferred wait record, if
/// any, so that its cost is not part of this wait, or takes it in when it is a wait on
/// the same object from the same call site (`site`, its stack pointer, see
/// [`carry::carry_in`]).
pub(super) fn start_wait(
    object: usize,
    kind: WaitKind,
    site: usize,
) -> Option<(&'static ThreadState, u64, Carried)> {
    let state = monitored_thread()?;
    // SAFETY: reading the owner part's wait on the owner thread, outside the handler.
    if unsafe { (*state.owner.get()).wait.is_some() } {
        return None;
    }
    let carried = carry::carry_in(state, object, kind, site).unwrap_or_else(|| {
        record_deferred_wait(state);
        Carried::default()
    });
    Some((state, monotonic_ns(), carried))
}

/// Registers the calling thread, which started waiting at `start`, with `address`, as
/// `weight` waiters (1, or a sampled contended acquisition's weight).
/// It carries `carried` in from its earlier waits on the object (`site`: its frame).
pub(super) fn register_wait(
    state: &'static ThreadState,
    address: usize,
    kind: WaitKind,
    (start, weight): (u64, u32),
    (carried, site): (Carried, usize),
) -> Option<Blocked> {
    let wait = {
        let _busy = Bookkeeping::enter(state);
        table::arrive(address, kind, start, weight, carried)
    };
    let Some(wait) = wait else {
        counters::add(Counter::WaitsUnmonitored, 1);
        return None;
    };
    Some(Blocked::new(state, wait, kind, site))
}

impl Blocked {
    pub(super) fn new(
        state: &'static ThreadState,
        wait: Wait,
        kind: WaitKind,
        site: usize,
    ) -> Blocked {
        lock_counts::waiting(wait.address, kind, wait.waiters);
        // Its previous lock wait's record, if still deferred (`start_wait` wrote it; one
        // deferred since, by a wait nested in a signal handler, is written here), before
        // this wait's path replaces that record's; a path left captured without its record
        // (taken at a failed exec's end, or not written) must not be taken for this wait's.
        // A wait that carries earlier ones in keeps their path: its own.
        record_deferred_wait(state);
        {
            let _busy = Bookkeeping::enter(state);
            // SAFETY: on the owner thread with `in_runtime` raised (thread_state's rule).
            let owner = unsafe { &mut *state.owner.get() };
            if wait.carried.total == 0 {
                owner.wait_capture = None;
            }
            owner.wait = Some(wait);
            owner.paused_ns = 0;
        }
        wait_cpu::begin(state, wait.start_ns);
        Blocked {
            state,
            wait,
            futex: kind == WaitKind::Futex,
            site,
        }
    }

    /// Ends the wait: (end time, how it is accounted, how much of it no event took).
    pub(super) fn end(&self, outcome: Outcome) -> (u64, Departed, u64) {
        let end = monotonic_ns();
        let (departed, unclaimed) = self.end_at(outcome, end);
        (end, departed, unclaimed)
    }

    /// Ends the wait, with its departure from the object at `depart_at`: how it is
    /// accounted, and how much of it no event took. Its caller counts it if unblamed.
    pub(super) fn end_at(&self, outcome: Outcome, depart_at: u64) -> (Departed, u64) {
        wait_cpu::end(self.state);
        let _busy = Bookkeeping::enter(self.state);
        // SAFETY: as in `new`.
        unsafe { (*self.state.owner.get()).wait = None };
        let (departed, unclaimed) = table::depart(self.wait, depart_at, outcome);
        if let (
            Departed::Blamed {
                woken_at, waker, ..
            },
            true,
        ) = (departed, self.futex)
        {
            // SAFETY: as in `new`.
            let owner = unsafe { &mut *self.state.owner.get() };
            let wakes = self.state.wake_seq.load(Ordering::Relaxed);
            owner.last_wait = Some(LastWait::after(
                owner.last_wait,
                self.wait.address,
                self.wait.start_ns,
                woken_at,
                waker,
                wakes,
            ));
        }
        (departed, unclaimed)
    }

    /// Ends the wait and records it as idleness of `kind` at the caller's context (at the
    /// path captured before it blocked, if any). Returns when the wait ended.
    pub(super) fn finish(self, kind: WaitKind, outcome: Outcome) -> u64 {
        let start = self.wait.start_ns;
        let (state, futex) = (self.state, self.futex);
        let weight = self.wait.weight;
        if table::is_hold_kind(kind) && outcome == Outcome::Success {
            // It holds the lock now, and the program's critical section has begun: the
            // record, at the path captured before the wait, is deferred until the thread
            // next comes into the runtime after it (its release of a lock others wait for,
            // its next wait, its end), so that the program's critical section does not
            // pay for it (issue 22). Without a captured path the record must be written
            // here, at this call's path. A mutex's hold starts when its caller is done
            // with this bookkeeping (`acquire::wait`).
            let end = monotonic_ns();
            let waited = end.saturating_sub(start) * u64::from(weight);
            let sample = weighted_idleness(kind, self.wait.address, waited, true, weight)
                .timed(end, end.saturating_sub(start));
            let deferred = defer_wait_record(state, &sample);
            // An rwlock's hold starts at its departure: after the record, if written here
            // (as the program sees it begin when the call returns).
            let held_from = if deferred || !record_wait(state, &[sample]) {
                end
            } else {
                monotonic_ns()
            };
            self.end_at(outcome, held_from);
            return end;
        }
        let address = self.wait.address;
        let (end, departed, unclaimed) = self.end(outcome);
        let blamed = matches!(departed, Departed::Blamed { .. });
        // SAFETY: reading the owner part on the owner thread, outside the handler.
        let paused = unsafe { (*state.owner.get()).paused_ns };
        let waited = if departed != Departed::NoWait {
            end.saturating_sub(start).saturating_sub(paused)
        } else {
            0
        };
        if table::is_hold_kind(kind) {
            // A lock wait that gave up: nobody's, whole (`wait_table::depart`).
            count_unblamed(departed);
            let sample =
                weighted_idleness(kind, address, waited * u64::from(weight), false, weight)
                    .timed(end, waited);
            record_wait(state, &[sample]);
            return end;
        }
        if departed != Departed::NoWait {
            lock_counts::waited(address, kind, waited);
        }
        let ended = Ended {
            kind,
            object: address,
            site: self.site,
            carried: self.wait.carried,
            at: end,
            ns: waited,
            departed,
            unclaimed,
        };
        if let Some(samples) = ended.settle(state) {
            record_wait(state, &samples);
        }
        if futex && blamed {
            resumed(state);
        }
        end
    }
}

/// Runs `work` (an OpenMP task the thread picked up while it waits at a barrier) as work:
/// if the thread is in a registered wait, its samples meanwhile record the work, and the
/// time is taken out of the wait's idleness ([`Blocked::finish`]). The wait stays
/// registered: the barrier's blame, taken by its last arriver, still counts that time, and
/// a wait inside `work` is not measured (one registered wait per thread).
pub fn outside_the_wait<R>(work: impl FnOnce() -> R) -> R {
    let Some(state) = monitored_thread() else {
        return work();
    };
    // SAFETY: reading the owner part on the owner thread, outside the handler.
    let Some(wait) = (unsafe { (*state.owner.get()).wait }) else {
        return work();
    };
    if !state.blocked.load(std::sync::atomic::Ordering::Relaxed) {
        // Already outside it (a task run by a task): the outer one counts the time.
        return work();
    }
    wait_cpu::end(state);
    let start = monotonic_ns();
    let result = work();
    let end = monotonic_ns();
    {
        let _busy = Bookkeeping::enter(state);
        // SAFETY: on the owner thread with `in_runtime` raised (thread_state's rule).
        let owner = unsafe { &mut *state.owner.get() };
        owner.paused_ns += end.saturating_sub(start);
    }
    wait_cpu::begin(state, end.max(wait.start_ns));
    result
}

/// Whether to unwind before a lock wait blocks: when its sample will probably be kept, as
/// the thread's last lock wait would be (see [`THIN_NS`]).
pub(super) fn worth_capturing(state: &ThreadState) -> bool {
    // SAFETY: reading the owner part on the owner thread, outside the handler.
    let last = unsafe { (*state.owner.get()).last_lock_wait_ns };
    let cell = &state.thinned[1][thin_class(last)];
    match Window::unpack(cell.load(Ordering::Relaxed)) {
        Some(window) => window.may_keep(last),
        None => true,
    }
}

/// Defers the record of a lock wait that has just ended in an acquisition (`sample`) when
/// a path was captured before it: [`record_deferred_wait`] writes it when the thread next
/// comes into the runtime, outside the program's critical section. True when deferred;
/// else the caller records it now.
pub(super) fn defer_wait_record(state: &'static ThreadState, sample: &Sample) -> bool {
    let _busy = Bookkeeping::enter(state);
    // SAFETY: on the owner thread with `in_runtime` raised (thread_state's rule).
    let owner = unsafe { &mut *state.owner.get() };
    owner.last_lock_wait_ns = sample.value;
    let deferred = owner.wait_capture.is_some() && sample.value > 0;
    if deferred {
        owner.deferred_wait_flags = sample.flags;
        owner.deferred_wait_object = sample.object;
        owner.deferred_wait_time = (sample.at, sample.span);
        state
            .deferred_wait_ns
            .store(sample.value, Ordering::Relaxed);
    }
    deferred
}

/// Writes the record of the thread's latest lock wait if it was deferred (see
/// [`Blocked::finish`]): at the path captured before that wait. Call on the owner thread,
/// outside the runtime's bookkeeping.
pub fn record_deferred_wait(state: &ThreadState) {
    let ns = state.deferred_wait_ns.swap(0, Ordering::Relaxed);
    // SAFETY: the owner part, on the owner thread, outside the handler (which never uses
    // `carry`); no other reference to it is live here.
    let carry = unsafe { (*state.owner.get()).carry.take() };
    if ns == 0 {
        return;
    }
    // SAFETY: reading the owner part on the owner thread, outside the handler.
    let (flags, object, (at, span)) = unsafe {
        let owner = &*state.owner.get();
        (
            owner.deferred_wait_flags,
            owner.deferred_wait_object,
            owner.deferred_wait_time,
        )
    };
    let sample = Sample {
        metric: protocol::IDLENESS.index,
        value: ns,
        flags,
        object,
        at,
        span,
    };
    match carry {
        Some(c) => record_wait(state, &carry::given_up(&c, sample)),
        None => record_wait(state, &[sample]),
    };
}

/// [`record_deferred_wait`] at the end of a hold: a carried event wait stays deferred, for
/// the thread's next wait (a loop may release a lock between its waits).
pub fn record_deferred_hold_wait(state: &ThreadState) {
    // SAFETY: reading the owner part on the owner thread, outside the handler.
    if unsafe { (*state.owner.get()).carry.is_none() } {
        record_deferred_wait(state);
    }
}

/// Records a wait's samples (thinned) at the path captured before it blocked, or at the
/// caller's context; counts what could not be recorded. Whether any sample was kept (and
/// so took the time of a record or an unwind).
pub(super) fn record_wait(state: &ThreadState, samples: &[Sample]) -> bool {
    // SAFETY: reading the owner part on the owner thread, outside the handler.
    let captured = unsafe { (*state.owner.get()).wait_capture.is_some() };
    let kept = Kept::of(samples);
    let recorded = if captured {
        // Called even with nothing kept: it forgets the captured path.
        record_captured(kept.get()) || kept.get().is_empty()
    } else {
        kept.record_here()
    };
    count_unrecorded(&kept, recorded);
    kept.n > 0
}

/// After a blamed futex wait and its record: for the wake chain, the wait lasted until the
/// thread is back in the program. Its wake-up latency and this bookkeeping are waiting, to
/// the thread it wakes next, not a hold of the lock it was woken for.
pub(super) fn resumed(state: &'static ThreadState) {
    let _busy = Bookkeeping::enter(state);
    // SAFETY: on the owner thread with `in_runtime` raised (thread_state's rule).
    let owner = unsafe { &mut *state.owner.get() };
    if let Some(last) = owner.last_wait.as_mut() {
        last.resumed_ns = last.resumed_ns.max(monotonic_ns());
    }
}
