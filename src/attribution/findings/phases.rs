//! The findings' phase rule: a lock contended in part of the run only (phased contention),
//! read off the timeline's phases of each lock (`attribution::timeline`).
//!
//! Invariants: a lock needs high and low phases, its high ones under
//! [`MAX_HIGH_COVERAGE`] of the run and holding most of its waiting; the finding costs the
//! waiting of its high phases. Not async-signal-safe (allocates); single-threaded.

use super::{ratio, Finding, Kind, Value, MAX_HIGH_COVERAGE, MIN_HIGH_WAITING_SHARE, MIN_PRESSURE};
use crate::attribution::timeline::{Phase, Timeline};

/// Phased contention: a lock with high and low phases whose high phases cover less than
/// [`MAX_HIGH_COVERAGE`] of the run, and make threads wait there (`timeline`: the timeline
/// of every lock).
pub(super) fn phase_findings(timeline: &Timeline) -> Vec<Finding> {
    timeline
        .locks
        .iter()
        .filter_map(|l| {
            let length = |p: &Phase| {
                let (start, end) = timeline.phase_ns(p);
                end - start
            };
            let total = l
                .phases
                .iter()
                .fold(0u64, |t, p| t.saturating_add(length(p)));
            let high: Vec<&Phase> = l.phases.iter().filter(|p| p.high).collect();
            let high_ns = high.iter().fold(0u64, |t, p| t.saturating_add(length(p)));
            let weighted = |spans: &mut dyn Iterator<Item = &Phase>| {
                let (w, ns) = spans.fold((0.0, 0u64), |(w, ns), p| {
                    let n = length(p);
                    (w + p.pressure * n as f64, ns + n)
                });
                ratio(w, ns as f64)
            };
            let high_pressure = weighted(&mut high.iter().copied());
            let low_pressure = weighted(&mut l.phases.iter().filter(|p| !p.high));
            let coverage = ratio(high_ns as f64, total as f64);
            let high_waiting = high_pressure * high_ns as f64;
            let waiting_share = ratio(
                high_waiting,
                high_waiting + low_pressure * total.saturating_sub(high_ns) as f64,
            );
            let (first_start, first_end) = timeline.phase_ns(high.first()?);
            let phased = high_ns < total
                && coverage < MAX_HIGH_COVERAGE
                && high_pressure >= MIN_PRESSURE
                && waiting_share >= MIN_HIGH_WAITING_SHARE;
            if !phased {
                return None;
            }
            Some(Finding {
                kind: Kind::PhasedContention,
                subject: l.name.clone(),
                pid: l.pid,
                lock_kind: l.kind,
                locks: vec![l.name.clone()],
                evidence: vec![
                    ("high_pressure", Value::Share(high_pressure)),
                    ("low_pressure", Value::Share(low_pressure)),
                    ("overall_pressure", Value::Share(l.overall_pressure)),
                    ("high_phases", Value::Count(high.len() as u64)),
                    ("high_share_of_run", Value::Share(coverage)),
                    ("first_high_start_ns", Value::Ns(first_start)),
                    ("first_high_end_ns", Value::Ns(first_end)),
                ],
                text: "pressure {high_pressure} in {high_phases} high phase(s) covering \
                       {high_share_of_run} of the run (the first from {first_high_start_ns} \
                       to {first_high_end_ns}), {low_pressure} elsewhere ({overall_pressure} \
                       over the whole run)"
                    .to_owned(),
                fix: "the contention belongs to a phase of the run: look at what the program \
                      does then ('report --view timeline') and fix that phase's critical \
                      sections or thread count rather than the lock everywhere"
                    .to_owned(),
                cost_ns: high
                    .iter()
                    .flat_map(|p| l.wait_ns.get(p.start..p.end).unwrap_or(&[]))
                    .fold(0u64, |t, &ns| t.saturating_add(ns)),
            })
        })
        .collect()
}
