//! The sampling signal handler.
//!
//! Job: on each timer signal, charge the CPU time the thread used since its previous sample
//! to its current call path, as a `work` sample in the thread's buffer.
//!
//! Async-signal-safety rules, in the order the handler applies them:
//! 1. save `errno`, restore it on every exit path;
//! 2. find the thread's state through the tid table (no TLS, no locks); no state: count, return;
//! 3. if the thread is inside the runtime (`in_runtime`), record nothing: the time is carried
//!    by its next sample; otherwise read the thread CPU clock: the sample's value is the time
//!    used since the previous one; a thread blocked in a measured lock wait records nothing
//!    (the measurement covers it), nor does a thread spinning on a spin lock (its spin is
//!    measured the same way);
//! 4. refresh a one-shot perf counter;
//! 5. unwind with the published module set through a wait-free try-read (dropped if an update
//!    is under way) and a framehop cache (non-allocating) lent by the process's pool with a
//!    wait-free try-take (dropped if none is free); stack reads cannot fault;
//! 6. try-lock the buffer (dropped if the exit path is flushing it), encode, maybe flush with
//!    one `write`.
//!
//! Nothing here allocates, takes a lock another context may hold, or loops without a bound.

use super::clock::thread_cpu_ns;
use super::counters::{self, Counter};
use super::lifecycle;
use super::thread_state::{lookup, ThreadState};
use crate::format::{protocol, Frame, SAMPLE_TRUNCATED};
use crate::sys::gettid;
use crate::unwind::cache_pool::POOL;
use crate::unwind::module_set::Modules;
use crate::unwind::walk::{walk, Regs, StackBounds, FRAMES_CAPACITY};
use std::sync::atomic::{compiler_fence, Ordering};

/// The `SA_SIGINFO` handler installed for the sampling signal.
pub extern "C" fn on_sample_signal(
    _signal: libc::c_int,
    _info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: __errno_location returns the calling thread's errno slot; always valid.
    let errno = unsafe { libc::__errno_location() };
    // SAFETY: reading and later writing our own thread's errno slot.
    let saved = unsafe { *errno };
    sample(context);
    // SAFETY: as above.
    unsafe { *errno = saved };
}

fn sample(context: *mut libc::c_void) {
    let tid = gettid();
    let Some(state) = lookup(tid) else {
        if lifecycle::sampling_enabled() {
            counters::add(Counter::DroppedNoThreadState, 1);
        }
        return;
    };
    let work = charge(state);
    let perf_fd = state.perf_fd.load(Ordering::Relaxed);
    if perf_fd >= 0 {
        super::timer::refresh_perf(perf_fd);
    }
    let Some(value) = work else {
        return;
    };
    state.in_handler.store(true, Ordering::Relaxed);
    compiler_fence(Ordering::SeqCst);
    take_sample(state, tid, context, value);
    compiler_fence(Ordering::SeqCst);
    state.in_handler.store(false, Ordering::Relaxed);
}

/// Reads the thread's CPU time since its previous sample: the work to record. `None`:
/// nothing to record (inside the runtime: deferred to the next sample; blocked in a measured
/// wait or spinning on a spin lock: covered by the measurement; sampling stopped).
fn charge(state: &ThreadState) -> Option<u64> {
    if state.in_runtime.load(Ordering::Relaxed) {
        return None;
    }
    let now = thread_cpu_ns();
    let value = now.saturating_sub(state.last_cpu_ns.swap(now, Ordering::Relaxed));
    if !lifecycle::sampling_enabled() || state.blocked.load(Ordering::Relaxed) {
        return None;
    }
    Some(value)
}

fn take_sample(state: &ThreadState, tid: u32, context: *mut libc::c_void, value: u64) {
    // SAFETY: the kernel passes a valid ucontext_t to SA_SIGINFO handlers.
    let regs = unsafe { registers(context) };
    let Some(modules) = lifecycle::modules().try_read() else {
        counters::add(Counter::DroppedModulesUpdating, 1);
        return;
    };
    // SAFETY: `in_runtime` is low and we run on the owner thread with our signal blocked, so
    // nothing else uses the owner part now (see thread_state's invariants).
    let sample = [Sample {
        metric: protocol::WORK.index,
        value,
        flags: 0,
    }];
    let recorded = unsafe { record_path(state, &modules, regs, tid, &sample, How::default()) };
    if !recorded {
        counters::add(Counter::DroppedBusy, 1);
    }
}

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

/// One sample's metric, value and flags ([`WaitKind`] bits), to record at a call path.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub metric: u8,
    pub value: u64,
    pub flags: u8,
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
pub(super) unsafe fn record_path(
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
        buffer.push_sample(tid, s.metric, s.value, flags | s.flags, path);
    }
    state.unlock_buffer();
    true
}

/// Unwinds from `regs` into the thread's wait path (`OwnerPart::wait_capture`), to record
/// later with [`record_captured_path`].
///
/// # Safety
/// On the owner thread with `in_runtime` raised (the handler stays out of the owner part).
pub(super) unsafe fn capture_path(state: &ThreadState, modules: &Modules, regs: Regs) {
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
pub(super) unsafe fn record_captured_path(
    state: &ThreadState,
    tid: u32,
    samples: &[Sample],
) -> bool {
    // SAFETY: guaranteed by the caller.
    let owner = unsafe { &mut *state.owner.get() };
    let Some((depth, flags)) = owner.wait_capture.take() else {
        return false;
    };
    state.lock_buffer();
    // SAFETY: we hold the buffer lock.
    let buffer = unsafe { &mut *state.buffer.get() };
    for s in samples {
        buffer.push_sample(
            tid,
            s.metric,
            s.value,
            flags | s.flags,
            &owner.wait_frames[..depth],
        );
    }
    state.unlock_buffer();
    true
}

/// # Safety
/// `context` must be the `ucontext_t` the kernel passed to a signal handler.
unsafe fn registers(context: *mut libc::c_void) -> Regs {
    // SAFETY: per the contract, `context` points at a valid ucontext_t.
    let uc = unsafe { &*(context as *const libc::ucontext_t) };
    let g = &uc.uc_mcontext.gregs;
    Regs {
        pc: g[libc::REG_RIP as usize] as u64,
        sp: g[libc::REG_RSP as usize] as u64,
        bp: g[libc::REG_RBP as usize] as u64,
    }
}
