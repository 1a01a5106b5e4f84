//! Process-wide counters of what the runtime lost or cut, so nothing is dropped silently.
//!
//! Job: count, with relaxed atomics, every sample the runtime could not take and why, and
//! encode the totals as `Counter` records. [`add`] is async-signal-safe.

use crate::format::counters as names;
use crate::format::wire::{Full, RecordWriter};
use crate::format::RecordTag;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Clone, Copy)]
#[repr(usize)]
pub enum Counter {
    DroppedBusy,
    DroppedModulesUpdating,
    DroppedFlushFailed,
    DroppedNoThreadState,
    DroppedNoUnwindCache,
    TruncatedStacks,
    UnwindErrors,
    TimerFailures,
    TimerFallbacks,
    WriteErrors,
    WaitsTimedOut,
    WaitsCarried,
    WaitsInterrupted,
    WaitsSpurious,
    WaitsUnmonitored,
    IdlenessUnrecorded,
    BlameUnsettled,
    HoldsApproximated,
    HoldsBlameEstimated,
    SharedSpinLocksUntracked,
    MonitoredSpinLocksPeak,
    MonitoredWaitObjectsPeak,
    HandlerAllocations,
    RuntimeHeapPeak,
    ThinningWindowPeak,
    ContendedAcquisitions,
    ContendedMeasured,
    ContendedPeriodPeak,
    ContendedSampledWait,
    ContendedScaledWait,
    ContendedHolds,
    ContendedHoldsNoted,
    ContendedHoldPeriodPeak,
    LockEventsUntabled,
    LockTablePeak,
    AcquisitionsUncounted,
    LockEventsStray,
    InitSitesDisplaced,
    HeldChecksFailed,
    HeldBlockedUnrecorded,
    WriteLastErrno,
    PartReopened,
    DescriptorsMoved,
    DescriptorsUntracked,
    DroppedSizeLimit,
    RecordsDroppedSizeLimit,
    UnseenThreadsCpu,
    SignalUnblocked,
    ExecsUnprofiled,
}

const ALL: [(Counter, &str); 49] = [
    (Counter::DroppedBusy, names::DROPPED_BUSY),
    (
        Counter::DroppedModulesUpdating,
        names::DROPPED_MODULES_UPDATING,
    ),
    (Counter::DroppedFlushFailed, names::DROPPED_FLUSH_FAILED),
    (
        Counter::DroppedNoThreadState,
        names::DROPPED_NO_THREAD_STATE,
    ),
    (
        Counter::DroppedNoUnwindCache,
        names::DROPPED_NO_UNWIND_CACHE,
    ),
    (Counter::TruncatedStacks, names::TRUNCATED_STACKS),
    (Counter::UnwindErrors, names::UNWIND_ERRORS),
    (Counter::TimerFailures, names::TIMER_FAILURES),
    (Counter::TimerFallbacks, names::TIMER_FALLBACKS),
    (Counter::WriteErrors, names::WRITE_ERRORS),
    (Counter::WaitsTimedOut, names::WAITS_TIMED_OUT),
    (Counter::WaitsCarried, names::WAITS_CARRIED),
    (Counter::WaitsInterrupted, names::WAITS_INTERRUPTED),
    (Counter::WaitsSpurious, names::WAITS_SPURIOUS),
    (Counter::WaitsUnmonitored, names::WAITS_UNMONITORED),
    (Counter::IdlenessUnrecorded, names::IDLENESS_UNRECORDED),
    (Counter::BlameUnsettled, names::BLAME_UNSETTLED),
    (Counter::HoldsApproximated, names::HOLDS_APPROXIMATED),
    (Counter::HoldsBlameEstimated, names::HOLDS_BLAME_ESTIMATED),
    (
        Counter::SharedSpinLocksUntracked,
        names::SHARED_SPIN_LOCKS_UNTRACKED,
    ),
    (
        Counter::MonitoredSpinLocksPeak,
        names::MONITORED_SPIN_LOCKS_PEAK,
    ),
    (
        Counter::MonitoredWaitObjectsPeak,
        names::MONITORED_WAIT_OBJECTS_PEAK,
    ),
    (Counter::HandlerAllocations, names::HANDLER_ALLOCATIONS),
    (Counter::RuntimeHeapPeak, names::RUNTIME_HEAP_PEAK),
    (Counter::ThinningWindowPeak, names::THINNING_WINDOW_PEAK),
    (
        Counter::ContendedAcquisitions,
        names::CONTENDED_ACQUISITIONS,
    ),
    (Counter::ContendedMeasured, names::CONTENDED_MEASURED),
    (Counter::ContendedPeriodPeak, names::CONTENDED_PERIOD_PEAK),
    (Counter::ContendedSampledWait, names::CONTENDED_SAMPLED_WAIT),
    (Counter::ContendedScaledWait, names::CONTENDED_SCALED_WAIT),
    (Counter::ContendedHolds, names::CONTENDED_HOLDS),
    (Counter::ContendedHoldsNoted, names::CONTENDED_HOLDS_NOTED),
    (
        Counter::ContendedHoldPeriodPeak,
        names::CONTENDED_HOLD_PERIOD_PEAK,
    ),
    (Counter::LockEventsUntabled, names::LOCK_EVENTS_UNTABLED),
    (Counter::LockTablePeak, names::LOCK_TABLE_PEAK),
    (
        Counter::AcquisitionsUncounted,
        names::ACQUISITIONS_UNCOUNTED,
    ),
    (Counter::LockEventsStray, names::LOCK_EVENTS_STRAY),
    (Counter::InitSitesDisplaced, names::INIT_SITES_DISPLACED),
    (Counter::HeldChecksFailed, names::HELD_CHECKS_FAILED),
    (
        Counter::HeldBlockedUnrecorded,
        names::HELD_BLOCKED_UNRECORDED,
    ),
    (Counter::WriteLastErrno, names::WRITE_LAST_ERRNO),
    (Counter::PartReopened, names::PART_REOPENED),
    (Counter::DescriptorsMoved, names::DESCRIPTORS_MOVED),
    (Counter::DescriptorsUntracked, names::DESCRIPTORS_UNTRACKED),
    (Counter::DroppedSizeLimit, names::DROPPED_SIZE_LIMIT),
    (
        Counter::RecordsDroppedSizeLimit,
        names::RECORDS_DROPPED_SIZE_LIMIT,
    ),
    (Counter::UnseenThreadsCpu, names::UNSEEN_THREADS_CPU),
    (Counter::SignalUnblocked, names::SIGNAL_UNBLOCKED),
    (Counter::ExecsUnprofiled, names::EXECS_UNPROFILED),
];

static VALUES: [AtomicU64; ALL.len()] = [const { AtomicU64::new(0) }; ALL.len()];

/// Adds `n` to a counter. Async-signal-safe.
pub fn add(counter: Counter, n: u64) {
    VALUES[counter as usize].fetch_add(n, Ordering::Relaxed);
}

/// Sets a gauge (a counter whose latest value is its meaning). Async-signal-safe.
pub fn set(counter: Counter, value: u64) {
    VALUES[counter as usize].store(value, Ordering::Relaxed);
}

/// Raises a gauge to `value` if it is below. Async-signal-safe.
pub fn raise(counter: Counter, value: u64) {
    VALUES[counter as usize].fetch_max(value, Ordering::Relaxed);
}

/// A counter's current value.
#[cfg(test)]
pub fn get(counter: Counter) -> u64 {
    VALUES[counter as usize].load(Ordering::Relaxed)
}

/// Resets every counter (in a fork child, which starts its own part).
pub fn reset() {
    for v in &VALUES {
        v.store(0, Ordering::Relaxed);
    }
}

/// Encodes the current totals as `Counter` records (cumulative; readers keep the largest).
/// The heap's peak gauge is its caller's to set first (the heap counts into these counters,
/// so this module does not read the heap back).
pub fn encode(w: &mut RecordWriter) -> Result<(), Full> {
    for (counter, name) in ALL {
        w.tag(RecordTag::Counter)?;
        w.bytes(name.as_bytes())?;
        w.varint(VALUES[counter as usize].load(Ordering::Relaxed))?;
        w.commit();
    }
    Ok(())
}
