//! Where process images lie in time: the one reading of a part's times that the timeline,
//! the findings, the lock table and the exports share.
//!
//! Job: from an image's thread start and end times, its samples' times and its own end
//! (all the system's monotonic clock, in ns), tell its first and last known times, the
//! span of several images, its threads' lifetime, its end (when it did not end cleanly:
//! its threads' last time), and ([`Clock`]) its monotonic times as wall-clock times.
//!
//! Invariants: a time of 0 on a sample means "no time" and is never read; an image's first
//! known time is its threads' earliest start, else (no thread times) its earliest timed
//! sample; its last known time is the latest of its threads' starts and ends, its samples'
//! times and its end, and never before its first. Not async-signal-safe (analysis code on
//! decoded profiles), though it allocates nothing; single-threaded.

use crate::format::read::ProcessProfile;

/// The first known time of image `p`: its threads' earliest start, else its earliest timed
/// sample; none when it knows no time.
pub fn first_time(p: &ProcessProfile) -> Option<u64> {
    let starts = p.threads.iter().filter_map(|t| t.start_ns);
    starts.min().or_else(|| sample_times(p).min())
}

/// The last known time of image `p`: the latest of its threads' starts and ends, its
/// samples' times and its end.
pub fn last_time(p: &ProcessProfile) -> Option<u64> {
    let ends = p.threads.iter().filter_map(|t| t.end_ns);
    let starts = p.threads.iter().filter_map(|t| t.start_ns);
    ends.chain(starts)
        .chain(sample_times(p))
        .chain(p.end_ns)
        .max()
}

/// The earliest first and the latest last known time of images `procs`, the end never
/// before the start; `(0, 0)` when none knows a time.
pub fn span(procs: &[&ProcessProfile]) -> (u64, u64) {
    let origin = procs.iter().filter_map(|p| first_time(p)).min();
    let end = procs.iter().filter_map(|p| last_time(p)).max().unwrap_or(0);
    match origin {
        None => (0, 0),
        Some(origin) => (origin, end.max(origin)),
    }
}

/// The wall time of image `p` by its threads (ns): from its first thread's start to the
/// latest of its threads' ends (a thread without one: its start) and its own end; none
/// without thread times.
pub fn lifetime(p: &ProcessProfile) -> Option<u64> {
    let start = p.threads.iter().filter_map(|t| t.start_ns).min()?;
    let last_thread = p.threads.iter().filter_map(|t| t.end_ns.or(t.start_ns));
    let end = last_thread.chain(p.end_ns).max().unwrap_or(start);
    Some(end.saturating_sub(start))
}

/// The end of image `p`: the one it wrote, or, when it did not end cleanly, its threads'
/// last known time.
pub fn end_of_image(p: &ProcessProfile) -> Option<u64> {
    p.end_ns.or_else(|| {
        p.threads
            .iter()
            .flat_map(|t| [t.start_ns, t.end_ns])
            .flatten()
            .max()
    })
}

/// The times of `p`'s samples that carry one.
fn sample_times(p: &ProcessProfile) -> impl Iterator<Item = u64> + '_ {
    p.samples.iter().map(|s| s.time).filter(|&t| t > 0)
}

/// Where a process image lies in time: its monotonic times against the wall clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    /// The image's start, nanoseconds since the epoch.
    pub start_ns: u64,
    /// The monotonic time taken to be that start: its first known time (0 when none).
    pub origin: u64,
    /// Its last known monotonic time (its origin when none).
    pub end: u64,
}

impl Clock {
    pub fn of(proc: &ProcessProfile) -> Clock {
        let origin = first_time(proc).unwrap_or(0);
        Clock {
            start_ns: proc.header.start_time_ns,
            origin,
            end: last_time(proc).unwrap_or(origin),
        }
    }

    /// Monotonic time `t` of the image as nanoseconds since the epoch (its start at the
    /// earliest).
    pub fn epoch(&self, t: u64) -> u64 {
        self.start_ns + t.saturating_sub(self.origin)
    }

    /// The image's last known time, as nanoseconds since the epoch.
    pub fn epoch_end(&self) -> u64 {
        self.epoch(self.end)
    }
}
