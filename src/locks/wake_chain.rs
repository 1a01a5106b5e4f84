//! Wake chains: a waker that was itself kept waiting passes that part of the blame on.
//!
//! Job: futex blame is per futex address, and some locks park every waiter on its own
//! address (parking_lot's per-thread parkers): the slow holder's unlock wakes the first
//! queued thread, whose own unlock a moment later wakes the second — which has waited all
//! along, mostly behind the slow holder. When a thread wakes a futex's only waiter, the part
//! of that waiter's wait that overlaps the waker's *own* last futex wait is not the waker's
//! doing (it could not wake anyone while it slept itself); it is charged to whoever woke
//! the waker, at the call path of that wake. The waker's own wait lasts until it is back in
//! the program: its wake-up latency after the wake that ended it is waiting too, not a hold
//! of the lock. One link of the chain is followed.
//!
//! For that, every thread publishes the call path of its latest futex wake that took blame
//! (the sampler's `wake_path`) before the wake itself, so a thread it wakes always finds it,
//! and remembers its own latest futex wait and who ended it ([`LastWait`], here).
//!
//! Pure arithmetic on the thread's own records; async-signal-safe.

use crate::wait_table::WakerId;

/// A thread's latest futex wait that a wake ended: when, and by which wake. A thread woken
/// that did not get what it waited for parks again on the same futex without having woken
/// anyone: such a run of waits counts as one, from the first start.
#[derive(Debug, Clone, Copy)]
pub struct LastWait {
    pub start_ns: u64,
    /// When the thread was back in the program (until then: when the wake happened).
    pub resumed_ns: u64,
    pub by: WakerId,
    /// The futex waited on.
    pub address: usize,
    /// The thread's count of wakes when this wait ended.
    pub wakes: u64,
}

impl LastWait {
    /// The thread's last wait after a wait on `address` from `start_ns` that wake `by`
    /// ended at `resumed_ns`, the thread having made `wakes` wakes so far: a continuation of
    /// `previous` if that was on the same futex and the thread has woken nobody since.
    pub fn after(
        previous: Option<LastWait>,
        address: usize,
        start_ns: u64,
        resumed_ns: u64,
        by: WakerId,
        wakes: u64,
    ) -> LastWait {
        let start_ns = match previous {
            Some(p) if p.address == address && p.wakes == wakes => p.start_ns.min(start_ns),
            _ => start_ns,
        };
        LastWait {
            start_ns,
            resumed_ns,
            by,
            address,
            wakes,
        }
    }

    /// How much of `[since, now]` falls within this wait.
    pub fn overlap(&self, since: u64, now: u64) -> u64 {
        let from = since.max(self.start_ns);
        let to = now.min(self.resumed_ns);
        to.saturating_sub(from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parking_again_on_the_same_futex_without_waking_anyone_continues_the_wait() {
        let by = WakerId { tid: 5, seq: 1 };
        let first = LastWait::after(None, 8, 100, 200, by, 3);
        let again = LastWait::after(Some(first), 8, 250, 400, by, 3);
        assert_eq!((again.start_ns, again.resumed_ns), (100, 400));
        let after_a_wake = LastWait::after(Some(first), 8, 250, 400, by, 4);
        assert_eq!(after_a_wake.start_ns, 250, "it woke someone in between");
        let elsewhere = LastWait::after(Some(first), 16, 250, 400, by, 3);
        assert_eq!(elsewhere.start_ns, 250, "another futex");
    }

    #[test]
    fn overlap_is_the_shared_part_of_two_intervals() {
        let w = LastWait::after(None, 8, 100, 200, WakerId::default(), 0);
        assert_eq!(w.overlap(150, 300), 50);
        assert_eq!(w.overlap(50, 300), 100);
        assert_eq!(w.overlap(250, 300), 0);
        assert_eq!(w.overlap(120, 180), 60);
    }
}
