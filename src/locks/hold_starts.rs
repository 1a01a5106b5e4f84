//! When each of a thread's current mutex holds began, for the blame its release takes.
//!
//! Job: a mutex's holders read its waiter-time history at their release
//! (`wait_table::hold_blame`), from their hold's start, which only the holding thread needs
//! to know: so it is kept here, per thread, not in anything shared. A hold is noted only
//! when others may be waiting for the mutex as it starts; a release that finds no note
//! reads from before anyone waited, which is right for a hold that began while nobody did.
//!
//! Invariants: owner thread only; a few holds at once (more evict the oldest, counted by
//! the caller). A note left by a hold whose release was not measured is stale, but harmless:
//! it is older than any waiter-time history the mutex can have at a later measured release
//! that finds it (a mutex waited for when a hold starts gets that hold's note), so it reads
//! the same as no note. Allocation-free; not used by the signal handler.

/// Holds noted at once: nested holds of mutexes that others wait for.
const SLOTS: usize = 8;

/// A thread's noted mutex holds: (address, start) pairs, address 0 for none.
#[derive(Debug, Default)]
pub struct HoldStarts {
    slots: [(usize, u64); SLOTS],
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
                    self.slots[oldest] = (address, now);
                    return false;
                }
            },
        };
        self.slots[slot] = (address, now);
        true
    }

    /// The start of the thread's hold of the mutex at `address`, forgotten (the hold ends),
    /// or `None` when it was not noted.
    pub fn end(&mut self, address: usize) -> Option<u64> {
        let slot = self.slots.iter_mut().find(|(a, _)| *a == address)?;
        let start = slot.1;
        *slot = (0, 0);
        Some(start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_is_found_once_and_the_oldest_gives_way() {
        let mut holds = HoldStarts::default();
        assert!(holds.start(0x10, 5));
        assert!(
            holds.start(0x10, 7),
            "a new hold of the same mutex replaces its note"
        );
        for i in 1..SLOTS {
            assert!(holds.start(0x100 * i, 10 + i as u64));
        }
        assert!(
            !holds.start(0x9999, 100),
            "full: the oldest note is dropped"
        );
        assert_eq!(holds.end(0x10), None, "the oldest was 0x10's");
        assert_eq!(holds.end(0x9999), Some(100));
        assert_eq!(holds.end(0x9999), None, "forgotten at its end");
        assert_eq!(holds.end(0x200), Some(12));
    }
}
