//! The sampler: how a sample is taken. CPU-time timers, the signal handler, per-thread
//! state, unwinding a call path into the thread's buffer, and writing the profile's parts.
//!
//! It knows nothing of locks' semantics: the lock policy (`crate::locks::policy`) calls
//! [`sync_sample`] to record what it measured, and keeps its per-thread state in the
//! thread's [`thread_state::ThreadState`] (types from the lock mechanism, `crate::locks`,
//! which never imports the sampler). The process lifecycle (`crate::lifecycle`) sets it up.
//! Which parts are async-signal-safe is stated in each submodule's doc comment; the
//! handler's own rules are in [`handler`].

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
pub mod wake_path;
