//! Every function the runtime exports, exercised under profiling (tests/programs/
//! interposers.c). Proves that
//! (1) every exported interposer (each dynamic symbol of `libblameprof_rt.so` but the
//! runtime's own `blameprof_rt_*`) is called by `interposers.c`, so a new export without a
//! profiled test fails here;
//! (2) `interposers waits` prints the same return codes and errno names (no `EINTR` leaked,
//! the program's own signals still interrupt `pause` and `sigsuspend`) and exits the same
//! profiled as unprofiled, and each of its lock, condition-variable, semaphore, barrier,
//! join, spin and futex waits, made by a function of its own, is that function's idleness
//! at `w_<what> -> <interposed function>`, of its kind, within 15% (+2 ms) of the wait the
//! program measured around the call; the sleeps, descriptor waits and signal waits, which
//! the runtime only keeps its signal out of, are neither idleness nor work;
//! (3) `interposers exec` starts this program again through every exec variant (and
//! posix_spawn, posix_spawnp): each new image is profiled as a process image of its own
//! (`--pid`), with its arguments and environment intact, its part ended cleanly whether it
//! returned from main or called `_exit` or `_Exit`, and its work (`image_work`, and the
//! process's total) within 15% of the CPU time it measured of itself;
//! (4) an exec given an environment without the profiler's variables (the program's own
//! making) runs as it would, is not in the profile, and the run's summary says so
//! (`execs_unprofiled`) rather than showing a profile that looks complete.

mod common;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::Value;

fn interposers() -> PathBuf {
    compile_c("interposers.c", "interposers", &["-O2", "-g", "-pthread"])
}

/// The waits that are idleness: (waiting function, interposed function, wait kind).
const IDLE_WAITS: &[(&str, &str, &str)] = &[
    ("w_mutex_lock", "pthread_mutex_lock", "mutex"),
    ("w_mutex_timedlock", "pthread_mutex_timedlock", "mutex"),
    ("w_mutex_clocklock", "pthread_mutex_clocklock", "mutex"),
    (
        "w_mutex_clocklock_timeout",
        "pthread_mutex_clocklock",
        "mutex",
    ),
    ("w_rwlock_rdlock", "pthread_rwlock_rdlock", "rwlock"),
    ("w_rwlock_wrlock", "pthread_rwlock_wrlock", "rwlock"),
    (
        "w_rwlock_timedrdlock",
        "pthread_rwlock_timedrdlock",
        "rwlock",
    ),
    (
        "w_rwlock_timedwrlock",
        "pthread_rwlock_timedwrlock",
        "rwlock",
    ),
    (
        "w_rwlock_clockrdlock",
        "pthread_rwlock_clockrdlock",
        "rwlock",
    ),
    (
        "w_rwlock_clockwrlock",
        "pthread_rwlock_clockwrlock",
        "rwlock",
    ),
    (
        "w_rwlock_clockwrlock_timeout",
        "pthread_rwlock_clockwrlock",
        "rwlock",
    ),
    ("w_cond_wait", "pthread_cond_wait", "condvar"),
    ("w_cond_timedwait", "pthread_cond_timedwait", "condvar"),
    ("w_cond_clockwait", "pthread_cond_clockwait", "condvar"),
    (
        "w_cond_clockwait_timeout",
        "pthread_cond_clockwait",
        "condvar",
    ),
    ("w_sem_wait", "sem_wait", "semaphore"),
    ("w_sem_timedwait", "sem_timedwait", "semaphore"),
    ("w_sem_clockwait", "sem_clockwait", "semaphore"),
    ("w_sem_clockwait_timeout", "sem_clockwait", "semaphore"),
    ("w_barrier_wait", "pthread_barrier_wait", "barrier"),
    ("w_join", "pthread_join", "join"),
    ("w_timedjoin", "pthread_timedjoin_np", "join"),
    ("w_clockjoin", "pthread_clockjoin_np", "join"),
    ("w_clockjoin_timeout", "pthread_clockjoin_np", "join"),
    ("w_timedjoin_timeout", "pthread_timedjoin_np", "join"),
    ("w_spin_lock", "pthread_spin_lock", "spin"),
    ("w_futex_wait", "syscall", "futex"),
];

/// The waits the runtime only keeps its sampling signal out of: no idleness (by design:
/// idleness is waiting for a synchronization object), and no work either.
const QUIET_WAITS: &[(&str, &str)] = &[
    ("w_nanosleep", "nanosleep"),
    ("w_clock_nanosleep", "clock_nanosleep"),
    ("w_usleep", "usleep"),
    ("w_sleep", "sleep"),
    ("w_poll", "poll"),
    ("w_ppoll", "ppoll"),
    ("w_select", "select"),
    ("w_pselect", "pselect"),
    ("w_epoll_wait", "epoll_wait"),
    ("w_epoll_pwait", "epoll_pwait"),
    ("w_epoll_pwait2", "epoll_pwait2"),
    ("w_pause", "pause"),
    ("w_sigsuspend", "sigsuspend"),
    ("w_sigtimedwait", "sigtimedwait"),
    ("w_sigtimedwait_signalled", "sigtimedwait"),
    ("w_sigwaitinfo", "sigwaitinfo"),
    ("w_sigwait", "sigwait"),
];

/// The exec variants `interposers exec` starts an image with.
const VARIANTS: [&str; 10] = [
    "execl",
    "execlp",
    "execle",
    "execv",
    "execvp",
    "execvpe",
    "execve",
    "fexecve",
    "posix_spawn",
    "posix_spawnp",
];

/// Relative tolerance of a figure against the program's own.
const TOLERANCE: f64 = 0.15;
/// Absolute slack on top of it for the waits (about 100 ms each): a scheduling delay.
const SLACK_NS: u64 = 2_000_000;

fn ms(ns: u64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

/// The dynamic symbols the runtime library defines.
fn runtime_exports() -> Vec<String> {
    let lib = runtime_library();
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&lib)
        .output()
        .expect("cannot run nm (binutils)");
    assert!(out.status.success(), "nm -D {}", lib.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (kind, name) = (f.nth(1)?, f.next()?);
            (kind == "T" || kind == "W" || kind == "i").then(|| name.to_string())
        })
        .collect()
}

#[test]
fn every_exported_interposer_is_called_by_the_profiled_program() {
    let source = std::fs::read_to_string(programs_dir().join("interposers.c")).unwrap();
    let exports = runtime_exports();
    assert!(
        exports.iter().any(|e| e == "pthread_mutex_lock"),
        "nm found no interposers in the runtime: {exports:?}"
    );
    // GCC's OpenMP entry points (`GOMP_*`), and the functions the runtime exports to name
    // its OpenMP waits, are called by compiled OpenMP code: tests/openmp.rs checks them.
    let missing: Vec<&String> = exports
        .iter()
        .filter(|e| !e.starts_with("blameprof_rt_"))
        .filter(|e| !e.starts_with("GOMP_") && !e.starts_with("omp_"))
        .filter(|e| !source.contains(&format!("{e}(")))
        .collect();
    assert!(
        missing.is_empty(),
        "the runtime exports {missing:?}, which tests/programs/interposers.c never calls: \
         add a check of each there (and to the lists of tests/interposers.rs if it waits)"
    );
    // And every wait this test checks is in the program.
    for (f, callee) in QUIET_WAITS
        .iter()
        .copied()
        .chain(IDLE_WAITS.iter().map(|(f, c, _)| (*f, *c)))
    {
        assert!(
            source.contains(&format!("{f}(")) && source.contains(&format!("{callee}(")),
            "{f} -> {callee} is not in interposers.c"
        );
    }
}

/// Idleness (and its kind) at `f -> callee` in a top-down report.
fn idle_at(td: &Value, f: &str, callee: &str, metric: &str) -> u64 {
    path_sum(td, &[f, callee], metric)
}

#[test]
fn every_wait_behaves_the_same_and_lock_waits_are_their_measured_idleness() {
    let prog = interposers();
    let plain = unprofiled(&prog, &["waits"]);
    assert_eq!(plain.code(), 0, "unprofiled run\n{}", plain.describe());
    // Both sample sources: the perf task clock (the default) and the CPU-time timer that
    // threads fall back to where perf is refused (there the perf case says it skipped).
    if perf_or_skip() {
        waits_case(&prog, &plain, "perf-task-clock");
    }
    waits_case(&prog, &plain, "cpu-timer");
}

/// `interposers waits` profiled with sample source `source`, against `plain`.
fn waits_case(prog: &Path, plain: &Run, source: &str) {
    let out = scratch_dir(&format!("interposers-waits-{source}")).join("prof");
    let env = [("BLAMEPROF_SOURCE", OsStr::new(source))];
    let run = profile_run(&out, 1000, prog, &["waits"], &env);
    let what = format!("interposers waits ({source})");
    assert_unchanged(&what, plain, &run);
    assert_sampled_by(&run, source);
    assert!(
        !run.stdout.contains("FAIL"),
        "{what}: a check failed under profiling\n{}",
        run.describe()
    );
    let t = truth(&run.stdout);
    let td = report_json_metric(&out, "idleness", &["--view", "top-down"]);

    let mut lines = Vec::new();
    let mut failures = Vec::new();
    for &(f, callee, kind) in IDLE_WAITS {
        let want = t[&format!("{f}_ns")];
        let got = idle_at(&td, f, callee, "idleness");
        let of_kind = idle_at(&td, f, callee, &format!("idleness.{kind}"));
        let line = format!(
            "{f} -> {callee}: idleness {} ({} of it {kind}), measured {} ({:+.1}%)",
            ms(got),
            ms(of_kind),
            ms(want),
            pct_err(got, want)
        );
        let near = (got as f64 - want as f64).abs() <= TOLERANCE * want as f64 + SLACK_NS as f64;
        if !near || (of_kind as f64) < 0.9 * got as f64 {
            failures.push(line.clone());
        }
        lines.push(line);
    }
    for &(f, callee) in QUIET_WAITS {
        let want = t[&format!("{f}_ns")];
        let idle = idle_at(&td, f, callee, "idleness");
        let work = path_sum(&td, &[f], "work");
        let line = format!(
            "{f} -> {callee}: idleness {}, work {}, measured wait {}",
            ms(idle),
            ms(work),
            ms(want)
        );
        // The wait is no CPU time: what work there is lies around the call (clock reads,
        // a printf), never the wait.
        if idle != 0 || work as f64 > 0.1 * want as f64 {
            failures.push(line.clone());
        }
        lines.push(line);
    }
    println!("{what}:\n  {}", lines.join("\n  "));
    assert!(
        failures.is_empty(),
        "{what}: profiled waits against the program's own (tolerance {:.0}% + {}):\n  {}\n\
         all:\n  {}\nheaviest idleness paths:\n{}",
        TOLERANCE * 100.0,
        ms(SLACK_NS),
        failures.join("\n  "),
        lines.join("\n  "),
        describe_paths_metric(&td, "w_mutex_lock", 3, "idleness")
    );
}

/// The processes of a report (`processes` array) with pid `pid`.
fn images_of(report: &Value, pid: u64) -> Vec<&Value> {
    report["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .filter(|p| p["pid"] == pid)
        .collect()
}

#[test]
fn every_exec_variant_starts_a_profiled_image_with_its_arguments_and_work() {
    let prog = interposers();
    let plain = unprofiled(&prog, &["exec", "0.05"]);
    assert_eq!(plain.code(), 0, "unprofiled run\n{}", plain.describe());
    let out = scratch_dir("interposers-exec").join("prof");
    let run = profile_run(&out, 1000, &prog, &["exec", "0.3"], &[]);
    assert_unchanged("interposers exec", &plain, &run);
    let t: HashMap<String, u64> = truths(&run.stdout);
    for v in VARIANTS {
        assert!(
            run.stdout.contains(&format!("image {v}: argv ok env ok")),
            "{v}: the new image did not get its arguments and environment\n{}",
            run.describe()
        );
    }

    let mut lines = Vec::new();
    let mut failures = Vec::new();
    for v in VARIANTS {
        let pid = t[&format!("pid_{v}")];
        let flat = report_json(&out, &["--view", "flat", "--pid", &pid.to_string()]);
        // The image this variant started: its own part, with the arguments it was given,
        // ended cleanly however the program ended.
        let images = images_of(&flat, pid);
        let image = images
            .iter()
            .find(|p| p["argv"].as_array().and_then(|a| a.get(1)) == Some(&Value::from("image")))
            .unwrap_or_else(|| panic!("{v}: no profiled image of pid {pid}: {images:?}"));
        let argv: Vec<&str> = image["argv"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(
            argv,
            ["interposers-image", "image", v, "0.3", "two words", ""],
            "{v}: the profile's image of pid {pid} has other arguments"
        );
        if v.starts_with("exec") || v == "fexecve" {
            assert_eq!(
                image["exec_generation"], 1,
                "{v}: the image should follow the forked child's exec: {images:?}"
            );
        }
        assert_eq!(
            image["ended_cleanly"], true,
            "{v}: the image's part did not end cleanly: {image}"
        );
        for t2 in flat["threads"].as_array().unwrap() {
            assert_eq!(t2["pid"], pid, "{v}: --pid {pid} kept {t2}");
        }
        let (work, want) = (
            flat_values(&flat, "image_work").1,
            t[&format!("image_{v}_ns")],
        );
        let (total, proc_cpu) = (total_work(&flat), t[&format!("proc_{v}_ns")]);
        let line = format!(
            "{v} (pid {pid}): image_work {} against {} ({:+.1}%), process {} against {} ({:+.1}%)",
            ms(work),
            ms(want),
            pct_err(work, want),
            ms(total),
            ms(proc_cpu),
            pct_err(total, proc_cpu)
        );
        if !within_of(work, want, TOLERANCE) || !within_of(total, proc_cpu, TOLERANCE) {
            failures.push(line.clone());
        }
        lines.push(line);
    }
    println!("{}", lines.join("\n"));

    // The image started with an environment of its own is missing, and named missing.
    let bare = t["pid_execve_bare"];
    let flat = report_json(&out, &["--view", "flat", "--pid", &bare.to_string()]);
    let images = images_of(&flat, bare);
    assert!(
        images.iter().all(|p| p["exec_generation"] == 0) && flat_values(&flat, "image_work").1 == 0,
        "execve_bare: an image without the profiler's environment cannot be profiled: {images:?}"
    );
    assert!(
        run.stdout.contains("image execve_bare: argv ok env ok"),
        "{}",
        run.describe()
    );
    assert!(
        run.stderr.contains("blameprof: warning: 1 exec call gave the new program an environment without the profiler"),
        "the summary does not name the exec whose image is not profiled\n{}",
        run.describe()
    );
    assert!(
        failures.is_empty(),
        "exec'd images' work against their own CPU time (tolerance {:.0}%):\n  {}\nall:\n  {}",
        TOLERANCE * 100.0,
        failures.join("\n  "),
        lines.join("\n  ")
    );
}
