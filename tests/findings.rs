//! The findings at the end of the lock view (`report --view locks`, text and JSON) against
//! workloads made to show one problem each, and one made to show none.
//!
//! Proves that (1) a lock held long by few acquisitions is `long_critical_sections`
//! naming the code its holders ran, and its contended acquisitions are the program's own
//! count; (2) a lock taken tens of thousands of times a second and often contended is
//! `coarse_lock`, at the program's contention rate and acquisition rate; (3) locks made at
//! one init site, each taken rarely but together very often, are `lock_overhead` found only
//! through their group, and not for any one member; (4) one hot bucket of an array of locks
//! is `asymmetric_contention` naming that element, at the program's contention rates; (5)
//! a thread spinning on trylock is `trylock_spin` naming its call site, with the program's
//! exact count of failures; (6) a pipeline whose first stage waits while its second
//! computes is `load_imbalance` suggesting more threads for the second; (7) a program
//! without such problems has no finding at all; (8) four threads doing two thirds of their
//! work inside one mutex get, first, its long critical sections, naming the code inside
//! and the program's hold time, ranked by their cost (the program's waiting), with the fix
//! of moving work out of the lock; (9) waiters woken by a broadcast made under the lock,
//! retaking it, are `woken_retake`, advising to wake after the unlock; (10) the bundled
//! example's ledger lock is the long critical sections of its auditor, and its workers
//! wait for a dispatcher that is the serial bottleneck; (11) a holder that sleeps inside
//! its holds while others wait is `blocked_holds` naming its sleep, with `held.blocked` the
//! program's own measure within 15%, and no long critical sections; (12) a lock whose
//! holders wait for a second lock inside their holds (lock_chain.c) is `chained_holds`
//! naming the holder, the lock it waited for and that lock's holder, with the blame passed
//! on the program's own measure within 15%, and not long critical sections; and that the
//! thresholds given on the
//! command line are the ones used, and echoed. Contended acquisitions and waiting are the
//! program's exactly (within 3%), acquisition rates within the error of their sampled
//! estimates.
//!
//! Each workload prints its own measure of the property it is made to show, and a test
//! first checks that the run showed it: on a 2-CPU machine a competing workload can keep
//! threads from running at once, and so from contending. A run that did not show it is
//! retried once. The profiled workloads run one at a time (`machine()`).

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use common::*;
use serde_json::Value;

fn machine() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

/// The truth a workload printed.
type Truth = HashMap<String, u64>;

/// Whether a run showed its workload's property, and why not.
type Shows = fn(&Truth) -> Result<(), String>;

/// `blameprof run` of a test program at 200 Hz (one at a time) whose run showed its
/// property by its own measure (up to 3 runs): the profile, the truth it printed and the
/// run summary. `None` when no run showed it (the machine made the program another
/// workload: its threads starved, or never ran side by side): the test says it skipped,
/// with the program's own numbers, and judges nothing.
fn profiled(name: &str, scratch: &str, shows: Shows) -> Option<(PathBuf, Truth, String)> {
    // A binary of its own per test: a report symbolizes the program's file after the run.
    let prog = compile_c(&format!("{name}.c"), scratch, &["-O2", "-g", "-pthread"]);
    let mut why = Vec::new();
    for _ in 0..3 {
        let dir = scratch_dir(scratch).join("prof");
        let _one_at_a_time = machine();
        let run = profile_ok(&dir, 200, &prog, &[]);
        let t = truth(&run.stdout);
        match shows(&t) {
            Ok(()) => return Some((dir, t, run.stderr)),
            Err(e) => why.push(e),
        }
    }
    skip(&format!(
        "{name} did not show its property in 3 runs (the machine's load): {}",
        why.join("; ")
    ));
    None
}

/// The run's length by the program's clock (s).
fn seconds(t: &Truth) -> f64 {
    (t["end_ns"] - t["start_ns"]) as f64 / 1e9
}

fn fraction(part: u64, whole: u64) -> f64 {
    part as f64 / whole.max(1) as f64
}

/// `report --view locks --format json EXTRA DIR`: the document, checked to carry findings.
fn locks_json(dir: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["--view", "locks", "--format", "json"];
    args.extend_from_slice(extra);
    let run = report_ok(dir, &args);
    let v: Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(
        (&v["schema"], &v["version"]),
        (&"blameprof-locks".into(), &3.into())
    );
    assert_eq!(v["available"], true, "{v}");
    assert!(v["findings"].is_array(), "{}", v["findings"]);
    assert!(v["findings_thresholds"].is_object());
    v
}

/// `report --view locks EXTRA DIR` (text).
fn locks_text(dir: &Path, extra: &[&str]) -> String {
    let mut args = vec!["--view", "locks"];
    args.extend_from_slice(extra);
    report_ok(dir, &args).stdout
}

fn findings(v: &Value) -> &Vec<Value> {
    v["findings"].as_array().expect("findings")
}

/// The findings of `kind`.
fn of_kind<'a>(v: &'a Value, kind: &str) -> Vec<&'a Value> {
    findings(v).iter().filter(|f| f["kind"] == kind).collect()
}

/// The one finding of `kind` about `subject`.
fn finding<'a>(v: &'a Value, kind: &str, subject: &str) -> &'a Value {
    let found: Vec<&Value> = of_kind(v, kind)
        .into_iter()
        .filter(|f| f["subject"] == subject)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one {kind} about {subject} in {:#}",
        v["findings"]
    );
    found[0]
}

fn number(f: &Value, key: &str) -> f64 {
    f["evidence"][key]
        .as_f64()
        .unwrap_or_else(|| panic!("no number {key} in {f:#}"))
}

fn name<'a>(f: &'a Value, key: &str) -> &'a str {
    f["evidence"][key]
        .as_str()
        .unwrap_or_else(|| panic!("no name {key} in {f:#}"))
}

fn close(got: f64, want: f64, tolerance: f64) -> bool {
    (got - want).abs() <= tolerance
}

/// The relative tolerance of a count the runtime estimates from sampled acquisitions (one in
/// about 256, docs/findings.md), for `acquisitions` the program counted: 3.5 standard errors
/// (1/sqrt(samples)), so that a run fails by chance about once in 2000; never more than half.
fn estimate_error(acquisitions: u64) -> f64 {
    let samples = (acquisitions as f64 / 256.0).max(1.0);
    (3.5 / samples.sqrt()).min(0.5)
}

/// config_lock is held 5 ms by each of a few hundred acquisitions, a good part of them
/// contended (three quarters on an idle machine, 35-40% beside CPU hogs: the workers
/// seldom run at once; the finding's threshold is 10%), and the waits are what the holds
/// ahead explain: on average at most `WAIT_PER_HOLDS` (2) times the average hold times the
/// 3 other workers, as the finding asks of the profile. On a machine loaded past its CPUs a
/// woken waiter waits for a CPU too, and one barged past again and again waits far longer
/// (50 ms on average behind 5 ms holds, at a load average of 6): holds no longer explain
/// the waits, for the program as for the rule.
fn shows_long_cs(t: &Truth) -> Result<(), String> {
    let rate = fraction(t["contended"], t["acquisitions"]);
    let per_second = t["acquisitions"] as f64 / seconds(t);
    let wait_avg = t["wait_ns"] as f64 / t["contended"].max(1) as f64;
    let hold_avg = t["hold_ns"] as f64 / t["acquisitions"].max(1) as f64;
    match rate >= 0.25 && per_second < 1000.0 && wait_avg <= 2.0 * hold_avg * 3.0 {
        true => Ok(()),
        false => Err(format!(
            "contention {rate:.3}, {per_second:.0} acquisitions/s, waits {:.1} ms on \
             average behind holds of {:.1} ms",
            wait_avg / 1e6,
            hold_avg / 1e6
        )),
    }
}

#[test]
fn few_long_holds_are_long_critical_sections() {
    let Some((dir, t, summary)) = profiled("long_cs", "findings-long-cs", shows_long_cs) else {
        return;
    };
    assert!(
        summary.contains("findings: long critical sections (config_lock)"),
        "the run summary names the finding:\n{summary}"
    );
    let v = locks_json(&dir, &[]);
    let f = finding(&v, "long_critical_sections", "config_lock");
    assert_eq!(f["lock_kind"], "mutex");
    // Contended acquisitions are exact; a failed trylock whose lock call then found the lock
    // free is the program's contended but not the runtime's.
    let contended = number(f, "contended") as u64;
    assert!(
        contended <= t["contended"] && contended as f64 >= 0.95 * t["contended"] as f64,
        "contended {contended}, program {}",
        t["contended"]
    );
    // A few hundred acquisitions are estimated from a handful of samples, too low (never
    // under the contended ones): the report's rate is the program's or higher.
    let want = fraction(t["contended"], t["acquisitions"]);
    let rate = number(f, "contention_rate");
    assert!(
        rate + 0.02 >= want && rate <= 1.0,
        "contention {rate:.3}, program {want:.3}"
    );
    let per_second = number(f, "acquisitions_per_s");
    assert!(per_second < 1000.0, "{per_second} acquisitions/s");
    // Pressure: the waiting over the four workers' time (main's join is no running time).
    let want = t["wait_ns"] as f64 / (4.0 * seconds(&t) * 1e9);
    let pressure = number(f, "pressure");
    assert!(
        close(pressure, want, 0.2 * want),
        "pressure {pressure:.3}, program {want:.3}"
    );
    assert!(
        name(f, "holders_compute_in").contains("reload_config"),
        "{f:#}"
    );
    // The culprit's hold: the longest recorded one others waited for, ended in
    // reload_config. Each hold computes 5 ms of CPU time (a hold that others waited for from
    // its start lasts that at least); none lasted longer than the program's longest (the
    // runtime's hold ends at the unlock call, as the program's does; 1 ms for its clock
    // reads under load).
    let longest = number(f, "longest_hold_ns");
    assert!(
        longest >= 4.5e6 && longest <= t["max_hold_ns"] as f64 + 1e6,
        "longest hold {longest} ns, program's longest {} ns, each at least 5 ms of CPU",
        t["max_hold_ns"]
    );
    assert!(
        name(f, "longest_hold_in").contains("reload_config"),
        "{f:#}"
    );
    assert!(
        f["fix"].as_str().unwrap().contains("reload_config"),
        "{f:#}"
    );
    assert!(of_kind(&v, "coarse_lock").is_empty(), "{:#}", v["findings"]);
    let thresholds = &v["findings_thresholds"];
    assert_eq!(thresholds["contention_rate"], 0.1);
    assert_eq!(thresholds["acquisitions_per_s"], 1000.0);

    let text = locks_text(&dir, &[]);
    assert!(
        text.contains("\nFindings (contention >= 10%, >= 1000 acquisitions/s):\n"),
        "{text}"
    );
    assert!(
        text.contains("  1. long critical sections: config_lock  (mutex)\n     costs: "),
        "{text}"
    );
    let one = locks_text(&dir, &["--lock", "config_lock"]);
    assert!(one.contains("Findings about config_lock ("), "{one}");
}

/// stats_lock is taken tens of thousands of times a second, and often contended; and its
/// holders computed little inside it (under a fifth of the run in all, by the threads' CPU
/// clocks: a quarter would make its critical sections the program's serial work, long
/// critical sections whatever the rate).
fn shows_coarse(t: &Truth) -> Result<(), String> {
    let rate = fraction(t["contended"], t["acquisitions"]);
    let per_second = t["acquisitions"] as f64 / seconds(t);
    let serial = t["hold_cpu_ns"] as f64 / 1e9 / seconds(t);
    match rate >= 0.2 && per_second >= 5_000.0 && serial < 0.2 {
        true => Ok(()),
        false => Err(format!(
            "contention {rate:.3}, {per_second:.0} acquisitions/s, holders computing \
             inside for {:.1}% of the run",
            serial * 100.0
        )),
    }
}

#[test]
fn many_contended_acquisitions_are_a_coarse_lock() {
    let Some((dir, t, _)) = profiled("coarse_lock", "findings-coarse", shows_coarse) else {
        return;
    };
    let v = locks_json(&dir, &[]);
    let f = finding(&v, "coarse_lock", "stats_lock");
    // A failed try finds the holder asleep inside its hold, and its lock call waits: the
    // program's contended acquisitions and their waiting are the runtime's (exact).
    let contended = number(f, "contended") as u64;
    assert!(
        contended <= t["contended"] && contended as f64 >= 0.97 * t["contended"] as f64,
        "contended {contended}, program {}",
        t["contended"]
    );
    // The program's wait holds the runtime's (which starts after its bookkeeping, the
    // previous wait's deferred record first, and ends at the real call's return), never
    // less: on a quiet machine the profile reads 3.5% under it (session 36: 0.962, 0.966,
    // and 0.975 beside two CPU hogs), and a thread preempted in that bookkeeping loses a
    // time slice only the program counts (once 0.897 in a suite run). Hence a bound
    // lopsided like the two measures: 15% under, 5% over.
    let wait = number(f, "wait_ns");
    let want = t["wait_ns"] as f64;
    assert!(
        wait <= 1.05 * want && wait >= 0.85 * want,
        "waited {wait:.0} ns, program {want:.0} ns"
    );
    // The acquisitions of the one lock are the sum of the sampling periods its threads
    // finished: all but each thread's last, unfinished one (at most 512 acquisitions of the
    // tens of thousands: 4% at most), so the rates are the program's within 10%.
    let want = fraction(t["contended"], t["acquisitions"]);
    let rate = number(f, "contention_rate");
    assert!(
        close(rate, want, 0.1 * want),
        "contention {rate:.3}, program {want:.3}"
    );
    let want = t["acquisitions"] as f64 / seconds(&t);
    let per_second = number(f, "acquisitions_per_s");
    assert!(
        close(per_second, want, 0.1 * want),
        "{per_second:.0} acquisitions/s, program {want:.0}"
    );
    // Its tries before blocking fail at most once per acquisition: no spin; contended, so
    // no overhead.
    for kind in ["trylock_spin", "lock_overhead", "long_critical_sections"] {
        assert!(of_kind(&v, kind).is_empty(), "{kind}: {:#}", v["findings"]);
    }
}

/// table_lock is held (computing) two thirds of the run, and the workers contend for it
/// (hundreds of contended acquisitions: a few percent of them, as the holders take it back
/// before a woken waiter runs): the program's own holds and waits.
fn shows_inside(t: &Truth) -> Result<(), String> {
    let held = t["hold_ns"] as f64 / 1e9 / seconds(t);
    let rate = fraction(t["contended"], t["acquisitions"]);
    match held >= 0.5 && t["contended"] >= 100 && t["acquisitions"] >= 1000 {
        true => Ok(()),
        false => Err(format!(
            "table_lock held {:.1}% of the run, contention {rate:.3}, {} acquisitions",
            held * 100.0,
            t["acquisitions"]
        )),
    }
}

/// Four threads doing two thirds of their work inside one mutex: the first finding is the
/// critical section, naming the code its holders run and their hold time (the program's),
/// and its fix is moving work out of the lock; not a coarse lock to stripe, not lock
/// overhead to replace by atomics.
#[test]
fn work_inside_one_mutex_is_its_long_critical_sections_first() {
    let Some((dir, t, summary)) = profiled("inside_mutex", "findings-inside", shows_inside) else {
        return;
    };
    let v = locks_json(&dir, &[]);
    let first = &findings(&v)[0];
    assert_eq!(
        (&first["kind"], &first["subject"]),
        (&"long_critical_sections".into(), &"table_lock".into()),
        "{:#}",
        v["findings"]
    );
    for kind in ["coarse_lock", "lock_overhead"] {
        assert!(of_kind(&v, kind).is_empty(), "{kind}: {:#}", v["findings"]);
    }
    assert!(
        name(first, "holders_compute_in").contains("rebalance_table"),
        "{first:#}"
    );
    // Every hold waited for: the average hold is the program's (from the lock call's return
    // to the unlock), within a fifth (the runtime's starts after its own bookkeeping).
    let want = t["hold_ns"] as f64 / t["acquisitions"] as f64;
    let hold = number(first, "hold_avg_ns");
    assert!(
        close(hold, want, 0.2 * want),
        "holds avg {hold:.0} ns, program {want:.0} ns"
    );
    // Its serial work: the holders' CPU time inside it over the run, about the program's
    // hold time or less (a holder preempted inside holds the lock without computing); from
    // the timer's samples (a few hundred of them: 6% of sampling error, and the lock calls'
    // own time is inside the runtime's holds, not the program's): 0.769 against 0.674 once.
    let held = t["hold_ns"] as f64 / 1e9 / seconds(&t);
    let serial = number(first, "serial_share");
    assert!(
        serial >= 0.25 && serial <= 1.25 * held,
        "serial share {serial:.3}, the program held it {held:.3} of the run"
    );
    // The cost it is ranked by is its waiting, the program's within the bounds of the
    // coarse lock's test, and is the pressure as a share of the running time.
    let cost = first["cost_ns"].as_f64().unwrap();
    assert_eq!(cost, number(first, "wait_ns"));
    let want = t["wait_ns"] as f64;
    assert!(
        cost <= 1.05 * want && cost >= 0.85 * want,
        "cost {cost:.0} ns, the program waited {want:.0} ns"
    );
    assert!(
        close(
            first["cost_share"].as_f64().unwrap(),
            number(first, "pressure"),
            1e-9
        ),
        "{first:#}"
    );
    let fix = first["fix"].as_str().unwrap();
    assert!(
        fix.starts_with("shorten or split its critical sections: move work that needs no lock out"),
        "{fix}"
    );
    // The text view and the run summary say the same first.
    let text = locks_text(&dir, &[]);
    assert!(
        text.contains("  1. long critical sections: table_lock  (mutex)\n     costs: "),
        "{text}"
    );
    assert!(
        summary.contains("findings: long critical sections (table_lock)"),
        "{summary}"
    );
}

/// The waiters woken by each broadcast waited for queue_lock while the publisher held it:
/// their time from the broadcast to their wait's return is at least half of the
/// publisher's holds after the broadcast, for each of the 3.
fn shows_retakes(t: &Truth) -> Result<(), String> {
    let hold = t["hold_after_ns"] as f64;
    let retake = t["retake_ns"] as f64;
    match hold >= 2e8 && retake >= 0.5 * 3.0 * hold {
        true => Ok(()),
        false => Err(format!(
            "held {:.0} ms after its broadcasts, the woken waited {:.0} ms",
            hold / 1e6,
            retake / 1e6
        )),
    }
}

/// A publisher that broadcasts and then keeps the mutex: its waiters, woken, wait inside
/// pthread_cond_wait for the mutex. The finding says so, naming the waiters' and the
/// holder's code, with the program's retake time, and advises waking after the unlock:
/// not a coarse lock or long critical sections of the waiters (RocksDB's per-writer
/// mutexes were "coarse lock: stripe it further").
#[test]
fn waiters_woken_under_the_lock_are_woken_retake() {
    let Some((dir, t, summary)) = profiled("signal_held", "findings-retake", shows_retakes) else {
        return;
    };
    let v = locks_json(&dir, &[]);
    let f = finding(&v, "woken_retake", "queue_lock");
    assert_eq!(
        findings(&v)[0]["kind"],
        "woken_retake",
        "{:#}",
        v["findings"]
    );
    for kind in ["coarse_lock", "long_critical_sections"] {
        assert!(of_kind(&v, kind).is_empty(), "{kind}: {:#}", v["findings"]);
    }
    assert_eq!(name(f, "woken_in"), "take_batch");
    assert!(name(f, "holds_end_in").contains("publish_batch"), "{f:#}");
    // The waiters' retakes (take_batch's: the publisher's own retakes after its waits for
    // them are the lock's too, 312 ms of 1.73 s beside two CPU hogs and a suite, and
    // count in `retake_wait_ns`): a share of the lock's exact waiting by its waiter
    // sites' samples; the program's is from the broadcast, the wake included: more, but
    // for the share's own error: its samples are thinned, and beside a CPU hog the share
    // read 1.078 of the program's in 2 runs of 3 (session 39).
    let retake = number(f, "woken_in_ns");
    assert!(number(f, "retake_wait_ns") >= retake, "{f:#}");
    let want = t["retake_ns"] as f64;
    assert!(
        retake <= 1.15 * want && retake >= 0.6 * want,
        "retakes {retake:.0} ns, the program's from its broadcasts {want:.0} ns"
    );
    assert!(number(f, "peak_waiters") >= 2.0, "{f:#}");
    let fix = f["fix"].as_str().unwrap();
    assert!(fix.starts_with("wake after unlocking"), "{fix}");
    assert!(fix.contains("signal rather than broadcast"), "{fix}");
    assert!(
        summary.contains("findings: woken waiters retake the mutex (queue_lock)"),
        "{summary}"
    );
}

/// The object locks together are taken very often, each one rarely, never contended; and
/// often enough that taking them costs: at 20 ns a pair, 1.2 times the finding's 1% of the
/// four workers' running time (wall-clock: on a loaded machine they take fewer a second).
fn shows_many_objects(t: &Truth) -> Result<(), String> {
    let per_second = t["acquisitions"] as f64 / seconds(t);
    let most = t["max_object_acq"] as f64 / seconds(t);
    let cost = t["acquisitions"] as f64 * 20.0 / (4.0 * seconds(t) * 1e9);
    match per_second >= 1_000_000.0 && most < 1000.0 && t["contended"] == 0 && cost >= 0.012 {
        true => Ok(()),
        false => Err(format!(
            "{per_second:.0} acquisitions/s, the busiest object {most:.0}/s, their cost \
             {:.2}% of the running time",
            cost * 100.0
        )),
    }
}

#[test]
fn many_rarely_taken_locks_of_one_site_are_lock_overhead_of_their_group() {
    let Some((dir, t, _)) = profiled("many_objects", "findings-objects", shows_many_objects) else {
        return;
    };
    let v = locks_json(&dir, &[]);
    let group = "object_new -> pthread_mutex_init";
    let f = finding(&v, "lock_overhead", group);
    assert_eq!(number(f, "members_over_rate"), 0.0, "{f:#}");
    assert!(
        f["text"]
            .as_str()
            .unwrap()
            .contains("found only through the group"),
        "{f:#}"
    );
    let want = t["acquisitions"] as f64 / seconds(&t);
    let per_second = number(f, "acquisitions_per_s");
    assert!(
        close(per_second, want, 0.1 * want),
        "{per_second:.0} acquisitions/s, program {want:.0}"
    );
    // The stated error interval ("at least .../s within the estimate's error") covers the
    // program's count, and is an interval, not the estimate again: its width is the
    // sampling error of the acquisition samples the report also states.
    let low = number(f, "acquisitions_per_s_low");
    let samples = number(f, "acquisition_samples");
    eprintln!("acquisitions/s: program {want:.0}, estimate {per_second:.0}, at least {low:.0}");
    assert!(
        low <= want * (1.0 + 1e-3) && low < per_second && samples > 0.0,
        "at least {low:.0}/s stated, program {want:.0}/s (estimate {per_second:.0}/s from \
         {samples} samples)"
    );
    assert_eq!(
        findings(&v).len(),
        1,
        "the group's only: {:#}",
        v["findings"]
    );

    // The thresholds given are the ones used, and echoed: at twice the group's rate it is
    // taken too rarely for lock overhead.
    let threshold = (2.0 * want).ceil() as u64;
    let given = threshold.to_string();
    let v = locks_json(&dir, &["--rate-threshold", &given]);
    assert_eq!(
        v["findings_thresholds"]["acquisitions_per_s"],
        threshold as f64
    );
    assert!(
        of_kind(&v, "lock_overhead").is_empty(),
        "{:#}",
        v["findings"]
    );
    let text = locks_text(
        &dir,
        &["--rate-threshold", &given, "--contention-threshold", "5"],
    );
    assert!(
        text.contains(&format!(
            "\nFindings: none (contention >= 5%, >= {threshold} acquisitions/s)\n"
        )),
        "{text}"
    );
}

/// Bucket 0 is contended far more often than the other buckets together.
fn shows_asymmetric(t: &Truth) -> Result<(), String> {
    let hot = fraction(t["contended_hot"], t["acq_hot"]);
    let cold = fraction(t["contended_cold"], t["acq_cold"]);
    match hot >= 0.15 && hot >= 3.0 * cold {
        true => Ok(()),
        false => Err(format!("bucket 0 contended {hot:.4}, the others {cold:.4}")),
    }
}

#[test]
fn one_hot_bucket_is_asymmetric_contention_naming_it() {
    let Some((dir, t, _)) = profiled("asymmetric", "findings-asymmetric", shows_asymmetric) else {
        return;
    };
    let v = locks_json(&dir, &[]);
    let f = finding(&v, "asymmetric_contention", "buckets[]");
    // The lock view names bucket 0 by its symbol; the finding by its element too.
    assert_eq!(name(f, "member"), "buckets");
    assert_eq!(name(f, "element"), "buckets[0]");
    assert!(f["text"].as_str().unwrap().contains("buckets[0]"), "{f:#}");
    // A failed try finds a holder asleep inside its hold, and its lock call waits: the
    // program's contended acquisitions are the runtime's (exact).
    let contended = number(f, "member_contended") as u64;
    assert!(
        contended <= t["contended_hot"] && contended as f64 >= 0.97 * t["contended_hot"] as f64,
        "bucket 0 contended {contended}, program {}",
        t["contended_hot"]
    );
    // The rates divide by the sampled estimates of the acquisitions.
    let (hot_want, cold_want) = (
        fraction(t["contended_hot"], t["acq_hot"]),
        fraction(t["contended_cold"], t["acq_cold"]),
    );
    let (hot, cold) = (
        number(f, "member_contention_rate"),
        number(f, "others_contention_rate"),
    );
    let (hot_tol, cold_tol) = (estimate_error(t["acq_hot"]), estimate_error(t["acq_cold"]));
    assert!(
        close(hot, hot_want, hot_tol * hot_want),
        "bucket 0 {hot:.3}, program {hot_want:.3} (tolerance {:.0}%)",
        hot_tol * 100.0
    );
    assert!(
        close(cold, cold_want, cold_tol * cold_want) && hot >= 2.0 * cold,
        "the others {cold:.4} (program {cold_want:.4}, tolerance {:.0}%), bucket 0 {hot:.3}",
        cold_tol * 100.0
    );
    // The skew explains the group's contention: no other finding about its locks, but that
    // its holders block inside them, which they do (each hold sleeps, so that the others
    // find the bucket held on a loaded machine too): at bucket_update's sleep.
    for other in findings(&v)
        .iter()
        .filter(|o| o["kind"] != "asymmetric_contention")
    {
        let subject = other["subject"].as_str().unwrap();
        if other["kind"] == "blocked_holds" {
            assert_eq!(name(other, "blocked_in"), "bucket_update -> nanosleep");
            continue;
        }
        assert!(!subject.starts_with("buckets"), "{other:#}");
    }
}

/// The pollers' trylocks fail many times a second, nearly all of them.
fn shows_trylock_spin(t: &Truth) -> Result<(), String> {
    let per_second = t["try_failed"] as f64 / seconds(t);
    let failing = fraction(t["try_failed"], t["try_attempts"]);
    match per_second >= 10_000.0 && failing >= 0.9 {
        true => Ok(()),
        false => Err(format!("{per_second:.0} failures/s, {failing:.3} of tries")),
    }
}

#[test]
fn spinning_on_trylock_is_a_trylock_spin_naming_its_site() {
    let Some((dir, t, _)) = profiled("trylock_spin", "findings-trylock", shows_trylock_spin) else {
        return;
    };
    let v = locks_json(&dir, &[]);
    let f = finding(&v, "trylock_spin", "slot_lock");
    assert_eq!(
        number(f, "try_failed") as u64,
        t["try_failed"],
        "failed trylocks are counted exactly"
    );
    let want = fraction(t["try_failed"], t["try_attempts"]);
    let failing = number(f, "failure_ratio");
    assert!(
        close(failing, want, 0.01),
        "{failing:.4} of tries, program {want:.4}"
    );
    assert!(name(f, "site").starts_with("poll_for_slot -> "), "{f:#}");
    assert!(
        f["fix"].as_str().unwrap().contains("poll_for_slot"),
        "{f:#}"
    );
    let text = locks_text(&dir, &[]);
    assert!(text.contains("trylock spin: slot_lock  (mutex)"), "{text}");
}

/// Waiting over work and waiting of a stage, by the program's clock.
fn waiting_share(t: &Truth, stage: &str) -> f64 {
    let wait = t[&format!("{stage}_wait_ns")];
    fraction(wait, wait + t[&format!("{stage}_work_ns")])
}

/// The parsers wait most of their time; the renderers hardly ever.
fn shows_pipeline(t: &Truth) -> Result<(), String> {
    let (parse, render) = (waiting_share(t, "parse"), waiting_share(t, "render"));
    match parse >= 0.5 && render <= 0.05 {
        true => Ok(()),
        false => Err(format!("parsers wait {parse:.3}, renderers {render:.3}")),
    }
}

#[test]
fn a_stage_waiting_for_a_computing_one_is_load_imbalance_suggesting_more_of_the_other() {
    let Some((dir, t, _)) = profiled("pipeline", "findings-pipeline", shows_pipeline) else {
        return;
    };
    let v = locks_json(&dir, &[]);
    let f = finding(&v, "load_imbalance", "parse_stage vs render_stage");
    assert_eq!(name(f, "waiting_stage"), "parse_stage");
    assert_eq!(name(f, "computing_stage"), "render_stage");
    // Each stage's waiting over its work (CPU time) and waiting, as the program measures it.
    let want = waiting_share(&t, "parse");
    let parse = number(f, "waiting_stage_share");
    assert!(
        close(parse, want, 0.05),
        "parsers wait {parse:.3}, program {want:.3}"
    );
    let want = waiting_share(&t, "render");
    let render = number(f, "computing_stage_share");
    assert!(
        render <= 0.1 && close(render, want, 0.03),
        "renderers wait {render:.3}, program {want:.3}"
    );
    let suggested = &f["evidence"]["suggested_threads"];
    let threads = |stage: &str| suggested[stage].as_u64().unwrap_or(0);
    assert!(
        threads("render_stage") > t["render_threads"],
        "more renderers: {suggested}"
    );
    assert_eq!(
        threads("render_stage") + threads("parse_stage"),
        t["parse_threads"] + t["render_threads"],
        "the same threads in all: {suggested}"
    );
    assert!(threads("parse_stage") >= 1, "{suggested}");
}

#[test]
fn a_program_without_lock_problems_has_no_findings() {
    let Some((dir, _, summary)) = profiled("no_problem", "findings-none", |_| Ok(())) else {
        return;
    };
    assert!(
        !summary.contains("findings:"),
        "no finding in the run summary:\n{summary}"
    );
    let v = locks_json(&dir, &[]);
    assert!(findings(&v).is_empty(), "{:#}", v["findings"]);
    let text = locks_text(&dir, &[]);
    assert!(
        text.contains("\nFindings: none (contention >= 10%, >= 1000 acquisitions/s)\n"),
        "{text}"
    );
}

/// The bundled example (`examples/orders.c`, what `scripts/demo.sh` profiles): three
/// workers wait for orders one dispatcher parses, and for the ledger an auditor holds for
/// 2 ms at a time among thousands of short sales. The findings say so: `ledger_lock`'s
/// waiting is the long critical sections that end in `audit_ledger` (never a coarse lock to
/// stripe: a rate diluted by the short sales), and a load imbalance, if any, is the workers
/// waiting for the dispatcher, one thread, the serial bottleneck (never "worker vs
/// auditor", a stage that computes on its own and makes them wait less); no lock overhead.
/// The workers' waiting for the ledger is the program's own (within 25%).
#[test]
fn the_bundled_example_is_told_its_long_critical_section_and_its_bottleneck() {
    let prog = compile_c(
        "../../examples/orders.c",
        "findings-orders",
        &["-O2", "-g", "-pthread"],
    );
    let dir = scratch_dir("findings-orders").join("prof");
    let run = {
        let _one_at_a_time = machine();
        profile_ok(&dir, 200, &prog, &[])
    };
    let waited_ms: f64 = run
        .stdout
        .split("the workers waited ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("no waiting in the output: {}", run.stdout));
    let flat = report_json(&dir, &["--view", "flat"]);
    let record_sale = flat_incl(&flat, "record_sale", "idleness") as f64 / 1e6;
    assert!(
        (record_sale - waited_ms).abs() <= 0.25 * waited_ms,
        "record_sale waited {record_sale:.1} ms in the profile, {waited_ms:.1} ms by the program"
    );

    let v = locks_json(&dir, &[]);
    let ledger = findings(&v)
        .iter()
        .find(|f| f["subject"] == "ledger_lock")
        .unwrap_or_else(|| panic!("no finding about ledger_lock: {:#}", v["findings"]));
    assert_eq!(ledger["kind"], "long_critical_sections", "{ledger:#}");
    assert!(
        name(ledger, "culprit").contains("audit_ledger"),
        "{ledger:#}"
    );
    assert!(
        name(ledger, "longest_hold_in").contains("audit_ledger"),
        "{ledger:#}"
    );
    for f in findings(&v) {
        assert_ne!(f["kind"], "lock_overhead", "{f:#}");
        assert_ne!(f["kind"], "coarse_lock", "{f:#}");
        if f["kind"] == "load_imbalance" && f["evidence"]["computing_stage"].is_string() {
            assert_eq!(f["subject"], "worker vs dispatcher", "{f:#}");
            assert!(
                f["fix"]
                    .as_str()
                    .unwrap_or("")
                    .contains("the serial bottleneck"),
                "{f:#}"
            );
        }
    }
}

/// A chain (lock_chain.c): most of the waiting during insert's holds of table_lock was while
/// insert itself waited for log_lock.
fn shows_chain(t: &Truth) -> Result<(), String> {
    let (passed, blame) = (t["passed_ns"], t["blame_insert_ns"]);
    if blame > 0 && passed * 2 >= blame {
        Ok(())
    } else {
        Err(format!(
            "{passed} ns of the {blame} ns of waiting during insert's holds was while insert \
             waited for log_lock (want half or more)"
        ))
    }
}

#[test]
fn holders_waiting_for_another_lock_inside_their_holds_are_told_the_chain() {
    let Some((dir, t, summary)) = profiled("lock_chain", "findings_lock_chain", shows_chain) else {
        return;
    };
    let v = locks_json(&dir, &[]);
    // table_lock's waiting is flush_log's doing, through insert's wait for log_lock: named
    // so, with the blame passed on the program's own measure (the lookups' waiting while
    // insert waited) within 15%.
    let f = finding(&v, "chained_holds", "table_lock");
    assert_eq!(
        (
            name(f, "holder"),
            name(f, "waited_for"),
            name(f, "root_holder")
        ),
        ("insert", "log_lock", "flush_log"),
        "{f:#}"
    );
    let (passed, want) = (number(f, "passed_ns"), t["passed_ns"] as f64);
    assert!(
        close(passed, want, 0.15 * want),
        "table_lock's blame passed on {passed} ns, the program measured {want} ns: {f:#}"
    );
    // Not long critical sections to shorten (its holders computed 1 ms of their 30 ms
    // holds); log_lock's holder computes, and that one is.
    assert!(
        of_kind(&v, "long_critical_sections")
            .iter()
            .all(|f| f["subject"] != "table_lock"),
        "{:#}",
        v["findings"]
    );
    finding(&v, "long_critical_sections", "log_lock");
    assert!(
        summary.contains("holders wait for another lock inside the lock (table_lock)"),
        "{summary}"
    );
}

/// A holder that sleeps inside its holds while others wait (blocking_holder.c): most of its
/// sleeps (20 or more) end with a reader waiting.
fn shows_blocked(t: &Truth) -> Result<(), String> {
    let (sleeps, waited) = (t["sleeps"], t["waited_sleeps"]);
    if sleeps >= 20 && waited * 2 >= sleeps {
        Ok(())
    } else {
        Err(format!(
            "{sleeps} sleeps holding state_lock, {waited} of them with a reader waiting"
        ))
    }
}

#[test]
fn a_holder_that_sleeps_inside_its_holds_is_told_so_at_its_sleep() {
    let Some((dir, t, summary)) =
        profiled("blocking_holder", "findings_blocking_holder", shows_blocked)
    else {
        return;
    };
    let v = locks_json(&dir, &[]);
    let lock = v["locks"]
        .as_array()
        .expect("locks")
        .iter()
        .find(|l| l["name"] == "state_lock")
        .unwrap_or_else(|| panic!("no state_lock: {v:#}"));
    // Its holders' time in nanosleep while others waited: the program's own measure of its
    // sleeps at whose end a reader waited, within 15%, at the sleep's call site.
    let blocked = lock["counts"]["blocked_ns"].as_u64().unwrap_or(0);
    let want = t["blocked_waited_ns"];
    assert!(
        blocked.abs_diff(want) as f64 <= 0.15 * want as f64,
        "state_lock's holders blocked {blocked} ns, the program measured {want} ns: {lock:#}"
    );
    let site = &lock["blocked"][0];
    assert_eq!(
        (&site["caller"], &site["lock_function"]),
        (&"flush_state".into(), &"nanosleep".into()),
        "{lock:#}"
    );
    // Told as such, naming the call, and not as long critical sections to shorten: the
    // holder computes 1 ms of its 11 ms holds.
    let f = finding(&v, "blocked_holds", "state_lock");
    assert_eq!(name(f, "blocked_in"), "flush_state -> nanosleep");
    assert!(number(f, "blocked_share") >= 0.5, "{f:#}");
    assert!(
        of_kind(&v, "long_critical_sections").is_empty(),
        "{:#}",
        v["findings"]
    );
    assert!(
        summary.contains("holders block inside the lock (state_lock)"),
        "{summary}"
    );
    // The call paths say the same: held.blocked is at flush_state's nanosleep.
    let flat = report_json_metric(&dir, "held.blocked", &["--view", "flat"]);
    let at_sleep = flat_metric(&flat, "flush_state", "held.blocked").0;
    assert!(
        at_sleep.abs_diff(blocked) as f64 <= 0.01 * blocked as f64,
        "held.blocked under flush_state {at_sleep} ns, the lock's {blocked} ns"
    );
}
