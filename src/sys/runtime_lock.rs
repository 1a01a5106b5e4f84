//! A minimal lock for the runtime's own bookkeeping (thread registry, module list).
//!
//! Job: mutual exclusion that can be taken in a `pthread_atfork` prepare handler and released
//! in both parent and child, which a `std::sync::Mutex` cannot offer (its guard cannot cross
//! the fork callbacks). Waiters spin briefly, then yield the CPU.
//!
//! Not for the signal handler: the handler never waits on anything.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};

pub struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: `value` is only reached through a `SpinGuard`, and at most one guard exists at a
// time (acquired by the compare-exchange in `lock`).
unsafe impl<T: Send> Sync for SpinLock<T> {}

pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> SpinLock<T> {
    pub const fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    pub fn lock(&self) -> SpinGuard<'_, T> {
        self.raw_lock();
        SpinGuard { lock: self }
    }

    /// Acquires without a guard; pair with [`SpinLock::raw_unlock`] (fork handlers).
    pub fn raw_lock(&self) {
        let mut spins = 0u32;
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins += 1;
            if spins < 100 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Releases a lock taken with [`SpinLock::raw_lock`].
    pub fn raw_unlock(&self) {
        self.locked.store(false, Ordering::Release);
    }
}

impl<T> std::ops::Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard proves exclusive access (see the `Sync` impl).
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> std::ops::DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard proves exclusive access (see the `Sync` impl).
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.raw_unlock();
    }
}
