//! Running one program: wall time, exit status, an optional time limit (the whole process
//! group is killed), and optionally its stdout; and the peak-RSS wrapper.
//!
//! Peak RSS: `wait4` reports the maximum of the child's own `ru_maxrss` and that of the
//! descendants it waited for. For `blameprof run` (the CLI waits for the profiled program),
//! that is max(CLI, profiled program); and a child's peak starts from its parent's memory at
//! the fork or spawn (the scoreboard's several MiB). The memory figures therefore come from
//! the wrapper ([`wrapper_main`]): the scoreboard binary re-run as a small process that forks
//! and execs the program and reports the program's own peak, placed between `blameprof run --`
//! and the program.

use std::ffi::{CString, OsString};
use std::fs;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
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

/// The first argument that makes `scoreboard` the peak-RSS wrapper (see [`wrapper_main`]).
pub const WRAPPER_FLAG: &str = "--peak-rss-of";

/// The wrapper command for `program args...`: `scoreboard --peak-rss-of FILE -- program
/// args...`, for use as a (profiled) command line whose peak RSS ends up in `file`.
pub fn wrapped(file: &Path, program: &Path) -> Result<Command> {
    let mut cmd = Command::new(std::env::current_exe().context("cannot locate scoreboard")?);
    cmd.arg(WRAPPER_FLAG).arg(file).arg("--").arg(program);
    Ok(cmd)
}

/// Reads the peak RSS (KiB) the wrapper wrote to `file`.
pub fn read_peak(file: &Path) -> Result<u64> {
    let text =
        fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    text.trim()
        .parse()
        .with_context(|| format!("bad peak RSS in {}", file.display()))
}

/// `scoreboard --peak-rss-of FILE -- program args...`: runs the program as a child of this
/// small, fresh process and writes the child's own peak RSS (KiB, `wait4`) to FILE; exits with
/// the child's status. Measured from here, the peak is the program's: a child's `ru_maxrss`
/// starts from the memory of the process that forked it (the scoreboard's several MiB when it
/// spawns directly), and under `blameprof run` the CLI's own is left out.
pub fn wrapper_main(args: &[OsString]) -> Result<i32> {
    let [file, dashes, program, rest @ ..] = args else {
        bail!("usage: scoreboard {WRAPPER_FLAG} FILE -- program args...");
    };
    if dashes != "--" {
        bail!("usage: scoreboard {WRAPPER_FLAG} FILE -- program args...");
    }
    // fork + exec rather than a spawn: a vfork-style spawn would hand this process's whole
    // peak to the child, a fork only the few pages it copies.
    let argv: Vec<CString> = std::iter::once(program)
        .chain(rest)
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .context("argument with a NUL byte")?;
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: this process is single-threaded here (the wrapper runs before anything else),
    // and the child only calls the async-signal-safe execvp and _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error()).context("fork");
    }
    if pid == 0 {
        // SAFETY: `ptrs` is a NUL-terminated array of valid C strings that outlive the call.
        unsafe {
            libc::execvp(ptrs[0], ptrs.as_ptr());
            libc::_exit(127);
        }
    }
    let (status, usage) = wait4(pid)?;
    fs::write(file, usage.ru_maxrss.to_string())
        .with_context(|| format!("cannot write {}", Path::new(file).display()))?;
    Ok(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    })
}
