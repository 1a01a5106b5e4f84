//! What the tests of processes and deaths compare between a program run with and without
//! the profiler: its exit status and its output but for numbers (pids and times differ
//! between runs), and the figures it printed about itself.

use super::{run_with_timeout, truth, Run, RUN_TIMEOUT};
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

/// Every `truth k=v ...` line the program (and the processes it started) printed, merged.
pub fn truths(stdout: &str) -> HashMap<String, u64> {
    let mut all = HashMap::new();
    for line in stdout.lines().filter(|l| l.starts_with("truth ")) {
        all.extend(truth(line));
    }
    all
}

/// `text` with every run of digits replaced by `N`: runs differ in pids and times only.
pub fn normalized(text: &str) -> String {
    let mut out = String::new();
    let mut in_number = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !in_number {
                out.push('N');
            }
            in_number = true;
        } else {
            out.push(c);
            in_number = false;
        }
    }
    out
}

/// The program run without the profiler.
pub fn unprofiled(prog: &Path, args: &[&str]) -> Run {
    run_with_timeout(Command::new(prog).args(args), RUN_TIMEOUT)
}

/// Asserts the profiled run behaved as the unprofiled one: the same exit status (blameprof's
/// is the program's), and the same stdout and stderr but for numbers (and blameprof's lines).
pub fn assert_unchanged(what: &str, plain: &Run, profiled: &Run) {
    assert_eq!(
        profiled.code(),
        plain.code(),
        "{what}: exit status differs\n--- unprofiled ---\n{}\n--- profiled ---\n{}",
        plain.describe(),
        profiled.describe()
    );
    assert_eq!(
        normalized(&profiled.stdout),
        normalized(&plain.stdout),
        "{what}: stdout differs\n--- unprofiled ---\n{}\n--- profiled ---\n{}",
        plain.describe(),
        profiled.describe()
    );
    assert_eq!(
        normalized(&profiled.stderr_without_blameprof()),
        normalized(&plain.stderr),
        "{what}: stderr differs (blameprof: lines ignored)\n{}",
        profiled.describe()
    );
}

/// Asserts `function`'s profiled `got` ns is within `tol` of the `want` ns it measured.
pub fn assert_close(function: &str, got: u64, want: u64, tol: f64) {
    let err = (got as f64 - want as f64).abs() / want as f64;
    assert!(
        err < tol,
        "{function}: profiled {got} ns, measured {want} ns ({:.1}% off, more than {:.0}%)",
        err * 100.0,
        tol * 100.0
    );
}
