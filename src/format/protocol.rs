//! What crosses the boundary between `blameprof run` (the CLI) and the runtime it preloads
//! into the program, besides the part files themselves: the environment variables that
//! configure the runtime, the file names each side looks for, and the metrics samples carry.
//!
//! Both sides import these from here and nowhere else; `docs/profile-format.md` documents
//! them for people. Constants only: nothing here runs.

/// Directory that receives the profile parts (required: without it the runtime stays idle).
pub const ENV_OUTPUT: &str = "BLAMEPROF_OUTPUT";
/// Samples per second per thread of CPU time (default [`DEFAULT_FREQUENCY`]).
pub const ENV_FREQUENCY: &str = "BLAMEPROF_FREQUENCY";
/// Signal number used for sampling (default `SIGRTMIN + 8`).
pub const ENV_SIGNAL: &str = "BLAMEPROF_SIGNAL";
/// Force a sample source: [`SOURCE_CPU_TIMER`] or [`SOURCE_PERF_TASK_CLOCK`] (default: the
/// CPU timer up to [`TICK_LIMITED_HZ`], the perf task clock above it).
pub const ENV_SOURCE: &str = "BLAMEPROF_SOURCE";

/// [`ENV_SOURCE`]'s value (and the process record's source name) for the POSIX CPU-time timer.
pub const SOURCE_CPU_TIMER: &str = "cpu-timer";
/// [`ENV_SOURCE`]'s value (and the process record's source name) for the perf task clock.
pub const SOURCE_PERF_TASK_CLOCK: &str = "perf-task-clock";

/// Default sampling rate, samples per CPU-second per thread.
pub const DEFAULT_FREQUENCY: u64 = 200;
/// Highest rate the POSIX CPU-time timers can deliver: they expire on the scheduler tick.
pub const TICK_LIMITED_HZ: u64 = 250;

/// Contended lock acquisitions a millisecond per thread that the runtime measures every
/// one of, by default; a thread with more measures a random subset of about this many,
/// scaled (`locks::contention_sampling` in the measurement crate).
pub const CONTENDED_MEASURED_PER_MS: u64 = 4;
/// Overrides [`CONTENDED_MEASURED_PER_MS`] (`blameprof run --contended-per-ms N`; 0: measure
/// every contended acquisition, whatever it costs).
pub const ENV_CONTENDED_PER_MS: &str = "BLAMEPROF_CONTENDED_PER_MS";

/// The most bytes of samples one process image writes to its part, by default (1 GiB): a
/// service profiled for days keeps to it, and drops (and counts) the samples past it.
pub const DEFAULT_MAX_PART_BYTES: u64 = 1 << 30;
/// Overrides [`DEFAULT_MAX_PART_BYTES`] (`blameprof run --max-size SIZE`).
pub const ENV_MAX_PART_BYTES: &str = "BLAMEPROF_MAX_PART_BYTES";

/// File name suffix of part files inside a profile directory.
pub const PART_SUFFIX: &str = ".bpp";
/// File name of the runtime library. Frames in a module whose path ends with it are the
/// runtime's own (the analysis folds them into the interposed entry point), and the CLI
/// looks for it next to its executable.
pub const RUNTIME_LIBRARY: &str = "libblameprof_rt.so";

/// The metrics samples carry, by their index in a sample record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    /// Index in the process record's metric list, and in every sample record.
    pub index: u8,
    pub name: &'static str,
    pub unit: &'static str,
    pub description: &'static str,
}

/// CPU time of threads that were computing.
pub const WORK: Metric = Metric {
    index: 0,
    name: "work",
    unit: "ns",
    description: "CPU time of threads that were computing",
};
/// Time threads spent waiting for a lock or an event, at the waiter.
pub const IDLENESS: Metric = Metric {
    index: 1,
    name: "idleness",
    unit: "ns",
    description: "time threads spent waiting (blocked or spinning, measured), at the waiter",
};
/// That waiting, charged to the holder at its unlock (or to the event's provider; a
/// barrier's or join's, by the analysis, to the late thread's work meanwhile).
pub const BLAME: Metric = Metric {
    index: 2,
    name: "blame",
    unit: "ns",
    description: "waiting time of other threads, charged to the lock holder at its unlock, \
                  the signal, post or wake that ended it, or the late thread's work at a \
                  barrier or join",
};

/// The part of work done while holding a lock others waited for: CPU time inside
/// contended critical sections, with the lock's address and kind.
pub const HELD_CONTENDED: Metric = Metric {
    index: 3,
    name: "held.contended",
    unit: "ns",
    description: "CPU time of threads holding a lock others waited for (part of work)",
};

/// Time threads holding a lock others waited for spent blocked in a call inside the hold
/// (a sleep, a poll, a signal wait, a wait for another lock or event), at that call, with
/// the lock's address and kind: off a CPU, so neither work nor the lock's own idleness.
pub const HELD_BLOCKED: Metric = Metric {
    index: 4,
    name: "held.blocked",
    unit: "ns",
    description: "time threads holding a lock others waited for spent blocked in a call \
                  (sleep, poll, a wait), at the call",
};

/// Every metric the runtime writes, in index order.
pub const METRICS: [Metric; 5] = [WORK, IDLENESS, BLAME, HELD_CONTENDED, HELD_BLOCKED];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_listed_in_index_order() {
        for (i, m) in METRICS.iter().enumerate() {
            assert_eq!(usize::from(m.index), i, "{}", m.name);
        }
    }
}
