//! `report --format html|pprof|folded|firefox`: the whole profile, read and analysed once,
//! handed to the writer of each format.
//!
//! Job: load what every export needs ([`Export`]: the profile as read, its analysis with
//! every metric, its lock table, the symbolizer that named its frames) under the report's
//! `--pid`/`--thread` selection, and dispatch to the format's writer.
//!
//! Not async-signal-safe (allocates, does I/O).

use super::commands::{finish_output, read_named, OutputFormat, ReportArgs};
use crate::attribution::locks::{lock_table, LockTable};
use crate::attribution::symbolize::Symbolizer;
use crate::attribution::{analyze, metric_table, Analysis};
use crate::format::read::Profile;
use anyhow::bail;
use std::io::{self, Write};

/// A profile loaded for export.
pub struct Export {
    pub profile: Profile,
    /// The analysis of the selected samples, every metric.
    pub analysis: Analysis,
    pub locks: LockTable,
    /// The symbolizer that named the analysis's frames (its caches are warm).
    pub symbolizer: Symbolizer,
    /// Merged id of the metric `--metric` names (default: work).
    pub metric: usize,
}

impl Export {
    /// The export of all of `profile`, every metric, `metric` chosen (for unit tests of the
    /// writers, on the synthetic profiles of `attribution::testutil`).
    #[cfg(test)]
    pub(super) fn of_all(profile: Profile, metric: usize) -> Export {
        let mut symbolizer = Symbolizer::new();
        let analysis = analyze(&profile, Default::default(), &mut symbolizer).expect("analysis");
        let locks = lock_table(&profile, Default::default(), &mut symbolizer).expect("locks");
        Export {
            profile,
            analysis,
            locks,
            symbolizer,
            metric,
        }
    }
}

/// Writes `args.format`'s export of the profile `args` names to `out`.
pub fn write(args: &ReportArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let progress = super::progress::Progress::start("reading the profile");
    let profile = read_named(args.path.as_deref(), args.salvage)?;
    let filter = args.filter();
    let name = args.sort_metric(crate::attribution::metrics::WORK);
    let metric = metric_table(&profile, filter)?.id(name)?;
    let mut symbolizer = Symbolizer::new();
    progress.step("symbolizing", Some((symbolizer.resolved(), "addresses")));
    let analysis = analyze(&profile, filter, &mut symbolizer)?;
    progress.step("the lock table", None);
    let locks = lock_table(&profile, filter, &mut symbolizer)?;
    progress.step("writing", None);
    let export = Export {
        profile,
        analysis,
        locks,
        symbolizer,
        metric,
    };
    let mut out = io::BufWriter::new(out);
    let written = match args.format {
        OutputFormat::Folded => write_folded(&export, &mut out),
        OutputFormat::Html => super::html::write(&export, &mut out),
        OutputFormat::Pprof => super::pprof::write(&export, &mut out),
        OutputFormat::Firefox => super::firefox::write(&export, &mut out),
        OutputFormat::Text | OutputFormat::Json => bail!("not an export format"),
    };
    finish_output(written.and_then(|()| out.flush()))
}

/// Folded stacks of the chosen metric: `frame;frame;...;leaf value`, one line per calling
/// context with exclusive cost, values in the metric's unit (ns, or events).
fn write_folded(export: &Export, out: &mut dyn Write) -> io::Result<()> {
    let tree = crate::attribution::cct::top_down(&export.analysis);
    for line in super::flamegraph::folded_lines(&export.analysis, &tree, export.metric) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}
