//! What the findings' lock rules read: a lock or a group ([`Subject`]) and the edges of its
//! sampled estimates (acquisitions, contention rate), so that sampling error never makes a
//! rule fire.
//!
//! Invariants: estimates from fewer than `MIN_ACQUISITION_SAMPLES` samples fall back to the
//! exact contended count; a rate is never above 1. Pure, allocation-free apart from
//! [`Subject::names`]; not async-signal-safe; single-threaded.

use super::{ratio, Finding, Kind, Value, MIN_ACQUISITION_SAMPLES, STANDARD_ERRORS};
use crate::attribution::locks::{Counts, LockRow, Site};
use crate::format::WaitKind;
use std::collections::BTreeMap;

/// A lock or a group, as the lock rules read it.
pub(super) struct Subject<'a> {
    pub(super) name: &'a str,
    pub(super) pid: u32,
    pub(super) kind: Option<WaitKind>,
    pub(super) counts: &'a Counts,
    pub(super) pressure: Option<f64>,
    /// Itself, or the group's members.
    pub(super) rows: Vec<&'a LockRow>,
    pub(super) group: bool,
    /// Seconds of its process's wall time (none when unknown).
    pub(super) seconds: Option<f64>,
}

impl Subject<'_> {
    pub(super) fn per_second(&self, count: f64) -> Option<f64> {
        self.seconds.map(|s| count / s)
    }

    /// The lock view's names its findings are about (what `--lock` selects them by).
    pub(super) fn names(&self) -> Vec<String> {
        vec![self.name.to_owned()]
    }

    /// A finding of `kind` about it.
    pub(super) fn finding(
        &self,
        kind: Kind,
        evidence: Vec<(&'static str, Value)>,
        (text, fix): (String, String),
        cost_ns: u64,
    ) -> Finding {
        Finding {
            kind,
            subject: self.name.to_owned(),
            pid: self.pid,
            lock_kind: self.kind,
            locks: self.names(),
            evidence,
            text,
            fix,
            cost_ns,
        }
    }
}

/// Acquisitions as the rules read them: the estimate, never below the contended ones (exact,
/// and acquisitions too); `None` when they were not counted.
pub(super) fn acquisitions(c: &Counts, counted: bool) -> Option<u64> {
    counted.then(|| c.runtime.acquisitions.max(c.runtime.contended))
}

/// Standard errors an estimate must clear when it is judged among `members` others like
/// it: [`STANDARD_ERRORS`], or `sqrt(2 ln members)` when that is more, about how far the
/// largest of that many normal errors lies (among thousands of estimates, some lie several
/// standard errors out by chance).
pub(super) fn chance_errors(members: usize) -> f64 {
    STANDARD_ERRORS.max((2.0 * (members.max(1) as f64).ln()).sqrt())
}

/// The estimate of acquisitions less [`STANDARD_ERRORS`] standard errors, never below the
/// contended ones (all it is from fewer than [`MIN_ACQUISITION_SAMPLES`] samples).
pub(super) fn acquisitions_low(c: &Counts) -> f64 {
    acquisitions_low_by(c, STANDARD_ERRORS)
}

/// [`acquisitions_low`] less `standard_errors` standard errors.
pub(super) fn acquisitions_low_by(c: &Counts, standard_errors: f64) -> f64 {
    if c.runtime.acquisition_samples < MIN_ACQUISITION_SAMPLES {
        return c.runtime.contended as f64;
    }
    let error = standard_errors / (c.runtime.acquisition_samples as f64).sqrt();
    (c.runtime.acquisitions as f64 * (1.0 - error)).max(c.runtime.contended as f64)
}

/// The contended acquisitions over the estimate of acquisitions plus `standard_errors`
/// standard errors: the low edge of the contention rate.
pub(super) fn contention_low_by(c: &Counts, standard_errors: f64) -> f64 {
    let error = standard_errors / (c.runtime.acquisition_samples.max(1) as f64).sqrt();
    let high = (c.runtime.acquisitions as f64 * (1.0 + error)).max(c.runtime.contended as f64);
    ratio(c.runtime.contended as f64, high)
}

/// The largest of `sites` summed by site, as `caller -> function`.
pub(super) fn top_site<'a>(sites: impl Iterator<Item = &'a (Site, u64)>) -> Option<String> {
    largest_site(sites).map(|(site, _, _)| site.label())
}

/// The largest of `sites` summed by site (of equal sums, the first site), with its sum and
/// the sum of all; `None` when none is over 0.
pub(super) fn largest_site<'a>(
    sites: impl Iterator<Item = &'a (Site, u64)>,
) -> Option<(&'a Site, u64, u64)> {
    let mut by: BTreeMap<&Site, u64> = BTreeMap::new();
    for (site, ns) in sites {
        let sum = by.entry(site).or_default();
        *sum = sum.saturating_add(*ns);
    }
    let total = by.values().fold(0u64, |t, &ns| t.saturating_add(ns));
    let (site, most) = by
        .into_iter()
        .filter(|&(_, ns)| ns > 0)
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)))?;
    Some((site, most, total))
}
