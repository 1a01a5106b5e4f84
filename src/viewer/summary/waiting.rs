//! The waiting part of the run summary (issue 40): the headline of lock waiting, the line
//! of waiting for events, their breakdown by kind of primitive, the lock waiting that no
//! hold accounts for, then the top victims and culprits of lock waiting and, apart, the
//! top waits for events and their wakers.
//!
//! Job: tell lock waiting from event waiting through `attribution::wait_class` (each path's
//! callers read once, in one [`PathClasses`] shared by every line and list), and write the
//! lines under the summary's prefix. Invariants: a list of victims or culprits holds lock
//! waiting only; without derived metrics (older profiles) every wait is a lock's and the
//! breakdown is absent. Not async-signal-safe (allocates).

use super::{ns, PREFIX};
use crate::attribution::lock_sites::lock_sites_by;
use crate::attribution::metrics::{derived_name, Part, BLAME, IDLENESS, WORK};
use crate::attribution::wait_class::{self, PathClasses, WaitClass};
use crate::attribution::Analysis;
use crate::format::WaitKind;
use crate::viewer::style::Paint;
use crate::viewer::text::location;
use crate::viewer::units::percent;
use std::io::{self, Write};

/// The lock-waiting headline and the line of waiting for events, the breakdown by kind,
/// then the top `top` victims and culprits of lock waiting, and the top waiters for events
/// and their wakers apart (`attribution::wait_class`).
pub(super) fn lock_lines(
    a: &Analysis,
    top: usize,
    paint: Paint,
    out: &mut dyn Write,
) -> io::Result<()> {
    let effort = a.total_of(WORK) + a.total_of(IDLENESS);
    let classes = PathClasses::new(a);
    let by_class = |base: &str| a.metrics.id(base).map_or([0, 0], |id| classes.totals(id));
    let ([lock_idle, event_idle], [lock_blame, _]) = (by_class(IDLENESS), by_class(BLAME));
    if lock_idle > 0 || lock_blame > 0 {
        let blame = match a.metrics.id(BLAME) {
            Ok(_) => format!(
                ", blame {} = {:.1}%",
                ns(lock_blame),
                percent(lock_blame, effort)
            ),
            Err(_) => String::new(),
        };
        writeln!(
            out,
            "{PREFIX}waiting for locks: idleness {} = {:.1}% of effort{blame} \
             (effort = work + idleness = {})",
            ns(lock_idle),
            percent(lock_idle, effort),
            ns(effort),
        )?;
    }
    event_line(a, &classes, event_idle, effort, out)?;
    kind_lines(a, out)?;
    free_lock_line(a, out)?;
    let lists = [
        (IDLENESS, WaitClass::Lock, "waiters for locks (victims)"),
        (BLAME, WaitClass::Lock, "culprits (perpetrators)"),
        (IDLENESS, WaitClass::Event, "waits for events"),
        (
            BLAME,
            WaitClass::Event,
            "wakers of those waits (or their work meanwhile)",
        ),
    ];
    for (metric, class, who) in lists {
        let Ok(id) = a.metrics.id(metric) else {
            continue;
        };
        let part = |path| classes.split(path, id)[class as usize];
        let sites: Vec<_> = lock_sites_by(a, part).into_iter().take(top).collect();
        if sites.is_empty() {
            continue;
        }
        let heading = format!("top {} {who} by {metric}, % of effort:", sites.len());
        writeln!(out, "{PREFIX}{}", paint.bold(&heading))?;
        for site in sites {
            let function = |f| a.names.function(f);
            let (caller, module) = match site.caller.map(function) {
                Some(f) => (f.name.as_str(), f.module.as_str()),
                None => ("[no caller]", ""),
            };
            let caller = match (metric, class) {
                (BLAME, WaitClass::Lock) => paint.culprit(caller),
                (_, WaitClass::Lock) => paint.victim(caller),
                _ => caller.to_owned(),
            };
            let lock = match site.lock.map(function) {
                Some(f) => format!("  ({})", f.name),
                None => String::new(),
            };
            writeln!(
                out,
                "{PREFIX}  {:>5.1}% {:>10}  {caller}{lock}{}",
                percent(site.value, effort),
                ns(site.value),
                location(a, Some(site.line), module),
            )?;
        }
    }
    Ok(())
}

/// Whether any thread waited for a lock (not only for events), or a holder took blame for
/// one.
pub(super) fn waited_for_locks(a: &Analysis) -> bool {
    let classes = PathClasses::new(a);
    [IDLENESS, BLAME].into_iter().any(|metric| {
        a.metrics
            .id(metric)
            .is_ok_and(|id| classes.totals(id)[WaitClass::Lock as usize] > 0)
    })
}

/// The waiting for events (barriers, joins, and the condition variables, semaphores and
/// futexes no lock is built on), `event` of it, said apart from lock waiting: threads idle until
/// signalled, posted or joined are no lock's contention, and often no problem at all (a
/// worker pool with nothing to do). Names the kinds, heaviest first, and the metric that
/// shows them by call path.
fn event_line(
    a: &Analysis,
    classes: &PathClasses,
    event: u64,
    effort: u64,
    out: &mut dyn Write,
) -> io::Result<()> {
    if event == 0 {
        return Ok(());
    }
    let Ok(idleness) = a.metrics.id(IDLENESS) else {
        return Ok(());
    };
    let mut kinds: Vec<(WaitKind, u64)> = Vec::new();
    for path in 0..a.paths.len() {
        for (kind, class, v) in classes.by_kind(path, idleness) {
            if class == WaitClass::Event {
                match kinds.iter_mut().find(|(k, _)| *k == kind) {
                    Some((_, total)) => *total += v,
                    None => kinds.push((kind, v)),
                }
            }
        }
    }
    kinds.sort_by_key(|&(kind, v)| (std::cmp::Reverse(v), kind));
    let named: Vec<String> = kinds
        .iter()
        .map(|&(kind, v)| format!("{} {}", kind.name(), ns(v)))
        .collect();
    let by_path = kinds.first().map_or(String::new(), |&(kind, _)| {
        let metric = derived_name(IDLENESS, Part::Kind(kind));
        format!("; by call path: 'blameprof report --metrics {metric}'")
    });
    writeln!(
        out,
        "{PREFIX}waiting for events, not locks: {} = {:.1}% of effort ({}): threads idle \
         until signalled, posted or joined, not contention{by_path}",
        ns(event),
        percent(event, effort),
        named.join(", ")
    )
}

/// Whether waits of `kind` are a lock's whatever their use (spin locks, mutexes, rwlocks).
fn is_lock(kind: &WaitKind) -> bool {
    wait_class::class_of(*kind) == Some(WaitClass::Lock)
}

/// Per kind of primitive, the total of the metric derived from `base` for it, for the kinds
/// with cost, heaviest first.
fn kind_totals(a: &Analysis, base: &str) -> Vec<(WaitKind, u64)> {
    let Ok(base) = a.metrics.id(base) else {
        return Vec::new();
    };
    let mut kinds: Vec<(WaitKind, u64)> = (0..a.metrics.len())
        .filter_map(|m| match a.metrics.derived_from(m) {
            Some((b, Part::Kind(kind))) if b == base && a.totals[m] > 0 => {
                Some((kind, a.totals[m]))
            }
            _ => None,
        })
        .collect();
    kinds.sort_by_key(|&(kind, v)| (std::cmp::Reverse(v), kind));
    kinds
}

/// The breakdown of idleness and blame by kind of primitive, each kind's share of its base
/// metric, heaviest first; only when there is more to it than one kind of lock.
fn kind_lines(a: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    let (idleness, blame) = (kind_totals(a, IDLENESS), kind_totals(a, BLAME));
    let unblamed = a.total_of(&derived_name(IDLENESS, Part::Unblamed));
    let mut kinds: Vec<WaitKind> = idleness.iter().chain(&blame).map(|&(k, _)| k).collect();
    kinds.sort();
    kinds.dedup();
    let lock_only = kinds.len() <= 1 && kinds.iter().all(is_lock);
    if lock_only && unblamed == 0 {
        return Ok(());
    }
    let shares = |kinds: &[(WaitKind, u64)], base: &str| {
        let total = a.total_of(base);
        kinds
            .iter()
            .map(|&(kind, v)| {
                let share = percent(v, total);
                format!("{} {share:.1}% ({})", kind.name(), ns(v))
            })
            .collect::<Vec<String>>()
            .join(", ")
    };
    let mut waiting = shares(&idleness, IDLENESS);
    if unblamed > 0 {
        let sep = if waiting.is_empty() { "" } else { "; " };
        waiting.push_str(&format!(
            "{sep}unblamed {} (timed out/interrupted/spurious)",
            ns(unblamed)
        ));
    }
    if !waiting.is_empty() {
        writeln!(out, "{PREFIX}waiting by primitive: {waiting}")?;
    }
    if !blame.is_empty() {
        writeln!(out, "{PREFIX}blame by primitive: {}", shares(&blame, BLAME))?;
    }
    Ok(())
}

/// The waiting for locks (spin locks, mutexes, rwlocks) that no hold accounts for: a
/// blocked waiter accrues blame only while the lock is held, so its time woken but not yet
/// running, with the lock free, is nobody's (docs/lock-blame.md). Said when it is at least
/// a tenth of the waiting for locks and a millisecond. Waits that timed out or were
/// interrupted are taken out when every kind waited on is a lock (otherwise the unblamed
/// waits may be of other kinds, and the line says they may be in it).
fn free_lock_line(a: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    if a.metrics.id(BLAME).is_err() {
        return Ok(());
    }
    let (idleness, blame) = (kind_totals(a, IDLENESS), kind_totals(a, BLAME));
    let of_locks = |totals: &[(WaitKind, u64)]| -> u64 {
        totals
            .iter()
            .filter(|(kind, _)| is_lock(kind))
            .map(|&(_, v)| v)
            .sum()
    };
    let waited = of_locks(&idleness);
    let locks_only = idleness.iter().chain(&blame).all(|(kind, _)| is_lock(kind));
    let unblamed = a.total_of(&derived_name(IDLENESS, Part::Unblamed));
    let free = waited
        .saturating_sub(if locks_only { unblamed } else { 0 })
        .saturating_sub(of_locks(&blame));
    if free < 1_000_000 || free * 10 < waited {
        return Ok(());
    }
    let timed_out = if locks_only || unblamed == 0 {
        ""
    } else {
        ", and any that timed out"
    };
    writeln!(
        out,
        "{PREFIX}waiting for locks that no hold accounts for: {} of {} ({:.1}%): mostly while \
         the lock was free (a woken waiter not yet running){timed_out}",
        ns(free),
        ns(waited),
        percent(free, waited)
    )
}
