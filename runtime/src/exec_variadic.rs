//! Exported `execl`, `execlp` and `execle`.
//!
//! glibc's variadic exec functions call its internal `__execve`, bypassing the interposed
//! `execve`, so they are interposed too. Stable Rust cannot define variadic functions, and
//! symbols defined in C are hidden by rustc's export list, so each export is a naked
//! function whose whole body is a jump to the C implementation in `csrc/exec_variadic.c`:
//! the caller's argument registers (and `al`, the variadic vector-register count) arrive
//! there untouched.

#[cfg(target_arch = "x86_64")]
mod imp {
    extern "C" {
        fn blameprof_execl();
        fn blameprof_execlp();
        fn blameprof_execle();
    }

    /// # Safety
    /// Same contract as `execl(3)`.
    #[unsafe(naked)]
    #[no_mangle]
    pub unsafe extern "C" fn execl() {
        core::arch::naked_asm!("jmp {0}", sym blameprof_execl);
    }

    /// # Safety
    /// Same contract as `execlp(3)`.
    #[unsafe(naked)]
    #[no_mangle]
    pub unsafe extern "C" fn execlp() {
        core::arch::naked_asm!("jmp {0}", sym blameprof_execlp);
    }

    /// # Safety
    /// Same contract as `execle(3)`.
    #[unsafe(naked)]
    #[no_mangle]
    pub unsafe extern "C" fn execle() {
        core::arch::naked_asm!("jmp {0}", sym blameprof_execle);
    }
}
