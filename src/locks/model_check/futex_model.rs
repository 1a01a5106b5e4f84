//! A step-by-step model of the futex wake publication (`measure/policy/events.rs`,
//! `locks/wait_table/mod.rs`, `sampler/wake_path.rs`, `sampler/sync_sample.rs`), checked
//! exhaustively for 2 and 3 threads (see the parent module). Test-only.
//!
//! The protocol: a waker takes its wake's sequence number (`ThreadState::wake_seq`), and,
//! under the futex's bucket lock (`wait_table::wake`), makes `WakerId { tid, seq }` the
//! futex's latest waker and counts a waiter woken; if it took waiting, it publishes the call
//! path of that wake (`WakePath::publish`, a sequence lock over the path, its depth and its
//! seq) *before* the wake system call. A woken waiter departs under the bucket lock
//! (`wait_table::depart`), taking the latest waker's identity with its wake-up, and later
//! (at its own next wake, `futex_wake`'s inherited part) reads that waker's path by its
//! identity (`record_at_wake`: `lookup(tid)`, `WakePath::read(seq)`, then the target's
//! `live` and `tid` checked) to charge it the part of a wait the waker was not to blame for.
//!
//! What it guarantees, and what is checked exactly:
//! 1. the identity a waiter takes is never torn: it is the `(tid, seq)` of a wake recorded
//!    on that very futex (the latest one before the departure);
//! 2. a path the reader uses is exactly the one published by the wake its identity names:
//!    all its frames from one publication (not torn), that publication for that `seq` (not
//!    stale: an older or newer wake's path of the same thread is refused), by the thread
//!    that made that wake, even when the kernel reused an ended waker's tid for a new
//!    thread (each attachment of a state starts its count at a new epoch);
//! 3. publication before the wake: a waiter woken by the system call of the very wake its
//!    identity names, a wake that published a path, finds that path, unless its waker has
//!    begun publishing a newer one since (the reader then gets nothing, never a wrong path).
//!
//! Not guaranteed (and not checked): that the identity is that of the wake that woke the
//! thread. With two wakes on a futex before a waiter departs, it takes the latest: the
//! runtime counts woken waiters, not identities (`docs/lock-blame.md`, known limits).
//!
//! Modelling: each bucket-locked section of the wait table is one step (every field it
//! touches is guarded by that lock); the thread's own counters (`wake_seq`) are folded into
//! neighbouring steps; every atomic access of the sequence lock is a step, and so is each
//! frame copied (two frames stand for the path: a torn copy mixes them). The kernel's futex
//! is a queue per word: `FUTEX_WAIT` enqueues if the word still holds 0 (else `EAGAIN`),
//! `FUTEX_WAKE` dequeues any one waiter; a waiter may also wake spuriously. Whether a wake
//! took waiting, whether its sample was kept or its stack walk failed, and whether the
//! inherited part is non-zero (an overlap of times) are free choices, all explored.
//! `WakePath::read` retries 64 times in the real code, twice here.

use super::{assert_fails, assert_holds, Model};

const NT: usize = 3;
const NF: usize = 2;
/// Thread states: one per thread, and a spare one (a state another thread left).
const NST: usize = NT + 1;
const NONE: u8 = u8::MAX;
const SEQS: usize = 8;
const READ_ATTEMPTS: u8 = 2;

/// A publication decision: no path (no waiting taken, or the stack walk failed), an empty
/// one (nothing kept by the thinning: `publish(seq, &[])`), or a path.
const NO_PATH: u8 = 0;
const EMPTY_PATH: u8 = 1;
const FULL_PATH: u8 = 2;

/// The frames of the path thread `p` publishes for its wake `seq` (both frames alike: a
/// copy that mixes two publications, or takes another's, differs).
fn frame_of(p: usize, seq: u8) -> u8 {
    1 + p as u8 * SEQS as u8 + seq
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Op {
    /// The program stores 1 in futex `f`, then calls `syscall(SYS_futex, f, FUTEX_WAKE, 1)`,
    /// interposed: `policy::events::event` → `wait_table::wake` → `futex_wake`.
    Wake(u8),
    /// `syscall(SYS_futex, f, FUTEX_WAIT, 0)`, interposed: `wait_table::arrive`, the real
    /// wait, `Blocked::finish` → `wait_table::depart`.
    Wait(u8),
    /// The reading `futex_wake` does at the thread's next wake (the inherited part:
    /// `record_at_wake` of its last waker), alone.
    ReadWaker,
    /// The thread ends: `thread_state::detach`.
    Exit,
    /// Waits until thread `t` has finished.
    After(u8),
    /// `thread_state::attach` of this thread under thread `t`'s tid (the kernel reused it),
    /// to the spare state.
    AttachAs(u8),
    /// A wake that took waiting from a waiter not modelled, and publishes its path.
    Publish,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Variant {
    Real,
    // Deliberately broken variants, which the checker must catch:
    /// `WakePath::read` keeps its copy without checking the version again.
    TornRead,
    /// `WakePath::read` returns the path whatever wake it belongs to.
    NoSeqCheck,
    /// `WakePath::publish` does not make the version odd before writing.
    WriterNoOdd,
    /// The path is published after the wake system call (as before issue 19's fix).
    PublishAfterWake,
    /// `wait_table::wake` writes the identity's tid and seq as two stores, unlocked.
    TornIdentity,
    /// `thread_state::attach` keeps a state's own count of wakes (as before issue 19's
    /// fix) instead of starting it at a new epoch.
    SeqPerState,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Pc {
    // policy::events::event, wait_table::wake, futex_wake
    WakeStore,
    WakeDirty,
    WakeTable,
    WakeTableSeq,
    WakeSyscall,
    // WakePath::publish
    PubOdd,
    PubFrame0,
    PubFrame1,
    PubDepth,
    PubSeq,
    PubEven,
    // blocked::register_wait, the kernel, Blocked::finish
    WaitArrive,
    WaitCall,
    WaitAsleep,
    WaitDepart,
    // record_at_wake: lookup, WakePath::read, the liveness check
    ReadLookup,
    ReadBefore,
    ReadDepth,
    ReadSeq,
    ReadFrame0,
    ReadFrame1,
    ReadAfter,
    ReadAlive,
    // thread_state
    Exit,
    After,
    Attach,
    Publish,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
struct Path {
    version: u8,
    frames: [u8; 2],
    depth: u8,
    seq: u8,
}

/// A `ThreadState`: its tid, whether live, its count of wakes and its published path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
struct TState {
    tid: u8,
    live: bool,
    wake_seq: u8,
    path: Path,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Thread {
    op: u8,
    pc: Pc,
    /// Its state (index), and the tid it runs under.
    st: u8,
    tid: u8,
    /// The current wake's seq and publication decision.
    seq: u8,
    publish: u8,
    /// Its last waiter's identity (`LastWait::by`), `(NONE, 0)` if none.
    by: (u8, u8),
    /// Ghost: the identity of the wake system call that ended its latest wait.
    woke: (u8, u8),
    /// The wait succeeded (was woken) rather than returned `EAGAIN`.
    success: bool,
    /// The read in progress: target state, attempt, copied version, depth, seq, frames.
    target: u8,
    attempt: u8,
    before: u8,
    depth: u8,
    found: u8,
    frames: [u8; 2],
    /// The read is `futex_wake`'s inherited part, inside a wake.
    in_wake: bool,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(super) struct State {
    futex: [u8; NF],
    /// The kernel's wait queue of each futex: a bit per thread.
    queue: [u8; NF],
    /// The wait table's entry of each futex (`State::waiters`, `woken`, `last_waker`).
    waiters: [u8; NF],
    woken: [u8; NF],
    last_waker: [(u8, u8); NF],
    /// tid → state (`thread_state::lookup`).
    tids: [u8; NT],
    states: [TState; NST],
    threads: [Thread; NT],
    /// Ghost: the identities `(tid, seq)` recorded by `wait_table::wake` on each futex, as
    /// bits `tid × SEQS + seq`; the thread that made each; each wake's publication decision
    /// (by thread and seq); the seq of the latest publication begun, per state.
    recorded: [u32; NF],
    performer: [[u8; SEQS]; NT],
    decided: [[u8; SEQS]; NT],
    begun: [u8; NST],
    violation: u8,
}

const TORN_IDENTITY: u8 = 1;
const WRONG_PATH: u8 = 2;
const NOT_FOUND: u8 = 3;

pub(super) struct FutexModel {
    pub programs: Vec<Vec<Op>>,
    /// Each thread's `wake_seq` at the start (a recycled state goes on counting).
    pub first_seq: [u8; NT],
    /// A waiter may return from its wait with no wake.
    pub spurious: bool,
    pub variant: Variant,
}

impl FutexModel {
    fn threads(&self) -> usize {
        self.programs.len()
    }

    fn entry(op: Option<&Op>) -> Pc {
        match op {
            None => Pc::Done,
            Some(Op::Wake(_)) => Pc::WakeStore,
            Some(Op::Wait(_)) => Pc::WaitArrive,
            Some(Op::ReadWaker) => Pc::ReadLookup,
            Some(Op::Exit) => Pc::Exit,
            Some(Op::After(_)) => Pc::After,
            Some(Op::AttachAs(_)) => Pc::Attach,
            Some(Op::Publish) => Pc::Publish,
        }
    }

    fn finish(&self, n: &mut State, t: usize) {
        let th = &mut n.threads[t];
        th.op += 1;
        th.pc = Self::entry(self.programs[t].get(usize::from(th.op)));
        th.seq = 0;
        th.publish = NO_PATH;
        th.success = false;
        Self::clear_read(th);
    }

    fn clear_read(th: &mut Thread) {
        th.target = 0;
        th.attempt = 0;
        th.before = 0;
        th.depth = 0;
        th.found = 0;
        th.frames = [0; 2];
        th.in_wake = false;
    }

    /// After `wait_table::wake` recorded the wake: its branches (what it took, what it
    /// publishes, whether it reads its own waker's path first).
    fn after_table(&self, n: &State, t: usize, out: &mut Vec<State>) {
        // No waiting taken: `event` calls the wake at once.
        let mut none = n.clone();
        none.threads[t].pc = Pc::WakeSyscall;
        out.push(none);
        let reads: &[bool] = if n.threads[t].by.0 != NONE {
            &[false, true]
        } else {
            &[false]
        };
        for publish in [NO_PATH, EMPTY_PATH, FULL_PATH] {
            for &read in reads {
                let mut m = n.clone();
                let seq = m.threads[t].seq;
                m.threads[t].publish = publish;
                m.decided[t][usize::from(seq)] = publish;
                m.threads[t].pc = if read {
                    m.threads[t].in_wake = true;
                    Pc::ReadLookup
                } else {
                    self.publication_or_wake(publish)
                };
                out.push(m);
            }
        }
    }

    /// Where a wake that decided `publish` goes after its inherited part.
    fn publication_or_wake(&self, publish: u8) -> Pc {
        if publish == NO_PATH || self.variant == Variant::PublishAfterWake {
            Pc::WakeSyscall
        } else {
            Pc::PubOdd
        }
    }

    /// The read of thread `t` is over (`result`: the depth `WakePath::read` returned, if
    /// any): checks guarantee 3 on a miss, then goes on.
    fn read_over(&self, n: &mut State, t: usize, result: Option<u8>) {
        let th = n.threads[t];
        match result {
            Some(d) if d > 0 => {
                n.threads[t].pc = Pc::ReadAlive;
                return;
            }
            Some(_) => {}
            None => {
                // A miss is allowed unless the wake named by the identity woke this thread
                // itself, published a path before, and nothing newer has been begun since.
                let (tid, seq) = th.by;
                let p = n.performer[usize::from(tid)][usize::from(seq)];
                if p != 0 && th.woke == th.by {
                    let p = usize::from(p - 1);
                    let st = n.threads[p].st;
                    if n.decided[p][usize::from(seq)] == FULL_PATH
                        && n.begun[usize::from(st)] <= seq
                        && n.tids[usize::from(tid)] == st
                    {
                        n.violation = n.violation.max(NOT_FOUND);
                    }
                }
            }
        }
        self.read_done(n, t);
    }

    fn read_done(&self, n: &mut State, t: usize) {
        if n.threads[t].in_wake {
            let publish = n.threads[t].publish;
            Self::clear_read(&mut n.threads[t]);
            n.threads[t].pc = self.publication_or_wake(publish);
        } else {
            self.finish(n, t);
        }
    }

    /// After the publication's last store: the wake, or (broken variant) the end.
    fn after_publication(&self, n: &mut State, t: usize) {
        let op = self.programs[t][usize::from(n.threads[t].op)];
        if op == Op::Publish || self.variant == Variant::PublishAfterWake {
            self.finish(n, t);
        } else {
            n.threads[t].pc = Pc::WakeSyscall;
        }
    }
}

impl Model for FutexModel {
    type State = State;

    fn initial(&self) -> State {
        let blank = Thread {
            op: 0,
            pc: Pc::Done,
            st: NONE,
            tid: NONE,
            seq: 0,
            publish: NO_PATH,
            by: (NONE, 0),
            woke: (NONE, 0),
            success: false,
            target: 0,
            attempt: 0,
            before: 0,
            depth: 0,
            found: 0,
            frames: [0; 2],
            in_wake: false,
        };
        let mut s = State {
            futex: [0; NF],
            queue: [0; NF],
            waiters: [0; NF],
            woken: [0; NF],
            last_waker: [(NONE, 0); NF],
            tids: [NONE; NT],
            states: [TState::default(); NST],
            threads: [blank; NT],
            recorded: [0; NF],
            performer: [[0; SEQS]; NT],
            decided: [[NO_PATH; SEQS]; NT],
            begun: [0; NST],
            violation: 0,
        };
        for t in 0..self.threads() {
            let th = &mut s.threads[t];
            th.pc = Self::entry(self.programs[t].first());
            // A thread that attaches later has no state yet.
            if !self.programs[t]
                .iter()
                .any(|op| matches!(op, Op::AttachAs(_)))
            {
                th.st = t as u8;
                th.tid = t as u8;
                s.tids[t] = t as u8;
                s.states[t] = TState {
                    tid: t as u8,
                    live: true,
                    wake_seq: self.first_seq[t],
                    path: Path::default(),
                };
            }
        }
        s
    }

    fn actors(&self) -> usize {
        self.threads()
    }

    fn step(&self, s: &State, t: usize, out: &mut Vec<State>) {
        let th = s.threads[t];
        let Some(&op) = self.programs[t].get(usize::from(th.op)) else {
            return;
        };
        let f = match op {
            Op::Wake(f) | Op::Wait(f) => usize::from(f),
            _ => 0,
        };
        let st = usize::from(th.st);
        let v = self.variant;
        let mut n = s.clone();
        match th.pc {
            // The program's own store to the futex word before it wakes.
            Pc::WakeStore => {
                n.futex[f] = 1;
                n.threads[t].pc = Pc::WakeDirty;
            }
            // event → bookkeeping::pending: `may_be_pending` (the dirty counters; nothing
            // pending → the wake at once); then `state.wake_seq.fetch_add(1) + 1`
            // (owner-only, folded in here).
            Pc::WakeDirty => {
                if s.waiters[f] == 0 {
                    n.threads[t].pc = Pc::WakeSyscall;
                } else {
                    let seq = s.states[st].wake_seq + 1;
                    n.states[st].wake_seq = seq;
                    n.threads[t].seq = seq;
                    n.threads[t].pc = Pc::WakeTable;
                }
            }
            // wait_table::wake, under the bucket lock: no entry → `None`; else
            // `last_waker = waker`, `woken = min(woken + n, waiters)` (`wake_state`).
            Pc::WakeTable => {
                if s.waiters[f] == 0 {
                    n.threads[t].pc = Pc::WakeSyscall;
                    out.push(n);
                    return;
                }
                let seq = th.seq;
                n.woken[f] = (s.woken[f] + 1).min(s.waiters[f]);
                n.recorded[f] |= 1 << (usize::from(th.tid) * SEQS + usize::from(seq));
                n.performer[usize::from(th.tid)][usize::from(seq)] = t as u8 + 1;
                if v == Variant::TornIdentity {
                    n.last_waker[f].0 = th.tid;
                    n.threads[t].pc = Pc::WakeTableSeq;
                    out.push(n);
                } else {
                    n.last_waker[f] = (th.tid, seq);
                    self.after_table(&n, t, out);
                }
                return;
            }
            // Broken variant only: the identity's second store.
            Pc::WakeTableSeq => {
                n.last_waker[f].1 = th.seq;
                self.after_table(&n, t, out);
                return;
            }
            // The real `FUTEX_WAKE` of one waiter: the kernel picks any queued one.
            Pc::WakeSyscall => {
                let next = |n: &mut State| {
                    if v == Variant::PublishAfterWake && th.publish != NO_PATH {
                        n.threads[t].pc = Pc::PubOdd;
                    } else {
                        self.finish(n, t);
                    }
                };
                let queued = s.queue[f];
                if queued == 0 {
                    next(&mut n);
                    out.push(n);
                    return;
                }
                for w in 0..self.threads() {
                    if queued & (1 << w) != 0 {
                        let mut m = n.clone();
                        m.queue[f] &= !(1 << w);
                        m.threads[w].woke = (th.tid, th.seq);
                        next(&mut m);
                        out.push(m);
                    }
                }
                return;
            }
            // WakePath::publish: `version.store(v + 1)`; fence(Release).
            Pc::PubOdd => {
                if v != Variant::WriterNoOdd {
                    n.states[st].path.version += 1;
                }
                n.begun[st] = th.seq;
                n.threads[t].pc = if th.publish == FULL_PATH {
                    Pc::PubFrame0
                } else {
                    Pc::PubDepth
                };
            }
            // WakePath::publish: `frames[..n].copy_from_slice(path)`, frame by frame.
            Pc::PubFrame0 => {
                n.states[st].path.frames[0] = frame_of(t, th.seq);
                n.threads[t].pc = Pc::PubFrame1;
            }
            Pc::PubFrame1 => {
                n.states[st].path.frames[1] = frame_of(t, th.seq);
                n.threads[t].pc = Pc::PubDepth;
            }
            // WakePath::publish: `depth.store(n)`.
            Pc::PubDepth => {
                n.states[st].path.depth = if th.publish == FULL_PATH { 2 } else { 0 };
                n.threads[t].pc = Pc::PubSeq;
            }
            // WakePath::publish: `seq.store(seq)`.
            Pc::PubSeq => {
                n.states[st].path.seq = th.seq;
                n.threads[t].pc = Pc::PubEven;
            }
            // WakePath::publish: `version.store(v + 2, Release)`.
            Pc::PubEven => {
                n.states[st].path.version = if v == Variant::WriterNoOdd {
                    s.states[st].path.version + 2
                } else {
                    s.states[st].path.version + 1
                };
                self.after_publication(&mut n, t);
            }
            // register_wait → wait_table::arrive, under the bucket lock.
            Pc::WaitArrive => {
                n.waiters[f] += 1;
                n.threads[t].woke = (NONE, 0);
                n.threads[t].pc = Pc::WaitCall;
            }
            // The kernel's FUTEX_WAIT: `EAGAIN` if the word changed, else asleep.
            Pc::WaitCall => {
                if s.futex[f] != 0 {
                    n.threads[t].pc = Pc::WaitDepart;
                } else {
                    n.queue[f] |= 1 << t;
                    n.threads[t].pc = Pc::WaitAsleep;
                }
            }
            // Asleep until dequeued by a wake (or, spuriously, by nothing).
            Pc::WaitAsleep => {
                if s.queue[f] & (1 << t) == 0 {
                    n.threads[t].success = true;
                    n.threads[t].pc = Pc::WaitDepart;
                } else if self.spurious {
                    n.queue[f] &= !(1 << t);
                    n.threads[t].success = true;
                    n.threads[t].pc = Pc::WaitDepart;
                } else {
                    return;
                }
            }
            // Blocked::end_at → wait_table::depart, under the bucket lock: a success with a
            // woken waiter counted is `Blamed { waker: last_waker }`, kept as the thread's
            // `LastWait::by`; `woken = min(woken, waiters)`.
            Pc::WaitDepart => {
                n.waiters[f] -= 1;
                if th.success && s.woken[f] > 0 {
                    n.woken[f] -= 1;
                    let by = s.last_waker[f];
                    let bit = usize::from(by.0) * SEQS + usize::from(by.1);
                    if by.0 == NONE || s.recorded[f] & (1 << bit) == 0 {
                        n.violation = n.violation.max(TORN_IDENTITY);
                    }
                    n.threads[t].by = by;
                }
                n.woken[f] = n.woken[f].min(n.waiters[f]);
                self.finish(&mut n, t);
            }
            // record_at_wake: `lookup(waker.tid)`; none (ended) → nothing recorded.
            Pc::ReadLookup => {
                if th.by.0 == NONE {
                    self.read_done(&mut n, t);
                } else {
                    let target = s.tids[usize::from(th.by.0)];
                    if target == NONE {
                        self.read_over(&mut n, t, None);
                    } else {
                        n.threads[t].target = target;
                        n.threads[t].pc = Pc::ReadBefore;
                    }
                }
            }
            // WakePath::read: `before = version.load(Acquire)`; odd → next attempt.
            Pc::ReadBefore => {
                let version = s.states[usize::from(th.target)].path.version;
                if version % 2 == 1 {
                    n.threads[t].attempt += 1;
                    if n.threads[t].attempt == READ_ATTEMPTS {
                        self.read_over(&mut n, t, None);
                    }
                } else {
                    n.threads[t].before = version;
                    n.threads[t].pc = Pc::ReadDepth;
                }
            }
            // WakePath::read: `depth.load(Relaxed)`.
            Pc::ReadDepth => {
                n.threads[t].depth = s.states[usize::from(th.target)].path.depth;
                n.threads[t].pc = Pc::ReadSeq;
            }
            // WakePath::read: `found = seq.load(Relaxed)`.
            Pc::ReadSeq => {
                n.threads[t].found = s.states[usize::from(th.target)].path.seq;
                n.threads[t].pc = if th.depth > 0 {
                    Pc::ReadFrame0
                } else {
                    Pc::ReadAfter
                };
            }
            // WakePath::read: the racy copy of `depth` frames.
            Pc::ReadFrame0 => {
                n.threads[t].frames[0] = s.states[usize::from(th.target)].path.frames[0];
                n.threads[t].pc = if th.depth > 1 {
                    Pc::ReadFrame1
                } else {
                    Pc::ReadAfter
                };
            }
            Pc::ReadFrame1 => {
                n.threads[t].frames[1] = s.states[usize::from(th.target)].path.frames[1];
                n.threads[t].pc = Pc::ReadAfter;
            }
            // WakePath::read: fence(Acquire); `version.load() == before` → `(found == seq)
            // .then_some(depth)`, else next attempt.
            Pc::ReadAfter => {
                let version = s.states[usize::from(th.target)].path.version;
                if v == Variant::TornRead || version == th.before {
                    let mine = v == Variant::NoSeqCheck || th.found == th.by.1;
                    self.read_over(&mut n, t, mine.then_some(th.depth));
                } else {
                    n.threads[t].attempt += 1;
                    if n.threads[t].attempt == READ_ATTEMPTS {
                        self.read_over(&mut n, t, None);
                    } else {
                        n.threads[t].pc = Pc::ReadBefore;
                    }
                }
            }
            // record_at_wake: `target.live && target.tid == waker.tid` → the sample is
            // recorded at the copied path: it must be the path of the wake the identity
            // names, whole.
            Pc::ReadAlive => {
                let target = s.states[usize::from(th.target)];
                if target.live && target.tid == th.by.0 {
                    let (tid, seq) = th.by;
                    let p = s.performer[usize::from(tid)][usize::from(seq)];
                    let want = (p != 0).then(|| frame_of(usize::from(p - 1), seq));
                    if th.depth != 2 || want != Some(th.frames[0]) || want != Some(th.frames[1]) {
                        n.violation = n.violation.max(WRONG_PATH);
                    }
                }
                self.read_done(&mut n, t);
            }
            // thread_state::detach: unpublished from the tid table, then not live.
            Pc::Exit => {
                n.tids[usize::from(th.tid)] = NONE;
                n.states[st].live = false;
                self.finish(&mut n, t);
            }
            Pc::After => {
                let Op::After(u) = op else { unreachable!() };
                if s.threads[usize::from(u)].pc != Pc::Done {
                    return;
                }
                self.finish(&mut n, t);
            }
            // thread_state::attach: a free state (the spare one) under the reused tid, its
            // count of wakes started at a new epoch (`next_epoch() << 32`: past any count an
            // earlier attachment reached; here, past every count the scenario's threads
            // reach, at most two wakes each), published in the tid table.
            Pc::Attach => {
                let Op::AttachAs(u) = op else { unreachable!() };
                let tid = s.threads[usize::from(u)].tid;
                let spare = NST - 1;
                if self.variant != Variant::SeqPerState {
                    let epoch = self.first_seq.iter().max().copied().unwrap_or(0) + 3;
                    assert!(
                        usize::from(epoch) + 2 < SEQS,
                        "SEQS too small for the epoch"
                    );
                    n.states[spare].wake_seq = epoch;
                }
                n.states[spare].tid = tid;
                n.states[spare].live = true;
                n.tids[usize::from(tid)] = spare as u8;
                n.threads[t].st = spare as u8;
                n.threads[t].tid = tid;
                self.finish(&mut n, t);
            }
            // A blame-taking wake of a waiter not modelled: its seq, then its path.
            Pc::Publish => {
                let seq = s.states[st].wake_seq + 1;
                n.states[st].wake_seq = seq;
                n.threads[t].seq = seq;
                n.threads[t].publish = FULL_PATH;
                n.decided[t][usize::from(seq)] = FULL_PATH;
                n.threads[t].pc = Pc::PubOdd;
            }
            Pc::Done => return,
        }
        out.push(n);
    }

    fn describe(&self, s: &State, t: usize) -> String {
        let th = s.threads[t];
        let op = self.programs[t].get(usize::from(th.op));
        format!("T{t} {op:?} {:?} (seq={}, by={:?})", th.pc, th.seq, th.by)
    }

    fn invariant(&self, s: &State) -> Result<(), String> {
        match s.violation {
            0 => {}
            TORN_IDENTITY => {
                return Err("torn identity: a waiter took a waker identity no wake on its futex had".into())
            }
            WRONG_PATH => {
                return Err("wrong path: a reader used a path that is not the one published by the wake its identity names (torn, stale, or another thread's)".into())
            }
            NOT_FOUND => {
                return Err("not found: a waiter woken by a wake that published its path before found no path".into())
            }
            other => return Err(format!("violation {other}")),
        }
        for f in 0..NF {
            if s.woken[f] > s.waiters[f] {
                return Err(format!("futex {f}: more woken than waiters"));
            }
        }
        Ok(())
    }

    fn finished(&self, s: &State) -> bool {
        (0..self.threads()).all(|t| s.threads[t].pc == Pc::Done)
    }

    fn at_end(&self, s: &State) -> Result<(), String> {
        if s.queue != [0; NF] || s.waiters != [0; NF] {
            return Err("a waiter is left registered or asleep".into());
        }
        Ok(())
    }
}

/// Scenarios: which threads do what.
pub(super) fn scenario(name: &str) -> FutexModel {
    use Op::*;
    let (programs, first_seq) = match name {
        // One waker, one waiter that then reads its waker's path.
        "one waiter" => (vec![vec![Wake(0)], vec![Wait(0), ReadWaker]], [0; NT]),
        // One waker waking twice, two waiters: a waiter reads the path of the first wake
        // while the second is being published.
        "two waiters" => (
            vec![
                vec![Wake(0), Wake(0)],
                vec![Wait(0), ReadWaker],
                vec![Wait(0), ReadWaker],
            ],
            [0; NT],
        ),
        // A chain: T0 wakes T1, whose own wake of T2 reads T0's path (its inherited part)
        // before publishing its own, which T2 reads.
        "chain" => (
            vec![
                vec![Wake(0)],
                vec![Wait(0), Wake(1)],
                vec![Wait(1), ReadWaker],
            ],
            [0; NT],
        ),
        // Two wakers on one futex (T1's state recycled: its wakes count from 5).
        "two wakers" => (
            vec![vec![Wake(0)], vec![Wake(0)], vec![Wait(0), ReadWaker]],
            [0, 5, 0],
        ),
        // T0 wakes T1 and ends; T2 gets T0's tid (reused by the kernel) with another state
        // and publishes its first wake's path; T1 then reads its waker's.
        "tid reuse" => (
            vec![
                vec![Wake(0), Exit],
                vec![Wait(0), ReadWaker],
                vec![After(0), AttachAs(0), Publish],
            ],
            [0; NT],
        ),
        other => panic!("no scenario {other}"),
    };
    FutexModel {
        programs,
        first_seq,
        spurious: true,
        variant: Variant::Real,
    }
}

const LIMIT: usize = 5_000_000;

#[test]
fn model_check_futex_wake_publication_is_sound_for_2_and_3_threads() {
    for name in [
        "one waiter",
        "two waiters",
        "chain",
        "two wakers",
        "tid reuse",
    ] {
        assert_holds(&format!("futex {name}"), &scenario(name), LIMIT);
    }
}

fn expect_caught(variant: Variant, name: &str, what: &str) {
    let mut model = scenario(name);
    model.variant = variant;
    let label = format!("futex {variant:?} on {name}");
    let v = assert_fails(&label, &model, LIMIT);
    assert!(
        v.what.contains(what),
        "{label}: expected {what:?}, got: {v}"
    );
}

#[test]
fn model_check_futex_wake_publication_broken_variants_are_caught() {
    expect_caught(Variant::TornRead, "two waiters", "wrong path");
    expect_caught(Variant::NoSeqCheck, "two waiters", "wrong path");
    expect_caught(Variant::WriterNoOdd, "two waiters", "wrong path");
    expect_caught(Variant::PublishAfterWake, "one waiter", "not found");
    expect_caught(Variant::TornIdentity, "two wakers", "torn identity");
    // A new thread under an ended waker's tid, whose state counts wakes from where it
    // left off: its wake with the ended thread's count publishes a path that passes every
    // check of `record_at_wake` (the tid is live, the seq matches), and the inherited blame
    // goes to the new thread's call path.
    expect_caught(Variant::SeqPerState, "tid reuse", "wrong path");
}
