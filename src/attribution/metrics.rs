//! The merged metric list of a profile.
//!
//! Job: every process header declares its own metric list; samples refer to metrics by
//! index into it. The analysis merges the lists by metric name, in order of first
//! appearance, and maps each process's indices onto the merged ones.
//!
//! The runtime writes the metrics [`WORK`], [`IDLENESS`] and [`BLAME`]
//! (docs/lock-blame-contract.md); *effort* is work + idleness, the base HPCToolkit's
//! blame-shifting analysis expresses waiting and blame against.
//!
//! Invariants: names are unique in the merged list; a merged id is an index into it and
//! into every per-metric `Vec<u64>` of the analysis. Not async-signal-safe (allocates).

use super::AttributionError;
use crate::format::MetricDef;

pub use crate::format::metric_names::{BLAME, IDLENESS, WORK};

/// Metric definitions merged across processes.
#[derive(Debug, Clone, Default)]
pub struct MetricTable {
    defs: Vec<MetricDef>,
}

impl MetricTable {
    /// Adds a process's metric list; returns, per local index, the merged id.
    pub fn add_process(&mut self, defs: &[MetricDef]) -> Vec<usize> {
        defs.iter()
            .map(
                |def| match self.defs.iter().position(|d| d.name == def.name) {
                    Some(id) => id,
                    None => {
                        self.defs.push(def.clone());
                        self.defs.len() - 1
                    }
                },
            )
            .collect()
    }

    /// The merged id of the metric called `name`.
    pub fn id(&self, name: &str) -> Result<usize, AttributionError> {
        self.defs
            .iter()
            .position(|d| d.name == name)
            .ok_or_else(|| AttributionError::UnknownMetric {
                name: name.to_owned(),
                available: self.names(),
            })
    }

    /// The merged ids of [`WORK`] and [`IDLENESS`], whose sum is the effort.
    pub fn effort_ids(&self) -> Result<(usize, usize), AttributionError> {
        match (self.id(WORK), self.id(IDLENESS)) {
            (Ok(work), Ok(idleness)) => Ok((work, idleness)),
            _ => Err(AttributionError::NoEffort {
                available: self.names(),
            }),
        }
    }

    /// All names, comma-separated (for messages).
    fn names(&self) -> String {
        if self.defs.is_empty() {
            return "none: the profile declares no metrics".to_owned();
        }
        self.defs
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn defs(&self) -> &[MetricDef] {
        &self.defs
    }

    pub fn len(&self) -> usize {
        self.defs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str) -> MetricDef {
        MetricDef {
            name: name.into(),
            unit: "ns".into(),
            description: String::new(),
        }
    }

    #[test]
    fn merges_by_name_in_first_seen_order() {
        let mut t = MetricTable::default();
        assert_eq!(t.add_process(&[def("work"), def("idleness")]), vec![0, 1]);
        assert_eq!(t.add_process(&[def("blame"), def("work")]), vec![2, 0]);
        assert_eq!(t.id("blame").unwrap(), 2);
        let err = t.id("cycles").unwrap_err().to_string();
        assert!(err.contains("work, idleness, blame"), "{err}");
        assert_eq!(t.effort_ids().unwrap(), (0, 1));
    }

    #[test]
    fn effort_needs_work_and_idleness() {
        let mut t = MetricTable::default();
        t.add_process(&[def(WORK)]);
        let err = t.effort_ids().unwrap_err().to_string();
        assert!(
            err.contains("work and idleness") && err.contains("has work;"),
            "{err}"
        );
    }
}
