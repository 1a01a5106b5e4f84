//! glibc's own code for plain mutexes, run inside the interposed functions instead of
//! calling glibc's lock, trylock and unlock.
//!
//! Job: the lock, the try and the release of a mutex of the default type
//! (`PTHREAD_MUTEX_TIMED_NP`, process-private: `__kind == 0`), done exactly as glibc does
//! them, so a profiled program does not pay two more calls into glibc per lock operation
//! (with tens of millions of operations a second, that was most of the profiler's cost),
//! and its lock word sees the same accesses in the same order as without the profiler: on
//! a contended lock, one more access to its line inside the critical section halved the
//! contended fraction, and a try before glibc's lock (one more access per contended
//! acquisition) made `sysbench mutex` 1.3-1.5x slower (docs/benchmarks.md).
//!
//! Invariants:
//! - Only `__kind == 0` mutexes: the lock word goes 0 → 1 by CAS, at once for a lock
//!   (glibc's `lll_lock`) and only when a load saw it 0 for a trylock (glibc's trylock); a
//!   lock that finds it held waits in glibc's own `__lll_lock_wait_private` (where glibc
//!   has none, the lock is glibc's call); it goes to 0 by one exchange, followed by a
//!   private futex wake of one waiter when it was 2 (glibc's `lll_unlock`). While the
//!   process has only one thread (glibc's `__libc_single_threaded`), by plain stores, as
//!   glibc 2.34 on does for private mutexes. Every other type (recursive, errorcheck,
//!   robust, shared, PI, PP, elided) is glibc's call; a timed acquisition of a plain mutex
//!   tries first (the trylock's way) and then is glibc's call.
//! - The fields glibc keeps for this type are kept as glibc keeps them: `__owner` is the
//!   holder's thread id while held and 0 after, `__nusers` counts holds (what
//!   `pthread_mutex_destroy` checks), both written only by the holder.
//! - The thread id is glibc's own copy in its thread descriptor, at the offset glibc
//!   publishes for debuggers (`_thread_db_pthread_tid`, what libthread_db reads), checked
//!   at start-up against `gettid`; fork children see their new id there. Without that
//!   symbol, with a layout that fails the check, or with lock elision requested
//!   (`GLIBC_TUNABLES` `glibc.elision.enable=1`: glibc then marks mutexes at their first
//!   lock and keeps no owner for them), this path is off and every call goes to glibc.
//!
//! Not async-signal-safe (`pthread_mutex_*` are not either); [`init`] runs in the library
//! constructor.

use libc::{c_int, pthread_mutex_t};
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicUsize, Ordering};

/// Offset of glibc's `struct pthread.tid` from the thread pointer; 0: this path is off.
static TID_OFFSET: AtomicUsize = AtomicUsize::new(0);

/// Address of glibc's `__libc_single_threaded` (`<sys/single_threaded.h>`), or null.
static SINGLE_THREADED: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());

/// glibc's `__lll_lock_wait_private(int *futex)` (GLIBC_PRIVATE), or null: the wait of its
/// lock of a private mutex.
static LOCK_WAIT: AtomicPtr<libc::c_void> = AtomicPtr::new(std::ptr::null_mut());

/// glibc's x86-64 `pthread_mutex_t` layout (fixed by the ABI of its static initialisers):
/// byte offsets of the lock word, the recursion count, the owner, the users and the kind
/// (whose low 2 bits are the type), each a 32-bit field.
pub const LOCK: usize = 0;
pub const COUNT: usize = 4;
const OWNER: usize = 8;
const NUSERS: usize = 12;
pub const KIND: usize = 16;

/// Turns this path on when glibc publishes where a thread's id lives and it checks out.
pub fn init() {
    if elision_requested() {
        return;
    }
    if let Some(offset) = published_tid_offset().filter(|&o| thread_id_at(o) == gettid()) {
        TID_OFFSET.store(offset, Ordering::Relaxed);
    }
    // SAFETY: a NUL-terminated name; RTLD_DEFAULT searches the loaded objects.
    let single = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__libc_single_threaded".as_ptr()) };
    SINGLE_THREADED.store(single.cast(), Ordering::Relaxed);
    // SAFETY: NUL-terminated name and version; RTLD_DEFAULT searches the loaded objects.
    let wait = unsafe {
        libc::dlvsym(
            libc::RTLD_DEFAULT,
            c"__lll_lock_wait_private".as_ptr(),
            c"GLIBC_PRIVATE".as_ptr(),
        )
    };
    LOCK_WAIT.store(wait, Ordering::Relaxed);
}

/// Whether the process has only ever had one thread, as glibc itself asks before it takes
/// or releases a private mutex with plain loads and stores instead of atomic instructions
/// (`lll_mutex_lock_optimized`, glibc 2.34 on). glibc clears the flag, in the creating
/// thread, before a second thread can run, and never sets it again while threads may
/// exist; so a true reading means no other thread can touch the mutex.
#[inline(always)]
fn single_threaded() -> bool {
    let flag = SINGLE_THREADED.load(Ordering::Relaxed);
    // SAFETY: a non-null flag is glibc's `__libc_single_threaded`, a `char` that lives as
    // long as the process and that only the process's sole thread writes.
    !flag.is_null() && unsafe { std::ptr::read_volatile(flag) } != 0
}

/// Whether this path is on.
pub fn enabled() -> bool {
    TID_OFFSET.load(Ordering::Relaxed) != 0
}

fn elision_requested() -> bool {
    std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.elision.enable=1"))
}

fn gettid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// The offset of `tid` in glibc's thread descriptor, from the descriptor glibc exports for
/// libthread_db: `{ size in bits, elements, offset }`.
fn published_tid_offset() -> Option<usize> {
    // SAFETY: a NUL-terminated name; RTLD_DEFAULT searches the loaded objects.
    let field = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"_thread_db_pthread_tid".as_ptr()) };
    if field.is_null() {
        return None;
    }
    // SAFETY: glibc defines the symbol as three 32-bit words (nptl_db's `db_field`).
    let [bits, elements, offset] = unsafe { std::ptr::read_unaligned(field as *const [u32; 3]) };
    // SAFETY: pthread_self has no preconditions.
    let descriptor = unsafe { libc::pthread_self() } as usize;
    let plausible = bits == 32 && elements <= 1 && (16..4096).contains(&offset) && offset % 4 == 0;
    (plausible && descriptor == thread_pointer()).then_some(offset as usize)
}

/// The thread pointer: on x86-64 glibc, the address of the thread's descriptor, whose first
/// word (`tcbhead_t.tcb`) points at itself.
fn thread_pointer() -> usize {
    let tp: usize;
    // SAFETY: %fs:0 is the TCB's self-pointer on x86-64 Linux; reading it has no effects.
    unsafe {
        std::arch::asm!("mov {tp}, qword ptr fs:[0]", tp = out(reg) tp,
            options(nostack, readonly, preserves_flags));
    }
    tp
}

/// The calling thread's id in glibc's descriptor, `offset` bytes from the thread pointer.
#[inline(always)]
fn thread_id_at(offset: usize) -> i32 {
    let tid: i32;
    // SAFETY: `offset` is below 4096 and inside glibc's thread descriptor (checked by
    // `published_tid_offset` and `init`); the read has no effects.
    unsafe {
        std::arch::asm!("mov {tid:e}, dword ptr fs:[{off}]", off = in(reg) offset,
            tid = lateout(reg) tid, options(nostack, readonly, preserves_flags));
    }
    tid
}

/// The 32-bit field of `m` at byte offset `at` (one of the layout's).
///
/// # Safety
/// `m` must point at a valid, initialised glibc mutex.
#[inline(always)]
pub unsafe fn field<'a>(m: *mut pthread_mutex_t, at: usize) -> &'a AtomicI32 {
    // SAFETY: the field lies within the 40-byte, 8-aligned mutex (caller's contract); glibc
    // accesses `__lock` atomically and `__kind` with relaxed atomic loads; `__owner` and
    // `__nusers` are written only by the holder.
    unsafe { &*((m as *mut u8).add(at) as *const AtomicI32) }
}

/// The thread id of `m`'s holder (glibc's `__owner`, kept for every type), 0 when free.
///
/// # Safety
/// `m` must point at a valid, initialised glibc mutex.
pub unsafe fn owner(m: *mut pthread_mutex_t) -> i32 {
    // SAFETY: `m` is valid (caller's contract); a relaxed load of a field its holder writes.
    unsafe { field(m, OWNER) }.load(Ordering::Relaxed)
}

/// The lock word of `m` and [`TID_OFFSET`]'s value when `m` is a plain mutex and this path
/// is on; `None` otherwise (ask glibc).
///
/// # Safety
/// `m` must point at a valid, initialised glibc mutex.
#[inline(always)]
unsafe fn plain_word<'a>(m: *mut pthread_mutex_t) -> Option<(&'a AtomicI32, usize)> {
    let offset = TID_OFFSET.load(Ordering::Relaxed);
    // SAFETY: `m` is valid (caller's contract).
    let (lock, kind) = unsafe { (field(m, LOCK), field(m, KIND)) };
    (offset != 0 && kind.load(Ordering::Relaxed) == 0).then_some((lock, offset))
}

/// Takes the plain mutex `m`, whose lock word is `lock`, as glibc does once it means to:
/// `Some(0)` acquired, `Some(EBUSY)` held by someone. In a `single` threaded process (the
/// caller asked [`single_threaded`] and saw the word 0), by a store, as glibc 2.34 on does
/// for a private mutex (a pair of locked instructions cost 14 ns more than glibc's,
/// benchmarks/locks.sh); else by a compare-and-swap 0 → 1.
///
/// # Safety
/// `m` must be a valid plain mutex and `offset` [`TID_OFFSET`]'s non-zero value.
#[inline(always)]
unsafe fn take_free(
    m: *mut pthread_mutex_t,
    lock: &AtomicI32,
    offset: usize,
    single: bool,
) -> Option<c_int> {
    if single {
        lock.store(1, Ordering::Relaxed);
    } else if lock
        .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return Some(libc::EBUSY);
    }
    // SAFETY: the caller's contract; it now holds `m`.
    unsafe { took(m, offset) };
    Some(0)
}

/// glibc's lock of a plain mutex, its first attempt: `Some(0)` acquired, `Some(EBUSY)`
/// held by someone (wait in [`lock_wait`]); `None`: not a plain mutex, or this path or
/// glibc's wait is missing (ask glibc).
///
/// # Safety
/// `m` must point at a valid, initialised glibc mutex.
#[inline(always)]
pub unsafe fn lock(m: *mut pthread_mutex_t) -> Option<c_int> {
    // SAFETY: `m` is valid (caller's contract).
    let (lock, offset) = unsafe { plain_word(m) }?;
    if LOCK_WAIT.load(Ordering::Relaxed).is_null() {
        return None;
    }
    // As glibc's `lll_lock`: a compare-and-swap at once, no load first (that is its
    // trylock's way), except in a single-threaded process, where it stores.
    let single = single_threaded();
    if single && lock.load(Ordering::Relaxed) != 0 {
        return Some(libc::EBUSY);
    }
    // SAFETY: a plain mutex, the path on.
    unsafe { take_free(m, lock, offset, single) }
}

/// The wait of glibc's lock for a plain mutex that [`lock`] found held: glibc's own
/// `__lll_lock_wait_private` (mark the word contended, 2, by exchange, and sleep on its
/// private futex while the exchange finds it held: the same code as the hidden
/// `__lll_lock_wait` its lock calls), then the fields a holder keeps. Returns 0 (the lock
/// cannot fail).
///
/// glibc's function and not the same few instructions here: they are the same exchange
/// and system call, yet with them `sysbench mutex` (4 threads, 2 mutexes, 2 CPUs) ran
/// 1.3-1.6x slower than unprofiled, and with glibc's 1.05x, the measurement included; so
/// did a C library preloaded with the loop inline (and not with it out of line). Why is
/// not known (code placement against the lock's hand-over timing is the guess); the wait
/// is glibc's code here, as it is without the profiler (docs/benchmarks.md, session 18).
///
/// # Safety
/// `m` must be a plain mutex for which [`lock`] returned `Some(EBUSY)`.
pub unsafe fn lock_wait(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: `m` is valid (caller's contract).
    let word = unsafe { field(m, LOCK) }.as_ptr();
    // SAFETY: `lock` returned `Some(EBUSY)`, so `LOCK_WAIT` is glibc's non-null
    // `void __lll_lock_wait_private(int *futex)`, and `word` is the lock word of the live
    // private mutex the caller waits for.
    unsafe {
        let wait: unsafe extern "C" fn(*mut i32) =
            std::mem::transmute(LOCK_WAIT.load(Ordering::Relaxed));
        wait(word);
        // The caller now holds `m`, and the path is on (`lock` said so).
        took(m, TID_OFFSET.load(Ordering::Relaxed));
    }
    0
}

/// The fields glibc's lock writes once it holds a plain mutex: the owner and the users.
///
/// # Safety
/// `m` must be a valid plain mutex the caller has just acquired; `offset` is
/// [`TID_OFFSET`]'s (non-zero).
#[inline(always)]
unsafe fn took(m: *mut pthread_mutex_t, offset: usize) {
    // SAFETY: the caller's contract.
    let (owner, nusers) = unsafe { (field(m, OWNER), field(m, NUSERS)) };
    owner.store(thread_id_at(offset), Ordering::Relaxed);
    nusers.store(
        nusers.load(Ordering::Relaxed).wrapping_add(1),
        Ordering::Relaxed,
    );
}

/// glibc's trylock of a plain mutex: `Some(0)` acquired, `Some(EBUSY)` held by someone;
/// `None`: not a plain mutex, or this path is off (ask glibc).
///
/// # Safety
/// `m` must point at a valid, initialised glibc mutex.
#[inline(always)]
pub unsafe fn try_lock(m: *mut pthread_mutex_t) -> Option<c_int> {
    // SAFETY: `m` is valid (caller's contract).
    let (lock, offset) = unsafe { plain_word(m) }?;
    // As glibc (2.36 on x86-64): a load first, and a compare-and-swap only when the mutex
    // looks free. A failed compare-and-swap still takes the lock's cache line exclusive,
    // from the holder, whose unlock then misses: with it, four threads on one mutex on two
    // CPUs failed 70% of their trylocks instead of 14% (benchmarks/contention.sh,
    // fidelity).
    if lock.load(Ordering::Relaxed) != 0 {
        return Some(libc::EBUSY);
    }
    // SAFETY: a plain mutex, the path on.
    unsafe { take_free(m, lock, offset, single_threaded()) }
}

/// glibc's unlock of a plain mutex; false: not such a mutex, or this path is off (ask
/// glibc).
///
/// # Safety
/// `m` must point at a valid, initialised glibc mutex, held by the caller if plain.
#[inline(always)]
pub unsafe fn unlock(m: *mut pthread_mutex_t) -> bool {
    // SAFETY: `m` is valid (caller's contract).
    let Some((lock, _)) = (unsafe { plain_word(m) }) else {
        return false;
    };
    // SAFETY: as above.
    let (owner, nusers) = unsafe { (field(m, OWNER), field(m, NUSERS)) };
    // As glibc: the fields are reset before the release, while the caller still holds it.
    owner.store(0, Ordering::Relaxed);
    nusers.store(
        nusers.load(Ordering::Relaxed).wrapping_sub(1),
        Ordering::Relaxed,
    );
    if single_threaded() {
        // As glibc's unlock of a private mutex in a single-threaded process: nobody can
        // wait for it.
        lock.store(0, Ordering::Release);
        return true;
    }
    // As glibc's `lll_unlock`: one exchange, and a wake when waiters may sleep (2); a load
    // and a compare-and-swap took the lock word's line twice inside the program's critical
    // section. The wake gets the word's address, taken before the release: once released,
    // another thread may take, release and free the mutex, and no reference to it may live
    // on (the wake of a freed word is harmless to the kernel, as in glibc).
    let word = lock.as_ptr();
    if lock.swap(0, Ordering::Release) > 1 {
        wake_one(word);
    }
    true
}

/// `FUTEX_WAKE_PRIVATE` of one waiter of the lock word at `word`, as glibc's
/// `lll_futex_wake`, by a system call of its own: `syscall(3)` is interposed by this library
/// (`crate::futex`). The kernel only looks `word` up among its sleepers; it need not be
/// valid any more.
#[inline(never)]
fn wake_one(word: *mut i32) {
    // SAFETY: futex(2) FUTEX_WAKE reads no user memory (the address is a key) and clobbers
    // rcx and r11 (and rax, its result, which is not needed: a wake cannot fail on an
    // aligned address).
    unsafe {
        std::arch::asm!("syscall",
            inlateout("rax") libc::SYS_futex as usize => _,
            in("rdi") word,
            in("rsi") (libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG) as usize,
            in("rdx") 1usize,
            lateout("rcx") _, lateout("r11") _,
            options(nostack));
    }
}
mod tests;
