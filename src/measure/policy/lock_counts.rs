//! The lock table's counts (`locks::lock_table`): what each lock operation adds, and the
//! records written when a lock is destroyed.
//!
//! Job: [`acquisition`] counts every acquisition on the thread's countdown and, for the
//! sampled ones, adds their weight to the lock's row (`locks::acquisition_sampling`), whose
//! part that did not come [`take_back_acquisitions`] takes back;
//! [`try_failed`] counts a trylock that found the lock held (in the thread's pending
//! failures first); [`contended`] counts every
//! contended acquisition and its wait (thread-locally first); [`contended_hold`] a hold
//! others waited for and its length; [`waiting`] counts a wait
//! registered with the lock, and [`waited`] a wait for an event; [`lock_destroyed`] writes a destroyed lock's
//! row to the thread's buffer and frees it. A count that finds no row is added to the
//! `lock_events_untabled` counter instead.
//!
//! The uncontended fast path costs one decrement of thread-local memory ([`acquisition`]),
//! a failed trylock a few loads and stores of it ([`try_failed`]); everything else runs on
//! contended paths only. Not async-signal-safe in general (writes
//! through the sampler's buffers); allocation-free.

use super::bookkeeping::{forget_waits, monitored_thread};
use super::outcome::{errno, set_errno};
use crate::format::WaitKind;
use crate::locks::acquisition_sampling as sampling;
use crate::locks::pending_counts::{PendingTries, TriesFailed, TryNoted};
use crate::locks::{init_sites, lock_table};
use crate::sampler::clock::{current_tid, monotonic_ns};
use crate::sampler::counters::{self, Counter};
use crate::sampler::process::sampling_enabled;
use crate::sampler::sync_sample::record_lock_stats;
use crate::sampler::thread_state::ThreadState;

/// An acquisition of the lock at `address` (`by_try`: a successful trylock). One
/// thread-local decrement unless the acquisition is sampled.
#[inline(always)]
pub fn acquisition(address: usize, kind: WaitKind, by_try: bool) {
    if acquisition_due() {
        sampled_acquisition(address, kind, by_try);
    }
}

/// Counts an acquisition on the thread's countdown: true when it is a sampled one (then
/// call [`sampled_acquisition`]).
#[inline(always)]
pub fn acquisition_due() -> bool {
    sampling::tick()
}

/// A sampled acquisition of the lock at `address`: it counts for itself and the thread's
/// acquisitions until its next sampled one (those that do not come are taken back:
/// [`take_back_acquisitions`]).
#[cold]
#[inline(never)]
pub fn sampled_acquisition(address: usize, kind: WaitKind, by_try: bool) {
    let now = monotonic_ns();
    let weight = sampling::restart(now, || u64::from(current_tid()) << 32 ^ now);
    let slot = if sampling_enabled() {
        lock_table::slot_for_acquisition(address, kind as u8)
    } else {
        None
    };
    sampling::credited(slot.map_or(0, |s| credit_token(s, by_try)));
    match slot {
        Some(slot) => interval_ended(address, slot.acquired(weight, by_try, now)),
        None if sampling_enabled() => counters::add(Counter::LockEventsUntabled, 1),
        None => {}
    }
}

/// The token of a sampled acquisition's credit to `slot` (`locks::acquisition_sampling`):
/// the row's ticket and whether it was a trylock's.
fn credit_token(slot: &'static lock_table::Slot, by_try: bool) -> usize {
    let (index, generation) = lock_table::ticket(slot);
    (index + 1) << 33 | (generation as usize) << 1 | usize::from(by_try)
}

/// The calling thread's latest sampled acquisition counted for acquisitions to come on its
/// lock's row: those that did not come are taken back, and its next acquisition starts a
/// new period. At the thread's end; with `only`, before the lock at that address is
/// destroyed, if the credit is its row's.
pub fn take_back_acquisitions(only: Option<usize>) {
    let token = sampling::credit();
    if token == 0 {
        return;
    }
    let ticket = ((token >> 33).wrapping_sub(1), (token >> 1) as u32);
    let row = lock_table::at(ticket);
    if let Some(address) = only {
        let credited_here = row
            .is_some_and(|r| lock_table::find(address).is_some_and(|found| std::ptr::eq(found, r)));
        if !credited_here {
            return;
        }
    }
    let (_, over) = sampling::take_back();
    if let Some(row) = row {
        row.acquired_back(over, token & 1 != 0);
    }
}

/// Writes the counts of a lock's interval that a count of the next one ended (once per
/// lock and interval at most) to the thread's buffer.
fn interval_ended(address: usize, ended: Option<lock_table::IntervalCounts>) {
    if let Some(counts) = ended {
        // Writing the record may flush the buffer (a write(2)): the program's errno stays.
        let saved = errno();
        if !record_lock_stats(None, Some(&counts.record(address))) {
            counters::add(
                Counter::LockEventsUntabled,
                counts.samples + counts.try_failed,
            );
        }
        set_errno(saved);
    }
}

/// A trylock of the lock at `address`, called from `site` (a return address; 0 unknown),
/// found it held: counted in the thread's pending failures (`pending_counts::PendingTries`,
/// reached through the thread pointer: a few loads and stores), which reach the lock's row
/// out of line.
#[inline(always)]
pub fn try_failed(address: usize, kind: WaitKind, site: usize) {
    let tries = sampling::thread_tries();
    let noted = tries.map(|t| t.note(address, site));
    if noted != Some(TryNoted::Counted) {
        try_failed_slow(tries.zip(noted), address, kind, site);
    }
}

/// The rest of [`try_failed`]: the clock reading the thread's pending failures asked for,
/// a failure of another lock or site, or (the thread has nowhere to count them) the row
/// itself.
#[cold]
#[inline(never)]
fn try_failed_slow(
    noted: Option<(&'static PendingTries, TryNoted)>,
    address: usize,
    kind: WaitKind,
    site: usize,
) {
    if !sampling_enabled() {
        return;
    }
    let now = monotonic_ns();
    let ready = match noted {
        Some((tries, TryNoted::ReadDue)) => tries.read(now),
        Some((tries, _)) => tries.start(address, kind as u8, site, now),
        None => Some(TriesFailed {
            address,
            kind: kind as u8,
            site: site as u64,
            count: 1,
            at: now,
        }),
    };
    if let Some(tries) = ready {
        add_tries(tries);
    }
}

/// Adds failed trylocks to their lock's row.
fn add_tries(t: TriesFailed) {
    match lock_table::slot(t.address, t.kind) {
        Some(slot) => interval_ended(t.address, slot.try_failed(t.count, t.site, t.at)),
        None => counters::add(Counter::LockEventsUntabled, t.count),
    }
}

/// A wait for the object at `address` registered with it (measured for the blame), with
/// `waiters` measured waiters registered.
pub(super) fn waiting(address: usize, kind: WaitKind, waiters: u32) {
    match lock_table::slot(address, kind as u8) {
        Some(slot) => slot.measured(waiters),
        None => counters::add(Counter::LockEventsUntabled, 1),
    }
}

/// A hold of the lock at `address` that others waited for ended (it took blame), standing
/// for `weight` holds; `ns`: its length (a mutex's from its start or else its first
/// waiter's arrival; `None` for an rwlock's). After the release, on the release's slow
/// path.
pub(super) fn contended_hold(
    address: usize,
    kind: WaitKind,
    weight: u32,
    ns: Option<u64>,
    now: u64,
) {
    // With the thread's pending waits of the same lock (usually: it waited for it), so that
    // no row shared by the lock's threads is written at each release.
    if monitored_thread().is_some_and(|s| s.lock_waits.add_hold(address, weight, ns, now)) {
        return;
    }
    match lock_table::slot(address, kind as u8) {
        Some(slot) => slot.held(weight, ns),
        None => counters::add(Counter::LockEventsUntabled, 1),
    }
}

/// A wait for an event on the object at `address` (or a spin) ended after `ns`.
pub(super) fn waited(address: usize, kind: WaitKind, ns: u64) {
    match lock_table::slot(address, kind as u8) {
        Some(slot) => slot.waited(1, ns, ns),
        None => counters::add(Counter::LockEventsUntabled, 1),
    }
}

/// A contended acquisition of the lock at `address` is about to wait, at `now`: the
/// thread's pending waits are made ready for it (`pending_counts::PendingWaits::prepare`:
/// shared rows are written here, before the wait, not after it).
pub(super) fn contending(state: &ThreadState, address: usize, kind: WaitKind, now: u64) {
    // Once it holds the lock, its timer samples check it (`held.contended`): marked now,
    // before the wait, not inside the critical section.
    state.held.mark_latest(address, kind);
    prepare_waits(state, address, kind, now);
}

/// The thread's pending waits made ready for a contended acquisition of the lock at
/// `address` about to wait at `now` (`pending_counts::PendingWaits::prepare`).
pub(super) fn prepare_waits(state: &ThreadState, address: usize, kind: WaitKind, now: u64) {
    if let Err(untabled) = state.lock_waits.prepare(address, kind as u8, now) {
        counters::add(Counter::LockEventsUntabled, untabled);
    }
}

/// The contended acquisition of `address` that [`contending`] prepared for waited `ns`:
/// kept in the thread's pending waits (thread-local stores only).
pub(super) fn contended(state: &ThreadState, address: usize, ns: u64) {
    if !state.lock_waits.add(address, ns) {
        counters::add(Counter::LockEventsUntabled, 1);
    }
}

/// A monitored spin of `state`'s thread on the lock at `address` ended after `ns`: kept in
/// the thread's pending waits, which [`prepare_waits`] prepared before the spin (thread-local
/// stores only: the spinner holds the lock now, and a shared row written here would lengthen
/// the hold every other spinner waits for).
pub(super) fn spun_pending(state: &ThreadState, address: usize, ns: u64) {
    if !state.lock_waits.add_measured(address, ns) {
        counters::add(Counter::LockEventsUntabled, 1);
    }
}

/// Adds a thread's pending waits and failed trylocks to their lock's row: at its end, or at
/// the process's for the threads still alive (whose last wait or failure may race with
/// it).
pub fn fold_lock_waits(state: &ThreadState) {
    if let Err(untabled) = state.lock_waits.flush() {
        counters::add(Counter::LockEventsUntabled, untabled);
    }
    if let Some(tries) = state.lock_tries.take() {
        add_tries(tries);
    }
}

/// `pthread_*_init`, `sem_init`: the object at `address` starts afresh in the wait table,
/// initialised by a call that returns to `site`. A row the lock table still has for the
/// address (a lock there was freed without its destroy) stays: its counts and this lock's
/// add up in one row, as the report merges the locks of one address anyway. (Looking for
/// one at every init cost programs that make millions of locks a cache miss each.)
#[inline]
pub fn lock_initialised(address: usize, site: usize) {
    forget_waits(address);
    init_site(address, site);
}

/// The lock at `address` (a spin lock, which the wait table does not keep) is being
/// initialised by a call that returns to `site`.
#[inline]
pub fn init_site(address: usize, site: usize) {
    if sampling_enabled() {
        init_sites::note(address, site, sampling::thread_displaced());
    }
}

/// A spin on the spin lock at `address` that lasted `ns` (spins are not registered with
/// the wait table: one measured wait, its own waiter).
pub(super) fn spun(address: usize, ns: u64) {
    waiting(address, WaitKind::Spin, 1);
    waited(address, WaitKind::Spin, ns);
}

/// `pthread_*_init`/`destroy`: the object at `address` starts afresh: its row is written
/// and freed ([`lock_destroyed`]), and its wait-table state forgotten.
#[inline]
pub fn forget(address: usize) {
    lock_destroyed(address);
    forget_waits(address);
}

/// The object at `address` was destroyed or initialised again: its row, if any, is written
/// to the calling thread's buffer and freed (the report keeps it as a lock of its own).
#[inline]
pub fn lock_destroyed(address: usize) {
    // Most locks have no row: one look at the table.
    if lock_table::find(address).is_none() {
        init_sites::forget(address);
        return;
    }
    row_destroyed(address);
}

/// [`lock_destroyed`] of a lock with a row.
#[cold]
fn row_destroyed(address: usize) {
    // This thread's waits of the lock still pending reach its row first (other threads'
    // find it gone, and count theirs as untabled), and the acquisitions its last sampled
    // one counted that did not come are taken back.
    if let Some(state) = monitored_thread() {
        fold_lock_waits(state);
    }
    take_back_acquisitions(Some(address));
    // The record takes the lock's init site: forgotten after it.
    let taken = lock_table::take(address);
    init_sites::forget(address);
    let Some((stats, interval)) = taken else {
        return;
    };
    // Writing the record may flush the buffer (a write(2)): the program's errno stays.
    let saved = errno();
    if !record_lock_stats(Some(&stats), interval.as_ref()) {
        let events = stats.acquisition_samples + stats.try_failed + stats.contended;
        counters::add(Counter::LockEventsUntabled, events);
    }
    set_errno(saved);
}
