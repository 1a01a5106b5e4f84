//! A step-by-step model of the dual-representation spin lock (`locks/spin.rs`) and its blame
//! swap, checked exhaustively for 2 and 3 threads (see the parent module). Test-only.
//!
//! Each program counter ([`Pc`]) is one atomic operation of the real code, named after it;
//! the comment on each arm of [`SpinModel::step`] cites the function and the statement it
//! mirrors. Accesses to fields that only ever change under the record's meta lock (`held`,
//! `acquiring`, `stamp`) are folded into the step of the neighbouring atomic operation:
//! nothing outside the meta lock can see them in between. `spinners` and `idleness` are
//! read outside it (by `unlock` and `acquired`), so every write to them is a step of its
//! own. The slab's allocation and free are one step each (its Treiber stack is tested by
//! `locks/slab.rs`); which free slot an allocation gets does not matter (slots are alike,
//! but for the lock word a recycled one keeps, which the model keeps too).
//! `SpinHooks::spin_begins` and `spin_ends` do nothing to the lock and are not steps;
//! `hooks.blame` is a step that charges or (it may fail) counts. The runtime is active, and no lock is
//! process-shared (both only keep a lock native, which the slab running out also does).
//!
//! Time: a clock actor advances a logical clock by one tick, up to a bound (2), at any
//! moment but inside an update: from a thread's `hooks.now()` to the end of the
//! meta-locked `MonSpin::update` that uses the reading, a few instructions, no tick falls
//! (what a preemption there would skew is the approximation of any timed accounting, not
//! a race of the protocol; allowing it makes every variant, fixed or not, charge a tick or
//! two to the wrong hold). Each tick remembers which thread held each lock during it (its
//! *tag*), and every unit of waiting `MonSpin::update` accrues carries the tag of the tick
//! it accrued for, so the checker knows whose hold each unit of a counter comes from
//! (attribution), and counts every unit added, charged, in an unlocker's hands, given back
//! or dropped (conservation).
//!
//! Programs ([`scenario`]): a free native lock converted under contention, with lock and
//! trylock; a lock held natively since before the runtime started, converted while held;
//! two locks sharing one record by destroy and init (and running out of records); a lock
//! destroyed right after an unlock. What is checked: see the parent module.

use super::{assert_fails, assert_holds, Model};

/// Threads, monitored records (slab slots), locks and ticks the state has room for.
const NT: usize = 3;
const NS: usize = 3;
const NL: usize = 2;
const MAX_TICKS: usize = 3;
/// Tags of waiting units: 0 = accrued while the lock was free, `t + 1` = while thread `t`
/// held it, [`GIVEN_BACK`] = given back by an unlock that could not charge it (its origin
/// is no longer tracked: the real code gives it to the next unlock on purpose).
const TAGS: usize = NT + 2;
const GIVEN_BACK: usize = NT + 1;

/// Lock word values (`spin.rs`: `NATIVE_LOCKED`, `NATIVE_UNLOCKED`, `MONITORED | index`).
const LOCKED: u8 = 0;
const UNLOCKED: u8 = 1;
fn monitored(word: u8) -> Option<usize> {
    (word >= 2).then(|| usize::from(word - 2))
}
fn reference(slot: usize) -> u8 {
    2 + slot as u8
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
    /// The protocol before issue 19's model check: an unlock that finds no spinner and an
    /// empty counter releases without the meta lock, a spinner opens the gate (`held`)
    /// without reading the word, and blame an unlock could not charge is given back to
    /// the record after the release.
    UnlockOutsideMeta,
    /// [`Variant::Real`], but blame that could not be charged is given back to the record
    /// after the release (as before the fix) instead of being counted.
    GiveBackAfterRelease,
    /// [`Variant::Real`], but the word is released before the counter is taken.
    ReleasesBeforeSwap,
    /// `demand_monitored` converts a held lock too (into an unlocked record).
    ConversionForgetsHolder,
    /// The protocol before the native unlock became a store: `demand_monitored` converts a
    /// held word into a held record (which a native unlock by CAS allowed), with the
    /// store: the store overwrites the conversion.
    ConvertsHeldWord,
    /// A converter that lost the race does not free its record.
    LoserKeepsSlot,
    /// `demand_monitored` counts the word in its bucket after publishing it: an unlock
    /// that finds the bucket empty meanwhile stores over the reference.
    CountsAfterPublishing,
    /// A spinner never opens the gate (waiting during a hold it registered in is lost).
    NeverOpensGate,
}

/// Where a thread is: the atomic operation it performs next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Pc {
    // spin::lock
    LockLoad,
    LockCas,
    // spin::demand_monitored
    ConvertLoad,
    ConvertAlloc,
    ConvertCheck,
    ConvertCount,
    ConvertCas,
    ConvertUncount,
    // spin::lock, native spinning until the native holder's release
    NativeSpin,
    // spin::lock_monitored
    MonSwap,
    MonNow,
    // spin::register_spinner (MonSpin::update)
    RegMeta,
    RegWord,
    RegAdvance,
    RegCount,
    RegGate,
    RegUnmeta,
    // spin::lock_monitored, spinning
    SpinLoad,
    SpinSwap,
    // spin::hold_after_spin
    WonNow,
    WonMeta,
    WonAdvance,
    WonUncount,
    WonUnmeta,
    HoldNow,
    HoldMeta,
    HoldAdvance,
    HoldUnmeta,
    // spin::acquired
    AcqLoad,
    AcqNow,
    AcqMeta,
    AcqAdvance,
    AcqUnmeta,
    // spin::trylock
    TryLoad,
    TrySwap,
    TryCas,
    // spin::unlock
    UnlockCount,
    UnlockLoad,
    UnlockNativeStore,
    UnlockSpinners,
    UnlockIdleness,
    UnlockNow,
    UnlockMeta,
    UnlockAdvance,
    UnlockSwap,
    UnlockReleaseInMeta,
    UnlockUnmeta,
    UnlockRelease,
    UnlockBlame,
    UnlockGiveBack,
    // spin::destroy and spin::reset
    DestroyLoad,
    DestroyWord,
    ResetSwap,
    ResetOwner,
    ResetFree,
    ResetUncount,
    // the program's own ordering
    After,
    Done,
}

impl Pc {
    /// Whether the thread is inside an update: from its `hooks.now()` to the end of the
    /// meta-locked `MonSpin::update` that uses the reading. The clock does not tick then
    /// (see [`SpinModel::step`]).
    fn in_update(self) -> bool {
        use Pc::*;
        matches!(
            self,
            RegMeta
                | RegWord
                | RegAdvance
                | RegCount
                | RegGate
                | RegUnmeta
                | WonMeta
                | WonAdvance
                | WonUncount
                | WonUnmeta
                | HoldMeta
                | HoldAdvance
                | HoldUnmeta
                | AcqMeta
                | AcqAdvance
                | AcqUnmeta
                | UnlockMeta
                | UnlockAdvance
                | UnlockSwap
                | UnlockReleaseInMeta
                | UnlockUnmeta
        )
    }

    /// Whether the thread has just taken the lock and is in `acquired` or
    /// `hold_after_spin`, which open the gate for its hold themselves.
    fn starts_hold(self) -> bool {
        use Pc::*;
        matches!(
            self,
            AcqLoad
                | AcqNow
                | AcqMeta
                | AcqAdvance
                | AcqUnmeta
                | WonNow
                | WonMeta
                | WonAdvance
                | WonUncount
                | WonUnmeta
                | HoldNow
                | HoldMeta
                | HoldAdvance
                | HoldUnmeta
        )
    }

    /// Whether the thread follows its reference `m` to a record at this point.
    fn uses_record(self) -> bool {
        use Pc::*;
        matches!(
            self,
            MonSwap
                | MonNow
                | RegMeta
                | RegWord
                | RegAdvance
                | RegCount
                | RegGate
                | RegUnmeta
                | SpinLoad
                | SpinSwap
                | WonNow
                | WonMeta
                | WonAdvance
                | WonUncount
                | WonUnmeta
                | HoldNow
                | HoldMeta
                | HoldAdvance
                | HoldUnmeta
                | AcqLoad
                | AcqNow
                | AcqMeta
                | AcqAdvance
                | AcqUnmeta
                | TrySwap
                | UnlockSpinners
                | UnlockIdleness
                | UnlockNow
                | UnlockMeta
                | UnlockAdvance
                | UnlockSwap
                | UnlockReleaseInMeta
                | UnlockUnmeta
                | UnlockRelease
                | UnlockGiveBack
                | DestroyWord
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
    /// `MonSpin::word`: the real lock, 0 or 1.
    word: u8,
    meta: bool,
    spinners: u8,
    held: bool,
    acquiring: bool,
    stamp: u8,
    /// `MonSpin::idleness`, by tag.
    idleness: [u8; TAGS],
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Thread {
    /// Index of the current operation in the thread's program.
    op: u8,
    pc: Pc,
    /// A lock word value read (`current`), or the value `reset` stores.
    cur: u8,
    /// The record the thread follows (`m`).
    m: u8,
    /// The record `demand_monitored` allocated (`index`).
    idx: u8,
    /// A clock reading (`now`, `start`, `won`).
    now: u8,
    /// Blame swapped out by `unlock`, not yet charged or given back.
    blame: [u8; TAGS],
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(super) struct State {
    words: [u8; NL],
    /// `spin::CONVERTED`'s count of each lock's bucket (each lock a bucket of its own).
    converted: [u8; NL],
    /// Ghost: the thread holding each lock, plus one (0: free).
    holder: [u8; NL],
    slots: [Slot; NS],
    threads: [Thread; NT],
    clock: u8,
    /// Ghost: the tag of each tick (the holder of each lock during it).
    ticks: [[u8; MAX_TICKS]; NL],
    /// Ghost accounting of waiting units: added by `MonSpin::update`, charged by a
    /// successful `hooks.blame`, counted as unsettled by a failed one, dropped with a
    /// record freed by `reset` (which returns them to be counted).
    accrued: u8,
    charged: u8,
    unsettled: u8,
    dropped: u8,
    /// Ghost: the first safety violation seen in a transition (0: none).
    violation: u8,
}

const TWO_HOLDERS: u8 = 1;
const RELEASE_BY_NON_HOLDER: u8 = 2;
const LOST_LOCK: u8 = 3;
const MISATTRIBUTED: u8 = 4;
const DROPPED: u8 = 5;
const GATE_SHUT: u8 = 6;

pub(super) struct SpinModel {
    pub programs: Vec<Vec<Op>>,
    pub locks: usize,
    /// Lock words at the start, and who holds them (a lock taken before the runtime
    /// started is native and held).
    pub initial: [(u8, Option<u8>); NL],
    pub slots: usize,
    pub ticks: u8,
    /// `hooks.blame` may fail (a thread inside the runtime, no thread state): the blame is
    /// then counted as unsettled.
    pub blame_can_fail: bool,
    pub variant: Variant,
    /// Every charged unit must have been accrued while its charger held the lock.
    pub attribution: bool,
    /// No unit may reach a destroy (none of the scenarios destroys a lock while it is
    /// held with spinners, so every unit must have been taken by an unlock).
    pub forbid_drop: bool,
    /// No tick may pass with a spinner registered during a hold while the gate is shut.
    pub check_gate: bool,
}

impl SpinModel {
    fn threads(&self) -> usize {
        self.programs.len()
    }

    fn entry(&self, op: Option<&Op>) -> Pc {
        match op {
            None => Pc::Done,
            Some(Op::Lock(_)) => Pc::LockLoad,
            Some(Op::TryLock(_)) => Pc::TryLoad,
            Some(Op::Unlock(_)) => Pc::UnlockCount,
            Some(Op::Destroy(_)) => Pc::DestroyLoad,
            Some(Op::Init(_)) => Pc::ResetSwap,
            Some(Op::After(..)) => Pc::After,
        }
    }

    /// Ends the thread's current operation and starts its next one. Its locals are dead:
    /// cleared, so that states that differ only by them are one.
    fn finish(&self, n: &mut State, t: usize) {
        let th = &mut n.threads[t];
        th.op += 1;
        th.cur = 0;
        th.m = 0;
        th.idx = 0;
        th.now = 0;
        let next = self.programs[t].get(usize::from(th.op));
        th.pc = self.entry(next);
        if let Some(Op::Init(_)) = next {
            th.cur = UNLOCKED;
        }
    }

    /// Ghost: thread `t` acquires lock `l`.
    fn acquire(n: &mut State, l: usize, t: usize) {
        if n.holder[l] != 0 {
            n.violation = n.violation.max(TWO_HOLDERS);
        }
        n.holder[l] = t as u8 + 1;
    }

    /// Ghost: thread `t` releases lock `l`.
    fn release(n: &mut State, l: usize, t: usize) {
        if n.holder[l] != t as u8 + 1 {
            n.violation = n.violation.max(RELEASE_BY_NON_HOLDER);
        }
        n.holder[l] = 0;
    }

    /// The body of `MonSpin::update` before `f`: brings the counter of record `i` (of lock
    /// `l`) up to thread `t`'s clock reading `now`, accruing spinners × ticks while the lock is marked held.
    fn advance(n: &mut State, t: usize, i: usize, l: usize) {
        let now = n.threads[t].now;
        n.threads[t].now = 0; // dead from here on
        let slot = &mut n.slots[i];
        if now > slot.stamp {
            if slot.spinners > 0 && slot.held {
                for k in slot.stamp..now {
                    let tag = usize::from(n.ticks[l][usize::from(k)]);
                    slot.idleness[tag] += slot.spinners;
                }
                n.accrued += slot.spinners * (now - slot.stamp);
            }
            slot.stamp = now;
        }
    }

    /// Whether a tick now would be lost: a monitored lock is held, in its hold proper, with
    /// a spinner registered, and its gate is shut, so nothing accrues for the spinner.
    /// (The hold proper: not while its holder is still in `acquired` or `hold_after_spin`,
    /// which open the gate themselves; not while `acquiring`.)
    fn gate_shut(&self, s: &State) -> bool {
        (0..self.locks).any(|l| {
            let (Some(i), Some(h)) = (monitored(s.words[l]), s.holder[l].checked_sub(1)) else {
                return false;
            };
            let slot = &s.slots[i];
            let starting = s.threads[usize::from(h)].pc.starts_hold();
            slot.spinners > 0 && !slot.acquiring && !slot.held && !starting
        })
    }

    /// Frees record `i` (`Slab::free`); what its counter still holds is dropped.
    fn free(&self, n: &mut State, i: usize) {
        let slot = &mut n.slots[i];
        let left: u8 = slot.idleness.iter().sum();
        if left > 0 && self.forbid_drop {
            n.violation = n.violation.max(DROPPED);
        }
        n.dropped += left;
        slot.idleness = [0; TAGS];
        slot.allocated = false;
    }
}

impl Model for SpinModel {
    type State = State;

    fn initial(&self) -> State {
        let blank = Thread {
            op: 0,
            pc: Pc::Done,
            cur: 0,
            m: 0,
            idx: 0,
            now: 0,
            blame: [0; TAGS],
        };
        let mut s = State {
            words: [UNLOCKED; NL],
            converted: [0; NL],
            holder: [0; NL],
            slots: [Slot::default(); NS],
            threads: [blank; NT],
            clock: 0,
            ticks: [[0; MAX_TICKS]; NL],
            accrued: 0,
            charged: 0,
            unsettled: 0,
            dropped: 0,
            violation: 0,
        };
        for (l, &(word, holder)) in self.initial.iter().enumerate().take(self.locks) {
            s.words[l] = word;
            s.holder[l] = holder.map_or(0, |t| t + 1);
        }
        for t in 0..self.threads() {
            s.threads[t].pc = self.entry(self.programs[t].first());
            if let Some(Op::Init(_)) = self.programs[t].first() {
                s.threads[t].cur = UNLOCKED;
            }
        }
        s
    }

    fn actors(&self) -> usize {
        self.threads() + 1
    }

    fn step(&self, s: &State, a: usize, out: &mut Vec<State>) {
        if a == self.threads() {
            // The clock: a tick, tagged with each lock's holder during it. Never while a
            // thread is inside an update (its clock reading and its meta-locked section, a
            // few instructions, take no time at the clock's scale): what a preemption there
            // would skew is an approximation of any timed accounting, not a protocol race.
            let reading = (0..self.threads()).any(|t| s.threads[t].pc.in_update());
            if usize::from(s.clock) < usize::from(self.ticks) && !self.finished(s) && !reading {
                let mut n = s.clone();
                if self.check_gate && self.gate_shut(s) {
                    n.violation = n.violation.max(GATE_SHUT);
                }
                for l in 0..self.locks {
                    n.ticks[l][usize::from(s.clock)] = s.holder[l];
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
        // Whether the unlock takes the meta lock every time and the spinner reads the word.
        let fix = v != Variant::UnlockOutsideMeta;
        let mut n = s.clone();
        let go = |n: &mut State, pc: Pc| {
            let th = &mut n.threads[t];
            th.pc = pc;
            if matches!(pc, Pc::LockLoad | Pc::TryLoad | Pc::UnlockCount) {
                // Back at a loop's head: every local is dead (cleared: fewer states).
                (th.cur, th.m, th.idx, th.now) = (0, 0, 0, 0);
            }
        };
        match th.pc {
            // spin::lock: its first `compare_exchange(NATIVE_UNLOCKED, NATIVE_LOCKED)`, a
            // no-op when it fails, is `LockCas` after this load; then `lock_slow`: `let
            // current = lock.load(Acquire)`, and dispatch on it.
            Pc::LockLoad => {
                let current = s.words[l];
                if let Some(i) = monitored(current) {
                    n.threads[t].m = i as u8;
                    go(&mut n, Pc::MonSwap);
                } else if current == UNLOCKED {
                    go(&mut n, Pc::LockCas);
                } else if matches!(
                    v,
                    Variant::ConvertsHeldWord | Variant::ConversionForgetsHolder
                ) {
                    // Broken variants: the held word is converted at once.
                    go(&mut n, Pc::ConvertLoad);
                } else {
                    // Native and held: spin natively until the holder's release.
                    go(&mut n, Pc::NativeSpin);
                }
            }
            // spin::lock: `compare_exchange_weak(NATIVE_UNLOCKED, NATIVE_LOCKED)`; a
            // failure (spurious too) goes round the loop.
            Pc::LockCas => {
                if s.words[l] == UNLOCKED {
                    n.words[l] = LOCKED;
                    Self::acquire(&mut n, l, t);
                    self.finish(&mut n, t);
                    out.push(n);
                }
                let mut retry = s.clone();
                go(&mut retry, Pc::LockLoad);
                out.push(retry);
                return;
            }
            // spin::demand_monitored: `let current = lock.load(Acquire)`; a reference, or a
            // word taken natively meanwhile, returns at once (and `lock` loops back to its
            // load).
            Pc::ConvertLoad => {
                let current = s.words[l];
                n.threads[t].cur = current;
                let converts = current == UNLOCKED
                    || (monitored(current).is_none()
                        && matches!(
                            v,
                            Variant::ConvertsHeldWord | Variant::ConversionForgetsHolder
                        ));
                go(
                    &mut n,
                    if converts {
                        Pc::ConvertAlloc
                    } else {
                        Pc::LockLoad
                    },
                );
            }
            // spin::demand_monitored: `SLAB.alloc()` and the slot's reset (relaxed stores
            // to a slot nobody else can reach yet). No slot: back to `lock`'s loop.
            Pc::ConvertAlloc => match (0..self.slots).find(|&i| !s.slots[i].allocated) {
                None => go(
                    &mut n,
                    if v == Variant::ConvertsHeldWord {
                        Pc::NativeSpin
                    } else {
                        Pc::LockLoad
                    },
                ),
                Some(i) => {
                    let slot = &mut n.slots[i];
                    slot.allocated = true;
                    slot.idleness = [0; TAGS];
                    slot.spinners = 0;
                    slot.held = false;
                    slot.acquiring = false;
                    slot.stamp = 0;
                    slot.meta = false;
                    slot.owner = l as u8 + 1;
                    n.threads[t].idx = i as u8;
                    go(&mut n, Pc::ConvertCheck);
                }
            },
            // spin::demand_monitored: `slot.word.store(0)` (the broken variant that converts
            // held words: the word's state, as the old protocol did).
            Pc::ConvertCheck => {
                let i = usize::from(th.idx);
                n.slots[i].word = match v {
                    Variant::ConvertsHeldWord => u8::from(th.cur != UNLOCKED),
                    _ => 0,
                };
                go(
                    &mut n,
                    if v == Variant::CountsAfterPublishing {
                        Pc::ConvertCas
                    } else {
                        Pc::ConvertCount
                    },
                );
            }
            // spin::demand_monitored: `bucket.fetch_add(1)`, before the CAS publishes the
            // reference (the broken variant: after it).
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
            // spin::demand_monitored: `lock.compare_exchange(NATIVE_UNLOCKED, MONITORED |
            // index)` (the broken variants: from the value read); on failure
            // `SLAB.free(index)`, and back to `lock`'s loop.
            Pc::ConvertCas => {
                let i = usize::from(th.idx);
                if s.words[l] == th.cur {
                    n.words[l] = reference(i);
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
                        self.free(&mut n, i);
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
            // spin::demand_monitored, the CAS failed: `bucket.fetch_sub(1)`.
            Pc::ConvertUncount => {
                n.converted[l] -= 1;
                go(&mut n, Pc::LockLoad);
            }
            // spin::lock, native spinning: `lock.load(Relaxed)` until unlocked or converted;
            // unlocked, `demand_monitored` (the runtime is active).
            Pc::NativeSpin => {
                let now = s.words[l];
                if now != UNLOCKED && monitored(now).is_none() {
                    return; // spins: no progress until another thread moves
                }
                go(
                    &mut n,
                    if now == UNLOCKED {
                        Pc::ConvertLoad
                    } else {
                        Pc::LockLoad
                    },
                );
            }
            // spin::lock_monitored: `m.word.swap(1, Acquire) == 0`.
            Pc::MonSwap => {
                let was = s.slots[m].word;
                n.slots[m].word = 1;
                if was == 0 {
                    Self::acquire(&mut n, l, t);
                    go(&mut n, Pc::AcqLoad);
                } else {
                    go(&mut n, Pc::MonNow);
                }
            }
            // spin::lock_monitored: `let start = hooks.now()`.
            Pc::MonNow => {
                n.threads[t].now = s.clock;
                go(&mut n, Pc::RegMeta);
            }
            // MonSpin::update: `meta.compare_exchange_weak(false, true)`, spinning.
            Pc::RegMeta | Pc::WonMeta | Pc::HoldMeta | Pc::AcqMeta | Pc::UnlockMeta => {
                if s.slots[m].meta {
                    return; // spins until the meta lock is free
                }
                n.slots[m].meta = true;
                go(
                    &mut n,
                    match th.pc {
                        Pc::RegMeta => Pc::RegAdvance,
                        Pc::WonMeta => Pc::WonAdvance,
                        Pc::HoldMeta => Pc::HoldAdvance,
                        Pc::AcqMeta => Pc::AcqAdvance,
                        _ => Pc::UnlockAdvance,
                    },
                );
            }
            // MonSpin::update: `if now > stamp { ... idleness.fetch_add(spinners × (now −
            // stamp)) ... stamp.store(now) }` (register_spinner's `now` is `start`).
            Pc::RegAdvance => {
                Self::advance(&mut n, t, m, l);
                go(&mut n, Pc::RegCount);
            }
            // register_spinner: `spinners.fetch_add(1, SeqCst)`, then the word and the gate.
            Pc::RegCount => {
                n.slots[m].spinners += 1;
                if fix {
                    go(&mut n, Pc::RegWord);
                } else {
                    if !s.slots[m].acquiring {
                        n.slots[m].held = true;
                    }
                    go(&mut n, Pc::RegUnmeta);
                }
            }
            // register_spinner: `m.word.load(SeqCst)` (the gate's condition), under meta,
            // after the count (the handshake with `acquired`).
            Pc::RegWord => {
                n.threads[t].cur = s.slots[m].word;
                go(&mut n, Pc::RegGate);
            }
            // register_spinner: `if word != 0 && !acquiring { held = true }`.
            Pc::RegGate => {
                n.threads[t].cur = 0;
                if v != Variant::NeverOpensGate && !s.slots[m].acquiring && th.cur != 0 {
                    n.slots[m].held = true;
                }
                go(&mut n, Pc::RegUnmeta);
            }
            // MonSpin::update: `meta.store(false, Release)`.
            Pc::RegUnmeta | Pc::WonUnmeta | Pc::HoldUnmeta | Pc::AcqUnmeta | Pc::UnlockUnmeta => {
                n.slots[m].meta = false;
                match th.pc {
                    Pc::RegUnmeta => go(&mut n, Pc::SpinLoad),
                    Pc::WonUnmeta => go(&mut n, Pc::HoldNow),
                    Pc::UnlockUnmeta if fix => {
                        if th.blame.iter().any(|&b| b > 0) {
                            go(&mut n, Pc::UnlockBlame);
                        } else {
                            self.finish(&mut n, t);
                        }
                    }
                    Pc::UnlockUnmeta => go(&mut n, Pc::UnlockRelease),
                    _ => self.finish(&mut n, t),
                }
            }
            // lock_monitored: `while m.word.load(Relaxed) != 0 { spin }`.
            Pc::SpinLoad => {
                if s.slots[m].word != 0 {
                    return; // spins until the word is free
                }
                go(&mut n, Pc::SpinSwap);
            }
            // lock_monitored: `if m.word.swap(1, Acquire) == 0 { break }`.
            Pc::SpinSwap => {
                let was = s.slots[m].word;
                n.slots[m].word = 1;
                if was == 0 {
                    Self::acquire(&mut n, l, t);
                    go(&mut n, Pc::WonNow);
                } else {
                    go(&mut n, Pc::SpinLoad);
                }
            }
            // hold_after_spin: `let won = hooks.now()`.
            Pc::WonNow => {
                n.threads[t].now = s.clock;
                go(&mut n, Pc::WonMeta);
            }
            Pc::WonAdvance => {
                Self::advance(&mut n, t, m, l);
                go(&mut n, Pc::WonUncount);
            }
            // hold_after_spin: `spinners.fetch_sub(1)`, `held = false`, `acquiring = true`.
            Pc::WonUncount => {
                let slot = &mut n.slots[m];
                slot.spinners -= 1;
                slot.held = false;
                slot.acquiring = true;
                go(&mut n, Pc::WonUnmeta);
            }
            // hold_after_spin: (`spin_ends`, no step) `update(hooks.now(), ...)`.
            Pc::HoldNow => {
                n.threads[t].now = s.clock;
                go(&mut n, Pc::HoldMeta);
            }
            // hold_after_spin: advance, then `acquiring = false`, `held = true` (meta-only).
            Pc::HoldAdvance => {
                Self::advance(&mut n, t, m, l);
                n.slots[m].acquiring = false;
                n.slots[m].held = true;
                go(&mut n, Pc::HoldUnmeta);
            }
            // spin::acquired: `if m.spinners.load(Acquire) > 0`.
            Pc::AcqLoad => {
                if s.slots[m].spinners > 0 {
                    go(&mut n, Pc::AcqNow);
                } else {
                    self.finish(&mut n, t);
                }
            }
            // spin::acquired: `update(hooks.now(), ...)`.
            Pc::AcqNow => {
                n.threads[t].now = s.clock;
                go(&mut n, Pc::AcqMeta);
            }
            // spin::acquired: advance, then `held = true` (meta-only).
            Pc::AcqAdvance => {
                Self::advance(&mut n, t, m, l);
                n.slots[m].held = true;
                go(&mut n, Pc::AcqUnmeta);
            }
            // spin::trylock: `let current = lock.load(Relaxed)`.
            Pc::TryLoad => {
                let current = s.words[l];
                if let Some(i) = monitored(current) {
                    n.threads[t].m = i as u8;
                    go(&mut n, Pc::TrySwap);
                } else {
                    go(&mut n, Pc::TryCas);
                }
            }
            // spin::trylock: `m.word.swap(1, Acquire) == 0` → `acquired`, else EBUSY (and
            // the program tries again).
            Pc::TrySwap => {
                let was = s.slots[m].word;
                n.slots[m].word = 1;
                if was == 0 {
                    Self::acquire(&mut n, l, t);
                    go(&mut n, Pc::AcqLoad);
                } else {
                    go(&mut n, Pc::TryLoad);
                }
            }
            // spin::trylock: `compare_exchange(NATIVE_UNLOCKED, NATIVE_LOCKED)`; converted
            // meanwhile → `continue`; else EBUSY (and the program tries again).
            Pc::TryCas => {
                if s.words[l] == UNLOCKED {
                    n.words[l] = LOCKED;
                    Self::acquire(&mut n, l, t);
                    self.finish(&mut n, t);
                } else {
                    go(&mut n, Pc::TryLoad);
                }
            }
            // spin::unlock: `converted_bucket(address).load(Relaxed) == 0` → the native
            // store without reading the word; else `unlock_read`.
            Pc::UnlockCount => go(
                &mut n,
                if s.converted[l] == 0 {
                    Pc::UnlockNativeStore
                } else {
                    Pc::UnlockLoad
                },
            ),
            // spin::unlock_read: `lock.load(Acquire)`.
            Pc::UnlockLoad => {
                let current = s.words[l];
                if let Some(i) = monitored(current) {
                    n.threads[t].m = i as u8;
                    go(
                        &mut n,
                        match v {
                            Variant::ReleasesBeforeSwap => Pc::UnlockRelease,
                            Variant::UnlockOutsideMeta => Pc::UnlockSpinners,
                            _ => Pc::UnlockNow,
                        },
                    );
                } else if current == UNLOCKED {
                    // `return 0`: the lock this thread holds was released by someone else.
                    n.violation = n.violation.max(LOST_LOCK);
                    self.finish(&mut n, t);
                } else {
                    go(&mut n, Pc::UnlockNativeStore);
                }
            }
            // spin::unlock: `lock.store(NATIVE_UNLOCKED, Release)`: nobody converts a held
            // word (but the broken variant, whose conversion this overwrites).
            Pc::UnlockNativeStore => {
                n.words[l] = UNLOCKED;
                Self::release(&mut n, l, t);
                self.finish(&mut n, t);
            }
            // Old protocol only: `pending = m.spinners.load(Acquire) > 0 || ...`.
            Pc::UnlockSpinners => go(
                &mut n,
                if s.slots[m].spinners > 0 {
                    Pc::UnlockNow
                } else {
                    Pc::UnlockIdleness
                },
            ),
            // Old protocol only: `... || m.idleness.load(Acquire) > 0`.
            Pc::UnlockIdleness => go(
                &mut n,
                if s.slots[m].idleness.iter().any(|&u| u > 0) {
                    Pc::UnlockNow
                } else {
                    Pc::UnlockRelease
                },
            ),
            // spin::unlock: `m.update(hooks.now(), ...)`.
            Pc::UnlockNow => {
                n.threads[t].now = s.clock;
                go(&mut n, Pc::UnlockMeta);
            }
            Pc::UnlockAdvance => {
                Self::advance(&mut n, t, m, l);
                go(&mut n, Pc::UnlockSwap);
            }
            // spin::unlock: `held = false` (meta-only), `idleness.swap(0)`.
            Pc::UnlockSwap => {
                n.slots[m].held = false;
                let taken = std::mem::take(&mut n.slots[m].idleness);
                n.threads[t].blame = taken;
                go(
                    &mut n,
                    if matches!(v, Variant::ReleasesBeforeSwap | Variant::UnlockOutsideMeta) {
                        Pc::UnlockUnmeta
                    } else {
                        Pc::UnlockReleaseInMeta
                    },
                );
            }
            // spin::unlock: `m.word.store(0, Release)` inside the meta section.
            Pc::UnlockReleaseInMeta => {
                n.slots[m].word = 0;
                Self::release(&mut n, l, t);
                go(&mut n, Pc::UnlockUnmeta);
            }
            // Broken variants only: `m.word.store(0, Release)` outside the meta section.
            Pc::UnlockRelease => {
                n.slots[m].word = 0;
                Self::release(&mut n, l, t);
                if v == Variant::ReleasesBeforeSwap {
                    go(&mut n, Pc::UnlockNow);
                } else if th.blame.iter().any(|&b| b > 0) {
                    go(&mut n, Pc::UnlockBlame);
                } else {
                    self.finish(&mut n, t);
                }
            }
            // spin::unlock: `hooks.blame(blame)`: charged, or (it may fail) counted as
            // unsettled (the broken variants give it back).
            Pc::UnlockBlame => {
                if self.attribution
                    && th
                        .blame
                        .iter()
                        .enumerate()
                        .any(|(tag, &u)| u > 0 && tag != t + 1 && tag != GIVEN_BACK)
                {
                    n.violation = n.violation.max(MISATTRIBUTED);
                }
                n.charged += th.blame.iter().sum::<u8>();
                n.threads[t].blame = [0; TAGS];
                self.finish(&mut n, t);
                out.push(n);
                if self.blame_can_fail {
                    let mut failed = s.clone();
                    if matches!(
                        v,
                        Variant::UnlockOutsideMeta | Variant::GiveBackAfterRelease
                    ) {
                        go(&mut failed, Pc::UnlockGiveBack);
                    } else {
                        failed.unsettled += th.blame.iter().sum::<u8>();
                        failed.threads[t].blame = [0; TAGS];
                        self.finish(&mut failed, t);
                    }
                    out.push(failed);
                }
                return;
            }
            // Broken variants only: `m.idleness.fetch_add(blame, AcqRel)` after the release.
            Pc::UnlockGiveBack => {
                let units: u8 = th.blame.iter().sum();
                n.slots[m].idleness[GIVEN_BACK] += units;
                n.threads[t].blame = [0; TAGS];
                self.finish(&mut n, t);
            }
            // spin::destroy: `lock.load(Acquire)`; native → nothing to do.
            Pc::DestroyLoad => match monitored(s.words[l]) {
                Some(i) => {
                    n.threads[t].m = i as u8;
                    go(&mut n, Pc::DestroyWord);
                }
                None => self.finish(&mut n, t),
            },
            // spin::destroy: `m.word.load(Acquire) == 0` → the native equivalent.
            Pc::DestroyWord => {
                n.threads[t].cur = if s.slots[m].word == 0 {
                    UNLOCKED
                } else {
                    LOCKED
                };
                go(&mut n, Pc::ResetSwap);
            }
            // spin::reset: `lock.swap(to, AcqRel)`.
            Pc::ResetSwap => {
                let was = s.words[l];
                n.words[l] = th.cur;
                match monitored(was) {
                    Some(i) => {
                        n.threads[t].m = i as u8;
                        go(&mut n, Pc::ResetOwner);
                    }
                    None => self.finish(&mut n, t),
                }
            }
            // spin::reset: `if m.owner.load(Acquire) == address { m.owner.store(0) }`.
            Pc::ResetOwner => {
                if usize::from(s.slots[m].owner) == l + 1 {
                    n.slots[m].owner = 0;
                    go(&mut n, Pc::ResetFree);
                } else {
                    self.finish(&mut n, t);
                }
            }
            // spin::reset: `SLAB.free(index)`.
            Pc::ResetFree => {
                self.free(&mut n, m);
                go(&mut n, Pc::ResetUncount);
            }
            // spin::reset: `converted_bucket(address).fetch_sub(1)`.
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
        let op = self.programs[a].get(usize::from(th.op));
        format!("T{a} {op:?} {:?} (m={}, cur={})", th.pc, th.m, th.cur)
    }

    fn invariant(&self, s: &State) -> Result<(), String> {
        match s.violation {
            0 => {}
            TWO_HOLDERS => return Err("mutual exclusion: two threads hold the lock".into()),
            RELEASE_BY_NON_HOLDER => {
                return Err("a thread released a lock it did not hold".into())
            }
            LOST_LOCK => {
                return Err("lost lock: the holder found its lock already unlocked".into())
            }
            MISATTRIBUTED => {
                return Err("attribution: an unlock charged waiting accrued outside its own hold (while the lock was free, or during another thread's hold)".into())
            }
            DROPPED => return Err("a destroy dropped waiting nobody was charged for".into()),
            GATE_SHUT => {
                return Err("lost waiting: a tick passed with a spinner registered during a hold while the gate was shut".into())
            }
            other => return Err(format!("violation {other}")),
        }
        // A monitored word names a live record of this very lock.
        for l in 0..self.locks {
            if let Some(i) = monitored(s.words[l]) {
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
            if matches!(th.pc, Pc::ConvertCheck | Pc::ConvertCount | Pc::ConvertCas) {
                check(usize::from(th.idx), "new record")?;
            }
        }
        // Conservation: every unit accrued is in exactly one place.
        let in_counters: u32 = s
            .slots
            .iter()
            .map(|slot| slot.idleness.iter().map(|&u| u32::from(u)).sum::<u32>())
            .sum();
        let in_hands: u32 = s
            .threads
            .iter()
            .map(|th| th.blame.iter().map(|&u| u32::from(u)).sum::<u32>())
            .sum();
        let placed = in_counters
            + in_hands
            + u32::from(s.charged)
            + u32::from(s.unsettled)
            + u32::from(s.dropped);
        if placed != u32::from(s.accrued) {
            return Err(format!(
                "blame not conserved: {} units accrued, but {in_counters} in counters + {in_hands} being charged + {} charged + {} unsettled + {} dropped",
                s.accrued, s.charged, s.unsettled, s.dropped
            ));
        }
        Ok(())
    }

    fn finished(&self, s: &State) -> bool {
        (0..self.threads()).all(|t| s.threads[t].pc == Pc::Done)
    }

    fn at_end(&self, s: &State) -> Result<(), String> {
        for l in 0..self.locks {
            let monitored_now = u8::from(monitored(s.words[l]).is_some());
            if s.converted[l] != monitored_now {
                return Err(format!(
                    "lock {l}'s bucket counts {} monitored words, but {monitored_now} is",
                    s.converted[l]
                ));
            }
            let free = match monitored(s.words[l]) {
                Some(i) => s.slots[i].word == 0,
                None => s.words[l] == UNLOCKED,
            };
            if s.holder[l] == 0 && !free {
                return Err(format!("lock {l} is nobody's, yet locked: a lost unlock"));
            }
        }
        for (i, slot) in s.slots.iter().enumerate().take(self.slots) {
            if !slot.allocated {
                continue;
            }
            let referenced = (0..self.locks).any(|l| monitored(s.words[l]) == Some(i));
            if !referenced {
                return Err(format!(
                    "record {i} leaked: allocated, and no lock refers to it"
                ));
            }
            if slot.meta || slot.spinners != 0 || slot.acquiring {
                return Err(format!("record {i} left busy: {slot:?}"));
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
        // Contention converts a free native lock; lock and trylock mixed.
        "contention" if three => (
            vec![
                vec![Lock(0), Unlock(0)],
                vec![Lock(0), Unlock(0)],
                vec![TryLock(0), Unlock(0)],
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
        // while held, and T0's native unlock meets the conversion).
        "held before start" if three => (
            vec![
                vec![Unlock(0)],
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
        other => panic!("no scenario {other}"),
    };
    SpinModel {
        programs,
        locks,
        initial,
        slots,
        ticks: 2,
        blame_can_fail: true,
        variant: Variant::Real,
        attribution: true,
        forbid_drop: true,
        check_gate: true,
    }
}

const LIMIT: usize = 20_000_000;

/// Safety, conservation, attribution and no drop at a destroy, in every scenario: every
/// charged unit of waiting accrued while its charger held the lock, and every unit is
/// charged, counted as unsettled (when charging fails) or still in a counter.
#[test]
fn model_check_spin_lock_is_safe_for_2_and_3_threads() {
    for name in ["contention", "held before start", "recycling"] {
        for threads in [2, 3] {
            let model = scenario(name, threads);
            assert_holds(&format!("spin {name}, {threads} threads"), &model, LIMIT);
        }
    }
    // A lock destroyed as soon as it is unlocked, while the other unlock may still run.
    assert_holds(
        "spin destroy after unlock",
        &scenario("destroy after unlock", 2),
        LIMIT,
    );
}

/// The violation a variant must show, on the scenario that shows it (`attribution`: with
/// the attribution check; without it, the variant must break something more basic).
fn expect_caught(variant: Variant, name: &str, threads: usize, attribution: bool, what: &[&str]) {
    let mut model = scenario(name, threads);
    model.variant = variant;
    model.attribution = attribution;
    model.forbid_drop = attribution;
    let label = format!("spin {variant:?} on {name}, {threads} threads");
    let v = assert_fails(&label, &model, LIMIT);
    assert!(
        what.iter().any(|w| v.what.contains(w)),
        "{label}: expected {what:?}, got: {v}"
    );
}

#[test]
fn model_check_spin_lock_broken_variants_are_caught() {
    // A held lock converted into a free record: a spinner takes it from its holder.
    expect_caught(
        Variant::ConversionForgetsHolder,
        "held before start",
        2,
        false,
        &["mutual exclusion"],
    );
    // The protocol before the native unlock was a store, with the store: a held word
    // converted, then overwritten by its holder's unlock: the record stays locked (its
    // spinner never gets it) and leaks.
    expect_caught(
        Variant::ConvertsHeldWord,
        "held before start",
        2,
        false,
        &["leaked", "finishes", "deadlock", "bucket counts"],
    );
    // The bucket counted after the conversion is published: a thread that took the lock
    // through the record meanwhile finds the bucket empty at its unlock and stores over
    // the reference (the record leaks, a spinner on it never gets it).
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
    // Releasing before taking the counter: the unlock takes the next hold's waiting.
    expect_caught(
        Variant::ReleasesBeforeSwap,
        "contention",
        2,
        true,
        &["attribution"],
    );
    // The protocol before the fix. An unlock that finds no spinner releases without the
    // meta lock; a spinner whose swap failed during that hold, registering after the check,
    // opens the gate although its holder will never close it: waiting accrues while the
    // lock is free and the next update takes it, charged to the next unlock (a spinner
    // blamed for its own wait).
    // (It also lost waiting: a spinner that registered without the gate's handshake left
    // it shut for a hold; which of the two the search meets first depends on the scenario.)
    for (name, threads) in [("contention", 2), ("held before start", 2)] {
        expect_caught(
            Variant::UnlockOutsideMeta,
            name,
            threads,
            true,
            &["attribution", "lost waiting"],
        );
    }
    // A gate never opened by a registering spinner: the waiting of its hold is lost.
    expect_caught(
        Variant::NeverOpensGate,
        "contention",
        2,
        false,
        &["lost waiting"],
    );
    // Giving back, after the release, blame an unlock could not charge: the program may
    // destroy the lock as soon as it is unlocked (an object freed when its reference count,
    // dropped under the lock, reaches zero), and the give-back lands in a freed record
    // (lost, or once the record is reused, another lock's).
    expect_caught(
        Variant::GiveBackAfterRelease,
        "destroy after unlock",
        2,
        false,
        &["not a live record"],
    );
    // The given-back blame, if no unlock comes before a destroy, is freed with the record.
    let mut model = scenario("recycling", 2);
    model.variant = Variant::UnlockOutsideMeta;
    model.attribution = false;
    model.check_gate = false;
    let v = assert_fails("spin UnlockOutsideMeta drop at destroy", &model, LIMIT);
    assert!(v.what.contains("dropped"), "{v}");
}
