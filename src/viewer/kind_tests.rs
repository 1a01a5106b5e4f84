//! Tests of the views and the summary on profiles whose samples say what threads waited on
//! (see `testutil::kinds_process`: idleness 10.75 ms = mutex 7 + condvar 3.5 + 0.25 kind-less,
//! 0.75 unblamed; blame 8.3 ms = mutex 6.3 + condvar 2; work 10 ms).

use super::tests::{render, report_args};
use super::text::Text;
use super::*;
use crate::attribution::testutil::{
    analyze_renamed, kinds_process, lock_process, set_line, write_part, TempDir,
};
use crate::attribution::Analysis;
use crate::cli;
use crate::cli::flamegraph::FlamegraphArgs;
use crate::cli::profile::ProfileArgs;
use crate::cli::report::{OutputFormat, ReportArgs, ViewChoice};
use crate::format::read::{ProcessProfile, Profile};
use crate::format::WaitKind;
use serde_json::Value;
use std::path::PathBuf;

fn analysis_of(p: ProcessProfile) -> Analysis {
    let mut a = analyze_renamed(&Profile {
        path: "blameprof-kinds".into(),
        processes: vec![p],
        skipped: Vec::new(),
    });
    set_line(&mut a, "lookup", "/src/table.c", 42);
    set_line(&mut a, "insert", "/src/table.c", 57);
    a
}

/// [`lock_process`] with every idleness and blame sample marked as a wait of `kind`.
fn waits_of(kind: WaitKind) -> ProcessProfile {
    let mut p = lock_process();
    for s in p.samples.iter_mut().filter(|s| s.metric != 0) {
        s.flags |= kind.flags();
    }
    p
}

fn summary_of(a: &Analysis) -> String {
    let mut out = Vec::new();
    summary::write(a, None, 5, style::Paint::none(), &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// The kinds profile written to disk by the runtime's encoder (names stay unrenamed).
fn kinds_dir(tmp: &TempDir) -> PathBuf {
    let dir = tmp.0.join("blameprof-kinds");
    std::fs::create_dir_all(&dir).unwrap();
    write_part(&dir, &kinds_process());
    dir
}

fn cli_report(args: &ReportArgs) -> anyhow::Result<String> {
    let mut out = Vec::new();
    cli::report::report(args, &mut out)?;
    Ok(String::from_utf8(out).unwrap())
}

#[test]
fn summary_breaks_waiting_down_by_primitive() {
    let text = summary_of(&analysis_of(kinds_process()));
    let lines: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("waiting for locks"))
        .take(5)
        .collect();
    // Lock waiting: mutex 7 ms and the kind-less 0.25 ms; events: condvar 3.5 ms.
    assert_eq!(
        lines,
        [
            "blameprof: waiting for locks: idleness 7.25 ms = 34.9% of effort, blame 6.30 ms \
             = 30.4% (effort = work + idleness = 20.75 ms)",
            "blameprof: waiting for events, not locks: 3.50 ms = 16.9% of effort (condvar \
             3.50 ms): threads idle until signalled, posted or joined, not contention; by call \
             path: 'blameprof report --metrics idleness.condvar'",
            "blameprof: waiting by primitive: mutex 65.1% (7.00 ms), condvar 32.6% (3.50 ms); \
             unblamed 750.00 us (timed out/interrupted/spurious)",
            "blameprof: blame by primitive: mutex 75.9% (6.30 ms), condvar 24.1% (2.00 ms)",
            "blameprof: top 3 waiters for locks (victims) by idleness, % of effort:",
        ],
        "{text}"
    );
    // The condition variable's waiters and its signaller are listed apart, after the
    // culprits, which hold the mutex's blame alone.
    let listed = |heading: &str| -> Vec<&str> {
        text.lines()
            .skip_while(|l| !l.contains(heading))
            .take_while(|l| l.contains(heading) || l.starts_with("blameprof:   "))
            .collect()
    };
    assert_eq!(
        listed("culprits"),
        [
            "blameprof: top 2 culprits (perpetrators) by blame, % of effort:",
            "blameprof:    23.1%    4.80 ms  insert  (pthread_mutex_unlock)  table.c:57",
            "blameprof:     7.2%    1.50 ms  lookup  (pthread_mutex_unlock)  table.c:42",
        ],
        "{text}"
    );
    assert_eq!(
        listed("waits for events"),
        [
            "blameprof: top 2 waits for events by idleness, % of effort:",
            "blameprof:    14.5%    3.00 ms  lookup  (pthread_cond_wait)  table.c:42",
            "blameprof:     2.4%  500.00 us  insert  (pthread_cond_wait)  table.c:57",
        ],
        "{text}"
    );
    assert_eq!(
        listed("wakers"),
        [
            "blameprof: top 1 wakers of those waits (or their work meanwhile) by blame, % of effort:",
            "blameprof:     9.6%    2.00 ms  insert  (pthread_cond_signal)  table.c:57",
        ],
        "{text}"
    );
}

/// A program that waited for events alone (joins) has no lock headline, no victims and no
/// culprits: its waiting is said as events'.
#[test]
fn summary_of_event_waiting_alone_names_no_culprit() {
    let events = waits_of(WaitKind::Join);
    let text = summary_of(&analysis_of(events));
    for absent in ["waiting for locks", "victims", "culprits", "lock blame"] {
        assert!(!text.contains(absent), "{absent}: {text}");
    }
    assert!(
        text.contains(
            "blameprof: waiting for events, not locks: 7.00 ms = 43.8% of effort (join \
             7.00 ms)"
        ),
        "{text}"
    );
    assert!(
        text.contains("top 2 waits for events by idleness"),
        "{text}"
    );
    assert!(
        text.contains("blameprof: waiting by call path: 'blameprof report --metrics idleness,"),
        "{text}"
    );
}

#[test]
fn summary_breaks_down_all_but_a_single_kind_of_lock() {
    // Mutex waits only: the headline says it all, and the summary reads exactly as for a
    // profile without kinds.
    let mutexes = waits_of(WaitKind::Mutex);
    let a = analysis_of(mutexes);
    assert!(a.metrics.id("idleness.mutex").is_ok());
    let text = summary_of(&a);
    assert!(!text.contains("by primitive"), "{text}");
    assert_eq!(text, summary_of(&analysis_of(lock_process())));

    // Two kinds of lock: broken down (thread 101 spins, 102 blocks).
    let mut two_locks = lock_process();
    for s in two_locks.samples.iter_mut().filter(|s| s.metric != 0) {
        let kind = match s.tid {
            101 => WaitKind::Spin,
            _ => WaitKind::Mutex,
        };
        s.flags |= kind.flags();
    }
    let text = summary_of(&analysis_of(two_locks));
    assert!(
        text.contains(
            "blameprof: waiting by primitive: spin 85.7% (6.00 ms), mutex 14.3% (1.00 ms)\n\
             blameprof: blame by primitive: mutex 76.2% (4.80 ms), spin 23.8% (1.50 ms)\n"
        ),
        "{text}"
    );

    // Mutex waits, one of which timed out: the unblamed part is worth a line.
    let mut timed_out = lock_process();
    for s in timed_out.samples.iter_mut().filter(|s| s.metric != 0) {
        s.flags |= WaitKind::Mutex.flags();
        if s.metric == 1 && s.tid == 102 {
            s.flags |= crate::format::SAMPLE_UNBLAMED;
        }
    }
    let text = summary_of(&analysis_of(timed_out));
    assert!(
        text.contains(
            "blameprof: waiting by primitive: mutex 100.0% (7.00 ms); \
             unblamed 1.00 ms (timed out/interrupted/spurious)\n\
             blameprof: blame by primitive: mutex 100.0% (6.30 ms)\n"
        ),
        "{text}"
    );

    // One kind that is no lock: broken down, even alone.
    let barrier = waits_of(WaitKind::Barrier);
    let text = summary_of(&analysis_of(barrier));
    assert!(
        text.contains("blameprof: waiting by primitive: barrier 100.0% (7.00 ms)\n"),
        "{text}"
    );
    assert!(
        text.contains("blameprof: blame by primitive: barrier 100.0% (6.30 ms)\n"),
        "{text}"
    );
}

#[test]
fn text_header_lists_derived_totals_and_threads_keep_the_base_metrics() {
    let a = analysis_of(kinds_process());
    let text = render(&Report::new(&a, View::Threads, 0, Prune::default()), &Text);
    assert!(
        text.contains(
            "totals:     work 10.00 ms, idleness 10.75 ms, blame 8.30 ms, root 8.30 ms; \
             effort (work + idleness) 20.75 ms\n\
             by kind:    idleness.mutex 7.00 ms, idleness.condvar 3.50 ms, \
             idleness.unblamed 750.00 us, blame.mutex 6.30 ms, blame.condvar 2.00 ms\n"
        ),
        "{text}"
    );
    let heading = text.lines().find(|l| l.contains("start routine")).unwrap();
    assert_eq!(
        heading.split_whitespace().collect::<Vec<_>>(),
        ["pid", "tid", "work", "idleness", "blame", "root", "name", "start", "routine"]
    );
    // Without kinds, no such line.
    let plain = analysis_of(lock_process());
    let text = render(
        &Report::new(&plain, View::Threads, 0, Prune::default()),
        &Text,
    );
    assert!(!text.contains("by kind:"), "{text}");
}

#[test]
fn cli_report_and_flamegraph_by_derived_metric() {
    let tmp = TempDir::new("view-kinds");
    let dir = kinds_dir(&tmp);
    let mut args = report_args(dir.clone());
    args.metrics = vec!["idleness.condvar".into()];
    let text = cli_report(&args).unwrap();
    assert!(
        text.contains(
            "metric:     idleness.condvar (ns): time threads waited on condition variables, \
             at the waiter; total 3.50 ms"
        ),
        "{text}"
    );
    // Only condition-variable waits: the lookup and insert waits in pthread_cond_wait
    // (3 and 0.5 ms, the latter unblamed) and main's 0.25 ms unblamed kind-less wait is not.
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.ends_with("    function"))
        .skip(1)
        .collect();
    let waits: Vec<&str> = rows
        .iter()
        .copied()
        .filter(|r| r.contains("libblameprof_rt.so+0x500"))
        .collect();
    assert_eq!(waits.len(), 2, "{text}");
    assert!(
        waits[0].starts_with("   3.00 ms  85.7%     3.00 ms  85.7%"),
        "{text}"
    );
    assert!(
        waits[1].starts_with(" 500.00 us  14.3%   500.00 us  14.3%"),
        "{text}"
    );
    assert!(
        !text.contains("0x30"),
        "main has no condvar waiting: {text}"
    );

    // JSON: the derived metrics are listed, totalled and in every node.
    let mut args = report_args(dir.clone());
    args.format = OutputFormat::Json;
    args.view = ViewChoice::Flat;
    args.metric = Some("idleness.condvar".into());
    let doc: Value = serde_json::from_str(&cli_report(&args).unwrap()).unwrap();
    assert_eq!(doc["metric"], "idleness.condvar");
    let names: Vec<&str> = doc["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "work",
            "idleness",
            "blame",
            "root",
            "idleness.mutex",
            "idleness.condvar",
            "idleness.unblamed",
            "blame.mutex",
            "blame.condvar"
        ]
    );
    assert_eq!(doc["metrics"][5]["unit"], "ns");
    assert_eq!(doc["totals"]["idleness.condvar"], 3_500_000);
    assert_eq!(doc["totals"]["idleness.unblamed"], 750_000);
    let wait = &doc["roots"][0];
    assert!(
        wait["function"].as_str().unwrap().ends_with("+0x500"),
        "{wait}"
    );
    assert_eq!(wait["exclusive"]["idleness.condvar"], 3_500_000);
    assert_eq!(wait["exclusive"]["idleness.unblamed"], 750_000);
    assert_eq!(wait["exclusive"]["idleness"], 3_750_000);
    assert_eq!(wait["exclusive"]["idleness.mutex"], 0);
    let thread = doc["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tid"] == 102)
        .unwrap();
    assert_eq!(thread["totals"]["blame.condvar"], 2_000_000);

    // A kind that did not occur is unknown, and the message lists the derived ones.
    let mut args = report_args(dir.clone());
    args.metric = Some("blame.rwlock".into());
    let err = cli_report(&args).unwrap_err().to_string();
    assert!(
        err.contains(
            "unknown metric 'blame.rwlock': this profile has work, idleness, blame, root, \
             idleness.mutex, idleness.condvar, idleness.unblamed, blame.mutex, blame.condvar"
        ),
        "{err}"
    );
    // ... as in a selection without it (thread 101 was never unblamed).
    let mut args = report_args(dir.clone());
    args.metric = Some("idleness.unblamed".into());
    args.thread = Some(101);
    let err = cli_report(&args).unwrap_err().to_string();
    assert!(err.contains("unknown metric 'idleness.unblamed'"), "{err}");

    let output = tmp.0.join("condvar.svg");
    cli::flamegraph::flamegraph(&FlamegraphArgs {
        metric: "blame.condvar".into(),
        output: output.clone(),
        thread: None,
        profile: ProfileArgs {
            path: Some(dir),
            pid: None,
            salvage: false,
        },
    })
    .unwrap();
    let svg = std::fs::read_to_string(&output).unwrap();
    assert!(svg.contains("blameprof: blame.condvar"), "title");
    assert!(
        svg.contains("libblameprof_rt.so+0x600"),
        "signal frame missing"
    );
    assert!(
        !svg.contains("libblameprof_rt.so+0x300"),
        "mutex unlock drawn"
    );
}

#[test]
fn summary_says_how_much_lock_waiting_fell_while_the_lock_was_free() {
    // Mutex waits of 7 ms; of the 6.3 ms of blame, only thread 101's 1.5 ms is left: 5.5 ms
    // of the waiting fell while nobody held the lock.
    let mut handed_off = lock_process();
    handed_off
        .samples
        .retain(|s| !(s.metric == 2 && s.tid == 102));
    for s in handed_off.samples.iter_mut().filter(|s| s.metric != 0) {
        s.flags |= WaitKind::Mutex.flags();
    }
    let text = summary_of(&analysis_of(handed_off));
    assert!(
        text.contains(
            "blameprof: waiting for locks that no hold accounts for: 5.50 ms of 7.00 ms \
             (78.6%): mostly while the lock was free (a woken waiter not yet running)\n"
        ),
        "{text}"
    );
    // Blame that accounts for all but a tenth of the waiting: no such line.
    let mutexes = waits_of(WaitKind::Mutex);
    let text = summary_of(&analysis_of(mutexes));
    assert!(!text.contains("no hold accounts for"), "{text}");
}
