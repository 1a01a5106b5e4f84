//! The call path of a thread's latest blame-taking futex wake, published for the threads
//! that wake woke (the lock policy's wake chain, `locks::wake_chain`).
//!
//! Job: a seqlock over one path: the owner thread writes it (before the wake itself, so a
//! woken thread always finds it), other threads copy it out by the wake's sequence number.
//!
//! Invariants: one writer, the owner; readers retry a bounded number of times and discard a
//! copy that a write overlapped. Async-signal-safe and allocation-free after creation.

use crate::format::Frame;
use crate::unwind::walk::{frame_array, FRAMES_CAPACITY};
use std::cell::UnsafeCell;
use std::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};

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
}
