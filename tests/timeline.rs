//! The timeline (`report --view timeline`, `blameprof timeline`) against the program's own
//! clock.
//!
//! Proves that (1) a lock contended only in the first half of a run (`phase_lock.c`) shows
//! a high phase from the start to the program's switch and a low one after it, each
//! boundary within one interval of the program's own times, with the high phase's pressure
//! and the run's waiting and acquisitions within tolerance of what the program measured;
//! (2) the SVG names the lock, its high phase and every thread; (3) an uncontended program
//! has no lock on its timeline; (4) a bad interval is refused with the fix; (5) the lock
//! view's findings name the phase (phased contention) at the same times.
//!
//! The profiled workloads run one at a time (`machine()`): on a 2-CPU machine their truth
//! is distorted when another workload competes.

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

fn machine() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

type Truth = std::collections::HashMap<String, u64>;

fn profiled(name: &str, scratch: &str, args: &[&str]) -> (PathBuf, Truth) {
    let prog = compile_c(&format!("{name}.c"), scratch, &["-O2", "-g", "-pthread"]);
    let dir = scratch_dir(scratch).join("prof");
    let _one_at_a_time = machine();
    let run = profile_ok(&dir, 200, &prog, args);
    (dir, truth(&run.stdout))
}

/// phase_lock.c profiled once for the tests that read it: 4 s, the switch at 2 s.
fn phase_profile() -> &'static (PathBuf, Truth) {
    static P: OnceLock<(PathBuf, Truth)> = OnceLock::new();
    P.get_or_init(|| profiled("phase_lock", "timeline-phase", &["4"]))
}

const INTERVAL_NS: u64 = 250_000_000;

fn timeline_json(dir: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["report", "--view", "timeline", "--format", "json"];
    args.extend_from_slice(extra);
    args.push(dir.to_str().unwrap());
    let run = blameprof_cmd(&args);
    assert!(run.status.success(), "report failed: {}", run.describe());
    let v: Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(v["view"], "timeline");
    v
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn sum(v: &Value) -> u64 {
    v.as_array().expect("a series").iter().map(u).sum()
}

fn within(got: f64, want: f64, tolerance: f64) -> bool {
    (got - want).abs() <= tolerance * want
}

#[test]
fn a_lock_contended_in_the_first_half_shows_a_high_phase_then_a_low_one() {
    let (dir, t) = phase_profile();
    let v = timeline_json(dir, &["--interval", "250ms"]);
    assert_eq!(u(&v["interval_ns"]), INTERVAL_NS);
    assert_eq!(v["acquisitions_available"], true);
    let lock = &v["locks"][0];
    assert_eq!(lock["name"], "phase_lock", "the top lock: {}", v["locks"]);
    let origin = u(&v["origin_ns"]);
    let at = |key: &str| t[key] as f64 - origin as f64;
    let (start, switch, end) = (at("start_ns"), at("switch_ns"), at("end_ns"));

    let phases = lock["phases"].as_array().expect("phases");
    let high: Vec<&Value> = phases.iter().filter(|p| p["high"] == true).collect();
    assert_eq!(high.len(), 1, "one high phase: {phases:?}");
    let (high_start, high_end) = (
        high[0]["start_s"].as_f64().unwrap() * 1e9,
        high[0]["end_s"].as_f64().unwrap() * 1e9,
    );
    let one = INTERVAL_NS as f64;
    assert!(
        (high_start - start).abs() <= one,
        "the high phase starts at {high_start} ns, the contention at {start} ns"
    );
    assert!(
        (high_end - switch).abs() <= one,
        "the high phase ends at {high_end} ns, the program switched at {switch} ns"
    );
    let low_after = phases
        .iter()
        .find(|p| p["high"] == false && p["start_s"].as_f64().unwrap() * 1e9 >= high_end - 1.0)
        .unwrap_or_else(|| panic!("a low phase after the high one: {phases:?}"));
    assert!(
        low_after["end_s"].as_f64().unwrap() * 1e9 >= end - one,
        "the low phase lasts to the end ({end} ns): {low_after}"
    );
    assert!(
        low_after["pressure"].as_f64().unwrap() < 0.05,
        "nearly uncontended after the switch: {low_after}"
    );

    // The high phase's pressure: the program's waiting in the first half over the running
    // time of its four workers then.
    let threads = t["threads"] as f64;
    let truth_pressure = t["wait_first_ns"] as f64 / (threads * (switch - start));
    let pressure = high[0]["pressure"].as_f64().unwrap();
    assert!(
        within(pressure, truth_pressure, 0.2),
        "high phase pressure {pressure:.3}, the program's {truth_pressure:.3}"
    );
    assert!(
        lock["peak_pressure"].as_f64().unwrap() >= truth_pressure * 0.8,
        "{lock}"
    );
    assert!(
        lock["overall_pressure"].as_f64().unwrap() < lock["peak_pressure"].as_f64().unwrap(),
        "the whole run hides the phase: {lock}"
    );

    // The run's waiting and acquisitions add up to what the program measured.
    let waited = sum(&lock["wait_ns"]) as f64;
    let truth_wait = (t["wait_first_ns"] + t["wait_second_ns"]) as f64;
    assert!(
        within(waited, truth_wait, 0.15),
        "waiting {waited} ns on the timeline, {truth_wait} ns by the program"
    );
    let acquired = sum(&lock["acquisitions"]) as f64;
    let truth_acquired = (t["acq_first"] + t["acq_second"]) as f64;
    assert!(
        within(acquired, truth_acquired, 0.3),
        "{acquired} acquisitions on the timeline, {truth_acquired} by the program"
    );
    // Every series has one value per interval.
    let n = u(&v["intervals"]) as usize;
    for key in [
        "pressure",
        "wait_ns",
        "blame_ns",
        "acquisitions",
        "try_failed",
    ] {
        assert_eq!(lock[key].as_array().unwrap().len(), n, "{key}");
    }
    for th in v["threads"].as_array().unwrap() {
        assert_eq!(th["work_ns"].as_array().unwrap().len(), n, "{th}");
    }
    // The workers waited for phase_lock in the high phase's intervals.
    let workers: Vec<&Value> = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|th| th["waited_for"][0] == "phase_lock")
        .collect();
    assert_eq!(workers.len(), 4, "{}", v["threads"]);
}

#[test]
fn the_text_view_lists_the_phases_with_their_times() {
    let (dir, _) = phase_profile();
    let run = blameprof_cmd(&[
        "report",
        "--view",
        "timeline",
        "--interval",
        "500ms",
        dir.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "{}", run.describe());
    let text = &run.stdout;
    assert!(text.contains("intervals of 500.00 ms"), "{text}");
    assert!(text.contains("phase_lock  (mutex)"), "{text}");
    assert!(
        text.contains("phases: at or above 10% in 0.0-"),
        "the high phase from the start: {text}"
    );
    assert!(text.contains("below elsewhere"), "{text}");
}

#[test]
fn the_picture_shows_the_lock_its_phase_and_every_thread() {
    let (dir, _) = phase_profile();
    let svg_path = scratch_dir("timeline-svg").join("timeline.svg");
    let run = blameprof_cmd(&[
        "timeline",
        dir.to_str().unwrap(),
        "--interval",
        "250ms",
        "-o",
        svg_path.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "{}", run.describe());
    let svg = std::fs::read_to_string(&svg_path).expect("the SVG");
    assert!(svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains(">phase_lock</text>"), "the lock's row label");
    assert!(svg.contains("0.0-2."), "the high phase's label");
    let v = timeline_json(dir, &["--interval", "250ms"]);
    for th in v["threads"].as_array().unwrap() {
        let label = format!("{} ({})</text>", th["name"].as_str().unwrap(), th["tid"]);
        assert!(svg.contains(&label), "no strip for {label}");
    }
}

#[test]
fn an_uncontended_program_has_no_lock_on_its_timeline() {
    let (dir, _) = profiled("no_problem", "timeline-quiet", &["1"]);
    let v = timeline_json(&dir, &[]);
    assert_eq!(v["locks"], serde_json::json!([]), "{}", v["locks"]);
    let work = sum(&v["work_ns"]);
    assert!(work > 0, "its work is on the timeline");
}

#[test]
fn a_bad_interval_is_refused_with_the_fix() {
    let (dir, _) = phase_profile();
    for (interval, says) in [("10ms", "100ms or more"), ("3 parsecs", "unknown unit")] {
        let run = blameprof_cmd(&[
            "report",
            "--view",
            "timeline",
            "--interval",
            interval,
            dir.to_str().unwrap(),
        ]);
        assert_clean_error(&run, "a bad --interval");
        assert!(run.stderr.contains(says), "{}", run.stderr);
    }
}

#[test]
fn the_lock_view_finds_the_phase_the_timeline_shows() {
    let (dir, t) = phase_profile();
    let run = blameprof_cmd(&[
        "report",
        "--view",
        "locks",
        "--format",
        "json",
        "--interval",
        "250ms",
        dir.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "{}", run.describe());
    let v: Value = serde_json::from_str(&run.stdout).expect("JSON");
    let phased: Vec<&Value> = v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["kind"] == "phased_contention")
        .collect();
    assert_eq!(phased.len(), 1, "{}", v["findings"]);
    assert_eq!(phased[0]["subject"], "phase_lock");
    // The phase it names ends within one interval of the program's switch.
    let timeline = timeline_json(dir, &["--interval", "250ms"]);
    let switch = t["switch_ns"] as f64 - u(&timeline["origin_ns"]) as f64;
    let end = u(&phased[0]["evidence"]["first_high_end_ns"]) as f64;
    assert!(
        (end - switch).abs() <= INTERVAL_NS as f64,
        "the finding's high phase ends at {end} ns, the program switched at {switch} ns"
    );
}
