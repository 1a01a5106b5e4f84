//! The profile a command reads: its arguments ([`ProfileArgs`], flattened into `report`,
//! `flamegraph` and `timeline`), where it is by default, loading it, the lock diagnosis, and
//! the end of writing an output.
//!
//! Job: turn the profile's arguments into a [`Loaded`] profile (read with a progress line on
//! a terminal), and give the commands the one chain from a loaded profile to its lock table
//! and findings ([`diagnose`]), so that the lock view and the run summary build it alike.
//!
//! Invariants: the profile path defaults to the newest `blameprof-*` directory in the
//! current directory; every failure is one line naming the problem and the fix. Not
//! async-signal-safe (allocates, does I/O).

use crate::attribution::findings::{Finding, Thresholds};
use crate::attribution::loaded::Loaded;
use crate::attribution::locks::LockTable;
use crate::attribution::timeline::{of_every_lock, TimelineOptions};
use crate::attribution::Filter;
use crate::format::read::{read_profile, Profile, ReadOptions};
use crate::viewer::progress::Progress;
use anyhow::anyhow;
use std::io;
use std::path::{Path, PathBuf};

/// The profile a command reads, and the process it looks at.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ProfileArgs {
    /// Profile directory [default: the newest blameprof-* directory here]
    pub path: Option<PathBuf>,
    /// Only this process (all images it exec'd)
    #[arg(long)]
    pub pid: Option<u32>,
    /// Read the intact part of a damaged profile instead of failing
    #[arg(long)]
    pub salvage: bool,
}

impl ProfileArgs {
    /// The profile at `path` (default: the newest `blameprof-*` directory here), all of it
    /// (`--salvage`: its intact part).
    pub fn read(&self) -> anyhow::Result<Profile> {
        let path = match &self.path {
            Some(p) => p.clone(),
            None => default_profile()?,
        };
        let opts = ReadOptions {
            salvage: self.salvage,
            ..Default::default()
        };
        Ok(read_profile(&path, opts)?)
    }

    /// The profile, read, with the samples of `--pid` (and of thread `tid`) selected.
    pub fn load(&self, tid: Option<u32>) -> anyhow::Result<Loaded> {
        let filter = Filter { pid: self.pid, tid };
        Ok(Loaded::new(self.read()?, filter))
    }

    /// [`Self::load`] with a progress line, left on its next step (symbolizing).
    pub fn load_showing(&self, tid: Option<u32>) -> anyhow::Result<(Loaded, Progress)> {
        let progress = Progress::start("reading the profile");
        let loaded = self.load(tid)?;
        progress.step(
            "symbolizing",
            Some((loaded.symbolizer.resolved(), "addresses")),
        );
        Ok((loaded, progress))
    }
}

/// A profile's lock table and what is found in it.
pub struct Diagnosis {
    pub locks: LockTable,
    pub findings: Vec<Finding>,
}

/// The lock table of `loaded`, and its findings: the thresholds' rules, and the phases of
/// its locks' timeline laid out with `timeline`.
pub fn diagnose(
    loaded: &mut Loaded,
    timeline: TimelineOptions,
    thresholds: Thresholds,
) -> anyhow::Result<Diagnosis> {
    let locks = loaded.lock_table()?;
    let every_lock = of_every_lock(&loaded.profile, loaded.filter, &locks, timeline);
    let findings = loaded.findings(&locks, every_lock.as_ref(), thresholds)?;
    Ok(Diagnosis { locks, findings })
}

/// The end of writing an output: a closed pipe ends it quietly.
pub fn finish_output(result: io::Result<()>) -> anyhow::Result<()> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(anyhow!("cannot write the report: {e}")),
        Ok(()) => Ok(()),
    }
}

/// The newest `blameprof-*` directory in the current directory.
fn default_profile() -> anyhow::Result<PathBuf> {
    let cwd = std::env::current_dir()
        .map_err(|e| anyhow!("cannot read the current directory ({e}): pass a profile path"))?;
    newest_profile(&cwd).ok_or_else(|| {
        anyhow!(
            "no profile given and no blameprof-* directory in {}: pass a profile path, or \
             record one with 'blameprof run'",
            cwd.display()
        )
    })
}

/// The most recently modified `blameprof-*` directory in `dir` (ties: the greatest name).
pub fn newest_profile(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("blameprof-"))
        .filter_map(|e| {
            let meta = e.metadata().ok().filter(|m| m.is_dir())?;
            Some((meta.modified().ok()?, e.file_name(), e.path()))
        })
        .max()
        .map(|(_, _, path)| path)
}
