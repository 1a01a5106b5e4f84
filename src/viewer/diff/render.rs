//! The comparison of two runs as text or as JSON (schema "blameprof-diff" version 2,
//! docs/diff.md).
//!
//! Job: a header names both runs (path, command, duration, total of the metric), the metric
//! and how the runs were normalised, then any notes; then a table of the functions and one
//! of the locks, biggest changes first, each row a (before, after, delta, delta%) group per
//! measure. Values read in the normalisation's units: shares in %, with deltas in
//! percentage points (pp); per second of run time; or raw. JSON carries the same rows
//! with the normalised and the raw values.
//!
//! Invariants: text and JSON show the same rows in the same order (the first `top` of each
//! table); a row whose key one run lacks says `new` or `gone` instead of a relative change.
//! Not async-signal-safe (allocates).

use super::compare::{Change, Normalize, Row, Status, ACQUISITIONS, BLAME, WAITING};
use super::{Diff, Rank, Run};
use crate::viewer::units::format_value;
use serde::Serialize;
use std::io::{self, Write};

/// Schema name written in every document.
pub const SCHEMA: &str = "blameprof-diff";
/// Schema version written in every document.
pub const VERSION: u32 = 2;

/// Width of a value column in text.
const VALUE: usize = 12;
/// Width of a relative-change column in text.
const RELATIVE: usize = 8;
/// Width of a share column in text ("100.0→100.0%").
const SHARE: usize = 13;

/// Writes the comparison as text.
pub fn write_text(diff: &Diff, out: &mut dyn Write) -> io::Result<()> {
    header(diff, out)?;
    writeln!(out)?;
    functions(diff, out)?;
    writeln!(out)?;
    locks(diff, out)
}

fn header(diff: &Diff, out: &mut dyn Write) -> io::Result<()> {
    for run in [&diff.before, &diff.after] {
        writeln!(
            out,
            "{:<12}{}: {} (ran {}; {} total {})",
            format!("{}:", run.side.name().to_lowercase()),
            run.path.display(),
            crate::viewer::command_line(&run.analysis),
            run.run_ns.map_or_else(
                || "for an unknown time".to_owned(),
                |ns| format_value(ns, "ns")
            ),
            diff.metric,
            format_value(run.total(), &diff.unit),
        )?;
    }
    writeln!(
        out,
        "metric:     {} ({}): {}",
        diff.metric, diff.unit, diff.description
    )?;
    writeln!(out, "compared:   {}", describe_normalize(diff.normalize))?;
    for note in &diff.notes {
        writeln!(out, "note:       {note}")?;
    }
    if let Some(file) = &diff.flamegraph {
        writeln!(
            out,
            "flame graph: {} (differential: widths are {}'s, red grew, blue shrank)",
            file.display(),
            diff.widths.side()
        )?;
    }
    Ok(())
}

/// What the values are, for the header.
fn describe_normalize(normalize: Normalize) -> &'static str {
    match normalize {
        Normalize::Total => {
            "each run's values as shares of its own total (--normalize total: of the \
             metric's total; a lock's blame and waiting, of the threads' running time; its \
             acquisitions, of all locks'), deltas in percentage points (pp), delta% \
             relative to BEFORE; --normalize none compares raw values"
        }
        Normalize::Time => {
            "each run's values per second of its own duration (--normalize time), delta% \
             relative to BEFORE; --normalize none compares raw values"
        }
        Normalize::None => {
            "raw values (--normalize none, the default), and beside them each value's share \
             of its own run's total (share: before→after; a lock's blame and waiting, of the \
             threads' running time); --normalize total ranks by the shares, --normalize time \
             compares per second of each run"
        }
    }
}

/// "(5 of 143; --top N shows more)" for a table of `count` rows showing `shown`.
fn shown_of(shown: usize, count: usize) -> String {
    match shown < count {
        true => format!("({shown} of {count}; --top N shows more)"),
        false => format!("({shown} of {count})"),
    }
}

fn functions(diff: &Diff, out: &mut dyn Write) -> io::Result<()> {
    if diff.functions.is_empty() {
        return writeln!(out, "Functions: none has {} in either run.", diff.metric);
    }
    let rows = shown(&diff.functions, diff.top);
    let sort = match diff.sort {
        Rank::Exclusive => "exclusive",
        Rank::Inclusive => "inclusive",
    };
    writeln!(
        out,
        "Functions by change of {sort} {} {}:",
        diff.metric,
        shown_of(rows.len(), diff.functions.len())
    )?;
    let groups = [
        format!("exclusive {}", diff.metric),
        format!("inclusive {}", diff.metric),
    ];
    column_heads(diff.normalize, &groups, "function", out)?;
    let units = [diff.unit.as_str(); 2];
    for row in rows {
        let module = diff.modules.get(&row.key).map_or("", String::as_str);
        let label = match module {
            "" => row.key.clone(),
            m => format!("{} [{m}]", row.key),
        };
        write_row(
            diff.normalize,
            &units,
            row.status,
            &row.changes,
            &label,
            out,
        )?;
    }
    Ok(())
}

fn locks(diff: &Diff, out: &mut dyn Write) -> io::Result<()> {
    if !diff.locks_available {
        return writeln!(out, "Locks: not compared (see the notes above).");
    }
    if diff.locks.is_empty() {
        return writeln!(
            out,
            "Locks: none in either run (no thread waited for a lock, and no acquisition was \
             sampled)."
        );
    }
    let rows = shown(&diff.locks, diff.top);
    writeln!(
        out,
        "Locks by change of blame, matched by name and kind {}:",
        shown_of(rows.len(), diff.locks.len())
    )?;
    column_heads(
        diff.normalize,
        &["blame".into(), "waiting".into(), "acquisitions".into()],
        "lock",
        out,
    )?;
    for row in rows {
        let label = format!("{} ({})", row.key.name, row.key.kind.unwrap_or("?"));
        write_row(
            diff.normalize,
            &["ns", "ns", ""],
            row.status,
            &row.changes,
            &label,
            out,
        )?;
    }
    Ok(())
}

/// The first `top` rows (all when `None`).
fn shown<K, const N: usize>(rows: &[Row<K, N>], top: Option<usize>) -> &[Row<K, N>] {
    &rows[..top.map_or(rows.len(), |t| t.min(rows.len()))]
}

/// Whether the rows show each value's share beside it (when the values are not shares).
fn shows_shares(normalize: Normalize) -> bool {
    normalize != Normalize::Total
}

/// The two heading lines of a table: group names, then the columns of each group.
fn column_heads(
    normalize: Normalize,
    groups: &[String],
    label: &str,
    out: &mut dyn Write,
) -> io::Result<()> {
    let share = shows_shares(normalize);
    let width = 3 * (VALUE + 1) + RELATIVE + if share { SHARE + 1 } else { 0 };
    let names: Vec<String> = groups.iter().map(|g| format!("{g:<width$}")).collect();
    writeln!(out, "{}", names.join("  ").trim_end())?;
    let mut columns = format!(
        "{:>VALUE$} {:>VALUE$} {:>VALUE$} {:>RELATIVE$}",
        "before", "after", "delta", "delta%"
    );
    if share {
        columns.push_str(&format!(" {:>SHARE$}", "share"));
    }
    let columns: Vec<&str> = groups.iter().map(|_| columns.as_str()).collect();
    writeln!(out, "{}  {label}", columns.join("  "))
}

/// One row: per measure, before, after, delta and delta% in `units[i]`, then the label.
fn write_row(
    normalize: Normalize,
    units: &[&str],
    status: Status,
    changes: &[Change],
    label: &str,
    out: &mut dyn Write,
) -> io::Result<()> {
    let groups: Vec<String> = changes
        .iter()
        .zip(units)
        .map(|(c, unit)| {
            let before = match status {
                Status::New => "-".to_owned(),
                Status::Both | Status::Gone => value(normalize, unit, c.before),
            };
            let after = match status {
                Status::Gone => "-".to_owned(),
                Status::Both | Status::New => value(normalize, unit, c.after),
            };
            let relative = match status {
                Status::New => "new".to_owned(),
                Status::Gone => "gone".to_owned(),
                Status::Both => c
                    .relative()
                    .map_or_else(|| "-".to_owned(), |r| format!("{r:+.1}%")),
            };
            let mut group = format!(
                "{before:>VALUE$} {after:>VALUE$} {:>VALUE$} {relative:>RELATIVE$}",
                delta(normalize, unit, c.delta())
            );
            if shows_shares(normalize) {
                let share = format!("{:.1}→{:.1}%", c.share_before, c.share_after);
                group.push_str(&format!(" {share:>SHARE$}"));
            }
            group
        })
        .collect();
    writeln!(out, "{}  {label}", groups.join("  "))
}

/// A normalised value of `unit` as text.
fn value(normalize: Normalize, unit: &str, v: f64) -> String {
    match normalize {
        Normalize::Total => format!("{v:.2}%"),
        Normalize::Time => per_second(unit, v),
        Normalize::None => format_value(v.round() as u64, unit),
    }
}

/// A change of a normalised value of `unit` as text, with its sign.
fn delta(normalize: Normalize, unit: &str, d: f64) -> String {
    let sign = if d < 0.0 { "-" } else { "+" };
    match normalize {
        Normalize::Total => format!("{d:+.2}pp"),
        Normalize::Time | Normalize::None => format!("{sign}{}", value(normalize, unit, d.abs())),
    }
}

/// `v` of `unit` per second: "250.00 ms/s" for nanoseconds, else "1234.5/s".
fn per_second(unit: &str, v: f64) -> String {
    match unit {
        "ns" => format!("{}/s", format_value(v.round() as u64, unit)),
        "" => format!("{v:.1}/s"),
        _ => format!("{v:.1} {unit}/s"),
    }
}

/// Writes the comparison as one JSON document.
pub fn write_json(diff: &Diff, out: &mut dyn Write) -> io::Result<()> {
    let functions = shown(&diff.functions, diff.top)
        .iter()
        .map(|r| FunctionJson {
            function: &r.key,
            module: diff.modules.get(&r.key).map_or("", String::as_str),
            status: r.status,
            exclusive: Measure::of(&r.changes[0]),
            inclusive: Measure::of(&r.changes[1]),
        })
        .collect();
    let locks = shown(&diff.locks, diff.top)
        .iter()
        .map(|r| LockJson {
            lock: &r.key.name,
            kind: r.key.kind,
            status: r.status,
            blame: Measure::of(&r.changes[BLAME]),
            waiting: Measure::of(&r.changes[WAITING]),
            acquisitions: Measure::of(&r.changes[ACQUISITIONS]),
        })
        .collect();
    let doc = Document {
        schema: SCHEMA,
        version: VERSION,
        metric: &diff.metric,
        unit: &diff.unit,
        description: &diff.description,
        normalize: diff.normalize.name(),
        sort: match diff.sort {
            Rank::Exclusive => "exclusive",
            Rank::Inclusive => "inclusive",
        },
        before: RunJson::of(&diff.before),
        after: RunJson::of(&diff.after),
        notes: &diff.notes,
        flamegraph: diff
            .flamegraph
            .as_ref()
            .map(|f| f.to_string_lossy().into_owned()),
        flamegraph_widths: diff
            .flamegraph
            .as_ref()
            .map(|_| diff.widths.side().to_lowercase()),
        functions: FunctionsJson {
            count: diff.functions.len(),
            rows: functions,
        },
        locks: LocksJson {
            available: diff.locks_available,
            count: diff.locks.len(),
            rows: locks,
        },
    };
    serde_json::to_writer(&mut *out, &doc)?;
    writeln!(out)
}

#[derive(Serialize)]
struct Document<'a> {
    schema: &'static str,
    version: u32,
    metric: &'a str,
    unit: &'a str,
    description: &'a str,
    normalize: &'static str,
    sort: &'static str,
    before: RunJson,
    after: RunJson,
    notes: &'a [String],
    flamegraph: Option<String>,
    flamegraph_widths: Option<String>,
    functions: FunctionsJson<'a>,
    locks: LocksJson<'a>,
}

#[derive(Serialize)]
struct RunJson {
    path: String,
    command: String,
    run_ns: Option<u64>,
    total: u64,
    has_metric: bool,
}

impl RunJson {
    fn of(run: &Run) -> RunJson {
        RunJson {
            path: run.path.to_string_lossy().into_owned(),
            command: crate::viewer::command_line(&run.analysis),
            run_ns: run.run_ns,
            total: run.total(),
            has_metric: run.metric.is_some(),
        }
    }
}

#[derive(Serialize)]
struct FunctionsJson<'a> {
    count: usize,
    rows: Vec<FunctionJson<'a>>,
}

#[derive(Serialize)]
struct FunctionJson<'a> {
    function: &'a str,
    module: &'a str,
    status: Status,
    exclusive: Measure,
    inclusive: Measure,
}

#[derive(Serialize)]
struct LocksJson<'a> {
    available: bool,
    count: usize,
    rows: Vec<LockJson<'a>>,
}

#[derive(Serialize)]
struct LockJson<'a> {
    lock: &'a str,
    kind: Option<&'static str>,
    status: Status,
    blame: Measure,
    waiting: Measure,
    acquisitions: Measure,
}

#[derive(Serialize)]
struct Measure {
    before: f64,
    after: f64,
    delta: f64,
    delta_percent: Option<f64>,
    raw_before: u64,
    raw_after: u64,
    share_before: f64,
    share_after: f64,
}

impl Measure {
    fn of(c: &Change) -> Measure {
        Measure {
            before: c.before,
            after: c.after,
            delta: c.delta(),
            delta_percent: c.relative(),
            raw_before: c.raw_before,
            raw_after: c.raw_after,
            share_before: c.share_before,
            share_after: c.share_after,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_in_the_units_of_the_normalisation() {
        assert_eq!(value(Normalize::Total, "ns", 33.333), "33.33%");
        assert_eq!(delta(Normalize::Total, "ns", 16.666), "+16.67pp");
        assert_eq!(delta(Normalize::Total, "ns", -2.0), "-2.00pp");
        assert_eq!(value(Normalize::Time, "ns", 250e6), "250.00 ms/s");
        assert_eq!(delta(Normalize::Time, "ns", -1.5e6), "-1.50 ms/s");
        assert_eq!(value(Normalize::Time, "", 12.25), "12.2/s");
        assert_eq!(value(Normalize::None, "ns", 2.5e9), "2.50 s");
        assert_eq!(delta(Normalize::None, "", 7.0), "+7");
        assert_eq!(delta(Normalize::None, "ns", -7.0), "-7 ns");
    }

    #[test]
    fn a_row_says_new_and_gone_instead_of_a_relative_change() {
        let c = Change {
            raw_before: 0,
            raw_after: 5,
            before: 0.0,
            after: 5.0,
            share_before: 0.0,
            share_after: 50.0,
        };
        let mut out = Vec::new();
        write_row(Normalize::None, &[""], Status::New, &[c], "f", &mut out).unwrap();
        let line = String::from_utf8(out).unwrap();
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields, ["-", "5", "+5", "new", "0.0→50.0%", "f"]);
        let c = Change {
            raw_before: 4,
            raw_after: 0,
            before: 4.0,
            after: 0.0,
            share_before: 40.0,
            share_after: 0.0,
        };
        let mut out = Vec::new();
        write_row(Normalize::None, &[""], Status::Gone, &[c], "g", &mut out).unwrap();
        let line = String::from_utf8(out).unwrap();
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields, ["4", "-", "-4", "gone", "40.0→0.0%", "g"]);
    }
}
