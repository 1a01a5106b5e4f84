//! `blameprof diff BEFORE AFTER` against the change a workload measures in itself.
//!
//! `tests/programs/diff_workload.c FACTOR SCALE` computes in heavy(), steady() and
//! constant() (a third each) while two pairs of threads take turns at hot_lock and
//! calm_lock; FACTOR 2 doubles heavy()'s work and hot_lock's hold time while the rest
//! stays, SCALE 2 doubles everything (a run twice as long with the same shape). It prints
//! its own CPU times and waits.
//!
//! Proves that (1) the diff of FACTOR 1 against FACTOR 2 ranks heavy first with a rise
//! within 15% of the program's own change (raw values), and within 5 percentage points of
//! its change of share (the default normalisation), while steady and constant, unchanged,
//! move little in raw values and their shares move as the program's do; (2) it ranks
//! hot_lock first among the locks, raw and as shares of the threads' running time, its
//! waiting and blame up as much as the program's waits, calm_lock's waiting changed as
//! little as the program's; (3) JSON carries the rows,
//! labels and deltas the text shows, in its order; (4) `-o` writes a differential flame
//! graph: heavy's frame red and marked as grown, and so does `--widths before` (BEFORE's
//! widths, growth still red; a bad `--widths` is a clean error); (5) a run twice as long with the same shape
//! shows about no change as shares of each run's total (as the program's own shares: within
//! 3 pp), where raw values see it double, and
//! per second of each run changes as the program's own measures per second of its run;
//! (6) a missing, foreign or corrupt profile, an unknown metric, a bad `--top` or an
//! unwritable `-o` give one clean line naming BEFORE or AFTER where it matters and the fix;
//! `--salvage` compares a corrupt profile's intact part and a profile cut short is read up to
//! the cut, each with a note naming it; a per-kind metric one run has no samples of counts
//! as 0 there, with a note.
//!
//! The workloads run one at a time (`machine()`): their truth is measured in the same run,
//! but waits on a 2-CPU machine are distorted when another workload competes.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

use common::*;
use serde_json::Value;

fn machine() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

/// A profiled run of the workload and the truth it printed.
struct Profiled {
    dir: PathBuf,
    truth: HashMap<String, u64>,
}

/// Samples a CPU-second: a share of the work is a sampled estimate, whose standard error is
/// sqrt(p(1-p)/n) for n samples; at 4 kHz, about 3,400 samples of the shortest run, 0.8 pp
/// for a third (1.6 pp at 1 kHz, which made two runs' shares differ by 4 pp by chance alone
/// one time in twenty).
const FREQ: u32 = 4000;

/// `blameprof run -F FREQ -- diff_workload FACTOR SCALE` (one at a time), once per
/// arguments for the whole test binary.
fn workload(factor: u32, scale: u32) -> &'static Profiled {
    static RUNS: OnceLock<Mutex<HashMap<(u32, u32), &'static Profiled>>> = OnceLock::new();
    let runs = RUNS.get_or_init(Default::default);
    let mut runs = runs.lock().unwrap_or_else(|e| e.into_inner());
    runs.entry((factor, scale)).or_insert_with(|| {
        require_gcc();
        let prog = compile_c(
            "diff_workload.c",
            "diff_workload",
            &["-O2", "-g", "-pthread"],
        );
        let dir = scratch_dir(&format!("diff-{factor}-{scale}")).join("prof");
        let _one_at_a_time = machine();
        let run = profile_ok(
            &dir,
            FREQ,
            &prog,
            &[&factor.to_string(), &scale.to_string()],
        );
        Box::leak(Box::new(Profiled {
            dir,
            truth: truth(&run.stdout),
        }))
    })
}

/// Fails, saying how to install it, when gcc (which builds the workload) is missing.
fn require_gcc() {
    let found = std::process::Command::new("gcc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "gcc is missing: run scripts/install-system-packages.sh (it installs gcc), then the \
         tests again"
    );
}

/// `blameprof diff ARGS...`, which must succeed: its standard output.
fn diff_ok(args: &[&str]) -> String {
    let mut all = vec!["diff"];
    all.extend_from_slice(args);
    let run = blameprof_cmd(&all);
    assert!(
        run.status.success(),
        "diff {args:?} failed: {}",
        run.describe()
    );
    run.stdout
}

/// `blameprof diff BEFORE AFTER --format json EXTRA...`, parsed and schema-checked.
fn diff_json(before: &Path, after: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        before.to_str().unwrap(),
        after.to_str().unwrap(),
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    let out = diff_ok(&args);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"));
    assert_eq!(v["schema"], "blameprof-diff");
    assert_eq!(v["version"], 2);
    v
}

fn rows<'a>(v: &'a Value, table: &str) -> &'a Vec<Value> {
    v[table]["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("no {table} rows in {v}"))
}

fn function<'a>(v: &'a Value, name: &str) -> &'a Value {
    rows(v, "functions")
        .iter()
        .find(|r| r["function"] == name)
        .unwrap_or_else(|| panic!("no function {name} in {}", v["functions"]))
}

fn lock<'a>(v: &'a Value, name: &str) -> &'a Value {
    rows(v, "locks")
        .iter()
        .find(|r| r["lock"] == name)
        .unwrap_or_else(|| panic!("no lock {name} in {}", v["locks"]))
}

/// `row[measure][field]` as a number.
fn num(row: &Value, measure: &str, field: &str) -> f64 {
    row[measure][field]
        .as_f64()
        .unwrap_or_else(|| panic!("no {measure}.{field} in {row}"))
}

/// The program's change of `key` from `before` to `after` (ns).
fn truth_delta(before: &Profiled, after: &Profiled, key: &str) -> f64 {
    after.truth[key] as f64 - before.truth[key] as f64
}

/// The program's change of `key`'s share of its CPU time, in percentage points.
fn truth_share_delta(before: &Profiled, after: &Profiled, key: &str) -> f64 {
    let share = |p: &Profiled| p.truth[key] as f64 * 100.0 / p.truth["cpu_ns"] as f64;
    share(after) - share(before)
}

fn ms(ns: f64) -> String {
    format!("{:.1} ms", ns / 1e6)
}

#[test]
fn the_doubled_function_ranks_first_by_the_programs_own_change() {
    let (before, after) = (workload(1, 1), workload(2, 1));
    // The default: raw values, with each one's share of its run's total beside it.
    let raw = diff_json(&before.dir, &after.dir, &[]);
    assert_eq!(raw["metric"], "work");
    assert_eq!(raw["normalize"], "none");
    let first = &rows(&raw, "functions")[0];
    for (side, total) in [("before", &raw["before"]), ("after", &raw["after"])] {
        let raw_value = num(first, "exclusive", &format!("raw_{side}"));
        let share = num(first, "exclusive", &format!("share_{side}"));
        let total = total["total"].as_f64().expect("the run's total");
        assert!(
            (share - raw_value * 100.0 / total).abs() < 1e-6,
            "heavy's share {side}: {share} of {raw_value} in {total}"
        );
    }
    assert_eq!(first["function"], "heavy", "{}", raw["functions"]);
    assert_eq!(first["status"], "both");
    let want = truth_delta(before, after, "heavy_ns");
    let got = num(first, "exclusive", "delta");
    assert!(
        want > 0.0 && got > 0.0,
        "heavy rose: got {got}, program {want}"
    );
    assert!(
        (got - want).abs() <= 0.15 * want,
        "heavy's change {} vs the program's {}",
        ms(got),
        ms(want)
    );
    assert_eq!(
        num(first, "exclusive", "raw_after") - num(first, "exclusive", "raw_before"),
        got
    );
    let heavy_rose = got;
    for (unchanged, key) in [("steady", "steady_ns"), ("constant", "constant_ns")] {
        let row = function(&raw, unchanged);
        let (before_ns, moved) = (
            num(row, "exclusive", "before"),
            num(row, "exclusive", "delta"),
        );
        let want = truth_delta(before, after, key);
        assert!(
            (moved - want).abs() <= 0.1 * before_ns
                && moved.abs() <= 0.25 * before_ns
                && moved.abs() <= 0.25 * heavy_rose,
            "{unchanged} is unchanged, yet moved {} of {} (the program's {}; heavy's {})",
            ms(moved),
            ms(before_ns),
            ms(want),
            ms(heavy_rose)
        );
    }

    // As shares of each run's total work.
    let shares = diff_json(&before.dir, &after.dir, &["--normalize", "total"]);
    assert_eq!(shares["normalize"], "total");
    let first = &rows(&shares, "functions")[0];
    assert_eq!(first["function"], "heavy", "{}", shares["functions"]);
    let want = truth_share_delta(before, after, "heavy_ns");
    let got = num(first, "exclusive", "delta");
    assert!(
        got > 0.0 && (got - want).abs() <= 5.0,
        "heavy's share rose {got:.1} pp, the program's {want:.1} pp"
    );
    for (unchanged, key) in [("steady", "steady_ns"), ("constant", "constant_ns")] {
        let want = truth_share_delta(before, after, key);
        let got = num(function(&shares, unchanged), "exclusive", "delta");
        assert!(
            (got - want).abs() <= 5.0,
            "{unchanged}'s share moved {got:.1} pp, the program's {want:.1} pp"
        );
    }
}

#[test]
fn the_lock_held_twice_as_long_ranks_first_by_the_programs_own_waits() {
    let (before, after) = (workload(1, 1), workload(2, 1));
    let v = diff_json(&before.dir, &after.dir, &["--normalize", "none"]);
    assert_eq!(v["locks"]["available"], true);
    let first = &rows(&v, "locks")[0];
    assert_eq!(first["lock"], "hot_lock", "{}", v["locks"]);
    assert_eq!(
        (&first["kind"], &first["status"]),
        (&"mutex".into(), &"both".into())
    );
    let want = truth_delta(before, after, "hot_wait_ns");
    for (measure, tolerance) in [("waiting", 0.15), ("blame", 0.2)] {
        let got = num(first, measure, "delta");
        assert!(
            want > 0.0 && (got - want).abs() <= tolerance * want,
            "hot_lock's {measure} changed {}, the program's waits {}",
            ms(got),
            ms(want)
        );
    }
    // As shares of the threads' running time, too, as the program's own shares moved: the
    // running time includes the main thread's, which computes, and so is longer on a loaded
    // machine, where calm_lock's share falls by more than hot_lock's rises (its waits do not
    // change). Within 15% of the larger of the program's two shares (about 1.5 pp).
    let shares = diff_json(&before.dir, &after.dir, &["--normalize", "total"]);
    let share =
        |p: &Profiled, key: &str| p.truth[key] as f64 * 100.0 / p.truth["running_ns"] as f64;
    for (name, key) in [("hot_lock", "hot_wait_ns"), ("calm_lock", "calm_wait_ns")] {
        let row = lock(&shares, name);
        let (was, is) = (share(before, key), share(after, key));
        for (measure, tolerance) in [("waiting", 0.15), ("blame", 0.2)] {
            let moved = num(row, measure, "delta");
            assert!(
                (moved - (is - was)).abs() <= tolerance * was.max(is),
                "{name}'s share of {measure} moved {moved:.1} pp, the program's waiting \
                 {:.1} pp ({was:.1}% to {is:.1}%)",
                is - was
            );
        }
    }
    assert!(
        share(after, "hot_wait_ns") > share(before, "hot_wait_ns"),
        "hot_lock's share of the waiting did not rise: the workload is broken"
    );

    let calm = lock(&v, "calm_lock");
    let want = truth_delta(before, after, "calm_wait_ns");
    let got = num(calm, "waiting", "delta");
    let base = before.truth["calm_wait_ns"] as f64;
    assert!(
        (got - want).abs() <= 0.15 * base,
        "calm_lock's waiting changed {}, the program's {} (of {})",
        ms(got),
        ms(want),
        ms(base)
    );
}

/// The rows of the text table under `heading` whose rows have `values` value columns: (its
/// label, its first delta column).
fn text_rows<'a>(text: &'a str, heading: &str, values: usize) -> Vec<(String, &'a str)> {
    text.lines()
        .skip_while(|l| !l.starts_with(heading))
        .skip(3)
        .take_while(|l| !l.trim().is_empty())
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields[values..].join(" "), fields[2])
        })
        .collect()
}

#[test]
fn json_carries_the_rows_the_text_shows() {
    let (before, after) = (workload(1, 1), workload(2, 1));
    let paths = [before.dir.to_str().unwrap(), after.dir.to_str().unwrap()];
    let text = diff_ok(&[paths[0], paths[1], "--top", "5", "--normalize", "total"]);
    let v = diff_json(
        &before.dir,
        &after.dir,
        &["--top", "5", "--normalize", "total"],
    );
    assert!(
        text.contains("compared:   each run's values as shares"),
        "{text}"
    );
    let functions = text_rows(&text, "Functions by change", 8);
    assert_eq!(functions.len(), 5, "{text}");
    assert!(v["functions"]["count"].as_u64().unwrap() > 5);
    for (row, (label, delta)) in rows(&v, "functions").iter().zip(&functions) {
        let want = match row["module"].as_str().unwrap() {
            "" => row["function"].as_str().unwrap().to_owned(),
            m => format!("{} [{m}]", row["function"].as_str().unwrap()),
        };
        assert_eq!(*label, want, "{text}");
        let json = format!("{:+.2}pp", num(row, "exclusive", "delta"));
        assert_eq!(json, *delta, "{label}: {text}");
    }
    assert_eq!(rows(&v, "functions").len(), 5);
    let locks = text_rows(&text, "Locks by change", 12);
    assert!(locks.len() >= 2, "{text}");
    assert_eq!(locks.len(), rows(&v, "locks").len(), "{text}");
    for (row, (label, delta)) in rows(&v, "locks").iter().zip(&locks) {
        let want = format!(
            "{} ({})",
            row["lock"].as_str().unwrap(),
            row["kind"].as_str().unwrap_or("?")
        );
        assert_eq!(*label, want, "{text}");
        let json = format!("{:+.2}pp", num(row, "blame", "delta"));
        assert_eq!(json, *delta, "{label}: {text}");
    }
}

#[test]
fn the_flame_graph_is_differential() {
    let (before, after) = (workload(1, 1), workload(2, 1));
    let svg = scratch_dir("diff-svg").join("diff.svg");
    let text = diff_ok(&[
        before.dir.to_str().unwrap(),
        after.dir.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(
        text.contains(&format!("flame graph: {}", svg.display())),
        "{text}"
    );
    let svg = std::fs::read_to_string(&svg).expect("the SVG is written");
    assert!(svg.starts_with("<?xml"), "{}", &svg[..100.min(svg.len())]);
    assert!(svg.contains("blameprof diff: work"), "title");
    assert_grew_red(&svg, "heavy");
    assert!(svg.contains("<title>steady ("), "steady's frame");
}

/// Asserts that `function`'s frame in a differential flame graph is marked as grown and
/// red (inferno's differential frames: "name (value ns, share%; +change%)").
fn assert_grew_red(svg: &str, function: &str) {
    let at = svg
        .find(&format!("<title>{function} ("))
        .unwrap_or_else(|| panic!("no frame of {function}"));
    let title = &svg[at..at + svg[at..].find("</title>").unwrap()];
    assert!(title.contains("; +"), "{function} grew: {title}");
    let fill = &svg[at..][svg[at..].find("fill=\"").unwrap() + 6..];
    assert!(
        fill.starts_with("rgb(255,"),
        "{function}'s frame is red: {}",
        &fill[..20]
    );
}

/// `--widths before` draws BEFORE's widths (what was removed has a width there) and still
/// colours growth red: heavy doubled.
#[test]
fn the_flame_graph_of_before_widths_still_colours_growth_red() {
    let (before, after) = (workload(1, 1), workload(2, 1));
    let svg = scratch_dir("diff-svg-before").join("diff.svg");
    let text = diff_ok(&[
        before.dir.to_str().unwrap(),
        after.dir.to_str().unwrap(),
        "--widths",
        "before",
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(
        text.contains("(differential: widths are BEFORE's, red grew, blue shrank)"),
        "{text}"
    );
    let svg = std::fs::read_to_string(&svg).expect("the SVG is written");
    assert!(
        svg.contains("widths: BEFORE"),
        "the subtitle says whose widths"
    );
    assert_grew_red(&svg, "heavy");
    let bad = blameprof_cmd(&[
        "diff",
        before.dir.to_str().unwrap(),
        after.dir.to_str().unwrap(),
        "--widths",
        "sideways",
    ]);
    assert_clean_error(&bad, "a bad --widths");
}

#[test]
fn normalising_shows_no_change_for_a_run_twice_as_long_of_the_same_shape() {
    let (short, long) = (workload(1, 1), workload(1, 2));
    let raw = diff_json(&short.dir, &long.dir, &["--normalize", "none"]);
    let rose = num(function(&raw, "heavy"), "exclusive", "delta_percent");
    assert!(
        (70.0..130.0).contains(&rose),
        "raw values see heavy double: {rose:.0}%"
    );

    // Shares of CPU time move as the program's own: hardly at all (the same shape), but the
    // lock threads' CPU time (waking up and going back to sleep, 800 or 1600 times each) is
    // a larger share on a loaded machine, and so main's share is smaller, by as much as
    // 5 pp between two runs. Within 3 pp: about 3 standard errors of the difference of
    // two sampled shares (`FREQ`). (The lock threads compute mostly in the kernel, where a
    // perf task clock does not count, so they are sampled a few times each: until their
    // CPU time after their last sample was charged at their end, a third of it was missing,
    // a different third each run, and main's share moved by up to 4 pp.)
    let shares = diff_json(&short.dir, &long.dir, &["--normalize", "total"]);
    for (f, key) in [
        ("heavy", "heavy_ns"),
        ("steady", "steady_ns"),
        ("constant", "constant_ns"),
        ("main", "main_ns"),
    ] {
        let row = function(&shares, f);
        for measure in ["exclusive", "inclusive"] {
            // main computes nothing itself.
            let want = match (f, measure) {
                ("main", "exclusive") => 0.0,
                _ => truth_share_delta(short, long, key),
            };
            let moved = num(row, measure, "delta");
            assert!(
                (moved - want).abs() <= 3.0,
                "{f}'s share of {measure} work moved {moved:.1} pp, the program's {want:.1} pp"
            );
        }
    }
    // The same shape: the program's own shares of its three parts did not move.
    for key in ["heavy_ns", "steady_ns", "constant_ns"] {
        let part = |p: &Profiled| p.truth[key] as f64 * 100.0 / p.truth["main_ns"] as f64;
        let moved = part(long) - part(short);
        assert!(
            moved.abs() <= 2.0,
            "the program's {key} share of main moved {moved:.1} pp"
        );
    }
    for l in ["hot_lock", "calm_lock"] {
        let moved = num(lock(&shares, l), "waiting", "delta");
        assert!(
            moved.abs() <= 5.0,
            "{l}'s share of waiting moved {moved:.1} pp"
        );
    }

    // Per second of each run: as the program's own measures per second of its run (the run
    // time, wall-clock, is longer on a loaded machine).
    let per_second = diff_json(&short.dir, &long.dir, &["--normalize", "time"]);
    let truth_relative = |key: &str| {
        let rate = |p: &Profiled| p.truth[key] as f64 / p.truth["wall_ns"] as f64;
        (rate(long) / rate(short) - 1.0) * 100.0
    };
    let rows = [
        (function(&per_second, "heavy"), "exclusive", "heavy_ns"),
        (function(&per_second, "steady"), "exclusive", "steady_ns"),
        (
            function(&per_second, "constant"),
            "exclusive",
            "constant_ns",
        ),
        (lock(&per_second, "hot_lock"), "waiting", "hot_wait_ns"),
        (lock(&per_second, "calm_lock"), "waiting", "calm_wait_ns"),
    ];
    for (row, measure, key) in rows {
        let (got, want) = (num(row, measure, "delta_percent"), truth_relative(key));
        assert!(
            (got - want).abs() <= 10.0,
            "{key} per second changed {got:.1}%, the program's {want:.1}%"
        );
    }
}

#[test]
fn bad_input_gives_one_line_naming_the_profile_and_the_fix() {
    let good = workload(1, 1);
    let good = good.dir.to_str().unwrap();
    let scratch = scratch_dir("diff-bad");
    let missing = scratch.join("missing");
    let missing = missing.to_str().unwrap();

    let run = blameprof_cmd(&["diff", missing, good]);
    assert_clean_error(&run, "missing BEFORE");
    assert!(
        run.stderr.contains("BEFORE profile: profile") && run.stderr.contains("does not exist"),
        "{}",
        run.stderr
    );

    let corrupt = scratch.join("corrupt");
    std::fs::create_dir_all(&corrupt).unwrap();
    std::fs::write(corrupt.join("1.bpp"), b"this is not a profile at all").unwrap();
    let run = blameprof_cmd(&["diff", good, corrupt.to_str().unwrap()]);
    assert_clean_error(&run, "corrupt AFTER");
    assert!(
        run.stderr.contains("AFTER profile: ")
            && run
                .stderr
                .contains("pass a profile directory written by 'blameprof run' as AFTER"),
        "{}",
        run.stderr
    );

    // A part with a flipped byte: the error names AFTER and --salvage, which compares the
    // intact part, with a note; a part cut short (as a killed process leaves it) is read up to
    // the cut, with a note.
    let part = part_files(&workload(1, 1).dir).remove(0);
    let bytes = std::fs::read(&part).unwrap();
    let name = part.file_name().unwrap();
    let (flipped, cut) = (scratch.join("flipped"), scratch.join("cut"));
    let mut damaged = bytes.clone();
    damaged[bytes.len() / 2] ^= 0xff;
    std::fs::create_dir_all(&flipped).unwrap();
    std::fs::write(flipped.join(name), &damaged).unwrap();
    std::fs::create_dir_all(&cut).unwrap();
    std::fs::write(cut.join(name), &bytes[..bytes.len() * 2 / 3]).unwrap();
    let flipped = flipped.to_str().unwrap();
    let run = blameprof_cmd(&["diff", good, flipped]);
    assert_clean_error(&run, "flipped byte in AFTER");
    assert!(
        run.stderr.contains("AFTER profile: ") && run.stderr.contains("--salvage"),
        "{}",
        run.stderr
    );
    let salvaged = diff_ok(&[good, flipped, "--salvage"]);
    assert!(
        salvaged.contains("note:       AFTER is damaged"),
        "{salvaged}"
    );
    let cut_short = diff_ok(&[cut.to_str().unwrap(), good]);
    assert!(
        cut_short.contains("note:       BEFORE is damaged"),
        "{cut_short}"
    );

    let run = blameprof_cmd(&["diff", good, good, "--metric", "nonsense"]);
    assert_clean_error(&run, "unknown metric");
    assert!(
        run.stderr.contains("neither profile has it") && run.stderr.contains("--metric"),
        "{}",
        run.stderr
    );

    let run = blameprof_cmd(&["diff", good, good, "--top", "0"]);
    assert_clean_error(&run, "--top 0");

    let unwritable = scratch.join("no-such-dir").join("diff.svg");
    let run = blameprof_cmd(&["diff", good, good, "-o", unwritable.to_str().unwrap()]);
    assert_clean_error(&run, "unwritable -o");
    assert!(
        run.stderr.contains("pass a writable path with -o"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_metric_one_run_never_sampled_counts_as_zero_and_says_so() {
    // split.c takes no lock: its profile has idleness, but no idleness.mutex.
    require_gcc();
    let prog = split_c();
    let dir = scratch_dir("diff-no-locks").join("prof");
    {
        let _one_at_a_time = machine();
        profile_ok(&dir, 200, &prog, &["1", "0.2"]);
    }
    let locked = workload(1, 1);
    let v = diff_json(&dir, &locked.dir, &["--metric", "idleness.mutex"]);
    let notes = v["notes"].to_string();
    assert!(
        notes.contains("BEFORE recorded no idleness.mutex"),
        "{notes}"
    );
    assert_eq!(v["before"]["has_metric"], false);
    let first = &rows(&v, "functions")[0];
    assert_eq!(first["status"], "new", "{first}");
    assert!(num(first, "inclusive", "after") > 0.0, "{first}");
}
