//! The timeline as a picture (`blameprof timeline -o timeline.svg`): one self-contained
//! SVG, readable without a legend hunt.
//!
//! Job: draw, on one time axis, the work and waiting of all threads (stacked, as shares
//! of their running time), one row per top lock (each interval shaded by its critical
//! section pressure, high phases underlined and labelled with their times, the row
//! labelled with the lock's name, kind, whole-run and peak pressure in the lock's own
//! colour; the shade grows with the square root of the pressure, so that 10% reads), and a
//! state strip per thread (each interval split into computing, waiting in the colour of
//! the lock it waited for most, grey for other waits, and a black cap, up to a third of the
//! strip, as the blame it took grows to the interval's length). Every cell has a tooltip
//! with its numbers.
//!
//! Invariants: text is XML-escaped; the picture's size depends on the number of rows, not
//! of intervals (cells narrow as intervals grow). Not async-signal-safe (allocates).

use super::units::format_value;
use crate::attribution::timeline::Timeline;
use std::fmt::Write;

const WIDTH: f64 = 1200.0;
const LABEL: f64 = 300.0;
const PLOT: f64 = WIDTH - LABEL - 20.0;
const LOCK_ROW: f64 = 30.0;
const THREAD_ROW: f64 = 16.0;
const TOTALS_ROW: f64 = 48.0;
/// Thread strips drawn at most (the rest are counted in a line).
const MAX_THREADS: usize = 64;
/// Distinct colours for the locks (and their waits on the thread strips).
const PALETTE: [&str; 8] = [
    "#d62728", "#1f77b4", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#bcbd22",
];
const WORK: &str = "#2ca02c";
const OTHER_WAIT: &str = "#b0b0b0";

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The SVG of timeline `t`, in at most one column per pixel of the plot.
pub fn render(t: &Timeline) -> String {
    let t = &t.coarsened(PLOT as usize);
    let mut body = String::new();
    let cell = PLOT / t.intervals as f64;
    let x = |i: usize| LABEL + i as f64 * cell;
    let mut y = 50.0;
    let secs = |i: usize| t.seconds(i);
    // The time axis: about ten ticks.
    let step = (t.intervals / 10).max(1);
    for i in (0..=t.intervals).step_by(step) {
        let _ = write!(
            body,
            r##"<line x1="{0:.1}" y1="{1}" x2="{0:.1}" y2="{2}" stroke="#ddd"/><text x="{0:.1}" y="{3}" class="tick">{4:.1} s</text>"##,
            x(i),
            y,
            y + 8.0,
            y - 4.0,
            secs(i)
        );
    }
    y += 14.0;
    // All threads: work and waiting as shares of their running time.
    let _ = write!(
        body,
        r##"<text x="8" y="{:.1}" class="label">all threads</text><text x="8" y="{:.1}" class="small"><tspan fill="{WORK}">work {}</tspan>, <tspan fill="#e6550d">waiting {}</tspan></text>"##,
        y + 18.0,
        y + 34.0,
        format_value(t.work_ns.iter().sum(), "ns"),
        format_value(t.wait_ns.iter().sum(), "ns"),
    );
    for i in 0..t.intervals {
        let run = t.running_ns[i].max(1) as f64;
        let work = (t.work_ns[i] as f64 / run).min(1.0);
        let wait = (t.wait_ns[i] as f64 / run).min(1.0 - work);
        let (hw, hi) = (work * TOTALS_ROW, wait * TOTALS_ROW);
        let tip = format!(
            "{:.1}-{:.1} s: work {}, waiting {}, running {}",
            secs(i),
            secs(i + 1),
            format_value(t.work_ns[i], "ns"),
            format_value(t.wait_ns[i], "ns"),
            format_value(t.running_ns[i], "ns")
        );
        let _ = write!(
            body,
            r##"<g><title>{tip}</title><rect x="{:.2}" y="{:.1}" width="{:.2}" height="{:.1}" fill="{WORK}"/><rect x="{:.2}" y="{:.1}" width="{:.2}" height="{:.1}" fill="#e6550d"/></g>"##,
            x(i),
            y + TOTALS_ROW - hw,
            cell,
            hw,
            x(i),
            y + TOTALS_ROW - hw - hi,
            cell,
            hi
        );
    }
    y += TOTALS_ROW + 20.0;
    // One row per lock.
    if t.locks.is_empty() {
        let _ = write!(
            body,
            r##"<text x="8" y="{:.1}" class="label">No lock was waited for.</text>"##,
            y + 16.0
        );
        y += LOCK_ROW;
    }
    for (n, l) in t.locks.iter().enumerate() {
        let colour = PALETTE[n % PALETTE.len()];
        let kind = l.kind.map_or("lock", crate::format::WaitKind::name);
        let _ = write!(
            body,
            r##"<rect x="8" y="{:.1}" width="10" height="10" fill="{colour}"/><text x="24" y="{:.1}" class="label" fill="{colour}">{}</text><text x="24" y="{:.1}" class="small">{kind}: {:.1}% over the run, peak {:.1}%</text>"##,
            y + 4.0,
            y + 13.0,
            escape(&l.name),
            y + 26.0,
            l.overall_pressure * 100.0,
            l.peak_pressure * 100.0
        );
        for i in 0..t.intervals {
            let p = l.pressure[i];
            let acquisitions = l
                .acquisitions
                .as_ref()
                .map_or(String::new(), |a| format!(", {} acquisitions", a[i]));
            let tip = format!(
                "{} {:.1}-{:.1} s: pressure {:.1}%, waiting {}, blame {}{acquisitions}",
                escape(&l.name),
                secs(i),
                secs(i + 1),
                p * 100.0,
                format_value(l.wait_ns[i], "ns"),
                format_value(l.blame_ns[i], "ns"),
            );
            let _ = write!(
                body,
                r##"<rect x="{:.2}" y="{:.1}" width="{:.2}" height="{}" fill="{colour}" fill-opacity="{:.3}" stroke="#eee" stroke-width="0.3"><title>{tip}</title></rect>"##,
                x(i),
                y,
                cell,
                LOCK_ROW - 8.0,
                0.06 + 0.94 * p.clamp(0.0, 1.0).sqrt()
            );
        }
        for p in l.phases.iter().filter(|p| p.high) {
            let _ = write!(
                body,
                r##"<rect x="{:.2}" y="{:.1}" width="{:.2}" height="3" fill="{colour}"/><text x="{:.2}" y="{:.1}" class="phase" fill="{colour}">{:.1}-{:.1} s, {:.0}%</text>"##,
                x(p.start),
                y + LOCK_ROW - 6.0,
                (p.end - p.start) as f64 * cell,
                x(p.start) + 2.0,
                y + LOCK_ROW - 10.0,
                secs(p.start),
                secs(p.end),
                p.pressure * 100.0
            );
        }
        y += LOCK_ROW + 6.0;
    }
    // Thread states.
    y += 10.0;
    let _ = write!(
        body,
        r##"<text x="8" y="{:.1}" class="label">threads</text><text x="90" y="{:.1}" class="small"><tspan fill="{WORK}">computing</tspan>, waiting (in the colour of the lock above; <tspan fill="{OTHER_WAIT}">grey: other waits</tspan>), <tspan fill="#000">black cap: blamed</tspan></text>"##,
        y, y
    );
    y += 8.0;
    for th in t.threads.iter().take(MAX_THREADS) {
        let _ = write!(
            body,
            r##"<text x="8" y="{:.1}" class="small">{} ({})</text>"##,
            y + 11.0,
            escape(&th.name),
            th.tid
        );
        for i in 0..t.intervals {
            let span = t.interval_ns as f64;
            let work = (th.work_ns[i] as f64 / span).min(1.0);
            let wait = (th.wait_ns[i] as f64 / span).min(1.0 - work);
            let blame = (th.blame_ns[i] as f64 / span).min(1.0);
            let wait_colour = th.waited_for[i].map_or(OTHER_WAIT, |l| PALETTE[l % PALETTE.len()]);
            let waited = th.waited_for[i].map_or(String::new(), |l| {
                format!(" (most for {})", escape(&t.locks[l].name))
            });
            let tip = format!(
                "{} {:.1}-{:.1} s: computing {}, waiting {}{waited}, blamed {}",
                escape(&th.name),
                secs(i),
                secs(i + 1),
                format_value(th.work_ns[i], "ns"),
                format_value(th.wait_ns[i], "ns"),
                format_value(th.blame_ns[i], "ns"),
            );
            let h = THREAD_ROW - 3.0;
            let _ = write!(
                body,
                r##"<g><title>{tip}</title><rect x="{:.2}" y="{:.1}" width="{:.2}" height="{h}" fill="#f4f4f4"/><rect x="{:.2}" y="{:.1}" width="{:.2}" height="{h}" fill="{WORK}"/><rect x="{:.2}" y="{:.1}" width="{:.2}" height="{h}" fill="{wait_colour}"/>"##,
                x(i),
                y,
                cell,
                x(i),
                y,
                cell * work,
                x(i) + cell * work,
                y,
                cell * wait
            );
            if blame > 0.0 {
                // A cap over the strip, at most a third of it: blame can exceed the
                // interval (several waiters behind one hold).
                let _ = write!(
                    body,
                    r##"<rect x="{:.2}" y="{:.1}" width="{:.2}" height="{:.1}" fill="#000"/>"##,
                    x(i),
                    y,
                    cell,
                    (h / 3.0 * blame).max(1.0)
                );
            }
            body.push_str("</g>");
        }
        y += THREAD_ROW;
    }
    if t.threads.len() > MAX_THREADS {
        let _ = write!(
            body,
            r##"<text x="8" y="{:.1}" class="small">... and {} more threads (see report --view timeline --format json)</text>"##,
            y + 12.0,
            t.threads.len() - MAX_THREADS
        );
        y += THREAD_ROW;
    }
    let height = y + 20.0;
    let title = format!(
        "blameprof timeline: {} intervals of {}, critical section pressure per lock (high phases at {:.0}% and above underlined)",
        t.intervals,
        format_value(t.interval_ns, "ns"),
        t.threshold * 100.0
    );
    format!(
        r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="DejaVu Sans, Verdana, sans-serif">
<style>.label{{font-size:13px;font-weight:bold}} .small{{font-size:11px;fill:#333}} .tick{{font-size:10px;fill:#555;text-anchor:middle}} .phase{{font-size:10px;font-weight:bold}}</style>
<rect width="100%" height="100%" fill="#fff"/>
<text x="8" y="22" class="label">{}</text>
{body}
</svg>
"##,
        escape(&title)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::timeline::{LockSeries, Phase, ThreadSeries};

    #[test]
    fn the_picture_names_each_lock_its_phases_and_each_thread() {
        let t = Timeline {
            interval_ns: 1_000_000_000,
            intervals: 2,
            origin_ns: 0,
            end_ns: 2_000_000_000,
            threshold: 0.1,
            running_ns: vec![4_000_000_000, 4_000_000_000],
            work_ns: vec![1_000_000_000, 3_900_000_000],
            wait_ns: vec![2_800_000_000, 0],
            locks: vec![LockSeries {
                pid: 1,
                address: 0x10,
                name: "map<K,V> lock".into(),
                kind: Some(crate::format::WaitKind::Mutex),
                wait_ns: vec![2_800_000_000, 0],
                blame_ns: vec![2_700_000_000, 0],
                acquisitions: Some(vec![3000, 10]),
                try_failed: Some(vec![0, 0]),
                pressure: vec![0.7, 0.0],
                phases: vec![
                    Phase {
                        start: 0,
                        end: 1,
                        high: true,
                        pressure: 0.7,
                    },
                    Phase {
                        start: 1,
                        end: 2,
                        high: false,
                        pressure: 0.0,
                    },
                ],
                overall_pressure: 0.35,
                peak_pressure: 0.7,
            }],
            threads: vec![ThreadSeries {
                pid: 1,
                tid: 7,
                name: "worker".into(),
                work_ns: vec![250_000_000, 1_000_000_000],
                wait_ns: vec![700_000_000, 0],
                blame_ns: vec![100_000_000, 0],
                waited_for: vec![Some(0), None],
            }],
            timed: true,
            acquisitions_known: true,
        };
        let svg = render(&t);
        assert!(svg.contains("map&lt;K,V&gt; lock"), "escaped name");
        assert!(svg.contains("0.0-1.0 s, 70%"), "the high phase");
        assert!(svg.contains("worker (7)"));
        assert!(svg.contains("3000 acquisitions"));
        assert!(!svg.contains("<K,V>"));
    }
}
