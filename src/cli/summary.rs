//! What `blameprof run` prints after the run: the summary (every line starts with
//! `blameprof: `), or with `-q` only the warnings of damage and lost samples.
//!
//! Job: read the profile just written (in salvage mode: a damaged one is read and the
//! damage said), analyse it and diagnose its locks as the lock view does
//! ([`super::profile::diagnose`], default thresholds and timeline), and hand both to
//! `viewer::summary`.
//!
//! Not async-signal-safe (allocates, does I/O).

use super::profile::{diagnose, Diagnosis};
use super::timeline::TimelineFlags;
use crate::attribution::findings::Thresholds;
use crate::attribution::loaded::Loaded;
use crate::format::read::{read_profile, ReadOptions};
use crate::viewer::progress::Progress;
use crate::viewer::style::Paint;
use crate::viewer::summary;
use anyhow::anyhow;
use std::io::Write;
use std::path::Path;

/// The summary of the profile in `profile_dir`, naming the `top` functions.
pub fn summary(profile_dir: &Path, top: usize, out: &mut dyn Write) -> anyhow::Result<()> {
    let opts = ReadOptions {
        salvage: true,
        ..Default::default()
    };
    let progress = Progress::start("reading the profile");
    let mut loaded = Loaded::new(read_profile(profile_dir, opts)?, Default::default());
    progress.step(
        "symbolizing",
        Some((loaded.symbolizer.resolved(), "addresses")),
    );
    let analysis = loaded.analysis()?;
    let Diagnosis { locks, findings } = diagnose(
        &mut loaded,
        TimelineFlags::default().options(),
        Thresholds::default(),
    )?;
    drop(progress);
    summary::write(
        &analysis,
        Some((&locks, &findings)),
        top,
        Paint::for_stderr(),
        out,
    )
    .map_err(|e| anyhow!("cannot write the summary: {e}"))
}

/// What `blameprof run -q` still prints: warnings of damage and lost samples, from the
/// profile's counters alone (its samples are skipped, nothing is symbolized).
pub fn warn_losses(profile_dir: &Path, out: &mut dyn Write) -> anyhow::Result<()> {
    let opts = ReadOptions {
        salvage: true,
        skip_samples: true,
    };
    let profile = read_profile(profile_dir, opts)?;
    summary::write_losses(&profile, out).map_err(|e| anyhow!("cannot write the warnings: {e}"))
}
