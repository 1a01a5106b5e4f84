//! Chains of waits: the root-cause metric (`root`, issue 41).
//!
//! Job: `blame` stops at the first hop: `lookup` waits for `table_lock`, and its holder,
//! `insert`, takes the blame at its unlock. But when `insert` itself waits inside that hold
//! (for `log_lock`, held by `flush` computing), what keeps `lookup` waiting meanwhile is
//! `flush`. [`chains`] passes that part of each release's blame along to the releases that
//! ended the holder's own wait, and on, hop by hop (wPerf's cascaded redistribution, OSDI'18;
//! Perfetto's critical path): the `root` metric is blame followed to where the chain ends.
//!
//! The rule, per release `R` of a lock (a blame sample of a mutex, rwlock or spin lock with
//! its hold: its time and span) by thread `H`:
//! - `H`'s own blamed waits (idleness samples) inside the hold, on other objects, are the
//!   stretches `R`'s waiters waited for `H`'s waits; the share of `R`'s amount that passes
//!   along through a wait `w` is the others' waiting on `R`'s lock during `w` over their
//!   waiting during the whole hold (both from their idleness samples' intervals).
//! - It passes to the releases that ended `w`: a lock's releases by other threads whose holds
//!   overlap `w`, in proportion to the overlap; an event's (a signal, post, wake, last
//!   arrival, thread end) inside `w`, each for the stretch since the one before (the event
//!   rule of `docs/lock-blame.md`). A wait no recorded release ended passes nothing.
//! - What arrives at a release passes on by the same rule (a hop), at most [`MAX_HOPS`]
//!   times; what is still passing then stays where it is and is counted ([`Chains::cut`]):
//!   a cycle (a knot of threads waiting on each other's locks in turn) or a longer chain is
//!   never followed forever.
//!
//! Invariants: amounts only move between blame samples, so the root total equals the blame
//! total ([`Chains::delta`] adds up to 0, to rounding); a release passes on at most what it
//! holds; events (whose blame has no hold) and unblamed waits pass nothing. Pure; analysis
//! code, not used from the runtime. Cost: sorts of the samples per thread and per object;
//! each release visits its holder's waits inside its hold and their enders.

use super::calibration::Calibration;
use super::intervals::{overlap, Intervals, Waited};
use crate::format::read::ProcessProfile;
use crate::format::{WaitKind, SAMPLE_UNBLAMED};
use std::collections::HashMap;

/// Hops a chain is followed for, at most.
pub const MAX_HOPS: usize = 8;

/// What the chains move: per blame sample (its index in the process's samples), the change
/// of its amount from its blame to its root (calibrated ns); per passing, the amounts.
#[derive(Debug, Default)]
pub struct Chains {
    pub delta: HashMap<usize, f64>,
    /// (from blame sample, to blame sample, amount): every amount passed, over all hops.
    pub passed: Vec<(usize, usize, f64)>,
    /// What was still passing after [`MAX_HOPS`] hops (ns): left at the release it had
    /// reached.
    pub cut: f64,
}

/// A blame sample: who released what, and when its hold ran (`start == end` for an event).
struct Release {
    index: usize,
    tid: u32,
    object: u64,
    start: u64,
    end: u64,
    value: f64,
    /// A lock's release with a known hold (it may pass along).
    hold: bool,
}

/// The chains of `proc`'s blame samples, their values calibrated by `calibration`.
pub fn chains(proc: &ProcessProfile, calibration: Calibration) -> Chains {
    let (Some(idleness), Some(blame)) = (
        proc.metric(super::metrics::IDLENESS),
        proc.metric(super::metrics::BLAME),
    ) else {
        return Chains::default();
    };
    let mut releases = Vec::new();
    let mut waits_of_thread: HashMap<u32, Vec<Waited>> = HashMap::new();
    let mut waits_on: HashMap<u64, Vec<Waited>> = HashMap::new();
    for (index, s) in proc.samples.iter().enumerate() {
        if s.object == 0 || s.time == 0 {
            continue;
        }
        if s.metric == blame && s.value > 0 {
            let hold = matches!(
                WaitKind::from_flags(s.flags),
                Some(WaitKind::Mutex | WaitKind::RwLock | WaitKind::Spin)
            ) && s.span > 0;
            releases.push(Release {
                index,
                tid: s.tid,
                object: s.object,
                start: s.time.saturating_sub(s.span),
                end: s.time,
                value: calibration.apply(s.value, s.flags) as f64,
                hold,
            });
        } else if s.metric == idleness && s.span > 0 && s.flags & SAMPLE_UNBLAMED == 0 {
            let w = Waited {
                start: s.time.saturating_sub(s.span),
                end: s.time,
                tid: s.tid,
                object: s.object,
            };
            waits_of_thread.entry(s.tid).or_default().push(w);
            waits_on.entry(s.object).or_default().push(w);
        }
    }
    if !releases.iter().any(|r| r.hold) {
        return Chains::default();
    }
    // A thread waits for one thing at a time: its waits sorted by start are sorted by end.
    for w in waits_of_thread.values_mut() {
        w.sort_unstable_by_key(|w| w.end);
    }
    let waiters = Intervals::of(waits_on);
    let mut ends: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, r) in releases.iter().enumerate() {
        ends.entry(r.object).or_default().push(i);
    }
    for list in ends.values_mut() {
        list.sort_unstable_by_key(|&i| releases[i].end);
    }
    let longest_hold: HashMap<u64, u64> = ends
        .iter()
        .map(|(&o, list)| {
            let longest = list.iter().map(|&i| releases[i].end - releases[i].start);
            (o, longest.max().unwrap_or(0))
        })
        .collect();

    // Each release's passings: (release it passes to, share of its amount).
    let edges: Vec<Vec<(usize, f64)>> = releases
        .iter()
        .map(|r| {
            let own = waits_of_thread.get(&r.tid).map_or(&[][..], Vec::as_slice);
            match r.hold {
                true => passings(r, own, &waiters, &releases, (&ends, &longest_hold)),
                false => Vec::new(),
            }
        })
        .collect();

    let mut root = vec![0.0; releases.len()];
    let mut passing: Vec<f64> = releases.iter().map(|r| r.value).collect();
    let mut out = Chains::default();
    for _ in 0..MAX_HOPS {
        let mut next = vec![0.0; releases.len()];
        let mut moved = false;
        for (i, amount) in passing.iter().enumerate().filter(|(_, &a)| a > 0.0) {
            let mut kept = *amount;
            for &(to, share) in &edges[i] {
                let part = amount * share;
                next[to] += part;
                kept -= part;
                out.passed
                    .push((releases[i].index, releases[to].index, part));
                moved = true;
            }
            root[i] += kept.max(0.0);
        }
        passing = next;
        if !moved {
            break;
        }
    }
    for (i, amount) in passing.into_iter().enumerate() {
        root[i] += amount;
        out.cut += amount;
    }
    out.passed = merge_passings(out.passed);
    out.delta = releases
        .iter()
        .zip(root)
        .filter(|(r, root)| (root - r.value).abs() > 0.5)
        .map(|(r, root)| (r.index, root - r.value))
        .collect();
    out
}

/// Where release `r` passes its amount: through each of its holder's own waits (`own`,
/// sorted) inside its hold, to the releases that ended that wait.
fn passings(
    r: &Release,
    own: &[Waited],
    waiters: &Intervals,
    releases: &[Release],
    (ends, longest_hold): (&HashMap<u64, Vec<usize>>, &HashMap<u64, u64>),
) -> Vec<(usize, f64)> {
    let hold = (r.start, r.end);
    let whole = waiters.waiting(r.object, Some(r.tid), hold);
    if whole == 0 {
        return Vec::new();
    }
    let first = own.partition_point(|w| w.end <= hold.0);
    let mut out = Vec::new();
    for w in own[first..].iter().take_while(|w| w.start < hold.1) {
        if w.object == r.object {
            continue;
        }
        let inside = (w.start.max(hold.0), w.end.min(hold.1));
        let during = waiters.waiting(r.object, Some(r.tid), inside);
        if during == 0 {
            continue;
        }
        let Some(list) = ends.get(&w.object) else {
            continue;
        };
        let longest = longest_hold.get(&w.object).copied().unwrap_or(0);
        // The releases that ended `w`: holds overlapping it, or events inside it, each for
        // its stretch since the previous event.
        let from = list.partition_point(|&i| releases[i].end <= w.start);
        let mut previous_event = w.start;
        let enders: Vec<(usize, u64)> = list[from..]
            .iter()
            .take_while(|&&i| releases[i].end < w.end.saturating_add(longest).saturating_add(1))
            .filter(|&&i| releases[i].tid != r.tid)
            .filter_map(|&i| {
                let e = &releases[i];
                let weight = match e.start < e.end {
                    true => overlap((e.start, e.end), (w.start, w.end)),
                    false if e.end <= w.end => {
                        let stretch = e.end.saturating_sub(previous_event);
                        previous_event = previous_event.max(e.end);
                        stretch
                    }
                    false => 0,
                };
                (weight > 0).then_some((i, weight))
            })
            .collect();
        let total: u64 = enders.iter().map(|e| e.1).sum();
        if total == 0 {
            continue;
        }
        let share = during as f64 / whole as f64;
        out.extend(
            enders
                .into_iter()
                .map(|(i, weight)| (i, share * weight as f64 / total as f64)),
        );
    }
    // Never more than the release holds (waits that overlap each other, or rounding).
    let sum: f64 = out.iter().map(|e| e.1).sum();
    if sum > 1.0 {
        for e in &mut out {
            e.1 /= sum;
        }
    }
    out
}

/// The passings summed per (from, to).
fn merge_passings(passed: Vec<(usize, usize, f64)>) -> Vec<(usize, usize, f64)> {
    let mut by: HashMap<(usize, usize), f64> = HashMap::new();
    for (from, to, amount) in passed {
        *by.entry((from, to)).or_default() += amount;
    }
    let mut out: Vec<(usize, usize, f64)> = by.into_iter().map(|((f, t), a)| (f, t, a)).collect();
    out.sort_by_key(|a| (a.0, a.1));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::testutil::{add_flagged, app, process};

    const MS: u64 = 1_000_000;
    const TABLE: u64 = 0xa;
    const LOG: u64 = 0xb;

    /// A sample of `metric` (1 idleness, 2 blame) by `tid` on `object` over `[from, to]` ms
    /// (a mutex's wait, or a release with its hold); a blame's value is `value` ms.
    fn add(
        p: &mut ProcessProfile,
        tid: u32,
        metric: u8,
        object: u64,
        (from, to): (u64, u64),
        value: u64,
    ) {
        add_flagged(
            p,
            tid,
            metric,
            &[app(u64::from(tid))],
            value * MS,
            WaitKind::Mutex.flags(),
        );
        let s = p.samples.last_mut().unwrap();
        (s.object, s.time, s.span) = (object, to * MS, (to - from) * MS);
    }

    fn chain_process() -> ProcessProfile {
        let mut p = process(1, &["work", "idleness", "blame"]);
        // lookup (2) waits for table from 0 to 20 ms; insert (3) holds it 0-20 ms, waiting
        // for log from 5 to 15 ms, which flush (4) holds from 0 to 15 ms.
        add(&mut p, 2, 1, TABLE, (0, 20), 20);
        add(&mut p, 3, 2, TABLE, (0, 20), 20); // sample 1
        add(&mut p, 3, 1, LOG, (5, 15), 10);
        add(&mut p, 4, 2, LOG, (0, 15), 10); // sample 3
        p
    }

    #[test]
    fn a_holders_blame_for_its_own_wait_passes_to_what_it_waited_for() {
        let p = chain_process();
        let c = chains(&p, Calibration::new(0, 0));
        // Half of lookup's 20 ms lies in insert's wait: 10 ms pass to flush.
        assert_eq!(c.delta.get(&1).map(|d| d.round()), Some(-10.0 * MS as f64));
        assert_eq!(c.delta.get(&3).map(|d| d.round()), Some(10.0 * MS as f64));
        assert_eq!(c.passed, vec![(1, 3, 10.0 * MS as f64)]);
        assert_eq!(c.cut, 0.0);
        let sum: f64 = c.delta.values().sum();
        assert!(sum.abs() < 1.0, "{sum}");
    }

    #[test]
    fn chains_are_followed_hop_by_hop_and_a_knot_is_cut() {
        let mut p = chain_process();
        // flush (4) itself waited for a third lock (0xc) from 0 to 15 ms, behind disk (5),
        // and insert (3)'s waiting passes on through it too.
        add(&mut p, 4, 1, 0xc, (0, 15), 15);
        add(&mut p, 5, 2, 0xc, (0, 15), 15); // sample 5
        let c = chains(&p, Calibration::new(0, 0));
        // Everything flush held passes on: its 10 ms, and the 10 ms it got from insert.
        assert_eq!(c.delta.get(&3).map(|d| d.round()), Some(-10.0 * MS as f64));
        assert_eq!(c.delta.get(&5).map(|d| d.round()), Some(20.0 * MS as f64));

        // Two threads each waiting for the other's lock inside their holds: a knot.
        let mut p = process(1, &["work", "idleness", "blame"]);
        add(&mut p, 2, 1, TABLE, (0, 10), 10);
        add(&mut p, 3, 2, TABLE, (0, 10), 10);
        add(&mut p, 3, 1, LOG, (0, 10), 10);
        add(&mut p, 4, 1, LOG, (0, 10), 10);
        add(&mut p, 2, 2, LOG, (0, 10), 10);
        add(&mut p, 2, 1, TABLE, (0, 10), 10);
        let c = chains(&p, Calibration::new(0, 0));
        assert!(c.cut > 0.0, "{c:?}");
        let sum: f64 = c.delta.values().sum();
        assert!(sum.abs() < 1.0, "{sum}");
    }

    #[test]
    fn events_end_a_chain_and_unblamed_waits_pass_nothing() {
        let mut p = chain_process();
        // insert's wait was unblamed (it timed out): nothing passes.
        p.samples[2].flags |= SAMPLE_UNBLAMED;
        assert!(chains(&p, Calibration::new(0, 0)).delta.is_empty());
        // A signal (an event, no hold) passes nothing on.
        let mut p = process(1, &["work", "idleness", "blame"]);
        add(&mut p, 2, 1, TABLE, (0, 10), 10);
        add_flagged(&mut p, 3, 2, &[app(3)], 10 * MS, WaitKind::CondVar.flags());
        let s = p.samples.last_mut().unwrap();
        (s.object, s.time, s.span) = (TABLE, 10 * MS, 0);
        assert!(chains(&p, Calibration::new(0, 0)).delta.is_empty());
    }
}
