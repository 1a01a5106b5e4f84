//! The lock policy: what the interposed wait functions in `runtime/` call, one function per
//! kind of lock operation.
//!
//! Every measured wait is recorded as idleness of its [`WaitKind`](crate::format::WaitKind)
//! at the waiter's context; the time the wait table hands to a releaser or waker is recorded
//! as blame at that context. A wait that timed out, was interrupted or woke spuriously is
//! recorded as unblamed idleness and counted. Short samples are thinned
//! (`locks::thinning`) before they are recorded.
//!
//! Fast paths (uncontended acquisitions, releases and wake-ups nobody waits for) touch
//! nothing but one wait-table counter; everything else runs only when a thread actually
//! waited. Calls made while the thread is inside the runtime (including this policy's own
//! bookkeeping, which a program's signal handler might interrupt with a `sem_post` or
//! `FUTEX_WAKE`) pass straight through unmonitored.
//!
//! Files: [`acquire`] (mutexes, rwlocks: contended waits, tries, releases), [`events`]
//! (posts, futex wakes), [`condvar`], [`barrier`], [`threads`] (joins, cancellation),
//! [`spin`] (the spin-lock protocol's hooks); below them [`blocked`] (a wait in progress),
//! [`holds`] (a holder's hold start and blame), [`held`] (marks on the holders of contended
//! locks, for the handler's `held.contended`),
//! [`lock_counts`] (the lock table's counts), [`record`] (thinning and recording), [`shared_spin`] (spin locks never converted),
//! [`bookkeeping`] (whether a call is monitored) and
//! [`outcome`] (return codes and `errno`).
//!
//! Not async-signal-safe (never called from the sampling handler); allocation-free.

pub mod acquire;
pub mod barrier;
pub mod blocked;
pub mod blocking;
pub mod bookkeeping;
pub mod carry;
pub mod condvar;
pub mod events;
pub mod held;
pub mod holds;
pub mod lock_counts;
pub mod outcome;
pub mod record;
pub mod shared_spin;
pub mod spin;
pub mod threads;

pub use acquire::{acquired, acquired_if, release, wait};
pub use barrier::{barrier_init, barrier_wait, open_wait, wake_all, OpenWait};
pub use blocked::{outside_the_wait, record_deferred_wait};
pub use blocking::blocking;
pub use condvar::{cond_wait, cond_wake};
pub use events::event;
pub use held::waiting_behind;
pub use holds::{fold_hold_sampling, mutex_may_be_waited_for};
pub use lock_counts::{
    acquisition, acquisition_due, fold_lock_waits, forget, init_site, lock_destroyed,
    lock_initialised, sampled_acquisition, take_back_acquisitions, try_failed,
};
pub use outcome::{outcome_of_errno, outcome_of_rc};
pub use spin::{spin_reset, SpinGlue};
pub use threads::{abandon_wait, thread_exiting};
