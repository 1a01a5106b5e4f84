//! Process and thread lifecycle of the runtime: start-up, thread start and exit, `fork`,
//! `exec` and exit.
//!
//! Job: set everything up before `main` (signal handler, tid table, part file, module set,
//! main thread's timer), give each new thread its state and timer, give fork children a part
//! of their own, and flush every buffer when the image ends (exit, or exec: `crate::exec`
//! hands the part over there). The module set after start-up (`dlopen`, `dlclose`) is
//! `crate::modules`'.
//!
//! It composes the layers below it (the sampler, the lock policy, the unwinder) and nothing
//! in them imports it: the preloaded library's entry points call it. Not async-signal-safe.

use crate::format::Frame;
use crate::modules;
use crate::sampler::clock::{other_thread_cpu_ns, thread_cpu_ns};
use crate::sampler::config::{Config, Source};
use crate::sampler::counters::{self, Counter};
use crate::sampler::descriptors;
use crate::sampler::handler;
use crate::sampler::heap::HEAP;
use crate::sampler::output;
use crate::sampler::process::{self, sampling_enabled};
use crate::sampler::records;
use crate::sampler::thread_state::{self, ThreadState};
use crate::sampler::timer::Timer;
use crate::sys::{self, gettid};
use crate::unwind::walk::StackBounds;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;

static SOURCE: AtomicU8 = AtomicU8::new(0);
/// The pid the runtime set up for; differs in a `vfork` child, which must not touch our state.
static PID: AtomicI32 = AtomicI32::new(0);
static KEY: OnceLock<libc::pthread_key_t> = OnceLock::new();
/// The CPU time of this image's threads that ended (each one's clock at its end), and how
/// many ended: with the live threads' clocks at the end, the CPU time of the threads the
/// runtime knows, to find that of the threads it never saw (`UnseenThreadsCpu`).
static ENDED_CPU_NS: AtomicU64 = AtomicU64::new(0);
static ENDED_THREADS: AtomicU64 = AtomicU64::new(0);
/// The process's CPU time not the calling thread's when the image started: an image after
/// `exec` inherits the CPU time of the old image's threads in the process clock.
static CPU_BASE_NS: AtomicU64 = AtomicU64::new(0);
/// CPU time a thread may still use after its end record (the rest of its teardown), allowed
/// for each ended thread before the difference counts as unseen threads', and the least
/// difference that does.
const TEARDOWN_CPU_NS: u64 = 100_000;
const UNSEEN_MIN_NS: u64 = 1_000_000;

/// The process's CPU time (all its threads, ended ones included), in nanoseconds.
fn process_cpu_ns() -> u64 {
    // SAFETY: a zeroed timespec is valid; clock_gettime writes it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: `ts` is writable.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Starts counting this image's threads' CPU time (at start-up, and in a fork child).
fn start_cpu_accounting() {
    ENDED_CPU_NS.store(0, Ordering::Relaxed);
    ENDED_THREADS.store(0, Ordering::Relaxed);
    let own = thread_cpu_ns();
    CPU_BASE_NS.store(process_cpu_ns().saturating_sub(own), Ordering::Relaxed);
    FIRST_THREAD.store(gettid(), Ordering::Relaxed);
    FIRST_THREAD_START_CPU_NS.store(own, Ordering::Relaxed);
}

/// The image's first thread, and its CPU clock when the image started: an image after
/// `exec` (or a fork child) inherits the clock of the thread that made it.
static FIRST_THREAD: AtomicU32 = AtomicU32::new(0);
static FIRST_THREAD_START_CPU_NS: AtomicU64 = AtomicU64::new(0);

/// The CPU time thread `tid` used in this image, from its CPU clock `cpu` (what its end
/// record says: the first thread's clock started before the image did).
fn image_cpu(tid: u32, cpu: u64) -> u64 {
    if tid == FIRST_THREAD.load(Ordering::Relaxed) {
        cpu.saturating_sub(FIRST_THREAD_START_CPU_NS.load(Ordering::Relaxed))
    } else {
        cpu
    }
}

pub(crate) fn source() -> Source {
    if SOURCE.load(Ordering::Relaxed) == 1 {
        Source::PerfTaskClock
    } else {
        Source::CpuTimer
    }
}

/// Start-up, before `main`. Does nothing when not launched by `blameprof run`.
pub fn init() {
    let Some(cfg) = Config::from_env() else {
        return;
    };
    if let Err(e) = try_init(cfg) {
        eprintln!(
            "blameprof: warning: profiling disabled in pid {}: {e}",
            sys::getpid()
        );
    }
}

fn try_init(cfg: Config) -> std::io::Result<()> {
    crate::sampler::tsc_clock::init();
    thread_state::init_table()?;
    crate::locks::contention_sampling::set_budget(cfg.contended_per_ms);
    install_handler(cfg.signal)?;
    unblock_sampling(cfg.signal);
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: `key` is writable; `thread_exit` matches the destructor signature.
    if unsafe { libc::pthread_key_create(&mut key, Some(thread_exit)) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let _ = KEY.set(key);
    let generation = output::open_part(&cfg.output_dir, cfg.max_part_bytes).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!(
                "cannot create a profile part in {}: {e}",
                cfg.output_dir.display()
            ),
        )
    })?;
    PID.store(sys::getpid(), Ordering::Relaxed);
    start_cpu_accounting();
    let cfg = process::set_config(cfg);
    let changes = modules::refresh();
    let main = thread_state::attach(gettid()).ok_or_else(|| std::io::Error::other("tid table"))?;
    let chosen = start_timer(main, cfg, cfg.preferred_source());
    SOURCE.store(u8::from(chosen == Source::PerfTaskClock), Ordering::Relaxed);
    records::write(gettid(), |w| records::process(w, cfg, generation, chosen));
    modules::record(&changes);
    start_thread_bookkeeping(main, None, 0, true);
    // SAFETY: registering plain extern "C" functions with no arguments.
    unsafe { libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child)) };
    crate::locks::acquisition_sampling::init();
    process::enable();
    Ok(())
}

/// Unblocks the sampling signal in the calling thread: an image started with it blocked
/// (`posix_spawnattr_setsigmask`, a parent's `sigsetmask`), or a thread whose creator had
/// it blocked by a way the interposed mask functions do not see, would never be sampled.
fn unblock_sampling(signal: i32) {
    // SAFETY: a zeroed sigset_t is valid; sigaddset fills it.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid sigset.
    unsafe { libc::sigaddset(&mut set, signal) };
    sys::sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
}

fn install_handler(signal: i32) -> std::io::Result<()> {
    // SAFETY: a zeroed sigaction is valid; we set the handler, flags and an empty mask.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = crate::sampler::handler::on_sample_signal as *const () as usize;
    action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
    // SAFETY: `action.sa_mask` is a valid sigset_t; sigaction copies `action`.
    let rc = unsafe {
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(signal, &action, std::ptr::null_mut())
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Starts the thread's timer, falling back to the CPU timer when perf is unavailable.
pub(crate) fn start_timer(state: &ThreadState, cfg: &Config, wanted: Source) -> Source {
    let tid = gettid();
    let mut started = Timer::start(wanted, cfg.signal, cfg.period_ns(), tid).map(|t| (t, wanted));
    if started.is_err() && wanted == Source::PerfTaskClock && cfg.forced_source.is_none() {
        started = Timer::start(Source::CpuTimer, cfg.signal, cfg.period_ns(), tid)
            .map(|t| (t, Source::CpuTimer));
        if started.is_ok() && SOURCE.load(Ordering::Relaxed) == 1 {
            counters::add(Counter::TimerFallbacks, 1);
        }
    }
    state.in_runtime.store(true, Ordering::Relaxed);
    // SAFETY: `in_runtime` is raised on the owner thread, so the handler stays out of `owner`.
    let owner = unsafe { &mut *state.owner.get() };
    let chosen = match started {
        Ok(((timer, perf_fd), source)) => {
            state.perf_fd.store(perf_fd, Ordering::Relaxed);
            owner.timer = Some(timer);
            source
        }
        Err(_) => {
            counters::add(Counter::TimerFailures, 1);
            wanted
        }
    };
    // The CPU time the thread's samples carry starts now: starting the timer (a perf counter
    // takes several system calls) is the runtime's, not the first sample's path's.
    state.last_cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
    state.in_runtime.store(false, Ordering::Relaxed);
    chosen
}

/// Records the thread's start, its stack bounds (`root`: see [`StackBounds::root`]) and arms
/// its thread-exit hook.
fn start_thread_bookkeeping(
    state: &'static ThreadState,
    routine: Option<usize>,
    root: u64,
    is_main: bool,
) {
    if let Some(cfg) = process::config() {
        unblock_sampling(cfg.signal);
    }
    let tid = gettid();
    state.in_runtime.store(true, Ordering::Relaxed);
    // SAFETY: `in_runtime` is raised on the owner thread.
    let owner = unsafe { &mut *state.owner.get() };
    owner.stack = StackBounds {
        top: current_stack_top(),
        root,
    };
    state.last_cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
    crate::locks::acquisition_sampling::set_thread_tries(Some(&state.lock_tries));
    crate::locks::acquisition_sampling::set_thread_displaced(Some(&state.init_sites_displaced));
    if let Some(&key) = KEY.get() {
        // SAFETY: `key` was created by pthread_key_create; the value is a 'static state.
        unsafe { libc::pthread_setspecific(key, state as *const ThreadState as *const _) };
    }
    let frame = routine.map_or(Frame::default(), |addr| {
        process::modules().try_read().map_or(
            Frame {
                module: 0,
                offset: addr as u64,
            },
            |m| m.frame_for(addr as u64),
        )
    });
    let name = records::thread_name(tid);
    records::write(tid, |w| {
        records::thread_start(w, tid, frame, &name, is_main)
    });
    state.in_runtime.store(false, Ordering::Relaxed);
}

/// An upper bound of the calling thread's stack frames, for plain stack reads while
/// unwinding (reads above it go through the fault-safe slow path); 0 if unknown.
///
/// Not `pthread_getattr_np`: for the main thread it parses `/proc/self/maps` with stdio
/// and `sscanf`, and for every other thread it allocates a CPU set with the program's
/// `malloc`. That makes glibc give the thread a malloc arena of its own, and it maps parts
/// of libc the program may never use. Instead:
/// - a thread created by `pthread_create` has its descriptor (`pthread_self()`) at the top
///   of its stack block, whether glibc or the program allocated the stack: it lies above
///   every frame, and the frames and it are one mapping. This holds in a fork child too;
/// - the initial thread's descriptor is not on its stack (it lies below, in the loader's
///   memory); its frames lie below `__libc_stack_end`, the stack pointer at process entry.
fn current_stack_top() -> u64 {
    extern "C" {
        static __libc_stack_end: *const libc::c_void;
    }
    /// A thread's frames are within this distance below its descriptor.
    const MAX_THREAD_STACK: u64 = 1 << 30;
    let marker = 0u8;
    let here = std::hint::black_box(&marker) as *const u8 as u64;
    // SAFETY: pthread_self has no preconditions; `__libc_stack_end` is set by the dynamic
    // loader before any constructor runs and never changes afterwards.
    let (descriptor, entry_sp) = unsafe { (libc::pthread_self() as u64, __libc_stack_end as u64) };
    if here < descriptor && descriptor - here <= MAX_THREAD_STACK {
        descriptor
    } else if here < entry_sp {
        entry_sp
    } else {
        0
    }
}

/// Called by `pthread_create` before it creates a thread: sets up, on the creating thread,
/// what the new thread's [`thread_started`] would otherwise build on its own stack.
pub fn before_thread_create() {
    if sampling_enabled() {
        thread_state::prepare_attach();
    }
}

/// Called first thing in every thread created through `pthread_create`, by the runtime's
/// trampoline: `root` is an address inside the trampoline's frame (see
/// [`StackBounds::root`]).
pub fn thread_started(routine: usize, root: u64) {
    if !sampling_enabled() {
        return;
    }
    let Some(cfg) = process::config() else { return };
    let Some(state) = thread_state::attach(gettid()) else {
        return;
    };
    crate::locks::acquisition_sampling::check_thread();
    start_thread_bookkeeping(state, Some(routine), root, false);
    start_timer(state, cfg, source());
}

/// Called once the thread's start routine has returned (by the runtime's trampoline) or is
/// leaving through `pthread_exit`, and its end has been charged: the trampoline's frame is
/// about to go, so unwinds go to the stack's end again (thread-exit handlers run below
/// `start_thread` in the frame's place).
pub fn thread_routine_returned() {
    let Some(state) = thread_state::lookup(gettid()) else {
        return;
    };
    state.in_runtime.store(true, Ordering::Relaxed);
    // SAFETY: `in_runtime` is raised on the owner thread.
    unsafe { (*state.owner.get()).stack.root = 0 };
    state.in_runtime.store(false, Ordering::Relaxed);
}

extern "C" {
    /// glibc's `pthread_setcancelstate(3)` (which the libc crate does not declare for
    /// Linux).
    fn pthread_setcancelstate(state: libc::c_int, old: *mut libc::c_int) -> libc::c_int;
}

/// glibc's `PTHREAD_CANCEL_DISABLE`.
const PTHREAD_CANCEL_DISABLE: libc::c_int = 1;

/// The thread-exit hook (pthread key destructor): stop the timer, flush, record the end.
/// Runs with cancellation disabled: a thread whose cancellation request is pending (a
/// request glibc acts on only at a cancellation point, and the thread may have returned
/// without reaching one) must not be cancelled at the hook's own file calls, which would
/// make its joiner see it cancelled and leave its end unrecorded.
extern "C" fn thread_exit(value: *mut libc::c_void) {
    let mut cancel_state = 0;
    // SAFETY: a valid state and a writable out-value.
    unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut cancel_state) };
    record_thread_exit(value);
    // SAFETY: as above; restores the thread's own state for the destructors after this.
    unsafe { pthread_setcancelstate(cancel_state, &mut cancel_state) };
}

/// [`thread_exit`]'s work.
fn record_thread_exit(value: *mut libc::c_void) {
    // SAFETY: the key's values are only ever set to 'static ThreadStates.
    let state: &'static ThreadState = unsafe { &*(value as *const ThreadState) };
    let tid = gettid();
    if state.tid.load(Ordering::Acquire) != tid || !state.live.load(Ordering::Acquire) {
        return;
    }
    crate::policy::record_deferred_wait(state);
    state.in_runtime.store(true, Ordering::Relaxed);
    // The program's CPU time since the last sample, before the runtime's own teardown.
    let tail = handler::unsampled_tail(state, thread_cpu_ns());
    crate::policy::abandon_wait(state);
    stop_timer(state);
    flush_thread(state);
    fold_contention(state);
    crate::policy::fold_lock_waits(state);
    // Its failed trylocks and displaced init sites are counted nowhere from now on: its
    // state may go to a new thread.
    crate::locks::acquisition_sampling::set_thread_tries(None);
    crate::locks::acquisition_sampling::set_thread_displaced(None);
    state.init_sites_displaced.fold();
    // Its hold sampling counts not yet handed on, and what its last sampled acquisition
    // counted ahead that did not come (its own thread-local state).
    crate::policy::fold_hold_sampling();
    crate::policy::take_back_acquisitions(None);
    let name = records::thread_name(tid);
    let cpu = thread_cpu_ns();
    ENDED_CPU_NS.fetch_add(cpu, Ordering::Relaxed);
    ENDED_THREADS.fetch_add(1, Ordering::Relaxed);
    records::write(tid, |w| {
        records::thread_end(w, tid, &name, image_cpu(tid, cpu), tail)?;
        counters::encode(w)
    });
    thread_state::detach(state);
}

/// Stops the calling thread's timer. Call on the owner thread with `in_runtime` raised.
pub(crate) fn stop_timer(state: &ThreadState) {
    // SAFETY: the caller raised `in_runtime` on the owner thread.
    let owner = unsafe { &mut *state.owner.get() };
    if let Some(timer) = owner.timer.take() {
        timer.stop(&state.perf_fd);
    }
    state.perf_fd.store(-1, Ordering::Relaxed);
}

/// Adds a thread's count of contended acquisitions (seen and measured, and the waiting that
/// calibrates the sampled ones) to the process's counters: at its end, or at the process's
/// for the threads still alive (whose last few acquisitions may race with the read).
fn fold_contention(state: &ThreadState) {
    let taken = state.contention.take();
    counters::add(Counter::ContendedAcquisitions, taken.seen);
    counters::add(Counter::ContendedMeasured, taken.measured);
    counters::raise(Counter::ContendedPeriodPeak, taken.peak_period);
    counters::add(Counter::ContendedSampledWait, taken.sampled_wait_ns);
    counters::add(Counter::ContendedScaledWait, taken.scaled_wait_ns);
}

fn flush_thread(state: &ThreadState) {
    state.lock_buffer();
    // SAFETY: we hold the buffer lock.
    unsafe { (*state.buffer.get()).flush(state.tid.load(Ordering::Acquire)) };
    state.unlock_buffer();
}

/// Ends this image's part: stop sampling, flush every thread, write counters and the end
/// marker. `reason`: 0 exit, 1 exec. Returns whether it did anything.
pub(crate) fn finish(reason: u8) -> bool {
    if PID.load(Ordering::Relaxed) != sys::getpid() {
        return false; // a vfork child: the state belongs to the parent
    }
    if let Some(state) = thread_state::lookup(gettid()) {
        crate::policy::record_deferred_wait(state);
    }
    if !process::disable() {
        return false;
    }
    counters::set(
        Counter::MonitoredSpinLocksPeak,
        u64::from(crate::locks::spin::monitored_high_water()),
    );
    counters::set(
        Counter::MonitoredWaitObjectsPeak,
        u64::from(crate::locks::wait_table::monitored_high_water()),
    );
    // This thread's hold sampling counts; those the threads still alive have not handed on
    // (at most a millisecond's) are in their own thread-local state, out of reach. So is
    // what their last sampled acquisitions counted ahead: only this thread's is taken back.
    crate::policy::fold_hold_sampling();
    crate::policy::take_back_acquisitions(None);
    let me = gettid();
    // Before the threads' clocks: the live ones run on while they are read.
    let process_cpu = process_cpu_ns();
    let mut ends = Vec::new();
    thread_state::for_each_live(|state| {
        // Another thread's lock wait whose record waits for its hold to end is lost: its
        // path is that thread's to write.
        let deferred = state.deferred_wait_ns.swap(0, Ordering::Relaxed);
        counters::add(Counter::IdlenessUnrecorded, deferred);
        flush_thread(state);
        fold_contention(state);
        // Its contended waits not yet in their rows: at an exec, only this thread's (the
        // others are gone if the exec succeeds, and go on if it fails, to be folded at the
        // exit: folded now as well, they would count twice).
        let tid = state.tid.load(Ordering::Acquire);
        if reason == 0 || tid == me {
            crate::policy::fold_lock_waits(state);
        }
        state.init_sites_displaced.fold();
        let cpu = if tid == me {
            thread_cpu_ns()
        } else {
            other_thread_cpu_ns(tid)
        };
        let tail = handler::unsampled_tail(state, cpu);
        ends.push((tid, records::thread_name(tid), cpu, tail));
    });
    counters::set(
        Counter::LockTablePeak,
        u64::from(crate::locks::lock_table::peak()),
    );
    counters::set(Counter::LockEventsStray, crate::locks::lock_table::strays());
    counters::set(
        Counter::InitSitesDisplaced,
        crate::locks::init_sites::displaced(),
    );
    let known = ENDED_CPU_NS.load(Ordering::Relaxed) + ends.iter().map(|e| e.2).sum::<u64>();
    let unseen = process_cpu
        .saturating_sub(CPU_BASE_NS.load(Ordering::Relaxed))
        .saturating_sub(known);
    let allowed = UNSEEN_MIN_NS + TEARDOWN_CPU_NS * ENDED_THREADS.load(Ordering::Relaxed);
    counters::set(
        Counter::UnseenThreadsCpu,
        if unseen > allowed { unseen } else { 0 },
    );
    counters::set(
        Counter::AcquisitionsUncounted,
        u64::from(!crate::locks::acquisition_sampling::counting()),
    );
    let mut locks = Vec::new();
    crate::locks::lock_table::drain(|l, interval| locks.push((l, interval)));
    records::write_end(me, |w| {
        for (l, interval) in &locks {
            records::lock_stats(w, l)?;
            if let Some(interval) = interval {
                records::lock_interval(w, interval)?;
            }
        }
        for (tid, name, cpu, tail) in &ends {
            records::thread_end(w, *tid, name, image_cpu(*tid, *cpu), *tail)?;
        }
        // After the chunk's buffer is allocated, as the peak it reports always was.
        counters::set(Counter::RuntimeHeapPeak, HEAP.peak_bytes());
        records::process_end(w, reason)
    });
    true
}

/// At process exit (library destructor, or an interposed `_exit`).
pub fn process_exit() {
    finish(0);
}

/// Whether the runtime's descriptors are this process's to guard: false in a `vfork` child
/// (and before start-up), which shares the parent's memory, where they are recorded, but has
/// a descriptor table of its own. Makes a system call: for the rare calls that reach a
/// descriptor of the runtime's.
pub fn guards_descriptors() -> bool {
    PID.load(Ordering::Relaxed) == sys::getpid()
}

/// The program is about to `dup2` or `dup3` onto `fd`, a descriptor of the runtime's: the
/// part, or the perf timer, that has it moves to another number, so the program gets this
/// one as it would without the profiler. Not for a `vfork` child.
///
/// A perf timer's own handler may still refresh it by the old number for one sample (an
/// `ioctl` that any other kind of file refuses): the handler cannot be waited for.
pub fn descriptor_wanted(fd: libc::c_int) {
    output::step_aside(fd);
    thread_state::for_each_live(|s| {
        if s.perf_fd.load(Ordering::Relaxed) == fd {
            let moved = descriptors::step_aside(fd).unwrap_or(-1);
            let swapped =
                s.perf_fd
                    .compare_exchange(fd, moved, Ordering::Relaxed, Ordering::Relaxed);
            match (swapped, moved) {
                (Err(_), m) if m >= 0 => descriptors::close_owned(m), // its timer stopped
                (Ok(_), -1) => counters::add(Counter::TimerFailures, 1),
                _ => {}
            }
        }
    });
}

extern "C" fn fork_prepare() {
    modules::fork_prepare();
    thread_state::fork_prepare();
    // Last: the holders of the locks above may allocate.
    HEAP.fork_prepare();
}

extern "C" fn fork_parent() {
    HEAP.fork_release();
    thread_state::fork_release();
    modules::fork_release();
}

extern "C" fn fork_child() {
    crate::sampler::clock::forget_current_tid();
    crate::locks::hold_sampling::with(|s| s.after_fork());
    crate::locks::wait_table::reset_after_fork();
    crate::locks::arrivals::reset_after_fork();
    crate::locks::lock_table::reset_after_fork();
    crate::unwind::cache_pool::POOL.release_all();
    HEAP.fork_release();
    thread_state::fork_release();
    modules::fork_release();
    if !process::disable() {
        return;
    }
    let Some(cfg) = process::config() else { return };
    // The parent's threads do not exist here; their buffers hold the parent's samples.
    thread_state::for_each_live(|s| {
        let fd = s.perf_fd.swap(-1, Ordering::Relaxed);
        if fd >= 0 {
            // The child's inherited copy of a parent thread's perf descriptor.
            crate::sampler::descriptors::close_owned(fd);
        }
    });
    thread_state::forget_all_but(None);
    counters::reset();
    output::close();
    let Ok(generation) = output::open_part(&cfg.output_dir, cfg.max_part_bytes) else {
        return;
    };
    PID.store(sys::getpid(), Ordering::Relaxed);
    start_cpu_accounting();
    let Some(state) = thread_state::attach(gettid()) else {
        return;
    };
    records::write(gettid(), |w| records::process(w, cfg, generation, source()));
    modules::record_all();
    start_thread_bookkeeping(state, None, 0, true);
    start_timer(state, cfg, source());
    process::enable();
}
