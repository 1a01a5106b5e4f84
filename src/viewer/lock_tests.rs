//! Tests of the views and the summary on a profile with lock waiting: metrics work,
//! idleness and blame, runtime frames at the leaves (see `testutil::lock_process`: work 9,
//! idleness 7, blame 6.3, effort 16 ms).

use super::json::Json;
use super::tests::{render, report_args};
use super::text::Text;
use super::*;
use crate::attribution::cct::top_down;
use crate::attribution::testutil::{
    add_sample, analyze_renamed, lock_process, lock_profile, process, set_line, write_part, TempDir,
};
use crate::attribution::Analysis;
use crate::cli;
use crate::cli::flamegraph::FlamegraphArgs;
use crate::cli::profile::ProfileArgs;
use crate::cli::report::{OutputFormat, ReportArgs};
use serde_json::Value;
use std::path::PathBuf;

const TEXT_PRUNE: Prune = Prune {
    depth: Some(16),
    min_percent: Some(1.0),
};

fn analysis() -> Analysis {
    let mut a = analyze_renamed(&lock_profile());
    set_line(&mut a, "lookup", "/src/table.c", 42);
    set_line(&mut a, "insert", "/src/table.c", 57);
    a
}

fn id(a: &Analysis, name: &str) -> usize {
    a.metrics.id(name).unwrap()
}

/// The table rows of a text report (after the column headings).
fn rows(text: &str) -> Vec<&str> {
    text.lines()
        .skip_while(|l| !l.ends_with("    function"))
        .skip(1)
        .collect()
}

#[test]
fn text_columns_side_by_side_with_percentages_of_effort() {
    let a = analysis();
    let columns = vec![id(&a, "work"), id(&a, "idleness"), id(&a, "blame")];
    let report = Report::new(&a, View::TopDown, id(&a, "blame"), TEXT_PRUNE)
        .with_columns(columns)
        .with_percent_of(PercentOf::Effort)
        .unwrap();
    assert_eq!(report.percent_base(id(&a, "blame")), 16_000_000);
    assert_eq!(report.percent(4_800_000, id(&a, "blame")), 30.0);
    let text = render(&report, &Text);
    assert!(
        text.contains(
            "totals:     work 9.00 ms, idleness 7.00 ms, blame 6.30 ms, root 6.30 ms; \
             effort (work + idleness) 16.00 ms"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "view:       top-down, by inclusive blame; % of effort (work + idleness, 16.00 ms);"
        ),
        "{text}"
    );
    let names = text
        .lines()
        .find(|l| l.contains("- work -"))
        .expect("names");
    let order: Vec<usize> = ["work", "idleness", "blame"]
        .iter()
        .map(|m| names.find(&format!(" {m} ")).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{names}");
    // Sorted and pruned by blame: main (no blame) and the lock calls are hidden.
    let rows = rows(&text);
    let functions: Vec<&str> = rows
        .iter()
        .map(|r| {
            r.split("%  ")
                .last()
                .unwrap()
                .trim_start_matches(['*', ' '])
        })
        .collect();
    assert_eq!(
        functions,
        [
            "_start",
            "worker",
            "insert  table.c:57",
            "pthread_mutex_unlock  [libblameprof_rt.so]",
            "lookup  table.c:42",
            "pthread_mutex_unlock  [libblameprof_rt.so]",
        ],
        "{text}"
    );
    // insert: work 3 ms (18.75 %) inclusive and exclusive, idleness 1 ms, blame 4.8 ms.
    let insert = rows[2];
    assert!(
        insert.starts_with("   3.00 ms  18.8%     3.00 ms  18.8%     1.00 ms"),
        "{insert}"
    );
    assert!(
        insert.contains("4.80 ms  30.0%        0 ns   0.0%  *     insert"),
        "{insert}"
    );
    assert!(rows[5].contains("1.50 ms   9.4%     1.50 ms   9.4%          pthread_mutex_unlock"));
}

#[test]
fn pruning_uses_the_percentage_base() {
    let a = analysis();
    let blame = id(&a, "blame");
    let prune = Prune {
        depth: None,
        min_percent: Some(10.0),
    };
    // lookup's 1.5 ms of blame: 23.8 % of blame, 9.4 % of effort.
    let of_total = render(&Report::new(&a, View::Flat, blame, prune), &Text);
    assert!(of_total.contains("1.50 ms  23.8%"), "{of_total}");
    assert!(of_total.contains("lookup"), "{of_total}");
    let of_effort = Report::new(&a, View::Flat, blame, prune)
        .with_percent_of(PercentOf::Effort)
        .unwrap();
    let text = render(&of_effort, &Text);
    // No row of lookup's own (the unlock's row still names it among its callers).
    assert!(!text.contains("    lookup"), "{text}");
    assert!(text.contains("<- insert 76%, lookup 24%"), "{text}");
    assert!(text.contains("4.80 ms  30.0%"), "{text}");
    assert!(text.contains("insert"), "{text}");
    // Percentages of effort need work and idleness.
    let work_only = analyze_renamed(&crate::attribution::testutil::profile_of(&[(&[0x30], 1)]));
    let err = Report::new(&work_only, View::Flat, 0, prune)
        .with_percent_of(PercentOf::Effort)
        .err()
        .expect("no idleness")
        .to_string();
    assert!(err.contains("--percent-of total"), "{err}");
}

#[test]
fn threads_show_every_metric_or_the_columns_asked_for() {
    let a = analysis();
    let text = render(&Report::new(&a, View::Threads, 0, TEXT_PRUNE), &Text);
    assert!(
        text.contains("work     idleness        blame         root"),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.starts_with(
            "     100      102      3.00 ms      1.00 ms      4.80 ms      4.80 ms  worker"
        )),
        "{text}"
    );
    let report = Report::new(&a, View::Threads, 0, TEXT_PRUNE).with_columns(vec![id(&a, "blame")]);
    let text = render(&report, &Text);
    assert!(
        text.lines()
            .any(|l| l.starts_with("     100      101      1.50 ms  worker")),
        "{text}"
    );
    assert_eq!(
        a.threads[1].totals,
        [4_000_000, 6_000_000, 1_500_000, 1_500_000]
    );
}

#[test]
fn json_values_stay_absolute_with_percentages_of_effort() {
    let a = analysis();
    let report = Report::new(&a, View::BottomUp, id(&a, "idleness"), Prune::default())
        .with_percent_of(PercentOf::Effort)
        .unwrap()
        .with_columns(vec![id(&a, "idleness")]);
    let doc: Value = serde_json::from_str(&render(&report, &Json)).unwrap();
    assert_eq!(doc["metric"], "idleness");
    let names: Vec<&str> = doc["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["work", "idleness", "blame", "root"]);
    assert_eq!(doc["totals"]["blame"], 6_300_000);
    // Bottom-up by idleness: the lock function first, its callers below it.
    let lock = doc["roots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["function"] == "pthread_mutex_lock")
        .unwrap();
    assert!(lock["module"]
        .as_str()
        .unwrap()
        .ends_with("libblameprof_rt.so"));
    assert_eq!(lock["exclusive"]["idleness"], 7_000_000);
    assert_eq!(lock["children"][0]["function"], "lookup");
    assert_eq!(lock["children"][0]["inclusive"]["idleness"], 6_000_000);
    assert_eq!(lock["children"][0]["line"], 42);
}

#[test]
fn flamegraphs_of_idleness_and_blame_end_in_the_lock_functions() {
    let a = analysis();
    let tree = top_down(&a);
    assert_eq!(
        flamegraph::folded_lines(&a, &tree, id(&a, "blame")),
        [
            "_start;worker;insert;pthread_mutex_unlock 4800000",
            "_start;worker;lookup;pthread_mutex_unlock 1500000",
        ]
    );
    assert_eq!(
        flamegraph::folded_lines(&a, &tree, id(&a, "idleness")),
        [
            "_start;worker;insert;pthread_mutex_lock 1000000",
            "_start;worker;lookup;pthread_mutex_lock 6000000",
        ]
    );
}

#[test]
fn summary_names_victims_and_culprits() {
    let a = analysis();
    let mut out = Vec::new();
    summary::write(&a, None, 5, style::Paint::none(), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.lines().all(|l| l.starts_with("blameprof: ")), "{text}");
    let lock_lines: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("waiting for locks: idleness"))
        .collect();
    assert_eq!(
        lock_lines,
        [
            "blameprof: waiting for locks: idleness 7.00 ms = 43.8% of effort, blame 6.30 ms = 39.4% \
             (effort = work + idleness = 16.00 ms)",
            "blameprof: top 2 waiters for locks (victims) by idleness, % of effort:",
            "blameprof:    37.5%    6.00 ms  lookup  (pthread_mutex_lock)  table.c:42",
            "blameprof:     6.2%    1.00 ms  insert  (pthread_mutex_lock)  table.c:57",
            "blameprof: top 2 culprits (perpetrators) by blame, % of effort:",
            "blameprof:    30.0%    4.80 ms  insert  (pthread_mutex_unlock)  table.c:57",
            "blameprof:     9.4%    1.50 ms  lookup  (pthread_mutex_unlock)  table.c:42",
            "blameprof: call paths: 'blameprof report blameprof-locks'; flamegraph: \
             'blameprof flamegraph blameprof-locks'",
            "blameprof: lock blame by call path: 'blameprof report --metrics \
             blame,idleness,work --percent-of effort blameprof-locks'",
        ],
        "{text}"
    );
    // The work part is unchanged, and --top limits the lists.
    assert!(text.contains("blameprof: work: total 9.00 ms\n"), "{text}");
    let mut out = Vec::new();
    summary::write(&a, None, 1, style::Paint::none(), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("top 1 culprits (perpetrators)"), "{text}");
    assert!(
        !text.contains("(pthread_mutex_unlock)  table.c:42"),
        "{text}"
    );
}

#[test]
fn summary_without_lock_waiting_has_no_lock_lines() {
    // All three metrics declared, but nothing waited.
    let mut p = process(100, &["work", "idleness", "blame"]);
    add_sample(&mut p, 100, 0, &[0x30, 0x20], 5_000_000);
    let profile = crate::format::read::Profile {
        path: "blameprof-quiet".into(),
        processes: vec![p],
        skipped: Vec::new(),
    };
    let a = analyze_renamed(&profile);
    let mut out = Vec::new();
    summary::write(&a, None, 5, style::Paint::none(), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains("lock") && !text.contains("effort"), "{text}");
    let report = render(&Report::new(&a, View::TopDown, 0, TEXT_PRUNE), &Text);
    assert!(
        report.contains("totals:     work 5.00 ms, idleness 0 ns, blame 0 ns, root 0 ns\n"),
        "{report}"
    );
}

/// The lock profile written to disk by the runtime's encoder (names stay unrenamed).
fn lock_dir(tmp: &TempDir) -> PathBuf {
    let dir = tmp.0.join("blameprof-locks");
    std::fs::create_dir_all(&dir).unwrap();
    write_part(&dir, &lock_process());
    dir
}

fn cli_report(args: &ReportArgs) -> anyhow::Result<String> {
    let mut out = Vec::new();
    cli::report::report(args, &mut out)?;
    Ok(String::from_utf8(out).unwrap())
}

#[test]
fn cli_report_metrics_and_percent_of() {
    let tmp = TempDir::new("view-locks");
    let dir = lock_dir(&tmp);
    let mut args = report_args(dir.clone());
    args.metrics = vec!["blame".into(), "idleness".into(), "blame".into()];
    args.percent_of = PercentOf::Effort;
    let text = cli_report(&args).unwrap();
    // Sorted by the first of --metrics; a repeated metric is shown once.
    assert!(
        text.contains("view:       top-down, by inclusive blame"),
        "{text}"
    );
    assert_eq!(text.matches("- blame -").count(), 1, "{text}");
    assert!(
        text.contains("- idleness -") && !text.contains("- work -"),
        "{text}"
    );
    assert!(text.contains("libblameprof_rt.so+0x300"), "{text}");
    assert!(
        !text.contains("libblameprof_rt.so+0x110"),
        "collapsed: {text}"
    );

    args.metric = Some("work".into());
    let err = cli_report(&args).unwrap_err().to_string();
    assert!(
        err.contains("--metric work is not among --metrics blame,idleness"),
        "{err}"
    );
    args.metric = None;
    args.metrics = vec!["idleness".into(), "cycles".into()];
    let err = cli_report(&args).unwrap_err().to_string();
    assert!(err.contains("unknown metric 'cycles'"), "{err}");

    // JSON: every metric, absolute values, whatever --metrics says.
    let mut args = report_args(dir.clone());
    args.format = OutputFormat::Json;
    args.metrics = vec!["idleness".into()];
    args.percent_of = PercentOf::Effort;
    let doc: Value = serde_json::from_str(&cli_report(&args).unwrap()).unwrap();
    assert_eq!(doc["metric"], "idleness");
    assert_eq!(doc["totals"]["work"], 9_000_000);
    assert_eq!(doc["roots"][0]["inclusive"]["idleness"], 7_000_000);

    // A profile without idleness has no effort.
    let old = tmp.0.join("blameprof-old");
    std::fs::create_dir_all(&old).unwrap();
    let mut p = process(100, &["work"]);
    add_sample(&mut p, 100, 0, &[0x30], 5_000_000);
    write_part(&old, &p);
    let mut args = report_args(old);
    args.percent_of = PercentOf::Effort;
    let err = cli_report(&args).unwrap_err().to_string();
    assert!(
        err.contains("work and idleness") && err.contains("this profile has work;"),
        "{err}"
    );
}

#[test]
fn cli_flamegraph_and_summary_of_blame() {
    let tmp = TempDir::new("view-locks-fg");
    let dir = lock_dir(&tmp);
    let output = tmp.0.join("blame.svg");
    let args = FlamegraphArgs {
        metric: "blame".into(),
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
    assert!(svg.contains("blameprof: blame"), "title");
    assert!(
        svg.contains("libblameprof_rt.so+0x300"),
        "unlock frame missing"
    );
    let mut out = Vec::new();
    cli::summary::summary(&dir, 5, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("[unknown] 0x70  (libblameprof_rt.so+0x300)"),
        "{text}"
    );
}
