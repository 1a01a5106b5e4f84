//! The timeline as text and JSON (`report --view timeline`; the SVG picture of `blameprof
//! timeline` is [`super::timeline_svg`]).
//!
//! Job: write a laid-out timeline (`attribution::timeline`): per top lock
//! its whole-run and peak pressure, its phases with their start and end times, a sparkline
//! of its pressure and a row per interval (pressure, waiting, blame, acquisitions, failed
//! trylocks); per thread its work, waiting and blame per interval in JSON.
//!
//! Invariants: the JSON carries every interval of every series shown (text too: an
//! interval row per interval). Not async-signal-safe (allocates).

use super::units::format_value;
use crate::attribution::timeline::{LockSeries, Timeline};
use crate::format::WaitKind;
use serde_json::{json, Value};
use std::io::{self, Write};

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
    fn a_sparkline_has_one_bar_per_value() {
        assert_eq!(sparkline(&[0.0, 0.01, 0.5, 1.0, 2.0]), " ▁▄██");
    }
}
