//! blameprof: a Linux profiler that tells who made threads wait.
//!
//! This crate is the analysis and the command line: [`attribution`] (symbolization, the
//! calling-context tree, metrics) and [`viewer`] (text, JSON and flame graphs), over the
//! profile [`format`] (the `blameprof_format` crate). The measurement that writes profiles is
//! another crate (`blameprof_measure`, in `src/sampler`, `src/unwind` and `src/locks`, loaded
//! into the profiled program by `runtime/`), which this one never imports: see
//! `docs/architecture.md`.

pub use blameprof_format as format;

pub mod attribution;
pub mod viewer;
