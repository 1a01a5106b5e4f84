//! The blame that moves off the call paths it was recorded at, per process, computed once.
//!
//! Job: late work at barriers, joins and events ([`late_work`]) and the `root` metric's
//! chains of waits ([`chains`]) each read a whole process's samples; the analysis, the lock
//! table and a per-thread export (pprof's thread labels: one analysis per thread) all need
//! them.
//! [`Shifts`] keeps each process's, made at its first use, so that they are made once per
//! loaded profile (a db_bench profile of 52 threads spent 25% of its pprof export
//! remaking the chains, 53 times).
//!
//! Invariants: the cache belongs to one profile: it is keyed by process index, so it must
//! never be shared between profiles (`Loaded` and an export each own one). Not
//! async-signal-safe (allocates); single-threaded.

use super::calibration::Calibration;
use super::chains::{chains, Chains};
use super::late_work::{late_work, Share};
use crate::format::read::{Profile, StackId};
use std::collections::{HashMap, HashSet};

/// One process's moves: per blame sample (its index in the process's samples) the work
/// paths its blame moves to, and its chains.
#[derive(Debug, Default)]
pub struct ProcessShifts {
    pub late_work: HashMap<usize, Vec<Share>>,
    pub chains: Chains,
}

/// The moves of a profile's processes, each made at its first use.
#[derive(Debug, Default)]
pub struct Shifts {
    of: HashMap<usize, ProcessShifts>,
}

impl Shifts {
    /// Process `p`'s moves (of `profile`, the one profile this cache serves);
    /// `lock_paths` tells which waiters' recorded paths are a lock's by their names
    /// (`paths::lock_paths_of`), asked only when they are made.
    pub fn of(
        &mut self,
        profile: &Profile,
        p: usize,
        lock_paths: impl FnOnce(&[(StackId, bool)]) -> HashSet<(StackId, bool)>,
    ) -> &ProcessShifts {
        self.of.entry(p).or_insert_with(|| {
            let proc = &profile.processes[p];
            ProcessShifts {
                late_work: late_work(proc, lock_paths),
                chains: chains(proc, Calibration::of(proc)),
            }
        })
    }
}
