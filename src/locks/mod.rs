//! Lock monitoring for blame shifting: interposed-lock logic, kept apart from the exported
//! entry points (in `runtime/`) so it can be tested without preloading.
//!
//! - [`spin`]: dual-representation `pthread_spinlock_t` (waiters' CPU samples → the lock's
//!   idleness counter → the holder's unlock context);
//! - [`wait_table`]: every blocking wait (mutexes, rwlocks, condition variables,
//!   semaphores, barriers, joins, futexes): measured blocked time, handed in turn to the
//!   holders' releases or the events' providers;
//! - [`slab`]: allocation-free, recycled storage for per-lock state.
//!
//! Nothing here allocates with `malloc` or takes a pthread lock, so the interposed functions
//! may be called by allocators and by the runtime itself.

pub mod slab;
pub mod spin;
pub mod wait_table;
