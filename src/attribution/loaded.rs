//! A profile loaded for analysis: the one chain every view, export, the run summary and
//! `diff` build on (profile → symbolizer → metric ids, analysis, lock table → findings).
//!
//! Job: hold a read [`Profile`], the samples selected ([`Filter`]) and the one
//! [`Symbolizer`] all the steps share, and build each step from them, each written once
//! here: the merged ids of named metrics, the [`Analysis`], the [`LockTable`] and the
//! [`findings`] of that table.
//!
//! Invariants: every step sees the same profile, selection and symbolizer (so the analysis
//! and the lock table name frames alike, and the second step finds the symbolizer's caches
//! warm); metric ids are merged exactly as the analysis merges them, so they index its
//! vectors. Not async-signal-safe (allocates, reads files); single-threaded.

use super::findings::{findings, Finding, Thresholds};
use super::locks::{lock_table, LockTable};
use super::shifts::Shifts;
use super::symbolize::Symbolizer;
use super::timeline::Timeline;
use super::{analyze, metric_table, Analysis, AttributionError, Filter};
use crate::format::read::Profile;

/// A read profile, the selection of its samples, and the symbolizer of its frames.
pub struct Loaded {
    pub profile: Profile,
    /// The samples every step looks at.
    pub filter: Filter,
    /// Shared by every step (its caches are warm after the first).
    pub symbolizer: Symbolizer,
    /// The blame moved off its recorded paths, per process: made once for every step.
    pub shifts: Shifts,
}

impl Loaded {
    /// `profile`, with the samples `filter` selects.
    pub fn new(profile: Profile, filter: Filter) -> Loaded {
        Loaded {
            profile,
            filter,
            symbolizer: Symbolizer::new(),
            shifts: Shifts::default(),
        }
    }

    /// The merged ids of the metrics called `names`, in order; with `need_effort`, also
    /// checks that the profile has the metrics of effort (work and idleness). Cheap: run it
    /// before the (slower) analysis, so that a wrong name fails at once.
    pub fn metric_ids(
        &self,
        names: &[&str],
        need_effort: bool,
    ) -> Result<Vec<usize>, AttributionError> {
        let table = metric_table(&self.profile, self.filter)?;
        let ids = names
            .iter()
            .map(|name| table.id(name))
            .collect::<Result<Vec<usize>, _>>()?;
        if need_effort {
            table.effort_ids()?;
        }
        Ok(ids)
    }

    /// The analysis of the selected samples, every metric.
    pub fn analysis(&mut self) -> Result<Analysis, AttributionError> {
        analyze(
            &self.profile,
            self.filter,
            &mut self.symbolizer,
            &mut self.shifts,
        )
    }

    /// The lock table of the selected processes.
    pub fn lock_table(&mut self) -> Result<LockTable, AttributionError> {
        lock_table(
            &self.profile,
            self.filter,
            &mut self.symbolizer,
            &mut self.shifts,
        )
    }

    /// The findings of `locks` (this profile's lock table) and `timeline` (the timeline of
    /// all its locks, [`super::timeline::of_every_lock`]; none when not laid out).
    pub fn findings(
        &mut self,
        locks: &LockTable,
        timeline: Option<&Timeline>,
        thresholds: Thresholds,
    ) -> Result<Vec<Finding>, AttributionError> {
        findings(
            &self.profile,
            self.filter,
            locks,
            timeline,
            thresholds,
            &mut self.symbolizer,
        )
    }
}
