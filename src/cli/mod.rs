//! The command line: one module per command (`run`, `report` with its `--source` mode,
//! `flamegraph`, `timeline`, `diff`), each with its clap arguments, sharing the profile's
//! arguments and loading ([`profile`]); the run's preflight checks, the embedded runtime and
//! the summary after a run; help texts and manual pages. The viewer below knows nothing of
//! clap: a command loads and analyses, then hands data and plain options to it.
//!
//! Invariants: never interposes anything and never loads the runtime; user mistakes end in
//! one line naming the problem and the fix. Not part of the runtime; nothing here is
//! async-signal-safe.

pub mod diff;
pub mod flamegraph;
pub mod help;
pub mod preflight;
pub mod profile;
pub mod report;
pub mod run;
pub mod runtime_file;
pub mod source;
pub mod summary;
pub mod timeline;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};

/// A parser for an option whose values are `table`'s: each value's name on the command
/// line, its help, and the value it stands for (so that the viewer's plain enums need no
/// clap of their own).
fn one_of<T: Copy + Send + Sync + 'static>(
    table: &'static [(&'static str, &'static str, T)],
) -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(
        table
            .iter()
            .map(|&(name, help, _)| PossibleValue::new(name).help(help)),
    )
    .map(move |given| {
        table
            .iter()
            .find(|(name, _, _)| *name == given)
            .map(|&(_, _, value)| value)
            .expect("a possible value")
    })
}
