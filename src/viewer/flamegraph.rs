//! Flamegraphs: the calling-context tree as folded stacks, drawn by inferno as an SVG.
//!
//! Job: one folded line `root;...;leaf value` per tree node with exclusive cost in the
//! chosen metric; inlined frames carry inferno's `_[i]` annotation (drawn without it).
//!
//! Invariants: the values of the folded lines add up to the metric's total over the tree;
//! frame names never contain `;` (replaced by `:`), so lines split back into the same
//! frames. Not async-signal-safe (allocates, does I/O).

use super::units::format_value;
use crate::attribution::cct::{NodeId, Tree};
use crate::attribution::Analysis;
use std::io::{self, Write};

/// Folded stacks of `tree` (a top-down tree) for merged metric `metric`, sorted.
pub fn folded_lines(analysis: &Analysis, tree: &Tree, metric: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut frames: Vec<String> = Vec::new();
    // Depth-first with explicit enter/leave events, so that deep trees cannot overflow.
    let mut stack: Vec<(NodeId, bool)> = tree.roots().iter().map(|&id| (id, true)).collect();
    while let Some((id, enter)) = stack.pop() {
        if !enter {
            frames.pop();
            continue;
        }
        let node = tree.node(id);
        let mut name = analysis
            .names
            .function(node.function)
            .name
            .replace(';', ":");
        if node.inlined {
            name.push_str("_[i]");
        }
        frames.push(name);
        let value = tree.exclusive(id)[metric];
        if value > 0 {
            lines.push(format!("{} {value}", frames.join(";")));
        }
        stack.push((id, false));
        stack.extend(tree.children(id).iter().map(|&c| (c, true)));
    }
    lines.sort();
    lines
}

/// Draws the flamegraph of `tree` for `metric` as SVG into `out`.
pub fn render_svg(
    analysis: &Analysis,
    tree: &Tree,
    metric: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    let def = &analysis.metrics.defs()[metric];
    let lines = folded_lines(analysis, tree, metric);
    let mut options = inferno::flamegraph::Options::default();
    options.title = format!(
        "blameprof: {} - {}",
        def.name,
        super::command_line(analysis)
    );
    options.subtitle = Some(format!(
        "{}; total {}",
        def.description,
        format_value(analysis.totals[metric], &def.unit)
    ));
    options.count_name = def.unit.clone();
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::cct::top_down;
    use crate::attribution::testutil::analysis_of;

    #[test]
    fn folded_lines_follow_the_tree() {
        let a = analysis_of(&[
            (&[0x30, 0x20, 0x10], 7),
            (&[0x30, 0x20], 2),
            (&[0x30, 0x10], 1),
        ]);
        let t = top_down(&a);
        assert_eq!(
            folded_lines(&a, &t, 0),
            ["main;f 2", "main;f;g 7", "main;g 1"]
        );
    }

    #[test]
    fn svg_names_the_functions_and_metric() {
        let a = analysis_of(&[(&[0x30, 0x20, 0x10], 7_000_000), (&[0x30, 0x40], 3_000_000)]);
        let t = top_down(&a);
        let mut svg = Vec::new();
        render_svg(&a, &t, 0, &mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert!(svg.starts_with("<?xml"), "{}", &svg[..100]);
        assert!(
            svg.contains(">main<") || svg.contains("main ("),
            "main missing"
        );
        assert!(svg.contains("blameprof: work - ./app --fast"));
        assert!(svg.contains("g ("), "leaf g missing");
    }
}
