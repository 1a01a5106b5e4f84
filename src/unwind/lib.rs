//! In-process, async-signal-safe stack unwinding for the sampling runtime.
//!
//! Job: know which modules are loaded ([`modules`]), keep their unwind information in a form
//! the signal handler can use without allocating or locking ([`module_set`]), and walk a
//! thread's stack from an interrupted register state into module-relative frames ([`walk`]),
//! with framehop caches lent by a process-wide pool ([`cache_pool`]), all of it under an
//! allocation policy that never allocates ([`no_alloc`]).
//!
//! Invariants: the signal handler only ever *reads* the published module set, through a
//! try-acquire that fails (and the sample is dropped and counted) while an update is under
//! way; unwind data is copied into memory the runtime owns, so a `dlclose` that unmaps a
//! library can never make the handler fault; stack memory is read only through
//! [`stack::StackReader`], which never faults.
//!
//! A crate of its own (`blameprof-unwind`), below the lock mechanism and the sampler: it
//! imports only `blameprof-sys` and `blameprof-format`.

use blameprof_format as format;
use blameprof_sys::calls as sys;
use blameprof_sys::runtime_lock;

pub mod cache_pool;
pub mod module_set;
pub mod modules;
pub mod no_alloc;
pub mod stack;
pub mod walk;
