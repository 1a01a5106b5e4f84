//! blameprof: a Linux profiler that tells who made threads wait.
//!
//! Layers, kept apart: measurement ([`sampler`], [`unwind`]; run inside the profiled process
//! by the preloaded `runtime/` library), the profile [`format`] between them, analysis
//! (`attribution`) and presentation (`viewer`).

pub mod attribution;
pub mod format;
pub mod locks;
pub mod sampler;
pub mod spinlock;
pub mod sys;
pub mod unwind;
pub mod viewer;
