//! The sampler: how a sample is taken. CPU-time timers, the signal handler, per-thread
//! state, unwinding a call path into the thread's buffer, and writing the profile's parts.
//!
//! It knows nothing of locks' semantics: the lock policy (`blameprof_measure::policy`)
//! calls [`sync_sample`] to record what it measured, and keeps its per-thread state in the
//! thread's [`thread_state::ThreadState`] (types from the lock mechanism, `blameprof-locks`,
//! which never imports the sampler). The process lifecycle (`blameprof_measure::lifecycle`)
//! sets it up. A crate of its own (`blameprof-sampler`): above the unwinder and the lock
//! mechanism, below the measurement layer; the compiler keeps the tiers apart.
//! Which parts are async-signal-safe is stated in each submodule's doc comment; the
//! handler's own rules are in [`handler`].

use blameprof_format as format;
use blameprof_locks as locks;
use blameprof_sys::calls as sys;
use blameprof_sys::runtime_lock;
use blameprof_unwind as unwind;

pub mod buffer;
pub mod clock;
pub mod config;
pub mod counters;
pub mod descriptors;
pub mod handler;
pub mod heap;
pub mod output;
pub mod path;
pub mod process;
pub mod quiet;
pub mod records;
pub mod sync_sample;
pub mod thread_state;
pub mod timer;
pub mod tsc_clock;
pub mod wait_cpu;
pub mod wake_path;
