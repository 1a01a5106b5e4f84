//! Model checking of the lock mechanism's lock-free protocols (issue 19). Test-only:
//! compiled under `cfg(test)`, and nothing in the runtime uses it.
//!
//! Job: explore *every* interleaving of small explicit models of three protocols, each
//! written step by step after the code it mirrors (one step per atomic operation of the
//! real code; each step cites the function and statement it stands for), and check their
//! invariants in every reachable state, for 2 and 3 threads:
//! - [`spin_model`]: the dual-representation spin lock of `locks/spin.rs`: conversion of a
//!   native word by CAS into a reference to a monitored record, lock, trylock and unlock
//!   on both forms while others convert, destroy and init recycling records through the
//!   slab; and its blame: spinners count themselves in the record's waiter integral, a
//!   hold reads it as it begins (a take without spinning, before its CAS, which the word's
//!   turn fails if anybody took the lock in between) and its unlock before the release,
//!   and charges the difference. Checked: mutual exclusion (and the word held exactly
//!   while somebody holds the lock); no lost unlock, no deadlock, no livelock (from every
//!   reachable state some run finishes); every monitored word, and every reference a
//!   thread follows, names a live record of that very lock; no record leaked or left
//!   counting waiters; blame conservation (no unit of waiting, a spinner counted during a
//!   clock tick, is charged twice: what unlocks charge and destroys return is at most what
//!   accrued); attribution (every unit charged accrued during its charger's hold or while
//!   the lock was free just before its take, and is not the charger's own spinning).
//! - [`futex_model`]: the futex wake publication of `measure/policy/events.rs`: the waker's
//!   identity set under the bucket lock by `wait_table::wake` and taken by the woken
//!   waiter's `wait_table::depart`, the waker's path published under the sequence lock of
//!   `sampler/wake_path.rs` before the wake system call, and read back by identity
//!   (`sampler/sync_sample.rs::record_at_wake`). What it guarantees exactly is stated there.
//! - the explorer itself (this file): breadth-first search with hashing of visited states,
//!   the shortest counterexample run for any invariant broken, and a termination check: a
//!   reachable state from which no finished state is reachable (a deadlock, a lost unlock,
//!   a livelock) is a violation too.
//!
//! The checker is shown able to fail: each model has deliberately broken variants (a
//! conversion that forgets the lock is held, a held word converted and then released by its
//! holder's store, a path read without its seqlock check or its seq check, a path published after the
//! wake, a torn identity...) and tests assert that it finds each bug. Among them is the
//! futex protocol as it was before the defect the checks found was fixed (see
//! `docs/robustness.md`, "Concurrency: model checking").
//!
//! Not modelled: the memory model (every model is sequentially consistent: the real code's
//! orderings, `Relaxed`, `Acquire`, fences, are not checked, only its interleavings); the
//! slab's own lock-free free list (one step per allocation or free); the wait table's
//! arithmetic beyond a futex's waiters, woken count and latest waker; time beyond a couple
//! of ticks; more than 3 threads, 2 locks, 3 records.
//!
//! The randomized stress of the real code (spin locks, the wake path's sequence lock) is
//! `blameprof-measure`'s `stress` module, which sees both this crate and the sampler.

mod futex_model;
mod spin_model;

use std::collections::{HashMap, VecDeque};
use std::fmt::Debug;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::time::{Duration, Instant};

/// A small, fast hasher for model states (a few dozen bytes each).
#[derive(Default)]
struct StateHasher(u64);

impl StateHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for StateHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
}

/// A protocol model: a set of actors (threads, and possibly an environment such as a clock)
/// each taking one atomic step at a time.
pub(super) trait Model {
    type State: Clone + Eq + Hash + Debug;
    fn initial(&self) -> Self::State;
    /// Threads and other actors (a clock).
    fn actors(&self) -> usize;
    /// Appends every state actor `a` can reach from `s` in one step (none: it is blocked or
    /// done). Deterministic: the same state and actor give the same list, in the same order.
    fn step(&self, s: &Self::State, a: usize, out: &mut Vec<Self::State>);
    /// What actor `a`'s next step in `s` is (for traces).
    fn describe(&self, s: &Self::State, a: usize) -> String;
    /// Checked in every reachable state.
    fn invariant(&self, s: &Self::State) -> Result<(), String>;
    /// Whether every thread has finished its program.
    fn finished(&self, s: &Self::State) -> bool;
    /// Checked in every finished state.
    fn at_end(&self, s: &Self::State) -> Result<(), String>;
}

/// The size of an exhaustive exploration.
#[derive(Debug, Clone, Copy)]
pub(super) struct Explored {
    pub states: usize,
    pub transitions: usize,
    pub finished: usize,
    pub elapsed: Duration,
}

/// An invariant broken, with the shortest run that breaks it.
#[derive(Debug)]
pub(super) struct Violation {
    pub what: String,
    pub trace: Vec<String>,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{}", self.what)?;
        for (i, step) in self.trace.iter().enumerate() {
            writeln!(f, "  {:3}. {step}", i + 1)?;
        }
        Ok(())
    }
}

type Ids<S> = HashMap<S, u32, BuildHasherDefault<StateHasher>>;

/// Explores every state of `model` reachable from its initial one (at most `limit`
/// states), checking its invariants in each, its end checks in each finished state, and
/// that from every reachable state some run finishes.
pub(super) fn explore<M: Model>(model: &M, limit: usize) -> Result<Explored, Violation> {
    let started = Instant::now();
    let mut ids: Ids<M::State> = HashMap::default();
    // For each state (by id, in discovery order): its parent, the actor that stepped and
    // which of that step's successors it was.
    let mut parents: Vec<(u32, u8, u8)> = Vec::new();
    // Successor ids, per state: edges[offsets[i]..offsets[i + 1]].
    let mut edges: Vec<u32> = Vec::new();
    let mut offsets: Vec<u32> = vec![0];
    let mut finals: Vec<u32> = Vec::new();
    let mut queue = VecDeque::new();
    let mut out = Vec::new();

    let initial = model.initial();
    if let Err(what) = model.invariant(&initial) {
        return Err(Violation {
            what,
            trace: Vec::new(),
        });
    }
    ids.insert(initial.clone(), 0);
    parents.push((u32::MAX, 0, 0));
    queue.push_back(initial);
    let mut id = 0u32;
    while let Some(s) = queue.pop_front() {
        if model.finished(&s) {
            if let Err(what) = model.at_end(&s) {
                return Err(violation(model, &parents, id, None, what));
            }
            finals.push(id);
        }
        for a in 0..model.actors() {
            out.clear();
            model.step(&s, a, &mut out);
            for (choice, next) in out.drain(..).enumerate() {
                let target = match ids.get(&next) {
                    Some(&known) => known,
                    None => {
                        let new = u32::try_from(ids.len()).expect("state count");
                        if let Err(what) = model.invariant(&next) {
                            return Err(violation(
                                model,
                                &parents,
                                id,
                                Some((a as u8, choice as u8)),
                                what,
                            ));
                        }
                        if ids.len() >= limit {
                            return Err(Violation {
                                what: format!("more than {limit} states: model too large"),
                                trace: Vec::new(),
                            });
                        }
                        ids.insert(next.clone(), new);
                        parents.push((id, a as u8, choice as u8));
                        queue.push_back(next);
                        new
                    }
                };
                edges.push(target);
            }
        }
        offsets.push(u32::try_from(edges.len()).expect("edge count"));
        id += 1;
    }
    let states = ids.len();
    drop(ids);

    // Termination: every state must reach a finished one. Backward search from them.
    let mut reverse_offsets = vec![0u32; states + 1];
    for &t in &edges {
        reverse_offsets[t as usize + 1] += 1;
    }
    for i in 0..states {
        reverse_offsets[i + 1] += reverse_offsets[i];
    }
    let mut fill = reverse_offsets.clone();
    let mut reverse = vec![0u32; edges.len()];
    for from in 0..states {
        for &to in &edges[offsets[from] as usize..offsets[from + 1] as usize] {
            reverse[fill[to as usize] as usize] = from as u32;
            fill[to as usize] += 1;
        }
    }
    let mut reaches_end = vec![false; states];
    let mut stack = finals.clone();
    for &f in &finals {
        reaches_end[f as usize] = true;
    }
    while let Some(t) = stack.pop() {
        let t = t as usize;
        for &from in &reverse[reverse_offsets[t] as usize..reverse_offsets[t + 1] as usize] {
            if !reaches_end[from as usize] {
                reaches_end[from as usize] = true;
                stack.push(from);
            }
        }
    }
    if let Some(stuck) = reaches_end.iter().position(|&r| !r) {
        let dead = offsets[stuck] == offsets[stuck + 1];
        let what = if dead {
            "deadlock: no actor can take a step, and the threads have not finished".to_string()
        } else {
            "no run from here finishes (a lost unlock, a livelock): the threads can only go round"
                .to_string()
        };
        return Err(violation(model, &parents, stuck as u32, None, what));
    }
    Ok(Explored {
        states,
        transitions: edges.len(),
        finished: finals.len(),
        elapsed: started.elapsed(),
    })
}

/// The run from the initial state to state `id` (then one more step, `last`), replayed.
fn violation<M: Model>(
    model: &M,
    parents: &[(u32, u8, u8)],
    id: u32,
    last: Option<(u8, u8)>,
    what: String,
) -> Violation {
    let mut path = Vec::new();
    let mut at = id;
    while at != 0 {
        let (parent, a, choice) = parents[at as usize];
        path.push((a, choice));
        at = parent;
    }
    path.reverse();
    path.extend(last);
    let mut s = model.initial();
    let mut trace = Vec::new();
    let mut out = Vec::new();
    for (a, choice) in path {
        let what = model.describe(&s, usize::from(a));
        out.clear();
        model.step(&s, usize::from(a), &mut out);
        let n = out.len();
        s = out.swap_remove(usize::from(choice));
        trace.push(if n > 1 {
            format!("{what} [choice {} of {n}]", choice + 1)
        } else {
            what
        });
    }
    trace.push(format!("state: {s:?}"));
    Violation { what, trace }
}

/// Explores and panics with the counterexample if the model breaks anything.
pub(super) fn assert_holds<M: Model>(name: &str, model: &M, limit: usize) -> Explored {
    match explore(model, limit) {
        Ok(e) => {
            eprintln!(
                "{name}: {} states, {} transitions, {} finished, {:?}",
                e.states, e.transitions, e.finished, e.elapsed
            );
            e
        }
        Err(v) => panic!("{name}: {v}"),
    }
}

/// Explores and returns the violation the model must have; panics if it has none.
pub(super) fn assert_fails<M: Model>(name: &str, model: &M, limit: usize) -> Violation {
    match explore(model, limit) {
        Ok(e) => panic!(
            "{name}: the checker found no violation in {} states, but this variant is broken",
            e.states
        ),
        Err(v) => {
            eprintln!("{name}: found as expected: {v}");
            v
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two threads increment a shared counter: atomically, or by a load and a store.
    struct Counter {
        atomic: bool,
    }

    #[derive(Clone, PartialEq, Eq, Hash, Debug)]
    struct CounterState {
        value: u8,
        pc: [u8; 2],
        loaded: [u8; 2],
    }

    impl Model for Counter {
        type State = CounterState;
        fn initial(&self) -> CounterState {
            CounterState {
                value: 0,
                pc: [0; 2],
                loaded: [0; 2],
            }
        }
        fn actors(&self) -> usize {
            2
        }
        fn step(&self, s: &CounterState, a: usize, out: &mut Vec<CounterState>) {
            let mut n = s.clone();
            match (s.pc[a], self.atomic) {
                (0, true) => {
                    n.value += 1;
                    n.pc[a] = 2;
                }
                (0, false) => {
                    n.loaded[a] = s.value;
                    n.pc[a] = 1;
                }
                (1, _) => {
                    n.value = s.loaded[a] + 1;
                    n.pc[a] = 2;
                }
                _ => return,
            }
            out.push(n);
        }
        fn describe(&self, s: &CounterState, a: usize) -> String {
            format!("T{a} pc {}", s.pc[a])
        }
        fn invariant(&self, _: &CounterState) -> Result<(), String> {
            Ok(())
        }
        fn finished(&self, s: &CounterState) -> bool {
            s.pc == [2, 2]
        }
        fn at_end(&self, s: &CounterState) -> Result<(), String> {
            if s.value == 2 {
                Ok(())
            } else {
                Err(format!("lost update: {}", s.value))
            }
        }
    }

    #[test]
    fn model_check_explorer_finds_a_lost_update_and_accepts_an_atomic_one() {
        let e = assert_holds("atomic counter", &Counter { atomic: true }, 100);
        assert_eq!(e.states, 4);
        let v = assert_fails("load+store counter", &Counter { atomic: false }, 100);
        assert!(v.what.contains("lost update"), "{v}");
        // The shortest run: both load, then both store.
        assert_eq!(v.trace.len(), 5, "{v}");
    }

    /// Two threads that each wait for the other's flag: a deadlock.
    struct Deadlock;

    impl Model for Deadlock {
        type State = [u8; 2];
        fn initial(&self) -> [u8; 2] {
            [0, 0]
        }
        fn actors(&self) -> usize {
            2
        }
        fn step(&self, s: &[u8; 2], a: usize, out: &mut Vec<[u8; 2]>) {
            if s[1 - a] == 1 && s[a] == 0 {
                let mut n = *s;
                n[a] = 1;
                out.push(n);
            }
        }
        fn describe(&self, _: &[u8; 2], a: usize) -> String {
            format!("T{a}")
        }
        fn invariant(&self, _: &[u8; 2]) -> Result<(), String> {
            Ok(())
        }
        fn finished(&self, s: &[u8; 2]) -> bool {
            *s == [1, 1]
        }
        fn at_end(&self, _: &[u8; 2]) -> Result<(), String> {
            Ok(())
        }
    }

    #[test]
    fn model_check_explorer_finds_a_deadlock() {
        let v = assert_fails("deadlock", &Deadlock, 100);
        assert!(v.what.starts_with("deadlock"), "{v}");
    }
}
