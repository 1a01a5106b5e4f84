//! Profile analysis: from a decoded [`Profile`] to source-level call paths with costs.
//!
//! Job: select the processes and threads asked for, merge metric lists by name and derive
//! the per-kind metrics the sample flags call for ([`metrics`]), add up samples per
//! distinct call path, symbolize each distinct frame once
//! ([`symbolize`]) and expand inlined frames, giving an [`Analysis`]: weighted call paths
//! plus totals and process/thread listings. The views are built from it: the
//! calling-context tree ([`cct::top_down`]) and the callers/flat views ([`callers`]).
//!
//! Invariants: every per-metric vector is indexed by merged metric id and has
//! `metrics.len()` entries; the values of all [`WeightedPath`]s add up to `totals`; a
//! sample's value is in its base metric and in each derived metric its flags select (so a
//! derived metric never exceeds its base); paths are root first and never empty.
//!
//! Not async-signal-safe (allocates, reads files); single-threaded.

mod calibration;
pub mod callers;
pub mod cct;
pub mod chains;
pub mod clock;
pub mod findings;
mod intervals;
pub mod late_work;
pub mod line_costs;
pub mod loaded;
mod lock_forwarders;
pub mod lock_sites;
pub mod lock_wrappers;
pub mod locks;
pub mod metrics;
mod paths;
pub mod shifts;
pub mod symbolize;
mod symtab;
pub(crate) mod tailcall;
pub mod timeline;
pub mod wait_class;

#[cfg(test)]
pub(crate) mod testutil;

use crate::format::read::{ProcessProfile, Profile};
use metrics::MetricTable;
use shifts::Shifts;
use std::collections::HashMap;
use std::path::PathBuf;
use symbolize::{CodeAddress, Symbolizer};

/// Why an analysis cannot be made as asked. Messages name the fix.
#[derive(Debug, thiserror::Error)]
pub enum AttributionError {
    #[error("unknown metric '{name}': this profile has {available}; pass one of them to --metric")]
    UnknownMetric { name: String, available: String },
    #[error(
        "no process with pid {pid} in this profile (it has {available}); pass one of them to --pid"
    )]
    NoSuchProcess { pid: u32, available: String },
    #[error(
        "no thread with tid {tid} in {scope} (it has {available}); pass one of them to --thread"
    )]
    NoSuchThread {
        tid: u32,
        scope: String,
        available: String,
    },
    #[error(
        "percentages of effort need the metrics work and idleness, and this profile has \
         {available}; record it with a blameprof that measures lock waiting, or pass \
         --percent-of total"
    )]
    NoEffort { available: String },
    #[error(
        "the run lasted {duration}: --interval {interval} makes {intervals} intervals, more \
         than the {max} a timeline shows; pass --interval {suggested} or longer"
    )]
    TooManyIntervals {
        duration: String,
        interval: String,
        intervals: u64,
        max: usize,
        suggested: String,
    },
}

/// Which samples to analyse.
#[derive(Debug, Clone, Copy, Default)]
pub struct Filter {
    /// Only process images with this pid (all exec generations of it).
    pub pid: Option<u32>,
    /// Only samples of this thread.
    pub tid: Option<u32>,
}

/// Index of an interned function in [`Names`].
pub type FunctionId = u32;
/// Index of an interned source file name in [`Names`].
pub type FileId = u32;

/// A function: its (demangled) name and the path of the module it is in ("" when none).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Function {
    pub name: String,
    pub module: String,
}

/// Interned function and file names.
#[derive(Debug, Default)]
pub struct Names {
    functions: Vec<Function>,
    function_ids: HashMap<Function, FunctionId>,
    files: Vec<String>,
    file_ids: HashMap<String, FileId>,
}

impl Names {
    pub fn function(&self, id: FunctionId) -> &Function {
        &self.functions[id as usize]
    }

    pub fn file(&self, id: FileId) -> &str {
        &self.files[id as usize]
    }

    fn intern_function(&mut self, name: &str, module: &str) -> FunctionId {
        let key = Function {
            name: name.to_owned(),
            module: module.to_owned(),
        };
        if let Some(&id) = self.function_ids.get(&key) {
            return id;
        }
        let id = self.functions.len() as FunctionId;
        self.functions.push(key.clone());
        self.function_ids.insert(key, id);
        id
    }

    fn intern_file(&mut self, file: &str) -> FileId {
        if let Some(&id) = self.file_ids.get(file) {
            return id;
        }
        let id = self.files.len() as FileId;
        self.files.push(file.to_owned());
        self.file_ids.insert(file.to_owned(), id);
        id
    }
}

/// A source line: where in its function a frame was (the call site for callers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SourceLine {
    pub file: Option<FileId>,
    pub line: Option<u32>,
}

/// One source-level frame of a call path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Loc {
    pub function: FunctionId,
    pub line: SourceLine,
    /// Inlined into the frame before it (its caller) in a root-first path.
    pub inlined: bool,
}

/// A distinct source-level call path, root first, with the cost of the samples that ended
/// in it (per merged metric).
#[derive(Debug, Clone)]
pub struct WeightedPath {
    pub locs: Vec<Loc>,
    pub values: Vec<u64>,
}

/// What a process image said about itself.
#[derive(Debug, Clone)]
pub struct ProcessSummary {
    pub pid: u32,
    pub exec_generation: u32,
    pub argv: Vec<String>,
    pub exe: String,
    pub sample_source: String,
    pub requested_hz: u64,
    pub period_ns: u64,
    /// Timer samples (metric `work`) and the CPU time they carry, to measure the rate the
    /// source actually delivered.
    pub timer_samples: u64,
    pub timer_ns: u64,
    /// Whether the image wrote its end record (it exited or exec'd); false when it was
    /// killed or crashed (its samples not yet written then are missing) or still runs.
    pub ended_cleanly: bool,
    /// CPU time of its threads that ended cleanly (their end records), and of those among
    /// them that ran less than one sampling period (which a CPU-time timer cannot sample).
    pub ended_threads_cpu_ns: u64,
    pub short_threads_cpu_ns: u64,
}

/// A thread and its cost per merged metric.
#[derive(Debug, Clone)]
pub struct ThreadSummary {
    pub pid: u32,
    pub tid: u32,
    pub name: String,
    pub start_routine: Option<String>,
    pub is_main: bool,
    pub totals: Vec<u64>,
}

/// The analysed profile: everything the views need.
#[derive(Debug)]
pub struct Analysis {
    pub profile_path: PathBuf,
    /// The selection the analysis was made with.
    pub filter: Filter,
    pub metrics: MetricTable,
    /// Sum of all selected samples' values, per merged metric.
    pub totals: Vec<u64>,
    /// Number of selected samples.
    pub samples: u64,
    /// Samples the runtime lost in the selected processes.
    pub lost_samples: u64,
    /// Process counters summed over the selected processes (gauges, `*_peak*`: their
    /// largest), by name (non-zero only).
    pub counters: Vec<(String, u64)>,
    /// Damage notes of parts read in salvage mode.
    pub damage: Vec<String>,
    pub processes: Vec<ProcessSummary>,
    /// Threads of the selected processes, by (pid, tid).
    pub threads: Vec<ThreadSummary>,
    pub names: Names,
    pub paths: Vec<WeightedPath>,
}

/// Analyses the samples of `profile` that pass `filter`.
pub fn analyze(
    profile: &Profile,
    filter: Filter,
    symbolizer: &mut Symbolizer,
    shifts: &mut Shifts,
) -> Result<Analysis, AttributionError> {
    let selected = select(profile, filter)?;
    let (metrics, sample_maps) = metrics::merge(profile, &selected, filter.tid);

    let mut names = Names::default();
    let weighed = paths::weigh(
        profile,
        &selected,
        filter.tid,
        &sample_maps,
        (metrics.len(), metrics.id(metrics::ROOT).ok()),
        (symbolizer, shifts),
        &mut names,
    );

    let mut counters: HashMap<&str, u64> = HashMap::new();
    let mut processes = Vec::new();
    let mut threads = Vec::new();
    for &p in &selected {
        let proc = &profile.processes[p];
        for (name, value) in &proc.counters {
            let total = counters.entry(name).or_default();
            // Gauges (the most of something at once) and error numbers are not added up
            // across processes.
            let gauge = name.contains("_peak") || name == crate::format::counters::WRITE_LAST_ERRNO;
            *total = match gauge {
                true => (*total).max(*value),
                false => *total + value,
            };
        }
        for t in &proc.threads {
            if filter.tid.is_some_and(|tid| tid != t.tid) {
                continue;
            }
            threads.push(ThreadSummary {
                pid: proc.header.pid,
                tid: t.tid,
                name: t.name.clone(),
                start_routine: t.start_routine.map(|frame| {
                    let chain = symbolizer.symbolize(
                        proc.module(frame.module),
                        CodeAddress::InstructionPointer(frame.offset),
                    );
                    chain[chain.len() - 1].function.clone()
                }),
                is_main: t.is_main,
                totals: weighed
                    .per_thread
                    .get(&(p, t.tid))
                    .cloned()
                    .unwrap_or_else(|| vec![0; metrics.len()]),
            });
        }
        processes.push(summarize_process(proc));
    }
    threads.sort_by_key(|t| (t.pid, t.tid));
    let mut counters: Vec<(String, u64)> = counters
        .into_iter()
        .filter(|&(_, v)| v > 0)
        .map(|(n, v)| (n.to_owned(), v))
        .collect();
    counters.sort();

    Ok(Analysis {
        profile_path: profile.path.clone(),
        filter,
        totals: weighed.totals,
        samples: weighed.samples,
        lost_samples: selected
            .iter()
            .map(|&p| profile.processes[p].lost_samples())
            .sum(),
        counters,
        damage: selected
            .iter()
            .filter_map(|&p| profile.processes[p].damage.clone())
            .chain(profile.skipped.iter().cloned())
            .collect(),
        processes,
        threads,
        names,
        paths: weighed.paths,
        metrics,
    })
}

/// The metrics an analysis of `profile` with `filter` has, with the same merged ids, without
/// analysing it (cheap: no symbolization): to check metric names before [`analyze`].
pub fn metric_table(profile: &Profile, filter: Filter) -> Result<MetricTable, AttributionError> {
    let selected = select(profile, filter)?;
    Ok(metrics::merge(profile, &selected, filter.tid).0)
}

impl Analysis {
    /// Total effort, work + idleness: the base for percentages of effort. Errors when the
    /// profile lacks either metric.
    pub fn effort(&self) -> Result<u64, AttributionError> {
        let (work, idleness) = self.metrics.effort_ids()?;
        Ok(self.totals[work] + self.totals[idleness])
    }

    /// The total of the metric called `name`; 0 when the profile has no such metric.
    pub fn total_of(&self, name: &str) -> u64 {
        self.metrics.id(name).map_or(0, |id| self.totals[id])
    }

    /// The value of the process counter `name` (0 when absent).
    pub fn counter(&self, name: &str) -> u64 {
        self.counters
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |&(_, v)| v)
    }
}

fn summarize_process(proc: &ProcessProfile) -> ProcessSummary {
    let h = &proc.header;
    let work = h.metrics.iter().position(|m| m.name == metrics::WORK);
    let (timer_samples, timer_ns) = proc
        .samples
        .iter()
        .filter(|s| Some(usize::from(s.metric)) == work)
        .fold((0, 0), |(n, ns), s| (n + 1, ns + s.value));
    let period = 1_000_000_000 / h.requested_hz.max(1);
    let cpu = |short: bool| -> u64 {
        proc.threads
            .iter()
            .filter_map(|t| t.cpu_ns)
            .filter(|&ns| !short || ns < period)
            .sum()
    };
    ProcessSummary {
        ended_threads_cpu_ns: cpu(false),
        short_threads_cpu_ns: cpu(true),
        timer_samples,
        timer_ns,
        pid: h.pid,
        exec_generation: h.exec_generation,
        argv: h.argv.clone(),
        exe: h.exe.clone(),
        sample_source: h.sample_source.clone(),
        requested_hz: h.requested_hz,
        period_ns: h.period_ns,
        ended_cleanly: proc.ended_cleanly,
    }
}

/// Indices of the processes `filter` selects; errors when its pid or tid matches nothing.
/// The processes `filter` selects, whole: a thread filter selects its thread's processes
/// (the lock table, the timeline and the findings are about locks and stages, not one
/// thread's samples).
fn select_processes(profile: &Profile, filter: Filter) -> Result<Vec<usize>, AttributionError> {
    select(
        profile,
        Filter {
            tid: None,
            ..filter
        },
    )
}

fn select(profile: &Profile, filter: Filter) -> Result<Vec<usize>, AttributionError> {
    let selected: Vec<usize> = (0..profile.processes.len())
        .filter(|&i| {
            filter
                .pid
                .map_or(true, |pid| profile.processes[i].header.pid == pid)
        })
        .collect();
    if let (Some(pid), true) = (filter.pid, selected.is_empty()) {
        let mut pids: Vec<u32> = profile.processes.iter().map(|p| p.header.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        return Err(AttributionError::NoSuchProcess {
            pid,
            available: listing(pids.iter().map(u32::to_string)),
        });
    }
    if let Some(tid) = filter.tid {
        let has_thread =
            |p: &ProcessProfile| p.thread(tid).is_some() || p.samples.iter().any(|s| s.tid == tid);
        if !selected.iter().any(|&i| has_thread(&profile.processes[i])) {
            let threads = selected.iter().flat_map(|&i| {
                profile.processes[i]
                    .threads
                    .iter()
                    .map(|t| match t.name.as_str() {
                        "" => t.tid.to_string(),
                        name => format!("{} ({name})", t.tid),
                    })
            });
            return Err(AttributionError::NoSuchThread {
                tid,
                scope: match filter.pid {
                    Some(pid) => format!("process {pid}"),
                    None => "this profile".to_owned(),
                },
                available: listing(threads),
            });
        }
    }
    Ok(selected)
}

/// "a, b, c" for at most 10 items, then "and N more"; "none" when empty.
fn listing(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    match items.len() {
        0 => "none".to_owned(),
        n if n > 10 => format!("{}, and {} more", items[..10].join(", "), n - 10),
        _ => items.join(", "),
    }
}
