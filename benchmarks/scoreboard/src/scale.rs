//! The scale section: `benchmarks/workloads/scale_locks.c` unprofiled vs `blameprof run -q
//! -F 200` as threads (1 to 4x the CPUs, doubling) and distinct locks (1, 1K, 1M, 65M; at
//! most `LIVE_LOCKS` exist at once) grow: wall time and peak RSS, medians of N alternating
//! runs, every run through the peak-RSS wrapper (`proc::wrapped`).

use anyhow::Result;
use scoreboard::stats;

use crate::accuracy::{remove, Tools, RUN_LIMIT};
use crate::overhead::{disk_kib, maybe_profiled};
use crate::proc;
use crate::workloads::Workload;

/// Distinct locks per run.
pub const DISTINCT: [u64; 4] = [1, 1_000, 1_000_000, 65_000_000];
/// Most locks alive at once.
pub const LIVE_LOCKS: u64 = 340_000;
/// Lock/unlock operations per run, all threads together, unless there are more distinct
/// locks (then one per lock). On the project's 2-CPU VM, 8M operations took 0.05-0.15 s
/// unprofiled (up to 3.3 s profiled on one lock shared by 8 threads) and the 65M-lock runs
/// 0.5-1.0 s (1.6 s profiled); 32M keeps blameprof's start-up out of the ratios while the
/// whole section (16 cases, 3 rounds) stays within about 5 minutes.
pub const MIN_OPS: u64 = 32_000_000;

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
            let mut line = format!("scoreboard: scale {} round {round}:", args.join(" "));
            for profiled in [false, true] {
                let dir = tools.profile_dir("scale_locks")?;
                let file = tools.scratch.join("scale_locks.rss");
                let mut inner = proc::wrapped(&tools.peak_rss, &file, &w.binary);
                inner.args(&args);
                let mut cmd = maybe_profiled(tools, &dir, inner, profiled);
                let (wall, kib) = proc::run_for_peak(&mut cmd, &file, RUN_LIMIT)?;
                let into = if profiled { &mut bp } else { &mut plain };
                into.0.push(wall);
                into.1.push(kib as f64);
                if profiled {
                    sizes.push(disk_kib(&dir) as f64);
                }
                remove(&dir)?;
                remove(&file)?;
                line += &format!(" {wall:.3} s {kib} KiB;");
            }
            eprintln!("{line}");
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
        assert_eq!(c[1].live, 1_000);
    }
}
