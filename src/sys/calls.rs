//! Direct system calls for the process and thread ids, the CPU affinity mask, closing
//! the runtime's own descriptors, and writing the profile.
//!
//! Job: ask the kernel without going through libc's wrappers. What that saves is memory,
//! not time: every libc function the runtime calls and the program does not makes the
//! kernel map the 64 KiB of libc around it into the program (fault-around), and these ids
//! are asked for at every start-up. glibc keeps no cache of them, so the answers are the
//! same. Closing is here for another reason: the runtime exports `close`, so its own calls
//! of libc's would reach its interposed one.
//!
//! x86-64 Linux only (as is the runtime). Async-signal-safe: a system call, no errno
//! (these cannot fail, or report failure in the return value).

/// `syscall` with up to three arguments; the raw return value (negative errno on failure).
#[inline(always)]
fn syscall3(number: i64, a: u64, b: u64, c: u64) -> i64 {
    syscall4(number, a, b, c, 0)
}

/// The calling process's id.
pub fn getpid() -> libc::pid_t {
    syscall3(libc::SYS_getpid, 0, 0, 0) as libc::pid_t
}

/// The parent process's id.
pub fn getppid() -> libc::pid_t {
    syscall3(libc::SYS_getppid, 0, 0, 0) as libc::pid_t
}

/// The calling thread's kernel thread id.
pub fn gettid() -> u32 {
    syscall3(libc::SYS_gettid, 0, 0, 0) as u32
}

/// Closes `fd` without going through `close`, which the runtime interposes (and which keeps
/// the runtime's own descriptors open); whether it was closed.
pub fn close(fd: libc::c_int) -> bool {
    syscall3(libc::SYS_close, fd as u64, 0, 0) == 0
}

/// `syscall` with up to four arguments (the fourth in r10); the raw return value (negative
/// errno on failure).
#[inline(always)]
fn syscall4(number: i64, a: u64, b: u64, c: u64, d: u64) -> i64 {
    let ret: i64;
    // SAFETY: the system call instruction with the x86-64 Linux convention (number in rax,
    // arguments in rdi, rsi, rdx, r10; result in rax; rcx and r11 clobbered). The calls made
    // through here only read or write memory their callers pass and own.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") number => ret,
            in("rdi") a,
            in("rsi") b,
            in("rdx") c,
            in("r10") d,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// `write(2)` without libc: glibc's `write` is a cancellation point, and a thread whose
/// cancellation is pending must not be ended inside the runtime's own writes (it would
/// leave its buffer locked, and the process's exit waiting for it). The count written, or
/// the negative error number.
pub fn write(fd: libc::c_int, data: &[u8]) -> i64 {
    syscall3(
        libc::SYS_write,
        fd as u64,
        data.as_ptr() as u64,
        data.len() as u64,
    )
}

/// `rt_sigprocmask(2)` without libc: the runtime exports `pthread_sigmask` and
/// `sigprocmask` (which never block the sampling signal), so its own blocking of that signal
/// must not reach them. 0, or the negative error number.
pub fn sigmask(how: libc::c_int, set: *const libc::sigset_t, old: *mut libc::sigset_t) -> i64 {
    // The kernel's sigset is 8 bytes on x86-64.
    syscall4(
        libc::SYS_rt_sigprocmask,
        how as u64,
        set as u64,
        old as u64,
        8,
    )
}

/// The calling process's file size limit (`RLIMIT_FSIZE`, soft), in bytes; `u64::MAX`
/// when unlimited or unknown.
pub fn file_size_limit() -> u64 {
    let mut limit = libc::rlimit64 {
        rlim_cur: 0,
        rlim_max: 0,
    };
    let rc = syscall4(
        libc::SYS_prlimit64,
        0,
        libc::RLIMIT_FSIZE as u64,
        0,
        &mut limit as *mut libc::rlimit64 as u64,
    );
    if rc == 0 {
        limit.rlim_cur
    } else {
        u64::MAX
    }
}

/// `close_range(2)` without libc (glibc before 2.34 has no wrapper); 0, or the negative
/// error number (`-ENOSYS` before Linux 5.9).
pub fn close_range(first: u32, last: u32, flags: u32) -> i64 {
    syscall3(
        libc::SYS_close_range,
        u64::from(first),
        u64::from(last),
        u64::from(flags),
    )
}

/// CPUs the calling thread may run on (its affinity mask), at least 1.
pub fn usable_cpus() -> usize {
    let mut mask = [0u64; 64]; // 4096 CPUs
    let bytes = syscall3(
        libc::SYS_sched_getaffinity,
        0,
        std::mem::size_of_val(&mask) as u64,
        mask.as_mut_ptr() as u64,
    );
    if bytes <= 0 {
        return 1;
    }
    let words = (bytes as usize).div_ceil(8).min(mask.len());
    let count: u32 = mask[..words].iter().map(|w| w.count_ones()).sum();
    (count as usize).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_as_libc_does() {
        // SAFETY: these libc calls have no preconditions.
        unsafe {
            assert_eq!(getpid(), libc::getpid());
            assert_eq!(getppid(), libc::getppid());
            assert_eq!(gettid() as libc::pid_t, libc::gettid());
        }
        let from_thread = std::thread::spawn(gettid).join().unwrap();
        assert_ne!(from_thread, gettid());
        let expected = std::thread::available_parallelism().map_or(1, |n| n.get());
        // available_parallelism may also apply a cgroup quota, which only lowers it.
        assert!(usable_cpus() >= expected, "{} < {expected}", usable_cpus());
    }

    #[test]
    fn write_writes_or_says_the_error_number() {
        let mut fds = [0; 2];
        // SAFETY: `fds` is writable for the two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        assert_eq!(write(fds[1], b"ping"), 4);
        let mut got = [0u8; 8];
        // SAFETY: `got` is writable for its length; the pipe holds 4 bytes.
        let n = unsafe { libc::read(fds[0], got.as_mut_ptr().cast(), got.len()) };
        assert_eq!(&got[..n as usize], b"ping");
        assert!(close(fds[0]) && close(fds[1]));
        assert_eq!(write(-1, b"x"), -i64::from(libc::EBADF));
    }
}
