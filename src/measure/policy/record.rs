//! Recording what the lock policy measured: thinning short synchronous samples, building
//! idleness and blame samples, and giving back blame that could not be recorded.
//!
//! Job: [`Kept::of`] lays each sample on the calling thread's thinning lines
//! (`locks::thinning`) and keeps what the windows' points pick; [`record`] and [`charge`]
//! record the kept samples at the caller's context through the sampler (one unwind);
//! [`give_back`] returns blame to the object's next release when that fails, so no waiting
//! is lost silently (what cannot be given back is counted).
//!
//! Invariants: thinning state is touched only by its owner thread, outside the handler.
//! Not async-signal-safe (not called from the handler); allocation-free.

use super::bookkeeping::bookkeeping;
use crate::format::{protocol, WaitKind, SAMPLE_SCALED, SAMPLE_UNBLAMED};
use crate::locks::thinning::{
    rate_weight, rescale, thin_class, ThinRate, Window, THIN_NS, THIN_RATE_EPOCH,
};
use crate::locks::wait_table::{self as table, Departed, WaiterTime};
use crate::sampler::clock::{current_tid, monotonic_ns};
use crate::sampler::counters::{self, Counter};
use crate::sampler::path::Sample;
use crate::sampler::sync_sample::record_here;
use crate::sampler::thread_state::{lookup, ThreadState};
use std::sync::atomic::Ordering;

/// A blame sample of `ns` for waiting on the object at `object`.
pub(super) fn blame(kind: WaitKind, object: usize, ns: u64) -> Sample {
    Sample {
        metric: protocol::BLAME.index,
        value: ns,
        flags: kind.flags(),
        object,
        at: 0,
        span: 0,
    }
}

/// The blame samples of waiter-time `t`: its exact part, and its sampled part flagged as
/// an estimate to calibrate ([`SAMPLE_SCALED`]).
pub(super) fn blames(kind: WaitKind, object: usize, t: WaiterTime) -> [Sample; 2] {
    [
        blame(kind, object, t.exact),
        estimate(blame(kind, object, t.scaled), true),
    ]
}

/// The idleness sample of a wait measured for `weight` of them (1: for itself only), that
/// waited `ns` (already scaled): flagged as an estimate when it stands for others.
pub(super) fn weighted_idleness(
    kind: WaitKind,
    object: usize,
    ns: u64,
    blamed: bool,
    weight: u32,
) -> Sample {
    estimate(idleness(kind, object, ns, blamed), weight > 1)
}

/// `s`, flagged as a sampled estimate ([`SAMPLE_SCALED`]) when `scaled`.
fn estimate(s: Sample, scaled: bool) -> Sample {
    Sample {
        flags: s.flags | if scaled { SAMPLE_SCALED } else { 0 },
        ..s
    }
}

/// An idleness sample of `ns` waiting on the object at `object`.
pub(super) fn idleness(kind: WaitKind, object: usize, ns: u64, blamed: bool) -> Sample {
    Sample {
        metric: protocol::IDLENESS.index,
        value: ns,
        flags: kind.flags() | if blamed { 0 } else { SAMPLE_UNBLAMED },
        object,
        at: 0,
        span: 0,
    }
}

/// The samples to record of some samples after thinning (see [`THIN_NS`]).
pub(super) struct Kept {
    pub(super) samples: [Sample; 4],
    pub(super) n: usize,
}

impl Kept {
    pub(super) fn of(samples: &[Sample]) -> Kept {
        let mut kept = Kept {
            samples: [NO_SAMPLE; 4],
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

    pub(super) fn get(&self) -> &[Sample] {
        &self.samples[..self.n]
    }

    /// Records the kept samples at the caller's context; true when that worked or nothing
    /// was kept.
    pub(super) fn record_here(&self) -> bool {
        self.n == 0 || record_here(self.get())
    }
}

/// Lays a sample on the thread's line of its metric and size class (see [`THIN_NS`]): the
/// value it is kept with, 0 when it is not. One as long as the line's window or longer is
/// kept whole, off the line.
pub(super) fn thinned_value(state: &ThreadState, s: &Sample) -> u64 {
    let cell =
        &state.thinned[usize::from(s.metric == protocol::IDLENESS.index)][thin_class(s.value)];
    let window = Window::unpack(cell.load(Ordering::Relaxed)).unwrap_or_else(|| new_window(state));
    let (kept, next) = window.lay(s.value, || new_window(state));
    cell.store(next.pack(), Ordering::Relaxed);
    note_laid(state, s.value);
    kept
}

/// A new window of the thread's current length, with its point drawn.
pub(super) fn new_window(state: &ThreadState) -> Window {
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
pub(super) fn note_laid(state: &ThreadState, value: u64) {
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

/// A uniformly random offset in `0..len`.
pub(super) fn random_below(state: &ThreadState, len: u64) -> u64 {
    let seed = u64::from(state.tid.load(Ordering::Relaxed)) << 32 ^ monotonic_ns();
    // splitmix64's finaliser: consecutive seeds give unrelated offsets.
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) % len
}

pub(super) const NO_SAMPLE: Sample = Sample {
    metric: 0,
    value: 0,
    flags: 0,
    object: 0,
    at: 0,
    span: 0,
};

/// Records samples (thinned) at the caller's context, or counts what could not be recorded.
pub(super) fn record(samples: &[Sample]) {
    let kept = Kept::of(samples);
    count_unrecorded(&kept, kept.record_here());
}

/// Counts the idleness of kept samples that could not be recorded (`recorded` false).
pub(super) fn count_unrecorded(kept: &Kept, recorded: bool) {
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

/// Gives back blame that could not be recorded, so the object's next release or event takes
/// it (`still_held`: the release failed and the hold goes on). A mutex's blame cannot be
/// given back (its holders read its history): it is counted.
pub(super) fn give_back(address: usize, kind: WaitKind, t: WaiterTime, still_held: bool) {
    if kind == WaitKind::Mutex
        || bookkeeping(|| table::unsettle(address, kind, t, still_held)).is_none()
    {
        counters::add(Counter::BlameUnsettled, t.total());
    }
}

/// Records blame (thinned) at the caller's context, or gives it back. `(at, span)`: when
/// the hold or interval it is for ended (0: now) and how long it lasted (0: unknown).
pub(super) fn charge(address: usize, kind: WaitKind, t: WaiterTime, (at, span): (u64, u64)) {
    let [exact, scaled] = blames(kind, address, t);
    let samples = [exact.timed(at, span), scaled.timed(at, span)];
    if !Kept::of(&samples).record_here() {
        give_back(address, kind, t, false);
    }
}

/// Counts a wait that nobody is blamed for.
pub(super) fn count_unblamed(departed: Departed) {
    let counter = match departed {
        Departed::TimedOut => Counter::WaitsTimedOut,
        Departed::Interrupted => Counter::WaitsInterrupted,
        Departed::Spurious => Counter::WaitsSpurious,
        Departed::Blamed { .. } | Departed::NoWait => return,
    };
    counters::add(counter, 1);
}
