//! The process's part file: opening it, and appending chunks to it.
//!
//! Job: own the file descriptor of this process image's part (`<pid>.bpp`, or
//! `<pid>.<n>.bpp` for the n-th image after `exec`), and append whole chunks to it.
//!
//! Invariants: every chunk is appended with a single `write` on an `O_APPEND` descriptor, so
//! chunks from different threads never interleave; before writing, the descriptor is checked
//! to still be our file (a program that closes all descriptors and reuses the number must
//! never receive profile bytes). [`write_chunk`] is async-signal-safe; [`open_part`] is not.

use super::counters::{self, Counter};
use crate::format::protocol::PART_SUFFIX;
use crate::format::wire::{chunk_header, file_header, CHUNK_HEADER_LEN};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

static FD: AtomicI32 = AtomicI32::new(-1);
static DEV: AtomicU64 = AtomicU64::new(0);
static INO: AtomicU64 = AtomicU64::new(0);

/// Lowest descriptor number used, to stay out of the way of programs that assume small ones.
pub const MIN_FD: libc::c_int = 500;

/// Creates this image's part file in `dir` and writes its file header. Returns the exec
/// generation (0 for the first image of this pid). Any previous part is closed.
pub fn open_part(dir: &Path) -> std::io::Result<u32> {
    close();
    let pid = crate::sys::getpid();
    for generation in 0u32..10_000 {
        let name = if generation == 0 {
            format!("{pid}{PART_SUFFIX}")
        } else {
            format!("{pid}.{generation}{PART_SUFFIX}")
        };
        let path = CString::new(dir.join(name).as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        let flags =
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_APPEND | libc::O_CLOEXEC;
        // SAFETY: `path` is a valid NUL-terminated string.
        let fd = unsafe { libc::open(path.as_ptr(), flags, 0o644) };
        if fd < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::AlreadyExists {
                continue;
            }
            return Err(err);
        }
        // SAFETY: fd is ours; F_DUPFD_CLOEXEC returns a new descriptor >= MIN_FD.
        let high = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, MIN_FD) };
        let fd = if high >= 0 {
            // SAFETY: closing the low descriptor we opened.
            unsafe { libc::close(fd) };
            high
        } else {
            fd
        };
        let (dev, ino) = identity(fd).ok_or_else(std::io::Error::last_os_error)?;
        DEV.store(dev, Ordering::Relaxed);
        INO.store(ino, Ordering::Relaxed);
        FD.store(fd, Ordering::Release);
        let header = file_header();
        if !write_all(fd, &header) {
            return Err(std::io::Error::last_os_error());
        }
        return Ok(generation);
    }
    Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists))
}

/// Stops writing to the current part (after fork, the parent's part is not the child's).
pub fn close() {
    let fd = FD.swap(-1, Ordering::AcqRel);
    if fd >= 0 && identity(fd) == Some((DEV.load(Ordering::Relaxed), INO.load(Ordering::Relaxed))) {
        // SAFETY: the descriptor is still our part file (checked just above).
        unsafe { libc::close(fd) };
    }
}

fn identity(fd: libc::c_int) -> Option<(u64, u64)> {
    // SAFETY: zeroed stat is valid; fstat writes it and is async-signal-safe.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is writable for the call.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some((st.st_dev, st.st_ino))
}

fn write_all(fd: libc::c_int, mut data: &[u8]) -> bool {
    // Bounded: a regular file accepts the whole write at once except on errors like ENOSPC.
    for _ in 0..8 {
        if data.is_empty() {
            return true;
        }
        // SAFETY: `data` is a valid readable slice; write is async-signal-safe.
        let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        if n < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return false;
        }
        data = &data[n as usize..];
    }
    data.is_empty()
}

/// Appends one chunk. `buf[..CHUNK_HEADER_LEN]` is reserved for the header, which this
/// fills; `buf[CHUNK_HEADER_LEN..]` is the payload. Returns whether the chunk was written;
/// failures are counted. Async-signal-safe; preserves nothing (the caller saves `errno`).
pub fn write_chunk(buf: &mut [u8], tid: u32) -> bool {
    if buf.len() <= CHUNK_HEADER_LEN {
        return true;
    }
    let header = chunk_header(&buf[CHUNK_HEADER_LEN..], tid);
    buf[..CHUNK_HEADER_LEN].copy_from_slice(&header);
    let fd = FD.load(Ordering::Acquire);
    let ours =
        fd >= 0 && identity(fd) == Some((DEV.load(Ordering::Relaxed), INO.load(Ordering::Relaxed)));
    let ok = ours && write_all(fd, buf);
    if !ok {
        counters::add(Counter::WriteErrors, buf.len() as u64);
    }
    ok
}
