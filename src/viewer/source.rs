//! `report --source FUNCTION`: one function's source, each line annotated with its costs,
//! as `perf annotate --stdio` (source mode), pprof's `list` and HPCToolkit's source pane
//! show it (docs/source-view.md).
//!
//! Job: build the listing from the analysis's line costs (`attribution::line_costs`) and
//! the source files (`files`): the lines around those with cost, the function's whole body
//! when it is short, the hot lines marked; print it as text, with a self and a total column
//! per metric shown. `json` writes the same listing as JSON.
//!
//! Invariants: a source line is shown as the file at the path the debug information
//! recorded (or next to the module) reads now, tabs expanded; the text output needs the
//! function's own file.
//!
//! Not async-signal-safe (allocates, does I/O).

mod files;
mod json;

pub use json::write_json;

use super::units::format_value;
use crate::attribution::line_costs::{find_function, line_costs, Cost, Costs};
use crate::attribution::metrics::{MetricTable, BLAME, IDLENESS, WORK};
use crate::attribution::symbolize::module_name;
use crate::attribution::{Analysis, FileId, FunctionId};
use anyhow::bail;
use files::{body_lines, read_source, SourceFile};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::ops::RangeInclusive;
use std::path::Path;

/// The metrics shown when `--metrics` is not given, those of them the profile has.
pub const DEFAULT_METRICS: [&str; 3] = [WORK, IDLENESS, BLAME];
/// Lines shown either side of a line with cost: in the function's own file, in others.
const CONTEXT: u32 = 3;
const OTHER_CONTEXT: u32 = 1;
/// A function whose code spans at most this many lines is shown whole.
const SHORT_BODY: u32 = 60;
/// A line is hot when it has at least this percentage of the function's total in a metric
/// shown.
const HOT_PERCENT: u128 = 10;
/// Width of a value column ("123.45 ms").
const VALUE_WIDTH: usize = 10;
/// Width of the line-number column.
const LINE_WIDTH: usize = 6;

/// What `--source FUNCTION` shows of `function` (a name or a unique part of one) in
/// `analysis`: its lines with cost in the metrics `shown` (merged ids, the primary one
/// first), from the files they are in. With `need_source` (the text output), a main file
/// that cannot be read is an error naming the fix.
pub fn listing(
    analysis: &Analysis,
    function: &str,
    shown: Vec<usize>,
    need_source: bool,
) -> anyhow::Result<Listing> {
    let (name, ids) = find_function(analysis, function)?;
    let costs = line_costs(analysis, &ids);
    Listing::build(analysis, name, &ids, costs, shown, need_source)
}

/// One row of a file's listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Row {
    Line(u32),
    /// This many lines not shown.
    Gap(u32),
}

/// The rows that show the `costed` lines (sorted) of a file of `len` lines (`None`: its
/// text is unknown, and only those lines are shown), each with `context` lines either side,
/// and the lines of `whole` (clipped to the file). A single hidden line between two shown
/// ones is shown too; longer runs become a gap.
fn rows(
    costed: &[u32],
    context: u32,
    whole: Option<RangeInclusive<u32>>,
    len: Option<u32>,
) -> Vec<Row> {
    let mut shown: BTreeSet<u32> = costed.iter().copied().collect();
    if let Some(len) = len {
        for &line in costed {
            let around = line.saturating_sub(context).max(1)..=line.saturating_add(context);
            shown.extend(around.filter(|&l| l <= len));
        }
        if let Some(whole) = whole {
            shown.extend(whole.filter(|&l| l >= 1 && l <= len));
        }
    }
    let mut rows = Vec::new();
    let mut previous: Option<u32> = None;
    for line in shown {
        match previous.map(|p| line - p - 1) {
            None | Some(0) => {}
            Some(1) if len.is_some() => rows.push(Row::Line(line - 1)),
            Some(hidden) => rows.push(Row::Gap(hidden)),
        }
        rows.push(Row::Line(line));
        previous = Some(line);
    }
    rows
}

/// One file of the listing.
#[derive(Debug)]
struct FileListing {
    file: FileId,
    /// It holds lines of the function itself (else only of callees inlined into it).
    own: bool,
    /// Names of the functions whose lines with cost are in it, the function's first.
    functions: Vec<String>,
    source: SourceFile,
    rows: Vec<Row>,
}

impl FileListing {
    /// The number of lines of the file, when its text is known.
    fn len(&self) -> Option<u32> {
        self.source
            .read_from
            .as_ref()
            .map(|_| self.source.lines.len() as u32)
    }

    /// The text of line `line`; `None` when the file was not found or is shorter.
    fn text(&self, line: u32) -> Option<&str> {
        let index = usize::try_from(line).ok()?.checked_sub(1)?;
        self.source.lines.get(index).map(String::as_str)
    }
}

/// What `--source` shows.
#[derive(Debug)]
pub struct Listing {
    function: String,
    /// The modules the function is in.
    modules: Vec<String>,
    costs: Costs,
    /// Merged ids of the metrics shown, the primary one first.
    shown: Vec<usize>,
    /// The function's own lines in its main file, from the debug information.
    body: Option<RangeInclusive<u32>>,
    /// The function's main file (where most of its primary cost is) first, then the others
    /// by decreasing cost.
    files: Vec<FileListing>,
}

impl Listing {
    /// Lays out the lines of `function` (ids `ids`) with cost in a metric `shown`, reading
    /// their files. With `need_source`, a main file that cannot be read, or a function
    /// without any known line, is an error naming the fix.
    fn build(
        analysis: &Analysis,
        function: String,
        ids: &[FunctionId],
        costs: Costs,
        shown: Vec<usize>,
        need_source: bool,
    ) -> anyhow::Result<Listing> {
        let mut modules: Vec<String> = Vec::new();
        for &id in ids {
            let module = &analysis.names.function(id).module;
            if !module.is_empty() && !modules.contains(module) {
                modules.push(module.clone());
            }
        }
        let module_paths: Vec<&str> = modules.iter().map(String::as_str).collect();
        let has_cost = |c: &Cost| shown.iter().any(|&m| c.total[m] > 0);
        // Per file: its lines with cost, whether the function's own, the primary cost.
        let mut by_file: BTreeMap<FileId, (Vec<u32>, bool, u64)> = BTreeMap::new();
        for (&(file, line), lc) in costs.lines.iter().filter(|(_, lc)| has_cost(&lc.cost)) {
            let entry = by_file.entry(file).or_default();
            entry.0.push(line);
            entry.1 |= lc.own_line;
            entry.2 += lc.cost.total[shown[0]];
        }
        let mut order: Vec<(FileId, bool, u64)> = by_file
            .iter()
            .map(|(&file, &(_, own, cost))| (file, own, cost))
            .collect();
        order.sort_by(|a, b| b.1.cmp(&a.1).then(b.2.cmp(&a.2)).then(a.0.cmp(&b.0)));
        let main = order.first().filter(|(_, own, _)| *own).map(|&(f, _, _)| f);
        if need_source && !has_cost(&costs.function) {
            let defs = analysis.metrics.defs();
            let names: Vec<&str> = shown.iter().map(|&m| defs[m].name.as_str()).collect();
            bail!(
                "'{function}' has no {} in the selected samples: show other metrics with \
                 --metrics",
                names.join(" or ")
            );
        }
        if need_source && main.is_none() {
            bail!(
                "no source line is known for '{function}' in {}: its module has no debug line \
                 information for it (build it with -g)",
                modules_label(&modules)
            );
        }
        let body = main.and_then(|file| {
            let file = analysis.names.file(file);
            modules
                .iter()
                .find_map(|module| body_lines(module, &function, file))
        });
        let mut files = Vec::new();
        for (file, own, _) in order {
            let (lines, _, _) = &by_file[&file];
            let source = read_source(analysis.names.file(file), &module_paths);
            let is_main = Some(file) == main;
            if is_main && need_source && source.read_from.is_none() {
                bail!(
                    "cannot read the source of '{function}': {}; --source needs the source at \
                     the path its debug information recorded (or pass --format json for the \
                     line costs alone)",
                    not_found(analysis.names.file(file), &source)
                );
            }
            let len = source.read_from.as_ref().map(|_| source.lines.len() as u32);
            let whole = match (is_main, &body) {
                (true, Some(body)) if body.end() - body.start() < SHORT_BODY => Some(body.clone()),
                // A long function: its first line, where its signature is.
                (true, Some(body)) => Some(*body.start()..=*body.start()),
                _ => None,
            };
            let context = if is_main { CONTEXT } else { OTHER_CONTEXT };
            let mut functions: Vec<String> = Vec::new();
            let with_function = own.then_some(function.as_str());
            let names = lines
                .iter()
                .flat_map(|&l| &costs.lines[&(file, l)].functions)
                .map(|&f| analysis.names.function(f).name.as_str());
            for name in with_function.into_iter().chain(names) {
                if !functions.iter().any(|f| f == name) {
                    functions.push(name.to_owned());
                }
            }
            files.push(FileListing {
                file,
                own,
                functions,
                rows: rows(lines, context, whole, len),
                source,
            });
        }
        Ok(Listing {
            function,
            modules,
            costs,
            shown,
            body,
            files,
        })
    }

    /// The cost of line `line` of `file`, when it has any.
    fn line(&self, file: FileId, line: u32) -> Option<&Cost> {
        self.costs.lines.get(&(file, line)).map(|lc| &lc.cost)
    }

    /// Whether `cost` is at least [`HOT_PERCENT`] of the function's total in a metric shown.
    fn is_hot(&self, cost: &Cost) -> bool {
        self.shown.iter().any(|&m| {
            let (value, total) = (cost.total[m] as u128, self.costs.function.total[m] as u128);
            value > 0 && value * 100 >= HOT_PERCENT * total
        })
    }
}

/// "[prog]" or "[prog, libfoo.so]": the modules a function is in, by file name.
fn modules_label(modules: &[String]) -> String {
    let names: Vec<&str> = modules.iter().map(|m| module_name(m)).collect();
    match names.is_empty() {
        true => "[no module]".to_owned(),
        false => format!("[{}]", names.join(", ")),
    }
}

/// Where the file recorded as `recorded` was looked for and why it was not read: "/a/b.c:
/// not found (nor at /prog/b.c)", or, for a relative path, "its debug information records
/// the relative path 'b.c', not found at /prog/b.c, b.c".
fn not_found(recorded: &str, source: &SourceFile) -> String {
    let paths: Vec<String> = source
        .looked_in
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    if Path::new(recorded).is_relative() {
        return format!(
            "its debug information records the relative path '{recorded}', not found at {}",
            paths.join(", ")
        );
    }
    let why = source.error.as_deref().unwrap_or("not found");
    match paths.len() {
        0 | 1 => format!("{recorded}: {why}"),
        _ => format!("{recorded}: {why} (nor at {})", paths[1..].join(", ")),
    }
}

/// A column of the text table: a metric's self or total cost.
#[derive(Debug, Clone, Copy)]
struct Column {
    metric: usize,
    own: bool,
    width: usize,
}

/// The columns of the text table: per metric shown, its self cost when the function (or an
/// inlined callee) has any, and its total; each group wide enough for the metric's name.
fn columns(listing: &Listing, metrics: &MetricTable) -> Vec<Column> {
    let mut columns = Vec::new();
    for &m in &listing.shown {
        let own = listing.costs.function.own[m] > 0
            || listing.costs.lines.values().any(|lc| lc.cost.own[m] > 0);
        let name = metrics.defs()[m].name.len() + 2;
        if own {
            let width = VALUE_WIDTH.max(name.saturating_sub(1).div_ceil(2));
            columns.push(Column {
                metric: m,
                own: true,
                width,
            });
            columns.push(Column {
                metric: m,
                own: false,
                width,
            });
        } else {
            let width = VALUE_WIDTH.max(name);
            columns.push(Column {
                metric: m,
                own: false,
                width,
            });
        }
    }
    columns
}

/// The listing as text: a title, then per file its rows with a self and a total column per
/// metric shown.
pub fn write_text(analysis: &Analysis, listing: &Listing, out: &mut dyn Write) -> io::Result<()> {
    let defs = analysis.metrics.defs();
    writeln!(out, "profile:    {}", analysis.profile_path.display())?;
    let filter = analysis.filter;
    let selection: Vec<String> = [
        filter.pid.map(|p| format!("pid {p}")),
        filter.tid.map(|t| format!("thread {t}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !selection.is_empty() {
        writeln!(out, "filter:     {}", selection.join(", "))?;
    }
    writeln!(
        out,
        "function:   {}  {}",
        listing.function,
        modules_label(&listing.modules)
    )?;
    if let Some(main) = listing.files.first().filter(|f| f.own) {
        let lines = match &listing.body {
            Some(body) => format!(" (its code: lines {}-{})", body.start(), body.end()),
            None => String::new(),
        };
        let path = analysis.names.file(main.file);
        let read = match &main.source.read_from {
            Some(read) if read.as_os_str() != path => format!(", read from {}", read.display()),
            Some(_) => String::new(),
            None => format!(" ({})", not_found(path, &main.source)),
        };
        writeln!(out, "file:       {path}{lines}{read}")?;
        if main.functions.len() > 1 {
            writeln!(
                out,
                "inlined:    {} (their lines here are listed too; self: their own code)",
                main.functions[1..].join(", ")
            )?;
        }
    }
    let f = &listing.costs.function;
    let totals: Vec<String> = listing
        .shown
        .iter()
        .map(|&m| {
            let value = |v: u64| format_value(v, &defs[m].unit);
            match f.own[m] {
                0 => format!("{} {}", defs[m].name, value(f.total[m])),
                own => format!(
                    "{} {} (self {})",
                    defs[m].name,
                    value(f.total[m]),
                    value(own)
                ),
            }
        })
        .collect();
    writeln!(out, "totals:     {}", totals.join(", "))?;
    let no_line = &listing.costs.no_line;
    if listing.shown.iter().any(|&m| no_line.total[m] > 0) {
        let at: Vec<String> = listing
            .shown
            .iter()
            .filter(|&&m| no_line.total[m] > 0)
            .map(|&m| {
                format!(
                    "{} {}",
                    defs[m].name,
                    format_value(no_line.total[m], &defs[m].unit)
                )
            })
            .collect();
        writeln!(
            out,
            "no line:    {} (frames without a source line)",
            at.join(", ")
        )?;
    }
    for file in listing.files.iter().filter(|f| f.source.newer_than_module) {
        if let Some(read) = &file.source.read_from {
            writeln!(
                out,
                "note:       {} is newer than the program: its lines may not match the code",
                read.display()
            )?;
        }
    }
    writeln!(
        out,
        "legend:     self: the line's own code; total: with its calls and waits; *: \
         {HOT_PERCENT}% or more of a total"
    )?;
    let columns = columns(listing, &analysis.metrics);
    writeln!(out)?;
    write_heads(&columns, defs, out)?;
    for (i, file) in listing.files.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
            write_file_title(analysis, file, out)?;
        }
        write_rows(listing, file, &columns, defs, out)?;
        if i == 0 && listing.shown.iter().any(|&m| no_line.total[m] > 0) {
            write_row(
                &columns,
                defs,
                Some(no_line),
                ' ',
                "-",
                "(no line information)",
                out,
            )?;
        }
    }
    Ok(())
}

/// The two heading lines of the table: metric names over their columns, then self/total.
fn write_heads(
    columns: &[Column],
    defs: &[crate::format::MetricDef],
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut groups: Vec<String> = Vec::new();
    let mut i = 0;
    while i < columns.len() {
        let metric = columns[i].metric;
        let group: Vec<&Column> = columns[i..]
            .iter()
            .take_while(|c| c.metric == metric)
            .collect();
        let span = group.iter().map(|c| c.width).sum::<usize>() + group.len() - 1;
        groups.push(format!("{:-^span$}", format!(" {} ", defs[metric].name)));
        i += group.len();
    }
    writeln!(out, "  {}", groups.join(" "))?;
    let heads: Vec<String> = columns
        .iter()
        .map(|c| format!("{:>w$}", if c.own { "self" } else { "total" }, w = c.width))
        .collect();
    writeln!(out, "  {} {:>LINE_WIDTH$}  source", heads.join(" "), "line")
}

/// The title of a file after the main one: its path, whose lines it holds, and whether its
/// text was found.
fn write_file_title(
    analysis: &Analysis,
    file: &FileListing,
    out: &mut dyn Write,
) -> io::Result<()> {
    let path = analysis.names.file(file.file);
    let whose = match file.own {
        true => format!("lines of {}", file.functions.join(", ")),
        false => format!("inlined: {}", file.functions.join(", ")),
    };
    let found = match (&file.source.read_from, &file.source.error) {
        (Some(_), _) => String::new(),
        (None, Some(error)) => format!(" (source not found: {error})"),
        (None, None) => " (source not found)".to_owned(),
    };
    writeln!(out, "--- {path}: {whose}{found}")
}

fn write_rows(
    listing: &Listing,
    file: &FileListing,
    columns: &[Column],
    defs: &[crate::format::MetricDef],
    out: &mut dyn Write,
) -> io::Result<()> {
    let len = file.len();
    for &row in &file.rows {
        match row {
            Row::Gap(n) => {
                let blank: usize = columns.iter().map(|c| c.width + 1).sum();
                writeln!(out, "  {:blank$}{:>LINE_WIDTH$}  ({n} lines)", "", "...")?;
            }
            Row::Line(n) => {
                let cost = listing.line(file.file, n);
                let mark = match cost.is_some_and(|c| listing.is_hot(c)) {
                    true => '*',
                    false => ' ',
                };
                let text = match (file.text(n), len) {
                    (Some(text), _) => text,
                    (None, Some(_)) => "(past the end of the file: it changed since the build?)",
                    (None, None) => "",
                };
                write_row(columns, defs, cost, mark, &n.to_string(), text, out)?;
            }
        }
    }
    Ok(())
}

fn write_row(
    columns: &[Column],
    defs: &[crate::format::MetricDef],
    cost: Option<&Cost>,
    mark: char,
    line: &str,
    text: &str,
    out: &mut dyn Write,
) -> io::Result<()> {
    write!(out, "{mark}")?;
    for c in columns {
        let value = cost.map_or(0, |cost| match c.own {
            true => cost.own[c.metric],
            false => cost.total[c.metric],
        });
        let shown = match value {
            0 => String::new(),
            v => format_value(v, &defs[c.metric].unit),
        };
        write!(out, " {shown:>w$}", w = c.width)?;
    }
    writeln!(out, " {line:>LINE_WIDTH$}  {text}").map(|()| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_show_context_and_the_whole_short_body_and_elide_long_gaps() {
        use Row::{Gap, Line};
        let rows_of = |costed: &[u32], whole, len| rows(costed, 1, whole, len);
        assert_eq!(
            rows_of(&[3, 10], None, Some(20)),
            [
                Line(2),
                Line(3),
                Line(4),
                Gap(4),
                Line(9),
                Line(10),
                Line(11)
            ]
        );
        // One hidden line is shown rather than elided; context stops at the file's ends.
        assert_eq!(
            rows_of(&[1, 5], None, Some(5)),
            [Line(1), Line(2), Line(3), Line(4), Line(5)]
        );
        let body: Vec<Row> = (2..=5).map(Line).collect();
        assert_eq!(rows_of(&[4], Some(2..=6), Some(5)), body);
        assert_eq!(rows_of(&[3, 9], None, None), [Line(3), Gap(5), Line(9)]);
    }
}
