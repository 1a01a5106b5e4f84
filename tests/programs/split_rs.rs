//! split_rs: the Rust twin of split.c. Threads alternate `hot_a` (~70% of CPU) and `hot_b`
//! (~30%), each call bracketed with CLOCK_THREAD_CPUTIME_ID.
//!
//! Build: rustc -O -g split_rs.rs
//! usage: split_rs [THREADS=3] [CPU_SECONDS_PER_THREAD=2]
//! Last stdout line: `truth threads=N hot_a_ns=A hot_b_ns=B total_cpu_ns=T`.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;

#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
}

const CLOCK_PROCESS_CPUTIME_ID: i32 = 2;
const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
const UNIT: u64 = 40_000;

static A_NS: AtomicU64 = AtomicU64::new(0);
static B_NS: AtomicU64 = AtomicU64::new(0);

fn clock_ns(clock: i32) -> u64 {
    let mut ts = Timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[inline(never)]
fn hot_a(units: u64) -> u64 {
    let mut x = 0u64;
    for i in 0..units * UNIT {
        x = black_box(x.wrapping_add(i));
    }
    x
}

#[inline(never)]
fn hot_b(units: u64) -> u64 {
    let mut x = 1u64;
    for i in 0..units * UNIT {
        x = black_box(x ^ i.wrapping_mul(3));
    }
    x
}

#[inline(never)]
fn worker(budget_ns: u64) {
    let start = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    let (mut a, mut b) = (0u64, 0u64);
    loop {
        let t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        if t0 - start >= budget_ns {
            break;
        }
        black_box(hot_a(7));
        let t1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        black_box(hot_b(3));
        let t2 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        a += t1 - t0;
        b += t2 - t1;
    }
    A_NS.fetch_add(a, Ordering::Relaxed);
    B_NS.fetch_add(b, Ordering::Relaxed);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let threads: usize = args.get(1).map_or(3, |s| s.parse().expect("THREADS"));
    let seconds: f64 = args.get(2).map_or(2.0, |s| s.parse().expect("CPU_SECONDS"));
    let budget = (seconds * 1e9) as u64;
    let handles: Vec<_> = (0..threads)
        .map(|_| thread::spawn(move || worker(budget)))
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    println!(
        "truth threads={} hot_a_ns={} hot_b_ns={} total_cpu_ns={}",
        threads,
        A_NS.load(Ordering::Relaxed),
        B_NS.load(Ordering::Relaxed),
        clock_ns(CLOCK_PROCESS_CPUTIME_ID)
    );
}
