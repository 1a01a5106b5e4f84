//! Fault-free reads of stack memory during unwinding. Async-signal-safe.
//!
//! Job: answer "what 8 bytes are at this address" for the unwinder without ever faulting.
//! Reads inside the interrupted thread's known stack, between the interrupted stack pointer
//! and the top of the stack, are plain loads (that range is mapped and owned by the thread).
//! Anything else (a coroutine or signal stack the runtime does not know) goes through
//! `process_vm_readv`, which reports a bad address as an error instead of faulting; those
//! slow reads are capped per unwind so the handler's time stays bounded.

/// Maximum number of `process_vm_readv` reads one unwind may make.
const MAX_SLOW_READS: u32 = 256;

/// Reads 8-byte words of the current thread's stack for one unwind.
pub struct StackReader {
    /// Lowest address a plain load may touch (the interrupted stack pointer).
    low: u64,
    /// One past the highest address of the thread's stack.
    high: u64,
    slow_reads_left: u32,
}

impl StackReader {
    /// `sp` is the interrupted stack pointer; `stack_top` the end of the thread's stack, or 0
    /// if unknown. When `sp` is not below `stack_top` plain loads are disabled.
    pub fn new(sp: u64, stack_top: u64) -> Self {
        // The x86-64 red zone: 128 bytes below sp belong to the interrupted function and are
        // mapped whenever sp is.
        let low = sp.saturating_sub(128);
        let high = if sp < stack_top { stack_top } else { 0 };
        StackReader {
            low,
            high,
            slow_reads_left: MAX_SLOW_READS,
        }
    }

    /// Reads the word at `addr`. Async-signal-safe; never faults.
    #[allow(clippy::result_unit_err)] // the shape framehop's read callback requires
    pub fn read(&mut self, addr: u64) -> Result<u64, ()> {
        if addr % 8 == 0 && addr >= self.low && addr.checked_add(8).is_some_and(|e| e <= self.high)
        {
            // SAFETY:
            // - `addr..addr+8` lies between the interrupted thread's red zone and the top of
            //   its own stack, which is mapped, readable and not freed while the thread runs
            //   (this code runs on that very thread, inside its signal handler);
            // - the address is 8-byte aligned, so the read is aligned;
            // - a volatile read: the compiler may not assume anything about this memory.
            return Ok(unsafe { core::ptr::read_volatile(addr as *const u64) });
        }
        self.slow_read(addr)
    }

    fn slow_read(&mut self, addr: u64) -> Result<u64, ()> {
        if self.slow_reads_left == 0 || addr == 0 {
            return Err(());
        }
        self.slow_reads_left -= 1;
        let mut value: u64 = 0;
        let local = libc::iovec {
            iov_base: (&mut value as *mut u64).cast(),
            iov_len: 8,
        };
        let remote = libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: 8,
        };
        // SAFETY:
        // - `process_vm_readv` is a plain system call (async-signal-safe); on our own pid it
        //   copies memory and returns -1/EFAULT for unmapped addresses instead of faulting;
        // - `local` points at `value`, 8 writable bytes living for the whole call.
        let n = unsafe { libc::process_vm_readv(crate::sys::getpid(), &local, 1, &remote, 1, 0) };
        if n == 8 {
            Ok(value)
        } else {
            Err(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_inside_bounds_and_refuses_garbage() {
        let words = [1u64, 2, 3, 4];
        let base = words.as_ptr() as u64;
        let mut r = StackReader::new(base, base + 32);
        assert_eq!(r.read(base + 8), Ok(2));
        // Outside the plain range, the slow path still reads mapped memory...
        let mut outside = StackReader::new(0, 0);
        assert_eq!(outside.read(base + 16), Ok(3));
        // ...and reports unmapped memory as an error instead of faulting.
        assert_eq!(outside.read(8), Err(()));
        assert_eq!(outside.read(0), Err(()));
    }
}
