//! The findings' rules, case by case: tables, phases and thread loads built by hand.

use super::asymmetry::element_name;
use super::imbalance::{imbalance_findings, split_threads, Stage, ThreadLoad};
use super::lock_rules::lock_findings;
use super::phases::phase_findings;
use super::*;
use crate::attribution::locks::{
    waits_for_a_lock, Chain, Counts, LockGroup, LockRow, LockTable, Naming, Site,
};
use crate::attribution::timeline::{LockSeries, Phase, Timeline};
use crate::format::{LockStats, WaitKind};
use std::collections::{HashMap, HashSet};

const SECOND: u64 = 1_000_000_000;
const PID: u32 = 7;

fn site(caller: &str, function: &str) -> Site {
    Site {
        caller: caller.to_owned(),
        lock_function: function.to_owned(),
    }
}

/// `rows` in a process that ran 10 ms in all, so that their acquisitions' cost, not
/// their running time, decides lock overhead.
fn briefly(rows: Vec<LockRow>) -> Vec<LockRow> {
    rows.into_iter()
        .map(|r| LockRow {
            running_ns: 2_000_000,
            ..r
        })
        .collect()
}

/// A mutex row of process [`PID`] named `name` (by symbol) with `counts`, its pressure
/// over 10 s of running time.
fn row(name: &str, counts: Counts) -> LockRow {
    let running_ns = 10 * SECOND;
    LockRow {
        pid: PID,
        address: 0x1000,
        kind: Some(WaitKind::Mutex),
        name: name.to_owned(),
        naming: Naming::Symbol,
        group: None,
        instances: 1,
        pressure: Some(counts.runtime.wait_ns as f64 / running_ns as f64),
        counts,
        running_ns,
        detail: None,
    }
}

/// Counts of `acquisitions` (from `samples` sampled ones), `contended` of them, each
/// wait `wait_each` ns.
fn counts(acquisitions: u64, samples: u64, contended: u64, wait_each: u64) -> Counts {
    Counts {
        runtime: LockStats {
            acquisitions,
            acquisition_samples: samples,
            contended,
            contended_measured: contended,
            wait_ns: contended * wait_each,
            ..LockStats::default()
        },
        ..Counts::default()
    }
}

fn table(locks: Vec<LockRow>) -> LockTable {
    LockTable {
        available: true,
        locks,
        groups: Vec::new(),
        running_ns: 10 * SECOND,
        acquisitions_counted: true,
        untabled_events: 0,
        init_sites_displaced: 0,
        chains_cut_ns: 0,
    }
}

/// `table` with one group of all its rows, named `name`.
fn grouped(mut locks: Vec<LockRow>, name: &str) -> LockTable {
    let mut sum = Counts::default();
    for l in &mut locks {
        l.group = Some(name.to_owned());
        sum.runtime.acquisitions += l.counts.runtime.acquisitions;
        sum.runtime.acquisition_samples += l.counts.runtime.acquisition_samples;
        sum.runtime.contended += l.counts.runtime.contended;
        sum.runtime.wait_ns += l.counts.runtime.wait_ns;
    }
    let mut t = table(locks);
    t.groups.push(LockGroup {
        pid: PID,
        name: name.to_owned(),
        kind: Some(WaitKind::Mutex),
        members: (0..t.locks.len()).collect(),
        pressure: Some(sum.runtime.wait_ns as f64 / t.running_ns as f64),
        counts: sum,
    });
    t
}

/// The findings of `t` for a process of `wall` seconds, default thresholds.
fn found(t: &LockTable, wall: u64) -> Vec<Finding> {
    let walls = HashMap::from([(PID, wall * SECOND)]);
    let mut f = lock_findings(t, &walls, Thresholds::default());
    f.sort_by_key(|f| f.kind);
    f
}

fn kinds(f: &[Finding]) -> Vec<(Kind, &str)> {
    f.iter().map(|f| (f.kind, f.subject.as_str())).collect()
}

fn share(f: &Finding, key: &str) -> f64 {
    match f.value(key) {
        Some(Value::Share(v) | Value::PerSecond(v) | Value::Factor(v)) => *v,
        other => panic!("{key}: {other:?}"),
    }
}

fn name<'a>(f: &'a Finding, key: &str) -> &'a str {
    match f.value(key) {
        Some(Value::Name(v)) => v,
        other => panic!("{key}: {other:?}"),
    }
}

#[test]
fn few_contended_acquisitions_are_long_critical_sections_naming_the_code_inside() {
    // 400 acquisitions in 2 s, 350 contended, 5 ms each: pressure 17.5%.
    let mut r = row("config_lock", counts(30, 3, 350, 5_000_000));
    r.detail_mut().inside = vec![
        (site("reload_config", "parse"), 900),
        (site("reload_config", ""), 100),
    ];
    r.detail_mut().holders = vec![(site("reload_config", "pthread_mutex_unlock"), 5)];
    let f = found(&table(vec![r]), 2);
    assert_eq!(kinds(&f), [(Kind::LongCriticalSections, "config_lock")]);
    let f = &f[0];
    assert_eq!(
        f.value("acquisitions"),
        Some(&Value::Count(350)),
        "never below the contended"
    );
    assert_eq!(share(f, "contention_rate"), 1.0);
    assert_eq!(share(f, "acquisitions_per_s"), 175.0);
    assert_eq!(
        name(f, "holders_compute_in"),
        "parse <- reload_config (90%), reload_config (10%)"
    );
    assert!(f.fix.contains("{holders_compute_in}"), "{}", f.fix);
}

#[test]
fn without_code_inside_the_fix_names_where_the_holds_end() {
    let mut r = row("config_lock", counts(30, 3, 350, 5_000_000));
    r.detail_mut().holders = vec![
        (site("reload_config", "pthread_mutex_unlock"), 5),
        (site("other", "pthread_mutex_unlock"), 1),
    ];
    let f = found(&table(vec![r]), 2);
    assert_eq!(
        name(&f[0], "holds_end_in"),
        "reload_config -> pthread_mutex_unlock"
    );
}

/// 350 acquisitions in 2 s, all contended, waits of 5 ms (pressure 17.5%), 1.6 s of blame
/// over 2 s of timed holds in which the holders computed `held_ns`: long critical sections
/// by these numbers alone.
fn long_holds(held_ns: u64) -> Counts {
    let mut c = counts(30, 3, 350, 5_000_000);
    c.blame_ns = 1_600_000_000;
    c.runtime.timed_holds = 350;
    c.runtime.contended_hold_ns = 2_000_000_000;
    c.held_ns = held_ns;
    c
}

#[test]
fn holders_blocked_for_a_quarter_of_their_contended_holds_block_inside_the_lock() {
    // Long critical sections, until its holders were blocked in a sleep for a quarter of
    // its 2 s of holds.
    let mut c = long_holds(1_500_000_000);
    c.blocked_ns = 500_000_000;
    let mut r = row("state_lock", c);
    r.detail_mut().blocked = vec![
        (site("flush_state", "nanosleep"), 400_000_000),
        (site("sync_state", "poll"), 100_000_000),
    ];
    let f = found(&table(vec![r.clone()]), 2);
    assert_eq!(kinds(&f), [(Kind::BlockedHolds, "state_lock")]);
    assert_eq!(name(&f[0], "blocked_in"), "flush_state -> nanosleep");
    assert_eq!(share(&f[0], "blocked_share"), 0.25);
    assert_eq!(f[0].cost_ns, 1_600_000_000 / 4);
    // Blocked for less: its long critical sections, as before.
    r.counts.blocked_ns = 490_000_000;
    let f = found(&table(vec![r]), 2);
    assert_eq!(kinds(&f), [(Kind::LongCriticalSections, "state_lock")]);
}

#[test]
fn holders_whose_blame_mostly_passes_on_along_a_chain_wait_inside_the_lock() {
    // Long critical sections by its numbers, but its holders were waiting for log_lock
    // (held by flush) during the holds others waited for: a quarter of its blame passed on
    // makes it the chain, naming the largest hop.
    let mut r = row("table_lock", long_holds(100_000_000));
    let chain = |holder: &str, to_holder: &str, ns| Chain {
        holder: site(holder, "pthread_mutex_unlock"),
        to: 0x2000,
        to_lock: "log_lock".to_owned(),
        to_holder: site(to_holder, "pthread_mutex_unlock"),
        ns,
    };
    r.detail_mut().chains = vec![
        chain("insert", "flush", 300_000_000),
        chain("update", "flush", 100_000_000),
    ];
    let f = found(&table(vec![r.clone()]), 2);
    assert_eq!(kinds(&f), [(Kind::ChainedHolds, "table_lock")]);
    assert_eq!(
        (
            name(&f[0], "holder"),
            name(&f[0], "waited_for"),
            name(&f[0], "root_holder")
        ),
        ("insert", "log_lock", "flush")
    );
    assert_eq!(share(&f[0], "passed_share"), 0.25);
    assert_eq!(f[0].cost_ns, 400_000_000);
    // Less passed on: its long critical sections, as before.
    r.detail_mut().chains[1].ns = 99_000_000;
    let f = found(&table(vec![r]), 2);
    assert_eq!(kinds(&f), [(Kind::LongCriticalSections, "table_lock")]);
}

#[test]
fn many_contended_acquisitions_are_a_coarse_lock() {
    let f = found(
        &table(vec![row(
            "stats_lock",
            counts(2_000_000, 5000, 600_000, 2000),
        )]),
        2,
    );
    assert_eq!(kinds(&f), [(Kind::CoarseLock, "stats_lock")]);
    assert!((share(&f[0], "contention_rate") - 0.3).abs() < 1e-9);
    assert_eq!(share(&f[0], "acquisitions_per_s"), 1_000_000.0);
}

#[test]
fn one_site_holding_long_among_many_short_holds_is_its_long_critical_sections() {
    // 3,000 acquisitions a second, 13% contended: a coarse lock by its rate, until one
    // holder site takes most of its blame with holds far longer than the other site's (an
    // auditor's scan of a ledger among short sales).
    let mut r = row("ledger_lock", counts(6000, 100, 800, 1_000_000));
    let (audit, sale) = (
        site("audit_ledger", "pthread_mutex_unlock"),
        site("record_sale", "pthread_mutex_unlock"),
    );
    let d = r.detail_mut();
    d.holders = vec![(audit.clone(), 700_000_000), (sale.clone(), 100_000_000)];
    d.longest_holds = vec![(audit.clone(), 4_000_000), (sale.clone(), 300_000)];
    d.mean_holds = vec![(audit.clone(), 2_500_000), (sale.clone(), 40_000)];
    let f = found(&table(vec![r.clone()]), 2);
    assert_eq!(kinds(&f), [(Kind::LongCriticalSections, "ledger_lock")]);
    assert_eq!(
        name(&f[0], "culprit"),
        "audit_ledger -> pthread_mutex_unlock"
    );
    assert_eq!(share(&f[0], "culprit_blame_share"), 0.875);
    assert_eq!(
        f[0].value("culprit_longest_hold_ns"),
        Some(&Value::Ns(4_000_000))
    );
    assert!(f[0].fix.contains("{culprit}"), "{}", f[0].fix);
    let coarse = |r: &LockRow| {
        kinds(&found(&table(vec![r.clone()]), 2)) == [(Kind::CoarseLock, "ledger_lock")]
    };
    // Its holds three times the others' on average (one of them a hundred times): the
    // lock's many holds, and a preempted one, make a coarse lock.
    r.detail_mut().mean_holds = vec![(audit.clone(), 120_000), (sale.clone(), 40_000)];
    assert!(coarse(&r));
    // Held at one site only: its holds are the lock's, however long.
    r.detail_mut().mean_holds = vec![(audit.clone(), 2_500_000)];
    assert!(coarse(&r));
    // Long holds, but under half the blame: no one culprit.
    let d = r.detail_mut();
    d.mean_holds = vec![(audit.clone(), 2_500_000), (sale.clone(), 40_000)];
    d.holders = vec![(audit.clone(), 300_000_000), (sale.clone(), 500_000_000)];
    assert!(coarse(&r));
    // The culprit again, its holds timed at 200 ms in all: long critical sections while
    // the holders computed inside the lock for a quarter of that, not when they were off
    // a CPU for more (descheduled mid-hold on a busy machine, or blocked inside them).
    r.detail_mut().holders = vec![(audit, 700_000_000), (sale, 100_000_000)];
    r.counts.runtime.timed_holds = 100;
    r.counts.runtime.contended_hold_ns = 200_000_000;
    r.counts.held_ns = 50_000_000;
    let f = found(&table(vec![r.clone()]), 2);
    assert_eq!(kinds(&f), [(Kind::LongCriticalSections, "ledger_lock")]);
    r.counts.held_ns = 49_000_000;
    assert!(coarse(&r), "holds three quarters off a CPU have no culprit");
    // Holds too short in all to judge the holders' computing by the CPU timer's samples.
    r.counts.runtime.contended_hold_ns = 90_000_000;
    r.counts.held_ns = 0;
    let f = found(&table(vec![r]), 2);
    assert_eq!(kinds(&f), [(Kind::LongCriticalSections, "ledger_lock")]);
}

#[test]
fn serial_work_inside_a_frequent_lock_is_long_critical_sections() {
    // 50,000 acquisitions a second, 20% contended, waits of 100 us (pressure 20%): a coarse
    // lock by its rate, until its holders compute inside it, others waiting, for a quarter
    // of the 2 s run.
    let mut c = counts(100_000, 1000, 20_000, 100_000);
    c.held_ns = SECOND / 2;
    let mut r = row("table_lock", c.clone());
    r.detail_mut().inside = vec![(site("apply_update", "rebalance_table"), 90)];
    let f = found(&table(vec![r.clone()]), 2);
    assert_eq!(kinds(&f), [(Kind::LongCriticalSections, "table_lock")]);
    assert_eq!(share(&f[0], "serial_share"), 0.25);
    assert_eq!(
        name(&f[0], "holders_compute_in"),
        "rebalance_table <- apply_update (100%)"
    );
    assert!(
        f[0].fix.contains("move work that needs no lock out"),
        "{}",
        f[0].fix
    );
    assert!(
        f[0].text.contains("{serial_share} of the run"),
        "{}",
        f[0].text
    );
    assert_eq!(f[0].cost_ns, 2 * SECOND, "its cost is its waiting");
    r.counts.held_ns = SECOND / 2 - 1;
    let f = found(&table(vec![r]), 2);
    assert_eq!(kinds(&f), [(Kind::CoarseLock, "table_lock")]);
}

#[test]
fn waiting_mostly_at_condition_variable_retakes_is_woken_waiters_retaking() {
    // 300 contended acquisitions of 1 ms each: 30 ms a second of 10 s, pressure 3%.
    let mut r = row("queue_lock", counts(600, 20, 300, 1_000_000));
    r.counts.runtime.timed_holds = 300;
    r.counts.runtime.contended_hold_ns = 300 * 2_000_000;
    r.detail_mut().waiters = vec![
        (site("take_batch", "pthread_cond_wait"), 700),
        (site("publish_batch", "pthread_mutex_lock"), 300),
    ];
    r.detail_mut().holders = vec![(site("publish_batch", "pthread_mutex_unlock"), 900)];
    let f = found(&table(vec![r.clone()]), 2);
    assert_eq!(kinds(&f), [(Kind::WokenRetake, "queue_lock")]);
    assert!((share(&f[0], "retake_share") - 0.7).abs() < 1e-9);
    assert_eq!(name(&f[0], "woken_in"), "take_batch");
    assert_eq!(
        name(&f[0], "holds_end_in"),
        "publish_batch -> pthread_mutex_unlock"
    );
    assert_eq!(f[0].value("retake_wait_ns"), Some(&Value::Ns(210_000_000)));
    assert!(f[0].fix.starts_with("wake after unlocking"), "{}", f[0].fix);
    assert_eq!(f[0].cost_ns, 300_000_000);
    // Timed waits count as well; under half of the waiting is another contention.
    r.detail_mut().waiters[0].0.lock_function = "pthread_cond_timedwait".into();
    let f = found(&table(vec![r.clone()]), 2);
    assert_eq!(kinds(&f), [(Kind::WokenRetake, "queue_lock")]);
    r.detail_mut().waiters[0].1 = 299;
    let f = found(&table(vec![r]), 2);
    assert_eq!(kinds(&f), [(Kind::LongCriticalSections, "queue_lock")]);
}

#[test]
fn findings_are_ranked_by_what_they_cost() {
    // A coarse lock waited for 1.2 s, long critical sections 1.75 s, lock overhead on a
    // lock taken 5 million times a second (at 20 ns a pair, about 194 ms: 1.9% of the
    // 10 s of running time).
    let mut f = found(
        &table(vec![
            row("stats_lock", counts(2_000_000, 5000, 600_000, 2000)),
            row("config_lock", counts(30, 3, 350, 5_000_000)),
            row("counter_lock", counts(10_000_000, 5000, 0, 0)),
        ]),
        2,
    );
    rank(&mut f);
    assert_eq!(
        kinds(&f),
        [
            (Kind::LongCriticalSections, "config_lock"),
            (Kind::CoarseLock, "stats_lock"),
            (Kind::LockOverhead, "counter_lock"),
        ]
    );
    assert_eq!(f[0].cost_ns, 1_750_000_000);
    assert_eq!(f[1].cost_ns, 1_200_000_000);
    // The low edge of the estimate (2 standard errors of 5000 samples), 20 ns each.
    let low = 10_000_000.0 * (1.0 - 2.0 / 5000f64.sqrt());
    assert_eq!(f[2].cost_ns, (low * LOCK_PAIR_NS) as u64);
}

#[test]
fn contention_needs_pressure_contended_acquisitions_and_the_rate() {
    // 3 acquisitions, 1 contended: noise, however long the wait.
    let noise = found(&table(vec![row("a", counts(3, 1, 1, 5 * SECOND))]), 2);
    assert!(noise.is_empty(), "{noise:?}");
    // 19 contended (one short of the minimum), 20.
    let one = |c: Counts| found(&table(vec![row("a", c)]), 2);
    let f = one(counts(100, 1, 19, 100_000_000));
    assert!(f.is_empty(), "{f:?}");
    let f = one(counts(100, 1, 20, 100_000_000));
    assert_eq!(kinds(&f), [(Kind::LongCriticalSections, "a")]);
    // Pressure just under 1% (of 10 s), and at 1%.
    let f = one(counts(100, 1, 50, 1_999_999));
    assert!(f.is_empty(), "{f:?}");
    let f = one(counts(100, 1, 50, 2_000_000));
    assert_eq!(f.len(), 1);
    // A contention rate just under 10% (pressure 5%): not contended, and too rare for
    // overhead; at 10%.
    let f = one(counts(1001, 20, 100, 5_000_000));
    assert!(f.is_empty(), "{f:?}");
    let f = one(counts(1000, 20, 100, 5_000_000));
    assert_eq!(kinds(&f), [(Kind::LongCriticalSections, "a")]);
    // The rate threshold splits the two kinds: 1999 and 2000 acquisitions in 2 s.
    let f = one(counts(1999, 50, 500, 1_000_000));
    assert_eq!(f[0].kind, Kind::LongCriticalSections);
    let f = one(counts(2000, 50, 500, 1_000_000));
    assert_eq!(f[0].kind, Kind::CoarseLock);
}

/// Four threads computing two thirds of their work inside one mutex, which each holder
/// takes back before the woken waiters run: 2% of 100,000 acquisitions contended, but the
/// waiting is 68% of the running time. Long critical sections, never lock overhead,
/// however often it is taken.
#[test]
fn a_lock_whose_waiting_costs_a_tenth_is_contention_whatever_its_rate() {
    let c = counts(100_000, 400, 2_000, 3_400_000);
    let f = found(&table(vec![row("big", c.clone())]), 2);
    assert_eq!(kinds(&f), [(Kind::LongCriticalSections, "big")], "{f:?}");
    assert!((share(&f[0], "pressure") - 0.68).abs() < 1e-9);
    // Its running time made short enough for the taking to cost: still no overhead.
    let f = found(&table(briefly(vec![row("big", c)])), 2);
    assert!(
        f.iter().all(|f| f.kind != Kind::LockOverhead),
        "{:?}",
        kinds(&f)
    );
    // Pressure just under a tenth, contended under the threshold: neither.
    let f = found(
        &table(vec![row("big", counts(100_000, 400, 2_000, 499_999))]),
        2,
    );
    assert!(
        f.iter().all(|f| f.kind != Kind::LongCriticalSections),
        "{:?}",
        kinds(&f)
    );
}

#[test]
fn long_critical_sections_need_holds_as_long_as_the_waits() {
    // 350 waits of 5 ms behind holds of 1.25 ms with up to 2 waiters: 2 x 2.5 ms.
    let mut c = counts(30, 3, 350, 5_000_000);
    (
        c.runtime.timed_holds,
        c.runtime.contended_hold_ns,
        c.runtime.peak_waiters,
    ) = (100, 125_000_000, 2);
    let f = found(&table(vec![row("q", c.clone())]), 2);
    assert_eq!(kinds(&f), [(Kind::LongCriticalSections, "q")]);
    assert_eq!(f[0].value("hold_avg_ns"), Some(&Value::Ns(1_250_000)));
    // Holds of 1.2 ms: the waits were mostly for something else (a CPU).
    c.runtime.contended_hold_ns = 120_000_000;
    let f = found(&table(vec![row("q", c.clone())]), 2);
    assert!(f.is_empty(), "{f:?}");
    // A coarse lock needs no such proof: many acquisitions, mostly contended.
    c.runtime.acquisitions = 100_000;
    c.runtime.acquisition_samples = 400;
    c.runtime.contended = 60_000;
    c.runtime.wait_ns = 60_000 * 5_000_000;
    let f = found(&table(vec![row("q", c)]), 2);
    assert_eq!(kinds(&f), [(Kind::CoarseLock, "q")]);
}

#[test]
fn a_rare_locks_rate_made_too_high_by_its_estimate_needs_real_waiting() {
    // 2000 acquisitions, 100 contended (5%), estimated from 3 samples as 400 (25%): no
    // finding unless the waits cost, and then long holds are what it has.
    let f = found(&table(vec![row("a", counts(400, 3, 100, 100_000))]), 2);
    assert!(f.is_empty(), "pressure 0.1%: {f:?}");
    let mut c = counts(400, 3, 100, 2_000_000);
    (
        c.runtime.timed_holds,
        c.runtime.contended_hold_ns,
        c.runtime.peak_waiters,
    ) = (100, 99_000_000, 1);
    let f = found(&table(vec![row("a", c.clone())]), 2);
    assert!(f.is_empty(), "waits of 2 ms behind holds of 0.99 ms: {f:?}");
    c.runtime.contended_hold_ns = 100_000_000;
    let f = found(&table(vec![row("a", c)]), 2);
    assert_eq!(kinds(&f), [(Kind::LongCriticalSections, "a")]);
}

#[test]
fn an_uncontended_table_has_no_findings() {
    let t = table(vec![
        row("a", counts(500, 4, 0, 0)),
        row("b", counts(100, 2, 0, 0)),
        row("c", counts(0, 0, 0, 0)),
    ]);
    assert!(found(&t, 2).is_empty());
    assert!(found(&grouped(t.locks.clone(), "x[]"), 2).is_empty());
}

#[test]
fn frequent_uncontended_acquisitions_are_lock_overhead_at_the_low_edge_of_the_estimate() {
    // 4000 acquisitions in 2 s from 100 samples: 2000/s, 1600/s at two standard errors.
    let a = |c| table(briefly(vec![row("a", c)]));
    let f = found(&a(counts(4000, 100, 10, 1000)), 2);
    assert_eq!(kinds(&f), [(Kind::LockOverhead, "a")]);
    assert!((share(&f[0], "acquisitions_per_s_low") - 1600.0).abs() < 1e-6);
    // 2500 from 100 samples: 1250/s, but 1000/s is within the error.
    let f = found(&a(counts(2500, 100, 0, 0)), 2);
    assert_eq!(f.len(), 1, "exactly 1000/s at the low edge");
    let f = found(&a(counts(2490, 100, 0, 0)), 2);
    assert!(f.is_empty(), "{f:?}");
    // The same rate in 10 s of running time costs 0.06% of it: no problem (the rule asks 1%).
    let f = found(&table(vec![row("a", counts(4000, 100, 10, 1000))]), 2);
    assert!(f.is_empty(), "{f:?}");
    // A large estimate from 9 samples says nothing.
    let f = found(&table(vec![row("a", counts(900_000, 9, 0, 0))]), 2);
    assert!(f.is_empty(), "{f:?}");
    // Uncounted acquisitions say nothing either.
    let mut t = table(vec![row("a", counts(900_000, 1000, 0, 0))]);
    t.acquisitions_counted = false;
    assert!(found(&t, 2).is_empty());
}

#[test]
fn lock_overhead_is_found_only_through_the_group_and_not_again_for_members() {
    // 100 locks of 1500 acquisitions each in 2 s (750/s), 6 samples each.
    let members: Vec<LockRow> = briefly(
        (0..100)
            .map(|i| row(&format!("objects+{:#x}", i * 64), counts(1500, 6, 0, 0)))
            .collect(),
    );
    let f = found(&table(members.clone()), 2);
    assert!(f.is_empty(), "no member on its own: {f:?}");
    let t = grouped(members, "objects[]");
    let f = found(&t, 2);
    assert_eq!(kinds(&f), [(Kind::LockOverhead, "objects[]")]);
    assert_eq!(f[0].value("members_over_rate"), Some(&Value::Count(0)));
    assert!(
        f[0].text.contains("found only through the group"),
        "{}",
        f[0].text
    );
    // A member whose estimate is over the rate by 2 standard errors (2250/s from 16
    // samples) is, among 100, what chance gives one of them: not over on its own.
    let mut members = t.locks.clone();
    members[5].counts = counts(4500, 16, 0, 0);
    let f = found(&grouped(members, "objects[]"), 2);
    assert_eq!(f[0].value("members_over_rate"), Some(&Value::Count(0)));
    // A member over the rate on its own: the group's finding stands for it.
    let mut members = t.locks.clone();
    members[3].counts = counts(100_000, 400, 0, 0);
    let f = found(&grouped(members, "objects[]"), 2);
    assert_eq!(kinds(&f), [(Kind::LockOverhead, "objects[]")]);
    assert_eq!(f[0].value("members_over_rate"), Some(&Value::Count(1)));
}

/// A group of 16 buckets with `hot` acquisitions (`hot_contended` contended) of bucket 0
/// and `cold` (`cold_contended`) of each other one, 2 ms waits, 40 bytes apart.
fn buckets(hot: u64, hot_contended: u64, cold: u64, cold_contended: u64) -> LockTable {
    let mut locks = vec![row(
        "buckets",
        counts(hot, hot / 256, hot_contended, 200_000),
    )];
    for i in 1..16 {
        let c = counts(cold, cold / 256, cold_contended, 200_000);
        locks.push(row(&format!("buckets+{:#x}", i * 40), c));
    }
    grouped(locks, "buckets[]")
}

#[test]
fn a_hot_member_is_asymmetric_contention_and_nothing_else_of_its_group() {
    // Bucket 0: 30% of 256 000; the others 5% of 25 600 each.
    let t = buckets(256_000, 76_800, 25_600, 1280);
    let f = found(&t, 2);
    assert_eq!(kinds(&f), [(Kind::AsymmetricContention, "buckets[]")]);
    let f = &f[0];
    assert_eq!(name(f, "member"), "buckets");
    assert_eq!(name(f, "element"), "buckets[0]");
    assert!((share(f, "factor") - 6.0).abs() < 1e-9);
    assert_eq!(f.locks, ["buckets[]", "buckets"]);
    // The others as hot as bucket 0 is: a coarse group, no asymmetry.
    let f = found(&buckets(256_000, 76_800, 25_600, 7680), 2);
    assert_eq!(kinds(&f), [(Kind::CoarseLock, "buckets[]")]);
}

#[test]
fn asymmetry_must_hold_at_the_edges_of_the_estimates() {
    // Twice as contended by the point estimates (20% against 10%), but not beyond
    // their errors.
    let f = found(&buckets(25_600, 5120, 25_600, 2560), 2);
    assert!(
        f.iter().all(|f| f.kind != Kind::AsymmetricContention),
        "{f:?}"
    );
    // Three times: beyond them.
    let f = found(&buckets(25_600, 7680, 25_600, 2560), 2);
    assert_eq!(f[0].kind, Kind::AsymmetricContention, "{f:?}");
    // A hot member under the contention threshold is no problem.
    let f = found(&buckets(256_000, 12_800, 25_600, 128), 2);
    assert!(
        f.iter().all(|f| f.kind != Kind::AsymmetricContention),
        "{f:?}"
    );
}

#[test]
fn the_hottest_of_many_members_is_judged_beyond_its_chance_error() {
    // 100 buckets, 99 of them contended in 5% of 25 600 acquisitions each; bucket 0's
    // estimate (650 contended of ~4 000, from 16 samples) is hot beyond 2 standard errors
    // but, among 100 members, within what chance gives the hottest of them (3 errors).
    let members = |hot_contended: u64| {
        let mut locks = vec![row("buckets", counts(4000, 16, hot_contended, 200_000))];
        for i in 1..100 {
            let c = counts(25_600, 100, 1280, 200_000);
            locks.push(row(&format!("buckets+{:#x}", i * 40), c));
        }
        grouped(locks, "buckets[]")
    };
    let f = found(&members(650), 2);
    assert!(
        f.iter().all(|f| f.kind != Kind::AsymmetricContention),
        "{f:?}"
    );
    // Contended in every one of its acquisitions: hot beyond any chance error.
    let f = found(&members(4000), 2);
    assert!(
        f.iter().any(|f| f.kind == Kind::AsymmetricContention),
        "{f:?}"
    );
}

#[test]
fn array_elements_are_numbered_by_the_members_distances() {
    // A mutex at offset 8 of 72-byte elements, elements 0, 2 and 3.
    let locks = ["w+0x8", "w+0x98", "w+0xe0"]
        .iter()
        .map(|n| row(n, Counts::default()))
        .collect();
    let t = grouped(locks, "w[]");
    let g = &t.groups[0];
    let names: Vec<Option<String>> = (0..3).map(|m| element_name(&t, g, m)).collect();
    assert_eq!(
        names,
        [
            Some("w[0]".into()),
            Some("w[2]".into()),
            Some("w[3]".into())
        ]
    );
    let mut t = t;
    t.locks[1].naming = Naming::InitSite;
    assert_eq!(element_name(&t, &t.groups[0], 0), None);
}

fn trylocks(failed: u64, acquired: u64, acquisitions: u64, contended: u64) -> Counts {
    let mut c = counts(acquisitions, acquisitions / 256, contended, 1000);
    (c.runtime.try_failed, c.runtime.try_acquired) = (failed, acquired);
    c
}

#[test]
fn many_failed_trylocks_per_acquisition_are_a_trylock_spin_named_by_its_site() {
    let mut r = row("slot_lock", trylocks(30_000_000, 50, 100, 0));
    r.detail_mut().try_site = Some(site("poll_for_slot", "pthread_mutex_trylock"));
    let f = found(&table(vec![r.clone()]), 2);
    assert_eq!(kinds(&f), [(Kind::TrylockSpin, "slot_lock")]);
    assert_eq!(
        name(&f[0], "site"),
        "poll_for_slot -> pthread_mutex_trylock"
    );
    assert!(f[0].fix.contains("{site}"));
    // Several sites (or an older profile): found, naming none.
    r.detail_mut().try_site = None;
    let f = found(&table(vec![r]), 2);
    assert_eq!(kinds(&f), [(Kind::TrylockSpin, "slot_lock")]);
    assert_eq!(f[0].value("site"), None);
    assert!(!f[0].fix.contains('{'), "{}", f[0].fix);
}

#[test]
fn a_trylock_before_blocking_is_no_spin() {
    // Each contended acquisition tried once first: 75% of tries fail, one failure per
    // contended acquisition (a coarse lock, not a spin).
    let f = found(
        &table(vec![row(
            "stats",
            trylocks(750_000, 250_000, 1_000_000, 750_000),
        )]),
        2,
    );
    assert_eq!(kinds(&f), [(Kind::CoarseLock, "stats")]);
    // The same with the acquisitions under-estimated: the contended ones bound them.
    let f = found(&table(vec![row("stats", trylocks(7000, 10, 100, 6990))]), 2);
    assert!(f.iter().all(|f| f.kind != Kind::TrylockSpin), "{f:?}");
    // 1999 failures in 2 s: under the rate; half the tries fail, twice per acquisition.
    let f = found(&table(vec![row("t", trylocks(1999, 1999, 999, 0))]), 2);
    assert!(f.is_empty(), "{f:?}");
    let f = found(&table(vec![row("t", trylocks(2000, 2000, 1000, 0))]), 2);
    assert_eq!(kinds(&f), [(Kind::TrylockSpin, "t")]);
    let f = found(&table(vec![row("t", trylocks(2000, 2001, 1000, 0))]), 2);
    assert!(f.is_empty(), "under half: {f:?}");
    let f = found(&table(vec![row("t", trylocks(2000, 2000, 1001, 0))]), 2);
    assert!(f.is_empty(), "under two per acquisition: {f:?}");
    // Without counted acquisitions nothing tells a spin from a try before blocking.
    let mut t = table(vec![row("t", trylocks(2_000_000, 0, 0, 0))]);
    t.acquisitions_counted = false;
    assert!(found(&t, 2).is_empty());
}

#[test]
fn no_lock_data_no_wall_time_no_lock_findings() {
    let t = table(vec![row(
        "stats_lock",
        counts(2_000_000, 5000, 600_000, 2000),
    )]);
    assert!(lock_findings(&t, &HashMap::new(), Thresholds::default()).is_empty());
    let old = LockTable::default();
    assert!(found(&old, 2).is_empty());
}

#[test]
fn events_are_not_locks() {
    let mut r = row("not_full", counts(0, 0, 5000, 1_000_000));
    r.kind = Some(WaitKind::CondVar);
    r.pressure = None;
    assert!(found(&table(vec![r]), 2).is_empty());
}

#[test]
fn a_futex_word_whose_waits_nobody_ends_is_no_lock() {
    // 40,000 waits of 25 us (1 s of 10 s), a tenth of it blamed on wakes: the word is
    // polled (its waits time out, or find its value changed), not held.
    let mut r = row("stress-ng+0x73320 -> syscall", counts(0, 0, 40_000, 25_000));
    r.kind = Some(WaitKind::Futex);
    r.counts.blame_ns = 100_000_000;
    // Called by a stripped binary: its use does not say it is no lock's.
    r.counts.lock_use_ns = r.counts.runtime.wait_ns;
    assert!(!waits_for_a_lock(WaitKind::Futex, &r.counts));
    assert!(found(&table(vec![r.clone()]), 2).is_empty());
    // Woken by its holders' releases, it is a lock.
    r.counts.blame_ns = 900_000_000;
    assert!(waits_for_a_lock(WaitKind::Futex, &r.counts));
    assert_eq!(found(&table(vec![r.clone()]), 2).len(), 1);
    // Its callers' names say it is an event's (a channel's, a thread parker's): no lock.
    r.counts.lock_use_ns = r.counts.runtime.wait_ns / 2;
    assert!(!waits_for_a_lock(WaitKind::Futex, &r.counts));
    // Whatever the blame and the names, a mutex is a lock.
    r.counts.blame_ns = 0;
    assert!(waits_for_a_lock(WaitKind::Mutex, &r.counts));
}

#[test]
fn a_condition_variable_a_lock_is_built_on_waits_for_a_lock_but_gets_no_lock_finding() {
    // CPython's GIL: a condition variable waited on by `take_gil`.
    let mut r = row(
        "take_gil -> pthread_cond_timedwait",
        counts(0, 0, 5000, 1_000_000),
    );
    r.kind = Some(WaitKind::CondVar);
    assert!(!waits_for_a_lock(WaitKind::CondVar, &r.counts));
    r.counts.lock_use_ns = r.counts.runtime.wait_ns;
    assert!(waits_for_a_lock(WaitKind::CondVar, &r.counts));
    // Its holders are not known (whoever signals it took no lock the runtime saw): the
    // advice of the lock findings (split it, shorten its holds) is not for it.
    assert!(found(&table(vec![r]), 2).is_empty());
}

/// A phase from `start_ms` to `end_ms`, in a timeline of 1 ms intervals.
fn phase(start_ms: u64, end_ms: u64, pressure: f64, high: bool) -> Phase {
    Phase {
        start: start_ms as usize,
        end: end_ms as usize,
        high,
        pressure,
    }
}

/// The findings of a timeline of 1 ms intervals whose one lock has `phases`.
fn phased(phases: Vec<Phase>) -> Vec<Finding> {
    let intervals = phases.last().map_or(0, |p| p.end);
    let lock = LockSeries {
        pid: PID,
        address: 0x1000,
        name: "phase_lock".into(),
        kind: Some(WaitKind::Mutex),
        wait_ns: Vec::new(),
        blame_ns: Vec::new(),
        acquisitions: None,
        try_failed: None,
        pressure: Vec::new(),
        phases,
        overall_pressure: 0.3,
        peak_pressure: 0.0,
    };
    let timeline = Timeline {
        interval_ns: 1_000_000,
        intervals,
        origin_ns: 0,
        end_ns: intervals as u64 * 1_000_000,
        threshold: 0.1,
        running_ns: Vec::new(),
        work_ns: Vec::new(),
        wait_ns: Vec::new(),
        locks: vec![lock],
        threads: Vec::new(),
        timed: true,
        acquisitions_known: false,
    };
    phase_findings(&timeline)
}

#[test]
fn a_lock_high_in_part_of_the_run_is_phased() {
    let f = phased(vec![
        phase(0, 1000, 0.6, true),
        phase(1000, 2000, 0.001, false),
    ]);
    assert_eq!(kinds(&f), [(Kind::PhasedContention, "phase_lock")]);
    assert_eq!(f[0].lock_kind, Some(WaitKind::Mutex));
    assert!((share(&f[0], "high_share_of_run") - 0.5).abs() < 1e-9);
    assert_eq!(
        f[0].value("first_high_end_ns"),
        Some(&Value::Ns(1_000_000_000))
    );
    // High 80% of the run: not a phase, the lock's contention throughout.
    let f = phased(vec![phase(0, 800, 0.6, true), phase(800, 1000, 0.0, false)]);
    assert!(f.is_empty(), "{f:?}");
    let f = phased(vec![phase(0, 799, 0.6, true), phase(799, 1000, 0.0, false)]);
    assert_eq!(f.len(), 1);
    // Only high, only low, none (an older profile).
    assert!(phased(vec![phase(0, 1000, 0.6, true)]).is_empty());
    assert!(phased(vec![phase(0, 1000, 0.01, false)]).is_empty());
    assert!(phased(Vec::new()).is_empty());
}

/// A thread of `routine` that lived 2 s.
fn load(tid: u32, routine: &str, work_ms: u64, wait_ms: u64) -> ThreadLoad {
    ThreadLoad {
        pid: PID,
        tid,
        routine: routine.to_owned(),
        work_ns: work_ms * 1_000_000,
        wait_ns: wait_ms * 1_000_000,
        blame_ns: 0,
        role_callee: None,
        start_ns: Some(0),
        life_ns: Some(2 * SECOND),
    }
}

/// `l` having ended `blame_ms` of others' waiting by its wakes.
fn blaming(l: ThreadLoad, blame_ms: u64) -> ThreadLoad {
    ThreadLoad {
        blame_ns: blame_ms * 1_000_000,
        ..l
    }
}

/// [`load`] for a thread that lived `life_ms`.
fn lived(tid: u32, work_ms: u64, wait_ms: u64, life_ms: u64) -> ThreadLoad {
    ThreadLoad {
        life_ns: Some(life_ms * 1_000_000),
        ..load(tid, "w", work_ms, wait_ms)
    }
}

#[test]
fn a_stage_waiting_while_another_computes_is_imbalance_with_a_split_by_work() {
    let loads = [
        load(1, "parse", 130, 1800),
        load(2, "parse", 130, 1800),
        load(3, "parse", 130, 1800),
        blaming(load(4, "render", 520, 40), 1800),
        blaming(load(5, "render", 520, 40), 1800),
        blaming(load(6, "render", 520, 40), 1800),
    ];
    let f = imbalance_findings(&loads);
    assert_eq!(kinds(&f), [(Kind::LoadImbalance, "parse vs render")]);
    let split = f[0].value("suggested_threads");
    let want = vec![("parse".to_owned(), 1), ("render".to_owned(), 5)];
    assert_eq!(split, Some(&Value::Threads(want)));
    // The computing stage waiting 10%, and just over.
    let mut loads = loads;
    for l in &mut loads[3..] {
        l.wait_ns = l.work_ns / 9;
    }
    assert_eq!(imbalance_findings(&loads).len(), 1);
    for l in &mut loads[3..] {
        l.wait_ns += 1_000_000;
    }
    assert!(imbalance_findings(&loads).is_empty());
    // A stage computing beside it that made nobody wait (an auditor of its own data) is
    // not what the parsers wait for.
    for l in &mut loads[3..] {
        l.wait_ns = 40_000_000;
        l.blame_ns = 0;
    }
    assert!(imbalance_findings(&loads).is_empty());
}

#[test]
fn the_waiting_stage_is_paired_with_the_stage_it_waits_for() {
    // Workers wait for orders a dispatcher sends (its wakes: their waiting), beside an
    // auditor computing more than the dispatcher but waking them less.
    let mut loads = vec![
        blaming(load(1, "dispatcher", 400, 20), 2600),
        blaming(load(2, "auditor", 490, 0), 1000),
    ];
    loads.extend((3..6).map(|i| load(i, "worker", 150, 1400)));
    let f = imbalance_findings(&loads);
    assert_eq!(kinds(&f), [(Kind::LoadImbalance, "worker vs dispatcher")]);
    assert_eq!(
        f[0].cost_ns, 2_600_000_000,
        "the waiting the dispatcher made"
    );
    assert!(f[0].fix.contains("the serial bottleneck"), "{}", f[0].fix);
}

fn stage<'a>(routine: &'a str, threads: &'a [ThreadLoad], work_ns: u64) -> Stage<'a> {
    Stage {
        routine,
        threads: threads.iter().collect(),
        work_ns,
        wait_ns: 0,
        blame_ns: 0,
    }
}

#[test]
fn a_split_keeps_the_thread_count_and_a_thread_per_stage() {
    let loads: Vec<ThreadLoad> = (0..3).map(|i| load(i, "x", 1, 0)).collect();
    let seats = |stages: &[Stage]| -> Vec<u64> {
        let stages: Vec<&Stage> = stages.iter().collect();
        split_threads(&stages).iter().map(|s| s.1).collect()
    };
    let stages = [
        stage("a", &loads[..1], 1),
        stage("b", &loads[1..2], 1),
        stage("c", &loads[2..], 1_000_000),
    ];
    assert_eq!(seats(&stages), [1, 1, 1], "one each, however little work");
    let stages = [stage("a", &loads[..2], 3), stage("b", &loads[2..], 1)];
    assert_eq!(seats(&stages), [2, 1]);
    let stages = [stage("a", &loads[..1], 1), stage("b", &loads[1..], 3)];
    assert_eq!(seats(&stages), [1, 2]);
}

#[test]
fn balanced_stages_and_threads_are_no_imbalance() {
    // All waiting alike (a latency-bound pipeline), or all computing.
    let f = imbalance_findings(&[load(1, "parse", 130, 1800), load(2, "render", 500, 900)]);
    assert!(f.is_empty(), "{f:?}");
    let f = imbalance_findings(&[
        load(1, "w", 790, 0),
        load(2, "w", 785, 0),
        load(3, "w", 821, 0),
        load(4, "x", 10, 0),
    ]);
    assert!(f.is_empty(), "{f:?}");
    // Short stages: their time is too short to tell.
    let f = imbalance_findings(&[load(1, "a", 1, 90), load(2, "b", 90, 0)]);
    assert!(f.is_empty(), "{f:?}");
    // A dispatcher waiting for requests while two workers compute: it already has the
    // one thread the split would give it.
    let f = imbalance_findings(&[
        load(1, "dispatch", 50, 1900),
        load(2, "work", 1900, 50),
        load(3, "work", 1900, 50),
    ]);
    assert!(f.is_empty(), "{f:?}");
}

#[test]
fn a_serial_stage_is_not_just_given_threads() {
    // One reader thread computing while four workers wait for its items: the bottleneck is
    // the one thread; more threads for it are advice only if its work can be split.
    let mut loads = vec![blaming(load(1, "read_input", 1900, 50), 6000)];
    loads.extend((2..6).map(|i| load(i, "work", 300, 1600)));
    let f = imbalance_findings(&loads);
    assert_eq!(kinds(&f), [(Kind::LoadImbalance, "work vs read_input")]);
    let fix = &f[0].fix;
    assert!(
        fix.starts_with("{computing_stage} is one thread computing while")
            && fix.contains("if its work can be split"),
        "{fix}"
    );
}

#[test]
fn an_idle_pool_and_stages_one_after_another_are_no_imbalance() {
    // Four threads filling, then four reading (db_bench's fillrandom,readrandom), beside a
    // pool that never computed: the pool waits for no stage, and neither stage for the
    // other.
    let at = |l: ThreadLoad, start_ms: u64, life_ms: u64| ThreadLoad {
        start_ns: Some(start_ms * 1_000_000),
        life_ns: Some(life_ms * 1_000_000),
        ..l
    };
    let mut loads: Vec<ThreadLoad> = (0..4)
        .map(|i| at(load(i, "fill", 150, 800), 0, 1000))
        .chain((4..8).map(|i| at(blaming(load(i, "read", 400, 10), 800), 1000, 420)))
        .collect();
    assert!(imbalance_findings(&loads).is_empty());
    loads.extend((8..40).map(|i| at(load(i, "pool", 0, 1400), 0, 1400)));
    let f = imbalance_findings(&loads);
    assert!(f.is_empty(), "{f:?}");
    // The same stages side by side: the fill stage waits while the read stage computes.
    for l in &mut loads[4..8] {
        l.start_ns = Some(0);
    }
    let f = imbalance_findings(&loads);
    assert_eq!(kinds(&f), [(Kind::LoadImbalance, "fill vs read")]);
    // Split between the two working stages only: the pool is none of theirs.
    let want = vec![("fill".to_owned(), 2), ("read".to_owned(), 6)];
    assert_eq!(f[0].value("suggested_threads"), Some(&Value::Threads(want)));
}

#[test]
fn threads_of_one_routine_with_uneven_work_are_imbalance() {
    // The lighter thread ended sooner (fork-join), or waited (a barrier).
    let f = imbalance_findings(&[lived(1, 400, 0, 1800), lived(2, 600, 0, 2000)]);
    assert_eq!(kinds(&f), [(Kind::LoadImbalance, "w")]);
    assert_eq!(f[0].value("max_work_tid"), Some(&Value::Id(2)));
    let f = imbalance_findings(&[lived(1, 400, 100, 2000), lived(2, 600, 0, 2000)]);
    assert_eq!(f.len(), 1);
    // Unequal shares of the CPUs, both runnable all along: the scheduler's doing.
    let f = imbalance_findings(&[lived(1, 400, 99, 2000), lived(2, 600, 0, 2000)]);
    assert!(f.is_empty(), "{f:?}");
    // 20% more exactly: not more than 20%.
    let f = imbalance_findings(&[lived(1, 500, 0, 1000), lived(2, 600, 0, 2000)]);
    assert!(f.is_empty(), "{f:?}");
    // Over 20% but under 50 ms.
    let f = imbalance_findings(&[lived(1, 100, 0, 1000), lived(2, 149, 0, 2000)]);
    assert!(f.is_empty(), "{f:?}");
    // Threads that mostly wait have time to spare, whatever their work.
    let f = imbalance_findings(&[lived(1, 260, 1700, 2000), lived(2, 400, 1500, 2000)]);
    assert!(f.is_empty(), "{f:?}");
    // One thread.
    assert!(imbalance_findings(&[load(1, "w", 100, 0)]).is_empty());
}

/// A process of stages `parse` (three threads waiting on a condition variable most of
/// their time) and `render` (two computing, whose signals end that waiting: its blame), its
/// main thread waiting to join them: read from its samples, through [`findings`].
#[test]
fn stages_are_read_from_the_samples_without_joins_or_the_main_thread() {
    use crate::attribution::testutil::{add_flagged, app, process};
    use crate::format::read::ThreadInfo;
    let ms = 1_000_000;
    let mut p = process(PID, &["work", "idleness", "blame"]);
    p.version = crate::format::FORMAT_VERSION;
    let stage = |tid, routine| ThreadInfo {
        tid,
        start_routine: Some(app(routine)),
        start_ns: Some(0),
        end_ns: Some(2 * SECOND),
        ..Default::default()
    };
    p.threads
        .extend([stage(11, 0x60), stage(12, 0x60), stage(13, 0x60)]);
    p.threads.extend([stage(21, 0x70), stage(22, 0x70)]);
    let condvar = WaitKind::CondVar.flags();
    let join = WaitKind::Join.flags();
    for tid in [11, 12, 13] {
        add_flagged(&mut p, tid, 0, &[app(0x60)], 100 * ms, 0);
        add_flagged(&mut p, tid, 1, &[app(0x60)], 900 * ms, condvar);
    }
    for tid in [21, 22] {
        add_flagged(&mut p, tid, 0, &[app(0x70)], 1500 * ms, 0);
        // A join does not count: it would make the renderers wait as long.
        add_flagged(&mut p, tid, 1, &[app(0x70)], 1500 * ms, join);
        add_flagged(&mut p, tid, 2, &[app(0x70)], 1350 * ms, condvar);
        // Nor a thread's end, blamed for its joiner's waiting.
        add_flagged(&mut p, tid, 2, &[app(0x70)], SECOND, join);
    }
    // Main waits 2 s in joins: not a stage, and no waiting.
    add_flagged(&mut p, PID, 1, &[app(0x30)], 2 * SECOND, join);
    let profile = Profile {
        path: "test".into(),
        processes: vec![p],
        skipped: Vec::new(),
    };
    let found = findings(
        &profile,
        Filter::default(),
        &LockTable::default(),
        None,
        Thresholds::default(),
        &mut Symbolizer::new(),
    )
    .expect("findings");
    assert_eq!(found.len(), 1, "{found:?}");
    let f = &found[0];
    assert_eq!(f.kind, Kind::LoadImbalance);
    assert_eq!(f.value("waiting_stage_share"), Some(&Value::Share(0.9)));
    assert_eq!(f.value("computing_stage_share"), Some(&Value::Share(0.0)));
    assert_eq!(
        f.value("computing_stage_work_ns"),
        Some(&Value::Ns(3 * SECOND))
    );
    assert_eq!(
        f.value("computing_stage_blame_ns"),
        Some(&Value::Ns(2700 * ms)),
        "the renderers' signals, not their ends"
    );
    // 300 ms of parsing against 3 s of rendering: one parser, four renderers.
    let Some(Value::Threads(split)) = f.value("suggested_threads") else {
        panic!("{f:?}");
    };
    let seats: Vec<u64> = split.iter().map(|s| s.1).collect();
    assert_eq!(seats, [1, 4], "{split:?}");
}

/// Every `{key}` of a finding's words names an entry of its evidence.
#[test]
fn templates_name_only_their_evidence() {
    let mut r = row("slot_lock", trylocks(30_000_000, 50, 100, 0));
    r.detail_mut().try_site = Some(site("poll_for_slot", "pthread_mutex_trylock"));
    let mut all = found(&table(vec![r]), 2);
    let mut cs = row("config_lock", counts(30, 3, 350, 5_000_000));
    (
        cs.counts.runtime.timed_holds,
        cs.counts.runtime.contended_hold_ns,
    ) = (10, 50_000_000);
    all.extend(found(&table(vec![cs]), 2));
    all.extend(found(&buckets(256_000, 76_800, 25_600, 1280), 2));
    all.extend(found(&buckets(256_000, 76_800, 25_600, 7680), 2));
    let members = briefly(
        (0..100)
            .map(|i| row(&format!("o+{:#x}", i * 64), counts(1500, 6, 0, 0)))
            .collect(),
    );
    all.extend(found(&grouped(members, "o[]"), 2));
    all.extend(phased(vec![
        phase(0, 1000, 0.6, true),
        phase(1000, 2000, 0.0, false),
    ]));
    all.extend(imbalance_findings(&[
        load(1, "p", 130, 1800),
        blaming(load(2, "r", 520, 40), 900),
        blaming(load(3, "r", 300, 40), 900),
    ]));
    all.extend(imbalance_findings(&[
        lived(4, 400, 0, 1800),
        lived(5, 600, 0, 2000),
    ]));
    let kinds: HashSet<Kind> = all.iter().map(|f| f.kind).collect();
    assert_eq!(kinds.len(), 7, "every kind: {kinds:?}");
    for f in &all {
        for words in [&f.text, &f.fix] {
            let mut rest = words.as_str();
            while let Some(open) = rest.find('{') {
                let close = rest[open..].find('}').expect("closed") + open;
                let key = &rest[open + 1..close];
                assert!(f.value(key).is_some(), "{:?}: no {key} for {words}", f.kind);
                rest = &rest[close + 1..];
            }
        }
    }
}
