//! Smoke test of the scoreboard: the accuracy section (`--quick`, scale 0.2) on the
//! scoreboard's own fixture and on up to three workloads of `benchmarks/workloads/`, checking
//! correctness only: every truth line parsed, the culprit first, errors within twice the
//! targets, judged against at least a twentieth of the workload's total (see
//! [`SMOKE_FLOOR_SHARE`]), in one of up to [`ATTEMPTS`] runs. No timing assertions.

use std::path::{Path, PathBuf};
use std::process::Command;

use scoreboard::compare::error_pct;
use serde_json::Value;

/// Workloads tried first (short, several primitives), then any other in name order.
const PREFERRED: [&str; 6] = [
    "uts",
    "ssca2",
    "patros_three",
    "lockheavy",
    "freelunch_pingpong",
    "rust_std",
];
const HOW_MANY: usize = 3;
/// Smoke tolerance: this many times the targets (10%, 25% for spin).
const LOOSENESS: f64 = 2.0;
/// Smoke floor: an error is relative to the truth or, when that is smaller, to this share of
/// the run's total truth of the same base metric (every `blame.*` line, or every
/// `idleness.*` one), where the scoreboard's own floor is 1%. At scale 0.2 a function with
/// a few percent of the waiting is estimated from a few dozen thinning windows, which a
/// loaded machine widens (to 320-640 us: `uts`'s `push_shared` idleness, 12.1 ms,
/// a few percent of that run's waiting, came out 6.6 ms in one CI run): its sampling error
/// alone is then a quarter of it. The scoreboard's full runs (scale 1) keep judging those
/// small lines at 1%.
const SMOKE_FLOOR_SHARE: f64 = 0.05;
/// Runs of the quick accuracy section before a check outside the tolerance fails the test.
const ATTEMPTS: usize = 3;

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// target/release/blameprof (and the runtime next to it), built if missing or stale: `cargo
/// test --release --workspace` has built them already, so this is then a no-op.
fn blameprof() -> PathBuf {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_scoreboard"))
        .parent()
        .expect("binary directory");
    let target_dir = bin_dir.parent().expect("target directory");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "--release",
            "-p",
            "blameprof",
            "-p",
            "blameprof-runtime",
        ])
        .arg("--manifest-path")
        .arg(manifest_dir().join("../../Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir)
        .output()
        .expect("cannot run cargo");
    assert!(
        out.status.success(),
        "cargo build -p blameprof failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    bin_dir.join("blameprof")
}

/// The stems of the non-scale workloads in `dir`, preferred ones first, at most `HOW_MANY`.
fn pick_workloads(dir: &Path) -> Vec<String> {
    let mut present: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "c" || e == "rs"))
                .filter_map(|p| p.file_stem()?.to_str().map(str::to_string))
                .filter(|n| !n.starts_with("scale_"))
                .collect()
        })
        .unwrap_or_default();
    present.sort();
    let mut picked: Vec<String> = PREFERRED
        .iter()
        .filter(|p| present.iter().any(|n| n == *p))
        .map(|p| p.to_string())
        .collect();
    picked.extend(
        present
            .into_iter()
            .filter(|n| !PREFERRED.contains(&n.as_str())),
    );
    picked.truncate(HOW_MANY);
    picked
}

/// Runs `scoreboard --quick` with `args` and returns its JSON results.
fn quick(blameprof: &Path, name: &str, args: &[&str]) -> Value {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let json = tmp.join(format!("smoke-{name}.json"));
    let report = tmp.join(format!("smoke-{name}.md"));
    let out = Command::new(env!("CARGO_BIN_EXE_scoreboard"))
        .arg("--quick")
        .arg("--blameprof")
        .arg(blameprof)
        .arg("--json")
        .arg(&json)
        .arg("--out")
        .arg(&report)
        .args(args)
        .output()
        .expect("cannot run scoreboard");
    assert!(
        out.status.success(),
        "scoreboard {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&json).expect("scoreboard wrote no JSON");
    serde_json::from_str(&text).expect("scoreboard's JSON")
}

/// Every workload of `expected` measured, its truth parsed and its culprit first (asserted);
/// the checks outside the loose tolerance, described (none when all are within).
fn check(results: &Value, expected: &[String]) -> Vec<String> {
    let mut outside = Vec::new();
    assert_eq!(
        results["errors"].as_array().map(Vec::len),
        Some(0),
        "{results:#}"
    );
    let runs = results["accuracy"].as_array().expect("accuracy array");
    let mut names: Vec<&str> = runs.iter().filter_map(|r| r["workload"].as_str()).collect();
    let mut expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    names.sort_unstable();
    expected.sort_unstable();
    assert_eq!(names, expected, "workloads measured (in name order)");
    for run in runs {
        let name = &run["workload"];
        assert_eq!(
            run["malformed"].as_array().map(Vec::len),
            Some(0),
            "{name}: {run:#}"
        );
        let checks = run["checks"].as_array().expect("checks");
        assert!(!checks.is_empty(), "{name}: no truth values");
        let ns = |c: &Value, key: &str| c[key].as_u64().unwrap_or_else(|| panic!("{key}: {c}"));
        let base = |c: &Value| {
            c["metric"]
                .as_str()
                .unwrap_or("")
                .split('.')
                .next()
                .map(str::to_owned)
        };
        for c in checks {
            let total: u64 = checks
                .iter()
                .filter(|o| base(o) == base(c))
                .map(|o| ns(o, "truth_ns"))
                .sum();
            let floor = (SMOKE_FLOOR_SHARE * total as f64) as u64;
            let (truth, reported) = (ns(c, "truth_ns"), ns(c, "reported_ns"));
            let err = error_pct(truth, reported, floor);
            let tol = c["tolerance_pct"].as_f64().expect("tolerance");
            if err > LOOSENESS * tol {
                outside.push(format!(
                    "{name}: {} of {}: error {err:.1}% (of at least {floor} ns) over {:.0}%: {c}",
                    c["metric"],
                    c["function"],
                    LOOSENESS * tol
                ));
            }
        }
        if !run["ranking"].is_null() {
            assert_eq!(
                run["ranking"]["first"], true,
                "{name}: culprit not first: {run:#}"
            );
        }
    }
    outside
}

/// Runs the quick accuracy section (`name`, `args`) until every check of `expected` is
/// within the loose tolerance, at most [`ATTEMPTS`] times, and asserts that one run was.
/// A loaded machine preempts holders mid-hold, and the few sampled holds that then carry
/// most of a workload's blame make its estimate off by a quarter in one run of several
/// (`ssca2`'s `add_edge`, 216 ms against 289 ms, beside a CPU hog and a build); an error of
/// the pipeline or of the measurement is in every run.
fn quick_within(blameprof: &Path, name: &str, args: &[&str], expected: &[String]) {
    let mut seen = Vec::new();
    for attempt in 1..=ATTEMPTS {
        let outside = check(&quick(blameprof, name, args), expected);
        if outside.is_empty() {
            return;
        }
        seen.push(format!("run {attempt}:\n{}", outside.join("\n")));
    }
    panic!(
        "outside the smoke tolerance in {ATTEMPTS} runs of {ATTEMPTS}:\n{}",
        seen.join("\n")
    );
}

#[test]
fn quick_accuracy_on_fixture_and_workloads() {
    let blameprof = blameprof();

    let fixtures = manifest_dir().join("tests/fixtures");
    quick_within(
        &blameprof,
        "fixture",
        &["--workloads", &fixtures.to_string_lossy()],
        &["holder".to_string()],
    );

    let picked = pick_workloads(&manifest_dir().join("../workloads"));
    assert!(!picked.is_empty(), "no workloads in benchmarks/workloads");
    quick_within(
        &blameprof,
        "workloads",
        &["--only", &picked.join(",")],
        &picked,
    );
}

/// Workloads the hot-layout check runs under callgrind: mutexes and condition variables
/// (C), spin locks and barriers, and Rust's futex-based locks.
const HOT_LAYOUT_WORKLOADS: &str = "lockheavy,syncperf_trybarrier,rust_std";

#[test]
fn functions_that_run_lie_in_the_hot_layout() {
    let blameprof = blameprof();
    let out = Command::new(env!("CARGO_BIN_EXE_scoreboard"))
        .arg("--check-hot-layout")
        .arg("--blameprof")
        .arg(&blameprof)
        .args(["--only", HOT_LAYOUT_WORKLOADS])
        .output()
        .expect("cannot run scoreboard");
    assert!(
        out.status.success(),
        "scoreboard --check-hot-layout failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
