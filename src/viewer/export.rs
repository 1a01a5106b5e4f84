//! `report --format html|pprof|folded|firefox`: the whole profile, read and analysed once,
//! handed to the writer of each format.
//!
//! Job: what every export needs ([`Export`]: the profile as read, its analysis with every
//! metric, its lock table, the symbolizer that named its frames, loaded by the caller under
//! the report's `--pid`/`--thread` selection), which the writers of each format
//! ([`super::html`], [`super::pprof`], [`super::firefox`], and [`write_folded`] here) take.
//!
//! Not async-signal-safe (allocates, does I/O).

use crate::attribution::locks::LockTable;
use crate::attribution::shifts::Shifts;
use crate::attribution::symbolize::Symbolizer;
use crate::attribution::Analysis;
use crate::format::read::Profile;
use std::io::{self, Write};

/// A profile loaded for export.
pub struct Export {
    pub profile: Profile,
    /// The analysis of the selected samples, every metric.
    pub analysis: Analysis,
    pub locks: LockTable,
    /// The symbolizer that named the analysis's frames (its caches are warm).
    pub symbolizer: Symbolizer,
    /// The profile's blame moved off its recorded paths, as the analysis made it.
    pub shifts: Shifts,
    /// Merged id of the metric `--metric` names (default: work).
    pub metric: usize,
}

impl Export {
    /// The export of all of `profile`, every metric, `metric` chosen (for unit tests of the
    /// writers, on the synthetic profiles of `attribution::testutil`).
    #[cfg(test)]
    pub(super) fn of_all(profile: Profile, metric: usize) -> Export {
        let mut loaded = crate::attribution::loaded::Loaded::new(profile, Default::default());
        let analysis = loaded.analysis().expect("analysis");
        let locks = loaded.lock_table().expect("locks");
        Export {
            profile: loaded.profile,
            analysis,
            locks,
            symbolizer: loaded.symbolizer,
            shifts: loaded.shifts,
            metric,
        }
    }
}

/// Folded stacks of the chosen metric: `frame;frame;...;leaf value`, one line per calling
/// context with exclusive cost, values in the metric's unit (ns, or events).
pub fn write_folded(export: &Export, out: &mut dyn Write) -> io::Result<()> {
    let tree = crate::attribution::cct::top_down(&export.analysis);
    for line in super::flamegraph::folded_lines(&export.analysis, &tree, export.metric) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}
