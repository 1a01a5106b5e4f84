//! When each of a thread's current mutex holds began, for the blame its release takes.
//!
//! Job: a mutex's holders read its waiter-time history at their release
//! (`wait_table::hold_blame`), from their hold's start, which only the holding thread needs
//! to know: so it is kept here, per thread, not in anything shared. A hold is noted only
//! when others may be waiting for the mutex as it starts; a release that finds no note
//! reads from before anyone waited, which is right for a hold that began while nobody did.
//!
//! Invariants: owner thread only; a few holds at once. More evict the oldest note (counted
//! by the caller), and a release that finds no note then reads from no earlier than that
//! eviction ([`HoldStarts::end`]): an evicted hold is undercounted, never another hold's
//! waiting counted. A note left by a hold whose release was not measured (nobody waited any
//! more) is stale: the mutex's history counts only from its latest revival
//! (`wait_table::history`), which a stale note predates. Allocation-free; not used by the
//! signal handler.

/// Holds noted at once: nested holds of mutexes that others wait for.
const SLOTS: usize = 8;

/// A thread's noted mutex holds: (address, start) pairs, address 0 for none.
#[derive(Debug, Default)]
pub struct HoldStarts {
    slots: [(usize, u64); SLOTS],
    /// The start of the latest note evicted.
    evicted: u64,
}

impl HoldStarts {
    /// Notes that the thread's hold of the mutex at `address` started at `now`. False when
    /// another hold's note had to be dropped for it.
    pub fn start(&mut self, address: usize, now: u64) -> bool {
        let slot = match self.slots.iter().position(|&(a, _)| a == address) {
            Some(i) => i,
            None => match self.slots.iter().position(|&(a, _)| a == 0) {
                Some(i) => i,
                None => {
                    let oldest = (0..SLOTS).min_by_key(|&i| self.slots[i].1).unwrap_or(0);
                    self.evicted = self.evicted.max(self.slots[oldest].1);
                    self.slots[oldest] = (address, now);
                    return false;
                }
            },
        };
        self.slots[slot] = (address, now);
        true
    }

    /// The start of the thread's hold of the mutex at `address`, forgotten (the hold ends);
    /// when it was not noted, the start of the latest evicted note, if any (the hold may be
    /// one of them: none earlier is counted), else `None`.
    pub fn end(&mut self, address: usize) -> Option<u64> {
        match self.slots.iter_mut().find(|(a, _)| *a == address) {
            Some(slot) => {
                let start = slot.1;
                *slot = (0, 0);
                Some(start)
            }
            None => (self.evicted > 0).then_some(self.evicted),
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
        assert!(holds.start(0x10, 5));
        assert!(
            holds.start(0x10, 9),
            "a new hold of the same mutex replaces its note"
        );
        for i in 1..SLOTS {
            assert!(holds.start(0x100 * i, 10 + i as u64));
        }
        assert!(
            !holds.start(0x9999, 100),
            "full: the oldest note is dropped"
        );
        assert_eq!(
            holds.end(0x10),
            Some(9),
            "the dropped one: its release reads from no earlier than its start"
        );
        assert_eq!(holds.end(0x9999), Some(100));
        assert_eq!(
            holds.end(0x9999),
            Some(9),
            "forgotten at its end: no earlier than the eviction"
        );
        assert_eq!(holds.end(0x200), Some(12));
    }
}
