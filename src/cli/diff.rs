//! `blameprof diff BEFORE AFTER`: what changed between two runs (docs/diff.md; the
//! comparison is `viewer::diff`'s).
//!
//! Job: its arguments ([`DiffArgs`]), the comparison built from them, the differential
//! flame graph written to `-o`'s file, and the tables written as text or JSON.
//!
//! Not async-signal-safe (allocates, does I/O).

use super::profile::finish_output;
use crate::viewer::diff::{self, DiffOptions, Normalize, Rank, Widths};
use anyhow::anyhow;
use std::io::{self, Write};
use std::path::PathBuf;

/// Rows per table in text when `--top` is not given.
pub const DEFAULT_TOP: usize = 20;

/// `--normalize`'s values, as the command line spells them.
const NORMALIZE: &[(&str, &str, Normalize)] = &[
    (
        "total",
        "Each value as a share (%) of its own run's total",
        Normalize::Total,
    ),
    (
        "time",
        "Each value per second of its own run's duration",
        Normalize::Time,
    ),
    (
        "none",
        "Raw values, each with its share of its own run's total beside it",
        Normalize::None,
    ),
];

/// `--widths`' values, as the command line spells them.
const WIDTHS: &[(&str, &str, Widths)] = &[
    (
        "after",
        "AFTER's values: what the program spends now",
        Widths::After,
    ),
    (
        "before",
        "BEFORE's values: what it spent, stacks AFTER no longer has included",
        Widths::Before,
    ),
];

/// `--sort`'s values, as the command line spells them.
const RANK: &[(&str, &str, Rank)] = &[
    (
        "exclusive",
        "The cost in the function itself",
        Rank::Exclusive,
    ),
    (
        "inclusive",
        "The cost in the function and its callees",
        Rank::Inclusive,
    ),
];

/// Options of `blameprof diff`.
#[derive(Debug, Clone, clap::Args)]
pub struct DiffArgs {
    /// The profile before the change (a directory written by 'blameprof run')
    pub before: PathBuf,
    /// The profile after the change
    pub after: PathBuf,
    /// Metric to compare functions by: work, idleness (lock waiting, at the waiter), blame
    /// (lock waiting, at the holder) or held.contended, or one of them by primitive, e.g.
    /// idleness.mutex
    #[arg(long, default_value = crate::attribution::metrics::WORK)]
    pub metric: String,
    /// What the values are: none (raw values, each with its share of its own run's total
    /// beside it), total (shares of each run's total) or time (per second of each run's
    /// duration)
    #[arg(long, default_value = "none", value_parser = super::one_of(NORMALIZE))]
    pub normalize: Normalize,
    /// Rank functions by the change of their exclusive or their inclusive cost
    #[arg(long, default_value = "exclusive", value_parser = super::one_of(RANK))]
    pub sort: Rank,
    /// Rows per table, biggest changes first [text default: 20; JSON: all]
    #[arg(long, value_name = "N", value_parser = parse_top)]
    pub top: Option<usize>,
    /// Output format
    #[arg(long, value_enum, default_value_t = DiffFormat::Text)]
    pub format: DiffFormat,
    /// Also draw a differential flame graph of the metric into this SVG file (red: grew,
    /// blue: shrank)
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Whose values the flame graph's frame widths are: after (what the program spends now)
    /// or before (what it spent: stacks AFTER no longer has are drawn)
    #[arg(long, default_value = "after", value_parser = super::one_of(WIDTHS))]
    pub widths: Widths,
    /// Read the intact part of damaged profiles instead of failing
    #[arg(long)]
    pub salvage: bool,
}

/// Output formats of `diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DiffFormat {
    /// Tables of the biggest changes
    Text,
    /// The same content as JSON (docs/diff.md)
    Json,
}

/// `blameprof diff`: writes the comparison to `out` (and the flame graph to `-o`'s file).
pub fn run(args: &DiffArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut diff = diff::build(&DiffOptions {
        before: args.before.clone(),
        after: args.after.clone(),
        metric: args.metric.clone(),
        normalize: args.normalize,
        sort: args.sort,
        top: args.top.or(match args.format {
            DiffFormat::Text => Some(DEFAULT_TOP),
            DiffFormat::Json => None,
        }),
        flamegraph: args.output.clone(),
        widths: args.widths,
        salvage: args.salvage,
    })?;
    if let Some(file) = diff.flamegraph.clone() {
        let mut bytes = Vec::new();
        let gone = diff::write_flamegraph(&diff, &mut bytes)?;
        if gone > 0 {
            diff.notes.push(format!(
                "{} of BEFORE's {} is in call paths AFTER no longer has, which the flame \
                 graph of AFTER's widths cannot draw: --widths before draws them",
                crate::viewer::units::format_value(gone, &diff.unit),
                diff.metric
            ));
        }
        std::fs::write(&file, bytes).map_err(|e| {
            anyhow!(
                "cannot write the flame graph to '{}': {e}; pass a writable path with -o",
                file.display()
            )
        })?;
    }
    let mut out = io::BufWriter::new(out);
    let written = match args.format {
        DiffFormat::Text => diff::write_text(&diff, &mut out),
        DiffFormat::Json => diff::write_json(&diff, &mut out),
    };
    finish_output(written.and_then(|()| out.flush()))
}

fn parse_top(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "'{s}' is not a number of rows: pass a whole number, 1 or more"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_is_a_positive_number_of_rows() {
        assert_eq!(parse_top("5"), Ok(5));
        assert!(parse_top("0").unwrap_err().contains("1 or more"));
        assert!(parse_top("x").is_err());
    }
}
