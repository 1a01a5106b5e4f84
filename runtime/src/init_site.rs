//! Exported `pthread_*_init` and `sem_init` that pass on where they were called from.
//!
//! The lock view names a lock that lives in no variable by the call path of its init
//! (`cache_new -> pthread_mutex_init`), and groups the locks made at one site. Programs can
//! make millions of locks, so the site is one return address, read for free: each export
//! is a naked function that loads its own return address (`[rsp]` on entry) into the
//! register of one more argument and jumps to the implementation, which takes it as its
//! last parameter (`site`). Elsewhere than x86-64 the site is 0 (unknown).
//!
//! Invariants: an export's arguments are all integers or pointers, at most five, so the
//! next argument register is free (System V: rdi, rsi, rdx, rcx, r8, r9); the jump leaves
//! the stack as the call left it, so the implementation returns straight to the caller.
//! As async-signal-safe as the implementation (the trampoline itself touches no memory but
//! the stack slot it reads).

/// Defines the export `$name($args) -> c_int` as `$at($args, site)`; `$reg` is the argument
/// register after the last of `$args` (rdx after two, rcx after three).
macro_rules! export_with_site {
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*) => $at:path, $reg:literal) => {
        $(#[$doc])*
        #[cfg(target_arch = "x86_64")]
        // SAFETY (naked): on entry `[rsp]` is the caller's return address and the
        // arguments are in their registers; the body only copies that address into `$reg`,
        // the register of the implementation's extra last argument, and jumps, so the
        // implementation sees the caller's arguments, stack and return address unchanged.
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> libc::c_int {
            core::arch::naked_asm!(concat!("mov ", $reg, ", [rsp]"), "jmp {0}", sym $at)
        }

        $(#[$doc])*
        #[cfg(not(target_arch = "x86_64"))]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> libc::c_int {
            // SAFETY: the caller's arguments, forwarded unchanged (this function's contract).
            unsafe { $at($($arg,)* 0) }
        }
    };
}

pub(crate) use export_with_site;
