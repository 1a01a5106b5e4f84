//! Blame for blocking waits: who kept a thread waiting on a mutex, rwlock, condition
//! variable, semaphore, barrier, join or futex.
//!
//! Job: per waited-on object (keyed by its address), measure the blocked waiters and hand
//! their waiting time, exactly once, to the threads responsible for it, in turn:
//! - *hold* kinds (mutex, rwlock): the object accrues waiter-time only while it is *held*;
//!   each holder takes, at its release, the integral over its hold of the number of blocked
//!   waiters. A mutex's holders read it from the mutex's history ([`hold_blame`], see
//!   [`history`]) without the bucket lock, after the release, from the start they noted
//!   themselves (`locks::hold_starts`): nothing inside the program's critical section
//!   writes what the waiters write. An rwlock's readers share holds, so its holders settle
//!   an integral kept behind a gate under the bucket lock ([`acquired`], [`settle`]). Time
//!   a waiter spends blocked while the object is free (woken, not yet scheduled) is
//!   nobody's fault and accrues to nobody. A waiter registers ([`arrive`]) only after its
//!   try failed, so it can register after the release of the hold it failed against looked
//!   for waiters (it was descheduled in between): that hold has been settled without it,
//!   and the object is free. The next hold therefore starts accruing where it starts (the
//!   start a mutex's holder noted, an rwlock's [`acquired`], or the waiter's own
//!   departure), never earlier.
//! - *event* kinds (condition variable, semaphore, barrier, join, futex): waiters wait for an
//!   event; whoever provides it ([`wake`]: a signal, post, last barrier arrival, thread exit,
//!   `FUTEX_WAKE`) takes the waiting accumulated since the previous event on that object,
//!   and counts as many waiters *woken* as it wakes. A woken waiter may lose the race for
//!   what it was woken for and go on waiting inside the real call, so it accrues until it
//!   departs; then its time since the last event (being scheduled) is withdrawn: nobody's.
//!
//! A wait that ends without what it waited for (timed out, interrupted, woken with no event
//! the runtime saw) is never blamed: its contribution to the hold or event interval it
//! departs in is taken back out when it departs ([`Outcome`]). Contributions already taken
//! by an earlier holder or event stay where they are: during that time the taker did hold the
//! object up, and other waiters' progress depended on it.
//!
//! State ([`state`]) lives out of band in a fixed table of buckets ([`buckets`]) keyed by the object's address. An
//! entry is created at the first wait and freed as soon as nothing is pending (no waiters,
//! no unsettled time; a mutex's lingers, for the holder that reads it after its release,
//! until a wait finds it clean for `buckets::LINGER_NS`), so memory follows the waits in
//! progress, not the objects ever used;
//! barrier entries, which carry the barrier's size, are kept from init to destroy. Every
//! bucket counts its *dirty* entries (something to settle), and so does the table:
//! releases and wakes of objects nobody waits for read the table's counter (when nothing
//! anywhere is pending) or their bucket's, and return: the uncontended fast path.
//!
//! Each bucket's spin lock guards its chain and every entry in it (a mutex's history and
//! the chain are also read without it, under sequence counts, `seq_count`); it is held for a few
//! instructions, never across a blocking call, and never two at once except in
//! [`wake_with_proxies`], which takes two in address order.
//!
//! Allocation-free. Not used by the signal handler (but for the lock-free read
//! [`mutex_waiters_registered`]): a thread that interrupts itself (a program's signal
//! handler posting a semaphore) must not come here while it holds a bucket lock; the policy
//! (`blameprof_measure::policy::bookkeeping`) passes such nested calls through unmonitored.

mod buckets;
mod history;
mod seq_count;
mod state;
#[cfg(test)]
mod tests;

pub use buckets::{maybe_dirty, monitored_high_water, reset_after_fork};
pub use history::HoldBlame;
pub use state::{is_hold_kind, WaiterTime, WakerId};

use crate::format::WaitKind;
use buckets::{bucket_index, dirty_bucket, find_lock_free, occupied, Found, Locked};
use history::{History, Withdrawal};
use state::{is_hold_code, part, State};

/// A waiter's registration, from [`arrive`] to [`depart`].
#[derive(Debug, Clone, Copy)]
pub struct Wait {
    pub address: usize,
    pub start_ns: u64,
    /// How many waits this one stands for (1, or a sampled contended acquisition's weight).
    pub weight: u32,
    /// Measured waiters registered on the object when this one arrived, itself included.
    pub waiters: u32,
    gated_mark: u64,
    /// A mutex waiter: the stamp its arrival got in the mutex's history, from which it
    /// counted.
    counted_from: u64,
    /// The waiting it carries in from its earlier waits on the object that ended unblamed.
    pub carried: Carried,
}

/// Waiting a thread carries into its next wait on an event object from the waits on it
/// that ended without the event (a timed-out loop, CPython's GIL): the waiter is still
/// waiting for the same event, so whoever provides it is blamed for all of it (issue 41).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Carried {
    /// When the first of those waits began (monotonic ns).
    pub since: u64,
    /// How long they waited, in all.
    pub total: u64,
    /// The part of `total` no event has taken yet: added to the object's waiter-time at the
    /// arrival, for the next event to take.
    pub unclaimed: u64,
}

/// A thread's latest event wait that ended without its event, kept (its record deferred)
/// until the thread's next wait: carried into it when that is on the same object from the
/// same call site, recorded as nobody's otherwise. The rest of it is the thread's deferred
/// wait record: its total (`ThreadState::deferred_wait_ns`), its object, kind (flags), end
/// and span back to the first of its waits (`OwnerPart::deferred_wait_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Carry {
    /// The stack pointer of the waiting call: a loop in one frame waits from the same one.
    pub site: usize,
    /// The part of its total no event took.
    pub unclaimed: u64,
    /// How the latest of them ended: the reason it stays nobody's if nothing ends it.
    pub ended: Departed,
}

/// How a wait ended, as the caller saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It got what it waited for (acquired the lock, returned from the wait with success).
    Success,
    /// A timed wait gave up.
    TimedOut,
    /// Interrupted by a signal (EINTR).
    Interrupted,
    /// Returned at once without waiting (EAGAIN from a futex whose value had changed,
    /// EDEADLK...): no idleness at all.
    NoWait,
}

/// How a departed wait is accounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Departed {
    /// Blamed on whoever held the object or provided the event. For condition variables,
    /// `retake` is the mutex the waiter then waited for on a registration the signaller made
    /// for it, from `woken_at` on: the waiter must end it ([`depart_proxy`]) once it holds
    /// the mutex again.
    Blamed {
        woken_at: u64,
        retake: Option<usize>,
        /// The event's provider (default for hold kinds).
        waker: WakerId,
    },
    /// Success, but no event the runtime saw woke it (a spurious wake-up, or an event from
    /// outside the runtime's view): nobody is blamed.
    Spurious,
    TimedOut,
    Interrupted,
    NoWait,
}

/// Registers the calling thread as blocked on the object at `address` from `now`, counting
/// for `weight` waiters. For hold kinds, the caller's try just failed, so the object is
/// held. An event waiter's `carried` unclaimed waiting is added to the object's waiter-time
/// (hold kinds carry none). `None` when no memory is left.
pub fn arrive(
    address: usize,
    kind: WaitKind,
    now: u64,
    weight: u32,
    carried: Carried,
) -> Option<Wait> {
    buckets::sweep_another(now);
    let locked = Locked::of(address);
    locked.sweep(now);
    locked.update_with_history(address, Some(kind), |s, h| {
        s.advance(now);
        s.add_waiter(weight);
        let mut counted_from = now;
        if s.is_mutex() {
            counted_from = record(h, s, now, None);
        } else if is_hold_kind(kind) {
            s.gate = true;
        }
        // Event waiters stand for themselves: their waiting is exact (`withdraw_carried`).
        let carried = if is_hold_kind(kind) {
            Carried::default()
        } else {
            s.integral[0] += carried.unclaimed;
            carried
        };
        Wait {
            address,
            start_ns: now,
            weight,
            waiters: s.waiters,
            gated_mark: s.gated,
            counted_from,
            carried,
        }
    })
}

/// Ends a wait at `now`: how it is accounted, and, for an event wait that ended without the
/// event, how much of its waiting (the carried part included) no event took: withdrawn
/// from the object, nobody's yet.
pub fn depart(wait: Wait, now: u64, outcome: Outcome) -> (Departed, u64) {
    let mut unclaimed = 0;
    let departed = Locked::of(wait.address)
        .update_with_history(wait.address, None, |s, h| {
            s.advance(now);
            s.remove_waiter(wait.weight);
            if s.is_mutex() {
                // A waiter that gives up is blamed on nobody for the hold it gives up in.
                let withdrawal = (outcome != Outcome::Success).then_some(Withdrawal {
                    since: wait.counted_from,
                    weight: u64::from(wait.weight),
                    part: part(wait.weight),
                });
                record(h, s, now, withdrawal);
            }
            let departed = match outcome {
                Outcome::Success if is_hold_code(s.kind) => {
                    s.acquired_by_waiter();
                    Departed::Blamed {
                        woken_at: now,
                        retake: None,
                        waker: WakerId::default(),
                    }
                }
                Outcome::Success if s.woken > 0 => {
                    // Its time since the event (being scheduled) is nobody's fault.
                    s.withdraw(wait.gated_mark, wait.weight);
                    s.woken -= 1;
                    let retake = (s.proxied > 0).then_some(s.partner);
                    if retake.is_some() {
                        s.proxied -= 1;
                    }
                    Departed::Blamed {
                        woken_at: s.last_wake.clamp(wait.start_ns, now),
                        retake,
                        waker: s.last_waker,
                    }
                }
                other => {
                    unclaimed = s.withdraw(wait.gated_mark, wait.weight)
                        + s.withdraw_carried(wait.gated_mark, wait.carried.unclaimed);
                    unblamed(other)
                }
            };
            // A wait that ended otherwise (a timeout that raced the signal, a cancellation)
            // while every waiter left was woken took a wake-up all the same: the count of
            // woken waiters drops to the waiters left, and the mutex registrations that
            // condvar signals made for woken waiters beyond them end now (left alone, they
            // were phantom waiters on the mutex, whose holders they blamed from then on).
            s.woken = s.woken.min(s.waiters);
            let kept = s.proxied.min(s.woken);
            let orphans = (s.proxied > kept).then_some((s.partner, s.proxied - kept));
            s.proxied = kept;
            (departed, orphans)
        })
        .map(|(departed, orphans)| {
            if let Some((mutex, n)) = orphans {
                depart_proxies(mutex, n, now);
            }
            departed
        })
        .unwrap_or_else(|| unblamed(outcome));
    (departed, unclaimed)
}

fn unblamed(outcome: Outcome) -> Departed {
    match outcome {
        Outcome::Success => Departed::Spurious,
        Outcome::TimedOut => Departed::TimedOut,
        Outcome::Interrupted => Departed::Interrupted,
        Outcome::NoWait => Departed::NoWait,
    }
}

/// After an rwlock's acquisition that did not wait (a successful try): if others wait for
/// it, it is held again from `now`. One counter read when nobody waits. (A mutex's holds are
/// not told to the table: see [`hold_blame`].) A reader's acquisition may join other
/// readers' hold, so the gate stays as it is.
pub fn acquired(address: usize, kind: WaitKind, now: impl FnOnce() -> u64) {
    debug_assert!(kind != WaitKind::Mutex, "a mutex's holds are not told");
    let Some(index) = dirty_bucket(address, kind) else {
        return;
    };
    Locked::new(index).update(address, None, |s| {
        s.advance(now());
        s.gate = true;
    });
}

/// Just before an rwlock holder's release: the waiter-time it takes, or `None` on the fast
/// path (nobody waited: nothing was touched). `still_held`: other holders keep it held (a
/// reader that is not the last).
pub fn settle(
    address: usize,
    kind: WaitKind,
    now: impl FnOnce() -> u64,
    still_held: bool,
) -> Option<WaiterTime> {
    debug_assert!(kind != WaitKind::Mutex, "a mutex's holds read its history");
    let index = dirty_bucket(address, kind)?;
    Locked::new(index).update(address, None, |s| {
        s.advance(now());
        s.gate = still_held;
        s.take()
    })
}

/// The waiter-time of a mutex's hold from `start` (`None`: unknown, so from before anyone
/// waited for it, which is when a hold that started while the table had nothing pending
/// for the mutex's bucket began) to `end`, its release, which has not happened yet:
/// `C(end) − C(start)` of the mutex's history, less what waiters that gave up during the
/// hold accrued in it. `None` when nobody waited for the mutex (no entry). Read without the
/// bucket lock unless the entry is being written or its chain changes meanwhile.
///
/// Called just after the release (outside the program's critical section): the entry of a
/// mutex nobody waits for any more lingers long enough for it (`buckets::LINGER_NS`).
pub fn hold_blame(address: usize, start: Option<u64>, end: u64) -> Option<HoldBlame> {
    for _ in 0..4 {
        match find_lock_free(address) {
            Found::Entry(e, seq) => {
                let blame = e.history.hold_blame(start, end);
                if e.history.seq.read_valid(seq) {
                    return Some(blame);
                }
            }
            Found::Absent => return None,
            Found::Unsure => {}
        }
        std::hint::spin_loop();
    }
    let locked = Locked::of(address);
    let (_, e) = locked.find(address)?;
    Some(e.history.hold_blame(start, end))
}

/// Whether measured waiters are registered with the mutex at `address` now: from each one's
/// arrival to its return, so also while one that was woken is not yet running and the lock
/// word says nobody sleeps. `None` when that cannot be read now (the entry is being
/// written, perhaps by the interrupted thread itself). Lock-free, bounded, loads only:
/// async-signal-safe (the sampling handler's `held.contended`).
pub fn mutex_waiters_registered(address: usize) -> Option<bool> {
    for _ in 0..4 {
        match find_lock_free(address) {
            Found::Entry(e, seq) => {
                let waiting = e.history.last().rate != [0, 0];
                if e.history.seq.read_valid(seq) {
                    return Some(waiting);
                }
            }
            Found::Absent => return Some(false),
            Found::Unsure => {}
        }
    }
    None
}

/// Appends a change of a mutex's waiters at `now` to its history; returns its stamp.
fn record(h: &History, s: &State, now: u64, withdrawal: Option<Withdrawal>) -> u64 {
    h.seq.begin_write();
    let stamp = h.push(now, s.weight, withdrawal);
    h.seq.end_write();
    stamp
}

/// What an event took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Woke {
    /// The waiting time since the previous event.
    pub taken: u64,
    /// With one waiter only: since when that time accrued (its arrival, the previous event,
    /// or the last departure of another), so the part of it another interval covers can be
    /// told apart.
    pub solo_since: Option<u64>,
}

/// Just before an event by `waker` that wakes up to `n` waiters of the object: what it
/// takes, or `None` on the fast path (nobody waits).
pub fn wake(
    address: usize,
    kind: WaitKind,
    now: impl FnOnce() -> u64,
    n: u32,
    waker: WakerId,
) -> Option<Woke> {
    let index = dirty_bucket(address, kind)?;
    let now = now();
    Locked::new(index).update(address, None, |s| {
        s.last_waker = waker;
        let solo = s.waiters == 1;
        let (taken, _) = wake_state(s, now, n);
        // With one waiter, the waiting taken is its alone: every departure withdraws what the
        // departing waiter accrued since the last settlement, and the gate of event kinds is
        // always open, so it accrued over exactly the last `taken` ns.
        let solo_since = (solo && taken > 0).then(|| now - taken);
        Woke { taken, solo_since }
    })
}

/// An event at `now` that wakes up to `n` waiters; returns the time taken and the number
/// newly woken.
fn wake_state(s: &mut State, now: u64, n: u32) -> (u64, u32) {
    s.advance(now);
    // Events are waited for by waiters that stand for themselves only.
    let taken = s.take().total();
    let before = s.woken;
    s.woken = s.woken.saturating_add(n).min(s.waiters);
    s.last_wake = now;
    (taken, s.woken - before)
}

/// A condition variable's waiter is about to wait with `mutex`.
pub fn set_partner(cond: usize, mutex: usize) {
    Locked::of(cond).update(cond, None, |s| s.partner = mutex);
}

/// A condition variable's signal or broadcast (`n` = 1 or all): like [`wake`], and each
/// newly woken waiter is registered as waiting for the partner mutex, which it must retake:
/// that wait accrues to the mutex's holds from `now` on (usually the signaller's own).
pub fn wake_with_proxies(cond: usize, now: impl FnOnce() -> u64, n: u32) -> Option<u64> {
    let ci = dirty_bucket(cond, WaitKind::CondVar)?;
    let now = now();
    let partner = Locked::new(ci).update(cond, None, |s| s.partner)?;
    let mi = bucket_index(partner);
    // Both buckets, locked in index order (the only place that holds two).
    let first = Locked::new(ci.min(mi));
    let second = (ci != mi).then(|| Locked::new(ci.max(mi)));
    let pick = |index: usize| match &second {
        Some(b) if index == ci.max(mi) => b,
        _ => &first,
    };
    let (cond_lock, mutex_lock) = (pick(ci), pick(mi));
    let (taken, newly) = cond_lock.update(cond, None, |s| {
        let (taken, mut newly) = wake_state(s, now, n);
        if s.partner != partner || partner == 0 {
            newly = 0;
        }
        s.proxied += newly;
        (taken, newly)
    })?;
    if newly > 0 {
        let registered = mutex_lock.update_with_history(partner, Some(WaitKind::Mutex), |m, h| {
            m.waiters += newly;
            m.weight[0] += u64::from(newly);
            record(h, m, now, None);
        });
        if registered.is_none() {
            cond_lock.update(cond, None, |s| s.proxied -= newly.min(s.proxied));
        }
    }
    Some(taken)
}

/// A woken condition-variable waiter retook `mutex` at `now` on the registration its
/// signaller made for it.
pub fn depart_proxy(mutex: usize, now: u64) {
    depart_proxies(mutex, 1, now);
}

/// `n` registrations that signals made on `mutex` for woken condition-variable waiters end
/// at `now`.
fn depart_proxies(mutex: usize, n: u32, now: u64) {
    Locked::of(mutex).update_with_history(mutex, None, |s, h| {
        for _ in 0..n {
            s.remove_waiter(1);
        }
        record(h, s, now, None);
    });
}

/// Gives back waiter-time that could not be charged, so the next settlement of the object
/// takes it (`still_held`: the release failed, e.g. EPERM, and the hold goes on).
pub fn unsettle(address: usize, kind: WaitKind, t: WaiterTime, still_held: bool) {
    if t == WaiterTime::default() && !still_held {
        return;
    }
    Locked::of(address).update(address, Some(kind), |s| {
        s.gate |= still_held;
        s.give(t);
    });
}

/// `pthread_barrier_init`: a barrier of `parties` threads at `address`.
pub fn barrier_init(address: usize, parties: u32) {
    Locked::of(address).update(address, Some(WaitKind::Barrier), |s| {
        s.retained = true;
        s.parties = parties;
    });
}

/// What a thread arriving at a barrier does.
#[derive(Debug)]
pub enum BarrierArrival {
    /// Others are still to come: it waits.
    Wait(Wait),
    /// It is the last: it takes the others' waiting, and the real wait releases them.
    Last(u64),
    /// The barrier's size is unknown (not initialised through the runtime).
    Unknown,
}

/// A thread arrives at the barrier at `address` at `now`.
pub fn barrier_arrive(address: usize, now: u64) -> BarrierArrival {
    Locked::of(address)
        .update(address, None, |s| {
            if s.parties == 0 {
                return BarrierArrival::Unknown;
            }
            if s.waiters - s.woken + 1 >= s.parties {
                return BarrierArrival::Last(wake_state(s, now, u32::MAX).0);
            }
            s.advance(now);
            s.add_waiter(1);
            BarrierArrival::Wait(Wait {
                address,
                start_ns: now,
                weight: 1,
                waiters: s.waiters,
                gated_mark: s.gated,
                counted_from: now,
                carried: Carried::default(),
            })
        })
        .unwrap_or(BarrierArrival::Unknown)
}

/// `pthread_*_init`/`destroy` at `now()` (read only when the object's bucket holds
/// anything: programs that make millions of locks pay no clock read): forget the object
/// at `address`, recycling its entry. Returns waiter-time that was still unsettled (0 normally). A condition variable
/// destroyed right after a broadcast (as POSIX allows) still has woken waiters on their way
/// to its mutex: the registrations its signals made for them on the mutex end now, since
/// their departures will not find the condition variable.
#[inline]
pub fn forget(address: usize, now: impl FnOnce() -> u64) -> u64 {
    let index = bucket_index(address);
    if !occupied(index) {
        return 0;
    }
    forget_in(index, address, now())
}

/// [`forget`] of an object whose bucket holds entries.
#[cold]
fn forget_in(index: usize, address: usize, now: u64) -> u64 {
    let locked = Locked::new(index);
    let (unsettled, proxies) = locked
        .update(address, None, |s| {
            let proxies = (s.proxied > 0).then_some((s.partner, s.proxied));
            s.retained = false;
            s.waiters = 0;
            s.weight = [0, 0];
            s.woken = 0;
            s.proxied = 0;
            (s.take().total(), proxies)
        })
        .unwrap_or((0, None));
    locked.free_if_clean(address);
    drop(locked);
    if let Some((mutex, n)) = proxies {
        depart_proxies(mutex, n, now);
    }
    unsettled
}
