//! `blameprof run`: launch a program with the runtime injected, wait for it, report.
//!
//! Job: check the program can be profiled, prepare a fresh profile directory, start the
//! program with `LD_PRELOAD` and the runtime's configuration in its environment (everything
//! else passed through untouched), forward termination requests to it, exit with its status
//! (128 + signal if it was killed) and print a short summary on stderr. The CLI process
//! itself never loads the runtime.

use super::preflight::{self, LaunchError};
use anyhow::{bail, Context};
use blameprof::format::protocol::{
    CONTENDED_MEASURED_PER_MS, ENV_CONTENDED_PER_MS, ENV_FREQUENCY, ENV_OUTPUT,
    RUNTIME_LIBRARY as RUNTIME_NAME,
};
use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

/// Overrides where the runtime library is looked for.
pub const ENV_RUNTIME: &str = "BLAMEPROF_RUNTIME";

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
    /// The program to profile and its arguments (put them after --)
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<OsString>,
}

/// The child's pid, for forwarding termination signals.
static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward_signal(signal: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe; `pid` is our child.
        unsafe { libc::kill(pid, signal) };
    }
}

/// Runs the command; returns the exit status blameprof must exit with.
pub fn run(args: &RunArgs) -> anyhow::Result<i32> {
    let Some((program, rest)) = args.command.split_first() else {
        return Err(LaunchError::NoCommand.into());
    };
    let program_str = program.to_string_lossy().into_owned();
    let path = preflight::check(&program_str)?;
    let runtime = find_runtime()?;
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
        .env(ENV_CONTENDED_PER_MS, args.contended_per_ms.to_string());
    let mut child = command
        .spawn()
        .with_context(|| format!("cannot start '{program_str}'"))?;
    CHILD.store(child.id() as i32, Ordering::Relaxed);
    // SAFETY: installing plain handlers/ignores in the CLI process; `forward_signal` is
    // async-signal-safe. Interrupts from the terminal reach the child directly (same process
    // group), so the CLI ignores them and lives on to write the summary.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
        libc::signal(
            libc::SIGTERM,
            forward_signal as *const () as libc::sighandler_t,
        );
        libc::signal(
            libc::SIGHUP,
            forward_signal as *const () as libc::sighandler_t,
        );
    }
    let status = child.wait().context("waiting for the profiled program")?;
    let code = match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        _ => 1,
    };

    let dir = if args.output.is_none() {
        rename_default(&dir, &cmd_name, child.id())
    } else {
        dir
    };
    let mut err = std::io::stderr().lock();
    let told = match args.quiet {
        true => blameprof::viewer::commands::warn_losses(&dir, &mut err),
        false => blameprof::viewer::commands::summary(&dir, args.top, &mut err),
    };
    if let Err(e) = told {
        eprintln!(
            "blameprof: warning: profile in {} could not be read: {e:#}",
            dir.display()
        );
    }
    Ok(code)
}

/// Finds the runtime library: `$BLAMEPROF_RUNTIME`, else next to this executable (or in
/// `../lib/blameprof/` for an installed layout); its real path, which must end in
/// [`RUNTIME_NAME`].
fn find_runtime() -> anyhow::Result<PathBuf> {
    let found = match std::env::var_os(ENV_RUNTIME) {
        Some(p) => {
            let p = PathBuf::from(p);
            if !p.is_file() {
                bail!(
                    "{ENV_RUNTIME}={} does not name a file: point it at {RUNTIME_NAME}",
                    p.display()
                );
            }
            p
        }
        None => {
            let exe = std::env::current_exe().context("cannot locate the blameprof executable")?;
            let dir = exe.parent().unwrap_or(Path::new("."));
            let candidates = [
                dir.join(RUNTIME_NAME),
                dir.join("..").join(RUNTIME_NAME),
                dir.join("../lib/blameprof").join(RUNTIME_NAME),
            ];
            candidates.into_iter().find(|p| p.is_file()).with_context(|| {
                format!(
                    "runtime library {RUNTIME_NAME} not found next to {}: build it with 'cargo build --release --workspace', or set {ENV_RUNTIME}",
                    exe.display()
                )
            })?
        }
    };
    let real = std::fs::canonicalize(&found).unwrap_or_else(|_| found.clone());
    // The program loads the library by this path, and the analysis knows the runtime's
    // frames (to fold them into the lock function the program called) by its file name:
    // under another name its internals would show up in the program's call paths.
    if real.file_name() != Some(std::ffi::OsStr::new(RUNTIME_NAME)) {
        bail!(
            "the runtime library {} is not named {RUNTIME_NAME} (the name reports recognise \
             its frames by): copy or rename it to a file of that name",
            real.display()
        );
    }
    Ok(real)
}

/// `-o PATH`: a new directory, or an existing profile directory that is replaced.
fn prepare_named(path: &Path) -> anyhow::Result<PathBuf> {
    if path.exists() {
        let is_profile = path.is_dir()
            && std::fs::read_dir(path)?.all(|e| {
                e.is_ok_and(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .ends_with(blameprof::format::protocol::PART_SUFFIX)
                })
            });
        if !is_profile {
            bail!(
                "output '{}' exists and is not a blameprof profile: choose another path with -o",
                path.display()
            );
        }
        std::fs::remove_dir_all(path)
            .with_context(|| format!("cannot replace the old profile '{}'", path.display()))?;
    }
    create_dir(path)?;
    Ok(path.to_owned())
}

fn create_dir(path: &Path) -> anyhow::Result<()> {
    std::fs::create_dir(path).map_err(|e| {
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
