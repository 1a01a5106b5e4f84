//! Reading `blameprof report --format json` output: schema checks, flat-view lookups and
//! walks over the top-down / bottom-up trees.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{blameprof_cmd, Run};
/// `blameprof report PROFILE --format json --metric work EXTRA...`, parsed and schema-checked.
pub fn report_json(profile: &Path, extra: &[&str]) -> Value {
    report_json_metric(profile, "work", extra)
}

/// `blameprof report PROFILE ARGS...`, which must succeed.
pub fn report_ok(profile: &Path, args: &[&str]) -> Run {
    let mut all: Vec<&OsStr> = vec![OsStr::new("report"), profile.as_os_str()];
    all.extend(args.iter().map(OsStr::new));
    let run = blameprof_cmd(&all);
    assert!(
        run.status.success(),
        "report {args:?} failed\n{}",
        run.describe()
    );
    run
}

/// `blameprof report PROFILE --format json --metric METRIC EXTRA...`, parsed and
/// schema-checked (`metric` selects the sort order; every node carries all metrics).
pub fn report_json_metric(profile: &Path, metric: &str, extra: &[&str]) -> Value {
    let mut args = vec!["--format", "json", "--metric", metric];
    args.extend_from_slice(extra);
    let run = report_ok(profile, &args);
    // Call paths may be hundreds of levels deep (up to the 512-frame cut): no nesting limit.
    let mut de = serde_json::Deserializer::from_str(&run.stdout);
    de.disable_recursion_limit();
    let v = serde::Deserialize::deserialize(&mut de)
        .map(|v: Value| v)
        .unwrap_or_else(|e| panic!("report output is not JSON ({e})\n{}", run.describe()));
    assert_eq!(v["schema"], "blameprof-report", "schema field");
    assert_eq!(v["version"], 2, "version field");
    assert_eq!(v["metric"], metric, "metric field");
    assert!(
        v["roots"].is_array() && v["threads"].is_array(),
        "roots/threads missing: {v}"
    );
    v
}

/// The `truth k=v ...` line a workload printed, as a map.
pub fn truth(stdout: &str) -> HashMap<String, u64> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("truth "))
        .unwrap_or_else(|| panic!("no truth line in workload output:\n{stdout}"));
    line.split_whitespace()
        .skip(1)
        .map(|kv| {
            let (k, v) = kv.split_once('=').expect("k=v");
            (
                k.to_string(),
                v.parse().unwrap_or_else(|_| panic!("bad number in {kv}")),
            )
        })
        .collect()
}

/// Whether a reported (demangled) function name is `want`: exact, or a Rust path ending in
/// `::want`, optionally with a legacy `::h<16 hex>` hash suffix.
pub fn name_matches(function: &str, want: &str) -> bool {
    let mut f = function;
    if let Some((head, hash)) = f.rsplit_once("::h") {
        if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            f = head;
        }
    }
    f == want || f.ends_with(&format!("::{want}"))
}

pub fn func(node: &Value) -> &str {
    node["function"].as_str().unwrap_or("<no function>")
}

pub fn work(v: &Value, field: &str) -> u64 {
    metric_of(v, field, "work")
}

/// `v[field][metric]` (`field`: `inclusive`, `exclusive` or `totals`).
pub fn metric_of(v: &Value, field: &str, metric: &str) -> u64 {
    v[field][metric]
        .as_u64()
        .unwrap_or_else(|| panic!("no {field}.{metric} in {v}"))
}

/// The report's total of `metric`.
pub fn total_of(report: &Value, metric: &str) -> u64 {
    metric_of(report, "totals", metric)
}

pub fn total_work(report: &Value) -> u64 {
    report["totals"]["work"].as_u64().expect("totals.work")
}

pub fn samples(report: &Value) -> u64 {
    report["samples"].as_u64().expect("samples")
}

pub fn roots(report: &Value) -> &Vec<Value> {
    report["roots"].as_array().expect("roots array")
}

/// (inclusive, exclusive) work of `want` in a flat report, summed over its entries.
pub fn flat_values(report: &Value, want: &str) -> (u64, u64) {
    flat_metric(report, want, "work")
}

/// (inclusive, exclusive) `metric` of `want` in a flat report, summed over its entries.
pub fn flat_metric(report: &Value, want: &str, metric: &str) -> (u64, u64) {
    assert_eq!(report["view"], "flat", "flat_metric needs the flat view");
    roots(report)
        .iter()
        .filter(|n| name_matches(func(n), want))
        .fold((0, 0), |(i, e), n| {
            (
                i + metric_of(n, "inclusive", metric),
                e + metric_of(n, "exclusive", metric),
            )
        })
}

/// A root-to-node path in a tree view.
#[derive(Debug, Clone)]
pub struct PathMatch {
    /// Function names from the root down to the matched node.
    pub names: Vec<String>,
    /// Modules, parallel to `names`.
    pub modules: Vec<String>,
    /// Inclusive work (or the metric asked for) of the last node.
    pub inclusive: u64,
}

/// Every node whose path from a root ends with the consecutive names in `seq`.
pub fn find_paths(report: &Value, seq: &[&str]) -> Vec<PathMatch> {
    find_paths_metric(report, seq, "work")
}

/// Like [`find_paths`], with `inclusive` holding `metric`.
pub fn find_paths_metric(report: &Value, seq: &[&str], metric: &str) -> Vec<PathMatch> {
    fn walk(
        node: &Value,
        stack: &mut Vec<(String, String)>,
        seq: &[&str],
        metric: &str,
        out: &mut Vec<PathMatch>,
    ) {
        stack.push((
            func(node).to_string(),
            node["module"].as_str().unwrap_or("").to_string(),
        ));
        if stack.len() >= seq.len()
            && stack[stack.len() - seq.len()..]
                .iter()
                .zip(seq)
                .all(|((f, _), w)| name_matches(f, w))
        {
            out.push(PathMatch {
                names: stack.iter().map(|(f, _)| f.clone()).collect(),
                modules: stack.iter().map(|(_, m)| m.clone()).collect(),
                inclusive: metric_of(node, "inclusive", metric),
            });
        }
        if let Some(children) = node["children"].as_array() {
            for c in children {
                walk(c, stack, seq, metric, out);
            }
        }
        stack.pop();
    }
    let mut out = Vec::new();
    for r in roots(report) {
        walk(r, &mut Vec::new(), seq, metric, &mut out);
    }
    out
}

/// Human-readable list of the heaviest paths ending in `leaf`, for failure messages.
pub fn describe_paths(report: &Value, leaf: &str, limit: usize) -> String {
    describe_paths_metric(report, leaf, limit, "work")
}

/// Like [`describe_paths`], by `metric`.
pub fn describe_paths_metric(report: &Value, leaf: &str, limit: usize, metric: &str) -> String {
    let mut paths = find_paths_metric(report, &[leaf], metric);
    paths.sort_by_key(|p| std::cmp::Reverse(p.inclusive));
    paths
        .iter()
        .take(limit)
        .map(|p| format!("  {:>12} ns: {}\n", p.inclusive, p.names.join(" -> ")))
        .collect()
}

/// Greatest depth of a tree view (roots are depth 1).
pub fn max_depth(report: &Value) -> usize {
    fn depth(n: &Value) -> usize {
        1 + n["children"]
            .as_array()
            .map_or(0, |c| c.iter().map(depth).max().unwrap_or(0))
    }
    roots(report).iter().map(depth).max().unwrap_or(0)
}

/// Calls `f` on every node of a tree view.
pub fn for_each_node(report: &Value, f: &mut dyn FnMut(&Value)) {
    fn visit(n: &Value, f: &mut dyn FnMut(&Value)) {
        f(n);
        if let Some(c) = n["children"].as_array() {
            for x in c {
                visit(x, f);
            }
        }
    }
    for r in roots(report) {
        visit(r, f);
    }
}

/// The `*.bpp` part files of a profile directory, sorted.
pub fn part_files(profile: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(profile)
        .unwrap_or_else(|e| panic!("read profile dir {}: {e}", profile.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("bpp"))
        .collect();
    v.sort();
    v
}

/// Function names along the hot path of a tree view, in the report's `metric`: from the
/// heaviest root, following the heaviest child while it holds at least half of its parent.
pub fn heaviest_path(report: &Value) -> Vec<String> {
    let metric = report["metric"].as_str().expect("metric").to_string();
    let mut out = Vec::new();
    let mut node = roots(report).first();
    while let Some(n) = node {
        out.push(func(n).to_string());
        let parent = metric_of(n, "inclusive", &metric);
        node = n["children"]
            .as_array()
            .and_then(|c| c.first())
            .filter(|c| 2 * metric_of(c, "inclusive", &metric) >= parent);
    }
    out
}

/// The lock instances of the rows of a lock view (`--view locks --format json`) that belong
/// to `group`: locks at one address over a run share a row, so this counts every lock of
/// the group the view saw.
pub fn group_instances(locks_view: &Value, group: &str) -> u64 {
    locks_view["locks"]
        .as_array()
        .expect("a lock view")
        .iter()
        .filter(|l| l["group"] == group)
        .map(|l| l["instances"].as_u64().unwrap())
        .sum()
}
