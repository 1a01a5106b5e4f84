//! Each thread's CPU time after its last work sample: added to the profile at that sample's
//! path.
//!
//! Job: a work sample carries the thread's CPU time since its previous one, so what a thread
//! used after its last sample reaches no sample. For most threads that is under one period;
//! but a perf task clock counts user-mode time only (`sampler::timer`), so a thread that
//! mostly waits in system calls is sampled once every few milliseconds of its CPU time, and
//! its tail was a large part of it: the four lock threads of `tests/diff.rs`'s workload lost
//! 2-6 ms of their 11 each, a different amount each run. The runtime writes the tail into
//! the thread's end record (format version 5: [`ThreadInfo::tail_ns`]), and
//! [`add_tails`] adds it as one more work sample at the path of the thread's last one, at
//! the thread's end: the same estimate a sample makes of the time before it (charged where
//! the thread was when the sample was taken), made of the time after.
//!
//! A thread with no work sample keeps its tail unattributed (its whole CPU time: the
//! summary's warning about threads too short to sample covers it). Not async-signal-safe.
//!
//! [`ThreadInfo::tail_ns`]: super::ThreadInfo::tail_ns

use super::{ProcessProfile, Sample};
use crate::protocol;
use std::collections::HashMap;

/// Adds each thread's tail as a work sample at its last work sample's path.
pub(super) fn add_tails(p: &mut ProcessProfile) {
    let Some(work) = p.metric(protocol::WORK.name) else {
        return;
    };
    let tails: HashMap<u32, (u64, Option<u64>)> = p
        .threads
        .iter()
        .filter_map(|t| Some((t.tid, (t.tail_ns.filter(|&ns| ns > 0)?, t.end_ns))))
        .collect();
    if tails.is_empty() {
        return;
    }
    let mut last: HashMap<u32, usize> = HashMap::new();
    for (i, s) in p.samples.iter().enumerate() {
        if s.metric == work && tails.contains_key(&s.tid) {
            last.insert(s.tid, i);
        }
    }
    let mut added: Vec<Sample> = last
        .into_iter()
        .map(|(tid, i)| {
            let (tail, end) = tails[&tid];
            let s = &p.samples[i];
            Sample {
                value: tail,
                time: end.map_or(s.time, |end| end.max(s.time)),
                span: 0,
                ..*s
            }
        })
        .collect();
    added.sort_by_key(|s| s.tid);
    p.samples.extend(added);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::{ProcessHeader, StackTable, ThreadInfo};
    use crate::{Frame, MetricDef};

    fn sample(tid: u32, metric: u8, value: u64, stack: crate::read::StackId, time: u64) -> Sample {
        Sample {
            tid,
            metric,
            flags: 0,
            value,
            stack,
            object: 0,
            time,
            span: 0,
        }
    }

    #[test]
    fn a_threads_tail_goes_to_its_last_work_samples_path_at_its_end() {
        let mut stacks = StackTable::default();
        let f = |offset| Frame { module: 1, offset };
        let early = stacks.intern(&[f(1), f(9)]);
        let late = stacks.intern(&[f(2), f(9)]);
        let wait = stacks.intern(&[f(3), f(9)]);
        let mut p = ProcessProfile {
            header: ProcessHeader {
                metrics: ["work", "idleness"]
                    .iter()
                    .map(|n| MetricDef {
                        name: n.to_string(),
                        unit: "ns".into(),
                        description: String::new(),
                    })
                    .collect(),
                ..Default::default()
            },
            stacks,
            samples: vec![
                sample(7, 0, 100, early, 10),
                sample(7, 0, 200, late, 20),
                sample(7, 1, 50, wait, 30),
                sample(8, 1, 50, wait, 30),
            ],
            threads: vec![
                ThreadInfo {
                    tid: 7,
                    tail_ns: Some(40),
                    end_ns: Some(35),
                    ..Default::default()
                },
                // No work sample: its tail stays out.
                ThreadInfo {
                    tid: 8,
                    tail_ns: Some(70),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        add_tails(&mut p);
        assert_eq!(p.samples.len(), 5);
        assert_eq!(p.samples[4], sample(7, 0, 40, late, 35));
    }
}
