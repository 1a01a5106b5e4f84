//! Marking the holders of contended locks (`locks::held_marks`), for the sampling handler's
//! `held.contended` metric: the holder a contended acquisition waits for, and the thread
//! that acquires after waiting or while others wait.
//!
//! Contended paths only: an uncontended acquisition or release marks nothing. Not
//! async-signal-safe in general (not called from the handler); allocation-free.

use super::bookkeeping::may_be_pending;
use crate::format::WaitKind;
use crate::sampler::clock::current_tid;
use crate::sampler::process::sampling_enabled;
use crate::sampler::thread_state::lookup;

/// A contended acquisition of the lock of `kind` at `address` is about to wait for the
/// thread `owner`, its holder's id as the lock keeps it (0 or less: none, e.g. released
/// meanwhile or held by readers): marks the holder.
pub fn waiting_behind(owner: i32, address: usize, kind: WaitKind) {
    if owner <= 0 || !sampling_enabled() {
        return;
    }
    if let Some(state) = lookup(owner as u32) {
        state.held.mark(address, kind);
    }
}

/// The calling thread holds the lock of `kind` at `address`, acquired after waiting or
/// while others wait: marks itself if others still wait (the waiters that came before it
/// marked the previous holder). Its lock word stays "contended" to the release once it
/// waited (glibc's), so without others registered it is not marked: those that come later
/// mark it.
pub fn holding_contended(address: usize, kind: WaitKind) {
    if !sampling_enabled() || !may_be_pending(address, kind) {
        return;
    }
    if let Some(state) = lookup(current_tid()) {
        state.held.mark(address, kind);
    }
}
