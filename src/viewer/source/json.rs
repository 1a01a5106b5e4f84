//! `report --source FUNCTION --format json`: the listing the source module builds, as one
//! JSON document (schema [`SCHEMA`], version [`VERSION`]).
//!
//! Not async-signal-safe (allocates, does I/O).

use super::{Cost, Listing, Row};
use crate::attribution::metrics::MetricTable;
use crate::attribution::Analysis;
use crate::viewer::json::Values;
use serde::Serialize;
use std::io::{self, Write};

/// Schema name and version of the JSON document.
pub const SCHEMA: &str = "blameprof-source";
pub const VERSION: u32 = 1;

#[derive(Serialize)]
struct JsonCost<'a> {
    #[serde(rename = "self")]
    own: Values<'a>,
    total: Values<'a>,
}

impl<'a> JsonCost<'a> {
    fn of(metrics: &'a MetricTable, cost: &'a Cost) -> JsonCost<'a> {
        JsonCost {
            own: Values(metrics, &cost.own),
            total: Values(metrics, &cost.total),
        }
    }
}

#[derive(Serialize)]
struct JsonMetric<'a> {
    name: &'a str,
    unit: &'a str,
    description: &'a str,
}

#[derive(Serialize)]
struct JsonBody {
    first: u32,
    last: u32,
}

#[derive(Serialize)]
struct JsonLine<'a> {
    line: u32,
    text: Option<&'a str>,
    hot: bool,
    own: bool,
    #[serde(flatten)]
    cost: JsonCost<'a>,
}

#[derive(Serialize)]
struct JsonFile<'a> {
    file: &'a str,
    read_from: Option<String>,
    looked_in: Vec<String>,
    newer_than_module: bool,
    own: bool,
    functions: &'a [String],
    lines: Vec<JsonLine<'a>>,
}

#[derive(Serialize)]
struct JsonDocument<'a> {
    schema: &'static str,
    version: u32,
    profile: String,
    function: &'a str,
    modules: &'a [String],
    metric: &'a str,
    shown: Vec<&'a str>,
    metrics: Vec<JsonMetric<'a>>,
    totals: JsonCost<'a>,
    no_line: JsonCost<'a>,
    body: Option<JsonBody>,
    files: Vec<JsonFile<'a>>,
}

/// The listing as JSON (docs/source-view.md).
pub fn write_json(analysis: &Analysis, listing: &Listing, out: &mut dyn Write) -> io::Result<()> {
    let metrics = &analysis.metrics;
    let defs = metrics.defs();
    let zero = Cost::zero(metrics.len());
    let files = listing
        .files
        .iter()
        .map(|file| JsonFile {
            file: analysis.names.file(file.file),
            read_from: file
                .source
                .read_from
                .as_ref()
                .map(|p| p.display().to_string()),
            looked_in: file
                .source
                .looked_in
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            newer_than_module: file.source.newer_than_module,
            own: file.own,
            functions: &file.functions,
            lines: file
                .rows
                .iter()
                .filter_map(|&row| match row {
                    Row::Line(n) => Some(n),
                    Row::Gap(_) => None,
                })
                .map(|n| {
                    let line = listing.costs.lines.get(&(file.file, n));
                    let cost = line.map(|lc| &lc.cost);
                    JsonLine {
                        line: n,
                        text: file.text(n),
                        hot: cost.is_some_and(|c| listing.is_hot(c)),
                        own: line.is_some_and(|lc| lc.own_line),
                        cost: JsonCost::of(metrics, cost.unwrap_or(&zero)),
                    }
                })
                .collect(),
        })
        .collect();
    let doc = JsonDocument {
        schema: SCHEMA,
        version: VERSION,
        profile: analysis.profile_path.display().to_string(),
        function: &listing.function,
        modules: &listing.modules,
        metric: &defs[listing.shown[0]].name,
        shown: listing
            .shown
            .iter()
            .map(|&m| defs[m].name.as_str())
            .collect(),
        metrics: defs
            .iter()
            .map(|d| JsonMetric {
                name: &d.name,
                unit: &d.unit,
                description: &d.description,
            })
            .collect(),
        totals: JsonCost::of(metrics, &listing.costs.function),
        no_line: JsonCost::of(metrics, &listing.costs.no_line),
        body: listing.body.as_ref().map(|b| JsonBody {
            first: *b.start(),
            last: *b.end(),
        }),
        files,
    };
    serde_json::to_writer(&mut *out, &doc)?;
    writeln!(out)
}
