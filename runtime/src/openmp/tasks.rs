//! OpenMP tasks (`GOMP_task`): each runs through [`task_body`], so that a thread that runs
//! it from inside a measured barrier wait (the OpenMP runtime runs queued tasks there)
//! computes: its samples are work, and the task's time is not the wait's idleness
//! (`policy::outside_the_wait`).
//!
//! Invariants: the program's function gets its data as the OpenMP runtime would have
//! given it (a copy made byte for byte or by its copy function, at its alignment, or the
//! creator's own for libomp's undeferred task); a task with a `detach` clause is passed on
//! unwrapped. Not async-signal-safe.

use super::{real_task, OutlinedFn};
use blameprof_measure::policy;
use libc::{c_long, c_uint, c_void};

/// A task's copy function: (destination, source).
pub(super) type CopyFn = unsafe extern "C" fn(*mut c_void, *mut c_void);

/// `GOMP_task`: function, data, copy function, data size and alignment, `if` clause, flags,
/// dependences, priority, detach event (the last two read only when the flags say so, so
/// a program built by an older GCC that passes fewer arguments forwards its registers as
/// they are).
pub(super) type TaskFn = unsafe extern "C" fn(
    OutlinedFn,
    *mut c_void,
    Option<CopyFn>,
    c_long,
    c_long,
    bool,
    c_uint,
    *mut *mut c_void,
    libc::c_int,
    *mut c_void,
);

/// What a wrapped task carries before the program's data: its function, and how to copy
/// the data. A task whose program gives a copy function has the creator's header (on its
/// stack) point at the program's data, and the runtime copies both, through [`task_copy`],
/// into the task's own block, the program's data following at `header_len`. A task
/// without one is given as a block already made (the header, then a copy of the data),
/// which the runtime copies byte for byte, as it would the program's data: without a copy
/// function of its own, so that the runtime may still discard it when it is cancelled.
#[derive(Clone, Copy)]
#[repr(C)]
struct TaskHeader {
    body: OutlinedFn,
    copy: Option<CopyFn>,
    data: *mut c_void,
    size: c_long,
    header_len: usize,
    /// Whether the program's data follows the header; clear in the creator's header of a
    /// task with a copy function (libomp runs an undeferred task on the data it was given,
    /// without copying).
    copied: bool,
}

/// `GOMP_task`'s flag for a task with a `detach` clause: the runtime writes the task's
/// event handle into the first word of the data it is given.
const TASK_DETACH: c_uint = 1 << 13;

/// # Safety
/// Same contract as libgomp's `GOMP_task`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn GOMP_task(
    body: OutlinedFn,
    data: *mut c_void,
    copy: Option<CopyFn>,
    size: c_long,
    align: c_long,
    if_clause: bool,
    flags: c_uint,
    depend: *mut *mut c_void,
    priority: libc::c_int,
    detach: *mut c_void,
) {
    let real = real_task();
    // The program's call, passed on as it is.
    // SAFETY: the program's arguments, forwarded unchanged.
    let as_given = || unsafe {
        real(
            body, data, copy, size, align, if_clause, flags, depend, priority, detach,
        )
    };
    if flags & TASK_DETACH != 0 || size < 0 {
        // The runtime writes into the data's first word: given as the program gave it.
        return as_given();
    }
    // The header is padded to the data's alignment, so that the data stays aligned in a
    // block aligned to at least that.
    let align = align.max(std::mem::align_of::<TaskHeader>() as c_long);
    let header_len = std::mem::size_of::<TaskHeader>().next_multiple_of(align as usize);
    // The task wrapped: `task_body` on `block` (`len` bytes), copied by `copy`.
    // SAFETY: `task_body` and `task_copy` hand the program's function its data as the
    // runtime would have (a copy made byte for byte or by its own copy function, or the
    // creator's data itself); `block` outlives the call, in which the runtime copies it.
    let wrapped = |block: *mut c_void, copy: Option<CopyFn>, len: usize| unsafe {
        real(
            task_body,
            block,
            copy,
            len as c_long,
            align,
            if_clause,
            flags,
            depend,
            priority,
            detach,
        )
    };
    let mut header = TaskHeader {
        body,
        copy,
        data,
        size,
        header_len,
        copied: false,
    };
    if copy.is_some() {
        let source = &header as *const TaskHeader as *mut c_void;
        return wrapped(source, Some(task_copy), header_len + size as usize);
    }
    header.copied = true;
    let total = header_len + size as usize;
    let Ok(layout) = std::alloc::Layout::from_size_align(total, align as usize) else {
        // An alignment no block can have.
        return as_given();
    };
    // SAFETY: `layout` is non-zero-sized (the header); the block is freed below, after the
    // runtime has copied it.
    let block = unsafe { std::alloc::alloc(layout) };
    if block.is_null() {
        return as_given();
    }
    // SAFETY: `block` holds `header_len + size` bytes; the program's data is `size` bytes.
    unsafe {
        (block as *mut TaskHeader).write(header);
        if size > 0 {
            std::ptr::copy_nonoverlapping(data as *const u8, block.add(header_len), size as usize);
        }
    }
    wrapped(block.cast(), None, total);
    // SAFETY: allocated above with `layout`; the runtime no longer reads it.
    unsafe { std::alloc::dealloc(block, layout) };
}

/// Copies a wrapped task's header and the program's data into the task's block `to`.
unsafe extern "C" fn task_copy(to: *mut c_void, from: *mut c_void) {
    // SAFETY: `from` is the creator's header (`GOMP_task`); `to` is the runtime's block of
    // `header_len + size` bytes, aligned to the header's alignment and the data's.
    unsafe {
        let header = *(from as *const TaskHeader);
        (to as *mut TaskHeader).write(TaskHeader {
            copied: true,
            ..header
        });
        let data = (to as *mut u8).add(header.header_len).cast::<c_void>();
        match header.copy {
            Some(copy) => copy(data, header.data),
            None => std::ptr::copy_nonoverlapping(
                header.data as *const u8,
                data as *mut u8,
                header.size as usize,
            ),
        }
    }
}

/// Runs a wrapped task: the program's function on its data, as work even when the thread
/// runs it from inside a measured barrier wait.
unsafe extern "C" fn task_body(block: *mut c_void) {
    // SAFETY: `block` is a header written by `GOMP_task` or `task_copy`.
    let header = unsafe { *(block as *const TaskHeader) };
    let data = if header.copied {
        // SAFETY: the program's data follows the header in the task's block.
        unsafe { (block as *mut u8).add(header.header_len).cast::<c_void>() }
    } else {
        header.data
    };
    // SAFETY: the program's task function on its data.
    policy::outside_the_wait(|| unsafe { (header.body)(data) });
}
