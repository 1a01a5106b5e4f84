//! Which lock acquisitions a thread counts for the lock table: one in about
//! [`ACQUISITION_SAMPLING_PERIOD`], or fewer in a thread that takes locks so fast that it
//! would sample more than about one every [`SAMPLE_GAP_NS`]; each counts for the
//! acquisitions since the previous.
//!
//! Job: a per-thread countdown, decremented by every acquisition ([`tick`]); when it reaches
//! zero, [`restart`] draws the next period (uniform in `1..2M`, mean `M`, so that a
//! program's own periodic pattern cannot line up with the sampling) and returns it: the
//! weight of the sampled acquisition, which counts for itself and the period's others to
//! come. The estimate of a lock's acquisitions is the sum of its sampled acquisitions'
//! weights; the part of a thread's last period that never came is taken back from the lock
//! it was credited to ([`take_back`]: at the thread's end, or before that lock is
//! destroyed), so a thread's total is exact and a lock's is unbiased, with a relative error
//! of about `1/sqrt(sampled)` where threads share it with other locks. (Crediting the period
//! that ended instead left each thread's unfinished last period uncounted: a mutex taken
//! 5,173 times by a few threads was reported as 4,377.) The mean `M` starts at 1 (every
//! acquisition counts) and doubles when the rate of the period that ended would sample more
//! than twice every [`SAMPLE_GAP_NS`] at `M`, up to [`ACQUISITION_SAMPLING_PERIOD`] at
//! once and beyond it as the rate requires, and falls back at once when it would sample
//! less than half as often: a thread taking fewer than about one lock every
//! [`SAMPLE_GAP_NS`] counts every acquisition exactly. A sampled acquisition costs a
//! look-up in the lock table (a cache miss or two), which at tens of millions of
//! acquisitions a second made a program of 65 536 mutexes 4% slower (`syncperf_fine`,
//! docs/benchmarks.md).
//!
//! The countdown is decremented on every uncontended acquisition, so it must cost next to
//! nothing: one `sub` on the thread's own memory, with no call. A Rust thread-local in a
//! shared library costs a call to `__tls_get_addr`; the runtime, which is always preloaded,
//! has its thread-locals in the static TLS block instead, at a fixed offset from the thread
//! pointer, the same in every thread (what the initial-exec TLS model relies on). [`init`]
//! measures that offset once, checking that it lies in the static TLS block, and [`tick`]
//! decrements `%fs:offset` directly (x86-64 only; elsewhere, or when the offset cannot be
//! trusted, nothing is counted and the report says acquisitions are unknown). A thread made by raw `clone` without glibc's TLS does not
//! call glibc's lock functions either.
//!
//! Beside the countdown, in the same thread-local block, the thread keeps where its failed
//! trylocks are counted ([`thread_tries`], `pending_counts::PendingTries` in its state) and
//! where the lock inits whose site it could not keep are ([`thread_displaced`],
//! `init_sites::ThreadDisplaced`), so that a failed trylock and a lock's init reach them by
//! the thread pointer too, without a call.
//!
//! Invariants: the countdown is touched only by its own thread (and, for [`restart`], by a
//! signal handler interrupting it, which at worst loses a period); async-signal-safe;
//! allocation-free.

use super::init_sites::ThreadDisplaced;
use super::pending_counts::PendingTries;
use crate::format::ACQUISITION_SAMPLING_PERIOD;
use std::cell::Cell;

/// The time a thread's sampled acquisitions should be apart, at least about (ns).
pub const SAMPLE_GAP_NS: u64 = 100_000;

/// The largest mean period.
const MAX_MEAN: u32 = 1 << 15;
use std::sync::atomic::{AtomicIsize, Ordering};

/// What [`tick`] and [`thread_tries`] reach through the thread pointer.
#[repr(C)]
struct Local {
    /// Acquisitions left until the next sampled one. Starts at 1: a thread's first
    /// acquisition is sampled and draws the first period. First: at the offset measured.
    countdown: Cell<u32>,
    /// The thread's pending failed trylocks (a `&'static PendingTries`), 0 for none.
    tries: Cell<usize>,
    /// The thread's count of displaced init sites (a `&'static ThreadDisplaced`), 0 for
    /// none.
    displaced: Cell<usize>,
}

/// Where [`Local::tries`] and [`Local::displaced`] lie from [`Local::countdown`].
const TRIES_AT: isize = std::mem::offset_of!(Local, tries) as isize;
const DISPLACED_AT: isize = std::mem::offset_of!(Local, displaced) as isize;

std::thread_local! {
    static LOCAL: Local = const {
        Local {
            countdown: Cell::new(1),
            tries: Cell::new(0),
            displaced: Cell::new(0),
        }
    };
    /// What the latest sampled acquisition was credited to (the caller's token, 0: none).
    static CREDITED: Cell<usize> = const { Cell::new(0) };
    /// The period the countdown was last set to (the weight of the acquisition that ends it).
    static PERIOD: Cell<u32> = const { Cell::new(1) };
    /// The thread's generator (0: not seeded yet).
    static RNG: Cell<u64> = const { Cell::new(0) };
    /// The mean of the next period drawn (chosen by the rate of the period before it), and
    /// when the previous period ended (monotonic ns; 0: never).
    static MEAN: Cell<u32> = const { Cell::new(1) };
    static ENDED_AT: Cell<u64> = const { Cell::new(0) };
}

/// `&LOCAL.countdown - thread pointer`, the same for every thread; 0 while unknown (nothing is
/// counted).
static OFFSET: AtomicIsize = AtomicIsize::new(0);

/// The calling thread's pointer (`%fs:0` holds it on x86-64 glibc).
#[cfg(target_arch = "x86_64")]
fn thread_pointer() -> isize {
    let tp: isize;
    // SAFETY: glibc stores the thread control block's own address at %fs:0 (the TLS ABI
    // of x86-64); reading it has no side effect.
    unsafe {
        std::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly, preserves_flags))
    };
    tp
}

/// The calling thread's countdown's offset from its thread pointer.
#[cfg(target_arch = "x86_64")]
fn countdown_offset() -> isize {
    LOCAL.with(|l| &l.countdown as *const Cell<u32> as isize) - thread_pointer()
}

/// Measures the countdown's offset (at start-up, on the main thread) and starts counting,
/// if the countdown lies in the static TLS block (below the thread pointer, within the
/// block's size as glibc reports it): true of a library loaded at start-up, not of one
/// loaded later by `dlopen`, whose thread-locals each thread allocates on demand.
pub fn init() {
    #[cfg(target_arch = "x86_64")]
    {
        let offset = countdown_offset();
        if static_tls_size().is_some_and(|size| offset < 0 && offset.unsigned_abs() <= size) {
            OFFSET.store(offset, Ordering::Relaxed);
        }
    }
}

/// The size of the static TLS block, from glibc's `_dl_get_tls_static_info` (what
/// libthread_db and sanitizers use); `None` without it.
#[cfg(target_arch = "x86_64")]
fn static_tls_size() -> Option<usize> {
    // SAFETY: NUL-terminated name and version; RTLD_DEFAULT searches the loaded objects.
    let f = unsafe {
        libc::dlvsym(
            libc::RTLD_DEFAULT,
            c"_dl_get_tls_static_info".as_ptr(),
            c"GLIBC_PRIVATE".as_ptr(),
        )
    };
    if f.is_null() {
        return None;
    }
    let (mut size, mut align) = (0usize, 0usize);
    // SAFETY: glibc's `void _dl_get_tls_static_info(size_t *sizep, size_t *alignp)`, given
    // two valid places to write.
    unsafe {
        let f: unsafe extern "C" fn(*mut usize, *mut usize) = std::mem::transmute(f);
        f(&mut size, &mut align);
    }
    Some(size)
}

/// A new thread: if its countdown is not where [`init`] found the main thread's (the
/// runtime was not loaded at start-up, so its TLS is not static), stop counting for all.
pub fn check_thread() {
    #[cfg(target_arch = "x86_64")]
    {
        let offset = OFFSET.load(Ordering::Relaxed);
        if offset != 0 && offset != countdown_offset() {
            OFFSET.store(0, Ordering::Relaxed);
        }
    }
}

/// Whether acquisitions are being counted.
pub fn counting() -> bool {
    OFFSET.load(Ordering::Relaxed) != 0
}

/// Counts an acquisition: true when it is a sampled one (then call [`restart`]).
#[inline(always)]
pub fn tick() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let offset = OFFSET.load(Ordering::Relaxed);
        if offset == 0 {
            return false;
        }
        let reached_zero: u8;
        // SAFETY: `offset` is where this thread's countdown lives relative to its thread
        // pointer (`init`, `check_thread`): the decrement touches only the thread's own
        // countdown, a plain u32 no other thread reads.
        unsafe {
            std::arch::asm!(
                "sub dword ptr fs:[{off}], 1",
                "sete {z}",
                off = in(reg) offset,
                z = out(reg_byte) reached_zero,
                options(nostack),
            )
        };
        reached_zero != 0
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// After a sampled acquisition at `now` (monotonic ns): draws the next period and returns
/// it, the weight of the sampled one (itself and the period's others to come). `seed`
/// seeds the thread's generator on first use. The caller says where it credits the weight
/// ([`credited`]).
#[cold]
pub fn restart(now: u64, seed: impl FnOnce() -> u64) -> u32 {
    // The period is drawn with the mean the periods before this one chose, and the period
    // that ended (which holds this acquisition's own wait, when it waited) chooses the
    // next draw's: a weight drawn from a mean this acquisition lowered would credit a lock
    // that is waited for with less than its share (a hot bucket read 19% low).
    let mean = MEAN.with(|m| {
        // The thread's rate over the period that ended, and the mean period that rate
        // would sample every SAMPLE_GAP_NS.
        let since = now.saturating_sub(ENDED_AT.with(|e| e.replace(now))).max(1);
        let ended = u64::from(PERIOD.with(Cell::get));
        let ideal = ended.saturating_mul(SAMPLE_GAP_NS) / since;
        let mean = m.get();
        let mean = if ideal > 2 * u64::from(mean) {
            // Up to the usual period at once (a fast thread's first periods would each
            // cost a table look-up), then by doubling.
            let up = (ideal.next_power_of_two() as u32).min(ACQUISITION_SAMPLING_PERIOD);
            mean.saturating_mul(2).max(up).min(MAX_MEAN)
        } else if ideal < u64::from(mean / 2) {
            // Down at once: a long period would credit a phase's acquisitions to the lock
            // that starts it.
            (ideal.next_power_of_two() as u32).clamp(1, mean)
        } else {
            mean
        };
        m.replace(mean)
    });
    let x = RNG.with(|rng| {
        let x = match rng.get() {
            0 => seed() | 1,
            x => x,
        };
        let x = xorshift(x);
        rng.set(x);
        x
    });
    let next = 1 + (x % u64::from(2 * mean - 1)) as u32;
    PERIOD.with(|p| p.set(next));
    LOCAL.with(|l| l.countdown.set(next));
    next
}

/// The weight [`restart`] returned was credited to `token` (a non-zero value the caller
/// can find the credit by again, e.g. a lock's row).
pub fn credited(token: usize) {
    CREDITED.with(|c| c.set(token));
}

/// The token of the latest credit not taken back yet (0: none).
pub fn credit() -> usize {
    CREDITED.with(Cell::get)
}

/// Takes back what the latest credit counted for acquisitions that did not come: returns
/// the credit's token and that number (the countdown's rest, less the one that would have
/// been sampled), and makes the thread's next acquisition start a new period. Owner only:
/// at its end, or before the credited lock goes.
pub fn take_back() -> (usize, u32) {
    let token = CREDITED.with(|c| c.replace(0));
    if token == 0 {
        return (0, 0);
    }
    let rest = LOCAL.with(|l| l.countdown.replace(1));
    (token, rest.saturating_sub(1))
}

/// Where the calling thread counts its failed trylocks from now on (`None`: nowhere, at
/// its end, before its state can go to another thread). Owner only.
pub fn set_thread_tries(tries: Option<&'static PendingTries>) {
    LOCAL.with(|l| {
        l.tries
            .set(tries.map_or(0, |t| t as *const PendingTries as usize))
    });
}

/// Where the calling thread counts its failed trylocks, if anywhere: two loads, through
/// the thread pointer (`None` too while acquisitions are not counted).
#[inline(always)]
pub fn thread_tries() -> Option<&'static PendingTries> {
    // SAFETY: non-zero only as `set_thread_tries` set it: the address of a 'static
    // `PendingTries` (thread states are never freed).
    local_word(TRIES_AT).map(|t| unsafe { &*(t as *const PendingTries) })
}

/// Where the calling thread counts the lock inits whose site it displaces from now on
/// (`None`: nowhere, at its end, before its state can go to another thread). Owner only.
pub fn set_thread_displaced(displaced: Option<&'static ThreadDisplaced>) {
    LOCAL.with(|l| {
        l.displaced
            .set(displaced.map_or(0, |d| d as *const ThreadDisplaced as usize))
    });
}

/// Where the calling thread counts the lock inits whose site it displaces, if anywhere:
/// two loads, through the thread pointer (`None` too while acquisitions are not counted).
#[inline(always)]
pub fn thread_displaced() -> Option<&'static ThreadDisplaced> {
    // SAFETY: non-zero only as `set_thread_displaced` set it: the address of a 'static
    // `ThreadDisplaced` (thread states are never freed).
    local_word(DISPLACED_AT).map(|d| unsafe { &*(d as *const ThreadDisplaced) })
}

/// The word `at` bytes into the calling thread's [`Local`], if acquisitions are counted
/// (its place is known) and the word is not zero.
#[inline(always)]
fn local_word(at: isize) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        let offset = OFFSET.load(Ordering::Relaxed);
        if offset == 0 {
            return None;
        }
        let word: usize;
        // SAFETY: `offset` is where this thread's `Local` lives relative to its thread
        // pointer (`init`, `check_thread`), and `at` a pointer-sized field within it: a
        // plain load of the thread's own memory.
        unsafe {
            std::arch::asm!(
                "mov {w}, qword ptr fs:[{off}]",
                off = in(reg) offset + at,
                w = out(reg) word,
                options(nostack, readonly, preserves_flags),
            )
        };
        (word != 0).then_some(word)
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_countdown_is_reached_through_the_thread_pointer_and_estimates_the_count() {
        // The test binary links this module statically, so its TLS is static too.
        init();
        assert!(counting());
        std::thread::spawn(|| {
            check_thread();
            assert!(counting(), "same offset in another thread");
            let n = 1_000_000u64;
            let mut estimate = 0u64;
            let mut sampled = 0u64;
            // Acquisitions far enough apart that the period settles at the usual one.
            let mut now = 0;
            for _ in 0..n {
                now += SAMPLE_GAP_NS / ACQUISITION_SAMPLING_PERIOD as u64;
                if tick() {
                    estimate += u64::from(restart(now, || 12345));
                    credited(7);
                    sampled += 1;
                }
            }
            let expected = n / u64::from(ACQUISITION_SAMPLING_PERIOD);
            assert!(
                sampled > expected * 9 / 10 && sampled < expected * 11 / 10,
                "{sampled} sampled of {n}"
            );
            // The estimate, less what its last period did not see, is exact.
            let (token, over) = take_back();
            assert_eq!(token, 7);
            assert_eq!(estimate - u64::from(over), n, "estimate {estimate} of {n}");
            assert_eq!(take_back(), (0, 0), "taken back once");
            assert!(tick(), "the next acquisition starts a new period");
            restart(now + SAMPLE_GAP_NS, || 12345);
        })
        .join()
        .unwrap();
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn a_thread_taking_locks_fast_samples_fewer_and_still_estimates_the_count() {
        init();
        std::thread::spawn(|| {
            check_thread();
            // 1 ns apart: a period of 256 would sample every 256 ns.
            let n = 50_000_000u64;
            let (mut estimate, mut sampled) = (0u64, 0u64);
            for i in 0..n {
                if tick() {
                    estimate += u64::from(restart(i, || 777));
                    credited(9);
                    sampled += 1;
                }
            }
            assert!(sampled < 4_000, "{sampled} sampled: the period grew");
            let (_, over) = take_back();
            assert_eq!(estimate - u64::from(over), n, "estimate {estimate} of {n}");
            // Slow again (one acquisition every 10 gaps): the period comes back down to
            // one, every acquisition counted.
            let mut now = n;
            for _ in 0..100 {
                now += 10 * SAMPLE_GAP_NS;
                restart(now, || 777);
            }
            assert_eq!(MEAN.with(Cell::get), 1);
            assert_eq!(restart(now + 10 * SAMPLE_GAP_NS, || 777), 1);
        })
        .join()
        .unwrap();
    }
}
