//! Who blocked whom: the blame of each release of a lock split over the waiter sites
//! whose recorded waits overlapped its hold (see `super`'s module doc), and what no wait
//! overlapped split by the sites' waiting.
//!
//! Invariants: a holder site's pairs add up to its blame (to rounding); waits that ended
//! unblamed take no part. Not async-signal-safe (allocates); single-threaded.

use super::{Pair, Site};
use std::collections::{BTreeMap, HashMap};

/// How many waits of one waiter site were under way over time: a step function, built
/// from the site's recorded waits, with its integral, so that the waiting of the site over
/// any interval is two binary searches.
#[derive(Default)]
struct Occupancy {
    /// Breakpoints, sorted; the level (waits under way, weighted by what each record stands
    /// for) from each one to the next; and the integral of the level up to each.
    at: Vec<u64>,
    level: Vec<f64>,
    integral: Vec<f64>,
}

impl Occupancy {
    /// From steps (time, change of the level, +1 for a wait's start or -1 for its end).
    /// The level is exactly 0 whenever no wait is under way (the changes, fractions, need
    /// not cancel out in floating point).
    fn of(mut steps: Vec<(u64, f64, i64)>) -> Occupancy {
        steps.sort_by_key(|s| s.0);
        let mut o = Occupancy::default();
        let (mut level, mut integral, mut open) = (0.0, 0.0, 0i64);
        for (t, change, waits) in steps {
            if let (Some(&last), Some(&l)) = (o.at.last(), o.level.last()) {
                integral += l * (t - last) as f64;
            }
            open += waits;
            level = if open > 0 { level + change } else { 0.0 };
            if o.at.last() == Some(&t) {
                *o.level.last_mut().expect("a step") = level;
            } else {
                o.at.push(t);
                o.level.push(level);
                o.integral.push(integral);
            }
        }
        o
    }

    /// The integral of the level from the start of time to `t`.
    fn integral_to(&self, t: u64) -> f64 {
        match self.at.partition_point(|&a| a <= t) {
            0 => 0.0,
            i => self.integral[i - 1] + self.level[i - 1] * (t - self.at[i - 1]) as f64,
        }
    }

    /// The waiting over `[from, to]`, or, for an instant (`from == to`), the level there
    /// (waits that end at `to` count: a release ends the wait it wakes).
    fn over(&self, from: u64, to: u64) -> f64 {
        if from < to {
            return self.integral_to(to) - self.integral_to(from);
        }
        let ending = self.at.partition_point(|&a| a < to);
        let now = self.at.partition_point(|&a| a <= to);
        [ending.checked_sub(1), now.checked_sub(1)]
            .into_iter()
            .flatten()
            .map(|i| self.level[i])
            .fold(0.0, f64::max)
    }
}

/// Who waited behind whom, largest first: `waits` are a lock's wait samples (end, span,
/// path index into `sites`, value, whether someone is to blame), `releases` its blame
/// samples (time, span, path index, value), `holders` its blame per holder site.
pub(super) fn pairs_of(
    waits: &[(u64, u64, usize, u64, bool)],
    releases: &[(u64, u64, usize, u64)],
    sites: &[Site],
    holders: &[(Site, u64)],
) -> Vec<Pair> {
    // Per waiter site: its timed waits as steps of (time, change of waits under way), each
    // record counting for the waits it stands for (value / span).
    let mut steps: BTreeMap<&Site, Vec<(u64, f64, i64)>> = BTreeMap::new();
    for &(end, span, k, value, blamed) in waits {
        if end == 0 || span == 0 || !blamed {
            continue;
        }
        let weight = value as f64 / span as f64;
        let s = steps.entry(&sites[k]).or_default();
        s.push((end.saturating_sub(span), weight, 1));
        s.push((end, -weight, -1));
    }
    let occupancy: Vec<(&Site, Occupancy)> = steps
        .into_iter()
        .map(|(site, s)| (site, Occupancy::of(s)))
        .collect();
    let mut by: HashMap<(&Site, &Site), f64> = HashMap::new();
    let mut untimed: HashMap<&Site, u64> = HashMap::new();
    let mut shares = vec![0.0; occupancy.len()];
    for &(at, span, holder, blame) in releases {
        // The hold, or the instant of its release when its start is unknown (`at` 0: no
        // time at all, matched with nothing).
        let from = at.saturating_sub(span);
        for (share, (_, o)) in shares.iter_mut().zip(&occupancy) {
            *share = if at == 0 {
                0.0
            } else {
                o.over(from, at).max(0.0)
            };
        }
        let total: f64 = shares.iter().sum();
        if total > 0.0 {
            for (share, (waiter, _)) in shares.iter().zip(&occupancy) {
                if *share > 0.0 {
                    *by.entry((waiter, &sites[holder])).or_default() +=
                        blame as f64 * share / total;
                }
            }
        } else {
            let sum = untimed.entry(&sites[holder]).or_default();
            *sum = sum.saturating_add(blame);
        }
    }
    // Blame not matched in time (no release times, or no wait recorded during the hold):
    // split over the waiter sites by their waiting.
    let mut waiters: BTreeMap<&Site, u64> = BTreeMap::new();
    for &(_, _, k, value, blamed) in waits {
        if blamed {
            let sum = waiters.entry(&sites[k]).or_default();
            *sum = sum.saturating_add(value);
        }
    }
    let blamed = waiters.values().fold(0u64, |sum, v| sum.saturating_add(*v));
    for (h, _) in holders {
        let blame = untimed.get(h).copied().unwrap_or(0);
        for (&w, &wait) in &waiters {
            *by.entry((w, h)).or_default() += share(blame, wait, blamed) as f64;
        }
    }
    let mut pairs: Vec<Pair> = by
        .into_iter()
        .map(|((w, h), ns)| (w, h, ns.round() as u64))
        .filter(|&(_, _, ns)| ns > 0)
        .map(|(w, h, ns)| Pair {
            waiter: w.clone(),
            holder: h.clone(),
            ns,
        })
        .collect();
    pairs.sort_by(|a, b| {
        b.ns.cmp(&a.ns)
            .then_with(|| (&a.waiter, &a.holder).cmp(&(&b.waiter, &b.holder)))
    });
    pairs
}

/// `total * part / whole` (0 when `whole` is 0).
pub(super) fn share(total: u64, part: u64, whole: u64) -> u64 {
    match whole {
        0 => 0,
        w => (u128::from(total) * u128::from(part) / u128::from(w)) as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn occupancy_integrates_waits_under_way_and_counts_a_wait_ending_at_an_instant() {
        // One wait from 0 to 10, two (one record standing for two) from 5 to 15.
        let o = Occupancy::of(vec![
            (0, 1.0, 1),
            (10, -1.0, -1),
            (5, 2.0, 1),
            (15, -2.0, -1),
        ]);
        assert_eq!(o.over(0, 15), 5.0 + 15.0 + 10.0);
        assert_eq!(o.over(7, 12), 3.0 * 3.0 + 2.0 * 2.0);
        assert_eq!(
            o.over(10, 10),
            3.0,
            "the wait ending at 10 was under way until it"
        );
        assert_eq!(o.over(12, 12), 2.0);
        assert_eq!((o.over(20, 20), o.over(20, 30)), (0.0, 0.0));
        assert_eq!(Occupancy::of(Vec::new()).over(0, 10), 0.0);
        // Weights that do not cancel out in floating point leave no level behind.
        let o = Occupancy::of(vec![(0, 0.1, 1), (1, 0.2, 1), (2, -0.1, -1), (3, -0.2, -1)]);
        assert!((o.over(3, 3) - 0.2).abs() < 1e-12, "the wait ending at 3");
        assert_eq!(
            (o.over(4, 4), o.over(3, 9)),
            (0.0, 0.0),
            "exactly none after"
        );
    }
}
