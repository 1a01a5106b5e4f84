//! Events that wake waiters: semaphore posts and futex wakes.
//!
//! Job: the waiting since the object's previous event is taken just before the event and
//! recorded as blame at its caller's context; for a futex's only waiter, the part of its
//! wait that overlaps the waker's own last futex wait is passed on to whoever woke the waker
//! (`locks::wake_chain`), at the path that wake published.
//!
//! Not async-signal-safe (not called from the handler); allocation-free.

use super::bookkeeping::pending;
use super::outcome::{errno, set_errno};
use super::record::{blame, charge, give_back, Kept};
use crate::format::WaitKind;
use crate::locks::wait_table::{self as table, WaiterTime, WakerId};
use crate::locks::wake_chain::LastWait;
use crate::sampler::clock::{current_tid, monotonic_ns};
use crate::sampler::sync_sample::{record_at_wake, record_wake};
use crate::sampler::thread_state::{lookup, ThreadState};
use std::sync::atomic::Ordering;

/// An event on the object at `address` that wakes up to `n` waiters (a post, a futex wake):
/// `op` performs it and `ok` says whether it succeeded (not asked of a futex wake, whose
/// blame is recorded before it: [`futex_wake`]). The waiting since the previous event
/// is taken just before and recorded as blame at the caller's context — except, for a
/// futex's only waiter, the part that overlaps the caller's own last futex wait, which is
/// charged to whoever woke the caller (`wake_chain`).
pub fn event<R: Copy>(
    address: usize,
    kind: WaitKind,
    n: u32,
    op: impl FnOnce() -> R,
    ok: impl FnOnce(R) -> bool,
) -> R {
    let woke = pending(address, kind, || {
        let state = lookup(current_tid())?;
        let seq = state.wake_seq.fetch_add(1, Ordering::Relaxed) + 1;
        let me = WakerId {
            tid: state.tid.load(Ordering::Relaxed),
            seq,
        };
        let now = monotonic_ns();
        let woke = table::wake(address, kind, || now, n, me)?;
        // SAFETY: on the owner thread with `in_runtime` raised (we are in bookkeeping).
        let last = unsafe { (*state.owner.get()).last_wait };
        Some((woke, state, seq, now, last))
    });
    let Some((woke, state, seq, now, last)) = woke.filter(|w| w.0.taken > 0) else {
        return op();
    };
    if kind == WaitKind::Futex {
        return futex_wake(address, woke, state, seq, now, last, op);
    }
    let rc = op();
    let saved = errno();
    if ok(rc) {
        charge(address, kind, WaiterTime::exact(woke.taken), (now, 0));
    } else {
        give_back(address, kind, WaiterTime::exact(woke.taken), false);
    }
    set_errno(saved);
    rc
}

/// [`event`] for a futex wake (`op`), wake `seq` of the calling thread (`state`), that took
/// `woke` at `now`, the thread's own last futex wait being `last`. Its blame is recorded, and the
/// path published for the threads it wakes (`wake_chain`), *before* the wake: a woken thread
/// can run, take the lock, and wake the next waiter before its waker is back from the
/// system call (on this 2-CPU VM, 90 µs later in one `rust_std` run), and without the path
/// it charged the next waiter's whole wait to itself. The blame of a wake that then fails
/// (a bad address) stays recorded at it.
pub(super) fn futex_wake<R: Copy>(
    address: usize,
    woke: table::Woke,
    state: &ThreadState,
    seq: u64,
    now: u64,
    last: Option<LastWait>,
    op: impl FnOnce() -> R,
) -> R {
    let kind = WaitKind::Futex;
    // The part of a lone waiter's wait during this thread's own last futex wait.
    let inherited = match (woke.solo_since, last) {
        (Some(since), Some(last)) => last.overlap(since, now).min(woke.taken),
        _ => 0,
    };
    let inherited = match last {
        Some(last) if inherited > 0 => {
            let kept = Kept::of(&[blame(kind, address, inherited).timed(now, 0)]);
            match kept.get() {
                [sample] if !record_at_wake(last.by, *sample) => 0,
                _ => inherited,
            }
        }
        _ => 0,
    };
    let own = woke.taken - inherited;
    let kept = Kept::of(&[blame(kind, address, own).timed(now, 0)]);
    let recorded = match kept.get() {
        [] => {
            // No path for the threads this wake wakes either: they keep their waits.
            state.wake_path.publish(seq, &[]);
            true
        }
        samples => record_wake(samples, seq),
    };
    let rc = op();
    if !recorded {
        let saved = errno();
        give_back(address, kind, WaiterTime::exact(own), false);
        set_errno(saved);
    }
    rc
}
