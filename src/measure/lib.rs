//! blameprof's measurement layer, the top of the crates that run inside the profiled process,
//! loaded there by the preloaded `runtime/` library (its only user), which reaches the ones
//! below through it.
//!
//! The crates, each a folder of `src/` with its own `Cargo.toml`, lowest first (each imports
//! only those before it; the compiler enforces it):
//! - [`sys`] and [`runtime_lock`] (`src/sys`, `blameprof-sys`): raw system calls and the
//!   runtime's own lock;
//! - [`unwind`] (`src/unwind`, `blameprof-unwind`): in-process, async-signal-safe stack
//!   unwinding;
//! - [`locks`] (`src/locks`, `blameprof-locks`): the lock mechanism, the state blame
//!   shifting keeps per lock and per wait;
//! - [`sampler`] (`src/sampler`, `blameprof-sampler`): timers, the signal handler,
//!   per-thread state, the profile's writer;
//! - this crate (`src/measure`): the lock [`policy`] (what is measured at each primitive,
//!   how it is thinned and recorded through the sampler), and the [`lifecycle`] (start-up,
//!   threads, `fork` and exit, composing the rest) with [`exec`] (an image's part handed
//!   over at `exec`) and [`modules`] (the module set at start-up, `dlopen` and `dlclose`).
//!
//! They write the profile through `blameprof_format` and never import the analysis (the
//! `blameprof` crate), which in turn never imports them (see `docs/architecture.md`).

pub use blameprof_format as format;
pub use blameprof_locks as locks;
pub use blameprof_sampler as sampler;
pub use blameprof_sys::calls as sys;
pub use blameprof_sys::runtime_lock;
pub use blameprof_unwind as unwind;

pub mod exec;
pub mod lifecycle;
pub mod modules;
pub mod policy;
#[cfg(test)]
mod stress;
