//! Ground truth shared by the Rust wait workloads (rust_waits.rs, and
//! examples/parking_lot_holder.rs, which includes it with `#[path]`): busy work, logged
//! intervals, and the "one slow holder, two fast readers" workload with its truth line.
//!
//! All times are CLOCK_MONOTONIC (std::time::Instant), in nanoseconds since a `base`.

use std::hint::black_box;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// What the holder computes between two holds.
pub const GAP_MS: u64 = 1;
/// What a reader sleeps between two reads.
pub const READ_GAP_US: u64 = 150;

/// Nanoseconds since `base`.
pub fn ns(base: Instant) -> u64 {
    base.elapsed().as_nanos() as u64
}

/// Burns the CPU for `d` of wall-clock time.
#[inline(never)]
pub fn busy_for(d: Duration, seed: u64) -> u64 {
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

/// One logged interval [a, b] (ns since the workload's base).
#[derive(Clone, Copy)]
pub struct Interval {
    pub a: u64,
    pub b: u64,
}

/// Total length of the overlaps of `waits` with the sorted, disjoint `holds`.
pub fn overlap_with(holds: &[Interval], waits: &[Interval]) -> u64 {
    let mut total = 0;
    for w in waits {
        let first = holds.partition_point(|h| h.b <= w.a);
        for h in holds[first..].iter().take_while(|h| h.a < w.b) {
            let (s, e) = (h.a.max(w.a), h.b.min(w.b));
            total += e.saturating_sub(s);
        }
    }
    total
}

pub fn total_len(ivals: &[Interval]) -> u64 {
    ivals.iter().map(|w| w.b - w.a).sum()
}

/// The logs of one [`holder_and_readers`] run.
pub struct HoldRun {
    /// The holder's holds, in order.
    pub holds: Vec<Interval>,
    /// Both readers' waits.
    pub waits: Vec<Interval>,
    pub wall: u64,
}

/// Until `secs` after `base`: one thread calls `hold(lock, i)` (a long hold, returned) and
/// computes GAP_MS after each; two readers call `read(lock, i)` (a short hold: its wait and
/// what it read) and sleep READ_GAP_US after each, `i` counting from the reader's number.
pub fn holder_and_readers<L: Send + Sync + 'static>(
    lock: L,
    base: Instant,
    secs: f64,
    hold: impl Fn(&L, u64) -> Interval + Send + 'static,
    read: impl Fn(&L, u64) -> (Interval, u64) + Copy + Send + 'static,
) -> HoldRun {
    let lock = Arc::new(lock);
    let deadline = base + Duration::from_secs_f64(secs);
    let holder = {
        let lock = Arc::clone(&lock);
        thread::spawn(move || {
            let mut holds = Vec::with_capacity(10_000);
            let mut i = 0;
            while Instant::now() < deadline {
                holds.push(hold(&lock, i));
                busy_for(Duration::from_millis(GAP_MS), i);
                i += 1;
            }
            holds
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let lock = Arc::clone(&lock);
            thread::spawn(move || {
                let mut waits = Vec::with_capacity(100_000);
                let mut sum = 0u64;
                let mut i = r;
                while Instant::now() < deadline {
                    let (w, v) = read(&lock, i);
                    waits.push(w);
                    sum = sum.wrapping_add(v);
                    i += 1;
                    thread::sleep(Duration::from_micros(READ_GAP_US));
                }
                black_box(sum);
                waits
            })
        })
        .collect();
    let holds = holder.join().unwrap();
    let waits = readers
        .into_iter()
        .flat_map(|r| r.join().unwrap())
        .collect();
    HoldRun {
        holds,
        waits,
        wall: ns(base),
    }
}

impl HoldRun {
    /// Prints `<what>: .. s, <n> <holds_are>, .. reads waited .. s (.. s during <holds_are>)`
    /// and the truth line `truth wait_readers_ns=.. blame_<holder>_ns=.. held_ns=..
    /// <count_key>=.. reads=.. wall_ns=..`: the readers' waiting, the part of it that
    /// overlaps the holds, the holds' total length and number.
    pub fn print(&self, what: &str, holds_are: &str, holder: &str, count_key: &str) {
        let (holds, waits, wall) = (&self.holds, &self.waits, self.wall);
        let wait = total_len(waits);
        let blame = overlap_with(holds, waits);
        println!(
            "{what}: {:.2} s, {} {holds_are}, {} reads waited {:.3} s ({:.3} s during {holds_are})",
            wall as f64 / 1e9,
            holds.len(),
            waits.len(),
            wait as f64 / 1e9,
            blame as f64 / 1e9
        );
        println!(
            "truth wait_readers_ns={wait} blame_{holder}_ns={blame} held_ns={} {count_key}={} reads={} wall_ns={wall}",
            total_len(holds),
            holds.len(),
            waits.len()
        );
    }
}
