//! Which mutexes have a thread in a contended acquisition right now, measured or not, and
//! the exact waiter-time of the ones the wait table does not know one by one: the evidence
//! of a waiter that the sampling handler's `held.contended` trusts over glibc's lock word,
//! and the blame of a hold when contention sampling measures only some of its waiters.
//!
//! Job, the count: glibc sets a mutex's word to "waiters may sleep" (2) whenever a woken
//! waiter takes it, whether or not anyone else waits: the hold of a thread that waited for
//! the mutex therefore reads as contended from its start, though its waiters may arrive only
//! later (issue 38). So every contended acquisition of a mutex counts itself here from just
//! before its real lock call until it returns ([`arrive`], [`depart`]), and the handler asks
//! [`waiting`] for a mutex whose word may be of its holder's own making.
//!
//! Job, the integral: past its budget a thread measures only a random subset of its
//! contended acquisitions (`contention_sampling`), and a measured wait does not last as long
//! as the ones it stands for, nor overlap holds in the same proportion (it unwinds and
//! registers before it blocks): blame scaled from the measured waits read 10-20% low. So
//! the waiters the wait table does not register one by one (unmeasured, or measured for
//! several) also keep, per counter, `W(t)`, the waiter-nanoseconds accumulated up to `t`,
//! as `n × t + Q` in one word (`waiter_integral`; [`arrive_unregistered`],
//! [`depart_unregistered`]): a holder reads a [`Mark`] as its hold starts and another as it ends, and their difference is the
//! exact waiting of those waiters during its hold ([`Mark::waited_since`]); a hold that
//! began before any of them arrived (and so was not noted) takes their whole episode
//! ([`Mark::waited_in_episode`]).
//!
//! Invariants:
//! - A counter per hash of the mutex's address ([`SLOTS`] of them, 32 bytes each): two
//!   mutexes may share one. [`waiting`] may then say yes for a mutex whose waiters are
//!   another's (an over-count, never an under-count, of interposed waiters). The integral
//!   notes which mutex its waiters are for (`owner`: the address and a count of changes,
//!   bumped by every arrival at an empty integral or of another mutex's waiter), and
//!   [`Mark::waited_since`] gives no value for a hold during which another mutex's waiters
//!   may have counted (the caller then falls back on the wait table's estimate).
//! - [`arrive`] and [`depart`] (and the unregistered pair) pair up on one thread around one
//!   real call; a thread that never returns from the call (killed inside it) leaves its
//!   count behind. A waiter that gives up (a timed lock that timed out) counts its waiting
//!   all the same.
//! - `W` is kept modulo 2^48 ns (78 hours): a hold's difference is exact below that.
//! - A fork child starts from zero ([`reset_after_fork`]): the parent's waiting threads are
//!   not in it.
//!
//! Lock-free and allocation-free; [`waiting`] is a load: async-signal-safe. The others are
//! bounded compare-exchange loops, called only from the interposers.

use crate::waiter_integral::{elapsed, value_at, waiters, Integral};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Counters (a power of two).
pub const SLOTS: usize = 1024;

/// The owner and episode words keep their count of changes in their high 16 bits.
const CHANGES_SHIFT: u32 = 48;
/// The owner word: the mutex's address (low 48 bits) and the count of changes (high 16).
const ADDRESS_MASK: u64 = (1 << 48) - 1;

#[repr(align(32))]
struct Slot {
    /// Threads in a contended acquisition of a mutex of this counter, measured or not.
    waiting: AtomicU32,
    /// The unregistered waiters' integral: `n << 48 | Q mod 2^48`, `W(t) = n × t + Q`.
    time: Integral,
    /// Whose waiters the integral counts: address | changes << 48 (0: nobody's yet).
    owner: AtomicU64,
    /// `W` when the latest change of `owner` by an arrival at an empty integral was made:
    /// `W mod 2^48 | changes << 48` (the episode's start, for a hold that began before it).
    episode: AtomicU64,
}

static COUNTERS: [Slot; SLOTS] = [const {
    Slot {
        waiting: AtomicU32::new(0),
        time: Integral::new(),
        owner: AtomicU64::new(0),
        episode: AtomicU64::new(0),
    }
}; SLOTS];

/// The counter of the mutex at `address` (Fibonacci hashing of its 8-byte-aligned address).
fn slot(address: usize) -> &'static Slot {
    let h = ((address as u64) >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    &COUNTERS[(h >> (64 - SLOTS.trailing_zeros())) as usize]
}

/// A thread is about to wait in a contended acquisition of the mutex at `address`.
pub fn arrive(address: usize) {
    slot(address).waiting.fetch_add(1, Ordering::Relaxed);
}

/// The contended acquisition [`arrive`] announced has returned (acquired or not).
pub fn depart(address: usize) {
    // Never below zero: a fork child's reset may come between a pair.
    let _ = slot(address)
        .waiting
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
}

/// Whether some thread is in a contended acquisition of the mutex at `address` (or of
/// another sharing its counter). One load: async-signal-safe.
pub fn waiting(address: usize) -> bool {
    slot(address).waiting.load(Ordering::Relaxed) != 0
}

/// A waiter the wait table does not register one by one (see the module doc) began waiting
/// for the mutex at `address` at `since` (monotonic ns): it counts in the integral from then.
pub fn arrive_unregistered(address: usize, since: u64) {
    let s = slot(address);
    let mine = address as u64 & ADDRESS_MASK;
    // The owner first (a holder that reads the integral after this arrival counted then
    // reads the new owner): a new count of changes at an empty integral or another's. At
    // an empty one, `W` (constant while nobody waits) is the new episode's start.
    let before = s.time.load();
    let empty = waiters(before) == 0;
    let changed = s
        .owner
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |o| {
            (empty || o & ADDRESS_MASK != mine)
                .then(|| (o >> CHANGES_SHIFT).wrapping_add(1) << CHANGES_SHIFT | mine)
        });
    if let (true, Ok(old)) = (empty, changed) {
        let changes = (old >> CHANGES_SHIFT).wrapping_add(1) << CHANGES_SHIFT;
        s.episode
            .store(changes | value_at(before, 0), Ordering::SeqCst);
    }
    s.time.arrive(since);
}

/// The waiter [`arrive_unregistered`] counted stopped waiting at `now`.
pub fn depart_unregistered(address: usize, now: u64) {
    // Never below zero: a fork child's reset may come between a pair.
    slot(address).time.depart(now);
}

/// Whether the integral of the mutex at `address` counts a waiter now (one of another
/// mutex sharing its counter, perhaps). One load.
#[inline(always)]
pub fn unregistered_waiting(address: usize) -> bool {
    waiters(slot(address).time.load()) != 0
}

/// The integral of a mutex's counter read at one instant, with whose waiters it counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mark {
    /// `W(t)` modulo 2^48.
    value: u64,
    /// Waiters counted at the instant.
    waiters: u64,
    /// The owner word read before and after the integral.
    owner_before: u64,
    owner_after: u64,
    /// The episode word, read last.
    episode: u64,
}

/// The integral of the mutex at `address` at `now` (monotonic ns, read by the caller just
/// before): a hold's end, whose clock is read before the counter's line is.
pub fn mark(address: usize, now: u64) -> Mark {
    mark_then(address, || now).1
}

/// The integral of the mutex at `address` at the time `clock` reads once the counter's line
/// is loaded: a hold's start, whose clock is read after the load (the line, which waiters
/// write, is often in another CPU's cache, and a miss after the clock read would count in
/// the hold).
pub fn mark_then(address: usize, clock: impl FnOnce() -> u64) -> (u64, Mark) {
    let s = slot(address);
    let owner_before = s.owner.load(Ordering::SeqCst);
    let w = s.time.load();
    let owner_after = s.owner.load(Ordering::SeqCst);
    let episode = s.episode.load(Ordering::SeqCst);
    let now = clock();
    let mark = Mark {
        value: value_at(w, now),
        waiters: waiters(w),
        owner_before,
        owner_after,
        episode,
    };
    (now, mark)
}

impl Mark {
    /// No mark (all zero, as [`Mark::default`]), for constant initialisers.
    pub const NONE: Mark = Mark {
        value: 0,
        waiters: 0,
        owner_before: 0,
        owner_after: 0,
        episode: 0,
    };

    /// The unregistered waiters' waiting from `start` to this mark, both of the mutex at
    /// `address`; `None` when waiters of another mutex sharing its counter may have counted
    /// meanwhile.
    pub fn waited_since(self, start: Mark, address: usize) -> Option<u64> {
        let mine = address as u64 & ADDRESS_MASK;
        let owner = self.owner_after;
        let one_episode = owner == start.owner_before
            || (start.waiters == 0
                && owner >> CHANGES_SHIFT
                    == (start.owner_before >> CHANGES_SHIFT).wrapping_add(1) & 0xFFFF);
        let waited = elapsed(self.value, start.value);
        if waited == 0 {
            // Nobody counted (whoever owns the counter).
            return (owner == start.owner_before).then_some(0);
        }
        (owner & ADDRESS_MASK == mine && one_episode).then_some(waited)
    }

    /// The unregistered waiters' waiting up to this mark, of the mutex at `address`, since
    /// the start of their episode (the latest arrival at an empty integral) if it goes on:
    /// for a hold that began with nobody counted (so was not noted), all of it is the
    /// hold's; none if the episode is over. `None` when another mutex's waiters may have
    /// counted since, or two arrivals at once began it.
    pub fn waited_in_episode(self, address: usize) -> Option<u64> {
        if self.waiters == 0 {
            // The latest episode is over, so it ended before the hold began (its waiters
            // leave by taking the mutex): it may be the holder's own wait.
            return Some(0);
        }
        let mine = address as u64 & ADDRESS_MASK;
        let owner = self.owner_after;
        let same =
            owner & ADDRESS_MASK == mine && self.episode >> CHANGES_SHIFT == owner >> CHANGES_SHIFT;
        same.then(|| elapsed(self.value, self.episode))
    }
}

/// In a fork child: nobody waits.
pub fn reset_after_fork() {
    for s in &COUNTERS {
        s.waiting.store(0, Ordering::Relaxed);
        s.time.clear();
        s.owner.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mutex_waits_from_arrival_to_departure() {
        let a = 0x7000_1000usize;
        assert!(!waiting(a));
        arrive(a);
        arrive(a);
        assert!(waiting(a));
        depart(a);
        assert!(waiting(a));
        depart(a);
        assert!(!waiting(a));
        // An unpaired departure (after a fork's reset) leaves the count at zero.
        depart(a);
        arrive(a);
        assert!(waiting(a));
        depart(a);
        assert!(!waiting(a));
    }

    #[test]
    fn neighbouring_mutexes_mostly_have_counters_of_their_own() {
        // 256 mutexes 64 bytes apart (an array of padded locks): Fibonacci hashing spreads
        // them over nearly as many counters.
        let used: std::collections::HashSet<usize> = (0..256usize)
            .map(|i| slot(0x5555_0000 + i * 64) as *const Slot as usize)
            .collect();
        assert!(used.len() >= 230, "{} counters for 256 mutexes", used.len());
    }

    #[test]
    fn a_hold_takes_the_waiting_during_it_exactly() {
        let m = 0x7100_2000usize;
        let t0 = 1_000_000_000_000u64;
        // A waiter from before the hold, one that arrives during it, one that arrives and
        // leaves during it.
        arrive_unregistered(m, t0 - 500);
        let start = mark(m, t0);
        arrive_unregistered(m, t0 + 100);
        arrive_unregistered(m, t0 + 200);
        depart_unregistered(m, t0 + 250);
        let end = mark(m, t0 + 1_000);
        assert_eq!(end.waited_since(start, m), Some(1_000 + 900 + 50));
        // The next hold, after the first waiter took the mutex at its end.
        depart_unregistered(m, t0 + 1_000);
        let start = mark(m, t0 + 1_010);
        let end = mark(m, t0 + 2_010);
        assert_eq!(end.waited_since(start, m), Some(1_000));
        depart_unregistered(m, t0 + 2_010);
        // Nobody waits: nothing accrues.
        let start = mark(m, t0 + 3_000);
        let end = mark(m, t0 + 9_000);
        assert_eq!(end.waited_since(start, m), Some(0));
        // A hold that begins with nobody waiting and sees its first waiter arrive.
        arrive_unregistered(m, t0 + 9_500);
        let end = mark(m, t0 + 10_000);
        assert_eq!(end.waited_since(start, m), Some(500));
        depart_unregistered(m, t0 + 10_000);
        assert!(!unregistered_waiting(m));
    }

    #[test]
    fn a_start_mark_is_the_integral_at_the_time_read_after_it() {
        let m = 0x7500_1000usize;
        let t0 = 4_000_000_000_000u64;
        arrive_unregistered(m, t0);
        let (now, start) = mark_then(m, || t0 + 300);
        assert_eq!((now, start), (t0 + 300, mark(m, t0 + 300)));
        let end = mark(m, t0 + 1_300);
        assert_eq!(end.waited_since(start, m), Some(1_000));
        depart_unregistered(m, t0 + 1_300);
    }

    #[test]
    fn a_hold_that_began_before_anyone_waited_takes_the_episode() {
        let m = 0x7400_8000usize;
        let t0 = 3_000_000_000_000u64;
        // An earlier episode, over.
        arrive_unregistered(m, t0);
        depart_unregistered(m, t0 + 50);
        // The hold began at t0 + 100, unnoted; two waiters arrive during it.
        arrive_unregistered(m, t0 + 200);
        arrive_unregistered(m, t0 + 300);
        let end = mark(m, t0 + 1_000);
        assert_eq!(end.waited_in_episode(m), Some(800 + 700));
        depart_unregistered(m, t0 + 1_000);
        depart_unregistered(m, t0 + 1_500);
        // The hold of the waiter that left last: the episode, its own wait, is over.
        let end = mark(m, t0 + 2_000);
        assert_eq!(end.waited_in_episode(m), Some(0));
    }

    #[test]
    fn another_mutexs_waiters_on_the_counter_give_no_value() {
        // Two addresses with one counter.
        let a = 0x7200_0000usize;
        let b = (1..1_000_000usize)
            .map(|i| a + i * 8)
            .find(|&b| std::ptr::eq(slot(b), slot(a)))
            .expect("a collision");
        let t0 = 2_000_000_000_000u64;
        arrive_unregistered(a, t0);
        let start = mark(a, t0 + 10);
        arrive_unregistered(b, t0 + 20);
        let end = mark(a, t0 + 100);
        assert_eq!(end.waited_since(start, a), None, "b's waiter counted");
        assert_eq!(end.waited_in_episode(a), None);
        depart_unregistered(b, t0 + 100);
        // Even after b's waiter left, and a's arrived again: the episode changed.
        let end = mark(a, t0 + 200);
        assert_eq!(end.waited_since(start, a), None);
        depart_unregistered(a, t0 + 200);
        // A hold of `a` that began with the counter empty, whose waiters were all b's.
        let start = mark(a, t0 + 300);
        arrive_unregistered(b, t0 + 310);
        depart_unregistered(b, t0 + 320);
        let end = mark(a, t0 + 400);
        assert_eq!(end.waited_since(start, a), None, "b's, not a's");
        // Unnoted, it takes nothing: the episode (b's) is over.
        assert_eq!(end.waited_in_episode(a), Some(0));
        // b's episode going on at the end of a's hold: b's, not a's.
        arrive_unregistered(b, t0 + 410);
        assert_eq!(mark(a, t0 + 500).waited_in_episode(a), None);
        depart_unregistered(b, t0 + 500);
    }

    #[test]
    fn the_integral_wraps_without_losing_a_holds_difference() {
        let m = 0x7300_4000usize;
        let t0 = (1u64 << CHANGES_SHIFT) - 300;
        arrive_unregistered(m, t0);
        let start = mark(m, t0 + 100);
        let end = mark(m, t0 + 700); // past 2^48
        assert_eq!(end.waited_since(start, m), Some(600));
        depart_unregistered(m, t0 + 700);
    }
}
