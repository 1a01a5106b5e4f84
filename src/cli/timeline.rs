//! `blameprof timeline` (the SVG picture) and `report --view timeline` (text, JSON): the
//! top locks' pressure over time, and each thread's state.
//!
//! Job: the timeline's options (`--interval`, `--phase-threshold`, `--top`: [`TimelineFlags`],
//! shared by both commands), loading the profile and its lock table, laying out the
//! timeline (`attribution::timeline`, [`load`]), and drawing it (`report` writes the text
//! and JSON).
//!
//! Invariants: a profile without sample times (format version 2 or older) is refused with
//! the fix. Not async-signal-safe (allocates, does I/O).

use super::profile::ProfileArgs;
use crate::attribution::timeline::{timeline, Timeline, TimelineOptions};
use crate::format::LOCK_INTERVAL_NS;
use anyhow::bail;
use std::path::PathBuf;

/// The timeline's options, shared by `report --view timeline` and `blameprof timeline`.
#[derive(Debug, Clone, clap::Args)]
pub struct TimelineFlags {
    /// Timeline: the interval, e.g. 1s, 500ms, 2.5s (at least 100ms, the runtime's own)
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_interval)]
    pub interval: u64,
    /// Timeline: the critical section pressure (percent of the threads' running time spent
    /// waiting for the lock) at and above which an interval is in a high phase
    #[arg(long, value_name = "PERCENT", default_value_t = 10.0, value_parser = parse_threshold)]
    pub phase_threshold: f64,
    /// Timeline: how many locks to show (those with the highest peak pressure)
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub top: usize,
}

impl Default for TimelineFlags {
    /// The flags' defaults (1 s, 10%, 5 locks), for what takes no flags (the run summary).
    fn default() -> TimelineFlags {
        TimelineFlags {
            interval: 1_000_000_000,
            phase_threshold: 10.0,
            top: 5,
        }
    }
}

impl TimelineFlags {
    /// The options of the analysis the flags ask for.
    pub fn options(&self) -> TimelineOptions {
        TimelineOptions {
            interval_ns: self.interval,
            threshold: self.phase_threshold / 100.0,
            top: self.top,
        }
    }
}

/// Options of `blameprof timeline`.
#[derive(Debug, Clone, clap::Args)]
pub struct TimelineArgs {
    /// Where to write the SVG
    #[arg(short, long, default_value = "timeline.svg")]
    pub output: PathBuf,
    #[command(flatten)]
    pub timeline: TimelineFlags,
    #[command(flatten)]
    pub profile: ProfileArgs,
}

/// `blameprof timeline`: writes the SVG.
pub fn picture(args: &TimelineArgs) -> anyhow::Result<()> {
    let t = load(&args.profile, None, &args.timeline)?;
    let svg = crate::viewer::timeline_svg::render(&t);
    std::fs::write(&args.output, svg).map_err(|e| {
        anyhow::anyhow!(
            "cannot write the timeline to '{}': {e}; pass a writable path with -o",
            args.output.display()
        )
    })
}

/// Reads the profile (the samples of thread `tid`, if given) and lays out its timeline.
pub fn load(
    profile: &ProfileArgs,
    tid: Option<u32>,
    flags: &TimelineFlags,
) -> anyhow::Result<Timeline> {
    let mut loaded = profile.load(tid)?;
    let table = loaded.lock_table()?;
    let t = timeline(&loaded.profile, loaded.filter, &table, flags.options())?;
    if !t.timed {
        bail!(
            "this profile's samples carry no times (it was written by an older blameprof): \
             profile the program again to see its timeline"
        );
    }
    Ok(t)
}

/// `--interval`: a duration with its unit (ms, s, m), at least the runtime's interval.
fn parse_interval(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let scale = match unit.trim() {
        "ms" => 1e6,
        "s" | "" => 1e9,
        "m" | "min" => 60e9,
        other => {
            return Err(format!(
                "unknown unit '{other}': write the interval as e.g. 1s, 500ms or 2m"
            ))
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{s}' is not a duration: write e.g. 1s, 500ms or 2m"))?;
    let ns = value * scale;
    if !ns.is_finite() || ns < LOCK_INTERVAL_NS as f64 {
        return Err(format!(
            "'{s}' is shorter than the runtime's {} ms intervals: pass 100ms or more",
            LOCK_INTERVAL_NS / 1_000_000
        ));
    }
    if ns > 1e15 {
        return Err(format!("'{s}' is longer than any run: pass e.g. 1s"));
    }
    Ok(ns.round() as u64)
}

/// `--phase-threshold`: a percentage in (0, 100].
fn parse_threshold(s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches('%').parse::<f64>() {
        Ok(p) if p > 0.0 && p <= 100.0 => Ok(p),
        _ => Err(format!("'{s}' is not a percentage above 0 and at most 100")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_parse_with_their_unit_and_the_runtimes_floor() {
        assert_eq!(parse_interval("1s"), Ok(1_000_000_000));
        assert_eq!(parse_interval("250ms"), Ok(250_000_000));
        assert_eq!(parse_interval("2.5s"), Ok(2_500_000_000));
        assert_eq!(parse_interval("1m"), Ok(60_000_000_000));
        assert_eq!(parse_interval("2"), Ok(2_000_000_000));
        assert!(parse_interval("50ms")
            .unwrap_err()
            .contains("100ms or more"));
        assert!(parse_interval("1h").unwrap_err().contains("unknown unit"));
        assert!(parse_interval("fast").is_err());
        assert_eq!(parse_threshold("25%"), Ok(25.0));
        assert!(parse_threshold("0").is_err());
        assert!(parse_threshold("150").is_err());
    }
}
