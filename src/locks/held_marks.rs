//! Which locks a thread may hold while others wait for them: marks its waiters leave in its
//! state, for the sampling handler to charge its CPU time inside contended critical
//! sections (`held.contended`).
//!
//! Job: a holder's uncontended acquisitions and releases record nothing (the fast path may
//! not), so nothing of the holder says which locks it holds. A waiter does know whom it
//! waits for: a glibc mutex keeps its owner's thread id (`__owner`), an rwlock its
//! writer's (`__cur_writer`). So a thread that starts a contended acquisition marks the
//! holder it read there ([`HeldMarks::mark`]). A thread about to wait marks itself with that
//! lock too, before the wait ([`HeldMarks::mark_latest`]): the waiters that came before it
//! marked the previous holder, and marking itself once it holds the lock would cost its
//! critical section. A mark outlives the hold: the thread's next hold of the lock may begin
//! without waiting while others still wait for it (a woken waiter beaten to the mutex goes
//! back to sleep inside glibc, and marks nobody), so only `pthread_cond_wait` forgets the
//! thread's marks of its mutex ([`HeldMarks::forget`]: glibc retakes the mutex with its word
//! saying waiters sleep, whether or not any do). At each
//! timer sample the handler asks [`HeldMarks::contended`]: a mark counts only if the lock's
//! own words say, now, that this thread holds it and that it is contended, as glibc keeps
//! them, or as `arrivals` counts a mutex's waiters (every contended acquisition through
//! the interposer, from its arrival to its return, so also one woken and not yet running:
//! glibc's word shows it only once it runs again) and the wait table the ones no
//! interposer sees (a signalled `pthread_cond_wait` retaking its mutex inside glibc, which
//! the signal registers there). glibc's word is not trusted for the mutex of the thread's
//! own latest contended acquisition: a woken waiter takes the mutex with the word saying
//! waiters sleep whether or not any do, so its hold would count from its start, not from
//! its waiters' arrival (waiters that neither sees are then missed: a condition
//! variable's waiter the profile did not measure). A mutex counts when its owner is the thread and its lock word says
//! waiters may sleep (2;
//! `FUTEX_WAITERS` for robust and PI mutexes, whose word is the owner's id; 2 in the low
//! bits of a priority-protected one's); an rwlock whose writer is the thread
//! with readers registered in its write phase or sleeping, or writers sleeping (the
//! `FUTEX_USED` bits of its futex words). glibc clears neither until
//! the release, so a hold of a mutex another thread took after waiting, or of an rwlock
//! taken after waiting, counts as contended until its release even if its waiters left
//! (timed out) or there were no others.
//!
//! Invariants:
//! - The lock's words are read with a fault-free copy (`read`: `process_vm_readv`), never
//!   a load: a mark outlives its hold (releases do not clear it), and its lock may be
//!   freed and unmapped.
//! - A mark stays until another replaces it, `pthread_cond_wait` forgets it, or its lock's
//!   memory is gone (cleared by the handler, by compare-and-swap, so a waiter's fresh mark
//!   is never lost to it). A mark of a lock the thread does not hold costs a read a sample
//!   and counts nothing.
//! - The marks have cache lines of their own (padding on both sides): waiters write them
//!   while the thread runs, and on a line the thread writes inside its critical sections
//!   (its pending lock counts) each write cost it a miss there.
//! - [`SLOTS`] marks a thread: a mark goes to the slot that has it, else to a free one,
//!   else replaces the one its address picks; with more nested contended holds than slots,
//!   the latest marked are kept. A sample counts for the first contended lock found.
//! - Only mutexes and rwlocks' writers are marked; readers, spin locks and futex words
//!   have no owner to read.
//!
//! Wait-free, allocation-free; [`HeldMarks::contended`] is async-signal-safe.

use crate::arrivals;
use crate::format::WaitKind;
use crate::wait_table;
use std::sync::atomic::{AtomicU64, Ordering};

/// Marks a thread keeps.
pub const SLOTS: usize = 2;

/// glibc's x86-64 mutex: lock word at byte 0, owner's thread id at 8, kind at 16.
const MUTEX_WORDS: usize = 5;
const MUTEX_OWNER: usize = 2;
const MUTEX_KIND: usize = 4;
/// Kind bits: robust, priority-inheriting and priority-protected mutexes.
const ROBUST: u32 = 0x10;
const PRIO_INHERIT: u32 = 0x20;
const PRIO_PROTECT: u32 = 0x40;
/// A robust or PI mutex's lock word holds the owner's id and this bit when waiters sleep.
const FUTEX_WAITERS: u32 = 0x8000_0000;
/// A priority-protected mutex's lock word keeps its ceiling above these bits.
const PRIO_PROTECT_LOCK_MASK: u32 = 0x7_ffff;

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
#[repr(C)]
pub struct HeldMarks {
    _before: [u64; 8],
    /// Marks left by waiters, then the thread's own latest contended lock.
    slots: [AtomicU64; SLOTS],
    latest: AtomicU64,
    _after: [u64; 8],
}

/// What reading a lock's words gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// The words were read.
    Done,
    /// Nothing is mapped there any more: the lock is gone.
    Gone,
    /// The read itself failed (the system refused it): nothing is known.
    Failed,
}

/// What [`HeldMarks::contended`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Held {
    /// The first marked lock the thread holds while others wait for it.
    pub lock: Option<(usize, WaitKind)>,
    /// Whether a lock's words could not be read (the read failed, not the lock gone).
    pub failed: bool,
}

/// Whether a mutex's words (`MUTEX_WORDS` of them) say waiters may sleep for it.
fn mutex_has_waiters(w: &[u32]) -> bool {
    let kind = w[MUTEX_KIND];
    if kind & (ROBUST | PRIO_INHERIT) != 0 {
        w[0] & FUTEX_WAITERS != 0
    } else if kind & PRIO_PROTECT != 0 {
        w[0] & PRIO_PROTECT_LOCK_MASK == 2
    } else {
        w[0] == 2
    }
}

/// The address and kind of a mark.
fn unpack(mark: u64) -> (usize, u8) {
    ((mark >> 8) as usize, mark as u8)
}

impl HeldMarks {
    pub const fn new() -> HeldMarks {
        HeldMarks {
            _before: [0; 8],
            slots: [const { AtomicU64::new(0) }; SLOTS],
            latest: AtomicU64::new(0),
            _after: [0; 8],
        }
    }

    /// The mark of the lock of `kind` at `address`; `None` for kinds that name no holder.
    fn mark_of(address: usize, kind: WaitKind) -> Option<u64> {
        (kind.names_its_holder() && address != 0)
            .then_some((address as u64) << 8 | kind as u8 as u64)
    }

    /// The thread is about to wait for the lock of `kind` at `address` (its latest contended
    /// acquisition): once it holds it, others may wait for it without marking it (they
    /// marked the holder before it). Owner only, before the wait.
    pub fn mark_latest(&self, address: usize, kind: WaitKind) {
        if let Some(mark) = Self::mark_of(address, kind) {
            self.latest.store(mark, Ordering::Relaxed);
        }
    }

    /// The thread's hold of the lock at `address` is over: its marks of it go. Owner only.
    pub fn forget(&self, address: usize) {
        for slot in self.slots.iter().chain([&self.latest]) {
            let mark = slot.load(Ordering::Relaxed);
            if mark != 0 && unpack(mark).0 == address {
                let _ = slot.compare_exchange(mark, 0, Ordering::Relaxed, Ordering::Relaxed);
            }
        }
    }

    /// Marks that others wait for the lock of `kind` at `address`, which the thread holds
    /// (or held: the handler checks). Any thread may call it.
    pub fn mark(&self, address: usize, kind: WaitKind) {
        let Some(mark) = Self::mark_of(address, kind) else {
            return;
        };
        if self.slots.iter().any(|s| s.load(Ordering::Relaxed) == mark) {
            return;
        }
        for slot in &self.slots {
            if slot
                .compare_exchange(0, mark, Ordering::Release, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
        self.slots[(address >> 6) % SLOTS].store(mark, Ordering::Release);
    }

    /// The lock (address, kind) the thread `tid` holds while others wait for it, among its
    /// marks (its waiters', and its own latest contended lock); marks of locks that are gone
    /// are cleared. `read` copies 32-bit words of memory at an
    /// address without faulting. Async-signal-safe if `read` is.
    pub fn contended(&self, tid: u32, mut read: impl FnMut(usize, &mut [u32]) -> Read) -> Held {
        let mut found = Held::default();
        let slots: [&AtomicU64; SLOTS + 1] =
            std::array::from_fn(|i| self.slots.get(i).unwrap_or(&self.latest));
        let marks = slots.map(|s| s.load(Ordering::Acquire));
        for (i, &mark) in marks.iter().enumerate() {
            // A lock marked twice is read once.
            if mark == 0 || marks[..i].contains(&mark) {
                continue;
            }
            let (address, kind) = unpack(mark);
            let mut w = [0u32; RWLOCK_WORDS];
            let held = match WaitKind::from_code(kind) {
                Some(WaitKind::Mutex) => {
                    let w = &mut w[..MUTEX_WORDS];
                    match read(address, w) {
                        Read::Failed => {
                            found.failed = true;
                            continue;
                        }
                        r => (r == Read::Done).then(|| {
                            let mine = w[MUTEX_OWNER] == tid;
                            // The word says waiters may sleep also when the thread set it
                            // itself, taking the mutex after its own wait (`latest`): then
                            // only the waiters counted from their arrival say so. A waiter
                            // woken by the previous release and beaten to the mutex by
                            // this hold is not in the word until it runs again, which on a
                            // loaded machine may be the whole hold: it is counted too.
                            let own_word = marks[SLOTS] == mark;
                            let waiters = (mutex_has_waiters(w) && !own_word)
                                || (mine
                                    && (arrivals::waiting(address)
                                        || wait_table::mutex_waiters_registered(address)
                                            == Some(true)));
                            (mine, waiters)
                        }),
                    }
                }
                Some(WaitKind::RwLock) => match read(address, &mut w) {
                    Read::Failed => {
                        found.failed = true;
                        continue;
                    }
                    r => (r == Read::Done).then(|| {
                        let waiters = w[0] >> READER_SHIFT != 0
                            || (w[RWLOCK_WRPHASE_FUTEX] | w[RWLOCK_WRITERS_FUTEX]) & FUTEX_USED
                                != 0;
                        (w[RWLOCK_WRITER] == tid, waiters)
                    }),
                },
                _ => None,
            };
            match held {
                Some((true, waiters)) => {
                    if waiters && found.lock.is_none() {
                        found.lock = WaitKind::from_code(kind).map(|k| (address, k));
                    }
                }
                // Another thread's hold, or none: the mark stays, for the thread's next hold
                // of the lock (see the module's doc).
                Some((false, _)) => {}
                // Nothing mapped there any more: the lock is gone, and so is its mark.
                None => {
                    for (s, &m) in slots.iter().zip(&marks) {
                        if m == mark {
                            let _ =
                                s.compare_exchange(mark, 0, Ordering::Relaxed, Ordering::Relaxed);
                        }
                    }
                }
            }
        }
        found
    }

    /// Whether the thread has any mark: if not, it holds no lock others are known to wait
    /// for, and [`HeldMarks::contended`] need not read anything. Owner only.
    pub fn any(&self) -> bool {
        self.slots
            .iter()
            .chain([&self.latest])
            .any(|slot| slot.load(Ordering::Relaxed) != 0)
    }

    /// Forgets every mark (a new thread in a recycled state).
    pub fn reset(&self) {
        for slot in self.slots.iter().chain([&self.latest]) {
            slot.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader of the words at the addresses of `memory` (address, words).
    fn reader(memory: &[(usize, Vec<u32>)]) -> impl FnMut(usize, &mut [u32]) -> Read + '_ {
        |address, out| match memory.iter().find(|(a, _)| *a == address) {
            Some((_, words)) => {
                out.copy_from_slice(&words[..out.len()]);
                Read::Done
            }
            None => Read::Gone,
        }
    }

    /// The lock `marks` find held with waiters by `tid` in `memory`.
    fn found(marks: &HeldMarks, tid: u32, memory: &[(usize, Vec<u32>)]) -> Option<usize> {
        let held = marks.contended(tid, reader(memory));
        assert!(!held.failed);
        held.lock.map(|(address, _)| address)
    }

    fn marked(marks: &HeldMarks) -> usize {
        marks
            .slots
            .iter()
            .filter(|s| s.load(Ordering::Relaxed) != 0)
            .count()
    }

    /// A mutex's words: lock word, owner, kind.
    fn mutex(word: u32, owner: u32, kind: u32) -> Vec<u32> {
        vec![word, 0, owner, 0, kind]
    }

    #[test]
    fn a_mutex_counts_while_the_thread_owns_it_with_waiters() {
        let marks = HeldMarks::new();
        marks.mark(0x1000, WaitKind::Mutex);
        let contended = [(0x1000, mutex(2, 77, 0))];
        assert_eq!(
            marks.contended(77, reader(&contended)).lock,
            Some((0x1000, WaitKind::Mutex))
        );
        let quiet = [(0x1000, mutex(1, 77, 0))];
        assert_eq!(found(&marks, 77, &quiet), None, "no waiters now");
        assert_eq!(
            found(&marks, 77, &contended),
            Some(0x1000),
            "the mark stays while the thread holds it"
        );
        let other = [(0x1000, mutex(2, 78, 0))];
        assert_eq!(found(&marks, 77, &other), None, "another owner");
        assert_eq!(
            found(&marks, 77, &contended),
            Some(0x1000),
            "the mark outlives the hold: the thread's next hold may begin without waiting"
        );
    }

    #[test]
    fn robust_pi_and_priority_protected_mutexes_say_waiters_their_own_way() {
        let marks = HeldMarks::new();
        let robust = |word| [(0x1000, mutex(word, 2, ROBUST))];
        let pi = |word| [(0x1000, mutex(word, 2, PRIO_INHERIT | 3))];
        let pp = |word| [(0x1000, mutex(word, 2, PRIO_PROTECT))];
        for (memory, contended) in [
            (robust(2 | FUTEX_WAITERS), true),
            (robust(2), false), // owned by thread 2, nobody waiting
            (pi(2 | FUTEX_WAITERS), true),
            (pi(2), false),
            (pp(5 << 19 | 2), true),
            (pp(5 << 19 | 1), false),
        ] {
            marks.mark(0x1000, WaitKind::Mutex);
            assert_eq!(
                found(&marks, 2, &memory).is_some(),
                contended,
                "{memory:x?}"
            );
        }
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
            marks.contended(9, reader(&r)).lock,
            Some((0x2000, WaitKind::RwLock))
        );
        assert!(found(&marks, 9, &words(3, 1, 3, 9)).is_some());
        assert!(found(&marks, 9, &words(3, 1, 1, 9)).is_none(), "alone");
    }

    #[test]
    fn gone_locks_and_other_kinds_leave_no_mark_and_a_failed_read_keeps_it() {
        let marks = HeldMarks::new();
        marks.mark(0x3000, WaitKind::Mutex);
        assert_eq!(found(&marks, 5, &[]), None);
        assert_eq!(marked(&marks), 0, "cleared");
        marks.mark(0x3000, WaitKind::Futex);
        marks.mark(0x3000, WaitKind::Spin);
        assert_eq!(marked(&marks), 0);
        marks.mark(0x3000, WaitKind::Mutex);
        let held = marks.contended(5, |_, _| Read::Failed);
        assert_eq!(
            held,
            Held {
                lock: None,
                failed: true
            }
        );
        assert_eq!(marked(&marks), 1, "kept: nothing is known");
    }

    #[test]
    fn nested_locks_take_free_slots_and_the_first_contended_one_counts() {
        let marks = HeldMarks::new();
        // Both addresses pick slot 0: the second still finds slot 1 free.
        marks.mark(0x1000, WaitKind::Mutex);
        marks.mark(0x1080, WaitKind::Mutex);
        marks.mark(0x1080, WaitKind::Mutex);
        assert_eq!(marked(&marks), 2);
        let memory = [(0x1000, mutex(1, 3, 0)), (0x1080, mutex(2, 3, 0))];
        assert_eq!(found(&marks, 3, &memory), Some(0x1080));
        marks.reset();
        assert_eq!(marked(&marks), 0);
    }

    #[test]
    fn the_threads_own_latest_lock_counts_while_others_arrived_and_cond_wait_forgets_it() {
        let marks = HeldMarks::new();
        marks.mark_latest(0x5000, WaitKind::Mutex);
        marks.mark(0x5000, WaitKind::Mutex);
        // The word says waiters may sleep, as glibc leaves it when a woken waiter (this
        // thread) takes the mutex: nobody arrived since, so nobody waits.
        let held = [(0x5000, mutex(2, 4, 0))];
        assert_eq!(marks.contended(4, reader(&held)).lock, None, "its own word");
        arrivals::arrive(0x5000);
        assert_eq!(
            marks.contended(4, reader(&held)).lock,
            Some((0x5000, WaitKind::Mutex)),
            "another thread arrived"
        );
        // Also while the word does not show it (a woken waiter not yet running).
        let quiet = [(0x5000, mutex(1, 4, 0))];
        assert_eq!(
            marks.contended(4, reader(&quiet)).lock,
            Some((0x5000, WaitKind::Mutex))
        );
        arrivals::depart(0x5000);
        assert_eq!(marks.contended(4, reader(&held)).lock, None, "it returned");
        // A hold that began without waiting after another thread's (the latest is
        // another lock): the word is the waiters'.
        marks.mark_latest(0x6000, WaitKind::Mutex);
        assert_eq!(
            marks.contended(4, reader(&held)).lock,
            Some((0x5000, WaitKind::Mutex))
        );
        marks.mark_latest(0x5000, WaitKind::Mutex);
        marks.forget(0x5000);
        assert_eq!(marked(&marks), 0);
        assert_eq!(marks.contended(4, reader(&held)).lock, None, "forgotten");
        marks.mark_latest(0x5000, WaitKind::Mutex);
        let other = [(0x5000, mutex(2, 8, 0))];
        assert_eq!(marks.contended(4, reader(&other)).lock, None);
        assert_ne!(
            marks.latest.load(Ordering::Relaxed),
            0,
            "not the owner: kept"
        );
    }
}
