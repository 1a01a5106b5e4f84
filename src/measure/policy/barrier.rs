//! Barriers: the last thread to arrive takes the others' waiting as its blame; and waits
//! of the barrier kind that begin and end in two calls ([`OpenWait`]: an OpenMP worker
//! docked in its thread pool), ended for blame by [`wake_all`].
//!
//! Not async-signal-safe; allocation-free.

use super::blocked::{register_wait, start_wait, Blocked};
use super::bookkeeping::Bookkeeping;
use super::carry::call_site;
use super::events::event;
use super::lock_counts::forget;
use super::record::{blame, record};
use crate::format::WaitKind;
use crate::locks::wait_table::{self as table, BarrierArrival, Outcome};

/// `pthread_barrier_init`: remember the barrier's size.
pub fn barrier_init(address: usize, parties: u32) {
    forget(address);
    table::barrier_init(address, parties);
}

/// `pthread_barrier_wait`: `block` is the real call. The last thread to arrive takes the
/// others' waiting, recorded as blame at its context; the others' wait is their idleness.
pub fn barrier_wait(address: usize, block: impl FnOnce() -> i32) -> i32 {
    let site = call_site();
    let Some((state, start, _)) = start_wait(address, WaitKind::Barrier, site) else {
        return block();
    };
    let arrival = {
        let _busy = Bookkeeping::enter(state);
        table::barrier_arrive(address, start)
    };
    match arrival {
        BarrierArrival::Wait(wait) => {
            let blocked = Blocked::new(state, wait, WaitKind::Barrier, site);
            let rc = block();
            let ok = rc == 0 || rc == libc::PTHREAD_BARRIER_SERIAL_THREAD;
            blocked.finish(
                WaitKind::Barrier,
                if ok {
                    Outcome::Success
                } else {
                    Outcome::NoWait
                },
            );
            rc
        }
        BarrierArrival::Last(taken) => {
            let rc = block();
            // At its arrival, which ended the others' waits.
            record(&[blame(WaitKind::Barrier, address, taken).timed(start, 0)]);
            rc
        }
        BarrierArrival::Unknown => block(),
    }
}

/// A barrier-kind wait that begins and ends in two calls, across its thread's returns to
/// code the runtime does not see (an OpenMP worker docked in its thread pool between
/// regions, `runtime/src/openmp.rs`). Its samples meanwhile record nothing; a thread that
/// exits with it open abandons it, as a cancelled wait.
pub struct OpenWait(Blocked);

/// Begins an [`OpenWait`] of the calling thread on the object at `address`; None where the
/// thread is not measured or already waits.
pub fn open_wait(address: usize) -> Option<OpenWait> {
    let site = call_site();
    let (state, start, carried) = start_wait(address, WaitKind::Barrier, site)?;
    register_wait(
        state,
        address,
        WaitKind::Barrier,
        (start, 1),
        (carried, site),
    )
    .map(OpenWait)
}

impl OpenWait {
    /// Ends the wait, recorded as idleness at the caller's context.
    pub fn close(self) {
        self.0.finish(WaitKind::Barrier, Outcome::Success);
    }
}

/// The event that ends every [`OpenWait`] on `address` (an OpenMP region starting): their
/// waiting so far is the caller's blame, at its context.
pub fn wake_all(address: usize) {
    event(address, WaitKind::Barrier, u32::MAX, || (), |_| true);
}
