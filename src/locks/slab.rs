//! Allocation-free storage for per-lock monitoring state, recycled when locks are destroyed.
//!
//! Job: hand out `u32` indices of zero-initialised `T` slots that live at fixed addresses
//! forever (so the signal handler may read them without any lock), and take them back for
//! reuse. Memory grows in chunks mapped on demand, so it is bounded by the most slots ever
//! live at once, not by the number ever handed out.
//!
//! Invariants: `T` must be valid when zeroed (atomics and integers); a slot is never unmapped;
//! the free list is a Treiber stack whose head carries a generation count, so a slot popped
//! and pushed again meanwhile cannot corrupt it (no ABA).
//!
//! [`Slab::get`] is async-signal-safe and wait-free; [`Slab::alloc`] and [`Slab::free`] are
//! lock-free and allocation-free (they may call `mmap`, never `malloc`), so they are safe to
//! use inside interposed lock functions called by an allocator.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

/// Slots per chunk (a power of two).
const CHUNK_SLOTS: usize = 4096;
/// Chunks at most: 4096 x 4096 = 16M slots live at once.
const MAX_CHUNKS: usize = 4096;

/// Implemented by slot types: the link field the free list threads through free slots.
pub trait Linked {
    fn next(&self) -> &AtomicU32;
}

pub struct Slab<T: Linked> {
    chunks: [AtomicPtr<T>; MAX_CHUNKS],
    /// Slots handed out by bumping (never freed ones come from here).
    bump: AtomicU32,
    /// Free list head: generation << 32 | (index + 1), 0 in the low half when empty. Links
    /// are stored the same way (0: the end), so a new slab is all zero bits: it lives in
    /// `.bss`, and no page of it is resident until used.
    free: AtomicU64,
    _slots: PhantomData<T>,
}

// SAFETY: slots are only reached through atomics inside `T`, chunk pointers are atomics, and
// chunks are never freed.
unsafe impl<T: Linked> Sync for Slab<T> {}

impl<T: Linked> Slab<T> {
    pub const fn new() -> Self {
        Slab {
            chunks: [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_CHUNKS],
            bump: AtomicU32::new(0),
            free: AtomicU64::new(0),
            _slots: PhantomData,
        }
    }

    /// The slot at `index`, if it was ever handed out. Async-signal-safe, wait-free.
    pub fn get(&self, index: u32) -> Option<&T> {
        let chunk = self
            .chunks
            .get(index as usize / CHUNK_SLOTS)?
            .load(Ordering::Acquire);
        if chunk.is_null() {
            return None;
        }
        // SAFETY: a non-null chunk maps CHUNK_SLOTS slots of T, never unmapped, and the
        // offset is below CHUNK_SLOTS.
        Some(unsafe { &*chunk.add(index as usize % CHUNK_SLOTS) })
    }

    /// A free slot's index. The slot holds whatever its previous user left: callers reset
    /// it. `None` when 16M slots are live at once or memory cannot be mapped.
    pub fn alloc(&self) -> Option<u32> {
        let mut head = self.free.load(Ordering::Acquire);
        while let Some(index) = (head as u32).checked_sub(1) {
            let next = self.get(index)?.next().load(Ordering::Acquire);
            let new = ((head >> 32).wrapping_add(1) << 32) | u64::from(next);
            match self
                .free
                .compare_exchange_weak(head, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(index),
                Err(h) => head = h,
            }
        }
        let index = self.bump.fetch_add(1, Ordering::AcqRel);
        if index as usize >= CHUNK_SLOTS * MAX_CHUNKS {
            self.bump.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        self.ensure_chunk(index as usize / CHUNK_SLOTS)?;
        Some(index)
    }

    /// Returns a slot for reuse.
    pub fn free(&self, index: u32) {
        let Some(slot) = self.get(index) else { return };
        let mut head = self.free.load(Ordering::Acquire);
        loop {
            slot.next().store(head as u32, Ordering::Release);
            let new = ((head >> 32).wrapping_add(1) << 32) | u64::from(index + 1);
            match self
                .free
                .compare_exchange_weak(head, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(h) => head = h,
            }
        }
    }

    /// Slots handed out by bumping so far (the high-water mark of live slots).
    pub fn high_water(&self) -> u32 {
        self.bump.load(Ordering::Acquire)
    }

    fn ensure_chunk(&self, chunk: usize) -> Option<()> {
        let slot = &self.chunks[chunk];
        if !slot.load(Ordering::Acquire).is_null() {
            return Some(());
        }
        let bytes = CHUNK_SLOTS * std::mem::size_of::<T>();
        // SAFETY: an anonymous private mapping, zero-filled by the kernel; T is valid zeroed.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        if slot
            .compare_exchange(
                std::ptr::null_mut(),
                p.cast(),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            // Another thread mapped this chunk first.
            // SAFETY: unmapping our own, never published mapping.
            unsafe { libc::munmap(p, bytes) };
        }
        Some(())
    }
}

impl<T: Linked> Default for Slab<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Slot {
        next: AtomicU32,
        value: AtomicU64,
    }
    impl Linked for Slot {
        fn next(&self) -> &AtomicU32 {
            &self.next
        }
    }

    #[test]
    fn recycles_freed_slots_so_memory_follows_live_count() {
        static SLAB: Slab<Slot> = Slab::new();
        let mut live = Vec::new();
        for round in 0..100u64 {
            for _ in 0..1000 {
                let i = SLAB.alloc().unwrap();
                SLAB.get(i).unwrap().value.store(round, Ordering::Relaxed);
                live.push(i);
            }
            for i in live.drain(..) {
                SLAB.free(i);
            }
        }
        assert!(
            SLAB.high_water() <= 1000,
            "high water {}",
            SLAB.high_water()
        );
    }

    #[test]
    fn concurrent_alloc_free_never_hands_out_a_slot_twice() {
        static SLAB: Slab<Slot> = Slab::new();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        let i = SLAB.alloc().unwrap();
                        let s = SLAB.get(i).unwrap();
                        assert_eq!(s.value.swap(t + 1, Ordering::AcqRel), 0, "slot shared");
                        s.value.store(0, Ordering::Release);
                        SLAB.free(i);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
