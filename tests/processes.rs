//! Processes and threads started every way a program starts them. Proves, for each, that the
//! program's stdout, stderr and exit status are those of an unprofiled run, and that the
//! profile holds the CPU time each function measured of itself (within 15%):
//! (1) vfork + exec, posix_spawn, system() (through /bin/sh) and a child that calls setsid():
//! every process image has its part and its work;
//! (2) a double-forking daemon: `blameprof run` ends with the program (exit status 0), not
//! with the daemon, and its summary names the processes still running and the profile to
//! report once they end; the daemon's part, complete once it ends, holds its work;
//! (3) 400 threads that each live for 3 ms of CPU time, sampled at 5000 Hz: every thread is in
//! the report and their work is there;
//! (4) a thread started by raw clone(2), which pthread_create never saw: it is not sampled
//! (documented; its CPU time is counted), and the program neither crashes nor hangs;
//! (5) threads renamed with pthread_setname_np after they started are shown by their new
//! names in the threads view;
//! (6) a program that blocks every signal is still sampled, and still sees them blocked;
//! (7) a program of threads too short to be sampled is named in a warning, never an empty
//! profile without a word.

mod common;

use common::*;
use std::collections::HashMap;
use std::path::PathBuf;

/// Asserts `function`'s inclusive work in the flat report is within `tolerance` of the time
/// the program measured, `truth[<function>_ns]`: the CPU time of the whole call, which
/// includes the function's own reads of its CPU clock (`clock_gettime`, a system call through
/// the vDSO for a CPU clock: samples taken at their return are `[vdso]`'s exclusive work,
/// up to 15% of `signal_blocker`'s crunch, whose loop reads it every few microseconds).
fn assert_work(flat: &serde_json::Value, truth: &HashMap<String, u64>, function: &str, tol: f64) {
    let want = truth[&format!("{function}_ns")];
    assert_close(function, flat_values(flat, function).0, want, tol);
}

fn procs() -> PathBuf {
    compile_c("procs.c", "procs", &["-O2", "-g"])
}

fn thread_life() -> PathBuf {
    compile_c("thread_life.c", "thread_life", &["-O2", "-g", "-pthread"])
}

/// CPU seconds of each function in the unprofiled runs, which only show what the program
/// prints (numbers aside) and how it ends.
const BRIEF: &str = "0.1";

/// Runs `procs MODE 0.4` profiled at 1000 Hz and briefly unprofiled; checks they agree and
/// that `functions` hold their measured work; returns the profiled run and the profile.
fn procs_case(mode: &str, functions: &[&str]) -> (Run, PathBuf) {
    let prog = procs();
    let args = [mode, "0.4"];
    let plain = unprofiled(&prog, &[mode, BRIEF]);
    assert!(plain.status.success(), "procs {mode}\n{}", plain.describe());
    let out = scratch_dir(&format!("procs-{mode}")).join("prof");
    let run = profile_run(&out, 1000, &prog, &args, &[]);
    assert_unchanged(&format!("procs {mode}"), &plain, &run);
    assert!(
        run.stderr
            .contains("blameprof: the program exited with status 0"),
        "procs {mode}: the summary does not say how the program ended\n{}",
        run.describe()
    );
    let t = truths(&run.stdout);
    let flat = report_json(&out, &["--view", "flat"]);
    for f in functions {
        assert_work(&flat, &t, f, 0.15);
    }
    (run, out)
}

#[test]
fn vfork_and_exec_child_is_profiled() {
    let (_, out) = procs_case("vfork", &["parent_work", "child_work"]);
    assert_eq!(
        part_files(&out).len(),
        2,
        "a part for the parent and the child"
    );
}

#[test]
fn posix_spawn_child_is_profiled() {
    let (_, out) = procs_case("spawn", &["parent_work", "child_work"]);
    assert_eq!(
        part_files(&out).len(),
        2,
        "a part for the parent and the child"
    );
}

#[test]
fn system_command_is_profiled_through_the_shell() {
    let (_, out) = procs_case("system", &["parent_work", "child_work"]);
    // The parent, /bin/sh and the command: sh may exec the command in its own process.
    assert!(part_files(&out).len() >= 2, "{:?}", part_files(&out));
}

#[test]
fn child_in_a_new_session_is_profiled() {
    procs_case("setsid", &["parent_work", "session_work"]);
}

/// A daemon (fork, setsid, fork; the parent exits as soon as the grandchild is in its own
/// session, and the grandchild works for 1 s):
/// `blameprof run` does not wait for it (a daemon may run for ever). It exits with the
/// program's status as soon as the program ends and says which processes of the run are
/// still running, with the profile to report once they end. Once the daemon has ended (the
/// test's stdout pipe reaches its end then), the report holds its work in full.
#[test]
fn daemon_left_running_is_named_and_its_profile_completes_when_it_ends() {
    let prog = procs();
    let args = ["daemon", "0.4"];
    let plain = unprofiled(&prog, &["daemon", BRIEF]);
    let out = scratch_dir("procs-daemon").join("prof");
    // Returns once stdout is closed: when the daemon has ended, after blameprof.
    let run = profile_run(&out, 1000, &prog, &args, &[]);
    assert_unchanged("procs daemon", &plain, &run);
    let note = run
        .stderr
        .lines()
        .find(|l| l.starts_with("blameprof: warning: ") && l.contains(" still running "))
        .unwrap_or_else(|| {
            panic!(
                "the summary does not name the daemon still running\n{}",
                run.describe()
            )
        });
    let expected = format!(
        "'blameprof report {}'",
        out.canonicalize().unwrap().display()
    );
    assert!(note.contains(&expected), "{note}");
    let t = truths(&run.stdout);
    let flat = report_json(&out, &["--view", "flat"]);
    assert_work(&flat, &t, "parent_work", 0.15);
    assert_work(&flat, &t, "daemon_work", 0.15);
    // The program, the intermediate child and the daemon.
    assert_eq!(part_files(&out).len(), 3, "{:?}", part_files(&out));
}

#[test]
fn many_short_threads_at_5000_hz() {
    // 5000 Hz is the perf task clock's: the CPU-time timer expires on scheduler ticks, where
    // 3 ms threads get a sample or none.
    if !perf_or_skip() {
        return;
    }
    let prog = thread_life();
    let args = ["short", "400", "3000"];
    let plain = unprofiled(&prog, &["short", "400", "100"]);
    let out = scratch_dir("short-threads").join("prof");
    let run = profile_run(&out, 5000, &prog, &args, &[]);
    assert_unchanged("thread_life short", &plain, &run);
    let t = truths(&run.stdout);
    let flat = report_json(&out, &["--view", "flat"]);
    let threads = flat["threads"].as_array().unwrap().len() as u64;
    assert_eq!(threads, t["threads"] + 1, "every thread and the main one");
    assert_sampled_by(&run, "perf-task-clock");
    // Each thread's CPU time since its last sample is charged at its end, at that sample's
    // path: what is left out is the CPU time of threads never sampled (none, at 15 periods
    // each) and of their starts and ends outside short_work.
    assert_work(&flat, &t, "short_work", 0.05);
}

/// A thread that spends 99% of its CPU time in the kernel is sampled a few times in all by
/// a perf task clock (it counts user-mode time), and each sample carries the CPU time since
/// the one before: its CPU time after its last one (a tenth of the run, or more) is charged
/// at its end. Its work is its CPU time, to far less than one sample's share.
#[test]
fn a_thread_that_computes_in_the_kernel_is_charged_all_its_cpu_time() {
    let prog = thread_life();
    let plain = unprofiled(&prog, &["kernel", BRIEF]);
    let out = scratch_dir("kernel-thread").join("prof");
    let run = profile_run(&out, 1000, &prog, &["kernel", "0.4"], &[]);
    assert_unchanged("thread_life kernel", &plain, &run);
    let t = truths(&run.stdout);
    let threads = report_json(&out, &["--view", "threads"]);
    let worker = threads["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| {
            t["start_routine"]
                .as_str()
                .is_some_and(|s| name_matches(s, "kernel_thread"))
        })
        .unwrap_or_else(|| panic!("no kernel_thread thread: {threads}"));
    let (got, want) = (work(worker, "totals"), t["kernel_work_ns"]);
    assert!(
        got.abs_diff(want) as f64 <= 0.01 * want as f64 + 2e6,
        "kernel_thread: {got} ns of work, its kernel_work measured {want} ns (user mode {} \
         ns)\n{}",
        t["user_ns"],
        run.describe()
    );
}

/// A thread made by raw clone(2) has no timer (the runtime gives one to threads started by
/// pthread_create): its work is not in the profile, but its CPU time is counted as
/// `unseen_threads_cpu_ns`. The main thread's work is in the profile, and the program runs
/// as without the profiler.
#[test]
fn raw_clone_thread_is_not_sampled_and_does_no_harm() {
    let prog = thread_life();
    let args = ["clone", "0.4"];
    let plain = unprofiled(&prog, &["clone", BRIEF]);
    let out = scratch_dir("raw-clone").join("prof");
    let run = profile_run(&out, 1000, &prog, &args, &[]);
    assert_unchanged("thread_life clone", &plain, &run);
    let t = truths(&run.stdout);
    let flat = report_json(&out, &["--view", "flat"]);
    assert_work(&flat, &t, "main_work", 0.15);
    assert_eq!(
        flat_values(&flat, "clone_work"),
        (0, 0),
        "the raw clone thread was sampled: update the documented behaviour"
    );
    assert_eq!(flat["threads"].as_array().unwrap().len(), 1);
    let unseen = run.noted("unseen_threads_cpu_ns");
    let want = t["clone_work_ns"];
    assert!(
        unseen as f64 > 0.9 * want as f64 && (unseen as f64) < 1.1 * want as f64 + 5e6,
        "unseen_threads_cpu_ns {unseen}, the raw clone thread measured {want} ns\n{}",
        run.describe()
    );
}

#[test]
fn threads_renamed_after_start_show_their_new_names() {
    let prog = thread_life();
    let args = ["rename", "0.4"];
    let plain = unprofiled(&prog, &["rename", BRIEF]);
    let out = scratch_dir("rename").join("prof");
    let run = profile_run(&out, 1000, &prog, &args, &[]);
    assert_unchanged("thread_life rename", &plain, &run);
    let t = truths(&run.stdout);
    let threads = report_json(&out, &["--view", "threads"]);
    let mut names: Vec<(&str, u64)> = threads["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap(), work(t, "totals")))
        .collect();
    names.sort();
    assert_eq!(
        names.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        ["renamed-main", "renamed-worker"],
        "{threads}"
    );
    for (name, truth) in [
        ("renamed-main", t["main_work_ns"]),
        ("renamed-worker", t["renamed_work_ns"]),
    ] {
        let (_, got) = names.iter().find(|(n, _)| *n == name).copied().unwrap();
        assert!(
            got as f64 > 0.85 * truth as f64 && (got as f64) < 1.15 * truth as f64 + 20e6,
            "{name}: {got} ns of work, measured {truth} ns"
        );
    }
}

/// A program that blocks every signal (for `signalfd` or `sigwait`), with `pthread_sigmask`
/// in the main thread before its workers start and `sigprocmask` in each worker: it is
/// still sampled (the runtime never lets the sampling signal be blocked, and counts the
/// requests), and the signals it cares about read back blocked, as unprofiled.
#[test]
fn a_program_that_blocks_every_signal_is_still_sampled() {
    let prog = compile_c(
        "signal_blocker.c",
        "signal_blocker",
        &["-O1", "-g", "-pthread"],
    );
    let plain = unprofiled(&prog, &["2", "400"]);
    let out = scratch_dir("signal-blocker").join("prof");
    let run = profile_run(&out, 200, &prog, &["2", "400"], &[]);
    assert_unchanged("signal_blocker", &plain, &run);
    assert!(
        run.stdout.contains("mask: all blocked"),
        "{}",
        run.describe()
    );
    let t = truth(&run.stdout);
    let flat = report_json(&out, &["--view", "flat"]);
    assert_work(&flat, &t, "crunch", 0.15);
    // The main thread's pthread_sigmask and each worker's sigprocmask.
    let kept = run.noted("sampling_signal_kept_unblocked");
    assert_eq!(kept, 3, "{}", run.describe());
}

/// Threads shorter than one sampling period are never reached by their CPU-time timers: a
/// program made of them writes no CPU sample (or, on a loaded machine, one or two, from a
/// thread the scheduler let run a period's worth), and the summary says so, why, and what
/// to do, instead of showing an empty profile without a word.
#[test]
fn a_process_of_threads_too_short_to_sample_is_named_in_a_warning() {
    let prog = thread_life();
    let out = scratch_dir("short-unsampled").join("prof");
    let run = profile_run(&out, 200, &prog, &["short", "100", "2000"], &[]);
    assert_eq!(run.code(), 0, "{}", run.describe());
    let warning = run
        .stderr
        .lines()
        .find(|l| l.contains("of CPU time, with") && l.contains("CPU sample"))
        .unwrap_or_else(|| panic!("no warning\n{}", run.describe()));
    assert!(
        warning.contains("less than one sampling period") && warning.contains("raise -F"),
        "{warning}"
    );
}
