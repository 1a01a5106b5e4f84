//! OpenMP critical sections (`GOMP_critical_start`/`_end`, `GOMP_critical_name_start`/
//! `_end`), taken on mutexes of the runtime's own through the interposed
//! `pthread_mutex_lock`: one for the unnamed critical section, one per name (up to
//! [`NAMED`]; past that a name's entries are the OpenMP runtime's own, counted as
//! `waits_unmonitored`). Mutual exclusion is the same; only the word it is kept in differs.
//! The lock view names them `omp critical` and `omp critical (NAME)`
//! (`attribution/locks/naming.rs::openmp_name`).
//!
//! Invariants: a name keeps its slot for the process's life, so its start and end always
//! agree. Not async-signal-safe.

use super::real_critical_name_end;
use super::real_critical_name_start;
use crate::locks::{pthread_mutex_lock, pthread_mutex_unlock};
use blameprof_measure::policy;
use blameprof_measure::sampler::counters::{self, Counter};
use libc::{c_void, pthread_mutex_t};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A mutex of the runtime's own standing for a critical section.
struct Critical(UnsafeCell<pthread_mutex_t>);

// SAFETY: the mutex is only touched through pthread calls, which synchronise it.
unsafe impl Sync for Critical {}

impl Critical {
    const fn new() -> Critical {
        Critical(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER))
    }

    /// Takes the mutex. Its result is kept by the caller ([`kept`]), so that the caller's
    /// frame stays on the stack and waits read `... -> GOMP_critical_start`.
    fn lock(&self) -> libc::c_int {
        // SAFETY: a valid, statically initialised default mutex.
        unsafe { pthread_mutex_lock(self.0.get()) }
    }

    /// Releases the mutex, as [`Critical::lock`].
    fn unlock(&self) -> libc::c_int {
        // SAFETY: held by this thread (OpenMP's rule for a critical section's end).
        unsafe { pthread_mutex_unlock(self.0.get()) }
    }
}

/// Keeps a lock call's result, so that the entry point calling it is not left by a tail
/// call: the analysis names a run of runtime frames by its outermost one.
#[inline(always)]
fn kept(rc: libc::c_int) {
    std::hint::black_box(rc);
}

/// The unnamed critical section (all of a program's unnamed ones are one).
static UNNAMED: Critical = Critical::new();

/// How many named critical sections get a measured mutex.
const NAMED: usize = 64;

/// The named critical sections' mutexes, by the address of the name's variable (the
/// `void **` GCC passes): filled in order, never freed.
static NAMES: [AtomicUsize; NAMED] = [const { AtomicUsize::new(0) }; NAMED];
static NAMED_MUTEXES: [Critical; NAMED] = [const { Critical::new() }; NAMED];

/// The mutex of the critical section named by `name`, claiming a slot at its first use;
/// `None` when every slot is taken by other names.
fn named(name: usize) -> Option<&'static Critical> {
    for (slot, mutex) in NAMES.iter().zip(NAMED_MUTEXES.iter()) {
        match slot.compare_exchange(0, name, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                // The lock view names the mutex after the name's variable (its "init site").
                policy::init_site(mutex.0.get() as usize, name);
                return Some(mutex);
            }
            Err(held) if held == name => return Some(mutex),
            Err(_) => {}
        }
    }
    None
}

/// # Safety
/// Same contract as libgomp's `GOMP_critical_start`.
#[no_mangle]
pub unsafe extern "C" fn GOMP_critical_start() {
    kept(UNNAMED.lock());
}

/// # Safety
/// Same contract as libgomp's `GOMP_critical_end`.
#[no_mangle]
pub unsafe extern "C" fn GOMP_critical_end() {
    kept(UNNAMED.unlock());
}

/// # Safety
/// Same contract as libgomp's `GOMP_critical_name_start`.
#[no_mangle]
pub unsafe extern "C" fn GOMP_critical_name_start(name: *mut *mut c_void) {
    match named(name as usize) {
        Some(mutex) => kept(mutex.lock()),
        None => {
            counters::add(Counter::WaitsUnmonitored, 1);
            // SAFETY: the program's call, forwarded.
            unsafe { real_critical_name_start()(name) }
        }
    }
}

/// # Safety
/// Same contract as libgomp's `GOMP_critical_name_end`.
#[no_mangle]
pub unsafe extern "C" fn GOMP_critical_name_end(name: *mut *mut c_void) {
    match named(name as usize) {
        Some(mutex) => kept(mutex.unlock()),
        // SAFETY: the program's call, forwarded.
        None => unsafe { real_critical_name_end()(name) },
    }
}
