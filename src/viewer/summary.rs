//! The short summary `blameprof run` prints when the profiled program ends.
//!
//! Job: say how much was measured and lost, how, where the profile is, and which functions
//! used the most CPU time (the head of the flat view by exclusive "work", or by the first
//! metric when a profile has no "work").
//!
//! Invariants: every line starts with `blameprof: `. Not async-signal-safe (allocates).

use super::text::location;
use super::units::{format_value, percent};
use super::{describe_lost, describe_sources, Prune, Report, View};
use crate::attribution::Analysis;
use crate::format::counters::LOST_SAMPLE_COUNTERS;
use std::io::{self, Write};

const PREFIX: &str = "blameprof: ";

/// Writes the summary of `analysis` with the `top` heaviest functions.
pub(super) fn write(analysis: &Analysis, top: usize, out: &mut dyn Write) -> io::Result<()> {
    let a = analysis;
    let path = a.profile_path.display();
    let processes = match a.processes.len() {
        1 => "1 process".to_owned(),
        n => format!("{n} processes"),
    };
    writeln!(
        out,
        "{PREFIX}profile: {path} ({processes}, {} threads)",
        a.threads.len()
    )?;
    for damage in &a.damage {
        writeln!(out, "{PREFIX}warning: {damage} (the intact part was read)")?;
    }
    writeln!(
        out,
        "{PREFIX}samples: {}, lost: {}",
        a.samples,
        describe_lost(a)
    )?;
    let notes: Vec<String> = a
        .counters
        .iter()
        .filter(|(name, _)| !LOST_SAMPLE_COUNTERS.contains(&name.as_str()))
        .map(|(name, v)| format!("{name} {v}"))
        .collect();
    if !notes.is_empty() {
        writeln!(out, "{PREFIX}note: {}", notes.join(", "))?;
    }
    writeln!(out, "{PREFIX}sample source: {}", describe_sources(a))?;
    if a.samples == 0 || a.metrics.is_empty() {
        writeln!(
            out,
            "{PREFIX}no samples: the program ran for less than one sampling period, or its \
             threads were not sampled"
        )?;
        return Ok(());
    }
    let metric = a.metrics.id("work").unwrap_or(0);
    let def = &a.metrics.defs()[metric];
    let total = a.totals[metric];
    writeln!(
        out,
        "{PREFIX}{}: total {}",
        def.name,
        format_value(total, &def.unit)
    )?;
    let report = Report::new(a, View::Flat, metric, Prune::default());
    let rows: Vec<_> = report
        .tree
        .roots()
        .iter()
        .copied()
        .filter(|&id| report.tree.exclusive(id)[metric] > 0)
        .take(top)
        .collect();
    if !rows.is_empty() {
        writeln!(
            out,
            "{PREFIX}top {} functions by exclusive {}:",
            rows.len(),
            def.name
        )?;
    }
    for id in rows {
        let excl = report.tree.exclusive(id)[metric];
        let function = a.names.function(report.tree.node(id).function);
        let line = report.tree.hottest_line(id, metric);
        writeln!(
            out,
            "{PREFIX}  {:>5.1}% {:>10}  {}{}",
            percent(excl, total),
            format_value(excl, &def.unit),
            function.name,
            location(a, line, &function.module)
        )?;
    }
    writeln!(
        out,
        "{PREFIX}call paths: 'blameprof report {path}'; flamegraph: 'blameprof flamegraph {path}'"
    )
}
