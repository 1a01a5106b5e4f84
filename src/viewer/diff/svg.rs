//! The differential flame graph of `diff -o FILE`: inferno's differential mode on the two
//! runs' folded stacks.
//!
//! Job: fold each run's calling-context tree in the compared metric
//! ([`folded_lines`](crate::viewer::flamegraph::folded_lines)), normalise BEFORE's values as
//! the tables are normalised (to AFTER's total with inferno's own `normalize`, or to AFTER's
//! duration by scaling them here; raw values as they are), merge them with
//! `inferno::differential` and draw the result with `inferno::flamegraph`: frame widths are
//! AFTER's ([`Widths::After`]) or BEFORE's ([`Widths::Before`]: what was removed is drawn,
//! Brendan Gregg's negated graph), red frames grew and blue ones shrank either way, each
//! title says by how much.
//!
//! Invariants: a stack only one run has is in the merged input with the other's value 0 (no
//! width when that run gives the widths; [`write`] says how much AFTER's widths leave out); the
//! SVG is written only when the run giving the widths has some cost to draw. Not
//! async-signal-safe (allocates).

use super::compare::Normalize;
use super::{Diff, Run};
use crate::attribution::cct;
use crate::viewer::flamegraph::folded_lines;
use anyhow::{anyhow, bail};
use std::io::Write;

/// Whose values give the frames' widths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Widths {
    /// AFTER's: what the program spends now, coloured by how it changed.
    After,
    /// BEFORE's: what it spent, so that stacks AFTER no longer has are drawn.
    Before,
}

impl Widths {
    /// The run whose widths they are, as the text names it (`AFTER`, `BEFORE`); JSON and
    /// `--widths` spell it in lowercase.
    pub fn side(self) -> &'static str {
        match self {
            Widths::After => "AFTER",
            Widths::Before => "BEFORE",
        }
    }
}

/// Draws the differential flame graph of `diff` as SVG into `out`, frames as wide as its
/// `widths` says. Returns BEFORE's cost (raw) in call paths AFTER does not have when the
/// widths are AFTER's, which such a graph cannot draw (0 with BEFORE's widths).
pub fn write(diff: &Diff, out: &mut dyn Write) -> anyhow::Result<u64> {
    let widths = diff.widths;
    let side = widths.side();
    let after = folded(&diff.after);
    let raw_before = folded(&diff.before);
    // Under `time`, BEFORE scaled to AFTER's duration; raw otherwise.
    let scaled = match (diff.normalize, diff.before.run_ns, diff.after.run_ns) {
        (Normalize::Time, Some(b), Some(a)) => {
            Some(scale_folded(&raw_before, a as f64 / b.max(1) as f64))
        }
        _ => None,
    };
    let before: &[String] = scaled.as_deref().unwrap_or(&raw_before);
    let drawn = match widths {
        Widths::After => &after,
        Widths::Before => before,
    };
    if drawn.is_empty() {
        bail!(
            "the {side} profile has no {} to draw, and the differential flame graph draws \
             {side}'s widths: choose another --metric{}, or leave out -o",
            diff.metric,
            match widths {
                Widths::After => ", --widths before",
                Widths::Before => ", --widths after",
            }
        );
    }
    let options = inferno::differential::Options {
        normalize: diff.normalize == Normalize::Total,
        strip_hex: false,
    };
    // inferno draws the second run's widths and colours by second minus first.
    let (first, second): (&[String], &[String]) = match widths {
        Widths::After => (before, &after),
        Widths::Before => (&after, before),
    };
    let mut merged = Vec::new();
    inferno::differential::from_readers(
        options,
        lines_text(first).as_bytes(),
        lines_text(second).as_bytes(),
        &mut merged,
    )
    .map_err(|e| anyhow!("cannot merge the runs' stacks for the flame graph: {e}"))?;
    let merged = String::from_utf8_lossy(&merged);
    let mut lines: Vec<&str> = merged.lines().collect();
    lines.sort_unstable();
    let mut options = inferno::flamegraph::Options::default();
    options.title = format!("blameprof diff: {}", diff.metric);
    options.negate_differentials = widths == Widths::Before;
    let gone = match widths {
        Widths::After => removed(&raw_before, &after),
        Widths::Before => 0,
    };
    let left_out = match gone {
        0 => String::new(),
        gone => format!(
            "; {gone} {} of BEFORE in stacks AFTER lacks, not drawn (--widths before draws them)",
            diff.unit
        ),
    };
    options.subtitle = Some(format!(
        "{} -> {}; widths: {side}; red: grew, blue: shrank; {}{left_out}",
        crate::viewer::command_line(&diff.before.analysis),
        crate::viewer::command_line(&diff.after.analysis),
        match diff.normalize {
            Normalize::Total => "BEFORE scaled to AFTER's total",
            Normalize::Time => "BEFORE scaled to AFTER's duration",
            Normalize::None => "raw values",
        }
    ));
    options.count_name = diff.unit.clone();
    inferno::flamegraph::from_lines(&mut options, lines, out)
        .map_err(|e| anyhow!("cannot draw the flame graph: {e}"))?;
    Ok(gone)
}

/// The cost of the folded lines of `before` whose stacks `after` does not have.
fn removed(before: &[String], after: &[String]) -> u64 {
    let stacks: std::collections::HashSet<&str> = after
        .iter()
        .filter_map(|l| l.rsplit_once(' ').map(|(stack, _)| stack))
        .collect();
    before
        .iter()
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(stack, _)| !stacks.contains(stack))
        .filter_map(|(_, value)| value.parse::<u64>().ok())
        .sum()
}

/// The folded stacks of a run in the compared metric (none when it has no samples of it).
fn folded(run: &Run) -> Vec<String> {
    match run.metric {
        Some(metric) if run.total() > 0 => {
            folded_lines(&run.analysis, &cct::top_down(&run.analysis), metric)
        }
        _ => Vec::new(),
    }
}

/// Folded lines with every value multiplied by `factor` (rounded; lines left at 0 dropped).
fn scale_folded(lines: &[String], factor: f64) -> Vec<String> {
    lines
        .iter()
        .filter_map(|line| {
            let (stack, value) = line.rsplit_once(' ')?;
            let scaled = (value.parse::<u64>().ok()? as f64 * factor).round() as u64;
            (scaled > 0).then(|| format!("{stack} {scaled}"))
        })
        .collect()
}

/// Lines as one text, each ending in a newline.
fn lines_text(lines: &[String]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::testutil::analysis_of;
    use crate::viewer::diff::{Rank, Side};

    fn run(side: Side, stacks: &[(&[u64], u64)], run_ns: u64) -> Run {
        Run {
            side,
            path: "blameprof-test".into(),
            analysis: analysis_of(stacks),
            locks: Default::default(),
            run_ns: Some(run_ns),
            metric: Some(0),
        }
    }

    fn diff(before: Run, after: Run, normalize: Normalize) -> Diff {
        Diff {
            metric: "work".into(),
            unit: "ns".into(),
            description: "CPU time".into(),
            normalize,
            sort: Rank::Exclusive,
            before,
            after,
            functions: Vec::new(),
            modules: Default::default(),
            locks: Vec::new(),
            locks_available: true,
            top: None,
            flamegraph: None,
            widths: Widths::After,
            notes: Vec::new(),
        }
    }

    #[test]
    fn scaling_keeps_the_stacks_and_drops_what_rounds_to_nothing() {
        let lines = ["main;f 10".to_owned(), "main;g h 1".to_owned()];
        assert_eq!(scale_folded(&lines, 0.25), ["main;f 3"]);
        assert_eq!(scale_folded(&lines, 2.0), ["main;f 20", "main;g h 2"]);
    }

    /// The title of the frame of `function` in `svg`, and the fill of its rectangle.
    fn frame<'a>(svg: &'a str, function: &str) -> (&'a str, &'a str) {
        let at = svg
            .find(&format!("<title>{function} ("))
            .unwrap_or_else(|| panic!("no frame {function}"));
        let title = &svg[at..at + svg[at..].find("</title>").unwrap()];
        let fill = svg[at..].find("fill=\"").unwrap() + at + 6;
        (title, &svg[fill..fill + svg[fill..].find('"').unwrap()])
    }

    #[test]
    fn the_graph_colours_growth_red_and_shrinking_blue() {
        // g doubles, h halves (AFTER: g 8, h 2 of 10; BEFORE: g 4, h 4 of 8).
        let before = run(Side::Before, &[(&[0x30, 0x10], 4), (&[0x30, 0x40], 4)], 1);
        let after = run(Side::After, &[(&[0x30, 0x10], 8), (&[0x30, 0x40], 2)], 1);
        let mut svg = Vec::new();
        write(&diff(before, after, Normalize::None), &mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        let (title, fill) = frame(&svg, "g");
        assert!(title.contains("; +"), "{title}");
        assert!(fill.starts_with("rgb(255,"), "{fill}");
        let (title, fill) = frame(&svg, "h");
        assert!(title.contains("; -"), "{title}");
        assert!(fill.ends_with(",255)"), "{fill}");
    }

    #[test]
    fn normalised_graphs_of_the_same_shape_show_no_change() {
        let stacks = |k: u64| -> Vec<(&'static [u64], u64)> {
            vec![(&[0x30, 0x10], 4 * k), (&[0x30, 0x40], 6 * k)]
        };
        for normalize in [Normalize::Total, Normalize::Time] {
            let before = run(Side::Before, &stacks(1), 1_000);
            let after = run(Side::After, &stacks(3), 3_000);
            let mut svg = Vec::new();
            write(&diff(before, after, normalize), &mut svg).unwrap();
            let svg = String::from_utf8(svg).unwrap();
            for f in ["g", "h"] {
                let (title, fill) = frame(&svg, f);
                assert!(title.ends_with("; 0.00%)"), "{normalize:?}: {title}");
                assert_eq!(fill, "rgb(250,250,250)", "{normalize:?}");
            }
        }
    }

    #[test]
    fn before_widths_draw_what_was_removed_coloured_as_after_widths_colour_it() {
        // h is gone (BEFORE: g 4, h 4; AFTER: g 8): drawn only with BEFORE's widths, blue.
        let before = run(Side::Before, &[(&[0x30, 0x10], 4), (&[0x30, 0x40], 4)], 1);
        let after = run(Side::After, &[(&[0x30, 0x10], 8)], 1);
        let mut d = diff(before, after, Normalize::None);
        let mut svg = Vec::new();
        assert_eq!(write(&d, &mut svg).unwrap(), 4, "h's cost, not drawn");
        let svg = String::from_utf8(svg).unwrap();
        assert!(
            !svg.contains("<title>h ("),
            "a removed stack has no width in AFTER"
        );
        assert!(
            svg.contains("4 ns of BEFORE in stacks AFTER lacks"),
            "{svg}"
        );
        d.widths = Widths::Before;
        let mut svg = Vec::new();
        assert_eq!(write(&d, &mut svg).unwrap(), 0, "all drawn");
        let svg = String::from_utf8(svg).unwrap();
        let (title, fill) = frame(&svg, "h");
        assert!(title.contains("; -"), "{title}");
        assert!(fill.ends_with(",255)"), "shrank to nothing: blue, {fill}");
        let (title, fill) = frame(&svg, "g");
        assert!(title.contains("; +"), "{title}");
        assert!(fill.starts_with("rgb(255,"), "grew: red, {fill}");
    }

    #[test]
    fn nothing_to_draw_after_is_an_error() {
        let before = run(Side::Before, &[(&[0x30, 0x10], 4)], 1);
        let mut after = run(Side::After, &[(&[0x30, 0x10], 4)], 1);
        after.metric = None;
        let e = write(&diff(before, after, Normalize::Total), &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("leave out -o"), "{e}");
    }
}
