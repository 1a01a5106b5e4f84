//! A sequence counter: what lets data written under a bucket lock be read without it.
//!
//! Job: a writer (holding the lock that orders writers) brackets its stores with
//! [`SeqCount::begin_write`] and [`SeqCount::end_write`], which leave the count odd in
//! between; a reader takes [`SeqCount::read_begin`], copies what it needs with relaxed
//! atomic loads, and keeps the copy only if [`SeqCount::read_valid`] says no write began
//! meanwhile. Used for a mutex's waiter-time history with its entry's key
//! (`super::history`) and for a bucket's chain (`super::buckets`).
//!
//! Invariants: writers never nest or overlap (the bucket lock orders them); everything read
//! under it is an atomic. Wait-free, allocation-free.

use std::sync::atomic::{fence, AtomicU32, Ordering};

/// A sequence count (zero: no write ever).
#[derive(Debug, Default)]
pub(super) struct SeqCount(AtomicU32);

impl SeqCount {
    pub(super) const fn new() -> SeqCount {
        SeqCount(AtomicU32::new(0))
    }

    /// Opens a write section: the count is odd until [`end_write`](Self::end_write).
    pub(super) fn begin_write(&self) {
        let s = self.0.load(Ordering::Relaxed);
        self.0.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
    }

    /// Closes the write section.
    pub(super) fn end_write(&self) {
        let s = self.0.load(Ordering::Relaxed);
        self.0.store(s.wrapping_add(1), Ordering::Release);
    }

    /// The count to validate a read with, or `None` while a write is in progress.
    pub(super) fn read_begin(&self) -> Option<u32> {
        let s = self.0.load(Ordering::Acquire);
        (s & 1 == 0).then_some(s)
    }

    /// Whether no write began since [`read_begin`](Self::read_begin) returned `s`.
    pub(super) fn read_valid(&self, s: u32) -> bool {
        fence(Ordering::Acquire);
        self.0.load(Ordering::Relaxed) == s
    }
}
