//! Walking one thread's stack into module-relative frames. Async-signal-safe.
//!
//! Job: from an interrupted (pc, sp, bp), produce the call path leaf first, using DWARF CFI
//! from the module set and frame pointers where no CFI covers an address (framehop's
//! fallback). The output buffer is fixed: a path deeper than [`MAX_STACK_DEPTH`] is cut and
//! ends with the [`Frame::TRUNCATED`] marker, never overflowing.
//!
//! A thread started through the runtime's trampoline is unwound up to the trampoline's
//! caller (glibc's `start_thread`) and no further ([`StackBounds::root`]): the frames above
//! it (`clone3`) are the same in every sample, and reading libc's unwind tables for them
//! cost two table lookups per sample and made a 64 KiB window of libc's `.eh_frame`
//! resident in every threaded program (`clone3`'s entry lies apart from the others).

use super::module_set::Modules;
use super::no_alloc::NoAllocation;
use super::stack::StackReader;
use crate::format::{Frame, MAX_STACK_DEPTH};
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64};
use framehop::{FrameAddress, Unwinder};

/// An unwind cache: used by one unwind at a time (see `cache_pool`).
pub type UnwindCache = CacheX86_64<NoAllocation>;

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
    /// The path was cut: at [`MAX_STACK_DEPTH`], at code outside every module (JIT code in
    /// an anonymous mapping, whose callers cannot be found without guessing), or where the
    /// unwinder failed; its last frame is [`Frame::TRUNCATED`].
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

/// Where a thread's frames lie, as far as the unwinder needs to know.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StackBounds {
    /// One past the highest address of the thread's frames (0: unknown). Reads below it take
    /// the fast path of [`StackReader`].
    pub top: u64,
    /// An address inside the frame of the runtime's thread-start trampoline, while the
    /// program's start routine runs (0: none, as in the initial thread). A frame whose stack
    /// pointer lies in `(root, top]` is the trampoline's caller: the thread's root, where the
    /// walk ends. Only that caller's frame lies there, so a stack the program switched to (a
    /// coroutine's, a signal stack) cannot end a walk early.
    pub root: u64,
}

impl StackBounds {
    /// Whether a frame whose stack pointer is `sp` is the thread's root frame.
    fn is_root(&self, sp: u64) -> bool {
        self.root != 0 && sp > self.root && sp <= self.top
    }
}

/// Unwinds from `regs` into `out`, leaf first, up to the stack's root frame (see
/// [`StackBounds::root`]) or the end of the unwind information. Async-signal-safe: no
/// allocation (`NoAllocation`), no locks, bounded by the size of `out`.
pub fn walk(
    modules: &Modules,
    cache: &mut UnwindCache,
    regs: Regs,
    stack: StackBounds,
    out: &mut [Frame; FRAMES_CAPACITY],
) -> Walk {
    let mut reader = StackReader::new(regs.sp, stack.top);
    let mut read = |addr: u64| reader.read(addr);
    let mut unwind_regs = UnwindRegsX86_64::new(regs.pc, regs.sp, regs.bp);
    let mut address = FrameAddress::from_instruction_pointer(regs.pc);
    let mut walk = Walk {
        depth: 0,
        truncated: false,
        error: false,
    };
    loop {
        if walk.depth == MAX_STACK_DEPTH {
            out[walk.depth] = Frame::TRUNCATED;
            walk.depth += 1;
            walk.truncated = true;
            return walk;
        }
        out[walk.depth] = modules.frame_for(address.address());
        walk.depth += 1;
        if stack.is_root(unwind_regs.sp()) {
            return walk;
        }
        if out[walk.depth - 1].module == 0 {
            // No unwind information, and a frame pointer there may be any register: stop
            // rather than make up callers.
            return cut(walk, out);
        }
        let next = modules
            .unwinder
            .unwind_frame(address, &mut unwind_regs, cache, &mut read);
        match next.map(|ra| ra.map(FrameAddress::from_return_address)) {
            Ok(Some(Some(caller))) => address = caller,
            Ok(None) => return walk,
            Ok(Some(None)) | Err(_) => {
                walk.error = true;
                return cut(walk, out);
            }
        }
    }
}

/// Ends a path that stops short of its root with the truncation marker. There is room:
/// `FRAMES_CAPACITY` is `MAX_STACK_DEPTH + 1` and a walk stops at `MAX_STACK_DEPTH`.
fn cut(mut walk: Walk, out: &mut [Frame; FRAMES_CAPACITY]) -> Walk {
    out[walk.depth] = Frame::TRUNCATED;
    walk.depth += 1;
    walk.truncated = true;
    walk
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_frame_between_the_trampoline_and_the_stack_top_is_the_root() {
        let stack = StackBounds {
            top: 0x10_000,
            root: 0xf_f00,
        };
        assert!(!stack.is_root(0xe_000), "a frame the trampoline called");
        assert!(!stack.is_root(0xf_f00), "the trampoline's own frame");
        assert!(stack.is_root(0xf_f40), "its caller");
        assert!(stack.is_root(0x10_000));
        assert!(!stack.is_root(0x20_000), "a stack the program switched to");
        let no_root = StackBounds {
            top: 0x10_000,
            root: 0,
        };
        assert!(
            !no_root.is_root(0xf_f40),
            "the initial thread has no trampoline"
        );
    }
}
