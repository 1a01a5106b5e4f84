//! The call path of a thread's latest blame-taking futex wake, published for the threads
//! that wake woke (the lock policy's wake chain, `locks::wake_chain`).
//!
//! Job: a seqlock over one path: the owner thread writes it (before the wake itself, so a
//! woken thread always finds it), other threads copy it out by the wake's sequence number.
//!
//! Invariants: one writer, the owner; readers retry a bounded number of times and discard a
//! copy that a write overlapped. Every access is atomic (the frames' relaxed), so an
//! overlapping copy is a stale value, never a data race. Async-signal-safe and
//! allocation-free after creation.

use crate::format::Frame;
use crate::unwind::walk::FRAMES_CAPACITY;
use std::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};

/// A frame as two words (module, offset), each accessed atomically: readers copy them
/// while the owner may be rewriting them (the seqlock's data; relaxed accesses, ordered by
/// the version's fences).
type AtomicFrames = [[AtomicU64; 2]; FRAMES_CAPACITY];

/// The call path of a thread's latest blame-taking futex wake.
pub struct WakePath {
    /// Even: stable; odd: being written.
    version: AtomicU64,
    /// Which wake (`WakerId::seq`) the path belongs to.
    seq: AtomicU64,
    depth: AtomicUsize,
    frames: Box<AtomicFrames>,
}

/// Readers give up on a path being rewritten after this many attempts.
const READ_ATTEMPTS: u32 = 64;

impl WakePath {
    pub fn new() -> WakePath {
        WakePath {
            version: AtomicU64::new(0),
            seq: AtomicU64::new(0),
            depth: AtomicUsize::new(0),
            frames: zeroed_frames(),
        }
    }

    /// Publishes `path` as the path of wake `seq`. Owner thread only.
    pub fn publish(&self, seq: u64, path: &[Frame]) {
        let v = self.version.load(Ordering::Relaxed);
        self.version.store(v + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        let n = path.len().min(FRAMES_CAPACITY);
        for (slot, frame) in self.frames.iter().zip(&path[..n]) {
            slot[0].store(u64::from(frame.module), Ordering::Relaxed);
            slot[1].store(frame.offset, Ordering::Relaxed);
        }
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
            // A copy that a write may overlap: used only if the version shows none did.
            for (frame, slot) in out.iter_mut().zip(&self.frames[..depth]) {
                *frame = Frame {
                    module: slot[0].load(Ordering::Relaxed) as u32,
                    offset: slot[1].load(Ordering::Relaxed),
                };
            }
            fence(Ordering::Acquire);
            if self.version.load(Ordering::Relaxed) == before {
                return (found == seq).then_some(depth);
            }
        }
        None
    }
}

/// Zeroed frames, allocated in place (no 8 KiB stack temporary, and no page resident until
/// a path is that deep, as for `unwind::walk::frame_array`). Not async-signal-safe.
fn zeroed_frames() -> Box<AtomicFrames> {
    let layout = std::alloc::Layout::new::<AtomicFrames>();
    // SAFETY: the layout has a non-zero size; the block is zeroed, and all-zero bits are a
    // valid `AtomicU64` (0); Box takes ownership of a block allocated by the global
    // allocator with the layout of its contents.
    unsafe {
        let block = std::alloc::alloc_zeroed(layout);
        if block.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Box::from_raw(block.cast::<AtomicFrames>())
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
        let mut out = crate::unwind::walk::frame_array();
        assert_eq!(p.read(7, &mut out), Some(2));
        assert_eq!(out[..2], path);
        assert_eq!(p.read(6, &mut out), None, "an older wake's path is gone");
    }
}
