//! Which locks a thread may hold while others wait for them: marks its waiters leave in its
//! state, for the sampling handler to charge its CPU time inside contended critical
//! sections (`held.contended`).
//!
//! Job: a holder's uncontended acquisitions and releases record nothing (the fast path may
//! not), so nothing of the holder says which locks it holds. A waiter does know whom it
//! waits for: a glibc mutex keeps its owner's thread id (`__owner`), an rwlock its
//! writer's (`__cur_writer`). So a thread that starts a contended acquisition marks the
//! holder it read there ([`HeldMarks::mark`]), and a thread that acquires after waiting
//! marks itself (the waiters that came before it marked the previous holder). At each
//! timer sample the handler asks [`HeldMarks::contended`]: a mark counts only if the lock's
//! own words say, now, that this thread holds it and that it is contended, as glibc keeps
//! them: a mutex whose owner is the thread and whose lock word says waiters may sleep (2,
//! or `FUTEX_WAITERS` for robust and PI mutexes); an rwlock whose writer is the thread
//! with readers registered in its write phase or sleeping, or writers sleeping (the
//! `FUTEX_USED` bits of its futex words). glibc clears neither until
//! the release, so a hold that began with a contended acquisition counts as contended
//! until its release even if its waiters left (timed out) or there were no others.
//!
//! Invariants:
//! - The lock's words are read with a fault-free copy (`read`: `process_vm_readv`), never
//!   a load: a mark outlives its hold (releases do not clear it), and its lock may be
//!   freed and unmapped.
//! - A mark whose lock the thread does not hold is cleared by the handler, by
//!   compare-and-swap, so a waiter's fresh mark of the same lock is never lost to it: a
//!   thread cannot take or release a lock while its own handler runs, so "not the owner"
//!   holds for the whole of the handler, and a mark left meanwhile is stale too.
//! - [`SLOTS`] marks a thread: nested contended holds beyond that, or two in one slot,
//!   keep the latest marked.
//! - Only mutexes and rwlocks' writers are marked; readers, spin locks and futex words
//!   have no owner to read.
//!
//! Wait-free, allocation-free; [`HeldMarks::contended`] is async-signal-safe.

use crate::format::WaitKind;
use std::sync::atomic::{AtomicU64, Ordering};

/// Marks a thread keeps.
pub const SLOTS: usize = 2;

/// glibc's x86-64 mutex: lock word at byte 0, owner's thread id at 8.
const MUTEX_WORDS: usize = 3;
const MUTEX_OWNER: usize = 2;
/// A robust or PI mutex's lock word holds the owner's id and this bit when waiters sleep.
const FUTEX_WAITERS: u32 = 0x8000_0000;

/// glibc's x86-64 rwlock: `__readers` at byte 0 (readers above 3 flag bits: in a write
/// phase, the readers waiting for it), `__wrphase_futex` at 8 and `__writers_futex` at 12
/// (`FUTEX_USED`: readers, or writers, sleep on it), `__cur_writer` at 24.
const RWLOCK_WORDS: usize = 7;
const RWLOCK_WRPHASE_FUTEX: usize = 2;
const RWLOCK_WRITERS_FUTEX: usize = 3;
const RWLOCK_WRITER: usize = 6;
const READER_SHIFT: u32 = 3;
const FUTEX_USED: u32 = 2;

/// A thread's marks: `address << 8 | kind`, 0 for none. Written by other threads, on
/// their contended paths only, and only when the mark changes.
#[derive(Debug, Default)]
pub struct HeldMarks([AtomicU64; SLOTS]);

/// The address and kind of a mark.
fn unpack(mark: u64) -> (usize, u8) {
    ((mark >> 8) as usize, mark as u8)
}

impl HeldMarks {
    pub const fn new() -> HeldMarks {
        HeldMarks([const { AtomicU64::new(0) }; SLOTS])
    }

    /// Marks that others wait for the lock of `kind` at `address`, which the thread holds
    /// (or held: the handler checks). Any thread may call it.
    pub fn mark(&self, address: usize, kind: WaitKind) {
        if !matches!(kind, WaitKind::Mutex | WaitKind::RwLock) || address == 0 {
            return;
        }
        let mark = (address as u64) << 8 | kind as u8 as u64;
        let slot = &self.0[(address >> 6) % SLOTS];
        if slot.load(Ordering::Relaxed) != mark {
            slot.store(mark, Ordering::Release);
        }
    }

    /// The lock (address, kind) the thread `tid` holds while others wait for it, among its
    /// marks; stale marks are cleared. `read` copies 32-bit words of memory at an address
    /// without faulting (false: not readable). Async-signal-safe if `read` is.
    pub fn contended(
        &self,
        tid: u32,
        mut read: impl FnMut(usize, &mut [u32]) -> bool,
    ) -> Option<(usize, WaitKind)> {
        let mut found = None;
        for slot in &self.0 {
            let mark = slot.load(Ordering::Acquire);
            if mark == 0 {
                continue;
            }
            let (address, kind) = unpack(mark);
            let held = match WaitKind::from_code(kind) {
                Some(WaitKind::Mutex) => {
                    let mut w = [0u32; MUTEX_WORDS];
                    read(address, &mut w).then(|| {
                        let waiters = w[0] == 2 || w[0] & FUTEX_WAITERS != 0;
                        (w[MUTEX_OWNER] == tid, waiters)
                    })
                }
                Some(WaitKind::RwLock) => {
                    let mut w = [0u32; RWLOCK_WORDS];
                    read(address, &mut w).then(|| {
                        let waiters = w[0] >> READER_SHIFT != 0
                            || (w[RWLOCK_WRPHASE_FUTEX] | w[RWLOCK_WRITERS_FUTEX]) & FUTEX_USED
                                != 0;
                        (w[RWLOCK_WRITER] == tid, waiters)
                    })
                }
                _ => None,
            };
            match held {
                Some((true, waiters)) => {
                    if waiters && found.is_none() {
                        found = WaitKind::from_code(kind).map(|k| (address, k));
                    }
                }
                // Not the owner (or unreadable): the hold is over.
                _ => {
                    let _ = slot.compare_exchange(mark, 0, Ordering::Relaxed, Ordering::Relaxed);
                }
            }
        }
        found
    }

    /// Forgets every mark (a new thread in a recycled state).
    pub fn reset(&self) {
        for slot in &self.0 {
            slot.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader of the words at the addresses of `memory` (address, words).
    fn reader(memory: &[(usize, Vec<u32>)]) -> impl FnMut(usize, &mut [u32]) -> bool + '_ {
        |address, out| match memory.iter().find(|(a, _)| *a == address) {
            Some((_, words)) => {
                out.copy_from_slice(&words[..out.len()]);
                true
            }
            None => false,
        }
    }

    #[test]
    fn a_mutex_counts_while_the_thread_owns_it_with_waiters() {
        let marks = HeldMarks::new();
        marks.mark(0x1000, WaitKind::Mutex);
        let contended = [(0x1000, vec![2, 0, 77])];
        assert_eq!(
            marks.contended(77, reader(&contended)),
            Some((0x1000, WaitKind::Mutex))
        );
        let robust = [(0x1000, vec![77 | FUTEX_WAITERS, 0, 77])];
        assert!(marks.contended(77, reader(&robust)).is_some());
        let quiet = [(0x1000, vec![1, 0, 77])];
        assert_eq!(marks.contended(77, reader(&quiet)), None, "no waiters now");
        assert!(
            marks.contended(77, reader(&contended)).is_some(),
            "the mark stays while the thread holds it"
        );
        let other = [(0x1000, vec![2, 0, 78])];
        assert_eq!(marks.contended(77, reader(&other)), None, "another owner");
        assert_eq!(
            marks.contended(77, reader(&contended)),
            None,
            "a stale mark is cleared"
        );
    }

    #[test]
    fn an_rwlock_counts_for_its_writer_with_readers_or_writers_waiting() {
        let marks = HeldMarks::new();
        marks.mark(0x2000, WaitKind::RwLock);
        // As glibc 2.36 leaves them: held by writer 9, a reader waiting, then a writer.
        let words = |readers: u32, wrphase: u32, writers_futex: u32, writer: u32| {
            [(
                0x2000,
                vec![readers, 0, wrphase, writers_futex, 0, 0, writer],
            )]
        };
        let r = words(0xb, 3, 1, 9);
        assert_eq!(
            marks.contended(9, reader(&r)),
            Some((0x2000, WaitKind::RwLock))
        );
        assert!(marks.contended(9, reader(&words(3, 1, 3, 9))).is_some());
        assert!(
            marks.contended(9, reader(&words(3, 1, 1, 9))).is_none(),
            "alone"
        );
    }

    #[test]
    fn unreadable_locks_and_other_kinds_leave_no_mark() {
        let marks = HeldMarks::new();
        marks.mark(0x3000, WaitKind::Mutex);
        assert_eq!(marks.contended(5, reader(&[])), None);
        assert!(
            marks.0.iter().all(|s| s.load(Ordering::Relaxed) == 0),
            "cleared"
        );
        marks.mark(0x3000, WaitKind::Futex);
        marks.mark(0x3000, WaitKind::Spin);
        assert!(marks.0.iter().all(|s| s.load(Ordering::Relaxed) == 0));
    }

    #[test]
    fn two_locks_in_two_slots_and_the_first_contended_one_wins() {
        let marks = HeldMarks::new();
        marks.mark(0x1000, WaitKind::Mutex);
        marks.mark(0x1040, WaitKind::Mutex);
        let memory = [(0x1000, vec![1, 0, 3]), (0x1040, vec![2, 0, 3])];
        assert_eq!(
            marks.contended(3, reader(&memory)),
            Some((0x1040, WaitKind::Mutex))
        );
        marks.reset();
        assert_eq!(marks.contended(3, reader(&memory)), None);
    }
}
