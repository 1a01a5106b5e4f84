//! Late work: the blame of a barrier or a join goes to the work the thread that ended it
//! did while the others waited (issue 41).
//!
//! Job: the runtime records a barrier's blame at its last arriver's `pthread_barrier_wait`
//! call, and a join's at the joined thread's end (its `pthread_exit`, or its start
//! routine). Both threads of a two-stage pipeline may run that same call; what made the
//! others wait is what the late thread *computed* meanwhile (HPCToolkit's undirected blame
//! at OpenMP barriers, Liu et al. ICS'13: each sample of a working thread carries the
//! idleness of the threads waiting for it). [`late_work`] finds, for each such blame
//! sample, the late thread's own `work` samples during the waits it ended, and says which
//! share of the blame moves to each of their call paths; the rest stays at the call that
//! ended the waits (the thread was off the CPU for it: descheduled, or itself waiting).
//!
//! The rule, per blame sample `B` of object `O` (a barrier, or a joined thread), recorded
//! at time `t` by thread `T`: its *window* runs from the previous blame of `O` (an earlier
//! time; the run's start when none) to `t`, the waiting it took being the waiting on `O`
//! since its previous event. The waiters' intervals on `O` (their idleness samples: a
//! wait's end and span), cut to the window, give `K`, the waiting of the window. Each work
//! sample of `T` stands for its thread's CPU time since the thread's previous sample (at
//! most its value); its weight `w` is that interval's overlap with the waiters' intervals,
//! counted once per waiter. `B` moves `min(1, Σw / K)` of its value to those samples' call
//! paths, in proportion to `w`. A window with no recorded waiting, a profile without times
//! (format version 2), or a thread without work samples in it, moves nothing.
//!
//! The lock view, its pairs and the timeline still name the call that ended the waits (its
//! context); only the calling-context views (top-down, bottom-up, flat, flame graphs,
//! exports) see the blame at the late work.
//!
//! Invariants: shares are in `[0, 1]` and add up to at most 1 per blame sample, so a
//! sample's value is conserved by its caller; only blame samples of kinds
//! [`moves_to_late_work`] names move, and only to work samples of their own thread. Pure;
//! not used from the runtime (analysis code). Cost: a sort of each thread's work samples and
//! of each object's waits and blames; each blame visits the waits and work samples that
//! overlap its window.

use super::intervals::{clip, Intervals, Waited};
use crate::format::read::{ProcessProfile, StackId};
use crate::format::WaitKind;
use std::collections::HashMap;

/// Whether blame of `kind` moves to the late work: the events whose provider is a thread
/// arriving or ending (a barrier, a join), not a release of a lock.
pub fn moves_to_late_work(kind: WaitKind) -> bool {
    matches!(kind, WaitKind::Barrier | WaitKind::Join)
}

/// Where part of a blame sample's value goes: a work sample's call path and its share.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Share {
    pub stack: StackId,
    /// Whether the path's frame 0 is a return address (as the work sample's).
    pub first_is_return: bool,
    /// Part of the blame sample's value, in `[0, 1]`.
    pub share: f64,
}

/// The shares of each blame sample that moves (by its index in `proc.samples`); blame
/// samples not in it stay where they were recorded.
pub fn late_work(proc: &ProcessProfile) -> HashMap<usize, Vec<Share>> {
    let (Some(work), Some(idleness), Some(blame)) = (
        proc.metric(super::metrics::WORK),
        proc.metric(super::metrics::IDLENESS),
        proc.metric(super::metrics::BLAME),
    ) else {
        return HashMap::new();
    };
    let movable = |flags: u8| WaitKind::from_flags(flags).is_some_and(moves_to_late_work);

    // Per object: its waits and its blames (time, sample index).
    let mut waits: HashMap<u64, Vec<Waited>> = HashMap::new();
    let mut blames: HashMap<u64, Vec<(u64, usize)>> = HashMap::new();
    for (i, s) in proc.samples.iter().enumerate() {
        if s.object == 0 || s.time == 0 || !movable(s.flags) {
            continue;
        }
        if s.metric == idleness && s.span > 0 {
            waits.entry(s.object).or_default().push(Waited {
                start: s.time.saturating_sub(s.span),
                end: s.time,
                tid: s.tid,
                object: s.object,
            });
        } else if s.metric == blame && s.value > 0 {
            blames.entry(s.object).or_default().push((s.time, i));
        }
    }
    if blames.is_empty() {
        return HashMap::new();
    }
    // Per thread: its work samples' CPU intervals, in time order.
    let mut worked: HashMap<u32, Vec<Worked>> = HashMap::new();
    for s in &proc.samples {
        if s.metric == work && s.time > 0 && s.value > 0 {
            worked.entry(s.tid).or_default().push(Worked {
                start: s.time.saturating_sub(s.value),
                end: s.time,
                stack: s.stack,
                first_is_return: s.first_is_return(),
            });
        }
    }
    for samples in worked.values_mut() {
        samples.sort_by_key(|w| w.end);
        // A sample stands for its thread's CPU time since the previous one, at most.
        for i in 1..samples.len() {
            let previous = samples[i - 1].end;
            samples[i].start = samples[i].start.max(previous);
        }
    }

    let waits = Intervals::of(waits);
    let mut moves = HashMap::new();
    for (object, mut object_blames) in blames {
        object_blames.sort_unstable();
        let mut previous_time = 0;
        let mut window_start = 0;
        for &(time, index) in &object_blames {
            if time != previous_time {
                window_start = previous_time;
                previous_time = time;
            }
            let window = (window_start, time);
            let overlapping: Vec<(u64, u64)> = waits.within(object, None, window).collect();
            let waited: u64 = overlapping.iter().map(|&(s, e)| e - s).sum();
            if waited == 0 {
                continue;
            }
            let Some(samples) = worked.get(&proc.samples[index].tid) else {
                continue;
            };
            let shares = shares_of(samples, window, &overlapping, waited);
            if !shares.is_empty() {
                moves.insert(index, shares);
            }
        }
    }
    moves
}

/// A work sample: the CPU interval it stands for and its call path.
struct Worked {
    start: u64,
    end: u64,
    stack: StackId,
    first_is_return: bool,
}

/// The shares of the work `samples` (one thread's, in time order) that overlap `waits`
/// (inside `window`, `waited` ns in all).
fn shares_of(
    samples: &[Worked],
    window: (u64, u64),
    waits: &[(u64, u64)],
    waited: u64,
) -> Vec<Share> {
    let first = samples.partition_point(|w| w.end <= window.0);
    let weighted: Vec<(&Worked, u64)> = samples[first..]
        .iter()
        .take_while(|w| w.start < window.1)
        .map(|w| {
            let weight = waits
                .iter()
                .filter_map(|&wait| clip((w.start, w.end), wait))
                .map(|(s, e)| e - s)
                .sum();
            (w, weight)
        })
        .filter(|&(_, weight)| weight > 0)
        .collect();
    let overlap: u64 = weighted.iter().map(|&(_, weight)| weight).sum();
    if overlap == 0 {
        return Vec::new();
    }
    let covered = (overlap as f64 / waited as f64).min(1.0);
    weighted
        .into_iter()
        .map(|(w, weight)| Share {
            stack: w.stack,
            first_is_return: w.first_is_return,
            share: covered * weight as f64 / overlap as f64,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::testutil::{add_flagged, app, process};
    use crate::format::read::Sample;

    const MS: u64 = 1_000_000;

    /// A sample of `metric` (0 work, 1 idleness, 2 blame) by `tid` at root-first `path`,
    /// on `object`, ending at `time` ms after `span` ms.
    fn add(p: &mut ProcessProfile, tid: u32, metric: u8, path: &[u64], at: (u64, u64, u64)) {
        let (object, time, span) = at;
        let frames: Vec<_> = path.iter().map(|&o| app(o)).collect();
        let value = if metric == 1 { span * MS } else { 5 * MS };
        add_flagged(p, tid, metric, &frames, value, WaitKind::Barrier.flags());
        let s: &mut Sample = p.samples.last_mut().unwrap();
        (s.object, s.time, s.span) = (object, time * MS, span * MS);
        if metric == 0 {
            s.flags = 0;
        }
    }

    fn shares(p: &ProcessProfile, index: usize) -> Vec<(Vec<u64>, f64)> {
        late_work(p)
            .get(&index)
            .into_iter()
            .flatten()
            .map(|s| {
                let frames = p.stacks.get(s.stack).iter().rev().map(|f| f.offset);
                (frames.collect(), s.share)
            })
            .collect()
    }

    #[test]
    fn a_barriers_blame_moves_to_the_late_threads_work_in_proportion_to_the_waiting() {
        let mut p = process(1, &["work", "idleness", "blame"]);
        // Thread 2 computes in slow (10 ms: samples ending at 5 and 10 ms) and arrives last
        // at 10 ms; thread 3 waited from 2 ms, thread 4 from 6 ms.
        add(&mut p, 2, 0, &[0x10, 0x20], (0, 5, 0));
        add(&mut p, 2, 0, &[0x10, 0x30], (0, 10, 0));
        add(&mut p, 3, 1, &[0x10, 0x40], (0xb, 10, 8));
        add(&mut p, 4, 1, &[0x10, 0x40], (0xb, 11, 5));
        add(&mut p, 2, 2, &[0x10, 0x50], (0xb, 10, 0));
        // The waiting (8 + 4 ms to the arrival) weighs the first sample by 3 ms (thread 3
        // alone), the second by 5 + 4 ms.
        let got = shares(&p, 4);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0, vec![0x10, 0x20]);
        assert!((got[0].1 - 3.0 / 12.0).abs() < 1e-9, "{got:?}");
        assert_eq!(got[1].0, vec![0x10, 0x30]);
        assert!((got[1].1 - 9.0 / 12.0).abs() < 1e-9, "{got:?}");
    }

    #[test]
    fn the_window_starts_at_the_previous_event_and_a_thread_off_the_cpu_keeps_the_rest() {
        let mut p = process(1, &["work", "idleness", "blame"]);
        // Round 1 ends at 10 ms, round 2 at 30 ms. In round 2 thread 2 computes only from
        // 25 to 30 ms (its one sample since 10 ms: 5 ms of CPU), thread 3 waits 12-30 ms.
        add(&mut p, 2, 0, &[0x20], (0, 10, 0));
        add(&mut p, 3, 1, &[0x40], (0xb, 10, 4));
        add(&mut p, 2, 2, &[0x50], (0xb, 10, 0));
        add(&mut p, 2, 0, &[0x30], (0, 30, 0));
        add(&mut p, 3, 1, &[0x40], (0xb, 30, 18));
        add(&mut p, 2, 2, &[0x50], (0xb, 30, 0));
        let got = shares(&p, 5);
        // 5 of the 18 ms of waiting lie in its work; the rest stays at the barrier call.
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, vec![0x30]);
        assert!((got[0].1 - 5.0 / 18.0).abs() < 1e-9, "{got:?}");
        // Round 1: the sample ending at 10 ms (5 ms of CPU) covers the whole 4 ms wait.
        assert_eq!(shares(&p, 2), vec![(vec![0x20], 1.0)]);
    }

    #[test]
    fn waits_without_times_and_other_kinds_move_nothing() {
        let mut p = process(1, &["work", "idleness", "blame"]);
        add(&mut p, 2, 0, &[0x20], (0, 10, 0));
        add(&mut p, 3, 1, &[0x40], (0xb, 10, 4));
        add(&mut p, 2, 2, &[0x50], (0xb, 10, 0));
        // A mutex's blame stays at its release.
        p.samples[2].flags = WaitKind::Mutex.flags();
        p.samples[1].flags = WaitKind::Mutex.flags();
        assert!(late_work(&p).is_empty());
        // A barrier's, in a profile without times (format version 2), too.
        p.samples[2].flags = WaitKind::Barrier.flags();
        p.samples[1].flags = WaitKind::Barrier.flags();
        for s in &mut p.samples {
            (s.time, s.span) = (0, 0);
        }
        assert!(late_work(&p).is_empty());
    }
}
