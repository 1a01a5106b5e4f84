//! A thread's sample buffer: encoding samples into the chunk being filled, and flushing it.
//!
//! Job: append [`RecordTag::Sample`] records, sharing the root-side frames a sample has in
//! common with the previous one of the same chunk, and write the chunk out when full.
//! Async-signal-safe: fixed buffers, no allocation after [`BufferPart::new`].
//!
//! Invariant: `prev` always describes the last sample committed in the current chunk (a
//! new chunk starts with none), so the reader can rebuild every path from the chunk alone.

use super::clock::monotonic_ns;
use super::counters::{self, Counter};
use super::output;
use crate::format::wire::{Full, RecordWriter, CHUNK_HEADER_LEN};
use crate::format::{Frame, RecordTag};
use crate::unwind::walk::{frame_array, FRAMES_CAPACITY};

/// Bytes of sample data buffered per thread before a chunk is written: a few writes a second
/// at 1 kHz, and little memory per thread (it counts in the program's RSS; the runtime heap
/// makes its pages resident only as they fill). Holds the deepest sample (512 frames of at
/// most 11 bytes each).
pub const BUFFER_LEN: usize = 8 * 1024;
/// A chunk is also written once it holds samples this old, so a program that crashes or is
/// killed loses at most about this much of its profile.
pub const MAX_BUFFER_AGE_NS: u64 = 1_000_000_000;

pub struct BufferPart {
    bytes: Box<[u8]>,
    /// Committed bytes, including the reserved header space.
    len: usize,
    /// Samples in the committed bytes (counted as lost if the buffer cannot be written).
    samples: u64,
    /// The previous sample's path in this chunk.
    prev: Box<[Frame; FRAMES_CAPACITY]>,
    prev_len: usize,
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
            flushed_at_ns: monotonic_ns(),
        }
    }

    /// Starts a new, empty chunk, discarding anything buffered.
    pub fn reset(&mut self) {
        self.len = CHUNK_HEADER_LEN;
        self.samples = 0;
        self.prev_len = 0;
    }

    /// Appends a sample, flushing the chunk first if it is full, or after if it has grown
    /// older than [`MAX_BUFFER_AGE_NS`]. Async-signal-safe.
    pub fn push_sample(&mut self, tid: u32, metric: u8, value: u64, flags: u8, path: &[Frame]) {
        if self.try_append(metric, value, flags, path).is_ok() {
            if monotonic_ns().saturating_sub(self.flushed_at_ns) > MAX_BUFFER_AGE_NS {
                self.flush(tid);
            }
            return;
        }
        self.flush(tid);
        if self.try_append(metric, value, flags, path).is_err() {
            counters::add(Counter::DroppedFlushFailed, 1);
        }
    }

    fn try_append(
        &mut self,
        metric: u8,
        value: u64,
        flags: u8,
        path: &[Frame],
    ) -> Result<(), Full> {
        let depth = path.len().min(FRAMES_CAPACITY);
        let prev = &self.prev[..self.prev_len];
        let shared = path
            .iter()
            .rev()
            .zip(prev.iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        let mut w = RecordWriter::new(&mut self.bytes, self.len);
        w.tag(RecordTag::Sample)?;
        w.u8(metric)?;
        w.varint(value)?;
        w.u8(flags)?;
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
        Ok(())
    }

    /// Writes the buffered chunk (if any) and starts a new one. Samples that could not be
    /// written are counted as lost. Async-signal-safe.
    pub fn flush(&mut self, tid: u32) {
        if self.samples > 0 && !output::write_chunk(&mut self.bytes[..self.len], tid) {
            counters::add(Counter::DroppedFlushFailed, self.samples);
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
