//! The lock view as JSON (`report --view locks --format json`, and the HTML report's copy):
//! every row and group, their counts, sites, pairs and holds, and the findings when given.
//! Same rows and filters as the text view (`--min-percent`, `--lock`).

use super::findings::findings_json;
use super::*;
use serde_json::{json, Value};

/// Writes the lock view as JSON without findings (`findings` and `findings_thresholds`
/// null): the HTML report's copy.
pub fn write_json(table: &LockTable, opts: &LockOptions, out: &mut dyn Write) -> io::Result<()> {
    write_json_with(table, opts, None, out)
}

/// Writes the lock view as JSON (every row; `--min-percent` and `--lock` filter like text),
/// with the findings when given.
pub fn write_json_with(
    table: &LockTable,
    opts: &LockOptions,
    found: Option<Findings>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let (rows, groups) = sorted(table, opts.sort);
    let rows: Vec<&LockRow> = match &opts.lock {
        Some(name) => rows.into_iter().filter(|r| &r.name == name).collect(),
        None if opts.min_percent > 0.0 => shown(&rows, opts).0,
        None => rows,
    };
    let counts = |c: &Counts, pressure: Option<f64>| {
        json!({
            "acquisitions": c.runtime.acquisitions,
            "acquisitions_interval": c.acquisitions_interval(INTERVAL_ERRORS),
            "acquisition_samples": c.runtime.acquisition_samples,
            "try_acquired": c.runtime.try_acquired,
            "try_failed": c.runtime.try_failed,
            "try_attempts": c.try_attempts(),
            "contended": c.runtime.contended,
            "contended_measured": c.runtime.contended_measured,
            "contention_rate": c.contention_rate(),
            "wait_ns": c.runtime.wait_ns,
            "max_wait_ns": c.runtime.max_wait_ns,
            "peak_waiters": c.runtime.peak_waiters,
            "blame_ns": c.blame_ns,
            "held_ns": c.held_ns,
            "blocked_ns": c.blocked_ns,
            "contended_holds": c.runtime.contended_holds,
            "timed_holds": c.runtime.timed_holds,
            "contended_hold_ns": c.runtime.contended_hold_ns,
            "contended_hold_avg_ns": c.contended_hold_avg(),
            "lock_use_ns": c.lock_use_ns,
            "pressure": pressure,
        })
    };
    let waits_for = |kind: Option<WaitKind>, c: &Counts| {
        kind.map(|k| match waits_for_a_lock(k, c) {
            true => "lock",
            false => "event",
        })
    };
    let sites = |v: &[(crate::attribution::locks::Site, u64)]| -> Vec<Value> {
        v.iter()
            .map(|(s, ns)| json!({"caller": s.caller, "lock_function": s.lock_function, "ns": ns}))
            .collect()
    };
    let locks: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!({
                "name": r.name,
                "naming": r.naming.name(),
                "kind": r.kind.map(|k| k.name()),
                "waits_for": waits_for(r.kind, &r.counts),
                "pid": r.pid,
                "address": format!("{:#x}", r.address),
                "group": r.group,
                "instances": r.instances,
                "counts": counts(&r.counts, r.pressure),
                "waiters": sites(r.waiters()),
                "holders": sites(r.holders()),
                "longest_holds": sites(r.longest_holds()),
                "mean_holds": sites(r.mean_holds()),
                "blocked": sites(r.blocked()),
                "pairs": r.pairs().iter().map(|p| json!({
                    "waiter": p.waiter.caller,
                    "holder": p.holder.caller,
                    "ns": p.ns,
                })).collect::<Vec<_>>(),
                "inside": code_sites(r.inside()),
                "late_work": code_sites(r.late_work()),
                "chains": r.chains().iter().map(|c| json!({
                    "holder": c.holder.caller,
                    "to_lock": c.to_lock,
                    "to_holder": c.to_holder.caller,
                    "ns": c.ns,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let groups: Vec<Value> = groups
        .iter()
        .filter(|g| opts.lock.as_ref().map_or(true, |n| &g.name == n))
        .map(|g| {
            json!({
                "name": g.name,
                "kind": g.kind.map(|k| k.name()),
                "waits_for": waits_for(g.kind, &g.counts),
                "pid": g.pid,
                "members": g.members.iter().map(|&m| table.locks[m].name.clone()).collect::<Vec<_>>(),
                "counts": counts(&g.counts, g.pressure),
            })
        })
        .collect();
    let mut doc = json!({
        "schema": SCHEMA,
        "version": VERSION,
        "available": table.available,
        "sort": opts.sort.name(),
        "running_ns": table.running_ns,
        "acquisitions_counted": table.acquisitions_counted,
        "acquisition_sampling_period": crate::format::ACQUISITION_SAMPLING_PERIOD,
        "untabled_events": table.untabled_events,
        "init_sites_displaced": table.init_sites_displaced,
        "chains_cut_ns": table.chains_cut_ns,
        "locks": locks,
        "groups": groups,
    });
    let (list, thresholds) = match found {
        Some(found) => findings_json(found, opts, table),
        None => (Value::Null, Value::Null),
    };
    doc["findings"] = list;
    doc["findings_thresholds"] = thresholds;
    serde_json::to_writer_pretty(&mut *out, &doc)?;
    writeln!(out)
}

/// Code sites (`caller -> function`, as `inside` and `late_work` keep them) as JSON.
fn code_sites(sites: &[(Site, u64)]) -> Vec<Value> {
    sites
        .iter()
        .map(|(s, ns)| {
            json!({
                "function": if s.lock_function.is_empty() { &s.caller } else { &s.lock_function },
                "caller": if s.lock_function.is_empty() { None } else { Some(&s.caller) },
                "ns": ns,
            })
        })
        .collect()
}
