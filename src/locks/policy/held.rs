//! Marking the holders of contended locks (`locks::held_marks`), for the sampling handler's
//! `held.contended` metric: the holder a contended acquisition waits for, and the mutex's
//! count of threads waiting. (A thread that
//! acquires after waiting is not marked here, inside the program's critical section: its
//! handler also checks the lock of its latest contended acquisition.)
//!
//! Contended paths only: an uncontended acquisition or release marks nothing. Not
//! async-signal-safe in general (not called from the handler); allocation-free.

use crate::format::WaitKind;
use crate::locks::held_marks;
use crate::sampler::clock::{current_tid, other_thread_cpu_ns, thread_cpu_ns};
use crate::sampler::process::sampling_enabled;
use crate::sampler::thread_state::lookup;

/// A contended acquisition of the lock of `kind` at `address` is about to wait for the
/// thread `owner`, its holder's id as the lock keeps it (0 or less: none, e.g. released
/// meanwhile or held by readers): marks the holder. `others`: whether others were waiting
/// for it already (then the hold was contended before this arrival).
pub fn waiting_behind(owner: i32, address: usize, kind: WaitKind, others: bool) {
    if owner <= 0 || !sampling_enabled() {
        return;
    }
    if let Some(state) = lookup(owner as u32) {
        state.held.mark(address, kind);
        // The first waiter notes the holder's CPU time now (a system call, before the
        // wait): its samples count the lock as contended only once they fell due after
        // this (`HeldMarks::waited_before`). Behind others, the hold was contended before.
        let since = if others {
            0
        } else {
            other_thread_cpu_ns(owner as u32)
        };
        state.held.waited_from(since);
    }
}

/// A thread arrives to wait for the mutex at `address` (before any bookkeeping): its holder
/// counts as contended until [`waiter_leaves`] (`held_marks::waiter_arrives`). Returns how
/// many were waiting already.
pub fn waiter_arrives(address: usize) -> u32 {
    let others = held_marks::waiter_arrives(address);
    if others > 0 && sampling_enabled() {
        // Others wait already: most likely some still will when this thread's hold begins,
        // so its samples may count from its start. Its CPU time stands still while it
        // waits: read now, before the wait, it is its CPU time when the hold begins.
        if let Some(state) = lookup(current_tid()) {
            state.held.waited_from(thread_cpu_ns());
        }
    }
    others
}

/// The wait [`waiter_arrives`] announced is over (acquired, failed or timed out).
pub fn waiter_leaves(address: usize) {
    held_marks::waiter_leaves(address);
}
