//! `blameprof flamegraph`: a flame graph SVG of one metric.
//!
//! Job: its arguments, loading and analysing the profile, refusing a metric with nothing to
//! draw, and writing the SVG `viewer::flamegraph` draws to `-o`'s file.
//!
//! Not async-signal-safe (allocates, does I/O).

use super::profile::ProfileArgs;
use crate::attribution::cct;
use anyhow::anyhow;
use std::path::PathBuf;

/// Options of `blameprof flamegraph`.
#[derive(Debug, Clone, clap::Args)]
pub struct FlamegraphArgs {
    /// Metric to draw: work, idleness (lock waiting, at the waiter), blame (lock waiting,
    /// at the holder) or held.contended (the holders' computing while others waited), or
    /// one of them by primitive, e.g. blame.mutex
    #[arg(long, default_value = "work")]
    pub metric: String,
    /// Where to write the SVG
    #[arg(short, long, default_value = "flamegraph.svg")]
    pub output: PathBuf,
    /// Only samples of this thread
    #[arg(long, value_name = "TID")]
    pub thread: Option<u32>,
    #[command(flatten)]
    pub profile: ProfileArgs,
}

/// `blameprof flamegraph`: writes an SVG flamegraph of the chosen metric.
pub fn flamegraph(args: &FlamegraphArgs) -> anyhow::Result<()> {
    let (mut loaded, progress) = args.profile.load_showing(args.thread)?;
    let metric = loaded.metric_ids(&[&args.metric], false)?[0];
    let analysis = loaded.analysis()?;
    drop(progress);
    if analysis.totals[metric] == 0 {
        anyhow::bail!(
            "metric '{}' has no cost in the selected samples, so there is nothing to draw: \
             choose another --metric, --thread or --pid",
            args.metric
        );
    }
    let tree = cct::top_down(&analysis);
    let mut svg = Vec::new();
    crate::viewer::flamegraph::render_svg(&analysis, &tree, metric, &mut svg)
        .map_err(|e| anyhow!("cannot draw the flamegraph: {e}"))?;
    std::fs::write(&args.output, svg).map_err(|e| {
        anyhow!(
            "cannot write the flamegraph to '{}': {e}; pass a writable path with -o",
            args.output.display()
        )
    })
}
