//! OpenMP programs built by GCC (`-fopenmp`): the entry points of its runtime interface
//! (`GOMP_*`), on GNU libgomp and on LLVM's libomp (which exports the same interface).
//! Thin entry points over `blameprof_measure::policy`.
//!
//! Both runtimes wait inside themselves, with inline `futex` calls and `pause` loops that no
//! interposed libc function sees. So the waits are measured at the interface instead:
//!
//! - A parallel region (`GOMP_parallel`, the combined `GOMP_parallel_loop_*`,
//!   `GOMP_parallel_sections`) runs its outlined function through [`region`], which each
//!   thread of the team enters: it runs the program's function, then meets the others at an
//!   explicit team barrier ([`omp_implicit_barrier`]), measured as a `pthread_barrier_wait`
//!   is (the last thread to arrive takes the others' waiting as blame; the analysis moves
//!   it to that thread's work meanwhile). The runtime's own end-of-region barrier then
//!   finds the team already together. The region's barrier is an object keyed by the
//!   outlined function's address (the lock view names it so), of the team's size.
//! - `GOMP_barrier` (`#pragma omp barrier`, the end of a `single` or a static loop without
//!   `nowait`), `GOMP_loop_end` (other loops) and `GOMP_sections_end` inside such a region
//!   are the same barrier (their cancellable forms are not measured).
//! - `GOMP_critical_start`/`_end` and `GOMP_critical_name_start`/`_end` are taken on
//!   mutexes of the runtime's own (one for the unnamed critical section, one per name),
//!   through the interposed `pthread_mutex_lock`, so contended critical sections are locks
//!   with waiting, blame and a row in the lock view. Mutual exclusion is the same; only the
//!   word it is kept in differs. Past 64 names ([`critical`]), a name's critical section is the
//!   OpenMP runtime's own, unmeasured (each entry counted as `waits_unmonitored`).
//! - A worker (a thread of a top-level team other than the one that started it) is docked
//!   in its thread pool from its region's end to its next region ([`omp_worker_idle`]), a
//!   barrier-kind wait that the next region's start ends: the starting thread takes the
//!   docked workers' waiting as blame ([`policy::wake_all`]), which the analysis moves to
//!   its work meanwhile (its serial code). A worker's spinning and sleeping there is
//!   waiting, not work. The time after the last region is not recorded (the wait is still
//!   open at exit).
//! - A task (`GOMP_task`) runs through [`tasks`]: a thread that runs it from inside a
//!   measured barrier wait (the runtime runs queued tasks there) computes, so its samples
//!   are work and the task's time is not the wait's idleness. Its data is copied into the
//!   task's block behind a header of the runtime's, as the runtime would copy it.
//!
//! Not covered: regions started another way (Clang's `__kmpc_fork_call` on libomp, GCC's
//! pre-4.9 `GOMP_parallel_start`, `GOMP_parallel_reductions`, host `teams`), which pass
//! through unmeasured (docked workers that run one keep their pool wait open);
//! `taskwait`, `taskgroup`, OpenMP locks, and tasks of a `taskloop` (whose runtime writes
//! the bounds at the start of each task's data, where the header would be).
//!
//! Invariants: the program's function runs exactly once per thread, with its own
//! argument; every thread of a team calls the extra barrier, so it cannot deadlock. Not
//! async-signal-safe.

mod critical;
mod tasks;

use blameprof_measure::policy;
use libc::{c_long, c_uint, c_void};
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use tasks::TaskFn;

/// An outlined function of a parallel region (or a task).
type OutlinedFn = unsafe extern "C" fn(*mut c_void);

/// The OpenMP runtime's function `name` (NUL-terminated), resolved once into `slot`: the
/// next definition after this library, or, for a runtime opened with local symbols (a
/// library of its own, such as a Python wheel's `libgomp-<hash>.so.1`), the first loaded
/// object besides this library that defines `GOMP_parallel` ([`local_runtime`]).
fn resolve(slot: &AtomicUsize, name: &'static [u8]) -> usize {
    let cached = slot.load(Ordering::Acquire);
    if cached != 0 {
        return cached;
    }
    // SAFETY: `name` is NUL-terminated; RTLD_NEXT looks past this library.
    let mut p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) } as usize;
    if p == 0 {
        let handle = local_runtime();
        if !handle.is_null() {
            // SAFETY: a valid handle and a NUL-terminated name.
            p = unsafe { libc::dlsym(handle, name.as_ptr().cast()) } as usize;
        }
    }
    if p == 0 {
        let msg = b"blameprof: fatal: an OpenMP entry point was called but no OpenMP runtime defines it\n";
        // SAFETY: writing a static message to stderr, then stopping: without the real
        // function the program cannot go on.
        unsafe {
            libc::write(2, msg.as_ptr().cast(), msg.len());
            libc::abort();
        }
    }
    slot.store(p, Ordering::Release);
    p
}

/// A handle of the first loaded object, other than this library, that defines
/// `GOMP_parallel`; null if none. Walks the loaded objects (`dl_iterate_phdr`, outside any
/// signal handler) and opens each by its name without loading anything (`RTLD_NOLOAD`).
fn local_runtime() -> *mut c_void {
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        found: *mut c_void,
    ) -> libc::c_int {
        // SAFETY: the loader passes a valid record; `found` is the caller's slot.
        unsafe {
            let name = (*info).dlpi_name;
            if name.is_null() || *name == 0 {
                return 0;
            }
            let handle = libc::dlopen(name, libc::RTLD_NOLOAD | libc::RTLD_LAZY);
            if handle.is_null() {
                return 0;
            }
            let p = libc::dlsym(handle, c"GOMP_parallel".as_ptr());
            if !p.is_null() && !std::ptr::eq(p, GOMP_parallel as *const () as *const c_void) {
                *(found as *mut *mut c_void) = handle;
                return 1;
            }
            libc::dlclose(handle);
            0
        }
    }
    let mut found: *mut c_void = std::ptr::null_mut();
    // SAFETY: `visit` only reads the records and writes `found`.
    unsafe { libc::dl_iterate_phdr(Some(visit), &mut found as *mut *mut c_void as *mut c_void) };
    found
}

macro_rules! gomp_fns {
    ($($fn_name:ident = $sym:literal : $ty:ty;)*) => {
        $(
            fn $fn_name() -> $ty {
                static SLOT: AtomicUsize = AtomicUsize::new(0);
                let p = resolve(&SLOT, $sym);
                // SAFETY: `p` is the OpenMP runtime's function named `$sym`, of C type `$ty`.
                unsafe { std::mem::transmute::<usize, $ty>(p) }
            }
        )*
    };
}

gomp_fns! {
    real_parallel = b"GOMP_parallel\0": unsafe extern "C" fn(OutlinedFn, *mut c_void, c_uint, c_uint);
    real_parallel_sections = b"GOMP_parallel_sections\0":
        unsafe extern "C" fn(OutlinedFn, *mut c_void, c_uint, c_uint, c_uint);
    real_loop_static = b"GOMP_parallel_loop_static\0": LoopFn;
    real_loop_dynamic = b"GOMP_parallel_loop_dynamic\0": LoopFn;
    real_loop_guided = b"GOMP_parallel_loop_guided\0": LoopFn;
    real_loop_nonmonotonic_dynamic = b"GOMP_parallel_loop_nonmonotonic_dynamic\0": LoopFn;
    real_loop_nonmonotonic_guided = b"GOMP_parallel_loop_nonmonotonic_guided\0": LoopFn;
    real_loop_runtime = b"GOMP_parallel_loop_runtime\0": RuntimeLoopFn;
    real_loop_nonmonotonic_runtime = b"GOMP_parallel_loop_nonmonotonic_runtime\0": RuntimeLoopFn;
    real_loop_maybe_nonmonotonic_runtime = b"GOMP_parallel_loop_maybe_nonmonotonic_runtime\0": RuntimeLoopFn;
    real_barrier = b"GOMP_barrier\0": unsafe extern "C" fn();
    real_loop_end = b"GOMP_loop_end\0": unsafe extern "C" fn();
    real_sections_end = b"GOMP_sections_end\0": unsafe extern "C" fn();
    real_task = b"GOMP_task\0": TaskFn;
    real_critical_name_start = b"GOMP_critical_name_start\0": unsafe extern "C" fn(*mut *mut c_void);
    real_critical_name_end = b"GOMP_critical_name_end\0": unsafe extern "C" fn(*mut *mut c_void);
    omp_get_num_threads = b"omp_get_num_threads\0": unsafe extern "C" fn() -> libc::c_int;
    omp_get_level = b"omp_get_level\0": unsafe extern "C" fn() -> libc::c_int;
}

/// `GOMP_parallel_loop_{static,dynamic,guided,...}`: function, data, threads, start, end,
/// increment, chunk size, flags.
type LoopFn =
    unsafe extern "C" fn(OutlinedFn, *mut c_void, c_uint, c_long, c_long, c_long, c_long, c_uint);
/// `GOMP_parallel_loop_*runtime`: as [`LoopFn`] without the chunk size.
type RuntimeLoopFn =
    unsafe extern "C" fn(OutlinedFn, *mut c_void, c_uint, c_long, c_long, c_long, c_uint);

/// One parallel region in flight, on its starting thread's stack (which outlives the
/// region: the real `GOMP_parallel` returns after the team's last thread has left).
struct Region {
    body: OutlinedFn,
    data: *mut c_void,
    /// The team's barrier: the outlined function's address for a region started outside
    /// any other, else this record's own (a nested region's function may run in several
    /// teams at once), forgotten when the region ends.
    key: usize,
    /// 0: nobody entered yet; 1: the first thread sets the barrier up; 2: ready.
    ready: AtomicU32,
    /// The team's size, once `ready` is 2.
    parties: AtomicU32,
    /// Started inside another region.
    nested: bool,
    /// The thread that started it (its pthread id): the others are the team's workers.
    starter: libc::pthread_t,
}

impl Region {
    fn new(body: OutlinedFn, data: *mut c_void) -> Region {
        Region {
            body,
            data,
            key: 0,
            ready: AtomicU32::new(0),
            parties: AtomicU32::new(0),
            nested: false,
            // SAFETY: no preconditions.
            starter: unsafe { libc::pthread_self() },
        }
    }

    /// Runs the region: `start` is the real entry point, called with [`region`] and this
    /// record in place of the program's function and data.
    fn run(mut self, start: impl FnOnce(OutlinedFn, *mut c_void)) {
        // SAFETY: the runtime's own query, on the thread about to start the region.
        let nested = unsafe { omp_get_level()() } > 0;
        self.nested = nested;
        self.key = if nested {
            &self as *const Region as usize
        } else {
            // The workers docked since the last region wait no more: the waiting was this
            // thread's (its work since then, by late work).
            policy::wake_all(pool_key());
            self.body as usize
        };
        start(region, &self as *const Region as *mut c_void);
        if nested {
            policy::forget(self.key);
        }
    }

    /// The team's size, the barrier set up by whichever thread enters first.
    fn enter(&self) -> u32 {
        if self
            .ready
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Acquire)
            .is_ok()
        {
            // SAFETY: called inside the region, where the runtime knows its team.
            let parties = unsafe { omp_get_num_threads()() }.max(1) as u32;
            if parties > 1 {
                policy::barrier_init(self.key, parties);
            }
            self.parties.store(parties, Ordering::Relaxed);
            self.ready.store(2, Ordering::Release);
            return parties;
        }
        // The first thread is setting the barrier up: a table update, no blocking; past a
        // few hundred turns it was preempted, and the CPU goes back to it.
        let mut turns = 0u32;
        while self.ready.load(Ordering::Acquire) != 2 {
            turns += 1;
            if turns.is_multiple_of(256) {
                // SAFETY: no preconditions.
                unsafe { libc::sched_yield() };
            } else {
                std::hint::spin_loop();
            }
        }
        self.parties.load(Ordering::Relaxed)
    }
}

std::thread_local! {
    /// The innermost region this thread runs (its barrier key and size), or (0, 0).
    /// Constant-initialised, no destructor: no allocation.
    static CURRENT: Cell<(usize, u32)> = const { Cell::new((0, 0)) };
}

/// What every thread of a team runs instead of the outlined function: the function, then
/// the team's barrier, measured.
unsafe extern "C" fn region(data: *mut c_void) {
    // SAFETY: `data` is the `Region` that the starting thread passed, alive until the real
    // `GOMP_parallel` returns, which is after every thread of the team has left here.
    let region = unsafe { &*(data as *const Region) };
    // SAFETY: no preconditions.
    let pooled = !region.nested && unsafe { libc::pthread_self() } != region.starter;
    // Whatever the region, a thread that comes into one from its pool stops waiting there
    // (libomp also gives pooled threads to nested teams).
    omp_worker_idle();
    let parties = region.enter();
    let outer = CURRENT.replace((region.key, parties));
    // SAFETY: the program's outlined function with its own argument, as the runtime would.
    unsafe { (region.body)(region.data) };
    if parties > 1 {
        omp_implicit_barrier();
    }
    CURRENT.set(outer);
    if pooled {
        // Docked until the next region (its spinning, then its sleep, are waiting).
        DOCKED.set(policy::open_wait(pool_key()));
    }
}

std::thread_local! {
    /// A worker's wait in its thread pool since its last region, if open. No destructor:
    /// no allocation.
    static DOCKED: Cell<Option<policy::OpenWait>> = const { Cell::new(None) };
}

/// The object a pool's docked workers wait on (one for the process): this static's address
/// (mutable, so that it has one, of its own, which the lock view names).
fn pool_key() -> usize {
    static POOL: AtomicU32 = AtomicU32::new(0);
    &POOL as *const AtomicU32 as usize
}

/// A worker comes back from its thread pool into a region: its wait there ends. A function
/// of its own (not inlined), so that the wait reads `... -> omp_worker_idle`.
#[no_mangle]
#[inline(never)]
pub extern "C" fn omp_worker_idle() {
    if let Some(wait) = DOCKED.take() {
        wait.close();
    }
    std::hint::black_box(());
}

/// The end of a parallel region: the team's barrier, measured. A function of its own (not
/// inlined), so waits there read `... -> omp_implicit_barrier`.
#[no_mangle]
#[inline(never)]
pub extern "C" fn omp_implicit_barrier() {
    let (key, _) = CURRENT.get();
    policy::barrier_wait(key, || {
        // SAFETY: called by every thread of the team, inside the region.
        unsafe { real_barrier()() };
        0
    });
    // The frame stays, so that the analysis names the wait after this function.
    std::hint::black_box(());
}

/// # Safety
/// Same contract as libgomp's `GOMP_parallel`.
#[no_mangle]
pub unsafe extern "C" fn GOMP_parallel(
    body: OutlinedFn,
    data: *mut c_void,
    threads: c_uint,
    flags: c_uint,
) {
    // SAFETY: the program's arguments, its function wrapped by `region`.
    Region::new(body, data).run(|f, d| unsafe { real_parallel()(f, d, threads, flags) })
}

/// # Safety
/// Same contract as libgomp's `GOMP_parallel_sections`.
#[no_mangle]
pub unsafe extern "C" fn GOMP_parallel_sections(
    body: OutlinedFn,
    data: *mut c_void,
    threads: c_uint,
    count: c_uint,
    flags: c_uint,
) {
    // SAFETY: as in `GOMP_parallel`.
    Region::new(body, data)
        .run(|f, d| unsafe { real_parallel_sections()(f, d, threads, count, flags) })
}

macro_rules! parallel_loops {
    ($($name:ident => $real:ident;)*) => {$(
        /// # Safety
        /// Same contract as libgomp's function of this name.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $name(
            body: OutlinedFn,
            data: *mut c_void,
            threads: c_uint,
            start: c_long,
            end: c_long,
            incr: c_long,
            chunk: c_long,
            flags: c_uint,
        ) {
            // SAFETY: as in `GOMP_parallel`.
            Region::new(body, data).run(|f, d| unsafe {
                $real()(f, d, threads, start, end, incr, chunk, flags)
            })
        }
    )*};
}

parallel_loops! {
    GOMP_parallel_loop_static => real_loop_static;
    GOMP_parallel_loop_dynamic => real_loop_dynamic;
    GOMP_parallel_loop_guided => real_loop_guided;
    GOMP_parallel_loop_nonmonotonic_dynamic => real_loop_nonmonotonic_dynamic;
    GOMP_parallel_loop_nonmonotonic_guided => real_loop_nonmonotonic_guided;
}

macro_rules! parallel_runtime_loops {
    ($($name:ident => $real:ident;)*) => {$(
        /// # Safety
        /// Same contract as libgomp's function of this name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            body: OutlinedFn,
            data: *mut c_void,
            threads: c_uint,
            start: c_long,
            end: c_long,
            incr: c_long,
            flags: c_uint,
        ) {
            // SAFETY: as in `GOMP_parallel`.
            Region::new(body, data)
                .run(|f, d| unsafe { $real()(f, d, threads, start, end, incr, flags) })
        }
    )*};
}

parallel_runtime_loops! {
    GOMP_parallel_loop_runtime => real_loop_runtime;
    GOMP_parallel_loop_nonmonotonic_runtime => real_loop_nonmonotonic_runtime;
    GOMP_parallel_loop_maybe_nonmonotonic_runtime => real_loop_maybe_nonmonotonic_runtime;
}

/// # Safety
/// Same contract as libgomp's `GOMP_barrier`.
#[no_mangle]
pub unsafe extern "C" fn GOMP_barrier() {
    // SAFETY: the program's call, forwarded.
    team_barrier(|| unsafe { real_barrier()() });
}

/// A team barrier inside a region started here, measured as [`GOMP_barrier`] is; outside
/// one (or in a team of one), `real` alone.
fn team_barrier(real: impl FnOnce()) {
    let (key, parties) = CURRENT.get();
    if parties <= 1 {
        return real();
    }
    policy::barrier_wait(key, || {
        real();
        0
    });
}

/// # Safety
/// Same contract as libgomp's `GOMP_loop_end` (the end of a worksharing loop without
/// `nowait`: a team barrier).
#[no_mangle]
pub unsafe extern "C" fn GOMP_loop_end() {
    // SAFETY: the program's call, forwarded.
    team_barrier(|| unsafe { real_loop_end()() });
}

/// # Safety
/// Same contract as libgomp's `GOMP_sections_end` (the end of `sections` without
/// `nowait`: a team barrier).
#[no_mangle]
pub unsafe extern "C" fn GOMP_sections_end() {
    // SAFETY: the program's call, forwarded.
    team_barrier(|| unsafe { real_sections_end()() });
}
