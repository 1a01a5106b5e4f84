//! Late work: the blame of a barrier, a join or an event goes to the work the thread that
//! ended it did while the others waited (issue 41).
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
//! Events: a condition variable's blame is recorded at the signal, a semaphore's at the
//! post, a futex's at the wake; when its waiters wait for an event (a queue's consumers
//! for an item), what kept them waiting is what the signalling thread computed before it
//! signalled, and that blame moves the same way. When the object is a lock built on it,
//! its blame stays at the release, as a mutex's: taken in turns (a thread that waited on
//! it also ended others' waits on it: a semaphore used as a mutex, a hand-written futex
//! lock), or waited on at a path that is a lock's by its callers' names
//! (the caller's `lock_paths`, `wait_class::path_of_a_lock`: CPython's GIL, a Rust mutex).
//! An object is an address and a kind: an address reused by another primitive is another.
//!
//! The rule, per blame sample `B` of object `O` (a barrier, a joined thread, an event),
//! recorded at time `t` by thread `T`: its *window* runs from the previous blame of `O`
//! (an earlier time; the run's start when none) to `t`, the waiting it took being the waiting on `O`
//! since its previous event. The waiters' intervals on `O` (their idleness samples: a
//! wait's end and span), cut to the window, give `K`, the waiting of the window. Each work
//! sample of `T` stands for the stretch of time since the thread's previous sample (the
//! first one, for its value: its CPU time), and the last one before `t` for the stretch up
//! to `t` too (the thread went on in that code until it arrived or ended), less the
//! thread's own recorded waits; its weight `w` is that stretch's overlap with the waiters'
//! intervals, counted once per waiter. `B` moves `min(1, Σw / K)` of its value to those
//! samples' call paths, in proportion to `w`. A window with no recorded waiting, a profile
//! without times (format version 2), or a thread without work samples in it, moves
//! nothing.
//!
//! A stretch is wall time, not only CPU time: a late thread descheduled in its work (a
//! loaded machine) kept the others waiting as much as its computing did, and its samples
//! before and after say where it was. Only its own recorded waits (a lock, an event it
//! waited for: waiting it did not compute through, which the chains follow for locks) are
//! not its work's; the blame of those stays at the call that ended the waits. (Charged by
//! CPU time alone, a late thread descheduled for half its stage on a loaded machine left
//! half the blame at its barrier call.)
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
use std::collections::{HashMap, HashSet};

/// Whether blame of `kind` may move to the late work: the events whose provider is a
/// thread arriving or ending (a barrier, a join), or signalling, posting or waking (a
/// condition variable, a semaphore, a futex) when its waiters wait for an event rather
/// than a lock built on it ([`late_work`] tells); never a release of a lock.
pub fn moves_to_late_work(kind: WaitKind) -> bool {
    matches!(
        kind,
        WaitKind::Barrier
            | WaitKind::Join
            | WaitKind::CondVar
            | WaitKind::Semaphore
            | WaitKind::Futex
    )
}

/// An object as late work tells objects apart: its address and its kind's code (an
/// address freed and reused by another primitive is another object), in one word (user
/// addresses lie below 2^56).
fn object_key(object: u64, kind: WaitKind) -> u64 {
    object ^ (kind as u64) << 56
}

/// Whether the object of `key` ([`object_key`]) is an event a lock may be built on (a
/// condition variable, a semaphore, a futex), not a barrier or a join.
fn may_be_a_lock(key: u64) -> bool {
    !matches!(
        WaitKind::from_code((key >> 56) as u8),
        Some(WaitKind::Barrier | WaitKind::Join)
    )
}

/// How an object was waited on: the distinct paths of its waits, and the threads that
/// waited.
#[derive(Default)]
struct WaitedOn {
    paths: HashSet<(StackId, bool)>,
    tids: HashSet<u32>,
}

/// Whether an object whose blame samples are `blames` (time, sample index) is taken in
/// turns, as a lock is: a thread that waited on it (`on`) also ended others' waits on it
/// (a lock's waiter holds it next and wakes the next waiter at its release; an event's
/// consumer does not signal what it consumes).
///
/// A futex wake's blame may be shared with the thread that woke the waker (the wake
/// chain), at the waker's instant; that thread may have waited on the same word (a
/// consumer of a Rust condition variable), and then an event reads as a lock. Telling that
/// share from a wake of its own by the instant alone (a sample at another thread's instant
/// is not one) misread a hand-written futex lock in 1 run of 4: its peekers' releases were
/// all shared with the holder's inherited part. So every blame of a waiter counts.
fn taken_in_turns(proc: &ProcessProfile, blames: &[(u64, usize)], on: &WaitedOn) -> bool {
    blames
        .iter()
        .any(|&(_, i)| on.tids.contains(&proc.samples[i].tid))
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
/// samples not in it stay where they were recorded. `lock_paths` gives, of the distinct
/// waiter paths (`(stack, first_is_return)`) of the condition variables, semaphores and
/// futexes not taken in turns, those that are a lock's by their names (asked once).
pub fn late_work(
    proc: &ProcessProfile,
    lock_paths: impl FnOnce(&[(StackId, bool)]) -> HashSet<(StackId, bool)>,
) -> HashMap<usize, Vec<Share>> {
    let (Some(work), Some(idleness), Some(blame)) = (
        proc.metric(super::metrics::WORK),
        proc.metric(super::metrics::IDLENESS),
        proc.metric(super::metrics::BLAME),
    ) else {
        return HashMap::new();
    };

    // Per object (`object_key`): its waits, its blames (time, sample index) and how it was
    // waited on.
    let mut waits: HashMap<u64, Vec<Waited>> = HashMap::new();
    let mut blames: HashMap<u64, Vec<(u64, usize)>> = HashMap::new();
    let mut waited_on: HashMap<u64, WaitedOn> = HashMap::new();
    for (i, s) in proc.samples.iter().enumerate() {
        let Some(kind) = WaitKind::from_flags(s.flags).filter(|&k| moves_to_late_work(k)) else {
            continue;
        };
        if s.object == 0 || s.time == 0 {
            continue;
        }
        let object = object_key(s.object, kind);
        if s.metric == idleness {
            let on = waited_on.entry(object).or_default();
            on.paths.insert((s.stack, s.first_is_return()));
            on.tids.insert(s.tid);
        }
        if s.metric == idleness && s.span > 0 {
            waits.entry(object).or_default().push(Waited {
                start: s.time.saturating_sub(s.span),
                end: s.time,
                tid: s.tid,
                object,
            });
        } else if s.metric == blame && s.value > 0 {
            blames.entry(object).or_default().push((s.time, i));
        }
    }
    // An event's blame moves; a lock's built on a condition variable, semaphore or futex
    // stays at its release: taken in turns, or waited on at a lock's path by its names.
    // (Each object's blames sorted here, in time order for the turns and the windows.)
    blames.retain(|&object, object_blames| {
        object_blames.sort_unstable();
        waited_on
            .get(&object)
            .is_some_and(|on| !may_be_a_lock(object) || !taken_in_turns(proc, object_blames, on))
    });
    let mut undecided: Vec<(StackId, bool)> = blames
        .keys()
        .filter(|&&object| may_be_a_lock(object))
        .flat_map(|object| waited_on[object].paths.iter().copied())
        .collect();
    undecided.sort_unstable();
    undecided.dedup();
    let locks = lock_paths(&undecided);
    blames.retain(|&object, _| {
        !may_be_a_lock(object) || waited_on[&object].paths.is_disjoint(&locks)
    });
    if blames.is_empty() {
        return HashMap::new();
    }
    // Per thread: its work samples' stretches, in time order, and its own waits.
    let mut worked: HashMap<u32, Vec<Worked>> = HashMap::new();
    let mut own_waits: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
    for s in &proc.samples {
        if s.metric == work && s.time > 0 && s.value > 0 {
            worked.entry(s.tid).or_default().push(Worked {
                start: s.time.saturating_sub(s.value),
                end: s.time,
                stack: s.stack,
                first_is_return: s.first_is_return(),
            });
        } else if s.metric == idleness && s.time > 0 && s.span > 0 {
            let wait = (s.time.saturating_sub(s.span), s.time);
            own_waits.entry(s.tid).or_default().push(wait);
        }
    }
    for samples in worked.values_mut() {
        samples.sort_by_key(|w| w.end);
        // A sample stands for the stretch since the previous one.
        for i in 1..samples.len() {
            samples[i].start = samples[i - 1].end;
        }
    }
    for waits in own_waits.values_mut() {
        waits.sort_unstable();
    }

    let waits = Intervals::of(waits);
    let mut moves = HashMap::new();
    for (object, object_blames) in blames {
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
            let tid = proc.samples[index].tid;
            let Some(samples) = worked.get(&tid) else {
                continue;
            };
            let own = own_waits.get(&tid).map_or(&[][..], Vec::as_slice);
            let shares = shares_of(samples, own, window, (&overlapping, waited));
            if !shares.is_empty() {
                moves.insert(index, shares);
            }
        }
    }
    moves
}

/// A work sample: the stretch of time it stands for and its call path.
struct Worked {
    start: u64,
    end: u64,
    stack: StackId,
    first_is_return: bool,
}

/// The shares of the work `samples` (one thread's, in time order, whose own waits are
/// `own`, sorted) that overlap `waits` (inside `window`, `waited` ns in all). The last
/// sample before the window's end stands for the stretch up to it too.
fn shares_of(
    samples: &[Worked],
    own: &[(u64, u64)],
    window: (u64, u64),
    (waits, waited): (&[(u64, u64)], u64),
) -> Vec<Share> {
    let first = samples.partition_point(|w| w.end <= window.0);
    let last_before = samples.partition_point(|w| w.end <= window.1);
    let weighted: Vec<(&Worked, u64)> = samples[first..]
        .iter()
        .enumerate()
        .take_while(|(_, w)| w.start < window.1)
        .map(|(i, w)| {
            let end = match first + i + 1 == last_before {
                true => window.1,
                false => w.end,
            };
            let weight = without(own, (w.start, end))
                .flat_map(|piece| waits.iter().filter_map(move |&wait| clip(piece, wait)))
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

/// The pieces of `stretch` outside the intervals `gaps` (sorted by start; they may
/// overlap).
fn without(gaps: &[(u64, u64)], stretch: (u64, u64)) -> impl Iterator<Item = (u64, u64)> + '_ {
    // Gaps starting before the stretch's start may still reach into it: from the first
    // that ends after it (a linear scan of those that start before it would do; the
    // waits of one thread do not overlap, so their ends are sorted as their starts).
    let from = gaps.partition_point(|g| g.1 <= stretch.0);
    let mut at = stretch.0;
    let mut rest = gaps[from..].iter().take_while(move |g| g.0 < stretch.1);
    let mut done = false;
    std::iter::from_fn(move || loop {
        if done {
            return None;
        }
        match rest.next() {
            Some(&(s, e)) => {
                let piece = (at, s.min(stretch.1));
                at = at.max(e);
                if piece.0 < piece.1 {
                    return Some(piece);
                }
            }
            None => {
                done = true;
                return (at < stretch.1).then_some((at, stretch.1));
            }
        }
    })
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
        late_work(p, |_| HashSet::new())
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
    fn the_window_starts_at_the_previous_event_and_a_thread_waiting_itself_keeps_the_rest() {
        let mut p = process(1, &["work", "idleness", "blame"]);
        // Round 1 ends at 10 ms, round 2 at 30 ms. In round 2 thread 2 waits for a lock
        // (0xc) from 12 to 20 ms, and computes (or is descheduled) the rest: its one sample
        // since 10 ms ends at 25 ms; it arrives at 30 ms. Thread 3 waits 12-30 ms.
        add(&mut p, 2, 0, &[0x20], (0, 10, 0));
        add(&mut p, 3, 1, &[0x40], (0xb, 10, 4));
        add(&mut p, 2, 2, &[0x50], (0xb, 10, 0));
        add(&mut p, 2, 1, &[0x60], (0xc, 20, 8));
        add(&mut p, 2, 0, &[0x30], (0, 25, 0));
        add(&mut p, 3, 1, &[0x40], (0xb, 30, 18));
        add(&mut p, 2, 2, &[0x50], (0xb, 30, 0));
        let got = shares(&p, 6);
        // 10 of the 18 ms of waiting lie in its stretch from 10 ms to its arrival, less its
        // own wait: to its work (the stretch up to 30 ms is its last sample's); the 8 ms it
        // waited itself stay at the barrier call.
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, vec![0x30]);
        assert!((got[0].1 - 10.0 / 18.0).abs() < 1e-9, "{got:?}");
        // Round 1: the sample ending at 10 ms (5 ms of CPU) covers the whole 4 ms wait.
        assert_eq!(shares(&p, 2), vec![(vec![0x20], 1.0)]);
    }

    #[test]
    fn a_stretch_less_its_own_waits_is_what_lies_outside_them() {
        let gaps = [(2, 4), (3, 6), (8, 9), (12, 20)];
        let pieces: Vec<_> = without(&gaps, (1, 15)).collect();
        assert_eq!(pieces, [(1, 2), (6, 8), (9, 12)]);
        assert_eq!(without(&gaps, (6, 8)).collect::<Vec<_>>(), [(6, 8)]);
        assert_eq!(without(&gaps, (13, 18)).count(), 0);
        assert_eq!(without(&[], (5, 7)).collect::<Vec<_>>(), [(5, 7)]);
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
        assert!(late_work(&p, |_| HashSet::new()).is_empty());
        // A barrier's, in a profile without times (format version 2), too.
        p.samples[2].flags = WaitKind::Barrier.flags();
        p.samples[1].flags = WaitKind::Barrier.flags();
        for s in &mut p.samples {
            (s.time, s.span) = (0, 0);
        }
        assert!(late_work(&p, |_| HashSet::new()).is_empty());
    }

    #[test]
    fn an_events_blame_moves_unless_its_waiters_wait_for_a_lock_built_on_it() {
        // A producer computes 10 ms (samples ending at 5 and 10 ms) and signals a
        // condition variable at 10 ms that a consumer waited on from 2 ms.
        let mut p = process(1, &["work", "idleness", "blame"]);
        add(&mut p, 2, 0, &[0x10, 0x20], (0, 5, 0));
        add(&mut p, 2, 0, &[0x10, 0x20], (0, 10, 0));
        add(&mut p, 3, 1, &[0x10, 0x40], (0xb, 10, 8));
        add(&mut p, 2, 2, &[0x10, 0x50], (0xb, 10, 0));
        for i in [2, 3] {
            p.samples[i].flags = WaitKind::CondVar.flags();
        }
        let consumer = p.samples[2].stack;
        // Waiting for an item: the producer's computing made the consumer wait.
        let moved: f64 = shares(&p, 3).iter().map(|(_, share)| share).sum();
        assert!((moved - 1.0).abs() < 1e-9, "{moved}");
        // Waiting at a lock built on the condition variable (a GIL): its release keeps it.
        let named = |paths: &[(StackId, bool)]| {
            paths
                .iter()
                .copied()
                .filter(|&(stack, _)| stack == consumer)
                .collect()
        };
        assert!(late_work(&p, named).is_empty());
        // Taken in turns, as a lock: the consumer also ends waits on it (at 12 ms).
        add(&mut p, 3, 2, &[0x10, 0x60], (0xb, 12, 0));
        p.samples[4].flags = WaitKind::CondVar.flags();
        assert!(late_work(&p, |_| HashSet::new()).is_empty());
        // A barrier at the same address is another object: its blame moves.
        add(&mut p, 2, 1, &[0x10, 0x70], (0xb, 20, 4));
        add(&mut p, 3, 0, &[0x10, 0x80], (0, 20, 0));
        add(&mut p, 3, 2, &[0x10, 0x90], (0xb, 20, 0));
        let moved = late_work(&p, |_| HashSet::new());
        assert_eq!(moved.keys().copied().collect::<Vec<_>>(), vec![7]);
    }
}
