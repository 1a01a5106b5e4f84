//! Thread CPU clocks. Async-signal-safe (`clock_gettime` is on the POSIX list).

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

/// Monotonic time in nanoseconds (vDSO; no system call).
pub fn monotonic_ns() -> u64 {
    read_clock(libc::CLOCK_MONOTONIC)
}

/// Wall-clock time in nanoseconds since the epoch.
pub fn realtime_ns() -> u64 {
    read_clock(libc::CLOCK_REALTIME)
}

fn read_clock(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime is async-signal-safe.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's kernel thread id. Async-signal-safe (a system call without side
/// effects). Not through `syscall(3)`, which the runtime interposes for futexes.
pub fn gettid() -> u32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::gettid() as u32 }
}
