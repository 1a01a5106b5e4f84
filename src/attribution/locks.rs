//! The lock table: one row per lock (and per group of like locks) with its counts, its
//! waiting and blame, and who waited behind whom: what `report --view locks` shows.
//!
//! Job: merge the runtime's per-lock counters (`LockStats` records) with the idleness and
//! blame samples that name their lock (`ObjectSample` records), name each lock, and group
//! like locks:
//! - a lock inside a global or static variable is named by its symbol and offset
//!   (`table_lock`, `buckets+0x140`), from the module's symbol table; locks in one array
//!   symbol form a group (`buckets[]`);
//! - any other lock by the function that initialised it (`cache_new ->
//!   pthread_mutex_init`, from the return address the runtime kept, `locks::init_sites`),
//!   else by the call path of its first recorded wait (`cache_touch ->
//!   pthread_mutex_lock`); locks made, or first waited on, at one site form a group;
//! - a lock with neither (never waited on, not in a variable) by its kind and address.
//!
//! Contended acquisitions and waiting (`wait_ns`) are the runtime's exact counts: every
//! contended acquisition is timed, whether or not it was measured for the blame. Blame,
//! and the waiting per waiter site, are sums of the lock's samples (thinned, and
//! calibrated as the other views calibrate them, [`super::calibration`]).
//! *Who blocked whom* is matched in time (format version 3 on, whose samples carry when
//! their wait or release ended and how long the wait or hold lasted): the blame of each
//! release (the waiting during its hold) is split over the waiter sites whose recorded
//! waits overlapped the hold, in proportion to the overlap times the waiters each record
//! stands for (a mutex's hold runs from its start, or from its first waiter's arrival;
//! an rwlock's release and an event, whose samples have no span, are matched with the
//! waits under way at that instant). Waits that ended unblamed (timed out, interrupted)
//! take no part. So the pairs of a holder add up to its blame; a waiter's waiting that no
//! pair accounts for was spent while the lock was free (being woken and scheduled), which
//! blames nobody, though with thinned samples a waiter's pairs can exceed its waiting.
//! Blame that no recorded wait overlapped (waits' samples are thinned when short; older
//! profiles carry no times) is split over the waiter sites in proportion to their
//! waiting: the estimate that every waiter site waited behind every holder site alike.
//! Each waiter site's recorded waits make a step function of waits under way with its
//! integral (`pairs.rs`'s `Occupancy`): a release costs two binary searches per waiter site.
//!
//! What the holders computed while others waited (`held.contended` samples, which name
//! their lock) is summed per lock (`held_ns`) and per code site (`inside`: the function the
//! sample was in and its caller).
//!
//! Critical section pressure (Free Lunch) is a lock's waiting over the running time of the
//! process's threads (from their start and end times) less their waits for events
//! (condition variables, semaphores, barriers, joins), which are not running either.
//!
//! Invariants: rows of one process and address merge every lock that lived there (a lock
//! destroyed and another initialised at its address are counted in one row, `instances`
//! says how many); a profile of format version 1 yields an empty table with
//! `available == false`. Not async-signal-safe (allocates); single-threaded.
//!
//! Files: this one holds the table's types, [`lock_table`] and the rows' counts;
//! `locks/naming.rs` names and groups the locks, `locks/pairs.rs` matches waiters with
//! holders, `locks/waiting_for.rs` tells a row's waiting for a lock from an event's and
//! makes the running time pressure is over.

mod chained;
mod counts;
mod naming;
mod pairs;
mod rows;
mod waiting_for;

use super::calibration::Calibration;
use super::lock_forwarders::{CountedPath, Forwarders};
use super::paths::{expand_each, lock_paths_of, RawKey};
use super::shifts::Shifts;
use super::symbolize::Symbolizer;
use super::wait_class::path_of_a_lock;
use super::{select_processes, AttributionError, Filter, Names};
use crate::format::read::Profile;
use crate::format::{
    protocol, WaitKind, LOCK_DESTROYED, LOCK_TABLE_VERSION, SAMPLE_UNBLAMED, TRY_SITES_MANY,
};
use chained::name_targets;
pub use chained::Chain;
pub use counts::Counts;
use naming::{code_of, groups, late_code, lock_frame, site_of, work_keys};
use rows::{finish_row, PathKeys, Rows};
pub(super) use waiting_for::is_lock_kind;
use waiting_for::running_ns;
pub use waiting_for::{a_held_lock, waits_for_a_lock};

/// How a lock got its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// The global or static variable it lies in (symbol and offset).
    Symbol,
    /// The function that initialised it.
    InitSite,
    /// The call path of its first recorded wait.
    FirstWait,
    /// Its kind and address (nothing better is known).
    Address,
}

impl Naming {
    pub fn name(self) -> &'static str {
        match self {
            Naming::Symbol => "symbol",
            Naming::InitSite => "init site",
            Naming::FirstWait => "first wait",
            Naming::Address => "address",
        }
    }
}

/// A call site: the function that called a lock function, and that lock function.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Site {
    pub caller: String,
    pub lock_function: String,
}

impl Site {
    /// `caller -> lock_function`.
    pub fn label(&self) -> String {
        match self.lock_function.as_str() {
            "" => self.caller.clone(),
            f => format!("{} -> {f}", self.caller),
        }
    }
}

/// The waiting one waiter site spent behind one holder site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    pub waiter: Site,
    pub holder: Site,
    pub ns: u64,
}

/// One lock (all the locks that lived at one address of one process).
#[derive(Debug, Clone)]
pub struct LockRow {
    pub pid: u32,
    pub address: u64,
    pub kind: Option<WaitKind>,
    pub name: String,
    pub naming: Naming,
    /// The group it belongs to, when others share its array symbol or first-wait site.
    pub group: Option<String>,
    /// Locks that lived at this address (destroyed ones and the last).
    pub instances: u32,
    pub counts: Counts,
    /// Waiting over the running time of the process's threads (lock kinds only).
    pub pressure: Option<f64>,
    /// That running time (ns).
    pub running_ns: u64,
    /// Its sites and pairs; `None` when it has none (a lock only ever taken without
    /// waiting: most locks of a program that makes millions, so they cost no room here).
    pub detail: Option<Box<Detail>>,
}

/// What a lock's samples and failed trylocks tell beyond its counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Detail {
    /// Waiting per waiter site, and blame per holder site, largest first.
    pub waiters: Vec<(Site, u64)>,
    pub holders: Vec<(Site, u64)>,
    /// Who waited behind whom, largest first (see the module doc).
    pub pairs: Vec<Pair>,
    /// Where its holders computed while others waited, largest first: the function and its
    /// caller (`caller -> function`, as a [`Site`]).
    pub inside: Vec<(Site, u64)>,
    /// Where its holders blocked in a call (a sleep, a poll, a wait) inside holds others
    /// waited for, largest first: the call's site (`caller -> nanosleep`).
    pub blocked: Vec<(Site, u64)>,
    /// What the threads that ended its waits (a barrier's last arrivals, joined threads,
    /// an event's signallers, posters and wakers) computed while the others waited, largest
    /// first: the function and its caller, as in `inside` (the blame that moved there:
    /// [`late_work`]).
    pub late_work: Vec<(Site, u64)>,
    /// Where its holders passed their blame on while they were themselves waiting inside
    /// their holds (one hop of the `root` metric's chains), largest first.
    pub chains: Vec<Chain>,
    /// The longest hold each holder site's recorded releases lasted (ns; longest first): a
    /// lower bound of its longest hold, as releases' samples are thinned, and known only
    /// for holds timed (a mutex's, from its start or its first waiter's arrival).
    pub longest_holds: Vec<(Site, u64)>,
    /// The mean of those recorded holds per holder site (ns; longest first): what the
    /// site's holds typically last, which one preempted hold does not make long.
    pub mean_holds: Vec<(Site, u64)>,
    /// Where its failed trylocks were called from: the one site (`poll -> pthread_mutex_trylock`)
    /// when the runtime saw them all come from one, else `None` (several sites, none
    /// failed, or a profile older than format version 4).
    pub try_site: Option<Site>,
}

impl LockRow {
    /// Waiting per waiter site, largest first.
    pub fn waiters(&self) -> &[(Site, u64)] {
        self.detail.as_ref().map_or(&[], |d| &d.waiters)
    }

    /// Blame per holder site, largest first.
    pub fn holders(&self) -> &[(Site, u64)] {
        self.detail.as_ref().map_or(&[], |d| &d.holders)
    }

    /// Who waited behind whom, largest first.
    pub fn longest_holds(&self) -> &[(Site, u64)] {
        self.detail.as_ref().map_or(&[], |d| &d.longest_holds)
    }

    pub fn mean_holds(&self) -> &[(Site, u64)] {
        self.detail.as_ref().map_or(&[], |d| &d.mean_holds)
    }

    pub fn pairs(&self) -> &[Pair] {
        self.detail.as_ref().map_or(&[], |d| &d.pairs)
    }

    /// Where its holders computed while others waited, largest first.
    pub fn inside(&self) -> &[(Site, u64)] {
        self.detail.as_ref().map_or(&[], |d| &d.inside)
    }

    /// Its holders' blame passed on along chains, largest first.
    pub fn chains(&self) -> &[Chain] {
        self.detail.as_ref().map_or(&[], |d| &d.chains)
    }

    /// What the threads that ended its waits computed meanwhile, largest first.
    pub fn late_work(&self) -> &[(Site, u64)] {
        self.detail.as_ref().map_or(&[], |d| &d.late_work)
    }

    /// Where its holders blocked inside holds others waited for, largest first.
    pub fn blocked(&self) -> &[(Site, u64)] {
        self.detail.as_ref().map_or(&[], |d| &d.blocked)
    }

    /// Where its failed trylocks were called from, if from one site.
    pub fn try_site(&self) -> Option<&Site> {
        self.detail.as_ref().and_then(|d| d.try_site.as_ref())
    }

    /// Its detail, made (empty) if it had none.
    pub fn detail_mut(&mut self) -> &mut Detail {
        self.detail.get_or_insert_with(Box::default)
    }
}

/// Locks with the same array symbol or first-wait site.
#[derive(Debug, Clone)]
pub struct LockGroup {
    pub pid: u32,
    pub name: String,
    pub kind: Option<WaitKind>,
    /// Indices into [`LockTable::locks`].
    pub members: Vec<usize>,
    pub counts: Counts,
    pub pressure: Option<f64>,
}

/// The lock view's data.
#[derive(Debug, Default)]
pub struct LockTable {
    /// Whether the selected profile parts could hold lock data (format version 2 on).
    pub available: bool,
    /// Rows, by blame, then waiting, then acquisitions (largest first).
    pub locks: Vec<LockRow>,
    pub groups: Vec<LockGroup>,
    /// Running time of the selected processes' threads (ns), the base of pressure.
    pub running_ns: u64,
    /// Whether acquisitions were counted (sampled) in every selected process.
    pub acquisitions_counted: bool,
    /// Lock events the runtime could not attribute to a row (its table was full).
    pub untabled_events: u64,
    /// Lock inits whose init site the runtime could not keep (its fixed table): those locks
    /// are in no init-site group.
    pub init_sites_displaced: u64,
    /// Blame still passing along chains of waits after their hop limit (ns: a knot of
    /// threads waiting on each other's locks, or a longer chain): its `root` stays at the
    /// release it reached ([`super::chains::MAX_HOPS`]).
    pub chains_cut_ns: u64,
}

/// Builds the lock table of the processes `filter` selects (a thread filter selects the
/// processes of that thread; counts are per lock, not per thread).
pub fn lock_table(
    profile: &Profile,
    filter: Filter,
    symbolizer: &mut Symbolizer,
    shifts: &mut Shifts,
) -> Result<LockTable, AttributionError> {
    let selected = select_processes(profile, filter)?;
    let mut table = LockTable {
        available: selected
            .iter()
            .all(|&p| profile.processes[p].version >= LOCK_TABLE_VERSION),
        acquisitions_counted: true,
        ..Default::default()
    };
    let mut names = Names::default();
    // The rows under construction, in order of first sight, and each (process, address)'s
    // index among them: memory in proportion to the profile's lock records.
    let mut rows = Rows::default();
    let mut paths_seen = PathKeys::default();
    for &p in &selected {
        let proc = &profile.processes[p];
        let calibration = Calibration::of(proc);
        let running = running_ns(proc, calibration);
        table.running_ns += running;
        table.untabled_events += proc.counter(crate::format::counters::LOCK_EVENTS_UNTABLED);
        table.init_sites_displaced += proc.counter(crate::format::counters::INIT_SITES_DISPLACED);
        table.acquisitions_counted &=
            proc.counter(crate::format::counters::ACQUISITIONS_UNCOUNTED) == 0;
        rows.reserve(proc.locks.len());
        for l in &proc.locks {
            let row = rows.building(p, l.address, running);
            row.kind = row.kind.or(WaitKind::from_code(l.kind));
            if l.init_site != 0 {
                row.init_site = l.init_site;
            }
            row.try_fail_site = match (row.try_fail_site, l.try_fail_site) {
                (had, 0) => had,
                (0, site) => site,
                (had, site) if had == site => had,
                _ => TRY_SITES_MANY,
            };
            row.counts.runtime.add_counts(l);
            row.destroyed += u32::from(l.flags & LOCK_DESTROYED != 0);
            row.live |= l.flags & LOCK_DESTROYED == 0;
        }
        let metric = |name: &str| proc.metric(name).map(usize::from);
        let (idleness, blame, held, blocked) = (
            metric(protocol::IDLENESS.name),
            metric(protocol::BLAME.name),
            metric(protocol::HELD_CONTENDED.name),
            metric(protocol::HELD_BLOCKED.name),
        );
        let shifted = shifts.of(profile, p, lock_paths_of(profile, p, symbolizer));
        let moves = &shifted.late_work;
        for (i, s) in proc
            .samples
            .iter()
            .enumerate()
            .filter(|(_, s)| s.object != 0)
        {
            let m = Some(usize::from(s.metric));
            let is_wait = m == idleness;
            if !is_wait && m != blame && m != held && m != blocked {
                continue;
            }
            let mut index_of = |key: RawKey| paths_seen.index(key);
            let k = index_of((p, s.stack, s.first_is_return()));
            let late: Vec<(usize, f64)> = moves
                .get(&i)
                .into_iter()
                .flatten()
                .map(|share| {
                    (
                        index_of((p, share.stack, share.first_is_return)),
                        share.share,
                    )
                })
                .collect();
            let row = rows.building(p, s.object, running);
            row.kind = row.kind.or(WaitKind::from_flags(s.flags));
            let value = calibration.apply(s.value, s.flags);
            paths_seen.ns[k] = paths_seen.ns[k].saturating_add(value);
            if is_wait {
                row.first_wait.get_or_insert(k);
                let blamed = s.flags & SAMPLE_UNBLAMED == 0;
                row.samples().waits.push((s.time, s.span, k, value, blamed));
            } else if m == blame {
                let samples = row.samples();
                samples.releases.push((s.time, s.span, k, value));
                for (work, share) in late {
                    samples.late.push((k, work, (value as f64 * share) as u64));
                }
            } else if m == held {
                row.samples().held.push((k, value));
            } else {
                row.samples().blocked.push((k, value));
            }
        }
        // Blame passed along chains (the root metric's hops), kept by the lock passing it.
        let chained = &shifted.chains;
        table.chains_cut_ns += chained.cut.round() as u64;
        for &(from, to, ns) in &chained.passed {
            let (from, to) = (&proc.samples[from], &proc.samples[to]);
            let mut index_of = |s: &crate::format::read::Sample| {
                paths_seen.index((p, s.stack, s.first_is_return()))
            };
            let (k, to_k) = (index_of(from), index_of(to));
            let row = rows.building(p, from.object, running);
            row.samples().passed.push((k, to.object, to_k, ns as u64));
        }
    }
    let paths = expand_each(profile, &paths_seen.keys, symbolizer, &mut names);
    let lock_at: Vec<Option<usize>> = paths.iter().map(|l| lock_frame(l, &names)).collect();
    let forwarders = Forwarders::of(&paths, &lock_at, &paths_seen.ns, &mut names, |names| {
        let (keys, weights): (Vec<RawKey>, Vec<u64>) =
            work_keys(profile, &selected).into_iter().unzip();
        let cpu = expand_each(profile, &keys, symbolizer, names);
        cpu.into_iter()
            .zip(weights)
            .map(|(locs, weight)| CountedPath {
                lock: lock_frame(&locs, names),
                locs,
                weight,
            })
            .collect()
    });
    let sites: Vec<Site> = paths
        .iter()
        .map(|locs| site_of(locs, &names, &forwarders))
        .collect();
    let code: Vec<Site> = paths.iter().map(|locs| code_of(locs, &names)).collect();
    let of_a_lock: Vec<bool> = paths
        .iter()
        .map(|locs| path_of_a_lock(&names, locs))
        .collect();
    let Rows { index, order, rows } = rows;
    drop(index);
    table.locks = Vec::with_capacity(order.len());
    for (key, b) in order.into_iter().zip(rows) {
        table.locks.push(finish_row(
            profile,
            key,
            b,
            (&sites, &code, &of_a_lock),
            &|release, work| late_code(&paths[work], &paths[release], &names),
            symbolizer,
        ));
    }
    name_targets(&mut table.locks);
    table.locks.sort_by(|a, b| {
        let rank = |r: &LockRow| {
            (
                r.counts.blame_ns,
                r.counts.runtime.wait_ns,
                r.counts.runtime.acquisitions,
            )
        };
        rank(b).cmp(&rank(a)).then_with(|| a.name.cmp(&b.name))
    });
    table.groups = groups(&mut table.locks);
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::testutil::{
        lock_table_of as table_of, lock_table_process, write_part, TempDir, TABLE_LOCK,
    };
    use crate::format::read::{read_profile, ReadOptions};
    use crate::format::LockStats;

    #[test]
    fn a_lock_is_never_estimated_under_its_contended_acquisitions() {
        // 8 acquisitions estimated from a sample, 18 contended (exact).
        let mut p = lock_table_process();
        p.locks[0].acquisitions = 8;
        p.locks[0].contended = 18;
        let t = table_of(p);
        let c = &t.locks[0].counts;
        assert_eq!((c.runtime.acquisitions, c.runtime.contended), (18, 18));
        assert_eq!(c.contention_rate(), Some(1.0));
    }

    #[test]
    fn a_lock_row_joins_its_counts_its_samples_and_its_threads_running_time() {
        let t = table_of(lock_table_process());
        assert!(t.available && t.acquisitions_counted);
        assert_eq!(t.running_ns, 30_000_000, "three threads of 10 ms");
        let l = &t.locks[0];
        assert_eq!((l.address, l.kind), (TABLE_LOCK, Some(WaitKind::Mutex)));
        assert_eq!(l.naming, Naming::FirstWait, "no symbol, no init site");
        assert_eq!(l.name, "lookup -> pthread_mutex_lock");
        let c = &l.counts;
        assert_eq!(
            (
                c.runtime.acquisitions,
                c.runtime.contended,
                c.runtime.try_failed,
                c.try_attempts()
            ),
            (1000, 40, 3, 103)
        );
        assert_eq!(
            (
                c.runtime.wait_ns,
                c.runtime.max_wait_ns,
                c.runtime.peak_waiters
            ),
            (7_000_000, 1_000_000, 3)
        );
        assert_eq!(c.blame_ns, 6_300_000, "the blame samples");
        assert_eq!(c.contention_rate(), Some(0.04));
        assert_eq!(l.pressure, Some(7.0 / 30.0));
        let sites = |v: &[(Site, u64)]| -> Vec<(String, u64)> {
            v.iter().map(|(s, ns)| (s.label(), *ns)).collect()
        };
        assert_eq!(
            sites(l.waiters()),
            [
                ("lookup -> pthread_mutex_lock".to_owned(), 6_000_000),
                ("insert -> pthread_mutex_lock".to_owned(), 1_000_000)
            ]
        );
        assert_eq!(
            sites(l.holders()),
            [
                ("insert -> pthread_mutex_unlock".to_owned(), 4_800_000),
                ("lookup -> pthread_mutex_unlock".to_owned(), 1_500_000)
            ]
        );
        // Each holder's blame split over the waiters by their waiting: 6/7 and 1/7.
        assert_eq!(
            pairs(l),
            [
                ("lookup", "insert", 4_114_285),
                ("lookup", "lookup", 1_285_714),
                ("insert", "insert", 685_714),
                ("insert", "lookup", 214_285)
            ]
        );
        assert!(t.groups.is_empty());
    }

    /// [`lock_table_process`] with times: lookup waited from 4 to 10 ms, during which insert
    /// held the lock from 6 to 9 ms; insert waited from 1.5 to 2.5 ms, during which lookup
    /// released it at 2 ms (its hold's start unknown). Written by the runtime's encoding
    /// and read back.
    fn timed_lock_table() -> LockTable {
        let mut p = lock_table_process();
        let ms = 1_000_000;
        for s in &mut p.samples {
            let (time, span) = match (s.tid, s.metric) {
                (101, 1) => (10 * ms, 6 * ms),
                (101, 2) => (2 * ms, 0),
                (102, 1) => (5 * ms / 2, ms),
                (102, 2) => (9 * ms, 3 * ms),
                _ => (0, 0),
            };
            (s.time, s.span) = (time, span);
        }
        let tmp = TempDir::new("timed-locks");
        write_part(&tmp.0, &p);
        let mut profile = read_profile(&tmp.0, ReadOptions::default()).expect("readable");
        assert_eq!(profile.processes[0].samples, p.samples, "times read back");
        table_of(profile.processes.remove(0))
    }

    /// A lock's pairs as (waiter, holder, ns).
    fn pairs(l: &LockRow) -> Vec<(&str, &str, u64)> {
        l.pairs()
            .iter()
            .map(|p| (p.waiter.caller.as_str(), p.holder.caller.as_str(), p.ns))
            .collect()
    }

    #[test]
    fn a_wait_is_spent_behind_the_releases_recorded_during_it() {
        let t = timed_lock_table();
        // Insert's hold (6 to 9 ms) overlapped lookup's wait only: all its blame is
        // lookup's; lookup's release (start unknown) came during insert's wait. Nobody
        // waited behind its own site, as the estimate from blame shares had it.
        assert_eq!(
            pairs(&t.locks[0]),
            [
                ("lookup", "insert", 4_800_000),
                ("insert", "lookup", 1_500_000)
            ]
        );
    }

    #[test]
    fn a_wait_with_no_release_recorded_during_it_is_split_by_blame_shares() {
        let mut p = lock_table_process();
        for s in p.samples.iter_mut().filter(|s| s.metric == 2) {
            // Holds long after every wait: none overlaps one.
            (s.time, s.span) = (100_000_000, 1_000_000);
        }
        for s in p.samples.iter_mut().filter(|s| s.metric == 1) {
            (s.time, s.span) = (10_000_000, 1_000_000);
        }
        let t = table_of(p);
        let untimed = table_of(lock_table_process());
        assert_eq!(t.locks[0].pairs(), untimed.locks[0].pairs());
    }

    #[test]
    fn locks_of_one_site_form_a_group_and_a_destroyed_lock_shares_its_addresss_row() {
        let mut p = lock_table_process();
        let first = p.locks[0];
        // The same lock destroyed once before, and a second lock first waited on at the
        // same site.
        p.locks.insert(
            0,
            LockStats {
                flags: LOCK_DESTROYED,
                ..first
            },
        );
        let other = TABLE_LOCK + 0x40;
        p.locks.push(LockStats {
            address: other,
            ..first
        });
        let s = *p.samples.iter().find(|s| s.metric == 1).unwrap();
        p.samples
            .push(crate::format::read::Sample { object: other, ..s });
        let t = table_of(p);
        let row = t.locks.iter().find(|l| l.address == TABLE_LOCK).unwrap();
        assert_eq!(row.instances, 2);
        assert_eq!(row.counts.runtime.acquisitions, 2000, "both locks' counts");
        assert_eq!(t.groups.len(), 1);
        let g = &t.groups[0];
        assert_eq!(g.members.len(), 2);
        assert_eq!(g.counts.runtime.acquisitions, 3000);
        assert_eq!(g.name, "lookup -> pthread_mutex_lock");
    }

    #[test]
    fn a_profile_older_than_lock_tables_has_none() {
        let mut p = lock_table_process();
        p.version = 1;
        p.locks.clear();
        let t = table_of(p);
        assert!(!t.available);
    }
}
