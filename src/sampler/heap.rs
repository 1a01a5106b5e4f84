//! The preloaded runtime's own heap: every Rust allocation the runtime makes inside the
//! profiled program comes from here, never from the program's `malloc`.
//!
//! Job: keep the runtime's memory apart from the program's, and small.
//! - glibc's `malloc` gives each thread that calls it an arena of its own. A program whose
//!   threads never allocate would get one arena per thread from the runtime alone: tens of
//!   KiB resident each, kept after the thread exits.
//! - A program may replace or instrument its `malloc` (jemalloc, tcmalloc, leak checkers).
//!   The runtime neither perturbs that heap nor depends on it.
//!
//! Small blocks come from one [`dlmalloc`] instance behind a [`SpinLock`]. Blocks of
//! [`LARGE`] bytes or more get an anonymous mapping of their own. Such a block costs no
//! resident memory until it is written (zeroed blocks are not cleared: the kernel's fresh
//! pages already are), and freeing it returns it to the kernel. So a thread's 8 KiB
//! frame arrays cost one page each, unless its stacks are deep.
//!
//! Invariants:
//! - whether a block is mapped or from dlmalloc follows from its layout alone
//!   ([`is_mapped`]), so `dealloc` and `realloc` find their way back without a header;
//! - the lock is held only inside dlmalloc calls, which never call back into the runtime.
//!   Fork handlers hold it across `fork` ([`fork_prepare`]), so a child never inherits it
//!   taken.
//!
//! Not async-signal-safe. The sampling handler never allocates. An allocation made while
//! the calling thread is in the handler would be a bug: it is counted
//! (`handler_allocations`, reported with the profile's counters) so tests can prove there
//! are none.

use super::counters::{self, Counter};
use crate::runtime_lock::SpinLock;
use dlmalloc::Dlmalloc;
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicU64, Ordering};

/// Blocks of this size or more are mapped on their own.
pub const LARGE: usize = 8 * 1024;
const PAGE: usize = 4096;

/// The heap the preloaded runtime allocates from: `runtime/` makes [`RuntimeAllocator`] its
/// global allocator.
pub static HEAP: RuntimeHeap = RuntimeHeap::new(super::thread_state::in_signal_handler);

/// The global allocator of the preloaded runtime: forwards to [`HEAP`].
pub struct RuntimeAllocator;

// SAFETY: forwards every call unchanged to HEAP, a GlobalAlloc.
unsafe impl GlobalAlloc for RuntimeAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe { HEAP.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe { HEAP.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { HEAP.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe { HEAP.realloc(ptr, layout, new_size) }
    }
}

/// A heap: small blocks from dlmalloc, large ones mapped (see the module doc).
pub struct RuntimeHeap {
    small: SpinLock<Dlmalloc>,
    /// Bytes currently allocated (as requested), and their high-water mark.
    in_use: AtomicU64,
    peak: AtomicU64,
    /// Asks whether the calling thread is inside the sampling signal handler.
    in_handler: fn() -> bool,
}

impl RuntimeHeap {
    /// A heap that counts allocations made while `in_handler()` is true.
    pub const fn new(in_handler: fn() -> bool) -> RuntimeHeap {
        RuntimeHeap {
            small: SpinLock::new(Dlmalloc::new()),
            in_use: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            in_handler,
        }
    }

    /// Most bytes allocated at once so far.
    pub fn peak_bytes(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// `pthread_atfork` prepare: hold the heap so the child inherits it consistent and free.
    /// Call it after taking every other runtime lock whose holder may allocate.
    pub fn fork_prepare(&self) {
        self.small.raw_lock();
    }

    /// `pthread_atfork` parent and child: release what [`RuntimeHeap::fork_prepare`] took.
    pub fn fork_release(&self) {
        self.small.raw_unlock();
    }

    /// A new block of `layout`, cleared if `zeroed`.
    ///
    /// # Safety
    /// `layout` has a non-zero size (GlobalAlloc's contract for `alloc`).
    unsafe fn allocate(&self, layout: Layout, zeroed: bool) -> *mut u8 {
        self.note_alloc(layout.size());
        if is_mapped(layout) {
            // Fresh anonymous pages read as zero: nothing to clear, nothing made resident.
            return map(layout.size());
        }
        let mut small = self.small.lock();
        // SAFETY: dlmalloc's contract is GlobalAlloc's (a non-zero size, per ours); the lock
        // makes the call exclusive.
        unsafe {
            if zeroed {
                small.calloc(layout.size(), layout.align())
            } else {
                small.malloc(layout.size(), layout.align())
            }
        }
    }

    fn note_alloc(&self, size: usize) {
        let now = self.in_use.fetch_add(size as u64, Ordering::Relaxed) + size as u64;
        self.peak.fetch_max(now, Ordering::Relaxed);
        if (self.in_handler)() {
            counters::add(Counter::HandlerAllocations, 1);
        }
    }

    fn note_free(&self, size: usize) {
        self.in_use.fetch_sub(size as u64, Ordering::Relaxed);
    }
}

/// Whether a block of `layout` is a mapping of its own.
pub fn is_mapped(layout: Layout) -> bool {
    layout.size() >= LARGE && layout.align() <= PAGE
}

fn pages(size: usize) -> usize {
    size.div_ceil(PAGE) * PAGE
}

fn map(size: usize) -> *mut u8 {
    // SAFETY: a fresh private anonymous mapping; it overlaps nothing of anyone else's.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            pages(size),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        p.cast()
    }
}

// Not inlined: with link-time optimisation every allocation site of the runtime would
// otherwise get its own copy (some 30 KiB of code, resident in every profiled program).
// SAFETY: blocks are either whole mappings, returned to the kernel on dealloc, or dlmalloc
// blocks managed under the lock; `is_mapped` tells the two apart from the layout every
// GlobalAlloc call is given, exactly as at allocation.
unsafe impl GlobalAlloc for RuntimeHeap {
    #[inline(never)]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.allocate(layout, false) }
    }

    #[inline(never)]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.allocate(layout, true) }
    }

    #[inline(never)]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.note_free(layout.size());
        if is_mapped(layout) {
            // SAFETY: `ptr` is the start of a mapping of `pages(size)` bytes made by `map`.
            unsafe { libc::munmap(ptr.cast(), pages(layout.size())) };
            return;
        }
        // SAFETY: `ptr` came from this dlmalloc with this layout (GlobalAlloc's contract).
        unsafe { self.small.lock().free(ptr, layout.size(), layout.align()) }
    }

    #[inline(never)]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: GlobalAlloc::realloc's contract guarantees this layout is valid.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (is_mapped(layout), is_mapped(new_layout)) {
            (true, true) => {
                // SAFETY: `ptr` is a whole mapping of `pages(size)` bytes; the kernel moves
                // or grows it and keeps its contents.
                let p = unsafe {
                    libc::mremap(
                        ptr.cast(),
                        pages(layout.size()),
                        pages(new_size),
                        libc::MREMAP_MAYMOVE,
                    )
                };
                if p == libc::MAP_FAILED {
                    return std::ptr::null_mut();
                }
                self.note_free(layout.size());
                self.note_alloc(new_size);
                p.cast()
            }
            (false, false) => {
                self.note_free(layout.size());
                self.note_alloc(new_size);
                // SAFETY: `ptr` came from this dlmalloc with `layout`; the lock makes the call
                // exclusive.
                unsafe {
                    self.small
                        .lock()
                        .realloc(ptr, layout.size(), layout.align(), new_size)
                }
            }
            _ => {
                // SAFETY: moving between the two kinds: a new block, the common prefix
                // copied, the old block freed; `new_layout` has a non-zero size.
                unsafe {
                    let p = self.alloc(new_layout);
                    if !p.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                    p
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    static IN_HANDLER: AtomicBool = AtomicBool::new(false);

    fn in_handler() -> bool {
        IN_HANDLER.load(Ordering::Relaxed)
    }

    fn fill(p: *mut u8, n: usize, seed: u8) {
        for i in 0..n {
            // SAFETY: `p` holds at least `n` bytes.
            unsafe { *p.add(i) = seed.wrapping_add(i as u8) };
        }
    }

    fn check(p: *const u8, n: usize, seed: u8) {
        for i in 0..n {
            // SAFETY: `p` holds at least `n` bytes.
            assert_eq!(unsafe { *p.add(i) }, seed.wrapping_add(i as u8), "byte {i}");
        }
    }

    #[test]
    fn blocks_of_both_kinds_keep_their_contents_through_every_realloc() {
        let heap = RuntimeHeap::new(in_handler);
        // small -> small -> large -> large -> small, contents carried along each step.
        let sizes = [24, 3000, LARGE + 100, 5 * LARGE, 200];
        let mut layout = Layout::from_size_align(sizes[0], 8).unwrap();
        // SAFETY: non-zero sizes; every block is freed with the layout it was given.
        unsafe {
            let mut p = heap.alloc(layout);
            assert!(!p.is_null());
            fill(p, layout.size(), 7);
            for &size in &sizes[1..] {
                let kept = layout.size().min(size);
                p = heap.realloc(p, layout, size);
                assert!(!p.is_null());
                check(p, kept, 7);
                layout = Layout::from_size_align(size, 8).unwrap();
                fill(p, size, 7);
            }
            heap.dealloc(p, layout);
        }
        assert_eq!(heap.in_use.load(Ordering::Relaxed), 0);
        assert!(heap.peak_bytes() >= 5 * LARGE as u64);
    }

    #[test]
    fn zeroed_blocks_read_as_zero_even_when_memory_is_reused() {
        let heap = RuntimeHeap::new(in_handler);
        for size in [64, 4000, LARGE, 3 * LARGE + 1] {
            let layout = Layout::from_size_align(size, 16).unwrap();
            // SAFETY: non-zero sizes, freed with their own layout.
            unsafe {
                let dirty = heap.alloc(layout);
                fill(dirty, size, 1);
                heap.dealloc(dirty, layout);
                let p = heap.alloc_zeroed(layout);
                assert!(!p.is_null());
                assert_eq!(p as usize % 16, 0);
                assert!((0..size).all(|i| *p.add(i) == 0), "size {size}");
                heap.dealloc(p, layout);
            }
        }
    }

    #[test]
    fn large_blocks_are_mappings_of_their_own_and_small_ones_are_not() {
        assert!(is_mapped(Layout::from_size_align(LARGE, 8).unwrap()));
        assert!(!is_mapped(Layout::from_size_align(LARGE - 1, 8).unwrap()));
        // Alignment beyond a page cannot come from mmap alone: dlmalloc serves it.
        assert!(!is_mapped(
            Layout::from_size_align(LARGE, 2 * PAGE).unwrap()
        ));
        let heap = RuntimeHeap::new(in_handler);
        let layout = Layout::from_size_align(LARGE, 2 * PAGE).unwrap();
        // SAFETY: freed with its own layout.
        unsafe {
            let p = heap.alloc(layout);
            assert_eq!(p as usize % (2 * PAGE), 0);
            heap.dealloc(p, layout);
        }
    }

    #[test]
    fn allocations_inside_the_handler_are_counted() {
        let heap = RuntimeHeap::new(in_handler);
        let layout = Layout::from_size_align(32, 8).unwrap();
        let before = counters::get(Counter::HandlerAllocations);
        IN_HANDLER.store(true, Ordering::Relaxed);
        // SAFETY: freed with its own layout.
        unsafe {
            let p = heap.alloc(layout);
            IN_HANDLER.store(false, Ordering::Relaxed);
            heap.dealloc(p, layout);
            let q = heap.alloc(layout);
            heap.dealloc(q, layout);
        }
        // Other tests may count too (the counters are process-wide): at least ours.
        assert!(counters::get(Counter::HandlerAllocations) > before);
    }
}
