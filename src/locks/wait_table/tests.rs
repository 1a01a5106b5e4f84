//! The wait table's accounting, step by step: who takes which waiter-time.

use super::*;

/// [`super::settle`] of waiters that all stand for themselves: the exact waiter-time.
fn settle(address: usize, kind: WaitKind, now: impl FnOnce() -> u64, held: bool) -> Option<u64> {
    let taken = super::settle(address, kind, now, held)?;
    assert_eq!(taken.scaled, 0);
    Some(taken.exact)
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
    // Holder A holds from 0; W1 blocks at 10, W2 at 20; A unlocks at 30.
    let w1 = arrive(mutex, WaitKind::Mutex, 10, 1).unwrap();
    let w2 = arrive(mutex, WaitKind::Mutex, 20, 1).unwrap();
    assert_eq!(
        settle(mutex, WaitKind::Mutex, || 30, false),
        Some((30 - 10) + (30 - 20))
    );
    // W1 acquires at 32 (2 ns of hand-off, charged to nobody), holds until 50.
    depart(w1, 32, Outcome::Success);
    assert_eq!(
        settle(mutex, WaitKind::Mutex, || 50, false),
        Some(50 - 32),
        "only W2 waited"
    );
    // W2 acquires at 51: nothing is pending any more, so the entry is gone and the
    // unlock takes the fast path.
    depart(w2, 51, Outcome::Success);
    assert_eq!(settle(mutex, WaitKind::Mutex, || 60, false), None);
    assert_eq!(dirty_count(mutex), 0);
}

#[test]
fn a_barging_holder_pays_only_for_its_own_hold() {
    let mutex = 0x7200_0000usize;
    let w = arrive(mutex, WaitKind::Mutex, 0, 1).unwrap();
    assert_eq!(settle(mutex, WaitKind::Mutex, || 10, false), Some(10));
    // Free from 10 to 40 while W is not yet scheduled: nobody's fault. B barges in.
    acquired(mutex, WaitKind::Mutex, || 40);
    assert_eq!(
        settle(mutex, WaitKind::Mutex, || 45, false),
        Some(5),
        "B pays its own 5 ns only"
    );
    depart(w, 50, Outcome::Success);
    assert_eq!(settle(mutex, WaitKind::Mutex, || 60, false), None);
}

#[test]
fn a_waiter_registered_after_the_release_is_not_the_next_holders() {
    let mutex = 0x7b00_0000usize;
    // W's try fails at 0 while A holds; A's release looks for waiters before W registers
    // (W is descheduled in between), so it settles nothing. B's try succeeds at 40 and
    // B holds to 45; W, scheduled again, waits for B and gets the mutex at 50.
    let w = arrive(mutex, WaitKind::Mutex, 0, 1).unwrap();
    acquired(mutex, WaitKind::Mutex, || 40);
    assert_eq!(
        settle(mutex, WaitKind::Mutex, || 45, false),
        Some(5),
        "B pays for its own 5 ns, not for the free mutex's 40"
    );
    depart(w, 50, Outcome::Success);
    assert_eq!(settle(mutex, WaitKind::Mutex, || 60, false), None);
    assert_eq!(dirty_count(mutex), 0);
}

#[test]
fn a_waiter_registered_between_the_settlement_and_the_unlock_is_not_the_next_holders() {
    let mutex = 0x7c00_0000usize;
    // W1 waits from 0; A's release settles at 10 (W1's 10 ns) and unlocks at 13. W2's
    // try failed against A's hold, but it registers at 12, after the settlement. B's try
    // succeeds at 30, before the woken W1 runs, and B holds to 35.
    let w1 = arrive(mutex, WaitKind::Mutex, 0, 1).unwrap();
    assert_eq!(settle(mutex, WaitKind::Mutex, || 10, false), Some(10));
    let w2 = arrive(mutex, WaitKind::Mutex, 12, 1).unwrap();
    acquired(mutex, WaitKind::Mutex, || 30);
    assert_eq!(
        settle(mutex, WaitKind::Mutex, || 35, false),
        Some(2 * 5),
        "B pays for its hold's 5 ns of two waiters, not for the 18 ns before it"
    );
    depart(w1, 36, Outcome::Success);
    assert_eq!(settle(mutex, WaitKind::Mutex, || 40, false), Some(40 - 36));
    depart(w2, 41, Outcome::Success);
    assert_eq!(dirty_count(mutex), 0);
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
fn a_timed_out_waiter_is_not_blamed_for_its_current_stretch() {
    let mutex = 0x7300_0000usize;
    let w1 = arrive(mutex, WaitKind::Mutex, 0, 1).unwrap();
    let w2 = arrive(mutex, WaitKind::Mutex, 0, 1).unwrap();
    // W2 gives up at 30; W1 keeps waiting until the unlock at 50.
    assert_eq!(depart(w2, 30, Outcome::TimedOut), Departed::TimedOut);
    assert_eq!(
        settle(mutex, WaitKind::Mutex, || 50, false),
        Some(50),
        "W1's 50 ns, none of W2's"
    );
    depart(w1, 51, Outcome::Success);
    assert_eq!(dirty_count(mutex), 0);
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
            mutex_wait: false,
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
    assert_eq!(wake_with_proxies(cond, || 40, 1, |m| m == mutex), Some(40));
    assert_eq!(
        settle(mutex, WaitKind::Mutex, || 45, false),
        Some(5),
        "the retake waited 5 ns"
    );
    let d = depart(c, 47, Outcome::Success);
    assert!(matches!(
        d,
        Departed::Blamed {
            woken_at: 40,
            mutex_wait: true,
            ..
        }
    ));
    depart_proxy(mutex, 47);
    assert_eq!(dirty_count(cond), 0);
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
    assert_eq!(forget(barrier), 0);
    assert!(matches!(
        barrier_arrive(barrier, 60),
        BarrierArrival::Unknown
    ));
}

#[test]
fn unsettled_blame_waits_for_the_next_release() {
    let mutex = 0x7100_0000usize;
    let w = arrive(mutex, WaitKind::Mutex, 0, 1).unwrap();
    let taken = settle(mutex, WaitKind::Mutex, || 100, false).unwrap();
    assert_eq!(taken, 100);
    unsettle(mutex, WaitKind::Mutex, WaiterTime::exact(taken), false);
    depart(w, 101, Outcome::TimedOut);
    assert_eq!(settle(mutex, WaitKind::Mutex, || 120, false), Some(100));
    assert_eq!(forget(mutex), 0);
}

#[test]
fn sampled_waiters_accrue_apart_from_exact_ones() {
    let mutex = 0x7200_0000usize;
    // An exact waiter from 10 and a sampled one standing for 8 from 20; released at 30.
    let exact = arrive(mutex, WaitKind::Mutex, 10, 1).unwrap();
    let sampled = arrive(mutex, WaitKind::Mutex, 20, 8).unwrap();
    assert_eq!(
        super::settle(mutex, WaitKind::Mutex, || 30, false),
        Some(WaiterTime {
            exact: 30 - 10,
            scaled: 8 * (30 - 20),
        })
    );
    // The exact one takes it at 31 and holds until 40; the sampled one times out at 35:
    // its stretch in this hold (8 x 4 ns) is withdrawn from its own part, which leaves
    // nothing pending: the unlock at 40 takes the fast path.
    depart(exact, 31, Outcome::Success);
    depart(sampled, 35, Outcome::TimedOut);
    assert_eq!(super::settle(mutex, WaitKind::Mutex, || 40, false), None);
    // Given back (an unlock that failed), both parts wait for the next release.
    let both = WaiterTime {
        exact: 3,
        scaled: 40,
    };
    unsettle(mutex, WaitKind::Mutex, both, false);
    assert_eq!(
        super::settle(mutex, WaitKind::Mutex, || 50, false),
        Some(both)
    );
    assert_eq!(forget(mutex), 0);
}
