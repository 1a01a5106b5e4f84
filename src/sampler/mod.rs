//! The sampling runtime: CPU-time timers, the signal handler, per-thread state and the
//! lifecycle hooks the preloaded library calls.
//!
//! Only the preload library (`runtime/`) calls into this module; the CLI links it but never
//! runs it. Which parts are async-signal-safe is stated in each submodule's doc comment; the
//! handler's own rules are in [`handler`].

pub mod buffer;
pub mod clock;
pub mod config;
pub mod counters;
pub mod handler;
pub mod heap;
pub mod lifecycle;
pub mod lock_glue;
pub mod output;
pub mod quiet;
pub mod records;
pub mod sync_sample;
pub mod thread_state;
pub mod timer;
pub mod wake_chain;
