//! blameprof's measurement layer: what runs inside the profiled process, loaded there by the
//! preloaded `runtime/` library (its only user).
//!
//! - [`unwind`]: in-process, async-signal-safe stack unwinding;
//! - [`sampler`]: timers, the signal handler, per-thread state, the profile's writer;
//! - [`locks`]: what is measured at each lock primitive and how it is thinned, and the
//!   lock-side state blame shifting keeps;
//! - [`lifecycle`]: start-up, threads, `dlopen`, `fork` and exit, composing the above, and
//!   [`exec`]: an image's part handed over at `exec`;
//! - [`sys`] and [`runtime_lock`]: raw system calls and the runtime's own lock.
//!
//! It writes the profile through `blameprof_format` and never imports the analysis (the
//! `blameprof` crate), which in turn never imports this crate: the compiler enforces the
//! layering. Its files sit beside the other layers' in `src/` (see `docs/architecture.md`).

pub use blameprof_format as format;

pub mod exec;
pub mod lifecycle;
#[path = "../locks/mod.rs"]
pub mod locks;
pub mod runtime_lock;
#[path = "../sampler/mod.rs"]
pub mod sampler;
pub mod sys;
#[path = "../unwind/mod.rs"]
pub mod unwind;
