//! The scale section: `benchmarks/workloads/scale_locks.c` unprofiled vs `blameprof run -q
//! -F 200` as threads (1 to 4x the CPUs, doubling) and distinct locks (1, 1K, 1M, 65M; at
//! most `LIVE_LOCKS` exist at once) grow: wall time and peak RSS, medians of N alternating
//! runs.

use std::process::Command;

use anyhow::{bail, Result};
use scoreboard::stats;

use crate::accuracy::{remove, Tools, RUN_LIMIT};
use crate::proc;
use crate::workloads::Workload;

/// Distinct locks per run.
pub const DISTINCT: [u64; 4] = [1, 1_000, 1_000_000, 65_000_000];
/// Most locks alive at once.
pub const LIVE_LOCKS: u64 = 340_000;
/// Lock/unlock operations per run, all threads together, unless there are more distinct
/// locks (then one per lock). 8M uncontended pairs take about 0.1 s unprofiled on the
/// project's VM; the 65M-lock runs about 0.6-0.9 s.
pub const MIN_OPS: u64 = 8_000_000;

/// One configuration of `scale_locks`.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    pub threads: usize,
    pub distinct: u64,
    pub live: u64,
    pub ops: u64,
}

/// The thread counts: 1, 2, 4, ... up to 4x `cpus`.
pub fn thread_counts(cpus: usize) -> Vec<usize> {
    std::iter::successors(Some(1usize), |t| Some(t * 2))
        .take_while(|&t| t <= 4 * cpus.max(1))
        .collect()
}

/// Every (threads, distinct locks) case.
pub fn cases(cpus: usize) -> Vec<Case> {
    thread_counts(cpus)
        .into_iter()
        .flat_map(|threads| {
            DISTINCT.into_iter().map(move |distinct| Case {
                threads,
                distinct,
                live: distinct.min(LIVE_LOCKS),
                ops: distinct.max(MIN_OPS),
            })
        })
        .collect()
}

/// One case's medians.
pub struct Measured {
    pub case: Case,
    pub plain_s: f64,
    pub blameprof_s: f64,
    pub plain_kib: f64,
    pub blameprof_kib: f64,
    pub profile_kib: f64,
}

/// Runs every case `rounds` times unprofiled and under blameprof, alternating.
pub fn run(tools: &Tools, w: &Workload, cases: &[Case], rounds: usize) -> Result<Vec<Measured>> {
    let mut results = Vec::new();
    for case in cases {
        let args = [case.threads as u64, case.distinct, case.live, case.ops].map(|a| a.to_string());
        let (mut plain, mut bp) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
        let mut sizes = Vec::new();
        for round in 1..=rounds {
            let mut cmd = Command::new(&w.binary);
            cmd.args(&args);
            let o = proc::run(&mut cmd, false, Some(RUN_LIMIT))?;
            if !o.success() {
                bail!("scale_locks {}: {}", args.join(" "), o.describe());
            }
            plain.0.push(o.wall.as_secs_f64());
            plain.1.push(o.maxrss_kib as f64);
            let dir = tools.profile_dir("scale_locks")?;
            let mut cmd = Command::new(&tools.blameprof);
            cmd.args(["run", "-q", "-F", "200", "-o"])
                .arg(&dir)
                .arg("--")
                .arg(&w.binary)
                .args(&args);
            let p = proc::run(&mut cmd, false, Some(RUN_LIMIT))?;
            if !p.success() {
                bail!(
                    "blameprof run -- scale_locks {}: {}",
                    args.join(" "),
                    p.describe()
                );
            }
            bp.0.push(p.wall.as_secs_f64());
            bp.1.push(p.maxrss_kib as f64);
            sizes.push(crate::overhead::disk_kib(&dir) as f64);
            remove(&dir)?;
            eprintln!(
                "scoreboard: scale {} round {round}: {:.3} s / {:.3} s, {} / {} KiB",
                args.join(" "),
                o.wall.as_secs_f64(),
                p.wall.as_secs_f64(),
                o.maxrss_kib,
                p.maxrss_kib
            );
        }
        let m = |v: &[f64]| stats::median(v).unwrap_or(f64::NAN);
        results.push(Measured {
            case: *case,
            plain_s: m(&plain.0),
            blameprof_s: m(&bp.0),
            plain_kib: m(&plain.1),
            blameprof_kib: m(&bp.1),
            profile_kib: m(&sizes),
        });
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_double_up_to_four_times_the_cpus() {
        assert_eq!(thread_counts(2), [1, 2, 4, 8]);
        assert_eq!(thread_counts(1), [1, 2, 4]);
        let c = cases(2);
        assert_eq!(c.len(), 16);
        assert_eq!(c[3].live, LIVE_LOCKS);
        assert_eq!(c[3].ops, 65_000_000);
        assert_eq!(c[0].ops, MIN_OPS);
    }
}
