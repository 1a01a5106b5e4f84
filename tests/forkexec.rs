//! fork and exec: profiling follows a program into its forked child and through execv of a new
//! image. Proves that the merged profile holds the work of every process image (parent before
//! fork, forked child, image after exec), that each image has its own part file, that
//! `report --pid` selects exactly one process's data, and that what it selects is what each
//! process measured of itself: each phase's work within 15% of the CPU time it took (thread
//! CPU time), each process's total work within 15% of its CPU time
//! (`CLOCK_PROCESS_CPUTIME_ID`, which runs on across exec), and the child's mutex wait and the
//! exec'd image's join its idleness at `child_wait -> pthread_mutex_lock` and
//! `after_exec_wait -> pthread_join`, within 15% (+2 ms) of the waits they measured.

mod common;

use common::*;
use std::collections::HashMap;

/// Relative tolerance against the programs' own figures.
const TOLERANCE: f64 = 0.15;
/// Absolute slack on top of it for a wait (150 ms): a scheduling delay.
const SLACK_NS: u64 = 2_000_000;

#[test]
fn fork_and_exec_are_profiled_and_pid_filter_selects() {
    let prog = compile_c("forkexec.c", "forkexec", &["-O2", "-g", "-pthread"]);
    let out = scratch_dir("forkexec").join("prof");
    let run = profile_ok(&out, 1000, &prog, &["0.5"]);
    assert!(
        run.stdout.contains("forkexec: after exec pid="),
        "the exec'd phase did not run\n{}",
        run.describe()
    );
    let t = truths(&run.stdout);
    let (parent, child) = (t["parent_pid"], t["child_pid"]);

    let parts = part_files(&out);
    assert!(
        parts.len() >= 3,
        "expected a part file per process image (parent, child, after exec), found {parts:?}"
    );

    let all = report_json(&out, &["--view", "flat"]);
    for f in ["parent_work", "child_work", "after_exec_work"] {
        let (_, excl) = flat_values(&all, f);
        assert!(
            excl > 0,
            "{f} missing from the merged profile; flat roots: {:?}",
            names(&all)
        );
    }
    let pids: std::collections::BTreeSet<u64> = all["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["pid"].as_u64().unwrap())
        .collect();
    assert!(
        pids.contains(&parent) && pids.contains(&child),
        "threads list pids {pids:?} should contain parent {parent} and child {child}"
    );

    let only_child = report_json(&out, &["--view", "flat", "--pid", &child.to_string()]);
    for t in only_child["threads"].as_array().unwrap() {
        assert_eq!(
            t["pid"], child,
            "--pid {child} kept a thread of another process: {t}"
        );
    }
    assert!(
        flat_values(&only_child, "child_work").1 > 0,
        "--pid {child}: child_work missing"
    );
    for f in ["parent_work", "after_exec_work"] {
        assert_eq!(
            flat_values(&only_child, f).1,
            0,
            "--pid {child}: {f} should not be there"
        );
    }

    let only_parent = report_json(&out, &["--view", "flat", "--pid", &parent.to_string()]);
    for f in ["parent_work", "after_exec_work"] {
        assert!(
            flat_values(&only_parent, f).1 > 0,
            "--pid {parent}: {f} missing"
        );
    }
    assert_eq!(
        flat_values(&only_parent, "child_work").1,
        0,
        "--pid {parent}: child_work present"
    );
    assert_eq!(
        total_work(&only_parent) + total_work(&only_child),
        total_work(&all),
        "the two pids' totals should add up to the whole profile"
    );
    each_process_is_its_own_truth(&out, &t, parent, child);
}

/// Each pid's selection against what its process measured of itself (the module doc).
fn each_process_is_its_own_truth(
    out: &std::path::Path,
    t: &HashMap<String, u64>,
    parent: u64,
    child: u64,
) {
    let mut lines = Vec::new();
    let mut failures = Vec::new();
    let mut check = |what: String, got: u64, key: &str, slack: u64| {
        let want = t[key];
        let line = format!(
            "{what}: {:.1} ms, measured {key} {:.1} ms ({:+.1}%)",
            got as f64 / 1e6,
            want as f64 / 1e6,
            pct_err(got, want)
        );
        if (got as f64 - want as f64).abs() > TOLERANCE * want as f64 + slack as f64 {
            failures.push(line.clone());
        }
        lines.push(line);
    };
    for (pid, works, wait, proc_key) in [
        (
            child,
            &["child_work"][..],
            ["child_wait", "pthread_mutex_lock"],
            "child_proc_ns",
        ),
        (
            parent,
            &["parent_work", "after_exec_work"][..],
            ["after_exec_wait", "pthread_join"],
            "after_exec_proc_ns",
        ),
    ] {
        let pid_arg = pid.to_string();
        let flat = report_json(out, &["--view", "flat", "--pid", &pid_arg]);
        let td = report_json_metric(out, "idleness", &["--view", "top-down", "--pid", &pid_arg]);
        for f in works {
            let key = format!("{f}_ns");
            check(
                format!("pid {pid}: work of {f}"),
                flat_values(&flat, f).1,
                &key,
                0,
            );
        }
        check(
            format!("pid {pid}: total work"),
            total_work(&flat),
            proc_key,
            0,
        );
        check(
            format!("pid {pid}: idleness at {}", wait.join(" -> ")),
            path_sum(&td, &wait, "idleness"),
            &format!("{}_ns", wait[0]),
            SLACK_NS,
        );
    }
    println!("{}", lines.join("\n"));
    assert!(
        failures.is_empty(),
        "the processes' profiles against their own figures (tolerance {:.0}%):\n  {}\nall:\n  {}",
        TOLERANCE * 100.0,
        failures.join("\n  "),
        lines.join("\n  ")
    );
}

fn names(report: &serde_json::Value) -> Vec<String> {
    roots(report).iter().map(|r| func(r).to_string()).collect()
}
