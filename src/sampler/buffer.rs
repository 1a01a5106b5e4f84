//! A thread's sample buffer: encoding samples into the chunk being filled, and flushing it.
//!
//! Job: append [`RecordTag::Sample`] records, sharing the root-side frames a sample has in
//! common with the previous one of the same chunk, each preceded by a [`RecordTag::Time`]
//! when its time differs from the previous sample's, and write the chunk out when full.
//! Async-signal-safe: fixed buffers, no allocation after [`BufferPart::new`].
//!
//! Invariant: `prev` and `prev_time` always describe the last sample committed in the
//! current chunk (a new chunk starts with none, and time 0), so the reader can rebuild every
//! path and time from the chunk alone.

use super::clock::monotonic_ns;
use super::counters::{self, Counter};
use super::output::{self, Chunk, Unwritten};
use super::records;
use crate::format::wire::{Full, RecordWriter, CHUNK_HEADER_LEN};
use crate::format::{Frame, LockInterval, LockStats, RecordTag};
use crate::unwind::walk::{frame_array, FRAMES_CAPACITY};

/// Bytes of sample data buffered per thread before a chunk is written: a few writes a second
/// at 1 kHz, and little memory per thread (it counts in the program's RSS; the runtime heap
/// makes its pages resident only as they fill). Holds the deepest sample (512 frames of at
/// most 11 bytes each).
pub const BUFFER_LEN: usize = 8 * 1024;
/// A chunk is also written once it holds samples this old, so a program that crashes or is
/// killed loses at most about this much of its profile.
pub const MAX_BUFFER_AGE_NS: u64 = 1_000_000_000;

/// One sample's metric, value and flags ([`WaitKind`] bits), to record at a call path,
/// the lock or waited-on object it is about (its address; 0 none), and when its event
/// ended (`at`, monotonic ns; 0: when it is recorded) and how long it lasted (`span`, ns;
/// 0: not known or not an interval).
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub metric: u8,
    pub value: u64,
    pub flags: u8,
    pub object: usize,
    pub at: u64,
    pub span: u64,
}

impl Sample {
    /// This sample, about an event that ended at `at` and lasted `span`.
    pub fn timed(self, at: u64, span: u64) -> Sample {
        Sample { at, span, ..self }
    }
}

pub struct BufferPart {
    bytes: Box<[u8]>,
    /// Committed bytes, including the reserved header space.
    len: usize,
    /// Samples in the committed bytes (counted as lost if the buffer cannot be written).
    samples: u64,
    /// The previous sample's path in this chunk.
    prev: Box<[Frame; FRAMES_CAPACITY]>,
    prev_len: usize,
    /// The previous sample's time and span in this chunk.
    prev_time: (u64, u64),
    /// Monotonic time of the last flush (or of the buffer's creation).
    flushed_at_ns: u64,
}

impl BufferPart {
    /// Allocates the buffer. Not async-signal-safe.
    pub fn new() -> Self {
        BufferPart {
            bytes: vec![0u8; BUFFER_LEN].into_boxed_slice(),
            len: CHUNK_HEADER_LEN,
            samples: 0,
            prev: frame_array(),
            prev_len: 0,
            prev_time: (0, 0),
            flushed_at_ns: monotonic_ns(),
        }
    }

    /// Starts a new, empty chunk, discarding anything buffered.
    pub fn reset(&mut self) {
        self.len = CHUNK_HEADER_LEN;
        self.samples = 0;
        self.prev_len = 0;
        self.prev_time = (0, 0);
    }

    /// Appends a sample (with `flags` added to its own; at its time, or at `now`, the
    /// caller's clock read, if it has none), flushing the chunk first if it is full, or
    /// after if it has grown older than [`MAX_BUFFER_AGE_NS`]. Async-signal-safe.
    pub fn push_sample(&mut self, tid: u32, s: &Sample, flags: u8, path: &[Frame], now: u64) {
        let sample = Sample {
            flags: s.flags | flags,
            at: if s.at == 0 { now } else { s.at },
            ..*s
        };
        if self.try_append(&sample, path).is_ok() {
            if now.saturating_sub(self.flushed_at_ns) > MAX_BUFFER_AGE_NS {
                self.flush(tid);
            }
            return;
        }
        self.flush(tid);
        if self.try_append(&sample, path).is_err() {
            counters::add(Counter::DroppedFlushFailed, 1);
        }
    }

    /// Appends a lock's counters and, or, its counts of an interval, flushing first if the
    /// buffer is full. False when even an empty buffer could not take them (it cannot
    /// happen: the records are under 200 bytes).
    pub fn push_lock_stats(
        &mut self,
        tid: u32,
        stats: Option<&LockStats>,
        interval: Option<&LockInterval>,
    ) -> bool {
        if self.try_lock_stats(stats, interval).is_ok() {
            return true;
        }
        self.flush(tid);
        self.try_lock_stats(stats, interval).is_ok()
    }

    fn try_lock_stats(
        &mut self,
        stats: Option<&LockStats>,
        interval: Option<&LockInterval>,
    ) -> Result<(), Full> {
        let mut w = RecordWriter::new(&mut self.bytes, self.len);
        if let Some(stats) = stats {
            records::lock_stats(&mut w, stats)?;
        }
        if let Some(interval) = interval {
            records::lock_interval(&mut w, interval)?;
        }
        self.len = w.committed();
        // A chunk is written when it holds samples; this record counts as one.
        self.samples += 1;
        Ok(())
    }

    /// Appends a sample at `path`, after its time if that changed.
    fn try_append(&mut self, s: &Sample, path: &[Frame]) -> Result<(), Full> {
        let depth = path.len().min(FRAMES_CAPACITY);
        let prev = &self.prev[..self.prev_len];
        let shared = path
            .iter()
            .rev()
            .zip(prev.iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        let mut w = RecordWriter::new(&mut self.bytes, self.len);
        let time = (s.at, s.span);
        if time != self.prev_time {
            w.tag(RecordTag::Time)?;
            w.signed(s.at.wrapping_sub(self.prev_time.0) as i64)?;
            w.varint(s.span)?;
        }
        if s.object == 0 {
            w.tag(RecordTag::Sample)?;
        } else {
            w.tag(RecordTag::ObjectSample)?;
        }
        w.u8(s.metric)?;
        w.varint(s.value)?;
        w.u8(s.flags)?;
        if s.object != 0 {
            w.varint(s.object as u64)?;
        }
        w.varint(depth as u64)?;
        w.varint(shared as u64)?;
        for &frame in &path[..depth - shared] {
            w.frame(frame)?;
        }
        w.commit();
        self.len = w.committed();
        self.samples += 1;
        self.prev[..depth].copy_from_slice(&path[..depth]);
        self.prev_len = depth;
        self.prev_time = time;
        Ok(())
    }

    /// Writes the buffered chunk (if any) and starts a new one. Samples that could not be
    /// written are counted as lost. Async-signal-safe.
    pub fn flush(&mut self, tid: u32) {
        if self.samples > 0 {
            let written = output::write_chunk(&mut self.bytes[..self.len], tid, Chunk::Samples);
            match written {
                Ok(()) => {}
                Err(Unwritten::OverLimit) => counters::add(Counter::DroppedSizeLimit, self.samples),
                Err(Unwritten::Failed) => counters::add(Counter::DroppedFlushFailed, self.samples),
            }
        }
        self.reset();
        self.flushed_at_ns = monotonic_ns();
    }
}

impl Default for BufferPart {
    fn default() -> Self {
        Self::new()
    }
}
