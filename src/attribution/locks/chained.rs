//! The lock view's chains: where a lock's holders passed their blame on while they were
//! themselves waiting inside their holds (the `root` metric's hops, [`crate::attribution::chains`]).
//!
//! Job: sum each row's passings per (holder site, the lock it waited for, that lock's holder
//! site), and, once every row is named, name the locks waited for. Invariants: a row's
//! chains add up to the blame it passed on (one hop; what passed further is the next row's).
//! Not async-signal-safe (allocates); single-threaded.

use super::{LockRow, Site};
use std::collections::HashMap;

/// One hop of a chain: `holder` (a site of this lock's releases) waited inside its holds
/// for the lock at `to` (named `to_lock`), held by `to_holder`, which took `ns` of the
/// holder's blame as its root cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    pub holder: Site,
    pub to: u64,
    pub to_lock: String,
    pub to_holder: Site,
    pub ns: u64,
}

/// A row's chains, largest first, from its passings: (its release's path index, the lock
/// passed to, that release's path index, ns); `sites` names path indices.
pub(super) fn chains_of(passed: &[(usize, u64, usize, u64)], sites: &[Site]) -> Vec<Chain> {
    let mut by: HashMap<(&Site, u64, &Site), u64> = HashMap::new();
    for &(from, to, to_key, ns) in passed {
        *by.entry((&sites[from], to, &sites[to_key])).or_default() += ns;
    }
    let mut out: Vec<Chain> = by
        .into_iter()
        .filter(|&(_, ns)| ns > 0)
        .map(|((holder, to, to_holder), ns)| Chain {
            holder: holder.clone(),
            to,
            to_lock: format!("{to:#x}"),
            to_holder: to_holder.clone(),
            ns,
        })
        .collect();
    out.sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.holder.cmp(&b.holder)));
    out
}

/// Names the locks the chains of `rows` lead to, by their rows' names (the address stays
/// when the lock has no row).
pub(super) fn name_targets(rows: &mut [LockRow]) {
    let names: HashMap<(u32, u64), String> = rows
        .iter()
        .map(|r| ((r.pid, r.address), r.name.clone()))
        .collect();
    for r in rows {
        let pid = r.pid;
        let Some(detail) = r.detail.as_mut() else {
            continue;
        };
        for c in &mut detail.chains {
            if let Some(name) = names.get(&(pid, c.to)) {
                c.to_lock.clone_from(name);
            }
        }
    }
}
