//! Recording a sample at a call path: one unwind from given registers, its samples appended
//! to the thread's buffer.
//!
//! Job: what the timer handler and synchronous samples share: walk the stack with a cache
//! from the process's pool, count unwind errors and truncated stacks, optionally replace the
//! runtime's own frames by a function, publish the path for other threads
//! ([`PublishedPath`](super::thread_state::ThreadState::wake_path)), and append. Also the
//! capture of a path now, to record later (a lock wait unwound before it blocks).
//!
//! Async-signal-safe: no allocation, no lock another context may hold, bounded loops (the
//! only wait, for an unwind cache, is outside the handler and bounded).

pub use super::buffer::Sample;
use super::clock::monotonic_ns;
use super::counters::{self, Counter};
use super::thread_state::ThreadState;
use crate::format::{Frame, SAMPLE_TRUNCATED};
use crate::unwind::cache_pool::POOL;
use crate::unwind::module_set::Modules;
use crate::unwind::walk::{walk, Regs, StackBounds, FRAMES_CAPACITY};
use std::sync::atomic::Ordering;

/// How [`record_path`] records.
#[derive(Debug, Clone, Copy, Default)]
pub struct How {
    /// Replace the runtime's own frames by the function at this address.
    pub leaf: Option<u64>,
    /// Publish the path as that of the thread's futex wake with this `seq` (`wake_chain`).
    pub publish: Option<u64>,
    /// Wait for the buffer (synchronous samples) instead of dropping the sample (handler).
    pub wait_for_buffer: bool,
}

/// Walks the stack from `regs` once and appends `samples` at that path to the thread's
/// buffer, as `how` says. Returns false when nothing was recorded and the caller should
/// account for it: in the handler (`how.wait_for_buffer` false) when the buffer was busy; for
/// a synchronous sample when no unwind cache became free. A handler sample lost for want of
/// a cache is counted here (`samples_dropped_no_unwind_cache`).
/// Shared by the timer handler (which may not wait) and synchronous samples (which may).
/// Async-signal-safe.
///
/// # Safety
/// Must run on `state`'s owner thread, with nothing else using its owner part (in the
/// handler, `in_runtime` low; elsewhere, `in_runtime` raised).
pub unsafe fn record_path(
    state: &ThreadState,
    modules: &Modules,
    regs: Regs,
    tid: u32,
    samples: &[Sample],
    how: How,
) -> bool {
    let How {
        leaf,
        publish,
        wait_for_buffer,
    } = how;
    // One time for all the samples of this path, before the unwind: when they were taken.
    let now = monotonic_ns();
    // SAFETY: guaranteed by the caller.
    let owner = unsafe { &mut *state.owner.get() };
    let Some((depth, flags)) = walk_counted(
        modules,
        tid,
        wait_for_buffer,
        regs,
        owner.stack,
        &mut owner.frames,
    ) else {
        if wait_for_buffer {
            return false;
        }
        counters::add(Counter::DroppedNoUnwindCache, 1);
        return true;
    };
    let mut start = 0;
    if let (Some(addr), true) = (leaf, depth > 0) {
        // Replace the runtime's own frames (those in the module of frame 0) by `leaf`.
        let runtime = owner.frames[0].module;
        let own = owner.frames[..depth]
            .iter()
            .take_while(|f| f.module == runtime)
            .count();
        start = own - 1;
        owner.frames[start] = modules.frame_for(addr);
    }
    let path = &owner.frames[start..depth];
    if let Some(seq) = publish {
        state.wake_path.publish(seq, path);
    }
    if wait_for_buffer {
        state.lock_buffer();
    } else if !state.try_lock_buffer() {
        return false;
    }
    // SAFETY: we hold the buffer lock.
    let buffer = unsafe { &mut *state.buffer.get() };
    for s in samples {
        buffer.push_sample(tid, s, flags, path, now);
    }
    state.unlock_buffer();
    true
}

/// Unwinds from `regs` into the thread's wait path (`OwnerPart::wait_capture`), to record
/// later with [`record_captured_path`].
///
/// # Safety
/// On the owner thread with `in_runtime` raised (the handler stays out of the owner part).
pub unsafe fn capture_path(state: &ThreadState, modules: &Modules, regs: Regs) {
    // SAFETY: guaranteed by the caller.
    let owner = unsafe { &mut *state.owner.get() };
    // Not worth waiting for a cache: without a captured path the wait is unwound after it.
    owner.wait_capture = walk_counted(
        modules,
        state.tid.load(Ordering::Relaxed),
        false,
        regs,
        owner.stack,
        &mut owner.wait_frames,
    );
}

/// Whether the thread's captured wait path is the path from `regs`: the same frames
/// outside the runtime (its own frames, the first ones of each, differ by where in it each
/// was unwound). False when nothing is captured, or no unwind cache is free now.
///
/// # Safety
/// As for [`capture_path`].
pub unsafe fn is_captured_path(state: &ThreadState, modules: &Modules, regs: Regs) -> bool {
    // SAFETY: guaranteed by the caller; `frames` is scratch space outside the handler.
    let owner = unsafe { &mut *state.owner.get() };
    let Some((captured, _)) = owner.wait_capture else {
        return false;
    };
    let tid = state.tid.load(Ordering::Relaxed);
    let Some((depth, _)) = walk_counted(modules, tid, false, regs, owner.stack, &mut owner.frames)
    else {
        return false;
    };
    let here = beyond_runtime(&owner.frames[..depth]);
    !here.is_empty() && here == beyond_runtime(&owner.wait_frames[..captured])
}

/// The frames of a path unwound inside the runtime that lie beyond it: past the leading
/// frames of the first one's module (the runtime's).
fn beyond_runtime(frames: &[Frame]) -> &[Frame] {
    let runtime = frames.first().map(|f| f.module);
    let own = frames
        .iter()
        .take_while(|f| Some(f.module) == runtime)
        .count();
    &frames[own..]
}

/// How many times an unwind outside the handler yields the CPU waiting for a free cache
/// (the holders are other threads' unwinds, which take microseconds).
const CACHE_YIELDS: u32 = 1000;

/// Unwinds into `frames` with a cache from the pool, counting unwind errors and truncated
/// stacks: the depth and the sample flags of the path. `None` when no cache was free (after
/// waiting a bounded time, if `wait`).
fn walk_counted(
    modules: &Modules,
    tid: u32,
    wait: bool,
    regs: Regs,
    stack: StackBounds,
    frames: &mut [Frame; FRAMES_CAPACITY],
) -> Option<(usize, u8)> {
    let mut cache = POOL.try_take(tid);
    let mut yields = 0;
    while cache.is_none() && wait && yields < CACHE_YIELDS {
        std::thread::yield_now();
        yields += 1;
        cache = POOL.try_take(tid);
    }
    let mut cache = cache?;
    let result = walk(modules, &mut cache, regs, stack, frames);
    drop(cache);
    if result.error {
        counters::add(Counter::UnwindErrors, 1);
    }
    let mut flags = 0;
    if result.truncated {
        counters::add(Counter::TruncatedStacks, 1);
        flags |= SAMPLE_TRUNCATED;
    }
    Some((result.depth, flags))
}

/// Appends `samples` at the thread's captured wait path, which it consumes. False when
/// there is none.
///
/// # Safety
/// As for [`capture_path`].
pub unsafe fn record_captured_path(state: &ThreadState, tid: u32, samples: &[Sample]) -> bool {
    // SAFETY: guaranteed by the caller.
    let owner = unsafe { &mut *state.owner.get() };
    let Some((depth, flags)) = owner.wait_capture.take() else {
        return false;
    };
    state.lock_buffer();
    // SAFETY: we hold the buffer lock.
    let buffer = unsafe { &mut *state.buffer.get() };
    let now = monotonic_ns();
    for s in samples {
        buffer.push_sample(tid, s, flags, &owner.wait_frames[..depth], now);
    }
    state.unlock_buffer();
    true
}
