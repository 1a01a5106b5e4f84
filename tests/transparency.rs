//! Transparency: a program behaves the same with and without `blameprof run`. Proves that
//! stdout (byte for byte, including more than a pipe buffer), stderr (apart from blameprof's
//! own `blameprof:` lines) and the exit status are unchanged, for exit codes 0 and 3 and for
//! death by SIGTERM (reported as 128+15), at 200 Hz and 1000 Hz, with each sample source (the
//! CPU-time timer, and the perf task clock: skipped, and said so, where the kernel refuses
//! perf; each run checked to have been sampled by the source it forced), while the program
//! runs its own SIGPROF itimer, keeps a sentinel in errno, uses threads and blocks in
//! read/nanosleep/usleep; that its mutexes look the same to it; and that C++ exceptions still
//! unwind.

mod common;

use std::process::Command;

use common::*;

fn transparency_prog() -> std::path::PathBuf {
    compile_c("transparency.c", "transparency", &["-O2", "-g", "-pthread"])
}

/// The sample sources a check runs under, each at its rates.
const CPU_TIMER: &[(u32, &str)] = &[(200, "cpu-timer"), (1000, "cpu-timer")];
const PERF_TASK_CLOCK: &[(u32, &str)] = &[(200, "perf-task-clock"), (1000, "perf-task-clock")];

/// `transparency ARG` unprofiled, then profiled with each of `sources` forced (each checked
/// to be the one that sampled every thread).
fn check(arg: &str, sources: &[(u32, &str)]) {
    let prog = transparency_prog();
    let plain = run_with_timeout(Command::new(&prog).arg(arg), RUN_TIMEOUT);
    // Sanity-check the baseline itself so a broken workload cannot make the test vacuous.
    for must in [
        "ticks>0: yes",
        "unexpected EINTR: 0",
        "main errno kept: yes",
        "read: ping",
        "bulk line 2999",
    ] {
        assert!(
            plain.stdout.contains(must),
            "unprofiled run lacks {must:?}\n{}",
            plain.describe()
        );
    }
    let expected_code = if arg == "signal" {
        128 + 15
    } else {
        arg.parse().unwrap()
    };
    assert_eq!(
        plain.code(),
        expected_code,
        "unprofiled exit status\n{}",
        plain.describe()
    );

    for &(freq, source) in sources {
        let out = scratch_dir(&format!("transparency-{arg}-{freq}-{source}")).join("prof");
        let env = [("BLAMEPROF_SOURCE", std::ffi::OsStr::new(source))];
        let prof = profile_run(&out, freq, &prog, &[arg], &env);
        let what = format!("`blameprof run -F {freq} -- transparency {arg}` ({source})");
        assert_eq!(
            prof.status.code(),
            Some(expected_code),
            "{what}: blameprof must exit with the program's status\n{}",
            prof.describe()
        );
        assert!(
            prof.stdout == plain.stdout,
            "{what}: stdout differs\n--- unprofiled ---\n{}\n--- profiled ---\n{}",
            first_difference(&plain.stdout, &prof.stdout).0,
            first_difference(&plain.stdout, &prof.stdout).1
        );
        assert_eq!(
            prof.stderr_without_blameprof(),
            plain.stderr,
            "{what}: stderr differs (blameprof: lines ignored)"
        );
        assert!(
            prof.stderr.lines().any(|l| l.starts_with("blameprof:")),
            "{what}: expected a blameprof: summary on stderr\n{}",
            prof.describe()
        );
        assert!(
            !part_files(&out).is_empty(),
            "{what}: no part files in {}",
            out.display()
        );
        assert_sampled_by(&prof, source);
    }
}

/// The lines around the first difference between two texts.
fn first_difference(a: &str, b: &str) -> (String, String) {
    let al: Vec<&str> = a.lines().collect();
    let bl: Vec<&str> = b.lines().collect();
    let i = al
        .iter()
        .zip(&bl)
        .position(|(x, y)| x != y)
        .unwrap_or(al.len().min(bl.len()));
    let lo = i.saturating_sub(2);
    let show = |v: &[&str]| {
        format!(
            "(from line {}) {}",
            lo + 1,
            v[lo.min(v.len())..(i + 3).min(v.len())].join("\n")
        )
    };
    (show(&al), show(&bl))
}

// Both sample sources: the tick-driven CPU-time timer (the default up to 250 Hz, and what
// threads fall back to where perf is refused) and the perf task clock (the default above).

#[test]
fn exit_0_is_transparent() {
    check("0", CPU_TIMER);
}

#[test]
fn exit_3_is_transparent() {
    check("3", CPU_TIMER);
}

#[test]
fn death_by_sigterm_is_transparent() {
    check("signal", CPU_TIMER);
}

#[test]
fn exit_0_is_transparent_with_the_perf_task_clock() {
    if perf_or_skip() {
        check("0", PERF_TASK_CLOCK);
    }
}

#[test]
fn exit_3_is_transparent_with_the_perf_task_clock() {
    if perf_or_skip() {
        check("3", PERF_TASK_CLOCK);
    }
}

#[test]
fn death_by_sigterm_is_transparent_with_the_perf_task_clock() {
    if perf_or_skip() {
        check("signal", PERF_TASK_CLOCK);
    }
}

#[test]
fn profile_of_a_failing_program_is_still_written_and_readable() {
    let prog = transparency_prog();
    let out = scratch_dir("transparency-report").join("prof");
    let run = profile_run(&out, 1000, &prog, &["3"], &[]);
    assert_eq!(run.status.code(), Some(3), "{}", run.describe());
    let flat = report_json(&out, &["--view", "flat"]);
    assert!(samples(&flat) > 0, "no samples from transparency run");
    assert!(
        flat_values(&flat, "churn").1 > 0,
        "churn (the program's CPU loop) missing from the flat view"
    );
}

/// A program sees its mutexes as glibc leaves them, profiled or not: the runtime takes
/// glibc's fast path for plain mutexes itself (owner, users and lock word while held and
/// after, trylock's EBUSY, destroy's result, 4 threads contending with a condition variable
/// mixed in, a fork child's hold), and errorcheck and recursive mutexes keep their errors.
/// The runtime must say its fast path is on, so the comparison is not vacuous; with lock
/// elision requested it must be off, and the program still sees the same.
#[test]
fn mutexes_look_the_same_to_the_program() {
    let prog = compile_c("mutex_fields.c", "mutex_fields", &["-O2", "-g", "-pthread"]);
    let plain = run_with_timeout(&mut Command::new(&prog), RUN_TIMEOUT);
    assert_eq!(plain.code(), 0, "unprofiled run\n{}", plain.describe());
    for must in [
        "contended: counter=808000 owner_ok=1",
        "plain held: lock=1 owner=me users=1",
        "single threaded: 1",
    ] {
        assert!(
            plain.stdout.contains(must),
            "unprofiled run lacks {must:?}\n{}",
            plain.describe()
        );
    }
    for (tunables, inline) in [("", "inline: 1"), ("glibc.elision.enable=1", "inline: 0")] {
        let out = scratch_dir(&format!("mutex_fields{}", tunables.len())).join("prof");
        let env = [("GLIBC_TUNABLES", std::ffi::OsStr::new(tunables))];
        // The program unprofiled with the same tunables: on a CPU with transactional memory,
        // glibc then elides plain mutexes and keeps no owner or user count for them.
        let baseline = match tunables {
            "" => plain.stdout.clone(),
            _ => {
                let mut cmd = Command::new(&prog);
                cmd.env("GLIBC_TUNABLES", tunables);
                let same = run_with_timeout(&mut cmd, RUN_TIMEOUT);
                assert_eq!(
                    same.code(),
                    0,
                    "unprofiled run ({tunables:?})\n{}",
                    same.describe()
                );
                same.stdout
            }
        };
        let run = profile_run(&out, 1000, &prog, &[], &env);
        assert_eq!(
            run.code(),
            0,
            "profiled run ({tunables:?})\n{}",
            run.describe()
        );
        assert!(
            run.stderr.contains(inline),
            "GLIBC_TUNABLES={tunables:?}: the runtime should say {inline:?}\n{}",
            run.describe()
        );
        assert_eq!(
            run.stdout, baseline,
            "GLIBC_TUNABLES={tunables:?}: stdout differs from the unprofiled run's"
        );
    }
}

/// C++ exceptions thrown and caught on several threads, through frames that hold a mutex, run
/// as without profiling. The runtime links its own copy of libgcc's unwinder (for the
/// standard library's panics; see runtime/build.rs): the program's exceptions must still be
/// unwound by the program's libgcc_s, every one caught where it should be.
#[test]
fn cxx_exceptions_are_transparent() {
    let prog = compile_c(
        "cxx_exceptions.cc",
        "cxx_exceptions",
        &["-O1", "-g", "-pthread", "-lstdc++"],
    );
    let args = ["3", "4000"];
    let plain = run_with_timeout(Command::new(&prog).args(args), RUN_TIMEOUT);
    assert_eq!(plain.code(), 0, "unprofiled run\n{}", plain.describe());
    assert!(
        plain.stdout.contains("thread 2 caught 4000"),
        "unprofiled run\n{}",
        plain.describe()
    );
    let out = scratch_dir("cxx_exceptions").join("prof");
    let run = profile_ok(&out, 1000, &prog, &args);
    assert_eq!(run.stdout, plain.stdout, "stdout differs under profiling");
}
