//! Randomized stress of the real code the models (`blameprof-locks`' `model_check`) stand
//! for: `locks/spin.rs` (conversion, lock, trylock, unlock, destroy and init) and
//! `sampler/wake_path.rs` (a path published while others read it). Test-only; here, in the
//! crate that sees both the lock mechanism and the sampler.
//!
//! Short by default (a fraction of a second per part, so that `cargo test` runs it every
//! time); `BLAMEPROF_STRESS_SECS=<seconds>` makes each part run that long:
//!
//! ```text
//! BLAMEPROF_STRESS_SECS=600 cargo test --release -p blameprof-measure stress -- --nocapture
//! ```
//!
//! (`benchmarks/stress.sh` runs that, and the end-to-end `counters_stress` program under the
//! profiler with as many iterations as asked.) What it checks is exact: mutual exclusion,
//! every increment made under a lock is there at the end, no lock hangs (each phase ends
//! within a deadline), a destroyed lock is native again, and no path read back is torn or
//! another wake's. Blame amounts are only reported: their conservation is the models' job.

use std::time::Duration;

/// The environment variable that sets each part's length, in seconds.
const STRESS_SECS: &str = "BLAMEPROF_STRESS_SECS";

/// How long each part runs, said on stderr (`--nocapture` shows it).
fn budget(part: &str) -> Duration {
    match std::env::var(STRESS_SECS) {
        Ok(v) => {
            let secs: f64 = v
                .parse()
                .unwrap_or_else(|_| panic!("{STRESS_SECS}={v:?}: expected seconds"));
            eprintln!("{part}: long run, {secs} s ({STRESS_SECS})");
            Duration::from_secs_f64(secs)
        }
        Err(_) => {
            eprintln!(
                "{part}: short run (0.3 s); for a long one: {STRESS_SECS}=600 cargo test \
                 --release -p blameprof-measure stress -- --nocapture"
            );
            Duration::from_millis(300)
        }
    }
}

/// xorshift64*: a fast, seedable generator for the threads' choices.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

// The tests themselves, marked as test code for `tests/layering.rs` (which reads non-test
// code only): the wake path is the sampler's, which the lock mechanism's own code never
// imports.
#[cfg(test)]
mod tests {
    use super::{budget, next_random};
    use crate::locks::spin::{self, SpinHooks, NATIVE_LOCKED, NATIVE_UNLOCKED};
    use crate::sampler::wake_path::WakePath;
    use crate::unwind::walk::frame_array;
    use blameprof_format::Frame;
    use std::cell::Cell;
    use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
    use std::sync::{Arc, Barrier};
    use std::time::{Duration, Instant};

    const THREADS: usize = 4;
    const LOCKS: usize = 3;
    /// A phase that takes longer than this has hung (a lost unlock, a deadlock).
    const PHASE_DEADLINE: Duration = Duration::from_secs(60);

    /// Hooks of one thread: a real clock (shared by all threads: the spinners' integral
    /// mixes their readings), and what it was charged and spun.
    struct Hooks {
        started: Instant,
        blamed: Cell<u64>,
        spun: Cell<u64>,
    }

    impl SpinHooks for Hooks {
        fn active(&self) -> bool {
            true
        }
        fn spin_begins(&self) {}
        fn spin_ends(&self, ns: u64, _end: u64) {
            self.spun.set(self.spun.get() + ns);
        }
        fn released(&self, ns: u64) {
            self.blamed.set(self.blamed.get() + ns);
        }
        fn spun_natively(&self, _ns: u64) {}
        fn now(&self) -> u64 {
            self.started.elapsed().as_nanos() as u64
        }
    }

    struct Shared {
        words: [AtomicU32; LOCKS],
        inside: [AtomicBool; LOCKS],
        /// Incremented under each lock by a load and a store: a lost update shows.
        counts: [AtomicU64; LOCKS],
        done: [AtomicU64; LOCKS],
        /// Critical sections that found their lock's word monitored.
        monitored_seen: AtomicU64,
        stop: AtomicBool,
        blamed: AtomicU64,
        spun: AtomicU64,
    }

    /// One thread's work in a phase: random locks, taken by lock, trylock loops and single
    /// trylocks, until `stop`.
    fn work(shared: &Shared, hooks: &Hooks, random: &mut u64) {
        while !shared.stop.load(Ordering::Relaxed) {
            for _ in 0..64 {
                let pick = next_random(random);
                let k = (pick % LOCKS as u64) as usize;
                let word = &shared.words[k];
                match (pick >> 8) % 3 {
                    0 => assert_eq!(spin::lock(word, hooks), 0),
                    1 => loop {
                        match spin::trylock(word, hooks) {
                            0 => break,
                            libc::EBUSY => std::hint::spin_loop(),
                            other => panic!("trylock returned {other}"),
                        }
                    },
                    _ => match spin::trylock(word, hooks) {
                        0 => {}
                        libc::EBUSY => continue,
                        other => panic!("trylock returned {other}"),
                    },
                }
                assert!(
                    !shared.inside[k].swap(true, Ordering::Acquire),
                    "two holders of lock {k}"
                );
                if word.load(Ordering::Relaxed) & 0x8000_0000 != 0 {
                    shared.monitored_seen.fetch_add(1, Ordering::Relaxed);
                }
                let c = shared.counts[k].load(Ordering::Relaxed);
                // A hold of a varying length: from nothing to a few hundred ns.
                for _ in 0..(pick >> 16) % 64 {
                    std::hint::spin_loop();
                }
                shared.counts[k].store(c + 1, Ordering::Relaxed);
                shared.done[k].fetch_add(1, Ordering::Relaxed);
                shared.inside[k].store(false, Ordering::Release);
                assert_eq!(spin::unlock(word, hooks), 0);
            }
        }
    }

    /// 4 threads on 3 spin locks (one native and free, one held natively since "before the
    /// runtime started", one initialised), in phases; between phases, with every thread
    /// waiting at a barrier, locks are destroyed and initialised again, so records are
    /// recycled while the others keep theirs.
    #[test]
    fn model_check_stress_real_spin_locks() {
        let total = budget("spin stress");
        let shared = Arc::new(Shared {
            words: [
                AtomicU32::new(NATIVE_UNLOCKED),
                AtomicU32::new(NATIVE_LOCKED),
                AtomicU32::new(0),
            ],
            inside: [const { AtomicBool::new(false) }; LOCKS],
            counts: [const { AtomicU64::new(0) }; LOCKS],
            done: [const { AtomicU64::new(0) }; LOCKS],
            monitored_seen: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            blamed: AtomicU64::new(0),
            spun: AtomicU64::new(0),
        });
        let epoch = Instant::now();
        let clock = Hooks {
            started: epoch,
            blamed: Cell::new(0),
            spun: Cell::new(0),
        };
        assert_eq!(spin::reset(&shared.words[2], NATIVE_UNLOCKED, &clock), 0);
        let phases = 8u32;
        let phase_len = total / phases;
        let start = Arc::new(Barrier::new(THREADS + 1));
        let end = Arc::new(Barrier::new(THREADS + 1));
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (shared, start, end) = (shared.clone(), start.clone(), end.clone());
                std::thread::spawn(move || {
                    let hooks = Hooks {
                        started: epoch,
                        blamed: Cell::new(0),
                        spun: Cell::new(0),
                    };
                    let mut random = 0xD1B5_4A32_D192_ED03 ^ (t as u64 + 7);
                    for phase in 0..phases {
                        start.wait();
                        if t == 0 && phase == 0 {
                            // This thread held lock 1 since before the runtime started: the
                            // others convert it while it is held, then it unlocks natively.
                            std::thread::sleep(Duration::from_millis(2));
                            assert_eq!(spin::unlock(&shared.words[1], &hooks), 0);
                        }
                        work(&shared, &hooks, &mut random);
                        end.wait();
                    }
                    shared
                        .blamed
                        .fetch_add(hooks.blamed.get(), Ordering::Relaxed);
                    shared.spun.fetch_add(hooks.spun.get(), Ordering::Relaxed);
                })
            })
            .collect();
        let mut random = 0x1234_5678_9ABC_DEF1u64;
        for phase in 0..phases {
            shared.stop.store(false, Ordering::Relaxed);
            start.wait();
            std::thread::sleep(phase_len);
            shared.stop.store(true, Ordering::Relaxed);
            // The workers stop within a round of 64 operations: a hang shows as a timeout.
            let (tx, rx) = std::sync::mpsc::channel();
            let waiter = {
                let end = end.clone();
                std::thread::spawn(move || {
                    end.wait();
                    let _ = tx.send(());
                })
            };
            assert!(
                rx.recv_timeout(PHASE_DEADLINE).is_ok(),
                "phase {phase}: the threads did not stop within {PHASE_DEADLINE:?}: a lock hangs"
            );
            waiter.join().unwrap();
            // Nobody uses the locks now: destroy some, and initialise them again. Every
            // unlock took its hold's waiting, so a free lock's record holds none.
            for k in 0..LOCKS {
                let r = next_random(&mut random);
                if r % 2 == 0 {
                    assert_eq!(
                        spin::destroy(&shared.words[k], &clock),
                        0,
                        "a free lock's record still held waiting"
                    );
                    assert_eq!(
                        shared.words[k].load(Ordering::Relaxed),
                        NATIVE_UNLOCKED,
                        "a destroyed free lock is native and unlocked"
                    );
                    if r % 4 == 0 {
                        assert_eq!(spin::reset(&shared.words[k], NATIVE_UNLOCKED, &clock), 0);
                    }
                }
            }
        }
        for w in workers {
            w.join().unwrap();
        }
        for k in 0..LOCKS {
            assert_eq!(
                shared.counts[k].load(Ordering::Relaxed),
                shared.done[k].load(Ordering::Relaxed),
                "lock {k}: increments lost, so two threads held it at once"
            );
            assert_eq!(spin::destroy(&shared.words[k], &clock), 0);
            assert_eq!(shared.words[k].load(Ordering::Relaxed), NATIVE_UNLOCKED);
        }
        let ops: u64 = shared.done.iter().map(|d| d.load(Ordering::Relaxed)).sum();
        let seen = shared.monitored_seen.load(Ordering::Relaxed);
        eprintln!(
            "spin stress: {ops} critical sections, {seen} on monitored words; spun {} ms, \
             blamed {} ms",
            shared.spun.load(Ordering::Relaxed) / 1_000_000,
            shared.blamed.load(Ordering::Relaxed) / 1_000_000,
        );
        assert!(ops > 0, "no work done");
        // Each nanosecond a spinner waited is charged to at most one hold: the holds' marks
        // never overlap.
        assert!(
            shared.blamed.load(Ordering::Relaxed) <= shared.spun.load(Ordering::Relaxed),
            "more blame than waiting"
        );
        assert!(
            seen > 0,
            "no lock was ever converted: the stress missed the monitored path"
        );
    }

    /// The frames of wake `seq`'s path: its depth (1 to 8) and frames all derived from it.
    fn path_of(seq: u64) -> Vec<Frame> {
        let depth = 1 + (seq % 8) as usize;
        (0..depth)
            .map(|i| Frame {
                module: seq as u32,
                offset: seq * 1000 + i as u64,
            })
            .collect()
    }

    /// One writer publishes path after path (`WakePath::publish`, its only writer), while
    /// readers read the latest and the one before (`WakePath::read`): a path read back must
    /// be exactly the one published for that wake, never a mix or another wake's.
    #[test]
    fn model_check_stress_real_wake_path() {
        let total = budget("wake path stress");
        let path = Arc::new(WakePath::new());
        let latest = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2u64)
            .map(|r| {
                let (path, latest, stop) = (path.clone(), latest.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut out = frame_array();
                    let mut random = 0xABCD_EF01_2345_6789 ^ (r + 1);
                    let (mut found, mut missed) = (0u64, 0u64);
                    while !stop.load(Ordering::Relaxed) {
                        let newest = latest.load(Ordering::Acquire);
                        if newest < 2 {
                            continue;
                        }
                        let seq = newest - next_random(&mut random) % 2;
                        match path.read(seq, &mut out) {
                            Some(depth) => {
                                let want = path_of(seq);
                                assert_eq!(depth, want.len(), "wake {seq}: depth of another");
                                assert_eq!(&out[..depth], &want[..], "wake {seq}: torn or stale");
                                found += 1;
                            }
                            None => missed += 1,
                        }
                    }
                    (found, missed)
                })
            })
            .collect();
        let began = Instant::now();
        let mut seq = 0u64;
        while began.elapsed() < total {
            seq += 1;
            path.publish(seq, &path_of(seq));
            latest.store(seq, Ordering::Release);
        }
        stop.store(true, Ordering::Relaxed);
        let (mut found, mut missed) = (0, 0);
        for r in readers {
            let (f, m) = r.join().unwrap();
            found += f;
            missed += m;
        }
        eprintln!(
            "wake path stress: {seq} paths published, {found} read back whole, {missed} gone"
        );
        assert!(
            found > 0,
            "no path was ever read back: the stress read nothing"
        );
    }
}
