//! Allocation-free encoding of profile records into a caller-supplied byte buffer.
//!
//! Job: the runtime's only way to produce profile bytes. Everything here writes into a
//! fixed `&mut [u8]` and never allocates, so it is **async-signal-safe** and is used from the
//! sampling signal handler.
//!
//! Invariants: a record is either written completely or not at all ([`RecordWriter::commit`]
//! publishes it); a full buffer makes a write return `Err(Full)`, leaving the previously
//! committed bytes intact, so the caller can flush and retry.

use super::{Frame, RecordTag};

/// The buffer has no room left for the record being written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

/// Appends records to a fixed buffer. `len` counts committed bytes only.
pub struct RecordWriter<'a> {
    buf: &'a mut [u8],
    committed: usize,
    pos: usize,
}

impl<'a> RecordWriter<'a> {
    /// Starts writing after `committed` bytes already in `buf`.
    pub fn new(buf: &'a mut [u8], committed: usize) -> Self {
        let committed = committed.min(buf.len());
        RecordWriter {
            buf,
            committed,
            pos: committed,
        }
    }

    /// Bytes committed so far (the length to flush).
    pub fn committed(&self) -> usize {
        self.committed
    }

    /// Drops any partially written record.
    pub fn rollback(&mut self) {
        self.pos = self.committed;
    }

    /// Makes the record written since the last commit part of the buffer.
    pub fn commit(&mut self) {
        self.committed = self.pos;
    }

    pub fn u8(&mut self, v: u8) -> Result<(), Full> {
        let slot = self.buf.get_mut(self.pos).ok_or(Full)?;
        *slot = v;
        self.pos += 1;
        Ok(())
    }

    pub fn tag(&mut self, tag: RecordTag) -> Result<(), Full> {
        self.u8(tag as u8)
    }

    /// LEB128 unsigned varint.
    pub fn varint(&mut self, mut v: u64) -> Result<(), Full> {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                return self.u8(byte);
            }
            self.u8(byte | 0x80)?;
        }
    }

    /// A signed value as a zigzag-encoded varint (`(v << 1) ^ (v >> 63)`: small magnitudes
    /// of either sign stay short).
    pub fn signed(&mut self, v: i64) -> Result<(), Full> {
        self.varint(((v << 1) ^ (v >> 63)) as u64)
    }

    pub fn bytes(&mut self, data: &[u8]) -> Result<(), Full> {
        self.varint(data.len() as u64)?;
        let end = self.pos.checked_add(data.len()).ok_or(Full)?;
        let dst = self.buf.get_mut(self.pos..end).ok_or(Full)?;
        dst.copy_from_slice(data);
        self.pos = end;
        Ok(())
    }

    pub fn frame(&mut self, frame: Frame) -> Result<(), Full> {
        self.varint(u64::from(frame.module))?;
        self.varint(frame.offset)
    }
}

/// Size of the fixed header at the start of every part file.
pub const FILE_HEADER_LEN: usize = 16;
/// Size of the header in front of every chunk.
pub const CHUNK_HEADER_LEN: usize = 16;
/// The longest chunk payload a writer makes (the runtime's record buffers grow up to it); a
/// reader takes a longer length as damage, never as a part cut short.
pub const MAX_CHUNK_LEN: usize = 64 << 20;

/// Writes the 16-byte file header: magic, version, reserved.
pub fn file_header() -> [u8; FILE_HEADER_LEN] {
    let mut h = [0u8; FILE_HEADER_LEN];
    h[..8].copy_from_slice(&super::FILE_MAGIC);
    h[8..12].copy_from_slice(&super::FORMAT_VERSION.to_le_bytes());
    h
}

/// Fills the chunk header in front of `payload`: magic, payload length, CRC-32 of the payload,
/// writer thread id. Allocation-free; async-signal-safe.
pub fn chunk_header(payload: &[u8], tid: u32) -> [u8; CHUNK_HEADER_LEN] {
    let mut h = [0u8; CHUNK_HEADER_LEN];
    h[..4].copy_from_slice(&super::CHUNK_MAGIC);
    h[4..8].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    h[8..12].copy_from_slice(&crc32(payload).to_le_bytes());
    h[12..16].copy_from_slice(&tid.to_le_bytes());
    h
}

/// CRC-32 (IEEE, as `crc32fast::hash`, which the reader uses) one byte at a time, from a
/// 1 KiB table. The writer's checksum runs in the profiled program, over a few 8 KiB chunks
/// a second per thread (microseconds each); crc32fast's 16 KiB table and its SIMD
/// variants, with their CPU-feature detection, were 16 KiB of read-only data and 6 KiB of
/// code resident in every profiled process. Allocation-free; async-signal-safe.
pub fn crc32(data: &[u8]) -> u32 {
    !data.iter().fold(!0u32, |crc, &b| {
        CRC32_TABLE[usize::from(crc as u8 ^ b)] ^ (crc >> 8)
    })
}

/// The byte-wise table of the reflected CRC-32 polynomial 0xEDB88320.
static CRC32_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writers_crc32_is_the_one_the_reader_checks() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926, "the standard check value");
        assert_eq!(crc32(&[]), crc32fast::hash(&[]));
        let data: Vec<u8> = (0u32..20_000)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in [1, 3, 15, 16, 17, 63, 64, 65, 4096, 8192, 20_000] {
            assert_eq!(
                crc32(&data[..len]),
                crc32fast::hash(&data[..len]),
                "{len} bytes"
            );
        }
    }
}
