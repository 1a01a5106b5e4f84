//! Acquisitions and releases of locks that have holders (mutexes, rwlocks): the contended
//! wait, the try that did not wait, and the release that takes its hold's blame.
//!
//! Job: the fast paths ([`acquired`], [`release`] when nobody waits) cost one counter read;
//! a contended acquisition is a measured [`wait`]; a release takes the waiter-time of its
//! hold (an rwlock's just before the real unlock, a mutex's just after) and records it as
//! blame at the caller's context after the unlock. A mutex's holder does nothing inside its
//! critical section but read the clock at either end and note its hold's start in its own
//! thread state; after the release it reads the mutex's waiter-time history without a lock
//! (`wait_table::hold_blame`): it writes nothing its waiters write (issue 22). An rwlock's
//! holders settle under the wait table's lock.
//!
//! Not async-signal-safe (not called from the handler); allocation-free.

use super::blocked::{record_deferred_hold_wait, register_wait, start_wait, worth_capturing};
use super::bookkeeping::{bookkeeping, may_be_pending, monitored_thread};
use super::carry::call_site;
use super::holds::{
    hold_resumed, hold_started, mutex_hold_ends, mutex_may_be_waited_for, sampled_hold_ends,
};
use super::lock_counts;
use super::outcome::{errno, set_errno};
use super::record::{charge, give_back};
use crate::format::WaitKind;
use crate::locks::arrivals;
use crate::locks::contention_sampling::Draw;
use crate::locks::hold_sampling::{self, Started};
use crate::locks::wait_table::{self as table, Outcome, WaiterTime};
use crate::sampler::clock::{current_tid, monotonic_ns};
use crate::sampler::sync_sample::capture_wait_path;
use crate::sampler::thread_state::ThreadState;

/// A blocking wait on the object at `address` (a contended acquisition, or a wait for an
/// event): `block` performs the real call and `outcome` classifies its result. Measures the
/// wait, registers it with the object for the blame, and records it as idleness. Preserves
/// the call's `errno`.
///
/// A contended acquisition (hold kinds) is measured only if the thread's contention
/// sampling draws it (`locks::contention_sampling`: all of them while the thread has few);
/// one that is not waits in the real call with no bookkeeping but what starting its hold
/// needs when others' waits are being measured.
pub fn wait<R: Copy>(
    address: usize,
    kind: WaitKind,
    block: impl FnOnce() -> R,
    outcome: impl FnOnce(R, i32) -> Outcome,
) -> R {
    let site = call_site();
    let Some((state, start, carried)) = start_wait(address, kind, site) else {
        return block();
    };
    if table::is_hold_kind(kind) {
        lock_counts::contending(state, address, kind, start);
    }
    let weight = if table::is_hold_kind(kind) {
        let seed = u64::from(state.tid.load(std::sync::atomic::Ordering::Relaxed)) << 32 ^ start;
        match state.contention.draw(start, seed) {
            Draw::Measure { weight } => weight,
            Draw::Skip => {
                let block = counting_arrival(address, kind, Some(start), block);
                return unmeasured(state, start, address, kind, true, block, outcome);
            }
        }
    } else {
        1
    };
    let Some(blocked) = register_wait(state, address, kind, (start, weight), (carried, site))
    else {
        // No memory to monitor it (counted): a contended acquisition still counts for its
        // lock, with its weight in the calibration if it was drawn while sampling, and in
        // its mutex's integral.
        let block = counting_arrival(address, kind, Some(start), block);
        if table::is_hold_kind(kind) {
            let sampled = weight > 1;
            return unmeasured(state, start, address, kind, sampled, block, outcome);
        }
        return block();
    };
    // A wait measured for several is registered with their weight, an estimate: the exact
    // waiting of all of them is its mutex's integral.
    let block = counting_arrival(address, kind, (weight > 1).then_some(start), block);
    if table::is_hold_kind(kind) && (weight > 1 || worth_capturing(blocked.state)) {
        // The lock is held by another thread: unwinding now costs this thread's waiting
        // rather than its coming hold, and the record can wait until the hold is over
        // (`Blocked::finish`). A wait that stands for others (weight over 1) is scaled and
        // almost always kept whole.
        capture_wait_path();
    }
    let rc = block();
    let saved = errno();
    let outcome = outcome(rc, saved);
    let end = blocked.finish(kind, outcome);
    if table::is_hold_kind(kind) {
        lock_counts::contended(state, address, end.saturating_sub(start));
    }
    if weight > 1 {
        state
            .contention
            .note_sampled_wait(end.saturating_sub(start), weight);
    }
    if kind == WaitKind::Mutex && outcome == Outcome::Success {
        mutex_hold_begins(state, address);
    }
    set_errno(saved);
    rc
}

/// The calling thread has taken the mutex at `address` it waited for, and the runtime is
/// done with its bookkeeping: when others may wait, the mutex's hold starts now. Called
/// last, just before the program has the mutex back (the interposer counts the acquisition
/// inside `block`): the thread has usually just woken, often on another CPU, and every
/// line the runtime touches after the clock read (its thread-local counters, its own
/// state) may miss. With the hold started at the wait's end, those misses (a median of
/// 0.4 us and up to 1.3 us, on 2 virtual CPUs) counted in every such hold, and holds of
/// 2 us took 15-25% more blame than the waiting during them (tests/locks.rs, three
/// holders).
fn mutex_hold_begins(state: &'static ThreadState, address: usize) {
    if mutex_may_be_waited_for(address) {
        hold_started(state, address, WaitKind::Mutex, monotonic_ns);
    }
}

/// `block`, counted in `locks::arrivals` while it runs when it is a contended acquisition
/// of a mutex (measured or not): from just before the real call until it returns, not
/// while the new holder does its bookkeeping; and, for a waiter the wait table does not
/// register one by one (`unregistered`: the time its wait began), in its mutex's integral
/// from then until the call returns.
#[inline(always)]
fn counting_arrival<R>(
    address: usize,
    kind: WaitKind,
    unregistered: Option<u64>,
    block: impl FnOnce() -> R,
) -> impl FnOnce() -> R {
    move || {
        if kind != WaitKind::Mutex {
            return block();
        }
        arrivals::arrive(address);
        if let Some(since) = unregistered {
            arrivals::arrive_unregistered(address, since);
        }
        let rc = block();
        if unregistered.is_some() {
            arrivals::depart_unregistered(address, monotonic_ns());
        }
        arrivals::depart(address);
        rc
    }
}

/// A contended acquisition the sampling left unmeasured (or that could not be
/// registered), which started waiting at `start`: the real call, then, if it acquired, the
/// start of its hold (others' measured waits accrue to it); its waiting is counted for its
/// lock and, when it was drawn while `sampled`, timed for the calibration of the measured
/// ones.
#[inline(never)]
fn unmeasured<R: Copy>(
    state: &'static ThreadState,
    start: u64,
    address: usize,
    kind: WaitKind,
    sampled: bool,
    block: impl FnOnce() -> R,
    outcome: impl FnOnce(R, i32) -> Outcome,
) -> R {
    let rc = block();
    let saved = errno();
    // One clock read, the wait's end and its hold's start, after the loads that tell
    // whether others wait (a second one, for the hold alone, made a convoy of 8 threads on
    // one mutex 10% more contended; the counters below are the thread's own).
    let end = if outcome(rc, saved) == Outcome::Success && may_be_waited_for(address, kind) {
        hold_started(state, address, kind, monotonic_ns)
    } else {
        monotonic_ns()
    };
    if sampled {
        state
            .contention
            .note_sampled_wait(end.saturating_sub(start), 0);
    }
    lock_counts::contended(state, address, end.saturating_sub(start));
    set_errno(saved);
    rc
}

/// An acquisition that did not wait (a successful try): tells an object others wait for that
/// it is held again. One counter read when nobody waits.
#[inline(always)]
pub fn acquired(address: usize, kind: WaitKind) {
    acquired_if(address, kind, || true);
}

/// [`acquired`] for an acquisition that `starts_hold` tells, asked only when others may wait
/// (so the fast path stays one counter read, and a mutex's its integral's count too).
#[inline(always)]
pub fn acquired_if(address: usize, kind: WaitKind, starts_hold: impl FnOnce() -> bool) {
    if may_be_waited_for(address, kind) && starts_hold() {
        acquired_pending(address, kind);
    }
}

/// Whether a hold of the object of `kind` at `address` starting or ending now may take
/// blame (a mutex's: see `holds::mutex_may_be_waited_for`).
#[inline(always)]
fn may_be_waited_for(address: usize, kind: WaitKind) -> bool {
    if kind == WaitKind::Mutex {
        mutex_may_be_waited_for(address)
    } else {
        may_be_pending(address, kind)
    }
}

/// A hold that began without waiting while others may wait: a mutex's is kept by the
/// hold sampling (`locks::hold_sampling`: a thread-local entry, its start noted only if
/// drawn, so that no clock is read inside the program's critical section for the others),
/// or noted in the thread's state when the sampling cannot keep it; an rwlock's is told to
/// the wait table.
#[cold]
#[inline(never)]
pub(super) fn acquired_pending(address: usize, kind: WaitKind) {
    if kind == WaitKind::Mutex
        && hold_sampling::with(|s| s.start(address, || seed(address), monotonic_ns))
            != Started::Elsewhere
    {
        return;
    }
    if let Some(state) = monitored_thread() {
        hold_started(state, address, kind, monotonic_ns);
    }
}

/// A seed for the calling thread's hold sampling generator.
fn seed(address: usize) -> u64 {
    u64::from(current_tid()) << 32 ^ address as u64 ^ monotonic_ns()
}

/// A release by a holder (`unlock`: the real call; it failed unless it returns 0):
/// takes the holder's blame just before it, records it at the caller's context after it.
/// `still_held`: other holders keep the object held (rwlock readers).
pub fn release(
    address: usize,
    kind: WaitKind,
    still_held: bool,
    unlock: impl FnOnce() -> i32,
) -> i32 {
    if kind == WaitKind::Mutex {
        return release_mutex(address, unlock);
    }
    let mut released_at = 0;
    let settled = if may_be_pending(address, kind) {
        // The hold ends now, not after the bookkeeping that takes its blame (a hold of a
        // few hundred ns would grow by a fifth).
        let now = monotonic_ns();
        released_at = now;
        bookkeeping(|| table::settle(address, kind, || now, still_held)).flatten()
    } else {
        None
    };
    let rc = unlock();
    match settled {
        // The caller did not release it (e.g. EPERM): the owner's hold goes on.
        Some(taken) if rc != 0 => give_back(address, kind, taken, true),
        Some(taken) => hold_ended(address, kind, taken, 1, (released_at, None)),
        None => {}
    }
    // The hold is over: the record of the wait that began it, if deferred, is written now.
    if let Some(state) = monitored_thread() {
        record_deferred_hold_wait(state);
    }
    rc
}

/// A released hold took `taken`, standing for `weight` holds; it ended at `end` and lasted
/// `span`, if known: counted as a hold others waited for if it took any, and recorded as
/// blame.
fn hold_ended(
    address: usize,
    kind: WaitKind,
    taken: WaiterTime,
    weight: u32,
    (end, span): (u64, Option<u64>),
) {
    if taken.total() > 0 {
        lock_counts::contended_hold(address, kind, weight, span, end);
    }
    charge(address, kind, taken, (end, span.unwrap_or(0)));
}

/// [`release`] of a mutex: the program's critical section pays a clock read, unless the
/// hold was left unnoted (`locks::hold_sampling`: it takes no blame); its blame is read
/// from the mutex's history, without a lock, after the real unlock.
fn release_mutex(address: usize, unlock: impl FnOnce() -> i32) -> i32 {
    let kept = hold_sampling::with(|s| s.take(address));
    if kept == Some(Started::Unnoted) {
        // Nothing else: a deferred wait record waits for the thread's next measured release
        // or wait (this hold did not begin with a wait, and one it is nested in goes on).
        let rc = unlock();
        if rc != 0 {
            // The caller did not release it (e.g. EPERM): the hold goes on, unnoted.
            hold_sampling::with(|s| s.put_back(address, Started::Unnoted));
        }
        return rc;
    }
    // The hold's end, and the integral's mark then, inside the critical section: after the
    // unlock, a waiter taking the mutex would count its handoff in this hold.
    let end = mutex_may_be_waited_for(address).then(|| {
        let now = monotonic_ns();
        (now, arrivals::mark(address, now))
    });
    let rc = unlock();
    if let (Some(started), true) = (kept, rc != 0) {
        // The caller did not release it (e.g. EPERM): the hold goes on, kept.
        hold_sampling::with(|s| s.put_back(address, started));
        return rc;
    }
    let Some(state) = monitored_thread() else {
        return rc;
    };
    match (kept, end) {
        (
            Some(Started::Noted {
                start,
                weight,
                mark,
            }),
            Some((end, end_mark)),
        ) => {
            let taken = sampled_hold_ends(state, address, (start, mark), (end, end_mark), weight);
            if let Some(taken) = taken {
                let span = Some(end.saturating_sub(start));
                hold_ended(address, WaitKind::Mutex, taken, weight, (end, span));
            }
        }
        (None, Some(end)) => match mutex_hold_ends(state, address, end) {
            // The caller did not release it (e.g. EPERM): the owner's hold goes on.
            (_, Some((start, mark))) if rc != 0 => {
                hold_resumed(state, address, WaitKind::Mutex, start, mark);
            }
            (Some((taken, since)), noted) if rc == 0 => {
                // From its start, or else from its first waiter's arrival (a lower bound).
                let start = noted.map_or(since, |(start, _)| start);
                let span = Some(end.0.saturating_sub(start));
                hold_ended(address, WaitKind::Mutex, taken, 1, (end.0, span));
            }
            _ => {}
        },
        _ => {}
    }
    // The hold is over: the record of the wait that began it, if deferred, is written now.
    record_deferred_hold_wait(state);
    rc
}
