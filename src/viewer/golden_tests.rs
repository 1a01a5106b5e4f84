//! Golden files of the rendered outputs, as inferno keeps them: the text views (top-down,
//! bottom-up, flat), the lock view (table and findings), the folded lines and the structure
//! of the flamegraph's SVG, of fixed profiles built here (`testutil::lock_process` and
//! `testutil::lock_table_process`), each checked byte for byte against its file in
//! `tests/golden/`, so that a change of output is a visible diff in review.
//!
//! After an intended change of output, rewrite the files and commit them with it:
//! `BLAMEPROF_UPDATE_GOLDEN=1 cargo test --release -p blameprof --lib golden`.

use super::locks::{self as lock_view, Findings, LockOptions, SortBy};
use super::tests::render;
use super::text::Text;
use super::*;
use crate::attribution::cct::top_down;
use crate::attribution::findings::{findings, Thresholds};
use crate::attribution::symbolize::Symbolizer;
use crate::attribution::testutil::{
    analyze_renamed, lock_profile, lock_table_of, lock_table_process,
};
use crate::attribution::Filter;
use crate::format::read::Profile;
use std::path::PathBuf;

/// The variable that makes [`check`] write the files instead of comparing.
const UPDATE: &str = "BLAMEPROF_UPDATE_GOLDEN";

/// Compares `actual` with golden file `name`, or writes it when [`UPDATE`] is set.
fn check(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os(UPDATE).is_some() {
        std::fs::create_dir_all(path.parent().expect("a directory")).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("{}: {e}; write it with {UPDATE}=1", path.display());
    });
    if expected == actual {
        return;
    }
    let (line, want, got) = expected
        .lines()
        .map(Some)
        .chain(std::iter::repeat(None))
        .zip(actual.lines().map(Some).chain(std::iter::repeat(None)))
        .enumerate()
        .find(|(_, (e, a))| e != a)
        .map(|(i, (e, a))| (i + 1, e.unwrap_or("<end>"), a.unwrap_or("<end>")))
        .unwrap_or((0, "<same lines, other line ends>", ""));
    panic!(
        "{name} differs from {} at line {line}:\n  expected: {want}\n  actual:   {got}\n\
         if the change is intended, rerun with {UPDATE}=1 and commit the file\n\
         --- actual ---\n{actual}",
        path.display()
    );
}

const PRUNE: Prune = Prune {
    depth: Some(16),
    min_percent: Some(1.0),
};

#[test]
fn golden_text_views() {
    let a = analyze_renamed(&lock_profile());
    let blame = a.metrics.id("blame").expect("blame");
    for (view, file) in [
        (View::TopDown, "top_down.txt"),
        (View::BottomUp, "bottom_up.txt"),
        (View::Flat, "flat.txt"),
    ] {
        check(file, &render(&Report::new(&a, view, blame, PRUNE), &Text));
    }
}

#[test]
fn golden_folded_and_flamegraph() {
    let a = analyze_renamed(&lock_profile());
    let tree = top_down(&a);
    let work = a.metrics.id("work").expect("work");
    let mut folded = flamegraph::folded_lines(&a, &tree, work).join("\n");
    folded.push('\n');
    check("folded.txt", &folded);
    let mut svg = Vec::new();
    flamegraph::render_svg(&a, &tree, work, &mut svg).unwrap();
    check(
        "flamegraph.svg.txt",
        &svg_structure(&String::from_utf8(svg).unwrap()),
    );
}

/// The picture of an SVG, a tag or a text a line (frames, their titles and labels, the
/// title and subtitle): without inferno's script and style, which are its own.
fn svg_structure(svg: &str) -> String {
    let mut out = String::new();
    let mut rest = svg;
    let mut line = |s: &str| {
        if !s.trim().is_empty() {
            out.push_str(s.trim());
            out.push('\n');
        }
    };
    while let Some(start) = rest.find('<') {
        line(&rest[..start]);
        rest = &rest[start..];
        let skipped = [("<script", "</script>"), ("<style", "</style>")]
            .into_iter()
            .find(|(open, _)| rest.starts_with(open));
        let end = match skipped {
            Some((_, close)) => rest.find(close).map_or(rest.len(), |e| e + close.len()),
            None => {
                let end = rest.find('>').map_or(rest.len(), |e| e + 1);
                line(&rest[..end]);
                end
            }
        };
        rest = &rest[end..];
    }
    line(rest);
    out
}

#[test]
fn golden_lock_view() {
    let profile = Profile {
        path: "test".into(),
        processes: vec![lock_table_process()],
        skipped: Vec::new(),
    };
    let table = lock_table_of(lock_table_process());
    let list = findings(
        &profile,
        Filter::default(),
        &table,
        None,
        Thresholds::default(),
        &mut Symbolizer::new(),
    )
    .expect("findings");
    let opts = LockOptions {
        sort: SortBy::Blame,
        min_percent: 1.0,
        lock: None,
        pairs_per_lock: 3,
    };
    let found = Findings {
        list: &list,
        thresholds: Thresholds::default(),
    };
    let mut out = Vec::new();
    lock_view::write_text(&table, &opts, &mut out).unwrap();
    lock_view::write_findings_text(&table, found, &opts, &mut out).unwrap();
    check("locks.txt", &String::from_utf8(out).unwrap());
}
