//! `blameprof run`: launch a program with the runtime injected, wait for it, report.
//!
//! Job: check the program can be profiled, prepare a fresh profile directory, start the
//! program with `LD_PRELOAD` and the runtime's configuration in its environment (everything
//! else passed through untouched), forward termination requests to it, exit with its status
//! (128 + signal if it was killed) and print a short summary on stderr, headed by how the
//! program ended. The CLI process itself never loads the runtime.
//!
//! The end of a run is the end of the program it started: `run` waits for that process alone,
//! not for processes it left running (a daemon that forked away, a background job), which
//! may run for ever. Those are found by the profile directory in their environment and named
//! in a warning (their parts are incomplete until they end, and `blameprof report` then reads
//! all of them), and the default output directory keeps its temporary name, which they write
//! into. Processes whose part has no end record (killed or crashed) are named in a warning:
//! each may lack up to its last second of samples, not yet written when it died. If `run`
//! itself is killed, the program runs on and its profile is still written.

use super::preflight::{self, LaunchError};
use crate::format::protocol::{
    CONTENDED_MEASURED_PER_MS, DEFAULT_MAX_PART_BYTES, ENV_CONTENDED_PER_MS, ENV_FREQUENCY,
    ENV_MAX_PART_BYTES, ENV_OUTPUT,
};
use anyhow::Context;
use nix::sys::signal::{kill, SigSet, Signal};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Samples per second of CPU time, per thread (up to 250: the CPU-time timer, which
    /// expires on scheduler ticks; above: a perf task-clock timer where the kernel allows)
    #[arg(short = 'F', long = "frequency", default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub frequency: u64,
    /// Where to write the profile (a directory); default: a new ./blameprof-<cmd>-<pid>
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// Functions listed in the summary
    #[arg(long, default_value_t = 5)]
    pub top: usize,
    /// Print no summary, only warnings of damage or lost samples
    #[arg(short, long)]
    pub quiet: bool,
    /// Contended lock acquisitions a millisecond per thread measured exactly; past that, a
    /// random subset of about this many is measured and scaled (0: measure them all, at
    /// whatever cost to a heavily contended program)
    #[arg(long = "contended-per-ms", value_name = "N", default_value_t = CONTENDED_MEASURED_PER_MS)]
    pub contended_per_ms: u64,
    /// The most each process writes to the profile, in bytes or with a K, M or G suffix
    /// (powers of 1024); past it, samples are dropped and counted (a service profiled for
    /// days keeps to it)
    #[arg(long = "max-size", value_name = "SIZE", default_value_t = DEFAULT_MAX_PART_BYTES, value_parser = parse_size)]
    pub max_size: u64,
    /// The program to profile and its arguments (put them after --)
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<OsString>,
}

/// Runs the command; returns the exit status blameprof must exit with.
pub fn run(args: &RunArgs) -> anyhow::Result<i32> {
    let Some((program, rest)) = args.command.split_first() else {
        return Err(LaunchError::NoCommand.into());
    };
    let program_str = program.to_string_lossy().into_owned();
    let path = preflight::check(&program_str)?;
    let runtime = super::runtime_file::runtime_path()?;
    let cmd_name = Path::new(&program_str)
        .file_name()
        .map_or("cmd".into(), |n| n.to_string_lossy().into_owned());
    let dir = match &args.output {
        Some(p) => prepare_named(p)?,
        None => prepare_default(&cmd_name)?,
    };
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);

    let preload = match std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        Some(existing) => {
            let mut v = runtime.into_os_string();
            v.push(":");
            v.push(existing);
            v
        }
        None => runtime.into_os_string(),
    };
    let mut command = Command::new(&path);
    command
        .arg0(program)
        .args(rest)
        .env("LD_PRELOAD", preload)
        .env(ENV_OUTPUT, &dir)
        .env(ENV_FREQUENCY, args.frequency.to_string())
        .env(ENV_CONTENDED_PER_MS, args.contended_per_ms.to_string())
        .env(ENV_MAX_PART_BYTES, args.max_size.to_string());
    let mut child = command
        .spawn()
        .with_context(|| format!("cannot start '{program_str}'"))?;
    forward_signals(Pid::from_raw(child.id() as i32))?;
    let status = child.wait().context("waiting for the profiled program")?;
    let code = match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        _ => 1,
    };

    let running = still_running(&dir);
    // Processes still running write into the directory by the name they were given.
    let dir = if args.output.is_none() && running.is_empty() {
        rename_default(&dir, &cmd_name, child.id())
    } else {
        dir
    };
    let mut err = std::io::stderr().lock();
    let _ = write_end(
        &mut err,
        &Ending::of(status, child.id(), running, &dir),
        args.quiet,
    );
    let told = match args.quiet {
        true => super::summary::warn_losses(&dir, &mut err),
        false => super::summary::summary(&dir, args.top, &mut err),
    };
    if let Err(e) = told {
        eprintln!(
            "blameprof: warning: profile in {} could not be read: {e:#}",
            dir.display()
        );
    }
    Ok(code)
}

/// `-o PATH`: a new directory, or an old profile of this user's that is replaced: its part
/// files (the ones [`preflight::check_output`] found, nothing else) and the directory are
/// removed and the directory made anew. A symbolic link at PATH is refused, never followed.
fn prepare_named(path: &Path) -> anyhow::Result<PathBuf> {
    // Without a trailing slash, which would make the checks see what a link there points to.
    let path: PathBuf = path.components().collect();
    if let preflight::Output::OldProfile(parts) = preflight::check_output(&path)? {
        let cannot = |e: std::io::Error| {
            anyhow::anyhow!(
                "cannot replace the old profile '{}': {e}: remove it (is a program still \
                 writing to it?), or choose another path with -o",
                path.display()
            )
        };
        for part in parts {
            match std::fs::remove_file(&part) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(cannot(e)),
                _ => {}
            }
        }
        // Fails if anything appeared since the check: it is left alone.
        std::fs::remove_dir(&path).map_err(cannot)?;
    }
    create_dir(&path)?;
    Ok(path)
}

/// Creates a profile directory that only this user can enter (0700; the runtime creates the
/// parts 0600). Fails if anything, a link included, is at `path`.
fn create_dir(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(path)
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot create profile directory '{}': {}: choose a writable location with -o",
                path.display(),
                std::io::Error::from(e.kind())
            )
        })
}

/// The default output: a temporary name until the program's pid is known.
fn prepare_default(cmd: &str) -> anyhow::Result<PathBuf> {
    let path = PathBuf::from(format!(".blameprof-{cmd}-{}.tmp", std::process::id()));
    create_dir(&path)?;
    Ok(path)
}

/// Renames the default output to `blameprof-<cmd>-<pid>`, never clobbering an existing one.
fn rename_default(tmp: &Path, cmd: &str, pid: u32) -> PathBuf {
    let parent = tmp.parent().unwrap_or(Path::new("."));
    for n in 0..1000 {
        let name = if n == 0 {
            format!("blameprof-{cmd}-{pid}")
        } else {
            format!("blameprof-{cmd}-{pid}.{n}")
        };
        let target = parent.join(name);
        if target.exists() {
            continue;
        }
        if std::fs::rename(tmp, &target).is_ok() {
            return target;
        }
    }
    tmp.to_owned()
}

/// How a run ended: the program's status, and the other processes of the run that are still
/// running or died without finishing their part of the profile.
#[derive(Debug, Default, PartialEq, Eq)]
struct Ending {
    /// Exit status, or the signal that killed the program (and whether it dumped core).
    exited: Option<i32>,
    signal: Option<(i32, bool)>,
    /// Whether the program's own part has its end record (a signal may come after it).
    finished: bool,
    /// Processes of the run alive after the program ended.
    running: Vec<u32>,
    /// Processes (other than the program when a signal killed it) whose last image has no end
    /// record and that are gone.
    unfinished: Vec<u32>,
    /// The profile directory, for the warning about processes still running.
    dir: PathBuf,
    /// Bytes free for the user on the profile's file system, when it could be asked.
    disk_free: Option<u64>,
}

impl Ending {
    /// The ending of the program `pid` with `status`, given the processes still `running`
    /// and the parts in `dir`.
    fn of(status: ExitStatus, pid: u32, running: Vec<u32>, dir: &Path) -> Ending {
        let signal = status.signal().map(|s| (s, status.core_dumped()));
        let opts = crate::format::read::ReadOptions {
            salvage: true,
            skip_samples: true,
        };
        let mut unfinished = Vec::new();
        let mut finished = false;
        if let Ok(profile) = crate::format::read::read_profile(dir, opts) {
            // The last image of each pid (exec'd images end their predecessors cleanly).
            let mut last: Vec<(u32, u32, bool)> = Vec::new();
            for p in &profile.processes {
                let (of, generation) = (p.header.pid, p.header.exec_generation);
                match last.iter_mut().find(|(q, _, _)| *q == of) {
                    Some(e) if e.1 <= generation => *e = (of, generation, p.ended_cleanly),
                    Some(_) => {}
                    None => last.push((of, generation, p.ended_cleanly)),
                }
            }
            finished = last.iter().any(|&(p, _, ended)| p == pid && ended);
            unfinished = last
                .into_iter()
                .filter(|&(p, _, ended)| {
                    !(ended || running.contains(&p) || (p == pid && signal.is_some()))
                })
                .map(|(p, _, _)| p)
                .collect();
            unfinished.sort_unstable();
        }
        Ending {
            exited: status.code(),
            signal,
            finished,
            running,
            unfinished,
            dir: dir.to_owned(),
            disk_free: disk_free(dir),
        }
    }
}

/// From now on, interrupts from the terminal (`SIGINT`, `SIGQUIT`) are ignored, and
/// termination requests (`SIGTERM`, `SIGHUP`) are passed on to `child`: the signals are
/// blocked in this thread and taken by a thread of their own, which waits for them. The
/// terminal's interrupts reach the child directly (same process group), so the CLI lives on
/// to write the summary. The program's own signal mask is its own (the standard library
/// clears it in the child).
fn forward_signals(child: Pid) -> anyhow::Result<()> {
    let mut signals = SigSet::empty();
    for s in [
        Signal::SIGINT,
        Signal::SIGQUIT,
        Signal::SIGTERM,
        Signal::SIGHUP,
    ] {
        signals.add(s);
    }
    signals
        .thread_block()
        .context("cannot block the signals passed on to the program")?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            while let Ok(signal) = signals.wait() {
                if matches!(signal, Signal::SIGTERM | Signal::SIGHUP) {
                    let _ = kill(child, signal);
                }
            }
        })
        .context("cannot start the thread that passes signals on to the program")?;
    Ok(())
}

/// Bytes free for an unprivileged user on the file system holding `dir`.
fn disk_free(dir: &Path) -> Option<u64> {
    let st = nix::sys::statvfs::statvfs(dir).ok()?;
    Some(st.blocks_available() as u64 * st.fragment_size() as u64)
}

/// Below this, the profile's disk counts as full.
const DISK_FULL_BYTES: u64 = 1 << 20;

/// Writes how the run ended: the program's exit status or the signal that killed it (with
/// `quiet`, only a death by signal: its last samples are lost), the processes still running
/// and those that died without finishing their profile. Every line starts with `blameprof: `.
fn write_end(out: &mut dyn Write, end: &Ending, quiet: bool) -> std::io::Result<()> {
    match (end.exited, end.signal) {
        (_, Some((signal, core))) => writeln!(
            out,
            "blameprof: warning: the program was killed by signal {signal} ({}){}{}",
            signal_name(signal),
            if core { ", core dumped" } else { "" },
            if end.finished {
                ", after its profile was complete"
            } else {
                ": the samples not yet written when it died are lost (at most the last second \
                 of each thread)"
            }
        )?,
        (Some(code), None) if !quiet => {
            writeln!(out, "blameprof: the program exited with status {code}")?
        }
        _ => {}
    }
    if !end.running.is_empty() {
        let (is, it, its, they) = match end.running.len() {
            1 => ("is", "it", "its part", "it ends"),
            _ => ("are", "them", "their parts", "they end"),
        };
        writeln!(
            out,
            "blameprof: warning: {} of this run {is} still running (the run ended with the \
             program, without waiting for {it}): {its} of the profile in {} {is} incomplete \
             until {they}; then 'blameprof report {}' reads all of it",
            processes(&end.running),
            end.dir.display(),
            end.dir.display()
        )?;
    }
    if !end.unfinished.is_empty() {
        let its = match end.unfinished.len() {
            1 => "its part",
            _ => "their parts",
        };
        let full = match end.disk_free {
            Some(free) if free < DISK_FULL_BYTES => format!(
                "; the disk holding the profile is full ({free} bytes free): free some space, \
                 or profile to another disk with -o"
            ),
            _ => String::new(),
        };
        writeln!(
            out,
            "blameprof: warning: {} ended without finishing {its} of the profile (killed, \
             crashed, or the part could not be written to its end): the samples not yet \
             written are lost (at most the last second of each thread){full}",
            processes(&end.unfinished),
        )?;
    }
    Ok(())
}

/// "1 process (pid 12)", "3 processes (pids 12, 14, 15)": at most 10 pids.
fn processes(pids: &[u32]) -> String {
    let mut listed: Vec<String> = pids.iter().take(10).map(u32::to_string).collect();
    if pids.len() > 10 {
        listed.push("...".into());
    }
    match pids.len() {
        1 => format!("1 process (pid {})", pids[0]),
        n => format!("{n} processes (pids {})", listed.join(", ")),
    }
}

/// The usual name of a signal ("SIGSEGV"), or "signal N".
fn signal_name(signal: i32) -> String {
    Signal::try_from(signal).map_or_else(|_| format!("signal {signal}"), |s| s.as_str().to_owned())
}

/// The processes of this user alive now whose environment names `dir` as the profile's
/// output: the processes of this run (those that exec'd with an environment of their own are
/// not profiled either). A zombie shows an empty environment, and is not counted.
fn still_running(dir: &Path) -> Vec<u32> {
    let mut want = format!("{ENV_OUTPUT}=").into_bytes();
    want.extend_from_slice(dir.as_os_str().as_bytes());
    let uid = nix::unistd::getuid().as_raw();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            (e.metadata().ok()?.uid() == uid).then_some((pid, e.path()))
        })
        .filter(|(_, path)| {
            std::fs::read(path.join("environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|var| var == want.as_slice()))
        })
        .map(|(pid, _)| pid)
        .collect();
    pids.sort_unstable();
    pids
}

/// `--max-size`: a byte count, or one with a K, M or G suffix (powers of 1024), at least 64K.
fn parse_size(text: &str) -> Result<u64, String> {
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => text.split_at(i),
        None => (text, ""),
    };
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        _ => {
            return Err(format!(
                "'{text}' is not a size: use bytes, or K, M or G (1G)"
            ))
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("'{text}' is not a size: use bytes, or K, M or G (1G)"))?;
    let bytes = n
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("'{text}' is too large"))?;
    if bytes < 64 << 10 {
        return Err(format!("'{text}' is too small: at least 64K"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(end: &Ending, quiet: bool) -> String {
        let mut out = Vec::new();
        write_end(&mut out, end, quiet).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn an_exit_status_is_stated_unless_quiet() {
        let end = Ending {
            exited: Some(3),
            ..Ending::default()
        };
        assert_eq!(
            written(&end, false),
            "blameprof: the program exited with status 3\n"
        );
        assert_eq!(written(&end, true), "");
    }

    #[test]
    fn a_death_by_signal_is_a_warning_even_when_quiet() {
        let end = Ending {
            signal: Some((6, true)),
            ..Ending::default()
        };
        for quiet in [false, true] {
            let text = written(&end, quiet);
            assert!(
                text.starts_with(
                    "blameprof: warning: the program was killed by signal 6 (SIGABRT), core \
                     dumped: "
                ),
                "{text}"
            );
        }
        assert_eq!(signal_name(64), "signal 64");
    }

    #[test]
    fn processes_left_running_and_unfinished_ones_are_named() {
        let end = Ending {
            exited: Some(0),
            running: vec![41, 42],
            unfinished: vec![7],
            dir: PathBuf::from("/p"),
            ..Ending::default()
        };
        let text = written(&end, false);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[1].starts_with(
            "blameprof: warning: 2 processes (pids 41, 42) of this run are still running (the run \
             ended with the program, without waiting for them): their parts of the profile in \
             /p are incomplete until they end"
        ));
        assert!(lines[1].ends_with("'blameprof report /p' reads all of it"));
        assert!(lines[2].starts_with(
            "blameprof: warning: 1 process (pid 7) ended without finishing its part of the \
             profile"
        ));
        assert!(!lines[2].contains("full"), "{text}");
        let full = Ending {
            disk_free: Some(4096),
            ..end
        };
        let text = written(&full, false);
        assert!(
            text.contains("the disk holding the profile is full (4096 bytes free)"),
            "{text}"
        );
    }

    #[test]
    fn this_process_is_not_one_of_a_run_it_is_not_in() {
        assert!(still_running(Path::new("/nonexistent/profile")).is_empty());
    }

    #[test]
    fn sizes_take_binary_suffixes_and_refuse_nonsense() {
        assert_eq!(super::parse_size("1G"), Ok(1 << 30));
        assert_eq!(super::parse_size("512m"), Ok(512 << 20));
        assert_eq!(super::parse_size("65536"), Ok(65536));
        assert_eq!(super::parse_size("64KiB"), Ok(64 << 10));
        for bad in ["", "G", "1T", "-1", "1.5G", "1K", "99999999999G"] {
            assert!(super::parse_size(bad).is_err(), "{bad}");
        }
    }
}
