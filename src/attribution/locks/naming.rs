//! Naming and grouping locks: a lock by the variable it lies in, the function that
//! initialised it or the call path of its first wait; call sites of lock functions and
//! the code holders computed in; a join by the threads it waited for; groups of locks of
//! one array symbol or site.
//!
//! Invariants: names are the lock view's (what `--lock` selects); a group has at least two
//! members, of one process and kind. Not async-signal-safe (allocates); single-threaded.

use super::{a_held_lock, Counts, LockGroup, LockRow, Naming, Site};
use crate::attribution::lock_forwarders::Forwarders;
use crate::attribution::lock_sites::is_runtime_module;
use crate::attribution::lock_wrappers::{is_wrapper, named_caller};
use crate::attribution::paths::RawKey;
use crate::attribution::symbolize::{CodeAddress, Symbolizer};
use crate::attribution::{Loc, Names};
use crate::format::read::{ModuleInfo, ProcessProfile, Profile};
use crate::format::{protocol, WaitKind};
use std::collections::HashMap;

/// The loaded module whose mapping holds `address`.
fn module_of(proc: &ProcessProfile, address: u64) -> Option<&ModuleInfo> {
    proc.modules
        .iter()
        .find(|m| (m.start..m.end).contains(&address))
}

/// `symbol` or `symbol+0xOFF` of the variable the lock lies in.
pub(super) fn symbol_name(
    proc: &ProcessProfile,
    address: u64,
    symbolizer: &mut Symbolizer,
) -> Option<String> {
    let module = module_of(proc, address)?;
    let (name, within) = symbolizer.data_symbol(module, address.checked_sub(module.base)?)?;
    Some(match within {
        0 => name,
        off => format!("{name}+{off:#x}"),
    })
}

/// The OpenMP name of a lock the runtime made for an OpenMP construct
/// (`runtime/src/openmp.rs`): the unnamed critical section's mutex (`omp critical`), a
/// named one's, whose init site is the address of the name's variable (GCC's
/// `.gomp_critical_user_NAME`: `omp critical (NAME)`), the object workers docked between
/// regions wait on (`omp thread pool`), and a parallel region's barrier, keyed by its
/// outlined function (`omp parallel main._omp_fn.0`). None for any other lock.
pub(super) fn openmp_name(
    proc: &ProcessProfile,
    (address, init_site): (u64, u64),
    kind: Option<WaitKind>,
    symbolizer: &mut Symbolizer,
) -> Option<String> {
    let module = module_of(proc, address)?;
    let offset = address.checked_sub(module.base)?;
    if !is_runtime_module(&module.path) {
        if kind != Some(WaitKind::Barrier) {
            return None;
        }
        // A barrier at a function's first instruction is a region's.
        let chain = symbolizer.symbolize(Some(module), CodeAddress::InstructionPointer(offset));
        let region = chain.last()?;
        return region
            .function
            .contains("._omp_fn.")
            .then(|| format!("omp parallel {}", region.function));
    }
    let (symbol, _) = symbolizer.data_symbol(module, offset)?;
    match symbol.rsplit("::").next()? {
        "POOL" => Some("omp thread pool".to_owned()),
        "UNNAMED" => Some("omp critical".to_owned()),
        "NAMED_MUTEXES" => {
            let variable = symbol_name(proc, init_site, symbolizer);
            let name = variable
                .as_deref()
                .and_then(|v| v.strip_prefix(".gomp_critical_user_"))
                .unwrap_or("?");
            Some(format!("omp critical ({name})"))
        }
        _ => None,
    }
}

/// `caller -> pthread_mutex_init` for a lock initialised by a call returning to `site`.
pub(super) fn init_site_name(
    proc: &ProcessProfile,
    site: u64,
    kind: Option<WaitKind>,
    symbolizer: &mut Symbolizer,
) -> Option<String> {
    let caller = caller_of(proc, site, symbolizer)?;
    let init = match kind? {
        WaitKind::Mutex => "pthread_mutex_init",
        WaitKind::RwLock => "pthread_rwlock_init",
        WaitKind::Spin => "pthread_spin_init",
        WaitKind::CondVar => "pthread_cond_init",
        WaitKind::Semaphore => "sem_init",
        WaitKind::Barrier => "pthread_barrier_init",
        WaitKind::Join | WaitKind::Futex => return None,
    };
    Some(format!("{caller} -> {init}"))
}

/// The function a lock function called from return address `site` (absolute) returns to:
/// past a language's lock wrappers inlined into the user's code (innermost first).
pub(super) fn caller_of(
    proc: &ProcessProfile,
    site: u64,
    symbolizer: &mut Symbolizer,
) -> Option<String> {
    let module = proc
        .modules
        .iter()
        .find(|m| site != 0 && (m.start..m.end).contains(&site))?;
    let offset = site.checked_sub(module.base)?;
    let chain = symbolizer.symbolize(Some(module), CodeAddress::ReturnAddress(offset));
    let user = chain
        .iter()
        .find(|f| !is_wrapper(&f.function, f.file.as_deref(), &module.path));
    Some(user.or(chain.first())?.function.clone())
}

/// The trylock function of a lock kind.
pub(super) fn try_function(kind: Option<WaitKind>) -> &'static str {
    match kind {
        Some(WaitKind::Spin) => "pthread_spin_trylock",
        Some(WaitKind::RwLock) => "pthread_rwlock_try*lock",
        _ => "pthread_mutex_trylock",
    }
}

/// The index of a root-first path's lock function: its innermost runtime location.
pub(super) fn lock_frame(locs: &[Loc], names: &Names) -> Option<usize> {
    locs.iter()
        .rposition(|l| is_runtime_module(&names.function(l.function).module))
}

/// The site of a root-first path: the function that called its innermost runtime location
/// (the lock function, past any language runtime's lock wrappers, and past the program's
/// own wrappers when several callers reach them: `lookup -> lock_measured`), and that lock
/// function; the leaf function when it has none.
pub(super) fn site_of(locs: &[Loc], names: &Names, forwarders: &Forwarders) -> Site {
    let name = |l: &Loc| names.function(l.function).name.clone();
    match lock_frame(locs, names) {
        Some(i) => Site {
            caller: named_caller(names, locs, i).map_or_else(
                || "[no caller]".to_owned(),
                |c| match forwarders.caller_of(locs, c, names) {
                    Some((Some(by), wrapper)) => {
                        format!("{} -> {}", name(&locs[by]), name(&locs[wrapper]))
                    }
                    Some((None, outermost)) => name(&locs[outermost]),
                    None => name(&locs[c]),
                },
            ),
            lock_function: name(&locs[i]),
        },
        None => Site {
            caller: locs.last().map_or_else(String::new, name),
            lock_function: String::new(),
        },
    }
}

/// The paths of the CPU samples (work) of `selected` processes, each once, with the CPU
/// time its samples took (ns).
pub(super) fn work_keys(profile: &Profile, selected: &[usize]) -> Vec<(RawKey, u64)> {
    let mut seen: HashMap<RawKey, usize> = HashMap::new();
    let mut keys: Vec<(RawKey, u64)> = Vec::new();
    for &p in selected {
        let proc = &profile.processes[p];
        let Some(work) = proc
            .header
            .metrics
            .iter()
            .position(|m| m.name == protocol::WORK.name)
        else {
            continue;
        };
        for s in proc
            .samples
            .iter()
            .filter(|s| usize::from(s.metric) == work)
        {
            let key = (p, s.stack, s.first_is_return());
            let i = *seen.entry(key).or_insert_with(|| {
                keys.push((key, 0));
                keys.len() - 1
            });
            keys[i].1 = keys[i].1.saturating_add(s.value);
        }
    }
    keys
}

/// The code of a root-first path of a CPU sample: its innermost function and that
/// function's caller (`caller -> function`); runtime frames count as their caller.
pub(super) fn code_of(locs: &[Loc], names: &Names) -> Site {
    let is_runtime = |l: &Loc| is_runtime_module(&names.function(l.function).module);
    let name = |l: &Loc| names.function(l.function).name.clone();
    let app = match locs.iter().position(is_runtime) {
        Some(i) => &locs[..i],
        None => locs,
    };
    match app {
        [] => Site {
            caller: "[unknown]".to_owned(),
            lock_function: String::new(),
        },
        [only] => Site {
            caller: name(only),
            lock_function: String::new(),
        },
        [.., caller, leaf] => Site {
            caller: name(caller),
            lock_function: name(leaf),
        },
    }
}

/// The code of a late thread's work (`work`, a path of its work samples) as the call that
/// ended others' waits (`release`) sees it: the first function where the two paths part,
/// with its caller (`stage -> slow_stage` for a barrier called from `stage`), or the work's
/// own code ([`code_of`]) when the paths do not part before the work's leaf.
pub(super) fn late_code(work: &[Loc], release: &[Loc], names: &Names) -> Site {
    let common = work
        .iter()
        .zip(release)
        .take_while(|(w, r)| w.function == r.function)
        .count();
    match common < work.len() {
        true => code_of(&work[..=common], names),
        false => code_of(work, names),
    }
}

/// Groups rows of one process that share an array symbol (`buckets+0x40`, `buckets+0x80`)
/// or a first-wait site, sets each member's `group`, and returns the groups (by blame,
/// then waiting, then acquisitions).
pub(super) fn groups(locks: &mut [LockRow]) -> Vec<LockGroup> {
    type Key = (u32, Option<WaitKind>, String);
    let mut by_key: HashMap<Key, Vec<usize>> = HashMap::new();
    for (i, l) in locks.iter().enumerate() {
        let key = match l.naming {
            Naming::Symbol => l.name.split('+').next().unwrap_or(&l.name).to_owned(),
            Naming::InitSite | Naming::FirstWait => l.name.clone(),
            Naming::Address => continue,
        };
        by_key.entry((l.pid, l.kind, key)).or_default().push(i);
    }
    let mut groups = Vec::new();
    for ((pid, kind, key), members) in by_key {
        if members.len() < 2 {
            continue;
        }
        let name = match locks[members[0]].naming {
            Naming::Symbol => format!("{key}[]"),
            _ => key,
        };
        let mut counts = Counts::default();
        for &m in &members {
            counts.add(&locks[m].counts);
            locks[m].group = Some(name.clone());
        }
        let running = locks[members[0]].running_ns;
        let pressure = kind
            .filter(|&k| a_held_lock(k, &counts) && running > 0)
            .map(|_| counts.runtime.wait_ns as f64 / running as f64);
        groups.push(LockGroup {
            pid,
            name,
            kind,
            members,
            counts,
            pressure,
        });
    }
    groups.sort_by(|a, b| {
        let rank = |g: &LockGroup| {
            (
                g.counts.blame_ns,
                g.counts.runtime.wait_ns,
                g.counts.runtime.acquisitions,
            )
        };
        rank(b).cmp(&rank(a)).then_with(|| a.name.cmp(&b.name))
    });
    groups
}

/// The threads a join (one handle, perhaps reused) waited for, by where they ended (its
/// holder sites, most blame first): the two first, and how many more.
pub(super) fn joined_threads(holders: &[(Site, u64)]) -> String {
    let mut ends: Vec<&str> = Vec::new();
    for (site, _) in holders {
        if !ends.contains(&site.caller.as_str()) {
            ends.push(&site.caller);
        }
    }
    let mut name = ends.iter().take(2).copied().collect::<Vec<_>>().join(", ");
    if ends.len() > 2 {
        name.push_str(&format!(" and {} more", ends.len() - 2));
    }
    name
}
