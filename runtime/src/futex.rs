//! Interposed `syscall(3)`, for futexes: the locks and condition variables of Rust's
//! `std::sync`, parking_lot and hand-made futex locks never call a pthread function; they
//! call `syscall(SYS_futex, ...)`.
//!
//! Every other system call number is forwarded at once (this entry point may be called
//! from signal handlers; that path is async-signal-safe). A futex wait
//! (`FUTEX_WAIT[_BITSET]`, `FUTEX_LOCK_PI[2]`, `FUTEX_WAIT_REQUEUE_PI`) is measured per
//! futex address; a wake (`FUTEX_WAKE[_BITSET|_OP]`, `FUTEX_[CMP_]REQUEUE[_PI]`,
//! `FUTEX_UNLOCK_PI`) takes the waiting on its address since the previous wake and records
//! it as blame at the waker. Futex calls that do not block or wake pass through. An
//! uncontended lock makes no system call, so it costs nothing.

use crate::real;
use blameprof_format::WaitKind;
use blameprof_measure::policy;
use libc::c_long;

pub(crate) const FUTEX_WAIT: c_long = 0;
pub(crate) const FUTEX_WAKE: c_long = 1;
pub(crate) const FUTEX_REQUEUE: c_long = 3;
pub(crate) const FUTEX_CMP_REQUEUE: c_long = 4;
pub(crate) const FUTEX_WAKE_OP: c_long = 5;
pub(crate) const FUTEX_LOCK_PI: c_long = 6;
pub(crate) const FUTEX_UNLOCK_PI: c_long = 7;
pub(crate) const FUTEX_WAIT_BITSET: c_long = 9;
pub(crate) const FUTEX_WAKE_BITSET: c_long = 10;
const FUTEX_WAIT_REQUEUE_PI: c_long = 11;
const FUTEX_CMP_REQUEUE_PI: c_long = 12;
const FUTEX_LOCK_PI2: c_long = 13;
/// The option bits of the operation (`FUTEX_PRIVATE_FLAG`, `FUTEX_CLOCK_REALTIME`).
const FUTEX_OPTIONS: c_long = 128 | 256;

/// A wake count argument as a number of waiters (negative counts wake nobody).
fn count(arg: c_long) -> u32 {
    u32::try_from(arg as i32).unwrap_or(0)
}

/// # Safety
/// Same contract as `syscall(2)`: the arguments must suit system call `number`. Arguments
/// the call does not take are read from registers (or the caller's stack) and forwarded
/// unused, exactly as the variadic original would ignore them.
#[no_mangle]
pub unsafe extern "C" fn syscall(
    number: c_long,
    a1: c_long,
    a2: c_long,
    a3: c_long,
    a4: c_long,
    a5: c_long,
    a6: c_long,
) -> c_long {
    let real = real::syscall();
    // SAFETY: forwarding the caller's system call unchanged.
    let call = || unsafe { real(number, a1, a2, a3, a4, a5, a6) };
    if number != libc::SYS_futex {
        return call();
    }
    let (uaddr, uaddr2) = (a1 as usize, a5 as usize);
    let ok = |rc: c_long| rc >= 0;
    match a2 & !FUTEX_OPTIONS {
        FUTEX_WAIT | FUTEX_WAIT_BITSET | FUTEX_LOCK_PI | FUTEX_LOCK_PI2 | FUTEX_WAIT_REQUEUE_PI => {
            policy::wait(uaddr, WaitKind::Futex, call, |rc, err| {
                policy::outcome_of_errno(rc, err)
            })
        }
        FUTEX_WAKE | FUTEX_WAKE_BITSET => {
            policy::event(uaddr, WaitKind::Futex, count(a3), call, ok)
        }
        FUTEX_UNLOCK_PI => policy::event(uaddr, WaitKind::Futex, 1, call, ok),
        // Woken or moved to another futex: either way, their wait for this one is over.
        FUTEX_REQUEUE | FUTEX_CMP_REQUEUE | FUTEX_CMP_REQUEUE_PI => {
            policy::event(uaddr, WaitKind::Futex, u32::MAX, call, ok)
        }
        // Wakes `a3` waiters of uaddr and, depending on the operation, `a4` of uaddr2.
        FUTEX_WAKE_OP => policy::event(
            uaddr,
            WaitKind::Futex,
            count(a3),
            || policy::event(uaddr2, WaitKind::Futex, count(a4), call, ok),
            ok,
        ),
        _ => call(),
    }
}
