//! Marking the holders of contended locks (`locks::held_marks`), for the sampling handler's
//! `held.contended` metric: the holder a contended acquisition waits for. (A thread that
//! acquires after waiting is not marked here, inside the program's critical section: its
//! handler also checks the lock of its latest contended acquisition.)
//!
//! Contended paths only: an uncontended acquisition or release marks nothing. Not
//! async-signal-safe in general (not called from the handler); allocation-free.

use crate::format::WaitKind;
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
