//! rust_waits: waits on Rust's std::sync primitives (futex-based: they block in
//! `syscall(SYS_futex, ...)`), each with a known culprit.
//!
//! Usage: rust_waits MODE [seconds=1] [hold_ms=4]
//!
//! - `mutex`: `slow_update` holds a Mutex for hold_ms of computing (then computes GAP_MS
//!   outside it); two readers call `fast_read` (a hold of a few µs, then READ_GAP_US of sleep).
//!   The readers' lock() waiting must be blamed on `slow_update`, where its guard is dropped.
//!   Truth: `wait_readers_ns` (readers' lock() calls), `blame_slow_update_ns` (the part of
//!   those waits that overlaps slow_update's holds), `holds`, `reads`.
//! - `condvar`: a producer computes each item for hold_ms (`produce`), then `publish` pushes it
//!   and calls notify_one; two consumers wait in `take` (Condvar::wait) and sleep
//!   CONSUME_US per item. Truth: `wait_take_ns` (time in Condvar::wait), `blame_publish_ns`
//!   (the waiting up to each notify since the previous one), `items`.
//! - `rwlock`: `rewrite` holds the RwLock's write lock for hold_ms (then computes GAP_MS
//!   outside); two readers call `lookup` (read lock, a few µs, then READ_GAP_US of sleep).
//!   Truth: `wait_readers_ns`, `blame_rewrite_ns` (overlap with rewrite's holds), `writes`.
//! - `timed`: `wait_for_nobody` calls Condvar::wait_timeout and `park_for_nobody`
//!   thread::park_timeout, N_TIMED times each for TIMED_MS, with nobody to notify or unpark:
//!   every wait times out. Truth: `timed_ns`; prints whether every wait timed out.
//!
//! All times are CLOCK_MONOTONIC (std::time::Instant), printed as one `truth k=v ...` line.
//! The `mutex` and `rwlock` workloads (one slow holder, two fast readers) and their truth are
//! rust_truth.rs's, shared with examples/parking_lot_holder.rs.

mod rust_truth;

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread;
use std::time::{Duration, Instant};

use rust_truth::{busy_for, holder_and_readers, ns, total_len, Interval};

const CONSUME_US: u64 = 300;
const N_TIMED: u32 = 8;
const TIMED_MS: u64 = 25;

// ---------------------------------------------------------------------------------------
// mutex

/// One long hold: the guard is dropped here, so the FUTEX_WAKE comes from this function.
#[inline(never)]
fn slow_update(m: &Mutex<u64>, hold: Duration, i: u64, base: Instant) -> Interval {
    let mut g = m.lock().unwrap();
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
    let g = m.lock().unwrap();
    let b = ns(base);
    let v = black_box(*g);
    drop(g);
    (Interval { a, b }, v)
}

fn mutex_mode(secs: f64, hold: Duration) {
    let base = Instant::now();
    let run = holder_and_readers(
        Mutex::new(0u64),
        base,
        secs,
        move |m, i| slow_update(m, hold, i, base),
        move |m, _| fast_read(m, base),
    );
    run.print("rust_waits mutex", "slow holds", "slow_update", "holds");
}

// ---------------------------------------------------------------------------------------
// condvar

struct Queue {
    items: VecDeque<u64>,
    closed: bool,
    /// notify times (ns since base), in order; the last one is close()'s
    events: Vec<u64>,
}

type Shared = (Mutex<Queue>, Condvar);

#[inline(never)]
fn produce(d: Duration, i: u64) -> u64 {
    busy_for(d, i)
}

/// Pushes one item and wakes a consumer: the notify's FUTEX_WAKE comes from here.
#[inline(never)]
fn publish(s: &Shared, item: u64, base: Instant) {
    let mut q = s.0.lock().unwrap();
    q.items.push_back(item);
    let t = ns(base);
    q.events.push(t);
    s.1.notify_one();
    drop(q);
}

#[inline(never)]
fn close(s: &Shared, base: Instant) {
    let mut q = s.0.lock().unwrap();
    q.closed = true;
    let t = ns(base);
    q.events.push(t);
    s.1.notify_all();
    drop(q);
}

/// Takes one item (None once closed and empty), logging each Condvar::wait call.
#[inline(never)]
fn take(s: &Shared, waits: &mut Vec<Interval>, base: Instant) -> Option<u64> {
    let mut q = s.0.lock().unwrap();
    while q.items.is_empty() && !q.closed {
        let a = ns(base);
        q = s.1.wait(q).unwrap();
        waits.push(Interval { a, b: ns(base) });
    }
    q.items.pop_front()
}

fn condvar_mode(secs: f64, produce_time: Duration) {
    let s: Arc<Shared> = Arc::new((
        Mutex::new(Queue {
            items: VecDeque::new(),
            closed: false,
            events: Vec::with_capacity(100_000),
        }),
        Condvar::new(),
    ));
    let base = Instant::now();
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let s = Arc::clone(&s);
            thread::spawn(move || {
                let mut waits = Vec::with_capacity(100_000);
                let mut n = 0u64;
                while take(&s, &mut waits, base).is_some() {
                    n += 1;
                    thread::sleep(Duration::from_micros(CONSUME_US));
                }
                (waits, n)
            })
        })
        .collect();
    let deadline = base + Duration::from_secs_f64(secs);
    let mut items = 0u64;
    while Instant::now() < deadline {
        let v = produce(produce_time, items);
        publish(&s, v, base);
        items += 1;
    }
    close(&s, base);
    let mut waits = Vec::new();
    let mut taken = 0;
    for c in consumers {
        let (w, n) = c.join().unwrap();
        waits.extend(w);
        taken += n;
    }
    let wall = ns(base);
    assert_eq!(taken, items, "produced {items}, consumed {taken}");
    let events = std::mem::take(&mut s.0.lock().unwrap().events);
    let publishes = events.len() - 1; // the last event is close()'s
    let (mut blame_publish, mut blame_close) = (0u64, 0u64);
    for w in &waits {
        let mut from = w.a;
        let first = events.partition_point(|&e| e <= w.a);
        for (k, &e) in events.iter().enumerate().skip(first) {
            if e > w.b {
                break;
            }
            if k < publishes {
                blame_publish += e - from;
            } else {
                blame_close += e - from;
            }
            from = e;
        }
    }
    let wait = total_len(&waits);
    println!(
        "rust_waits condvar: {:.2} s, {items} items, consumers waited {:.3} s in {} waits",
        wall as f64 / 1e9,
        wait as f64 / 1e9,
        waits.len()
    );
    println!(
        "truth wait_take_ns={wait} blame_publish_ns={blame_publish} blame_close_ns={blame_close} waits={} items={items} wall_ns={wall}",
        waits.len()
    );
}

// ---------------------------------------------------------------------------------------
// rwlock

/// One long write hold; the write guard is dropped here (waking the blocked readers).
#[inline(never)]
fn rewrite(rw: &RwLock<Vec<u64>>, hold: Duration, i: u64, base: Instant) -> Interval {
    let mut g = rw.write().unwrap();
    let a = ns(base);
    let v = busy_for(hold, i);
    let n = g.len();
    g[(i as usize) % n] = v;
    let b = ns(base);
    drop(g);
    Interval { a, b }
}

/// A short read; returns the read() wait.
#[inline(never)]
fn lookup(rw: &RwLock<Vec<u64>>, i: u64, base: Instant) -> (Interval, u64) {
    let a = ns(base);
    let g = rw.read().unwrap();
    let b = ns(base);
    let v = g[(i as usize) % g.len()];
    drop(g);
    (Interval { a, b }, v)
}

fn rwlock_mode(secs: f64, hold: Duration) {
    let base = Instant::now();
    let run = holder_and_readers(
        RwLock::new(vec![0u64; 64]),
        base,
        secs,
        move |rw, i| rewrite(rw, hold, i, base),
        move |rw, i| lookup(rw, i, base),
    );
    run.print("rust_waits rwlock", "writes", "rewrite", "writes");
}

// ---------------------------------------------------------------------------------------
// timed

/// Condvar::wait_timeout with nobody to notify: returns how many timed out, and the time.
#[inline(never)]
fn wait_for_nobody(base: Instant) -> (u32, u64) {
    let m = Mutex::new(());
    let cv = Condvar::new();
    let (mut timed_out, mut total) = (0, 0);
    let mut g = m.lock().unwrap();
    for _ in 0..N_TIMED {
        let a = ns(base);
        let (g2, r) = cv.wait_timeout(g, Duration::from_millis(TIMED_MS)).unwrap();
        total += ns(base) - a;
        g = g2;
        // A spurious wake-up would not time out: count only real time-outs.
        timed_out += u32::from(r.timed_out());
    }
    drop(g);
    (timed_out, total)
}

/// thread::park_timeout with nobody to unpark.
#[inline(never)]
fn park_for_nobody(base: Instant) -> (u32, u64) {
    let (mut full, mut total) = (0, 0);
    for _ in 0..N_TIMED {
        let a = ns(base);
        thread::park_timeout(Duration::from_millis(TIMED_MS));
        let d = ns(base) - a;
        total += d;
        full += u32::from(d >= TIMED_MS * 1_000_000);
    }
    (full, total)
}

fn timed_mode() {
    let base = Instant::now();
    let (cv_out, cv_ns) = wait_for_nobody(base);
    let (park_out, park_ns) = park_for_nobody(base);
    let wall = ns(base);
    println!(
        "rust_waits timed: condvar timed out {cv_out}/{N_TIMED}, park ran out {park_out}/{N_TIMED}"
    );
    println!(
        "truth timed_ns={} timed_condvar_ns={cv_ns} timed_park_ns={park_ns} wall_ns={wall}",
        cv_ns + park_ns
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("");
    let secs: f64 = args.get(2).map_or(1.0, |s| s.parse().expect("seconds"));
    let hold_ms: f64 = args.get(3).map_or(4.0, |s| s.parse().expect("hold_ms"));
    let hold = Duration::from_secs_f64(hold_ms / 1e3);
    match mode {
        "mutex" => mutex_mode(secs, hold),
        "condvar" => condvar_mode(secs, hold),
        "rwlock" => rwlock_mode(secs, hold),
        "timed" => timed_mode(),
        _ => {
            eprintln!("usage: rust_waits mutex|condvar|rwlock|timed [seconds] [hold_ms]");
            std::process::exit(2);
        }
    }
}
