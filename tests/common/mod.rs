//! Shared helpers for the blameprof integration tests: building the test workloads, running
//! processes with a hard timeout, and reading `blameprof report --format json` output.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::fs;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, UNIX_EPOCH};

mod report;
pub use report::*;
mod sampled;
#[allow(unused_imports)] // only tests/locks.rs and tests/lock_view.rs use them
pub use sampled::*;
mod unchanged;
#[allow(unused_imports)] // only tests/processes.rs and tests/dying.rs use them
pub use unchanged::*;
mod waits;
#[allow(unused_imports)] // only tests/waits.rs uses them
pub use waits::*;

/// Generous limit for a profiled workload (they run for a few CPU-seconds).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(180);
/// Limit for `report` / `flamegraph` and for error cases.
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// The CLI under test (it embeds the runtime library it was built with: `build.rs`).
pub fn blameprof() -> &'static str {
    env!("CARGO_BIN_EXE_blameprof")
}

/// The runtime library the workspace build leaves next to the CLI, for the tests that read
/// or copy the file itself. Checks that it is built from the current sources: `cargo test`
/// rebuilds the CLI (and the runtime embedded in it) but not the `runtime/` cdylib there.
pub fn runtime_library() -> PathBuf {
    static STALE: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let cli = Path::new(blameprof());
    if let Some(why) = STALE.get_or_init(|| runtime_staleness(cli)) {
        panic!("{why}");
    }
    cli.with_file_name(blameprof::format::protocol::RUNTIME_LIBRARY)
}

/// Why the runtime library next to `cli` cannot be tested, with the fix: it is missing or
/// older than one of the sources cargo built it from (its dep-info file,
/// `libblameprof_rt.d`, lists them).
fn runtime_staleness(cli: &Path) -> Option<String> {
    let runtime = cli.with_file_name(blameprof::format::protocol::RUNTIME_LIBRARY);
    let profile = if cli.parent().is_some_and(|d| d.ends_with("release")) {
        " --release"
    } else {
        ""
    };
    let fix = format!("run `cargo build{profile} --workspace` before the tests");
    let Ok(built) = fs::metadata(&runtime).and_then(|m| m.modified()) else {
        return Some(format!("{} is missing: {fix}", runtime.display()));
    };
    let dep_info = fs::read_to_string(runtime.with_extension("d")).unwrap_or_default();
    let sources = dep_info
        .split_once(": ")
        .map_or("", |(_, deps)| deps)
        .replace("\\ ", "\0")
        .split_whitespace()
        .map(|p| PathBuf::from(p.replace('\0', " ")))
        .collect::<Vec<_>>();
    let newer = sources.iter().find(|p| {
        fs::metadata(p)
            .and_then(|m| m.modified())
            .map_or(true, |t| t > built)
    });
    newer.map(|newer| {
        format!(
            "{} is older than {}: {fix}",
            runtime.display(),
            newer.display()
        )
    })
}

pub fn programs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs")
}

pub fn tmp_root() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

fn unique_suffix() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// A fresh, empty directory for one test's files.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = tmp_root()
        .join("scratch")
        .join(format!("{name}-{}", unique_suffix()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

fn mtime_ns(path: &Path) -> u128 {
    let meta = fs::metadata(path).unwrap_or_else(|e| panic!("stat {}: {e}", path.display()));
    meta.modified()
        .unwrap()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// Builds `out_name` with `build(tmp_output)` unless a cached copy exists that was built from
/// the same source modification time and the same `recipe` (flags, and for C the headers'
/// modification times). The output is renamed into place atomically, so concurrent tests may
/// ask for the same program.
fn cached_build(src: &Path, out_name: &str, recipe: &str, build: impl FnOnce(&Path)) -> PathBuf {
    let bin_dir = tmp_root().join("programs");
    fs::create_dir_all(&bin_dir).unwrap();
    let out = bin_dir.join(out_name);
    let stamp_path = bin_dir.join(format!("{out_name}.stamp"));
    let stamp = format!("{} {}", mtime_ns(src), recipe);
    if out.exists() && fs::read_to_string(&stamp_path).ok().as_deref() == Some(stamp.as_str()) {
        return out;
    }
    let work = bin_dir.join(format!(".build-{out_name}-{}", unique_suffix()));
    fs::create_dir_all(&work).unwrap();
    let tmp_out = work.join(out_name);
    build(&tmp_out);
    fs::rename(&tmp_out, &out).unwrap();
    let tmp_stamp = work.join("stamp");
    fs::write(&tmp_stamp, &stamp).unwrap();
    fs::rename(&tmp_stamp, &stamp_path).unwrap();
    let _ = fs::remove_dir_all(&work);
    out
}

/// Names and modification times of the files ending in `.ext` next to `src`, for the cache
/// key of a build: a change to an included file alone (a C header such as `truth_log.h`, a
/// Rust module such as `rust_truth.rs`) must rebuild the programs.
fn siblings_stamp(src: &Path, ext: &str) -> String {
    let Some(dir) = src.parent() else {
        return String::new();
    };
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension() == Some(OsStr::new(ext)));
    files.sort();
    files
        .iter()
        .map(|h| {
            format!(
                " {}@{}",
                h.file_name().unwrap().to_string_lossy(),
                mtime_ns(h)
            )
        })
        .collect()
}

/// Compiles `tests/programs/<src>` with gcc and `flags`, into CARGO_TARGET_TMPDIR.
pub fn compile_c(src: &str, out_name: &str, flags: &[&str]) -> PathBuf {
    let src_path = programs_dir().join(src);
    try_compile_c(&src_path, out_name, flags).unwrap_or_else(|e| panic!("{e}"))
}

/// Like [`compile_c`] for an arbitrary source path; returns gcc's complaint on failure.
pub fn try_compile_c(src_path: &Path, out_name: &str, flags: &[&str]) -> Result<PathBuf, String> {
    let mut err = None;
    let recipe = format!("gcc {flags:?}{}", siblings_stamp(src_path, "h"));
    let out = cached_build(src_path, out_name, &recipe, |tmp_out| {
        let o = Command::new("gcc")
            .arg("-o")
            .arg(tmp_out)
            .arg(src_path)
            .args(flags)
            .output()
            .expect("cannot run gcc: is it installed?");
        if !o.status.success() {
            err = Some(format!(
                "gcc {} {flags:?} failed:\n{}",
                src_path.display(),
                String::from_utf8_lossy(&o.stderr)
            ));
            // Leave something to rename so cached_build's bookkeeping stays simple.
            fs::write(tmp_out, b"").unwrap();
        }
    });
    match err {
        Some(e) => {
            let _ = fs::remove_file(&out);
            let _ = fs::remove_file(out.with_file_name(format!("{out_name}.stamp")));
            Err(e)
        }
        None => Ok(out),
    }
}

/// Compiles `tests/programs/<src>` with `rustc -O -g`.
pub fn compile_rs(src: &str, out_name: &str) -> PathBuf {
    let src_path = programs_dir().join(src);
    let recipe = format!("rustc -O -g{}", siblings_stamp(&src_path, "rs"));
    cached_build(&src_path, out_name, &recipe, |tmp_out| {
        let o = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
            .args(["-O", "-g", "--edition", "2021", "-o"])
            .arg(tmp_out)
            .arg(&src_path)
            .output()
            .expect("cannot run rustc");
        assert!(
            o.status.success(),
            "rustc {} failed:\n{}",
            src_path.display(),
            String::from_utf8_lossy(&o.stderr)
        );
    })
}

/// Outcome of a finished process.
#[derive(Debug)]
pub struct Run {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Exit code as a shell reports it: 128+N when killed by signal N.
    pub fn code(&self) -> i32 {
        self.status
            .code()
            .unwrap_or_else(|| 128 + self.status.signal().expect("neither code nor signal"))
    }

    pub fn describe(&self) -> String {
        format!(
            "status: {:?}\n--- stdout (last 3000 bytes) ---\n{}\n--- stderr (last 3000 bytes) ---\n{}",
            self.status,
            tail(&self.stdout, 3000),
            tail(&self.stderr, 3000)
        )
    }

    /// The summary's `blameprof: note:` line, which lists the run's non-zero counters.
    pub fn counters_note(&self) -> Option<&str> {
        self.stderr
            .lines()
            .find(|l| l.starts_with("blameprof: note:"))
    }

    /// The counter `name` from the summary's `note:` line (0 when absent: only non-zero
    /// ones are listed).
    pub fn noted(&self, name: &str) -> u64 {
        self.counters_note()
            .and_then(|line| {
                line.split([':', ',']).find_map(|item| {
                    let (key, value) = item.trim().rsplit_once(' ')?;
                    (key == name).then(|| value.parse().ok())?
                })
            })
            .unwrap_or(0)
    }

    /// stderr without blameprof's own `blameprof:` lines.
    pub fn stderr_without_blameprof(&self) -> String {
        self.stderr
            .lines()
            .filter(|l| !l.starts_with("blameprof:"))
            .map(|l| format!("{l}\n"))
            .collect()
    }
}

fn tail(s: &str, n: usize) -> &str {
    if s.len() <= n {
        return s;
    }
    let mut start = s.len() - n;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Runs `cmd` (stdin from /dev/null, stdout/stderr captured) in its own process group and
/// kills the whole group on timeout (then panics) and after it exits (stragglers).
pub fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> Run {
    let desc = format!("{cmd:?}");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {desc}: {e}"));
    let pgid = child.id() as i32;
    let mut out_pipe = child.stdout.take().unwrap();
    let mut err_pipe = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out_pipe.read_to_end(&mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err_pipe.read_to_end(&mut v);
        v
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break Some(st);
        }
        if start.elapsed() > timeout {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // SAFETY: plain kill(2) on the process group we created; ESRCH is fine.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    let status = match status {
        Some(st) => st,
        None => {
            let st = child.wait().expect("wait after kill");
            let stdout = String::from_utf8_lossy(&out_reader.join().unwrap()).into_owned();
            let stderr = String::from_utf8_lossy(&err_reader.join().unwrap()).into_owned();
            let run = Run {
                status: st,
                stdout,
                stderr,
            };
            panic!("timeout after {timeout:?}: {desc}\n{}", run.describe());
        }
    };
    let stdout = String::from_utf8_lossy(&out_reader.join().unwrap()).into_owned();
    let stderr = String::from_utf8_lossy(&err_reader.join().unwrap()).into_owned();
    Run {
        status,
        stdout,
        stderr,
    }
}

/// Runs `blameprof ARGS...` with the tool timeout.
pub fn blameprof_cmd<S: AsRef<OsStr>>(args: &[S]) -> Run {
    let mut cmd = Command::new(blameprof());
    cmd.args(args);
    run_with_timeout(&mut cmd, TOOL_TIMEOUT)
}

/// `blameprof run -F freq -o out -- program args...`, with extra environment variables.
pub fn profile_run(
    out: &Path,
    freq: u32,
    program: &Path,
    args: &[&str],
    env: &[(&str, &OsStr)],
) -> Run {
    let mut cmd = Command::new(blameprof());
    cmd.arg("run")
        .arg("-F")
        .arg(freq.to_string())
        .arg("-o")
        .arg(out)
        .arg("--")
        .arg(program);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_with_timeout(&mut cmd, RUN_TIMEOUT)
}

/// Like [`profile_run`] but asserts the run succeeded and the profile directory exists.
pub fn profile_ok(out: &Path, freq: u32, program: &Path, args: &[&str]) -> Run {
    let run = profile_run(out, freq, program, args, &[]);
    assert!(
        run.status.success(),
        "blameprof run failed for {} {args:?}\n{}",
        program.display(),
        run.describe()
    );
    assert!(
        out.is_dir(),
        "profile directory {} was not created\n{}",
        out.display(),
        run.describe()
    );
    run
}

/// Asserts the contract for user errors: non-zero exit, exactly one non-empty stderr line
/// starting with `blameprof: error:`, and no panic.
pub fn assert_clean_error(run: &Run, what: &str) {
    assert!(
        !run.status.success(),
        "{what}: expected failure, got success\n{}",
        run.describe()
    );
    assert!(
        !run.stderr.contains("panicked"),
        "{what}: blameprof panicked\n{}",
        run.describe()
    );
    assert!(
        !run.stderr.contains("RUST_BACKTRACE"),
        "{what}: backtrace hint on stderr\n{}",
        run.describe()
    );
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "{what}: expected exactly one stderr line\n{}",
        run.describe()
    );
    assert!(
        lines[0].starts_with("blameprof: error:"),
        "{what}: stderr line must start with 'blameprof: error:'\n{}",
        run.describe()
    );
}

/// The standard split.c build.
pub fn split_c() -> PathBuf {
    compile_c("split.c", "split", &["-O2", "-g", "-pthread"])
}

/// The run summary's list under the heading that contains `heading` (`victims`,
/// `culprits`, `waits for events`, `wakers`): its lines of sites.
pub fn summary_list<'a>(summary: &'a str, heading: &str) -> Vec<&'a str> {
    summary
        .lines()
        .skip_while(|l| !(l.contains(heading) && l.contains("% of effort:")))
        .skip(1)
        .take_while(|l| l.starts_with("blameprof:   "))
        .collect()
}

/// Reports the calling test as skipped: one line `skipped: <test name>: <reason>` on the
/// real stdout (libtest captures `print!`, not writes to `std::io::stdout()`), which
/// `.ci/run` counts as a skipped test rather than a passed one. The caller returns at once
/// after it, checking nothing more: a test skips whole or not at all. libtest runs each test
/// on a thread named after it.
pub fn skip(reason: &str) {
    use std::io::Write;
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("unnamed-test");
    let line = format!("skipped: {name}: {reason}\n");
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line.as_bytes());
    let _ = out.flush();
}

/// Why the kernel refuses this process a perf task clock (as the runtime opens it: a
/// software event of the calling thread, user mode only), or None when it grants one.
pub fn perf_refused() -> Option<String> {
    static REFUSED: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    REFUSED
        .get_or_init(|| {
            // struct perf_event_attr, PERF_ATTR_SIZE_VER5 (112 bytes): type, size | config |
            // sample_period | sample_type | read_format | flags | ...
            let mut attr = [0u64; 14];
            const PERF_TYPE_SOFTWARE: u64 = 1;
            const PERF_ATTR_SIZE: u64 = 112;
            const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
            const DISABLED: u64 = 1;
            const EXCLUDE_KERNEL: u64 = 1 << 5;
            const EXCLUDE_HV: u64 = 1 << 6;
            attr[0] = PERF_TYPE_SOFTWARE | PERF_ATTR_SIZE << 32;
            attr[1] = PERF_COUNT_SW_TASK_CLOCK;
            attr[2] = 1_000_000;
            attr[5] = DISABLED | EXCLUDE_KERNEL | EXCLUDE_HV;
            // SAFETY: `attr` is a valid perf_event_attr of the stated size; pid 0 / cpu -1:
            // the calling thread on any CPU; the descriptor is closed at once.
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_perf_event_open,
                    attr.as_ptr(),
                    0,
                    -1,
                    -1,
                    8 as libc::c_ulong, // PERF_FLAG_FD_CLOEXEC
                )
            };
            if fd >= 0 {
                // SAFETY: our own descriptor.
                unsafe { libc::close(fd as i32) };
                return None;
            }
            let err = std::io::Error::last_os_error();
            let paranoid = fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .map(|s| s.trim().to_owned())
                .unwrap_or_else(|_| "unreadable".into());
            Some(format!(
                "perf_event_open of a task clock is refused here ({err}; \
                 /proc/sys/kernel/perf_event_paranoid = {paranoid})"
            ))
        })
        .clone()
}

/// True when the kernel grants a perf task clock; otherwise reports the calling test as
/// skipped ([`skip`]) and returns false, and the test must return.
pub fn perf_or_skip() -> bool {
    match perf_refused() {
        None => true,
        Some(why) => {
            skip(&why);
            false
        }
    }
}

/// Asserts that every thread of the run was sampled by `source` (`perf-task-clock` or
/// `cpu-timer`): the summary names it alone, and no thread fell back to the other source
/// or went without a timer.
pub fn assert_sampled_by(run: &Run, source: &str) {
    let line = run
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("blameprof: sample source: "))
        .unwrap_or_else(|| panic!("no sample source in the summary\n{}", run.describe()));
    assert!(
        line.split("; ")
            .all(|s| s.starts_with(&format!("{source}, "))),
        "sampled by {line}, not {source} alone\n{}",
        run.describe()
    );
    for counter in ["timer_fallbacks", "timer_failures"] {
        assert_eq!(run.noted(counter), 0, "{counter}\n{}", run.describe());
    }
}
