//! Sampling accuracy: the CPU-time profile agrees with what the workloads measured about
//! themselves. Proves that (1) the shares of `hot_a`/`hot_b` (exclusive work for C; inclusive
//! for Rust, whose inlined callees are frames of their own) match the programs' own
//! CLOCK_THREAD_CPUTIME_ID measurements within 5 percentage points;
//! (2) total profiled work is within 15% of the process CPU time; (3) call paths through
//! code built without frame pointers are complete, for main and for a pthread; (4) the
//! per-thread data, views, filters and the flamegraph are consistent with each other.

mod common;

use std::path::PathBuf;
use std::sync::OnceLock;

use common::*;

/// split.c, 4 threads x 1.5 CPU-seconds at 1 kHz: (profile dir, workload stdout).
fn split_profile() -> &'static (PathBuf, String) {
    static P: OnceLock<(PathBuf, String)> = OnceLock::new();
    P.get_or_init(|| {
        let prog = split_c();
        let out = scratch_dir("split-profile").join("prof");
        let run = profile_ok(&out, 1000, &prog, &["4", "1.5"]);
        (out, run.stdout)
    })
}

/// Which work of `hot_a`/`hot_b` to compare with the measured truth.
#[derive(Clone, Copy, PartialEq)]
enum Field {
    /// Leaf attribution: right for C, where the hot loops have no inlined callees.
    Exclusive,
    /// For Rust, whose loops report inlined frames (`black_box`, `Range::next`, ...) below
    /// `hot_a`, so the function's own share is its inclusive work.
    Inclusive,
}

fn check_shares(profile: &std::path::Path, stdout: &str, what: &str, field: Field) {
    let t = truth(stdout);
    let (a_true, b_true) = (t["hot_a_ns"], t["hot_b_ns"]);
    let flat = check_totals(profile, stdout, what);
    let pick = |(incl, excl): (u64, u64)| {
        if field == Field::Inclusive {
            incl
        } else {
            excl
        }
    };
    let a = pick(flat_values(&flat, "hot_a"));
    let b = pick(flat_values(&flat, "hot_b"));
    assert!(
        a > 0 && b > 0,
        "{what}: hot_a={a} hot_b={b} in the flat view"
    );
    let share = a as f64 / (a + b) as f64 * 100.0;
    let share_true = a_true as f64 / (a_true + b_true) as f64 * 100.0;
    assert!(
        (share - share_true).abs() <= 5.0,
        "{what}: hot_a share {share:.1}% profiled vs {share_true:.1}% measured (hot_a={a} hot_b={b})"
    );
    let ab_true = (a_true + b_true) as f64;
    let ab = (a + b) as f64;
    assert!(
        (ab - ab_true).abs() <= 0.15 * ab_true,
        "{what}: hot_a+hot_b work {ab:.0} ns vs measured {ab_true:.0} ns"
    );
}

/// The profile's samples, its total work against the process's CPU time, and its flat
/// view's exclusive values adding up to the total; returns the flat view.
fn check_totals(profile: &std::path::Path, stdout: &str, what: &str) -> serde_json::Value {
    let cpu_true = truth(stdout)["total_cpu_ns"];
    let flat = report_json(profile, &["--view", "flat"]);
    assert_eq!(flat["view"], "flat");
    let n = samples(&flat);
    assert!(n > 500, "{what}: only {n} samples for several CPU-seconds");
    let lost = flat["lost_samples"].as_u64().expect("lost_samples");
    assert!(lost * 100 <= n, "{what}: {lost} of {n} samples lost");
    let total = total_work(&flat) as f64;
    assert!(
        (total - cpu_true as f64).abs() <= 0.15 * cpu_true as f64,
        "{what}: total work {total:.0} ns vs measured process CPU {cpu_true} ns"
    );
    let excl_sum: u64 = roots(&flat).iter().map(|r| work(r, "exclusive")).sum();
    assert_eq!(
        excl_sum,
        total_work(&flat),
        "{what}: flat exclusive values must sum to the total"
    );
    flat
}

#[test]
fn split_c_shares_match_measured_truth() {
    let (profile, stdout) = split_profile();
    check_shares(profile, stdout, "split.c", Field::Exclusive);
}

/// The default 200 Hz rate (served by a different sample source than 1 kHz, which may
/// exceed the scheduler tick): same accuracy requirements, with fewer samples.
#[test]
fn split_c_shares_match_measured_truth_at_200hz() {
    let prog = split_c();
    let out = scratch_dir("split-200").join("prof");
    // Twice the CPU time of the 1 kHz run: the CPU-time timer delivers 125-160 samples/s
    // here, and the share must stand several standard errors inside its 5-point bound
    // (about 1.3 points with ~1700 samples; with 1.5 s it failed once under a loaded suite).
    // On a machine shared with other work the CPU-time timer's expiries, checked at the
    // scheduler's ticks, fall where the threads are preempted, and hot_a's share reads 6-8
    // points low (62% against 70%, beside a 2-thread CPU hog: open, docs/benchmarks.md): a
    // run in which the program had less than 85% of the CPUs it could use is run again, and
    // if all 3 are, only the totals are judged.
    let cpus = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(4);
    let mut had = Vec::new();
    for _ in 0..3 {
        let run = profile_ok(&out, 200, &prog, &["4", "3"]);
        let t = truth(&run.stdout);
        let share = t["total_cpu_ns"] as f64 / (t["wall_ns"] as f64 * cpus as f64);
        if share >= 0.85 {
            check_shares(&out, &run.stdout, "split.c at 200 Hz", Field::Exclusive);
            return;
        }
        had.push(format!("{:.2}", share));
        if had.len() == 3 {
            check_totals(&out, &run.stdout, "split.c at 200 Hz");
        }
    }
    skip(&format!(
        "split.c had {} of the {cpus} CPUs it could use in 3 runs of 3 (another workload had \
         the rest), so hot_a's share under the CPU-time timer was not judged (its totals were)",
        had.join(", ")
    ));
}

#[test]
fn split_rust_shares_match_measured_truth() {
    let prog = compile_rs("split_rs.rs", "split_rs");
    let out = scratch_dir("split-rs").join("prof");
    let run = profile_ok(&out, 1000, &prog, &["3", "1.5"]);
    check_shares(&out, &run.stdout, "split_rs.rs", Field::Inclusive);
}

#[test]
fn threads_have_own_totals_and_start_routines() {
    let (profile, _) = split_profile();
    let flat = report_json(profile, &["--view", "flat"]);
    let threads = flat["threads"].as_array().unwrap();
    let workers: Vec<&serde_json::Value> = threads
        .iter()
        .filter(|t| {
            t["start_routine"]
                .as_str()
                .is_some_and(|s| name_matches(s, "worker"))
        })
        .collect();
    assert_eq!(
        workers.len(),
        4,
        "expected 4 threads started at `worker`: {threads:#?}"
    );
    let total = total_work(&flat);
    let thread_sum: u64 = threads.iter().map(|t| work(t, "totals")).sum();
    assert_eq!(
        thread_sum, total,
        "per-thread totals must add up to the total"
    );
    // Every worker burns the same 1.5 CPU-seconds.
    let each: Vec<u64> = workers.iter().map(|t| work(t, "totals")).collect();
    let mean = each.iter().sum::<u64>() as f64 / 4.0;
    for w in &each {
        assert!(
            (*w as f64 - mean).abs() <= 0.2 * mean,
            "worker totals should be about equal: {each:?}"
        );
    }
    let pids: std::collections::HashSet<u64> =
        threads.iter().map(|t| t["pid"].as_u64().unwrap()).collect();
    assert_eq!(pids.len(), 1, "one process only: {threads:#?}");

    // --thread selects exactly one thread's data.
    let tid = workers[0]["tid"].as_u64().unwrap();
    let one = report_json(profile, &["--view", "flat", "--thread", &tid.to_string()]);
    let one_threads = one["threads"].as_array().unwrap();
    assert!(
        one_threads.len() == 1 && one_threads[0]["tid"] == tid,
        "--thread {tid} kept {one_threads:#?}"
    );
    assert_eq!(
        total_work(&one),
        each[0],
        "--thread {tid}: totals.work vs the thread's totals"
    );
    assert!(
        flat_values(&one, "hot_a").1 > 0,
        "--thread {tid}: hot_a missing"
    );
}

#[test]
fn deep_call_paths_are_complete_without_frame_pointers() {
    let prog = compile_c(
        "deep.c",
        "deep",
        &[
            "-O1",
            "-g",
            "-fomit-frame-pointer",
            "-fno-inline",
            "-pthread",
        ],
    );
    let out = scratch_dir("deep").join("prof");
    let run = profile_ok(&out, 1000, &prog, &["1.5"]);
    let t = truth(&run.stdout);
    let main_share = t["main_leaf_ns"] as f64 / (t["main_leaf_ns"] + t["worker_leaf_ns"]) as f64;

    let flat = report_json(&out, &["--view", "flat"]);
    let (leaf_total, _) = flat_values(&flat, "hot_leaf");
    assert!(samples(&flat) > 300, "too few samples: {}", samples(&flat));
    assert!(leaf_total > 0, "hot_leaf not in the profile");

    let td = report_json(&out, &["--view", "top-down"]);
    assert_eq!(td["view"], "top-down");
    let paths = describe_paths(&td, "hot_leaf", 12);

    let main_paths = find_paths(
        &td,
        &["main", "level1", "level2", "level3", "level4", "hot_leaf"],
    );
    let main_sum: u64 = main_paths.iter().map(|p| p.inclusive).sum();
    for p in &main_paths {
        let root_ok = p.names[0] == "_start"
            || p.names[0].starts_with("__libc_start")
            || p.modules[0].contains("libc");
        assert!(
            p.names.len() > 6 && root_ok,
            "main's path must start at _start / __libc_start_main (in libc), got {:?} in {:?}",
            p.names,
            p.modules
        );
    }
    let worker_paths = find_paths(&td, &["worker_main", "w_level1", "w_level2", "hot_leaf"]);
    let worker_sum: u64 = worker_paths.iter().map(|p| p.inclusive).sum();
    for p in &worker_paths {
        // Unwinds end at the caller of the runtime's thread trampoline (StackBounds::root).
        assert!(
            p.names[0] == "start_thread" && p.modules[0].contains("libc"),
            "worker_main's path must start at the thread root, libc's start_thread, got {:?} in {:?}",
            p.names,
            p.modules
        );
    }
    let lt = leaf_total as f64;
    assert!(
        (main_sum + worker_sum) as f64 >= 0.9 * lt,
        "complete paths hold {main_sum}+{worker_sum} of hot_leaf's {leaf_total} ns; heaviest paths:\n{paths}"
    );
    assert!(
        main_sum as f64 >= 0.85 * main_share * lt,
        "main path holds {main_sum} of {leaf_total} ns (expected share {main_share:.2}); paths:\n{paths}"
    );
    assert!(
        worker_sum as f64 >= 0.85 * (1.0 - main_share) * lt,
        "worker path holds {worker_sum} of {leaf_total} ns (expected share {:.2}); paths:\n{paths}",
        1.0 - main_share
    );
}

#[test]
fn tree_views_are_consistent() {
    let (profile, _) = split_profile();
    let td = report_json(profile, &["--view", "top-down"]);
    let total = total_work(&td);
    let root_sum: u64 = roots(&td).iter().map(|r| work(r, "inclusive")).sum();
    assert_eq!(
        root_sum, total,
        "top-down roots' inclusive work must sum to the total"
    );
    for_each_node(&td, &mut |n| {
        let kids: u64 = n["children"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| work(c, "inclusive"))
            .sum();
        assert_eq!(
            work(n, "inclusive"),
            work(n, "exclusive") + kids,
            "inclusive = exclusive + children at {}",
            func(n)
        );
    });
    let p = find_paths(&td, &["worker", "hot_a"]);
    assert!(
        !p.is_empty(),
        "no top-down path worker -> hot_a:\n{}",
        describe_paths(&td, "hot_a", 5)
    );

    let bu = report_json(profile, &["--view", "bottom-up"]);
    assert_eq!(bu["view"], "bottom-up");
    let hot_a = roots(&bu)
        .iter()
        .find(|r| name_matches(func(r), "hot_a"))
        .expect("hot_a is a bottom-up root");
    let callers: Vec<&str> = hot_a["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(func)
        .collect();
    assert!(
        callers.iter().any(|c| name_matches(c, "worker")),
        "hot_a's callers in bottom-up view: {callers:?}"
    );

    // --depth 2 cuts the tree below level 2, except for the hot path (documented: hot-path
    // nodes are shown at any depth), so below level 2 at most one node per level remains.
    let shallow = report_json(profile, &["--view", "top-down", "--depth", "2"]);
    let (full_levels, cut_levels) = (nodes_per_level(&td), nodes_per_level(&shallow));
    assert!(
        cut_levels.iter().skip(2).all(|&n| n <= 1),
        "--depth 2 kept more than the hot path below level 2: nodes per level {cut_levels:?}"
    );
    assert!(
        full_levels.iter().skip(2).any(|&n| n > 1),
        "full top-down view has no branching below level 2, so --depth is untested: {full_levels:?}"
    );

    let pruned = report_json(profile, &["--view", "top-down", "--min-percent", "10"]);
    let ptotal = total_work(&pruned) as f64;
    for_each_node(&pruned, &mut |n| {
        assert!(
            work(n, "inclusive") as f64 >= 0.099 * ptotal,
            "--min-percent 10 kept {} with {} of {ptotal}",
            func(n),
            work(n, "inclusive")
        );
    });

    let text = report_ok(profile, &["--format", "text"]);
    assert!(
        text.stdout.contains("hot_a"),
        "text report lacks hot_a:\n{}",
        text.stdout
    );
}

#[test]
fn flamegraph_svg_names_hot_functions() {
    let (profile, _) = split_profile();
    let svg = scratch_dir("flamegraph").join("out.svg");
    let run = blameprof_cmd(&[
        std::ffi::OsStr::new("flamegraph"),
        profile.as_os_str(),
        std::ffi::OsStr::new("--metric"),
        std::ffi::OsStr::new("work"),
        std::ffi::OsStr::new("-o"),
        svg.as_os_str(),
    ]);
    assert!(
        run.status.success(),
        "flamegraph failed\n{}",
        run.describe()
    );
    let body = std::fs::read_to_string(&svg).expect("SVG written");
    assert!(
        body.contains("<svg"),
        "not an SVG: {}",
        &body[..body.len().min(200)]
    );
    assert!(
        body.contains("hot_a") && body.contains("hot_b"),
        "SVG lacks hot_a/hot_b"
    );
}

/// Number of nodes at each level of a tree view (index 0: roots).
fn nodes_per_level(report: &serde_json::Value) -> Vec<usize> {
    fn visit(n: &serde_json::Value, level: usize, counts: &mut Vec<usize>) {
        if counts.len() <= level {
            counts.resize(level + 1, 0);
        }
        counts[level] += 1;
        for c in n["children"].as_array().into_iter().flatten() {
            visit(c, level + 1, counts);
        }
    }
    let mut counts = Vec::new();
    for r in roots(report) {
        visit(r, 0, &mut counts);
    }
    counts
}

/// A loop whose length is the sampling period does not lock the samples onto one point of
/// it. `daemon_fds exec_child` runs 3 threads that alternate 1 ms of CPU outside a lock
/// (`prepare_entry`) and 1 ms inside (`update_table`): at 500 Hz (a 2 ms perf period) a
/// fixed period put 90-100% of the work in `update_table` on a loaded machine; drawn anew
/// for each sample, the split is the program's own within tolerance.
#[test]
fn a_loop_as_long_as_the_period_is_not_aliased() {
    // The perf task clock's periods (the CPU-time timer's expire on scheduler ticks).
    if !perf_or_skip() {
        return;
    }
    let prog = compile_c("daemon_fds.c", "daemon_fds", &["-O1", "-g"]);
    let out = scratch_dir("aliasing").join("prof");
    let run = profile_ok(&out, 500, &prog, &["exec_child", "150"]);
    assert_sampled_by(&run, "perf-task-clock");
    let t = truth(&run.stdout);
    let flat = report_json(&out, &["--view", "flat"]);
    let (update, _) = flat_values(&flat, "update_table");
    let (prepare, _) = flat_values(&flat, "prepare_entry");
    let share = update as f64 / (update + prepare).max(1) as f64;
    let truth_share = t["update_ns"] as f64 / (t["update_ns"] + t["prepare_ns"]) as f64;
    assert!(
        (share - truth_share).abs() < 0.12,
        "update_table's share of the loop: profiled {share:.3}, measured {truth_share:.3}\n{}",
        run.describe()
    );
}
