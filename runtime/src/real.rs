//! The real implementations of the interposed functions, resolved once with
//! `dlsym(RTLD_NEXT)`.
//!
//! Resolution happens in the library constructor, before the program runs, and lazily for
//! calls that arrive earlier (another library's constructor creating a thread). Not
//! async-signal-safe; never used from the signal handler.

use libc::{
    c_char, c_int, c_void, pthread_cond_t, pthread_mutex_t, pthread_rwlock_t, sigset_t, timespec,
};
use std::sync::atomic::{AtomicUsize, Ordering};

#[inline(always)]
fn resolve(slot: &AtomicUsize, name: &'static [u8], version: Option<&'static [u8]>) -> usize {
    let cached = slot.load(Ordering::Acquire);
    if cached != 0 {
        return cached;
    }
    resolve_now(slot, name, version)
}

/// The first call of a function before the constructor resolved it (kept out of the
/// interposed functions' fast paths).
#[cold]
#[inline(never)]
fn resolve_now(slot: &AtomicUsize, name: &'static [u8], version: Option<&'static [u8]>) -> usize {
    // SAFETY: `name` and `version` are NUL-terminated; RTLD_NEXT finds the next definition
    // after this library, i.e. libc's, of that exact version when one is given.
    let p = unsafe {
        match version {
            Some(v) => libc::dlvsym(libc::RTLD_NEXT, name.as_ptr().cast(), v.as_ptr().cast()),
            None => libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()),
        }
    } as usize;
    if p == 0 {
        // Without the real function nothing can work; say which and stop.
        let msg = b"blameprof: fatal: cannot resolve an interposed libc function\n";
        // SAFETY: writing a static message to stderr.
        unsafe {
            libc::write(2, msg.as_ptr().cast(), msg.len());
            libc::abort();
        }
    }
    slot.store(p, Ordering::Release);
    p
}

macro_rules! real_fns {
    ($($fn_name:ident = $sym:literal $(@ $version:literal)? : $ty:ty;)*) => {
        $(
            pub fn $fn_name() -> $ty {
                static SLOT: AtomicUsize = AtomicUsize::new(0);
                let version: Option<&'static [u8]> = None $(.or(Some($version)))?;
                let p = resolve(&SLOT, $sym, version);
                // SAFETY: `p` is the address of the libc function named `$sym`, whose C
                // signature is `$ty`.
                unsafe { std::mem::transmute::<usize, $ty>(p) }
            }
        )*

        /// Resolves every real function up front.
        pub fn resolve_all() {
            $( let _ = $fn_name(); )*
        }
    };
}

/// `epoll_pwait2`'s C signature.
pub type EpollPwait2 = unsafe extern "C" fn(
    c_int,
    *mut libc::epoll_event,
    c_int,
    *const timespec,
    *const sigset_t,
) -> c_int;

/// glibc's `epoll_pwait2` (2.35 on), resolved at its first call rather than up front: an
/// older glibc has none, and the runtime must load there. `None` where it is absent.
pub fn epoll_pwait2() -> Option<EpollPwait2> {
    /// The function's address; 0 before resolution, 1 when absent.
    static SLOT: AtomicUsize = AtomicUsize::new(0);
    let mut p = SLOT.load(Ordering::Acquire);
    if p == 0 {
        // SAFETY: a NUL-terminated name; RTLD_NEXT finds libc's definition, if any.
        let found = unsafe { libc::dlsym(libc::RTLD_NEXT, c"epoll_pwait2".as_ptr()) } as usize;
        p = if found == 0 { 1 } else { found };
        SLOT.store(p, Ordering::Release);
    }
    // SAFETY: `p` is the address of libc's `epoll_pwait2`, whose C signature is
    // `EpollPwait2`.
    (p != 1).then(|| unsafe { std::mem::transmute::<usize, EpollPwait2>(p) })
}

type StartRoutine = extern "C" fn(*mut c_void) -> *mut c_void;
type Argv = *const *const c_char;

real_fns! {
    pthread_create = b"pthread_create\0":
        unsafe extern "C" fn(*mut libc::pthread_t, *const libc::pthread_attr_t, StartRoutine, *mut c_void) -> c_int;
    dlopen = b"dlopen\0": unsafe extern "C" fn(*const c_char, c_int) -> *mut c_void;
    dlclose = b"dlclose\0": unsafe extern "C" fn(*mut c_void) -> c_int;
    execve = b"execve\0": unsafe extern "C" fn(*const c_char, Argv, Argv) -> c_int;
    execv = b"execv\0": unsafe extern "C" fn(*const c_char, Argv) -> c_int;
    execvp = b"execvp\0": unsafe extern "C" fn(*const c_char, Argv) -> c_int;
    execvpe = b"execvpe\0": unsafe extern "C" fn(*const c_char, Argv, Argv) -> c_int;
    fexecve = b"fexecve\0": unsafe extern "C" fn(c_int, Argv, Argv) -> c_int;
    exit_now = b"_exit\0": unsafe extern "C" fn(c_int) -> !;
    close = b"close\0": unsafe extern "C" fn(c_int) -> c_int;
    dup2 = b"dup2\0": unsafe extern "C" fn(c_int, c_int) -> c_int;
    dup3 = b"dup3\0": unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;
    sigaction = b"sigaction\0":
        unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
    signal = b"signal\0": unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t;
    pthread_sigmask = b"pthread_sigmask\0":
        unsafe extern "C" fn(c_int, *const sigset_t, *mut sigset_t) -> c_int;
    sigprocmask = b"sigprocmask\0":
        unsafe extern "C" fn(c_int, *const sigset_t, *mut sigset_t) -> c_int;
    nanosleep = b"nanosleep\0": unsafe extern "C" fn(*const timespec, *mut timespec) -> c_int;
    clock_nanosleep = b"clock_nanosleep\0":
        unsafe extern "C" fn(libc::clockid_t, c_int, *const timespec, *mut timespec) -> c_int;
    usleep = b"usleep\0": unsafe extern "C" fn(libc::useconds_t) -> c_int;
    sleep = b"sleep\0": unsafe extern "C" fn(libc::c_uint) -> libc::c_uint;
    poll = b"poll\0": unsafe extern "C" fn(*mut libc::pollfd, libc::nfds_t, c_int) -> c_int;
    ppoll = b"ppoll\0": unsafe extern "C" fn(
        *mut libc::pollfd, libc::nfds_t, *const timespec, *const sigset_t) -> c_int;
    select = b"select\0": unsafe extern "C" fn(
        c_int, *mut libc::fd_set, *mut libc::fd_set, *mut libc::fd_set, *mut libc::timeval) -> c_int;
    pselect = b"pselect\0": unsafe extern "C" fn(
        c_int, *mut libc::fd_set, *mut libc::fd_set, *mut libc::fd_set, *const timespec,
        *const sigset_t) -> c_int;
    epoll_wait = b"epoll_wait\0":
        unsafe extern "C" fn(c_int, *mut libc::epoll_event, c_int, c_int) -> c_int;
    epoll_pwait = b"epoll_pwait\0": unsafe extern "C" fn(
        c_int, *mut libc::epoll_event, c_int, c_int, *const sigset_t) -> c_int;
    sem_wait = b"sem_wait\0": unsafe extern "C" fn(*mut libc::sem_t) -> c_int;
    sem_timedwait = b"sem_timedwait\0":
        unsafe extern "C" fn(*mut libc::sem_t, *const timespec) -> c_int;
    sem_clockwait = b"sem_clockwait\0":
        unsafe extern "C" fn(*mut libc::sem_t, libc::clockid_t, *const timespec) -> c_int;
    sem_trywait = b"sem_trywait\0": unsafe extern "C" fn(*mut libc::sem_t) -> c_int;
    pthread_testcancel = b"pthread_testcancel\0": unsafe extern "C" fn();
    sem_post = b"sem_post\0": unsafe extern "C" fn(*mut libc::sem_t) -> c_int;
    sem_init = b"sem_init\0": unsafe extern "C" fn(*mut libc::sem_t, c_int, libc::c_uint) -> c_int;
    sem_destroy = b"sem_destroy\0": unsafe extern "C" fn(*mut libc::sem_t) -> c_int;
    pause = b"pause\0": unsafe extern "C" fn() -> c_int;
    sigsuspend = b"sigsuspend\0": unsafe extern "C" fn(*const sigset_t) -> c_int;
    sigtimedwait = b"sigtimedwait\0":
        unsafe extern "C" fn(*const sigset_t, *mut libc::siginfo_t, *const timespec) -> c_int;
    sigwaitinfo = b"sigwaitinfo\0": unsafe extern "C" fn(*const sigset_t, *mut libc::siginfo_t) -> c_int;
    sigwait = b"sigwait\0": unsafe extern "C" fn(*const sigset_t, *mut c_int) -> c_int;
    pthread_mutex_lock = b"pthread_mutex_lock\0": unsafe extern "C" fn(*mut pthread_mutex_t) -> c_int;
    pthread_mutex_trylock = b"pthread_mutex_trylock\0":
        unsafe extern "C" fn(*mut pthread_mutex_t) -> c_int;
    pthread_mutex_timedlock = b"pthread_mutex_timedlock\0":
        unsafe extern "C" fn(*mut pthread_mutex_t, *const timespec) -> c_int;
    pthread_mutex_clocklock = b"pthread_mutex_clocklock\0":
        unsafe extern "C" fn(*mut pthread_mutex_t, libc::clockid_t, *const timespec) -> c_int;
    pthread_mutex_unlock = b"pthread_mutex_unlock\0":
        unsafe extern "C" fn(*mut pthread_mutex_t) -> c_int;
    pthread_mutex_init = b"pthread_mutex_init\0":
        unsafe extern "C" fn(*mut pthread_mutex_t, *const libc::pthread_mutexattr_t) -> c_int;
    pthread_mutex_destroy = b"pthread_mutex_destroy\0":
        unsafe extern "C" fn(*mut pthread_mutex_t) -> c_int;
    // The condition variables of glibc 2.3.2 on (the default); GLIBC_2.2.5 is the old ABI.
    pthread_cond_wait = b"pthread_cond_wait\0" @ b"GLIBC_2.3.2\0":
        unsafe extern "C" fn(*mut pthread_cond_t, *mut pthread_mutex_t) -> c_int;
    pthread_cond_timedwait = b"pthread_cond_timedwait\0" @ b"GLIBC_2.3.2\0":
        unsafe extern "C" fn(*mut pthread_cond_t, *mut pthread_mutex_t, *const timespec) -> c_int;
    pthread_cond_signal = b"pthread_cond_signal\0" @ b"GLIBC_2.3.2\0":
        unsafe extern "C" fn(*mut pthread_cond_t) -> c_int;
    pthread_cond_broadcast = b"pthread_cond_broadcast\0" @ b"GLIBC_2.3.2\0":
        unsafe extern "C" fn(*mut pthread_cond_t) -> c_int;
    pthread_cond_init = b"pthread_cond_init\0" @ b"GLIBC_2.3.2\0":
        unsafe extern "C" fn(*mut pthread_cond_t, *const libc::pthread_condattr_t) -> c_int;
    pthread_cond_destroy = b"pthread_cond_destroy\0" @ b"GLIBC_2.3.2\0":
        unsafe extern "C" fn(*mut pthread_cond_t) -> c_int;
    pthread_cond_clockwait = b"pthread_cond_clockwait\0": unsafe extern "C" fn(
        *mut pthread_cond_t, *mut pthread_mutex_t, libc::clockid_t, *const timespec) -> c_int;
    pthread_rwlock_rdlock = b"pthread_rwlock_rdlock\0":
        unsafe extern "C" fn(*mut pthread_rwlock_t) -> c_int;
    pthread_rwlock_wrlock = b"pthread_rwlock_wrlock\0":
        unsafe extern "C" fn(*mut pthread_rwlock_t) -> c_int;
    pthread_rwlock_tryrdlock = b"pthread_rwlock_tryrdlock\0":
        unsafe extern "C" fn(*mut pthread_rwlock_t) -> c_int;
    pthread_rwlock_trywrlock = b"pthread_rwlock_trywrlock\0":
        unsafe extern "C" fn(*mut pthread_rwlock_t) -> c_int;
    pthread_rwlock_timedrdlock = b"pthread_rwlock_timedrdlock\0":
        unsafe extern "C" fn(*mut pthread_rwlock_t, *const timespec) -> c_int;
    pthread_rwlock_timedwrlock = b"pthread_rwlock_timedwrlock\0":
        unsafe extern "C" fn(*mut pthread_rwlock_t, *const timespec) -> c_int;
    pthread_rwlock_clockrdlock = b"pthread_rwlock_clockrdlock\0":
        unsafe extern "C" fn(*mut pthread_rwlock_t, libc::clockid_t, *const timespec) -> c_int;
    pthread_rwlock_clockwrlock = b"pthread_rwlock_clockwrlock\0":
        unsafe extern "C" fn(*mut pthread_rwlock_t, libc::clockid_t, *const timespec) -> c_int;
    pthread_rwlock_unlock = b"pthread_rwlock_unlock\0":
        unsafe extern "C" fn(*mut pthread_rwlock_t) -> c_int;
    pthread_rwlock_init = b"pthread_rwlock_init\0":
        unsafe extern "C" fn(*mut pthread_rwlock_t, *const libc::pthread_rwlockattr_t) -> c_int;
    pthread_rwlock_destroy = b"pthread_rwlock_destroy\0":
        unsafe extern "C" fn(*mut pthread_rwlock_t) -> c_int;
    pthread_barrier_init = b"pthread_barrier_init\0": unsafe extern "C" fn(
        *mut libc::pthread_barrier_t, *const libc::pthread_barrierattr_t, libc::c_uint) -> c_int;
    pthread_barrier_wait = b"pthread_barrier_wait\0":
        unsafe extern "C" fn(*mut libc::pthread_barrier_t) -> c_int;
    pthread_barrier_destroy = b"pthread_barrier_destroy\0":
        unsafe extern "C" fn(*mut libc::pthread_barrier_t) -> c_int;
    pthread_join = b"pthread_join\0":
        unsafe extern "C" fn(libc::pthread_t, *mut *mut c_void) -> c_int;
    pthread_timedjoin_np = b"pthread_timedjoin_np\0":
        unsafe extern "C" fn(libc::pthread_t, *mut *mut c_void, *const timespec) -> c_int;
    pthread_clockjoin_np = b"pthread_clockjoin_np\0": unsafe extern "C" fn(
        libc::pthread_t, *mut *mut c_void, libc::clockid_t, *const timespec) -> c_int;
    pthread_exit = b"pthread_exit\0": unsafe extern "C" fn(*mut c_void) -> !;
    syscall = b"syscall\0": unsafe extern "C" fn(libc::c_long, ...) -> libc::c_long;
}
