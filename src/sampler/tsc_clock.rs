//! The time-stamp counter as the runtime's monotonic clock, where the kernel keeps its own
//! clock on it.
//!
//! Job: the lock policy reads the clock at both ends of a critical section it measures, and
//! a vDSO `clock_gettime` costs about twice an `rdtsc` (17 ns against 7.5 on the development
//! machine, issue 22): time the program's critical sections pay for. [`monotonic_ns`] is
//! one `rdtsc`, a multiply and a shift, once calibrated.
//!
//! When it is used: on x86-64, when the kernel's clock source is `tsc` at start-up (the
//! kernel chose the TSC as synchronised across CPUs) and the CPU says the TSC is invariant
//! (`constant_tsc`, `nonstop_tsc`): one rate, in every state and on every CPU. Otherwise,
//! and before calibration, [`monotonic_ns`] reads the vDSO's `CLOCK_MONOTONIC`. Not
//! re-checked later: a TSC the kernel's watchdog marks unstable during the run, or one
//! reset by a suspend or a migration, is not noticed (a reading before the origin counts as
//! the origin, so the clock stalls rather than running backwards).
//!
//! Calibration: [`init`] (at start-up) pairs a TSC reading with `CLOCK_MONOTONIC_RAW`; the
//! first reading at least [`CALIBRATION_NS`] later pairs them again and fixes the rate
//! (32.32 fixed point) and the origin (that moment's `CLOCK_MONOTONIC`, so readings taken
//! before and after the switch line up to a few hundred ns). A pair is taken only between
//! two TSC readings at most [`PAIR_TICKS`] apart (the narrowest of a few tries), so that a
//! preemption cannot skew it: the rate is off by under 100 parts per million (two such
//! brackets over 10 ms), typically a few. Calibration that keeps failing gives up
//! ([`MAX_FAILED_PAIRS`]): the vDSO from then on. `rdtsc` is not ordered with the
//! instructions around it (no `lfence`: it would cost the critical sections what this
//! saves), so a reading may be early by a few tens of ns.
//! The clock is for durations within the process: it runs at the TSC's rate, not at NTP's
//! slewed one, and nothing compares it with another process's clock.
//!
//! Invariants: the calibration is written once, before `RATE` is published (release), and
//! read after it (acquire). A fork child keeps it (the TSC goes on). Async-signal-safe and
//! allocation-free, except [`init`] (reads two files; start-up only).

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// How long after [`init`] the rate is fixed: long enough for a few parts per million.
pub const CALIBRATION_NS: u64 = 10_000_000;

/// Most TSC ticks between the two readings bracketing a calibration pair (under 1 µs at
/// any rate over 2 GHz; a preempted pair is retried).
const PAIR_TICKS: u64 = 2_000;

/// Tries at a pair within [`PAIR_TICKS`] per calibration attempt.
const PAIR_TRIES: u32 = 4;

/// Calibration attempts whose pairs all failed before the TSC is given up.
const MAX_FAILED_PAIRS: u32 = 1_000;
static FAILED_PAIRS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Nanoseconds per tick, in 32.32 fixed point; 0 until calibrated.
static RATE: AtomicU64 = AtomicU64::new(0);
/// The TSC reading and the `CLOCK_MONOTONIC` time of the calibration's origin.
static ORIGIN_TSC: AtomicU64 = AtomicU64::new(0);
static ORIGIN_NS: AtomicU64 = AtomicU64::new(0);
/// The first pair (TSC, `CLOCK_MONOTONIC_RAW`), taken by [`init`], and its
/// `CLOCK_MONOTONIC`.
static FIRST_TSC: AtomicU64 = AtomicU64::new(0);
static FIRST_RAW_NS: AtomicU64 = AtomicU64::new(0);
static FIRST_NS: AtomicU64 = AtomicU64::new(0);

const UNUSABLE: u8 = 0;
const CALIBRATING: u8 = 1;
const FIXING: u8 = 2;
const CALIBRATED: u8 = 3;
static STATE: AtomicU8 = AtomicU8::new(UNUSABLE);

/// A fixed conversion from TSC ticks to nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Calibration {
    /// Nanoseconds per tick, 32.32 fixed point.
    pub rate: u64,
    pub origin_tsc: u64,
    pub origin_ns: u64,
}

impl Calibration {
    /// The conversion measured by two (TSC, ns) pairs `first` and `second` of one clock,
    /// with its origin at (`second`'s TSC, `origin_ns`). `None` unless the TSC ran at a
    /// plausible rate (10 MHz to 100 GHz) between them.
    pub fn between(first: (u64, u64), second: (u64, u64), origin_ns: u64) -> Option<Calibration> {
        let ticks = second.0.checked_sub(first.0)?;
        let ns = second.1.checked_sub(first.1)?;
        if ns == 0 || !(ns / 100..=ns.saturating_mul(100)).contains(&ticks) {
            return None;
        }
        let rate = u64::try_from((u128::from(ns) << 32) / u128::from(ticks)).ok()?;
        Some(Calibration {
            rate,
            origin_tsc: second.0,
            origin_ns,
        })
    }

    /// The time of TSC reading `tsc` (a reading just before the origin, from a CPU whose
    /// counter lags by a few ticks, is the origin).
    #[inline(always)]
    pub fn ns(&self, tsc: u64) -> u64 {
        let ticks = tsc.saturating_sub(self.origin_tsc);
        self.origin_ns
            .wrapping_add(((u128::from(ticks) * u128::from(self.rate)) >> 32) as u64)
    }
}

/// Start-up: if the TSC can serve as the clock, takes the first calibration pair.
pub fn init() {
    if !cfg!(target_arch = "x86_64") || !kernel_trusts_tsc() {
        return;
    }
    if let Some((tsc, raw, mono)) = pair() {
        FIRST_TSC.store(tsc, Ordering::Relaxed);
        FIRST_RAW_NS.store(raw, Ordering::Relaxed);
        FIRST_NS.store(mono, Ordering::Relaxed);
        STATE.store(CALIBRATING, Ordering::Release);
    }
}

/// Whether the kernel's clock source is the TSC and the TSC is invariant.
fn kernel_trusts_tsc() -> bool {
    let source =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    if source.map_or(true, |s| s.trim() != "tsc") {
        return false;
    }
    use std::io::BufRead;
    let Ok(cpuinfo) = std::fs::File::open("/proc/cpuinfo") else {
        return false;
    };
    let flags = std::io::BufReader::new(cpuinfo)
        .lines()
        .map_while(Result::ok)
        .find(|line| line.starts_with("flags"));
    flags.is_some_and(|line| {
        ["constant_tsc", "nonstop_tsc"]
            .iter()
            .all(|flag| line.split_whitespace().any(|w| w == *flag))
    })
}

/// Monotonic time in nanoseconds: from the TSC once calibrated, else from the vDSO's
/// `CLOCK_MONOTONIC`.
#[inline(always)]
pub fn monotonic_ns() -> u64 {
    let rate = RATE.load(Ordering::Acquire);
    if rate == 0 {
        return uncalibrated();
    }
    Calibration {
        rate,
        origin_tsc: ORIGIN_TSC.load(Ordering::Relaxed),
        origin_ns: ORIGIN_NS.load(Ordering::Relaxed),
    }
    .ns(rdtsc())
}

/// `CLOCK_MONOTONIC`, and the calibration fixed if [`CALIBRATION_NS`] have passed since
/// [`init`]'s pair (by one caller; the others read on).
#[cold]
#[inline(never)]
fn uncalibrated() -> u64 {
    let now = read_clock(libc::CLOCK_MONOTONIC).unwrap_or(0);
    if STATE.load(Ordering::Acquire) == CALIBRATING
        && now.saturating_sub(FIRST_NS.load(Ordering::Relaxed)) >= CALIBRATION_NS
    {
        calibrate();
    }
    now
}

/// Fixes the calibration with a second pair, unless another thread is at it or the pair
/// is spoilt (the next call tries again).
fn calibrate() {
    let Some((tsc, raw, mono)) = pair() else {
        if FAILED_PAIRS.fetch_add(1, Ordering::Relaxed) + 1 >= MAX_FAILED_PAIRS {
            let _ =
                STATE.compare_exchange(CALIBRATING, UNUSABLE, Ordering::Release, Ordering::Relaxed);
        }
        return;
    };
    if STATE
        .compare_exchange(CALIBRATING, FIXING, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    let first = (
        FIRST_TSC.load(Ordering::Relaxed),
        FIRST_RAW_NS.load(Ordering::Relaxed),
    );
    match Calibration::between(first, (tsc, raw), mono) {
        Some(c) => {
            ORIGIN_TSC.store(c.origin_tsc, Ordering::Relaxed);
            ORIGIN_NS.store(c.origin_ns, Ordering::Relaxed);
            RATE.store(c.rate, Ordering::Release);
            STATE.store(CALIBRATED, Ordering::Release);
        }
        None => STATE.store(UNUSABLE, Ordering::Release),
    }
}

/// A TSC reading with `CLOCK_MONOTONIC_RAW` and `CLOCK_MONOTONIC` read between it and a
/// second reading at most [`PAIR_TICKS`] later (the narrowest of [`PAIR_TRIES`]); `None` if
/// no try was that close.
fn pair() -> Option<(u64, u64, u64)> {
    let mut best: Option<(u64, (u64, u64, u64))> = None;
    for _ in 0..PAIR_TRIES {
        let before = rdtsc();
        let raw = read_clock(libc::CLOCK_MONOTONIC_RAW)?;
        let mono = read_clock(libc::CLOCK_MONOTONIC)?;
        let after = rdtsc();
        let width = after.wrapping_sub(before);
        if width <= PAIR_TICKS && best.map_or(true, |(w, _)| width < w) {
            best = Some((width, (before / 2 + after / 2, raw, mono)));
        }
    }
    best.map(|(_, pair)| pair)
}

/// Clock `clock` in nanoseconds (`clock_gettime`); `None` if it cannot be read. Also
/// `sampler::clock`'s, for the other clocks.
pub(super) fn read_clock(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime is async-signal-safe.
    (unsafe { libc::clock_gettime(clock, &mut ts) } == 0)
        .then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// The time-stamp counter (0 off x86-64, where [`init`] never enables the clock).
#[inline(always)]
fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `rdtsc` reads a counter; every x86-64 CPU has it and it has no side effects.
    unsafe {
        std::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calibration_converts_ticks_at_the_measured_rate() {
        // 2.5 GHz: 25,000,000 ticks in 10 ms.
        let c = Calibration::between((1_000, 50), (25_001_000, 10_000_050), 7_000).unwrap();
        assert_eq!(c.ns(25_001_000), 7_000, "the origin");
        assert_eq!(
            c.ns(25_001_000 - 40),
            7_000,
            "a lagging reading is the origin"
        );
        let one_second = c.ns(25_001_000 + 2_500_000_000) - 7_000;
        assert!(
            one_second.abs_diff(1_000_000_000) <= 1,
            "2.5e9 ticks are a second: {one_second}"
        );
        let a_day = c.ns(25_001_000 + 2_500_000_000 * 86_400) - 7_000;
        assert!(a_day.abs_diff(86_400_000_000_000) <= 100_000, "{a_day}");
    }

    /// On this machine: once calibrated (if the kernel trusts the TSC), the clock keeps pace
    /// with `CLOCK_MONOTONIC` and never runs backwards; otherwise it is the kernel's.
    #[test]
    fn the_clock_keeps_pace_with_the_kernels() {
        init();
        let usable = STATE.load(Ordering::Acquire) != UNUSABLE;
        assert_eq!(usable, kernel_trusts_tsc() && cfg!(target_arch = "x86_64"));
        std::thread::sleep(std::time::Duration::from_nanos(CALIBRATION_NS + 2_000_000));
        for _ in 0..1000 {
            monotonic_ns();
            if RATE.load(Ordering::Acquire) != 0 {
                break;
            }
        }
        assert_eq!(
            RATE.load(Ordering::Acquire) != 0,
            usable,
            "calibrated when usable, a few pairs after the window"
        );
        let kernel = || read_clock(libc::CLOCK_MONOTONIC).unwrap();
        // Ours between two of the kernel's, close together (retried past a preemption).
        let bracketed = || loop {
            let (k0, t, k1) = (kernel(), monotonic_ns(), kernel());
            if k1 - k0 < 20_000 {
                break (t, k0 / 2 + k1 / 2);
            }
        };
        let (t0, k0) = bracketed();
        assert!(t0.abs_diff(k0) < 1_000_000, "{t0} vs {k0}");
        let mut last = t0;
        for _ in 0..100_000 {
            let t = monotonic_ns();
            assert!(t >= last, "backwards: {t} after {last}");
            last = t;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        let (t1, k1) = bracketed();
        let (ours, theirs) = ((t1 - t0) as f64, (k1 - k0) as f64);
        // The rate within 0.1% (the calibration's bound, and NTP's slew of the kernel's
        // clock, are far smaller), and the brackets' width.
        assert!(
            (ours / theirs - 1.0).abs() < 0.002,
            "{ours} ns against the kernel's {theirs}"
        );
    }

    #[test]
    fn implausible_rates_are_refused() {
        assert_eq!(Calibration::between((10, 0), (10, 1_000), 0), None);
        assert_eq!(Calibration::between((10, 0), (5, 1_000), 0), None);
        assert_eq!(Calibration::between((0, 0), (1_000_000, 0), 0), None);
        assert_eq!(
            Calibration::between((0, 0), (1_000_000_000, 1), 0),
            None,
            "1e18 Hz"
        );
        assert!(Calibration::between((0, 0), (100, 1_000), 0).is_some());
    }
}
