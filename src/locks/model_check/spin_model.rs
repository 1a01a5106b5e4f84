//! A step-by-step model of the dual-representation spin lock (`locks/spin.rs`) and its
//! spinners' waiter integral, checked exhaustively for 2 and 3 threads (see the parent
//! module). Test-only.
//!
//! Each program counter ([`Pc`]) is one atomic operation of the real code on a lock word, a
//! `MonSpin`'s integral or the `CONVERTED` count, named after it; the comment on each arm
//! of [`SpinModel::step`] cites the function and the statement it mirrors. The word's
//! encoding is the real one (`MONITORED | HELD | turn | index`, native 1 and 0), and so is
//! the integral's (`locks::waiter_integral`'s word, `value_at` and `elapsed`). Folded into
//! a neighbouring step, as nothing else can tell the difference:
//! - `hooks.now()`, into the integral operation it goes with (the `waiters.load()` before it
//!   in `take_free`, `unlock_read`, `reset` and `trylock`, the load after it in
//!   `hold_after_spin`, the `arrive` or `depart` after it in `lock_monitored`): it reads
//!   only the clock, which does not tick in between (see Time below);
//! - `MonSpin::mark`: its store into the step before it (`take_free`'s CAS, or the integral
//!   load of `hold_after_spin` or of `trylock`'s win), its load into the unlock's (or
//!   `reset`'s) integral load: while a thread holds the lock only it writes the mark
//!   (`demand_monitored` resets it before the record is published), and only its own
//!   unlock (or a `reset` of the held lock) reads it;
//! - `monitored`'s owner check, into the load of the word it checks: a monitored word names
//!   a live record of its lock (an invariant), whose owner changes only when `reset`
//!   recycles it, which no operation on the lock overlaps in a legal program;
//! - the stores `demand_monitored` makes to a slot nobody reaches yet, into the slab's
//!   allocation, and `reset`'s `owner.store(0)` into its free: the slab's allocation and free
//!   are one step each (its Treiber stack is tested by `locks/slab.rs`), and which free slot
//!   an allocation gets does not matter (slots are alike);
//! - `hooks.released` and the arithmetic before it, into the release store: they touch
//!   nothing shared. Whether the sampler charges the blame or counts it as unsettled is
//!   none of the lock's business: the model counts what it is handed.
//!
//! `SpinHooks::active` (true), `spin_begins`, `monitored_spin_begins`, `spin_ends` and
//! `spun_natively` do nothing to the lock and are not steps. No lock is process-shared
//! (glibc's words below zero, which `monitored` refuses, do not occur), and no scenario
//! takes a lock 64 times, so the turn never wraps (a `take_free` preempted across exactly
//! 64 acquisitions would take the lock with a stale integral reading: the turn's known
//! limit, not explored). A spinner whose lock is destroyed or initialised under it (which
//! the program may not do) departs from a record its word no longer names: modelled
//! (`GoneDepart`), but no scenario does it.
//!
//! Time: a clock actor advances a logical clock by one tick, up to a bound (3), at any
//! moment but between a `hooks.now()` and the integral operation it goes with, an
//! instruction or two apart (hence the folding above). A tick there would stamp an arrival
//! or a departure with a time at which the integral did not count it, or value a load at a
//! time after arrivals it did not see: `W` would change after the fact, and a hold that
//! read it in between would be charged a tick of waiting from before its reading, or miss
//! one (with a tick allowed before an arrival, the checker fails the real code so: a hold
//! charged a tick during which the integral counted nobody). That is the approximation of a
//! preempted clock read, not a race of the protocol. Each tick remembers, per lock, which hold it belongs to (its *tag*: the hold in
//! progress, or, while the lock is free, the next one), and, per record, which threads its
//! integral counted during it: one unit of waiting each. `W` of a record at `c` is its
//! units before tick `c`.
//!
//! Blame, checked at every amount an unlock hands to `hooks.released` and every amount a
//! `reset` of a held lock returns as left: it must be `W(x) - W(y)`, the units of some run
//! of ticks `[y, x)`, all of them tagged with the charger's hold and none the charger's own.
//! So no unit is charged twice (holds' tags are disjoint, and each hold settles once), a
//! hold is charged only waiting during it or while the lock was free just before its take
//! (`take_free` reads the integral before its CAS, which the turn fails if anybody took the
//! lock in between): never during another thread's hold nor after its own release, and
//! never its own spinning (attribution). And, over the run, what is charged and left is at
//! most what accrued (conservation). Not checked: that a hold is charged all the waiting
//! of its hold (by design, the waiting from a spinner's take to its mark, and from an
//! unlock's reading to its release, is nobody's).
//!
//! Programs ([`scenario`]): a free native lock converted under contention, with lock and
//! trylock; a lock held natively since before the runtime started, converted after its
//! release (with 3 threads, its first holder then tries it while a converter holds it and
//! the other spins); two locks sharing one record by destroy and init (and running out of
//! records); a lock destroyed right after an unlock; a lock destroyed by its holder (which
//! glibc tolerates, its destroy changing nothing: the word stays held, natively, for the
//! native unlock that follows). Other checks: see the parent module.

use super::{assert_fails, assert_holds, Model};
use crate::waiter_integral::{elapsed, value_at, waiters, TIME_MASK};
use std::fmt;

/// Threads, monitored records (slab slots), locks and ticks the state has room for.
const NT: usize = 3;
const NS: usize = 3;
const NL: usize = 2;
const MAX_TICKS: usize = 3;

/// `spin.rs`'s lock word encoding.
const MONITORED: u32 = 0x8000_0000;
const HELD: u32 = 0x4000_0000;
const TURN: u32 = 0x3F00_0000;
const TURN_ONE: u32 = 0x0100_0000;
const INDEX: u32 = 0x00FF_FFFF;
const UNLOCKED: u32 = 1;
const LOCKED: u32 = 0;

/// The record a monitored word names (`spin::monitored`; its owner check is an invariant).
fn monitored(word: u32) -> Option<usize> {
    (word & MONITORED != 0).then_some((word & INDEX) as usize)
}

/// `spin::taken`: a free monitored word as its next acquisition leaves it (the broken
/// variant: held, without the turn).
fn taken(free: u32, v: Variant) -> u32 {
    if v == Variant::NoTurn {
        return free | HELD;
    }
    (free & !TURN) | (free.wrapping_add(TURN_ONE) & TURN) | HELD
}

/// `Integral::arrive`'s update: one more waiter, since `since`.
fn arrive(word: u64, since: u64) -> u64 {
    ((word | TIME_MASK) + 1) | (word.wrapping_sub(since) & TIME_MASK)
}

/// `Integral::depart`'s update: one waiter fewer, at `now`.
fn depart(word: u64, now: u64) -> u64 {
    ((word & !TIME_MASK) - (TIME_MASK + 1)) | (word.wrapping_add(now) & TIME_MASK)
}

/// A lock word, shown decoded.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Word(u32);

impl fmt::Debug for Word {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match monitored(self.0) {
            None => write!(f, "native {}", self.0),
            Some(i) => {
                let held = if self.0 & HELD != 0 { " held" } else { "" };
                write!(f, "record {i} turn {}{held}", (self.0 & TURN) / TURN_ONE)
            }
        }
    }
}

/// An integral word, shown as `n` and `Q` (below zero after arrivals).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
struct IntegralWord(u64);

impl fmt::Debug for IntegralWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let q = ((self.0 & TIME_MASK) << 16) as i64 >> 16;
        write!(f, "n {} Q {q}", waiters(self.0))
    }
}

/// One operation of a thread's program, on lock `l`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Op {
    /// `pthread_spin_lock`: `spin::lock`.
    Lock(u8),
    /// `pthread_spin_trylock` until it succeeds: `spin::trylock` in a loop.
    TryLock(u8),
    /// `pthread_spin_unlock`: `spin::unlock`.
    Unlock(u8),
    /// `pthread_spin_destroy`: `spin::destroy`.
    Destroy(u8),
    /// `pthread_spin_init`: `spin::reset(lock, NATIVE_UNLOCKED)`.
    Init(u8),
    /// Waits until thread `t` has completed its first `k` operations (a join or a
    /// barrier: the program's own ordering, e.g. no destroy while others use the lock).
    After(u8, u8),
}

impl Op {
    fn lock(self) -> usize {
        match self {
            Op::Lock(l) | Op::TryLock(l) | Op::Unlock(l) | Op::Destroy(l) | Op::Init(l) => {
                usize::from(l)
            }
            Op::After(..) => 0,
        }
    }
}

/// Which code the model runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Variant {
    /// `locks/spin.rs` as it is.
    Real,
    // Deliberately broken variants, which the checker must catch:
    /// An acquisition does not bump the turn: `take_free`'s CAS succeeds on a word that was
    /// taken and released since its integral read.
    NoTurn,
    /// `unlock_read` reads the integral (and the mark) after its release store.
    ReadsIntegralAfterRelease,
    /// A spinner that sees the lock free takes it, begins its hold (its mark), and only then
    /// departs.
    DepartsAfterHoldBegins,
    /// A trylock that wins a held word's CAS does not begin its hold: the previous hold's
    /// mark stays.
    TryWinKeepsOldMark,
    /// `demand_monitored` converts a held native word too (into a free monitored one).
    ConversionForgetsHolder,
    /// The protocol before the native unlock became a store: `demand_monitored` converts a
    /// held native word into a held monitored one, which the holder's unlock, having found
    /// its bucket empty, overwrites with its store.
    ConvertsHeldWord,
    /// A converter that lost the race does not free its record.
    LoserKeepsSlot,
    /// `demand_monitored` counts the word in its bucket after publishing it: an unlock
    /// that finds the bucket empty meanwhile stores over the reference.
    CountsAfterPublishing,
}

/// Where a thread is: the atomic operation it performs next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Pc {
    // spin::lock and lock_slow
    LockFast,
    LockLoad,
    LockCas,
    NativeSpin,
    // spin::demand_monitored
    ConvertLoad,
    ConvertAlloc,
    ConvertCount,
    ConvertCas,
    ConvertUncount,
    // spin::take_free
    TakeLoad,
    TakeCas,
    // spin::lock_monitored
    SpinArrive,
    SpinLoad,
    LeaveDepart,
    SpinCas,
    RetryArrive,
    GoneDepart,
    // spin::hold_after_spin
    WonMark,
    // spin::trylock
    TryLoad,
    TryHeldCas,
    TryWonMark,
    TryCas,
    // spin::unlock and unlock_read
    UnlockCount,
    UnlockLoad,
    UnlockNativeStore,
    UnlockIntegral,
    UnlockRelease,
    // spin::destroy and spin::reset
    DestroyLoad,
    ResetCount,
    ResetStore,
    ResetSwap,
    ResetIntegral,
    ResetFree,
    ResetUncount,
    // the program's own ordering
    After,
    Done,
}

impl Pc {
    /// Whether the thread follows its reference `m` to a record at this point.
    fn uses_record(self) -> bool {
        use Pc::*;
        matches!(
            self,
            TakeLoad
                | TakeCas
                | SpinArrive
                | SpinLoad
                | LeaveDepart
                | SpinCas
                | RetryArrive
                | GoneDepart
                | WonMark
                | TryHeldCas
                | TryWonMark
                | UnlockIntegral
                | ResetIntegral
                | ResetFree
        )
    }
}

/// A `MonSpin` slot of the slab.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
struct Slot {
    /// Handed out by the slab (ghost: not on its free list).
    allocated: bool,
    /// `MonSpin::owner`: the lock it belongs to, plus one (0: none).
    owner: u8,
    /// `MonSpin::waiters`.
    waiters: IntegralWord,
    /// `MonSpin::mark`.
    mark: u64,
    /// Ghost: the threads `waiters` counts (arrived and not departed), a bit each.
    counted: u8,
    /// Ghost: `counted` during each tick (since the record's allocation).
    units: [u8; MAX_TICKS],
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Thread {
    /// Index of the current operation in the thread's program.
    op: u8,
    pc: Pc,
    /// A lock word read (`current`, `seen`), or the value `reset` stores (`to`).
    cur: Word,
    /// The record the thread follows (`m`).
    m: u8,
    /// The record `demand_monitored` allocated (`index`).
    idx: u8,
    /// `value_at(word, now)`, from an integral load and its clock reading.
    value: u64,
    /// The mark an unlock (or reset) read (`start`).
    mark: u64,
    /// Ghost: the ordinal of the thread's hold (0: none).
    hold: u8,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(super) struct State {
    words: [Word; NL],
    /// `spin::CONVERTED`'s count of each lock's bucket (each lock a bucket of its own).
    converted: [u8; NL],
    /// Ghost: the thread holding each lock, plus one (0: free).
    holder: [u8; NL],
    /// Ghost: each lock's acquisitions so far (its holds' ordinals).
    holds: [u8; NL],
    slots: [Slot; NS],
    threads: [Thread; NT],
    clock: u8,
    /// Ghost: the hold each tick belongs to, per lock (see the module doc).
    tags: [[u8; MAX_TICKS]; NL],
    /// Ghost: units of waiting accrued, handed to `hooks.released`, returned by `reset`.
    accrued: u64,
    charged: u64,
    left: u64,
    /// Ghost: the first safety violation seen in a transition (0: none).
    violation: u8,
}

const TWO_HOLDERS: u8 = 1;
const RELEASE_BY_NON_HOLDER: u8 = 2;
const MISATTRIBUTED: u8 = 3;
const OWN_WAITING: u8 = 4;

pub(super) struct SpinModel {
    pub programs: Vec<Vec<Op>>,
    pub locks: usize,
    /// Lock words at the start, and who holds them (a lock taken before the runtime
    /// started is native and held).
    pub initial: [(u32, Option<u8>); NL],
    pub slots: usize,
    pub ticks: u8,
    pub variant: Variant,
    /// Every amount charged (or left) must be waiting of the charger's hold, not its own.
    pub attribution: bool,
}

impl SpinModel {
    fn threads(&self) -> usize {
        self.programs.len()
    }

    fn entry(&self, op: Option<&Op>) -> Pc {
        match op {
            None => Pc::Done,
            Some(Op::Lock(_)) => Pc::LockFast,
            Some(Op::TryLock(_)) => Pc::TryLoad,
            Some(Op::Unlock(_)) => Pc::UnlockCount,
            Some(Op::Destroy(_)) => Pc::DestroyLoad,
            Some(Op::Init(_)) => Pc::ResetCount,
            Some(Op::After(..)) => Pc::After,
        }
    }

    /// Ends the thread's current operation and starts its next one. Its locals are dead:
    /// cleared, so that states that differ only by them are one (and so is its hold's
    /// ordinal, after an unlock).
    fn finish(&self, n: &mut State, t: usize) {
        let th = &mut n.threads[t];
        if let Some(Op::Unlock(_)) = self.programs[t].get(usize::from(th.op)) {
            th.hold = 0;
        }
        th.op += 1;
        (th.cur, th.m, th.idx, th.value, th.mark) = (Word(0), 0, 0, 0, 0);
        let next = self.programs[t].get(usize::from(th.op));
        th.pc = self.entry(next);
        if let Some(Op::Init(_)) = next {
            th.cur = Word(UNLOCKED);
        }
    }

    /// Ghost: thread `t` acquires lock `l`.
    fn acquire(n: &mut State, l: usize, t: usize) {
        if n.holder[l] != 0 {
            n.violation = n.violation.max(TWO_HOLDERS);
        }
        n.holder[l] = t as u8 + 1;
        n.holds[l] += 1;
        n.threads[t].hold = n.holds[l];
    }

    /// Ghost: thread `t` releases lock `l`.
    fn release(n: &mut State, l: usize, t: usize) {
        if n.holder[l] != t as u8 + 1 {
            n.violation = n.violation.max(RELEASE_BY_NON_HOLDER);
        }
        n.holder[l] = 0;
    }

    /// Ghost: thread `t`'s hold of lock `l` hands over `b` units read from record `i`'s
    /// integral: an unlock's blame, or (`left`) what a reset returns. They must be the
    /// units of a run of ticks of that hold, none of them `t`'s own.
    fn settle(&self, n: &mut State, t: usize, l: usize, i: usize, b: u64, left: bool) {
        let slot = &n.slots[i];
        let hold = n.threads[t].hold;
        let w = |c: usize| -> u64 {
            slot.units[..c]
                .iter()
                .map(|&u| u64::from(u.count_ones()))
                .sum()
        };
        let run = |own_too: bool| {
            (0..=usize::from(n.clock)).any(|x| {
                (0..=x).any(|y| {
                    w(x) - w(y) == b
                        && (y..x).all(|k| {
                            let u = slot.units[k];
                            u == 0 || (n.tags[l][k] == hold && (own_too || u & (1 << t) == 0))
                        })
                })
            })
        };
        if self.attribution && !run(false) {
            let what = if run(true) {
                OWN_WAITING
            } else {
                MISATTRIBUTED
            };
            n.violation = n.violation.max(what);
        }
        *if left { &mut n.left } else { &mut n.charged } += b;
    }

    /// `Slab::free` of record `i`.
    fn free(n: &mut State, i: usize) {
        n.slots[i].allocated = false;
        n.slots[i].owner = 0;
    }
}

impl Model for SpinModel {
    type State = State;

    fn initial(&self) -> State {
        let blank = Thread {
            op: 0,
            pc: Pc::Done,
            cur: Word(0),
            m: 0,
            idx: 0,
            value: 0,
            mark: 0,
            hold: 0,
        };
        let mut s = State {
            words: [Word(UNLOCKED); NL],
            converted: [0; NL],
            holder: [0; NL],
            holds: [0; NL],
            slots: [Slot::default(); NS],
            threads: [blank; NT],
            clock: 0,
            tags: [[0; MAX_TICKS]; NL],
            accrued: 0,
            charged: 0,
            left: 0,
            violation: 0,
        };
        for (l, &(word, holder)) in self.initial.iter().enumerate().take(self.locks) {
            s.words[l] = Word(word);
            if let Some(t) = holder {
                Self::acquire(&mut s, l, usize::from(t));
            }
        }
        for t in 0..self.threads() {
            s.threads[t].pc = self.entry(self.programs[t].first());
            if let Some(Op::Init(_)) = self.programs[t].first() {
                s.threads[t].cur = Word(UNLOCKED);
            }
        }
        s
    }

    fn actors(&self) -> usize {
        self.threads() + 1
    }

    fn step(&self, s: &State, a: usize, out: &mut Vec<State>) {
        if a == self.threads() {
            // The clock: a tick, tagged with each lock's hold, and the units each record's
            // integral counts during it.
            if s.clock < self.ticks && !self.finished(s) {
                let mut n = s.clone();
                let k = usize::from(s.clock);
                for l in 0..self.locks {
                    n.tags[l][k] = s.holds[l] + u8::from(s.holder[l] == 0);
                }
                for slot in n.slots.iter_mut().filter(|slot| slot.allocated) {
                    slot.units[k] = slot.counted;
                    n.accrued += u64::from(slot.counted.count_ones());
                }
                n.clock += 1;
                out.push(n);
            }
            return;
        }
        let t = a;
        let th = s.threads[t];
        let Some(&op) = self.programs[t].get(usize::from(th.op)) else {
            return;
        };
        let l = op.lock();
        let m = usize::from(th.m);
        let v = self.variant;
        let now = u64::from(s.clock);
        let word = s.words[l].0;
        let cur = th.cur.0;
        let mut n = s.clone();
        let go = |n: &mut State, pc: Pc| {
            let th = &mut n.threads[t];
            th.pc = pc;
            if matches!(pc, Pc::LockLoad | Pc::TryLoad) {
                // Back at a loop's head: every local is dead (cleared: fewer states).
                (th.cur, th.m, th.idx, th.value, th.mark) = (Word(0), 0, 0, 0, 0);
            }
        };
        let converts_held = matches!(
            v,
            Variant::ConvertsHeldWord | Variant::ConversionForgetsHolder
        );
        match th.pc {
            // spin::lock: `compare_exchange(NATIVE_UNLOCKED, NATIVE_LOCKED)`; failed,
            // `lock_slow`.
            Pc::LockFast => {
                if word == UNLOCKED {
                    n.words[l] = Word(LOCKED);
                    Self::acquire(&mut n, l, t);
                    self.finish(&mut n, t);
                } else {
                    go(&mut n, Pc::LockLoad);
                }
            }
            // lock_slow: `let current = lock.load(Acquire)`: monitored, `lock_monitored`
            // (`seen & HELD == 0 && take_free(..)`, else it spins); native and free, the
            // CAS; native and held, spinning until the native holder's release.
            Pc::LockLoad => {
                if let Some(i) = monitored(word) {
                    n.threads[t].m = i as u8;
                    n.threads[t].cur = Word(word);
                    go(
                        &mut n,
                        if word & HELD == 0 {
                            Pc::TakeLoad
                        } else {
                            Pc::SpinArrive
                        },
                    );
                } else if word == UNLOCKED {
                    go(&mut n, Pc::LockCas);
                } else if converts_held {
                    go(&mut n, Pc::ConvertLoad);
                } else {
                    go(&mut n, Pc::NativeSpin);
                }
            }
            // lock_slow: `compare_exchange_weak(NATIVE_UNLOCKED, NATIVE_LOCKED)`; a failure
            // (spurious too) goes round the loop.
            Pc::LockCas => {
                if word == UNLOCKED {
                    n.words[l] = Word(LOCKED);
                    Self::acquire(&mut n, l, t);
                    self.finish(&mut n, t);
                    out.push(n);
                }
                let mut retry = s.clone();
                go(&mut retry, Pc::LockLoad);
                out.push(retry);
                return;
            }
            // lock_slow, native spinning: `lock.load(Relaxed)` until NATIVE_UNLOCKED or
            // monitored; unlocked, `demand_monitored` (the runtime is active); then round
            // the loop.
            Pc::NativeSpin => {
                if word != UNLOCKED && monitored(word).is_none() {
                    return; // spins: no progress until another thread moves
                }
                go(
                    &mut n,
                    if word == UNLOCKED {
                        Pc::ConvertLoad
                    } else {
                        Pc::LockLoad
                    },
                );
            }
            // demand_monitored: `let current = lock.load(Acquire)`; not NATIVE_UNLOCKED:
            // `return monitored(current)`, and `lock_slow` goes round its loop (the broken
            // variants convert a held native word too).
            Pc::ConvertLoad => {
                if word == UNLOCKED || (monitored(word).is_none() && converts_held) {
                    n.threads[t].cur = Word(word);
                    go(&mut n, Pc::ConvertAlloc);
                } else {
                    go(&mut n, Pc::LockLoad);
                }
            }
            // demand_monitored: `SLAB.alloc()?`, then `waiters.clear()`, `mark.store(0)`,
            // `owner.store(address)`. No slot: `None`, and round `lock_slow`'s loop.
            Pc::ConvertAlloc => match (0..self.slots).find(|&i| !s.slots[i].allocated) {
                None => go(&mut n, Pc::LockLoad),
                Some(i) => {
                    n.slots[i] = Slot {
                        allocated: true,
                        owner: l as u8 + 1,
                        ..Slot::default()
                    };
                    n.threads[t].idx = i as u8;
                    go(
                        &mut n,
                        if v == Variant::CountsAfterPublishing {
                            Pc::ConvertCas
                        } else {
                            Pc::ConvertCount
                        },
                    );
                }
            },
            // demand_monitored: `bucket.fetch_add(1)`, before the CAS publishes the word (the
            // broken variant: after it).
            Pc::ConvertCount => {
                n.converted[l] += 1;
                go(
                    &mut n,
                    if v == Variant::CountsAfterPublishing {
                        Pc::LockLoad
                    } else {
                        Pc::ConvertCas
                    },
                );
            }
            // demand_monitored: `lock.compare_exchange(NATIVE_UNLOCKED, MONITORED | index)`
            // (the broken variants: from the native word read, held or not), then round
            // `lock_slow`'s loop; failed, `owner.store(0)` and `SLAB.free(index)`.
            Pc::ConvertCas => {
                let i = usize::from(th.idx);
                if word == cur {
                    let held = if v == Variant::ConvertsHeldWord && cur != UNLOCKED {
                        HELD
                    } else {
                        0
                    };
                    n.words[l] = Word(MONITORED | held | i as u32);
                    go(
                        &mut n,
                        if v == Variant::CountsAfterPublishing {
                            Pc::ConvertCount
                        } else {
                            Pc::LockLoad
                        },
                    );
                } else {
                    if v != Variant::LoserKeepsSlot {
                        Self::free(&mut n, i);
                    }
                    go(
                        &mut n,
                        if v == Variant::CountsAfterPublishing {
                            Pc::LockLoad
                        } else {
                            Pc::ConvertUncount
                        },
                    );
                }
            }
            // demand_monitored, the CAS failed: `bucket.fetch_sub(1)`.
            Pc::ConvertUncount => {
                n.converted[l] -= 1;
                go(&mut n, Pc::LockLoad);
            }
            // take_free: `let word = m.waiters.load()`, `hooks.now()` if anybody waits.
            Pc::TakeLoad => {
                let w = s.slots[m].waiters.0;
                let at = if waiters(w) > 0 { now } else { 0 };
                n.threads[t].value = value_at(w, at);
                go(&mut n, Pc::TakeCas);
            }
            // take_free: `lock.compare_exchange(free, taken(free))`, then
            // `m.begin_hold(word, now)`; failed, `lock_monitored` spins and `trylock`
            // `continue`s.
            Pc::TakeCas => {
                if word == cur {
                    n.words[l] = Word(taken(cur, v));
                    Self::acquire(&mut n, l, t);
                    n.slots[m].mark = th.value;
                    self.finish(&mut n, t);
                } else if let Op::TryLock(_) = op {
                    go(&mut n, Pc::TryLoad);
                } else {
                    n.threads[t].value = 0;
                    go(&mut n, Pc::SpinArrive);
                }
            }
            // lock_monitored: `let start = hooks.now(); m.waiters.arrive(start)`.
            Pc::SpinArrive | Pc::RetryArrive => {
                let slot = &mut n.slots[m];
                slot.waiters.0 = arrive(slot.waiters.0, now);
                slot.counted |= 1 << t;
                go(&mut n, Pc::SpinLoad);
            }
            // lock_monitored: `let current = lock.load(Relaxed)`: it no longer names `m`,
            // depart and return false; held, spin; free, depart and take it (the broken
            // variant: take it first).
            Pc::SpinLoad => {
                if word & (MONITORED | INDEX) != cur & (MONITORED | INDEX) {
                    go(&mut n, Pc::GoneDepart);
                } else if word & HELD != 0 {
                    return; // spins until the word is free
                } else {
                    n.threads[t].cur = Word(word);
                    go(
                        &mut n,
                        if v == Variant::DepartsAfterHoldBegins {
                            Pc::SpinCas
                        } else {
                            Pc::LeaveDepart
                        },
                    );
                }
            }
            // lock_monitored: `let now = hooks.now(); m.waiters.depart(now)`, before the CAS
            // (the broken variant: after its hold's mark, its last step).
            Pc::LeaveDepart | Pc::GoneDepart => {
                let slot = &mut n.slots[m];
                slot.waiters.0 = depart(slot.waiters.0, now);
                slot.counted &= !(1 << t);
                if th.pc == Pc::GoneDepart {
                    go(&mut n, Pc::LockLoad);
                } else if v == Variant::DepartsAfterHoldBegins {
                    self.finish(&mut n, t);
                } else {
                    go(&mut n, Pc::SpinCas);
                }
            }
            // lock_monitored: `lock.compare_exchange(current, taken(current))`: won,
            // `hold_after_spin`; else `m.waiters.arrive(hooks.now())` and spin again (the
            // broken variant, still counted: spin again).
            Pc::SpinCas => {
                if word == cur {
                    n.words[l] = Word(taken(cur, v));
                    Self::acquire(&mut n, l, t);
                    go(&mut n, Pc::WonMark);
                } else if v == Variant::DepartsAfterHoldBegins {
                    go(&mut n, Pc::SpinLoad);
                } else {
                    go(&mut n, Pc::RetryArrive);
                }
            }
            // hold_after_spin: (`spin_ends`, no step) `let now = hooks.now();
            // m.begin_hold(m.waiters.load(), now)`.
            Pc::WonMark | Pc::TryWonMark => {
                n.slots[m].mark = value_at(s.slots[m].waiters.0, now);
                if v == Variant::DepartsAfterHoldBegins && th.pc == Pc::WonMark {
                    go(&mut n, Pc::LeaveDepart);
                } else {
                    self.finish(&mut n, t);
                }
            }
            // trylock: `let current = lock.load(Acquire)`: monitored and free, `take_free`;
            // monitored and held, the CAS; native, the native CAS.
            Pc::TryLoad => match monitored(word) {
                Some(i) => {
                    n.threads[t].m = i as u8;
                    n.threads[t].cur = Word(word);
                    go(
                        &mut n,
                        if word & HELD == 0 {
                            Pc::TakeLoad
                        } else {
                            Pc::TryHeldCas
                        },
                    );
                }
                None => go(&mut n, Pc::TryCas),
            },
            // trylock: `lock.compare_exchange(free, taken(free))` with `free = current &
            // !HELD`; won, `m.begin_hold(m.waiters.load(), hooks.now())` (the broken variant:
            // done); failed, EBUSY or (recycled) `continue`: the program tries again.
            Pc::TryHeldCas => {
                let free = cur & !HELD;
                if word == free {
                    n.words[l] = Word(taken(free, v));
                    Self::acquire(&mut n, l, t);
                    if v == Variant::TryWinKeepsOldMark {
                        self.finish(&mut n, t);
                    } else {
                        go(&mut n, Pc::TryWonMark);
                    }
                } else {
                    go(&mut n, Pc::TryLoad);
                }
            }
            // trylock: `compare_exchange(NATIVE_UNLOCKED, NATIVE_LOCKED)`; failed, converted
            // meanwhile (`continue`) or EBUSY: the program tries again.
            Pc::TryCas => {
                if word == UNLOCKED {
                    n.words[l] = Word(LOCKED);
                    Self::acquire(&mut n, l, t);
                    self.finish(&mut n, t);
                } else {
                    go(&mut n, Pc::TryLoad);
                }
            }
            // unlock: `converted_bucket(address).load(Relaxed) == 0`: the native store
            // without reading the word; else `unlock_read`.
            Pc::UnlockCount => go(
                &mut n,
                if s.converted[l] == 0 {
                    Pc::UnlockNativeStore
                } else {
                    Pc::UnlockLoad
                },
            ),
            // unlock_read: `let current = lock.load(Acquire)`; not monitored, the native
            // store; monitored, the integral (the broken variant: the release first).
            Pc::UnlockLoad => match monitored(word) {
                Some(i) => {
                    n.threads[t].m = i as u8;
                    n.threads[t].cur = Word(word);
                    go(
                        &mut n,
                        if v == Variant::ReadsIntegralAfterRelease {
                            Pc::UnlockRelease
                        } else {
                            Pc::UnlockIntegral
                        },
                    );
                }
                None => go(&mut n, Pc::UnlockNativeStore),
            },
            // unlock: `lock.store(NATIVE_UNLOCKED, Release)`.
            Pc::UnlockNativeStore => {
                n.words[l] = Word(UNLOCKED);
                Self::release(&mut n, l, t);
                self.finish(&mut n, t);
            }
            // unlock_read: `let word = m.waiters.load()`, `hooks.now()` if anybody waits,
            // `let start = m.mark.load()` (the broken variant, after the release: then
            // `hooks.released`, its last step).
            Pc::UnlockIntegral => {
                let w = s.slots[m].waiters.0;
                let at = if waiters(w) > 0 { now } else { 0 };
                let (value, mark) = (value_at(w, at), s.slots[m].mark);
                if v == Variant::ReadsIntegralAfterRelease {
                    self.settle(&mut n, t, l, m, elapsed(value, mark), false);
                    self.finish(&mut n, t);
                } else {
                    (n.threads[t].value, n.threads[t].mark) = (value, mark);
                    go(&mut n, Pc::UnlockRelease);
                }
            }
            // unlock_read: `lock.store(current & !HELD, Release)`, then
            // `hooks.released(elapsed(value_at(word, now), start))`.
            Pc::UnlockRelease => {
                n.words[l] = Word(cur & !HELD);
                Self::release(&mut n, l, t);
                if v == Variant::ReadsIntegralAfterRelease {
                    go(&mut n, Pc::UnlockIntegral);
                } else {
                    self.settle(&mut n, t, l, m, elapsed(th.value, th.mark), false);
                    self.finish(&mut n, t);
                }
            }
            // destroy: `let current = lock.load(Acquire)`; monitored, `reset` to its native
            // equivalent; else nothing to do.
            Pc::DestroyLoad => match monitored(word) {
                Some(_) => {
                    let to = if word & HELD == 0 { UNLOCKED } else { LOCKED };
                    n.threads[t].cur = Word(to);
                    go(&mut n, Pc::ResetCount);
                }
                None => self.finish(&mut n, t),
            },
            // reset: `converted_bucket(address).load(Acquire) == 0`: the plain store; else
            // the swap.
            Pc::ResetCount => go(
                &mut n,
                if s.converted[l] == 0 {
                    Pc::ResetStore
                } else {
                    Pc::ResetSwap
                },
            ),
            // reset: `lock.store(to, Release)`.
            Pc::ResetStore => {
                n.words[l] = th.cur;
                self.finish(&mut n, t);
            }
            // reset: `let current = lock.swap(to, AcqRel)`; not monitored, 0; held, what its
            // holder would have taken; then the record's free.
            Pc::ResetSwap => {
                n.words[l] = th.cur;
                match monitored(word) {
                    Some(i) => {
                        n.threads[t].m = i as u8;
                        go(
                            &mut n,
                            if word & HELD != 0 {
                                Pc::ResetIntegral
                            } else {
                                Pc::ResetFree
                            },
                        );
                    }
                    None => self.finish(&mut n, t),
                }
            }
            // reset: `let word = m.waiters.load()`, `hooks.now()` if anybody waits, `left =
            // elapsed(value_at(word, at), m.mark.load())`: the holder's hold hands it over.
            Pc::ResetIntegral => {
                let w = s.slots[m].waiters.0;
                let at = if waiters(w) > 0 { now } else { 0 };
                let left = elapsed(value_at(w, at), s.slots[m].mark);
                let holder = usize::from(s.holder[l]) - 1;
                self.settle(&mut n, holder, l, m, left, true);
                go(&mut n, Pc::ResetFree);
            }
            // reset: `m.owner.store(0)`, `SLAB.free(current & INDEX)`.
            Pc::ResetFree => {
                Self::free(&mut n, m);
                go(&mut n, Pc::ResetUncount);
            }
            // reset: `converted_bucket(address).fetch_sub(1)`.
            Pc::ResetUncount => {
                n.converted[l] -= 1;
                self.finish(&mut n, t);
            }
            Pc::After => {
                let Op::After(u, k) = op else { unreachable!() };
                if s.threads[usize::from(u)].op < k {
                    return;
                }
                self.finish(&mut n, t);
            }
            Pc::Done => return,
        }
        out.push(n);
    }

    fn describe(&self, s: &State, a: usize) -> String {
        if a == self.threads() {
            return format!("clock ticks to {}", s.clock + 1);
        }
        let th = s.threads[a];
        let op = self.programs[a][usize::from(th.op)];
        format!("T{a} {op:?} {:?} (m={}, cur={:?})", th.pc, th.m, th.cur)
    }

    fn invariant(&self, s: &State) -> Result<(), String> {
        match s.violation {
            0 => {}
            TWO_HOLDERS => return Err("mutual exclusion: two threads hold the lock".into()),
            RELEASE_BY_NON_HOLDER => {
                return Err("a thread released a lock it did not hold".into())
            }
            MISATTRIBUTED => {
                return Err("attribution: a hold was charged waiting that is not its own hold's (accrued during another hold, or while the lock was free but not just before its take)".into())
            }
            OWN_WAITING => {
                return Err("attribution: a hold was charged its own thread's waiting".into())
            }
            other => return Err(format!("violation {other}")),
        }
        for l in 0..self.locks {
            let word = s.words[l].0;
            // The word is held exactly while somebody holds the lock.
            let held = match monitored(word) {
                Some(_) => word & HELD != 0,
                None => word != UNLOCKED,
            };
            if held != (s.holder[l] != 0) {
                return Err(match s.holder[l].checked_sub(1) {
                    Some(h) => format!("lock {l}'s word is free, but T{h} holds it"),
                    None => format!("lock {l}'s word is held, but nobody holds it"),
                });
            }
            // A monitored word names a live record of this very lock.
            if let Some(i) = monitored(word) {
                let slot = &s.slots[i];
                if !slot.allocated || usize::from(slot.owner) != l + 1 {
                    return Err(format!(
                        "lock {l}'s word refers to record {i}, which is not its live record"
                    ));
                }
                if s.converted[l] == 0 {
                    return Err(format!(
                        "lock {l}'s word refers to record {i}, but its bucket counts no monitored word (its unlock would store over it)"
                    ));
                }
            }
        }
        // So does every reference a thread follows, and its own new record.
        for t in 0..self.threads() {
            let th = &s.threads[t];
            let Some(op) = self.programs[t].get(usize::from(th.op)) else {
                continue;
            };
            let l = op.lock();
            let check = |i: usize, what: &str| {
                let slot = &s.slots[i];
                if slot.allocated && usize::from(slot.owner) == l + 1 {
                    Ok(())
                } else {
                    Err(format!(
                        "T{t} follows {what} {i} of lock {l} at {:?}, but it is not a live record of that lock",
                        th.pc
                    ))
                }
            };
            if th.pc.uses_record() {
                check(usize::from(th.m), "reference")?;
            }
            if matches!(th.pc, Pc::ConvertCount | Pc::ConvertCas) {
                check(usize::from(th.idx), "new record")?;
            }
        }
        // Conservation: no unit is handed over twice.
        if s.charged + s.left > s.accrued {
            return Err(format!(
                "blame not conserved: {} units charged and {} left, but only {} accrued",
                s.charged, s.left, s.accrued
            ));
        }
        Ok(())
    }

    fn finished(&self, s: &State) -> bool {
        (0..self.threads()).all(|t| s.threads[t].pc == Pc::Done)
    }

    fn at_end(&self, s: &State) -> Result<(), String> {
        for l in 0..self.locks {
            let monitored_now = u8::from(monitored(s.words[l].0).is_some());
            if s.converted[l] != monitored_now {
                return Err(format!(
                    "lock {l}'s bucket counts {} monitored words, but {monitored_now} is",
                    s.converted[l]
                ));
            }
        }
        for (i, slot) in s.slots.iter().enumerate().take(self.slots) {
            if !slot.allocated {
                continue;
            }
            if !(0..self.locks).any(|l| monitored(s.words[l].0) == Some(i)) {
                return Err(format!(
                    "record {i} leaked: allocated, and no lock refers to it"
                ));
            }
            if slot.counted != 0 || waiters(slot.waiters.0) != 0 {
                return Err(format!("record {i} still counts waiters: {slot:?}"));
            }
        }
        Ok(())
    }
}

/// Scenarios: which threads do what (`threads`: 2 or 3).
pub(super) fn scenario(name: &str, threads: usize) -> SpinModel {
    use Op::*;
    let free = [(UNLOCKED, None), (UNLOCKED, None)];
    let three = threads == 3;
    let (programs, initial, locks, slots) = match name {
        // Contention converts a free native lock; lock and trylock mixed. (Three threads:
        // T2's try is usually native, its lock then monitored among the others'.)
        "contention" if three => (
            vec![
                vec![Lock(0), Unlock(0)],
                vec![Lock(0), Unlock(0)],
                vec![TryLock(0), Unlock(0), Lock(0), Unlock(0)],
            ],
            free,
            1,
            2,
        ),
        "contention" => (
            vec![
                vec![Lock(0), Unlock(0), Lock(0), Unlock(0)],
                vec![TryLock(0), Unlock(0), Lock(0), Unlock(0)],
            ],
            free,
            1,
            2,
        ),
        // A lock held since before the runtime started (native, T0 holds it): its spinners
        // wait for T0's native unlock, then convert it (the broken variants convert it
        // while held, and T0's native unlock meets the conversion). With 3 threads, T0
        // then tries it while one holds it and the other spins.
        "held before start" if three => (
            vec![
                vec![Unlock(0), TryLock(0), Unlock(0)],
                vec![Lock(0), Unlock(0)],
                vec![Lock(0), Unlock(0)],
            ],
            [(LOCKED, Some(0)), (UNLOCKED, None)],
            1,
            2,
        ),
        "held before start" => (
            vec![
                vec![Unlock(0), Lock(0), Unlock(0)],
                vec![Lock(0), Unlock(0), TryLock(0), Unlock(0)],
            ],
            [(LOCKED, Some(0)), (UNLOCKED, None)],
            1,
            2,
        ),
        // One record for two locks: lock 1's contention finds none while lock 0 keeps it
        // (native spinning), then lock 0's destroy frees it, once its users are done, and
        // lock 1's next conversion takes it; `pthread_spin_init` frees it again.
        "recycling" if three => (
            vec![
                vec![
                    Lock(0),
                    Unlock(0),
                    After(1, 4),
                    Destroy(0),
                    Lock(1),
                    Unlock(1),
                    After(2, 2),
                    Init(1),
                ],
                vec![Lock(0), Unlock(0), Lock(1), Unlock(1)],
                vec![Lock(1), Unlock(1)],
            ],
            free,
            2,
            1,
        ),
        // (Two threads: T1 takes lock 0 twice, so that a hold of it can be contended
        // once it is converted.)
        "recycling" => (
            vec![
                vec![
                    Lock(0),
                    Unlock(0),
                    After(1, 4),
                    Destroy(0),
                    Lock(1),
                    Unlock(1),
                    After(1, 6),
                    Init(1),
                ],
                vec![Lock(0), Unlock(0), Lock(0), Unlock(0), Lock(1), Unlock(1)],
            ],
            free,
            2,
            1,
        ),
        // A thread destroys the lock as soon as it has taken and released it after the
        // other's unlock (a reference count dropped under the lock: legal, the lock is
        // unlocked), while that unlock may still be running. The first contention converts
        // the lock (after T0's native hold), so that T0's second hold is monitored.
        "destroy after unlock" => (
            vec![
                vec![Lock(0), Unlock(0), After(1, 3), Lock(0), Unlock(0)],
                vec![
                    After(0, 1),
                    Lock(0),
                    Unlock(0),
                    After(0, 4),
                    Lock(0),
                    Unlock(0),
                    Destroy(0),
                ],
            ],
            free,
            1,
            1,
        ),
        // A thread destroys the lock while it holds it, once the other is done with it
        // (glibc's destroy changes nothing: the word stays held, natively, and the unlock
        // is a native one).
        "destroy while held" => (
            vec![
                vec![
                    Lock(0),
                    Unlock(0),
                    After(1, 2),
                    Lock(0),
                    Destroy(0),
                    Unlock(0),
                ],
                vec![Lock(0), Unlock(0)],
            ],
            free,
            1,
            1,
        ),
        other => panic!("no scenario {other}"),
    };
    SpinModel {
        programs,
        locks,
        initial,
        slots,
        ticks: 3,
        variant: Variant::Real,
        attribution: true,
    }
}

const LIMIT: usize = 20_000_000;

/// Safety, conservation and attribution in every scenario.
#[test]
fn model_check_spin_lock_is_safe_for_2_and_3_threads() {
    for name in ["contention", "held before start", "recycling"] {
        for threads in [2, 3] {
            let model = scenario(name, threads);
            assert_holds(&format!("spin {name}, {threads} threads"), &model, LIMIT);
        }
    }
    for name in ["destroy after unlock", "destroy while held"] {
        assert_holds(&format!("spin {name}"), &scenario(name, 2), LIMIT);
    }
}

/// The violation a variant must show, on the scenario that shows it (`attribution`: with
/// the attribution check; without it, the variant must break something more basic).
fn expect_caught(variant: Variant, name: &str, threads: usize, attribution: bool, what: &[&str]) {
    let mut model = scenario(name, threads);
    model.variant = variant;
    model.attribution = attribution;
    let label = format!("spin {variant:?} on {name}, {threads} threads");
    let v = assert_fails(&label, &model, LIMIT);
    assert!(
        what.iter().any(|w| v.what.contains(w)),
        "{label}: expected {what:?}, got: {v}"
    );
}

#[test]
fn model_check_spin_lock_broken_variants_are_caught() {
    // Without the turn, a thread that read the integral, then saw another take the lock
    // and release it, takes it with that reading: its hold is charged the waiting before
    // the other's take, and (3 threads) the waiting the other's hold was charged.
    expect_caught(Variant::NoTurn, "contention", 2, true, &["attribution"]);
    expect_caught(Variant::NoTurn, "contention", 3, false, &["not conserved"]);
    // Reading the integral after the release: the unlock is charged the waiting after it
    // (while the lock is free, or the next hold's); and the record may already be freed by
    // a destroy.
    expect_caught(
        Variant::ReadsIntegralAfterRelease,
        "contention",
        2,
        true,
        &["attribution"],
    );
    expect_caught(
        Variant::ReadsIntegralAfterRelease,
        "contention",
        3,
        false,
        &["not conserved"],
    );
    expect_caught(
        Variant::ReadsIntegralAfterRelease,
        "destroy after unlock",
        2,
        false,
        &["not a live record"],
    );
    // Departing after the hold's mark: the spinner's hold is charged its own spinning.
    expect_caught(
        Variant::DepartsAfterHoldBegins,
        "contention",
        2,
        true,
        &["its own thread's waiting"],
    );
    // A trylock's hold counted from the previous hold's mark: it is charged the waiting
    // that hold was charged, twice over.
    expect_caught(
        Variant::TryWinKeepsOldMark,
        "held before start",
        3,
        true,
        &["attribution"],
    );
    expect_caught(
        Variant::TryWinKeepsOldMark,
        "held before start",
        3,
        false,
        &["not conserved"],
    );
    // A held lock converted into a free monitored word: a spinner takes it from its holder.
    expect_caught(
        Variant::ConversionForgetsHolder,
        "held before start",
        2,
        false,
        &["mutual exclusion", "is free, but"],
    );
    // A held word converted, then overwritten by its holder's native store (its bucket read
    // before the conversion counted it): the record leaks.
    expect_caught(
        Variant::ConvertsHeldWord,
        "held before start",
        2,
        false,
        &["leaked", "finishes", "deadlock", "bucket counts"],
    );
    // The bucket counted after the conversion is published: a thread that took the lock
    // through the record meanwhile finds the bucket empty at its unlock and stores over
    // the reference.
    expect_caught(
        Variant::CountsAfterPublishing,
        "contention",
        2,
        false,
        &["bucket counts no monitored word"],
    );
    // Two converters race; the loser keeps its record.
    expect_caught(
        Variant::LoserKeepsSlot,
        "held before start",
        3,
        false,
        &["leaked"],
    );
}
