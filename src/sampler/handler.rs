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
//!    measured the same way), but the part of the time from before the wait is carried to
//!    its next sample (`wait_cpu`);
//! 4. refresh a one-shot perf counter, for a period drawn anew around the mean
//!    (`timer::jittered_period`: a fixed one aliases with a program's periodic work);
//! 5. if a waiter marked the thread as the holder of a lock it waits for
//!    (`locks::held_marks`), read the lock's words with `process_vm_readv` (never a load: the
//!    lock may be gone; a refused read is counted) and, when the thread holds it and others
//!    wait, charge the same CPU time to `held.contended` too, with the lock;
//! 6. unwind with the published module set through a wait-free try-read (dropped if an update
//!    is under way) and a framehop cache (non-allocating) lent by the process's pool with a
//!    wait-free try-take (dropped if none is free); stack reads cannot fault;
//! 7. try-lock the buffer (dropped if the exit path is flushing it), encode, maybe flush with
//!    one `write`.
//!
//! Nothing here allocates, takes a lock another context may hold, or loops without a bound.

use super::clock::{monotonic_ns, thread_cpu_ns};
use super::counters::{self, Counter};
use super::path::{record_path, How, Sample};
use super::process;
use super::thread_state::{lookup, ThreadState};
use super::wait_cpu;
use crate::format::{protocol, WaitKind};
use crate::locks::held_marks::Read;
use crate::sys::gettid;
use crate::unwind::walk::Regs;
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
        if process::sampling_enabled() {
            counters::add(Counter::DroppedNoThreadState, 1);
        }
        return;
    };
    let work = charge(state);
    rearm_perf(state, tid);
    let Some((value, carried)) = work else {
        return;
    };
    state.in_handler.store(true, Ordering::Relaxed);
    compiler_fence(Ordering::SeqCst);
    take_sample(state, tid, context, value, carried);
    compiler_fence(Ordering::SeqCst);
    state.in_handler.store(false, Ordering::Relaxed);
}

/// Re-arms the thread's one-shot perf counter, if it has one, for its next period. Another
/// thread may move the descriptor out of the program's way between the read of `perf_fd` and
/// the `ioctl`s (`lifecycle::descriptor_wanted`, when the program `dup2`s onto its number):
/// the old number then names the program's file and the refresh fails. The moved number is
/// in `perf_fd` before the old one is reused, so a failed refresh tries the number read again,
/// at most [`REARM_TRIES`] times; without that the counter stayed disabled and the thread
/// was never sampled again. A counter that cannot be re-armed is counted
/// ([`Counter::TimerFailures`]), not lost without a word.
fn rearm_perf(state: &ThreadState, tid: u32) {
    let mut perf_fd = state.perf_fd.load(Ordering::Relaxed);
    for _ in 0..REARM_TRIES {
        if perf_fd < 0 {
            return;
        }
        if let Some(cfg) = process::config() {
            let seed = u64::from(tid) << 32 ^ monotonic_ns();
            super::timer::set_perf_period(
                perf_fd,
                super::timer::jittered_period(cfg.period_ns(), seed),
            );
        }
        if super::timer::refresh_perf(perf_fd) {
            return;
        }
        let now = state.perf_fd.load(Ordering::Relaxed);
        if now == perf_fd {
            break;
        }
        perf_fd = now;
    }
    if perf_fd >= 0 {
        counters::add(Counter::TimerFailures, 1);
    }
}

/// Attempts at re-arming a perf counter whose descriptor moves meanwhile: each move takes a
/// `dup2` of the program's onto the number, so more than one in a handler's few
/// microseconds is already rare.
const REARM_TRIES: usize = 4;

/// Reads the thread's CPU time since its previous sample, and what an earlier sample
/// carried from before a wait (`wait_cpu`): the work to record is their sum. `None`:
/// nothing to record (inside the runtime: deferred to the next sample; blocked in a
/// measured wait or spinning on a spin lock: covered by the measurement, but for what came
/// before the wait, carried on; sampling stopped).
fn charge(state: &ThreadState) -> Option<(u64, u64)> {
    if state.in_runtime.load(Ordering::Relaxed) {
        return None;
    }
    let now = thread_cpu_ns();
    let value = now.saturating_sub(state.last_cpu_ns.swap(now, Ordering::Relaxed));
    if !process::sampling_enabled() {
        return None;
    }
    if state.blocked.load(Ordering::Relaxed) {
        wait_cpu::sampled_inside(state, value);
        return None;
    }
    Some((value, wait_cpu::take_carried(state)))
}

/// The CPU time of the thread (`state`'s, whose clock reads `cpu_ns` now) that no work
/// sample has carried: since its last sample, with what a sample inside a wait carried on
/// (`wait_cpu`). Taken, at the thread's end: its end record carries it
/// (`format::read::ThreadInfo::tail_ns`). Sampling must be over for the thread (its timer
/// stopped, or the process's sampling disabled).
pub fn unsampled_tail(state: &ThreadState, cpu_ns: u64) -> u64 {
    let last = state.last_cpu_ns.swap(cpu_ns, Ordering::Relaxed);
    cpu_ns
        .saturating_sub(last)
        .saturating_add(wait_cpu::take_carried(state))
}

/// Records the work sample (`value` since the previous sample, and `carried` from before a
/// wait), and `held.contended` for `value` alone when the thread holds a lock others wait
/// for.
fn take_sample(
    state: &ThreadState,
    tid: u32,
    context: *mut libc::c_void,
    value: u64,
    carried: u64,
) {
    // SAFETY: the kernel passes a valid ucontext_t to SA_SIGINFO handlers.
    let regs = unsafe { registers(context) };
    // Before the module set's read guard: the reads may sleep on the memory map's lock.
    let held = held_lock(state, tid);
    let Some(modules) = process::modules().try_read() else {
        counters::add(Counter::DroppedModulesUpdating, 1);
        return;
    };
    let mut samples = [Sample {
        metric: protocol::WORK.index,
        value: value.saturating_add(carried),
        flags: 0,
        object: 0,
        at: 0,
        span: 0,
    }; 2];
    let n = match held {
        Some((object, kind)) => {
            samples[1] = Sample {
                metric: protocol::HELD_CONTENDED.index,
                value,
                flags: kind.flags(),
                object,
                at: 0,
                span: 0,
            };
            2
        }
        None => 1,
    };
    let samples = &samples[..n];
    // SAFETY: `in_runtime` is low and we run on the owner thread with our signal blocked, so
    // nothing else uses the owner part now (see thread_state's invariants).
    let recorded = unsafe { record_path(state, &modules, regs, tid, samples, How::default()) };
    if !recorded {
        counters::add(Counter::DroppedBusy, 1);
    }
}

/// The lock thread `tid` (the calling thread, `state`'s owner) holds while others wait for
/// it, if any, by its marks (`locks::held_marks`); a check that failed is counted. Reads
/// the marked locks' words with a system call each; sets `errno`. Async-signal-safe: the
/// handler's check, also made before a blocking call (`policy::blocking`).
pub fn held_lock(state: &ThreadState, tid: u32) -> Option<(usize, WaitKind)> {
    let held = state
        .held
        .contended(tid, |address, out| read_words(tid, address, out));
    if held.failed {
        counters::add(Counter::HeldChecksFailed, 1);
    }
    held.lock
}

/// Copies the 32-bit words at `address` into `out` without faulting, through thread
/// `tid` (the calling thread: by the process id, the read fails once the main thread has
/// exited). A system call; it sets `errno` (the handler restores it).
fn read_words(tid: u32, address: usize, out: &mut [u32]) -> Read {
    let len = std::mem::size_of_val(out);
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: address as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: `process_vm_readv` is a plain system call (async-signal-safe); on our own pid
    // it copies memory and reports an unmapped address as an error instead of faulting;
    // `local` covers exactly `out`, writable for the whole call.
    let n = unsafe { libc::process_vm_readv(tid as libc::pid_t, &local, 1, &remote, 1, 0) };
    if n == len as isize {
        return Read::Done;
    }
    // SAFETY: __errno_location returns the calling thread's errno slot; always valid.
    let errno = unsafe { *libc::__errno_location() };
    if n >= 0 || errno == libc::EFAULT {
        Read::Gone
    } else {
        Read::Failed
    }
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
