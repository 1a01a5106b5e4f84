//! The lock mechanism: what blame shifting keeps per lock and per wait.
//!
//! A crate of its own (`blameprof-locks`), below the sampler, which imports it, and it
//! nothing of the sampler: the compiler keeps the tiers apart. What is measured at each
//! primitive and how it is recorded (the lock policy, which uses the sampler) lives above
//! both, in `blameprof-measure` (`src/measure/policy`). Here:
//! - [`spin`], the
//!   dual-representation `pthread_spinlock_t` (waiters' CPU samples → the lock's idleness
//!   counter → the holder's unlock context); [`wait_table`], every blocking wait (mutexes,
//!   rwlocks, condition variables, semaphores, barriers, joins, futexes) with its measured
//!   time handed in turn to the holders' releases or the events' providers; [`slab`],
//!   allocation-free recycled storage for per-lock state; [`thinning`], the arithmetic of
//!   thinned synchronous samples; [`contention_sampling`], which contended acquisitions a
//!   thread measures when it has too many to measure all; [`hold_starts`], when a
//!   thread's current mutex holds began; [`hold_sampling`], which holds taken without
//!   waiting have their start noted when a thread takes too many to note all;
//!   [`wake_chain`], futex waits passed along a chain of wakes; [`held_marks`], which
//!   contended locks a thread may hold, for its timer samples, and [`arrivals`], which
//!   mutexes have a thread in a contended acquisition now;
//!
//! The [`lock_table`] keeps per-lock counts for the report's lock view, with acquisitions
//! counted by [`acquisition_sampling`], a thread's waits and failed trylocks gathered first
//! in [`pending_counts`], and each lock's init call site by [`init_sites`].
//!
//! Nothing here allocates with `malloc` or takes a pthread lock, so the interposed functions
//! may be called by allocators and by the runtime itself.

use blameprof_format as format;

pub mod acquisition_sampling;
pub mod arrivals;
pub mod contention_sampling;
pub mod held_marks;
pub mod hold_sampling;
pub mod hold_starts;
pub mod init_sites;
pub mod lock_table;
#[cfg(test)]
mod model_check;
pub mod pending_counts;
pub mod slab;
pub mod spin;
pub mod thinning;
pub mod wait_table;
pub mod waiter_integral;
pub mod wake_chain;
