//! The timeline, as text and JSON (`report --view timeline`) and as an SVG picture
//! (`blameprof timeline -o timeline.svg`, [`super::timeline_svg`]).
//!
//! Job: parse the timeline's options (`--interval`, `--phase-threshold`, `--top`), build
//! the lock table and the timeline (`attribution::timeline`), and write them: per top lock
//! its whole-run and peak pressure, its phases with their start and end times, a sparkline
//! of its pressure and a row per interval (pressure, waiting, blame, acquisitions, failed
//! trylocks); per thread its work, waiting and blame per interval in JSON.
//!
//! Invariants: the JSON carries every interval of every series shown (text too: an
//! interval row per interval); a profile without sample times (format version 2 or older)
//! is refused with the fix. Not async-signal-safe (allocates).

use super::commands::{finish_output, read_named, OutputFormat, ReportArgs};
use super::timeline_svg;
use super::units::format_value;
use crate::attribution::findings::{LockPhases, PhaseSpan};
use crate::attribution::locks::{lock_table, LockTable};
use crate::attribution::symbolize::Symbolizer;
use crate::attribution::timeline::{
    timeline, LockSeries, Timeline, TimelineOptions, MAX_INTERVALS,
};
use crate::attribution::{AttributionError, Filter};
use crate::format::read::Profile;
use crate::format::{WaitKind, LOCK_INTERVAL_NS};
use anyhow::bail;
use serde_json::{json, Value};
use std::io::{self, Write};
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
    fn options(&self) -> TimelineOptions {
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
    /// Profile directory [default: the newest blameprof-* directory here]
    pub path: Option<PathBuf>,
    /// Where to write the SVG
    #[arg(short, long, default_value = "timeline.svg")]
    pub output: PathBuf,
    #[command(flatten)]
    pub timeline: TimelineFlags,
    /// Only this process (all images it exec'd)
    #[arg(long)]
    pub pid: Option<u32>,
    /// Read the intact part of a damaged profile instead of failing
    #[arg(long)]
    pub salvage: bool,
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

/// Reads the profile and lays out its timeline.
fn load(
    path: Option<&std::path::Path>,
    salvage: bool,
    filter: Filter,
    flags: &TimelineFlags,
) -> anyhow::Result<Timeline> {
    let profile = read_named(path, salvage)?;
    let table = lock_table(&profile, filter, &mut Symbolizer::new())?;
    let t = timeline(&profile, filter, &table, flags.options())?;
    if !t.timed {
        bail!(
            "this profile's samples carry no times (it was written by an older blameprof): \
             profile the program again to see its timeline"
        );
    }
    Ok(t)
}

/// The timeline's phases of every lock of `table`, for the findings of the lock view: at
/// `flags`' interval, or a longer one when the run is too long for it; none when the
/// samples carry no times.
pub(super) fn lock_phases(
    profile: &Profile,
    filter: Filter,
    table: &LockTable,
    flags: &TimelineFlags,
) -> Vec<LockPhases> {
    let mut opts = TimelineOptions {
        top: usize::MAX,
        ..flags.options()
    };
    let t = match timeline(profile, filter, table, opts) {
        Err(AttributionError::TooManyIntervals { intervals, .. }) => {
            opts.interval_ns *= intervals.div_ceil(MAX_INTERVALS as u64);
            timeline(profile, filter, table, opts)
        }
        other => other,
    };
    let Some(t) = t.ok().filter(|t| t.timed) else {
        return Vec::new();
    };
    let duration = t.end_ns - t.origin_ns;
    let at = |i: usize| (i as u64 * t.interval_ns).min(duration);
    t.locks
        .iter()
        .map(|l| LockPhases {
            pid: l.pid,
            address: l.address,
            name: l.name.clone(),
            overall_pressure: l.overall_pressure,
            phases: l
                .phases
                .iter()
                .map(|p| PhaseSpan {
                    start_ns: at(p.start),
                    end_ns: at(p.end),
                    pressure: p.pressure,
                    high: p.high,
                })
                .collect(),
        })
        .collect()
}

/// `blameprof report --view timeline`.
pub fn report(args: &ReportArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let t = load(
        args.path.as_deref(),
        args.salvage,
        args.filter(),
        &args.timeline,
    )?;
    let mut out = io::BufWriter::new(out);
    let written = match args.format {
        OutputFormat::Json => write_json(&t, &mut out),
        _ => write_text(&t, &mut out),
    };
    finish_output(written.and_then(|()| out.flush()))
}

/// `blameprof timeline`: writes the SVG.
pub fn picture(args: &TimelineArgs) -> anyhow::Result<()> {
    let filter = Filter {
        pid: args.pid,
        tid: None,
    };
    let t = load(args.path.as_deref(), args.salvage, filter, &args.timeline)?;
    let svg = timeline_svg::render(&t);
    std::fs::write(&args.output, svg).map_err(|e| {
        anyhow::anyhow!(
            "cannot write the timeline to '{}': {e}; pass a writable path with -o",
            args.output.display()
        )
    })
}

/// Seconds, as the text shows times: "12.5 s".
fn secs(t: &Timeline, i: usize) -> String {
    format!("{:.1} s", t.seconds(i))
}

fn kind_name(kind: Option<WaitKind>) -> &'static str {
    kind.map_or("lock", WaitKind::name)
}

/// Eight levels of a sparkline.
const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// A sparkline of fractions in [0, 1] (blank for 0).
fn sparkline(values: &[f64]) -> String {
    values
        .iter()
        .map(|&v| match v {
            v if v <= 0.0 => ' ',
            v => BARS[((v * 8.0).ceil() as usize).clamp(1, 8) - 1],
        })
        .collect()
}

/// The high phases of `l`, as text.
fn phase_line(t: &Timeline, l: &LockSeries) -> String {
    let high: Vec<String> = l
        .phases
        .iter()
        .filter(|p| p.high)
        .map(|p| {
            format!(
                "{:.1}-{:.1} s ({:.1}%)",
                t.seconds(p.start),
                t.seconds(p.end),
                p.pressure * 100.0
            )
        })
        .collect();
    let threshold = t.threshold * 100.0;
    match (high.is_empty(), l.phases.iter().any(|p| !p.high)) {
        (true, _) => format!("never at or above {threshold:.0}%"),
        (false, false) => format!("at or above {threshold:.0}% throughout"),
        (false, true) => format!(
            "at or above {threshold:.0}% in {}; below elsewhere",
            high.join(", ")
        ),
    }
}

pub fn write_text(t: &Timeline, out: &mut dyn Write) -> io::Result<()> {
    let interval = format_value(t.interval_ns, "ns");
    writeln!(
        out,
        "Timeline: {} intervals of {interval}, {:.1} s in all; phases at {:.0}% critical \
         section pressure",
        t.intervals,
        (t.end_ns - t.origin_ns) as f64 / 1e9,
        t.threshold * 100.0
    )?;
    let share = |v: &[u64]| -> Vec<f64> {
        v.iter()
            .zip(&t.running_ns)
            .map(|(&x, &r)| if r > 0 { x as f64 / r as f64 } else { 0.0 })
            .collect()
    };
    writeln!(
        out,
        "  all threads  work     |{}|  {}",
        sparkline(&share(&t.work_ns)),
        format_value(t.work_ns.iter().sum(), "ns")
    )?;
    writeln!(
        out,
        "               waiting  |{}|  {}",
        sparkline(&share(&t.wait_ns)),
        format_value(t.wait_ns.iter().sum(), "ns")
    )?;
    if t.locks.is_empty() {
        writeln!(out, "\nNo lock was waited for.")?;
        return Ok(());
    }
    if !t.acquisitions_known {
        writeln!(
            out,
            "(acquisitions per interval: not in this profile, written by an older blameprof)"
        )?;
    }
    for l in &t.locks {
        writeln!(out)?;
        writeln!(
            out,
            "{}  ({})  pressure {:.1}% over the run, peak {:.1}%",
            l.name,
            kind_name(l.kind),
            l.overall_pressure * 100.0,
            l.peak_pressure * 100.0
        )?;
        writeln!(out, "  phases: {}", phase_line(t, l))?;
        writeln!(out, "  pressure |{}|", sparkline(&l.pressure))?;
        writeln!(
            out,
            "  {:>9}  {:>8}  {:>10}  {:>10}  {:>12}  {:>10}",
            "start", "pressure", "waiting", "blame", "acquisitions", "try failed"
        )?;
        for i in 0..t.intervals {
            let count =
                |v: &Option<Vec<u64>>| v.as_ref().map_or("-".to_owned(), |v| v[i].to_string());
            let mark = if l.pressure[i] >= t.threshold {
                '*'
            } else {
                ' '
            };
            writeln!(
                out,
                "  {:>9}  {:>7.1}%{mark} {:>10}  {:>10}  {:>12}  {:>10}",
                secs(t, i),
                l.pressure[i] * 100.0,
                format_value(l.wait_ns[i], "ns"),
                format_value(l.blame_ns[i], "ns"),
                count(&l.acquisitions),
                count(&l.try_failed),
            )?;
        }
    }
    Ok(())
}

pub fn write_json(t: &Timeline, out: &mut dyn Write) -> io::Result<()> {
    let locks: Vec<Value> = t
        .locks
        .iter()
        .map(|l| {
            json!({
                "name": l.name,
                "pid": l.pid,
                "address": format!("{:#x}", l.address),
                "kind": l.kind.map(WaitKind::name),
                "overall_pressure": l.overall_pressure,
                "peak_pressure": l.peak_pressure,
                "pressure": l.pressure,
                "wait_ns": l.wait_ns,
                "blame_ns": l.blame_ns,
                "acquisitions": l.acquisitions,
                "try_failed": l.try_failed,
                "phases": l.phases.iter().map(|p| json!({
                    "start_s": t.seconds(p.start),
                    "end_s": t.seconds(p.end),
                    "first_interval": p.start,
                    "end_interval": p.end,
                    "high": p.high,
                    "pressure": p.pressure,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let threads: Vec<Value> = t
        .threads
        .iter()
        .map(|th| {
            json!({
                "pid": th.pid,
                "tid": th.tid,
                "name": th.name,
                "work_ns": th.work_ns,
                "wait_ns": th.wait_ns,
                "blame_ns": th.blame_ns,
                "waited_for": th.waited_for.iter().map(|w| w.map(|i| t.locks[i].name.as_str())).collect::<Vec<_>>(),
            })
        })
        .collect();
    let doc = json!({
        "view": "timeline",
        "interval_ns": t.interval_ns,
        "intervals": t.intervals,
        "origin_ns": t.origin_ns,
        "duration_ns": t.end_ns - t.origin_ns,
        "phase_threshold": t.threshold,
        "acquisitions_available": t.acquisitions_known,
        "running_ns": t.running_ns,
        "work_ns": t.work_ns,
        "wait_ns": t.wait_ns,
        "locks": locks,
        "threads": threads,
    });
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(io::Error::other)?;
    writeln!(out)
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

    #[test]
    fn a_sparkline_has_one_bar_per_value() {
        assert_eq!(sparkline(&[0.0, 0.01, 0.5, 1.0, 2.0]), " ▁▄██");
    }
}
