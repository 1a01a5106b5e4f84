//! Every number that states the same thing agrees with the others, on one profile: the run
//! summary, the lock table (JSON and text, and one lock in full), the call paths' totals
//! and the timeline.
//!
//! Proves that, for `lock_table.c` (a contended mutex, an array of mutexes, a trylocked
//! heap mutex) and `condvar_pc.c` (consumers woken from a condition variable who retake
//! its mutex): (1) the summary's count of contended lock acquisitions is the lock table's
//! (mutexes, rwlocks and spin locks: woken waiters' retakes of their mutex included); (2)
//! the summary's top locks state the lock table's blame, waiting and pressure; (3) one lock
//! in full (`--lock`) states the table's acquisitions and contended acquisitions; (4) the
//! lock table's mutex blame is the call paths' `blame.mutex`, its waiting their
//! `idleness.mutex` within 1% (the runtime's exact count against the samples' sum); (5)
//! the timeline's waiting of a lock adds up to the lock table's, and no interval holds
//! more waiting than the process's threads could spend in it; (6) the summary's lock
//! waiting is the lock table's waiting for locks, its event waiting the table's waits for
//! events, within 1% and the error of thinned short waits' estimates.
//!
//! The figures are compared with each other, not with the programs' truth (the lock view's,
//! waits' and timeline's tests do that): no load can make them disagree.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

/// `program` (a C test program) profiled at 200 Hz: the profile and the run summary.
fn profiled(program: &str, args: &[&str]) -> (PathBuf, String) {
    let prog = compile_c(
        &format!("{program}.c"),
        &format!("agreement-{program}"),
        &["-O2", "-g", "-pthread"],
    );
    let dir = scratch_dir(&format!("agreement-{program}")).join("prof");
    let run = profile_ok(&dir, 200, &prog, args);
    (dir, run.stderr)
}

fn json_of(dir: &Path, args: &[&str]) -> Value {
    let mut all = vec!["report"];
    all.extend_from_slice(args);
    all.extend(["--format", "json", dir.to_str().expect("a UTF-8 path")]);
    let run = blameprof_cmd(&all);
    assert!(run.status.success(), "report failed: {}", run.describe());
    serde_json::from_str(&run.stdout).expect("JSON")
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// A duration as the text views print it (`119.53 ms`, `2.00 s`, `940 ns`), in ns.
fn parse_ns(text: &str) -> f64 {
    let (value, unit) = text
        .trim()
        .split_once(' ')
        .unwrap_or_else(|| panic!("not a duration: {text:?}"));
    let value: f64 = value.parse().unwrap_or_else(|_| panic!("{text:?}"));
    let scale = match unit {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        other => panic!("unit {other:?} in {text:?}"),
    };
    value * scale
}

/// Whether `text` (a printed duration, 2 decimals) states `ns`.
fn states(text: &str, ns: u64) -> bool {
    let got = parse_ns(text);
    (got - ns as f64).abs() <= 0.005 * got.max(1.0) + 10.0
}

/// The summary's line after `marker`, which must be there.
fn line_after<'a>(summary: &'a str, marker: &str) -> &'a str {
    summary
        .lines()
        .find_map(|l| l.split_once(marker).map(|(_, rest)| rest))
        .unwrap_or_else(|| panic!("no {marker:?} in the summary:\n{summary}"))
}

/// The checks every profile gets (see the module doc).
fn assert_agreement(dir: &Path, summary: &str) {
    let view = json_of(dir, &["--view", "locks", "--min-percent", "0"]);
    let rows = view["locks"].as_array().expect("lock rows");
    let of_kinds = |kinds: &[&str], field: &str| -> u64 {
        rows.iter()
            .filter(|r| kinds.contains(&r["kind"].as_str().unwrap_or("")))
            .map(|r| n(&r["counts"][field]))
            .sum()
    };

    // (1) Contended acquisitions.
    let stated: u64 = line_after(summary, "contended lock acquisitions: ")
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|d| d.parse().ok())
        .expect("a count");
    let table = of_kinds(&["mutex", "rwlock", "spin"], "contended");
    assert_eq!(
        stated, table,
        "the summary's contended lock acquisitions against the lock table's\n{summary}"
    );

    // (2) The top locks: each one's blame, waiting and pressure as the table states them.
    let top = line_after(summary, "top locks by blame: ");
    for entry in top.split("); ") {
        let (name, numbers) = entry
            .rsplit_once(" (blame ")
            .unwrap_or_else(|| panic!("{entry}"));
        let row = rows
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} is not in the lock table"));
        let numbers = numbers.trim_end_matches(')');
        let mut parts = numbers.split(", ");
        let blame = parts.next().expect("blame");
        let waiting = parts
            .next()
            .and_then(|w| w.strip_prefix("waiting "))
            .expect("waiting");
        assert!(
            states(blame, n(&row["counts"]["blame_ns"])),
            "{name}: blame {blame} in the summary, {} in the table",
            row["counts"]["blame_ns"]
        );
        assert!(
            states(waiting, n(&row["counts"]["wait_ns"])),
            "{name}: waiting {waiting} in the summary, {} in the table",
            row["counts"]["wait_ns"]
        );
        if let Some(p) = parts.next().and_then(|p| p.strip_prefix("pressure ")) {
            let p: f64 = p.trim_end_matches('%').parse().expect("a percentage");
            let table = row["counts"]["pressure"].as_f64().expect("a pressure") * 100.0;
            assert!(
                (p - table).abs() <= 0.051,
                "{name}: pressure {p}% in the summary, {table}% in the table"
            );
        }
    }

    // (3) The heaviest lock in full: its counts line states the table's counts.
    let heaviest = &rows[0];
    let name = heaviest["name"].as_str().expect("a name");
    let args = ["report", "--view", "locks", "--lock", name];
    let mut all: Vec<&str> = args.to_vec();
    all.push(dir.to_str().expect("a UTF-8 path"));
    let run = blameprof_cmd(&all);
    assert!(run.status.success(), "{}", run.describe());
    let line = run
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with(name))
        .unwrap_or_else(|| panic!("no line of {name}:\n{}", run.stdout));
    let fields: Vec<&str> = line.trim_start()[name.len()..].split_whitespace().collect();
    // "-": not counted (a condition variable's acquisitions), 0 in JSON.
    let count = |i: usize| match fields[i] {
        "-" => Some(0),
        f => f.replace(',', "").parse::<u64>().ok(),
    };
    assert_eq!(
        (count(1), count(2)),
        (
            Some(n(&heaviest["counts"]["acquisitions"])),
            Some(n(&heaviest["counts"]["contended"]))
        ),
        "{name} in full states other counts than the table:\n{line}\n{heaviest:#}"
    );

    // (4) The call paths' totals.
    let flat = json_of(dir, &["--view", "flat"]);
    let total = |metric: &str| n(&flat["totals"][metric]);
    let (blame, waiting) = (total("blame.mutex"), total("idleness.mutex"));
    assert_eq!(of_kinds(&["mutex"], "blame_ns"), blame, "mutex blame");
    let rows_wait = of_kinds(&["mutex"], "wait_ns");
    assert!(
        rows_wait.abs_diff(waiting) * 100 <= waiting.max(1),
        "mutex waiting: the lock table's {rows_wait} ns, the call paths' {waiting} ns"
    );

    // (5) The timeline of each of its locks.
    let timeline = json_of(dir, &["--view", "timeline"]);
    let interval = n(&timeline["interval_ns"]);
    let threads = flat["threads"]
        .as_array()
        .map_or(1, |t| t.len() as u64)
        .max(1);
    for lock in timeline["locks"].as_array().expect("the timeline's locks") {
        let series: Vec<u64> = lock["wait_ns"]
            .as_array()
            .expect("a series")
            .iter()
            .map(n)
            .collect();
        let row = rows
            .iter()
            .find(|r| r["name"] == lock["name"])
            .unwrap_or_else(|| panic!("{} is not in the lock table", lock["name"]));
        let (on_timeline, table) = (series.iter().sum::<u64>(), n(&row["counts"]["wait_ns"]));
        assert!(
            on_timeline.abs_diff(table) * 100 <= table.max(1),
            "{}: {on_timeline} ns of waiting on the timeline, {table} ns in the table",
            lock["name"]
        );
        for (i, w) in series.iter().enumerate() {
            assert!(
                *w <= interval * threads,
                "{}: {w} ns of waiting booked in interval {i} of {interval} ns, {threads} threads",
                lock["name"]
            );
        }
    }

    // (6) Lock waiting and event waiting. The call paths' waiting is the samples' sum, the
    // table's the runtime's exact count: waits shorter than the thinning window are kept
    // one in several, each kept one standing for the others (an unbiased estimate, a few
    // windows off when only a handful were thinned, such as a main thread's joins).
    let window = summary
        .split("thinning_window_peak_ns ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse::<f64>().ok())
        .unwrap_or(0.0);
    let slack = 4.0 * window + 20_000.0;
    let by_class = |class: &str| -> u64 {
        rows.iter()
            .filter(|r| r["waits_for"] == class)
            .map(|r| n(&r["counts"]["wait_ns"]))
            .sum()
    };
    let lock_line = line_after(summary, "waiting for locks: idleness ");
    let lock_waiting = parse_ns(lock_line.split(" = ").next().expect("a duration"));
    let table_locks = by_class("lock") as f64;
    assert!(
        (lock_waiting - table_locks).abs() <= 0.01 * table_locks + slack,
        "the summary's lock waiting {lock_waiting} ns, the table's {table_locks} ns\n{summary}"
    );
    let table_events = by_class("event") as f64;
    let event_waiting = summary
        .lines()
        .find_map(|l| l.split_once("waiting for events, not locks: "))
        .map_or(0.0, |(_, rest)| {
            parse_ns(rest.split(" = ").next().expect("a duration"))
        });
    assert!(
        (event_waiting - table_events).abs() <= 0.01 * table_events + slack,
        "the summary's event waiting {event_waiting} ns, the table's {table_events} ns\n{summary}"
    );
}

#[test]
fn a_mutex_table_is_stated_alike_by_every_view() {
    let (dir, summary) = profiled("lock_table", &["100000"]);
    assert_agreement(&dir, &summary);
}

#[test]
fn condition_waits_and_retakes_are_stated_alike_by_every_view() {
    let (dir, summary) = profiled("condvar_pc", &["1", "2", "3"]);
    assert_agreement(&dir, &summary);
}
