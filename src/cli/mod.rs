//! The command-line edge: argument parsing, subcommands, one-line errors and exit codes.
//! Not part of the runtime; nothing here is async-signal-safe.

pub mod help;
pub mod preflight;
pub mod run;
pub mod runtime_file;
