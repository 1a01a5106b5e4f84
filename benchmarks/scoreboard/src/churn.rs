//! The lock-churn section: `benchmarks/workloads/scale_churn.c` (2 threads making, taking once
//! and destroying 65M heap-allocated spin locks and mutexes in all, about [`LIVE`] of each
//! alive per thread) unprofiled vs `blameprof run -F 200` with its post-run summary: wall
//! time, the program's peak RSS, the peak RSS of `blameprof run` itself (its summary reads
//! the whole profile) and the profile's size; medians of N alternating runs.
//!
//! Targets (issue 38): at most [`TIME_TARGET`] times the unprofiled wall time, and the run's
//! summary under [`SUMMARY_TARGET_KIB`].

use anyhow::Result;
use scoreboard::stats;
use std::process::Command;

use crate::accuracy::{remove, Tools, RUN_LIMIT};
use crate::overhead::disk_kib;
use crate::proc;
use crate::workloads::Workload;

/// Threads making locks.
pub const THREADS: u64 = 2;
/// Locks of each kind each thread makes: 65M spin locks and mutexes in all.
pub const PER_THREAD: u64 = 16_250_000;
/// Locks of each kind each thread keeps alive.
pub const LIVE: u64 = 50_000;
/// The most the profiled run may take, as a multiple of the unprofiled one.
pub const TIME_TARGET: f64 = 1.3;
/// The most `blameprof run` may hold resident, its summary included (KiB).
pub const SUMMARY_TARGET_KIB: f64 = 200.0 * 1024.0;

/// The section's medians.
pub struct Churn {
    pub locks: u64,
    pub plain_s: f64,
    pub blameprof_s: f64,
    pub plain_kib: f64,
    pub blameprof_kib: f64,
    /// `blameprof run`'s own peak (the largest of it and the program: its summary).
    pub cli_kib: f64,
    pub profile_kib: f64,
}

impl Churn {
    pub fn time_ratio(&self) -> f64 {
        self.blameprof_s / self.plain_s
    }

    pub fn met(&self) -> bool {
        self.time_ratio() <= TIME_TARGET && self.cli_kib <= SUMMARY_TARGET_KIB
    }
}

/// Runs the workload `rounds` times unprofiled and under blameprof, alternating.
pub fn run(tools: &Tools, w: &Workload, rounds: usize) -> Result<Churn> {
    let args = [THREADS, PER_THREAD, LIVE].map(|a| a.to_string());
    let (mut plain, mut bp) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
    let (mut cli, mut sizes) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        let mut line = format!("scoreboard: churn round {round}:");
        for profiled in [false, true] {
            let dir = tools.profile_dir("scale_churn")?;
            let file = tools.scratch.join("scale_churn.rss");
            let cli_file = tools.scratch.join("scale_churn_cli.rss");
            let mut inner = proc::wrapped(&tools.peak_rss, &file, &w.binary);
            inner.args(&args);
            let mut cmd = if profiled {
                // Without -q: the summary is part of what a user runs.
                let mut cmd = Command::new(&tools.peak_rss);
                cmd.arg(&cli_file)
                    .arg("--")
                    .arg(&tools.blameprof)
                    .args(["run", "-F", "200", "-o"])
                    .arg(&dir)
                    .arg("--")
                    .arg(inner.get_program())
                    .args(inner.get_args());
                cmd
            } else {
                inner
            };
            let (wall, kib) = proc::run_for_peak(&mut cmd, &file, RUN_LIMIT)?;
            let into = if profiled { &mut bp } else { &mut plain };
            into.0.push(wall);
            into.1.push(kib as f64);
            if profiled {
                cli.push(proc::read_peak(&cli_file)? as f64);
                sizes.push(disk_kib(&dir) as f64);
                remove(&cli_file)?;
            }
            remove(&dir)?;
            remove(&file)?;
            line += &format!(" {wall:.3} s {kib} KiB;");
        }
        eprintln!("{line}");
    }
    let m = |v: &[f64]| stats::median(v).unwrap_or(f64::NAN);
    Ok(Churn {
        locks: 2 * THREADS * PER_THREAD,
        plain_s: m(&plain.0),
        blameprof_s: m(&bp.0),
        plain_kib: m(&plain.1),
        blameprof_kib: m(&bp.1),
        cli_kib: m(&cli),
        profile_kib: m(&sizes),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_makes_the_papers_65m_locks_and_is_judged_by_both_targets() {
        assert_eq!(2 * THREADS * PER_THREAD, 65_000_000);
        let c = |blameprof_s: f64, cli_kib: f64| Churn {
            locks: 65_000_000,
            plain_s: 1.0,
            blameprof_s,
            plain_kib: 1.0,
            blameprof_kib: 1.0,
            cli_kib,
            profile_kib: 1.0,
        };
        assert!(c(1.25, 150_000.0).met());
        assert!(!c(1.4, 150_000.0).met());
        assert!(!c(1.2, 250_000.0).met());
    }
}
