//! JSON rendering of reports, schema "blameprof-report" version 1 (docs/report-json.md).
//!
//! Job: serialize a [`Report`] as one JSON document, streaming (the tree is never copied
//! into a JSON value). Every node is written unless the report's pruning limits say
//! otherwise; per-metric values are objects keyed by metric name, in merged metric order.
//!
//! Invariants: the document shape is fixed by the schema version; a field is only ever
//! added in a new version. Not async-signal-safe (allocates).

use super::{Renderer, Report};
use crate::attribution::cct::NodeId;
use crate::attribution::metrics::MetricTable;
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use std::io::{self, Write};

/// Schema name written in every document.
pub const SCHEMA: &str = "blameprof-report";
/// Schema version written in every document.
pub const VERSION: u32 = 2;

/// The JSON renderer.
pub struct Json;

impl Renderer for Json {
    fn render(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        let a = report.analysis;
        let doc = Document {
            schema: SCHEMA,
            version: VERSION,
            view: report.view.name(),
            metric: &a.metrics.defs()[report.metric].name,
            metrics: a
                .metrics
                .defs()
                .iter()
                .map(|d| Metric {
                    name: &d.name,
                    unit: &d.unit,
                    description: &d.description,
                })
                .collect(),
            totals: Values(&a.metrics, &a.totals),
            samples: a.samples,
            lost_samples: a.lost_samples,
            processes: a
                .processes
                .iter()
                .map(|p| Process {
                    pid: p.pid,
                    argv: &p.argv,
                    exec_generation: p.exec_generation,
                    sample_source: &p.sample_source,
                    requested_hz: p.requested_hz,
                    period_ns: p.period_ns,
                    ended_cleanly: p.ended_cleanly,
                })
                .collect(),
            threads: a
                .threads
                .iter()
                .map(|t| Thread {
                    pid: t.pid,
                    tid: t.tid,
                    name: &t.name,
                    start_routine: t.start_routine.as_deref(),
                    totals: Values(&a.metrics, &t.totals),
                })
                .collect(),
            roots: Nodes {
                report,
                ids: report.tree.roots(),
                level: 1,
            },
        };
        serde_json::to_writer(&mut *out, &doc)?;
        writeln!(out)
    }
}

#[derive(Serialize)]
struct Document<'a> {
    schema: &'static str,
    version: u32,
    view: &'static str,
    metric: &'a str,
    metrics: Vec<Metric<'a>>,
    totals: Values<'a>,
    samples: u64,
    lost_samples: u64,
    processes: Vec<Process<'a>>,
    threads: Vec<Thread<'a>>,
    roots: Nodes<'a>,
}

#[derive(Serialize)]
struct Metric<'a> {
    name: &'a str,
    unit: &'a str,
    description: &'a str,
}

#[derive(Serialize)]
struct Process<'a> {
    pid: u32,
    argv: &'a [String],
    exec_generation: u32,
    sample_source: &'a str,
    requested_hz: u64,
    period_ns: u64,
    ended_cleanly: bool,
}

#[derive(Serialize)]
struct Thread<'a> {
    pid: u32,
    tid: u32,
    name: &'a str,
    start_routine: Option<&'a str>,
    totals: Values<'a>,
}

/// Per-metric values as `{"work": n, ...}`, in merged metric order.
pub(super) struct Values<'a>(pub &'a MetricTable, pub &'a [u64]);

impl Serialize for Values<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.1.len()))?;
        for (def, v) in self.0.defs().iter().zip(self.1) {
            map.serialize_entry(&def.name, v)?;
        }
        map.end()
    }
}

/// The shown nodes among `ids`, at tree level `level`.
struct Nodes<'a> {
    report: &'a Report<'a>,
    ids: &'a [NodeId],
    level: usize,
}

impl Serialize for Nodes<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.report;
        let mut seq = s.serialize_seq(None)?;
        for &id in self.ids.iter().filter(|&&id| r.shown(id, self.level)) {
            seq.serialize_element(&Node {
                report: r,
                id,
                level: self.level,
            })?;
        }
        seq.end()
    }
}

struct Node<'a> {
    report: &'a Report<'a>,
    id: NodeId,
    level: usize,
}

impl Serialize for Node<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.report;
        let a = r.analysis;
        let node = r.tree.node(self.id);
        let function = a.names.function(node.function);
        let line = r.tree.hottest_line(self.id, r.metric);
        let mut map = s.serialize_map(Some(8))?;
        map.serialize_entry("function", &function.name)?;
        map.serialize_entry("module", &function.module)?;
        map.serialize_entry("file", &line.and_then(|l| l.file).map(|f| a.names.file(f)))?;
        map.serialize_entry("line", &line.and_then(|l| l.line))?;
        map.serialize_entry("inlined", &node.inlined)?;
        map.serialize_entry("inclusive", &Values(&a.metrics, r.tree.inclusive(self.id)))?;
        map.serialize_entry("exclusive", &Values(&a.metrics, r.tree.exclusive(self.id)))?;
        map.serialize_entry(
            "children",
            &Nodes {
                report: r,
                ids: r.tree.children(self.id),
                level: self.level + 1,
            },
        )?;
        map.end()
    }
}
