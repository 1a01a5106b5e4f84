//! The sampler's process-wide state: whether samples are being taken, the configuration and
//! the published module set.
//!
//! Job: the few globals every part of the measurement reads; set by the lifecycle
//! (`blameprof_measure::lifecycle`) at start-up, fork, exec and exit, and by nothing else.
//!
//! Invariants: sampling is enabled only after the configuration, the thread table and the
//! main thread's state exist, and is disabled before any of them is torn down.
//!
//! [`sampling_enabled`] and [`modules`] are async-signal-safe (the handler uses them); the
//! setters are not.

use super::config::Config;
use crate::unwind::module_set::ModuleSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

static CONFIG: OnceLock<Config> = OnceLock::new();
/// Read by every interposed lock call: on a cache line of its own, so that counters and
/// other state written nearby do not make those reads miss.
#[repr(align(64))]
struct Enabled(AtomicBool);
static ENABLED: Enabled = Enabled(AtomicBool::new(false));
static MODULES: ModuleSet = ModuleSet::new();

/// Whether samples are being taken. Async-signal-safe.
#[inline(always)]
pub fn sampling_enabled() -> bool {
    ENABLED.0.load(Ordering::Acquire)
}

/// Starts sampling.
pub fn enable() {
    ENABLED.0.store(true, Ordering::Release);
}

/// Stops sampling; whether it was on.
pub fn disable() -> bool {
    ENABLED.0.swap(false, Ordering::AcqRel)
}

/// The published module set. Async-signal-safe (use `try_read`).
pub fn modules() -> &'static ModuleSet {
    &MODULES
}

/// The configuration, once start-up has read it.
pub fn config() -> Option<&'static Config> {
    CONFIG.get()
}

/// Keeps the configuration read at start-up (the first one stays).
pub fn set_config(cfg: Config) -> &'static Config {
    CONFIG.get_or_init(|| cfg)
}

/// The sampling signal, when the runtime is active (the interposed `sigaction` protects it).
pub fn sampling_signal() -> Option<i32> {
    config().map(|c| c.signal)
}
