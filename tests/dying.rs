//! Programs that die, and a `blameprof run` that dies. Proves, for each, that the program's
//! stdout, stderr and exit status are those of an unprofiled run (blameprof exits with the
//! program's status, 128 + N for signal N), that the run's summary says how the program
//! ended, and that the profile is readable with the work the program measured of itself:
//! (1) `_exit`, and `exit` called by one thread while two others compute: the profile is
//! complete (within 15%) and its part has its end record;
//! (2) `abort()` and the default action of SIGTERM, raised by the program or forwarded by
//! `blameprof run`: the part has no end record, and what is lost is bounded by what the
//! runtime had not yet written (buffers are written at least once a second of each thread's
//! samples: the program measures the CPU time it used in its last second of wall-clock time,
//! which is less on a loaded machine), while nothing is counted twice;
//! (3) SIGKILL of `blameprof run` itself: the program runs on to its normal end (exit status
//! 0, the same stdout); while it runs, `blameprof report DIR` reads what has been written
//! (all but at most the last second), and once it has ended, all of it.
//!
//! SIGSEGV and SIGKILL of the program are in tests/robustness.rs.

mod common;

use blameprof::format::read::{read_profile, Profile, ReadOptions};
use common::*;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

/// CPU seconds of work before a death that loses the unwritten samples: three times the
/// buffers' age limit, so that at most a third can be lost (a second's CPU time on an idle
/// machine).
const LOSSY: &str = "3";
/// CPU seconds of work before a clean end.
const CLEAN: &str = "0.5";
/// CPU seconds in the unprofiled runs, which only show what the program prints (numbers
/// aside) and how it ends.
const BRIEF: &str = "0.1";
/// Samples not yet written when a process dies: its buffers are written once they are a
/// second old (at the next sample), so at most the CPU time the thread used in its last
/// second of wall-clock time (which the program measures, `first_work_last_second_ns`), and
/// a sampling period (1 ms at 1 kHz, at most 1.5 ms jittered) and the program's checkpoint
/// granularity (10 ms of wall-clock time) more.
const UNWRITTEN_SLACK_NS: u64 = 15_000_000;

fn dying() -> PathBuf {
    compile_c("dying.c", "dying", &["-O2", "-g", "-pthread"])
}

/// The profile's part files, read as `blameprof report` reads them (no salvage: a dead
/// process leaves whole chunks).
fn parts(out: &Path) -> Profile {
    read_profile(out, ReadOptions::default())
        .unwrap_or_else(|e| panic!("{} is not readable: {e}", out.display()))
}

/// `function`'s inclusive work in the flat report of `out` (the function's CPU time as the
/// program measures it, with its reads of its CPU clock).
fn profiled_work(out: &Path, function: &str) -> u64 {
    flat_values(&report_json(out, &["--view", "flat"]), function).0
}

/// Asserts `got` is what a process that died kept of `function`'s measured CPU time: at
/// least all but the unwritten samples (the CPU time it used in its last second, `last`),
/// and at least half of it whatever that was; at most the whole (within 10%: a thread's
/// first sample also holds its CPU time since it started).
fn assert_bounded_loss(function: &str, got: u64, t: &std::collections::HashMap<String, u64>) {
    let want = t[&format!("{function}_ns")];
    let last = t[&format!("{function}_last_second_ns")];
    assert!(
        got + last + UNWRITTEN_SLACK_NS >= want
            && got * 2 >= want
            && got as f64 <= want as f64 * 1.1,
        "{function}: profiled {got} ns of the {want} ns it measured, of which {last} ns in its \
         last second: more lost than the unwritten samples, or counted twice"
    );
}

/// Runs `dying MODE` unprofiled (briefly) and profiled for `secs`; checks the two agree and
/// that the program's ending is stated; returns the profiled run and its profile.
fn dying_case(mode: &str, secs: &str, ending: &str) -> (Run, PathBuf) {
    let prog = dying();
    let plain = run_with_timeout(Command::new(&prog).args([mode, BRIEF]), RUN_TIMEOUT);
    let out = scratch_dir(&format!("dying-{mode}")).join("prof");
    let run = profile_run(&out, 1000, &prog, &[mode, secs], &[]);
    assert_unchanged(&format!("dying {mode}"), &plain, &run);
    assert!(
        run.stderr.lines().any(|l| l.starts_with(ending)),
        "dying {mode}: the summary does not say {ending:?}\n{}",
        run.describe()
    );
    (run, out)
}

#[test]
fn underscore_exit_leaves_a_complete_profile() {
    let (run, out) = dying_case(
        "_exit",
        CLEAN,
        "blameprof: the program exited with status 7",
    );
    assert_eq!(run.code(), 7);
    let t = truths(&run.stdout);
    assert_close(
        "first_work",
        profiled_work(&out, "first_work"),
        t["first_work_ns"],
        0.15,
    );
    assert!(parts(&out).processes[0].ended_cleanly, "no end record");
}

/// `exit(5)` from a thread while two others compute: atexit handlers run, the runtime
/// writes every thread's samples, the status is 5.
#[test]
fn exit_from_a_thread_while_others_run() {
    let (run, out) = dying_case(
        "thread-exit",
        CLEAN,
        "blameprof: the program exited with status 5",
    );
    assert!(
        run.stdout.contains("dying: atexit ran"),
        "{}",
        run.describe()
    );
    let t = truths(&run.stdout);
    let flat = report_json(&out, &["--view", "flat"]);
    assert_close(
        "first_work",
        flat_values(&flat, "first_work").0,
        t["first_work_ns"],
        0.15,
    );
    // The runners' CPU clocks were read just before exit; they ran on for a moment after.
    assert_close(
        "runner_work",
        flat_values(&flat, "runner_work").0,
        t["runner_work_ns"],
        0.15,
    );
    assert_eq!(
        flat["threads"].as_array().unwrap().len(),
        4,
        "{}",
        flat["threads"]
    );
    assert!(parts(&out).processes[0].ended_cleanly, "no end record");
}

/// A death by signal: the summary's warning, bounded loss, no end record.
fn killed_case(mode: &str, signal: i32, name: &str) {
    let (run, out) = dying_case(
        mode,
        LOSSY,
        &format!("blameprof: warning: the program was killed by signal {signal} ({name})"),
    );
    assert_eq!(run.code(), 128 + signal);
    let t = truths(&run.stdout);
    assert_bounded_loss("first_work", profiled_work(&out, "first_work"), &t);
    assert!(
        !parts(&out).processes[0].ended_cleanly,
        "a part with an end record after a death by {name}"
    );
}

#[test]
fn abort_keeps_what_was_written() {
    killed_case("abort", libc::SIGABRT, "SIGABRT");
}

#[test]
fn sigterm_default_action_keeps_what_was_written() {
    killed_case("sigterm", libc::SIGTERM, "SIGTERM");
}

/// A process whose stdout is read line by line as it comes.
struct Streamed {
    child: Child,
    lines: Receiver<String>,
    stdout: String,
    stderr: std::thread::JoinHandle<String>,
    started: Instant,
}

impl Streamed {
    /// Starts `cmd` in a process group of its own, stdin from /dev/null.
    fn start(cmd: &mut Command) -> Streamed {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd.spawn().expect("spawn");
        let out = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        Streamed {
            child,
            lines,
            stdout: String::new(),
            stderr,
            started: Instant::now(),
        }
    }

    /// Time left of the run's limit.
    fn left(&self) -> Duration {
        RUN_TIMEOUT.saturating_sub(self.started.elapsed())
    }

    /// Reads stdout up to a line starting with `prefix`; `None` at its end.
    fn until(&mut self, prefix: &str) -> Option<String> {
        loop {
            match self.lines.recv_timeout(self.left()) {
                Ok(line) => {
                    self.stdout.push_str(&line);
                    self.stdout.push('\n');
                    if line.starts_with(prefix) {
                        return Some(line);
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return None,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.kill_group();
                    panic!(
                        "timeout waiting for {prefix:?}; stdout so far:\n{}",
                        self.stdout
                    );
                }
            }
        }
    }

    /// Reads stdout to its end (every process holding it has closed it).
    fn read_to_end(&mut self) {
        assert!(self.until("\u{0}never").is_none());
    }

    fn kill_group(&self) {
        // SAFETY: kill(2) on the process group we created; ESRCH is fine.
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
    }

    /// Waits for the process (stdout read to its end first) and returns its outcome.
    fn finish(mut self) -> Run {
        self.read_to_end();
        let status = self.child.wait().expect("wait");
        self.kill_group();
        Run {
            status,
            stdout: self.stdout,
            stderr: self.stderr.join().unwrap(),
        }
    }
}

/// `blameprof run -F 1000 -o OUT -- dying two-phase SECS`, streamed.
fn start_two_phase(out: &Path) -> Streamed {
    let mut cmd = Command::new(blameprof());
    cmd.args(["run", "-F", "1000", "-o"])
        .arg(out)
        .arg("--")
        .arg(dying())
        .args(["two-phase", LOSSY]);
    Streamed::start(&mut cmd)
}

/// `dying two-phase` unprofiled, briefly, sent `signal` (if any) after its first phase.
fn unprofiled_two_phase(signal: Option<i32>) -> Run {
    let mut plain = Streamed::start(Command::new(dying()).args(["two-phase", BRIEF]));
    plain.until("truth first_work_ns=").expect("first phase");
    if let Some(signal) = signal {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(plain.child.id() as i32, signal) };
    }
    plain.finish()
}

/// SIGTERM to `blameprof run` (as `kill` sends it) is forwarded to the program, which dies
/// by it; blameprof exits 143 and says so, and the first phase's work is in the profile.
#[test]
fn sigterm_to_blameprof_run_is_forwarded() {
    let plain = unprofiled_two_phase(Some(libc::SIGTERM));
    let out = scratch_dir("dying-forwarded").join("prof");
    let mut run = start_two_phase(&out);
    run.until("truth first_work_ns=").expect("first phase");
    // SAFETY: kill(2) on our own child, blameprof.
    unsafe { libc::kill(run.child.id() as i32, libc::SIGTERM) };
    let run = run.finish();
    assert_unchanged("dying two-phase, SIGTERM", &plain, &run);
    assert_eq!(run.code(), 128 + libc::SIGTERM, "{}", run.describe());
    assert!(
        run.stderr.contains("killed by signal 15 (SIGTERM)"),
        "{}",
        run.describe()
    );
    let t = truths(&run.stdout);
    assert_bounded_loss("first_work", profiled_work(&out, "first_work"), &t);
}

/// SIGKILL of `blameprof run` while the program computes: the program is not killed with
/// it (it runs on, is adopted, and ends as it would have); the profile is readable while it
/// runs, and complete once it has ended.
#[test]
fn sigkill_of_blameprof_run_leaves_the_program_running_and_the_profile_readable() {
    // The program is orphaned when blameprof dies: adopt it, to see how it ends.
    // SAFETY: prctl with an integer argument; it only marks this process.
    assert_eq!(
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) },
        0
    );
    let plain = unprofiled_two_phase(None);
    let out = scratch_dir("dying-blameprof-killed").join("prof");
    let mut run = start_two_phase(&out);
    let first = truth(&run.until("truth first_work_ns=").expect("first phase"));
    run.child.kill().expect("SIGKILL blameprof");
    let blameprof_status = run.child.wait().expect("wait for blameprof");
    assert_eq!(blameprof_status.signal(), Some(libc::SIGKILL));
    // Its part is `<pid>.bpp`.
    let part = part_files(&out).pop().expect("the program's part");
    let pid: i32 = part.file_stem().unwrap().to_str().unwrap().parse().unwrap();

    // The program is in its second phase: what it has written is readable now.
    // SAFETY: kill(2) with signal 0 only checks that the process exists.
    assert_eq!(
        unsafe { libc::kill(pid, 0) },
        0,
        "the program died with blameprof"
    );
    let mid = report_json(&out, &["--view", "flat"]);
    assert_bounded_loss("first_work", flat_values(&mid, "first_work").0, &first);

    // It runs to its end: the same output, exit status 0, and the whole profile.
    run.read_to_end();
    let mut status = 0;
    // SAFETY: waitpid on a process this one adopted; `status` is writable.
    let reaped = unsafe { libc::waitpid(pid, &mut status, 0) };
    run.kill_group();
    assert_eq!(reaped, pid, "the program was not adopted");
    let program = Run {
        status: std::process::ExitStatus::from_raw(status),
        stdout: run.stdout.clone(),
        stderr: run.stderr.join().unwrap(),
    };
    assert_unchanged("dying two-phase, blameprof killed", &plain, &program);
    assert_eq!(program.code(), 0);
    let t = truths(&program.stdout);
    let flat = report_json(&out, &["--view", "flat"]);
    for f in ["first_work", "second_work"] {
        assert_close(f, flat_values(&flat, f).0, t[&format!("{f}_ns")], 0.15);
    }
    assert!(parts(&out).processes[0].ended_cleanly, "no end record");
}
