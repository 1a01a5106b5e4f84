//! The accuracy section: each workload once under `blameprof run -q -F 1000`, its truth lines
//! against the flat JSON report.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use scoreboard::compare::{self, Accuracy};
use scoreboard::report::FlatReport;
use scoreboard::truth::{self, Truth};

use crate::proc;
use crate::workloads::Workload;

/// Sampling rate of the accuracy runs (issue 5: tolerances hold at 1 kHz).
pub const ACCURACY_HZ: u32 = 1000;
/// Limit for one profiled workload run.
pub const RUN_LIMIT: Duration = Duration::from_secs(300);
/// Limit for one `blameprof report`.
pub const REPORT_LIMIT: Duration = Duration::from_secs(120);

/// Where the programs are and where scratch files go.
pub struct Tools {
    pub blameprof: PathBuf,
    /// The peak-RSS wrapper (`benchmarks/scoreboard/peak_rss.c`, built with the workloads).
    pub peak_rss: PathBuf,
    /// Scratch directory for profiles (emptied per run).
    pub scratch: PathBuf,
}

impl Tools {
    /// `blameprof run -q -F hz -o dir --`, ready for the program and its arguments.
    pub fn blameprof_run(&self, hz: u32, dir: &Path) -> Command {
        let mut cmd = Command::new(&self.blameprof);
        cmd.args(["run", "-q", "-F", &hz.to_string(), "-o"])
            .arg(dir)
            .arg("--");
        cmd
    }

    /// A fresh (removed) profile directory path for `name`.
    pub fn profile_dir(&self, name: &str) -> Result<PathBuf> {
        let dir = self.scratch.join(name);
        remove(&dir)?;
        Ok(dir)
    }
}

/// Removes a profile directory or file if it exists.
pub fn remove(path: &Path) -> Result<()> {
    let r = if path.is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    };
    match r {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("cannot remove {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// The accuracy result of one workload.
pub struct AccuracyRun {
    pub name: String,
    pub truth: Truth,
    pub accuracy: Accuracy,
    pub samples: u64,
    pub wall: Duration,
}

/// The scale argument as the workload gets it: `1`, `0.2`.
pub fn scale_arg(scale: f64) -> String {
    format!("{scale}")
}

/// Reads `blameprof report DIR --format json --view flat --metric blame`. Every node carries
/// all metrics, so one report serves every truth line.
pub fn flat_report(tools: &Tools, dir: &Path) -> Result<FlatReport> {
    let mut cmd = Command::new(&tools.blameprof);
    cmd.arg("report")
        .arg(dir)
        .args(["--format", "json", "--view", "flat", "--metric", "blame"]);
    let out = proc::run(&mut cmd, true, Some(REPORT_LIMIT))?.check("blameprof report")?;
    Ok(FlatReport::parse(&out.stdout)?)
}

/// Runs `w` once under blameprof at `scale` and compares its truth with the report.
pub fn run(tools: &Tools, w: &Workload, scale: f64) -> Result<AccuracyRun> {
    let dir = tools.profile_dir(&format!("{}-accuracy", w.name))?;
    let mut cmd = tools.blameprof_run(ACCURACY_HZ, &dir);
    cmd.arg(&w.binary).arg(scale_arg(scale));
    let out = proc::run(&mut cmd, true, Some(RUN_LIMIT))?;
    if !out.success() {
        bail!("{} under blameprof: {}", w.name, out.describe());
    }
    let truth = truth::parse(&out.stdout);
    if truth.is_empty() {
        bail!("{} printed no truth lines", w.name);
    }
    let report = flat_report(tools, &dir)?;
    remove(&dir)?;
    Ok(AccuracyRun {
        name: w.name.clone(),
        accuracy: compare::evaluate(&truth, &report),
        truth,
        samples: report.samples,
        wall: out.wall,
    })
}
