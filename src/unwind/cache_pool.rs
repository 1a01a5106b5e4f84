//! Unwind caches shared by the threads of the process.
//!
//! Job: lend a framehop cache (about 17 KiB: its rule cache and a compact CFI context, see
//! `no_alloc::NoAllocation`) to each unwind while it runs. An unwind needs one only for its own
//! duration, and few run at once: one per CPU in signal handlers, plus the odd one
//! preempted or in a thread's own context. So the pool holds at most `2 x CPUs + 2` caches,
//! however many threads the program runs, instead of one per thread. A 64-thread program
//! on 8 CPUs keeps 18.
//!
//! Invariants:
//! - a cache is published (its pointer stored, then `len` raised) before anyone may take
//!   it, and is never freed;
//! - a cache is used by whoever set its `busy` flag, until the [`Lent`] guard drops;
//! - the pool grows only outside signal handlers ([`CachePool::grow_for`] at thread start),
//!   never while an unwind waits for a cache.
//!
//! [`CachePool::try_take`] is async-signal-safe and wait-free (one pass over the caches);
//! the rest is not.

use super::walk::UnwindCache;
use crate::runtime_lock::SpinLock;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

/// Caches at most, whatever the number of CPUs.
const MAX_CACHES: usize = 256;

pub struct CachePool {
    caches: [AtomicPtr<UnwindCache>; MAX_CACHES],
    busy: [AtomicBool; MAX_CACHES],
    /// Published caches: `caches[..len]` are non-null.
    len: AtomicUsize,
    /// Serialises growth; holds the pool's size limit (0: not computed yet).
    grow: SpinLock<usize>,
}

/// The process's pool (the runtime's unwinds all use it).
pub static POOL: CachePool = CachePool::new();

/// A cache lent by the pool; returned when dropped.
pub struct Lent<'a> {
    pool: &'a CachePool,
    index: usize,
}

impl Default for CachePool {
    fn default() -> Self {
        Self::new()
    }
}

impl CachePool {
    pub const fn new() -> CachePool {
        CachePool {
            caches: [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_CACHES],
            busy: [const { AtomicBool::new(false) }; MAX_CACHES],
            len: AtomicUsize::new(0),
            grow: SpinLock::new(0),
        }
    }

    /// Caches in the pool.
    pub fn size(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Grows the pool to one cache per thread, up to its limit (`2 x CPUs + 2`), for a
    /// program with `threads` threads. Not async-signal-safe (allocates).
    pub fn grow_for(&self, threads: usize) {
        if threads <= self.size() {
            return;
        }
        self.grow_to(threads);
    }

    /// The growing part of [`CachePool::grow_for`], kept out of line: framehop builds a
    /// cache's 8 KiB rule table on the stack before boxing it, and that frame, inlined into
    /// a caller, would be allocated (its pages touched by the stack probe) on every call,
    /// grown or not. At thread start that made every thread's stack a page larger (the
    /// probe reaches 8 KiB down; the signal handler's frames reach about half as far); the
    /// pool grows on the creating thread instead (`thread_state::prepare_attach`).
    #[cold]
    #[inline(never)]
    fn grow_to(&self, threads: usize) {
        let mut limit = self.grow.lock();
        if *limit == 0 {
            *limit = (2 * crate::sys::usable_cpus() + 2).min(MAX_CACHES);
        }
        let wanted = threads.min(*limit);
        while self.size() < wanted {
            let len = self.size();
            let cache = Box::into_raw(Box::new(UnwindCache::default()));
            self.caches[len].store(cache, Ordering::Release);
            self.len.store(len + 1, Ordering::Release);
        }
    }

    /// A free cache, looking first at the one `hint` (a thread id) picks, so that a thread
    /// tends to get the same cache; `None` when every cache is in use. Async-signal-safe
    /// and wait-free.
    pub fn try_take(&self, hint: u32) -> Option<Lent<'_>> {
        let len = self.size();
        if len == 0 {
            return None;
        }
        let start = hint as usize % len;
        (0..len)
            .map(|i| (start + i) % len)
            .find(|&i| {
                self.busy[i]
                    .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            })
            .map(|index| Lent { pool: self, index })
    }

    /// In a fork child: the caches that the parent's other threads were using are free (those
    /// threads do not exist here).
    pub fn release_all(&self) {
        for busy in &self.busy {
            busy.store(false, Ordering::Release);
        }
    }
}

impl std::ops::Deref for Lent<'_> {
    type Target = UnwindCache;
    fn deref(&self) -> &UnwindCache {
        // SAFETY: `index < len`, so the pointer is a published, never-freed cache, and our
        // `busy` flag gives us that cache alone until the guard drops.
        unsafe { &*self.pool.caches[self.index].load(Ordering::Acquire) }
    }
}

impl std::ops::DerefMut for Lent<'_> {
    fn deref_mut(&mut self) -> &mut UnwindCache {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference through the guard.
        unsafe { &mut *self.pool.caches[self.index].load(Ordering::Acquire) }
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        self.pool.busy[self.index].store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_one_cache_per_thread_up_to_its_limit() {
        let pool = CachePool::new();
        assert!(pool.try_take(1).is_none(), "an empty pool lends nothing");
        pool.grow_for(3);
        assert_eq!(pool.size(), 3);
        pool.grow_for(2);
        assert_eq!(pool.size(), 3, "never shrinks");
        pool.grow_for(100_000);
        let limit = *pool.grow.lock();
        assert!((4..=MAX_CACHES).contains(&limit));
        assert_eq!(pool.size(), limit);
    }

    #[test]
    fn lends_each_cache_to_one_user_at_a_time() {
        let pool = CachePool::new();
        pool.grow_for(3);
        let a = pool.try_take(7).unwrap();
        let b = pool.try_take(7).unwrap();
        let c = pool.try_take(7).unwrap();
        let mut indices = [a.index, b.index, c.index];
        indices.sort();
        assert_eq!(indices, [0, 1, 2]);
        assert_eq!(a.index, 7 % 3, "the hint picks the first cache tried");
        assert!(pool.try_take(7).is_none(), "all three are in use");
        let freed = b.index;
        drop(b);
        let d = pool.try_take(0).unwrap();
        assert_eq!(d.index, freed, "the only free one");
        drop((a, c, d));
        pool.try_take(5).unwrap();
    }

    #[test]
    fn a_fork_child_gets_back_the_caches_of_threads_it_does_not_have() {
        let pool = CachePool::new();
        pool.grow_for(2);
        let held = [pool.try_take(0).unwrap(), pool.try_take(1).unwrap()];
        std::mem::forget(held);
        assert!(pool.try_take(0).is_none());
        pool.release_all();
        assert!(pool.try_take(0).is_some());
    }
}
