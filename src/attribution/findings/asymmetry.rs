//! The findings' asymmetry rule: one member of a group of locks (an array of buckets, the
//! locks of one init site) contended many times as often as the others together, named as
//! the array element it is when the group is one array symbol.
//!
//! Invariants: judged only with counted acquisitions and at least two members; the hot
//! member's rate is taken at the low edge of its estimate, widened with the number of
//! members it was picked among (`sqrt(2 ln members)` standard errors, at least
//! `STANDARD_ERRORS`), and the others' at the high edge of theirs, so sampling error never
//! makes a member hot. Not async-signal-safe
//! (allocates); single-threaded.

use super::subject::{acquisitions_low, chance_errors, contention_low_by, Subject};
use super::{
    ratio, Finding, Kind, Thresholds, Value, ASYMMETRY, MIN_ACQUISITION_SAMPLES, MIN_CONTENDED,
    MIN_PRESSURE,
};
use crate::attribution::locks::{Counts, LockGroup, LockTable, Naming};

/// Asymmetric contention in group `g`: the most contended member (among those with the
/// evidence of a contention finding and enough sampled acquisitions) contended at least
/// [`ASYMMETRY`] times as often as the other members together, comparing the low edge of its
/// rate's estimate with the high edge of theirs.
pub(super) fn asymmetric(
    table: &LockTable,
    g: &LockGroup,
    s: &Subject,
    thresholds: Thresholds,
    counted: bool,
) -> Option<Finding> {
    if !counted || g.members.len() < 2 {
        return None;
    }
    // The hottest of many members, each estimated, is picked for its estimate's chance
    // error as much as for its rate: its low edge is taken as far as chance reaches.
    let errors = chance_errors(g.members.len());
    let hot = g
        .members
        .iter()
        .filter_map(|&m| {
            let r = &table.locks[m];
            let c = &r.counts;
            let low_rate = contention_low_by(c, errors);
            let evident = c.runtime.acquisition_samples >= MIN_ACQUISITION_SAMPLES
                && c.runtime.contended >= MIN_CONTENDED
                && r.pressure.unwrap_or(0.0) >= MIN_PRESSURE
                && low_rate >= thresholds.contention;
            evident.then_some((m, low_rate))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let (m, low_rate) = hot;
    let others = g
        .members
        .iter()
        .filter(|&&o| o != m)
        .map(|&o| &table.locks[o]);
    let mut rest = Counts::default();
    for o in others {
        rest.runtime.acquisitions = rest
            .runtime
            .acquisitions
            .saturating_add(o.counts.runtime.acquisitions);
        rest.runtime.acquisition_samples = rest
            .runtime
            .acquisition_samples
            .saturating_add(o.counts.runtime.acquisition_samples);
        rest.runtime.contended = rest
            .runtime
            .contended
            .saturating_add(o.counts.runtime.contended);
    }
    if rest.runtime.acquisition_samples < MIN_ACQUISITION_SAMPLES {
        return None;
    }
    let rest_high_rate = ratio(rest.runtime.contended as f64, acquisitions_low(&rest));
    if low_rate < ASYMMETRY * rest_high_rate {
        return None;
    }
    let r = &table.locks[m];
    let member_acquisitions = r
        .counts
        .runtime
        .acquisitions
        .max(r.counts.runtime.contended);
    let member_rate = r.counts.runtime.contended as f64 / member_acquisitions as f64;
    let rest_acquisitions = rest.runtime.acquisitions.max(rest.runtime.contended);
    let rest_rate = ratio(rest.runtime.contended as f64, rest_acquisitions as f64);
    let element = element_name(table, g, m).unwrap_or_else(|| r.name.clone());
    let evidence = vec![
        ("member", Value::Name(r.name.clone())),
        ("element", Value::Name(element)),
        ("member_contention_rate", Value::Share(member_rate)),
        ("member_acquisitions", Value::Count(member_acquisitions)),
        ("member_contended", Value::Count(r.counts.runtime.contended)),
        (
            "member_share_of_acquisitions",
            Value::Share(ratio(
                member_acquisitions as f64,
                member_acquisitions.saturating_add(rest_acquisitions) as f64,
            )),
        ),
        ("member_pressure", Value::Share(r.pressure.unwrap_or(0.0))),
        ("others", Value::Count(g.members.len() as u64 - 1)),
        ("others_contention_rate", Value::Share(rest_rate)),
        ("others_acquisitions", Value::Count(rest_acquisitions)),
        (
            "factor",
            Value::Factor(if rest_rate > 0.0 {
                member_rate / rest_rate
            } else {
                f64::INFINITY
            }),
        ),
    ];
    Some(Finding {
        kind: Kind::AsymmetricContention,
        subject: s.name.to_owned(),
        pid: s.pid,
        lock_kind: s.kind,
        locks: vec![s.name.to_owned(), r.name.clone()],
        evidence,
        text: "a hot member: {element} is contended in {member_contention_rate} of its \
               ~{member_acquisitions} acquisitions ({member_share_of_acquisitions} of the \
               group's; pressure {member_pressure}), the other {others} members in \
               {others_contention_rate} of theirs"
            .to_owned(),
        fix: "distribute the contention: a better hash, more buckets, or split the hot data \
              {element} guards"
            .to_owned(),
        cost_ns: g.counts.runtime.wait_ns,
    })
}

/// `array[i]` for member `m` of a group of one array symbol, the element size being the
/// greatest common divisor of the members' distances (none for other groups).
pub(super) fn element_name(table: &LockTable, g: &LockGroup, m: usize) -> Option<String> {
    let base = g.name.strip_suffix("[]")?;
    let offset = |i: usize| -> Option<u64> {
        let r = &table.locks[i];
        if r.naming != Naming::Symbol {
            return None;
        }
        match r.name.strip_prefix(base)? {
            "" => Some(0),
            rest => u64::from_str_radix(rest.strip_prefix("+0x")?, 16).ok(),
        }
    };
    let offsets: Vec<u64> = g
        .members
        .iter()
        .map(|&i| offset(i))
        .collect::<Option<_>>()?;
    let first = *offsets.iter().min()?;
    let stride = offsets.iter().fold(0, |d, &o| gcd(d, o - first));
    let index = offset(m)?.checked_div(stride)?;
    Some(format!("{base}[{index}]"))
}

fn gcd(a: u64, b: u64) -> u64 {
    match b {
        0 => a,
        _ => gcd(b, a % b),
    }
}
