//! blameprof: a Linux profiler that tells who made threads wait.
//!
//! This crate is the analysis and the command line: [`attribution`] (symbolization, the
//! calling-context tree, metrics, locks, findings), [`viewer`] (text, JSON, flame graphs,
//! exports) and [`cli`] (one module per command: its arguments, loading, the view), over the
//! profile [`format`] (the `blameprof_format` crate); `src/main.rs` only parses the command
//! line and exits. The measurement that writes profiles is other crates (`src/sys`,
//! `src/unwind`, `src/locks`, `src/sampler` and `src/measure`, loaded into the profiled
//! program by `runtime/`), which this one never imports: see `docs/architecture.md`.

pub use blameprof_format as format;

pub mod attribution;
pub mod cli;
pub mod viewer;
