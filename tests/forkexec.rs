//! fork and exec: profiling follows a program into its forked child and through execv of a new
//! image. Proves that the merged profile holds the work of every process image (parent before
//! fork, forked child, image after exec), that each image has its own part file, and that
//! `report --pid` selects exactly one process's data.

mod common;

use common::*;

#[test]
fn fork_and_exec_are_profiled_and_pid_filter_selects() {
    let prog = compile_c("forkexec.c", "forkexec", &["-O2", "-g"]);
    let out = scratch_dir("forkexec").join("prof");
    let run = profile_ok(&out, 1000, &prog, &["0.5"]);
    assert!(
        run.stdout.contains("forkexec: after exec pid="),
        "the exec'd phase did not run\n{}",
        run.describe()
    );
    let t = truth(&run.stdout);
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
}

fn names(report: &serde_json::Value) -> Vec<String> {
    roots(report).iter().map(|r| func(r).to_string()).collect()
}
