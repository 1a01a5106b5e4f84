//! The process's part file: opening it, appending chunks to it, and keeping it through what
//! the program does to its descriptors.
//!
//! Job: own the part's descriptor (`<pid>.bpp`, or `<pid>.<n>.bpp` for the n-th image after
//! `exec`) and append whole chunks to it. The descriptor is one of the runtime's
//! ([`super::descriptors`]): the interposed `close` functions leave it open, and a `dup2`
//! onto its number first moves it ([`step_aside`]). What gets past them (a `close` or `dup2`
//! made with `syscall`) is found before each write, by the descriptor's device and inode,
//! and the part is reopened by its path, checked to be the same file.
//!
//! Invariants:
//! - every chunk is appended with a single `write` on an `O_APPEND` descriptor, so chunks
//!   from different threads never interleave;
//! - profile bytes never reach a descriptor that is not the part: a write checks the
//!   descriptor's identity first, and [`step_aside`] hands a number over to the program only
//!   once no write that may have read it is in flight. Writes register in one of two
//!   in-flight counts, by the parity of the epoch they read, and read the state again to
//!   confirm it; a move starts a new epoch and waits for the old one's count to drain;
//! - bytes that cannot be written are counted (`write_errors`, with the last error number),
//!   and so are the samples they held (by the buffer): never silently;
//! - the part holds at most its limit of sample chunks (`blameprof run --max-size`), records
//!   (threads, modules) a sixteenth more, and the image's last chunk (its locks, counters and
//!   end marker; bounded by the runtime's tables) whatever is left: past them, chunks are
//!   dropped whole and counted, the file is never cut inside a chunk.
//!
//! [`write_chunk`] is async-signal-safe, reopening included (`open`, `fstat`, `fcntl`);
//! [`open_part`], [`close`] and [`step_aside`] are not.

use super::counters::{self, Counter};
use super::descriptors;
use crate::format::protocol::PART_SUFFIX;
use crate::format::wire::{chunk_header, file_header, CHUNK_HEADER_LEN};
use crate::runtime_lock::SpinLock;
use std::cell::UnsafeCell;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// The part's descriptor and the epoch it belongs to: `epoch << 32 | fd as u32` (no part:
/// fd [`CLOSED`]; a part whose descriptor could not be kept: fd [`LOST`], reopened by the
/// next write). The epoch changes whenever the descriptor does.
static CURRENT: AtomicU64 = AtomicU64::new(NO_PART);
const NO_PART: u64 = u32::MAX as u64;
const CLOSED: libc::c_int = -1;
const LOST: libc::c_int = -2;
/// A write of the part was cut short (a full disk, a file size limit): the part now ends
/// inside a chunk, which must stay its end, so nothing more is written to it.
static CUT: AtomicBool = AtomicBool::new(false);
/// Writes in flight, by the parity of the epoch they read.
static IN_FLIGHT: [AtomicU32; 2] = [AtomicU32::new(0), AtomicU32::new(0)];
/// The part file's identity, to tell it from whatever else a descriptor number may be now.
static DEV: AtomicU64 = AtomicU64::new(0);
static INO: AtomicU64 = AtomicU64::new(0);
/// Bytes appended to the part, and the most [`Chunk::Samples`] may make it.
static WRITTEN: AtomicU64 = AtomicU64::new(0);
static LIMIT: AtomicU64 = AtomicU64::new(u64::MAX);
/// Serializes [`step_aside`] calls (never taken by a signal handler).
static MOVING: SpinLock<()> = SpinLock::new(());

/// Longest part path kept for reopening (a longer one is opened, but never reopened).
const PATH_CAP: usize = 4096;

/// The part's path, NUL-terminated, for reopening from a signal handler.
struct PartPath(UnsafeCell<[u8; PATH_CAP]>);
// SAFETY: written only by `open_part`, when no write can run (before sampling starts, in a
// fork child's only thread, or in a new image), and before `CURRENT` is published with
// release ordering; read only after `CURRENT` is loaded with acquire ordering.
unsafe impl Sync for PartPath {}
static PATH: PartPath = PartPath(UnsafeCell::new([0; PATH_CAP]));

fn fd_of(state: u64) -> libc::c_int {
    state as u32 as libc::c_int
}

fn next_state(state: u64, fd: libc::c_int) -> u64 {
    ((state >> 32).wrapping_add(1) << 32) | u64::from(fd as u32)
}

fn in_flight(state: u64) -> &'static AtomicU32 {
    &IN_FLIGHT[((state >> 32) & 1) as usize]
}

/// What a chunk holds, for the part's size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunk {
    /// Samples: dropped once the part reaches its limit.
    Samples,
    /// Records: dropped once it reaches its limit and a sixteenth more.
    Records,
    /// The image's last chunk: always written (once; its size is bounded by the tables it
    /// holds).
    End,
}

/// Why a chunk was not written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unwritten {
    /// The part reached its size limit (counted by the caller, who knows what it held).
    OverLimit,
    /// The write failed (counted here, in bytes, with the error number).
    Failed,
}

/// Creates this image's part file in `dir` and writes its file header. Returns the exec
/// generation (0 for the first image of this pid). Any previous part is closed; the new one
/// holds at most `max_bytes` of samples. Call only when no other thread can write (start-up,
/// a fork child, a new image).
pub fn open_part(dir: &Path, max_bytes: u64) -> std::io::Result<u32> {
    close();
    WRITTEN.store(0, Ordering::Relaxed);
    LIMIT.store(max_bytes, Ordering::Relaxed);
    CUT.store(false, Ordering::Relaxed);
    MOVING.raw_unlock(); // a fork child's may be held by a thread of the parent's
    for count in &IN_FLIGHT {
        count.store(0, Ordering::Relaxed); // a fork child's counts may hold the parent's writes
    }
    let pid = crate::sys::getpid();
    for generation in 0u32..10_000 {
        let name = if generation == 0 {
            format!("{pid}{PART_SUFFIX}")
        } else {
            format!("{pid}.{generation}{PART_SUFFIX}")
        };
        let path = CString::new(dir.join(name).as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        let bytes = path.as_bytes();
        // SAFETY: see `PartPath`: no write runs now, and none reads PATH before CURRENT is
        // published below.
        let buf = unsafe { &mut *PATH.0.get() };
        let keep = bytes.len() < PATH_CAP;
        let len = if keep { bytes.len() } else { 0 };
        buf[..len].copy_from_slice(&bytes[..len]);
        buf[len] = 0;
        let flags = libc::O_WRONLY
            | libc::O_CREAT
            | libc::O_EXCL
            | libc::O_APPEND
            | libc::O_CLOEXEC
            | libc::O_NOFOLLOW;
        // SAFETY: `path` is a NUL-terminated string.
        let fd = unsafe { libc::open(path.as_ptr(), flags, 0o600) };
        if fd < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::AlreadyExists {
                continue;
            }
            return Err(err);
        }
        let fd = descriptors::raise(fd);
        let Some(st) = stat(fd) else {
            let err = std::io::Error::last_os_error();
            descriptors::close_owned(fd);
            return Err(err);
        };
        DEV.store(st.st_dev, Ordering::Relaxed);
        INO.store(st.st_ino, Ordering::Relaxed);
        let header = file_header();
        if let Err(e) = write_all(fd, &header) {
            // A part without even its header would stop every reader of the directory.
            descriptors::close_owned(fd);
            // SAFETY: `path` is a NUL-terminated string; the file is the one just created.
            unsafe { libc::unlink(path.as_ptr()) };
            CUT.store(false, Ordering::Relaxed);
            return Err(std::io::Error::from_raw_os_error(e));
        }
        WRITTEN.store(header.len() as u64, Ordering::Relaxed);
        let state = CURRENT.load(Ordering::Relaxed);
        CURRENT.store(next_state(state, fd), Ordering::Release);
        return Ok(generation);
    }
    Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists))
}

/// Stops writing to the current part (after fork, the parent's part is not the child's).
/// Call only when no other thread can write.
pub fn close() {
    let state = CURRENT.load(Ordering::Acquire);
    CURRENT.store(next_state(state, CLOSED), Ordering::Release);
    let fd = fd_of(state);
    if fd < 0 {
        return;
    }
    if is_part(fd) {
        descriptors::close_owned(fd);
    } else {
        descriptors::disown(fd);
    }
}

/// The program is about to `dup2` or `dup3` onto `fd`. If `fd` is the part's descriptor,
/// moves the part to another one and returns once no write can still use `fd`; the program's
/// call then closes it. Not for a signal handler (it waits for other threads' writes).
pub fn step_aside(fd: libc::c_int) {
    let _moving = MOVING.lock();
    let state = CURRENT.load(Ordering::Acquire);
    if fd_of(state) != fd {
        return;
    }
    // No descriptor free: the next write reopens the part by its path.
    let new = descriptors::step_aside(fd).unwrap_or(LOST);
    if CURRENT
        .compare_exchange(
            state,
            next_state(state, new),
            Ordering::SeqCst,
            Ordering::SeqCst,
        )
        .is_err()
    {
        // A write reopened the part meanwhile: `fd` is no longer its descriptor.
        if new >= 0 {
            descriptors::close_owned(new);
        }
        return;
    }
    // A write of the old epoch ends within one `write` call; none runs on this thread (a
    // handler runs to its end before the thread goes on).
    let old = in_flight(state);
    while old.load(Ordering::SeqCst) != 0 {
        std::thread::yield_now();
    }
}

fn stat(fd: libc::c_int) -> Option<libc::stat> {
    // SAFETY: zeroed stat is valid; fstat writes it and is async-signal-safe.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is writable for the call.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st)
}

/// Whether `fd` is (still) the part file.
fn is_part(fd: libc::c_int) -> bool {
    part_size(fd).is_some()
}

/// The part's size when `fd` is (still) the part file.
fn part_size(fd: libc::c_int) -> Option<u64> {
    let st = stat(fd)?;
    let ours = (st.st_dev, st.st_ino) == (DEV.load(Ordering::Relaxed), INO.load(Ordering::Relaxed));
    ours.then_some(st.st_size as u64)
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Writes `data` with one `write`, or says the error number. A write cut short (a full disk
/// or a file size limit: a regular file takes a whole write otherwise) leaves the part
/// ending inside a chunk: it is marked [`CUT`], and nothing more is written to it, so that
/// the cut stays at its end, where readers take it as such.
fn write_all(fd: libc::c_int, data: &[u8]) -> Result<(), i32> {
    // Bounded: only an interruption before anything was written is retried.
    for _ in 0..8 {
        // Not libc's `write`, a cancellation point (`sys::write`).
        let n = crate::sys::write(fd, data);
        if n < 0 {
            match -n as i32 {
                libc::EINTR => continue,
                e => return Err(e),
            }
        }
        if n as usize == data.len() {
            return Ok(());
        }
        CUT.store(true, Ordering::Relaxed);
        return Err(libc::ENOSPC);
    }
    Err(libc::EINTR)
}

/// Appends one chunk holding `what`. `buf[..CHUNK_HEADER_LEN]` is reserved for the header,
/// which this fills; `buf[CHUNK_HEADER_LEN..]` is the payload. Failed writes are counted
/// here; a chunk over the limit is the caller's to count. Async-signal-safe; preserves
/// nothing (the caller saves `errno`).
pub fn write_chunk(buf: &mut [u8], tid: u32, what: Chunk) -> Result<(), Unwritten> {
    if buf.len() <= CHUNK_HEADER_LEN {
        return Ok(());
    }
    let len = buf.len() as u64;
    let limit = LIMIT.load(Ordering::Relaxed);
    let limit = match what {
        Chunk::Samples => limit,
        Chunk::Records => limit.saturating_add(limit / 16),
        Chunk::End => u64::MAX,
    };
    if WRITTEN
        .fetch_add(len, Ordering::Relaxed)
        .saturating_add(len)
        > limit
    {
        WRITTEN.fetch_sub(len, Ordering::Relaxed);
        return Err(Unwritten::OverLimit);
    }
    let header = chunk_header(&buf[CHUNK_HEADER_LEN..], tid);
    buf[..CHUNK_HEADER_LEN].copy_from_slice(&header);
    append(buf).map_err(|e| {
        WRITTEN.fetch_sub(len, Ordering::Relaxed);
        counters::add(Counter::WriteErrors, len);
        counters::set(Counter::WriteLastErrno, e as u64);
        Unwritten::Failed
    })
}

/// Appends `data` to the part, reopening it once or twice if its descriptor was lost.
/// Refused without writing: after a cut, and past the process's file size limit (whose
/// signal, SIGXFSZ, would kill the program).
fn append(data: &[u8]) -> Result<(), i32> {
    if CUT.load(Ordering::Relaxed) {
        return Err(libc::ENOSPC);
    }
    for _ in 0..3 {
        let state = CURRENT.load(Ordering::SeqCst);
        let count = in_flight(state);
        count.fetch_add(1, Ordering::SeqCst);
        if CURRENT.load(Ordering::SeqCst) != state {
            count.fetch_sub(1, Ordering::Release);
            continue; // moved meanwhile: read the new state
        }
        let fd = fd_of(state);
        let written = (fd >= 0).then(|| part_size(fd)).flatten().map(|size| {
            let end = size.saturating_add(data.len() as u64);
            if end > crate::sys::file_size_limit() {
                Err(libc::EFBIG)
            } else {
                write_all(fd, data)
            }
        });
        count.fetch_sub(1, Ordering::Release);
        match written {
            Some(result) => return result,
            None if fd == CLOSED => return Err(libc::EBADF),
            None => reopen(state)?,
        }
    }
    Err(libc::EBADF)
}

/// The part's descriptor `fd_of(seen)` is no longer the part (closed or replaced behind the
/// runtime's back, or given up: [`LOST`]): open the part again by its path, and publish it
/// unless another thread did first. Fails when the file is gone or replaced.
fn reopen(seen: u64) -> Result<(), i32> {
    // SAFETY: PATH was written before `seen` was published (see `PartPath`) and is
    // NUL-terminated; an empty path (too long to keep) fails to open.
    let path = unsafe { (*PATH.0.get()).as_ptr() };
    let flags = libc::O_WRONLY | libc::O_APPEND | libc::O_CLOEXEC | libc::O_NOFOLLOW;
    // SAFETY: `path` is NUL-terminated; open is async-signal-safe.
    let fd = unsafe { libc::open(path.cast(), flags) };
    if fd < 0 {
        return Err(errno());
    }
    if !is_part(fd) {
        crate::sys::close(fd);
        return Err(libc::ESTALE); // another file took the part's name
    }
    let fd = descriptors::raise(fd);
    let next = next_state(seen, fd);
    match CURRENT.compare_exchange(seen, next, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => {
            // The old number may be the program's now.
            descriptors::disown(fd_of(seen));
            counters::add(Counter::PartReopened, 1);
        }
        Err(_) => descriptors::close_owned(fd), // another thread reopened it, or it moved
    }
    Ok(())
}
