//! Exported `close`, `close_range`, `closefrom`, `dup2` and `dup3`: the runtime's own
//! descriptors (the profile's part file, perf timers) survive a program that closes every
//! descriptor it inherited, or `dup2`s onto one of their numbers.
//!
//! - `close` of a runtime descriptor fails with `EBADF`, as it would without the profiler,
//!   where that number would not be open; the descriptor stays open.
//! - `close_range` and `closefrom` close every number of the range but the runtime's (one
//!   call per gap between them). `CLOSE_RANGE_CLOEXEC` passes through: the runtime's are
//!   close-on-exec already.
//! - `dup2`/`dup3` onto a runtime descriptor first move it to another number
//!   (`lifecycle::descriptor_wanted`), so the program gets the number it asked for.
//!
//! Calls on any other descriptor forward at once (one bitmap read). A `vfork` child shares
//! the parent's memory but not its descriptor table: there every call forwards. What the
//! program does with `syscall` instead is found before the next write of the part, which is
//! then reopened by its path (`sampler::output`).

use crate::real;
use blameprof_measure::lifecycle;
use blameprof_measure::sampler::descriptors::{is_owned, next_owned};
use blameprof_measure::sys;
use libc::{c_int, c_uint};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Whether `fd` is the runtime's and this process guards it.
fn guarded(fd: c_int) -> bool {
    is_owned(fd) && lifecycle::guards_descriptors()
}

/// Whether `first..=last` holds a descriptor this process guards.
fn guarded_in(first: c_uint, last: c_uint) -> bool {
    next_owned(first, last).is_some() && lifecycle::guards_descriptors()
}

fn set_errno(e: c_int) {
    // SAFETY: the calling thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

/// # Safety
/// Same contract as `close(2)`.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if guarded(fd) {
        set_errno(libc::EBADF);
        return -1;
    }
    // SAFETY: forwarding the caller's argument unchanged.
    unsafe { real::close()(fd) }
}

/// Closes `first..=last` with one system call; 0 or the negative error number.
fn close_span(first: c_uint, last: c_uint, flags: c_uint) -> i64 {
    sys::close_range(first, last, flags)
}

/// Whether the kernel has `close_range` (Linux 5.9; a seccomp filter may refuse it too):
/// closing a number that cannot be open answers 0 there, `ENOSYS` elsewhere.
fn kernel_closes_ranges() -> bool {
    sys::close_range(c_uint::MAX, c_uint::MAX, 0) != -i64::from(libc::ENOSYS)
}

/// The flags `close_range` knows; others are the kernel's to refuse (`EINVAL`).
const KNOWN_FLAGS: c_int = (libc::CLOSE_RANGE_UNSHARE | libc::CLOSE_RANGE_CLOEXEC) as c_int;

/// Closes every descriptor of `first..=last` below the last of the runtime's in it, but
/// the runtime's; returns the first number after that one (the rest is the caller's to
/// close), or the negative error number.
fn close_around(first: c_uint, last: c_uint, mut flags: c_uint) -> Result<u64, i64> {
    let mut from = first;
    while let Some(fd) = next_owned(from, last) {
        if fd > from {
            let rc = close_span(from, fd - 1, flags);
            if rc < 0 {
                return Err(rc);
            }
            // The descriptor table is unshared by the first call.
            flags &= !(libc::CLOSE_RANGE_UNSHARE as c_uint);
        }
        if fd == last {
            return Ok(u64::from(last) + 1);
        }
        from = fd + 1;
    }
    Ok(u64::from(from))
}

/// # Safety
/// Same contract as `close_range(2)`.
#[no_mangle]
pub unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    let cloexec = flags & libc::CLOSE_RANGE_CLOEXEC as c_int != 0;
    let plain = flags & !KNOWN_FLAGS == 0 && first <= last;
    if cloexec || !plain || !guarded_in(first, last) || !kernel_closes_ranges() {
        // As the kernel answers: EINVAL, ENOSYS (the program's own fallback then goes
        // through the interposed `close`), or the whole range marked close-on-exec.
        return sys_result(sys::close_range(first, last, flags as c_uint));
    }
    match close_around(first, last, flags as c_uint) {
        Ok(from) if from <= u64::from(last) => {
            sys_result(close_span(from as c_uint, last, flags as c_uint))
        }
        Ok(_) => 0,
        Err(rc) => sys_result(rc),
    }
}

fn sys_result(rc: i64) -> c_int {
    if rc < 0 {
        set_errno(-rc as c_int);
        -1
    } else {
        rc as c_int
    }
}

/// # Safety
/// Same contract as `closefrom(3)`.
#[no_mangle]
pub unsafe extern "C" fn closefrom(lowfd: c_int) {
    let first = lowfd.max(0) as c_uint;
    if !guarded_in(first, c_uint::MAX) {
        // SAFETY: glibc's closefrom, which the program linked against.
        return match real_closefrom() {
            Some(real) => unsafe { real(lowfd) },
            None => close_listed(first),
        };
    }
    if !kernel_closes_ranges() {
        // glibc would close what /proc/self/fd lists, past the interposed `close`.
        return close_listed(first);
    }
    let from = match close_around(first, c_uint::MAX, 0) {
        Ok(from) if from <= u64::from(c_int::MAX as c_uint) => from as c_int,
        _ => return,
    };
    match real_closefrom() {
        // SAFETY: glibc's closefrom, which the program linked against, on the numbers above
        // the runtime's.
        Some(real) => unsafe { real(from) },
        None => {
            close_span(from as c_uint, c_uint::MAX, 0);
        }
    }
}

/// `closefrom(first)` where the kernel has no `close_range`: closes each descriptor
/// `/proc/self/fd` lists from `first` on, but the runtime's (glibc does the same, without
/// the exception).
fn close_listed(first: c_uint) {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let listed: Vec<c_int> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    for fd in listed {
        if fd >= first as c_int && !is_owned(fd) {
            sys::close(fd);
        }
    }
}

/// glibc's `closefrom` (2.34 and later), resolved at its first use: the runtime must load
/// with older ones too.
fn real_closefrom() -> Option<unsafe extern "C" fn(c_int)> {
    static SLOT: AtomicUsize = AtomicUsize::new(0);
    let mut p = SLOT.load(Ordering::Acquire);
    if p == 0 {
        // SAFETY: a NUL-terminated name; RTLD_NEXT finds the definition after this library.
        p = unsafe { libc::dlsym(libc::RTLD_NEXT, c"closefrom".as_ptr()) } as usize;
        SLOT.store(p, Ordering::Release);
    }
    // SAFETY: a non-null `p` is glibc's `void closefrom(int)`.
    (p != 0).then(|| unsafe { std::mem::transmute::<usize, unsafe extern "C" fn(c_int)>(p) })
}

/// # Safety
/// Same contract as `dup2(2)`.
#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    if old != new && guarded(new) {
        lifecycle::descriptor_wanted(new);
    }
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { real::dup2()(old, new) }
}

/// # Safety
/// Same contract as `dup3(2)`.
#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    if old != new && guarded(new) {
        lifecycle::descriptor_wanted(new);
    }
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { real::dup3()(old, new, flags) }
}
