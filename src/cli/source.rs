//! `blameprof report --source FUNCTION`: one function's source, each line annotated with
//! its costs (docs/source-view.md; the listing is `viewer::source`'s).
//!
//! Job: choose the metrics shown (`--metric` first,
//! then `--metrics`; by default work, idleness and blame, those the profile has), load and
//! analyse the profile, and write the listing as text or JSON.
//!
//! Not async-signal-safe (allocates, does I/O).

use super::profile::{finish_output, ProfileArgs};
use crate::attribution::Analysis;
use crate::viewer::source::{listing, write_json, write_text, DEFAULT_METRICS};
use anyhow::bail;
use std::io::{self, Write};

/// What `--source` is asked for.
pub struct SourceArgs<'a> {
    pub profile: &'a ProfileArgs,
    /// `--thread`.
    pub thread: Option<u32>,
    /// `--metric` and `--metrics`.
    pub metric: Option<&'a str>,
    pub metrics: &'a [String],
    /// JSON rather than text.
    pub json: bool,
}

/// `report --source FUNCTION`: writes the annotated source of `function` (a name or a
/// unique part of one) to `out`.
pub fn report(args: &SourceArgs, function: &str, out: &mut dyn Write) -> anyhow::Result<()> {
    let (analysis, shown) = load_metrics(args)?;
    let listing = listing(&analysis, function, shown, !args.json)?;
    let mut out = io::BufWriter::new(out);
    let written = match args.json {
        true => write_json(&analysis, &listing, &mut out),
        false => write_text(&analysis, &listing, &mut out),
    };
    finish_output(written.and_then(|()| out.flush()))
}

/// Reads and analyses the profile; returns the analysis and the merged ids of the metrics
/// shown, the primary one (`--metric`, else the first of `--metrics`) first. Default: work,
/// idleness and blame, those the profile has.
fn load_metrics(args: &SourceArgs) -> anyhow::Result<(Analysis, Vec<usize>)> {
    if let Some(metric) = args.metric {
        if !args.metrics.is_empty() && !args.metrics.iter().any(|m| m == metric) {
            bail!(
                "--metric {metric} is not among --metrics {}: add it there, or drop --metric",
                args.metrics.join(",")
            );
        }
    }
    let mut asked: Vec<&str> = Vec::new();
    for name in args
        .metric
        .into_iter()
        .chain(args.metrics.iter().map(String::as_str))
    {
        if !asked.contains(&name) {
            asked.push(name);
        }
    }
    let (mut loaded, progress) = args.profile.load_showing(args.thread)?;
    let mut ids = loaded.metric_ids(&asked, false)?;
    let analysis = loaded.analysis()?;
    drop(progress);
    if args.metrics.is_empty() {
        for id in DEFAULT_METRICS
            .iter()
            .filter_map(|name| analysis.metrics.id(name).ok())
        {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    if ids.is_empty() {
        ids = analysis.metrics.base_ids().collect();
    }
    Ok((analysis, ids))
}
