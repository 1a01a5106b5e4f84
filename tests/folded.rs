//! `report --format folded`: one `frame;frame;...;leaf value` line per calling context,
//! as flamegraph.pl, inferno and speedscope read them, checked against a workload that
//! measures its own split of CPU time and against the JSON report of the same profile.

mod common;

use common::*;

#[test]
fn folded_stacks_add_up_to_the_report_and_the_programs_split() {
    let dir = scratch_dir("folded").join("prof");
    let prog = compile_c("split.c", "folded_split", &[]);
    let run = profile_ok(&dir, 1000, &prog, &["2", "0.6"]);
    let t = truth(&run.stdout);
    let folded = report_ok(&dir, &["--format", "folded"]);
    let mut total = 0u64;
    let (mut a, mut b) = (0u64, 0u64);
    for line in folded.stdout.lines() {
        let (stack, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("not 'stack value': {line:?}"));
        let value: u64 = value
            .parse()
            .unwrap_or_else(|_| panic!("not a value: {line:?}"));
        let frames: Vec<&str> = stack.split(';').collect();
        assert!(frames.iter().all(|f| !f.is_empty()), "{line:?}");
        total += value;
        match frames.last() {
            Some(&"hot_a") => a += value,
            Some(&"hot_b") => b += value,
            _ => {}
        }
    }
    // The lines hold every sample once: their sum is the report's total work, and the two
    // leaves' sums are the flat view's exclusive work of each.
    let flat = report_json(&dir, &["--view", "flat"]);
    assert_eq!(total, total_work(&flat), "folded total vs the report's");
    assert_eq!(a, flat_values(&flat, "hot_a").1);
    assert_eq!(b, flat_values(&flat, "hot_b").1);
    // And the split is the program's own, within 10%.
    let (want_a, want_b) = (t["hot_a_ns"] as f64, t["hot_b_ns"] as f64);
    let share = a as f64 / (a + b) as f64;
    let want = want_a / (want_a + want_b);
    assert!(
        (share - want).abs() < 0.1 * want,
        "hot_a's share {share:.3}, the program measured {want:.3}"
    );
    // Another metric folds the same way: the lines of --metric idleness add up to its total.
    let idle = report_ok(&dir, &["--format", "folded", "--metric", "idleness"]);
    let sum: u64 = idle
        .stdout
        .lines()
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum();
    assert_eq!(sum, total_of(&flat, "idleness"));
}
