//! `blameprof report --source FUNCTION` against the lines a workload times itself
//! (tests/programs/source_lines.c).
//!
//! Proves that (1) the two loops of `crunch`, each on one line, carry the work the program
//! measured for them (CLOCK_THREAD_CPUTIME_ID) within 15%, as self cost, and are marked hot;
//! (2) the line where `crunch` waits for the mutex carries the idleness the program measured
//! (CLOCK_MONOTONIC around the call) within 15%, and the blame for it is at the line where
//! the holder, `hold_lock`, unlocks (within 15% of the part of the waits the holds
//! overlapped, up to the unlock call), not in `crunch`; (3) the function's totals are exactly
//! the flat view's, and its lines' totals add up to them; (4) the text output shows those
//! lines with their source text and values; (5) an unknown or ambiguous name, options of the
//! other views and a source file that is gone are one-line errors naming the fix (JSON still
//! gives the line costs without the file).
//!
//! The profiled runs happen one at a time (`machine()`): the program's truth is measured in
//! the same run, but on a small machine it is distorted when another workload competes.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

use blameprof::viewer::units::format_value;
use common::*;
use serde_json::Value;

/// The C flags of the workload: optimised, with line information.
const FLAGS: &[&str] = &["-O2", "-g", "-pthread"];

fn machine() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

/// The truth a workload printed.
type Truth = std::collections::HashMap<String, u64>;

/// The profile of `source_lines` (recorded once, at 1000 Hz) and the truth it printed.
fn profiled() -> &'static (PathBuf, Truth) {
    static PROFILE: OnceLock<(PathBuf, Truth)> = OnceLock::new();
    PROFILE.get_or_init(|| {
        let prog = compile_c("source_lines.c", "source-lines", FLAGS);
        let dir = scratch_dir("source-lines").join("prof");
        let _one_at_a_time = machine();
        let run = profile_ok(&dir, 1000, &prog, &[]);
        (dir, truth(&run.stdout))
    })
}

/// `blameprof report DIR --source FUNCTION EXTRA...`, which must succeed: its stdout.
fn source(dir: &Path, function: &str, extra: &[&str]) -> String {
    let mut args = vec!["report", dir.to_str().unwrap(), "--source", function];
    args.extend_from_slice(extra);
    let run = blameprof_cmd(&args);
    assert!(run.status.success(), "{args:?} failed\n{}", run.describe());
    run.stdout
}

/// `report --source FUNCTION --format json`, parsed and schema-checked.
fn source_json(dir: &Path, function: &str) -> Value {
    let out = source(dir, function, &["--format", "json"]);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"));
    assert_eq!(v["schema"], "blameprof-source", "{v}");
    assert_eq!(v["version"], 1, "{v}");
    assert_eq!(v["function"], function, "{v}");
    v
}

/// The entry of line `line` in the function's own (first) file of a `--source` document.
fn line(doc: &Value, line: u64) -> &Value {
    let file = &doc["files"][0];
    assert_eq!(
        file["own"], true,
        "the first file is the function's own: {file}"
    );
    file["lines"]
        .as_array()
        .expect("lines")
        .iter()
        .find(|l| l["line"] == line)
        .unwrap_or_else(|| panic!("line {line} not listed: {file}"))
}

/// `entry[part][metric]`, `part` being `self` or `total`.
fn cost(entry: &Value, part: &str, metric: &str) -> u64 {
    entry[part][metric]
        .as_u64()
        .unwrap_or_else(|| panic!("no {part}.{metric} in {entry}"))
}

fn within(got: u64, want: u64, tolerance: f64) -> bool {
    (got as f64 - want as f64).abs() <= tolerance * want as f64
}

/// The row of line `n` in the text output of `--source`: the one whose line-number column
/// (it ends where the heading's "line" does) holds `n`.
fn text_row(text: &str, n: u64) -> &str {
    let heading = text
        .lines()
        .find(|l| l.ends_with(" line  source"))
        .unwrap_or_else(|| panic!("no heading in:\n{text}"));
    let end = heading.len() - "  source".len();
    let number = n.to_string();
    text.lines()
        .find(|row| row.get(end - 6..end).is_some_and(|c| c.trim() == number))
        .unwrap_or_else(|| panic!("no row for line {n} in:\n{text}"))
}

#[test]
fn lines_carry_the_work_and_idleness_the_program_measured() {
    let (dir, t) = profiled();
    let doc = source_json(dir, "crunch");
    let file = doc["files"][0]["file"].as_str().unwrap_or_default();
    assert!(
        file.ends_with("tests/programs/source_lines.c"),
        "crunch's file: {file}"
    );
    for (at, measured) in [("loop_a_line", "loop_a_ns"), ("loop_b_line", "loop_b_ns")] {
        let entry = line(&doc, t[at]);
        let (own, total) = (cost(entry, "self", "work"), cost(entry, "total", "work"));
        assert!(
            within(total, t[measured], 0.15),
            "{at} {}: work {total} ns, the program measured {} ns\n{entry}",
            t[at],
            t[measured]
        );
        assert_eq!(own, total, "a loop's work is its own code: {entry}");
        assert_eq!(entry["hot"], true, "{entry}");
    }
    let lock = line(&doc, t["lock_line"]);
    let idleness = cost(lock, "total", "idleness");
    assert!(
        within(idleness, t["wait_ns"], 0.15),
        "lock line {}: idleness {idleness} ns, the program waited {} ns\n{lock}",
        t["lock_line"],
        t["wait_ns"]
    );
    assert_eq!(lock["hot"], true, "{lock}");
    let function_idleness = cost(&doc["totals"], "total", "idleness");
    assert!(
        idleness as f64 >= 0.99 * function_idleness as f64,
        "crunch waits only at its lock line: {idleness} of {function_idleness} ns"
    );
    let blame = cost(&doc["totals"], "total", "blame");
    assert!(
        (blame as f64) < 0.01 * t["wait_ns"] as f64,
        "crunch is not to blame for its own waiting: blame {blame} ns"
    );
}

#[test]
fn the_blame_is_at_the_holders_unlock_line() {
    let (dir, t) = profiled();
    let doc = source_json(dir, "hold_lock");
    let unlock = line(&doc, t["unlock_line"]);
    let blame = cost(unlock, "total", "blame");
    assert!(
        within(blame, t["blamed_ns"], 0.15),
        "unlock line {}: blame {blame} ns, the waits overlapped the holds {} ns\n{unlock}",
        t["unlock_line"],
        t["blamed_ns"]
    );
    assert_eq!(unlock["hot"], true, "{unlock}");
}

#[test]
fn totals_are_the_flat_views_and_the_lines_add_up_to_them() {
    let (dir, _) = profiled();
    let flat = report_json(dir, &["--view", "flat"]);
    for function in ["crunch", "hold_lock", "main"] {
        let doc = source_json(dir, function);
        // The function's own lines, in any file, and the cost at no known line.
        let own: Vec<&Value> = doc["files"]
            .as_array()
            .expect("files")
            .iter()
            .flat_map(|f| f["lines"].as_array().expect("lines"))
            .filter(|l| l["own"] == true)
            .collect();
        for metric in ["work", "idleness", "blame"] {
            let (inclusive, exclusive) = flat_metric(&flat, function, metric);
            let totals = &doc["totals"];
            assert_eq!(
                (cost(totals, "total", metric), cost(totals, "self", metric)),
                (inclusive, exclusive),
                "{function} {metric}: --source totals vs the flat view"
            );
            let lines: u64 = own.iter().map(|l| cost(l, "total", metric)).sum();
            let no_line = cost(&doc["no_line"], "total", metric);
            assert_eq!(
                lines + no_line,
                inclusive,
                "{function} {metric}: its lines add up to its total"
            );
        }
    }
}

#[test]
fn the_text_shows_the_hot_lines_with_their_source_and_values() {
    let (dir, t) = profiled();
    let doc = source_json(dir, "crunch");
    let text = source(dir, "crunch", &[]);
    assert!(text.contains("function:   crunch"), "{text}");
    let source_file = programs_dir().join("source_lines.c");
    let program = std::fs::read_to_string(&source_file).expect("read the workload's source");
    let program: Vec<&str> = program.lines().collect();
    for (at, metric) in [
        ("loop_a_line", "work"),
        ("loop_b_line", "work"),
        ("lock_line", "idleness"),
    ] {
        let n = t[at];
        let row = text_row(&text, n);
        let value = format_value(cost(line(&doc, n), "total", metric), "ns");
        assert!(row.starts_with('*'), "{at}: a hot line is marked\n{row}");
        assert!(row.contains(&value), "{at}: shows {metric} {value}\n{row}");
        let code = program[n as usize - 1].trim();
        assert!(
            row.ends_with(code),
            "{at}: shows the source\n{row}\nwant: {code}"
        );
    }
    // The lock line is indented by a tab: expanded to 8 columns after the line number.
    let lock = t["lock_line"];
    let code = program[lock as usize - 1];
    assert!(
        code.starts_with('\t'),
        "the workload's lock line starts with a tab"
    );
    let expanded = format!("{lock}  {:8}{}", "", &code[1..]);
    assert!(
        text_row(&text, lock).ends_with(&expanded),
        "tab expanded:\n{}\nwant the end: {expanded}",
        text_row(&text, lock)
    );
    assert!(!text.contains('\t'), "no tabs in the output:\n{text}");
}

#[test]
fn bad_names_and_options_are_one_line_errors_naming_the_fix() {
    let (dir, _) = profiled();
    let dir = dir.to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (&["--source", "no_such_function"], "--view flat"),
        (&["--source", "hold"], "hold_lock, holder_thread"),
        (&["--source", "crunch", "--format", "html"], "--format text"),
        (&["--source", "crunch", "--depth", "3"], "drop it"),
        (
            &["--source", "crunch", "--metric", "nonsense"],
            "unknown metric",
        ),
    ];
    for (extra, fix) in cases {
        let mut args = vec!["report", dir];
        args.extend_from_slice(extra);
        let run = blameprof_cmd(&args);
        assert_clean_error(&run, &format!("{extra:?}"));
        assert!(
            run.stderr.contains(fix),
            "{extra:?}: names '{fix}'\n{}",
            run.describe()
        );
    }
}

#[test]
fn a_source_file_that_is_gone_is_a_clean_error_and_json_keeps_the_costs() {
    let scratch = scratch_dir("source-gone");
    let copy = scratch.join("source_lines.c");
    std::fs::copy(programs_dir().join("source_lines.c"), &copy).expect("copy the workload");
    let prog = try_compile_c(&copy, "source-lines-gone", FLAGS).unwrap_or_else(|e| panic!("{e}"));
    let dir = scratch.join("prof");
    {
        let _one_at_a_time = machine();
        profile_ok(&dir, 1000, &prog, &["20"]);
    }
    std::fs::remove_file(&copy).expect("remove the copy");
    let dir_arg = dir.to_str().unwrap();
    let run = blameprof_cmd(&["report", dir_arg, "--source", "crunch"]);
    assert_clean_error(&run, "source file removed");
    let recorded = copy.display().to_string();
    assert!(
        run.stderr.contains(&recorded) && run.stderr.contains("needs the source"),
        "names the recorded path and the fix\n{}",
        run.describe()
    );
    let doc = source_json(&dir, "crunch");
    let file = &doc["files"][0];
    assert_eq!(file["file"], recorded.as_str(), "{file}");
    assert_eq!(file["read_from"], Value::Null, "{file}");
    let lines = file["lines"].as_array().expect("lines");
    assert!(
        !lines.is_empty() && lines.iter().all(|l| l["text"].is_null()),
        "the lines with cost, without text: {file}"
    );
}
