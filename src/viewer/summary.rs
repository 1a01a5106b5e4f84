//! The short summary `blameprof run` prints when the profiled program ends.
//!
//! Job: say how much was measured and lost, how, where the profile is, and which functions
//! used the most CPU time (the head of the flat view by exclusive "work", or by the first
//! metric when a profile has no "work"). When threads waited for locks, add the headline:
//! idleness and blame of lock waiting as shares of the effort, the application functions
//! that waited most for locks (victims, by idleness) and those that made others wait most
//! (culprits, by blame), each with the lock function it called and the call site (see
//! `lock_sites`). Waiting for events (condition variables, semaphores, barriers, joins,
//! futexes not used as locks: `attribution::wait_class`) is said on a line of its own, and
//! its waiters and wakers listed after the culprits, never among them. When the samples
//! say what threads waited on, and that is more than one kind of primitive, one that is not
//! a lock, or waits nobody is blamed for, idleness and blame are broken down by kind (the
//! derived metrics `idleness.<kind>`, `blame.<kind>`, `idleness.unblamed`). When much of
//! the waiting for locks is accounted for by no hold (mostly while the lock was free,
//! blamed on nobody by definition), a line says how much, so that idleness and blame that
//! differ are explained. All of that waiting part is in `waiting`; then the top locks and
//! the findings' names.
//!
//! Invariants: every line starts with `blameprof: `; without idleness and blame the lock
//! lines are absent, and without derived metrics the breakdown is; a list of victims or
//! culprits holds lock waiting only. Not async-signal-safe (allocates).

use super::style::Paint;
use super::text::location;
use super::units::{format_value, percent};
use super::{
    describe_contention, describe_held, describe_lost, describe_sources, lost_reasons, Prune,
    Report, View,
};
use crate::attribution::findings::Finding;
use crate::attribution::locks::LockTable;
use crate::attribution::metrics::{BLAME, IDLENESS, WORK};
use crate::attribution::{Analysis, ProcessSummary};
use crate::format::counters::{
    CONTENDED_ACQUISITIONS, CONTENDED_HOLDS, CONTENDED_HOLDS_NOTED, CONTENDED_HOLD_PERIOD_PEAK,
    CONTENDED_MEASURED, CONTENDED_PERIOD_PEAK, DROPPED_SIZE_LIMIT, EXECS_UNPROFILED,
    LOST_SAMPLE_COUNTERS, RECORDS_DROPPED_SIZE_LIMIT, TIMER_FAILURES, WRITE_ERRORS,
    WRITE_LAST_ERRNO,
};
use crate::format::read::Profile;
use std::io::{self, Write};

mod waiting;

const PREFIX: &str = "blameprof: ";

/// Counters the summary states on a line of their own.
const CONTENTION_COUNTERS: [&str; 6] = [
    CONTENDED_ACQUISITIONS,
    CONTENDED_MEASURED,
    CONTENDED_PERIOD_PEAK,
    CONTENDED_HOLDS,
    CONTENDED_HOLDS_NOTED,
    CONTENDED_HOLD_PERIOD_PEAK,
];

/// What `blameprof run -q` prints instead of the summary: a warning per damaged part and
/// one for the samples lost, summed over the processes of `profile` (whose samples need not
/// have been read); nothing for a sound profile.
pub fn write_losses(profile: &Profile, out: &mut dyn Write) -> io::Result<()> {
    write_damage(
        profile
            .processes
            .iter()
            .filter_map(|p| p.damage.as_ref())
            .chain(&profile.skipped),
        out,
    )?;
    let counter = |name| profile.processes.iter().map(|p| p.counter(name)).sum();
    let last_errno = profile
        .processes
        .iter()
        .map(|p| p.counter(WRITE_LAST_ERRNO))
        .find(|&e| e != 0)
        .unwrap_or(0);
    write_unwritten(
        counter(WRITE_ERRORS),
        last_errno,
        counter(DROPPED_SIZE_LIMIT),
        counter(RECORDS_DROPPED_SIZE_LIMIT),
        out,
    )?;
    let lost: Vec<(&str, u64)> = LOST_SAMPLE_COUNTERS
        .iter()
        .map(|&name| {
            (
                name,
                profile.processes.iter().map(|p| p.counter(name)).sum(),
            )
        })
        .collect();
    let total: u64 = lost.iter().map(|&(_, n)| n).sum();
    if total > 0 {
        writeln!(
            out,
            "{PREFIX}warning: {total} samples lost ({}); the profile is in {}",
            lost_reasons(lost),
            profile.path.display()
        )?;
    }
    Ok(())
}

/// Warnings for what the runtime could not write: `failed` bytes, the last failure's error
/// number (a full disk says so), and what the parts' size limit dropped.
fn write_unwritten(
    failed: u64,
    errno: u64,
    samples_over: u64,
    records_over: u64,
    out: &mut dyn Write,
) -> io::Result<()> {
    if failed > 0 {
        let why = i32::try_from(errno)
            .ok()
            .filter(|&e| e > 0)
            .map_or("unknown error".to_owned(), |e| {
                io::Error::from_raw_os_error(e).to_string()
            });
        let fix = if errno == libc::ENOSPC as u64 || errno == libc::EDQUOT as u64 {
            ": free some space, or profile to another disk with -o"
        } else {
            ""
        };
        writeln!(
            out,
            "{PREFIX}warning: {failed} bytes of the profile could not be written ({why}); \
             their samples are counted lost{fix}"
        )?;
    }
    if samples_over > 0 || records_over > 0 {
        writeln!(
            out,
            "{PREFIX}warning: the profile reached its size limit: {samples_over} samples and \
             {records_over} bytes of records were dropped (raise it with --max-size)"
        )?;
    }
    Ok(())
}

/// The warning for exec calls whose environment dropped the profiler: the images they
/// started are missing from the profile, which would otherwise look complete.
fn write_unprofiled_execs(execs: u64, out: &mut dyn Write) -> io::Result<()> {
    if execs == 0 {
        return Ok(());
    }
    use crate::format::protocol::{ENV_OUTPUT, RUNTIME_LIBRARY};
    writeln!(
        out,
        "{PREFIX}warning: {execs} exec call{} gave the new program an environment without \
         the profiler (no LD_PRELOAD of {RUNTIME_LIBRARY}, or no {ENV_OUTPUT}): the program \
         images started so are not in the profile",
        if execs == 1 { "" } else { "s" }
    )
}

/// A warning for a process that ran a few sampling periods of CPU time or more and wrote no
/// samples, or most of whose CPU time was in threads too short to be sampled: never an
/// empty profile without a word. `timer_failures`: the profile's count of threads left
/// without a timer.
fn write_unsampled(p: &ProcessSummary, timer_failures: u64, out: &mut dyn Write) -> io::Result<()> {
    let period = 1_000_000_000 / p.requested_hz.max(1);
    let cpu = p.ended_threads_cpu_ns;
    let short = p.short_threads_cpu_ns;
    let mostly_short = short * 2 > cpu;
    if cpu < 3 * period || (p.timer_samples > 0 && !mostly_short) {
        return Ok(());
    }
    let why = if mostly_short {
        format!(
            "{} of it in threads that each ran less than one sampling period ({} of CPU \
             time at {} Hz), which a CPU-time timer never reaches: raise -F",
            ns(short),
            ns(period),
            p.requested_hz
        )
    } else if timer_failures > 0 {
        format!("{timer_failures} thread timers could not be started or re-armed (timer_failures)")
    } else {
        "its threads' timers did not fire (a seccomp filter, or a signal the program took \
         over)"
            .to_owned()
    };
    let what = match p.timer_samples {
        0 => "no CPU sample".to_owned(),
        1 => format!("1 CPU sample ({} of work)", ns(p.timer_ns)),
        n => format!("{n} CPU samples ({} of work)", ns(p.timer_ns)),
    };
    writeln!(
        out,
        "{PREFIX}warning: process {} used {} of CPU time, with {what}: {why}",
        p.pid,
        ns(cpu)
    )
}

/// One warning per damaged part (the salvage mode read what precedes the damage).
fn write_damage<S: std::fmt::Display>(
    damage: impl IntoIterator<Item = S>,
    out: &mut dyn Write,
) -> io::Result<()> {
    for damage in damage {
        writeln!(out, "{PREFIX}warning: {damage} (the intact part was read)")?;
    }
    Ok(())
}

/// Writes the summary of `analysis` with the `top` heaviest functions, and the top locks
/// of `locks` (the profile's lock table, and the lock view's findings) when threads waited.
pub fn write(
    analysis: &Analysis,
    locks: Option<(&LockTable, &[Finding])>,
    top: usize,
    paint: Paint,
    out: &mut dyn Write,
) -> io::Result<()> {
    let a = analysis;
    let path = a.profile_path.display();
    let processes = match a.processes.len() {
        1 => "1 process".to_owned(),
        n => format!("{n} processes"),
    };
    let threads = match a.threads.len() {
        1 => "1 thread".to_owned(),
        n => format!("{n} threads"),
    };
    writeln!(out, "{PREFIX}profile: {path} ({processes}, {threads})")?;
    write_damage(&a.damage, out)?;
    writeln!(
        out,
        "{PREFIX}samples: {}, lost: {}",
        a.samples,
        describe_lost(a)
    )?;
    let counter = |name: &str| {
        a.counters
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |&(_, v)| v)
    };
    write_unwritten(
        counter(WRITE_ERRORS),
        counter(WRITE_LAST_ERRNO),
        counter(DROPPED_SIZE_LIMIT),
        counter(RECORDS_DROPPED_SIZE_LIMIT),
        out,
    )?;
    for p in &a.processes {
        write_unsampled(p, counter(TIMER_FAILURES), out)?;
    }
    write_unprofiled_execs(counter(EXECS_UNPROFILED), out)?;
    let notes: Vec<String> = a
        .counters
        .iter()
        .filter(|(name, _)| {
            !LOST_SAMPLE_COUNTERS.contains(&name.as_str())
                && !CONTENTION_COUNTERS.contains(&name.as_str())
                && ![
                    WRITE_ERRORS,
                    WRITE_LAST_ERRNO,
                    RECORDS_DROPPED_SIZE_LIMIT,
                    EXECS_UNPROFILED,
                ]
                .contains(&name.as_str())
        })
        .map(|(name, v)| format!("{name} {v}"))
        .collect();
    if !notes.is_empty() {
        writeln!(out, "{PREFIX}note: {}", notes.join(", "))?;
    }
    writeln!(out, "{PREFIX}sample source: {}", describe_sources(a))?;
    if let Some(contention) = describe_contention(a) {
        writeln!(out, "{PREFIX}contended lock acquisitions: {contention}")?;
    }
    if let Some(held) = describe_held(a) {
        writeln!(out, "{PREFIX}mutex holds: {held}")?;
    }
    if a.samples == 0 || a.metrics.is_empty() {
        writeln!(
            out,
            "{PREFIX}no samples: the program ran for less than one sampling period, its \
             threads were not sampled, or it died before it wrote any"
        )?;
        return Ok(());
    }
    let metric = a.metrics.id(WORK).unwrap_or(0);
    let def = &a.metrics.defs()[metric];
    let total = a.totals[metric];
    writeln!(
        out,
        "{PREFIX}{}: total {}",
        def.name,
        format_value(total, &def.unit)
    )?;
    let report = Report::new(a, View::Flat, metric, Prune::default());
    let rows: Vec<_> = report
        .tree
        .roots()
        .iter()
        .copied()
        .filter(|&id| report.tree.exclusive(id)[metric] > 0)
        .take(top)
        .collect();
    if !rows.is_empty() {
        writeln!(
            out,
            "{PREFIX}top {} functions by exclusive {}:",
            rows.len(),
            def.name
        )?;
    }
    for id in rows {
        let excl = report.tree.exclusive(id)[metric];
        let function = a.names.function(report.tree.node(id).function);
        let line = report.tree.hottest_line(id, metric);
        writeln!(
            out,
            "{PREFIX}  {:>5.1}% {:>10}  {}{}",
            percent(excl, total),
            format_value(excl, &def.unit),
            function.name,
            location(a, line, &function.module)
        )?;
    }
    let waited = a.total_of(IDLENESS) > 0 || a.total_of(BLAME) > 0;
    if waited {
        waiting::lock_lines(a, top, paint, out)?;
        if let Some((table, findings)) = locks {
            top_locks_line(table, out)?;
            findings_line(findings, out)?;
        }
    }
    writeln!(
        out,
        "{PREFIX}call paths: 'blameprof report {path}'; flamegraph: 'blameprof flamegraph {path}'"
    )?;
    if waited {
        // Only waits for events (joins, an idle pool): no lock blame to look for.
        let (order, what) = match waiting::waited_for_locks(a) {
            true => ([BLAME, IDLENESS, WORK], "lock blame"),
            false => ([IDLENESS, BLAME, WORK], "waiting"),
        };
        let metrics: Vec<&str> = order
            .into_iter()
            .filter(|m| a.metrics.id(m).is_ok())
            .collect();
        let effort = match a.effort() {
            Ok(_) => " --percent-of effort",
            Err(_) => "",
        };
        writeln!(
            out,
            "{PREFIX}{what} by call path: 'blameprof report --metrics {}{effort} {path}'",
            metrics.join(",")
        )?;
        if locks.is_some_and(|(t, _)| t.available) {
            writeln!(
                out,
                "{PREFIX}locks and who waited behind whom: 'blameprof report --view locks {path}'"
            )?;
        }
    }
    Ok(())
}

/// Locks shown in the summary's line of top locks.
const TOP_LOCKS: usize = 3;

/// The locks that made threads wait most (by blame, then waiting), on one line: locks (not
/// condition variables, semaphores, barriers or joins) that took blame or kept threads
/// waiting for 1% of their running time.
fn top_locks_line(table: &LockTable, out: &mut dyn Write) -> io::Result<()> {
    let mut rows: Vec<_> = table
        .locks
        .iter()
        .filter(|l| {
            l.pressure
                .is_some_and(|p| p >= 0.01 || l.counts.blame_ns > 0)
        })
        .collect();
    rows.sort_by_key(|l| std::cmp::Reverse((l.counts.blame_ns, l.counts.runtime.wait_ns)));
    let shown: Vec<String> = rows
        .iter()
        .take(TOP_LOCKS)
        .map(|l| {
            format!(
                "{} (blame {}, waiting {}{})",
                l.name,
                ns(l.counts.blame_ns),
                ns(l.counts.runtime.wait_ns),
                l.pressure
                    .map_or(String::new(), |p| format!(", pressure {:.1}%", p * 100.0))
            )
        })
        .collect();
    if !shown.is_empty() {
        writeln!(out, "{PREFIX}top locks by blame: {}", shown.join("; "))?;
    }
    Ok(())
}

/// Findings named in the summary's line of findings.
const TOP_FINDINGS: usize = 4;

/// The lock view's findings, by name, on one line (the view has the evidence and fixes).
fn findings_line(findings: &[Finding], out: &mut dyn Write) -> io::Result<()> {
    if findings.is_empty() {
        return Ok(());
    }
    let mut named: Vec<String> = findings
        .iter()
        .take(TOP_FINDINGS)
        .map(|f| format!("{} ({})", f.kind.title(), f.subject))
        .collect();
    if findings.len() > TOP_FINDINGS {
        named.push(format!("{} more", findings.len() - TOP_FINDINGS));
    }
    writeln!(
        out,
        "{PREFIX}findings: {}; evidence and fixes: 'blameprof report --view locks'",
        named.join("; ")
    )
}

/// Nanoseconds for reading (idleness, blame and work are in ns).
fn ns(value: u64) -> String {
    format_value(value, "ns")
}

#[cfg(test)]
mod tests {
    use super::write_unwritten;

    fn warnings(failed: u64, errno: u64, samples: u64, records: u64) -> String {
        let mut out = Vec::new();
        write_unwritten(failed, errno, samples, records, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_full_disk_and_the_size_limit_are_named_with_their_fix() {
        assert_eq!(warnings(0, 0, 0, 0), "");
        let full = warnings(4096, libc::ENOSPC as u64, 0, 0);
        assert!(
            full.contains("4096 bytes of the profile could not be written")
                && full.contains("No space left on device")
                && full.contains("profile to another disk with -o"),
            "{full}"
        );
        let limit = warnings(0, 0, 120, 300);
        assert!(
            limit.contains("120 samples and 300 bytes of records were dropped")
                && limit.contains("--max-size"),
            "{limit}"
        );
    }
}
