//! Running one program: wall time, exit status, an optional time limit (the whole process
//! group is killed), and optionally its stdout; and the peak-RSS wrapper's command line.
//!
//! Peak RSS: `wait4` reports the maximum of the child's own `ru_maxrss` and that of the
//! descendants it waited for. For `blameprof run` (the CLI waits for the profiled program),
//! that is max(CLI, profiled program); and a child's peak starts from its parent's memory at
//! the fork (the scoreboard's several MiB). The memory figures therefore come from the
//! wrapper (`benchmarks/scoreboard/peak_rss.c`, see [`wrapped`]): a small C program that
//! forks and execs the program and reports the program's own peak, placed between
//! `blameprof run --` and the program.

use std::fs;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// How a program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Exited(i32),
    Signaled(i32),
    /// Killed by us at the time limit.
    TimedOut,
}

/// One finished run.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub ending: Ending,
    pub wall: Duration,
    /// The program's stdout when captured, else empty.
    pub stdout: String,
}

impl Outcome {
    pub fn success(&self) -> bool {
        self.ending == Ending::Exited(0)
    }

    /// The ending for messages.
    pub fn describe(&self) -> String {
        match self.ending {
            Ending::Exited(c) => format!("exit status {c}"),
            Ending::Signaled(s) => format!("killed by signal {s}"),
            Ending::TimedOut => format!("time limit {:.0} s", self.wall.as_secs_f64()),
        }
    }

    /// An error unless the program exited with status 0.
    pub fn check(self, what: &str) -> Result<Self> {
        if !self.success() {
            bail!("{what}: {}", self.describe());
        }
        Ok(self)
    }
}

/// Runs `cmd` (stdin from /dev/null, stderr discarded, stdout captured when `capture`, else
/// discarded) in its own process group, killing the group at `limit`.
pub fn run(cmd: &mut Command, capture: bool, limit: Option<Duration>) -> Result<Outcome> {
    cmd.stdin(Stdio::null())
        .stderr(Stdio::null())
        .stdout(if capture {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .process_group(0);
    let start = Instant::now();
    let mut child = cmd.spawn().with_context(|| format!("cannot run {cmd:?}"))?;
    let pid = child.id() as libc::pid_t;
    let reader = child.stdout.take().map(|mut out| {
        thread::spawn(move || {
            let mut text = String::new();
            out.read_to_string(&mut text).map(|_| text)
        })
    });
    let (done, stop) = mpsc::channel::<()>();
    let watchdog = limit.map(|limit| {
        thread::spawn(move || {
            let fired = stop.recv_timeout(limit) == Err(mpsc::RecvTimeoutError::Timeout);
            if fired {
                // SAFETY: kill(2) on the child's process group (it is its own leader and
                // not yet reaped: the waiter signals `stop` only after wait4 returned).
                unsafe { libc::kill(-pid, libc::SIGKILL) };
            }
            fired
        })
    });
    let (status, _) = wait4(pid)?;
    let wall = start.elapsed();
    drop(child); // reaped above; dropping a `Child` never waits
    let _ = done.send(());
    let timed_out = watchdog.is_some_and(|w| w.join().unwrap_or(false));
    let stdout = match reader {
        Some(r) => r
            .join()
            .map_err(|_| anyhow::anyhow!("stdout reader panicked"))?
            .context("reading the program's stdout")?,
        None => String::new(),
    };
    let ending = if timed_out {
        Ending::TimedOut
    } else if libc::WIFEXITED(status) {
        Ending::Exited(libc::WEXITSTATUS(status))
    } else {
        Ending::Signaled(libc::WTERMSIG(status))
    };
    Ok(Outcome {
        ending,
        wall,
        stdout,
    })
}

/// Waits for `pid`, retrying on EINTR: its wait status and rusage.
fn wait4(pid: libc::pid_t) -> Result<(libc::c_int, libc::rusage)> {
    loop {
        let mut status = 0;
        // SAFETY: rusage is plain data, fully written by wait4 on success.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers to locals; `pid` is our unreaped child.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            return Ok((status, usage));
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err).context("wait4");
        }
    }
}

/// The wrapper command for `program args...`: `peak_rss FILE -- program args...`
/// (`benchmarks/scoreboard/peak_rss.c`), for use as a (profiled) command line whose peak RSS
/// ends up in `file`.
pub fn wrapped(peak_rss: &Path, file: &Path, program: &Path) -> Command {
    let mut cmd = Command::new(peak_rss);
    cmd.arg(file).arg("--").arg(program);
    cmd
}

/// Runs `cmd`, a command whose program runs through the wrapper writing to `file`
/// ([`wrapped`]), within `limit`: its wall time (s) and the program's peak RSS (KiB); an
/// error when it failed.
pub fn run_for_peak(cmd: &mut Command, file: &Path, limit: Duration) -> Result<(f64, u64)> {
    let what = format!("{cmd:?}");
    let o = run(cmd, false, Some(limit))?.check(&what)?;
    Ok((o.wall.as_secs_f64(), read_peak(file)?))
}

/// Reads the peak RSS (KiB) the wrapper wrote to `file`.
pub fn read_peak(file: &Path) -> Result<u64> {
    let text =
        fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    text.trim()
        .parse()
        .with_context(|| format!("bad peak RSS in {}", file.display()))
}
