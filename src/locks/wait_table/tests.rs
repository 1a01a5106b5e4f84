//! The wait table's accounting, step by step: who takes which waiter-time.

use super::buckets::TABLE;
use super::*;
use std::sync::atomic::Ordering;

/// [`super::settle`] of waiters that all stand for themselves: the exact waiter-time.
fn settle(address: usize, kind: WaitKind, now: impl FnOnce() -> u64, held: bool) -> Option<u64> {
    let taken = super::settle(address, kind, now, held)?;
    assert_eq!(taken.scaled, 0);
    Some(taken.exact)
}

/// [`hold_blame`] of waiters that all stand for themselves, within the history: the
/// exact waiter-time.
fn held(address: usize, start: Option<u64>, end: u64) -> Option<u64> {
    let blame = hold_blame(address, start, end)?;
    assert_eq!(blame.taken.scaled, 0);
    assert!(!blame.approximate);
    Some(blame.taken.exact)
}

/// [`super::arrive`] carrying nothing in.
fn arrive(address: usize, kind: WaitKind, now: u64, weight: u32) -> Option<Wait> {
    super::arrive(address, kind, now, weight, Carried::default())
}

/// [`super::depart`]'s accounting alone.
fn depart(wait: Wait, now: u64, outcome: Outcome) -> Departed {
    super::depart(wait, now, outcome).0
}

fn wake_taken(address: usize, now: u64, n: u32) -> Option<u64> {
    wake(address, WaitKind::Semaphore, || now, n, WakerId::default()).map(|w| w.taken)
}

fn dirty_count(address: usize) -> u32 {
    TABLE[bucket_index(address)].dirty.load(Ordering::Acquire)
}

#[test]
fn each_holder_takes_the_waiter_time_of_its_own_hold() {
    let mutex = 0x7000_0000usize;
    // Holder A holds from before anyone waited; W1 blocks at 10, W2 at 20; A unlocks at 30.
    let w1 = arrive(mutex, WaitKind::Mutex, 10, 1).unwrap();
    let w2 = arrive(mutex, WaitKind::Mutex, 20, 1).unwrap();
    assert_eq!(held(mutex, None, 30), Some((30 - 10) + (30 - 20)));
    // W1 acquires at 32 (2 ns of hand-off, charged to nobody), holds until 50.
    depart(w1, 32, Outcome::Success);
    assert_eq!(held(mutex, Some(32), 50), Some(50 - 32), "only W2 waited");
    // W2 acquires at 51: nobody waits any more; the entry lingers, with nothing to take.
    depart(w2, 51, Outcome::Success);
    assert_eq!(held(mutex, Some(51), 60), Some(0));
    assert_eq!(dirty_count(mutex), 0);
}

#[test]
fn a_barging_holder_pays_only_for_its_own_hold() {
    let mutex = 0x7200_0000usize;
    let w = arrive(mutex, WaitKind::Mutex, 0, 1).unwrap();
    assert_eq!(held(mutex, None, 10), Some(10));
    // Free from 10 to 40 while W is not yet scheduled: nobody's fault. B barges in.
    assert_eq!(
        held(mutex, Some(40), 45),
        Some(5),
        "B pays its own 5 ns only"
    );
    depart(w, 50, Outcome::Success);
    assert_eq!(held(mutex, Some(50), 60), Some(0));
}

#[test]
fn a_waiter_registered_after_the_release_is_not_the_next_holders() {
    let mutex = 0x7b00_0000usize;
    // W's try fails at 0 while A holds; A's release looks for waiters before W registers
    // (W is descheduled in between), so it takes nothing. B's try succeeds at 40 and B
    // holds to 45; W, scheduled again, waits for B and gets the mutex at 50.
    let w = arrive(mutex, WaitKind::Mutex, 0, 1).unwrap();
    assert_eq!(
        held(mutex, Some(40), 45),
        Some(5),
        "B pays for its own 5 ns, not for the free mutex's 40"
    );
    depart(w, 50, Outcome::Success);
    assert_eq!(dirty_count(mutex), 0);
}

#[test]
fn a_waiter_registered_between_the_release_and_the_unlock_is_not_the_next_holders() {
    let mutex = 0x7c00_0000usize;
    // W1 waits from 0; A's release reads at 10 (W1's 10 ns) and unlocks at 13. W2's try
    // failed against A's hold, but it registers at 12. B's try succeeds at 30, before the
    // woken W1 runs, and B holds to 35.
    let w1 = arrive(mutex, WaitKind::Mutex, 0, 1).unwrap();
    assert_eq!(held(mutex, None, 10), Some(10));
    let w2 = arrive(mutex, WaitKind::Mutex, 12, 1).unwrap();
    assert_eq!(
        held(mutex, Some(30), 35),
        Some(2 * 5),
        "B pays for its hold's 5 ns of two waiters, not for the 18 ns before it"
    );
    depart(w1, 36, Outcome::Success);
    assert_eq!(held(mutex, Some(36), 40), Some(40 - 36));
    depart(w2, 41, Outcome::Success);
    assert_eq!(dirty_count(mutex), 0);
}

#[test]
fn a_hold_that_began_before_anyone_waited_takes_all_of_the_waiting() {
    let mutex = 0x7c40_0000usize;
    // H's hold is noted at 5 (another object of the bucket had waiters then); W, the
    // first waiter of this mutex, blocks at 10; H releases at 20.
    let w = arrive(mutex, WaitKind::Mutex, 10, 1).unwrap();
    assert_eq!(held(mutex, Some(5), 20), Some(10));
    depart(w, 21, Outcome::Success);
}

#[test]
fn a_timed_out_waiter_is_not_blamed_for_its_current_stretch() {
    let mutex = 0x7300_0000usize;
    let w1 = arrive(mutex, WaitKind::Mutex, 0, 1).unwrap();
    let w2 = arrive(mutex, WaitKind::Mutex, 0, 1).unwrap();
    // W2 gives up at 30; W1 keeps waiting until the unlock at 50.
    assert_eq!(depart(w2, 30, Outcome::TimedOut), Departed::TimedOut);
    assert_eq!(held(mutex, None, 50), Some(50), "W1's 50 ns, none of W2's");
    depart(w1, 51, Outcome::Success);
    assert_eq!(dirty_count(mutex), 0);
}

#[test]
fn a_waiter_that_gives_up_keeps_what_earlier_holds_took() {
    let mutex = 0x7340_0000usize;
    // W waits from 0 through A's hold (to 10), then B's from 20; W times out at 25, and B
    // releases at 30. A keeps its 10 ns; B is blamed for none of W's 5 in its hold.
    let w1 = arrive(mutex, WaitKind::Mutex, 0, 1).unwrap();
    assert_eq!(held(mutex, None, 10), Some(10));
    let w2 = arrive(mutex, WaitKind::Mutex, 22, 1).unwrap();
    depart(w1, 25, Outcome::TimedOut);
    assert_eq!(
        held(mutex, Some(20), 30),
        Some(30 - 22),
        "the other waiter's only"
    );
    depart(w2, 31, Outcome::Success);
}

#[test]
fn a_hold_that_outlives_the_history_is_approximate_and_says_so() {
    let mutex = 0x7380_0000usize;
    // W waits from 0 through H's hold (5 to 200), during which 6 others come and give up.
    let w = arrive(mutex, WaitKind::Mutex, 0, 1).unwrap();
    for i in 0..6 {
        let x = arrive(mutex, WaitKind::Mutex, 10 + 20 * i, 1).unwrap();
        depart(x, 20 + 20 * i, Outcome::TimedOut);
    }
    let blame = hold_blame(mutex, Some(5), 200).unwrap();
    assert!(blame.approximate, "13 changes, 8 kept");
    // C(5) extrapolated back from the oldest kept change (X2's arrival at 50, where C is
    // 70) at its rate (2): 0; and X0's and X1's withdrawals are gone too. Exact: 195,
    // W's alone.
    assert_eq!(blame.taken.exact, 260 - 4 * 10);
    // A hold within the history is exact.
    let blame = hold_blame(mutex, Some(150), 200).unwrap();
    assert!(!blame.approximate);
    assert_eq!(blame.taken.exact, 50);
    depart(w, 201, Outcome::Success);
}

#[test]
fn a_holder_reads_the_history_while_waiters_change_it() {
    // One thread keeps one waiter on the mutex, replacing it every 10 ns of a made-up
    // clock, so C(t) = t; another reads holds of the last 25 ns meanwhile: every read that
    // says it is exact must be (a torn read would not be). Every 100 changes the writer
    // waits for a read, so the two overlap however the threads are scheduled.
    use std::sync::atomic::AtomicU64;
    static NOW: AtomicU64 = AtomicU64::new(0);
    static READS: AtomicU64 = AtomicU64::new(0);
    let mutex = 0x7c80_0000usize;
    let first = arrive(mutex, WaitKind::Mutex, 0, 1).unwrap();
    let writer = std::thread::spawn(move || {
        let mut current = first;
        // Below `LINGER_NS` of made-up time: its arrivals sweep other tests' buckets too.
        for step in 1..100_000u64 {
            let t = step * 10;
            let next = arrive(mutex, WaitKind::Mutex, t, 1).unwrap();
            depart(current, t, Outcome::Success);
            current = next;
            NOW.store(t, Ordering::Release);
            if step % 100 == 0 {
                let seen = READS.load(Ordering::Acquire);
                while READS.load(Ordering::Acquire) == seen {
                    std::thread::yield_now();
                }
            }
        }
        depart(current, 1_000_000, Outcome::Success);
        NOW.store(u64::MAX, Ordering::Release);
    });
    let mut exact = 0u64;
    loop {
        let t = NOW.load(Ordering::Acquire);
        if t == u64::MAX {
            break;
        }
        if t >= 30 {
            if let Some(b) = hold_blame(mutex, Some(t - 25), t) {
                if !b.approximate {
                    assert_eq!(b.taken, WaiterTime::exact(25), "a hold of 25 ns at {t}");
                    exact += 1;
                }
            }
        }
        READS.fetch_add(1, Ordering::AcqRel);
    }
    writer.join().unwrap();
    let reads = READS.load(Ordering::Acquire);
    assert!(exact > 0, "{exact} exact of {reads} reads");
}

#[test]
fn a_reader_joining_a_held_rwlock_does_not_end_the_others_hold() {
    let rw = 0x7d00_0000usize;
    // R1 reads; writer W blocks at 0; R2's try-read succeeds at 10, joining R1's hold.
    // R1 leaves at 20 (R2 still reads), R2 at 30; W gets it at 31.
    let w = arrive(rw, WaitKind::RwLock, 0, 1).unwrap();
    acquired(rw, WaitKind::RwLock, || 10);
    assert_eq!(settle(rw, WaitKind::RwLock, || 20, true), Some(20));
    assert_eq!(settle(rw, WaitKind::RwLock, || 30, false), Some(10));
    depart(w, 31, Outcome::Success);
    assert_eq!(dirty_count(rw), 0);
}

#[test]
fn readers_in_turn_share_a_blocked_writer() {
    let rw = 0x7400_0000usize;
    // Readers R1 and R2 hold; writer W blocks at 0; R1 leaves at 10 (R2 still holds),
    // R2 leaves at 25; W gets it at 26.
    let w = arrive(rw, WaitKind::RwLock, 0, 1).unwrap();
    assert_eq!(settle(rw, WaitKind::RwLock, || 10, true), Some(10));
    assert_eq!(settle(rw, WaitKind::RwLock, || 25, false), Some(15));
    depart(w, 26, Outcome::Success);
    assert_eq!(settle(rw, WaitKind::RwLock, || 40, false), None);
}

#[test]
fn an_event_takes_the_waiting_since_the_previous_one() {
    let cond = 0x7500_0000usize;
    let c1 = arrive(cond, WaitKind::CondVar, 0, 1).unwrap();
    let c2 = arrive(cond, WaitKind::CondVar, 10, 1).unwrap();
    // A signal at 20 wakes one and takes both waits so far.
    assert_eq!(wake_taken(cond, 20, 1), Some(20 + 10));
    // The woken one departs at 25: blamed, woken at 20. The other waits on.
    assert_eq!(
        depart(c1, 25, Outcome::Success),
        Departed::Blamed {
            woken_at: 20,
            retake: None,
            waker: WakerId::default(),
        }
    );
    // A broadcast at 50 takes c2's 30 ns since the last signal.
    assert_eq!(wake_taken(cond, 50, u32::MAX), Some(30));
    assert!(matches!(
        depart(c2, 52, Outcome::Success),
        Departed::Blamed { .. }
    ));
    assert_eq!(wake_taken(cond, 60, 1), None, "nobody waits: fast path");
}

#[test]
fn a_woken_waiter_that_lost_the_race_is_blamed_on_the_next_event() {
    let sem = 0x7900_0000usize;
    let w = arrive(sem, WaitKind::Semaphore, 0, 1).unwrap();
    // A post at 20 whose token another thread takes at once: the waiter sleeps on.
    assert_eq!(wake_taken(sem, 20, 1), Some(20));
    // The post at 120 ends its wait: the 100 ns since the first are this post's doing.
    assert_eq!(wake_taken(sem, 120, 1), Some(100));
    assert!(matches!(
        depart(w, 125, Outcome::Success),
        Departed::Blamed { .. }
    ));
    assert_eq!(dirty_count(sem), 0, "its 5 ns of wake-up are nobody's");
}

#[test]
fn a_solo_waiters_accrual_start_and_its_waker_are_known() {
    let futex = 0x7a00_0000usize;
    let w = arrive(futex, WaitKind::Futex, 100, 1).unwrap();
    let waker = WakerId { tid: 42, seq: 7 };
    let woke = wake(futex, WaitKind::Futex, || 150, 1, waker).unwrap();
    assert_eq!(
        woke,
        Woke {
            taken: 50,
            solo_since: Some(100)
        }
    );
    match depart(w, 151, Outcome::Success) {
        Departed::Blamed { waker: by, .. } => assert_eq!(by, waker),
        other => panic!("{other:?}"),
    }
    let a = arrive(futex, WaitKind::Futex, 200, 1).unwrap();
    let b = arrive(futex, WaitKind::Futex, 210, 1).unwrap();
    let woke = wake(futex, WaitKind::Futex, || 250, 1, waker).unwrap();
    assert_eq!(woke.solo_since, None, "two waiters: no single start");
    depart(a, 251, Outcome::Success);
    let woke = wake(futex, WaitKind::Futex, || 300, 1, waker).unwrap();
    assert_eq!(
        woke,
        Woke {
            taken: 50,
            solo_since: Some(250)
        },
        "once the woken one left, the other's accrual since the last wake is alone"
    );
    depart(b, 301, Outcome::Success);
}

#[test]
fn timed_out_and_spurious_waits_are_never_blamed() {
    let sem = 0x7600_0000usize;
    let w = arrive(sem, WaitKind::Semaphore, 0, 1).unwrap();
    assert_eq!(depart(w, 100, Outcome::TimedOut), Departed::TimedOut);
    assert_eq!(wake_taken(sem, 110, 1), None, "its 100 ns went to nobody");
    let w = arrive(sem, WaitKind::Semaphore, 200, 1).unwrap();
    assert_eq!(depart(w, 300, Outcome::Success), Departed::Spurious);
    assert_eq!(dirty_count(sem), 0);
}

#[test]
fn woken_condvar_waiters_wait_for_the_signallers_mutex() {
    let cond = 0x7700_0000usize;
    let mutex = 0x7700_0040usize;
    let c = arrive(cond, WaitKind::CondVar, 0, 1).unwrap();
    set_partner(cond, mutex);
    // The producer signals at 40 holding the mutex, and unlocks at 45.
    assert_eq!(wake_with_proxies(cond, || 40, 1), Some(40));
    assert_eq!(held(mutex, Some(30), 45), Some(5), "the retake waited 5 ns");
    let d = depart(c, 47, Outcome::Success);
    assert!(matches!(
        d,
        Departed::Blamed {
            woken_at: 40,
            retake: Some(_),
            ..
        }
    ));
    depart_proxy(mutex, 47);
    assert_eq!(dirty_count(cond), 0);
    assert_eq!(dirty_count(mutex), 0);
}

#[test]
fn a_signalled_condvar_waiter_that_times_out_leaves_no_phantom_on_the_mutex() {
    let cond = 0x7700_1000usize;
    let mutex = 0x7700_1040usize;
    let c = arrive(cond, WaitKind::CondVar, 0, 1).unwrap();
    set_partner(cond, mutex);
    // The signal at 40 races the waiter's timeout: its timedwait returns ETIMEDOUT at 47.
    assert_eq!(wake_with_proxies(cond, || 40, 1), Some(40));
    assert_eq!(
        depart(c, 47, Outcome::TimedOut),
        Departed::TimedOut,
        "a timeout stays unblamed"
    );
    assert_eq!(dirty_count(cond), 0);
    assert_eq!(
        dirty_count(mutex),
        0,
        "the registration the signal made for it on the mutex ended with it"
    );
    assert_eq!(
        held(mutex, Some(1000), 2000).unwrap_or(0),
        0,
        "a later hold of the mutex takes nothing"
    );
}

#[test]
fn a_condvar_destroyed_after_a_broadcast_leaves_no_phantoms_on_the_mutex() {
    let cond = 0x7700_3000usize;
    let mutex = 0x7700_3040usize;
    let a = arrive(cond, WaitKind::CondVar, 0, 1).unwrap();
    let b = arrive(cond, WaitKind::CondVar, 5, 1).unwrap();
    set_partner(cond, mutex);
    assert!(wake_with_proxies(cond, || 40, u32::MAX).is_some());
    // POSIX allows destroying it at once: the woken waiters' departures will not find it.
    forget(cond, || 41);
    assert_eq!(dirty_count(mutex), 0, "both registrations ended");
    assert_eq!(depart(a, 50, Outcome::Success), Departed::Spurious);
    assert_eq!(depart(b, 51, Outcome::Success), Departed::Spurious);
    assert_eq!(held(mutex, Some(100), 200).unwrap_or(0), 0);
}

#[test]
fn a_timeout_beside_a_woken_waiter_leaves_the_wake_up_to_it() {
    let cond = 0x7700_2000usize;
    let mutex = 0x7700_2040usize;
    let a = arrive(cond, WaitKind::CondVar, 0, 1).unwrap();
    let b = arrive(cond, WaitKind::CondVar, 5, 1).unwrap();
    set_partner(cond, mutex);
    assert_eq!(wake_with_proxies(cond, || 40, 1), Some(75));
    assert_eq!(
        depart(b, 42, Outcome::TimedOut),
        Departed::TimedOut,
        "one woken, one still waiting: the one that timed out need not be the woken one"
    );
    assert!(matches!(
        depart(a, 50, Outcome::Success),
        Departed::Blamed {
            retake: Some(_),
            ..
        }
    ));
    depart_proxy(mutex, 50);
    assert_eq!(dirty_count(mutex), 0);
}

#[test]
fn the_last_to_arrive_at_a_barrier_takes_the_others_wait() {
    let barrier = 0x7800_0000usize;
    barrier_init(barrier, 3);
    let BarrierArrival::Wait(a) = barrier_arrive(barrier, 0) else {
        panic!("first arrival waits")
    };
    let BarrierArrival::Wait(b) = barrier_arrive(barrier, 10) else {
        panic!("second arrival waits")
    };
    let BarrierArrival::Last(taken) = barrier_arrive(barrier, 30) else {
        panic!("third arrival is the last")
    };
    assert_eq!(taken, 30 + 20);
    assert!(matches!(
        depart(a, 31, Outcome::Success),
        Departed::Blamed { .. }
    ));
    // A new round starts before b has left: the counts stay right.
    let BarrierArrival::Wait(a2) = barrier_arrive(barrier, 40) else {
        panic!("new round")
    };
    assert!(matches!(
        depart(b, 41, Outcome::Success),
        Departed::Blamed { .. }
    ));
    assert_eq!(depart(a2, 50, Outcome::Interrupted), Departed::Interrupted);
    assert_eq!(forget(barrier, || 0), 0);
    assert!(matches!(
        barrier_arrive(barrier, 60),
        BarrierArrival::Unknown
    ));
}

#[test]
fn unsettled_blame_waits_for_the_next_release() {
    let rw = 0x7100_0000usize;
    let w = arrive(rw, WaitKind::RwLock, 0, 1).unwrap();
    let taken = settle(rw, WaitKind::RwLock, || 100, false).unwrap();
    assert_eq!(taken, 100);
    unsettle(rw, WaitKind::RwLock, WaiterTime::exact(taken), false);
    depart(w, 101, Outcome::TimedOut);
    assert_eq!(settle(rw, WaitKind::RwLock, || 120, false), Some(100));
    assert_eq!(forget(rw, || 0), 0);
}

#[test]
fn sampled_waiters_accrue_apart_from_exact_ones() {
    let mutex = 0x7240_0000usize;
    // An exact waiter from 10 and a sampled one standing for 8 from 20; released at 30.
    let exact = arrive(mutex, WaitKind::Mutex, 10, 1).unwrap();
    let sampled = arrive(mutex, WaitKind::Mutex, 20, 8).unwrap();
    let blame = hold_blame(mutex, None, 30).unwrap();
    assert_eq!(
        blame.taken,
        WaiterTime {
            exact: 30 - 10,
            scaled: 8 * (30 - 20),
        }
    );
    // The exact one takes it at 31 and holds until 40; the sampled one times out at 35:
    // its stretch in this hold (8 x 4 ns) is withdrawn from its own part.
    depart(exact, 31, Outcome::Success);
    depart(sampled, 35, Outcome::TimedOut);
    assert_eq!(
        hold_blame(mutex, Some(31), 40).map(|b| b.taken),
        Some(WaiterTime::default()),
        "nobody waits any more"
    );
    let exact = arrive(mutex, WaitKind::Mutex, 50, 1).unwrap();
    let sampled = arrive(mutex, WaitKind::Mutex, 50, 8).unwrap();
    depart(sampled, 54, Outcome::TimedOut);
    let blame = hold_blame(mutex, Some(45), 60).unwrap();
    assert_eq!(
        blame.taken,
        WaiterTime::exact(10),
        "the sampled part withdrew"
    );
    depart(exact, 61, Outcome::Success);
    assert_eq!(forget(mutex, || 0), 0);
}

#[test]
fn a_holder_reads_its_blame_after_the_waiter_it_released_departed() {
    let mutex = 0x7e00_0000usize;
    // H holds from before W blocks at 10; H's release at 20 reads the history only after
    // its unlock, by when W has acquired and departed: the entry lingers for it.
    let w = arrive(mutex, WaitKind::Mutex, 10, 1).unwrap();
    depart(w, 21, Outcome::Success);
    assert_eq!(
        dirty_count(mutex),
        0,
        "nothing pending: releases take the fast path"
    );
    assert_eq!(held(mutex, None, 20), Some(10));
    // Long after, another wait sweeps the entry away and starts afresh.
    let other = (1..)
        .map(|i| mutex + 64 * i)
        .find(|&a| bucket_index(a) == bucket_index(mutex))
        .unwrap();
    let x = arrive(other, WaitKind::Mutex, 21 + super::buckets::LINGER_NS, 1).unwrap();
    assert_eq!(hold_blame(mutex, None, 20), None, "swept");
    depart(x, 22 + super::buckets::LINGER_NS, Outcome::Success);
}

#[test]
fn a_stale_hold_start_does_not_reach_back_past_a_revival() {
    let mutex = 0x7e40_0000usize;
    // W waited from 0 to 10 on others' holds; nobody waits from 10 to 100. H's note says
    // 5 (left by an earlier hold whose release was not measured); its real hold began at
    // 90, unnoted, and X blocks on it at 100; H releases at 110.
    let w = arrive(mutex, WaitKind::Mutex, 0, 1).unwrap();
    depart(w, 10, Outcome::Success);
    let x = arrive(mutex, WaitKind::Mutex, 100, 1).unwrap();
    assert_eq!(held(mutex, Some(5), 110), Some(10), "X's 10 ns only");
    depart(x, 111, Outcome::Success);
}

#[test]
fn a_late_read_of_an_entry_made_after_the_hold_takes_nothing() {
    let mutex = 0x7e80_0000usize;
    // H's hold ended at 1999, but its read comes after waiters came and went 13 times.
    let first: Vec<_> = (0..5)
        .map(|i| arrive(mutex, WaitKind::Mutex, 2000 + i, 1).unwrap())
        .collect();
    for (i, w) in first.into_iter().take(4).enumerate() {
        depart(w, 3000 + i as u64, Outcome::TimedOut);
    }
    let later: Vec<_> = (0..4)
        .map(|i| arrive(mutex, WaitKind::Mutex, 3004 + i, 1).unwrap())
        .collect();
    let blame = hold_blame(mutex, None, 1999).unwrap();
    assert_eq!(blame.taken, WaiterTime::default());
    assert!(!blame.approximate);
    for w in later {
        depart(w, 4000, Outcome::TimedOut);
    }
}

#[test]
fn a_lingering_mutex_entry_is_reset_for_another_kind_at_its_address() {
    let address = 0x7ec0_0000usize;
    let w = arrive(address, WaitKind::Mutex, 0, 1).unwrap();
    depart(w, 10, Outcome::Success);
    // The mutex was freed without being destroyed; a semaphore lives there now.
    let s = arrive(address, WaitKind::Semaphore, 20, 1).unwrap();
    assert_eq!(
        wake_taken(address, 50, 1),
        Some(30),
        "a semaphore's wake finds it"
    );
    assert!(matches!(
        depart(s, 51, Outcome::Success),
        Departed::Blamed { .. }
    ));
}

#[test]
fn a_withdrawal_takes_out_no_more_than_the_waiter_counted_for() {
    let mutex = 0x7f00_0000usize;
    // W3 waits from 0; H holds from 500; W2 registers at 1000; W1, whose try failed at 0,
    // registers after it (stamped 1000, the history's last change) and times out at 10000:
    // it counted for 9000 ns, and only those are withdrawn.
    let w3 = arrive(mutex, WaitKind::Mutex, 0, 1).unwrap();
    let w2 = arrive(mutex, WaitKind::Mutex, 1000, 1).unwrap();
    let w1 = arrive(mutex, WaitKind::Mutex, 0, 1).unwrap();
    depart(w1, 10_000, Outcome::TimedOut);
    assert_eq!(
        held(mutex, Some(500), 10_000),
        Some(9500 + 9000),
        "W3's and W2's"
    );
    depart(w2, 10_001, Outcome::Success);
    depart(w3, 10_002, Outcome::Success);
}

#[test]
fn a_bucket_is_marked_occupied_exactly_while_its_chain_holds_entries() {
    let mutex = 0x7a00_0040usize;
    let index = bucket_index(mutex);
    let w = arrive(mutex, WaitKind::Mutex, 10, 1).unwrap();
    assert!(buckets::occupied(index), "an entry: the bit is set");
    depart(w, 20, Outcome::Success);
    // The mutex's entry lingers clean until its destroy forgets it.
    assert!(buckets::occupied(index));
    assert_eq!(forget(mutex, || 30), 0);
    // Other tests may wait in this bucket meanwhile: under its lock, the bit says whether
    // its chain holds anything.
    let locked = buckets::Locked::new(index);
    assert_eq!(
        buckets::occupied(index),
        locked.bucket.first(Ordering::Acquire) != buckets::NONE
    );
}

#[test]
fn a_timed_out_waiter_carries_its_waiting_to_whoever_ends_its_next_wait() {
    let cond = 0x7a00_0000usize;
    // W waits from 0, times out at 5 ms: nobody took any of it, and it is withdrawn.
    let w = arrive(cond, WaitKind::CondVar, 0, 1).unwrap();
    let (departed, unclaimed) = super::depart(w, 5_000, Outcome::TimedOut);
    assert_eq!((departed, unclaimed), (Departed::TimedOut, 5_000));
    // It waits again at 5.01 ms carrying those 5 ms; the signal at 7 ms takes them with the
    // 1.99 ms since.
    let carried = Carried {
        since: 0,
        total: 5_000,
        unclaimed,
    };
    let w = super::arrive(cond, WaitKind::CondVar, 5_010, 1, carried).unwrap();
    assert_eq!(w.carried, carried);
    assert_eq!(wake_taken(cond, 7_000, 1), Some(5_000 + 1_990));
    assert!(matches!(
        depart(w, 7_020, Outcome::Success),
        Departed::Blamed { .. }
    ));
    assert_eq!(dirty_count(cond), 0);
}

#[test]
fn a_carried_wait_that_times_out_again_takes_back_only_what_no_event_took() {
    let cond = 0x7a40_0000usize;
    // W re-arrives at 100 carrying 50 unclaimed; X waits from 100 too. A signal at 150
    // wakes X and takes everything so far: W's carry, W's 50 and X's 50.
    let carried = Carried {
        since: 0,
        total: 50,
        unclaimed: 50,
    };
    let w = super::arrive(cond, WaitKind::CondVar, 100, 1, carried).unwrap();
    let x = arrive(cond, WaitKind::CondVar, 100, 1).unwrap();
    assert_eq!(wake_taken(cond, 150, 1), Some(50 + 50 + 50));
    depart(x, 151, Outcome::Success);
    // W times out at 180: only its 30 since the signal are unclaimed.
    assert_eq!(
        super::depart(w, 180, Outcome::TimedOut),
        (Departed::TimedOut, 30)
    );
    assert_eq!(dirty_count(cond), 0, "nothing is left for the next event");
}

#[test]
fn a_mutex_waiter_carries_nothing() {
    let mutex = 0x7a80_0000usize;
    let carried = Carried {
        since: 0,
        total: 10,
        unclaimed: 10,
    };
    let w = super::arrive(mutex, WaitKind::Mutex, 20, 1, carried).unwrap();
    assert_eq!(w.carried, Carried::default());
    assert_eq!(held(mutex, None, 30), Some(10), "its own 10 ns only");
    depart(w, 31, Outcome::Success);
}
