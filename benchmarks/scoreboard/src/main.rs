//! `scoreboard`: measures blameprof on the workloads of `benchmarks/workloads/` and prints a
//! markdown report (stdout or `--out`), progress on stderr.
//!
//! Sections: accuracy (every workload under `blameprof run -q -F 1000`, truth lines against
//! the report), overhead (vs unprofiled and the peers perf and drd), scale (`scale_locks`) and
//! lock churn (`scale_churn`);
//! `--quick` runs the accuracy section alone at scale 0.2. The exit status is 0 whether or not
//! the targets are met, non-zero on errors (a workload failing, printing no truth lines or a
//! malformed one).

mod accuracy;
mod churn;
mod fidelity;
mod hot_layout;
mod overhead;
mod proc;
mod render;
mod scale;
mod workloads;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;

use accuracy::Tools;
use overhead::Peers;
use render::{Overhead, Results};
use workloads::Workload;

/// Accuracy, overhead and scale of blameprof on the scoreboard workloads.
#[derive(Parser, Debug)]
#[command(name = "scoreboard")]
struct Args {
    /// Accuracy only, at scale 0.2 (no overhead, no scale section).
    #[arg(long)]
    quick: bool,
    /// Only these workloads (file stems; repeat or separate with commas). The scale and
    /// churn sections run only when `scale_locks` or `scale_churn` is among them, or without
    /// --only.
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    only: Vec<String>,
    /// Write the markdown report here instead of stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Also write the accuracy results as JSON here.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Rounds of the overhead and scale measurements (medians).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// Time limit of the drd run, seconds.
    #[arg(long, default_value_t = 60)]
    drd_timeout: u64,
    /// Workload directory [default: benchmarks/workloads of the repository].
    #[arg(long, value_name = "DIR")]
    workloads: Option<PathBuf>,
    /// The blameprof binary [default: target/release/blameprof of the repository].
    #[arg(long, value_name = "PATH")]
    blameprof: Option<PathBuf>,
    /// Instead of measuring: run the workloads under callgrind and write the runtime's hot
    /// layout (a linker script, `runtime/hot.ld`) to FILE. Needs valgrind.
    #[arg(long, value_name = "FILE")]
    hot_layout: Option<PathBuf>,
    /// Instead of measuring: run the workloads under callgrind and fail, naming them, when
    /// functions of the runtime that ran lie outside its hot layout (regenerate it with
    /// --hot-layout runtime/hot.ld). Needs valgrind.
    #[arg(long, conflicts_with = "hot_layout")]
    check_hot_layout: bool,
}

/// The repository root (this crate lives in `benchmarks/scoreboard`).
fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|_| manifest.join("../.."))
}

fn note(msg: &str) {
    eprintln!("scoreboard: {msg}");
}

/// One line of a command's stdout, or "?".
fn line_of(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "?".into())
}

fn main() -> ExitCode {
    match real_main(Args::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("scoreboard: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Runs the sections; Ok(false) when some workload failed (the report is still written).
fn real_main(args: Args) -> Result<bool> {
    let root = repo_root();
    let blameprof = args
        .blameprof
        .clone()
        .unwrap_or_else(|| root.join("target/release/blameprof"));
    if !blameprof.is_file() {
        bail!(
            "no blameprof binary at {}: run `cargo build --release --workspace` first",
            blameprof.display()
        );
    }
    let dir = args
        .workloads
        .clone()
        .unwrap_or_else(|| root.join("benchmarks/workloads"));
    let target = root.join("target/scoreboard");
    let wrapper = Workload {
        name: "peak_rss".into(),
        source: root.join("benchmarks/scoreboard/peak_rss.c"),
        binary: target.join("peak_rss"),
    };
    workloads::build(&wrapper, &root)?;
    let tools = Tools {
        blameprof,
        peak_rss: wrapper.binary,
        scratch: target.join("runs"),
    };
    fs::create_dir_all(&tools.scratch)
        .with_context(|| format!("cannot create {}", tools.scratch.display()))?;
    let found = workloads::discover(&dir, &target.join("bin"), &args.only)?;
    if found.is_empty() {
        bail!("no workloads in {}", dir.display());
    }
    let mut errors = Vec::new();
    let mut built = Vec::new();
    for w in found {
        match workloads::build(&w, &root) {
            Ok(true) => {
                note(&format!("built {}", w.binary.display()));
                built.push(w);
            }
            Ok(false) => built.push(w),
            Err(e) => errors.push(format!("{}: {e:#}", w.name)),
        }
    }
    let (fidelity_wl, built): (Vec<Workload>, Vec<Workload>) =
        built.into_iter().partition(Workload::is_fidelity);
    let (scale_wl, truth_wl): (Vec<Workload>, Vec<Workload>) =
        built.into_iter().partition(Workload::is_scale);
    let runtime = tools
        .blameprof
        .with_file_name(blameprof_format::protocol::RUNTIME_LIBRARY);
    if args.check_hot_layout {
        let outside = hot_layout::check(&runtime, &truth_wl, &tools.scratch)?;
        for f in &outside {
            note(&format!("ran outside the hot layout: {f}"));
        }
        if !outside.is_empty() {
            note(&format!(
                "{} functions of {} ran outside .text.hot: regenerate it with \
                 'cargo run --release -p blameprof-scoreboard -- --hot-layout runtime/hot.ld'",
                outside.len(),
                runtime.display()
            ));
        }
        for e in &errors {
            note(&format!("error: {e}"));
        }
        return Ok(outside.is_empty() && errors.is_empty());
    }
    if let Some(out) = &args.hot_layout {
        hot_layout::generate(&runtime, &truth_wl, &tools.scratch, out)?;
        note(&format!("wrote {}", out.display()));
        for e in &errors {
            note(&format!("error: {e}"));
        }
        return Ok(errors.is_empty());
    }
    let scale = if args.quick { 0.2 } else { 1.0 };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());

    let mut accuracy = Vec::new();
    for w in &truth_wl {
        note(&format!("accuracy {} (scale {scale})", w.name));
        match accuracy::run(&tools, w, scale) {
            Ok(a) => {
                if !a.truth.malformed.is_empty() {
                    errors.push(format!(
                        "{}: malformed truth lines: {:?}",
                        w.name, a.truth.malformed
                    ));
                }
                accuracy.push(a);
            }
            Err(e) => errors.push(format!("{}: {e:#}", w.name)),
        }
    }

    let (mut overhead, mut scale_runs, mut fidelity_runs, mut churn_runs) =
        (None, None, None, None);
    if !args.quick {
        let peers = Peers::detect();
        let mut notes = peer_notes(&peers);
        notes.push(memory_note(&tools, args.runs as usize)?);
        let mut rows = Vec::new();
        for w in &truth_wl {
            note(&format!("overhead {}", w.name));
            let limit = Duration::from_secs(args.drd_timeout);
            match overhead::measure(&tools, &peers, w, scale, args.runs as usize, limit) {
                Ok(row) => rows.push(row),
                Err(e) => errors.push(format!("{} (overhead): {e:#}", w.name)),
            }
        }
        overhead = Some(Overhead {
            rows,
            rounds: args.runs as usize,
            notes,
        });
        if let Some(w) = scale_wl.iter().find(|w| w.name == "scale_churn") {
            note("lock churn section");
            match churn::run(&tools, w, args.runs as usize) {
                Ok(r) => churn_runs = Some(r),
                Err(e) => errors.push(format!("{} (churn): {e:#}", w.name)),
            }
        }
        if let Some(w) = scale_wl.iter().find(|w| w.name == "scale_locks") {
            note("scale section");
            match scale::run(&tools, w, &scale::cases(cpus), args.runs as usize) {
                Ok(r) => scale_runs = Some(r),
                Err(e) => errors.push(format!("{} (scale): {e:#}", w.name)),
            }
        }
        if let Some(w) = fidelity_wl.first() {
            note("contention fidelity section");
            let threads = fidelity::thread_counts(cpus);
            match fidelity::run(&tools, w, &threads, args.runs as usize) {
                Ok(r) => fidelity_runs = Some(r),
                Err(e) => errors.push(format!("{} (fidelity): {e:#}", w.name)),
            }
        }
    }

    let results = Results {
        header: vec![
            format!(
                "{} on {cpus} CPUs, Linux {}, blameprof commit {}",
                line_of("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
                line_of("uname", &["-r"]),
                line_of(
                    "git",
                    &[
                        "-C",
                        &root.to_string_lossy(),
                        "rev-parse",
                        "--short",
                        "HEAD"
                    ]
                )
            ),
            format!(
                "mode: {}, {} workloads from {}",
                if args.quick {
                    "--quick (accuracy only, scale 0.2)"
                } else {
                    "full (scale 1)"
                },
                truth_wl.len() + scale_wl.len() + fidelity_wl.len(),
                dir.display()
            ),
        ],
        scale,
        accuracy,
        overhead,
        scale_runs,
        fidelity_runs,
        churn_runs,
        errors,
    };
    let text = render::markdown(&results);
    match &args.out {
        Some(path) => {
            fs::write(path, &text).with_context(|| format!("cannot write {}", path.display()))?
        }
        None => print!("{text}"),
    }
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&render::json(&results))?;
        fs::write(path, json).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(results.errors.is_empty())
}

fn peer_notes(peers: &Peers) -> Vec<String> {
    let mut notes = vec![
        "perf: `perf record -q -e cpu-clock -F 200 -g` and `--call-graph dwarf` (same rate as blameprof's default)".to_string(),
    ];
    if let Err(why) = &peers.perf {
        notes.push(format!("perf skipped: {why}"));
    }
    if let Err(why) = &peers.drd {
        notes.push(format!("drd skipped: {why}"));
    }
    notes
}

/// How peak RSS is measured, with the runtime's fixed cost: `true` (without arguments: with
/// one, coreutils' `true` sets up its locale in case it is `--help`, 500 KiB more)
/// unprofiled and profiled, medians of `rounds` alternating runs.
fn memory_note(tools: &Tools, rounds: usize) -> Result<String> {
    let empty = Workload {
        name: "true".into(),
        source: PathBuf::new(),
        binary: PathBuf::from("true"),
    };
    let (plain, profiled) = overhead::median_peak_rss(tools, &empty, &[], rounds)?;
    Ok(format!(
        "peak RSS: the program's own (`wait4` of a small C wrapper, `benchmarks/scoreboard/peak_rss.c`, that forks and execs it, under `blameprof run` too, so the CLI is left out), median of {} alternating runs each; `true` measures {plain:.0} KiB unprofiled and {profiled:.0} KiB profiled (the runtime's fixed cost)",
        rounds.max(1)
    ))
}
