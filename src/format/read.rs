//! Decoding of profile directories and part files into an in-memory [`Profile`].
//!
//! Job: turn bytes written by the runtime back into processes, modules, threads, counters
//! and samples, with call paths interned in a [`StackTable`]. Not async-signal-safe
//! (allocates); used by the analysis only.
//!
//! Invariants: every chunk is checked (magic, length, CRC) before any of its records is
//! believed; a damaged chunk is an error unless [`ReadOptions::salvage`] is set, in which case
//! reading stops there and the damage is reported in [`ProcessProfile::damage`].
//!
//! Hostile input (a part crafted to pass its checksums) ends in a [`ReadError`], never a
//! panic, a hang or memory out of proportion to the input: no allocation is sized by a value
//! read from the file (a call path holds at most `MAX_STACK_DEPTH + 1` frames, every
//! other collection grows by the records actually present), every record costs constant
//! work beyond its own bytes and the frames of its path (ids are looked up in hash maps,
//! never by a scan), and every map keyed by values from the file hashes with a per-process
//! random key (the standard library's SipHash for ids and names, NH for call paths:
//! [`keyed`]), so a file cannot be crafted to collide. Only regular files are
//! read (a FIFO would block, a device never end). The format's sharing of root-side frames
//! lets a sample record of about ten bytes stand for a new path of up to 513 frames: that is
//! the largest expansion, about 1 KiB of memory per byte of input.

use super::protocol::PART_SUFFIX;
use super::{
    Frame, LockInterval, LockStats, MetricDef, RecordTag, CHUNK_MAGIC, FILE_MAGIC, FORMAT_VERSION,
};
use super::{MAX_STACK_DEPTH, SAMPLE_FIRST_IS_RETURN, SAMPLE_TRUNCATED};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Why a profile could not be read. Messages name the file and the fix.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("profile '{0}' does not exist: pass the path printed by 'blameprof run'")]
    Missing(PathBuf),
    #[error("cannot read profile '{path}': {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("profile '{0}' is empty: the profiled program wrote nothing; re-run 'blameprof run'")]
    Empty(PathBuf),
    #[error(
        "'{0}' contains no profile parts (*.bpp): pass a directory written by 'blameprof run'"
    )]
    NoParts(PathBuf),
    #[error("'{0}' is not a blameprof profile (bad magic number)")]
    NotAProfile(PathBuf),
    #[error("'{0}' is not a regular file: pass a profile directory written by 'blameprof run', or one of its .bpp files")]
    NotAFile(PathBuf),
    #[error("profile '{path}' has format version {found}, newer than this blameprof reads ({FORMAT_VERSION}): upgrade blameprof")]
    NewerVersion { path: PathBuf, found: u32 },
    #[error("profile '{path}' is truncated at byte {offset}: re-record it, or pass --salvage to read the intact part")]
    Truncated { path: PathBuf, offset: u64 },
    #[error("profile '{path}' is corrupted at byte {offset} ({what}): re-record it, or pass --salvage to read the intact part")]
    Corrupted {
        path: PathBuf,
        offset: u64,
        what: &'static str,
    },
}

impl ReadError {
    /// A part that holds nothing, not even its whole file header: a process that died, or
    /// ran out of disk, as it created it. A directory's reader skips it with a note.
    fn holds_nothing(&self) -> bool {
        match self {
            ReadError::Empty(_) => true,
            ReadError::Truncated { offset, .. } => *offset < super::wire::FILE_HEADER_LEN as u64,
            _ => false,
        }
    }
}

/// How to read.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadOptions {
    /// Keep what precedes the first damaged chunk instead of failing.
    pub salvage: bool,
    /// Check samples but keep none (for what needs only the counters, threads and modules:
    /// interning the call paths is most of the cost of a read).
    pub skip_samples: bool,
}

/// Interned call paths: each distinct path is stored once.
#[derive(Debug, Default)]
pub struct StackTable {
    frames: Vec<Frame>,
    ranges: Vec<(u32, u32)>,
    /// The newest path of each hash ([`keyed::path_hash`]: paths come from the file, which
    /// must not be able to choose their buckets); the paths are not stored twice.
    index: HashMap<u64, StackId, keyed::Prehashed>,
    /// Per path, the previous one with the same hash ([`NO_STACK`]: none): chains are
    /// almost never longer than one, as a keyed 64-bit hash seldom collides.
    same_hash: Vec<StackId>,
}

/// Index of a call path in a [`StackTable`].
pub type StackId = u32;

/// The end of a chain of paths with the same hash.
const NO_STACK: StackId = StackId::MAX;

impl StackTable {
    /// Returns the id of `path` (leaf first), adding it if new.
    pub fn intern(&mut self, path: &[Frame]) -> StackId {
        let hash = keyed::path_hash(path);
        let newest = self.index.get(&hash).copied().unwrap_or(NO_STACK);
        let mut id = newest;
        while id != NO_STACK {
            if self.get(id) == path {
                return id;
            }
            id = self.same_hash[id as usize];
        }
        let start = self.frames.len() as u32;
        self.frames.extend_from_slice(path);
        let id = self.ranges.len() as u32;
        self.ranges.push((start, path.len() as u32));
        self.same_hash.push(newest);
        self.index.insert(hash, id);
        id
    }

    /// The frames of a path, leaf first.
    pub fn get(&self, id: StackId) -> &[Frame] {
        let (start, len) = self.ranges[id as usize];
        &self.frames[start as usize..start as usize + len as usize]
    }

    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

/// One sample: `value` units of `metric` charged to a thread's call path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub tid: u32,
    pub metric: u8,
    pub flags: u8,
    pub value: u64,
    pub stack: StackId,
    /// The lock or other waited-on object a sample is about (its address; 0 none).
    pub object: u64,
    /// When its event ended (monotonic ns; 0: unknown, before format version 3) and how
    /// long it lasted (ns; 0: unknown or not an interval), see [`RecordTag::Time`].
    pub time: u64,
    pub span: u64,
}

impl Sample {
    pub fn truncated(&self) -> bool {
        self.flags & SAMPLE_TRUNCATED != 0
    }
    /// Whether frame 0 of the path is a return address rather than an interrupted pc.
    pub fn first_is_return(&self) -> bool {
        self.flags & SAMPLE_FIRST_IS_RETURN != 0
    }
}

/// A loaded module (executable, shared library, vdso).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleInfo {
    pub id: u32,
    pub path: String,
    pub build_id: Vec<u8>,
    /// Load bias: absolute address = base + ELF virtual address.
    pub base: u64,
    pub start: u64,
    pub end: u64,
}

/// A thread seen by the runtime.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ThreadInfo {
    pub tid: u32,
    pub name: String,
    pub start_routine: Option<Frame>,
    pub is_main: bool,
    /// CPU time at thread end, when the thread ended cleanly.
    pub cpu_ns: Option<u64>,
    /// When the thread started and ended (monotonic ns; version 2 profiles).
    pub start_ns: Option<u64>,
    pub end_ns: Option<u64>,
}

/// What the runtime said about the process image at start.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcessHeader {
    pub pid: u32,
    pub ppid: u32,
    /// 0 for the first image of a pid, then 1, 2, ... after each exec.
    pub exec_generation: u32,
    pub start_time_ns: u64,
    pub argv: Vec<String>,
    pub exe: String,
    pub sample_source: String,
    pub requested_hz: u64,
    pub period_ns: u64,
    pub metrics: Vec<MetricDef>,
}

/// Everything one part file holds.
#[derive(Debug, Default)]
pub struct ProcessProfile {
    pub path: PathBuf,
    pub header: ProcessHeader,
    pub modules: Vec<ModuleInfo>,
    pub threads: Vec<ThreadInfo>,
    pub samples: Vec<Sample>,
    pub stacks: StackTable,
    /// Cumulative counters by name (lost samples and their reasons).
    pub counters: Vec<(String, u64)>,
    /// Per-lock counters, in the order written (a destroyed lock's record precedes a later
    /// lock's at the same address).
    pub locks: Vec<LockStats>,
    /// Per-lock counts per interval (version 4), in the order written.
    pub lock_intervals: Vec<LockInterval>,
    /// The part's format version.
    pub version: u32,
    /// When the process image ended (monotonic ns; version 2 profiles that ended cleanly).
    pub end_ns: Option<u64>,
    /// Whether the image ended cleanly (exit or exec) rather than crashing or being killed.
    pub ended_cleanly: bool,
    /// Damage skipped in salvage mode.
    pub damage: Option<String>,
}

impl ProcessProfile {
    pub fn counter(&self, name: &str) -> u64 {
        self.counters
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| *v)
            .sum()
    }

    /// Samples lost for any reason.
    pub fn lost_samples(&self) -> u64 {
        super::counters::LOST_SAMPLE_COUNTERS
            .iter()
            .map(|c| self.counter(c))
            .sum()
    }

    pub fn module(&self, id: u32) -> Option<&ModuleInfo> {
        self.modules.iter().find(|m| m.id == id)
    }

    pub fn thread(&self, tid: u32) -> Option<&ThreadInfo> {
        self.threads.iter().find(|t| t.tid == tid)
    }
}

/// A whole profile: one entry per process image, ordered by start time.
#[derive(Debug, Default)]
pub struct Profile {
    pub path: PathBuf,
    pub processes: Vec<ProcessProfile>,
    /// Parts of a directory skipped because they hold nothing, not even their file header
    /// (a process that died, or ran out of disk, as it created its part), each with why.
    pub skipped: Vec<String>,
}

/// Reads a profile directory, or a single part file.
pub fn read_profile(path: &Path, opts: ReadOptions) -> Result<Profile, ReadError> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ReadError::Missing(path.to_owned()),
        _ => ReadError::Io {
            path: path.to_owned(),
            source: e,
        },
    })?;
    let mut processes = Vec::new();
    let mut skipped = Vec::new();
    if meta.is_dir() {
        let entries = std::fs::read_dir(path).map_err(|source| ReadError::Io {
            path: path.to_owned(),
            source,
        })?;
        let mut parts: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.to_string_lossy().ends_with(PART_SUFFIX))
            .collect();
        parts.sort();
        if parts.is_empty() {
            return Err(ReadError::NoParts(path.to_owned()));
        }
        let mut first_skipped = None;
        for part in parts {
            match read_part(&part, opts) {
                Ok(p) => processes.push(p),
                Err(e) if e.holds_nothing() => {
                    skipped.push(e.to_string());
                    first_skipped.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
        if let (true, Some(e)) = (processes.is_empty(), first_skipped) {
            return Err(e);
        }
    } else {
        processes.push(read_part(path, opts)?);
    }
    processes.sort_by_key(|p| {
        (
            p.header.start_time_ns,
            p.header.pid,
            p.header.exec_generation,
        )
    });
    Ok(Profile {
        path: path.to_owned(),
        processes,
        skipped,
    })
}

/// Reads one part file, which must be a regular file: anything else (a FIFO, a device, a
/// directory named `*.bpp`) is refused before a byte is read.
pub fn read_part(path: &Path, opts: ReadOptions) -> Result<ProcessProfile, ReadError> {
    let io = |source| ReadError::Io {
        path: path.to_owned(),
        source,
    };
    // Opening a FIFO for reading waits for a writer: check the kind first (following links,
    // as opening does), then again on the open file in case the name changed in between (a
    // FIFO put there in between would still block: only whoever can write the directory).
    if !std::fs::metadata(path).map_err(io)?.is_file() {
        return Err(ReadError::NotAFile(path.to_owned()));
    }
    let mut file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(ReadError::NotAFile(path.to_owned()));
    }
    let mut data = Vec::new();
    file.read_to_end(&mut data).map_err(io)?;
    decode_part(path, &data, opts)
}

/// Decodes the bytes of one part file.
pub fn decode_part(
    path: &Path,
    data: &[u8],
    opts: ReadOptions,
) -> Result<ProcessProfile, ReadError> {
    use super::wire::{CHUNK_HEADER_LEN, FILE_HEADER_LEN};
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
        if len > super::wire::MAX_CHUNK_LEN {
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
                let t = thread_entry(&mut p.threads, &mut self.thread_index, tid);
                if !name.is_empty() {
                    t.name = name;
                }
                t.cpu_ns = Some(cpu);
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

/// The hashing of call paths read from a file, with a key drawn at random once per process,
/// so that a crafted file cannot make its paths collide: with an unkeyed hash (the Fx hash
/// this replaced) a part of 40,000 one-frame paths chosen to share a bucket took seconds to
/// read, and the time grew with the square of their number.
///
/// The hash is NH, the first layer of UMAC (Black, Halevi, Krawczyk, Krovetz, Rogaway:
/// "UMAC: Fast and Secure Message Authentication", CRYPTO 1999): words taken in pairs, each
/// word plus a key word of its position (mod 2^64), the two sums multiplied into 128 bits,
/// and the products summed (mod 2^128). Two distinct paths of the same length collide with
/// a chance of at most 2^-64 over the key; the length is hashed too. The sum's halves are
/// folded into 64 bits and mixed (SplitMix64's finalizer, a bijection: paths whose sums
/// differ only in a few bits still get unrelated buckets), and the table uses the result as
/// it is ([`Prehashed`]). One multiplication per frame: as fast as the Fx hash was.
///
/// Keys cover the longest path the reader builds (`MAX_STACK_DEPTH + 1` frames); a longer
/// path (interned by other code) reuses them from the start, so only such paths lose the
/// guarantee.
mod keyed {
    use super::MAX_STACK_DEPTH;
    use crate::Frame;
    use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
    use std::sync::OnceLock;

    /// Key words: a pair for the length, then a pair per frame.
    const KEY_PAIRS: usize = MAX_STACK_DEPTH + 2;

    /// The process's key: the standard library's randomly keyed SipHash of each position.
    fn key() -> &'static [(u64, u64); KEY_PAIRS] {
        static KEY: OnceLock<Box<[(u64, u64); KEY_PAIRS]>> = OnceLock::new();
        KEY.get_or_init(|| {
            let random = RandomState::new();
            let mut key = Box::new([(0, 0); KEY_PAIRS]);
            for (i, pair) in key.iter_mut().enumerate() {
                *pair = (random.hash_one((i, 0)), random.hash_one((i, 1)));
            }
            key
        })
    }

    fn nh((a, b): (u64, u64), (ka, kb): (u64, u64)) -> u128 {
        u128::from(a.wrapping_add(ka)) * u128::from(b.wrapping_add(kb))
    }

    /// The keyed hash of a call path.
    pub fn path_hash(path: &[Frame]) -> u64 {
        let key = key();
        let mut sum = nh((path.len() as u64, 0), key[0]);
        for (frame, &k) in path.iter().zip(key[1..].iter().cycle()) {
            sum = sum.wrapping_add(nh((frame.offset, u64::from(frame.module)), k));
        }
        let mut h = (sum >> 64) as u64 ^ sum as u64;
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^ (h >> 31)
    }

    /// Hashes a `u64` that is already a keyed hash to itself.
    pub type Prehashed = BuildHasherDefault<Identity>;

    #[derive(Default)]
    pub struct Identity(u64);

    impl Hasher for Identity {
        fn write(&mut self, _: &[u8]) {
            unreachable!("only u64 keys, which are hashes already, are hashed to themselves");
        }

        fn write_u64(&mut self, hash: u64) {
            self.0 = hash;
        }

        fn finish(&self) -> u64 {
            self.0
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use std::collections::HashSet;

        /// Paths built to collide under the Fx hash the reader used before, and paths that
        /// differ only in their high bits (whose products agree in their low bits), land in
        /// as many buckets of a 2^16-bucket table, and take as many control bytes (the top 7
        /// bits), as random values would.
        #[test]
        fn crafted_paths_spread_over_the_buckets() {
            const FX: u64 = 0xf135_7aea_2e62_a9c5;
            let mut inverse = FX; // Newton's iteration for FX^-1 mod 2^64
            for _ in 0..6 {
                inverse = inverse.wrapping_mul(2u64.wrapping_sub(FX.wrapping_mul(inverse)));
            }
            // The Fx state of a one-frame path of module 0, before its offset: ((1 K) + 0) K.
            let before = FX.wrapping_mul(FX);
            let fx_flood = (0..20_000u64).map(|i| {
                // States alike in their bits 31..63: one bucket and one control byte.
                let state = (0x12345 << 38) | (0x55 << 31) | i;
                state.wrapping_mul(inverse).wrapping_sub(before)
            });
            let high_bits = (0..20_000u64).map(|i| i << 40);
            for (name, offsets) in [
                ("fx-colliding", fx_flood.collect::<Vec<_>>()),
                ("high-bit", high_bits.collect()),
            ] {
                let hashes: Vec<u64> = offsets
                    .iter()
                    .map(|&offset| path_hash(&[Frame { module: 0, offset }]))
                    .collect();
                let buckets: HashSet<u64> = hashes.iter().map(|h| h & 0xFFFF).collect();
                // 20,000 random values fill about 17,100 of 65,536 buckets.
                assert!(buckets.len() > 16_000, "{name}: {} buckets", buckets.len());
                let controls: HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
                assert_eq!(controls.len(), 128, "{name}: control bytes");
            }
        }

        #[test]
        fn equal_paths_hash_alike_and_lengths_count() {
            let f = |offset| Frame { module: 1, offset };
            assert_eq!(path_hash(&[f(1), f(2)]), path_hash(&[f(1), f(2)]));
            assert_ne!(path_hash(&[f(1), f(2)]), path_hash(&[f(2), f(1)]));
            assert_ne!(path_hash(&[]), path_hash(&[Frame::default()]));
            let long: Vec<Frame> = (0..2000).map(f).collect();
            assert_ne!(path_hash(&long[..1500]), path_hash(&long[..1501]));
        }
    }
}
