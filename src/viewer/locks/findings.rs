//! The lock view's findings ([`crate::attribution::findings`]): each in words, its
//! `{key}`s filled in with its evidence formatted here (durations, percentages, rates,
//! thousands separators), and as JSON with the thresholds they were found with.
//!
//! Invariants: `--lock` keeps only the findings about that lock or group; every `{key}`
//! is filled from the finding's evidence. Not async-signal-safe (allocates).

use super::LockOptions;
use crate::attribution::findings::{self, Finding, Thresholds, Value as Evidence};
use crate::attribution::locks::LockTable;
use crate::viewer::units::format_value;
use serde_json::{json, Value};
use std::io::{self, Write};

/// The findings of a lock view, and the thresholds they were found with.
#[derive(Debug, Clone, Copy)]
pub struct Findings<'a> {
    pub list: &'a [Finding],
    pub thresholds: Thresholds,
}

impl Findings<'_> {
    /// The findings `--lock` keeps: all, or those about that lock or group.
    pub(super) fn shown(&self, opts: &LockOptions) -> Vec<&Finding> {
        self.list
            .iter()
            .filter(|f| opts.lock.as_ref().map_or(true, |n| f.locks.contains(n)))
            .collect()
    }

    /// `contention >= 10%, >= 1000 acquisitions/s`.
    fn thresholds_text(&self) -> String {
        format!(
            "contention >= {}%, >= {} acquisitions/s",
            short_number(self.thresholds.contention * 100.0),
            short_number(self.thresholds.rate)
        )
    }
}

/// A threshold as given: at most 3 decimals, none trailing (7, not 7.000000000000001).
pub(super) fn short_number(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// Writes the findings section (after [`write_text`]'s table).
pub fn write_findings_text(
    table: &LockTable,
    found: Findings,
    opts: &LockOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    let shown = found.shown(opts);
    let about = opts
        .lock
        .as_ref()
        .map_or(String::new(), |n| format!(" about {n}"));
    writeln!(out)?;
    if shown.is_empty() {
        writeln!(out, "Findings{about}: none ({})", found.thresholds_text())?;
    } else {
        writeln!(out, "Findings{about} ({}):", found.thresholds_text())?;
    }
    for (i, f) in shown.iter().enumerate() {
        let kind = f
            .lock_kind
            .map_or(String::new(), |k| format!("  ({})", k.name()));
        writeln!(out, "  {}. {}: {}{kind}", i + 1, f.kind.title(), f.subject)?;
        writeln!(
            out,
            "     costs: {}",
            cost_text(f, running_of(table, f.pid))
        )?;
        writeln!(out, "     evidence: {}", fill(&f.text, f))?;
        writeln!(out, "     fix: {}", fill(&f.fix, f))?;
    }
    if !table.available {
        writeln!(
            out,
            "  (Lock findings need the per-lock counts this profile lacks: only load \
             imbalance is looked for.)"
        )?;
    }
    Ok(())
}

/// What a finding costs, and its share of the threads' running time when known:
/// `5.72 s, 71.4% of the threads' running time`.
fn cost_text(f: &Finding, running_ns: u64) -> String {
    let cost = format_value(f.cost_ns, "ns");
    match cost_share(f, running_ns) {
        Some(share) => format!("{cost}, {:.1}% of the threads' running time", share * 100.0),
        None => cost,
    }
}

/// The running time of process `pid`'s threads, what its findings' costs are shares of
/// (as its locks' pressure is): its rows', or the table's when it has none.
fn running_of(table: &LockTable, pid: u32) -> u64 {
    table
        .locks
        .iter()
        .find(|r| r.pid == pid)
        .map_or(table.running_ns, |r| r.running_ns)
}

/// A finding's cost over the threads' running time (none when that is unknown).
fn cost_share(f: &Finding, running_ns: u64) -> Option<f64> {
    (running_ns > 0).then(|| f.cost_ns as f64 / running_ns as f64)
}

/// `words` with each `{key}` replaced by the finding's evidence under that key, formatted.
pub(super) fn fill(words: &str, f: &Finding) -> String {
    let mut out = String::with_capacity(words.len());
    let mut rest = words;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) => {
                let key = &after[..close];
                match f.value(key) {
                    Some(v) => out.push_str(&evidence_text(v)),
                    None => out.push_str(&rest[open..open + close + 2]),
                }
                rest = &after[close + 1..];
            }
            None => {
                out.push_str(&rest[open..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// One piece of evidence as text.
pub(super) fn evidence_text(v: &Evidence) -> String {
    match v {
        Evidence::Count(n) => thousands(*n),
        Evidence::Ns(ns) => format_value(*ns, "ns"),
        Evidence::Share(f) => format!("{:.1}%", f * 100.0),
        Evidence::PerSecond(r) if *r < 10.0 => format!("{r:.1}"),
        Evidence::PerSecond(r) => thousands(r.round() as u64),
        Evidence::Factor(x) if !x.is_finite() => "unbounded".to_owned(),
        Evidence::Factor(x) if *x >= 100.0 => format!("{}x", thousands(x.round() as u64)),
        Evidence::Factor(x) => format!("{x:.1}x"),
        Evidence::Name(name) => name.clone(),
        Evidence::Id(id) => id.to_string(),
        Evidence::Threads(split) => split
            .iter()
            .map(|(routine, n)| format!("{routine} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// `1234567` as `1,234,567`.
pub(super) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One piece of evidence as JSON (a non-finite ratio is null).
pub(super) fn evidence_json(v: &Evidence) -> Value {
    match v {
        Evidence::Count(n) | Evidence::Ns(n) | Evidence::Id(n) => json!(n),
        Evidence::Share(f) | Evidence::PerSecond(f) | Evidence::Factor(f) => json!(f),
        Evidence::Name(name) => json!(name),
        Evidence::Threads(split) => Value::Object(
            split
                .iter()
                .map(|(routine, n)| (routine.clone(), json!(n)))
                .collect(),
        ),
    }
}

/// The findings and their thresholds as JSON (`table`: the lock table whose processes'
/// running time their costs are shares of).
pub(super) fn findings_json(
    found: Findings,
    opts: &LockOptions,
    table: &LockTable,
) -> (Value, Value) {
    let list: Vec<Value> = found
        .shown(opts)
        .iter()
        .map(|f| {
            let evidence: serde_json::Map<String, Value> = f
                .evidence
                .iter()
                .map(|(k, v)| ((*k).to_owned(), evidence_json(v)))
                .collect();
            json!({
                "kind": f.kind.id(),
                "title": f.kind.title(),
                "subject": f.subject,
                "pid": f.pid,
                "lock_kind": f.lock_kind.map(|k| k.name()),
                "locks": f.locks,
                "cost_ns": f.cost_ns,
                "cost_share": cost_share(f, running_of(table, f.pid)),
                "evidence": evidence,
                "text": fill(&f.text, f),
                "fix": fill(&f.fix, f),
            })
        })
        .collect();
    let t = found.thresholds;
    let thresholds = json!({
        "contention_rate": t.contention,
        "acquisitions_per_s": t.rate,
        "min_pressure": findings::MIN_PRESSURE,
        "contention_pressure": findings::CONTENTION_PRESSURE,
        "serial_share": findings::SERIAL_SHARE,
        "retake_share": findings::RETAKE_SHARE,
        "long_hold_factor": findings::LONG_HOLD_FACTOR,
        "culprit_share": findings::CULPRIT_SHARE,
        "lock_pair_ns": findings::LOCK_PAIR_NS,
        "min_overhead_share": findings::MIN_OVERHEAD_SHARE,
        "min_contended": findings::MIN_CONTENDED,
        "min_acquisition_samples": findings::MIN_ACQUISITION_SAMPLES,
        "standard_errors": findings::STANDARD_ERRORS,
        "wait_per_holds": findings::WAIT_PER_HOLDS,
        "asymmetry": findings::ASYMMETRY,
        "try_failure_ratio": findings::TRY_FAILURE_RATIO,
        "try_failures_per_acquisition": findings::TRY_FAILURES_PER_ACQUISITION,
        "stage_waiting_share": findings::STAGE_WAITING,
        "stage_computing_share": findings::STAGE_COMPUTING,
        "min_stage_ns": findings::MIN_STAGE_NS,
        "thread_imbalance": findings::THREAD_IMBALANCE,
        "min_imbalance_ns": findings::MIN_IMBALANCE_NS,
        "min_imbalance_of_mean": findings::MIN_IMBALANCE_OF_MEAN,
        "max_high_coverage": findings::MAX_HIGH_COVERAGE,
        "min_high_waiting_share": findings::MIN_HIGH_WAITING_SHARE,
    });
    (Value::Array(list), thresholds)
}
