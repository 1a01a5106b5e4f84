//! A parking_lot::Mutex with one slow holder and two fast readers: the workload of the
//! wait-blame tests for parking_lot (tests/waits.rs), built as an example so that it can
//! use the crate.
//!
//! `slow_update` holds the mutex for hold_ms of computing, then computes GAP_MS outside it;
//! two readers call `fast_read` (a hold of a few µs, then READ_GAP_US of sleep). parking_lot
//! parks a waiter on its own futex (`syscall(SYS_futex, FUTEX_WAIT)`) and the unlock that
//! finds it parked wakes it from the unlocking function: the readers' waiting must be blamed
//! on `slow_update`. The workload and its truth are those of rust_waits.rs's `mutex` mode
//! (tests/programs/rust_truth.rs, shared with `#[path]`).
//!
//! Usage: parking_lot_holder [seconds=1] [hold_ms=4]
//!
//! Prints `truth wait_readers_ns=.. blame_slow_update_ns=.. held_ns=.. holds=.. reads=..
//! wall_ns=..`: the readers' lock() waiting, and the part of it that overlaps slow_update's
//! holds (CLOCK_MONOTONIC, via std::time::Instant).

#[path = "../tests/programs/rust_truth.rs"]
mod rust_truth;

use std::hint::black_box;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rust_truth::{busy_for, holder_and_readers, ns, Interval};

/// One long hold; the guard is dropped here, so the wake-up of a parked reader comes from
/// this function.
#[inline(never)]
fn slow_update(m: &Mutex<u64>, hold: Duration, i: u64, base: Instant) -> Interval {
    let mut g = m.lock();
    let a = ns(base);
    *g = g.wrapping_add(busy_for(hold, i));
    let b = ns(base);
    drop(g);
    Interval { a, b }
}

/// A short hold; returns the lock() wait.
#[inline(never)]
fn fast_read(m: &Mutex<u64>, base: Instant) -> (Interval, u64) {
    let a = ns(base);
    let g = m.lock();
    let b = ns(base);
    let v = black_box(*g);
    drop(g);
    (Interval { a, b }, v)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let secs: f64 = args.get(1).map_or(1.0, |s| s.parse().expect("seconds"));
    let hold_ms: f64 = args.get(2).map_or(4.0, |s| s.parse().expect("hold_ms"));
    let hold = Duration::from_secs_f64(hold_ms / 1e3);
    let base = Instant::now();
    let run = holder_and_readers(
        Mutex::new(0u64),
        base,
        secs,
        move |m, i| slow_update(m, hold, i, base),
        move |m, _| fast_read(m, base),
    );
    run.print("parking_lot_holder", "slow holds", "slow_update", "holds");
}
