//! A progress line on standard error for the steps of a report that take more than a
//! second: reading the profile, symbolizing (with a count of addresses looked up), building
//! the views.
//!
//! Job: nothing at all unless standard error is a terminal and the step lasts a second;
//! then an indicatif spinner with the step, the count and the time, cleared when done.
//!
//! Not async-signal-safe (allocates, starts a thread).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a step runs before the line appears.
const DELAY: Duration = Duration::from_secs(1);
const TICK: Duration = Duration::from_millis(120);

/// The step under way, and what it counts.
#[derive(Default)]
struct Step {
    what: String,
    count: Option<(Arc<AtomicU64>, &'static str)>,
}

/// A progress line; cleared when dropped.
pub struct Progress {
    bar: ProgressBar,
    step: Arc<Mutex<Step>>,
}

impl Progress {
    /// Starts with step `what`.
    pub fn start(what: &str) -> Progress {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            bar.set_style(style);
        }
        let step = Arc::new(Mutex::new(Step {
            what: what.to_owned(),
            count: None,
        }));
        if std::io::stderr().is_terminal() {
            let (shown, watched) = (bar.clone(), step.clone());
            std::thread::spawn(move || show_after_delay(&shown, &watched));
        }
        Progress { bar, step }
    }

    /// Moves on to step `what`, counting `count` (a counter another part of the program
    /// increments) as `unit` when given.
    pub fn step(&self, what: &str, count: Option<(Arc<AtomicU64>, &'static str)>) {
        if let Ok(mut step) = self.step.lock() {
            *step = Step {
                what: what.to_owned(),
                count,
            };
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// After [`DELAY`], draws `bar` on standard error and keeps its message current until it
/// is finished.
fn show_after_delay(bar: &ProgressBar, step: &Mutex<Step>) {
    std::thread::sleep(DELAY);
    if bar.is_finished() {
        return;
    }
    bar.set_draw_target(ProgressDrawTarget::stderr());
    while !bar.is_finished() {
        if let Ok(step) = step.lock() {
            let message = match &step.count {
                Some((n, unit)) => format!("{}: {} {unit}", step.what, n.load(Ordering::Relaxed)),
                None => step.what.clone(),
            };
            bar.set_message(message);
        }
        bar.tick();
        std::thread::sleep(TICK);
    }
}
