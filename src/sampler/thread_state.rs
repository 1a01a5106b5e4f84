//! Per-thread runtime state, and how the signal handler finds it.
//!
//! Job: give every sampled thread a [`ThreadState`] (sample buffer, path buffers, timer) and
//! map kernel thread ids to states through a flat table the handler can read without locks
//! or thread-local storage (glibc's TLS access may allocate after a `dlopen`, so the handler
//! never uses it).
//!
//! Invariants:
//! - the owner thread touches [`ThreadState::owner`] only with `in_runtime` raised, and the
//!   handler (same thread) backs off when it sees `in_runtime`: the two never overlap;
//! - the sample buffer ([`ThreadState::buffer`]) is touched only by whoever holds
//!   `buffer_busy`: the handler try-acquires it (dropping the sample if taken), other code
//!   spins for it (the handler holds it for a bounded time);
//! - states are never freed, only recycled through the registry, so a pointer read from the
//!   table stays valid memory even if it races with recycling.
//!
//! [`lookup`] is async-signal-safe; the rest is not and runs at thread start/end.

use super::buffer::BufferPart;
use super::clock::current_tid;
use super::timer::Timer;
use super::wake_path::WakePath;
use crate::format::Frame;
use crate::locks::contention_sampling::ContentionSampler;
use crate::locks::held_marks::HeldMarks;
use crate::locks::hold_starts::HoldStarts;
use crate::locks::init_sites::ThreadDisplaced;
use crate::locks::pending_counts::{PendingTries, PendingWaits};
use crate::locks::thinning::{ThinRate, THIN_CLASSES, THIN_UNSTARTED};
use crate::locks::wait_table::{Carry, Wait};
use crate::locks::wake_chain::LastWait;
use crate::runtime_lock::SpinLock;
use crate::unwind::cache_pool::POOL;
use crate::unwind::walk::{frame_array, StackBounds, FRAMES_CAPACITY};
use std::cell::UnsafeCell;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};

/// Data only the owner thread (and its handler) uses.
pub struct OwnerPart {
    pub frames: Box<[Frame; FRAMES_CAPACITY]>,
    pub timer: Option<Timer>,
    /// Where the thread's frames lie: its stack's top and, while its start routine runs,
    /// the runtime's trampoline frame, where its unwinds end.
    pub stack: StackBounds,
    /// The measured wait the thread is blocked in, if any: withdrawn at thread exit when
    /// the thread was cancelled inside it.
    pub wait: Option<Wait>,
    /// The thread's latest futex wait that a wake ended (see `wake_chain`).
    pub last_wait: Option<LastWait>,
    /// The call path of the lock wait the thread is blocked in, unwound before it blocked
    /// (`sync_sample::capture_wait_path`), and its sample flags: `(depth, flags)` of
    /// `wait_frames`.
    pub wait_capture: Option<(usize, u8)>,
    pub wait_frames: Box<[Frame; FRAMES_CAPACITY]>,
    /// The sample flags of the deferred wait record whose value is
    /// [`ThreadState::deferred_wait_ns`] (its path is `wait_capture`).
    pub deferred_wait_flags: u8,
    /// The object of the deferred lock wait record.
    pub deferred_wait_object: usize,
    /// ... and when it ended and how long it lasted (monotonic ns, ns).
    pub deferred_wait_time: (u64, u64),
    /// Its latest event wait that ended without its event, if its deferred record
    /// ([`ThreadState::deferred_wait_ns`]) is that wait's, to carry into its next wait.
    pub carry: Option<Carry>,
    /// How long its latest lock wait (mutex, rwlock) lasted: whether the next one is worth
    /// unwinding before it blocks.
    pub last_lock_wait_ns: u64,
    /// The time inside its registered wait that the thread spent running other work (an
    /// OpenMP task run from inside a barrier): not part of the wait's idleness.
    pub paused_ns: u64,
    /// The rate of the thread's kept short samples, which sets its thinning windows'
    /// length.
    pub thin_rate: ThinRate,
    /// When its current holds of mutexes others wait for began.
    pub holds: HoldStarts,
}

#[allow(clippy::declare_interior_mutable_const)] // only ever copied into a new array
const THIN_CELL: AtomicU64 = AtomicU64::new(THIN_UNSTARTED);
#[allow(clippy::declare_interior_mutable_const)]
const THIN_CELLS: [AtomicU64; THIN_CLASSES] = [THIN_CELL; THIN_CLASSES];

pub struct ThreadState {
    pub tid: AtomicU32,
    /// The owner thread is inside runtime code that uses this state.
    pub in_runtime: AtomicBool,
    /// The owner thread is inside the sampling signal handler.
    pub in_handler: AtomicBool,
    pub buffer_busy: AtomicBool,
    /// Assigned to a live thread (false: on the free list).
    pub live: AtomicBool,
    /// Thread CPU time at the previous sample.
    pub last_cpu_ns: AtomicU64,
    /// The perf counter to refresh after each signal, or -1 (POSIX timer).
    pub perf_fd: AtomicI32,
    /// The thread is blocked in (or spinning on) a contended lock whose wait is measured:
    /// samples taken meanwhile are covered by that measurement and record nothing (but the
    /// first carries the CPU time from before the wait on: `wait_cpu`). Set and cleared
    /// through [`wait_cpu`](super::wait_cpu).
    pub blocked: AtomicBool,
    /// How the current measured wait began, for its first sample (`wait_cpu`).
    pub wait_began_ns: AtomicU64,
    /// CPU time used before measured waits whose samples landed inside them, for the next
    /// work sample (`wait_cpu`).
    pub carried_cpu_ns: AtomicU64,
    /// The thread's count of futex wakes (their `WakerId::seq`), from its attachment's
    /// epoch (high 32 bits, unique per [`attach`]).
    pub wake_seq: AtomicU64,
    /// The idleness (ns) of the thread's latest lock wait, which acquired the lock, when
    /// its record waits for the hold to end (`blameprof_measure::policy::blocked`): the
    /// owner sets it and takes it back by swapping; at the process's end another thread may
    /// take it (and count it unrecorded), so exactly one of them accounts for it. 0: none.
    pub deferred_wait_ns: AtomicU64,
    /// The current thinning window of the thread's synchronous samples, blame
    /// (`[0]`) and idleness (`[1]`), per size class (`locks::thinning::thin_class`): its length,
    /// how far the samples have got into it and its picked point, packed by
    /// `locks::thinning::Window::pack`; or [`THIN_UNSTARTED`]. Owner only.
    pub thinned: [[AtomicU64; THIN_CLASSES]; 2],
    /// The call path of its latest blame-taking futex wake, for the threads it woke.
    pub wake_path: WakePath,
    /// Which of its contended lock acquisitions are measured. Owner only.
    pub contention: ContentionSampler,
    /// Its contended acquisitions not yet in their lock's row.
    pub lock_waits: PendingWaits,
    /// Its failed trylocks not yet in their lock's row (written through its thread pointer:
    /// `locks::acquisition_sampling::thread_tries`).
    pub lock_tries: PendingTries,
    /// Lock inits whose site it could not keep, not yet in the process's count (written
    /// through its thread pointer: `locks::acquisition_sampling::thread_displaced`).
    pub init_sites_displaced: ThreadDisplaced,
    /// Locks others wait for that it may hold (`locks::held_marks`), written by its waiters
    /// and read by its signal handler.
    pub held: HeldMarks,
    pub owner: UnsafeCell<OwnerPart>,
    pub buffer: UnsafeCell<BufferPart>,
}

// SAFETY: the interior-mutable parts are guarded as described in the module doc: `owner` by
// `in_runtime` on the owning thread, `buffer` by `buffer_busy`.
unsafe impl Sync for ThreadState {}

impl ThreadState {
    pub(crate) fn new() -> ThreadState {
        ThreadState {
            tid: AtomicU32::new(0),
            in_runtime: AtomicBool::new(false),
            in_handler: AtomicBool::new(false),
            buffer_busy: AtomicBool::new(false),
            live: AtomicBool::new(false),
            last_cpu_ns: AtomicU64::new(0),
            perf_fd: AtomicI32::new(-1),
            blocked: AtomicBool::new(false),
            wait_began_ns: AtomicU64::new(0),
            carried_cpu_ns: AtomicU64::new(0),
            wake_seq: AtomicU64::new(0),
            deferred_wait_ns: AtomicU64::new(0),
            thinned: [THIN_CELLS, THIN_CELLS],
            wake_path: WakePath::new(),
            contention: ContentionSampler::default(),
            lock_waits: PendingWaits::default(),
            lock_tries: PendingTries::default(),
            init_sites_displaced: ThreadDisplaced::default(),
            held: HeldMarks::new(),
            owner: UnsafeCell::new(OwnerPart {
                frames: frame_array(),
                timer: None,
                stack: StackBounds::default(),
                wait: None,
                last_wait: None,
                wait_capture: None,
                wait_frames: frame_array(),
                deferred_wait_flags: 0,
                deferred_wait_object: 0,
                deferred_wait_time: (0, 0),
                last_lock_wait_ns: 0,
                paused_ns: 0,
                carry: None,
                thin_rate: ThinRate::default(),
                holds: HoldStarts::default(),
            }),
            buffer: UnsafeCell::new(BufferPart::new()),
        }
    }

    /// Tries to take the buffer without waiting. Async-signal-safe.
    pub fn try_lock_buffer(&self) -> bool {
        !self.buffer_busy.swap(true, Ordering::Acquire)
    }

    /// Takes the buffer, spinning while a handler holds it. Not for the handler.
    pub fn lock_buffer(&self) {
        while self.buffer_busy.swap(true, Ordering::Acquire) {
            std::hint::spin_loop();
        }
    }

    pub fn unlock_buffer(&self) {
        self.buffer_busy.store(false, Ordering::Release);
    }
}

/// tid -> state table: one pointer per possible thread id, mapped lazily by the kernel.
struct TidTable {
    slots: AtomicPtr<AtomicPtr<ThreadState>>,
    len: AtomicUsize,
}

static TABLE: TidTable = TidTable {
    slots: AtomicPtr::new(std::ptr::null_mut()),
    len: AtomicUsize::new(0),
};

/// All states ever created (live and free), for flushing at exit and recycling.
static REGISTRY: SpinLock<Vec<&'static ThreadState>> = SpinLock::new(Vec::new());
/// Attachments so far: each one's wake count starts at its number << 32.
static WAKE_EPOCHS: AtomicU64 = AtomicU64::new(1);

/// Maps the tid table. Not async-signal-safe; called once at start-up.
pub fn init_table() -> std::io::Result<()> {
    if !TABLE.slots.load(Ordering::Acquire).is_null() {
        return Ok(());
    }
    let pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .unwrap_or(1 << 22)
        .max(32768);
    let bytes = pid_max * std::mem::size_of::<AtomicPtr<ThreadState>>();
    // SAFETY: an anonymous private mapping; the kernel supplies zero pages on first touch,
    // and a zeroed AtomicPtr is a null pointer.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    TABLE.len.store(pid_max, Ordering::Release);
    TABLE.slots.store(p.cast(), Ordering::Release);
    Ok(())
}

fn slot(tid: u32) -> Option<&'static AtomicPtr<ThreadState>> {
    let slots = TABLE.slots.load(Ordering::Acquire);
    let tid = tid as usize;
    if slots.is_null() || tid >= TABLE.len.load(Ordering::Acquire) {
        return None;
    }
    // SAFETY: `slots` points at a mapping of `len` AtomicPtrs that is never unmapped, and
    // `tid < len`.
    Some(unsafe { &*slots.add(tid) })
}

/// The state of thread `tid`, if it is sampled. Async-signal-safe and wait-free.
pub fn lookup(tid: u32) -> Option<&'static ThreadState> {
    let p = slot(tid)?.load(Ordering::Acquire);
    // SAFETY: non-null table entries point at leaked, never-freed `ThreadState`s.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// Prepares what [`attach`] would need for one more thread, on the calling thread: grows the
/// unwind-cache pool as [`attach`] will (one cache per thread alive at once, up to its limit).
/// Called by the creating thread before `pthread_create`, so that building a cache (8 KiB of
/// stack, see `CachePool::grow_for`) does not touch the new thread's stack pages. Not
/// async-signal-safe.
pub fn prepare_attach() {
    let states = {
        let registry = REGISTRY.lock();
        let recycled = registry.iter().any(|s| !s.live.load(Ordering::Acquire));
        registry.len() + usize::from(!recycled)
    };
    POOL.grow_for(states);
}

/// Gives thread `tid` a state (recycled if possible) and publishes it in the table.
pub fn attach(tid: u32) -> Option<&'static ThreadState> {
    let slot = slot(tid)?;
    let state = {
        let mut registry = REGISTRY.lock();
        let free = registry
            .iter()
            .copied()
            .find(|s| !s.live.load(Ordering::Acquire));
        let state = free.unwrap_or_else(|| {
            let s: &'static ThreadState = Box::leak(Box::new(ThreadState::new()));
            registry.push(s);
            s
        });
        state.live.store(true, Ordering::Release);
        // The most threads alive at once so far: the pool lends one unwind cache to each, up
        // to its limit.
        POOL.grow_for(registry.len());
        state
    };
    state.tid.store(tid, Ordering::Release);
    state.in_runtime.store(false, Ordering::Release);
    state.in_handler.store(false, Ordering::Release);
    state.blocked.store(false, Ordering::Release);
    state.wait_began_ns.store(0, Ordering::Release);
    state.carried_cpu_ns.store(0, Ordering::Release);
    state.deferred_wait_ns.store(0, Ordering::Release);
    // Each attachment counts its wakes from a new epoch, so that a `WakerId` (tid, seq)
    // names one wake of one thread even when the kernel reuses an ended thread's tid.
    state.wake_seq.store(
        WAKE_EPOCHS.fetch_add(1, Ordering::Relaxed) << 32,
        Ordering::Release,
    );
    for cell in state.thinned.iter().flatten() {
        cell.store(THIN_UNSTARTED, Ordering::Relaxed);
    }
    state.contention.reset();
    state.lock_waits.reset();
    state.lock_tries.reset();
    state.held.reset();
    // SAFETY: the state is not yet published, so nothing else can reach its owner part.
    unsafe {
        let owner = &mut *state.owner.get();
        owner.wait = None;
        owner.last_wait = None;
        owner.wait_capture = None;
        owner.last_lock_wait_ns = 0;
        owner.paused_ns = 0;
        owner.carry = None;
        owner.thin_rate = ThinRate::default();
        owner.holds = HoldStarts::default();
    }
    state.lock_buffer();
    // SAFETY: we hold the buffer lock, and the state is not yet published to any handler.
    unsafe { (*state.buffer.get()).reset() };
    state.unlock_buffer();
    slot.store(
        state as *const ThreadState as *mut ThreadState,
        Ordering::Release,
    );
    Some(state)
}

/// Unpublishes `state` from the table and returns it to the free list.
pub fn detach(state: &'static ThreadState) {
    if let Some(slot) = slot(state.tid.load(Ordering::Acquire)) {
        let _ = slot.compare_exchange(
            state as *const ThreadState as *mut ThreadState,
            std::ptr::null_mut(),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }
    let _registry = REGISTRY.lock();
    state.live.store(false, Ordering::Release);
}

/// Runs `f` on every live state. Not async-signal-safe.
pub fn for_each_live(mut f: impl FnMut(&'static ThreadState)) {
    let registry = REGISTRY.lock();
    for s in registry.iter().filter(|s| s.live.load(Ordering::Acquire)) {
        f(s);
    }
}

/// After `fork`, in the child: every state but `keep` belonged to a thread of the parent.
/// They are unpublished and freed for reuse without flushing (their data is the parent's).
/// The registry lock is held across the fork by [`fork_prepare`], so it is consistent here.
pub fn forget_all_but(keep: Option<&'static ThreadState>) {
    let registry = REGISTRY.lock();
    for s in registry.iter() {
        if keep.is_some_and(|k| std::ptr::eq(*s, k)) {
            continue;
        }
        if let Some(slot) = slot(s.tid.load(Ordering::Acquire)) {
            slot.store(std::ptr::null_mut(), Ordering::Release);
        }
        s.buffer_busy.store(false, Ordering::Release);
        s.live.store(false, Ordering::Release);
    }
}

/// `pthread_atfork` prepare: hold the registry so the child inherits it unlocked and whole.
pub fn fork_prepare() {
    REGISTRY.raw_lock();
}

/// `pthread_atfork` parent and child: release what [`fork_prepare`] took.
pub fn fork_release() {
    REGISTRY.raw_unlock();
}

/// Whether the calling thread is inside the sampling signal handler (for the runtime heap's
/// count of handler allocations, and the allocation test's probe). Async-signal-safe.
pub fn in_signal_handler() -> bool {
    lookup(current_tid()).is_some_and(|s| s.in_handler.load(Ordering::Relaxed))
}
