//! `report --source FUNCTION`: one function's source, each line annotated with its costs,
//! as `perf annotate --stdio` (source mode), pprof's `list` and HPCToolkit's source pane
//! show it (docs/source-view.md).
//!
//! Job: find the function by name ([`find_function`]), add up the costs of its source lines
//! from the analysis's call paths ([`line_costs`]), read the files its debug information
//! names, and print the lines around those with cost, with a self and a total column per
//! metric shown and the hot lines marked, or the same data as JSON.
//!
//! Invariants:
//! - a sample is charged at the innermost occurrence of the function on its path (where the
//!   flat view charges it), to that occurrence's line: as total cost always, as self cost
//!   when the function is the path's leaf; so the function's totals are the flat view's,
//!   and the totals of its own lines plus the cost at no known line are its inclusive cost;
//! - the lines of callees inlined into that occurrence are charged as well (self cost when
//!   the callee is the leaf); every (file, line) at most once per sample;
//! - a source line is shown as the file at the path the debug information recorded (or next
//!   to the module) reads now, tabs expanded; the text output needs the function's own file.
//!
//! Not async-signal-safe (allocates, does I/O).

use super::json::Values;
use super::units::format_value;
use crate::attribution::metrics::{MetricTable, BLAME, IDLENESS, WORK};
use crate::attribution::symbolize::module_name;
use crate::attribution::{Analysis, FileId, FunctionId};
use anyhow::bail;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::{self, Write};
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

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
/// Tab stops of source text.
const TAB_STOP: usize = 8;
/// Matching names listed when a name is ambiguous.
const LISTED_MATCHES: usize = 5;
/// Width of a value column ("123.45 ms").
const VALUE_WIDTH: usize = 10;
/// Width of the line-number column.
const LINE_WIDTH: usize = 6;

/// Schema name and version of the JSON document.
pub const SCHEMA: &str = "blameprof-source";
pub const VERSION: u32 = 1;

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

/// The function `query` names, and its ids (one per module it is in), among the functions
/// of the analysis's paths (see [`match_name`]). No name, or several, is an error naming
/// the fix.
fn find_function(analysis: &Analysis, query: &str) -> anyhow::Result<(String, Vec<FunctionId>)> {
    let mut by_name: BTreeMap<&str, Vec<FunctionId>> = BTreeMap::new();
    let mut seen: HashSet<FunctionId> = HashSet::new();
    for loc in analysis.paths.iter().flat_map(|p| &p.locs) {
        if seen.insert(loc.function) {
            let name = analysis.names.function(loc.function).name.as_str();
            by_name.entry(name).or_default().push(loc.function);
        }
    }
    if query.trim().is_empty() {
        bail!("--source needs a function name: see the names with 'blameprof report --view flat'");
    }
    let names: Vec<&str> = by_name.keys().copied().collect();
    match match_name(&names, query) {
        Ok(name) => Ok((name.to_owned(), by_name[name].clone())),
        Err(many) if !many.is_empty() => bail!("{}", ambiguous(query, &many)),
        Err(_) => {
            let scope = match (analysis.filter.pid, analysis.filter.tid) {
                (None, None) => "this profile",
                _ => "the selected samples",
            };
            bail!(
                "no function named or containing '{query}' in {scope}: see the names with \
                 'blameprof report --view flat'"
            )
        }
    }
}

/// The error for a `query` that matches all of `many`: the first few, and the fix.
fn ambiguous(query: &str, many: &[&str]) -> String {
    let listed = many.len().min(LISTED_MATCHES);
    let more = match many.len() - listed {
        0 => String::new(),
        n => format!(", and {n} more"),
    };
    format!(
        "'{query}' matches {} functions ({}{more}): pass a more precise name to --source",
        many.len(),
        many[..listed].join(", ")
    )
}

/// The one name of `names` that `query` names: `query` itself; else a name that is `query`
/// with a parameter list, or a qualified name ending in `::query` (with or without one);
/// else a name containing `query`. At the first of these levels that has any: `Err` with
/// all of them when there are several; `Err` with none when no level has any.
fn match_name<'a>(names: &[&'a str], query: &str) -> Result<&'a str, Vec<&'a str>> {
    let exact = |name: &str| name == query;
    let qualified = |name: &str| {
        let bare = name.find('(').map_or(name, |paren| &name[..paren]);
        bare == query || bare.strip_suffix(query).is_some_and(|q| q.ends_with("::"))
    };
    let within = |name: &str| name.contains(query);
    let levels: [&dyn Fn(&str) -> bool; 3] = [&exact, &qualified, &within];
    for matches in levels {
        let found: Vec<&str> = names.iter().copied().filter(|n| matches(n)).collect();
        match found.as_slice() {
            [] => continue,
            [name] => return Ok(name),
            _ => return Err(found),
        }
    }
    Err(Vec::new())
}

/// Self and total cost per merged metric.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cost {
    /// Where the function (for the line of an inlined callee: the callee) was the leaf.
    own: Vec<u64>,
    total: Vec<u64>,
}

impl Cost {
    fn zero(metrics: usize) -> Cost {
        Cost {
            own: vec![0; metrics],
            total: vec![0; metrics],
        }
    }

    /// Adds a sample's `values`: to the total, and to the self cost when `leaf`.
    fn charge(&mut self, values: &[u64], leaf: bool) {
        add(&mut self.total, values);
        if leaf {
            add(&mut self.own, values);
        }
    }
}

fn add(sums: &mut [u64], values: &[u64]) {
    for (s, v) in sums.iter_mut().zip(values) {
        *s += v;
    }
}

/// The cost of one source line.
#[derive(Debug, Clone)]
struct LineCost {
    cost: Cost,
    /// A line of the function itself (else only of callees inlined into it).
    own_line: bool,
    /// The functions whose line it is: the function, callees inlined into it.
    functions: Vec<FunctionId>,
}

/// The costs of a function and of its source lines.
#[derive(Debug, Clone)]
struct Costs {
    /// The function's: total is its inclusive cost, self its exclusive (the flat view's).
    function: Cost,
    /// By (file, line): its own lines and those of the callees inlined into it.
    lines: BTreeMap<(FileId, u32), LineCost>,
    /// At occurrences of the function without a known line.
    no_line: Cost,
}

/// The costs of the function `ids` name (one per module) and of its lines: every path is
/// charged at the innermost occurrence of the function, and at the lines of the callees
/// inlined there.
fn line_costs(analysis: &Analysis, ids: &[FunctionId]) -> Costs {
    let m = analysis.metrics.len();
    let mut costs = Costs {
        function: Cost::zero(m),
        lines: BTreeMap::new(),
        no_line: Cost::zero(m),
    };
    let mut charged: Vec<(FileId, u32)> = Vec::new();
    for path in &analysis.paths {
        let Some(at) = path.locs.iter().rposition(|l| ids.contains(&l.function)) else {
            continue;
        };
        let leaf = path.locs.len() - 1;
        costs.function.charge(&path.values, at == leaf);
        let inlined = path.locs[at + 1..].iter().take_while(|l| l.inlined).count();
        charged.clear();
        for (i, loc) in path.locs.iter().enumerate().take(at + inlined + 1).skip(at) {
            match (loc.line.file, loc.line.line) {
                (Some(file), Some(line)) if line > 0 => {
                    if charged.contains(&(file, line)) {
                        continue;
                    }
                    charged.push((file, line));
                    let entry = costs.lines.entry((file, line)).or_insert(LineCost {
                        cost: Cost::zero(m),
                        own_line: false,
                        functions: Vec::new(),
                    });
                    entry.cost.charge(&path.values, i == leaf);
                    entry.own_line |= i == at;
                    if !entry.functions.contains(&loc.function) {
                        entry.functions.push(loc.function);
                    }
                }
                _ if i == at => costs.no_line.charge(&path.values, i == leaf),
                _ => {}
            }
        }
    }
    costs
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

/// A source file as found (or not) for the listing.
#[derive(Debug, Default)]
struct SourceFile {
    /// Where its text was read from; `None`: nowhere.
    read_from: Option<PathBuf>,
    /// Where it was looked for, in order.
    looked_in: Vec<PathBuf>,
    /// Why the first path could not be read, when it could not.
    error: Option<String>,
    /// Its lines, tabs expanded (empty when not found).
    lines: Vec<String>,
    /// It was modified after the module: its lines may not match the code any more.
    newer_than_module: bool,
}

/// Reads the source file the debug information recorded as `recorded`: at that path when
/// it is absolute, then next to the module files `modules` (the recorded path under a
/// module's directory, and its file name there), then (a relative path) under the current
/// directory.
fn read_source(recorded: &str, modules: &[&str]) -> SourceFile {
    let path = Path::new(recorded);
    let mut looked_in: Vec<PathBuf> = Vec::new();
    let mut candidate = |p: PathBuf| {
        if !looked_in.contains(&p) {
            looked_in.push(p);
        }
    };
    if path.is_absolute() {
        candidate(path.to_path_buf());
    }
    let dirs = modules
        .iter()
        .filter_map(|m| Path::new(m).parent())
        .filter(|d| d.is_absolute());
    for dir in dirs {
        if path.is_relative() {
            candidate(dir.join(path));
        }
        if let Some(name) = path.file_name() {
            candidate(dir.join(name));
        }
    }
    if path.is_relative() {
        candidate(path.to_path_buf());
    }
    let mut file = SourceFile::default();
    for p in &looked_in {
        match std::fs::read(p) {
            Ok(bytes) => {
                file.lines = String::from_utf8_lossy(&bytes)
                    .lines()
                    .map(expand_tabs)
                    .collect();
                file.newer_than_module = newer_than_any(p, modules);
                file.read_from = Some(p.clone());
                break;
            }
            Err(e) if file.error.is_none() => {
                file.error = Some(match e.kind() {
                    io::ErrorKind::NotFound => "not found".to_owned(),
                    _ => e.to_string(),
                })
            }
            Err(_) => {}
        }
    }
    file.looked_in = looked_in;
    file
}

/// Whether `source` was modified after every one of the `modules` files that exist (and
/// there is one).
fn newer_than_any(source: &Path, modules: &[&str]) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let Some(source) = modified(source) else {
        return false;
    };
    let built: Vec<_> = modules
        .iter()
        .filter_map(|m| modified(Path::new(m)))
        .collect();
    !built.is_empty() && built.iter().all(|&b| source > b)
}

/// `line` with tabs expanded to [`TAB_STOP`] columns and other control characters shown as
/// spaces, so that the columns of the listing stay aligned.
fn expand_tabs(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut column = 0;
    for c in line.chars() {
        match c {
            '\t' => {
                let n = TAB_STOP - column % TAB_STOP;
                out.extend(std::iter::repeat(' ').take(n));
                column += n;
            }
            c if c.is_control() => {
                out.push(' ');
                column += 1;
            }
            c => {
                out.push(c);
                column += 1;
            }
        }
    }
    out
}

/// The first and last lines of `file` at which the code of the function `function` of the
/// module at `module` is (its own lines, not those of callees inlined into it), from the
/// module's symbol table and DWARF line table. `None` when the module, the symbol (a
/// function inlined everywhere has none) or the debug information is missing.
fn body_lines(module: &str, function: &str, file: &str) -> Option<RangeInclusive<u32>> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let opened = std::fs::File::open(module).ok()?;
    // SAFETY: a read-only private mapping, dropped before returning; a file truncated
    // meanwhile by another process could fault, as for any mapped debug file.
    let map = unsafe { memmap2::Mmap::map(&opened) }.ok()?;
    let elf = object::File::parse(&*map).ok()?;
    let named = |raw: &str| {
        let name = addr2line::demangle_auto(raw.into(), None);
        // GCC's clones: `f.constprop.0`, `f.part.0`, `f(int) [clone .isra.0]`.
        name.strip_prefix(function).is_some_and(|rest| {
            rest.is_empty() || rest.starts_with('.') || rest.starts_with(" [clone .")
        })
    };
    let ranges: Vec<(u64, u64)> = elf
        .symbols()
        .chain(elf.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
        .filter(|s| s.name().is_ok_and(named))
        .map(|s| (s.address(), s.address() + s.size()))
        .collect();
    if ranges.is_empty() {
        return None;
    }
    let dwarf = addr2line::Loader::new(module).ok()?;
    let mut lines: Option<(u32, u32)> = None;
    for (start, end) in ranges {
        let Ok(rows) = dwarf.find_location_range(start, end) else {
            continue;
        };
        for (address, _, _) in rows {
            if let Some(line) = own_line(&dwarf, address, file) {
                lines = Some(lines.map_or((line, line), |(a, b)| (a.min(line), b.max(line))));
            }
        }
    }
    lines.map(|(first, last)| first..=last)
}

/// The line of `file` at which the outermost function at `address` is (the call site of
/// the callees inlined there); `None` when it is in another file or unknown.
fn own_line(dwarf: &addr2line::Loader, address: u64, file: &str) -> Option<u32> {
    let mut frames = dwarf.find_frames(address).ok()?;
    let mut outermost = None;
    while let Ok(Some(frame)) = frames.next() {
        outermost = frame.location;
    }
    let location = outermost?;
    (location.file? == file)
        .then_some(location.line?)
        .filter(|&l| l > 0)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::callers::flat;
    use crate::attribution::testutil::{analysis_of, find_path, set_line};
    use crate::attribution::SourceLine;

    /// The id of the function called `name` in `a`.
    fn id(a: &Analysis, name: &str) -> FunctionId {
        find_function(a, name).expect("function").1[0]
    }

    /// The file of the first location of function `name` that has one.
    fn file_of(a: &Analysis, name: &str) -> FileId {
        let f = id(a, name);
        let mut locs = a.paths.iter().flat_map(|p| &p.locs);
        locs.find_map(|l| l.line.file.filter(|_| l.function == f))
            .expect("a file")
    }

    /// The (self, total) work of line `line` of `file`.
    fn at(c: &Costs, file: FileId, line: u32) -> (u64, u64) {
        c.lines
            .get(&(file, line))
            .map_or((0, 0), |lc| (lc.cost.own[0], lc.cost.total[0]))
    }

    /// Puts the locations of `function` in the paths worth `value` at line `line`.
    fn move_to(a: &mut Analysis, function: FunctionId, value: u64, line: u32) {
        for path in a.paths.iter_mut().filter(|p| p.values[0] == value) {
            for loc in path.locs.iter_mut().filter(|l| l.function == function) {
                loc.line.line = Some(line);
            }
        }
    }

    #[test]
    fn lines_get_self_where_the_function_is_the_leaf_and_total_at_call_sites() {
        // main -> f@10 -> g: 6; main -> f@12 (leaf): 4; main -> h -> f@12 -> g: 1;
        // main -> g: 5.
        let mut a = analysis_of(&[
            (&[0x30, 0x20, 0x10], 6),
            (&[0x30, 0x20], 4),
            (&[0x30, 0x40, 0x20, 0x10], 1),
            (&[0x30, 0x10], 5),
        ]);
        set_line(&mut a, "f", "f.c", 10);
        let f = id(&a, "f");
        move_to(&mut a, f, 4, 12);
        move_to(&mut a, f, 1, 12);
        let c = line_costs(&a, &[f]);
        let file = file_of(&a, "f");
        assert_eq!(at(&c, file, 10), (0, 6));
        assert_eq!(at(&c, file, 12), (4, 5));
        let t = flat(&a);
        let node = find_path(&a, &t, &["f"]);
        assert_eq!(c.function.total, t.inclusive(node));
        assert_eq!(c.function.own, t.exclusive(node));
        let lines: u64 = c.lines.values().map(|lc| lc.cost.total[0]).sum();
        assert_eq!(lines + c.no_line.total[0], c.function.total[0]);
    }

    #[test]
    fn recursion_charges_the_innermost_occurrence_once() {
        // main -> f@10 -> f@20 -> f@20 -> g: 9.
        let mut a = analysis_of(&[(&[0x30, 0x20, 0x20, 0x20, 0x10], 9)]);
        set_line(&mut a, "f", "f.c", 20);
        a.paths[0].locs[1].line.line = Some(10);
        let c = line_costs(&a, &[id(&a, "f")]);
        let file = file_of(&a, "f");
        assert_eq!(at(&c, file, 20), (0, 9));
        assert_eq!(at(&c, file, 10), (0, 0));
        assert_eq!(c.function.total, [9]);
    }

    #[test]
    fn inlined_callees_lines_are_charged_and_frames_without_lines_are_counted_apart() {
        // main -> f@10 -> g inlined into f (h.h:5, leaf): 7; main -> f without a line: 2.
        let mut a = analysis_of(&[(&[0x30, 0x20, 0x10], 7), (&[0x30, 0x20], 2)]);
        set_line(&mut a, "g", "h.h", 5);
        set_line(&mut a, "f", "f.c", 10);
        let (f, g) = (id(&a, "f"), id(&a, "g"));
        let (f_c, h_h) = (file_of(&a, "f"), file_of(&a, "g"));
        for path in &mut a.paths {
            for loc in &mut path.locs {
                loc.inlined = loc.function == g;
            }
            if path.locs.len() == 2 {
                path.locs[1].line = SourceLine::default();
            }
        }
        let c = line_costs(&a, &[f]);
        let inlined = &c.lines[&(h_h, 5)];
        assert_eq!((inlined.cost.own[0], inlined.cost.total[0]), (7, 7));
        assert!(!inlined.own_line && inlined.functions == [g]);
        assert_eq!(at(&c, f_c, 10), (0, 7));
        assert!(c.lines[&(f_c, 10)].own_line);
        assert_eq!((c.no_line.own[0], c.no_line.total[0]), (2, 2));
        assert_eq!((c.function.own[0], c.function.total[0]), (2, 9));
    }

    #[test]
    fn names_are_found_exactly_then_qualified_then_by_a_unique_part() {
        let names = [
            "insert",
            "lookup",
            "main",
            "ns::insert_all(int)",
            "ns::Map::insert_all",
        ];
        assert_eq!(match_name(&names, "insert"), Ok("insert"));
        assert_eq!(match_name(&names, "ook"), Ok("lookup"));
        assert_eq!(
            match_name(&names, "Map::insert_all"),
            Ok("ns::Map::insert_all")
        );
        assert_eq!(
            match_name(&names, "insert_all"),
            Err(vec!["ns::insert_all(int)", "ns::Map::insert_all"])
        );
        assert_eq!(
            match_name(&names[..4], "insert_all"),
            Ok("ns::insert_all(int)")
        );
        assert_eq!(
            match_name(&names, "in"),
            Err(vec![
                "insert",
                "main",
                "ns::insert_all(int)",
                "ns::Map::insert_all"
            ])
        );
        assert_eq!(match_name(&names, "zzz"), Err(Vec::new()));
    }

    #[test]
    fn unknown_and_ambiguous_names_are_errors_naming_the_fix() {
        let a = analysis_of(&[(&[0x30, 0x60, 0x10], 1), (&[0x30, 0x70], 1)]);
        let two = find_function(&a, "n").unwrap_err().to_string();
        assert_eq!(
            two,
            "'n' matches 2 functions (insert, main): pass a more precise name to --source"
        );
        let many = ["a1", "a2", "a3", "a4", "a5", "a6", "a7"];
        assert_eq!(
            ambiguous("a", &many),
            "'a' matches 7 functions (a1, a2, a3, a4, a5, and 2 more): pass a more precise \
             name to --source"
        );
        let empty = find_function(&a, " ").unwrap_err().to_string();
        assert!(
            empty.starts_with("--source needs a function name"),
            "{empty}"
        );
        let none = find_function(&a, "zzz").unwrap_err().to_string();
        assert!(
            none.contains("'zzz'") && none.contains("--view flat"),
            "{none}"
        );
    }

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

    #[test]
    fn tabs_expand_to_stops_of_eight() {
        assert_eq!(expand_tabs("\tx"), "        x");
        assert_eq!(expand_tabs("ab\tc\td"), "ab      c       d");
        assert_eq!(expand_tabs("a\u{c}b"), "a b");
    }
}
