//! The costs of one function's source lines, for `report --source` (the viewer's
//! `source` module shows them): the function found by name among the analysis's paths
//! ([`find_function`]), and its self and total cost per metric at each (file, line) of its
//! own and of the callees inlined into it ([`line_costs`]).
//!
//! Invariants:
//! - a sample is charged at the innermost occurrence of the function on its path (where the
//!   flat view charges it), to that occurrence's line: as total cost always, as self cost
//!   when the function is the path's leaf; so the function's totals are the flat view's,
//!   and the totals of its own lines plus the cost at no known line are its inclusive cost;
//! - the lines of callees inlined into that occurrence are charged as well (self cost when
//!   the callee is the leaf); every (file, line) at most once per sample.
//!
//! Not async-signal-safe (allocates).

use super::{Analysis, FileId, FunctionId};
use anyhow::bail;
use std::collections::{BTreeMap, HashSet};

/// Matching names listed when a name is ambiguous.
const LISTED_MATCHES: usize = 5;

/// The function `query` names, and its ids (one per module it is in), among the functions
/// of the analysis's paths (see [`match_name`]). No name, or several, is an error naming
/// the fix.
pub(crate) fn find_function(
    analysis: &Analysis,
    query: &str,
) -> anyhow::Result<(String, Vec<FunctionId>)> {
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
pub(crate) struct Cost {
    /// Where the function (for the line of an inlined callee: the callee) was the leaf.
    pub(crate) own: Vec<u64>,
    pub(crate) total: Vec<u64>,
}

impl Cost {
    pub(crate) fn zero(metrics: usize) -> Cost {
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
pub(crate) struct LineCost {
    pub(crate) cost: Cost,
    /// A line of the function itself (else only of callees inlined into it).
    pub(crate) own_line: bool,
    /// The functions whose line it is: the function, callees inlined into it.
    pub(crate) functions: Vec<FunctionId>,
}

/// The costs of a function and of its source lines.
#[derive(Debug, Clone)]
pub(crate) struct Costs {
    /// The function's: total is its inclusive cost, self its exclusive (the flat view's).
    pub(crate) function: Cost,
    /// By (file, line): its own lines and those of the callees inlined into it.
    pub(crate) lines: BTreeMap<(FileId, u32), LineCost>,
    /// At occurrences of the function without a known line.
    pub(crate) no_line: Cost,
}

/// The costs of the function `ids` name (one per module) and of its lines: every path is
/// charged at the innermost occurrence of the function, and at the lines of the callees
/// inlined there.
pub(crate) fn line_costs(analysis: &Analysis, ids: &[FunctionId]) -> Costs {
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
}
