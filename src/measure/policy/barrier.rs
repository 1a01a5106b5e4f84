//! Barriers: the last thread to arrive takes the others' waiting as its blame.
//!
//! Not async-signal-safe; allocation-free.

use super::blocked::{start_wait, Blocked};
use super::bookkeeping::Bookkeeping;
use super::carry::call_site;
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
