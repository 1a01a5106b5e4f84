//! rust_std: Rust's std::sync locks (futex-based: they wait in `syscall(SYS_futex, ...)`),
//! three phases in one run, one slow holder on top.
//!
//! 1. Mutex: `slow_update` holds a Mutex for HOLD_MS of computing, then computes GAP_MS
//!    outside it; two readers call `fast_read` (a hold of a few µs) and sleep READ_GAP_US.
//!    The readers wait behind slow_update: the culprit.
//! 2. RwLock: `rewrite` holds the write lock for HOLD_MS (then GAP_MS outside); two readers
//!    call `lookup` (a short read hold) and sleep READ_GAP_US.
//! 3. Condvar: a producer computes each item for PRODUCE_MS and `publish`es it (push under
//!    the Mutex, notify_one); two consumers wait in `take` (Condvar::wait), then sleep
//!    CONSUME_US. Their waiting is publish's doing.
//! The phases are sized so that slow_update causes the most waiting of all.
//!
//! Usage: rust_std [scale=1.0]   (scale 1.0: phases of 0.7, 0.35 and 0.3 s)
//! Build: rustc -O -C debuginfo=line-tables-only benchmarks/workloads/rust_std.rs
//!
//! Truth (CLOCK_MONOTONIC via Instant), blameprof's futex kind (docs/lock-blame.md):
//! - Mutex and RwLock: every lock()/read()/write() call [called, returned] is a wait, every
//!   guard's life a hold; blame.futex of a function = the overlap of the waits with its
//!   holds (a writer's hold for the readers it blocks, a reader's for a writer); idleness.futex
//!   = the waits that overlap some hold (waits under 20 µs are left out: they ended in
//!   std's spin before any FUTEX_WAIT). Per-address futex blame goes to the FUTEX_WAKE that
//!   ends a wait; with a queue of two readers, the second one's wake comes from the first
//!   reader's unlock, and blameprof's wake chain hands the part of it that overlaps the
//!   first reader's own wait back to slow_update's wake: holds, in effect.
//! - Condvar: every Condvar::wait [called, returned] is a wait of take; every notify an
//!   event of publish (close()'s notify_all one of `close`); blame.futex of publish = the
//!   waiting in (previous notify, its notify]; idleness.futex of take = those waits (the
//!   futex wait lasts until the wake; retaking the Mutex after it is microseconds).

#[path = "../../tests/programs/rust_truth.rs"]
#[allow(dead_code)]
mod rust_truth;

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread;
use std::time::{Duration, Instant};

use rust_truth::{busy_for, ns};

const HOLD_MS: u64 = 4;
const GAP_MS: u64 = 1;
const READ_GAP_US: u64 = 150;
const PRODUCE_MS: u64 = 2;
const CONSUME_US: u64 = 300;
/// A lock wait shorter than this ended while spinning, before any FUTEX_WAIT.
const SPIN_ONLY_NS: u64 = 20_000;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum F {
    SlowUpdate,
    FastRead,
    Rewrite,
    Lookup,
    Publish,
    Take,
    Close,
}
const FUNCS: [F; 7] = [F::SlowUpdate, F::FastRead, F::Rewrite, F::Lookup, F::Publish, F::Take, F::Close];
fn name(f: F) -> &'static str {
    match f {
        F::SlowUpdate => "slow_update",
        F::FastRead => "fast_read",
        F::Rewrite => "rewrite",
        F::Lookup => "lookup",
        F::Publish => "publish",
        F::Take => "take",
        F::Close => "close",
    }
}

/// An interval [a, b] of function f (a wait or a hold; an event has a == b).
#[derive(Clone, Copy)]
struct Iv {
    a: u64,
    b: u64,
    f: F,
}

#[derive(Default)]
struct Truth {
    blame: [u64; 7],
    idle: [u64; 7],
}

impl Truth {
    /// Hold model: blame[holder] += overlap(wait, hold); idle[waiter] += wait if it
    /// overlapped a hold (of another function or thread: a thread never waits on its own).
    /// Waits shorter than SPIN_ONLY_NS are left out: std's locks spin briefly before they
    /// call FUTEX_WAIT, and a wait that ends within the spin is no futex wait at all.
    fn holds(&mut self, holds: &mut Vec<Iv>, waits: &[Iv]) {
        holds.sort_by_key(|h| h.a);
        for w in waits.iter().filter(|w| w.b - w.a >= SPIN_ONLY_NS) {
            let mut any = false;
            // Read holds may overlap each other: scan every hold that starts before w.b.
            let end = holds.partition_point(|h| h.a < w.b);
            for h in &holds[..end] {
                let (s, e) = (h.a.max(w.a), h.b.min(w.b));
                if e > s {
                    self.blame[h.f as usize] += e - s;
                    any = true;
                }
            }
            if any {
                self.idle[w.f as usize] += w.b - w.a;
            }
        }
    }

    /// Event model: blame[event fn] += the part of each wait in (previous event, event];
    /// idle[waiter] += the wait up to its last event.
    fn events(&mut self, events: &mut Vec<Iv>, waits: &[Iv]) {
        events.sort_by_key(|e| e.a);
        for w in waits {
            let mut from = w.a;
            let first = events.partition_point(|e| e.a <= w.a);
            for e in events[first..].iter().take_while(|e| e.a <= w.b) {
                self.blame[e.f as usize] += e.a - from;
                from = e.a;
            }
            self.idle[w.f as usize] += from - w.a;
        }
    }
}

// ---------------------------------------------------------------------------------------
// 1. Mutex

#[inline(never)]
fn slow_update(m: &Mutex<u64>, i: u64, base: Instant, holds: &mut Vec<Iv>, waits: &mut Vec<Iv>) {
    let a = ns(base);
    let mut g = m.lock().unwrap();
    let h = ns(base);
    *g = g.wrapping_add(busy_for(Duration::from_millis(HOLD_MS), i));
    let b = ns(base);
    drop(g);
    waits.push(Iv { a, b: h, f: F::SlowUpdate });
    holds.push(Iv { a: h, b, f: F::SlowUpdate });
}

#[inline(never)]
fn fast_read(m: &Mutex<u64>, base: Instant, holds: &mut Vec<Iv>, waits: &mut Vec<Iv>) -> u64 {
    let a = ns(base);
    let g = m.lock().unwrap();
    let h = ns(base);
    let v = black_box(*g);
    let b = ns(base);
    drop(g);
    waits.push(Iv { a, b: h, f: F::FastRead });
    holds.push(Iv { a: h, b, f: F::FastRead });
    v
}

fn mutex_phase(secs: f64, truth: &mut Truth) {
    let m = Arc::new(Mutex::new(0u64));
    let base = Instant::now();
    let deadline = base + Duration::from_secs_f64(secs);
    let holder = {
        let m = Arc::clone(&m);
        thread::spawn(move || {
            let (mut holds, mut waits) = (Vec::with_capacity(1000), Vec::with_capacity(1000));
            let mut i = 0;
            while Instant::now() < deadline {
                slow_update(&m, i, base, &mut holds, &mut waits);
                busy_for(Duration::from_millis(GAP_MS), i);
                i += 1;
            }
            (holds, waits)
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let m = Arc::clone(&m);
            thread::spawn(move || {
                let (mut holds, mut waits) = (Vec::with_capacity(10000), Vec::with_capacity(10000));
                let mut sum = 0u64;
                while Instant::now() < deadline {
                    sum = sum.wrapping_add(fast_read(&m, base, &mut holds, &mut waits));
                    thread::sleep(Duration::from_micros(READ_GAP_US));
                }
                black_box(sum);
                (holds, waits)
            })
        })
        .collect();
    let (mut holds, mut waits) = holder.join().unwrap();
    for r in readers {
        let (h, w) = r.join().unwrap();
        holds.extend(h);
        waits.extend(w);
    }
    truth.holds(&mut holds, &waits);
}

// ---------------------------------------------------------------------------------------
// 2. RwLock

#[inline(never)]
fn rewrite(rw: &RwLock<Vec<u64>>, i: u64, base: Instant, holds: &mut Vec<Iv>, waits: &mut Vec<Iv>) {
    let a = ns(base);
    let mut g = rw.write().unwrap();
    let h = ns(base);
    let v = busy_for(Duration::from_millis(HOLD_MS), i);
    let n = g.len();
    g[(i as usize) % n] = v;
    let b = ns(base);
    drop(g);
    waits.push(Iv { a, b: h, f: F::Rewrite });
    holds.push(Iv { a: h, b, f: F::Rewrite });
}

#[inline(never)]
fn lookup(rw: &RwLock<Vec<u64>>, i: u64, base: Instant, holds: &mut Vec<Iv>, waits: &mut Vec<Iv>) -> u64 {
    let a = ns(base);
    let g = rw.read().unwrap();
    let h = ns(base);
    let v = g[(i as usize) % g.len()];
    let b = ns(base);
    drop(g);
    waits.push(Iv { a, b: h, f: F::Lookup });
    holds.push(Iv { a: h, b, f: F::Lookup });
    v
}

fn rwlock_phase(secs: f64, truth: &mut Truth) {
    let rw = Arc::new(RwLock::new(vec![0u64; 64]));
    let base = Instant::now();
    let deadline = base + Duration::from_secs_f64(secs);
    let writer = {
        let rw = Arc::clone(&rw);
        thread::spawn(move || {
            let (mut holds, mut waits) = (Vec::with_capacity(1000), Vec::with_capacity(1000));
            let mut i = 0;
            while Instant::now() < deadline {
                rewrite(&rw, i, base, &mut holds, &mut waits);
                busy_for(Duration::from_millis(GAP_MS), i);
                i += 1;
            }
            (holds, waits)
        })
    };
    let readers: Vec<_> = (0..2u64)
        .map(|r| {
            let rw = Arc::clone(&rw);
            thread::spawn(move || {
                let (mut holds, mut waits) = (Vec::with_capacity(10000), Vec::with_capacity(10000));
                let (mut sum, mut i) = (0u64, r);
                while Instant::now() < deadline {
                    sum = sum.wrapping_add(lookup(&rw, i, base, &mut holds, &mut waits));
                    i += 1;
                    thread::sleep(Duration::from_micros(READ_GAP_US));
                }
                black_box(sum);
                (holds, waits)
            })
        })
        .collect();
    let (wholds, wwaits) = writer.join().unwrap();
    let (mut rholds, mut rwaits) = (Vec::new(), Vec::new());
    for r in readers {
        let (h, w) = r.join().unwrap();
        rholds.extend(h);
        rwaits.extend(w);
    }
    // Readers wait for the writer's holds, the writer for the readers'.
    truth.holds(&mut wholds.clone(), &rwaits);
    truth.holds(&mut rholds, &wwaits);
}

// ---------------------------------------------------------------------------------------
// 3. Condvar

struct Queue {
    items: VecDeque<u64>,
    closed: bool,
    events: Vec<Iv>,
}
type Shared = (Mutex<Queue>, Condvar);

#[inline(never)]
fn produce(i: u64) -> u64 {
    busy_for(Duration::from_millis(PRODUCE_MS), i)
}

#[inline(never)]
fn publish(s: &Shared, item: u64, base: Instant) {
    let mut q = s.0.lock().unwrap();
    q.items.push_back(item);
    let t = ns(base);
    q.events.push(Iv { a: t, b: t, f: F::Publish });
    s.1.notify_one();
    drop(q);
}

#[inline(never)]
fn close(s: &Shared, base: Instant) {
    let mut q = s.0.lock().unwrap();
    q.closed = true;
    let t = ns(base);
    q.events.push(Iv { a: t, b: t, f: F::Close });
    s.1.notify_all();
    drop(q);
}

#[inline(never)]
fn take(s: &Shared, waits: &mut Vec<Iv>, base: Instant) -> Option<u64> {
    let mut q = s.0.lock().unwrap();
    while q.items.is_empty() && !q.closed {
        let a = ns(base);
        q = s.1.wait(q).unwrap();
        waits.push(Iv { a, b: ns(base), f: F::Take });
    }
    q.items.pop_front()
}

fn condvar_phase(secs: f64, truth: &mut Truth) -> u64 {
    let s: Arc<Shared> = Arc::new((
        Mutex::new(Queue { items: VecDeque::new(), closed: false, events: Vec::with_capacity(10000) }),
        Condvar::new(),
    ));
    let base = Instant::now();
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let s = Arc::clone(&s);
            thread::spawn(move || {
                let mut waits = Vec::with_capacity(10000);
                let mut n = 0u64;
                while let Some(v) = take(&s, &mut waits, base) {
                    black_box(v);
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
        let v = produce(items);
        publish(&s, v, base);
        items += 1;
    }
    close(&s, base);
    let (mut waits, mut taken) = (Vec::new(), 0);
    for c in consumers {
        let (w, n) = c.join().unwrap();
        waits.extend(w);
        taken += n;
    }
    assert_eq!(taken, items, "produced {items}, consumed {taken}");
    let mut events = std::mem::take(&mut s.0.lock().unwrap().events);
    truth.events(&mut events, &waits);
    items
}

fn main() {
    let scale: f64 = std::env::args().nth(1).map_or(1.0, |s| s.parse().expect("scale"));
    if !(scale > 0.0 && scale <= 1000.0) {
        eprintln!("usage: rust_std [scale]");
        std::process::exit(2);
    }
    let t0 = Instant::now();
    let mut truth = Truth::default();
    mutex_phase(0.7 * scale, &mut truth);
    rwlock_phase(0.35 * scale, &mut truth);
    let items = condvar_phase(0.3 * scale, &mut truth);
    println!(
        "rust_std: {:.2} s (mutex, rwlock, condvar phases), {items} items",
        t0.elapsed().as_secs_f64()
    );
    for f in FUNCS {
        println!(
            "  {:<12} waited={:.3} s blame={:.3} s",
            name(f),
            truth.idle[f as usize] as f64 / 1e9,
            truth.blame[f as usize] as f64 / 1e9
        );
    }
    for f in FUNCS {
        if f == F::Close {
            continue;
        }
        // take's own blame (its Mutex unlock waking the other consumer, microseconds) is not
        // modelled: the condvar phase's truth covers the Condvar waits only.
        if f != F::Take {
            println!("truth blame.futex {} {}", name(f), truth.blame[f as usize]);
        }
        println!("truth idleness.futex {} {}", name(f), truth.idle[f as usize]);
    }
    println!("truth culprit slow_update");
    println!("truth candidates slow_update,fast_read,rewrite,lookup,publish,take");
}
