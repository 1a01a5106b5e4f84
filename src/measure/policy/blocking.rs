//! Blocking calls inside a hold others wait for: a holder that sleeps, polls or waits for a
//! signal while others wait for its lock keeps them waiting with no CPU at work
//! (`held.blocked`, issue 41).
//!
//! Job: [`blocking`] runs an interposed blocking call (the sleeps, polls, selects, epoll
//! waits and signal waits of `runtime/src/waits.rs`) and times it; when, at its end, the
//! thread holds a lock others wait for (the marks its waiters left, `locks::held_marks`,
//! checked as the sampling handler checks them), the call's length is recorded as
//! `held.blocked` at the call's path, with the lock. The check comes after the call: the
//! waiters of a lock taken uncontended arrive, and mark its holder, while it blocks. So a
//! call counts whole when others waited for the lock by its end, also if they came during
//! it. A thread with no mark pays two clock reads and one load per mark slot.
//!
//! Not async-signal-safe (not called from the handler); allocation-free.

use super::bookkeeping::{monitored_thread, Bookkeeping};
use super::outcome::{errno, set_errno};
use crate::format::protocol;
use crate::sampler::clock::{current_tid, monotonic_ns};
use crate::sampler::counters::{self, Counter};
use crate::sampler::handler::held_lock;
use crate::sampler::path::Sample;
use crate::sampler::sync_sample::record_here;

/// Runs the blocking call `call` (the real function), recording its length as
/// `held.blocked` when the thread then holds a lock others wait for. Preserves the call's
/// `errno`.
pub fn blocking<R>(call: impl FnOnce() -> R) -> R {
    let Some(state) = monitored_thread() else {
        return call();
    };
    let start = monotonic_ns();
    let r = call();
    let end = monotonic_ns();
    if !state.held.any() {
        return r;
    }
    let saved = errno();
    let held = {
        let _busy = Bookkeeping::enter(state);
        held_lock(state, current_tid())
    };
    if let Some((object, kind)) = held {
        let ns = end.saturating_sub(start);
        let sample = Sample {
            metric: protocol::HELD_BLOCKED.index,
            value: ns,
            flags: kind.flags(),
            object,
            at: end,
            span: ns,
        };
        if ns > 0 && !record_here(&[sample]) {
            counters::add(Counter::HeldBlockedUnrecorded, ns);
        }
    }
    set_errno(saved);
    r
}
