//! Shared helpers of the runtime's unit tests (the `tests` modules): the twin objects on
//! which a test runs the same calls through our interposed function and through glibc's
//! real one, the raw views of glibc's structures that the tests compare, the clocks and
//! deadlines they try, and the switch that puts a thread's semaphore and reader-writer lock
//! calls on their profiled path ([`as_profiled`]).
//!
//! How each side is reached, in the test executable: *ours* is the crate's own function
//! (`crate::locks::pthread_mutex_lock`, ...), which is also what `libc::pthread_mutex_lock`
//! links to there (`crate::tests::calls_reach_our_functions_and_real_ones_reach_libc`
//! checks that); *glibc's* is the function the crate itself forwards to, `crate::real::*`
//! (`dlsym(RTLD_NEXT)` from the executable: libc.so.6), or, for the spin locks the crate
//! never forwards, [`glibc_symbol`].

use crate::real;
use libc::{c_int, c_void, clockid_t, pthread_mutex_t, pthread_mutexattr_t, timespec};
use std::cell::{Cell, UnsafeCell};
use std::ffi::CStr;
use std::sync::atomic::{AtomicI32, Ordering};

thread_local! {
    /// Whether the calling thread takes the interposers' profiled paths ([`as_profiled`]).
    static PROFILED: Cell<bool> = const { Cell::new(false) };
}

/// What the interposers that try before they wait (semaphores, reader-writer locks) ask in
/// the unit tests for `blameprof_measure`'s `sampling_enabled`: whether sampling is on, or
/// the calling thread runs [`as_profiled`]. Their profiled path (a try first, then the
/// measured wait) must answer as glibc does too; with sampling off, the measuring itself
/// passes through.
pub fn sampling_enabled() -> bool {
    blameprof_measure::sampler::process::sampling_enabled() || PROFILED.with(Cell::get)
}

/// Runs `f` on the calling thread with the interposers on their profiled paths when
/// `profiled` ([`sampling_enabled`]); threads it starts inherit nothing (see
/// [`profiled`]).
pub fn as_profiled<R>(profiled: bool, f: impl FnOnce() -> R) -> R {
    let before = PROFILED.with(|p| p.replace(profiled));
    let r = f();
    PROFILED.with(|p| p.set(before));
    r
}

/// Whether the calling thread runs [`as_profiled`]`(true, ...)`.
pub fn profiled() -> bool {
    PROFILED.with(Cell::get)
}

/// The calling thread's kernel id (glibc's `gettid`, which the runtime does not interpose).
pub fn gettid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// The calling thread's `errno`.
pub fn errno() -> c_int {
    // SAFETY: __errno_location returns the calling thread's errno slot, always valid.
    unsafe { *libc::__errno_location() }
}

/// Sets the calling thread's `errno`.
pub fn set_errno(value: c_int) {
    // SAFETY: as in `errno`.
    unsafe { *libc::__errno_location() = value };
}

/// An `errno` value no call sets: a call that succeeds must leave it there.
pub const ERRNO_SENTINEL: c_int = 4242;

/// An absolute time long past on both clocks glibc waits on (the epoch, and the boot for
/// the monotonic clock): a wait that would block times out at once.
pub const PAST: timespec = timespec {
    tv_sec: 0,
    tv_nsec: 0,
};

/// An absolute time whose nanoseconds are out of range (EINVAL where glibc checks them).
pub const BAD_NSEC: timespec = timespec {
    tv_sec: 0,
    tv_nsec: 2_000_000_000,
};

/// A clock glibc does not accept for timed waits (it accepts only the realtime and the
/// monotonic clock).
pub const UNSUPPORTED_CLOCK: clockid_t = libc::CLOCK_PROCESS_CPUTIME_ID;

/// Clocks a timed wait may name: the two glibc waits on, and others it refuses (real
/// clocks, and numbers that name none).
pub const CLOCKS: [libc::clockid_t; 7] = [
    libc::CLOCK_REALTIME,
    libc::CLOCK_MONOTONIC,
    UNSUPPORTED_CLOCK,
    libc::CLOCK_BOOTTIME,
    libc::CLOCK_REALTIME_COARSE,
    99,
    -1,
];

/// Deadlines (seconds, nanoseconds), all past: valid ones (before the epoch too) and
/// nanoseconds out of range either way; [`valid_nanoseconds`] tells which.
pub const DEADLINES: [(i64, i64); 6] = [
    (0, 0),
    (-1, 999_999_999),
    (0, -1),
    (0, 1_000_000_000),
    (BAD_NSEC.tv_sec, BAD_NSEC.tv_nsec),
    (i64::MIN, i64::MIN),
];

/// Whether glibc takes `nanoseconds` for a deadline's.
pub fn valid_nanoseconds(nanoseconds: i64) -> bool {
    (0..1_000_000_000).contains(&nanoseconds)
}

/// Whether glibc waits on `clock` (the realtime and the monotonic clock only).
pub fn supported_clock(clock: clockid_t) -> bool {
    clock == libc::CLOCK_REALTIME || clock == libc::CLOCK_MONOTONIC
}

/// `seconds` from now on `clock` (a deadline a test never reaches unless it is broken).
pub fn deadline(clock: clockid_t, seconds: i64) -> timespec {
    let mut now = PAST;
    // SAFETY: `now` is a writable timespec.
    assert_eq!(unsafe { libc::clock_gettime(clock, &mut now) }, 0);
    now.tv_sec += seconds;
    now
}

/// C data for which all-zero bytes are a valid value.
///
/// # Safety
/// Implement only for such types.
pub unsafe trait Zeroable: Sized {
    /// The all-zero value.
    fn zeroed() -> Self {
        // SAFETY: all-zero bytes are a valid `Self` (this trait's contract).
        unsafe { std::mem::zeroed() }
    }
}

// SAFETY: glibc's pthread objects and semaphores are structures of integers (byte arrays in
// the libc crate), and the others are integers: all-zero bytes are valid for each.
unsafe impl Zeroable for libc::pthread_mutex_t {}
// SAFETY: as above.
unsafe impl Zeroable for libc::pthread_rwlock_t {}
// SAFETY: as above.
unsafe impl Zeroable for libc::pthread_cond_t {}
// SAFETY: as above.
unsafe impl Zeroable for libc::pthread_barrier_t {}
// SAFETY: as above.
unsafe impl Zeroable for libc::sem_t {}
// SAFETY: as above (pthread_spinlock_t is an int).
unsafe impl Zeroable for libc::pthread_spinlock_t {}
// SAFETY: as above.
unsafe impl Zeroable for u32 {}
// SAFETY: as above.
unsafe impl Zeroable for u64 {}
// SAFETY: arrays of zeroable values are zeroable.
unsafe impl<T: Zeroable, const N: usize> Zeroable for [T; N] {}

/// A C object at a stable address that several threads may operate on through raw pointers
/// (as C programs do), zero-filled at first (every pthread object's static initialiser on
/// x86-64 glibc, except the spin lock's).
pub struct Raw<T>(Box<UnsafeCell<T>>);

// SAFETY: the tests only hand the pointee to the primitives under test (which synchronise
// their own accesses) or read it while no other thread uses it.
unsafe impl<T> Sync for Raw<T> {}
// SAFETY: as above; the pointee is plain C data with no thread affinity.
unsafe impl<T> Send for Raw<T> {}

impl<T: Zeroable> Raw<T> {
    /// A zero-filled object.
    pub fn zeroed() -> Raw<T> {
        Raw(Box::new(UnsafeCell::new(T::zeroed())))
    }
}

impl<T> Raw<T> {
    pub fn ptr(&self) -> *mut T {
        self.0.get()
    }

    /// A copy of the object's bytes (taken while no other thread changes it).
    pub fn image(&self) -> Vec<u8> {
        // SAFETY: the object is `size_of::<T>()` initialised bytes at a valid address.
        unsafe { std::slice::from_raw_parts(self.ptr() as *const u8, std::mem::size_of::<T>()) }
            .to_vec()
    }

    /// The 32-bit word at byte offset `at` (a field of glibc's layout), read atomically.
    pub fn word(&self, at: usize) -> i32 {
        self.atomic_at(at).load(Ordering::SeqCst)
    }

    /// Overwrites the 32-bit word at byte offset `at` (to set up a state glibc would reach
    /// only after billions of calls, or a waiter's mark, on both twins alike).
    pub fn set_word(&self, at: usize, value: i32) {
        self.atomic_at(at).store(value, Ordering::SeqCst)
    }

    fn atomic_at(&self, at: usize) -> &AtomicI32 {
        assert!(at & 3 == 0 && at + 4 <= std::mem::size_of::<T>());
        // SAFETY: `at` is an aligned 4-byte field inside the object (checked above; the
        // objects are at least 4-aligned), which glibc and the runtime access atomically.
        unsafe { &*((self.ptr() as *const u8).add(at) as *const AtomicI32) }
    }
}

/// Two objects of the same kind: one operated on through our interposed functions, the
/// other through glibc's real ones, by the same threads in the same order, so that their
/// states can be compared byte for byte.
pub struct Twin<T> {
    pub ours: Raw<T>,
    pub glibc: Raw<T>,
}

impl<T: Zeroable> Twin<T> {
    pub fn zeroed() -> Twin<T> {
        Twin {
            ours: Raw::zeroed(),
            glibc: Raw::zeroed(),
        }
    }
}

impl<T> Twin<T> {
    /// Asserts that both objects hold the same bytes.
    pub fn assert_same_image(&self, after: &dyn std::fmt::Debug) {
        assert_eq!(
            self.ours.image(),
            self.glibc.image(),
            "our object and glibc's differ after {after:?}"
        );
    }
}

/// glibc's `struct __pthread_mutex_s` on x86-64 (`bits/struct_mutex.h`), less the robust
/// list links (which point at each mutex itself): written out here independently of the
/// offsets `plain_mutex` uses, so that a wrong offset there shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MutexFields {
    pub lock: i32,
    pub count: u32,
    pub owner: i32,
    pub nusers: u32,
    pub kind: i32,
    pub spins: i16,
    pub elision: i16,
}

/// The fields of `m`, read while no other thread changes them.
pub fn mutex_fields(m: &Raw<pthread_mutex_t>) -> MutexFields {
    #[repr(C)]
    struct Layout {
        lock: i32,
        count: u32,
        owner: i32,
        nusers: u32,
        kind: i32,
        spins: i16,
        elision: i16,
        prev: *mut c_void,
        next: *mut c_void,
    }
    const _: () = assert!(std::mem::size_of::<Layout>() == std::mem::size_of::<pthread_mutex_t>());
    // SAFETY: `Layout` is glibc's definition of the 40-byte pthread_mutex_t (same size,
    // checked above; alignment 8 for both); the read is a copy.
    let l = unsafe { std::ptr::read_volatile(m.ptr() as *const Layout) };
    MutexFields {
        lock: l.lock,
        count: l.count,
        owner: l.owner,
        nusers: l.nusers,
        kind: l.kind,
        spins: l.spins,
        elision: l.elision,
    }
}

/// Byte offsets of `__count` (the recursion count) and `__lock` in glibc's mutex.
pub const MUTEX_COUNT_AT: usize = 4;
pub const MUTEX_LOCK_AT: usize = 0;

/// A mutex's attributes, as a program would set them with `pthread_mutexattr_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MutexAttr {
    pub kind: c_int,
    pub robust: bool,
    pub pshared: bool,
    pub protocol: c_int,
}

impl MutexAttr {
    pub const fn of_kind(kind: c_int) -> MutexAttr {
        MutexAttr {
            kind,
            robust: false,
            pshared: false,
            protocol: libc::PTHREAD_PRIO_NONE,
        }
    }

    /// One mutex of every kind but the default one (which `plain_mutex` takes inline): the
    /// other types, robust, process-shared and priority-inheritance.
    pub fn other_than_default() -> [MutexAttr; 6] {
        let normal = MutexAttr::of_kind(libc::PTHREAD_MUTEX_NORMAL);
        [
            MutexAttr::of_kind(libc::PTHREAD_MUTEX_RECURSIVE),
            MutexAttr::of_kind(libc::PTHREAD_MUTEX_ERRORCHECK),
            MutexAttr::of_kind(PTHREAD_MUTEX_ADAPTIVE_NP),
            MutexAttr {
                robust: true,
                ..normal
            },
            MutexAttr {
                pshared: true,
                ..normal
            },
            MutexAttr {
                protocol: libc::PTHREAD_PRIO_INHERIT,
                ..normal
            },
        ]
    }

    /// Runs `f` with a glibc attribute object set to these attributes (the
    /// `pthread_mutexattr_*` functions are not interposed: these are glibc's).
    pub fn with<R>(&self, f: impl FnOnce(*const pthread_mutexattr_t) -> R) -> R {
        // SAFETY: a zeroed attribute object is initialised by pthread_mutexattr_init before
        // any other use.
        let mut attr: pthread_mutexattr_t = unsafe { std::mem::zeroed() };
        // SAFETY: `attr` is a valid, writable attribute object for all these calls.
        unsafe {
            assert_eq!(libc::pthread_mutexattr_init(&mut attr), 0);
            assert_eq!(libc::pthread_mutexattr_settype(&mut attr, self.kind), 0);
            let robust = if self.robust {
                libc::PTHREAD_MUTEX_ROBUST
            } else {
                libc::PTHREAD_MUTEX_STALLED
            };
            assert_eq!(libc::pthread_mutexattr_setrobust(&mut attr, robust), 0);
            let shared = if self.pshared {
                libc::PTHREAD_PROCESS_SHARED
            } else {
                libc::PTHREAD_PROCESS_PRIVATE
            };
            assert_eq!(libc::pthread_mutexattr_setpshared(&mut attr, shared), 0);
            assert_eq!(
                libc::pthread_mutexattr_setprotocol(&mut attr, self.protocol),
                0
            );
        }
        let r = f(&attr);
        // SAFETY: `attr` was initialised above and is no longer used.
        unsafe { libc::pthread_mutexattr_destroy(&mut attr) };
        r
    }
}

/// glibc's `PTHREAD_MUTEX_ADAPTIVE_NP` (spins a while before it sleeps).
pub const PTHREAD_MUTEX_ADAPTIVE_NP: c_int = 3;

type MutexFn = unsafe extern "C" fn(*mut pthread_mutex_t) -> c_int;

/// One side's mutex functions.
#[derive(Clone, Copy)]
pub struct MutexApi {
    pub init: unsafe extern "C" fn(*mut pthread_mutex_t, *const pthread_mutexattr_t) -> c_int,
    pub lock: MutexFn,
    pub trylock: MutexFn,
    pub unlock: MutexFn,
    pub destroy: MutexFn,
    pub timedlock: unsafe extern "C" fn(*mut pthread_mutex_t, *const timespec) -> c_int,
    pub clocklock: unsafe extern "C" fn(*mut pthread_mutex_t, clockid_t, *const timespec) -> c_int,
}

/// Our interposed mutex functions (the crate's own `#[no_mangle]` definitions).
pub fn our_mutex() -> MutexApi {
    MutexApi {
        init: crate::locks::pthread_mutex_init,
        lock: crate::locks::pthread_mutex_lock,
        trylock: crate::locks::pthread_mutex_trylock,
        unlock: crate::locks::pthread_mutex_unlock,
        destroy: crate::locks::pthread_mutex_destroy,
        timedlock: crate::locks::pthread_mutex_timedlock,
        clocklock: crate::locks::pthread_mutex_clocklock,
    }
}

/// glibc's real mutex functions, as the runtime resolved them.
pub fn glibc_mutex() -> MutexApi {
    MutexApi {
        init: real::pthread_mutex_init(),
        lock: real::pthread_mutex_lock(),
        trylock: real::pthread_mutex_trylock(),
        unlock: real::pthread_mutex_unlock(),
        destroy: real::pthread_mutex_destroy(),
        timedlock: real::pthread_mutex_timedlock(),
        clocklock: real::pthread_mutex_clocklock(),
    }
}

/// A call on a mutex.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MutexOp {
    Lock,
    TryLock,
    Unlock,
    Destroy,
    /// `pthread_mutex_timedlock` with (seconds, nanoseconds) on the realtime clock.
    TimedLock(i64, i64),
    /// `pthread_mutex_clocklock` with a clock and (seconds, nanoseconds).
    ClockLock(clockid_t, i64, i64),
    /// `pthread_mutex_consistent` (not interposed: glibc's on both sides).
    Consistent,
}

impl MutexApi {
    /// Performs `op` on `m`; its return code.
    ///
    /// # Safety
    /// `m` must point at a mutex (initialised, or destroyed, as the test intends) that stays
    /// valid for the call; blocking calls must be able to finish.
    pub unsafe fn apply(&self, m: *mut pthread_mutex_t, op: MutexOp) -> c_int {
        let ts = |s, ns| timespec {
            tv_sec: s,
            tv_nsec: ns,
        };
        // SAFETY: `m` is valid per this function's contract; timespecs live on the stack
        // for the call.
        unsafe {
            match op {
                MutexOp::Lock => (self.lock)(m),
                MutexOp::TryLock => (self.trylock)(m),
                MutexOp::Unlock => (self.unlock)(m),
                MutexOp::Destroy => (self.destroy)(m),
                MutexOp::TimedLock(s, ns) => (self.timedlock)(m, &ts(s, ns)),
                MutexOp::ClockLock(c, s, ns) => (self.clocklock)(m, c, &ts(s, ns)),
                MutexOp::Consistent => libc::pthread_mutex_consistent(m),
            }
        }
    }
}

/// A pair of mutexes with the same attributes, one used through our functions, the other
/// through glibc's.
pub struct MutexTwin {
    pub twin: Twin<pthread_mutex_t>,
    /// Robust mutexes link themselves into their holder's list: their last 16 bytes are
    /// addresses, compared as such only between like fields.
    pub robust: bool,
}

impl MutexTwin {
    /// Both mutexes initialised, each by its side's `pthread_mutex_init` (`None`: default
    /// attributes); asserts both sides agree.
    pub fn new(attr: Option<MutexAttr>) -> MutexTwin {
        let t = MutexTwin {
            twin: Twin::zeroed(),
            robust: attr.is_some_and(|a| a.robust),
        };
        let init = |attr: *const pthread_mutexattr_t| {
            // SAFETY: both mutexes are valid, writable and not in use; `attr` is null or
            // an initialised attribute object.
            unsafe {
                (
                    (our_mutex().init)(t.twin.ours.ptr(), attr),
                    (glibc_mutex().init)(t.twin.glibc.ptr(), attr),
                )
            }
        };
        let (ours, glibc) = match attr {
            Some(a) => a.with(init),
            None => init(std::ptr::null()),
        };
        assert_eq!(ours, glibc, "pthread_mutex_init with {attr:?}");
        assert_eq!(ours, 0, "pthread_mutex_init with {attr:?}");
        t.assert_same_state(&("init", attr));
        t
    }

    /// Asserts that both mutexes are in the same state: all 40 bytes, or for a robust
    /// mutex the fields before its list links, and links that are both null or both set.
    pub fn assert_same_state(&self, after: &dyn std::fmt::Debug) {
        if self.robust {
            assert_eq!(
                self.ours_fields(),
                self.glibc_fields(),
                "our mutex and glibc's differ after {after:?}"
            );
            let linked = |m: &Raw<pthread_mutex_t>| m.image()[24..].iter().any(|&b| b != 0);
            assert_eq!(
                linked(&self.twin.ours),
                linked(&self.twin.glibc),
                "{after:?}"
            );
        } else {
            self.twin.assert_same_image(after);
        }
    }

    pub fn ours_fields(&self) -> MutexFields {
        mutex_fields(&self.twin.ours)
    }

    pub fn glibc_fields(&self) -> MutexFields {
        mutex_fields(&self.twin.glibc)
    }

    /// Performs `op` on both mutexes (ours first) on the calling thread; asserts the same
    /// return code and the same state after it, and returns that code.
    pub fn step(&self, op: MutexOp) -> c_int {
        // SAFETY: both mutexes live as long as `self`; the tests only step operations that
        // return at once (a lock of a mutex nobody else holds, or an error).
        let (ours, glibc) = unsafe {
            (
                our_mutex().apply(self.twin.ours.ptr(), op),
                glibc_mutex().apply(self.twin.glibc.ptr(), op),
            )
        };
        assert_eq!(ours, glibc, "return code of {op:?}: ours vs glibc's");
        self.assert_same_state(&op);
        ours
    }

    /// [`step`](Self::step)s `ops` on a new thread, which then ends (a robust mutex it still
    /// holds becomes owner-dead); their return codes.
    pub fn steps_elsewhere(&self, ops: &[MutexOp]) -> Vec<c_int> {
        std::thread::scope(|s| {
            s.spawn(|| ops.iter().map(|&op| self.step(op)).collect())
                .join()
                .expect("the other thread's steps")
        })
    }
}

/// The address of glibc's definition of `name` (the next one after the test executable),
/// for functions the crate defines but never forwards to (the spin locks).
pub fn glibc_symbol(name: &CStr) -> usize {
    // SAFETY: `name` is NUL-terminated; RTLD_NEXT from the executable searches the libraries
    // loaded after it, libc among them.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    assert_ne!(p, 0, "glibc has no {name:?}");
    assert!(
        object_of(p).contains("libc.so"),
        "{name:?} resolved outside libc"
    );
    p
}

/// The file name of the loaded object that contains address `p` ("" if none).
pub fn object_of(p: usize) -> String {
    // SAFETY: dladdr only reads the loader's tables; a zeroed Dl_info is a valid out value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is writable; `p` is only looked up, never dereferenced.
    if unsafe { libc::dladdr(p as *const c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        return String::new();
    }
    // SAFETY: dladdr set dli_fname to the loader's NUL-terminated name of the object.
    unsafe { CStr::from_ptr(info.dli_fname) }
        .to_string_lossy()
        .into_owned()
}

/// Asserts that the test process runs the interposers in their unprofiled mode: no
/// `BLAMEPROF_OUTPUT`, so the runtime's start-up left sampling off.
pub fn assert_unprofiled() {
    assert!(
        std::env::var_os("BLAMEPROF_OUTPUT").is_none(),
        "these tests expect an unprofiled process (unset BLAMEPROF_OUTPUT)"
    );
}
