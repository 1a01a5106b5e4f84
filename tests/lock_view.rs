//! The lock view (`report --view locks`) against the counts the workloads keep about
//! themselves.
//!
//! Proves that (1) a global mutex is named by its symbol, an array of mutexes forms a group
//! of its symbol, and a heap lock is named by the function that initialised it; (2) the
//! acquisitions match the program's exact counts within 10% (they are sampled), failed
//! trylocks exactly, and the waiting its own measure within 15%; (3) locks destroyed and
//! made anew at one init site fold into one group whose counts still add up, with the
//! runtime's table bounded by the live locks; (4) waiters split by holder site match the
//! program's overlap of waits and holds; (5) critical section pressure of a ping-pong of
//! two threads is the program's own measure (about 50%), and 0 for one thread; (6) a
//! holder's computing inside holds others waited for is `held.contended`, in its function,
//! per kind and per lock, within 20% of the program's own measure, and its computing
//! outside is not; (7) waiters are paired with the holders whose holds their waits
//! overlapped (matched in time), within 15% of the program's own overlap, and not with
//! holders of another phase; (8) the acquisitions are the program's exact count, and
//! `held.contended` its own measure within 15%, for
//! short and long holds and 2 to 8 threads; (9) the waiters behind a program's own lock
//! helper, C's `lock_measured` or a C++ RAII guard class, are split by the functions that
//! call it, within 15% of the program's own measure.
//!
//! The profiled workloads run one at a time (`machine()`): their truth is measured in the
//! same run, but on a 2-CPU machine it is distorted when another workload competes.

mod common;

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use common::*;
use serde_json::Value;

fn machine() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

/// The truth a workload printed.
type Truth = std::collections::HashMap<String, u64>;

/// `blameprof run` of a test program (one at a time): the profile, the truth it printed,
/// and the run's summary.
fn profiled_with_summary(name: &str, scratch: &str, args: &[&str]) -> (PathBuf, Truth, String) {
    // A binary of its own per test: tests run in parallel, and a report symbolizes the
    // program's file after the run (another test's build must not replace it).
    let prog = compile_c(&format!("{name}.c"), scratch, &["-O2", "-g", "-pthread"]);
    let dir = scratch_dir(scratch).join("prof");
    let _one_at_a_time = machine();
    let run = profile_ok(&dir, 200, &prog, args);
    (dir, truth(&run.stdout), run.stderr)
}

/// [`profiled_with_summary`] without the summary.
fn profiled(name: &str, scratch: &str, args: &[&str]) -> (PathBuf, Truth) {
    let (dir, truth, _) = profiled_with_summary(name, scratch, args);
    (dir, truth)
}

/// `report --view locks EXTRA DIR` (text), which must succeed: its output.
fn locks_text(dir: &std::path::Path, extra: &[&str]) -> String {
    let mut args = vec!["report", "--view", "locks"];
    args.extend_from_slice(extra);
    args.push(dir.to_str().unwrap());
    let run = blameprof_cmd(&args);
    assert!(run.status.success(), "report failed: {}", run.describe());
    run.stdout
}

/// `report --view locks --format json`.
fn locks_json(dir: &std::path::Path, extra: &[&str]) -> Value {
    let mut args = vec!["report", "--view", "locks", "--format", "json"];
    args.extend_from_slice(extra);
    let path = dir.to_str().unwrap();
    args.push(path);
    let run = blameprof_cmd(&args);
    assert!(run.status.success(), "report failed: {}", run.describe());
    let v: Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(v["schema"], "blameprof-locks");
    assert_eq!(v["available"], true, "{v}");
    v
}

fn lock<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["locks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == name)
        .unwrap_or_else(|| panic!("no lock {name} in {}", names(v)))
}

fn group<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == name)
        .unwrap_or_else(|| panic!("no group {name} in {}", names(v)))
}

fn names(v: &Value) -> String {
    let all: Vec<String> = v["locks"]
        .as_array()
        .unwrap()
        .iter()
        .chain(v["groups"].as_array().unwrap())
        .map(|l| l["name"].as_str().unwrap_or("?").to_owned())
        .collect();
    all.join(", ")
}

fn count(l: &Value, field: &str) -> u64 {
    l["counts"][field]
        .as_u64()
        .unwrap_or_else(|| panic!("no {field} in {l}"))
}

/// The time `waiter` waited behind `holder` on `lock` (its pairs, in JSON).
fn behind(lock: &Value, waiter: &str, holder: &str) -> u64 {
    lock["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["waiter"] == waiter && p["holder"] == holder)
        .map(|p| p["ns"].as_u64().unwrap())
        .sum()
}

fn within(got: u64, want: u64, tolerance: f64) -> bool {
    (got as f64 - want as f64).abs() <= tolerance * want as f64
}

#[test]
fn locks_are_named_grouped_and_counted_as_the_program_counts_them() {
    let (dir, t, summary) = profiled_with_summary("lock_table", "lock-view-table", &[]);
    let v = locks_json(&dir, &[]);
    assert!(
        summary.contains("top locks by blame: table_lock (blame"),
        "the run summary names the top lock:\n{summary}"
    );

    let table = lock(&v, "table_lock");
    assert_eq!(table["naming"], "symbol");
    assert_eq!(table["kind"], "mutex");
    let acq = count(table, "acquisitions");
    assert!(
        within(acq, t["table_acq"], 0.10),
        "table_lock acquisitions {acq}, program {}",
        t["table_acq"]
    );
    // The program times every lock call, its uncontended ones too (a few ns each).
    let wait = count(table, "wait_ns");
    assert!(
        within(wait, t["table_wait_ns"], 0.15),
        "table_lock wait {wait} ns, program {} ns",
        t["table_wait_ns"]
    );
    assert!(count(table, "contended") > 0 && count(table, "blame_ns") > 0);
    assert!(count(table, "peak_waiters") >= 2, "{table}");

    let buckets = group(&v, "buckets[]");
    assert_eq!(
        buckets["members"].as_array().unwrap().len(),
        64,
        "{buckets}"
    );
    let acq = count(buckets, "acquisitions");
    assert!(
        within(acq, t["bucket_acq"], 0.10),
        "bucket acquisitions {acq}, program {}",
        t["bucket_acq"]
    );
    assert!(
        buckets["members"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m.as_str().unwrap().starts_with("buckets+0x")),
        "members named by symbol and offset: {buckets}"
    );

    let cache = lock(&v, "cache_new -> pthread_mutex_init");
    assert_eq!(cache["naming"], "init site");
    assert_eq!(
        count(cache, "try_failed"),
        t["cache_try_fail"],
        "failed trylocks are counted exactly: {cache}"
    );
    let acq = count(cache, "acquisitions");
    assert!(
        within(acq, t["cache_acq"], 0.10),
        "cache acquisitions {acq}, program {}",
        t["cache_acq"]
    );
    // The interval the report states for its estimate holds the program's count.
    let interval = &cache["counts"]["acquisitions_interval"];
    let (low, high) = (interval[0].as_u64().unwrap(), interval[1].as_u64().unwrap());
    assert!(
        low <= t["cache_acq"] && t["cache_acq"] <= high,
        "cache acquisitions stated in [{low}, {high}] from {} samples, program {}",
        count(cache, "acquisition_samples"),
        t["cache_acq"]
    );
    let tries = count(cache, "try_attempts");
    assert!(
        within(tries, t["cache_try"], 0.10),
        "tries {tries}, program {}",
        t["cache_try"]
    );
    // The program times the lock call after each failed try, also when it then found the
    // cache free (the runtime's fast path: no wait): 2 us each at most (a lock call and a
    // clock read, under load). Those are all its waiting on an idle machine, where the
    // cache is seldom contended; a loaded one preempts holders, and the waits are long.
    let wait = count(cache, "wait_ns");
    let (want, fails) = (t["cache_wait_ns"], t["cache_try_fail"]);
    assert!(
        (wait as f64 - want as f64).abs() <= 0.15 * want as f64 + fails as f64 * 2000.0,
        "cache wait {wait} ns, program {want} ns after {fails} failed tries"
    );
    assert!(
        count(cache, "contended") <= fails,
        "more contended acquisitions than failed tries: {cache}"
    );

    // The text view leads with the lock that made others wait most, and names it.
    let text = locks_text(&dir, &[]);
    let first = text
        .lines()
        .nth(2)
        .unwrap_or_else(|| panic!("short report:\n{text}"));
    assert!(first.trim_start().starts_with("table_lock"), "{text}");
    assert!(text.contains("lookup waited"), "{text}");
    let by_acquisitions = locks_text(&dir, &["--metric", "acquisitions"]);
    assert!(
        by_acquisitions.contains("buckets[] (64 locks)"),
        "{by_acquisitions}"
    );

    // One lock in full.
    let one = locks_text(&dir, &["--lock", "table_lock"]);
    assert!(
        one.contains("Waiters") && one.contains("lookup -> pthread_mutex_lock"),
        "{one}"
    );
    assert!(
        one.contains("lookup -> pthread_mutex_unlock"),
        "holders: {one}"
    );
    // Its acquisitions as JSON states them: exact, or the estimate and its interval (read
    // without the thousands' commas).
    let table_counts = &table["counts"];
    let [low, high] = [0, 1].map(|i| table_counts["acquisitions_interval"][i].as_u64().unwrap());
    let stated = if low == high {
        format!("  Acquisitions: {low} (every one counted).")
    } else {
        format!(
            "  Acquisitions: about {} between {low} and {high} (3 standard errors",
            count(table, "acquisitions")
        )
    };
    assert!(
        one.replace(',', "").contains(&stated),
        "no '{stated}' in {one}"
    );
    let unknown = blameprof_cmd(&[
        "report",
        "--view",
        "locks",
        "--lock",
        "no_such_lock",
        dir.to_str().unwrap(),
    ]);
    assert_clean_error(&unknown, "no lock or group named 'no_such_lock'");
}

#[test]
fn destroyed_locks_fold_into_their_init_sites_group() {
    let (dir, t) = profiled("lock_table", "lock-view-destroy", &["100000", "destroy"]);
    let v = locks_json(&dir, &[]);
    let caches = group(&v, "cache_new -> pthread_mutex_init");
    let acq = count(caches, "acquisitions");
    assert!(
        within(acq, t["cache_acq"], 0.10),
        "acquisitions of all the caches {acq}, program {}",
        t["cache_acq"]
    );
    // Locks at one address over the run share a row; together they are every cache made.
    let members = caches["members"].as_array().unwrap().len();
    let instances = group_instances(&v, "cache_new -> pthread_mutex_init");
    assert!(members >= 2, "{caches}");
    assert!(
        instances <= t["caches"] && instances * 2 >= t["caches"],
        "{instances} lock instances in rows, {} caches made",
        t["caches"]
    );
}

/// The pairs of the waiters with the holders that kept them waiting, against the program's
/// overlap of every wait with each holder's holds (the one insert thread never waits behind
/// itself). At this rate the runtime
/// samples the contended acquisitions and the holds that began without waiting, so each
/// pair is a sampled estimate, judged as `tests/locks.rs` judges sampled blame
/// (`common::blame_tolerance`, at least 15%): a run the machine disturbed (holders preempted
/// mid-hold) is repeated, up to 3 runs, and the amounts are said skipped if even the least
/// disturbed allows an error over `WIDEST_JUDGEABLE`.
#[test]
fn waiters_are_split_by_the_holders_that_kept_them_waiting() {
    pairs_are_the_programs_overlaps("direct", |f, _| f.to_owned());
}

/// The same program locking and unlocking through its own helpers, `lock_measured` and
/// `unlock_measured`, which lookup and insert share: each site names the caller the helper
/// forwards for (`lookup -> lock_measured`), so the pairs split as they do without them,
/// and no site is the helper alone.
#[test]
fn waiters_behind_the_programs_own_lock_wrapper_are_split_by_its_callers() {
    let v = pairs_are_the_programs_overlaps("wrapped", |f, lock| {
        let helper = match lock {
            Lock::Take => "lock_measured",
            Lock::Give => "unlock_measured",
        };
        format!("{f} -> {helper}")
    });
    let pairs = lock(&v, "table_lock")["pairs"].as_array().unwrap().clone();
    assert!(
        pairs.iter().all(|p| {
            let named = |side: &str| p[side].as_str().unwrap_or_default().contains(" -> ");
            named("waiter") && named("holder")
        }),
        "a site named by the helper alone: {pairs:#?}"
    );
}

/// A C++ program's own RAII guard (`TableGuard`: its constructor locks a `std::mutex`, out
/// of line, reading the clock around it) taken by `lookup` and `insert`: the guard only
/// forwards to the lock from both, so their waits are apart, each named `caller ->
/// TableGuard::TableGuard(...)`, each within 15% of the program's own measure.
#[test]
fn waiters_behind_a_cxx_guard_class_are_split_by_the_functions_that_use_it() {
    let prog = compile_c(
        "cxx_guard.cc",
        "lock_view_cxx_guard",
        &["-O2", "-g", "-pthread", "-lstdc++"],
    );
    let dir = scratch_dir("lock_view_cxx_guard").join("prof");
    let run = {
        let _one_at_a_time = machine();
        profile_ok(&dir, 200, &prog, &["1.5"])
    };
    let t = truth(&run.stdout);
    let v = locks_json(&dir, &[]);
    let table = v["locks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| {
            l["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("table_mutex"))
        })
        .unwrap_or_else(|| panic!("no table_mutex in {}", names(&v)));
    let waiters = table["waiters"].as_array().unwrap();
    let waited = |function: &str| -> u64 {
        waiters
            .iter()
            .filter(|w| {
                let caller = w["caller"].as_str().unwrap_or_default();
                caller.contains(&format!("{function}() -> "))
                    && caller.contains("TableGuard::TableGuard(")
            })
            .map(|w| w["ns"].as_u64().unwrap())
            .sum()
    };
    for (function, key) in [("lookup", "idle_lookup_ns"), ("insert", "idle_insert_ns")] {
        let (got, want) = (waited(function), t[key]);
        // The insert's few waits (tens of milliseconds) get 2 ms more for the sampling.
        assert!(
            got.abs_diff(want) as f64 <= 0.15 * want as f64 + 2e6,
            "{function}'s waits behind the guard: {got} ns, the program measured {want} ns: \
             {waiters:#?}"
        );
    }
    assert!(
        waiters.iter().all(|w| w["caller"]
            .as_str()
            .is_some_and(|c| c.contains(" -> ") || !c.contains("TableGuard"))),
        "a waiter site named by the guard alone: {waiters:#?}"
    );
}

/// Which side of a hold a site is: its lock call or its unlock call.
enum Lock {
    Take,
    Give,
}

/// `lookup_insert` (`mode`: `direct` or `wrapped`): its pairs of waiters with the holders
/// whose holds they overlapped, against the program's own overlaps; `site(f, side)` is the
/// name the lock view gives function `f`'s lock or unlock site. Returns the lock view.
fn pairs_are_the_programs_overlaps(mode: &str, site: impl Fn(&str, Lock) -> String) -> Value {
    let holders = [("insert", "blame_insert_ns"), ("lookup", "blame_lookup_ns")];
    let ((dir, t, tolerances), _) =
        least_disturbed("lock-view pairs", WIDEST_JUDGEABLE, |attempt| {
            let (dir, t, stderr) = profiled_with_summary(
                "lookup_insert",
                &format!("lock-view-pairs-{mode}-{attempt}"),
                &["1.5", "3", "20", "40", mode],
            );
            let periods = sampling_periods(&stderr);
            let tolerances: Vec<f64> = holders
                .iter()
                .map(|&(holder, _)| blame_tolerance(&t, periods, holder, 0.15))
                .collect();
            let widest = tolerances.iter().copied().fold(0.15, f64::max);
            ((dir, t, tolerances), widest)
        });
    let v = locks_json(&dir, &[]);
    let table = lock(&v, "table_lock");
    let behind_holder = |waiter: &str, holder: &str| {
        behind(table, &site(waiter, Lock::Take), &site(holder, Lock::Give))
    };
    // One thread inserts: it never waits behind its own holds.
    assert_eq!(
        behind_holder("insert", "insert"),
        0,
        "pairs {}",
        table["pairs"]
    );
    let mut lines = String::new();
    let mut bad = Vec::new();
    let mut unjudgeable = false;
    for ((holder, truth_key), tolerance) in holders.into_iter().zip(tolerances) {
        // The program's truth: every wait's overlap with the holder's holds, the insert
        // thread's waits included (a few percent on an idle machine; a third of the lookups'
        // blame when the machine preempts lookups mid-hold): the pairs of both waiters.
        let (lookups, inserts) = (
            behind_holder("lookup", holder),
            behind_holder("insert", holder),
        );
        let got = lookups + inserts;
        let want = t[truth_key];
        lines += &format!(
            "behind {holder}: lookup {lookups} + insert {inserts} = {got} ns, program {want} ns \
             ({:+.1}%, tolerance {:.0}%)\n",
            (got as f64 - want as f64) / want.max(1) as f64 * 100.0,
            tolerance * 100.0
        );
        unjudgeable |= tolerance > WIDEST_JUDGEABLE;
        if !within(got, want, tolerance) {
            bad.push(holder);
        }
    }
    if unjudgeable {
        skip(&format!(
            "{mode}: the pairs' sampled blame cannot be judged: the machine preempted holders \
             mid-hold in 3 runs of 3:\n{lines}"
        ));
        return v;
    }
    assert!(bad.is_empty(), "{mode}: {lines}pairs {}", table["pairs"]);
    v
}

#[test]
fn ping_pong_reads_half_pressure_and_one_thread_none() {
    let (dir, t) = profiled("ping_pong", "lock-view-pingpong", &["2", "1"]);
    let v = locks_json(&dir, &[]);
    let ball = lock(&v, "ball");
    let pressure = ball["counts"]["pressure"].as_f64().unwrap();
    let truth = t["wait_ns"] as f64 / t["life_ns"] as f64;
    assert!(
        (pressure - truth).abs() <= 0.15 * truth,
        "pressure {pressure:.3}, program {truth:.3}"
    );
    // The workload's own property: its two threads take turns, so each waits about half its
    // life on an idle machine, and less on a loaded one, where a thread whose turn it is
    // waits for a CPU too (0.16 to 0.25 beside two CPU hogs): the report follows the
    // program. Under 0.1, the threads hardly took turns at all.
    assert!(
        (0.1..=0.55).contains(&truth),
        "the program waited {truth:.3} of its threads' lives: no ping-pong"
    );

    // One thread: nobody waits for anything but the join; the ball is in the table, taken
    // and never waited for.
    let (dir, _) = profiled("ping_pong", "lock-view-solo", &["1", "0.3"]);
    let v = locks_json(&dir, &[]);
    let ball = lock(&v, "ball");
    assert!(count(ball, "acquisitions") > 0, "{ball}");
    assert_eq!(
        (count(ball, "contended"), count(ball, "wait_ns")),
        (0, 0),
        "{ball}"
    );
    for l in v["locks"].as_array().unwrap() {
        if l["kind"] == "join" {
            continue;
        }
        let pressure = l["counts"]["pressure"]
            .as_f64()
            .unwrap_or_else(|| panic!("no pressure for {l}"));
        assert_eq!(pressure, 0.0, "{l}");
    }
}

/// The most a run of the held.contended tests may be disturbed and still be judged: its
/// holders descheduled for a tenth of their holds (wall against CPU time inside them).
const DISTURBED: f64 = 0.1;

/// The holders' CPU time inside critical sections others waited for is `held.contended`,
/// under the function that computed there, per lock kind, and per lock in the lock view
/// (within 20% of the program's contended share of the work the profile puts inside the
/// holds); the same holders' computing outside any lock is not.
///
/// A holder the machine descheduled mid-hold (its holds' wall time more than a tenth over
/// their CPU time) resumes with a waiter behind it that came meanwhile, and the CPU
/// timer's sample at that tick finds the waiter where the program's slice, begun before,
/// did not (beside a CPU hog: 570 ms read against the program's share, 432 ms). Such a run
/// is repeated, up to 3 runs, and the least disturbed is judged; if all 3 were disturbed,
/// held.contended must still lie within the work inside the holds, and the test says it
/// skipped the amounts.
#[test]
fn work_inside_contended_holds_is_held_contended_in_its_function_and_lock() {
    let ((dir, t), disturbance) =
        least_disturbed("held.contended in holds", DISTURBED, |attempt| {
            let (dir, t) = profiled(
                "contended_hold",
                &format!("lock-view-held-{attempt}"),
                &["3", "2"],
            );
            let descheduled = ["table", "config"]
                .iter()
                .map(|p| {
                    t[&format!("{p}_wall_ns")] as f64 / t[&format!("{p}_inside_ns")].max(1) as f64
                        - 1.0
                })
                .fold(0.0, f64::max);
            ((dir, t), descheduled)
        });
    let judged = disturbance <= DISTURBED;
    let flat = report_json_metric(&dir, "held.contended", &["--view", "flat"]);
    let v = locks_json(&dir, &["--metric", "held.contended"]);
    let mut unjudged = Vec::new();
    for (lock_name, kind, inside, outside, prefix) in [
        ("table_lock", "mutex", "rebuild_table", "tidy_up", "table"),
        (
            "config_lock",
            "rwlock",
            "reload_config",
            "housekeeping",
            "config",
        ),
    ] {
        // The program's truth: its CPU time inside the holds while someone was waiting, of
        // its CPU time inside them. What held.contended must read is that share of the
        // work the profile itself puts inside the holds: on a loaded machine the CPU timer
        // places samples at scheduler ticks, which moves work in and out of the holds
        // (docs/benchmarks.md, session 27), and that is not held.contended's to judge.
        let (contended, inside_cpu) = (
            t[&format!("{prefix}_contended_ns")],
            t[&format!("{prefix}_inside_ns")],
        );
        assert!(
            contended > 200_000_000,
            "{prefix}_contended_ns = {contended}: too little contention"
        );
        let share = contended as f64 / inside_cpu.max(1) as f64;
        let (work_in, _) = flat_metric(&flat, inside, "work");
        let want = (work_in as f64 * share) as u64;
        let (held_in, _) = flat_metric(&flat, inside, "held.contended");
        let by_kind = total_of(&flat, &format!("held.contended.{kind}"));
        let l = lock(&v, lock_name);
        let held = count(l, "held_ns");
        if judged {
            assert!(
                within(held_in, want, 0.2),
                "{inside}: held.contended {held_in} ns, its work {work_in} ns times the \
                 program's contended share {share:.3} = {want} ns (the program: {contended} ns \
                 of {inside_cpu} ns)"
            );
            assert!(
                within(by_kind, want, 0.25),
                "held.contended.{kind} {by_kind} ns, expected {want} ns"
            );
            // Split by lock: the lock's row.
            assert!(
                within(held, want, 0.2),
                "{lock_name}: held_ns {held}, expected {want}"
            );
        } else {
            for (what, got) in [(inside, held_in), (lock_name, held)] {
                assert!(
                    got <= work_in + work_in / 50,
                    "{what}: held.contended {got} ns over the {work_in} ns of work profiled \
                     inside the holds"
                );
            }
            unjudged.push(format!(
                "{lock_name}: held.contended {held_in} ns, the program's share gives {want} ns"
            ));
        }
        let (held_out, _) = flat_metric(&flat, outside, "held.contended");
        let (work_out, _) = flat_metric(&flat, outside, "work");
        // The program's own computing there, which the profile must show (at least half
        // of it: the CPU timer's ticks move some of it under load).
        let outside_cpu = t[&format!("{prefix}_outside_ns")];
        assert!(
            work_out >= outside_cpu / 2,
            "{outside} computed {work_out} ns, of the program's {outside_cpu} ns"
        );
        assert!(
            held_out * 20 <= work_out,
            "{outside} holds no lock, yet held.contended {held_out} of its work {work_out}"
        );
        // The code inside the lock's holds.
        let top = &l["inside"][0];
        assert_eq!(
            (top["function"].as_str(), top["caller"].as_str()),
            (Some("compute"), Some(inside)),
            "{lock_name}: {}",
            l["inside"]
        );
    }
    assert_eq!(v["sort"], "held.contended");

    // In text, for one lock in full.
    let one = locks_text(&dir, &["--lock", "table_lock"]);
    assert!(
        one.lines()
            .any(|l| l.contains("%  rebuild_table -> compute")),
        "{one}"
    );
    if !unjudged.is_empty() {
        skip(&format!(
            "the machine descheduled the holders mid-hold in 3 runs of 3 (their holds' wall \
             time {:.0}% over their CPU time at least), so the amounts were not judged: {}",
            disturbance * 100.0,
            unjudged.join("; ")
        ));
    }
}

/// Who waited behind whom is matched in time: in a run whose first half has `append`
/// waiting behind `compact` and whose second half has `query` behind `rotate`, each waiter
/// is paired with its own phase's holder (the program's overlap of waits and holds, within
/// 15%), and not with the other phase's, where splitting each holder's blame by the
/// waiters' shares of all waiting would put half of each wait. The average length of the
/// holds others waited for is the program's within 20% (timed from their first waiter's
/// arrival when they began without waiting, as the program times them too).
#[test]
fn waiters_are_paired_with_the_holders_whose_holds_they_overlapped() {
    // Each phase's pair needs 200 ms of the program's own overlap to judge the matching by;
    // a machine busy with other work can take it below that (the waiters preempted rather
    // than waiting): such a run is repeated, and a test of three such runs is a skip that
    // says so, never a failure of the profiler.
    const PAIR_NS: u64 = 200_000_000;
    let pairs = ["pair_append_compact_ns", "pair_query_rotate_ns"];
    let ((dir, t), shortfall) = least_disturbed("phased pairs", 1.0, |attempt| {
        let (dir, t) = profiled(
            "phased_pairs",
            &format!("lock-view-phases-{attempt}"),
            &["2"],
        );
        let least = pairs.iter().map(|p| t[*p]).min().unwrap_or(0);
        let shortfall = PAIR_NS as f64 / least.max(1) as f64;
        ((dir, t), shortfall)
    });
    if shortfall > 1.0 {
        let overlaps: Vec<String> = pairs.iter().map(|p| format!("{p} {}", t[*p])).collect();
        skip(&format!(
            "the machine kept the phases' waiters from overlapping the holds 200 ms in 3 runs \
             of 3 (the program measured {}), so the pairs could not be judged",
            overlaps.join(", ")
        ));
        return;
    }
    let v = locks_json(&dir, &[]);
    let journal = lock(&v, "journal_lock");
    // The holds others waited for: their average length, as the program measured it. A
    // hold that began without waiting is timed from its first waiter's arrival (the
    // runtime reads no clock on an uncontended acquisition; docs/report-json.md calls that
    // a lower bound), so the figure lies between the program's average from the first
    // waiters' arrivals and its average of the whole holds, each within 20%. On a quiet
    // machine the two are a few percent apart; on a loaded one waiters arrive late.
    let holds = t["contended_holds"].max(1);
    let (whole, from_wait) = (
        t["contended_hold_ns"] / holds,
        t["contended_hold_from_wait_ns"] / holds,
    );
    let got = journal["counts"]["contended_hold_avg_ns"].as_u64().unwrap();
    assert!(
        got as f64 >= 0.8 * from_wait as f64 && got as f64 <= 1.2 * whole as f64,
        "average contended hold {got} ns, program {from_wait} ns from the first waiters' \
         arrivals, {whole} ns whole; counts {}",
        journal["counts"]
    );
    for (waiter, holder, other) in [
        ("append", "compact", "rotate"),
        ("query", "rotate", "compact"),
    ] {
        let want = t[&format!("pair_{waiter}_{holder}_ns")];
        let got = behind(journal, waiter, holder);
        assert!(
            within(got, want, 0.15),
            "{waiter} behind {holder}: {got} ns, program {want} ns; pairs {}",
            journal["pairs"]
        );
        let wrong = behind(journal, waiter, other);
        assert!(
            wrong * 20 <= want,
            "{waiter} behind {other}: {wrong} ns, yet they never overlapped; pairs {}",
            journal["pairs"]
        );
    }
}

/// `held_turns THREADS HOLD_NS` for 3 s under `blameprof run -F 200 RUN_ARGS` (one at a
/// time): the truth it printed and its lock's row (`turn_lock`).
/// `held_turns` profiled: its truth, `turn_lock`'s row in the lock view, and the work the
/// profile found inside the holds (`take_turn`, inclusive).
fn turns(threads: &str, hold_ns: &str, run_args: &[&str]) -> (Truth, Value, u64) {
    let prog = compile_c(
        "held_turns.c",
        "lock-view-turns",
        &["-O2", "-g", "-pthread"],
    );
    let dir = scratch_dir(&format!(
        "lock-view-turns-{threads}-{hold_ns}-{}",
        run_args.len()
    ))
    .join("prof");
    let run = {
        let _one_at_a_time = machine();
        let mut cmd = std::process::Command::new(blameprof());
        cmd.args(["run", "-q", "-F", "200", "-o"])
            .arg(&dir)
            .args(run_args)
            .arg("--")
            .arg(&prog)
            .args(["3", threads, hold_ns]);
        run_with_timeout(&mut cmd, RUN_TIMEOUT)
    };
    assert!(
        run.status.success(),
        "{threads} threads, {hold_ns} ns: {}",
        run.describe()
    );
    let v = locks_json(&dir, &[]);
    let (inside, _) = flat_values(&report_json(&dir, &["--view", "flat"]), "take_turn");
    (truth(&run.stdout), lock(&v, "turn_lock").clone(), inside)
}

/// The acquisitions are the program's count within 10%, and exact at a low rate (every
/// acquisition counted): in fact exact in each case (one lock, and each thread's last
/// period taken back at its end), for short and long holds and 2 to 8 threads.
#[test]
fn acquisitions_are_the_programs_own_count() {
    for (threads, hold_ns) in [("2", "20000"), ("3", "200000"), ("8", "2000000")] {
        let (t, l, _) = turns(threads, hold_ns, &[]);
        let (acq, want) = (count(&l, "acquisitions"), t["acquisitions"]);
        let label = format!("{threads} threads, {hold_ns} ns holds");
        assert!(
            within(acq, want, 0.10),
            "{label}: acquisitions {acq}, program {want}"
        );
        if hold_ns == "2000000" {
            assert_eq!(acq, want, "{label}: a low rate counts every acquisition");
        }
    }
}

/// The holders' CPU time inside holds others waited for (`held.contended`) is the
/// program's own measure within 15%, for short and long holds (20 us to 2 ms), 2 to 8
/// threads, with the default contention sampling and with every contended acquisition
/// measured (`--contended-per-ms 1000`): a hold counts from a waiter's arrival to its
/// return, also while glibc's lock word says nobody sleeps (a woken waiter beaten to the
/// mutex, back asleep inside glibc: its mark of the holder's previous hold stays). (When
/// two threads hardly ever run side by side the program measures little contention: within
/// 2% of its CPU time inside the holds, then.)
///
/// Judged against the program's contended share of its CPU time inside the holds, times
/// the work the profile found there: what the holds' samples are worth is the sample
/// source's accuracy, tested on its own (`sampling.rs`), and the tick-driven CPU-time timer
/// misplaces it here, where 8 threads share 2 CPUs: a woken waiter runs at the tick that
/// preempts the thread computing between its turns, so a third of the samples fell there
/// (the program: 9%), and the holds' work read 0.72x (docs/benchmarks.md, session 27).
///
/// A loaded machine changes the workload and the measure: holders descheduled inside their
/// holds, threads that no longer run side by side (the program then finds a waiter behind
/// as little as 1-9% of its holds, where glibc's lock word still says one sleeps after each
/// hold that began with a wait), waiters that arrive later in each hold, where the samples'
/// instants find a waiter more often than the CPU time does (session 31: 1.35x with late
/// arrivals). So a run whose holders were descheduled for more than a tenth of their holds
/// (wall against CPU time inside them), or whose program found a waiter behind a share of
/// its holds' CPU time more than 0.1 (0.06 at 2 threads) below an idle machine's (`quiet`: 0.87-0.89 with 2
/// threads and 20 us holds, 0.98-0.99 with 3 threads and 200 us, 0.997-0.998 with 8 threads
/// and 2 ms, 3 runs of each, session 35; beside a CPU hog a 3-thread run at 0.73 read
/// +16.6%, one at 0.98 reads +1-2%), is run again, up to 3 times, and the least disturbed
/// is judged. If all 3 were disturbed, that case is not judged by the program's share (it
/// measures another workload then): its held.contended must still lie within the work
/// inside the holds, and once every other case was judged the test says it skipped the
/// disturbed ones.
#[test]
fn held_contended_is_the_programs_own_measure() {
    let mut unjudged = Vec::new();
    // The most disturbance judged per case: at 2 threads and 20 us holds the profile's
    // error grows fastest as the program's share falls (session 35: +9-12% at 0.865-0.889;
    // session 36, a fresh-clone suite run: +16.5% at 0.781, 0.09 under quiet and so judged
    // at DISTURBED), so a share 0.06 under quiet, five times the quiet runs' spread, is
    // already another workload there.
    for (threads, hold_ns, quiet, most) in [
        ("2", "20000", 0.87, 0.06),
        ("3", "200000", 0.98, DISTURBED),
        ("8", "2000000", 0.997, DISTURBED),
    ] {
        for run_args in [&[][..], &["--contended-per-ms", "1000"][..]] {
            let disturbance = |t: &Truth| {
                let inside = t["inside_ns"].max(1) as f64;
                let descheduled = t["inside_wall_ns"] as f64 / inside - 1.0;
                let share = t["contended_ns"] as f64 / inside;
                descheduled.max(quiet - share)
            };
            let label = format!("{threads} threads, {hold_ns} ns holds, {run_args:?}");
            let ((t, l, work), least) = least_disturbed(&label, most, |_| {
                let run = turns(threads, hold_ns, run_args);
                let d = disturbance(&run.0);
                (run, d)
            });
            let (contended, inside) = (t["contended_ns"], t["inside_ns"]);
            let want = (work as f64 * contended as f64 / inside.max(1) as f64) as u64;
            let held = count(&l, "held_ns");
            eprintln!(
                "{label}: program's contended share {:.3}, disturbance {least:.3}; held_ns \
                 {held}, want {want} ({:+.1}%)",
                contended as f64 / inside.max(1) as f64,
                (held as f64 / want.max(1) as f64 - 1.0) * 100.0
            );
            if least > most {
                assert!(
                    held <= work + work / 50,
                    "{threads} threads, {hold_ns} ns holds, {run_args:?}: held_ns {held} over \
                     the {work} ns of work profiled inside the holds"
                );
                unjudged.push(format!(
                    "{label}: disturbance {least:.2} in 3 runs of 3 (held_ns {held}, the \
                     program's share gives {want})"
                ));
                continue;
            }
            assert!(
                within(held, want, 0.15) || held.abs_diff(want) <= work / 50,
                "{threads} threads, {hold_ns} ns holds, {run_args:?}: held_ns {held}, \
                 expected {want}: the program's contended share {contended}/{inside} ns of \
                 the {work} ns of work profiled inside the holds"
            );
        }
    }
    if !unjudged.is_empty() {
        skip(&format!(
            "the machine disturbed these cases in every run, so the program measured another \
             workload than the profile's (all the others were judged): {}",
            unjudged.join("; ")
        ));
    }
}
