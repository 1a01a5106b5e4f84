//! The lock view, `report --view locks`: the lock table ([`LockTable`]) as text or JSON.
//!
//! Job: a table of locks and groups sorted by the chosen column (blame by default), each
//! lock followed by who waited behind whom; `--lock NAME` shows one lock (or group) in
//! full. Says which counts are exact and which are sampled and scaled, and says so plainly
//! when the profile predates lock tables. Ends with the findings
//! ([`crate::attribution::findings`]): each in words, its `{key}`s filled in with its
//! evidence, formatted here (durations, percentages, rates).
//!
//! Invariants: rows are filtered by `--min-percent` of the sort column's total and never
//! reordered otherwise; findings only by `--lock` (those about that lock or group); JSON
//! carries every row ("blameprof-locks" version 2, docs/report-json.md). Not
//! async-signal-safe (allocates).
//!
//! Files: this one writes the table; `locks/findings.rs` writes the findings.

mod findings;
mod json;

pub use findings::{write_findings_text, Findings};

pub use json::{write_json, write_json_with};

use super::units::{format_value, percent};
use crate::attribution::locks::{
    waits_for_a_lock, Chain, Counts, LockGroup, LockRow, LockTable, Pair, Site,
};
use crate::format::WaitKind;
use std::io::{self, Write};

/// Schema name and version of the JSON document (version 2 added the findings).
pub const SCHEMA: &str = "blameprof-locks";
pub const VERSION: u32 = 3;

/// What the rows are sorted and filtered by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    Blame,
    Wait,
    Contended,
    Acquisitions,
    Held,
}

impl SortBy {
    /// The column for a `--metric` name: blame (and `blame.<kind>`), idleness or wait,
    /// contended, acquisitions, held.contended (and `held.contended.<kind>`, or `held`).
    pub fn parse(metric: &str) -> Option<SortBy> {
        let base = metric.split('.').next().unwrap_or(metric);
        Some(match base {
            "held" => SortBy::Held,
            "blame" => SortBy::Blame,
            "idleness" | "wait" => SortBy::Wait,
            "contended" => SortBy::Contended,
            "acquisitions" => SortBy::Acquisitions,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            SortBy::Blame => "blame",
            SortBy::Wait => "wait",
            SortBy::Contended => "contended",
            SortBy::Acquisitions => "acquisitions",
            SortBy::Held => "held.contended",
        }
    }

    fn of(self, c: &Counts) -> u64 {
        match self {
            SortBy::Blame => c.blame_ns,
            SortBy::Wait => c.runtime.wait_ns,
            SortBy::Contended => c.runtime.contended,
            SortBy::Acquisitions => c.runtime.acquisitions,
            SortBy::Held => c.held_ns,
        }
    }
}

/// How to show the table.
#[derive(Debug, Clone)]
pub struct LockOptions {
    pub sort: SortBy,
    /// Hide locks under this percentage of the sort column's total.
    pub min_percent: f64,
    /// Show only the lock or group with this name, in full.
    pub lock: Option<String>,
    /// Pairs shown under each lock in the table.
    pub pairs_per_lock: usize,
}

/// Sorts the table's rows and groups by `sort` (largest first; the table's own order
/// breaks ties).
fn sorted(table: &LockTable, sort: SortBy) -> (Vec<&LockRow>, Vec<&LockGroup>) {
    let mut rows: Vec<&LockRow> = table.locks.iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(sort.of(&r.counts)));
    let mut groups: Vec<&LockGroup> = table.groups.iter().collect();
    groups.sort_by_key(|g| std::cmp::Reverse(sort.of(&g.counts)));
    (rows, groups)
}

/// Rows above the threshold, and how many were hidden.
fn shown<'a>(rows: &[&'a LockRow], opts: &LockOptions) -> (Vec<&'a LockRow>, usize) {
    let total: u64 = rows.iter().map(|r| opts.sort.of(&r.counts)).sum();
    let keep: Vec<&LockRow> = rows
        .iter()
        .copied()
        .filter(|r| {
            let v = opts.sort.of(&r.counts);
            v > 0 && percent(v, total) >= opts.min_percent
        })
        .collect();
    let hidden = rows.len() - keep.len();
    (keep, hidden)
}

/// Writes the lock view as text.
pub fn write_text(table: &LockTable, opts: &LockOptions, out: &mut dyn Write) -> io::Result<()> {
    if !table.available {
        writeln!(
            out,
            "This profile was recorded by a blameprof older than lock tables (format version \
             1): it holds no per-lock counts. Record it again to see them."
        )?;
        return Ok(());
    }
    if table.locks.is_empty() {
        writeln!(
            out,
            "No locks: no thread waited for a lock or event, and no acquisition was sampled."
        )?;
        return write_notes(table, out);
    }
    let (rows, groups) = sorted(table, opts.sort);
    if let Some(name) = &opts.lock {
        return write_one(table, &rows, &groups, name, out);
    }
    // Locks first, then the waits for events (threads idle until signalled, posted or
    // joined): contention and its culprits are the locks'.
    let (locks, events): (Vec<&LockRow>, Vec<&LockRow>) = rows.iter().partition(|r| !is_event(r));
    // Each section's rows by their share of its own total: the idle pools' hours of waiting
    // for work must not hide the locks.
    let (keep_locks, _) = shown(&locks, opts);
    let (keep_events, _) = shown(&events, opts);
    let hides = |hidden: usize| match hidden {
        0 => String::new(),
        _ => format!("; --min-percent {} hides the rest", opts.min_percent),
    };
    let sort = opts.sort.name();
    writeln!(
        out,
        "Locks by {sort} ({} of {} shown{}):",
        keep_locks.len(),
        locks.len(),
        hides(locks.len() - keep_locks.len())
    )?;
    write_header(out)?;
    write_rows(out, &keep_locks, opts)?;
    if !events.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "Waits for events by {sort} ({} of {} shown{}): condition variables, semaphores \
             and futex words no lock is built on, barriers, joins; threads idle until \
             signalled, posted or joined, not contention:",
            keep_events.len(),
            events.len(),
            hides(events.len() - keep_events.len())
        )?;
        write_header(out)?;
        write_rows(out, &keep_events, opts)?;
    }
    // Groups of locks, then groups of waits for events, as the rows.
    let (lock_groups, event_groups): (Vec<&LockGroup>, Vec<&LockGroup>) = groups
        .iter()
        .copied()
        .filter(|g| opts.sort.of(&g.counts) > 0)
        .partition(|g| !waits_for_events(g.kind, &g.counts));
    for (groups, heading, members) in [
        (
            lock_groups,
            "Groups (locks in one array, or made or first waited on at one site):",
            "locks",
        ),
        (
            event_groups,
            "Groups of waits for events (in one array, or made or first waited on at one \
             site):",
            "objects",
        ),
    ] {
        if groups.is_empty() {
            continue;
        }
        writeln!(out)?;
        writeln!(out, "{heading}")?;
        write_header(out)?;
        for g in groups {
            let label = format!("{} ({} {members})", g.name, g.members.len());
            write_counts_line(out, &label, g.kind, &g.counts, g.pressure)?;
        }
    }
    write_notes(table, out)
}

/// Whether a row's waits are for events: a barrier, a join, or a condition variable,
/// semaphore or futex word no lock is built on, as the summary tells them
/// ([`waits_for_a_lock`]).
fn is_event(r: &LockRow) -> bool {
    waits_for_events(r.kind, &r.counts)
}

/// Whether waits of `kind` counted in `counts` are for events ([`waits_for_a_lock`]).
fn waits_for_events(kind: Option<WaitKind>, counts: &Counts) -> bool {
    kind.is_some_and(|k| !waits_for_a_lock(k, counts))
}

/// The rows' counts lines, each with its first pairs.
fn write_rows(out: &mut dyn Write, rows: &[&LockRow], opts: &LockOptions) -> io::Result<()> {
    for r in rows {
        write_counts_line(out, &r.name, r.kind, &r.counts, r.pressure)?;
        for p in r.pairs().iter().take(opts.pairs_per_lock) {
            write_pair(out, p, waiter_total(r, p))?;
        }
        if let Some(c) = r.chains().first() {
            write_chain(out, r, c)?;
        }
        if let Some((site, ns)) = r.late_work().first() {
            writeln!(
                out,
                "      late work: {} kept them waiting {} ({:.0}% of the blame)",
                site.label(),
                format_value(*ns, "ns"),
                percent(*ns, r.counts.blame_ns)
            )?;
        }
    }
    Ok(())
}

/// Standard errors of the stated interval of a lock's acquisitions
/// ([`Counts::acquisitions_interval`]): of a normal error, 997 in 1000 such intervals hold
/// the true count.
const INTERVAL_ERRORS: f64 = 3.0;

/// A lock's acquisitions, exact or as the estimate and its interval.
fn write_acquisitions(out: &mut dyn Write, c: &Counts) -> io::Result<()> {
    let n = c.runtime.acquisitions;
    match c.acquisitions_interval(INTERVAL_ERRORS) {
        (low, high) if low == n && high == n => {
            writeln!(
                out,
                "  Acquisitions: {} (every one counted).",
                findings::thousands(n)
            )
        }
        (low, high) => writeln!(
            out,
            "  Acquisitions: about {}, between {} and {} (3 standard errors of {} sampled ones).",
            findings::thousands(n),
            findings::thousands(low),
            findings::thousands(high),
            findings::thousands(c.runtime.acquisition_samples)
        ),
    }
}

fn kind_name(r: &LockRow) -> &'static str {
    r.kind.map_or("?", |k| k.name())
}

fn write_header(out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "  {:<34} {:<7} {:>11} {:>10} {:>6} {:>11} {:>10} {:>10} {:>10} {:>5} {:>10} {:>7} {:>10} {:>10}",
        "lock",
        "kind",
        "acquired~",
        "contended",
        "rate",
        "try failed",
        "wait",
        "avg wait",
        "max wait",
        "peak",
        "avg hold",
        "press.",
        "blame",
        "held~"
    )
}

fn write_counts_line(
    out: &mut dyn Write,
    name: &str,
    kind: Option<WaitKind>,
    c: &Counts,
    pressure: Option<f64>,
) -> io::Result<()> {
    let avg = c
        .runtime
        .wait_ns
        .checked_div(c.runtime.contended)
        .unwrap_or(0);
    let opt_pct =
        |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{:.1}%", v * 100.0));
    writeln!(
        out,
        "  {:<34} {:<7} {:>11} {:>10} {:>6} {:>11} {:>10} {:>10} {:>10} {:>5} {:>10} {:>7} {:>10} {:>10}",
        name,
        kind.map_or("?", WaitKind::name),
        if c.runtime.acquisition_samples > 0 {
            c.runtime.acquisitions.to_string()
        } else {
            "-".to_owned()
        },
        c.runtime.contended,
        opt_pct(c.contention_rate()),
        if c.runtime.try_failed > 0 {
            format!("{}/{}", c.runtime.try_failed, c.try_attempts())
        } else {
            "0".to_owned()
        },
        format_value(c.runtime.wait_ns, "ns"),
        format_value(avg, "ns"),
        format_value(c.runtime.max_wait_ns, "ns"),
        c.runtime.peak_waiters,
        c.contended_hold_avg()
            .map_or_else(|| "-".to_owned(), |ns| format_value(ns, "ns")),
        opt_pct(pressure),
        format_value(c.blame_ns, "ns"),
        if kind.is_some_and(WaitKind::names_its_holder) {
            format_value(c.held_ns, "ns")
        } else {
            "-".to_owned()
        },
    )
}

/// One hop of a chain, from the waiters behind its holder (the pair with the most waiting
/// behind it): `lookup -> table_lock -> insert -> log_lock -> flush_log`.
fn write_chain(out: &mut dyn Write, r: &LockRow, c: &Chain) -> io::Result<()> {
    let waiter = r
        .pairs()
        .iter()
        .find(|p| p.holder == c.holder)
        .map_or(String::new(), |p| format!("{} -> ", p.waiter.caller));
    writeln!(
        out,
        "      chain: {waiter}{} -> {} -> {} -> {}: {} of {}'s blame passed on (root)",
        r.name,
        c.holder.caller,
        c.to_lock,
        c.to_holder.caller,
        format_value(c.ns, "ns"),
        c.holder.caller
    )
}

/// The waiting of the pair's waiter site on its lock.
fn waiter_total(r: &LockRow, p: &Pair) -> u64 {
    r.waiters()
        .iter()
        .find(|(s, _)| *s == p.waiter)
        .map_or(0, |w| w.1)
}

fn write_pair(out: &mut dyn Write, p: &Pair, waiter_total: u64) -> io::Result<()> {
    writeln!(
        out,
        "      {} waited {} behind {} ({:.0}% of its wait here)",
        p.waiter.caller,
        format_value(p.ns, "ns"),
        p.holder.caller,
        percent(p.ns, waiter_total)
    )
}

/// `--lock NAME`: one lock or group in full.
fn write_one(
    table: &LockTable,
    rows: &[&LockRow],
    groups: &[&LockGroup],
    name: &str,
    out: &mut dyn Write,
) -> io::Result<()> {
    if let Some(g) = groups.iter().find(|g| g.name == name) {
        writeln!(out, "Group {} ({} locks):", g.name, g.members.len())?;
        write_header(out)?;
        write_counts_line(out, "all members", g.kind, &g.counts, g.pressure)?;
        for &m in &g.members {
            let r = &table.locks[m];
            write_counts_line(out, &r.name, r.kind, &r.counts, r.pressure)?;
        }
        return write_notes(table, out);
    }
    let Some(r) = rows.iter().find(|r| r.name == name) else {
        return writeln!(out, "No lock or group named '{name}' in this profile.");
    };
    writeln!(
        out,
        "Lock {} ({} at {:#x} in process {}, named by {}{}{}):",
        r.name,
        kind_name(r),
        r.address,
        r.pid,
        r.naming.name(),
        r.group
            .as_ref()
            .map_or(String::new(), |g| format!("; group {g}")),
        if r.instances > 1 {
            format!("; {} locks lived at this address", r.instances)
        } else {
            String::new()
        }
    )?;
    write_header(out)?;
    write_counts_line(out, &r.name, r.kind, &r.counts, r.pressure)?;
    writeln!(out)?;
    write_acquisitions(out, &r.counts)?;
    writeln!(out, "  Waiters (where threads waited for it):")?;
    for (s, ns) in r.waiters() {
        writeln!(out, "    {:>10}  {}", format_value(*ns, "ns"), s.label())?;
    }
    writeln!(
        out,
        "  Holders (where the waiting was made: blame at the release):"
    )?;
    for (s, ns) in r.holders() {
        writeln!(out, "    {:>10}  {}", format_value(*ns, "ns"), s.label())?;
    }
    if !r.longest_holds().is_empty() {
        writeln!(
            out,
            "  Holds others waited for, per holder site (of the releases recorded): longest, \
             mean"
        )?;
        for (s, ns) in r.longest_holds() {
            let mean = r
                .mean_holds()
                .iter()
                .find(|(m, _)| m == s)
                .map_or(0, |m| m.1);
            writeln!(
                out,
                "    {:>10}  {:>10}  {}",
                format_value(*ns, "ns"),
                format_value(mean, "ns"),
                s.label()
            )?;
        }
    }
    writeln!(out, "  Who waited behind whom:")?;
    for p in r.pairs() {
        write_pair(out, p, waiter_total(r, p))?;
    }
    if r.kind.is_some_and(WaitKind::names_its_holder) {
        write_inside(out, r)?;
    }
    if !r.blocked().is_empty() {
        write_blocked(out, r)?;
    }
    if !r.chains().is_empty() {
        writeln!(
            out,
            "  Chains (its holders' blame while they were themselves waiting inside their \
             holds, passed on to what they waited for: root):"
        )?;
        for c in r.chains() {
            write_chain(out, r, c)?;
        }
    }
    if !r.late_work().is_empty() {
        writeln!(
            out,
            "  Late work (what the threads that ended the waits computed while the others \
             waited: their blame, moved there):"
        )?;
        write_site_shares(out, r.late_work(), r.counts.blame_ns)?;
    }
    write_notes(table, out)
}

/// Where a lock's holders computed while others waited.
fn write_inside(out: &mut dyn Write, r: &LockRow) -> io::Result<()> {
    writeln!(
        out,
        "  Inside its contended holds (where holders computed while others waited: \
         held.contended):"
    )?;
    if r.inside().is_empty() {
        writeln!(out, "    none sampled")?;
    }
    write_site_shares(out, r.inside(), r.counts.held_ns)
}

/// Where a lock's holders blocked in a call while others waited.
fn write_blocked(out: &mut dyn Write, r: &LockRow) -> io::Result<()> {
    writeln!(
        out,
        "  Blocked inside its contended holds (holders in a sleep, poll or wait while others \
         waited: held.blocked):"
    )?;
    write_site_shares(out, r.blocked(), r.counts.blocked_ns)
}

/// One line per site: its time and its share of `total`.
fn write_site_shares(out: &mut dyn Write, sites: &[(Site, u64)], total: u64) -> io::Result<()> {
    for (s, ns) in sites {
        writeln!(
            out,
            "    {:>10}  {:>5.1}%  {}",
            format_value(*ns, "ns"),
            percent(*ns, total),
            s.label()
        )?;
    }
    Ok(())
}

fn write_notes(table: &LockTable, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "Exact: contended, try failed (of tries: failed ones, plus successful ones sampled), \
         waits. Sampled and scaled: acquired~ (one acquisition in about {} per thread, fewer in threads taking millions \
         a second, every one in threads taking fewer than about 10,000 a second; each \
         counting for those until the next). Blame and the waiting per site come from the \
         lock's samples; who waited behind whom splits each holder's blame over the waits \
         recorded during its holds (matched in time; by the waiters' shares of all waiting \
         where none was recorded, or in profiles before format version 3); the rest of a \
         wait was spent while the lock was free. avg hold: \
         the average length of the holds others waited for (a mutex's from its start, or \
         else from its first waiter's arrival; sampled like the blame; rwlocks' untimed). \
         held~: the \
         holders' CPU time while others waited for the lock (timer samples, held.contended; \
         mutexes and rwlock writers: readers, spin locks and futex words name no holder); \
         'report --metric held.contended' shows that code in the call tree.",
        crate::format::ACQUISITION_SAMPLING_PERIOD
    )?;
    if !table.acquisitions_counted {
        writeln!(
            out,
            "Acquisitions were not counted in some process ('-'): its runtime could not reach \
             its thread-local counter (not x86-64, or the runtime was not preloaded)."
        )?;
    }
    writeln!(
        out,
        "press.: critical section pressure, the lock's waiting over the threads' running time \
         ({}); '-' for waits for events, and for locks built on a condition variable or a \
         semaphore (CPython's GIL), whose holds nobody timed.",
        format_value(table.running_ns, "ns")
    )?;
    if table.untabled_events > 0 {
        writeln!(
            out,
            "{} lock events found no room in the runtime's lock table and are in no row.",
            table.untabled_events
        )?;
    }
    if table.chains_cut_ns > 0 {
        writeln!(
            out,
            "{} of blame was still passing along chains of waits after {} hops (threads \
             waiting on each other's locks in turn, or a longer chain): its root stays at the \
             release it reached.",
            format_value(table.chains_cut_ns, "ns"),
            crate::attribution::chains::MAX_HOPS
        )?;
    }
    if table.init_sites_displaced > 0 {
        writeln!(
            out,
            "{} lock inits lost their init site (more locks alive at once than the runtime's \
             65,536 slots, or locks freed without destroy): such locks are named another way, \
             and groups by init site count fewer locks than the program made.",
            findings::thousands(table.init_sites_displaced)
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::findings::{evidence_text, short_number, thousands};
    use super::*;
    use crate::attribution::findings::{Finding, Kind, Thresholds, Value as Evidence};
    use crate::attribution::testutil::{lock_table_of, lock_table_process};
    use serde_json::Value;

    fn opts() -> LockOptions {
        LockOptions {
            sort: SortBy::Blame,
            min_percent: 1.0,
            lock: None,
            pairs_per_lock: 3,
        }
    }

    fn text(table: &LockTable, opts: &LockOptions) -> String {
        let mut out = Vec::new();
        write_text(table, opts, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// The whole table as a user reads it (golden): the row, then who waited behind whom.
    #[test]
    fn the_table_reads_as_expected() {
        let t = text(&lock_table_of(lock_table_process()), &opts());
        let head: Vec<&str> = t.lines().take(6).collect();
        let want = [
            "Locks by blame (1 of 1 shown):",
            "  lock                               kind      acquired~  contended   rate  \
             try failed       wait   avg wait   max wait  peak   avg hold  press.      blame      \
             held~",
            "  lookup -> pthread_mutex_lock       mutex          1000         40   4.0%       \
             3/103    7.00 ms  175.00 us    1.00 ms     3  200.00 us   23.3%    6.30 ms    \
             2.00 ms",
            "      lookup waited 4.11 ms behind insert (69% of its wait here)",
            "      lookup waited 1.29 ms behind lookup (21% of its wait here)",
            "      insert waited 685.71 us behind insert (69% of its wait here)",
        ];
        assert_eq!(head, want, "\n{t}");
        assert!(t.contains("Sampled and scaled: acquired~"), "{t}");
        assert!(t.contains("press.: critical section pressure"), "{t}");
    }

    #[test]
    fn waits_for_events_come_after_the_locks_and_never_hide_them() {
        // An idle pool's condition variable with 1,000 times the lock's blame: listed after
        // it, in a section of its own, and each section pruned by its own total.
        let mut table = lock_table_of(lock_table_process());
        let mut pool = table.locks[0].clone();
        pool.name = "pool_wait -> pthread_cond_wait".into();
        pool.kind = Some(WaitKind::CondVar);
        pool.pressure = None;
        // Waited on by code that names no lock: an event's.
        pool.counts.lock_use_ns = 0;
        pool.counts.blame_ns *= 1000;
        table.locks.insert(0, pool);
        let t = text(&table, &opts());
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "Locks by blame (1 of 1 shown):", "\n{t}");
        assert!(
            lines[2].starts_with("  lookup -> pthread_mutex_lock"),
            "\n{t}"
        );
        let events = lines
            .iter()
            .position(|l| l.starts_with("Waits for events by blame (1 of 1 shown): "))
            .unwrap_or_else(|| panic!("no section of events:\n{t}"));
        assert!(events > 2, "\n{t}");
        assert!(
            lines[events + 2].starts_with("  pool_wait -> pthread_cond_wait"),
            "\n{t}"
        );
    }

    #[test]
    fn one_lock_in_full_lists_waiters_holders_and_pairs() {
        let o = LockOptions {
            lock: Some("lookup -> pthread_mutex_lock".into()),
            ..opts()
        };
        let t = text(&lock_table_of(lock_table_process()), &o);
        for want in [
            "Lock lookup -> pthread_mutex_lock (mutex at 0x7f000000a000 in process 100, named by first wait):",
            "  Waiters (where threads waited for it):",
            "       6.00 ms  lookup -> pthread_mutex_lock",
            "  Holders (where the waiting was made: blame at the release):",
            "       4.80 ms  insert -> pthread_mutex_unlock",
            "      insert waited 214.28 us behind lookup (21% of its wait here)",
            "  Inside its contended holds (where holders computed while others waited: \
             held.contended):",
            "       2.00 ms  100.0%  insert -> g",
        ] {
            assert!(t.lines().any(|l| l == want), "no line {want:?} in\n{t}");
        }
    }

    #[test]
    fn json_carries_every_count_and_pair() {
        let mut out = Vec::new();
        let o = LockOptions {
            min_percent: 0.0,
            ..opts()
        };
        write_json(&lock_table_of(lock_table_process()), &o, &mut out).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            (v["schema"].as_str(), v["version"].as_u64()),
            (Some(SCHEMA), Some(3))
        );
        assert_eq!(v["running_ns"], 30_000_000);
        let l = &v["locks"][0];
        assert_eq!(l["naming"], "first wait");
        assert_eq!(l["address"], "0x7f000000a000");
        let c = &l["counts"];
        for (field, want) in [
            ("acquisitions", 1000),
            ("try_failed", 3),
            ("try_attempts", 103),
            ("contended", 40),
            ("wait_ns", 7_000_000),
            ("max_wait_ns", 1_000_000),
            ("peak_waiters", 3),
            ("blame_ns", 6_300_000),
            ("held_ns", 2_000_000),
            ("contended_holds", 30),
            ("timed_holds", 20),
            ("contended_hold_ns", 4_000_000),
            ("contended_hold_avg_ns", 200_000),
        ] {
            assert_eq!(c[field], want, "{field}");
        }
        assert_eq!(l["pairs"][0]["waiter"], "lookup");
        assert_eq!(l["pairs"][0]["holder"], "insert");
        assert_eq!(l["pairs"][0]["ns"], 4_114_285);
        assert_eq!(l["waiters"][0]["lock_function"], "pthread_mutex_lock");
        assert_eq!(l["inside"][0]["function"], "g");
        assert_eq!(l["inside"][0]["caller"], "insert");
    }

    #[test]
    fn an_unknown_lock_is_said_to_be_unknown() {
        let o = LockOptions {
            lock: Some("no_such_lock".into()),
            ..opts()
        };
        let t = text(&lock_table_of(lock_table_process()), &o);
        assert!(
            t.starts_with("No lock or group named 'no_such_lock'"),
            "{t}"
        );
    }

    fn finding(kind: Kind, subject: &str) -> Finding {
        Finding {
            kind,
            subject: subject.to_owned(),
            pid: 100,
            lock_kind: Some(WaitKind::Mutex),
            locks: vec![subject.to_owned()],
            evidence: vec![
                ("contention_rate", Evidence::Share(0.623)),
                ("acquisitions", Evidence::Count(1204)),
                ("acquisitions_per_s", Evidence::PerSecond(301.2)),
                ("hold_avg_ns", Evidence::Ns(5_020_000)),
                ("site", Evidence::Name("reload_config".into())),
                ("factor", Evidence::Factor(f64::INFINITY)),
                ("tid", Evidence::Id(12345)),
                (
                    "threads",
                    Evidence::Threads(vec![("parse".into(), 1), ("render".into(), 5)]),
                ),
            ],
            text: "{contention_rate} of ~{acquisitions} acquisitions contended, \
                   {acquisitions_per_s} acquisitions/s, holds avg {hold_avg_ns}"
                .into(),
            fix: "shorten {site} ({threads}; {factor}, thread {tid}; {unknown})".into(),
            cost_ns: 15_000_000,
        }
    }

    fn findings_text(table: &LockTable, list: &[Finding], opts: &LockOptions) -> String {
        let found = Findings {
            list,
            thresholds: Thresholds::default(),
        };
        let mut out = Vec::new();
        write_findings_text(table, found, opts, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// The findings section as a user reads it (golden).
    #[test]
    fn findings_read_as_expected() {
        let table = lock_table_of(lock_table_process());
        let list = [finding(Kind::LongCriticalSections, "config_lock")];
        let t = findings_text(&table, &list, &opts());
        let want = "\nFindings (contention >= 10%, >= 1000 acquisitions/s):\n  \
                    1. long critical sections: config_lock  (mutex)\n     costs: 15.00 ms, \
                    50.0% of the threads' running time\n     evidence: 62.3% of \
                    ~1,204 acquisitions contended, 301 acquisitions/s, holds avg 5.02 ms\n     \
                    fix: shorten reload_config (parse 1, render 5; unbounded, thread 12345; \
                    {unknown})\n";
        assert_eq!(t, want);
        // None, and none about the lock `--lock` names.
        let t = findings_text(&table, &[], &opts());
        assert_eq!(
            t,
            "\nFindings: none (contention >= 10%, >= 1000 acquisitions/s)\n"
        );
        let o = LockOptions {
            lock: Some("other_lock".into()),
            ..opts()
        };
        let t = findings_text(&table, &list, &o);
        assert!(t.starts_with("\nFindings about other_lock: none"), "{t}");
        // Without lock data, only load imbalance is looked for.
        let t = findings_text(&LockTable::default(), &[], &opts());
        assert!(t.contains("only load imbalance is looked for"), "{t}");
    }

    #[test]
    fn numbers_read_with_separators_and_thresholds_as_given() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(33_460_960), "33,460,960");
        assert_eq!(short_number(7.000000000000001), "7");
        assert_eq!(short_number(12.5), "12.5");
        assert_eq!(evidence_text(&Evidence::PerSecond(2.25)), "2.2");
        assert_eq!(evidence_text(&Evidence::Factor(567_134.9)), "567,135x");
        assert_eq!(evidence_text(&Evidence::Factor(2.04)), "2.0x");
    }

    #[test]
    fn json_carries_the_findings_their_evidence_and_thresholds() {
        let table = lock_table_of(lock_table_process());
        let list = [finding(Kind::CoarseLock, "lookup -> pthread_mutex_lock")];
        let found = Findings {
            list: &list,
            thresholds: Thresholds {
                contention: 0.2,
                rate: 500.0,
            },
        };
        let mut out = Vec::new();
        write_json_with(&table, &opts(), Some(found), &mut out).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        let f = &v["findings"][0];
        assert_eq!(f["kind"], "coarse_lock");
        assert_eq!(f["subject"], "lookup -> pthread_mutex_lock");
        assert_eq!((&f["pid"], &f["lock_kind"]), (&100.into(), &"mutex".into()));
        let e = &f["evidence"];
        assert_eq!(e["contention_rate"], 0.623);
        assert_eq!(e["acquisitions"], 1204);
        assert_eq!(e["hold_avg_ns"], 5_020_000);
        assert_eq!(e["tid"], 12345);
        assert_eq!(e["factor"], Value::Null, "an unbounded factor");
        assert_eq!(e["threads"]["render"], 5);
        assert!(
            f["text"].as_str().unwrap().starts_with("62.3% of ~1,204"),
            "{f}"
        );
        let t = &v["findings_thresholds"];
        assert_eq!(
            (&t["contention_rate"], &t["acquisitions_per_s"]),
            (&0.2.into(), &500.0.into())
        );
        assert_eq!(t["min_contended"], 20);
        // Its cost over its process's running time (30 ms), as its locks' pressure is.
        assert_eq!(f["cost_ns"], 15_000_000);
        assert_eq!(f["cost_share"], 0.5);
        // With another process in the table, still its own process's: the table's running
        // time is both processes'.
        let mut two = lock_table_of(lock_table_process());
        let mut other = two.locks[0].clone();
        (other.pid, other.running_ns) = (200, 90_000_000);
        two.locks.push(other);
        two.running_ns += 90_000_000;
        let mut out = Vec::new();
        write_json_with(&two, &opts(), Some(found), &mut out).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["findings"][0]["cost_share"], 0.5);
        // Without findings (the HTML report's copy): null.
        let mut out = Vec::new();
        write_json(&table, &opts(), &mut out).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            (&v["findings"], &v["findings_thresholds"]),
            (&Value::Null, &Value::Null)
        );
    }

    #[test]
    fn an_old_profile_says_it_has_no_lock_table() {
        let t = text(&LockTable::default(), &opts());
        assert!(t.contains("format version 1"), "{t}");
        assert!(t.contains("Record it again"), "{t}");
    }
}
