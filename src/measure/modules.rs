//! The program's module set as the profile records it: ids for the modules the loader
//! maps, a record of each load and unload at start-up, `dlopen`, `dlclose` and in a fork
//! child, and the unwinder told before a module's sections may be unmapped.
//!
//! Invariants: module ids are handed out under [`NEXT_MODULE_ID`], so two threads that
//! `dlopen` at once never give two modules one id; a fork holds that lock (and the module
//! set's) across the fork, so the child never inherits them held. Not async-signal-safe:
//! called from the interposed loader functions and the lifecycle, never from the handler.

use crate::runtime_lock::SpinLock;
use crate::sampler::process::{self, sampling_enabled};
use crate::sampler::records;
use crate::sys::gettid;
use crate::unwind::module_set::ModuleChanges;

/// The id the next module the loader maps will get (ids are never reused in a process).
static NEXT_MODULE_ID: SpinLock<u32> = SpinLock::new(1);

/// Just before a `dlclose`: the unwinder stops borrowing sections from module mappings
/// that it may unmap.
pub fn module_may_unload() {
    if sampling_enabled() {
        process::modules().own_sections();
    }
}

/// Re-reads the module list after `dlopen`/`dlclose` and records what changed.
pub fn modules_changed() {
    if sampling_enabled() {
        record(&refresh());
    }
}

/// Re-reads the loader's module list into the module set; returns what changed.
pub(crate) fn refresh() -> ModuleChanges {
    let mut next = NEXT_MODULE_ID.lock();
    process::modules().refresh(&mut next)
}

/// Writes the loads and unloads in `changes` to the profile (nothing if there are none).
pub(crate) fn record(changes: &ModuleChanges) {
    if changes.added.is_empty() && changes.removed.is_empty() {
        return;
    }
    records::write(gettid(), |w| {
        for (id, m) in &changes.added {
            records::module_load(w, *id, m)?;
        }
        for id in &changes.removed {
            records::module_unload(w, *id)?;
        }
        Ok(())
    });
}

/// Writes every module of the set as loaded: a fork child's new part starts with them.
pub(crate) fn record_all() {
    record(&ModuleChanges {
        added: process::modules().snapshot(),
        removed: Vec::new(),
    });
}

/// Before a fork: takes the id lock and the module set's, in that order.
pub(crate) fn fork_prepare() {
    NEXT_MODULE_ID.raw_lock();
    process::modules().fork_prepare();
}

/// After a fork, in the parent and in the child: releases what [`fork_prepare`] took.
pub(crate) fn fork_release() {
    process::modules().fork_release();
    NEXT_MODULE_ID.raw_unlock();
}
