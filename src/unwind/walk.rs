//! Walking one thread's stack into module-relative frames. Async-signal-safe.
//!
//! Job: from an interrupted (pc, sp, bp), produce the call path leaf first, using DWARF CFI
//! from the module set and frame pointers where no CFI covers an address (framehop's
//! fallback). The output buffer is fixed: a path deeper than [`MAX_STACK_DEPTH`] is cut and
//! ends with the [`Frame::TRUNCATED`] marker, never overflowing.

use super::module_set::Modules;
use super::stack::StackReader;
use crate::format::{Frame, MAX_STACK_DEPTH};
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64};
use framehop::{MustNotAllocateDuringUnwind, Unwinder};

/// Per-thread unwind cache (must not be shared between threads).
pub type UnwindCache = CacheX86_64<MustNotAllocateDuringUnwind>;

/// Room needed in the output buffer: the deepest path plus the truncation marker.
pub const FRAMES_CAPACITY: usize = MAX_STACK_DEPTH + 1;

/// A zeroed path buffer, allocated in place: no stack temporary (a thread starting up would
/// otherwise touch 8 KiB of its stack for each), and from the runtime heap no page is made
/// resident until a path is that deep (see `sampler::heap`). Not async-signal-safe.
pub fn frame_array() -> Box<[Frame; FRAMES_CAPACITY]> {
    let layout = std::alloc::Layout::new::<[Frame; FRAMES_CAPACITY]>();
    // SAFETY: the layout has a non-zero size; the block is zeroed, and `Frame` is two
    // integers, for which all-zero bits are valid (`Frame::default`); Box takes ownership of
    // a block allocated by the global allocator with the layout of its contents.
    unsafe {
        let block = std::alloc::alloc_zeroed(layout);
        if block.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Box::from_raw(block.cast())
    }
}

/// The outcome of one walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Walk {
    /// Frames written to the output, including the truncation marker.
    pub depth: usize,
    /// The path was cut at [`MAX_STACK_DEPTH`].
    pub truncated: bool,
    /// The unwinder stopped with an error before reaching a root frame.
    pub error: bool,
}

/// Registers of the interrupted code.
#[derive(Debug, Clone, Copy)]
pub struct Regs {
    pub pc: u64,
    pub sp: u64,
    pub bp: u64,
}

/// Unwinds from `regs` into `out`, leaf first. Async-signal-safe: no allocation (framehop in
/// `MustNotAllocateDuringUnwind` mode), no locks, bounded by the size of `out`.
pub fn walk(
    modules: &Modules,
    cache: &mut UnwindCache,
    regs: Regs,
    stack_top: u64,
    out: &mut [Frame; FRAMES_CAPACITY],
) -> Walk {
    let mut reader = StackReader::new(regs.sp, stack_top);
    let mut read = |addr: u64| reader.read(addr);
    let unwind_regs = UnwindRegsX86_64::new(regs.pc, regs.sp, regs.bp);
    let mut frames = modules
        .unwinder
        .iter_frames(regs.pc, unwind_regs, cache, &mut read);
    let mut walk = Walk {
        depth: 0,
        truncated: false,
        error: false,
    };
    loop {
        match frames.next() {
            Ok(Some(address)) => {
                if walk.depth == MAX_STACK_DEPTH {
                    out[walk.depth] = Frame::TRUNCATED;
                    walk.depth += 1;
                    walk.truncated = true;
                    return walk;
                }
                out[walk.depth] = modules.frame_for(address.address());
                walk.depth += 1;
            }
            Ok(None) => return walk,
            Err(_) => {
                walk.error = true;
                return walk;
            }
        }
    }
}
