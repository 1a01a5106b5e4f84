//! Glue between the lock logic (`crate::locks`) and the sampler: thread wait states, measured
//! waits, synchronous blame and idleness samples.
//!
//! Job: what the interposed wait functions in `runtime/` call. Fast paths (uncontended
//! acquisitions, releases and wake-ups nobody waits for) touch nothing here but one bucket
//! counter; everything else runs only when a thread actually waited.
//!
//! Every measured wait is recorded as idleness of its [`WaitKind`] at the waiter's context;
//! the time the wait-table hands to a releaser or waker is recorded as blame at that
//! context. A wait that timed out, was interrupted or woke spuriously is recorded as
//! unblamed idleness and counted.
//!
//! Calls made while the thread is inside the runtime (including this glue's own bookkeeping,
//! which a program's signal handler might interrupt with a `sem_post` or `FUTEX_WAKE`) pass
//! straight through unmonitored. Not async-signal-safe (not called from the handler);
//! allocation-free.

use super::clock::{current_tid, monotonic_ns};
use super::counters::{self, Counter};
use super::handler::Sample;
use super::lifecycle::sampling_enabled;
use super::sync_sample::{
    capture_wait_path, record_at_function, record_at_wake, record_captured, record_here,
    record_wake,
};
use super::thread_state::{lookup, ThinRate, ThreadState, THIN_CLASSES, THIN_UNSTARTED};
use super::wake_chain::LastWait;
use crate::format::{protocol, WaitKind, SAMPLE_UNBLAMED};
use crate::locks::spin;
use crate::locks::wait_table::{self as table, BarrierArrival, Departed, Outcome, Wait, WakerId};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Process-shared spin locks: their words are seen by other processes, which could not
/// resolve a monitored reference, so they are never converted.
static SHARED_SPIN_LOCKS: [AtomicUsize; 256] = [const { AtomicUsize::new(0) }; 256];

/// Remembers (`shared`) or forgets a process-shared spin lock's address.
pub fn note_spin_sharing(address: usize, shared: bool) {
    if shared {
        for slot in &SHARED_SPIN_LOCKS {
            if slot
                .compare_exchange(0, address, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return;
            }
        }
        counters::add(Counter::SharedSpinLocksUntracked, 1);
    } else {
        for slot in &SHARED_SPIN_LOCKS {
            let _ = slot.compare_exchange(address, 0, Ordering::AcqRel, Ordering::Acquire);
        }
    }
}

fn spin_is_shared(address: usize) -> bool {
    SHARED_SPIN_LOCKS
        .iter()
        .any(|s| s.load(Ordering::Acquire) == address)
}

/// The sampler's side of the spin-lock protocols.
pub struct SpinGlue {
    pub address: usize,
}

impl spin::SpinHooks for SpinGlue {
    fn active(&self) -> bool {
        sampling_enabled() && !spin_is_shared(self.address)
    }

    fn spin_begins(&self) {
        if let Some(state) = lookup(current_tid()) {
            state.blocked.store(true, Ordering::Relaxed);
        }
    }

    fn spin_ends(&self, ns: u64) {
        if let Some(state) = lookup(current_tid()) {
            state.blocked.store(false, Ordering::Relaxed);
        }
        record(&[idleness(WaitKind::Spin, ns, true)]);
    }

    fn blame(&self, ns: u64) -> bool {
        Kept::of(&[blame(WaitKind::Spin, ns)]).record_here()
    }

    fn now(&self) -> u64 {
        monotonic_ns()
    }
}

fn blame(kind: WaitKind, ns: u64) -> Sample {
    Sample {
        metric: protocol::BLAME.index,
        value: ns,
        flags: kind.flags(),
    }
}

fn idleness(kind: WaitKind, ns: u64, blamed: bool) -> Sample {
    Sample {
        metric: protocol::IDLENESS.index,
        value: ns,
        flags: kind.flags() | if blamed { 0 } else { SAMPLE_UNBLAMED },
    }
}

/// The calling thread's state, unless sampling is off, it has none, or it is inside the
/// runtime.
fn monitored_thread() -> Option<&'static ThreadState> {
    if !sampling_enabled() {
        return None;
    }
    lookup(current_tid()).filter(|s| !s.in_runtime.load(Ordering::Relaxed))
}

/// While alive, the thread counts as inside the runtime: a wait function that a signal
/// handler calls meanwhile passes through unmonitored instead of taking a bucket lock this
/// thread may hold.
struct Bookkeeping(&'static ThreadState);

impl Bookkeeping {
    fn enter(state: &'static ThreadState) -> Bookkeeping {
        state.in_runtime.store(true, Ordering::Relaxed);
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        Bookkeeping(state)
    }
}

impl Drop for Bookkeeping {
    fn drop(&mut self) {
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        self.0.in_runtime.store(false, Ordering::Relaxed);
    }
}

/// Runs `f` as bookkeeping of the calling thread, or not at all (`None`) when the thread is
/// not monitored.
fn bookkeeping<R>(f: impl FnOnce() -> R) -> Option<R> {
    let state = monitored_thread()?;
    let _busy = Bookkeeping::enter(state);
    Some(f())
}

/// The shortest thinning window. Synchronous samples (each one an unwind, 1–2 µs) shorter
/// than their line's window are thinned by stratified sampling: each thread lays the values
/// of its samples end to end, per metric and size class ([`thin_class`]), cuts each line
/// into windows (`THIN_NS` long while its samples carry little waiting, longer past
/// [`THIN_BUDGET_PER_MS`]), and picks one point at random in each window; a sample is kept,
/// carrying the window's length per point it covers. A sample as long as its line's window
/// or longer is kept whole. Every nanosecond of waiting has the same chance of being
/// picked, so every calling context's total is unbiased, as with Go's mutex profile, which
/// keeps each event with probability value / rate; but a context's count varies less (one
/// point per window exactly rather than on average: a millisecond of 300 ns holds showed
/// ±20% with independent coin flips), and, unlike a fixed period, the random point in each
/// window cannot fall into step with a program that repeats the same sequence of waits.
/// The size classes keep the short holds of one function off the line of another's longer
/// ones, so that the first's total is not decided by where the points fall among the
/// second's samples: it is off by at most a window per class and thread. The unwinds stay
/// bounded at about one per `THIN_NS` of waiting however many short waits a hot lock has,
/// and by [`THIN_BUDGET_PER_MS`] however many threads wait.
pub const THIN_NS: u64 = 10_000;

/// About how many windows a thread's samples fill per millisecond: its windows are sized to
/// the waiting it lays ([`rescale`]). A lock that several threads queue on has
/// (threads − 1) seconds of waiting a second to blame, and one unwind per 10 µs of it was
/// most of the cost of such a program (8 threads on one lock: 14× slower, 31 MiB of
/// profile). All samples count, the long ones too: with 5 µs holds and queues of a few
/// threads (`ssca2`), most waits and blames are 10–40 µs, and recording each of them, 30 a
/// millisecond per thread, made 85,000 unwinds and 670 KB of profile in a one-second run.
/// The length of a window is chosen before any of its samples is laid, so totals stay
/// unbiased.
pub const THIN_BUDGET_PER_MS: u64 = 16;

/// Samples laid between two checks of a thread's rate.
const THIN_RATE_EPOCH: u32 = 64;

/// The longest window: `THIN_NS << THIN_MAX_SCALE`, 41 ms.
const THIN_MAX_SCALE: u32 = 12;

/// The samples to record of some samples after thinning (see [`THIN_NS`]).
struct Kept {
    samples: [Sample; 3],
    n: usize,
}

impl Kept {
    fn of(samples: &[Sample]) -> Kept {
        let mut kept = Kept {
            samples: [NO_SAMPLE; 3],
            n: 0,
        };
        let state = lookup(current_tid());
        for s in samples
            .iter()
            .filter(|s| s.value > 0)
            .take(kept.samples.len())
        {
            let value = match state {
                Some(state) => match thinned_value(state, s) {
                    0 => continue,
                    v => v,
                },
                None => s.value,
            };
            kept.samples[kept.n] = Sample { value, ..*s };
            kept.n += 1;
        }
        kept
    }

    fn get(&self) -> &[Sample] {
        &self.samples[..self.n]
    }

    /// Records the kept samples at the caller's context; true when that worked or nothing
    /// was kept.
    fn record_here(&self) -> bool {
        self.n == 0 || record_here(self.get())
    }
}

/// Lays a sample on the thread's line of its metric and size class (see [`THIN_NS`]): the
/// value it is kept with, 0 when it is not. One as long as the line's window or longer is
/// kept whole, off the line.
fn thinned_value(state: &ThreadState, s: &Sample) -> u64 {
    let cell =
        &state.thinned[usize::from(s.metric == protocol::IDLENESS.index)][thin_class(s.value)];
    let window = Window::unpack(cell.load(Ordering::Relaxed)).unwrap_or_else(|| new_window(state));
    let (kept, next) = window.lay(s.value, || new_window(state));
    cell.store(next.pack(), Ordering::Relaxed);
    note_laid(state, s.value);
    kept
}

/// The size class of a sample of `value` ns: its octave from 128 ns up, with all shorter
/// ones in class 0 and all from 2 ms up in the last (`0..THIN_CLASSES`). Stratifying by
/// size is unbiased whatever the classes, as each class is thinned on its own; octaves
/// separate critical sections whose lengths differ by twice or more.
fn thin_class(value: u64) -> usize {
    let octave = (u64::BITS - value.leading_zeros()) as usize;
    octave.saturating_sub(7).min(THIN_CLASSES - 1)
}

/// A new window of the thread's current length, with its point drawn.
fn new_window(state: &ThreadState) -> Window {
    // SAFETY: the owner part, on the owner thread, outside the handler.
    let scale = unsafe { (*state.owner.get()).thin_rate.scale };
    let len = THIN_NS << scale;
    Window {
        pos: 0,
        point: random_below(state, len),
        len,
    }
}

/// Counts a laid sample of `value` ns, and every [`THIN_RATE_EPOCH`] of them sizes the
/// thread's next windows to the waiting laid since the last check ([`rescale`]).
fn note_laid(state: &ThreadState, value: u64) {
    // SAFETY: the owner part, on the owner thread, outside the handler; no other reference
    // to it is live here.
    let rate = unsafe { &mut (*state.owner.get()).thin_rate };
    rate.laid += 1;
    rate.laid_ns = rate.laid_ns.saturating_add(rate_weight(value, rate.scale));
    if rate.laid < THIN_RATE_EPOCH {
        return;
    }
    let now = monotonic_ns();
    let scale = rescale(rate.laid_ns, now.saturating_sub(rate.since));
    if scale > rate.scale {
        counters::raise(Counter::ThinningWindowPeak, THIN_NS << scale);
    }
    *rate = ThinRate {
        scale,
        laid: 0,
        laid_ns: 0,
        since: now,
    };
}

/// How much of a sample of `value` ns counts towards its thread's rate at window scale
/// `scale`: at most two windows. Windows are there to bound the unwinds of short samples;
/// one longer than a window is kept whole and costs one unwind however long it is. Counted
/// whole, a single long one (the blame of a condition variable's signal for a wait of
/// seconds) would stretch the thread's windows to 20 ms or more for an epoch, and its
/// short samples would read 0 or a window; capped, windows still double each epoch while
/// the waiting fills them.
fn rate_weight(value: u64, scale: u32) -> u64 {
    value.min(2 * (THIN_NS << scale))
}

/// The window scale for a thread that laid `laid_ns` of samples in `elapsed` ns: the
/// shortest window (`THIN_NS << scale`, up to [`THIN_MAX_SCALE`]) that this much waiting
/// fills at most [`THIN_BUDGET_PER_MS`] times a millisecond. Samples as long as a window are
/// kept whole, so a thread keeps more than that when most of its waiting comes in samples
/// longer than the window; but windows follow the waiting itself, and so shrink again as
/// soon as it slows. (Sizing them by the samples *kept* instead let a thread whose long
/// waits are kept whole ratchet its windows up to 41 ms; its short waits, thinned at that
/// length, then read 0 or a window: `uts` `push_shared`, 8 ms of short waits, read
/// 0.01–5 ms.)
fn rescale(laid_ns: u64, elapsed: u64) -> u32 {
    let per_window = u128::from(laid_ns) * 1_000_000
        / (u128::from(THIN_BUDGET_PER_MS) * u128::from(elapsed.max(1)));
    (0..THIN_MAX_SCALE)
        .find(|&scale| u128::from(THIN_NS << scale) >= per_window)
        .unwrap_or(THIN_MAX_SCALE)
}

/// A thinning window: its length, how far into it the samples have got, and its picked
/// point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Window {
    pos: u64,
    point: u64,
    len: u64,
}

impl Window {
    /// The window a thread's `thinned` cell holds, `None` before the first sample.
    fn unpack(packed: u64) -> Option<Window> {
        (packed != THIN_UNSTARTED).then_some(Window {
            pos: packed & 0xFFFF_FFFF,
            point: packed >> 32 & 0x0FFF_FFFF,
            len: THIN_NS << (packed >> 60),
        })
    }

    /// The form a thread's `thinned` cell holds: the length's scale in the top 4 bits, the
    /// point (under 2^28: the longest window is 41 ms) and the position.
    fn pack(self) -> u64 {
        let scale = u64::from((self.len / THIN_NS).trailing_zeros());
        scale << 60 | self.point << 32 | self.pos
    }

    /// Whether this window's point lies in `pos..end` (`end` at most its length).
    fn covers(self, end: u64) -> bool {
        self.pos <= self.point && self.point < end
    }

    /// Whether a sample of `value` laid now may be kept: it covers this window's point or
    /// reaches the next window, whose point is not drawn yet.
    fn may_keep(self, value: u64) -> bool {
        let end = self.pos + value;
        end >= self.len || self.covers(end)
    }

    /// Lays `value` from `pos`: the value kept for the points it covers, and the window after
    /// it (`next` gives a new one). A value as long as this window or longer is not laid but
    /// kept whole (laying it could cover more than the next window, whose length would then
    /// have to be known in advance).
    fn lay(self, value: u64, next: impl FnOnce() -> Window) -> (u64, Window) {
        if value >= self.len {
            return (value, self);
        }
        let end = self.pos + value;
        let mut kept = if self.covers(end.min(self.len)) {
            self.len
        } else {
            0
        };
        if end < self.len {
            return (kept, Window { pos: end, ..self });
        }
        let next = next();
        let pos = end - self.len;
        if next.point < pos {
            kept += next.len;
        }
        (kept, Window { pos, ..next })
    }
}

/// A uniformly random offset in `0..len`.
fn random_below(state: &ThreadState, len: u64) -> u64 {
    let seed = u64::from(state.tid.load(Ordering::Relaxed)) << 32 ^ monotonic_ns();
    // splitmix64's finaliser: consecutive seeds give unrelated offsets.
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) % len
}

const NO_SAMPLE: Sample = Sample {
    metric: 0,
    value: 0,
    flags: 0,
};

/// Records samples (thinned) at the caller's context, or counts what could not be recorded.
fn record(samples: &[Sample]) {
    let kept = Kept::of(samples);
    count_unrecorded(&kept, kept.record_here());
}

/// Counts the idleness of kept samples that could not be recorded (`recorded` false).
fn count_unrecorded(kept: &Kept, recorded: bool) {
    if !recorded {
        for s in kept
            .get()
            .iter()
            .filter(|s| s.metric == protocol::IDLENESS.index)
        {
            counters::add(Counter::IdlenessUnrecorded, s.value);
        }
    }
}

/// Whether a release or event on the object of `kind` at `address` may have something to
/// settle: false (one or two counter reads) means it has nothing to do. It does not ask
/// whether sampling is enabled, to keep that load off every lock operation: nothing is
/// pending before it is, and what is left when it stops is dropped by [`bookkeeping`],
/// which every path that this lets through goes to.
#[inline(always)]
pub fn may_be_pending(address: usize, kind: WaitKind) -> bool {
    table::maybe_dirty(address, kind)
}

/// Runs `f` as bookkeeping when something may be pending on `address` (one counter read
/// otherwise) and the thread is monitored.
#[inline(always)]
fn pending<R>(address: usize, kind: WaitKind, f: impl FnOnce() -> Option<R>) -> Option<R> {
    if !may_be_pending(address, kind) {
        return None;
    }
    bookkeeping(f).flatten()
}

/// Gives back blame that could not be recorded, so the object's next release or event takes
/// it (`still_held`: the release failed and the hold goes on).
fn give_back(address: usize, kind: WaitKind, ns: u64, still_held: bool) {
    if bookkeeping(|| table::unsettle(address, kind, ns, still_held)).is_none() {
        counters::add(Counter::BlameUnsettled, ns);
    }
}

/// Records blame (thinned) at the caller's context, or gives it back.
fn charge(address: usize, kind: WaitKind, ns: u64) {
    if !Kept::of(&[blame(kind, ns)]).record_here() {
        give_back(address, kind, ns, false);
    }
}

/// Counts a wait that nobody is blamed for.
fn count_unblamed(departed: Departed) {
    let counter = match departed {
        Departed::TimedOut => Counter::WaitsTimedOut,
        Departed::Interrupted => Counter::WaitsInterrupted,
        Departed::Spurious => Counter::WaitsSpurious,
        Departed::Blamed { .. } | Departed::NoWait => return,
    };
    counters::add(counter, 1);
}

/// A registered wait in progress: the thread is blocked, and samples its timer takes
/// meanwhile record nothing (the measurement covers the time).
struct Blocked {
    state: &'static ThreadState,
    wait: Wait,
    /// A futex wait: remembered as the thread's last one when a wake ends it.
    futex: bool,
}

/// Registers the calling thread as waiting on `address` (`None`: not monitored, or a wait
/// nested in another one, from a signal handler).
fn begin_wait(address: usize, kind: WaitKind) -> Option<Blocked> {
    let (state, start) = start_wait()?;
    register_wait(state, address, kind, start)
}

/// The calling thread and the start of its wait.
fn start_wait() -> Option<(&'static ThreadState, u64)> {
    let state = monitored_thread()?;
    // SAFETY: reading the owner part's wait on the owner thread, outside the handler.
    if unsafe { (*state.owner.get()).wait.is_some() } {
        return None;
    }
    Some((state, monotonic_ns()))
}

/// Registers the calling thread, which started waiting at `start`, with `address`.
fn register_wait(
    state: &'static ThreadState,
    address: usize,
    kind: WaitKind,
    start: u64,
) -> Option<Blocked> {
    let wait = {
        let _busy = Bookkeeping::enter(state);
        table::arrive(address, kind, start)
    };
    let Some(wait) = wait else {
        counters::add(Counter::WaitsUnmonitored, 1);
        return None;
    };
    Some(Blocked::new(state, wait, kind))
}

impl Blocked {
    fn new(state: &'static ThreadState, wait: Wait, kind: WaitKind) -> Blocked {
        {
            let _busy = Bookkeeping::enter(state);
            // SAFETY: on the owner thread with `in_runtime` raised (thread_state's rule).
            unsafe { (*state.owner.get()).wait = Some(wait) };
        }
        state.blocked.store(true, Ordering::Relaxed);
        Blocked {
            state,
            wait,
            futex: kind == WaitKind::Futex,
        }
    }

    /// Ends the wait: (end time, how it is accounted).
    fn end(self, outcome: Outcome) -> (u64, Departed) {
        let end = monotonic_ns();
        self.end_at(outcome, end, end)
    }

    /// Ends the wait, which ended at `end`, with its departure from the object at
    /// `depart_at`: (end, how it is accounted).
    fn end_at(self, outcome: Outcome, end: u64, depart_at: u64) -> (u64, Departed) {
        self.state.blocked.store(false, Ordering::Relaxed);
        let _busy = Bookkeeping::enter(self.state);
        // SAFETY: as in `new`.
        unsafe { (*self.state.owner.get()).wait = None };
        let departed = table::depart(self.wait, depart_at, outcome);
        count_unblamed(departed);
        if let (
            Departed::Blamed {
                woken_at, waker, ..
            },
            true,
        ) = (departed, self.futex)
        {
            // SAFETY: as in `new`.
            let owner = unsafe { &mut *self.state.owner.get() };
            let wakes = self.state.wake_seq.load(Ordering::Relaxed);
            owner.last_wait = Some(LastWait::after(
                owner.last_wait,
                self.wait.address,
                self.wait.start_ns,
                woken_at,
                waker,
                wakes,
            ));
        }
        (end, departed)
    }

    /// Ends the wait and records it as idleness of `kind` at the caller's context (at the
    /// path captured before it blocked, if any).
    fn finish(self, kind: WaitKind, outcome: Outcome) {
        let start = self.wait.start_ns;
        let (state, futex) = (self.state, self.futex);
        if table::is_hold_kind(kind) && outcome == Outcome::Success {
            // It holds the lock now: write the record first and only then start the hold
            // (others' waiting accrues to it from its departure), as the program, which
            // sees the hold begin when the call returns, would count it. Most short waits
            // are thinned away: then the hold starts at the wait's end (one clock read
            // fewer inside the program's critical section).
            let end = monotonic_ns();
            let waited = end.saturating_sub(start);
            let wrote = record_wait(state, &[idleness(kind, waited, true)]);
            {
                let _busy = Bookkeeping::enter(state);
                // SAFETY: on the owner thread with `in_runtime` raised (thread_state's rule).
                unsafe { (*state.owner.get()).last_lock_wait_ns = waited };
            }
            self.end_at(outcome, end, if wrote { monotonic_ns() } else { end });
            return;
        }
        let (end, departed) = self.end(outcome);
        let blamed = matches!(departed, Departed::Blamed { .. });
        let waited = if departed != Departed::NoWait {
            end.saturating_sub(start)
        } else {
            0
        };
        record_wait(state, &[idleness(kind, waited, blamed)]);
        if futex && blamed {
            resumed(state);
        }
    }
}

/// Whether to unwind before a lock wait blocks: when its sample will probably be kept, as
/// the thread's last lock wait would be (see [`THIN_NS`]).
fn worth_capturing(state: &ThreadState) -> bool {
    // SAFETY: reading the owner part on the owner thread, outside the handler.
    let last = unsafe { (*state.owner.get()).last_lock_wait_ns };
    let cell = &state.thinned[1][thin_class(last)];
    match Window::unpack(cell.load(Ordering::Relaxed)) {
        Some(window) => window.may_keep(last),
        None => true,
    }
}

/// Records a wait's samples (thinned) at the path captured before it blocked, or at the
/// caller's context; counts what could not be recorded. Whether any sample was kept (and
/// so took the time of a record or an unwind).
fn record_wait(state: &ThreadState, samples: &[Sample]) -> bool {
    // SAFETY: reading the owner part on the owner thread, outside the handler.
    let captured = unsafe { (*state.owner.get()).wait_capture.is_some() };
    let kept = Kept::of(samples);
    let recorded = if captured {
        // Called even with nothing kept: it forgets the captured path.
        record_captured(kept.get()) || kept.get().is_empty()
    } else {
        kept.record_here()
    };
    count_unrecorded(&kept, recorded);
    kept.n > 0
}

/// After a blamed futex wait and its record: for the wake chain, the wait lasted until the
/// thread is back in the program. Its wake-up latency and this bookkeeping are waiting, to
/// the thread it wakes next, not a hold of the lock it was woken for.
fn resumed(state: &'static ThreadState) {
    let _busy = Bookkeeping::enter(state);
    // SAFETY: on the owner thread with `in_runtime` raised (thread_state's rule).
    let owner = unsafe { &mut *state.owner.get() };
    if let Some(last) = owner.last_wait.as_mut() {
        last.resumed_ns = last.resumed_ns.max(monotonic_ns());
    }
}

/// How a pthread-style return code ends a wait.
pub fn outcome_of_rc(rc: i32) -> Outcome {
    match rc {
        0 | libc::EOWNERDEAD => Outcome::Success,
        libc::ETIMEDOUT => Outcome::TimedOut,
        libc::EINTR => Outcome::Interrupted,
        _ => Outcome::NoWait,
    }
}

/// How a `-1`/`errno` style return ends a wait (`errno` read right after the call).
pub fn outcome_of_errno(rc: i64, errno: i32) -> Outcome {
    if rc != -1 {
        return Outcome::Success;
    }
    match errno {
        libc::ETIMEDOUT => Outcome::TimedOut,
        libc::EINTR => Outcome::Interrupted,
        _ => Outcome::NoWait,
    }
}

fn errno() -> i32 {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() }
}

fn set_errno(value: i32) {
    // SAFETY: as in `errno`.
    unsafe { *libc::__errno_location() = value };
}

/// A blocking wait on the object at `address` (a contended acquisition, or a wait for an
/// event): `block` performs the real call and `outcome` classifies its result. Measures the
/// wait, registers it with the object for the blame, and records it as idleness. Preserves
/// the call's `errno`.
pub fn wait<R: Copy>(
    address: usize,
    kind: WaitKind,
    block: impl FnOnce() -> R,
    outcome: impl FnOnce(R, i32) -> Outcome,
) -> R {
    let Some(blocked) = begin_wait(address, kind) else {
        return block();
    };
    if table::is_hold_kind(kind) && worth_capturing(blocked.state) {
        // The lock is held by another thread: unwinding now costs this thread's waiting
        // rather than its coming hold.
        capture_wait_path();
    }
    let rc = block();
    let saved = errno();
    blocked.finish(kind, outcome(rc, saved));
    set_errno(saved);
    rc
}

/// An acquisition that did not wait (a successful try): tells an object others wait for that
/// it is held again. One counter read when nobody waits.
#[inline(always)]
pub fn acquired(address: usize, kind: WaitKind) {
    acquired_if(address, kind, || true);
}

/// [`acquired`] for an acquisition that `starts_hold` tells, asked only when others may wait
/// (so the fast path stays one counter read).
#[inline(always)]
pub fn acquired_if(address: usize, kind: WaitKind, starts_hold: impl FnOnce() -> bool) {
    if may_be_pending(address, kind) && starts_hold() {
        acquired_pending(address, kind);
    }
}

#[cold]
#[inline(never)]
fn acquired_pending(address: usize, kind: WaitKind) {
    bookkeeping(|| table::acquired(address, kind, monotonic_ns));
}

/// A release by a holder (`unlock`: the real call; it failed unless it returns 0):
/// takes the holder's blame just before it, records it at the caller's context after it.
/// `still_held`: other holders keep the object held (rwlock readers).
pub fn release(
    address: usize,
    kind: WaitKind,
    still_held: bool,
    unlock: impl FnOnce() -> i32,
) -> i32 {
    let settled = if may_be_pending(address, kind) {
        // The hold ends now, not after the bookkeeping that takes its blame (a hold of a
        // few hundred ns would grow by a fifth).
        let now = monotonic_ns();
        bookkeeping(|| table::settle(address, kind, || now, still_held)).flatten()
    } else {
        None
    };
    let rc = unlock();
    match settled {
        // The caller did not release it (e.g. EPERM): the owner's hold goes on.
        Some(taken) if rc != 0 => give_back(address, kind, taken, true),
        Some(taken) => charge(address, kind, taken),
        None => {}
    }
    rc
}

/// An event on the object at `address` that wakes up to `n` waiters (a post, a futex wake):
/// `op` performs it and `ok` says whether it succeeded (not asked of a futex wake, whose
/// blame is recorded before it: [`futex_wake`]). The waiting since the previous event
/// is taken just before and recorded as blame at the caller's context — except, for a
/// futex's only waiter, the part that overlaps the caller's own last futex wait, which is
/// charged to whoever woke the caller (`wake_chain`).
pub fn event<R: Copy>(
    address: usize,
    kind: WaitKind,
    n: u32,
    op: impl FnOnce() -> R,
    ok: impl FnOnce(R) -> bool,
) -> R {
    let woke = pending(address, kind, || {
        let state = lookup(current_tid())?;
        let seq = state.wake_seq.fetch_add(1, Ordering::Relaxed) + 1;
        let me = WakerId {
            tid: state.tid.load(Ordering::Relaxed),
            seq,
        };
        let now = monotonic_ns();
        let woke = table::wake(address, kind, || now, n, me)?;
        // SAFETY: on the owner thread with `in_runtime` raised (we are in bookkeeping).
        let last = unsafe { (*state.owner.get()).last_wait };
        Some((woke, state, seq, now, last))
    });
    let Some((woke, state, seq, now, last)) = woke.filter(|w| w.0.taken > 0) else {
        return op();
    };
    if kind == WaitKind::Futex {
        return futex_wake(address, woke, state, seq, now, last, op);
    }
    let rc = op();
    let saved = errno();
    if ok(rc) {
        charge(address, kind, woke.taken);
    } else {
        give_back(address, kind, woke.taken, false);
    }
    set_errno(saved);
    rc
}

/// [`event`] for a futex wake (`op`), wake `seq` of the calling thread (`state`), that took
/// `woke` at `now`, the thread's own last futex wait being `last`. Its blame is recorded, and the
/// path published for the threads it wakes (`wake_chain`), *before* the wake: a woken thread
/// can run, take the lock, and wake the next waiter before its waker is back from the
/// system call (on this 2-CPU VM, 90 µs later in one `rust_std` run), and without the path
/// it charged the next waiter's whole wait to itself. The blame of a wake that then fails
/// (a bad address) stays recorded at it.
fn futex_wake<R: Copy>(
    address: usize,
    woke: table::Woke,
    state: &ThreadState,
    seq: u64,
    now: u64,
    last: Option<LastWait>,
    op: impl FnOnce() -> R,
) -> R {
    let kind = WaitKind::Futex;
    // The part of a lone waiter's wait during this thread's own last futex wait.
    let inherited = match (woke.solo_since, last) {
        (Some(since), Some(last)) => last.overlap(since, now).min(woke.taken),
        _ => 0,
    };
    let inherited = match last {
        Some(last) if inherited > 0 => {
            let kept = Kept::of(&[blame(kind, inherited)]);
            match kept.get() {
                [sample] if !record_at_wake(last.by, *sample) => 0,
                _ => inherited,
            }
        }
        _ => 0,
    };
    let own = woke.taken - inherited;
    let kept = Kept::of(&[blame(kind, own)]);
    let recorded = match kept.get() {
        [] => {
            // No path for the threads this wake wakes either: they keep their waits.
            state.wake_path.publish(seq, &[]);
            true
        }
        samples => record_wake(samples, seq),
    };
    let rc = op();
    if !recorded {
        let saved = errno();
        give_back(address, kind, own, false);
        set_errno(saved);
    }
    rc
}

/// Whether the mutex at `address` is held (glibc x86-64: the owner's tid at byte 8, set for
/// every mutex type while it is locked).
///
/// # Safety
/// `address` must point at a valid, initialised `pthread_mutex_t`.
unsafe fn mutex_is_held(address: usize) -> bool {
    // SAFETY: `__owner` lies within the 40-byte mutex the caller vouches for.
    unsafe { std::ptr::read_volatile((address + 8) as *const i32) != 0 }
}

/// `pthread_cond_wait`/`timedwait` of `cond` with `mutex` held: `block` is the real call.
/// The caller's hold of `mutex` ends inside it (its blame is taken there and recorded at
/// this context after the wait); its wait for the signal is condvar idleness, blamed on the
/// signaller; its wait to retake the mutex afterwards is mutex idleness, blamed on the
/// mutex's holder.
///
/// # Safety
/// `mutex` must point at a valid, initialised `pthread_mutex_t` held by the caller.
pub unsafe fn cond_wait(cond: usize, mutex: usize, block: impl FnOnce() -> i32) -> i32 {
    let Some((state, start)) = start_wait() else {
        return block();
    };
    // The hold of `mutex` ends in the real call, which releases it outside the wrappers:
    // its blame is taken now, and recorded at this call's path after the wait.
    let held = pending(mutex, WaitKind::Mutex, || {
        table::settle(mutex, WaitKind::Mutex, monotonic_ns, false)
    })
    .unwrap_or(0);
    let Some(blocked) = register_wait(state, cond, WaitKind::CondVar, start) else {
        let rc = block();
        if held > 0 {
            record(&[blame(WaitKind::Mutex, held)]);
        }
        return rc;
    };
    bookkeeping(|| table::set_partner(cond, mutex));
    let rc = block();
    let (end, departed) = blocked.end(outcome_of_rc(rc));
    let (cond_ns, mutex_ns, blamed) = match departed {
        Departed::NoWait => (0, 0, true),
        Departed::Blamed { woken_at, .. } => (
            woken_at.saturating_sub(start),
            end.saturating_sub(woken_at),
            true,
        ),
        _ => (end.saturating_sub(start), 0, false),
    };
    let samples = [
        blame(WaitKind::Mutex, held),
        idleness(WaitKind::CondVar, cond_ns, blamed),
        idleness(WaitKind::Mutex, mutex_ns, true),
    ];
    record(&samples);
    // It holds the mutex again: waiter-time of others accrues to this new hold from now,
    // after the record (the program sees its hold begin when the call returns).
    let now = monotonic_ns();
    bookkeeping(|| match departed {
        Departed::Blamed {
            mutex_wait: true, ..
        } => table::depart_proxy(mutex, now),
        _ => table::acquired(mutex, WaitKind::Mutex, || now),
    });
    rc
}

/// `pthread_cond_signal` (`n` = 1) or `broadcast` (all) of `cond`: `op` is the real call.
/// The signaller takes the waiting since the previous signal; the waiters it wakes are
/// registered as waiting for their mutex, whose holder (usually the signaller) is blamed for
/// that part.
pub fn cond_wake(cond: usize, n: u32, op: impl FnOnce() -> i32) -> i32 {
    let taken = pending(cond, WaitKind::CondVar, || {
        // SAFETY: the partner is the mutex the condition's waiters passed to
        // pthread_cond_wait, which stays valid while they wait on it.
        table::wake_with_proxies(cond, monotonic_ns, n, |m| unsafe { mutex_is_held(m) })
    });
    let rc = op();
    if let Some(taken) = taken {
        charge(cond, WaitKind::CondVar, taken);
    }
    rc
}

/// `pthread_barrier_init`: remember the barrier's size.
pub fn barrier_init(address: usize, parties: u32) {
    forget(address);
    table::barrier_init(address, parties);
}

/// `pthread_barrier_wait`: `block` is the real call. The last thread to arrive takes the
/// others' waiting, recorded as blame at its context; the others' wait is their idleness.
pub fn barrier_wait(address: usize, block: impl FnOnce() -> i32) -> i32 {
    let Some(state) = monitored_thread() else {
        return block();
    };
    let arrival = {
        let _busy = Bookkeeping::enter(state);
        table::barrier_arrive(address, monotonic_ns())
    };
    match arrival {
        BarrierArrival::Wait(wait) => {
            let blocked = Blocked::new(state, wait, WaitKind::Barrier);
            let rc = block();
            let ok = rc == 0 || rc == libc::PTHREAD_BARRIER_SERIAL_THREAD;
            blocked.finish(
                WaitKind::Barrier,
                if ok {
                    Outcome::Success
                } else {
                    Outcome::NoWait
                },
            );
            rc
        }
        BarrierArrival::Last(taken) => {
            let rc = block();
            record(&[blame(WaitKind::Barrier, taken)]);
            rc
        }
        BarrierArrival::Unknown => block(),
    }
}

/// A thread is ending: whoever waits to join it (`thread`: its `pthread_t`) was waiting for
/// this. The blame is recorded at the caller's context (`pthread_exit`), or, when the thread
/// returned from its start routine, at `routine`.
pub fn thread_exiting(thread: usize, routine: Option<usize>) {
    let woke = pending(thread, WaitKind::Join, || {
        table::wake(
            thread,
            WaitKind::Join,
            monotonic_ns,
            u32::MAX,
            WakerId::default(),
        )
    });
    let Some(taken) = woke.map(|w| w.taken) else {
        return;
    };
    if taken == 0 {
        return;
    }
    let sample = [blame(WaitKind::Join, taken)];
    let recorded = match routine {
        Some(routine) => record_at_function(&sample, routine),
        None => record_here(&sample),
    };
    if !recorded {
        counters::add(Counter::BlameUnsettled, taken);
    }
}

/// At the exit of a thread cancelled inside a measured wait (the wait never returned): the
/// wait ends now, interrupted, and nobody is blamed. Call on the owner thread with
/// `in_runtime` raised.
pub fn abandon_wait(state: &ThreadState) {
    // SAFETY: per the contract, on the owner thread with `in_runtime` raised.
    let wait = unsafe { (*state.owner.get()).wait.take() };
    if let Some(wait) = wait {
        state.blocked.store(false, Ordering::Relaxed);
        count_unblamed(table::depart(wait, monotonic_ns(), Outcome::Interrupted));
    }
}

/// `pthread_*_init`/`destroy`: the object at `address` starts afresh.
pub fn forget(address: usize) {
    let unsettled = table::forget(address);
    if unsettled > 0 {
        counters::add(Counter::BlameUnsettled, unsettled);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new window of `THIN_NS << scale`, its point from a test's own xorshift generator.
    fn window(rng: &mut u64, scale: u32) -> Window {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        let len = THIN_NS << scale;
        Window {
            pos: 0,
            point: *rng % len,
            len,
        }
    }

    /// Thins a repeating sequence of waits of `lengths` ns, `rounds` times, as a thread
    /// does: on the line `line_of` gives each length, the n-th new window of all
    /// `THIN_NS << scales(n)` long. The kept total of each position in the sequence.
    fn thin(
        lengths: &[u64],
        rounds: usize,
        seed: u64,
        line_of: fn(u64) -> usize,
        mut scales: impl FnMut(usize) -> u32,
    ) -> Vec<u64> {
        let mut rng = seed | 1;
        let mut windows = 0;
        let mut new_window = |rng: &mut u64| {
            let w = window(rng, scales(windows));
            windows += 1;
            w
        };
        let mut lines: [Option<Window>; THIN_CLASSES] = [None; THIN_CLASSES];
        let mut kept = vec![0; lengths.len()];
        for _ in 0..rounds {
            for (i, &v) in lengths.iter().enumerate() {
                let line = &mut lines[line_of(v)];
                let current = line.unwrap_or_else(|| new_window(&mut rng));
                let (value, next) = current.lay(v, || new_window(&mut rng));
                kept[i] += value;
                *line = Some(next);
            }
        }
        kept
    }

    /// [`thin`] on one line of 10 µs windows.
    fn thin_sequence(lengths: &[u64], rounds: usize, seed: u64) -> Vec<u64> {
        thin(lengths, rounds, seed, |_| 0, |_| 0)
    }

    #[test]
    fn thinning_is_unbiased_even_for_a_sequence_in_step_with_the_window() {
        // 2 µs + 8 µs = one window per round: a fixed period would give either function
        // all of it or nothing, depending on where it started.
        for seed in [1, 2, 3, 99] {
            let kept = thin_sequence(&[2_000, 8_000], 10_000, seed);
            let (a, b) = (kept[0] as f64, kept[1] as f64);
            assert!(
                (a / 20e6 - 1.0).abs() < 0.05,
                "seed {seed}: 2 µs waits kept {a}"
            );
            assert!(
                (b / 80e6 - 1.0).abs() < 0.02,
                "seed {seed}: 8 µs waits kept {b}"
            );
        }
    }

    #[test]
    fn windows_of_varying_length_keep_totals_unbiased() {
        // Lengths from 10 to 320 µs, changing from window to window (as the rate budget
        // does, before any sample of the window is laid).
        for seed in [5, 6, 7] {
            let scales = |n: usize| [0, 3, 1, 5][n % 4];
            let kept = thin(&[2_000, 8_000, 500], 1_000_000, seed, |_| 0, scales);
            let truth = [2e9, 8e9, 0.5e9];
            for (k, t) in kept.iter().zip(truth) {
                let err = *k as f64 / t - 1.0;
                assert!(err.abs() < 0.06, "seed {seed}: kept {k} of {t}");
            }
        }
    }

    #[test]
    fn windows_follow_the_waiting_laid() {
        let ms = 1_000_000;
        // 16 windows of 10 µs a millisecond: the shortest window.
        assert_eq!(rescale(160_000, ms), 0);
        assert_eq!(rescale(320_000, ms), 1);
        // A thread blocked all the time: 1 ms a millisecond, 62.5 µs a window -> 80 µs.
        assert_eq!(rescale(4 * ms, 4 * ms), 3);
        // Whatever came before, little waiting means short windows again.
        assert_eq!(rescale(10_000, 100 * ms), 0);
        assert_eq!(rescale(0, 0), 0);
        assert_eq!(rescale(u64::MAX, 1), THIN_MAX_SCALE);
        assert_eq!(THIN_NS << THIN_MAX_SCALE, 40_960_000);
    }

    #[test]
    fn one_long_sample_does_not_stretch_the_windows() {
        let ms = 1_000_000;
        // An epoch of 63 short samples and one blame of 2 s, over 10 ms.
        let laid = |scale| 63 * 5_000 + rate_weight(2_000 * ms, scale);
        assert_eq!(rescale(laid(0), 10 * ms), 0);
        // Counted whole, it would stretch them to 20 ms.
        assert_eq!(rescale(63 * 5_000 + 2_000 * ms, 10 * ms), 11);
        // Samples longer than the window still let it grow, an octave an epoch.
        let all_long = |scale| 64 * rate_weight(40_000, scale);
        assert_eq!(rescale(all_long(0), 4 * ms), 1);
        assert_eq!(rescale(all_long(1), 4 * ms), 2);
        assert_eq!(rate_weight(7_000, 0), 7_000);
    }

    #[test]
    fn samples_as_long_as_the_window_are_kept_whole_among_thinned_ones() {
        // ssca2's pattern: waits on both sides of the window's length, on one line.
        for seed in [11, 12, 13] {
            let kept = thin(&[4_000, 25_000, 9_000, 10_000], 100_000, seed, |_| 0, |_| 0);
            assert_eq!(kept[1], 25_000 * 100_000, "seed {seed}");
            assert_eq!(kept[3], 10_000 * 100_000, "seed {seed}");
            for (k, t) in [(kept[0], 4e8), (kept[2], 9e8)] {
                assert!(
                    (k as f64 / t - 1.0).abs() < 0.02,
                    "seed {seed}: kept {k} of {t}"
                );
            }
        }
        let w = Window {
            pos: 3,
            point: 5,
            len: THIN_NS,
        };
        assert_eq!(w.lay(THIN_NS, || unreachable!()), (THIN_NS, w));
    }

    #[test]
    fn a_window_packs_with_its_length() {
        for scale in [0, 1, 7, THIN_MAX_SCALE] {
            let len = THIN_NS << scale;
            let w = Window {
                pos: len - 1,
                point: len - 1,
                len,
            };
            assert_eq!(Window::unpack(w.pack()), Some(w));
            assert_ne!(w.pack(), THIN_UNSTARTED);
        }
    }

    #[test]
    fn size_classes_are_octaves_from_128_ns() {
        assert_eq!(thin_class(0), 0);
        assert_eq!(thin_class(127), 0);
        assert_eq!(thin_class(128), 1);
        assert_eq!(thin_class(300), 2);
        assert_eq!(thin_class(4_095), 5);
        assert_eq!(thin_class(8_192), 7);
        assert_eq!(thin_class(THIN_NS - 1), 7);
        assert_eq!(thin_class(2_097_151), 14);
        assert_eq!(thin_class(2_097_152), THIN_CLASSES - 1);
        assert_eq!(thin_class(u64::MAX), THIN_CLASSES - 1);
    }

    #[test]
    fn short_holds_among_longer_ones_are_counted_to_within_a_window() {
        // syncperf_fine's pattern: 300 ns holds, 1 ms of them, among 5 µs ones of another
        // function. On one line, where the points fell among the 5 µs samples decided the
        // 300 ns function's count (a standard error of ~8% here); on a line of its own its
        // count is exact to one window.
        for seed in 1..40 {
            let kept = thin(&[300, 5_000, 300, 300], 1_111, seed, thin_class, |_| 0);
            let short = kept[0] + kept[2] + kept[3];
            assert!(
                short.abs_diff(3 * 300 * 1_111) <= THIN_NS,
                "seed {seed}: 300 ns holds kept {short}"
            );
            assert!(
                kept[1].abs_diff(5_000 * 1_111) <= THIN_NS,
                "seed {seed}: 5 µs holds kept {}",
                kept[1]
            );
        }
    }

    #[test]
    fn thinning_keeps_about_one_sample_per_window_of_short_waits() {
        // 300 ns waits, 1 ms of them: 100 windows, so 100 kept, ±0 (stratified).
        let kept = thin_sequence(&[300], 3_334, 7);
        let total: u64 = kept.iter().sum();
        assert!(total.abs_diff(1_000_200) <= THIN_NS, "{total}");
    }
}
