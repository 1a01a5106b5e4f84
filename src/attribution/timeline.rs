//! The timeline: each top lock's critical section pressure, blame and acquisitions per
//! interval of the run, the phases where its pressure crosses a threshold, and each
//! thread's work, waiting and blame per interval: what `report --view timeline` and
//! `blameprof timeline` show.
//!
//! Job: lay the selected samples over intervals of the run, chosen at report time
//! (`--interval`, at least the runtime's [`LOCK_INTERVAL_NS`]). Samples carry their own
//! times (format version 3 on): a wait's idleness is spread over its span (a spin wait's
//! timer sample, which has none, over its value ending at its time), a release's blame
//! over the hold it ended, a timer sample's work over the CPU time it carries ending at
//! its time, each interval taking the share of the sample that lies in it. Acquisitions
//! and failed trylocks per interval are the runtime's per-lock counts of its own 100 ms
//! intervals (`LockInterval` records, format version 4), spread the same way.
//!
//! Pressure (Free Lunch's critical section pressure) is, per interval, a lock's waiting
//! over the running time of the process's threads in that interval: each thread's lifetime
//! that lies in it, less its waits for events (condition variables, semaphores, barriers,
//! joins), as the lock view's whole-run figure is (`super::locks`). A phase is a run of
//! consecutive intervals on one side of the threshold; a lock contended in one phase only
//! stands out by its peak even when its whole-run pressure is low, so locks are ranked by
//! their peak pressure, then their waiting.
//!
//! The findings read the phases of every lock ([`of_every_lock`]) from the same series.
//!
//! All processes' times are the system's monotonic clock, so images share one time axis,
//! from the earliest start among the selected ones. Invariants: every series of a
//! timeline has [`Timeline::intervals`] entries; the spread values of a series add up to
//! the samples' (to rounding). Not async-signal-safe (allocates); single-threaded.

use super::calibration::Calibration;
use super::clock::span;
use super::locks::{a_held_lock, is_lock_kind, LockTable};
use super::{select_processes, AttributionError, Filter};
use crate::format::read::{ProcessProfile, Profile};
use crate::format::{protocol, WaitKind, LOCK_INTERVAL_NS, LOCK_INTERVAL_VERSION};
use std::collections::HashMap;

/// The most intervals a timeline has: a longer run wants a longer `--interval` (memory and
/// output grow with intervals times locks and threads).
pub const MAX_INTERVALS: usize = 10_000;

/// What to lay out.
#[derive(Debug, Clone, Copy)]
pub struct TimelineOptions {
    /// The interval (ns), at least [`LOCK_INTERVAL_NS`].
    pub interval_ns: u64,
    /// The pressure (a fraction) at and above which an interval is in a high phase.
    pub threshold: f64,
    /// How many locks to keep.
    pub top: usize,
}

/// A run of consecutive intervals on one side of the threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    /// Its first interval and the one after its last.
    pub start: usize,
    pub end: usize,
    pub high: bool,
    /// The lock's waiting over the running time in the phase.
    pub pressure: f64,
}

/// One lock's series.
#[derive(Debug, Clone)]
pub struct LockSeries {
    pub pid: u32,
    pub address: u64,
    /// Its name in the lock view.
    pub name: String,
    pub kind: Option<WaitKind>,
    /// Waiting and blame per interval (ns, calibrated).
    pub wait_ns: Vec<u64>,
    pub blame_ns: Vec<u64>,
    /// Acquisitions (sampled estimates) and failed trylocks per interval; `None` for a
    /// profile older than format version 4.
    pub acquisitions: Option<Vec<u64>>,
    pub try_failed: Option<Vec<u64>>,
    /// Waiting over the running time, per interval (0 where nothing ran).
    pub pressure: Vec<f64>,
    pub phases: Vec<Phase>,
    /// Over the whole run, and the highest interval's.
    pub overall_pressure: f64,
    pub peak_pressure: f64,
}

/// One thread's series.
#[derive(Debug, Clone)]
pub struct ThreadSeries {
    pub pid: u32,
    pub tid: u32,
    pub name: String,
    /// Per interval (ns): computing, waiting (for anything), and blame taken.
    pub work_ns: Vec<u64>,
    pub wait_ns: Vec<u64>,
    pub blame_ns: Vec<u64>,
    /// Per interval: the lock (an index into [`Timeline::locks`]) it waited for most, when
    /// that is one of them.
    pub waited_for: Vec<Option<usize>>,
}

/// The timeline of a profile.
#[derive(Debug, Clone)]
pub struct Timeline {
    pub interval_ns: u64,
    pub intervals: usize,
    /// The time axis' zero and end (monotonic ns).
    pub origin_ns: u64,
    pub end_ns: u64,
    pub threshold: f64,
    /// Running time of the selected threads, and their work and waiting, per interval.
    pub running_ns: Vec<u64>,
    pub work_ns: Vec<u64>,
    pub wait_ns: Vec<u64>,
    pub locks: Vec<LockSeries>,
    pub threads: Vec<ThreadSeries>,
    /// Whether the selected parts carry sample times (version 3) and per-interval lock
    /// counts (version 4).
    pub timed: bool,
    pub acquisitions_known: bool,
}

impl Timeline {
    /// Seconds from the run's start to interval `i`'s start.
    pub fn seconds(&self, i: usize) -> f64 {
        (i as u64 * self.interval_ns) as f64 / 1e9
    }

    /// Phase `p`'s start and end, ns from the run's start (the last one ends with the run).
    pub fn phase_ns(&self, p: &Phase) -> (u64, u64) {
        let duration = self.end_ns - self.origin_ns;
        let at = |i: usize| (i as u64 * self.interval_ns).min(duration);
        (at(p.start), at(p.end))
    }

    /// The same timeline in at most `columns` intervals, each a whole number of the
    /// original ones (for a picture that cannot show more): sums added up, pressure
    /// recomputed from them, phases kept at the original threshold, their bounds in the
    /// new intervals (a phase shorter than a new interval may share it with its
    /// neighbours).
    pub fn coarsened(&self, columns: usize) -> Timeline {
        let k = self.intervals.div_ceil(columns.max(1)).max(1);
        if k == 1 {
            return self.clone();
        }
        let n = self.intervals.div_ceil(k);
        let sum = |v: &[u64]| -> Vec<u64> { v.chunks(k).map(|c| c.iter().sum()).collect() };
        let running = sum(&self.running_ns);
        let locks = self
            .locks
            .iter()
            .map(|l| {
                let wait = sum(&l.wait_ns);
                let running_f: Vec<f64> = running.iter().map(|&r| r as f64).collect();
                let wait_f: Vec<f64> = wait.iter().map(|&w| w as f64).collect();
                LockSeries {
                    pressure: wait_f
                        .iter()
                        .zip(&running_f)
                        .map(|(&w, &r)| if r > 0.0 { (w / r).min(1.0) } else { 0.0 })
                        .collect(),
                    phases: l
                        .phases
                        .iter()
                        .map(|p| Phase {
                            start: p.start / k,
                            end: p.end.div_ceil(k),
                            ..p.clone()
                        })
                        .collect(),
                    wait_ns: wait,
                    blame_ns: sum(&l.blame_ns),
                    acquisitions: l.acquisitions.as_deref().map(sum),
                    try_failed: l.try_failed.as_deref().map(sum),
                    ..l.clone()
                }
            })
            .collect();
        let threads = self
            .threads
            .iter()
            .map(|t| ThreadSeries {
                work_ns: sum(&t.work_ns),
                wait_ns: sum(&t.wait_ns),
                blame_ns: sum(&t.blame_ns),
                // The lock waited for in the column's first interval that had one.
                waited_for: t
                    .waited_for
                    .chunks(k)
                    .map(|c| c.iter().flatten().next().copied())
                    .collect(),
                ..t.clone()
            })
            .collect();
        Timeline {
            interval_ns: self.interval_ns * k as u64,
            intervals: n,
            running_ns: running,
            work_ns: sum(&self.work_ns),
            wait_ns: sum(&self.wait_ns),
            locks,
            threads,
            ..self.clone()
        }
    }
}

/// Adds `value`, spread over `[end - length, end]`, to the intervals of `series` it
/// overlaps (a zero length: all of it to the interval of `end`).
struct Axis {
    origin: u64,
    interval: u64,
    intervals: usize,
}

impl Axis {
    fn spread(&self, series: &mut [f64], end: u64, length: u64, value: f64) {
        let end = end.saturating_sub(self.origin);
        let start = end.saturating_sub(length);
        let last = self.index(end);
        let first = self.index(start);
        if first == last || length == 0 {
            series[last] += value;
            return;
        }
        for (i, slot) in series.iter_mut().enumerate().take(last + 1).skip(first) {
            let lo = start.max(i as u64 * self.interval);
            let hi = end.min((i as u64 + 1) * self.interval);
            *slot += value * hi.saturating_sub(lo) as f64 / length as f64;
        }
    }

    /// The interval of `t` (ns from the origin), the last one for a time past the end.
    fn index(&self, t: u64) -> usize {
        ((t / self.interval) as usize).min(self.intervals - 1)
    }
}

/// A series being built (floating point: spread values are fractions).
#[derive(Default, Clone)]
struct Building {
    wait: Vec<f64>,
    blame: Vec<f64>,
    acquisitions: Vec<f64>,
    try_failed: Vec<f64>,
}

/// Builds the timeline of the processes `filter` selects, naming locks as `table` does
/// (the lock view of the same selection).
pub fn timeline(
    profile: &Profile,
    filter: Filter,
    table: &LockTable,
    opts: TimelineOptions,
) -> Result<Timeline, AttributionError> {
    lay_out(profile, filter, table, opts, Locks::All)
}

/// Which locks [`lay_out`] gives a series.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Locks {
    All,
    /// Only those waited for or blamed (the phases of contention need nothing else): a
    /// program that made millions of locks, taken without waiting, costs no series each.
    Waited,
}

/// [`timeline`] of the `which` locks.
fn lay_out(
    profile: &Profile,
    filter: Filter,
    table: &LockTable,
    opts: TimelineOptions,
    which: Locks,
) -> Result<Timeline, AttributionError> {
    let selected = select_processes(profile, filter)?;
    let procs: Vec<&ProcessProfile> = selected.iter().map(|&p| &profile.processes[p]).collect();
    let (origin, end) = span(&procs);
    let interval = opts.interval_ns.max(LOCK_INTERVAL_NS);
    let duration = end.saturating_sub(origin);
    let count = duration.div_ceil(interval).max(1);
    if count > MAX_INTERVALS as u64 {
        let suggested = duration
            .div_ceil(MAX_INTERVALS as u64)
            .div_ceil(1_000_000_000);
        return Err(AttributionError::TooManyIntervals {
            duration: format!("{:.1} s", duration as f64 / 1e9),
            interval: format!("{:.3} s", interval as f64 / 1e9),
            intervals: count,
            max: MAX_INTERVALS,
            suggested: format!("{suggested}s"),
        });
    }
    let intervals = count as usize;
    let axis = Axis {
        origin,
        interval,
        intervals,
    };
    let zeros = vec![0.0; intervals];
    let mut running = zeros.clone();
    let mut work = zeros.clone();
    let mut waiting = zeros.clone();
    let mut locks: HashMap<(u32, u64), Building> = HashMap::new();
    // Per (pid, tid): work, waiting, blame, and waiting per lock per interval.
    type ThreadBuilding = (Vec<f64>, Vec<f64>, Vec<f64>, HashMap<(u32, u64), Vec<f64>>);
    let mut threads: HashMap<(u32, u32), ThreadBuilding> = HashMap::new();
    let empty_lock = || Building {
        wait: zeros.clone(),
        blame: zeros.clone(),
        acquisitions: zeros.clone(),
        try_failed: zeros.clone(),
    };
    for proc in &procs {
        let pid = proc.header.pid;
        let calibration = Calibration::of(proc);
        let end_of_process = proc.end_ns.unwrap_or(end);
        for t in &proc.threads {
            if let Some(start) = t.start_ns {
                let stop = t.end_ns.unwrap_or(end_of_process).max(start);
                axis.spread(&mut running, stop, stop - start, (stop - start) as f64);
            }
        }
        let metric = |name: &str| proc.metric(name).map(usize::from);
        let (w, i, b) = (
            metric(protocol::WORK.name),
            metric(protocol::IDLENESS.name),
            metric(protocol::BLAME.name),
        );
        for s in proc.samples.iter().filter(|s| s.time > 0) {
            let wanted = filter.tid.map_or(true, |t| t == s.tid);
            let m = Some(usize::from(s.metric));
            let value = calibration.apply(s.value, s.flags) as f64;
            let thread = || (zeros.clone(), zeros.clone(), zeros.clone(), HashMap::new());
            if m == w {
                let cpu = s.value;
                axis.spread(&mut work, s.time, cpu, value);
                if wanted {
                    let t = threads.entry((pid, s.tid)).or_insert_with(thread);
                    axis.spread(&mut t.0, s.time, cpu, value);
                }
            } else if m == i {
                let length = if s.span > 0 { s.span } else { s.value };
                let kind = WaitKind::from_flags(s.flags);
                axis.spread(&mut waiting, s.time, length, value);
                if kind.is_some_and(|k| !is_lock_kind(k)) {
                    // Not running: off the base of pressure.
                    axis.spread(&mut running, s.time, length, -value);
                }
                if s.object != 0 && kind.is_some_and(is_lock_kind) {
                    let l = locks.entry((pid, s.object)).or_insert_with(empty_lock);
                    axis.spread(&mut l.wait, s.time, length, value);
                }
                if wanted {
                    let t = threads.entry((pid, s.tid)).or_insert_with(thread);
                    axis.spread(&mut t.1, s.time, length, value);
                    if s.object != 0 {
                        let per = t.3.entry((pid, s.object)).or_insert_with(|| zeros.clone());
                        axis.spread(per, s.time, length, value);
                    }
                }
            } else if m == b {
                if s.object != 0 {
                    let l = locks.entry((pid, s.object)).or_insert_with(empty_lock);
                    axis.spread(&mut l.blame, s.time, s.span, value);
                }
                if wanted {
                    let t = threads.entry((pid, s.tid)).or_insert_with(thread);
                    axis.spread(&mut t.2, s.time, s.span, value);
                }
            }
        }
        for li in &proc.lock_intervals {
            // The samples above made the series of the locks waited for or blamed.
            let l = match which {
                Locks::All => locks.entry((pid, li.address)).or_insert_with(empty_lock),
                Locks::Waited => match locks.get_mut(&(pid, li.address)) {
                    Some(l) => l,
                    None => continue,
                },
            };
            let stop = li.start_ns.saturating_add(li.length_ns);
            axis.spread(
                &mut l.acquisitions,
                stop,
                li.length_ns,
                li.acquisitions as f64,
            );
            axis.spread(&mut l.try_failed, stop, li.length_ns, li.try_failed as f64);
        }
    }
    let acquisitions_known = procs.iter().all(|p| p.version >= LOCK_INTERVAL_VERSION);
    let timed = procs
        .iter()
        .all(|p| p.version >= crate::format::SAMPLE_TIME_VERSION);
    let running_ns = round(&running);
    let mut series: Vec<LockSeries> = table
        .locks
        .iter()
        .filter(|r| r.kind.is_some_and(|k| a_held_lock(k, &r.counts)))
        .filter_map(|r| {
            let b = locks.get(&(r.pid, r.address))?;
            Some(lock_series(
                r,
                b,
                &running,
                opts.threshold,
                acquisitions_known,
            ))
        })
        .filter(|s| s.wait_ns.iter().any(|&w| w > 0))
        .collect();
    series.sort_by(|a, b| {
        b.peak_pressure
            .total_cmp(&a.peak_pressure)
            .then_with(|| b.wait_ns.iter().sum::<u64>().cmp(&a.wait_ns.iter().sum()))
            .then_with(|| a.name.cmp(&b.name))
    });
    series.truncate(opts.top);
    let index: HashMap<(u32, u64), usize> = series
        .iter()
        .enumerate()
        .map(|(i, s)| ((s.pid, s.address), i))
        .collect();
    let mut thread_series: Vec<ThreadSeries> = threads
        .into_iter()
        .map(|((pid, tid), (w, wt, b, per_lock))| {
            let waited_for = (0..intervals)
                .map(|i| {
                    per_lock
                        .iter()
                        .filter(|(_, v)| v[i] > 0.0)
                        .max_by(|a, b| a.1[i].total_cmp(&b.1[i]))
                        .and_then(|(key, _)| index.get(key).copied())
                })
                .collect();
            let name = thread_name(&procs, pid, tid);
            ThreadSeries {
                pid,
                tid,
                name,
                work_ns: round(&w),
                wait_ns: round(&wt),
                blame_ns: round(&b),
                waited_for,
            }
        })
        .collect();
    thread_series.sort_by_key(|t| (t.pid, t.tid));
    Ok(Timeline {
        interval_ns: interval,
        intervals,
        origin_ns: origin,
        end_ns: end,
        threshold: opts.threshold,
        running_ns,
        work_ns: round(&work),
        wait_ns: round(&waiting),
        locks: series,
        threads: thread_series,
        timed,
        acquisitions_known,
    })
}

/// The timeline of every lock of `table` waited for or blamed (`opts.top` aside), for the
/// findings, which read only their contention's phases: at `opts`' interval, or a longer one when the run is too long for it; none when the samples carry
/// no times or the selection cannot be laid out.
pub fn of_every_lock(
    profile: &Profile,
    filter: Filter,
    table: &LockTable,
    opts: TimelineOptions,
) -> Option<Timeline> {
    let mut opts = TimelineOptions {
        top: usize::MAX,
        ..opts
    };
    let t = match lay_out(profile, filter, table, opts, Locks::Waited) {
        Err(AttributionError::TooManyIntervals { intervals, .. }) => {
            opts.interval_ns *= intervals.div_ceil(MAX_INTERVALS as u64);
            lay_out(profile, filter, table, opts, Locks::Waited)
        }
        other => other,
    };
    t.ok().filter(|t| t.timed)
}

/// The series of lock row `r` from what was laid out for it.
fn lock_series(
    r: &super::locks::LockRow,
    b: &Building,
    running: &[f64],
    threshold: f64,
    acquisitions_known: bool,
) -> LockSeries {
    // The samples split the runtime's exact total over time, as the lock table's sites
    // split it: the timeline's waiting of a lock adds up to the table's.
    let sampled: f64 = b.wait.iter().sum();
    let exact = r.counts.runtime.wait_ns as f64;
    let wait: Vec<f64> = match sampled > 0.0 && exact > 0.0 {
        true => b.wait.iter().map(|w| w * exact / sampled).collect(),
        false => b.wait.clone(),
    };
    let pressure: Vec<f64> = wait
        .iter()
        .zip(running)
        .map(|(&w, &run)| if run > 0.0 { (w / run).min(1.0) } else { 0.0 })
        .collect();
    let total_wait: f64 = wait.iter().sum();
    let total_running: f64 = running.iter().map(|r| r.max(0.0)).sum();
    let overall_pressure = match total_running > 0.0 {
        true => (total_wait / total_running).min(1.0),
        false => 0.0,
    };
    LockSeries {
        pid: r.pid,
        address: r.address,
        name: r.name.clone(),
        kind: r.kind,
        wait_ns: round(&wait),
        blame_ns: round(&b.blame),
        acquisitions: acquisitions_known.then(|| round(&b.acquisitions)),
        try_failed: acquisitions_known.then(|| round(&b.try_failed)),
        peak_pressure: pressure.iter().copied().fold(0.0, f64::max),
        phases: phases(&wait, running, threshold),
        pressure,
        overall_pressure,
    }
}

/// The runs of consecutive intervals at or above `threshold`, and below it.
pub fn phases(wait: &[f64], running: &[f64], threshold: f64) -> Vec<Phase> {
    let mut out: Vec<Phase> = Vec::new();
    let (mut wait_sum, mut running_sum) = (0.0, 0.0);
    for (i, (&w, &run)) in wait.iter().zip(running).enumerate() {
        let high = run > 0.0 && w / run >= threshold;
        match out.last_mut() {
            Some(p) if p.high == high => p.end = i + 1,
            _ => {
                (wait_sum, running_sum) = (0.0, 0.0);
                out.push(Phase {
                    start: i,
                    end: i + 1,
                    high,
                    pressure: 0.0,
                });
            }
        }
        wait_sum += w;
        running_sum += run.max(0.0);
        let p = out.last_mut().expect("pushed");
        p.pressure = match running_sum > 0.0 {
            true => (wait_sum / running_sum).min(1.0),
            false => 0.0,
        };
    }
    out
}

fn thread_name(procs: &[&ProcessProfile], pid: u32, tid: u32) -> String {
    procs
        .iter()
        .filter(|p| p.header.pid == pid)
        .find_map(|p| p.thread(tid))
        .map(|t| t.name.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| format!("thread {tid}"))
}

/// Spread values to whole nanoseconds (or counts); negative residue to 0.
fn round(series: &[f64]) -> Vec<u64> {
    series.iter().map(|v| v.max(0.0).round() as u64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_value_is_spread_over_the_intervals_its_span_overlaps() {
        let axis = Axis {
            origin: 1000,
            interval: 100 * MS,
            intervals: 4,
        };
        let mut s = vec![0.0; 4];
        // 150 ms from 100 ms to 250 ms: two thirds in the second interval, one in the third.
        axis.spread(&mut s, 1000 + 250 * MS, 150 * MS, 300.0);
        assert_eq!(s, vec![0.0, 200.0, 100.0, 0.0]);
        // A point, and a time past the end.
        axis.spread(&mut s, 1000 + 10 * MS, 0, 5.0);
        axis.spread(&mut s, 1000 + 900 * MS, 0, 7.0);
        assert_eq!(s, vec![5.0, 200.0, 100.0, 7.0]);
        let total: f64 = s.iter().sum();
        assert_eq!(total, 312.0, "nothing lost");
    }

    #[test]
    fn a_coarsened_timeline_keeps_its_sums_and_its_phases() {
        let series = |v: Vec<u64>| v;
        let t = Timeline {
            interval_ns: 100 * MS,
            intervals: 5,
            origin_ns: 0,
            end_ns: 500 * MS,
            threshold: 0.1,
            running_ns: series(vec![100, 100, 100, 100, 100]),
            work_ns: series(vec![1, 2, 3, 4, 5]),
            wait_ns: series(vec![50, 50, 0, 0, 0]),
            locks: vec![LockSeries {
                pid: 1,
                address: 8,
                name: "l".into(),
                kind: Some(WaitKind::Mutex),
                wait_ns: vec![50, 50, 0, 0, 0],
                blame_ns: vec![40, 40, 0, 0, 0],
                acquisitions: Some(vec![1, 1, 1, 1, 1]),
                try_failed: None,
                pressure: vec![0.5, 0.5, 0.0, 0.0, 0.0],
                phases: phases(
                    &[50.0, 50.0, 0.0, 0.0, 0.0],
                    &[100.0, 100.0, 100.0, 100.0, 100.0],
                    0.1,
                ),
                overall_pressure: 0.2,
                peak_pressure: 0.5,
            }],
            threads: Vec::new(),
            timed: true,
            acquisitions_known: true,
        };
        let c = t.coarsened(3);
        assert_eq!((c.intervals, c.interval_ns), (3, 200 * MS));
        assert_eq!(c.work_ns, vec![3, 7, 5]);
        let l = &c.locks[0];
        assert_eq!(l.wait_ns, vec![100, 0, 0]);
        assert_eq!(l.pressure, vec![0.5, 0.0, 0.0]);
        assert_eq!(l.acquisitions, Some(vec![2, 2, 1]));
        assert_eq!(
            l.phases
                .iter()
                .map(|p| (p.start, p.end, p.high))
                .collect::<Vec<_>>(),
            vec![(0, 1, true), (1, 3, false)]
        );
        assert_eq!(t.coarsened(10).intervals, 5, "already narrow enough");
    }

    #[test]
    fn a_run_too_long_for_the_interval_asks_for_a_longer_one() {
        let mut p = crate::attribution::testutil::lock_table_process();
        for t in &mut p.threads {
            t.start_ns = Some(1_000_000);
            t.end_ns = Some(3_000 * 1_000_000_000);
        }
        let profile = Profile {
            path: "long".into(),
            processes: vec![p],
            skipped: Vec::new(),
        };
        let table = LockTable::default();
        let opts = |interval_ns| TimelineOptions {
            interval_ns,
            threshold: 0.1,
            top: 5,
        };
        let err = timeline(&profile, Filter::default(), &table, opts(100 * MS))
            .expect_err("30 000 intervals")
            .to_string();
        assert!(err.contains("pass --interval 1s or longer"), "{err}");
        let t = timeline(&profile, Filter::default(), &table, opts(1_000 * MS)).expect("3 000");
        assert_eq!(t.intervals, 3_000);
    }

    #[test]
    fn phases_are_runs_on_each_side_of_the_threshold() {
        let running = [100.0, 100.0, 100.0, 100.0, 0.0];
        let wait = [50.0, 30.0, 1.0, 0.0, 0.0];
        let p = phases(&wait, &running, 0.1);
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].start, p[0].end, p[0].high), (0, 2, true));
        assert!((p[0].pressure - 0.4).abs() < 1e-9);
        assert_eq!((p[1].start, p[1].end, p[1].high), (2, 5, false));
        // An interval where nothing ran adds nothing to the phase's base.
        assert!((p[1].pressure - 1.0 / 200.0).abs() < 1e-9);
        assert!(phases(&[], &[], 0.1).is_empty());
    }
}
