//! Robustness of the data path on programs that stress it. Proves that (1) call paths deeper
//! than the maximum depth are cut, marked `[truncated]` and still counted in full; (2) code in
//! a library loaded with `dlopen` after start-up is unwound and symbolized (the module list is
//! refreshed), with the CPU time its own measurement reports; (3) a program that dies by
//! SIGSEGV or SIGKILL still leaves a readable profile of what it ran before dying, all but
//! what it ran in its last second (unwritten), and blameprof exits 128+signal; (4) C++ names are demangled and paths through std::thread
//! start-up reach the work.

mod common;

use common::*;

/// |profiled - truth| / truth.
fn rel_err(profiled: u64, truth: u64) -> f64 {
    (profiled as f64 - truth as f64).abs() / truth as f64
}

#[test]
fn deep_paths_are_truncated_and_marked_without_losing_samples() {
    let prog = compile_c("deep_recursion.c", "deep_recursion", &["-O1", "-g"]);
    let out = scratch_dir("deep-recursion").join("prof");
    let run = profile_ok(&out, 1000, &prog, &["2000", "0.5"]);
    let flat = report_json(&out, &["--view", "flat"]);
    let (_, truncated_excl) = flat_values(&flat, "[truncated]");
    let (leaf_incl, leaf_excl) = flat_values(&flat, "deep_leaf");
    assert!(
        samples(&flat) > 200,
        "too few samples: {}\n{}",
        samples(&flat),
        run.describe()
    );
    // Every deep sample is kept; the marker sits at the root end, so it has no own time but
    // covers the leaf's time inclusively.
    assert_eq!(truncated_excl, 0);
    assert!(
        leaf_excl as f64 > 0.8 * total_work(&flat) as f64,
        "deep_leaf should hold the work: {leaf_excl} of {}",
        total_work(&flat)
    );
    let top = report_json(&out, &["--view", "top-down"]);
    let marker_roots: u64 = roots(&top)
        .iter()
        .filter(|r| func(r) == "[truncated]")
        .map(|r| work(r, "inclusive"))
        .sum();
    assert!(
        marker_roots as f64 > 0.8 * leaf_incl as f64,
        "truncated paths must start at a [truncated] root: {marker_roots} vs {leaf_incl}"
    );
}

#[test]
fn dlopened_library_is_unwound_and_symbolized() {
    let plugin = compile_c(
        "plugin.c",
        "libplugin.so",
        &["-O1", "-g", "-shared", "-fPIC"],
    );
    let host = compile_c("dlopen_host.c", "dlopen_host", &["-O1", "-g", "-ldl"]);
    let out = scratch_dir("dlopen").join("prof");
    let run = profile_ok(&out, 1000, &host, &[plugin.to_str().unwrap(), "0.6"]);
    let t = truth(&run.stdout);
    let flat = report_json(&out, &["--view", "flat"]);
    let (_, plugin_excl) = flat_values(&flat, "plugin_hot");
    let (_, host_excl) = flat_values(&flat, "host_after");
    assert!(
        rel_err(plugin_excl, t["plugin_ns"]) < 0.15,
        "plugin_hot: profiled {plugin_excl} ns, measured {} ns",
        t["plugin_ns"]
    );
    assert!(
        rel_err(host_excl, t["host_ns"]) < 0.2,
        "host_after: profiled {host_excl} ns, measured {} ns",
        t["host_ns"]
    );
    let top = report_json(&out, &["--view", "top-down"]);
    assert!(
        !find_paths(&top, &["main", "plugin_hot"]).is_empty(),
        "plugin_hot must be reached from main:\n{}",
        describe_paths(&top, "plugin_hot", 5)
    );
}

fn crash_case(how: &str, signal: i32) {
    let prog = compile_c("crash.c", "crash", &["-O1", "-g"]);
    let out = scratch_dir(&format!("crash-{how}")).join("prof");
    let run = profile_run(&out, 1000, &prog, &[how, "2.5"], &[]);
    assert_eq!(run.code(), 128 + signal, "{}", run.describe());
    let t = truth(&run.stdout);
    let flat = report_json(&out, &["--view", "flat"]);
    // Inclusive: the program's measure includes its reads of its CPU clock.
    let (before, _) = flat_values(&flat, "before_crash");
    // A thread's samples are written once they are a second old: what is lost is at most
    // the CPU time it used in its last second of wall-clock time (which the program
    // measures: about 1 s of the 2.5 s on an idle machine, less on a loaded one), a
    // sampling period and the program's checkpoint granularity (10 ms) more.
    let (want, last) = (t["before_crash_ns"], t["last_second_ns"]);
    assert!(
        before + last + 15_000_000 >= want && before * 2 >= want && before <= want * 11 / 10,
        "before_crash: profiled {before} ns, measured {want} ns, of which {last} ns in its \
         last second\n{}",
        run.describe()
    );
}

#[test]
fn profile_survives_a_segfault() {
    crash_case("segv", libc_signal::SIGSEGV);
}

#[test]
fn profile_survives_sigkill() {
    crash_case("kill", libc_signal::SIGKILL);
}

mod libc_signal {
    pub const SIGKILL: i32 = 9;
    pub const SIGSEGV: i32 = 11;
}

#[test]
fn cxx_names_are_demangled_and_paths_cross_std_thread() {
    let prog = compile_c(
        "shapes.cc",
        "shapes",
        &["-O1", "-g", "-pthread", "-lstdc++"],
    );
    let out = scratch_dir("shapes").join("prof");
    let run = profile_ok(&out, 1000, &prog, &["0.6"]);
    let t = truth(&run.stdout);
    let flat = report_json(&out, &["--view", "flat"]);
    let (smooth_incl, _) = flat_values(&flat, "geom::Mesh::smooth(double)");
    assert!(
        rel_err(smooth_incl, t["smooth_ns"]) < 0.15,
        "geom::Mesh::smooth(double): profiled {smooth_incl} ns, measured {} ns",
        t["smooth_ns"]
    );
    let (add_all, _) = flat_values(&flat, "geom::Accumulator<double>::add_all(int)");
    assert!(add_all > 0, "template instance name not demangled");
    let top = report_json(&out, &["--view", "top-down"]);
    assert!(
        !find_paths(
            &top,
            &[
                "start_thread",
                "geom::Mesh::smooth(double)",
                "geom::Accumulator<double>::add_all(int)"
            ]
        )
        .is_empty()
            || !find_paths(
                &top,
                &[
                    "geom::Mesh::smooth(double)",
                    "geom::Accumulator<double>::add_all(int)"
                ]
            )
            .is_empty(),
        "paths:\n{}",
        describe_paths(&top, "geom::Accumulator<double>::add_all(int)", 5)
    );
}

/// `--max-size` bounds each process's part: past it, samples are dropped and counted, never
/// cut mid-chunk. `split` writes about 6000 samples at 1 kHz; with 64 KiB some are dropped,
/// the part stays within its limit (with the records' sixteenth and the last chunk), ends
/// cleanly, the report reads it, and the summary says what was dropped and how to raise the
/// limit.
#[test]
fn the_part_keeps_to_its_size_limit_and_says_what_it_dropped() {
    let prog = split_c();
    let out = scratch_dir("max-size").join("prof");
    let mut cmd = std::process::Command::new(blameprof());
    cmd.args(["run", "-F", "1000", "--max-size", "64K", "-o"])
        .arg(&out)
        .arg("--")
        .arg(&prog)
        .args(["4", "1.5"]);
    let run = run_with_timeout(&mut cmd, RUN_TIMEOUT);
    assert_eq!(run.code(), 0, "{}", run.describe());
    assert!(
        run.stderr.contains("the profile reached its size limit")
            && run.stderr.contains("--max-size"),
        "{}",
        run.describe()
    );
    let parts = part_files(&out);
    assert_eq!(parts.len(), 1);
    let size = std::fs::metadata(&parts[0]).unwrap().len();
    // Samples up to the limit, records a sixteenth more, and the last chunk: 4 threads'
    // ends, a few locks and the counters, a few KiB.
    assert!(
        size <= (64 << 10) * 17 / 16 + (16 << 10),
        "part of {size} bytes"
    );
    let flat = report_json(&out, &["--view", "flat"]);
    assert!(samples(&flat) > 100, "{}", run.describe());
    let lost: u64 = run
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("blameprof: samples: "))
        .and_then(|l| l.split("lost: ").nth(1))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("a samples line");
    assert!(lost > 0, "{}", run.describe());
    assert!(
        !run.stderr.contains("without finishing"),
        "the end record must fit\n{}",
        run.describe()
    );
}

/// A part that cannot be written to its end (here a file size limit the program sets,
/// `ulimit -f`, past which a write would fail with EFBIG and kill the program with SIGXFSZ,
/// as a full disk fails writes with ENOSPC): the program runs and exits as unprofiled, what
/// was written before the limit is readable, and the summary says what could not be written
/// rather than showing a short profile without a word.
#[test]
fn a_part_cut_short_by_failing_writes_is_readable_and_named() {
    let prog = compile_c("file_limit.c", "file_limit", &["-O1", "-g"]);
    let out = scratch_dir("file-limit").join("prof");
    let run = profile_run(&out, 1000, &prog, &["32", "3000"], &[]);
    assert_eq!(run.code(), 0, "{}", run.describe());
    assert!(
        run.stdout.contains("truth crunch_ns="),
        "{}",
        run.describe()
    );
    // The bytes past the limit were not written (nor tried: SIGXFSZ would have killed
    // the program), and the summary says so, whether its counters fit or not.
    assert!(
        run.stderr
            .contains("bytes of the profile could not be written (File too large")
            || run.stderr.contains("could not be written to its end"),
        "{}",
        run.describe()
    );
    let parts = part_files(&out);
    assert_eq!(parts.len(), 1);
    assert!(std::fs::metadata(&parts[0]).unwrap().len() <= 32 << 10);
    let flat = report_json(&out, &["--view", "flat"]);
    let (crunch, _) = flat_values(&flat, "crunch");
    assert!(
        crunch > 0,
        "nothing before the limit was read\n{}",
        run.describe()
    );
}
