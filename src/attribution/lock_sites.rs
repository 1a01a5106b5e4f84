//! Lock sites: which application function, calling which lock function, waited or made
//! others wait.
//!
//! Job: after runtime frames are collapsed (see `paths`), an idleness path ends
//! `... lookup -> pthread_mutex_lock` and a blame path `... insert -> pthread_mutex_unlock`
//! (docs/lock-blame-contract.md). [`lock_sites`] adds up one metric per *site*: the
//! application function that called the lock function (the caller of the path's innermost
//! runtime location, past any language runtime's lock wrappers: see [`super::lock_wrappers`])
//! together with that lock function, and keeps the call-site line that carried the most
//! cost.
//!
//! The *innermost* runtime location is the lock function, not the leaf: a spin-wait sample
//! can land in a function the runtime called (`sched_yield`, the vdso's clock), and runtime
//! frames near the root (the thread-start trampoline) only matter when a path has no
//! runtime location leafward of them, which idleness and blame paths always have.
//!
//! Invariants: the values of all sites add up to the metric's total over the analysis; a
//! path without a runtime location counts for its leaf function, with no lock function.
//! Not async-signal-safe (allocates); single-threaded.

use super::lock_wrappers::named_caller;
use super::{Analysis, FunctionId, SourceLine};
use std::collections::HashMap;

/// Whether a module path names the runtime library.
pub fn is_runtime_module(path: &str) -> bool {
    path.ends_with(crate::format::protocol::RUNTIME_LIBRARY)
}

/// The cost of one metric at one lock site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockSite {
    /// The function that called the lock function (the leaf when there is none); `None`
    /// when the runtime frame is the outermost frame of its path.
    pub caller: Option<FunctionId>,
    /// The runtime entry point the caller called (`pthread_mutex_lock`, ...); `None` when
    /// the path has no runtime frame.
    pub lock: Option<FunctionId>,
    /// The caller's line (the call site) with the most cost; unknown without debug info.
    pub line: SourceLine,
    /// Cost in the metric asked for.
    pub value: u64,
}

/// The sites with cost in merged metric `metric`, most costly first (ties: by caller name,
/// then lock name).
pub fn lock_sites(analysis: &Analysis, metric: usize) -> Vec<LockSite> {
    lock_sites_by(analysis, |path| analysis.paths[path].values[metric])
}

/// [`lock_sites`] of the cost `value` gives each path, by its index in the analysis' paths
/// (a part of a metric: the waiting for locks alone, say).
pub fn lock_sites_by(analysis: &Analysis, value: impl Fn(usize) -> u64) -> Vec<LockSite> {
    type Key = (Option<FunctionId>, Option<FunctionId>);
    let mut sites: HashMap<Key, (u64, HashMap<SourceLine, u64>)> = HashMap::new();
    let is_runtime =
        |function: FunctionId| is_runtime_module(&analysis.names.function(function).module);
    for (i, path) in analysis.paths.iter().enumerate() {
        let value = value(i);
        if value == 0 {
            continue;
        }
        let locs = &path.locs;
        let (caller, lock) = match locs.iter().rposition(|l| is_runtime(l.function)) {
            Some(i) => (
                named_caller(&analysis.names, locs, i).map(|c| locs[c]),
                Some(locs[i].function),
            ),
            None => (locs.last().copied(), None),
        };
        let site = sites.entry((caller.map(|c| c.function), lock)).or_default();
        site.0 += value;
        *site
            .1
            .entry(caller.map(|c| c.line).unwrap_or_default())
            .or_default() += value;
    }
    let name = |f: Option<FunctionId>| f.map_or("", |f| analysis.names.function(f).name.as_str());
    let mut sites: Vec<LockSite> = sites
        .into_iter()
        .map(|((caller, lock), (value, lines))| LockSite {
            caller,
            lock,
            // Heaviest line; ties: the smaller (file, line), for a stable answer.
            line: lines
                .into_iter()
                .max_by(|a, b| {
                    a.1.cmp(&b.1)
                        .then((b.0.file, b.0.line).cmp(&(a.0.file, a.0.line)))
                })
                .map(|(line, _)| line)
                .unwrap_or_default(),
            value,
        })
        .collect();
    sites.sort_by(|a, b| {
        b.value
            .cmp(&a.value)
            .then_with(|| name(a.caller).cmp(name(b.caller)))
            .then_with(|| name(a.lock).cmp(name(b.lock)))
    });
    sites
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::testutil::{
        add_frames, analyze_renamed, app, lock_process, rt, set_line,
    };
    use crate::format::read::Profile;

    fn site_names(a: &Analysis, sites: &[LockSite]) -> Vec<(String, String, u64)> {
        let name =
            |f: Option<FunctionId>| f.map_or("-".to_owned(), |f| a.names.function(f).name.clone());
        sites
            .iter()
            .map(|s| (name(s.caller), name(s.lock), s.value))
            .collect()
    }

    #[test]
    fn sites_are_the_callers_of_the_collapsed_lock_functions() {
        let mut p = lock_process();
        // A path without runtime frames counts for its leaf; one whose only frames are the
        // runtime's has no caller.
        add_frames(&mut p, 100, 1, &[app(0x30), app(0x10)], 1_000);
        add_frames(&mut p, 100, 2, &[rt(0x300)], 500);
        let profile = Profile {
            path: "blameprof-test".into(),
            processes: vec![p],
            skipped: Vec::new(),
        };
        let mut a = analyze_renamed(&profile);
        set_line(&mut a, "lookup", "table.c", 42);
        let idleness = a.metrics.id("idleness").unwrap();
        let sites = lock_sites(&a, idleness);
        assert_eq!(
            site_names(&a, &sites),
            [
                ("lookup".into(), "pthread_mutex_lock".into(), 6_000_000),
                ("insert".into(), "pthread_mutex_lock".into(), 1_000_000),
                ("g".into(), "-".into(), 1_000),
            ]
        );
        assert_eq!(a.names.file(sites[0].line.file.unwrap()), "table.c");
        assert_eq!(sites[0].line.line, Some(42));
        let total: u64 = sites.iter().map(|s| s.value).sum();
        assert_eq!(total, a.totals[idleness]);

        let blame = a.metrics.id("blame").unwrap();
        assert_eq!(
            site_names(&a, &lock_sites(&a, blame)),
            [
                ("insert".into(), "pthread_mutex_unlock".into(), 4_800_000),
                ("lookup".into(), "pthread_mutex_unlock".into(), 1_500_000),
                ("-".into(), "pthread_mutex_unlock".into(), 500),
            ]
        );
    }

    #[test]
    fn frames_the_runtime_called_do_not_hide_the_lock_function() {
        // A spin-wait sample taken in a libc function the runtime called (sched_yield).
        let mut p = lock_process();
        let spin = [
            app(0x50),
            app(0x80),
            app(0x70),
            rt(0x200),
            rt(0x100),
            app(0x40),
        ];
        add_frames(&mut p, 102, 1, &spin, 2_000_000);
        let profile = Profile {
            path: "blameprof-test".into(),
            processes: vec![p],
            skipped: Vec::new(),
        };
        let a = analyze_renamed(&profile);
        let sites = lock_sites(&a, a.metrics.id("idleness").unwrap());
        assert_eq!(
            site_names(&a, &sites)[1],
            ("insert".into(), "pthread_mutex_lock".into(), 3_000_000)
        );
    }

    #[test]
    fn runtime_module_is_recognised_by_file_name() {
        assert!(is_runtime_module("/usr/lib/blameprof/libblameprof_rt.so"));
        assert!(is_runtime_module("libblameprof_rt.so"));
        assert!(!is_runtime_module("/usr/lib/libblameprof_rt.so.1"));
        assert!(!is_runtime_module("/lib/x86_64-linux-gnu/libc.so.6"));
    }
}
