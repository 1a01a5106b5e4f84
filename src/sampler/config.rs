//! Runtime configuration, read once from the environment the CLI prepared.
//!
//! Job: turn `BLAMEPROF_*` variables into a [`Config`]. Not async-signal-safe (reads the
//! environment, allocates); called once at start-up. The variables are the private protocol
//! between `blameprof run` and the runtime (`format::protocol`), documented in
//! `docs/profile-format.md`.

use crate::format::protocol::{
    CONTENDED_MEASURED_PER_MS, DEFAULT_FREQUENCY, DEFAULT_MAX_PART_BYTES, ENV_CONTENDED_PER_MS,
    ENV_FREQUENCY, ENV_MAX_PART_BYTES, ENV_OUTPUT, ENV_SIGNAL, ENV_SOURCE, SOURCE_CPU_TIMER,
    SOURCE_PERF_TASK_CLOCK, TICK_LIMITED_HZ,
};
use std::path::PathBuf;

/// Where a thread's sampling signals come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `timer_create(CLOCK_THREAD_CPUTIME_ID)` with the signal sent to the thread; limited by
    /// the scheduler tick.
    CpuTimer,
    /// A per-thread `perf_event` task-clock counter (hrtimer based) whose overflow signal is
    /// directed at the thread.
    PerfTaskClock,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::CpuTimer => SOURCE_CPU_TIMER,
            Source::PerfTaskClock => SOURCE_PERF_TASK_CLOCK,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub output_dir: PathBuf,
    pub frequency: u64,
    pub signal: i32,
    /// The source asked for, if forced.
    pub forced_source: Option<Source>,
    /// Contended acquisitions a millisecond per thread measured before sampling starts
    /// (0: all).
    pub contended_per_ms: u64,
    /// The most bytes of samples this image writes to its part.
    pub max_part_bytes: u64,
}

impl Config {
    /// Reads the configuration; `None` when the runtime was preloaded without `blameprof run`.
    pub fn from_env() -> Option<Config> {
        let output_dir = PathBuf::from(std::env::var_os(ENV_OUTPUT)?);
        let frequency = env_number::<u64>(ENV_FREQUENCY)
            .filter(|&hz| hz > 0)
            .unwrap_or(DEFAULT_FREQUENCY)
            .min(1_000_000);
        let signal = env_number::<i32>(ENV_SIGNAL).unwrap_or_else(|| libc::SIGRTMIN() + 8);
        let forced_source = match std::env::var(ENV_SOURCE) {
            Ok(s) if s == SOURCE_CPU_TIMER => Some(Source::CpuTimer),
            Ok(s) if s == SOURCE_PERF_TASK_CLOCK => Some(Source::PerfTaskClock),
            _ => None,
        };
        let contended_per_ms =
            env_number::<u64>(ENV_CONTENDED_PER_MS).unwrap_or(CONTENDED_MEASURED_PER_MS);
        let max_part_bytes =
            env_number::<u64>(ENV_MAX_PART_BYTES).unwrap_or(DEFAULT_MAX_PART_BYTES);
        Some(Config {
            output_dir,
            frequency,
            signal,
            forced_source,
            contended_per_ms,
            max_part_bytes,
        })
    }

    /// Sampling period in nanoseconds of thread CPU time.
    pub fn period_ns(&self) -> u64 {
        1_000_000_000 / self.frequency
    }

    /// The source to try first. The CPU timer expires on scheduler ticks, which caps it at
    /// [`TICK_LIMITED_HZ`] and rounds every period up to whole ticks (200/s asked gives about
    /// 125/s with a 250 Hz tick); the perf task clock is an hrtimer and delivers any rate,
    /// but a perf event costs the kernel work at every context switch of the thread, which
    /// doubled the overhead of a program that blocks on a lock 100,000 times a second
    /// (`ssca2`: +11% against +5%). So: the CPU timer up to the tick rate, perf above it.
    /// Samples carry the CPU time since the previous one, so totals do not depend on the
    /// rate. Threads fall back to the CPU timer where perf is not permitted.
    pub fn preferred_source(&self) -> Source {
        self.forced_source
            .unwrap_or(if self.frequency <= TICK_LIMITED_HZ {
                Source::CpuTimer
            } else {
                Source::PerfTaskClock
            })
    }
}

/// The number in the environment variable `name`, if it is set and parses.
fn env_number<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok()?.parse().ok()
}
