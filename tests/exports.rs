//! The export formats against the tools that read them, blameprof's own JSON report and the
//! ground truth of a workload with a known culprit (tests/programs/export_culprit.c: the
//! readers queue on a mutex behind `rebuild_index`, run by the thread named "rebuilder").
//!
//! Proves that (1) `report --format pprof` is read by Go's own `go tool pprof`, its totals
//! and each thread's (by its `tid` label, named by its `thread` label) are the JSON report's
//! exactly, per metric, and `go tool pprof -top` ranks the culprit the report and the
//! program name first, with the report's blame; (2) `report --format firefox` holds every
//! thread of the report under its name (the names the program gave them), a thread's CPU
//! deltas add up to its work, its wait markers to its idleness (their values exactly, their
//! lengths within 1%, and the readers' within 15% of the waiting the program measured), the
//! mutex blame markers lie on the culprit's thread with its blame, and the readers' waits
//! name the culprit as the holder they waited for as often as the program's own overlap
//! of waits and holds says.
//!
//! Needs Go's `go` (Debian: golang-go): without it the pprof test fails and says to run
//! `scripts/install-system-packages.sh`.

mod common;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::*;
use serde_json::Value;

/// The profiled workload, shared by the tests: the profile and the truth it printed.
struct Profiled {
    dir: PathBuf,
    truth: HashMap<String, u64>,
    /// The widest thinning window the run's threads went up to (ns; 0: never widened).
    thinning_window_peak_ns: u64,
}

fn culprit_profile() -> &'static Profiled {
    static P: OnceLock<Profiled> = OnceLock::new();
    P.get_or_init(|| {
        let prog = compile_c(
            "export_culprit.c",
            "export_culprit",
            &["-O2", "-g", "-pthread"],
        );
        let dir = scratch_dir("exports").join("prof");
        let run = profile_ok(&dir, 200, &prog, &["1.5", "2"]);
        let truth = truth(&run.stdout);
        // The workload's own measure names the culprit: the waiting during rebuilds
        // dwarfs the waiting during reads.
        assert!(
            truth["blame_rebuild_ns"] > 4 * truth["blame_read_ns"],
            "export_culprit did not make rebuild_index the culprit: {truth:?}"
        );
        Profiled {
            dir,
            truth,
            thinning_window_peak_ns: run.noted("thinning_window_peak_ns"),
        }
    })
}

/// `blameprof report DIR --format FORMAT -o FILE`, which must succeed.
fn export(dir: &Path, format: &str, file: &Path) {
    let args: [&OsStr; 6] = [
        "report".as_ref(),
        dir.as_os_str(),
        "--format".as_ref(),
        format.as_ref(),
        "-o".as_ref(),
        file.as_os_str(),
    ];
    let run = blameprof_cmd(&args);
    assert!(
        run.status.success(),
        "report --format {format} failed\n{}",
        run.describe()
    );
}

/// The report's threads view as JSON: totals, and per thread its pid, tid, name, totals.
fn threads_report(dir: &Path) -> Value {
    report_json_metric(dir, "work", &["--view", "threads"])
}

fn report_threads(report: &Value) -> &Vec<Value> {
    report["threads"].as_array().expect("threads array")
}

/// A number that may be written as a JSON number or string (tids, pids).
fn id_of(v: &Value) -> u64 {
    v.as_u64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or_else(|| panic!("not an id: {v}"))
}

/// The culprit blameprof's own report names: the function that called a lock function of
/// the runtime with the most `blame.mutex`, from the callers view (docs/report-json.md,
/// "who made threads wait").
fn reported_culprit(dir: &Path) -> (String, u64) {
    let bottom_up = report_json_metric(dir, "blame.mutex", &["--view", "bottom-up"]);
    roots(&bottom_up)
        .iter()
        .filter(|r| {
            r["module"]
                .as_str()
                .is_some_and(|m| m.ends_with("libblameprof_rt.so"))
        })
        .flat_map(|r| r["children"].as_array().expect("children").iter())
        .map(|c| (func(c).to_owned(), metric_of(c, "inclusive", "blame.mutex")))
        .max_by_key(|&(_, blame)| blame)
        .expect("no caller of a lock function has blame")
}

// ---------------------------------------------------------------------------------------
// 1. pprof, read by `go tool pprof`

/// `go tool pprof ARGS...` with its home, build cache and temporary files in `scratch` (no
/// network, nothing outside the test's directory); its output.
fn go_pprof(scratch: &Path, args: &[&OsStr]) -> String {
    let found = Command::new("go").arg("version").output();
    if !found.is_ok_and(|o| o.status.success()) {
        panic!(
            "Go's `go` command is missing (Debian package golang-go): run \
             scripts/install-system-packages.sh"
        );
    }
    let mut cmd = Command::new("go");
    cmd.args(["tool", "pprof"])
        .args(args)
        .env("HOME", scratch)
        .env("GOCACHE", scratch.join("gocache"))
        .env("PPROF_TMPDIR", scratch.join("pprof"))
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "");
    let run = run_with_timeout(&mut cmd, TOOL_TIMEOUT);
    assert!(
        run.status.success(),
        "go tool pprof {args:?} failed\n{}",
        run.describe()
    );
    run.stdout
}

/// One sample of `go tool pprof -raw`: its values (in the order of the sample types) and
/// its labels.
#[derive(Debug)]
struct RawSample {
    values: Vec<u64>,
    labels: HashMap<String, String>,
}

/// The sample types (`name/unit`, `[dflt]` kept) and the samples of `go tool pprof -raw`.
fn parse_raw(raw: &str) -> (Vec<String>, Vec<RawSample>) {
    let mut lines = raw
        .lines()
        .skip_while(|l| l.trim() != "Samples:")
        .skip(1)
        .take_while(|l| l.trim() != "Locations");
    let types: Vec<String> = lines
        .next()
        .expect("no sample types in go tool pprof -raw")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let mut samples: Vec<RawSample> = Vec::new();
    for line in lines {
        let values_part = line.split_once(':').map(|(v, _)| v.trim());
        let values: Option<Vec<u64>> = values_part
            .filter(|v| !v.contains('['))
            .map(|v| v.split_whitespace().map(|x| x.parse().ok()).collect())
            .and_then(|v: Option<Vec<u64>>| v);
        match values {
            Some(values) if values.len() == types.len() => samples.push(RawSample {
                values,
                labels: HashMap::new(),
            }),
            _ => {
                let sample = samples.last_mut().expect("labels before any sample");
                sample.labels.extend(labels_of(line));
            }
        }
    }
    (types, samples)
}

/// The `key:[value]` labels of one line of `go tool pprof -raw`.
fn labels_of(line: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = line.trim();
    while let Some((key, after)) = rest.split_once(":[") {
        let Some((value, tail)) = after.split_once(']') else {
            break;
        };
        out.push((key.trim().to_owned(), value.to_owned()));
        rest = tail.trim_start();
    }
    out
}

/// The first row of `go tool pprof -top -unit=ns`: its function and flat value.
fn top_row(top: &str) -> (String, u64) {
    let row = top
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .nth(1)
        .unwrap_or_else(|| panic!("no rows in go tool pprof -top:\n{top}"));
    let fields: Vec<&str> = row.split_whitespace().collect();
    let flat = fields[0]
        .trim_end_matches("ns")
        .parse()
        .unwrap_or_else(|_| panic!("flat value of {row:?}"));
    (fields[5..].join(" "), flat)
}

#[test]
fn pprof_reads_in_go_pprof_with_the_reports_totals_and_culprit() {
    let p = culprit_profile();
    let scratch = scratch_dir("exports-pprof");
    let file = scratch.join("blameprof.pb.gz");
    export(&p.dir, "pprof", &file);

    // The culprit: the program's measure, the report's callers view, and pprof's ranking
    // by blame.mutex with the runtime's lock functions hidden (their callers become the
    // leaves) name the same function, with the same blame.
    let (culprit, blame) = reported_culprit(&p.dir);
    assert_eq!(culprit, "rebuild_index", "blameprof's own report");
    let top = go_pprof(
        &scratch,
        &[
            "-top".as_ref(),
            "-sample_index=blame.mutex".as_ref(),
            "-hide=libblameprof_rt\\.so".as_ref(),
            "-unit=ns".as_ref(),
            file.as_os_str(),
        ],
    );
    let (first, flat) = top_row(&top);
    assert_eq!(
        first, culprit,
        "go tool pprof -top ranks another first:\n{top}"
    );
    assert_eq!(flat, blame, "the culprit's blame.mutex in pprof:\n{top}");

    // Every metric is a sample type; its total, and each thread's, is the report's.
    let report = threads_report(&p.dir);
    let raw = go_pprof(&scratch, &["-raw".as_ref(), file.as_os_str()]);
    let (types, samples) = parse_raw(&raw);
    let names: Vec<&str> = types
        .iter()
        .map(|t| t.split('/').next().unwrap_or(""))
        .collect();
    let metrics: Vec<&str> = report["metrics"]
        .as_array()
        .expect("metrics")
        .iter()
        .map(|m| m["name"].as_str().expect("metric name"))
        .collect();
    assert_eq!(names, metrics, "sample types: {types:?}");
    assert!(
        types.iter().all(|t| t.contains("/nanoseconds")),
        "time metrics in nanoseconds: {types:?}"
    );
    assert_eq!(
        types[0], "work/nanoseconds[dflt]",
        "the report's --metric is the default"
    );
    for (i, metric) in metrics.iter().enumerate() {
        let total: u64 = samples.iter().map(|s| s.values[i]).sum();
        assert_eq!(total, total_of(&report, metric), "total {metric}");
    }
    let threads = report_threads(&report);
    for thread in threads {
        let tid = id_of(&thread["tid"]).to_string();
        let of_thread: Vec<&RawSample> = samples
            .iter()
            .filter(|s| s.labels.get("tid") == Some(&tid))
            .collect();
        for s in &of_thread {
            assert_eq!(
                s.labels.get("thread").map(String::as_str),
                thread["name"].as_str()
            );
            assert_eq!(
                s.labels.get("pid"),
                Some(&id_of(&thread["pid"]).to_string())
            );
        }
        for (i, metric) in metrics.iter().enumerate() {
            let sum: u64 = of_thread.iter().map(|s| s.values[i]).sum();
            assert_eq!(
                sum,
                metric_of(thread, "totals", metric),
                "thread {tid}: {metric}"
            );
        }
    }
    // Waiting on a kind of primitive is labelled with it.
    let mutex = metrics
        .iter()
        .position(|&m| m == "idleness.mutex")
        .expect("idleness.mutex");
    assert!(
        samples.iter().filter(|s| s.values[mutex] > 0).all(|s| s
            .labels
            .get("lock_kind")
            .map(String::as_str)
            == Some("mutex")),
        "idleness.mutex samples without lock_kind mutex"
    );
}

// ---------------------------------------------------------------------------------------
// 2. Firefox Profiler

/// A Firefox Profiler thread's string `index`.
fn fx_string(thread: &Value, index: &Value) -> String {
    let i = index
        .as_u64()
        .unwrap_or_else(|| panic!("not a string index: {index}"));
    thread["stringArray"][i as usize]
        .as_str()
        .unwrap_or_else(|| panic!("no string {i}"))
        .to_owned()
}

/// Whether marker `data` of `thread` is about a primitive of `kind`.
fn of_kind(thread: &Value, data: &Value, kind: &str) -> bool {
    fx_string(thread, &data["kind"]) == kind
}

/// What a thread's markers of one type add up to.
#[derive(Debug, Default)]
struct Markers {
    count: u64,
    /// Summed lengths (end - start), ns.
    length_ns: f64,
    /// Summed `field` values, ns.
    value_ns: f64,
}

/// The markers of `thread` of type `kind` (`BlameprofWait`, `BlameprofBlame`) that `keep`
/// accepts, added up with their field `field` (a duration in ms).
fn markers(thread: &Value, kind: &str, field: &str, keep: &dyn Fn(&Value) -> bool) -> Markers {
    let m = &thread["markers"];
    let mut out = Markers::default();
    for i in 0..m["length"].as_u64().expect("markers.length") as usize {
        let data = &m["data"][i];
        if data["type"] != kind || !keep(data) {
            continue;
        }
        let start = m["startTime"][i].as_f64().expect("startTime");
        let end = m["endTime"][i].as_f64().unwrap_or(start);
        out.count += 1;
        out.length_ns += (end - start) * 1e6;
        out.value_ns += data[field].as_f64().expect("marker value") * 1e6;
    }
    out
}

/// The data of `thread`'s markers of type `kind`.
fn markers_data<'a>(thread: &'a Value, kind: &'a str) -> impl Iterator<Item = &'a Value> {
    thread["markers"]["data"]
        .as_array()
        .expect("markers.data")
        .iter()
        .filter(move |d| d["type"] == kind)
}

/// How far a thread's thinned waits' real lengths can be from the idleness they carry: one
/// thinning window for each of its 16 size classes. A window is 10 us
/// (`locks::thinning::THIN_NS`) until a thread's short samples pass their budget; then it
/// widens, up to the run's `thinning_window_peak_ns` (on a loaded machine, hundreds of us).
fn thinning_slack_ns(window_peak_ns: u64) -> f64 {
    16.0 * window_peak_ns.max(10_000) as f64
}

/// Whether `got` (ns, from milliseconds in floating point) is `want` to the nanosecond per
/// one of `n` parts, and to a relative `tolerance`.
fn close(got: f64, want: u64, n: u64, tolerance: f64) -> bool {
    (got - want as f64).abs() <= n as f64 + tolerance * want as f64
}

#[test]
fn firefox_profile_shows_the_threads_their_waits_and_the_culprits_blame() {
    let p = culprit_profile();
    let t = &p.truth;
    let scratch = scratch_dir("exports-firefox");
    let file = scratch.join("blameprof-firefox.json");
    export(&p.dir, "firefox", &file);
    let text = std::fs::read_to_string(&file).expect("read the Firefox profile");
    let fx: Value = serde_json::from_str(&text).expect("the Firefox profile is JSON");
    assert!(
        fx["meta"]["preprocessedProfileVersion"].is_u64(),
        "{}",
        fx["meta"]
    );
    let fx_threads = fx["threads"].as_array().expect("threads");

    let report = threads_report(&p.dir);
    let mut culprit_blame: Vec<(u64, f64)> = Vec::new();
    for thread in report_threads(&report) {
        let (pid, tid) = (id_of(&thread["pid"]), id_of(&thread["tid"]));
        let name = thread["name"].as_str().expect("name");
        let fx_thread = fx_threads
            .iter()
            .find(|f| id_of(&f["pid"]) == pid && id_of(&f["tid"]) == tid)
            .unwrap_or_else(|| panic!("thread {tid} ({name}) is not in the Firefox profile"));
        assert_eq!(fx_thread["name"], name, "thread {tid}");

        // CPU samples: deltas in microseconds, each cut to the microsecond.
        let samples = &fx_thread["samples"];
        let deltas = samples["threadCPUDelta"]
            .as_array()
            .expect("threadCPUDelta");
        let cpu_ns: u64 = deltas.iter().map(|d| d.as_u64().unwrap_or(0) * 1000).sum();
        let work = metric_of(thread, "totals", "work");
        assert!(
            cpu_ns <= work && work - cpu_ns <= 1000 * deltas.len() as u64,
            "thread {tid} ({name}): CPU deltas {cpu_ns} ns vs work {work} ns"
        );

        // Waits: one marker per idleness sample, values adding up to the idleness.
        let idleness = metric_of(thread, "totals", "idleness");
        let waits = markers(fx_thread, "BlameprofWait", "idleness", &|_| true);
        assert!(
            close(waits.value_ns, idleness, waits.count, 1e-9),
            "thread {tid} ({name}): wait markers' idleness {waits:?} vs {idleness} ns"
        );
        // Markers lie over the real waits, while a thinned sample's idleness is its
        // window's share (locks::thinning): the two sums differ by at most about one
        // window per size class line (THIN_CLASSES lines of windows of THIN_NS and more),
        // which matters on a thread with only a few microseconds-long waits.
        assert!(
            close(waits.length_ns, idleness, waits.count, 0.01)
                || (waits.length_ns - idleness as f64).abs()
                    <= thinning_slack_ns(p.thinning_window_peak_ns),
            "thread {tid} ({name}): wait markers' lengths {waits:?} vs idleness {idleness} ns \
             (thinning windows up to {} ns)",
            p.thinning_window_peak_ns
        );
        let mutex_blame = markers(fx_thread, "BlameprofBlame", "blame", &|d| {
            of_kind(fx_thread, d, "mutex")
        });
        let report_blame = metric_of(thread, "totals", "blame.mutex");
        assert!(
            close(mutex_blame.value_ns, report_blame, mutex_blame.count, 1e-9),
            "thread {tid} ({name}): mutex blame markers {mutex_blame:?} vs {report_blame} ns"
        );
        culprit_blame.push((tid, mutex_blame.value_ns));
    }

    // The names the program gave its threads, and the waiting it measured for the readers.
    for n in 1..=t["readers"] {
        let (tid, name) = (t[&format!("tid_reader_{n}")], format!("reader-{n}"));
        let thread = fx_threads
            .iter()
            .find(|f| id_of(&f["tid"]) == tid)
            .unwrap_or_else(|| panic!("{name} (tid {tid}) is not in the Firefox profile"));
        assert_eq!(thread["name"], name.as_str(), "tid {tid}");
        let waited = t[&format!("idle_reader_{n}_ns")];
        let waits = markers(thread, "BlameprofWait", "idleness", &|d| {
            of_kind(thread, d, "mutex")
        });
        assert!(
            close(waits.length_ns, waited, 0, 0.15),
            "{name}: mutex wait markers {waits:?} vs the {waited} ns it measured"
        );
        let locks: Vec<String> = markers_data(thread, "BlameprofWait")
            .filter(|d| of_kind(thread, d, "mutex"))
            .map(|d| fx_string(thread, &d["lock"]))
            .collect();
        assert!(
            !locks.is_empty() && locks.iter().all(|l| l == "index_lock"),
            "{name}: its mutex waits name the locks {locks:?}, not the program's index_lock"
        );
        // Who the waits are blamed on: the rebuilder, for the share of the readers'
        // waiting that the program's rebuilds overlapped.
        let behind_rebuilds = markers(thread, "BlameprofWait", "idleness", &|d| {
            of_kind(thread, d, "mutex")
                && fx_string(thread, &d["blamedOn"]).starts_with("rebuilder in rebuild_index")
        });
        let share = behind_rebuilds.value_ns / waits.value_ns.max(1.0);
        let truth_share = t["blame_rebuild_ns"] as f64 / t["idle_read_ns"].max(1) as f64;
        assert!(
            share >= 0.85 * truth_share.min(1.0),
            "{name}: {:.1}% of its waiting names the rebuilder, the program's overlap says \
             {:.1}%",
            share * 100.0,
            truth_share * 100.0
        );
    }
    let rebuilder = t["tid_rebuilder"];
    let rebuilder_thread = fx_threads
        .iter()
        .find(|f| id_of(&f["tid"]) == rebuilder)
        .expect("the rebuilder is in the Firefox profile");
    assert_eq!(rebuilder_thread["name"], "rebuilder");
    let (most_blamed, blame_ns) = culprit_blame
        .iter()
        .copied()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .expect("threads");
    assert_eq!(
        most_blamed, rebuilder,
        "the mutex blame markers lie mostly on another thread than the rebuilder: \
         {culprit_blame:?}"
    );
    let truth_blame = t["blame_rebuild_ns"];
    assert!(
        close(blame_ns, truth_blame, 0, 0.15),
        "the rebuilder's blame markers {blame_ns} ns vs the {truth_blame} ns of waiting its \
         holds overlapped"
    );
}
