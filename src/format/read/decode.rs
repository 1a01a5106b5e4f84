//! Decoding one part file's bytes: its header, then chunk by chunk (each checked before
//! any of its records is believed) the records into a [`ProcessProfile`].
//!
//! Invariants: those of the reader ([`super`]): a damaged chunk is an error unless
//! salvaging, hostile input ends in a [`ReadError`], no allocation is sized by a value read
//! from the file. Not async-signal-safe (allocates).

use super::{ModuleInfo, ProcessProfile, ReadError, ReadOptions, Sample, ThreadInfo};
use crate::wire::{CHUNK_HEADER_LEN, FILE_HEADER_LEN};
use crate::{
    Frame, LockInterval, LockStats, MetricDef, RecordTag, CHUNK_MAGIC, FILE_MAGIC, FORMAT_VERSION,
    MAX_STACK_DEPTH, TAIL_VERSION,
};
use std::collections::HashMap;
use std::path::Path;

/// Decodes the bytes of one part file.
pub fn decode_part(
    path: &Path,
    data: &[u8],
    opts: ReadOptions,
) -> Result<ProcessProfile, ReadError> {
    if data.is_empty() {
        return Err(ReadError::Empty(path.to_owned()));
    }
    if data.len() < 8 || data[..8] != FILE_MAGIC {
        return Err(ReadError::NotAProfile(path.to_owned()));
    }
    if data.len() < FILE_HEADER_LEN {
        return Err(ReadError::Truncated {
            path: path.to_owned(),
            offset: data.len() as u64,
        });
    }
    let version = u32::from_le_bytes(data[8..12].try_into().expect("4 bytes"));
    if version > FORMAT_VERSION {
        return Err(ReadError::NewerVersion {
            path: path.to_owned(),
            found: version,
        });
    }
    if version == 0 {
        return Err(ReadError::Corrupted {
            path: path.to_owned(),
            offset: 8,
            what: "version 0",
        });
    }
    let mut builder = Builder {
        profile: ProcessProfile {
            path: path.to_owned(),
            version,
            ..Default::default()
        },
        last_stack: Vec::new(),
        time: (0, 0),
        counters: HashMap::new(),
        module_index: HashMap::new(),
        thread_index: HashMap::new(),
        thread_listed: false,
        skip_samples: opts.skip_samples,
    };
    let mut pos = FILE_HEADER_LEN;
    while pos < data.len() {
        let damage = |err: ReadError| -> Result<(), ReadError> {
            if opts.salvage {
                Ok(())
            } else {
                Err(err)
            }
        };
        if data.len() - pos < CHUNK_HEADER_LEN {
            builder.cut_short(path, pos, opts)?;
            break;
        }
        let header = &data[pos..pos + CHUNK_HEADER_LEN];
        if header[..4] != CHUNK_MAGIC {
            let err = ReadError::Corrupted {
                path: path.to_owned(),
                offset: pos as u64,
                what: "bad chunk magic",
            };
            builder.profile.damage = Some(err.to_string());
            damage(err)?;
            break;
        }
        let len = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
        let tid = u32::from_le_bytes(header[12..16].try_into().expect("4 bytes"));
        let body_start = pos + CHUNK_HEADER_LEN;
        if len > crate::wire::MAX_CHUNK_LEN {
            let err = ReadError::Corrupted {
                path: path.to_owned(),
                offset: pos as u64,
                what: "chunk longer than any writer makes",
            };
            builder.profile.damage = Some(err.to_string());
            damage(err)?;
            break;
        }
        if data.len() - body_start < len {
            builder.cut_short(path, pos, opts)?;
            break;
        }
        let body = &data[body_start..body_start + len];
        if crc32fast::hash(body) != crc {
            let err = ReadError::Corrupted {
                path: path.to_owned(),
                offset: pos as u64,
                what: "checksum mismatch",
            };
            builder.profile.damage = Some(err.to_string());
            damage(err)?;
            break;
        }
        if let Err(what) = builder.chunk(tid, body) {
            let err = ReadError::Corrupted {
                path: path.to_owned(),
                offset: pos as u64,
                what,
            };
            builder.profile.damage = Some(err.to_string());
            damage(err)?;
            break;
        }
        pos = body_start + len;
    }
    Ok(builder.finish())
}

impl Builder {
    /// The part ends inside the chunk at `offset`. Before its end record that is a part
    /// whose process was killed while its writes were partly done, ran out of disk or file
    /// size, or is still writing: what precedes is read, and the cut noted as its damage.
    /// After it, the file was damaged: an error unless salvaging.
    fn cut_short(
        &mut self,
        path: &Path,
        offset: usize,
        opts: ReadOptions,
    ) -> Result<(), ReadError> {
        let err = ReadError::Truncated {
            path: path.to_owned(),
            offset: offset as u64,
        };
        if self.profile.ended_cleanly {
            self.profile.damage = Some(err.to_string());
            return if opts.salvage { Ok(()) } else { Err(err) };
        }
        self.profile.damage = Some(format!(
            "profile '{}' ends inside a chunk at byte {offset}: its process was killed, could \
             not write it to its end (a full disk?), or is still writing it",
            path.display()
        ));
        Ok(())
    }
}

struct Builder {
    profile: ProcessProfile,
    /// The previous sample's path within the current chunk (a chunk has one writer thread).
    last_stack: Vec<Frame>,
    /// The current chunk's time and span ([`RecordTag::Time`]).
    time: (u64, u64),
    counters: HashMap<String, u64>,
    /// Where each module id and thread id is in `profile.modules` and `profile.threads`.
    module_index: HashMap<u32, usize>,
    thread_index: HashMap<u32, usize>,
    /// Whether the current chunk's thread is in `profile.threads` (found once a chunk).
    thread_listed: bool,
    /// [`ReadOptions::skip_samples`].
    skip_samples: bool,
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

type Decode<T> = Result<T, &'static str>;

impl<'a> Cursor<'a> {
    fn u8(&mut self) -> Decode<u8> {
        let v = *self
            .data
            .get(self.pos)
            .ok_or("record runs past its chunk")?;
        self.pos += 1;
        Ok(v)
    }
    fn varint(&mut self) -> Decode<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            if shift == 63 && b > 1 {
                return Err("varint out of range"); // bits past the 64th
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("overlong varint")
    }
    /// The inverse of `RecordWriter::signed`.
    fn signed(&mut self) -> Decode<i64> {
        let zigzag = self.varint()?;
        Ok((zigzag >> 1) as i64 ^ -((zigzag & 1) as i64))
    }
    fn u32(&mut self) -> Decode<u32> {
        u32::try_from(self.varint()?).map_err(|_| "value out of range")
    }
    fn bytes(&mut self) -> Decode<&'a [u8]> {
        let len = usize::try_from(self.varint()?).map_err(|_| "length out of range")?;
        let end = self.pos.checked_add(len).ok_or("length out of range")?;
        let v = self
            .data
            .get(self.pos..end)
            .ok_or("string runs past its chunk")?;
        self.pos = end;
        Ok(v)
    }
    fn string(&mut self) -> Decode<String> {
        Ok(String::from_utf8_lossy(self.bytes()?).into_owned())
    }
    fn frame(&mut self) -> Decode<Frame> {
        Ok(Frame {
            module: self.u32()?,
            offset: self.varint()?,
        })
    }
}

impl Builder {
    fn chunk(&mut self, tid: u32, body: &[u8]) -> Decode<()> {
        self.last_stack.clear();
        self.time = (0, 0);
        self.thread_listed = false;
        let mut c = Cursor { data: body, pos: 0 };
        while c.pos < body.len() {
            let tag = RecordTag::from_u8(c.u8()?).ok_or("unknown record type")?;
            self.record(tid, tag, &mut c)?;
        }
        Ok(())
    }

    fn record(&mut self, tid: u32, tag: RecordTag, c: &mut Cursor) -> Decode<()> {
        let p = &mut self.profile;
        match tag {
            RecordTag::Process => {
                let h = &mut p.header;
                h.pid = c.u32()?;
                h.ppid = c.u32()?;
                h.exec_generation = c.u32()?;
                h.start_time_ns = c.varint()?;
                let argc = c.varint()?;
                h.argv = (0..argc).map(|_| c.string()).collect::<Decode<_>>()?;
                h.exe = c.string()?;
                h.sample_source = c.string()?;
                h.requested_hz = c.varint()?;
                h.period_ns = c.varint()?;
                let n = c.varint()?;
                h.metrics = (0..n)
                    .map(|_| {
                        Ok(MetricDef {
                            name: c.string()?,
                            unit: c.string()?,
                            description: c.string()?,
                        })
                    })
                    .collect::<Decode<_>>()?;
            }
            RecordTag::ModuleLoad => {
                let m = ModuleInfo {
                    id: c.u32()?,
                    base: c.varint()?,
                    start: c.varint()?,
                    end: c.varint()?,
                    path: c.string()?,
                    build_id: c.bytes()?.to_vec(),
                };
                // A later load of the same id (never written by the runtime) replaces it.
                match self.module_index.get(&m.id) {
                    Some(&i) => p.modules[i] = m,
                    None => {
                        self.module_index.insert(m.id, p.modules.len());
                        p.modules.push(m);
                    }
                }
            }
            RecordTag::ModuleUnload => {
                // Modules stay known after unload: samples taken while they were loaded refer
                // to them by id, and ids are never reused.
                c.u32()?;
            }
            RecordTag::ThreadStart => {
                let tid = c.u32()?;
                let routine = c.frame()?;
                let name = c.string()?;
                let flags = c.u8()?;
                let start = (p.version >= 2).then(|| c.varint()).transpose()?;
                let t = thread_entry(&mut p.threads, &mut self.thread_index, tid);
                t.start_routine = (routine != Frame::default()).then_some(routine);
                if !name.is_empty() {
                    t.name = name;
                }
                t.is_main = flags & 1 != 0;
                t.start_ns = start.filter(|&v| v > 0).or(t.start_ns);
            }
            RecordTag::ThreadEnd => {
                let tid = c.u32()?;
                let name = c.string()?;
                let cpu = c.varint()?;
                let end = (p.version >= 2).then(|| c.varint()).transpose()?;
                let tail = (p.version >= TAIL_VERSION)
                    .then(|| c.varint())
                    .transpose()?;
                let t = thread_entry(&mut p.threads, &mut self.thread_index, tid);
                if !name.is_empty() {
                    t.name = name;
                }
                t.cpu_ns = Some(cpu);
                t.tail_ns = tail;
                t.end_ns = end.filter(|&v| v > 0).or(t.end_ns);
            }
            RecordTag::Sample | RecordTag::ObjectSample => {
                if tag == RecordTag::ObjectSample && p.version < 2 {
                    return Err("record type of a later format version");
                }
                let metric = c.u8()?;
                let value = c.varint()?;
                let flags = c.u8()?;
                let object = if tag == RecordTag::ObjectSample {
                    c.varint()?
                } else {
                    0
                };
                let depth = usize::try_from(c.varint()?).map_err(|_| "depth out of range")?;
                let shared = usize::try_from(c.varint()?).map_err(|_| "depth out of range")?;
                if depth > MAX_STACK_DEPTH + 1 || shared > depth {
                    return Err("impossible stack depth");
                }
                let prev = &mut self.last_stack;
                if shared > prev.len() {
                    return Err("sample shares more frames than its predecessor has");
                }
                // `depth` is at most MAX_STACK_DEPTH + 1: a bounded allocation.
                let mut path = Vec::with_capacity(depth);
                for _ in 0..depth - shared {
                    path.push(c.frame()?);
                }
                path.extend_from_slice(&prev[prev.len() - shared..]);
                if !self.thread_listed {
                    thread_entry(&mut p.threads, &mut self.thread_index, tid);
                    self.thread_listed = true;
                }
                if !self.skip_samples {
                    // Stack ids and frame positions are u32s.
                    if p.stacks.frames.len() + path.len() > u32::MAX as usize {
                        return Err("more call-path frames than a profile can hold");
                    }
                    let stack = p.stacks.intern(&path);
                    p.samples.push(Sample {
                        tid,
                        metric,
                        flags,
                        value,
                        stack,
                        object,
                        time: self.time.0,
                        span: self.time.1,
                    });
                }
                *prev = path;
            }
            RecordTag::Time => {
                if p.version < crate::SAMPLE_TIME_VERSION {
                    return Err("record type of a later format version");
                }
                let change = c.signed()?;
                let span = c.varint()?;
                self.time = (self.time.0.wrapping_add(change as u64), span);
            }
            RecordTag::Counter => {
                let name = c.string()?;
                let value = c.varint()?;
                // Counters are cumulative and only grow: the largest value written is the total.
                let slot = self.counters.entry(name).or_default();
                *slot = (*slot).max(value);
            }
            RecordTag::ProcessEnd => {
                c.u8()?;
                if p.version >= 2 {
                    p.end_ns = Some(c.varint()?);
                }
                p.ended_cleanly = true;
            }
            RecordTag::LockStats => {
                if p.version < 2 {
                    return Err("record type of a later format version");
                }
                let address = c.varint()?;
                let kind = c.u8()?;
                let flags = c.u8()?;
                let init_site = c.varint()?;
                let mut counts = [0u64; LockStats::COUNTS];
                let n = match p.version {
                    2 => LockStats::COUNTS_V2,
                    3 => LockStats::COUNTS_V3,
                    _ => LockStats::COUNTS,
                };
                for v in &mut counts[..n] {
                    *v = c.varint()?;
                }
                p.locks.push(LockStats::from_counts(
                    (address, kind, flags, init_site),
                    counts,
                ));
            }
            RecordTag::LockInterval => {
                if p.version < crate::LOCK_INTERVAL_VERSION {
                    return Err("record type of a later format version");
                }
                let (address, start_ns, length_ns) = (c.varint()?, c.varint()?, c.varint()?);
                let mut counts = [0u64; LockInterval::COUNTS];
                for v in &mut counts {
                    *v = c.varint()?;
                }
                let [acquisitions, acquisition_samples, try_failed] = counts;
                p.lock_intervals.push(LockInterval {
                    address,
                    start_ns,
                    length_ns,
                    acquisitions,
                    acquisition_samples,
                    try_failed,
                });
            }
        }
        Ok(())
    }

    fn finish(mut self) -> ProcessProfile {
        let mut counters: Vec<(String, u64)> = self.counters.into_iter().collect();
        counters.sort();
        self.profile.counters = counters;
        self.profile
    }
}

/// The entry of thread `tid`, added if new; `index` maps tids to positions in `threads`.
fn thread_entry<'t>(
    threads: &'t mut Vec<ThreadInfo>,
    index: &mut HashMap<u32, usize>,
    tid: u32,
) -> &'t mut ThreadInfo {
    let i = *index.entry(tid).or_insert_with(|| {
        threads.push(ThreadInfo {
            tid,
            ..Default::default()
        });
        threads.len() - 1
    });
    &mut threads[i]
}
