//! The scoreboard's outputs: the markdown report (tables and one verdict per target) and the
//! machine-readable JSON of the accuracy results (`--json`, what the smoke test reads).

use std::fmt::Write;

use scoreboard::compare::{SPIN_TOLERANCE_PCT, TOLERANCE_PCT};
use scoreboard::stats;
use serde_json::{json, Value};

use crate::accuracy::AccuracyRun;
use crate::churn::{self, Churn};
use crate::fidelity::{self, Fidelity};
use crate::overhead::{Cell, Config, Row};
use crate::scale::{self, Measured};

/// Overhead targets at 200 Hz (issue 5): geometric mean and worst case of the wall-time
/// ratios.
const GEOMEAN_TARGET: f64 = 1.02;
const WORST_TARGET: f64 = 1.05;
/// Memory targets (issue 38): the runtime's fixed resident cost at most this (KiB) on any
/// program, and on programs of [`MEMORY_LARGE_KIB`] or more at most this ratio.
const MEMORY_FIXED_KIB: f64 = 512.0;
const MEMORY_LARGE_KIB: f64 = 10.0 * 1024.0;
const MEMORY_LARGE_RATIO: f64 = 1.10;

/// Whether a program's peak RSS, `plain` unprofiled and `profiled` under blameprof (KiB),
/// meets the memory targets: an added cost within the fixed allowance, or, on a large
/// program, within its ratio.
fn memory_met(plain: f64, profiled: f64) -> bool {
    profiled - plain <= MEMORY_FIXED_KIB
        || (plain >= MEMORY_LARGE_KIB && profiled / plain <= MEMORY_LARGE_RATIO)
}

/// Everything one scoreboard run measured.
pub struct Results {
    /// Machine, commit, mode: one line each.
    pub header: Vec<String>,
    pub scale: f64,
    pub accuracy: Vec<AccuracyRun>,
    /// `None`: not measured (`--quick`).
    pub overhead: Option<Overhead>,
    pub scale_runs: Option<Vec<Measured>>,
    /// `None`: not measured (`--quick`, or no `fidelity_*` workload selected).
    pub fidelity_runs: Option<Vec<Fidelity>>,
    /// `None`: not measured (`--quick`, or `scale_churn` not selected).
    pub churn_runs: Option<Churn>,
    /// One message per workload that failed.
    pub errors: Vec<String>,
}

/// The overhead section's rows and what it says about its method.
pub struct Overhead {
    pub rows: Vec<Row>,
    pub rounds: usize,
    /// Notes on the peers (skipped and why) and on the memory figures.
    pub notes: Vec<String>,
}

fn ms(ns: u64) -> String {
    format!("{:.2} ms", ns as f64 / 1e6)
}

fn pct(ratio: f64) -> String {
    format!("{:+.1}%", (ratio - 1.0) * 100.0)
}

fn mib(kib: f64) -> String {
    format!("{:.1} MiB", kib / 1024.0)
}

fn yes(ok: bool) -> &'static str {
    if ok {
        "yes"
    } else {
        "**no**"
    }
}

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "**missed**"
    }
}

fn cell(c: Option<&Cell>) -> String {
    match c {
        Some(Cell::Ratio(r)) => format!("{r:.3}"),
        Some(Cell::Skipped) | None => "skipped".into(),
        Some(Cell::Failed(why)) => format!("failed ({why})"),
        Some(Cell::DidNotFinish(limit)) => {
            format!("did not finish ({:.0} s)", limit.as_secs_f64())
        }
    }
}

/// The verdict lines, one per target.
fn verdicts(r: &Results) -> Vec<String> {
    let checks: Vec<_> = r.accuracy.iter().flat_map(|a| &a.accuracy.checks).collect();
    let within = checks.iter().filter(|c| c.within(1.0)).count();
    let rankings: Vec<_> = r
        .accuracy
        .iter()
        .filter_map(|a| a.accuracy.ranking.as_ref())
        .collect();
    let first = rankings.iter().filter(|k| k.first).count();
    let mut v = vec![
        format!(
            "accuracy within {TOLERANCE_PCT:.0}% ({SPIN_TOLERANCE_PCT:.0}% spin) on all: {} ({within} of {} truth values)",
            met(within == checks.len() && !checks.is_empty()),
            checks.len()
        ),
        format!(
            "culprit first on all: {} ({first} of {} workloads with a culprit)",
            met(first == rankings.len()),
            rankings.len()
        ),
    ];
    let rows = r.overhead.as_ref().map_or(&[][..], |o| &o.rows[..]);
    let ratios: Vec<f64> = rows
        .iter()
        .filter_map(|row| row.ratio(Config::Blameprof200))
        .collect();
    let (geo, worst) = (
        stats::geomean(&ratios),
        worst_row(rows, |row| row.ratio(Config::Blameprof200)),
    );
    v.push(match (geo, worst) {
        (Some(g), Some((w, name))) => format!(
            "overhead geomean < 2% and worst < 5% at 200 Hz: {} (geomean {}, worst {} on {name})",
            met(g < GEOMEAN_TARGET && w < WORST_TARGET),
            pct(g),
            pct(w)
        ),
        _ => "overhead geomean < 2% and worst < 5% at 200 Hz: not measured".into(),
    });
    // (unprofiled KiB, profiled KiB, name) of every program measured.
    let mut mem: Vec<(f64, f64, String)> = rows
        .iter()
        .map(|row| (row.plain_kib, row.blameprof_kib, row.name.clone()))
        .collect();
    if let Some(runs) = &r.scale_runs {
        mem.extend(runs.iter().map(|m| {
            let c = m.case;
            (
                m.plain_kib,
                m.blameprof_kib,
                format!("scale_locks {} threads {} locks", c.threads, c.distinct),
            )
        }));
    }
    if let Some(c) = &r.churn_runs {
        mem.push((c.plain_kib, c.blameprof_kib, "scale_churn".into()));
    }
    if mem.is_empty() {
        v.push("memory: not measured".into());
    } else {
        let missed: Vec<String> = mem
            .iter()
            .filter(|(plain, profiled, _)| !memory_met(*plain, *profiled))
            .map(|(plain, profiled, name)| {
                format!(
                    "{name} +{:.0} KiB, {}",
                    profiled - plain,
                    pct(profiled / plain)
                )
            })
            .collect();
        let worst_fixed = mem
            .iter()
            .max_by(|a, b| (a.1 - a.0).total_cmp(&(b.1 - b.0)))
            .map(|(plain, profiled, name)| format!("{:+.0} KiB on {name}", profiled - plain))
            .unwrap_or_default();
        v.push(format!(
            "memory: fixed cost at most {MEMORY_FIXED_KIB:.0} KiB, at most {} on programs of {} or more: {} (largest added {worst_fixed}{})",
            pct(MEMORY_LARGE_RATIO),
            mib(MEMORY_LARGE_KIB),
            met(missed.is_empty()),
            if missed.is_empty() {
                String::new()
            } else {
                format!("; missed: {}", missed.join(", "))
            }
        ));
    }
    if let Some(c) = &r.churn_runs {
        v.push(format!(
            "lock churn ({}M spin locks and mutexes) at most {}x the unprofiled time, its run's summary under {}: {} ({:.2}x: {:.2} s -> {:.2} s; `blameprof run` peak {})",
            c.locks / 1_000_000,
            churn::TIME_TARGET,
            mib(churn::SUMMARY_TARGET_KIB),
            met(c.met()),
            c.time_ratio(),
            c.plain_s,
            c.blameprof_s,
            mib(c.cli_kib)
        ));
    }
    if let Some(runs) = r.fidelity_runs.as_ref().filter(|f| !f.is_empty()) {
        let cases: Vec<String> = runs
            .iter()
            .map(|f| {
                format!(
                    "{} threads: contended {:.2}% -> {:.2}%, wall {:.2}x",
                    f.threads,
                    f.plain_fraction * 100.0,
                    f.blameprof_fraction * 100.0,
                    f.wall_ratio
                )
            })
            .collect();
        v.push(format!(
            "contention fidelity (contended fraction within {:.0}%, wall time at most {}x): {} ({})",
            fidelity::FRACTION_TOLERANCE * 100.0,
            fidelity::WALL_TARGET,
            met(runs.iter().all(Fidelity::met)),
            cases.join("; ")
        ));
    }
    v
}

fn worst_row(rows: &[Row], f: fn(&Row) -> Option<f64>) -> Option<(f64, String)> {
    rows.iter()
        .filter_map(|r| f(r).map(|x| (x, r.name.clone())))
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

/// The markdown report.
pub fn markdown(r: &Results) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# blameprof scoreboard\n");
    for line in &r.header {
        let _ = writeln!(s, "- {line}");
    }
    let _ = writeln!(s, "\n## Verdicts\n");
    for line in verdicts(r) {
        let _ = writeln!(s, "- {line}");
    }
    if !r.errors.is_empty() {
        let _ = writeln!(s, "\n## Errors\n");
        for e in &r.errors {
            let _ = writeln!(s, "- {}", e.replace('\n', " "));
        }
    }
    accuracy_tables(&mut s, r);
    if let Some(o) = &r.overhead {
        overhead_table(&mut s, o);
    }
    if let Some(runs) = &r.scale_runs {
        scale_tables(&mut s, runs);
    }
    if let Some(runs) = &r.fidelity_runs {
        fidelity_table(&mut s, runs);
    }
    if let Some(c) = &r.churn_runs {
        let _ = writeln!(
            s,
            "\n## Lock churn (`scale_churn {} {} {}`: unprofiled vs `blameprof run -F 200` with \
             its summary; medians)\n\n| | unprofiled | profiled | ratio |\n|---|---:|---:|---:|\n\
             | wall time | {:.3} s | {:.3} s | {:.2} |\n| program's peak RSS | {} | {} | {} |\n\
             | `blameprof run`'s peak RSS (summary) | | {} | |\n| profile size | | {} | |",
            churn::THREADS,
            churn::PER_THREAD,
            churn::LIVE,
            c.plain_s,
            c.blameprof_s,
            c.time_ratio(),
            mib(c.plain_kib),
            mib(c.blameprof_kib),
            pct(c.blameprof_kib / c.plain_kib),
            mib(c.cli_kib),
            mib(c.profile_kib)
        );
    }
    s
}

fn fidelity_table(s: &mut String, runs: &[Fidelity]) {
    let _ = writeln!(
        s,
        "\n## Contention fidelity (`fidelity_trylock`: one mutex, a failed trylock before a lock \
         counts as contended; {} acquisitions, unprofiled vs `blameprof run -q -F 200`; medians of \
         at least {} alternating rounds)\n",
        fidelity::ACQUISITIONS,
        fidelity::MIN_ROUNDS
    );
    let _ = writeln!(
        s,
        "| threads | contended unprofiled | contended profiled | ratio | wall unprofiled | wall profiled | wall ratio | met |"
    );
    let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|---|");
    for f in runs {
        let _ = writeln!(
            s,
            "| {} | {:.2}% | {:.2}% | {:.2} | {:.3} s | {:.3} s | {:.3} | {} |",
            f.threads,
            f.plain_fraction * 100.0,
            f.blameprof_fraction * 100.0,
            f.fraction_ratio(),
            f.plain_s,
            f.blameprof_s,
            f.wall_ratio,
            yes(f.met())
        );
    }
}

fn accuracy_tables(s: &mut String, r: &Results) {
    let _ = writeln!(
        s,
        "\n## Accuracy (`blameprof run -q -F 1000`, scale {})\n\nError: |reported - truth| \
         relative to the truth, or to {}% of the workload's total truth of the same base \
         metric (blame or idleness) when the truth is smaller.\n",
        r.scale,
        scoreboard::compare::FLOOR_SHARE * 100.0
    );
    let _ = writeln!(
        s,
        "| workload | metric | function | truth | reported | error | tolerance | pass |"
    );
    let _ = writeln!(s, "|---|---|---|---:|---:|---:|---:|---|");
    for a in &r.accuracy {
        for c in &a.accuracy.checks {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {:.1}% | {:.0}% | {} |",
                a.name,
                c.metric,
                c.function,
                ms(c.truth_ns),
                ms(c.reported_ns),
                c.error_pct,
                c.tolerance_pct,
                yes(c.within(1.0))
            );
        }
        for m in &a.truth.malformed {
            let _ = writeln!(
                s,
                "| {} | malformed truth line: `{m}` | | | | | | **no** |",
                a.name
            );
        }
    }
    let _ = writeln!(
        s,
        "\n### Culprit ranking (inclusive `blame` but for joins, among the candidates)\n"
    );
    let _ = writeln!(s, "| workload | culprit | first | blame by candidate |");
    let _ = writeln!(s, "|---|---|---|---|");
    for a in &r.accuracy {
        match &a.accuracy.ranking {
            Some(k) => {
                let list: Vec<String> = k
                    .blame
                    .iter()
                    .map(|(f, ns)| format!("{f} {}", ms(*ns)))
                    .collect();
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} |",
                    a.name,
                    k.culprit,
                    yes(k.first),
                    list.join(", ")
                );
            }
            None => {
                let _ = writeln!(s, "| {} | none | (no check) | |", a.name);
            }
        }
    }
}

fn overhead_table(s: &mut String, o: &Overhead) {
    let _ = writeln!(
        s,
        "\n## Overhead (wall-time ratio to unprofiled: the median over {} alternating rounds of each round's ratio; drd: one run)\n",
        o.rounds
    );
    let _ = writeln!(
        s,
        "| workload | unprofiled | blameprof 200 Hz | blameprof 1 kHz | perf -g | perf dwarf | drd | peak RSS unprofiled → 200 Hz | memory ratio | profile size (200 Hz) | report time |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in &o.rows {
        let _ = writeln!(
            s,
            "| {} | {:.3} s | {} | {} | {} | {} | {} | {} → {} | {:.3} | {} | {:.3} s |",
            row.name,
            row.plain_s,
            cell(row.ratios.get(&Config::Blameprof200)),
            cell(row.ratios.get(&Config::Blameprof1000)),
            cell(row.ratios.get(&Config::PerfFramePointers)),
            cell(row.ratios.get(&Config::PerfDwarf)),
            cell(Some(&row.drd)),
            mib(row.plain_kib),
            mib(row.blameprof_kib),
            row.memory_ratio(),
            mib(row.profile_kib),
            row.report_s
        );
    }
    let _ = writeln!(s);
    for (c, label) in [
        (Config::Blameprof200, "blameprof 200 Hz"),
        (Config::Blameprof1000, "blameprof 1 kHz"),
        (Config::PerfFramePointers, "perf -g"),
        (Config::PerfDwarf, "perf dwarf"),
    ] {
        let ratios: Vec<f64> = o.rows.iter().filter_map(|r| r.ratio(c)).collect();
        if let (Some(g), Some(w)) = (stats::geomean(&ratios), stats::worst(&ratios)) {
            let _ = writeln!(
                s,
                "- {label}: geomean {:.3} ({}), worst {w:.3} ({})",
                g,
                pct(g),
                pct(w)
            );
        }
    }
    for n in &o.notes {
        let _ = writeln!(s, "- {n}");
    }
}

fn scale_tables(s: &mut String, runs: &[Measured]) {
    let _ = writeln!(
        s,
        "\n## Scale (`scale_locks`, unprofiled vs `blameprof run -q -F 200`, at most {} live locks)\n",
        scale::LIVE_LOCKS
    );
    let header: Vec<String> = scale::DISTINCT
        .iter()
        .map(|d| format!("{d} locks"))
        .collect();
    let grid = |title: &str, f: &dyn Fn(&Measured) -> String| {
        let mut t = format!(
            "{title}\n\n| threads | {} |\n|---|{}\n",
            header.join(" | "),
            "---:|".repeat(header.len())
        );
        let mut threads: Vec<usize> = runs.iter().map(|m| m.case.threads).collect();
        threads.dedup();
        for th in threads {
            let cells: Vec<String> = scale::DISTINCT
                .iter()
                .map(|&d| {
                    runs.iter()
                        .find(|m| m.case.threads == th && m.case.distinct == d)
                        .map_or("".into(), f)
                })
                .collect();
            let _ = writeln!(t, "| {th} | {} |", cells.join(" | "));
        }
        t
    };
    let _ = writeln!(
        s,
        "{}",
        grid("Wall time: ratio (unprofiled → profiled)", &|m| format!(
            "{:.2} ({:.3} → {:.3} s)",
            m.blameprof_s / m.plain_s,
            m.plain_s,
            m.blameprof_s
        ))
    );
    let _ = writeln!(
        s,
        "{}",
        grid(
            "Peak RSS: ratio (unprofiled → profiled), profile size",
            &|m| format!(
                "{:.2} ({} → {}), {}",
                m.blameprof_kib / m.plain_kib,
                mib(m.plain_kib),
                mib(m.blameprof_kib),
                mib(m.profile_kib)
            )
        )
    );
    let ops: Vec<String> = scale::DISTINCT
        .iter()
        .map(|&d| format!("{d} locks: {} ops", d.max(scale::MIN_OPS)))
        .collect();
    let _ = writeln!(s, "Operations per run (all threads): {}.", ops.join(", "));
}

/// The accuracy results as JSON (`--json`).
pub fn json(r: &Results) -> Value {
    let accuracy: Vec<Value> = r
        .accuracy
        .iter()
        .map(|a| {
            let checks: Vec<Value> = a
                .accuracy
                .checks
                .iter()
                .map(|c| {
                    json!({
                        "metric": c.metric, "function": c.function, "truth_ns": c.truth_ns,
                        "reported_ns": c.reported_ns,
                        "error_pct": if c.error_pct.is_finite() { json!(c.error_pct) } else { Value::Null },
                        "tolerance_pct": c.tolerance_pct, "pass": c.within(1.0),
                    })
                })
                .collect();
            let ranking = a.accuracy.ranking.as_ref().map(|k| {
                json!({"culprit": k.culprit, "first": k.first, "blame": k.blame})
            });
            json!({
                "workload": a.name, "samples": a.samples, "wall_s": a.wall.as_secs_f64(),
                "malformed": a.truth.malformed, "checks": checks, "ranking": ranking,
            })
        })
        .collect();
    json!({"scale": r.scale, "accuracy": accuracy, "errors": r.errors})
}
