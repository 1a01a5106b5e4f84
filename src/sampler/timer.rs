//! Per-thread sampling timers.
//!
//! Job: make the kernel send the sampling signal to *this thread* every `period` of its CPU
//! time, from one of two [`Source`]s, and stop doing so at thread exit.
//!
//! [`Timer::start`] and [`Timer::stop`] are not async-signal-safe (they may be, but are only
//! called from thread set-up and tear-down); [`refresh_perf`] and [`set_perf_period`] are
//! async-signal-safe and are called from the handler (a perf counter is one-shot and must be
//! refreshed after each overflow).
//!
//! The perf task clock overflows after exactly its period of the thread's CPU time, so with
//! a fixed period a program whose work repeats every period (or a multiple of it) is sampled
//! at the same point of every repetition, and that point moves only by the few microseconds
//! each repetition adds: a loop of 1 ms outside a lock and 1 ms inside, sampled at 500 Hz,
//! was charged 97-100% inside. Each of its periods is therefore drawn anew
//! ([`jittered_period`]): uniform over half to one and a half times the mean, which makes a
//! sample's place in such a cycle independent of the previous one's. The mean, so the rate,
//! is unchanged, and every sample carries its CPU-time delta, so totals do not depend on
//! it. (The CPU timer is left as it is: it expires only on scheduler ticks, whose jitter
//! did not lock onto that loop.)

use super::config::Source;
use std::io;
use std::sync::atomic::{AtomicI32, Ordering};

/// A running per-thread timer.
#[derive(Debug)]
pub enum Timer {
    Posix(libc::timer_t),
    /// A perf counter; its descriptor is kept in the thread's state (`perf_fd`), where a move
    /// out of the program's way ([`super::descriptors::step_aside`]) can update it.
    Perf,
}

// perf_event ABI constants (linux/perf_event.h).
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
const PERF_EVENT_IOC_REFRESH: libc::c_ulong = 0x2402;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
/// `_IOW('$', 4, __u64)`: a new sample period, in force from the next enable.
const PERF_EVENT_IOC_PERIOD: libc::c_ulong = 0x4008_2404;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
// Bits of the attr flags word.
const ATTR_DISABLED: u64 = 1 << 0;
const ATTR_EXCLUDE_KERNEL: u64 = 1 << 5;
const ATTR_EXCLUDE_HV: u64 = 1 << 6;

/// Re-enables a one-shot perf counter for one more overflow (it disables itself after each,
/// which is what raises the signal). Async-signal-safe: one `ioctl`.
pub fn refresh_perf(fd: libc::c_int) -> bool {
    // SAFETY: ioctl on a perf descriptor of ours; a plain system call.
    unsafe { libc::ioctl(fd, PERF_EVENT_IOC_REFRESH, 1) == 0 }
}

/// Sets the period of a perf counter; call it while the counter is stopped (after an
/// overflow, before [`refresh_perf`]): it takes the period whole from its next enable.
/// Async-signal-safe: one `ioctl`. On failure the previous period stays.
pub fn set_perf_period(fd: libc::c_int, period_ns: u64) -> bool {
    // SAFETY: ioctl on a perf descriptor of ours; PERF_EVENT_IOC_PERIOD reads the u64 the
    // pointer names, valid for the whole call.
    unsafe { libc::ioctl(fd, PERF_EVENT_IOC_PERIOD, &period_ns as *const u64) == 0 }
}

/// A sampling period drawn uniformly from `[mean_ns / 2, mean_ns * 3 / 2)` by `seed`, any
/// value that differs from one call to the next (see the module doc). Pure arithmetic.
pub fn jittered_period(mean_ns: u64, seed: u64) -> u64 {
    let mean = mean_ns.max(2);
    // splitmix64's finaliser: consecutive seeds give unrelated periods.
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    mean / 2 + (z ^ (z >> 31)) % mean
}

/// `struct perf_event_attr` up to `PERF_ATTR_SIZE_VER5` (112 bytes), all we use.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved: u16,
}

#[repr(C)]
struct FOwnerEx {
    kind: libc::c_int,
    pid: libc::pid_t,
}
const F_OWNER_TID: libc::c_int = 0;
const F_SETSIG: libc::c_int = 10;
const F_SETOWN_EX: libc::c_int = 15;

impl Timer {
    /// Starts a timer for the calling thread (`tid`), delivering `signal` every `period_ns`
    /// of its CPU time.
    /// Returns the timer and its perf descriptor (-1 for a POSIX timer), to be kept in the
    /// thread's state.
    pub fn start(
        source: Source,
        signal: i32,
        period_ns: u64,
        tid: u32,
    ) -> io::Result<(Timer, libc::c_int)> {
        match source {
            Source::CpuTimer => start_posix(signal, period_ns, tid).map(|t| (t, -1)),
            Source::PerfTaskClock => start_perf(signal, period_ns, tid),
        }
    }

    /// Stops and releases the timer; `perf_fd` is the thread's perf descriptor, if any
    /// (left at -1).
    pub fn stop(self, perf_fd: &AtomicI32) {
        let fd = perf_fd.swap(-1, Ordering::Relaxed);
        match self {
            // SAFETY: the timer id came from timer_create and is deleted once (`self` is
            // consumed).
            Timer::Posix(id) => unsafe {
                libc::timer_delete(id);
            },
            Timer::Perf if fd >= 0 => {
                // SAFETY: an ioctl on the runtime's own perf descriptor, closed just after.
                unsafe { libc::ioctl(fd, PERF_EVENT_IOC_DISABLE, 0) };
                super::descriptors::close_owned(fd);
            }
            Timer::Perf => {}
        }
    }
}

fn start_posix(signal: i32, period_ns: u64, tid: u32) -> io::Result<Timer> {
    // SAFETY: zeroed sigevent is a valid starting point; we fill the fields the kernel reads
    // for SIGEV_THREAD_ID (notify, signo, and the thread id in the union).
    let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
    sev.sigev_notify = libc::SIGEV_THREAD_ID;
    sev.sigev_signo = signal;
    sev.sigev_notify_thread_id = tid as libc::c_int;
    let mut id: libc::timer_t = std::ptr::null_mut();
    // SAFETY: valid pointers to `sev` and `id` for the duration of the call.
    if unsafe { libc::timer_create(libc::CLOCK_THREAD_CPUTIME_ID, &mut sev, &mut id) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let period = libc::timespec {
        tv_sec: (period_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (period_ns % 1_000_000_000) as libc::c_long,
    };
    let spec = libc::itimerspec {
        it_interval: period,
        it_value: period,
    };
    // SAFETY: `id` is the timer just created; `spec` is valid.
    if unsafe { libc::timer_settime(id, 0, &spec, std::ptr::null_mut()) } != 0 {
        let err = io::Error::last_os_error();
        // SAFETY: deleting the timer we created.
        unsafe { libc::timer_delete(id) };
        return Err(err);
    }
    Ok(Timer::Posix(id))
}

fn start_perf(signal: i32, period_ns: u64, tid: u32) -> io::Result<(Timer, libc::c_int)> {
    let open = |flags: u64| -> io::Result<libc::c_int> {
        let attr = PerfEventAttr {
            kind: PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: PERF_COUNT_SW_TASK_CLOCK,
            // The first period is drawn too: the threads' first samples would otherwise
            // all fall the same CPU time after their start.
            sample_period: jittered_period(
                period_ns,
                u64::from(tid) << 32 ^ super::clock::monotonic_ns(),
            ),
            flags: ATTR_DISABLED | flags,
            wakeup_events: 1,
            ..Default::default()
        };
        // SAFETY: `attr` is a valid perf_event_attr of the stated size; pid 0 / cpu -1
        // measures the calling thread on any CPU.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                0,
                -1,
                -1,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(fd as libc::c_int)
        }
    };
    // Overflows only in user mode: a signal generated while the thread is inside a system
    // call could interrupt a sleep that is never restarted (nanosleep, poll, ...) and leak an
    // EINTR. Kernel time is not lost: every sample carries the thread's CPU clock delta, so
    // the next sample, taken back in user mode at the caller of the system call, carries it.
    let fd = open(ATTR_EXCLUDE_KERNEL | ATTR_EXCLUDE_HV)?;
    // Keep the program's low descriptor numbers free (select() users, programs that expect
    // the next open() to return a particular number), and out of its close calls' reach.
    let fd = super::descriptors::raise(fd);
    let owner = FOwnerEx {
        kind: F_OWNER_TID,
        pid: tid as libc::pid_t,
    };
    // SAFETY: fcntl/ioctl on the fd we own; `owner` is a valid f_owner_ex.
    let ok = unsafe {
        libc::fcntl(fd, libc::F_SETFL, libc::O_ASYNC | libc::O_NONBLOCK) == 0
            && libc::fcntl(fd, F_SETSIG, signal) == 0
            && libc::fcntl(fd, F_SETOWN_EX, &owner as *const FOwnerEx) == 0
            && refresh_perf(fd)
    };
    if !ok {
        let err = io::Error::last_os_error();
        super::descriptors::close_owned(fd);
        return Err(err);
    }
    Ok((Timer::Perf, fd))
}

#[cfg(test)]
mod tests {
    use super::jittered_period;

    #[test]
    fn jittered_periods_spread_over_a_whole_period_around_the_mean() {
        let mean = 2_000_000u64;
        let n = 100_000u64;
        let mut sum = 0;
        let mut quarters = [0u64; 4];
        for seed in 0..n {
            let p = jittered_period(mean, seed);
            assert!((mean / 2..mean * 3 / 2).contains(&p), "{p} out of range");
            sum += p;
            quarters[((p - mean / 2) * 4 / mean) as usize] += 1;
        }
        let avg = sum / n;
        assert!(avg.abs_diff(mean) < mean / 100, "mean {avg}");
        for q in quarters {
            assert!(q.abs_diff(n / 4) < n / 40, "uneven: {quarters:?}");
        }
        assert!(
            jittered_period(1, 7) >= 1,
            "a tiny mean still gives a period"
        );
    }
}
