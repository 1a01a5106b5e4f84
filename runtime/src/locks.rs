//! Interposed pthread spin locks and mutexes: thin entry points over
//! `blameprof_measure::locks` and `blameprof_measure::policy`.
//!
//! Spin locks are implemented here entirely (dual representation; glibc's are never called).
//! Mutexes keep glibc's implementation, so every type (normal, recursive, errorcheck, robust,
//! priority-inheritance) keeps its exact semantics and return codes: an acquisition first
//! attempts (for a plain mutex, [`plain_mutex`]: glibc's compare-and-swap; for any other
//! mutex and every timed lock, the real trylock), and only when that says EBUSY does the
//! wait get measured around the real blocking call (a plain mutex's is glibc's own wait).
//! Where glibc's trylock and lock part ways, the lock's way is kept: a robust mutex that is
//! not recoverable is left free, as glibc's lock leaves it (its trylock leaves it taken).
//! The release of a plain mutex is [`plain_mutex`]'s too (glibc's exchange, and its wake
//! when a waiter sleeps).

use crate::init_site::export_with_site;
use crate::plain_mutex;
use crate::real;
use crate::timeouts;
use blameprof_format::WaitKind;
use blameprof_measure::locks::spin;
use blameprof_measure::policy::shared_spin::note_spin_sharing;
use blameprof_measure::policy::{self, SpinGlue};
use libc::{c_int, c_long, pthread_mutex_t, pthread_spinlock_t, timespec};
use std::sync::atomic::{AtomicU32, Ordering};

/// # Safety
/// `lock` must point at a valid, 4-byte aligned `pthread_spinlock_t`.
unsafe fn word<'a>(lock: *mut pthread_spinlock_t) -> &'a AtomicU32 {
    // SAFETY: pthread_spinlock_t is a 32-bit int, valid and aligned per the contract;
    // AtomicU32 has the same size and alignment, and every access to the word (here and by
    // the program, through these functions) is atomic.
    unsafe { &*(lock as *const AtomicU32) }
}

fn glue(lock: *mut pthread_spinlock_t) -> SpinGlue {
    SpinGlue {
        address: lock as usize,
    }
}

export_with_site! {
    /// # Safety
    /// Same contract as `pthread_spin_init(3)`.
    pthread_spin_init(lock: *mut pthread_spinlock_t, pshared: c_int) => spin_init_at, "rdx"
}

/// `pthread_spin_init` called from `site`.
///
/// # Safety
/// Same contract as `pthread_spin_init(3)`.
unsafe extern "C" fn spin_init_at(
    lock: *mut pthread_spinlock_t,
    pshared: c_int,
    site: usize,
) -> c_int {
    policy::init_site(lock as usize, site);
    note_spin_sharing(lock as usize, pshared == libc::PTHREAD_PROCESS_SHARED);
    // SAFETY: per this function's contract.
    policy::spin_reset(spin::reset(
        unsafe { word(lock) },
        spin::NATIVE_UNLOCKED,
        &glue(lock),
    ));
    0
}

/// # Safety
/// Same contract as `pthread_spin_destroy(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_spin_destroy(lock: *mut pthread_spinlock_t) -> c_int {
    policy::lock_destroyed(lock as usize);
    note_spin_sharing(lock as usize, false);
    // SAFETY: per this function's contract.
    policy::spin_reset(spin::destroy(unsafe { word(lock) }, &glue(lock)));
    0
}

/// # Safety
/// Same contract as `pthread_spin_lock(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_spin_lock(lock: *mut pthread_spinlock_t) -> c_int {
    // Counted before the lock is taken (it always is): the countdown's decrement does not
    // wait behind the lock's locked instruction (2-3 ns a pair back to back).
    let sampled = policy::acquisition_due();
    // SAFETY: per this function's contract.
    let rc = spin::lock(unsafe { word(lock) }, &glue(lock));
    if sampled {
        count_sampled_spin(lock);
    }
    rc
}

/// A sampled acquisition of the spin lock `lock`, out of line (as
/// [`count_sampled_acquisition`] is for mutexes).
#[cold]
#[inline(never)]
fn count_sampled_spin(lock: *mut pthread_spinlock_t) {
    policy::sampled_acquisition(lock as usize, WaitKind::Spin, false);
}

export_with_site! {
    /// # Safety
    /// Same contract as `pthread_spin_trylock(3)`.
    pthread_spin_trylock(lock: *mut pthread_spinlock_t) => spin_trylock_at, "rsi"
}

/// `pthread_spin_trylock` called from `site` (the lock view names where failed trylocks
/// came from).
///
/// # Safety
/// Same contract as `pthread_spin_trylock(3)`.
unsafe extern "C" fn spin_trylock_at(lock: *mut pthread_spinlock_t, site: usize) -> c_int {
    // SAFETY: per this function's contract.
    let rc = spin::trylock(unsafe { word(lock) }, &glue(lock));
    if rc == 0 {
        policy::acquisition(lock as usize, WaitKind::Spin, true);
    } else {
        policy::try_failed(lock as usize, WaitKind::Spin, site);
    }
    rc
}

/// # Safety
/// Same contract as `pthread_spin_unlock(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_spin_unlock(lock: *mut pthread_spinlock_t) -> c_int {
    // SAFETY: per this function's contract.
    spin::unlock(unsafe { word(lock) }, &glue(lock))
}

/// Tells the blame accounting that a try acquired `m` (one counter read when no lock has
/// waiters), and counts the acquisition (`by_try`: a trylock's) for the lock table (one
/// thread-local decrement). Only acquisitions that start a hold are told: the accounting
/// starts the hold of a mutex there, and an inner acquisition of a recursive mutex goes on
/// with its owner's.
#[inline(always)]
fn acquired(m: *mut pthread_mutex_t, rc: c_int, by_try: bool) {
    if rc == 0 || rc == libc::EOWNERDEAD {
        count_acquisition(m, by_try);
        // After the try, the recursion count of a recursive mutex is 1 exactly when this
        // acquisition started the hold: what `unlock_releases` tests.
        // SAFETY: `m` is a valid mutex, which the caller now holds.
        policy::acquired_if(m as usize, WaitKind::Mutex, || unsafe {
            unlock_releases(m)
        });
    }
}

/// Counts an acquisition of `m` for the lock table: one decrement of the thread's
/// countdown (`locks::acquisition_sampling`), and a sampled one counted out of line.
#[inline(always)]
fn count_acquisition(m: *mut pthread_mutex_t, by_try: bool) {
    if policy::acquisition_due() {
        count_sampled_acquisition(m, by_try);
    }
}

/// A sampled acquisition of `m`. Out of line with its caller's arguments only, so that the
/// fast path keeps its registers (with the sampling's call inline, a plain pair cost
/// 1.2 ns more).
#[cold]
#[inline(never)]
fn count_sampled_acquisition(m: *mut pthread_mutex_t, by_try: bool) {
    policy::sampled_acquisition(m as usize, WaitKind::Mutex, by_try);
}

/// A blocking acquisition (`block`: glibc's lock of a mutex that is not plain, or its
/// timedlock or clocklock of any mutex): a try first
/// ([`try_lock`]); only when that says EBUSY is the wait measured around `block`. The fast
/// path (a free mutex) is a try and one counter read, inlined into the interposed function;
/// the measured wait is out of line (and is not measured while sampling is off).
///
/// # Safety
/// `m` must be a valid mutex pointer for glibc's trylock.
#[inline(always)]
unsafe fn lock_measured(m: *mut pthread_mutex_t, block: impl FnOnce() -> c_int) -> c_int {
    // SAFETY: `m` is the caller's valid mutex.
    let rc = unsafe { try_for_lock(m) };
    if rc != libc::EBUSY {
        acquired(m, rc, false);
        return rc;
    }
    kept_on_the_stack(wait_measured(m, block))
}

/// The try of a blocking acquisition: as [`try_lock`], but a robust mutex that the try finds
/// not recoverable is left free, as glibc's lock leaves it
/// ([`release_unrecoverable`]); a plain mutex never is robust, so its inline try is as is.
///
/// # Safety
/// `m` must be a valid mutex pointer for glibc's trylock.
#[inline(always)]
unsafe fn try_for_lock(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: `m` is valid (this function's contract); forwarded to glibc unchanged.
    unsafe {
        plain_mutex::try_lock(m).unwrap_or_else(|| {
            let rc = real::pthread_mutex_trylock()(m);
            if rc == libc::ENOTRECOVERABLE {
                release_unrecoverable(m);
            }
            rc
        })
    }
}

/// glibc's `__kind` bits of a robust mutex and of a priority-inheritance one
/// (`PTHREAD_MUTEX_ROBUST_NORMAL_NP`, `PTHREAD_MUTEX_PRIO_INHERIT_NP`).
const KIND_ROBUST: i32 = 16;
const KIND_PRIO_INHERIT: i32 = 32;
/// The kernel's mask of the owner's thread id in a robust lock word.
const FUTEX_TID_MASK: i32 = 0x3fff_ffff;

/// After glibc's trylock said ENOTRECOVERABLE: releases the lock word of a robust mutex
/// that the try took, as glibc's lock and timed lock release it before they say the same.
/// glibc 2.36's trylock of a robust mutex (not priority-inheritance: that one releases it
/// itself) takes the word by a compare-and-swap 0 → its thread id, finds the owner field
/// `PTHREAD_MUTEX_NOTRECOVERABLE`, and then releases the word only `if (oldval == id)`,
/// where `oldval` is the 0 it replaced: the word stays set, and every later lock of the
/// mutex would wait forever where glibc's own fails at once. The release is glibc's
/// `lll_unlock` of a robust mutex: an exchange to 0 and, when the old value says a thread
/// may sleep on it (over 1), a shared `FUTEX_WAKE` of one.
///
/// # Safety
/// `m` must point at a valid mutex, for which glibc's trylock has just returned
/// ENOTRECOVERABLE to the calling thread.
#[cold]
#[inline(never)]
unsafe fn release_unrecoverable(m: *mut pthread_mutex_t) {
    // SAFETY: `m` is valid (this function's contract).
    let (lock, kind) = unsafe {
        (
            plain_mutex::field(m, plain_mutex::LOCK),
            plain_mutex::field(m, plain_mutex::KIND).load(Ordering::Relaxed),
        )
    };
    if kind & (KIND_ROBUST | KIND_PRIO_INHERIT) != KIND_ROBUST {
        return;
    }
    // Others only add their waiting mark to a word the caller's id is in (the thread id
    // bits stay), so the word is the caller's exactly when its id is there.
    let me = blameprof_measure::sys::gettid() as i32;
    if lock.load(Ordering::Relaxed) & FUTEX_TID_MASK != me {
        return;
    }
    let word = lock.as_ptr() as c_long;
    if lock.swap(0, Ordering::Release) > 1 {
        let (wake, one): (c_long, c_long) = (libc::FUTEX_WAKE.into(), 1);
        // SAFETY: FUTEX_WAKE reads no memory (the address is only looked up among the
        // sleepers). glibc's `syscall`, not ours: the wake is glibc's lock's, not the
        // program's.
        unsafe { real::syscall()(libc::SYS_futex, word, wake, one) };
    }
}

/// A try: glibc's own fast path inline for a plain mutex, else glibc's trylock.
///
/// # Safety
/// `m` must be a valid mutex pointer for glibc's trylock.
#[inline(always)]
unsafe fn try_lock(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: `m` is valid (this function's contract); forwarded to glibc unchanged.
    unsafe { plain_mutex::try_lock(m).unwrap_or_else(|| real::pthread_mutex_trylock()(m)) }
}

/// The contended half of [`lock_measured`].
#[cold]
#[inline(never)]
fn wait_measured(m: *mut pthread_mutex_t, block: impl FnOnce() -> c_int) -> c_int {
    // Once registered, marks the holder: its samples count as `held.contended` while
    // this thread and others wait. The acquisition is counted as the real call returns, so
    // that the policy can start the hold last, after all the bookkeeping that touches the
    // thread's own lines.
    let block = || {
        // SAFETY: `m` is the caller's valid mutex, which it is about to wait for.
        let owner = unsafe { plain_mutex::owner(m) };
        policy::waiting_behind(owner, m as usize, WaitKind::Mutex);
        let rc = block();
        if rc == 0 || rc == libc::EOWNERDEAD {
            count_acquisition(m, false);
        }
        rc
    };
    policy::wait(m as usize, WaitKind::Mutex, block, |rc, _| {
        policy::outcome_of_rc(rc)
    })
}

export_with_site! {
    /// # Safety
    /// Same contract as `pthread_mutex_trylock(3)`.
    pthread_mutex_trylock(m: *mut pthread_mutex_t) => mutex_trylock_at, "rsi"
}

/// `pthread_mutex_trylock` called from `site` (the lock view names where failed trylocks
/// came from).
///
/// # Safety
/// Same contract as `pthread_mutex_trylock(3)`.
unsafe extern "C" fn mutex_trylock_at(m: *mut pthread_mutex_t, site: usize) -> c_int {
    // SAFETY: `m` is the caller's mutex (this function's contract).
    let rc = unsafe { try_lock(m) };
    acquired(m, rc, true);
    if rc == libc::EBUSY {
        policy::try_failed(m as usize, WaitKind::Mutex, site);
    }
    rc
}

/// # Safety
/// Same contract as `pthread_mutex_lock(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_lock(m: *mut pthread_mutex_t) -> c_int {
    // A plain mutex as glibc locks it: a compare-and-swap, and the wait measured around
    // glibc's sleep when that fails; any other mutex tries first, as a timed lock does.
    // SAFETY: `m` is the caller's mutex (this function's contract), forwarded unchanged.
    match unsafe { plain_mutex::lock(m) } {
        Some(libc::EBUSY) => {
            // SAFETY: a plain mutex that `lock` found held.
            kept_on_the_stack(wait_measured(m, || unsafe { plain_mutex::lock_wait(m) }))
        }
        Some(rc) => {
            acquired(m, rc, false);
            rc
        }
        // SAFETY: as above.
        None => unsafe { lock_measured(m, || real::pthread_mutex_lock()(m)) },
    }
}

/// # Safety
/// Same contract as `pthread_mutex_timedlock(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_timedlock(
    m: *mut pthread_mutex_t,
    abstime: *const timespec,
) -> c_int {
    // SAFETY: `m` is the caller's mutex (this function's contract), forwarded unchanged.
    unsafe { lock_measured(m, || real::pthread_mutex_timedlock()(m, abstime)) }
}

/// # Safety
/// Same contract as `pthread_mutex_clocklock(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_clocklock(
    m: *mut pthread_mutex_t,
    clock: libc::clockid_t,
    abstime: *const timespec,
) -> c_int {
    if !timeouts::supported_clock(clock) {
        // glibc rejects other clocks (EINVAL) before it looks at the mutex: no try first,
        // which would take a free mutex.
        // SAFETY: the caller's arguments (this function's contract), forwarded unchanged.
        return unsafe { real::pthread_mutex_clocklock()(m, clock, abstime) };
    }
    // SAFETY: `m` is the caller's mutex (this function's contract), forwarded unchanged.
    unsafe { lock_measured(m, || real::pthread_mutex_clocklock()(m, clock, abstime)) }
}

/// Whether unlocking `m` now releases it: not when a recursive mutex is held more than once.
///
/// # Safety
/// `m` must point at a valid, initialised glibc mutex.
#[inline(always)]
unsafe fn unlock_releases(m: *mut pthread_mutex_t) -> bool {
    // SAFETY: `m` is a valid, initialised mutex (this function's contract).
    let (count, kind) = unsafe {
        (
            plain_mutex::field(m, plain_mutex::COUNT).load(Ordering::Relaxed) as u32,
            plain_mutex::field(m, plain_mutex::KIND).load(Ordering::Relaxed),
        )
    };
    !(kind & 3 == libc::PTHREAD_MUTEX_RECURSIVE && count > 1)
}

/// # Safety
/// Same contract as `pthread_mutex_unlock(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_unlock(m: *mut pthread_mutex_t) -> c_int {
    // An inner unlock of a recursive mutex (the hold goes on), or nobody waits for this
    // mutex (nor for another of its wait-table bucket or of its waiter counter): no
    // accounting (a plain mutex is released inline, anything else by glibc).
    // SAFETY: per this function's contract, `m` is a valid mutex held by the caller.
    if !policy::mutex_may_be_waited_for(m as usize) || !unsafe { unlock_releases(m) } {
        // SAFETY: `m` is a valid mutex held by the caller (this function's contract).
        return unsafe { unlock(m) };
    }
    kept_on_the_stack(release_measured(m))
}

/// The real unlock: glibc's own sequence inline for a plain mutex, else glibc's unlock.
///
/// # Safety
/// `m` must be a valid mutex pointer for glibc's unlock.
#[inline(always)]
unsafe fn unlock(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: `m` is valid (this function's contract); forwarded to glibc unchanged.
    unsafe {
        if plain_mutex::unlock(m) {
            0
        } else {
            real::pthread_mutex_unlock()(m)
        }
    }
}

/// Returns `rc` through an optimisation barrier, so the call that produced it is a call and
/// not a jump: the entry point's frame stays on the stack while its slow path runs. The
/// analysis names a run of runtime frames by its outermost one (`... lookup ->
/// pthread_mutex_lock`); with `panic = "abort"` nothing is left to do after a slow path
/// returns, and LLVM would turn its call into a tail call, leaving `wait_measured` as the
/// outermost frame.
#[inline(always)]
fn kept_on_the_stack(rc: c_int) -> c_int {
    std::hint::black_box(rc)
}

/// The half of `pthread_mutex_unlock` that settles the holder's blame.
#[cold]
#[inline(never)]
fn release_measured(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: the caller's mutex, valid and held (`pthread_mutex_unlock`'s contract).
    policy::release(m as usize, WaitKind::Mutex, false, || unsafe { unlock(m) })
}

export_with_site! {
    /// # Safety
    /// Same contract as `pthread_mutex_init(3)`.
    pthread_mutex_init(m: *mut pthread_mutex_t, attr: *const libc::pthread_mutexattr_t)
        => mutex_init_at, "rdx"
}

/// `pthread_mutex_init` called from `site`.
///
/// # Safety
/// Same contract as `pthread_mutex_init(3)`.
unsafe extern "C" fn mutex_init_at(
    m: *mut pthread_mutex_t,
    attr: *const libc::pthread_mutexattr_t,
    site: usize,
) -> c_int {
    policy::lock_initialised(m as usize, site);
    // SAFETY: forwarding the caller's arguments to glibc unchanged.
    unsafe { real::pthread_mutex_init()(m, attr) }
}

/// # Safety
/// Same contract as `pthread_mutex_destroy(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_destroy(m: *mut pthread_mutex_t) -> c_int {
    policy::forget(m as usize);
    // SAFETY: forwarding the caller's mutex to glibc unchanged.
    unsafe { real::pthread_mutex_destroy()(m) }
}
mod tests;
