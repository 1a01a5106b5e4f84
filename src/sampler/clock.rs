//! Clocks, and the calling thread's id cached. Async-signal-safe (`clock_gettime` is on the
//! POSIX list), except [`current_tid`], which the signal handler does not use (it asks
//! `sys::gettid`).

/// CPU time consumed so far by the calling thread, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    read_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time consumed so far by thread `tid` of this process, in nanoseconds (0 if gone).
pub fn other_thread_cpu_ns(tid: u32) -> u64 {
    // The kernel's encoding of a per-thread scheduler CPU clock: MAKE_THREAD_CPUCLOCK(tid,
    // CPUCLOCK_SCHED) = (~tid << 3) | CPUCLOCK_PERTHREAD_MASK (4) | CPUCLOCK_SCHED (2).
    let clock = ((!(tid as i32)) << 3) | 4 | 2;
    read_clock(clock)
}

/// Monotonic time in nanoseconds, for durations within the process: the TSC where it can
/// serve (`tsc_clock`), else the vDSO's `CLOCK_MONOTONIC` (no system call either way).
#[inline(always)]
pub fn monotonic_ns() -> u64 {
    super::tsc_clock::monotonic_ns()
}

/// Wall-clock time in nanoseconds since the epoch.
pub fn realtime_ns() -> u64 {
    read_clock(libc::CLOCK_REALTIME)
}

fn read_clock(clock: libc::clockid_t) -> u64 {
    super::tsc_clock::read_clock(clock).unwrap_or(0)
}

std::thread_local! {
    /// The calling thread's kernel thread id once asked for (0: not yet). Constant-initialised
    /// in the preloaded library's static TLS block: no allocation, no destructor.
    static TID: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// The calling thread's kernel thread id, cached: the lock wrappers need it on every
/// contended operation, and `gettid` is a system call. Not for the signal handler (it uses
/// `sys::gettid`); a fork child must call [`forget_current_tid`].
pub fn current_tid() -> u32 {
    TID.with(|t| match t.get() {
        0 => {
            let tid = crate::sys::gettid();
            t.set(tid);
            tid
        }
        tid => tid,
    })
}

/// In a fork child: the cached thread id was the parent's.
pub fn forget_current_tid() {
    TID.with(|t| t.set(0));
}
