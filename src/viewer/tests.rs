//! Tests of the rendered outputs and the command-line entry points.

use super::json::Json;
use super::text::Text;
use super::*;
use crate::attribution::testutil::{add_sample, analyze_renamed, process, write_part, TempDir};
use crate::cli::flamegraph::FlamegraphArgs;
use crate::cli::profile::ProfileArgs;
use crate::cli::report::{OutputFormat, ReportArgs, ViewChoice};
use crate::cli::{self, timeline::TimelineFlags};
use crate::format::counters::LOST_SAMPLE_COUNTERS;
use crate::format::read::{ProcessProfile, Profile};
use crate::format::Frame;
use serde_json::Value;
use std::path::PathBuf;

/// Two threads, two metrics: main -> f -> g and main -> h on thread 100 (work), idleness
/// on thread 101 under _start -> f, and a 0.1 % sliver main -> g.
fn two_metric_process() -> ProcessProfile {
    let mut p = process(100, &["work", "idleness"]);
    p.threads.push(crate::format::read::ThreadInfo {
        tid: 101,
        name: "worker".into(),
        start_routine: Some(Frame {
            module: 0,
            offset: 0x20,
        }),
        ..Default::default()
    });
    add_sample(&mut p, 100, 0, &[0x30, 0x20, 0x10], 7_000_000);
    add_sample(&mut p, 100, 0, &[0x30, 0x40], 2_990_000);
    add_sample(&mut p, 100, 0, &[0x30, 0x10], 10_000);
    add_sample(&mut p, 101, 1, &[0x50, 0x20], 4_000_000);
    p.counters.push(("samples_dropped_busy".into(), 3));
    p
}

fn profile() -> Profile {
    Profile {
        path: "blameprof-test".into(),
        processes: vec![two_metric_process()],
        skipped: Vec::new(),
    }
}

pub(super) fn render(report: &Report, renderer: &dyn Renderer) -> String {
    let mut out = Vec::new();
    renderer.render(report, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    k.sort();
    k
}

fn check_node(node: &Value, metrics: &[&str]) {
    assert_eq!(
        keys(node),
        [
            "children",
            "exclusive",
            "file",
            "function",
            "inclusive",
            "inlined",
            "line",
            "module"
        ]
    );
    assert!(node["function"].is_string() && node["module"].is_string());
    assert!(node["file"].is_null() || node["file"].is_string());
    assert!(node["line"].is_null() || node["line"].is_u64());
    assert!(node["inlined"].is_boolean());
    for field in ["inclusive", "exclusive"] {
        assert_eq!(keys(&node[field]).len(), metrics.len());
        for m in metrics {
            assert!(node[field][m].is_u64(), "{field}.{m}");
        }
    }
    for child in node["children"].as_array().expect("children array") {
        check_node(child, metrics);
    }
}

#[test]
fn json_document_has_the_schema_shape() {
    let a = analyze_renamed(&profile());
    let report = Report::new(&a, View::TopDown, 0, Prune::default());
    let doc: Value = serde_json::from_str(&render(&report, &Json)).unwrap();
    assert_eq!(
        keys(&doc),
        [
            "lost_samples",
            "metric",
            "metrics",
            "processes",
            "roots",
            "samples",
            "schema",
            "threads",
            "totals",
            "version",
            "view"
        ]
    );
    assert_eq!(doc["schema"], "blameprof-report");
    assert_eq!(doc["version"], 2);
    assert_eq!(doc["view"], "top-down");
    assert_eq!(doc["metric"], "work");
    assert_eq!(doc["metrics"][1]["name"], "idleness");
    assert_eq!(keys(&doc["metrics"][0]), ["description", "name", "unit"]);
    assert_eq!(doc["totals"]["work"], 10_000_000);
    assert_eq!(doc["totals"]["idleness"], 4_000_000);
    assert_eq!(doc["samples"], 4);
    assert_eq!(doc["lost_samples"], 3);
    let proc = &doc["processes"][0];
    assert_eq!(
        keys(proc),
        [
            "argv",
            "ended_cleanly",
            "exec_generation",
            "period_ns",
            "pid",
            "requested_hz",
            "sample_source"
        ]
    );
    assert_eq!(proc["argv"][0], "./app");
    let threads = doc["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 2);
    assert_eq!(
        keys(&threads[0]),
        ["name", "pid", "start_routine", "tid", "totals"]
    );
    assert!(threads[0]["start_routine"].is_null());
    assert_eq!(threads[1]["start_routine"], "f");
    assert_eq!(threads[1]["totals"]["idleness"], 4_000_000);
    let roots = doc["roots"].as_array().unwrap();
    for root in roots {
        check_node(root, &["work", "idleness"]);
    }
    // Sorted by inclusive work; no pruning by default, so the 0.1 % sliver is there.
    assert_eq!(roots[0]["function"], "main");
    let main_children: Vec<&str> = roots[0]["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["function"].as_str().unwrap())
        .collect();
    assert_eq!(main_children, ["f", "h", "g"]);
}

#[test]
fn json_flat_and_pruned_views() {
    let a = analyze_renamed(&profile());
    let flat = Report::new(&a, View::Flat, 0, Prune::default());
    let doc: Value = serde_json::from_str(&render(&flat, &Json)).unwrap();
    let roots = doc["roots"].as_array().unwrap();
    assert_eq!(roots[0]["function"], "g");
    assert_eq!(roots[0]["exclusive"]["work"], 7_010_000);
    assert!(roots
        .iter()
        .all(|r| r["children"].as_array().unwrap().is_empty()));

    let pruned = Prune {
        depth: Some(1),
        min_percent: Some(1.0),
    };
    // Top-down: the hot path main -> f -> g is exempt from the depth limit; h is not.
    let report = Report::new(&a, View::TopDown, 0, pruned);
    let doc: Value = serde_json::from_str(&render(&report, &Json)).unwrap();
    let main = &doc["roots"][0];
    assert_eq!(main["children"].as_array().unwrap().len(), 1);
    assert_eq!(main["children"][0]["function"], "f");
    assert_eq!(main["children"][0]["children"][0]["function"], "g");
    // Bottom-up: every function is a root, by exclusive work (as perf report and pprof:
    // the functions that did the work first, then main, whose work is mostly its callees');
    // _start has no work (pruned).
    let report = Report::new(&a, View::BottomUp, 0, pruned);
    let doc: Value = serde_json::from_str(&render(&report, &Json)).unwrap();
    assert_eq!(doc["view"], "bottom-up");
    let roots: Vec<&str> = doc["roots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["function"].as_str().unwrap())
        .collect();
    assert_eq!(roots, ["g", "h", "main", "f"]);
    assert!(doc["roots"][1]["children"].as_array().unwrap().is_empty());
}

#[test]
fn text_report_has_header_hot_path_and_pruning() {
    let a = analyze_renamed(&profile());
    let prune = Prune {
        depth: Some(16),
        min_percent: Some(1.0),
    };
    let text = render(&Report::new(&a, View::TopDown, 0, prune), &Text);
    assert!(
        text.contains("samples:    4, lost 3 (samples_dropped_busy 3)"),
        "{text}"
    );
    // 3 work samples carrying 10 ms of CPU time: a measured 300 samples per CPU-second.
    assert!(
        text.contains("source:     itimer-prof, requested 200 Hz, effective 300.0 Hz"),
        "{text}"
    );
    assert!(
        text.contains("metric:     work (ns): work time; total 10.00 ms"),
        "{text}"
    );
    assert!(text.contains("totals:     work 10.00 ms, idleness 4.00 ms"));
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("function"))
        .skip(1)
        .collect();
    assert_eq!(rows.len(), 4, "{text}");
    assert!(rows[0].contains("* main"), "{}", rows[0]);
    assert!(rows[1].contains("*   f"), "{}", rows[1]);
    assert!(rows[2].contains("*     g"), "{}", rows[2]);
    assert!(
        rows[3].contains("    h") && !rows[3].contains('*'),
        "{}",
        rows[3]
    );
    assert!(rows[0].contains("10.00 ms 100.0%"), "{}", rows[0]);

    let threads = render(&Report::new(&a, View::Threads, 1, prune), &Text);
    assert!(threads.contains("worker"), "{threads}");
    assert!(threads
        .lines()
        .any(|l| l.contains("101") && l.contains("4.00 ms") && l.ends_with(" f")));
}

/// A profile directory on disk, written by the runtime's encoder, inside `tmp`.
fn profile_dir(tmp: &TempDir) -> PathBuf {
    let dir = tmp.0.join("blameprof-20250101-000000");
    std::fs::create_dir_all(&dir).unwrap();
    write_part(&dir, &two_metric_process());
    dir
}

pub(super) fn report_args(path: PathBuf) -> ReportArgs {
    ReportArgs {
        view: ViewChoice::TopDown,
        lock: None,
        source: None,
        metric: None,
        metrics: Vec::new(),
        percent_of: PercentOf::Total,
        format: OutputFormat::Text,
        output: None,
        depth: None,
        min_percent: None,
        thread: None,
        profile: ProfileArgs {
            path: Some(path),
            pid: None,
            salvage: false,
        },
        contention_threshold: 10.0,
        rate_threshold: 1000.0,
        timeline: TimelineFlags {
            interval: 1_000_000_000,
            phase_threshold: 10.0,
            top: 5,
        },
    }
}

#[test]
fn cli_report_and_its_errors() {
    let tmp = TempDir::new("view-report");
    let dir = profile_dir(&tmp);
    let mut out = Vec::new();
    cli::report::report(&report_args(dir.clone()), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("[unknown] 0x30"), "{text}");

    let mut args = report_args(dir.clone());
    args.format = OutputFormat::Json;
    args.view = ViewChoice::Threads;
    args.thread = Some(101);
    let mut out = Vec::new();
    cli::report::report(&args, &mut out).unwrap();
    let doc: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(doc["view"], "threads");
    assert_eq!(doc["threads"].as_array().unwrap().len(), 1);
    assert_eq!(doc["samples"], 1);

    let mut args = report_args(dir.clone());
    args.metric = Some("cycles".into());
    let err = cli::report::report(&args, &mut Vec::new())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unknown metric 'cycles'") && err.contains("work, idleness"),
        "{err}"
    );
    let mut args = report_args(dir.clone());
    args.thread = Some(999);
    let err = cli::report::report(&args, &mut Vec::new())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no thread with tid 999") && err.contains("101 (worker)"),
        "{err}"
    );
    let mut args = report_args(dir.clone());
    args.profile.pid = Some(5);
    let err = cli::report::report(&args, &mut Vec::new())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no process with pid 5") && err.contains("100"),
        "{err}"
    );
    assert!(!err.contains('\n'));
}

#[test]
fn cli_flamegraph_writes_svg_and_reports_unwritable_output() {
    let tmp = TempDir::new("view-flamegraph");
    let dir = profile_dir(&tmp);
    let output = dir.parent().unwrap().join("fg.svg");
    let mut args = FlamegraphArgs {
        metric: "work".into(),
        output: output.clone(),
        thread: None,
        profile: ProfileArgs {
            path: Some(dir.clone()),
            pid: None,
            salvage: false,
        },
    };
    cli::flamegraph::flamegraph(&args).unwrap();
    let svg = std::fs::read_to_string(&output).unwrap();
    assert!(svg.contains("[unknown] 0x10"), "leaf missing from svg");
    args.output = "/nonexistent-dir/fg.svg".into();
    let err = cli::flamegraph::flamegraph(&args).unwrap_err().to_string();
    assert!(
        err.contains("/nonexistent-dir/fg.svg") && err.contains("-o"),
        "{err}"
    );
}

#[test]
fn cli_summary_lines_are_prefixed() {
    let tmp = TempDir::new("view-summary");
    let dir = profile_dir(&tmp);
    let mut out = Vec::new();
    cli::summary::summary(&dir, 5, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.lines().all(|l| l.starts_with("blameprof: ")), "{text}");
    assert!(
        text.contains("samples: 4, lost: 3 (samples_dropped_busy 3)"),
        "{text}"
    );
    assert!(
        text.contains("top 2 functions by exclusive work:"),
        "{text}"
    );
    assert!(text.contains("70.1%"), "{text}");
    // Its idleness samples have no runtime frames: the waiter is the leaf, without a lock.
    assert!(
        text.contains(
            "blameprof: top 1 waiters for locks (victims) by idleness, % of effort:\n\
             blameprof:    28.6%    4.00 ms  [unknown] 0x20\n"
        ),
        "{text}"
    );
}

#[test]
fn newest_profile_directory_is_the_default() {
    let tmp = TempDir::new("newest");
    let root = &tmp.0;
    std::fs::create_dir_all(root.join("blameprof-b")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::create_dir_all(root.join("blameprof-a")).unwrap();
    std::fs::write(root.join("blameprof-z"), b"not a directory").unwrap();
    assert_eq!(
        cli::profile::newest_profile(root),
        Some(root.join("blameprof-a"))
    );
    assert_eq!(
        cli::profile::newest_profile(&root.join("blameprof-a")),
        None
    );
}

/// Builds every view over a synthetic profile of one million samples (prints the times).
#[test]
fn one_million_samples() {
    let mut p = process(1, &["work"]);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let stacks: Vec<Vec<u64>> = (0..5_000)
        .map(|_| {
            let depth = 10 + next() % 40;
            let mut path = vec![0x50, 0x30];
            path.extend((0..depth).map(|_| 0x1000 + (next() % 2_000) * 16));
            path
        })
        .collect();
    for i in 0..1_000_000u32 {
        let path = &stacks[(next() % stacks.len() as u64) as usize];
        add_sample(&mut p, 1 + i % 8, 0, path, 5_000_000);
    }
    let profile = Profile {
        path: "blameprof-1m".into(),
        processes: vec![p],
        skipped: Vec::new(),
    };
    let start = std::time::Instant::now();
    let a = analyze_renamed(&profile);
    let analysed = start.elapsed();
    let mut times = Vec::new();
    for view in [View::TopDown, View::BottomUp, View::Flat] {
        let t = std::time::Instant::now();
        let prune = Prune {
            depth: Some(16),
            min_percent: Some(1.0),
        };
        let report = Report::new(&a, view, 0, prune);
        render(&report, &Text);
        times.push(format!("{} {:?}", view.name(), t.elapsed()));
    }
    println!(
        "1M samples: analysis {analysed:?}, then {}; total {:?}",
        times.join(", "),
        start.elapsed()
    );
    assert_eq!(a.samples, 1_000_000);
    assert_eq!(a.totals[0], 5_000_000_000_000);
}

#[derive(clap::Parser)]
struct TestCli {
    #[command(subcommand)]
    command: TestCommand,
}

#[derive(clap::Subcommand)]
enum TestCommand {
    Report(ReportArgs),
    Flamegraph(FlamegraphArgs),
}

#[test]
fn clap_arguments_parse() {
    use clap::{CommandFactory, Parser};
    TestCli::command().debug_assert();
    let cli = TestCli::try_parse_from([
        "blameprof",
        "report",
        "dir",
        "--view",
        "bottom-up",
        "--format",
        "json",
        "--depth",
        "3",
        "--min-percent",
        "2.5",
        "--thread",
        "7",
        "--pid",
        "6",
        "--metric",
        "idleness",
    ])
    .unwrap();
    let TestCommand::Report(r) = cli.command else {
        panic!("not a report")
    };
    assert_eq!(r.profile.path, Some(PathBuf::from("dir")));
    assert_eq!(
        (r.view, r.format),
        (ViewChoice::BottomUp, OutputFormat::Json)
    );
    assert_eq!((r.depth, r.min_percent), (Some(3), Some(2.5)));
    assert_eq!(
        (r.thread, r.profile.pid, r.metric.as_deref()),
        (Some(7), Some(6), Some("idleness"))
    );
    assert_eq!((r.metrics.len(), r.percent_of), (0, PercentOf::Total));
    let cli = TestCli::try_parse_from([
        "blameprof",
        "report",
        "--metrics",
        "work,idleness,blame",
        "--percent-of",
        "effort",
    ])
    .unwrap();
    let TestCommand::Report(r) = cli.command else {
        panic!("not a report")
    };
    assert_eq!(r.metrics, ["work", "idleness", "blame"]);
    assert_eq!((r.metric, r.percent_of), (None, PercentOf::Effort));
    let cli = TestCli::try_parse_from(["blameprof", "flamegraph", "-o", "x.svg"]).unwrap();
    let TestCommand::Flamegraph(f) = cli.command else {
        panic!("not a flamegraph")
    };
    assert_eq!(
        (f.profile.path, f.output, f.metric.as_str()),
        (None, PathBuf::from("x.svg"), "work")
    );
    for bad in [
        ["--min-percent", "101"],
        ["--depth", "0"],
        ["--view", "sideways"],
        ["--percent-of", "work"],
    ] {
        let args = ["blameprof", "report"].into_iter().chain(bad);
        assert!(TestCli::try_parse_from(args).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn quiet_runs_still_warn_of_lost_samples() {
    let tmp = TempDir::new("warn-losses");
    let write = |name: &str, lost: &[(&str, u64)]| {
        let dir = tmp.0.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let mut p = two_metric_process();
        // The fixture's own losses go; a counter that is not a loss stays unreported.
        p.counters
            .retain(|(n, _)| !LOST_SAMPLE_COUNTERS.contains(&n.as_str()));
        p.counters.push(("runtime_heap_peak_bytes".into(), 4096));
        p.counters
            .extend(lost.iter().map(|&(n, v)| (n.to_owned(), v)));
        write_part(&dir, &p);
        let mut told = Vec::new();
        cli::summary::warn_losses(&dir, &mut told).unwrap();
        (dir, String::from_utf8(told).unwrap())
    };
    assert_eq!(write("blameprof-sound", &[]).1, "");
    let (dir, told) = write(
        "blameprof-lossy",
        &[
            ("samples_dropped_busy", 3),
            ("samples_dropped_no_thread_state", 2),
        ],
    );
    assert_eq!(
        told,
        format!(
            "blameprof: warning: 5 samples lost (samples_dropped_busy 3, \
             samples_dropped_no_thread_state 2); the profile is in {}\n",
            dir.display()
        )
    );
}
