//! The merged metric list of a profile.
//!
//! Job: every process header declares its own metric list; samples refer to metrics by
//! index into it. The analysis merges the lists by metric name, in order of first
//! appearance, and maps each process's indices onto the merged ones.
//!
//! Invariants: names are unique in the merged list; a merged id is an index into it and
//! into every per-metric `Vec<u64>` of the analysis. Not async-signal-safe (allocates).

use super::AttributionError;
use crate::format::MetricDef;

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
    }
}
