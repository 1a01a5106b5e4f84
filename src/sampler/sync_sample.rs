//! Samples taken synchronously, at a point in the program's own call (not from a timer):
//! blame at an unlock, measured block-wait at a contended acquisition.
//!
//! Job: unwind the calling thread's stack from right here and append one sample with the
//! given metric and value to its buffer. The first frames lie inside the runtime; the
//! analysis folds them into the interposed entry point the program called.
//!
//! Not called from the signal handler. While it unwinds, `in_runtime` is raised so no timer
//! sample interrupts the unwind (the paper's rule: no asynchronous sample during a synchronous
//! unwind); the timer's time is then carried by the thread's next sample.

use super::clock::{current_tid, monotonic_ns};
use super::path::{capture_path, is_captured_path, record_captured_path, record_path, How, Sample};
use super::process;
use super::thread_state::{lookup, ThreadState};
use crate::format::{LockInterval, LockStats};
use crate::locks::wait_table::WakerId;
use crate::unwind::walk::Regs;
use std::sync::atomic::Ordering;

/// How often to retry while a `dlopen` updates the module set.
const MODULE_SET_RETRIES: u32 = 1 << 20;

/// Records `samples` at the calling context (one unwind for all). Returns false when it
/// cannot (the runtime is off, the thread has no state, or it is already inside the
/// runtime): the caller keeps the values for a later attempt rather than lose them.
#[inline(never)]
pub fn record_here(samples: &[Sample]) -> bool {
    record(samples, None, None)
}

/// Records `samples` (possibly none) at the calling context, a futex wake, and publishes
/// the path as that of the thread's wake `seq` for the threads it woke (`wake_chain`).
#[inline(never)]
pub fn record_wake(samples: &[Sample], seq: u64) -> bool {
    record(samples, None, Some(seq))
}

/// Unwinds the calling context now, for the samples of the lock wait the thread is about to
/// block in ([`record_captured`]): the unwind then costs the thread's waiting rather than
/// the hold that follows it, which every other waiter of the lock would wait for too. Does
/// nothing when it cannot (as for [`record_here`], or while a `dlopen` updates the module
/// set): the wait is then unwound after it, where it is recorded.
#[inline(never)]
pub fn capture_wait_path() {
    let Some((state, _)) = enter() else {
        return;
    };
    let regs = current_registers();
    if let Some(modules) = process::modules().try_read() {
        // SAFETY: on the owner thread with `in_runtime` raised.
        unsafe { capture_path(state, &modules, regs) };
    }
    state.in_runtime.store(false, Ordering::Release);
}

/// Whether the path [`capture_wait_path`] captured is this call's path (beyond the
/// runtime's own frames): a wait begun again from the same call site, with the same
/// callers. False when nothing is captured, or it cannot tell now (as for
/// [`capture_wait_path`]).
#[inline(never)]
pub fn captured_path_is_here() -> bool {
    let Some((state, _)) = enter() else {
        return false;
    };
    let regs = current_registers();
    let same = match process::modules().try_read() {
        // SAFETY: on the owner thread with `in_runtime` raised.
        Some(modules) => unsafe { is_captured_path(state, &modules, regs) },
        None => false,
    };
    state.in_runtime.store(false, Ordering::Release);
    same
}

/// Records `samples` at the path [`capture_wait_path`] captured, and forgets it; with
/// nothing captured (or no samples), records nothing. True when recorded.
pub fn record_captured(samples: &[Sample]) -> bool {
    let Some((state, tid)) = enter() else {
        return false;
    };
    let recorded = if samples.is_empty() {
        // SAFETY: on the owner thread with `in_runtime` raised.
        unsafe { (*state.owner.get()).wait_capture = None };
        false
    } else {
        // SAFETY: on the owner thread with `in_runtime` raised.
        unsafe { record_captured_path(state, tid, samples) }
    };
    state.in_runtime.store(false, Ordering::Release);
    recorded
}

/// Records `sample` at the call path thread `waker.tid` published for its wake
/// `waker.seq`, into that thread's own buffer: blame the calling thread found to be the
/// waker's doing (`wake_chain`). False when that path is gone (the thread published a newer
/// one, or ended), or this thread cannot record now.
pub fn record_at_wake(waker: WakerId, sample: Sample) -> bool {
    let Some((state, _)) = enter() else {
        return false;
    };
    let recorded = (|| {
        let target = lookup(waker.tid)?;
        // SAFETY: on the owner thread with `in_runtime` raised: the handler stays out of
        // the owner part, whose frames serve as scratch space here.
        let frames = unsafe { &mut *(*state.owner.get()).frames };
        let depth = target
            .wake_path
            .read(waker.seq, frames)
            .filter(|&d| d > 0)?;
        target.lock_buffer();
        let alive =
            target.live.load(Ordering::Acquire) && target.tid.load(Ordering::Acquire) == waker.tid;
        if alive {
            // SAFETY: we hold the target's buffer lock.
            let buffer = unsafe { &mut *target.buffer.get() };
            buffer.push_sample(waker.tid, &sample, 0, &frames[..depth], monotonic_ns());
        }
        target.unlock_buffer();
        alive.then_some(())
    })()
    .is_some();
    state.in_runtime.store(false, Ordering::Release);
    recorded
}

/// Appends a lock's counters (a destroyed lock's, `locks::lock_table`) and, or, its counts
/// of an interval to the calling thread's buffer. False when it cannot (as for
/// [`record_here`]).
pub fn record_lock_stats(stats: Option<&LockStats>, interval: Option<&LockInterval>) -> bool {
    let Some((state, tid)) = enter() else {
        return false;
    };
    state.lock_buffer();
    // SAFETY: we hold the buffer lock.
    let written = unsafe { (*state.buffer.get()).push_lock_stats(tid, stats, interval) };
    state.unlock_buffer();
    state.in_runtime.store(false, Ordering::Release);
    written
}

/// The calling thread's state with `in_runtime` raised, or `None` (sampling off, no state,
/// or already inside the runtime).
fn enter() -> Option<(&'static ThreadState, u32)> {
    if !process::sampling_enabled() {
        return None;
    }
    let tid = current_tid();
    let state = lookup(tid)?;
    if state.in_runtime.swap(true, Ordering::Acquire) {
        return None;
    }
    Some((state, tid))
}

/// Records `samples` at the calling context with the runtime's own frames replaced by the
/// function at `leaf`: at a thread's exit, its start routine (which has returned) stands
/// for the thread.
#[inline(never)]
pub fn record_at_function(samples: &[Sample], leaf: usize) -> bool {
    record(samples, Some(leaf as u64), None)
}

#[inline(always)]
fn record(samples: &[Sample], leaf: Option<u64>, publish: Option<u64>) -> bool {
    let Some((state, tid)) = enter() else {
        return false;
    };
    let regs = current_registers();
    let mut recorded = false;
    for _ in 0..MODULE_SET_RETRIES {
        if let Some(modules) = process::modules().try_read() {
            // SAFETY: on the owner thread with `in_runtime` raised: the handler stays out of
            // the owner part.
            recorded = unsafe {
                let how = How {
                    leaf,
                    publish,
                    wait_for_buffer: true,
                };
                record_path(state, &modules, regs, tid, samples, how)
            };
            break;
        }
        std::hint::spin_loop();
    }
    state.in_runtime.store(false, Ordering::Release);
    recorded
}

/// The registers of this very function's frame, for unwinding from here.
#[inline(always)]
fn current_registers() -> Regs {
    let (pc, sp, bp): (u64, u64, u64);
    // SAFETY: reads the instruction pointer (rip-relative lea), stack and frame pointers;
    // no memory is touched and no flags are changed.
    unsafe {
        std::arch::asm!(
            "lea {pc}, [rip]",
            "mov {sp}, rsp",
            "mov {bp}, rbp",
            pc = out(reg) pc,
            sp = out(reg) sp,
            bp = out(reg) bp,
            options(nomem, nostack, preserves_flags),
        );
    }
    Regs { pc, sp, bp }
}
