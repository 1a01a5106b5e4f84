//! The lock table's rows under construction: each (process, address)'s counts and samples
//! as the profile is read, and the finished [`LockRow`] they make (its sites, pairs, holds,
//! late work and chains, its name and pressure).
//!
//! Invariants: memory in proportion to the profile's lock records and samples (a lock
//! without samples keeps none). Not async-signal-safe (allocates); single-threaded.

use super::chained::chains_of;
use super::naming::{
    caller_of, init_site_name, joined_threads, openmp_name, symbol_name, try_function,
};
use super::pairs::{pairs_of, share};
use super::{a_held_lock, Counts, Detail, LockRow, Naming, Site};
use crate::attribution::paths::RawKey;
use crate::attribution::symbolize::Symbolizer;
use crate::format::read::Profile;
use crate::format::{WaitKind, TRY_SITES_MANY};
use std::collections::HashMap;

/// The distinct recorded paths of the lock samples, in order of first sight, with the
/// time their samples recorded (what the forwarders weigh their frames by).
#[derive(Default)]
pub(super) struct PathKeys {
    pub keys: Vec<RawKey>,
    pub ns: Vec<u64>,
    index: HashMap<RawKey, usize>,
}

impl PathKeys {
    /// The index of `key`, new if unseen.
    pub fn index(&mut self, key: RawKey) -> usize {
        *self.index.entry(key).or_insert_with(|| {
            self.keys.push(key);
            self.ns.push(0);
            self.keys.len() - 1
        })
    }
}

/// A row under construction.
#[derive(Default)]
pub(super) struct Building {
    pub kind: Option<WaitKind>,
    pub counts: Counts,
    pub destroyed: u32,
    pub live: bool,
    pub running_ns: u64,
    /// Its samples; `None` for a lock that has none (most of the locks of a churn).
    pub samples: Option<Box<Samples>>,
    pub first_wait: Option<usize>,
    /// The init call's return address (absolute; 0 unknown).
    pub init_site: u64,
    /// Where its failed trylocks came from (`LockStats::try_fail_site`).
    pub try_fail_site: u64,
}

/// A row's samples: each wait sample: (end, span, recorded path index, value, whether
/// someone is to blame for it); each release's blame sample: (time, span, path index,
/// value); each held.contended sample: (path index, value).
#[derive(Default)]
pub(super) struct Samples {
    pub waits: Vec<(u64, u64, usize, u64, bool)>,
    pub releases: Vec<(u64, u64, usize, u64)>,
    pub held: Vec<(usize, u64)>,
    pub blocked: Vec<(usize, u64)>,
    /// The work its providers did while others waited (barriers, joins, events): (the
    /// release's path index, the work's, the part of the release's blame that moved to
    /// it: [`late_work`]).
    pub late: Vec<(usize, usize, u64)>,
    /// Its releases' blame passed on along chains: (the release's path index, the lock it
    /// passed to, that release's path index, ns).
    pub passed: Vec<(usize, u64, usize, u64)>,
}

impl Building {
    /// Its samples, made (empty) if it had none.
    pub fn samples(&mut self) -> &mut Samples {
        self.samples.get_or_insert_with(Box::default)
    }
}

/// The rows under construction: each (process, address) once, in order of first sight.
#[derive(Default)]
pub(super) struct Rows {
    pub index: HashMap<(usize, u64), u32>,
    pub order: Vec<(usize, u64)>,
    pub rows: Vec<Building>,
}

impl Rows {
    /// Room for `more` rows (at most: the records of one lock may share a row).
    pub fn reserve(&mut self, more: usize) {
        self.index.reserve(more);
        self.order.reserve(more);
        self.rows.reserve(more);
    }

    /// The row of the object at `address` in process `p`, new if it has none.
    pub fn building(&mut self, p: usize, address: u64, running_ns: u64) -> &mut Building {
        let next = u32::try_from(self.rows.len()).expect("fewer than 2^32 lock rows");
        let i = *self.index.entry((p, address)).or_insert(next);
        if i == next {
            self.order.push((p, address));
            self.rows.push(Building {
                running_ns,
                ..Default::default()
            });
        }
        &mut self.rows[i as usize]
    }
}

pub(super) fn finish_row(
    profile: &Profile,
    (p, address): (usize, u64),
    b: Building,
    (sites, code, of_a_lock): (&[Site], &[Site], &[bool]),
    late_site: &dyn Fn(usize, usize) -> Site,
    symbolizer: &mut Symbolizer,
) -> LockRow {
    let proc = &profile.processes[p];
    let by_site = |values: &mut dyn Iterator<Item = (usize, u64)>, sites: &[Site]| {
        let mut by: HashMap<&Site, u64> = HashMap::new();
        for (k, v) in values {
            let sum = by.entry(&sites[k]).or_default();
            *sum = sum.saturating_add(v);
        }
        let mut out: Vec<(Site, u64)> = by.into_iter().map(|(s, v)| (s.clone(), v)).collect();
        out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out
    };
    let s = b.samples.map_or_else(Samples::default, |s| *s);
    let mut waiters = by_site(&mut s.waits.iter().map(|w| (w.2, w.3)), sites);
    let holders = by_site(&mut s.releases.iter().map(|r| (r.2, r.3)), sites);
    let (longest_holds, mean_holds) = holds_by_site(&s.releases, sites);
    let inside = by_site(&mut s.held.iter().copied(), code);
    let blocked = by_site(&mut s.blocked.iter().copied(), sites);
    let late_sites: Vec<Site> = s
        .late
        .iter()
        .map(|&(release, work, _)| late_site(release, work))
        .collect();
    let late_work = by_site(
        &mut s.late.iter().enumerate().map(|(i, l)| (i, l.2)),
        &late_sites,
    );
    let chains = chains_of(&s.passed, sites);
    let pairs = pairs_of(&s.waits, &s.releases, sites, &holders);
    let mut counts = b.counts;
    if matches!(
        b.kind,
        Some(WaitKind::Mutex | WaitKind::RwLock | WaitKind::Spin)
    ) {
        // Acquisitions are a sampled estimate, contended ones exact: a lock taken rarely can
        // be estimated under its contended acquisitions, which are acquisitions too (a row
        // read "8 acquisitions, 18 contended").
        let runtime = &mut counts.runtime;
        runtime.acquisitions = runtime.acquisitions.max(runtime.contended);
    }
    counts.blame_ns = holders.iter().fold(0, |sum, h| sum.saturating_add(h.1));
    counts.held_ns = inside.iter().fold(0, |sum, h| sum.saturating_add(h.1));
    counts.blocked_ns = blocked.iter().fold(0, |sum, h| sum.saturating_add(h.1));
    let sampled = waiters.iter().fold(0u64, |sum, w| sum.saturating_add(w.1));
    let by_a_lock = s
        .waits
        .iter()
        .filter(|w| of_a_lock[w.2])
        .fold(0u64, |sum, w| sum.saturating_add(w.3));
    if counts.runtime.wait_ns == 0 {
        // No counts (a process killed before it wrote them): the samples still tell the
        // waiting.
        counts.runtime.wait_ns = sampled;
        counts.lock_use_ns = by_a_lock;
    } else if sampled > 0 {
        // The samples split the exact total between the sites.
        for w in &mut waiters {
            w.1 = share(counts.runtime.wait_ns, w.1, sampled);
        }
        counts.lock_use_ns = share(counts.runtime.wait_ns, by_a_lock, sampled);
    }
    let init = init_site_name(proc, b.init_site, b.kind, symbolizer);
    let try_site = match b.try_fail_site {
        0 | TRY_SITES_MANY => None,
        site => caller_of(proc, site, symbolizer).map(|caller| Site {
            caller,
            lock_function: try_function(b.kind).to_owned(),
        }),
    };
    let symbol = openmp_name(proc, (address, b.init_site), b.kind, symbolizer)
        .or_else(|| symbol_name(proc, address, symbolizer));
    let (name, naming) = match (symbol, init, b.first_wait) {
        (Some(name), _, _) => (name, Naming::Symbol),
        (None, Some(name), _) => (name, Naming::InitSite),
        // A join is named by the threads it waited for, as their ends (the releases that
        // took the blame) name them: `main -> pthread_join of run_worker`.
        (None, None, Some(k)) => match b.kind {
            Some(WaitKind::Join) if !holders.is_empty() => (
                format!("{} of {}", sites[k].label(), joined_threads(&holders)),
                Naming::FirstWait,
            ),
            _ => (sites[k].label(), Naming::FirstWait),
        },
        (None, None, None) => (
            format!("{}@{address:#x}", b.kind.map_or("object", WaitKind::name)),
            Naming::Address,
        ),
    };
    let pressure = b
        .kind
        .filter(|&k| a_held_lock(k, &counts))
        .filter(|_| b.running_ns > 0)
        .map(|_| counts.runtime.wait_ns as f64 / b.running_ns as f64);
    LockRow {
        pid: proc.header.pid,
        address,
        kind: b.kind,
        name,
        naming,
        group: None,
        instances: b.destroyed + u32::from(b.live || b.destroyed == 0),
        counts,
        pressure,
        running_ns: b.running_ns,
        detail: Some(Detail {
            waiters,
            holders,
            pairs,
            inside,
            blocked,
            late_work,
            chains,
            longest_holds,
            mean_holds,
            try_site,
        })
        .filter(|d| *d != Detail::default())
        .map(Box::new),
    }
}

/// A value per holder site.
type ByHolder = Vec<(Site, u64)>;

/// Per holder site, the longest of its releases' holds and their mean (their samples'
/// spans; 0: not timed, left out), each longest first.
fn holds_by_site(releases: &[(u64, u64, usize, u64)], sites: &[Site]) -> (ByHolder, ByHolder) {
    let mut by: HashMap<&Site, (u64, u64, u64)> = HashMap::new();
    for &(_, span, k, _) in releases.iter().filter(|r| r.1 > 0) {
        let (longest, sum, count) = by.entry(&sites[k]).or_default();
        *longest = (*longest).max(span);
        *sum = sum.saturating_add(span);
        *count += 1;
    }
    let sorted = |mut v: ByHolder| {
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    };
    let longest = by.iter().map(|(s, v)| ((*s).clone(), v.0)).collect();
    let mean = by.iter().map(|(s, v)| ((*s).clone(), v.1 / v.2)).collect();
    (sorted(longest), sorted(mean))
}
