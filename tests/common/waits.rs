//! Helpers for the wait-blame tests (tests/waits.rs): per-primitive derived metrics
//! (`idleness.<kind>`, `blame.<kind>`, `idleness.unblamed`), culprit ranking, tolerance
//! checks against ground truth, and locating the example programs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use serde_json::Value;

use super::report::{
    find_paths_metric, flat_metric, func, metric_of, name_matches, roots, total_of,
};

/// The wait kinds of the derived metrics.
pub const WAIT_KINDS: [&str; 8] = [
    "spin",
    "mutex",
    "rwlock",
    "condvar",
    "semaphore",
    "barrier",
    "join",
    "futex",
];

/// Names of the metrics a report carries.
pub fn metric_names(report: &Value) -> Vec<String> {
    report["metrics"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .filter_map(|m| m["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

pub fn has_metric(report: &Value, metric: &str) -> bool {
    metric_names(report).iter().any(|m| m == metric)
}

/// Panics with a clear message unless the report has every metric of `wanted`.
pub fn require_metrics(report: &Value, wanted: &[&str]) {
    let have = metric_names(report);
    let missing: Vec<&&str> = wanted
        .iter()
        .filter(|w| !have.iter().any(|h| h == **w))
        .collect();
    assert!(
        missing.is_empty(),
        "the report has no metric {missing:?} (its metrics: {have:?}); the per-primitive \
         metrics idleness.<kind> / blame.<kind> / idleness.unblamed are missing"
    );
}

/// Inclusive `metric` of function `f` in a flat report (0 if the metric is absent).
pub fn flat_incl(flat: &Value, f: &str, metric: &str) -> u64 {
    if !has_metric(flat, metric) {
        return 0;
    }
    flat_metric(flat, f, metric).0
}

/// The report's total of `metric`, 0 if it has no such metric.
pub fn total_or_zero(report: &Value, metric: &str) -> u64 {
    if has_metric(report, metric) {
        total_of(report, metric)
    } else {
        0
    }
}

/// Sum of inclusive `metric` over the tree nodes whose path ends with `seq`. Nested matches
/// are counted once (only the outermost one of each path).
pub fn path_sum(tree: &Value, seq: &[&str], metric: &str) -> u64 {
    if !has_metric(tree, metric) {
        return 0;
    }
    let mut matches = find_paths_metric(tree, seq, metric);
    // A match inside another match of the same sequence (recursion) is already counted.
    matches.sort_by_key(|m| m.names.len());
    let mut kept: Vec<Vec<String>> = Vec::new();
    let mut sum = 0;
    for m in matches {
        if kept
            .iter()
            .any(|k| m.names.len() > k.len() && m.names[..k.len()] == k[..])
        {
            continue;
        }
        sum += m.inclusive;
        kept.push(m.names);
    }
    sum
}

/// One line per function: idleness and blame, with their non-zero per-kind parts.
pub fn describe_functions(flat: &Value, functions: &[&str]) -> String {
    let ms = |ns: u64| format!("{:.1} ms", ns as f64 / 1e6);
    let mut out = String::new();
    for f in functions {
        let mut line = format!("  {f}:");
        for base in ["work", "idleness", "blame"] {
            line += &format!(" {base} {}", ms(flat_incl(flat, f, base)));
            if base == "work" {
                continue;
            }
            let parts: Vec<String> = WAIT_KINDS
                .iter()
                .map(|k| format!("{base}.{k}"))
                .chain((base == "idleness").then(|| "idleness.unblamed".to_string()))
                .filter_map(|m| {
                    let v = flat_incl(flat, f, &m);
                    (v > 0).then(|| format!("{} {}", &m[base.len() + 1..], ms(v)))
                })
                .collect();
            if !parts.is_empty() {
                line += &format!(" ({})", parts.join(", "));
            }
            line += ";";
        }
        out += &line;
        out.push('\n');
    }
    let totals: Vec<String> = metric_names(flat)
        .iter()
        .filter(|m| *m != "work")
        .map(|m| format!("{m} {}", ms(total_of(flat, m))))
        .collect();
    out + &format!("  totals: {}\n", totals.join(", "))
}

/// The function of `candidates` with the largest inclusive `metric`, and its value.
pub fn top_of(flat: &Value, metric: &str, candidates: &[&str]) -> (String, u64) {
    candidates
        .iter()
        .map(|f| (f.to_string(), flat_incl(flat, f, metric)))
        .max_by_key(|(_, v)| *v)
        .unwrap_or_default()
}

/// Whether `got` is within `tolerance` (a fraction) of `want`.
pub fn within_of(got: u64, want: u64, tolerance: f64) -> bool {
    (got as f64 - want as f64).abs() <= tolerance * want as f64
}

/// Relative error of `got` against `want`, in percent.
pub fn pct_err(got: u64, want: u64) -> f64 {
    (got as f64 - want as f64) / want.max(1) as f64 * 100.0
}

fn mtime(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).ok()?.modified().ok()
}

/// The binary of the Rust example `name` (examples/NAME.rs), next to this test's profile
/// directory (target/<profile>/examples/NAME). `cargo test` builds the examples, but not
/// when it is asked for a single test target: then (or if the source, or a file its last
/// build read, such as a `#[path]` module in tests/programs, is newer) it is built here with
/// the test's own profile.
pub fn example_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/<test>-<hash>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test executable outside target/<profile>/deps")
        .to_path_buf();
    let bin = profile_dir.join("examples").join(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(format!("{name}.rs"));
    // Cargo's dep-info (NAME.d, "NAME: dep dep ...") lists what the last build read.
    let deps = std::fs::read_to_string(bin.with_extension("d")).unwrap_or_default();
    let read: Vec<PathBuf> = deps
        .lines()
        .next()
        .and_then(|l| l.split_once(": "))
        .map(|(_, ds)| ds.split_whitespace().map(PathBuf::from).collect())
        .unwrap_or_default();
    let fresh = mtime(&bin).is_some_and(|b| {
        std::iter::once(&src)
            .chain(&read)
            .all(|s| mtime(s).is_some_and(|s| s <= b))
    });
    if !fresh {
        let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") => "dev".to_string(),
            Some(p) => p.to_string(),
            None => "release".to_string(),
        };
        let target_dir = profile_dir.parent().expect("target dir");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = Command::new(cargo)
            .args(["build", "--quiet", "--example", name, "--profile", &profile])
            .arg("--manifest-path")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .arg("--target-dir")
            .arg(target_dir)
            .output()
            .expect("cannot run cargo");
        assert!(
            out.status.success(),
            "cargo build --example {name} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(bin.is_file(), "example binary {} missing", bin.display());
    bin
}

/// Sum of inclusive `metric` over the nodes named `leaf` that have a node named `ancestor`
/// somewhere above them (outermost such `leaf` nodes only): e.g. the futex waiting of
/// `fast_read` however many std frames lie between it and `syscall`.
pub fn path_sum_via(tree: &Value, ancestor: &str, leaf: &str, metric: &str) -> u64 {
    fn walk(n: &Value, seen: bool, ancestor: &str, leaf: &str, metric: &str) -> u64 {
        let f = func(n);
        if seen && name_matches(f, leaf) {
            return metric_of(n, "inclusive", metric);
        }
        let seen = seen || name_matches(f, ancestor);
        n["children"].as_array().map_or(0, |c| {
            c.iter()
                .map(|x| walk(x, seen, ancestor, leaf, metric))
                .sum()
        })
    }
    if !has_metric(tree, metric) {
        return 0;
    }
    roots(tree)
        .iter()
        .map(|r| walk(r, false, ancestor, leaf, metric))
        .sum()
}
