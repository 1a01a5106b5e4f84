//! OpenMP programs built by GCC (`gcc -fopenmp`), run on GNU libgomp and on LLVM's libomp
//! (the distribution's `libomp5`, put in libgomp's place by a `libgomp.so.1` link, as users
//! switch runtimes): waits at a parallel region's end, at `#pragma omp barrier` and at
//! `#pragma omp critical` (unnamed and named) are idleness at the waiter and blame at the
//! thread that kept it waiting, against the program's own measure
//! (tests/programs/omp_regions.c), and the locks are named as OpenMP constructs.
//!
//! Bounds, from the program's truth: idleness between its arrival-based waiting (85% of
//! it) and what its threads measured including the time to leave the wait (115% of it):
//! on a loaded machine a woken thread waits for a CPU, and the profiler rightly counts that
//! as waiting; blame within 25% of the waiting the program charges to the late thread or
//! the holders. The workloads run one at a time (`machine()`).

mod common;

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

use common::*;
use serde_json::Value;

fn machine() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

fn program() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| compile_c("omp_regions.c", "omp_regions", &["-O2", "-g", "-fopenmp"]))
}

/// The OpenMP runtimes a GCC program can run on.
#[derive(Clone, Copy, Debug)]
enum Runtime {
    /// GCC's own, the program's dependency.
    Gnu,
    /// LLVM's, in libgomp's place (it exports GCC's interface too).
    Llvm,
}

/// The environment that puts `runtime` in the program's `libgomp.so.1`.
fn runtime_env(runtime: Runtime) -> Vec<(&'static str, OsString)> {
    match runtime {
        Runtime::Gnu => Vec::new(),
        Runtime::Llvm => {
            static DIR: OnceLock<PathBuf> = OnceLock::new();
            let dir = DIR.get_or_init(|| {
                let libomp = Path::new("/usr/lib/x86_64-linux-gnu/libomp.so.5");
                assert!(
                    libomp.exists(),
                    "{} is missing: run scripts/install-system-packages.sh (package libomp5)",
                    libomp.display()
                );
                let dir = scratch_dir("openmp-llvm-runtime");
                let link = dir.join("libgomp.so.1");
                let _ = std::fs::remove_file(&link);
                std::os::unix::fs::symlink(libomp, &link).expect("libgomp.so.1 link");
                dir
            });
            vec![("LD_LIBRARY_PATH", dir.clone().into_os_string())]
        }
    }
}

/// One profiled run of a mode of omp_regions.c: its truth and its flat report.
struct Profiled {
    what: String,
    dir: PathBuf,
    truth: HashMap<String, u64>,
    flat: Value,
}

fn profile(mode: &str, runtime: Runtime, args: &[&str]) -> Profiled {
    let _machine = machine();
    let what = format!("{mode} on {runtime:?}");
    let dir = scratch_dir(&format!("openmp-{mode}-{runtime:?}")).join("p.prof");
    let env = runtime_env(runtime);
    let env: Vec<(&str, &std::ffi::OsStr)> = env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
    let mut all = vec![mode];
    all.extend_from_slice(args);
    let run = profile_run(&dir, 200, program(), &all, &env);
    assert!(run.status.success(), "{what}: {}", run.describe());
    let truth = truth(&run.stdout);
    let flat = report_json_metric(&dir, "idleness", &["--view", "flat"]);
    Profiled {
        what,
        dir,
        truth,
        flat,
    }
}

impl Profiled {
    fn truth(&self, key: &str) -> u64 {
        self.truth[key]
    }

    fn total(&self, metric: &str) -> u64 {
        total_or_zero(&self.flat, metric)
    }

    /// Inclusive `metric` at function `f`.
    fn at(&self, f: &str, metric: &str) -> u64 {
        flat_incl(&self.flat, f, metric)
    }

    /// Asserts the idleness measured at `f` lies within the program's bounds.
    fn idleness_within_truth(&self, f: &str, metric: &str) {
        let (low, high) = (self.truth("wait_ns"), self.truth("wait_upper_ns"));
        let got = self.at(f, metric);
        assert!(
            got as f64 >= 0.85 * low as f64 && got as f64 <= 1.15 * high as f64,
            "{}: {metric} at {f} {got} ns, the program waited {low} ns (to the last arrival) \
             to {high} ns (to leaving the wait)\n{}",
            self.what,
            describe_functions(&self.flat, &[f]),
        );
        // The rest of the kind's idleness is elsewhere: a region's end where the threads
        // were balanced anyway; a worker's wait in its pool between regions apart.
        let all = self.total(metric) - self.at("omp_worker_idle", metric);
        assert!(
            got as f64 >= 0.9 * all as f64,
            "{}: only {got} of {all} ns of {metric} at {f}",
            self.what
        );
    }

    /// Asserts the barrier's blame is the waiting the program charged to the slow step, in
    /// total within 25%, and at the slow thread's work meanwhile (late work), not at the
    /// barrier or the other steps. Late work spreads a round's blame over the late thread's
    /// samples during the waits: where the machine preempted that thread it has fewer, and
    /// part of the blame stays at its arrival; so at least 60% at the slow step, and three
    /// times what the other steps have.
    fn late_blame(&self) {
        let want = self.truth("blame_slow_ns");
        let total = self.total("blame.barrier");
        let slow = self.at("slow_step", "blame.barrier");
        let others = self.at("quick_step", "blame.barrier") + self.at("even_step", "blame.barrier");
        assert!(
            within_of(total, want, 0.25) && slow as f64 >= 0.6 * want as f64 && slow >= 3 * others,
            "{}: blame.barrier {total} ns in all ({:+.1}%), {slow} ns under slow_step, {others} \
             ns under the other steps; the program charged {want} ns to the slow step",
            self.what,
            pct_err(total, want)
        );
    }

    /// The lock view's row named `name`, as JSON.
    fn lock(&self, name: &str) -> Value {
        let run = blameprof_cmd(&[
            "report",
            "--view",
            "locks",
            "--format",
            "json",
            self.dir.to_str().unwrap(),
        ]);
        assert!(run.status.success(), "{}", run.describe());
        let v: Value = serde_json::from_str(&run.stdout).expect("JSON");
        let names: Vec<String> = v["locks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["name"].as_str().unwrap_or("?").to_owned())
            .collect();
        v["locks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{}: no lock {name} in {names:?}", self.what))
    }
}

/// GCC's entry points the runtime exports that no program GCC builds today calls:
/// `GOMP_parallel_loop_static` (GCC 5 and later inline static schedules; made by the same
/// macro as the loops tested here).
const NOT_EMITTED: &[&str] = &["GOMP_parallel_loop_static"];

/// The names `nm -D` lists for `file`: defined ones, or undefined ones.
fn dynamic_symbols(file: &Path, defined: bool) -> Vec<String> {
    let flag = if defined {
        "--defined-only"
    } else {
        "--undefined-only"
    };
    let out = std::process::Command::new("nm")
        .args(["-D", flag])
        .arg(file)
        .output()
        .expect("cannot run nm (binutils)");
    assert!(out.status.success(), "nm -D {}", file.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .map(|name| name.split('@').next().unwrap_or(name).to_owned())
        .collect()
}

#[test]
fn every_openmp_entry_point_is_called_and_keeps_its_results() {
    let exports = dynamic_symbols(&runtime_library(), true);
    let called = dynamic_symbols(program(), false);
    let missing: Vec<&String> = exports
        .iter()
        .filter(|e| e.starts_with("GOMP_") && !NOT_EMITTED.contains(&e.as_str()))
        .filter(|e| !called.contains(e))
        .collect();
    assert!(
        missing.is_empty(),
        "the runtime exports {missing:?}, which tests/programs/omp_regions.c never calls: add \
         a construct that does"
    );
    for runtime in [Runtime::Gnu, Runtime::Llvm] {
        let _machine = machine();
        let dir = scratch_dir(&format!("openmp-entries-{runtime:?}")).join("p.prof");
        let env = runtime_env(runtime);
        let env: Vec<(&str, &std::ffi::OsStr)> =
            env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
        let run = profile_run(&dir, 200, program(), &["entries"], &env);
        assert!(run.status.success(), "{runtime:?}: {}", run.describe());
        let line = run
            .stdout
            .lines()
            .find(|l| l.starts_with("entries "))
            .unwrap_or_else(|| panic!("{runtime:?}: no result\n{}", run.describe()));
        let (sum, expected) = line
            .strip_prefix("entries sum=")
            .and_then(|l| l.split_once(" expected="))
            .expect("entries sum=N expected=N");
        assert_eq!(
            sum, expected,
            "{runtime:?}: the constructs' sum changed under profiling"
        );
    }
}

/// Each round's slow thread arrived last (else the workload measured something else).
fn slow_was_last(p: &Profiled) {
    let (rounds, last) = (p.truth("rounds"), p.truth("slow_last"));
    assert!(
        last * 10 >= rounds * 9,
        "{}: workload: the slow thread arrived last in {last} of {rounds} rounds",
        p.what
    );
}

fn region_ends(runtime: Runtime) {
    let p = profile("region", runtime, &["40", "20", "2"]);
    slow_was_last(&p);
    // Both the worker (even rounds) and the initial thread (odd rounds) waited.
    p.idleness_within_truth("omp_implicit_barrier", "idleness.barrier");
    let workers = path_sum_via(
        &report_json_metric(&p.dir, "idleness", &["--view", "top-down"]),
        "start_thread",
        "omp_implicit_barrier",
        "idleness",
    );
    let half = p.truth("wait_ns") / 2;
    assert!(
        within_of(workers, half, 0.35),
        "{}: the worker waited {workers} ns at the region's end, about half of {} ns",
        p.what,
        p.truth("wait_ns")
    );
    p.late_blame();
    let row = p.lock("omp parallel regions._omp_fn.0");
    assert_eq!(row["kind"], "barrier", "{row}");
}

#[test]
fn a_region_end_is_a_barrier_on_libgomp() {
    region_ends(Runtime::Gnu);
}

#[test]
fn a_region_end_is_a_barrier_on_libomp() {
    region_ends(Runtime::Llvm);
}

fn explicit_barriers(runtime: Runtime) {
    let p = profile("barrier", runtime, &["40", "20", "2"]);
    slow_was_last(&p);
    p.idleness_within_truth("GOMP_barrier", "idleness.barrier");
    p.late_blame();
}

#[test]
fn an_explicit_barrier_blames_the_late_thread_on_libgomp() {
    explicit_barriers(Runtime::Gnu);
}

#[test]
fn an_explicit_barrier_blames_the_late_thread_on_libomp() {
    explicit_barriers(Runtime::Llvm);
}

fn critical_sections(runtime: Runtime, mode: &str, name: &str, start: &str) {
    let p = profile(mode, runtime, &["40", "20", "2"]);
    p.idleness_within_truth(start, "idleness.mutex");
    let holders = p.truth("blame_slow_ns") + p.truth("blame_quick_ns");
    let blame = p.total("blame.mutex");
    assert!(
        within_of(blame, holders, 0.25),
        "{}: blame.mutex {blame} ns, the holds kept the waiters {holders} ns",
        p.what
    );
    let row = p.lock(name);
    let wait = row["counts"]["wait_ns"].as_u64().unwrap_or(0);
    assert!(
        within_of(wait, p.truth("wait_ns"), 0.15),
        "{}: the lock view's {name} waited {wait} ns, the program {} ns\n{row}",
        p.what,
        p.truth("wait_ns")
    );
}

#[test]
fn a_contended_critical_section_is_a_lock_on_libgomp() {
    critical_sections(
        Runtime::Gnu,
        "critical",
        "omp critical",
        "GOMP_critical_start",
    );
}

#[test]
fn a_contended_critical_section_is_a_lock_on_libomp() {
    critical_sections(
        Runtime::Llvm,
        "critical",
        "omp critical",
        "GOMP_critical_start",
    );
}

#[test]
fn a_named_critical_section_is_named_on_libgomp() {
    critical_sections(
        Runtime::Gnu,
        "named",
        "omp critical (ledger)",
        "GOMP_critical_name_start",
    );
}

#[test]
fn a_named_critical_section_is_named_on_libomp() {
    critical_sections(
        Runtime::Llvm,
        "named",
        "omp critical (ledger)",
        "GOMP_critical_name_start",
    );
}

/// Tasks run at a barrier: their computing is work, not the barrier's waiting.
fn tasks(runtime: Runtime) {
    let p = profile("tasks", runtime, &["100", "20", "4"]);
    let (work, upper) = (p.truth("work_ns"), p.truth("wait_upper_ns"));
    let at_tasks = p.at("task_step", "work");
    assert!(
        within_of(at_tasks, work, 0.2),
        "{}: work at task_step {at_tasks} ns, the tasks computed {work} ns ({:+.1}%)",
        p.what,
        pct_err(at_tasks, work)
    );
    let waited = p.at("GOMP_barrier", "idleness.barrier");
    assert!(
        waited as f64 <= 1.15 * upper as f64 + 5e6,
        "{}: idleness at the barrier {waited} ns, the threads waited there {upper} ns besides \
         running the tasks ({work} ns)",
        p.what
    );
}

#[test]
fn tasks_run_at_a_barrier_are_work_on_libgomp() {
    tasks(Runtime::Gnu);
}

#[test]
fn tasks_run_at_a_barrier_are_work_on_libomp() {
    tasks(Runtime::Llvm);
}

/// A worker waits in its thread pool while the initial thread computes between regions:
/// idleness at `omp_worker_idle`, blamed on the serial code.
fn serial_code(runtime: Runtime) {
    let p = profile("serial", runtime, &["30", "20", "2"]);
    let (low, high) = (p.truth("wait_ns"), p.truth("wait_upper_ns"));
    let pooled = p.at("omp_worker_idle", "idleness.barrier");
    assert!(
        pooled as f64 >= 0.85 * low as f64 && pooled as f64 <= 1.15 * high as f64,
        "{}: idleness in the pool {pooled} ns; the initial thread computed alone {low} ns, \
         and came back to the next region {high} ns after it left one",
        p.what
    );
    let want = p.truth("blame_slow_ns");
    let blamed = p.at("serial_step", "blame.barrier");
    assert!(
        within_of(blamed, want, 0.25),
        "{}: blame at serial_step {blamed} ns, the worker waited {want} ns during it ({:+.1}%)",
        p.what,
        pct_err(blamed, want)
    );
    let row = p.lock("omp thread pool");
    assert_eq!(row["kind"], "barrier", "{row}");
}

#[test]
fn a_worker_waits_in_its_pool_for_serial_code_on_libgomp() {
    serial_code(Runtime::Gnu);
}

#[test]
fn a_worker_waits_in_its_pool_for_serial_code_on_libomp() {
    serial_code(Runtime::Llvm);
}

/// Balanced regions: what waiting there is, is the program's own (a thread started late),
/// and the blame stays within it; the steps' computing is work, not waiting.
fn balanced(runtime: Runtime) {
    let p = profile("balanced", runtime, &["80", "20", "4"]);
    let upper = p.truth("wait_upper_ns");
    // At the regions' ends; a worker's wait in its pool until the next region (the
    // initial thread's own loop meanwhile) is apart.
    let pooled = p.at("omp_worker_idle", "idleness");
    let idle = p.total("idleness") - pooled;
    let blame = p.total("blame");
    assert!(
        idle as f64 <= 1.15 * upper as f64 + 5e6
            && blame as f64 <= 1.25 * upper as f64 + pooled as f64 + 5e6,
        "{}: idleness {idle} ns at the regions' ends, {pooled} ns in the pool, blame {blame} \
         ns; the program waited at most {upper} ns at the ends",
        p.what
    );
    let waited_in_steps = p.at("even_step", "idleness");
    assert_eq!(waited_in_steps, 0, "{}: idleness inside the steps", p.what);
}

#[test]
fn balanced_regions_are_not_blamed_on_libgomp() {
    balanced(Runtime::Gnu);
}

#[test]
fn balanced_regions_are_not_blamed_on_libomp() {
    balanced(Runtime::Llvm);
}
