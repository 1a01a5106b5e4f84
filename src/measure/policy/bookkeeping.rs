//! Whether a lock call is monitored, and the guard that marks the runtime's own bookkeeping.
//!
//! Job: [`monitored_thread`] says whether the calling thread's lock calls are measured
//! (sampling on, the thread known, not already inside the runtime); [`bookkeeping`] runs a
//! piece of accounting with the thread marked as inside the runtime, so a wait function
//! that a program's signal handler calls meanwhile passes straight through instead of
//! taking a bucket lock this thread may hold; [`may_be_pending`] is the fast path's only
//! question (one counter read).
//!
//! Not async-signal-safe (not called from the handler); allocation-free.

use crate::format::WaitKind;
use crate::locks::wait_table::{self as table};
use crate::sampler::clock::{current_tid, monotonic_ns};
use crate::sampler::counters::{self, Counter};
use crate::sampler::process::sampling_enabled;
use crate::sampler::thread_state::{lookup, ThreadState};
use std::sync::atomic::Ordering;

/// The calling thread's state, unless sampling is off, it has none, or it is inside the
/// runtime.
pub(super) fn monitored_thread() -> Option<&'static ThreadState> {
    if !sampling_enabled() {
        return None;
    }
    lookup(current_tid()).filter(|s| !s.in_runtime.load(Ordering::Relaxed))
}

/// While alive, the thread counts as inside the runtime: a wait function that a signal
/// handler calls meanwhile passes through unmonitored instead of taking a bucket lock this
/// thread may hold.
pub(super) struct Bookkeeping(&'static ThreadState);

impl Bookkeeping {
    pub(super) fn enter(state: &'static ThreadState) -> Bookkeeping {
        state.in_runtime.store(true, Ordering::Relaxed);
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        Bookkeeping(state)
    }
}

impl Drop for Bookkeeping {
    fn drop(&mut self) {
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        self.0.in_runtime.store(false, Ordering::Relaxed);
    }
}

/// Runs `f` as bookkeeping of the calling thread, or not at all (`None`) when the thread is
/// not monitored.
pub(super) fn bookkeeping<R>(f: impl FnOnce() -> R) -> Option<R> {
    let state = monitored_thread()?;
    let _busy = Bookkeeping::enter(state);
    Some(f())
}

/// Whether a release or event on the object of `kind` at `address` may have something to
/// settle: false (one or two counter reads) means it has nothing to do. It does not ask
/// whether sampling is enabled, to keep that load off every lock operation: nothing is
/// pending before it is, and what is left when it stops is dropped by [`bookkeeping`],
/// which every path that this lets through goes to.
#[inline(always)]
pub fn may_be_pending(address: usize, kind: WaitKind) -> bool {
    table::maybe_dirty(address, kind)
}

/// Runs `f` as bookkeeping when something may be pending on `address` (one counter read
/// otherwise) and the thread is monitored.
#[inline(always)]
pub(super) fn pending<R>(
    address: usize,
    kind: WaitKind,
    f: impl FnOnce() -> Option<R>,
) -> Option<R> {
    if !may_be_pending(address, kind) {
        return None;
    }
    bookkeeping(f).flatten()
}

/// `pthread_*_init`/`destroy`: the object at `address` starts afresh in the wait table.
#[inline]
pub(super) fn forget_waits(address: usize) {
    let unsettled = table::forget(address, monotonic_ns);
    if unsettled > 0 {
        counters::add(Counter::BlameUnsettled, unsettled);
    }
}
