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
//! `read/keyed.rs`), so a file cannot be crafted to collide. Only regular files are
//! read (a FIFO would block, a device never end). The format's sharing of root-side frames
//! lets a sample record of about ten bytes stand for a new path of up to 513 frames: that is
//! the largest expansion, about 1 KiB of memory per byte of input.
//!
//! Files: this one holds the decoded types, [`read_profile`] and [`read_part`];
//! `read/decode.rs` decodes a part's bytes ([`decode_part`]), `read/keyed.rs` hashes call
//! paths with the per-process key, and `read/tails.rs` adds each thread's CPU time after its
//! last sample, which [`read_profile`] does (a part as [`read_part`] returns it is as
//! written).

mod decode;
mod keyed;
mod tails;

pub use decode::decode_part;

use super::protocol::PART_SUFFIX;
use super::{Frame, LockInterval, LockStats, MetricDef, FORMAT_VERSION};
use super::{SAMPLE_FIRST_IS_RETURN, SAMPLE_TRUNCATED};
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
    /// The part of it after the thread's last work sample, which no sample carried
    /// (version 5; [`read_profile`] adds it at that sample's path: `read/tails.rs`).
    pub tail_ns: Option<u64>,
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
    /// The index of the metric called `name` in its header, as its samples name it.
    pub fn metric(&self, name: &str) -> Option<u8> {
        let i = self.header.metrics.iter().position(|m| m.name == name)?;
        u8::try_from(i).ok()
    }

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
    for p in &mut processes {
        tails::add_tails(p);
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
