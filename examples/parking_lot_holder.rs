//! A parking_lot::Mutex with one slow holder and two fast readers: the workload of the
//! wait-blame tests for parking_lot (tests/waits.rs), built as an example so that it can
//! use the crate.
//!
//! `slow_update` holds the mutex for hold_ms of computing, then computes GAP_MS outside it;
//! two readers call `fast_read` (a hold of a few µs, then READ_GAP_US of sleep). parking_lot
//! parks a waiter on its own futex (`syscall(SYS_futex, FUTEX_WAIT)`) and the unlock that
//! finds it parked wakes it from the unlocking function: the readers' waiting must be blamed
//! on `slow_update`.
//!
//! Usage: parking_lot_holder [seconds=1] [hold_ms=4]
//!
//! Prints `truth wait_readers_ns=.. blame_slow_update_ns=.. held_ns=.. holds=.. reads=..
//! wall_ns=..`: the readers' lock() waiting, and the part of it that overlaps slow_update's
//! holds (CLOCK_MONOTONIC, via std::time::Instant).

use std::hint::black_box;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

const GAP_MS: u64 = 1;
const READ_GAP_US: u64 = 150;

#[derive(Clone, Copy)]
struct Interval {
    a: u64,
    b: u64,
}

fn ns(base: Instant) -> u64 {
    base.elapsed().as_nanos() as u64
}

/// Burns the CPU for `d` of wall-clock time.
#[inline(never)]
fn busy_for(d: Duration, seed: u64) -> u64 {
    let end = Instant::now() + d;
    let mut x = seed | 1;
    loop {
        for _ in 0..64 {
            x = black_box(
                x.wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407),
            );
        }
        if Instant::now() >= end {
            return x;
        }
    }
}

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
    let m = Arc::new(Mutex::new(0u64));
    let base = Instant::now();
    let deadline = base + Duration::from_secs_f64(secs);
    let holder = {
        let m = Arc::clone(&m);
        thread::spawn(move || {
            let mut holds = Vec::with_capacity(10_000);
            let mut i = 0;
            while Instant::now() < deadline {
                holds.push(slow_update(&m, hold, i, base));
                busy_for(Duration::from_millis(GAP_MS), i);
                i += 1;
            }
            holds
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                let mut waits = Vec::with_capacity(100_000);
                let mut sum = 0u64;
                while Instant::now() < deadline {
                    let (w, v) = fast_read(&m, base);
                    waits.push(w);
                    sum = sum.wrapping_add(v);
                    thread::sleep(Duration::from_micros(READ_GAP_US));
                }
                black_box(sum);
                waits
            })
        })
        .collect();
    let holds: Vec<Interval> = holder.join().unwrap();
    let waits: Vec<Interval> = readers
        .into_iter()
        .flat_map(|r| r.join().unwrap())
        .collect();
    let wall = ns(base);
    let wait: u64 = waits.iter().map(|w| w.b - w.a).sum();
    let held: u64 = holds.iter().map(|h| h.b - h.a).sum();
    let mut blame = 0;
    for w in &waits {
        let first = holds.partition_point(|h| h.b <= w.a);
        for h in holds[first..].iter().take_while(|h| h.a < w.b) {
            blame += h.b.min(w.b).saturating_sub(h.a.max(w.a));
        }
    }
    println!(
        "parking_lot_holder: {:.2} s, {} slow holds, {} reads waited {:.3} s ({:.3} s during slow holds)",
        wall as f64 / 1e9,
        holds.len(),
        waits.len(),
        wait as f64 / 1e9,
        blame as f64 / 1e9
    );
    println!(
        "truth wait_readers_ns={wait} blame_slow_update_ns={blame} held_ns={held} holds={} reads={} wall_ns={wall}",
        holds.len(),
        waits.len()
    );
}
