//! The comparison logic of the blameprof scoreboard (`cargo run --release -p
//! blameprof-scoreboard`): what a workload says is true, what blameprof reported, and how they
//! compare. Running programs and rendering the report live in the binary (`src/main.rs`).
//!
//! - [`truth`]: parses the workloads' `truth ...` lines (the contract in
//!   `benchmarks/README.md`);
//! - [`report`]: reads `blameprof report --format json --view flat` (docs/report-json.md);
//! - [`compare`]: per truth line the reported value, error and pass/fail, and the culprit
//!   ranking;
//! - [`stats`]: medians, geometric means and worst cases of repeated measurements.

pub mod compare;
pub mod report;
pub mod stats;
pub mod truth;
