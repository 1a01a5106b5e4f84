//! The overhead section: per workload, wall time and peak RSS unprofiled vs `blameprof run
//! -F 200` and `-F 1000` and the peers (`perf record -g`, `perf record --call-graph dwarf`),
//! runs alternating round by round, each ratio to unprofiled the median of the rounds'
//! ratios; `valgrind --tool=drd` once, with a time limit; the profile's size and `blameprof
//! report`'s wall time at 200 Hz; the program's peak RSS unprofiled and at 200 Hz, medians
//! of N more runs of each through the wrapper, alternating (a small program's peak varies by
//! some 100 KiB from run to run: the kernel maps shared-library pages around each fault in
//! windows that depend on where each library was loaded).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Result};
use scoreboard::stats;

use crate::accuracy::{remove, scale_arg, Tools, REPORT_LIMIT, RUN_LIMIT};
use crate::proc::{self, Ending};
use crate::workloads::Workload;

/// One measured configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Config {
    Plain,
    Blameprof200,
    Blameprof1000,
    PerfFramePointers,
    PerfDwarf,
}

impl Config {
    pub fn label(self) -> &'static str {
        match self {
            Config::Plain => "unprofiled",
            Config::Blameprof200 => "blameprof 200 Hz",
            Config::Blameprof1000 => "blameprof 1 kHz",
            Config::PerfFramePointers => "perf -g",
            Config::PerfDwarf => "perf dwarf",
        }
    }

    fn is_perf(self) -> bool {
        matches!(self, Config::PerfFramePointers | Config::PerfDwarf)
    }

    /// The command line for `prog scale`, writing any profile to `out`.
    fn command(self, tools: &Tools, prog: &Path, scale: &str, out: &Path) -> Command {
        let mut cmd = match self {
            Config::Plain => return with_args(Command::new(prog), scale),
            Config::Blameprof200 | Config::Blameprof1000 => {
                let hz = if self == Config::Blameprof200 {
                    "200"
                } else {
                    "1000"
                };
                let mut c = Command::new(&tools.blameprof);
                c.args(["run", "-q", "-F", hz, "-o"]).arg(out);
                c
            }
            Config::PerfFramePointers | Config::PerfDwarf => {
                let mut c = Command::new("perf");
                c.args(["record", "-q", "-e", "cpu-clock", "-F", "200"]);
                if self == Config::PerfDwarf {
                    c.args(["--call-graph", "dwarf"]);
                } else {
                    c.arg("-g");
                }
                c.arg("-o").arg(out).arg("--");
                c
            }
        };
        cmd.arg(prog);
        with_args(cmd, scale)
    }
}

fn with_args(mut cmd: Command, scale: &str) -> Command {
    cmd.arg(scale);
    cmd
}

/// `inner` run under `blameprof run -q -F 200 -o dir` when `profiled`, else `inner` itself.
pub fn maybe_profiled(tools: &Tools, dir: &Path, inner: Command, profiled: bool) -> Command {
    if !profiled {
        return inner;
    }
    let mut cmd = tools.blameprof_run(200, dir);
    cmd.arg(inner.get_program()).args(inner.get_args());
    cmd
}

/// Which peers can run here; `Err` holds the reason a peer is skipped.
pub struct Peers {
    pub perf: Result<(), String>,
    pub drd: Result<(), String>,
}

impl Peers {
    /// perf: `perf stat -e task-clock true` must succeed; drd: `valgrind --version`.
    pub fn detect() -> Peers {
        let works = |program: &str, args: &[&str]| -> Result<(), String> {
            let mut cmd = Command::new(program);
            cmd.args(args);
            match proc::run(&mut cmd, false, Some(Duration::from_secs(30))) {
                Ok(o) if o.success() => Ok(()),
                Ok(o) => Err(format!("`{program} {}`: {}", args.join(" "), o.describe())),
                Err(_) => Err(format!("{program} is not installed")),
            }
        };
        Peers {
            perf: works("perf", &["stat", "-e", "task-clock", "true"]),
            drd: works("valgrind", &["--version"]),
        }
    }
}

/// A ratio to the unprofiled median, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Ratio(f64),
    Skipped,
    Failed(String),
    /// Stopped at the time limit.
    DidNotFinish(Duration),
}

/// One workload's overhead row.
pub struct Row {
    pub name: String,
    /// Median unprofiled wall time (s).
    pub plain_s: f64,
    /// Wall-time ratio per configuration other than `Plain`.
    pub ratios: BTreeMap<Config, Cell>,
    pub drd: Cell,
    /// Median peak RSS (KiB) unprofiled and under blameprof at 200 Hz.
    pub plain_kib: f64,
    pub blameprof_kib: f64,
    /// Disk usage of the 200 Hz profile (KiB, median).
    pub profile_kib: f64,
    /// `blameprof report DIR` (text, defaults) on the 200 Hz profile: median wall (s).
    pub report_s: f64,
}

impl Row {
    pub fn ratio(&self, c: Config) -> Option<f64> {
        match self.ratios.get(&c) {
            Some(Cell::Ratio(r)) => Some(*r),
            _ => None,
        }
    }

    pub fn memory_ratio(&self) -> f64 {
        self.blameprof_kib / self.plain_kib
    }
}

/// Disk usage of a file or directory tree in KiB (allocated blocks, as `du`).
pub fn disk_kib(path: &Path) -> u64 {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return 0;
    };
    let mut total = meta.blocks() / 2;
    if meta.is_dir() {
        if let Ok(entries) = fs::read_dir(path) {
            total += entries.flatten().map(|e| disk_kib(&e.path())).sum::<u64>();
        }
    }
    total
}

#[derive(Default)]
struct Samples {
    wall: Vec<f64>,
    failed: Option<String>,
}

fn median(v: &[f64]) -> f64 {
    stats::median(v).unwrap_or(f64::NAN)
}

/// The median over rounds of each round's wall time divided by the same round's unprofiled
/// one. Runs of one round follow each other, so the ratio of a pair cancels the machine's
/// drift over minutes (on a shared VM, the unprofiled time of one workload moved by a third
/// within ten minutes), which a ratio of the two medians does not.
fn paired_ratio(wall: &[f64], plain: &[f64]) -> f64 {
    let ratios: Vec<f64> = wall.iter().zip(plain).map(|(w, p)| w / p).collect();
    median(&ratios)
}

/// Measures `w` at `scale`: `rounds` rounds of every configuration, then drd once.
pub fn measure(
    tools: &Tools,
    peers: &Peers,
    w: &Workload,
    scale: f64,
    rounds: usize,
    drd_limit: Duration,
) -> Result<Row> {
    let scale = scale_arg(scale);
    let mut configs = vec![Config::Plain, Config::Blameprof200, Config::Blameprof1000];
    if peers.perf.is_ok() {
        configs.extend([Config::PerfFramePointers, Config::PerfDwarf]);
    }
    let mut samples: BTreeMap<Config, Samples> = BTreeMap::new();
    let (mut profile_kib, mut report_s) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        for &c in &configs {
            let s = samples.entry(c).or_default();
            if s.failed.is_some() {
                continue;
            }
            let out = tools.profile_dir(&format!("{}-{:?}", w.name, c))?;
            let mut cmd = c.command(tools, &w.binary, &scale, &out);
            let o = proc::run(&mut cmd, false, Some(RUN_LIMIT))?;
            if !o.success() {
                if c.is_perf() {
                    s.failed = Some(o.describe());
                    continue;
                }
                bail!("{} ({}): {}", w.name, c.label(), o.describe());
            }
            s.wall.push(o.wall.as_secs_f64());
            eprintln!(
                "scoreboard: overhead {} round {round} {}: {:.3} s",
                w.name,
                c.label(),
                o.wall.as_secs_f64()
            );
            if c == Config::Blameprof200 {
                profile_kib.push(disk_kib(&out) as f64);
                let mut report = Command::new(&tools.blameprof);
                report.arg("report").arg(&out);
                let r =
                    proc::run(&mut report, false, Some(REPORT_LIMIT))?.check("blameprof report")?;
                report_s.push(r.wall.as_secs_f64());
            }
            remove(&out)?;
        }
    }
    let (plain_kib, blameprof_kib) = median_peak_rss(tools, w, &[&scale], rounds)?;
    let plain_s = median(&samples[&Config::Plain].wall);
    let ratios = configs[1..]
        .iter()
        .map(|&c| {
            let s = &samples[&c];
            let cell = match &s.failed {
                Some(why) => Cell::Failed(why.clone()),
                None => Cell::Ratio(paired_ratio(&s.wall, &samples[&Config::Plain].wall)),
            };
            (c, cell)
        })
        .chain(
            [Config::PerfFramePointers, Config::PerfDwarf]
                .into_iter()
                .filter(|_| peers.perf.is_err())
                .map(|c| (c, Cell::Skipped)),
        )
        .collect();
    let drd = match peers.drd {
        Ok(()) => drd(w, &scale, plain_s, drd_limit)?,
        Err(_) => Cell::Skipped,
    };
    Ok(Row {
        name: w.name.clone(),
        plain_s,
        ratios,
        drd,
        plain_kib,
        blameprof_kib,
        profile_kib: median(&profile_kib),
        report_s: median(&report_s),
    })
}

/// The program's own peak RSS (KiB), unprofiled and under `blameprof run -q -F 200`, run
/// with `args`: medians of `rounds` alternating runs (at least one) of each.
pub fn median_peak_rss(
    tools: &Tools,
    w: &Workload,
    args: &[&str],
    rounds: usize,
) -> Result<(f64, f64)> {
    let (mut plain, mut profiled) = (Vec::new(), Vec::new());
    for _ in 0..rounds.max(1) {
        plain.push(peak_rss(tools, w, args, false)? as f64);
        profiled.push(peak_rss(tools, w, args, true)? as f64);
    }
    Ok((median(&plain), median(&profiled)))
}

/// The program's own peak RSS (KiB), unprofiled or under `blameprof run -q -F 200`, from one
/// run through the wrapper ([`proc::wrapped`]).
fn peak_rss(tools: &Tools, w: &Workload, args: &[&str], profiled: bool) -> Result<u64> {
    let file = tools.scratch.join(format!("{}.rss", w.name));
    let dir = tools.profile_dir(&format!("{}-rss", w.name))?;
    let mut inner = proc::wrapped(&tools.peak_rss, &file, &w.binary);
    inner.args(args);
    let mut cmd = maybe_profiled(tools, &dir, inner, profiled);
    proc::run(&mut cmd, false, Some(RUN_LIMIT))?.check(&format!("{} (peak RSS run)", w.name))?;
    remove(&dir)?;
    let kib = proc::read_peak(&file)?;
    remove(&file)?;
    Ok(kib)
}

/// One run of `valgrind --tool=drd` with a time limit.
fn drd(w: &Workload, scale: &str, plain_s: f64, limit: Duration) -> Result<Cell> {
    let mut cmd = Command::new("valgrind");
    cmd.args(["--tool=drd", "-q"]).arg(&w.binary).arg(scale);
    let o = proc::run(&mut cmd, false, Some(limit))?;
    eprintln!(
        "scoreboard: overhead {} drd: {:.3} s ({})",
        w.name,
        o.wall.as_secs_f64(),
        o.describe()
    );
    Ok(match o.ending {
        Ending::Exited(0) => Cell::Ratio(o.wall.as_secs_f64() / plain_s),
        Ending::TimedOut => Cell::DidNotFinish(limit),
        _ => Cell::Failed(o.describe()),
    })
}
