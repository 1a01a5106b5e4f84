//! When each of a thread's current mutex holds began, for the blame its release takes.
//!
//! Job: a mutex's holders read its waiter-time history at their release
//! (`wait_table::hold_blame`), from their hold's start, and the waiter-time integral of its
//! unregistered waiters from their [`Mark`] of it at that start (`arrivals`), which only the
//! holding thread needs to know: so they are kept here, per thread, not in anything shared. A hold is noted only
//! when others may be waiting for the mutex as it starts; a release that finds no note
//! reads from before anyone waited, which is right for a hold that began while nobody did.
//!
//! Invariants: owner thread only; a few holds at once. More evict the oldest note (counted
//! by the caller), and a release that finds no note then reads from no earlier than that
//! eviction ([`HoldStarts::end`]): an evicted hold is undercounted, never another hold's
//! waiting counted. A note left by a hold whose release was not measured (nobody waited any
//! more) is stale: the mutex's history counts only from its latest revival
//! (`wait_table::history`), which a stale note predates; and its mark is either refused by
//! [`Mark::waited_since`] or counts only waiting that began during the hold (a hold is noted
//! whenever an unregistered waiter is counted as it starts, so an unnoted one began with
//! none). Allocation-free; not used by the
//! signal handler.

use crate::arrivals::Mark;

/// Holds noted at once: nested holds of mutexes that others wait for.
const SLOTS: usize = 8;

/// A thread's noted mutex holds: (address, start) pairs, address 0 for none, and the marks
/// of their integrals at their starts.
#[derive(Debug, Default)]
pub struct HoldStarts {
    slots: [(usize, u64); SLOTS],
    marks: [Option<Mark>; SLOTS],
    /// The start of the latest note evicted.
    evicted: u64,
}

impl HoldStarts {
    /// Notes that the thread's hold of the mutex at `address` started at `now`, when its
    /// integral read `mark` (`None`: unknown). False when another hold's note had to be
    /// dropped for it.
    pub fn start(&mut self, address: usize, now: u64, mark: Option<Mark>) -> bool {
        self.start_then(address, || (now, mark)).1
    }

    /// [`HoldStarts::start`] with the start and mark that `note` gives once the note's place
    /// is found (its line loaded: a thread just woken from a wait often finds its own state
    /// in another CPU's cache, and a start read before the misses counted them in the
    /// hold). Returns the start, and false when another hold's note had to be dropped.
    pub fn start_then(
        &mut self,
        address: usize,
        note: impl FnOnce() -> (u64, Option<Mark>),
    ) -> (u64, bool) {
        let (slot, kept_all) = match self.slots.iter().position(|&(a, _)| a == address) {
            Some(i) => (i, true),
            None => match self.slots.iter().position(|&(a, _)| a == 0) {
                Some(i) => (i, true),
                None => {
                    let oldest = (0..SLOTS).min_by_key(|&i| self.slots[i].1).unwrap_or(0);
                    self.evicted = self.evicted.max(self.slots[oldest].1);
                    (oldest, false)
                }
            },
        };
        let (now, mark) = note();
        self.slots[slot] = (address, now);
        self.marks[slot] = mark;
        (now, kept_all)
    }

    /// The start of the thread's hold of the mutex at `address` and its mark, forgotten
    /// (the hold ends); when it was not noted, the start of the latest evicted note, if any
    /// (the hold may be one of them: none earlier is counted), without a mark, else `None`.
    pub fn end(&mut self, address: usize) -> Option<(u64, Option<Mark>)> {
        match self.slots.iter().position(|&(a, _)| a == address) {
            Some(i) => {
                let start = self.slots[i].1;
                self.slots[i] = (0, 0);
                Some((start, self.marks[i]))
            }
            None => (self.evicted > 0).then_some((self.evicted, None)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_is_found_once_and_the_oldest_gives_way() {
        let mut holds = HoldStarts::default();
        assert_eq!(holds.end(0x10), None, "nothing noted, nothing evicted");
        assert!(holds.start(0x10, 5, Some(Mark::default())));
        assert!(
            holds.start(0x10, 9, Some(Mark::default())),
            "a new hold of the same mutex replaces its note"
        );
        for i in 1..SLOTS {
            assert!(holds.start(0x100 * i, 10 + i as u64, Some(Mark::default())));
        }
        assert!(
            !holds.start(0x9999, 100, Some(Mark::default())),
            "full: the oldest note is dropped"
        );
        let noted = Some(Mark::default());
        assert_eq!(
            holds.end(0x10),
            Some((9, None)),
            "the dropped one: its release reads from no earlier than its start, with no mark"
        );
        assert_eq!(holds.end(0x9999), Some((100, noted)));
        assert_eq!(
            holds.end(0x9999),
            Some((9, None)),
            "forgotten at its end: no earlier than the eviction"
        );
        assert_eq!(holds.end(0x200), Some((12, noted)));
    }

    #[test]
    fn a_start_read_once_its_place_is_found_is_the_one_noted() {
        let mut holds = HoldStarts::default();
        for i in 1..=SLOTS {
            let (start, kept_all) = holds.start_then(0x100 * i, || (i as u64, None));
            assert_eq!((start, kept_all), (i as u64, true));
        }
        // Full: the place is the oldest note's (start 1), dropped before the clock is read.
        let mut reads = 0;
        let (start, kept_all) = holds.start_then(0x7777, || {
            reads += 1;
            (50, Some(Mark::default()))
        });
        assert_eq!((start, kept_all, reads), (50, false, 1));
        assert_eq!(holds.end(0x7777), Some((50, Some(Mark::default()))));
        assert_eq!(holds.end(0x100), Some((1, None)), "evicted: from its start");
    }
}
