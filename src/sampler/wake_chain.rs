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
//! ([`WakePath`], a seqlock: the writer is the owner thread, readers are the threads its
//! wakes woke) before the wake itself, so a thread it wakes always finds it, and remembers
//! its own latest futex wait and who ended it ([`LastWait`]).
//!
//! Not used by the signal handler; allocation-free after the thread's state is created.

use crate::format::Frame;
use crate::locks::wait_table::WakerId;
use crate::unwind::walk::{frame_array, FRAMES_CAPACITY};
use std::cell::UnsafeCell;
use std::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};

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

/// The call path of a thread's latest blame-taking futex wake.
pub struct WakePath {
    /// Even: stable; odd: being written.
    version: AtomicU64,
    /// Which wake (`WakerId::seq`) the path belongs to.
    seq: AtomicU64,
    depth: AtomicUsize,
    frames: UnsafeCell<Box<[Frame; FRAMES_CAPACITY]>>,
}

// SAFETY: `frames` is written only by the owner thread, with `version` odd; readers copy it
// and discard the copy unless `version` was even and unchanged around the copy (a seqlock).
// Frames are plain integers, so a torn read is harmless before it is discarded.
unsafe impl Sync for WakePath {}

/// Readers give up on a path being rewritten after this many attempts.
const READ_ATTEMPTS: u32 = 64;

impl WakePath {
    pub fn new() -> WakePath {
        WakePath {
            version: AtomicU64::new(0),
            seq: AtomicU64::new(0),
            depth: AtomicUsize::new(0),
            frames: UnsafeCell::new(frame_array()),
        }
    }

    /// Publishes `path` as the path of wake `seq`. Owner thread only.
    pub fn publish(&self, seq: u64, path: &[Frame]) {
        let v = self.version.load(Ordering::Relaxed);
        self.version.store(v + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        let n = path.len().min(FRAMES_CAPACITY);
        // SAFETY: only the owner thread writes, and it marked the path as being written.
        unsafe { (&mut **self.frames.get())[..n].copy_from_slice(&path[..n]) };
        self.depth.store(n, Ordering::Relaxed);
        self.seq.store(seq, Ordering::Relaxed);
        self.version.store(v + 2, Ordering::Release);
    }

    /// Copies the path of wake `seq` into `out`; its depth, or `None` when the thread has
    /// published another path since (or is rewriting it for too long).
    pub fn read(&self, seq: u64, out: &mut [Frame; FRAMES_CAPACITY]) -> Option<usize> {
        for _ in 0..READ_ATTEMPTS {
            let before = self.version.load(Ordering::Acquire);
            if before % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let depth = self.depth.load(Ordering::Relaxed).min(FRAMES_CAPACITY);
            let found = self.seq.load(Ordering::Relaxed);
            // SAFETY: a racy copy of plain integers; it is used only if the version shows
            // no write overlapped it.
            unsafe {
                let src = (*self.frames.get()).as_ptr();
                std::ptr::copy_nonoverlapping(src, out.as_mut_ptr(), depth);
            }
            fence(Ordering::Acquire);
            if self.version.load(Ordering::Relaxed) == before {
                return (found == seq).then_some(depth);
            }
        }
        None
    }
}

impl Default for WakePath {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_published_path_is_read_back_only_for_its_own_wake() {
        let p = WakePath::new();
        let path = [
            Frame {
                module: 1,
                offset: 10,
            },
            Frame {
                module: 2,
                offset: 20,
            },
        ];
        p.publish(7, &path);
        let mut out = frame_array();
        assert_eq!(p.read(7, &mut out), Some(2));
        assert_eq!(out[..2], path);
        assert_eq!(p.read(6, &mut out), None, "an older wake's path is gone");
    }

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
