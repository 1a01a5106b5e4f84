//! Lock monitoring for blame shifting: interposed-lock logic, kept apart from the exported
//! entry points (in `runtime/`) so it can be tested without preloading.
//!
//! - [`spin`]: dual-representation `pthread_spinlock_t` (waiters' CPU samples → the lock's
//!   idleness counter → the holder's unlock context);
//! - [`mutex`]: blocking mutexes (measured blocked time; waiters × duration per holder);
//! - [`slab`]: allocation-free, recycled storage for per-lock state.
//!
//! Nothing here allocates with `malloc` or takes a pthread lock, so the interposed functions
//! may be called by allocators and by the runtime itself.

pub mod mutex;
pub mod slab;
pub mod spin;
