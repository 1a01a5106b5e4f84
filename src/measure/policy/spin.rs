//! The policy side of spin locks: what `locks::spin`'s protocol asks of the runtime (whether
//! a lock is monitored, marking a spinning thread, recording its spin and a holder's blame).
//!
//! Job: implement [`spin::SpinHooks`]. A process-shared spin lock is never monitored
//! (`policy::shared_spin`): another process could not resolve its converted word. A spinner
//! on a monitored lock unwinds while it waits (when its record will probably be kept), and
//! the record of its spin waits until its release of the lock: the program's critical
//! section pays for neither (with the unwind inside it, a spin made the next hold
//! microseconds long, and short holds fell into convoys that did not end).
//!
//! Not async-signal-safe; allocation-free.

use super::blocked::{
    defer_wait_record, record_deferred_hold_wait, record_deferred_wait, record_wait,
    worth_capturing,
};
use super::lock_counts;
use super::record::{blame, idleness, record, Kept};
use crate::format::WaitKind;
use crate::locks::spin;
use crate::policy::shared_spin::spin_is_shared;
use crate::sampler::clock::{current_tid, monotonic_ns};
use crate::sampler::counters::{self, Counter};
use crate::sampler::process::sampling_enabled;
use crate::sampler::sync_sample::capture_wait_path;
use crate::sampler::thread_state::lookup;
use crate::sampler::wait_cpu;

/// The sampler's side of the spin-lock protocols.
pub struct SpinGlue {
    pub address: usize,
}

impl spin::SpinHooks for SpinGlue {
    fn active(&self) -> bool {
        sampling_enabled() && !spin_is_shared(self.address)
    }

    fn spin_begins(&self) {
        if let Some(state) = lookup(current_tid()) {
            wait_cpu::begin(state, monotonic_ns());
        }
    }

    fn monitored_spin_begins(&self) {
        if let Some(state) = lookup(current_tid()) {
            // A record deferred from an earlier hold first: its path is the captured one.
            record_deferred_wait(state);
            let now = monotonic_ns();
            wait_cpu::begin(state, now);
            // The lock's row is found now, and the path unwound, while the thread waits
            // anyway.
            lock_counts::prepare_waits(state, self.address, WaitKind::Spin, now);
            if worth_capturing(state) {
                capture_wait_path();
            }
        }
    }

    fn spin_ends(&self, ns: u64, end: u64) {
        let sample = idleness(WaitKind::Spin, self.address, ns, true).timed(end, ns);
        match lookup(current_tid()) {
            Some(state) => {
                wait_cpu::end(state);
                lock_counts::spun_pending(state, self.address, ns);
                if !defer_wait_record(state, &sample) {
                    record_wait(state, &[sample]);
                }
            }
            None => {
                lock_counts::spun(self.address, ns);
                record(&[sample]);
            }
        }
    }

    fn released(&self, ns: u64) {
        if let Some(state) = lookup(current_tid()) {
            record_deferred_hold_wait(state);
        }
        if ns > 0 && !Kept::of(&[blame(WaitKind::Spin, self.address, ns)]).record_here() {
            counters::add(Counter::BlameUnsettled, ns);
        }
    }

    fn spun_natively(&self, ns: u64) {
        if let Some(state) = lookup(current_tid()) {
            wait_cpu::end(state);
        }
        counters::add(Counter::WaitsUnmonitored, 1);
        lock_counts::spun(self.address, ns);
        // Unblamed: the native holder releases by a store and hears of no waiter.
        record(&[idleness(WaitKind::Spin, self.address, ns, false).timed(0, ns)]);
    }

    fn now(&self) -> u64 {
        monotonic_ns()
    }
}

/// Counts the waiting a recycled spin lock record still held (`spin::reset`'s result):
/// the lock was destroyed or initialised while held with spinners, so nobody's unlock
/// will take it.
pub fn spin_reset(left_ns: u64) {
    if left_ns > 0 {
        counters::add(Counter::BlameUnsettled, left_ns);
    }
}
