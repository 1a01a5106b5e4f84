//! The contention-fidelity section: `benchmarks/workloads/fidelity_trylock.c`, which counts
//! its own contended acquisitions (a failed trylock before each lock), unprofiled vs
//! `blameprof run -q -F 200`: the contended fraction both ways and the wall-time ratio,
//! medians of at least [`MIN_ROUNDS`] alternating runs. A profiler that lengthens critical sections, or the path
//! into them, makes more acquisitions contended: it measures a different program.

use anyhow::{bail, Context, Result};
use scoreboard::stats;

use crate::accuracy::{remove, Tools, RUN_LIMIT};
use crate::overhead::maybe_profiled;
use crate::proc;
use crate::workloads::Workload;

/// Acquisitions per run, all threads together.
pub const ACQUISITIONS: u64 = 8_000_000;

/// Fewest alternating rounds per thread count: the unprofiled contended fraction moves by
/// up to 2x from run to run (its medians of 9 ranged over 9.5-16%), so fewer rounds cannot
/// resolve a 20% band.
pub const MIN_ROUNDS: usize = 15;

/// Targets (issue 22): the contended fraction profiled within 20% (relative) of unprofiled,
/// and the profiled run at most 1.5x the unprofiled one.
pub const FRACTION_TOLERANCE: f64 = 0.20;
pub const WALL_TARGET: f64 = 1.5;

/// One thread count's medians.
pub struct Fidelity {
    pub threads: usize,
    pub plain_fraction: f64,
    pub blameprof_fraction: f64,
    pub plain_s: f64,
    pub blameprof_s: f64,
    /// Median of the rounds' wall-time ratios.
    pub wall_ratio: f64,
}

impl Fidelity {
    /// Profiled contended fraction over the unprofiled one.
    pub fn fraction_ratio(&self) -> f64 {
        self.blameprof_fraction / self.plain_fraction
    }

    pub fn met(&self) -> bool {
        (self.fraction_ratio() - 1.0).abs() <= FRACTION_TOLERANCE && self.wall_ratio <= WALL_TARGET
    }
}

/// The thread counts: 2x and 4x the CPUs (one lock oversubscribed, as in the issue).
pub fn thread_counts(cpus: usize) -> [usize; 2] {
    [2 * cpus.max(1), 4 * cpus.max(1)]
}

/// The contended fraction a run printed (`fidelity: contended <fraction> ...`).
pub fn parse_fraction(stdout: &str) -> Option<f64> {
    stdout.lines().find_map(|line| {
        let mut words = line
            .strip_prefix("fidelity: contended ")?
            .split_whitespace();
        words.next()?.parse().ok()
    })
}

/// Runs each thread count `rounds` times (at least [`MIN_ROUNDS`]) unprofiled and under
/// blameprof, alternating.
pub fn run(tools: &Tools, w: &Workload, threads: &[usize], rounds: usize) -> Result<Vec<Fidelity>> {
    let rounds = rounds.max(MIN_ROUNDS);
    let mut results = Vec::new();
    for &t in threads {
        let per_thread = ACQUISITIONS / t as u64;
        let args = [t.to_string(), per_thread.to_string()];
        let (mut fractions, mut walls, mut ratios) = (
            [Vec::new(), Vec::new()],
            [Vec::new(), Vec::new()],
            Vec::new(),
        );
        for round in 1..=rounds {
            let mut wall = [0.0; 2];
            for (i, profiled) in [false, true].into_iter().enumerate() {
                let dir = tools.profile_dir(&w.name)?;
                let mut inner = std::process::Command::new(&w.binary);
                inner.args(&args);
                let mut cmd = maybe_profiled(tools, &dir, inner, profiled);
                let o = proc::run(&mut cmd, true, Some(RUN_LIMIT))?;
                if !o.success() {
                    bail!("{cmd:?}: {}", o.describe());
                }
                let fraction = parse_fraction(&o.stdout)
                    .with_context(|| format!("{}: no 'fidelity: contended' line", w.name))?;
                fractions[i].push(fraction);
                wall[i] = o.wall.as_secs_f64();
                walls[i].push(wall[i]);
                remove(&dir)?;
            }
            ratios.push(wall[1] / wall[0]);
            eprintln!(
                "scoreboard: fidelity {t} threads round {round}: contended {:.4} -> {:.4}, {:.3} s -> {:.3} s",
                fractions[0][round - 1], fractions[1][round - 1], wall[0], wall[1]
            );
        }
        let m = |v: &[f64]| stats::median(v).unwrap_or(f64::NAN);
        results.push(Fidelity {
            threads: t,
            plain_fraction: m(&fractions[0]),
            blameprof_fraction: m(&fractions[1]),
            plain_s: m(&walls[0]),
            blameprof_s: m(&walls[1]),
            wall_ratio: m(&ratios),
        });
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fraction_is_read_from_the_programs_line() {
        let out = "x\nfidelity: contended 0.06620 acquisitions 8000000 contended_n 1 seconds 1.1\n";
        assert_eq!(parse_fraction(out), Some(0.0662));
        assert_eq!(parse_fraction("truth ops 3\n"), None);
    }

    #[test]
    fn met_needs_both_the_fraction_and_the_wall_time() {
        let f = |plain: f64, profiled: f64, wall: f64| Fidelity {
            threads: 4,
            plain_fraction: plain,
            blameprof_fraction: profiled,
            plain_s: 1.0,
            blameprof_s: wall,
            wall_ratio: wall,
        };
        assert!(f(0.05, 0.055, 1.2).met());
        assert!(!f(0.05, 0.07, 1.2).met());
        assert!(!f(0.05, 0.05, 1.6).met());
        assert_eq!(thread_counts(2), [4, 8]);
    }
}
