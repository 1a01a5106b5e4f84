//! Lock wrappers a program writes itself (a `lock_measured` helper, a `MutexLock` guard,
//! RocksDB's `InstrumentedMutex::Lock` over `port::Mutex::Lock`), recognised from the
//! profile rather than by name: without them, every waiter and holder site of a program
//! that locks through its own helper reads as that helper, and the callers that wait behind
//! different holders are merged into one site.
//!
//! Job: tell, from the call paths of a profile, which functions *forward*: the frame below
//! them (past the language runtimes' own wrappers, `lock_wrappers`) is a lock function or
//! another function that forwards, on the lock paths they are on and on all but
//! [`OWN_WORK_SHARE`] of the CPU samples that have them on their path. A function that
//! computes anything of note (CPU samples in it or in a callee that does not forward, a
//! holder's samples inside its hold) does not forward, nor does one that calls several
//! functions that do (a forwarder forwards to one thing: a program's `main` calling two
//! helpers that lock, in a run too short for it to take a CPU sample, is neither's
//! wrapper). The frames that forward above a lock function make a *chain*; the first frame
//! above the chain that is not a language wrapper is its *distinguishing caller*. When the
//! innermost function of a chain (the lock function's caller) is reached from two or more
//! distinguishing callers (or through two chains), its sites name `caller -> outermost of
//! the chain` ([`Forwarders::caller_of`]): `lookup -> lock_measured`, not `lock_measured`.
//! A helper reached from one caller only keeps its own name, which already tells it apart;
//! a chain of helpers reached from one caller is named by its outermost
//! (`GetAndRefSuperVersion`, not the `port::Mutex::Lock` that every RocksDB mutex ends in).
//!
//! Invariants: the verdict is the profile's: the lock paths (waits, releases, holders'
//! samples) first, then the paths of CPU samples, read only when some lock function's
//! caller forwards on the lock paths alone (to disprove a function that locks and then
//! computes, whose holds nobody waited for), so a profile without lock waits costs nothing
//! more. The fixed point only ever
//! takes functions out of the forwarding set, so it ends after at most one pass per
//! function. Pure analysis: not async-signal-safe, allocates.

use super::lock_wrappers::{is_wrapper_loc, named_caller};
use super::{FunctionId, Loc, Names};
use std::collections::{HashMap, HashSet};

/// The most of the time through a function (the CPU time of samples on its path, and the
/// waiting and blame recorded on its lock paths) that may be its own computing (it is
/// their leaf, or the callee below it does not forward) for it to forward still: a
/// wrapper's own few instructions (a check, a counter, a clock read) take a sample now and
/// then. Time, not counts: a guard taken 20,000 times a second has two paths and many
/// samples; a function that locks and computes has its computing's time.
const OWN_WORK_SHARE: f64 = 0.1;

/// What lies below one frame of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Below {
    /// The lock function (the path's runtime frame).
    Lock,
    /// Nothing: the frame is the path's leaf (it was computing).
    Leaf,
    /// Another function of the program.
    Function(FunctionId),
}

/// Time (ns) by function and what lay below it.
type Occurrences = HashMap<(FunctionId, Below), u64>;

/// One root-first path: its frames, the index of its lock function (its runtime frame),
/// if any, and the time its samples recorded (ns).
pub struct CountedPath {
    pub locs: Vec<Loc>,
    pub lock: Option<usize>,
    pub weight: u64,
}

/// The functions of a profile that forward to lock functions, and the chains of them that
/// several callers reach.
#[derive(Debug, Default)]
pub struct Forwarders {
    forwarding: HashSet<FunctionId>,
    /// Innermost functions of chains reached from two or more distinguishing callers.
    wrappers: HashSet<FunctionId>,
}

impl Forwarders {
    /// The forwarders of `paths` (root-first; `lock_at[i]`: the index of path `i`'s lock
    /// function, `None` for a holder's CPU sample), each weighed by `weights[i]`, the time
    /// its samples recorded (waiting, blame, a holder's computing). `cpu_paths` gives the
    /// paths of the profile's CPU samples with their CPU time, asked for only when some
    /// lock function's caller may forward.
    pub fn of(
        paths: &[Vec<Loc>],
        lock_at: &[Option<usize>],
        weights: &[u64],
        names: &mut Names,
        cpu_paths: impl FnOnce(&mut Names) -> Vec<CountedPath>,
    ) -> Forwarders {
        let mut below = Occurrences::new();
        for ((locs, &lock), &w) in paths.iter().zip(lock_at).zip(weights) {
            add_occurrences(&mut below, locs, lock, w.max(1), names);
        }
        let forwarding = fixed_point(&below);
        let candidate = paths.iter().zip(lock_at).any(|(locs, lock)| {
            lock.and_then(|l| named_caller(names, locs, l))
                .is_some_and(|c| forwarding.contains(&locs[c].function))
        });
        if !candidate {
            return Forwarders::default();
        }
        // The lock paths alone make every function forward that is seen only above a lock
        // call (a thread's routine, when nobody waited during its holds): its CPU samples
        // tell.
        for p in cpu_paths(names) {
            add_occurrences(&mut below, &p.locs, p.lock, p.weight, names);
        }
        let mut f = Forwarders {
            forwarding: fixed_point(&below),
            wrappers: HashSet::new(),
        };
        f.wrappers = f.reached_by_several(paths, lock_at, names);
        f
    }

    /// The frames to name for a lock function whose named caller is at `caller` in `locs`:
    /// `Some((Some(distinguishing), outermost))` when the caller's function is a wrapper
    /// that several callers reach (`lookup -> lock_measured`); `Some((None, outermost))`
    /// when it is the innermost of a chain of two or more forwarders reached from one
    /// caller (the chain's outermost function names it: `GetAndRefSuperVersion`, not the
    /// `port::Mutex::Lock` it ends in); `None` to name the caller alone.
    pub fn caller_of(
        &self,
        locs: &[Loc],
        caller: usize,
        names: &Names,
    ) -> Option<(Option<usize>, usize)> {
        let (by, top) = self.chain_top(locs, caller, names)?;
        if self.wrappers.contains(&locs[caller].function) {
            Some((Some(by), top))
        } else {
            (top != caller).then_some((None, top))
        }
    }

    /// The innermost functions of chains that two or more distinguishing callers reach (or
    /// one, through two chains: `main -> open_db` and `main -> close_db` over one
    /// `CondVar::Wait`).
    fn reached_by_several(
        &self,
        paths: &[Vec<Loc>],
        lock_at: &[Option<usize>],
        names: &Names,
    ) -> HashSet<FunctionId> {
        let mut callers: HashMap<FunctionId, HashSet<(FunctionId, FunctionId)>> = HashMap::new();
        for (locs, lock) in paths.iter().zip(lock_at) {
            let Some(caller) = lock.and_then(|l| named_caller(names, locs, l)) else {
                continue;
            };
            if let Some((distinguishing, outermost)) = self.chain_top(locs, caller, names) {
                callers
                    .entry(locs[caller].function)
                    .or_default()
                    .insert((locs[distinguishing].function, locs[outermost].function));
            }
        }
        callers
            .into_iter()
            .filter(|(_, c)| c.len() >= 2)
            .map(|(f, _)| f)
            .collect()
    }

    /// From the forwarding frame at `caller` up: (the distinguishing caller, the chain's
    /// outermost frame); `None` when `caller` does not forward or nothing calls the chain.
    fn chain_top(&self, locs: &[Loc], caller: usize, names: &Names) -> Option<(usize, usize)> {
        if !self.forwarding.contains(&locs[caller].function) {
            return None;
        }
        let mut top = caller;
        loop {
            let above = (0..top).rev().find(|&i| !is_wrapper_loc(names, &locs[i]))?;
            if self.forwarding.contains(&locs[above].function) {
                top = above;
            } else {
                return Some((above, top));
            }
        }
    }
}

/// Adds what lies below each program frame of `locs` (above its lock function at `lock`,
/// when it has one), weighing `weight`, to `below`; language wrappers skipped.
fn add_occurrences(
    below: &mut Occurrences,
    locs: &[Loc],
    lock: Option<usize>,
    weight: u64,
    names: &Names,
) {
    let end = lock.unwrap_or(locs.len());
    let mut under = match lock {
        Some(_) => Below::Lock,
        None => Below::Leaf,
    };
    for loc in locs[..end].iter().rev() {
        if is_wrapper_loc(names, loc) {
            continue;
        }
        *below.entry((loc.function, under)).or_default() += weight;
        under = Below::Function(loc.function);
    }
}

/// The functions that forward: every function seen, less, until nothing changes, those
/// whose own computing (a leaf, or a callee that does not forward, below them; or any
/// callee but the one they forward to most) is more than [`OWN_WORK_SHARE`] of their
/// samples.
fn fixed_point(below: &Occurrences) -> HashSet<FunctionId> {
    let mut forwarding: HashSet<FunctionId> = below.keys().map(|(f, _)| *f).collect();
    loop {
        let mut own: HashMap<FunctionId, (u64, u64)> = HashMap::new();
        let mut targets: HashMap<FunctionId, HashMap<Below, u64>> = HashMap::new();
        for (&(f, b), &n) in below {
            if !forwarding.contains(&f) {
                continue;
            }
            let computing = match b {
                Below::Lock => false,
                Below::Leaf => true,
                Below::Function(g) => !forwarding.contains(&g),
            };
            let (mine, all) = own.entry(f).or_default();
            *all += n;
            if computing {
                *mine += n;
            } else {
                *targets.entry(f).or_default().entry(b).or_default() += n;
            }
        }
        // A forwarder forwards to one thing (the lock functions, or one function that
        // forwards): what it hands to any other callee is its own doing, as computing is
        // (a program's `main`, or a thread's routine, that calls several helpers that lock
        // is no wrapper of any of them).
        for (f, by) in &targets {
            let (sum, most) = by
                .values()
                .fold((0u64, 0u64), |(s, m), &n| (s + n, m.max(n)));
            if let Some((mine, _)) = own.get_mut(f) {
                *mine += sum - most;
            }
        }
        let out: Vec<FunctionId> = own
            .into_iter()
            .filter(|&(_, (mine, all))| mine as f64 > OWN_WORK_SHARE * all as f64)
            .map(|(f, _)| f)
            .collect();
        if out.is_empty() {
            return forwarding;
        }
        for f in out {
            forwarding.remove(&f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::SourceLine;

    /// Root-first paths of named functions in `/app`; the lock function is the last frame
    /// of a lock path.
    struct Profile {
        names: Names,
        paths: Vec<Vec<Loc>>,
        lock_at: Vec<Option<usize>>,
        samples: Vec<u64>,
    }

    impl Profile {
        fn new() -> Profile {
            Profile {
                names: Names::default(),
                paths: Vec::new(),
                lock_at: Vec::new(),
                samples: Vec::new(),
            }
        }

        fn locs(&mut self, frames: &[&str]) -> Vec<Loc> {
            frames
                .iter()
                .map(|f| Loc {
                    function: self.names.intern_function(f, "/app"),
                    line: SourceLine::default(),
                    inlined: false,
                })
                .collect()
        }

        fn lock_path(&mut self, frames: &[&str]) {
            self.lock_samples(frames, 1);
        }

        /// A lock path whose samples recorded `weight` of waiting or blame.
        fn lock_samples(&mut self, frames: &[&str], weight: u64) {
            let locs = self.locs(frames);
            self.lock_at.push(Some(locs.len() - 1));
            self.paths.push(locs);
            self.samples.push(weight);
        }

        fn cpu_path(&mut self, frames: &[&str], weight: u64) -> CountedPath {
            CountedPath {
                locs: self.locs(frames),
                lock: None,
                weight,
            }
        }

        /// The name given to the caller of path `i`'s lock function.
        fn caller(&mut self, cpu: Vec<CountedPath>, i: usize) -> String {
            let f = Forwarders::of(
                &self.paths,
                &self.lock_at,
                &self.samples,
                &mut self.names,
                |_| cpu,
            );
            let locs = &self.paths[i];
            let caller = locs.len() - 2;
            let name = |j: usize| self.names.function(locs[j].function).name.clone();
            match f.caller_of(locs, caller, &self.names) {
                Some((Some(by), wrapper)) => format!("{} -> {}", name(by), name(wrapper)),
                Some((None, outermost)) => name(outermost),
                None => name(caller),
            }
        }
    }

    #[test]
    fn a_helper_that_only_locks_for_two_callers_is_named_with_its_caller() {
        let mut p = Profile::new();
        p.lock_path(&["main", "lookup", "lock_measured", "pthread_mutex_lock"]);
        p.lock_path(&["main", "insert", "lock_measured", "pthread_mutex_lock"]);
        // lookup and insert compute; the helper's own code took one sample of 40.
        let cpu = vec![
            p.cpu_path(&["main", "lookup", "search"], 200),
            p.cpu_path(&["main", "insert", "rebuild"], 300),
            p.cpu_path(&["main", "lookup", "lock_measured"], 1),
            CountedPath {
                lock: Some(3),
                ..p.cpu_path(
                    &["main", "insert", "lock_measured", "pthread_mutex_lock"],
                    39,
                )
            },
        ];
        assert_eq!(p.caller(cpu, 0), "lookup -> lock_measured");
    }

    #[test]
    fn a_guard_that_times_its_waits_is_still_a_wrapper_by_its_waits_recorded() {
        // A C++ guard whose constructor reads the clock around the lock: 10 ms of its own
        // computing, against the 1.7 s of waiting recorded at its lock call; lookup, which
        // unlocks itself (the guard's destructor a tail call), computes 2.6 s and is blamed
        // for 0.3 s.
        let mut p = Profile::new();
        let ms = 1_000_000;
        p.lock_samples(
            &["lookup", "TableGuard::TableGuard", "pthread_mutex_lock"],
            1_690 * ms,
        );
        p.lock_samples(
            &["insert", "TableGuard::TableGuard", "pthread_mutex_lock"],
            20 * ms,
        );
        p.lock_samples(&["lookup", "pthread_mutex_unlock"], 300 * ms);
        p.lock_samples(&["insert", "pthread_mutex_unlock"], 960 * ms);
        let cpu = vec![
            p.cpu_path(&["lookup", "search"], 2_600 * ms),
            p.cpu_path(&["insert", "rebuild"], 1_500 * ms),
            p.cpu_path(
                &["lookup", "TableGuard::TableGuard", "clock_gettime"],
                10 * ms,
            ),
        ];
        assert_eq!(p.caller(cpu, 1), "insert -> TableGuard::TableGuard");
    }

    #[test]
    fn a_chain_of_helpers_is_named_by_its_outermost_with_the_caller_above_it() {
        let mut p = Profile::new();
        for caller in ["get", "put"] {
            p.lock_path(&[caller, "MutexLock", "Mutex::Lock", "pthread_mutex_lock"]);
        }
        let cpu = vec![
            p.cpu_path(&["get", "read"], 10),
            p.cpu_path(&["put", "write"], 10),
        ];
        assert_eq!(p.caller(cpu, 1), "put -> MutexLock");
    }

    #[test]
    fn a_caller_of_several_helpers_that_lock_is_no_wrapper_of_them() {
        // A short run: nothing took a CPU sample. main calls open_db and close_db, both of
        // which wait through one condition-variable wrapper: main forwards to neither (it
        // calls both), so the wrapper's sites are told apart by the helpers.
        let mut p = Profile::new();
        for helper in ["open_db", "close_db"] {
            p.lock_path(&[
                "_start",
                "main",
                helper,
                "CondVar::Wait",
                "pthread_cond_wait",
            ]);
        }
        assert_eq!(p.caller(Vec::new(), 0), "main -> open_db");
        assert_eq!(p.caller(Vec::new(), 1), "main -> close_db");
    }

    #[test]
    fn a_chain_of_helpers_reached_from_one_caller_is_named_by_its_outermost() {
        // RocksDB's shape: every mutex ends in port::Mutex::Lock, here reached only through
        // GetAndRefSuperVersion -> GetThreadLocal, from GetImpl, which computes.
        let mut p = Profile::new();
        p.lock_path(&[
            "GetImpl",
            "GetAndRefSuperVersion",
            "GetThreadLocal",
            "port::Mutex::Lock",
            "pthread_mutex_lock",
        ]);
        let cpu = vec![p.cpu_path(&["GetImpl", "Seek"], 50)];
        assert_eq!(p.caller(cpu, 0), "GetAndRefSuperVersion");
    }

    #[test]
    fn a_function_that_computes_or_has_one_caller_keeps_its_own_name() {
        let mut p = Profile::new();
        p.lock_path(&["worker_a", "update", "pthread_mutex_lock"]);
        p.lock_path(&["worker_b", "update", "pthread_mutex_lock"]);
        p.lock_path(&["main", "solo_lock", "pthread_mutex_lock"]);
        // update locks and then computes, with nobody waiting during its holds.
        let cpu = vec![p.cpu_path(&["worker_a", "update"], 30)];
        assert_eq!(p.caller(cpu, 0), "update");
        let mut p2 = Profile::new();
        p2.lock_path(&["main", "solo_lock", "pthread_mutex_lock"]);
        assert_eq!(p2.caller(Vec::new(), 0), "solo_lock");
    }
}
