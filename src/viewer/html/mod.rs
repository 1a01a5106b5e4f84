//! `report --format html`: the whole profile as one self-contained, interactive page
//! (docs/html-report.md).
//!
//! Job: encode what the page shows (the calling-context tree with every metric, the
//! threads, the lock table, the profile's header) as one compact JSON document, and write
//! it into the page template with the page's own style sheet and script (`page.html`,
//! `page.css`, `page.js`, compiled in). The page builds the top-down, bottom-up and flat
//! trees and the flame graphs from the top-down tree alone, as [`crate::attribution::cct`]
//! and [`crate::attribution::callers`] build them from the call paths.
//!
//! The tree is written in preorder as parallel arrays: per node its depth (roots: 0), its
//! function (`2 * index + inlined`, into interned names), its hottest line (by the report's
//! metric, into interned place labels); the nodes where a call path ends (delta-coded); and
//! per metric the non-zero exclusive values as (delta of node index, value) pairs. A node's
//! inclusive value is its exclusive value plus its children's inclusive values, so the page
//! adds them up itself.
//!
//! Invariants: the page needs nothing outside itself (no network, no other file); every
//! text from the profile reaches the page inside the JSON data block, where `<` is written
//! `\u003c`, so no name can end the script element, and the page inserts text with
//! `textContent` only; the data holds every node of the tree (no pruning).
//!
//! Not async-signal-safe (allocates, does I/O).

use super::export::Export;
use super::locks::{self as lock_view, LockOptions, SortBy};
use super::text::location;
use super::{command_line, describe_contention, describe_held, describe_lost, describe_sources};
use crate::attribution::cct::{self, NodeId, Tree};
use crate::attribution::locks::LockTable;
use crate::attribution::{Analysis, FunctionId};
use serde::Serialize;
use std::collections::HashMap;
use std::io::{self, Write};

/// The page, with the markers [`write_page`] fills in.
const PAGE: &str = include_str!("page.html");
const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

/// Name and version of the data document the page reads.
const SCHEMA: &str = "blameprof-html-data";
const VERSION: u32 = 1;

/// Writes the export as one HTML page.
pub fn write(export: &Export, out: &mut dyn Write) -> io::Result<()> {
    let tree = cct::top_down(&export.analysis);
    let data = PageData::new(&export.analysis, &tree, &export.locks, export.metric)?;
    write_page(&data, out)
}

/// What fills a marker of the template.
enum Fill<'a> {
    Text(&'a str),
    Data(&'a PageData<'a>),
}

/// The template with its markers filled: the style sheet, the data, the script.
fn write_page(data: &PageData, out: &mut dyn Write) -> io::Result<()> {
    let mut rest = PAGE;
    for (marker, fill) in [
        ("{{STYLE}}", Fill::Text(STYLE)),
        ("{{DATA}}", Fill::Data(data)),
        ("{{SCRIPT}}", Fill::Text(SCRIPT)),
    ] {
        let (before, after) = rest
            .split_once(marker)
            .ok_or_else(|| io::Error::other(format!("the page template lacks {marker}")))?;
        out.write_all(before.as_bytes())?;
        match fill {
            Fill::Text(text) => out.write_all(text.as_bytes())?,
            Fill::Data(data) => serde_json::to_writer(ScriptSafe(&mut *out), data)?,
        }
        rest = after;
    }
    out.write_all(rest.as_bytes())
}

/// Writes JSON text with every `<` as `\u003c`: JSON has `<` only inside strings, where the
/// escape means the same character, and without `<` the text can neither end the script
/// element it is in (`</script>`) nor open a comment (`<!--`).
struct ScriptSafe<'a>(&'a mut dyn Write);

impl Write for ScriptSafe<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for (i, part) in buf.split(|&b| b == b'<').enumerate() {
            if i > 0 {
                self.0.write_all(b"\\u003c")?;
            }
            self.0.write_all(part)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// Everything the page shows.
#[derive(Serialize)]
struct PageData<'a> {
    schema: &'static str,
    version: u32,
    title: String,
    /// The profile's header, as (label, text) lines.
    summary: Vec<(&'static str, String)>,
    metrics: Vec<MetricInfo<'a>>,
    /// Index of the metric the trees are first sorted by (`--metric`), and of the one the
    /// places are the hottest lines of.
    metric: usize,
    totals: &'a [u64],
    /// Work + idleness, when the profile has both metrics.
    effort: Option<u64>,
    /// Interned function names, and per function its module (into `modules`).
    functions: Vec<&'a str>,
    function_modules: Vec<u32>,
    modules: Vec<&'a str>,
    /// Interned place labels (`file.c:12`, `[module]`); the first is "".
    places: Vec<String>,
    tree: TreeData,
    threads: Vec<ThreadInfo<'a>>,
    /// The lock view's JSON document (schema `blameprof-locks`, docs/report-json.md).
    locks: serde_json::Value,
}

#[derive(Serialize)]
struct MetricInfo<'a> {
    name: &'a str,
    unit: &'a str,
    description: &'a str,
    /// The metric it is derived from (`idleness` for `idleness.mutex`), if any.
    base: Option<usize>,
}

#[derive(Serialize)]
struct ThreadInfo<'a> {
    pid: u32,
    tid: u32,
    name: &'a str,
    start_routine: Option<&'a str>,
    main: bool,
    totals: &'a [u64],
}

/// The top-down tree in preorder (see the module doc).
#[derive(Serialize, Default)]
struct TreeData {
    depth: Vec<u32>,
    function: Vec<u32>,
    place: Vec<u32>,
    /// Preorder indices of the nodes where a call path ends, each as the difference to the
    /// previous one (the first: to 0).
    ends: Vec<u32>,
    /// Per metric: (preorder index difference, exclusive value) pairs, flattened.
    exclusive: Vec<Vec<u64>>,
}

impl<'a> PageData<'a> {
    fn new(
        analysis: &'a Analysis,
        tree: &Tree,
        locks: &LockTable,
        metric: usize,
    ) -> io::Result<PageData<'a>> {
        let defs = analysis.metrics.defs();
        let mut page = PageData {
            schema: SCHEMA,
            version: VERSION,
            title: command_line(analysis),
            summary: summary(analysis),
            metrics: defs
                .iter()
                .enumerate()
                .map(|(id, d)| MetricInfo {
                    name: &d.name,
                    unit: &d.unit,
                    description: &d.description,
                    base: analysis.metrics.derived_from(id).map(|(base, _)| base),
                })
                .collect(),
            metric,
            totals: &analysis.totals,
            effort: analysis.effort().ok(),
            functions: Vec::new(),
            function_modules: Vec::new(),
            modules: Vec::new(),
            places: vec![String::new()],
            tree: TreeData::default(),
            threads: analysis
                .threads
                .iter()
                .map(|t| ThreadInfo {
                    pid: t.pid,
                    tid: t.tid,
                    name: &t.name,
                    start_routine: t.start_routine.as_deref(),
                    main: t.is_main,
                    totals: &t.totals,
                })
                .collect(),
            locks: locks_document(locks)?,
        };
        page.encode_tree(analysis, tree, metric);
        Ok(page)
    }

    /// Fills `tree`, `functions`, `modules` and `places` from the top-down tree.
    fn encode_tree(&mut self, analysis: &'a Analysis, tree: &Tree, metric: usize) {
        let metric_count = analysis.metrics.len();
        let ends = path_ends(analysis, tree);
        let mut functions: HashMap<FunctionId, u32> = HashMap::new();
        let mut modules: HashMap<&str, u32> = HashMap::new();
        let mut places: HashMap<String, u32> = HashMap::new();
        let t = &mut self.tree;
        t.exclusive = vec![Vec::new(); metric_count];
        let mut last_nonzero = vec![0u32; metric_count];
        let mut last_end = 0u32;
        for (index, (id, depth)) in (0u32..).zip(preorder(tree)) {
            let node = tree.node(id);
            let function = analysis.names.function(node.function);
            let f = *functions.entry(node.function).or_insert_with(|| {
                let module = *modules.entry(&function.module).or_insert_with(|| {
                    self.modules.push(&function.module);
                    self.modules.len() as u32 - 1
                });
                self.functions.push(&function.name);
                self.function_modules.push(module);
                self.functions.len() as u32 - 1
            });
            let line = tree.hottest_line(id, metric);
            let label = location(analysis, line, &function.module).trim().to_owned();
            let place = match places.get(&label) {
                Some(&p) => p,
                None if label.is_empty() => 0,
                None => {
                    self.places.push(label.clone());
                    let p = self.places.len() as u32 - 1;
                    places.insert(label, p);
                    p
                }
            };
            t.depth.push(depth);
            t.function.push(2 * f + u32::from(node.inlined));
            t.place.push(place);
            if ends[id as usize] {
                t.ends.push(index - last_end);
                last_end = index;
            }
            for (m, &value) in tree.exclusive(id).iter().enumerate() {
                if value > 0 {
                    t.exclusive[m].extend([u64::from(index - last_nonzero[m]), value]);
                    last_nonzero[m] = index;
                }
            }
        }
    }
}

/// The nodes of `tree` in preorder (children in the tree's order), with their depths
/// (roots: 0).
fn preorder(tree: &Tree) -> Vec<(NodeId, u32)> {
    let mut order = Vec::with_capacity(tree.len());
    let mut stack: Vec<(NodeId, u32)> = tree.roots().iter().rev().map(|&r| (r, 0)).collect();
    while let Some((id, depth)) = stack.pop() {
        order.push((id, depth));
        stack.extend(tree.children(id).iter().rev().map(|&c| (c, depth + 1)));
    }
    order
}

/// Per node of the top-down `tree`: whether some call path of `analysis` ends there (the
/// nodes with exclusive cost, and those whose paths' values are all 0).
fn path_ends(analysis: &Analysis, tree: &Tree) -> Vec<bool> {
    const ROOT: NodeId = NodeId::MAX;
    let key = |parent: NodeId, id: NodeId| {
        let node = tree.node(id);
        ((parent, node.function, node.inlined), id)
    };
    let mut index: HashMap<(NodeId, FunctionId, bool), NodeId> =
        tree.roots().iter().map(|&r| key(ROOT, r)).collect();
    for parent in 0..tree.len() as NodeId {
        index.extend(tree.children(parent).iter().map(|&c| key(parent, c)));
    }
    let mut ends = vec![false; tree.len()];
    for path in &analysis.paths {
        let end = path.locs.iter().try_fold(ROOT, |at, loc| {
            index.get(&(at, loc.function, loc.inlined)).copied()
        });
        if let Some(end) = end.and_then(|end| ends.get_mut(end as usize)) {
            *end = true;
        }
    }
    ends
}

/// The lock table as the lock view's JSON document (every row, sorted by blame).
fn locks_document(table: &LockTable) -> io::Result<serde_json::Value> {
    let options = LockOptions {
        sort: SortBy::Blame,
        min_percent: 0.0,
        lock: None,
        pairs_per_lock: usize::MAX,
    };
    let mut json = Vec::new();
    lock_view::write_json(table, &options, &mut json)?;
    serde_json::from_slice(&json).map_err(io::Error::other)
}

/// The profile's header, as the text report's first lines tell it: the profile, its
/// processes and selection, samples, sources and how waits were measured.
fn summary(a: &Analysis) -> Vec<(&'static str, String)> {
    let mut lines = vec![("profile", a.profile_path.display().to_string())];
    lines.extend(
        a.damage
            .iter()
            .map(|d| ("damaged", format!("{d} (showing the intact part)"))),
    );
    for p in &a.processes {
        let end = match p.ended_cleanly {
            true => "",
            false => " [no end record: killed, crashed or still running]",
        };
        lines.push((
            "process",
            format!(
                "pid {} (exec {}): {}{end}",
                p.pid,
                p.exec_generation,
                p.argv.join(" ")
            ),
        ));
    }
    let filter = [
        a.filter.pid.map(|p| format!("pid {p}")),
        a.filter.tid.map(|t| format!("thread {t}")),
    ];
    let filter: Vec<String> = filter.into_iter().flatten().collect();
    if !filter.is_empty() {
        lines.push(("filter", filter.join(", ")));
    }
    lines.push(("threads", a.threads.len().to_string()));
    lines.push((
        "samples",
        format!("{}, lost {}", a.samples, describe_lost(a)),
    ));
    lines.push(("source", describe_sources(a)));
    if let Some(contention) = describe_contention(a) {
        lines.push(("contended", format!("{contention} acquisitions")));
    }
    if let Some(held) = describe_held(a) {
        lines.push(("held", held));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::testutil::analysis_of;

    /// The data document of the page of `analysis` (no locks), as the page reads it.
    fn page_data(analysis: &Analysis) -> serde_json::Value {
        let tree = cct::top_down(analysis);
        let data = PageData::new(analysis, &tree, &LockTable::default(), 0).unwrap();
        let mut page = Vec::new();
        write_page(&data, &mut page).unwrap();
        let page = String::from_utf8(page).unwrap();
        let open = r#"<script type="application/json" id="blameprof-data">"#;
        let start = page.find(open).unwrap() + open.len();
        let end = start + page[start..].find("</script>").unwrap();
        serde_json::from_str(&page[start..end]).unwrap()
    }

    fn numbers(v: &serde_json::Value) -> Vec<u64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap())
            .collect()
    }

    /// Per preorder node: its path of function names, its exclusive and inclusive value of
    /// metric 0 (added up the tree as the page does) and whether a path ends there.
    fn decode(d: &serde_json::Value) -> Vec<(String, u64, u64, bool)> {
        let (depths, functions) = (
            numbers(&d["tree"]["depth"]),
            numbers(&d["tree"]["function"]),
        );
        let mut nodes: Vec<(String, u64, u64, bool)> = Vec::new();
        let mut path: Vec<usize> = Vec::new();
        let mut parents = Vec::new();
        for (i, (&depth, &f)) in depths.iter().zip(&functions).enumerate() {
            path.truncate(depth as usize);
            parents.push(path.last().copied());
            let name = d["functions"][(f / 2) as usize].as_str().unwrap();
            let prefix = path
                .last()
                .map_or(String::new(), |&p| nodes[p].0.clone() + ";");
            nodes.push((prefix + name, 0, 0, false));
            path.push(i);
        }
        let mut at = 0;
        for delta in numbers(&d["tree"]["ends"]) {
            at += delta as usize;
            nodes[at].3 = true;
        }
        let pairs = numbers(&d["tree"]["exclusive"][0]);
        let mut at = 0;
        for pair in pairs.chunks(2) {
            at += pair[0] as usize;
            nodes[at].1 = pair[1];
        }
        for i in (0..nodes.len()).rev() {
            nodes[i].2 += nodes[i].1;
            if let Some(p) = parents[i] {
                nodes[p].2 += nodes[i].2;
            }
        }
        nodes
    }

    #[test]
    fn the_tree_is_every_node_in_preorder_with_its_costs_and_path_ends() {
        // main -> f -> g 7; main -> f 0 (a path that ends at f with no cost); main -> h 3.
        let a = analysis_of(&[
            (&[0x30, 0x20, 0x10], 7),
            (&[0x30, 0x20], 0),
            (&[0x30, 0x40], 3),
        ]);
        let d = page_data(&a);
        assert_eq!(d["schema"], SCHEMA);
        let mut nodes = decode(&d);
        assert_eq!(nodes.len(), cct::top_down(&a).len());
        nodes.sort();
        let want = [
            ("main", 0, 10, false),
            ("main;f", 0, 7, true),
            ("main;f;g", 7, 7, true),
            ("main;h", 3, 3, true),
        ];
        let want: Vec<(String, u64, u64, bool)> = want
            .iter()
            .map(|&(p, e, i, end)| (p.to_owned(), e, i, end))
            .collect();
        assert_eq!(nodes, want);
        assert_eq!(d["totals"], serde_json::json!([10]));
    }

    #[test]
    fn text_in_the_data_block_cannot_end_the_script_element() {
        let hostile = "</script><script>alert(1)</script><!-- std::map<int, T&> -->";
        let mut out = Vec::new();
        serde_json::to_writer(
            ScriptSafe(&mut out),
            &serde_json::json!({ "name": hostile }),
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains('<'), "{text}");
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back["name"], hostile);
    }

    #[test]
    fn the_page_is_one_file_whose_assets_cannot_end_their_elements() {
        let markers: Vec<usize> = ["{{STYLE}}", "{{DATA}}", "{{SCRIPT}}"]
            .iter()
            .map(|m| {
                PAGE.find(m)
                    .unwrap_or_else(|| panic!("no {m} in page.html"))
            })
            .collect();
        assert!(markers.windows(2).all(|w| w[0] < w[1]), "markers in order");
        assert!(!SCRIPT.contains("</script") && !SCRIPT.contains("<!--"));
        assert!(!STYLE.contains("</style"));
        // Offline: nothing is fetched from anywhere.
        for asset in [PAGE, STYLE, SCRIPT] {
            for fetch in [
                "http:",
                "https:",
                "src=",
                "@import",
                "url(",
                "fetch(",
                "XMLHttpRequest",
            ] {
                assert!(!asset.contains(fetch), "{fetch} in the page");
            }
        }
    }
}
