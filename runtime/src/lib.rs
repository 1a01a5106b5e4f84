//! The blameprof runtime, injected into the profiled program with `LD_PRELOAD`.
//!
//! Job: the exported entry points only. Each interposed function resolves the real one once
//! (`dlsym(RTLD_NEXT)`), calls the lifecycle hooks (`blameprof_measure::lifecycle`) or the
//! lock policy (`blameprof_measure::policy`), and forwards; the logic lives in the
//! `blameprof_measure` crate so it can be tested without preloading. The CLI never links this crate, so it never interposes anything itself.
//!
//! Interposed: in [`threads`], `pthread_create` (every thread gets a timer), `pthread_exit`
//! and the joins (blame for the joiner's wait); `dlopen`/`dlclose` (module set),
//! `execve`/`execv`/`execvp`/`execvpe`/`fexecve` and, in [`exec_variadic`], `execl`/`execlp`/
//! `execle` (flush before the image is replaced),
//! `_exit`/`_Exit` (flush), `sigaction`/`signal` (the sampling signal stays ours),
//! `pthread_sigmask`/`sigprocmask` (it is never blocked), in
//! [`descriptors`] `close`/`close_range`/`closefrom`/`dup2`/`dup3` (the runtime's own
//! descriptors survive a program that closes them all), in
//! [`waits`] the waits that any signal would break with `EINTR`; and for blame shifting,
//! [`locks`] (spin locks, mutexes), [`rwlock`], [`condvar`], [`semaphore`], [`barrier`] and
//! [`futex`] (`syscall(SYS_futex)`: Rust's std locks, parking_lot); in [`openmp`], GCC's
//! OpenMP interface (`GOMP_parallel*`, `GOMP_barrier`, `GOMP_critical_*`: regions' ends and
//! barriers, critical sections).

mod barrier;
mod condvar;
mod descriptors;
mod exec_variadic;
mod futex;
mod init_site;
mod locks;
mod openmp;
mod plain_mutex;
mod real;
mod rwlock;
mod semaphore;
mod threads;
mod timeouts;
mod waits;

use blameprof_measure::sampler::heap::RuntimeAllocator;
use blameprof_measure::{exec, lifecycle, modules};
use libc::{c_char, c_int, c_void};

/// The runtime's Rust allocations never use the program's `malloc` (see `sampler::heap`).
#[global_allocator]
static ALLOCATOR: RuntimeAllocator = RuntimeAllocator;

/// Runs before `main` (and before the program's own constructors).
extern "C" fn on_load() {
    real::resolve_all();
    plain_mutex::init();
    lifecycle::init();
}

/// Runs at `exit`, after the program's own destructors and `atexit` handlers.
extern "C" fn on_unload() {
    lifecycle::process_exit();
}

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = on_load;

#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = on_unload;

/// # Safety
/// Same contract as `dlopen(3)`.
#[no_mangle]
pub unsafe extern "C" fn dlopen(file: *const c_char, mode: c_int) -> *mut c_void {
    // SAFETY: forwarding the caller's arguments unchanged.
    let handle = unsafe { real::dlopen()(file, mode) };
    if !handle.is_null() {
        modules::modules_changed();
    }
    handle
}

/// # Safety
/// Same contract as `dlclose(3)`.
#[no_mangle]
pub unsafe extern "C" fn dlclose(handle: *mut c_void) -> c_int {
    modules::module_may_unload();
    // SAFETY: forwarding the caller's argument unchanged.
    let rc = unsafe { real::dlclose()(handle) };
    modules::modules_changed();
    rc
}

extern "C" {
    static environ: *const *const c_char;
}

/// The calling process's environment, which `execv` and `execvp` pass on.
fn own_environment() -> *const *const c_char {
    // SAFETY: reading libc's `environ` pointer (the program may change it; exec reads it
    // the same way).
    unsafe { environ }
}

/// Flushes the image's profile part, runs `exec`, and resumes profiling if it failed.
/// `envp` is the environment the new image gets: an image it does not profile is counted.
fn around_exec(envp: *const *const c_char, exec: impl FnOnce() -> c_int) -> c_int {
    // SAFETY: `envp` is the caller's exec environment (null-terminated, per exec's contract)
    // or `environ`.
    unsafe { exec::exec_environment(envp) };
    let finished = exec::before_exec();
    let rc = exec();
    // SAFETY: __errno_location is always valid for the calling thread.
    let errno = unsafe { *libc::__errno_location() };
    exec::exec_failed(finished);
    // SAFETY: as above; the caller must see exec's errno.
    unsafe { *libc::__errno_location() = errno };
    rc
}

/// # Safety
/// Same contract as `execve(2)`.
#[no_mangle]
pub unsafe extern "C" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    // SAFETY: forwarding the caller's arguments unchanged.
    around_exec(envp, || unsafe { real::execve()(path, argv, envp) })
}

/// # Safety
/// Same contract as `execv(3)`.
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    // SAFETY: forwarding the caller's arguments unchanged.
    around_exec(own_environment(), || unsafe { real::execv()(path, argv) })
}

/// # Safety
/// Same contract as `execvp(3)`.
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    // SAFETY: forwarding the caller's arguments unchanged.
    around_exec(own_environment(), || unsafe { real::execvp()(file, argv) })
}

/// # Safety
/// Same contract as `execvpe(3)`.
#[no_mangle]
pub unsafe extern "C" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    // SAFETY: forwarding the caller's arguments unchanged.
    around_exec(envp, || unsafe { real::execvpe()(file, argv, envp) })
}

/// # Safety
/// Same contract as `fexecve(3)`.
#[no_mangle]
pub unsafe extern "C" fn fexecve(
    fd: c_int,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    // SAFETY: forwarding the caller's arguments unchanged.
    around_exec(envp, || unsafe { real::fexecve()(fd, argv, envp) })
}

/// # Safety
/// Same contract as `_exit(2)`.
#[no_mangle]
pub unsafe extern "C" fn _exit(status: c_int) -> ! {
    lifecycle::process_exit();
    // SAFETY: forwarding the caller's argument.
    unsafe { real::exit_now()(status) }
}

/// # Safety
/// Same contract as `_Exit(3)`.
#[no_mangle]
pub unsafe extern "C" fn _Exit(status: c_int) -> ! {
    lifecycle::process_exit();
    // SAFETY: forwarding the caller's argument.
    unsafe { real::exit_now()(status) }
}

/// Keeps the sampling signal's handler ours: a program that resets every signal's
/// disposition would otherwise make the next sample kill it. Changes to that one signal are
/// accepted and ignored; the program still sees success.
///
/// # Safety
/// Same contract as `sigaction(2)`.
#[no_mangle]
pub unsafe extern "C" fn sigaction(
    signum: c_int,
    act: *const libc::sigaction,
    oldact: *mut libc::sigaction,
) -> c_int {
    if blameprof_measure::sampler::process::sampling_signal() == Some(signum) && !act.is_null() {
        if !oldact.is_null() {
            // SAFETY: `oldact` is a caller-supplied writable sigaction; report the default.
            unsafe { std::ptr::write_bytes(oldact, 0, 1) };
        }
        return 0;
    }
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { real::sigaction()(signum, act, oldact) }
}

/// # Safety
/// Same contract as `signal(2)`.
#[no_mangle]
pub unsafe extern "C" fn signal(signum: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    if blameprof_measure::sampler::process::sampling_signal() == Some(signum) {
        return libc::SIG_DFL;
    }
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { real::signal()(signum, handler) }
}

/// The set the program asks to block (`how` SIG_BLOCK or SIG_SETMASK), without the sampling
/// signal: a program that blocks every signal (to take them with `signalfd` or `sigwait`)
/// must still be sampled. `None`: pass the program's own set.
fn without_sampling_signal(how: c_int, set: *const libc::sigset_t) -> Option<libc::sigset_t> {
    let signal = blameprof_measure::sampler::process::sampling_signal()?;
    if set.is_null() || (how != libc::SIG_BLOCK && how != libc::SIG_SETMASK) {
        return None;
    }
    // SAFETY: `set` is the caller's valid sigset (checked non-null); copied, never written.
    let mut copy = unsafe { *set };
    // SAFETY: `copy` is a valid sigset.
    if unsafe { libc::sigismember(&copy, signal) } != 1 {
        return None;
    }
    // SAFETY: as above.
    unsafe { libc::sigdelset(&mut copy, signal) };
    blameprof_measure::sampler::counters::add(
        blameprof_measure::sampler::counters::Counter::SignalUnblocked,
        1,
    );
    Some(copy)
}

/// The signature of `pthread_sigmask` and `sigprocmask`.
type MaskFn = unsafe extern "C" fn(c_int, *const libc::sigset_t, *mut libc::sigset_t) -> c_int;

/// Calls glibc's `real` mask function with what the program asks, but the sampling signal
/// (see `without_sampling_signal`).
///
/// # Safety
/// Same contract as `pthread_sigmask(3)`.
unsafe fn set_mask(
    real: MaskFn,
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> c_int {
    let copy = without_sampling_signal(how, set);
    let set = copy.as_ref().map_or(set, |c| c as *const libc::sigset_t);
    // SAFETY: forwarding the caller's arguments, the set maybe replaced by a valid copy.
    unsafe { real(how, set, old) }
}

/// # Safety
/// Same contract as `pthread_sigmask(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_sigmask(
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> c_int {
    // SAFETY: per this function's contract.
    unsafe { set_mask(real::pthread_sigmask(), how, set, old) }
}

/// # Safety
/// Same contract as `sigprocmask(2)`.
#[no_mangle]
pub unsafe extern "C" fn sigprocmask(
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> c_int {
    // SAFETY: per this function's contract.
    unsafe { set_mask(real::sigprocmask(), how, set, old) }
}

/// Whether the calling thread is inside the sampling signal handler. Exported for the
/// test that proves the handler never allocates (a preloaded allocator shim asks this on
/// every allocation).
#[no_mangle]
pub extern "C" fn blameprof_rt_in_signal_handler() -> c_int {
    c_int::from(blameprof_measure::sampler::thread_state::in_signal_handler())
}

/// Whether the runtime takes glibc's fast path for plain mutexes itself (1) or calls glibc
/// for every mutex operation (0). Exported for the test that proves a program sees the
/// same mutexes either way.
#[no_mangle]
pub extern "C" fn blameprof_rt_plain_mutex_inline() -> c_int {
    c_int::from(plain_mutex::enabled())
}
mod tests;
