//! Plain-text rendering of reports: a header describing the profile, then a table.
//!
//! Job: a header names the profile, the selection, the metric and every metric's total
//! (derived per-kind metrics on a line of their own); tree views print one row per shown
//! node, indented by depth, hot-path rows marked with `*`, with an inclusive and an
//! exclusive column pair per metric shown; the flat view prints one row per function; the
//! threads view prints one row per thread. Values are in human units (see [`units`]),
//! percentages of the report's base.
//!
//! Invariants: rows appear in the report's sort order, a child after its parent; output is
//! ASCII apart from the names found in the profile. Not async-signal-safe (allocates).

use super::style::fit;
use super::units;
use super::units::format_value;
use super::{
    describe_contention, describe_held, describe_lost, describe_sources, PercentOf, Renderer,
    Report, View,
};
use crate::attribution::cct::NodeId;
use crate::attribution::lock_sites::lock_sites;
use crate::attribution::metrics::IDLENESS;
use crate::attribution::symbolize::module_name;
use crate::attribution::FunctionId;
use crate::attribution::{Analysis, SourceLine};
use std::collections::HashMap;
use std::io::{self, Write};

/// The plain-text renderer.
pub struct Text;

impl Renderer for Text {
    fn render(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        let Some(width) = report.width else {
            return view(report, out);
        };
        // On a terminal: every line cut to its width (styled rows are cut already, and an
        // escape sequence must not be cut in two).
        let mut text = Vec::new();
        view(report, &mut text)?;
        for line in String::from_utf8_lossy(&text).lines() {
            if line.contains('\u{1b}') {
                writeln!(out, "{line}")?;
            } else {
                writeln!(out, "{}", fit(line, width))?;
            }
        }
        Ok(())
    }
}

fn view(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    header(report, out)?;
    writeln!(out)?;
    match report.view {
        View::Threads => threads(report, out),
        View::TopDown | View::BottomUp | View::Flat => table(report, out),
    }
}

fn header(r: &Report, out: &mut dyn Write) -> io::Result<()> {
    let a = r.analysis;
    writeln!(out, "profile:    {}", a.profile_path.display())?;
    for damage in &a.damage {
        writeln!(out, "damaged:    {damage} (showing the intact part)")?;
    }
    match a.processes.as_slice() {
        [p] => writeln!(out, "process:    pid {}: {}", p.pid, p.argv.join(" "))?,
        ps => {
            writeln!(out, "processes:  {}", ps.len())?;
            for p in ps.iter().take(10) {
                let cmd = p.argv.join(" ");
                let end = if p.ended_cleanly {
                    ""
                } else {
                    " [no end record]"
                };
                writeln!(
                    out,
                    "            pid {} (exec {}): {cmd}{end}",
                    p.pid, p.exec_generation
                )?;
            }
            if ps.len() > 10 {
                writeln!(out, "            ... and {} more", ps.len() - 10)?;
            }
        }
    }
    let unended: Vec<String> = a
        .processes
        .iter()
        .filter(|p| !p.ended_cleanly)
        .map(|p| p.pid.to_string())
        .collect();
    if !unended.is_empty() {
        writeln!(
            out,
            "ended:      no end record in pid {}: killed, crashed or still running (samples not \
             yet written are missing: at most the last second of each thread)",
            unended.join(", ")
        )?;
    }
    let filter = a.filter;
    if filter.pid.is_some() || filter.tid.is_some() {
        let parts: Vec<String> = [
            filter.pid.map(|p| format!("pid {p}")),
            filter.tid.map(|t| format!("thread {t}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        writeln!(out, "filter:     {}", parts.join(", "))?;
    }
    writeln!(out, "threads:    {}", a.threads.len())?;
    writeln!(out, "samples:    {}, lost {}", a.samples, describe_lost(a))?;
    writeln!(out, "source:     {}", describe_sources(a))?;
    if let Some(contention) = describe_contention(a) {
        writeln!(out, "contended:  {contention} acquisitions")?;
    }
    if let Some(held) = describe_held(a) {
        writeln!(out, "held:       {held}")?;
    }
    let def = &a.metrics.defs()[r.metric];
    writeln!(
        out,
        "metric:     {} ({}): {}; total {}",
        def.name,
        def.unit,
        def.description,
        format_value(r.total(), &def.unit)
    )?;
    let defs = a.metrics.defs();
    let totals = |ids: &mut dyn Iterator<Item = usize>| {
        ids.map(|m| {
            format!(
                "{} {}",
                defs[m].name,
                format_value(a.totals[m], &defs[m].unit)
            )
        })
        .collect::<Vec<String>>()
        .join(", ")
    };
    if a.metrics.base_ids().count() > 1 {
        let effort = match (a.effort(), a.total_of(IDLENESS)) {
            (Ok(effort), 1..) => format!("; effort (work + idleness) {}", ns(effort)),
            _ => String::new(),
        };
        let base = totals(&mut a.metrics.base_ids());
        writeln!(out, "totals:     {base}{effort}")?;
    }
    let mut derived = (0..a.metrics.len()).filter(|&m| a.metrics.derived_from(m).is_some());
    let derived = totals(&mut derived);
    if !derived.is_empty() {
        writeln!(out, "by kind:    {derived}")?;
    }
    let order = match r.view {
        View::Threads => return writeln!(out, "view:       threads"),
        View::Flat | View::BottomUp => "exclusive",
        View::TopDown => "inclusive",
    };
    let mut view = format!("{}, by {order} {}", r.view.name(), def.name);
    if r.percent_of() == PercentOf::Effort {
        view.push_str(&format!(
            "; % of effort (work + idleness, {})",
            ns(r.percent_base(r.metric))
        ));
    }
    if matches!(r.view, View::TopDown | View::BottomUp) {
        view.push_str("; * marks the hot path");
    }
    if let Some(d) = r.prune.depth.filter(|_| r.view != View::Flat) {
        view.push_str(&format!("; {d} levels"));
    }
    if let Some(m) = r.prune.min_percent.filter(|&m| m > 0.0) {
        view.push_str(&format!("; rows under {m}% hidden"));
    }
    writeln!(out, "view:       {view}")
}

fn table(r: &Report, out: &mut dyn Write) -> io::Result<()> {
    let defs = r.analysis.metrics.defs();
    if r.columns.len() > 1 {
        let names: Vec<String> = r
            .columns
            .iter()
            .map(|&m| format!("{:-^36}", format!(" {} ", defs[m].name)))
            .collect();
        writeln!(out, "{}", names.join("  "))?;
    }
    let heads: Vec<String> = r
        .columns
        .iter()
        .map(|_| format!("{:>17}  {:>17}", "inclusive", "exclusive"))
        .collect();
    writeln!(out, "{}    function", heads.join("  "))?;
    if r.tree.roots().is_empty() {
        return writeln!(out, "(no samples)");
    }
    let callers = lock_callers(r);
    // Depth-first, children in sort order: push them reversed.
    let mut stack: Vec<(NodeId, usize)> = r.tree.roots().iter().rev().map(|&id| (id, 1)).collect();
    while let Some((id, level)) = stack.pop() {
        if !r.shown(id, level) {
            continue;
        }
        for (i, &m) in r.columns.iter().enumerate() {
            let incl = r.tree.inclusive(id)[m];
            let excl = r.tree.exclusive(id)[m];
            let unit = &defs[m].unit;
            write!(
                out,
                "{}{:>10} {:>5.1}%  {:>10} {:>5.1}%",
                if i == 0 { "" } else { "  " },
                format_value(incl, unit),
                r.percent(incl, m),
                format_value(excl, unit),
                r.percent(excl, m),
            )?;
        }
        let node = r.tree.node(id);
        let function = r.analysis.names.function(node.function);
        let mark = if r.is_hot(id) { '*' } else { ' ' };
        let inlined = if node.inlined { " (inlined)" } else { "" };
        let line = r.tree.hottest_line(id, r.metric);
        let mut label = format!(
            "{:indent$}{}{inlined}{}{}",
            "",
            function.name,
            location(r.analysis, line, &function.module),
            callers.get(&node.function).map_or("", String::as_str),
            indent = 2 * (level - 1),
        );
        if let Some(width) = r.width {
            // The value columns, then "  * ": what is left is the label's.
            let used = r.columns.len() * 36 + (r.columns.len() - 1) * 2 + 4;
            label = fit(&label, width.saturating_sub(used).max(20));
        }
        if r.is_hot(id) {
            label = r.paint.bold(&label);
        }
        writeln!(out, "  {mark} {label}")?;
        stack.extend(r.tree.children(id).iter().rev().map(|&c| (c, level + 1)));
    }
    Ok(())
}

/// In the flat view, what each lock function's row adds: the code that called it, past
/// any language runtime's lock wrappers (`  <- read_table 80%, scan 20%`), by the chosen
/// metric; nothing in the tree views, whose rows show their callers already.
fn lock_callers(r: &Report) -> HashMap<FunctionId, String> {
    let mut by_lock: HashMap<FunctionId, Vec<(Option<FunctionId>, u64)>> = HashMap::new();
    if r.view != View::Flat {
        return HashMap::new();
    }
    for site in lock_sites(r.analysis, r.metric) {
        if let Some(lock) = site.lock {
            by_lock
                .entry(lock)
                .or_default()
                .push((site.caller, site.value));
        }
    }
    by_lock
        .into_iter()
        .map(|(lock, sites)| {
            let total: u64 = sites.iter().map(|s| s.1).sum();
            let shown: Vec<String> = sites
                .iter()
                .take(3)
                .map(|&(caller, value)| {
                    let name = caller.map_or("[no caller]", |c| {
                        r.analysis.names.function(c).name.as_str()
                    });
                    format!("{name} {:.0}%", units::percent(value, total))
                })
                .collect();
            let more = if sites.len() > 3 { ", ..." } else { "" };
            (lock, format!("  <- {}{more}", shown.join(", ")))
        })
        .collect()
}

/// Nanoseconds for reading.
fn ns(value: u64) -> String {
    format_value(value, "ns")
}

/// "  file.c:12" from the hottest line, else "  [module]", to follow a function name; ""
/// when there is nothing to add.
pub fn location(a: &Analysis, line: Option<SourceLine>, module: &str) -> String {
    let file = line
        .and_then(|l| l.file)
        .map(|f| module_name(a.names.file(f)));
    match (file, line.and_then(|l| l.line)) {
        (Some(file), Some(n)) => format!("  {file}:{n}"),
        (Some(file), None) => format!("  {file}"),
        (None, Some(n)) => format!("  line {n} [{}]", module_name(module)),
        // Pseudo-modules ("[vdso]") already name the frame.
        (None, None) if module.is_empty() || module.starts_with('[') => String::new(),
        (None, None) => format!("  [{}]", module_name(module)),
    }
}

fn threads(r: &Report, out: &mut dyn Write) -> io::Result<()> {
    let defs = r.analysis.metrics.defs();
    write!(out, "{:>8} {:>8}", "pid", "tid")?;
    for &m in &r.columns {
        write!(out, " {:>12}", defs[m].name)?;
    }
    writeln!(out, "  {:<20} start routine", "name")?;
    for t in &r.analysis.threads {
        write!(out, "{:>8} {:>8}", t.pid, t.tid)?;
        for &m in &r.columns {
            write!(out, " {:>12}", format_value(t.totals[m], &defs[m].unit))?;
        }
        let name = match t.is_main {
            true => format!("{} (main)", t.name),
            false => t.name.clone(),
        };
        let routine = t.start_routine.as_deref().unwrap_or("-");
        writeln!(out, "  {name:<20} {routine}")?;
    }
    Ok(())
}
