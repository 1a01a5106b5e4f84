//! Waits as intervals of time, per object: how much waiting on an object lay inside any
//! stretch of time (the late work's windows, a chain's holds).
//!
//! Invariants: an object's waits are kept sorted by end with the longest one's length, so
//! a stretch visits only the waits that end inside it or within that length after it.
//! Pure; analysis code, not used from the runtime.

use std::collections::HashMap;

/// An interval `[start, end)` of waiting by `tid` on `object`.
#[derive(Debug, Clone, Copy)]
pub struct Waited {
    pub start: u64,
    pub end: u64,
    pub tid: u32,
    pub object: u64,
}

/// The waits on each object, sorted by end, with the longest's length.
pub struct Intervals {
    on: HashMap<u64, (Vec<Waited>, u64)>,
}

impl Intervals {
    pub fn of(waits: HashMap<u64, Vec<Waited>>) -> Intervals {
        let on = waits
            .into_iter()
            .map(|(object, mut list)| {
                list.sort_unstable_by_key(|w| w.end);
                let longest = list.iter().map(|w| w.end - w.start).max().unwrap_or(0);
                (object, (list, longest))
            })
            .collect();
        Intervals { on }
    }

    /// The waits on `object` (but thread `except`'s) that overlap `stretch`, cut to it:
    /// they end after its start and begin before its end (so end before its end plus the
    /// longest wait).
    pub fn within(
        &self,
        object: u64,
        except: Option<u32>,
        stretch: (u64, u64),
    ) -> impl Iterator<Item = (u64, u64)> + '_ {
        let list = self.on.get(&object).map_or(&[][..], |(l, _)| l.as_slice());
        let longest = self.on.get(&object).map_or(0, |(_, l)| *l);
        let first = list.partition_point(|w| w.end <= stretch.0);
        list[first..]
            .iter()
            .take_while(move |w| w.end < stretch.1.saturating_add(longest))
            .filter(move |w| Some(w.tid) != except)
            .filter_map(move |w| clip((w.start, w.end), stretch))
    }

    /// The waiting on `object` (but thread `except`'s) inside `stretch`.
    pub fn waiting(&self, object: u64, except: Option<u32>, stretch: (u64, u64)) -> u64 {
        self.within(object, except, stretch)
            .map(|(s, e)| e - s)
            .sum()
    }
}

/// `a` cut to `b`, or `None` when they do not overlap.
pub fn clip(a: (u64, u64), b: (u64, u64)) -> Option<(u64, u64)> {
    let (start, end) = (a.0.max(b.0), a.1.min(b.1));
    (start < end).then_some((start, end))
}

/// The part of `a` inside `b`.
pub fn overlap(a: (u64, u64), b: (u64, u64)) -> u64 {
    clip(a, b).map_or(0, |(s, e)| e - s)
}
