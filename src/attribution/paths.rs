//! From samples to weighted source-level call paths.
//!
//! Job: add up sample values per distinct recorded call path (so a million samples cost a
//! million hash lookups, not a million symbolizations), then turn each distinct recorded
//! path into a root-first path of [`Loc`]s, expanding inlined frames, and merge recorded
//! paths that read the same at source level.
//!
//! A function that ends by *jumping* to another (a tail call: `return worker(x);` or
//! `return pthread_mutex_unlock(&m);` at -O2) is missing from the recorded path. Wherever the
//! call before a program frame's return address names a function that the next frame
//! (nearer the leaf) does not lie in, that function is put back between the two
//! ([`super::tailcall`]); before a run of runtime frames, that puts back the function that
//! jumped to the lock function.
//!
//! Frames inside the runtime library ([`super::lock_sites::is_runtime_module`]) are
//! collapsed: every run of consecutive runtime frames becomes its outermost frame, shown as
//! its out-of-line function only (no inlined runtime internals, no source line). That frame
//! is the interposed entry point the program called (`pthread_mutex_lock`, ...), so lock
//! waits and blame read `... lookup -> pthread_mutex_lock` (docs/lock-blame-contract.md).
//! A run whose outermost frame is not an entry point but one of the runtime's own (Rust)
//! functions is the runtime calling back into the program (the thread-start trampoline, an
//! OpenMP region's): it is left out, so threads read `start_thread -> worker`; a path that
//! ends in such a run is named by the first entry point inside it, if any
//! (`omp_implicit_barrier`, the end of an OpenMP region), else by its outermost frame.
//!
//! A barrier's, join's or event's blame lands on the late thread's work meanwhile
//! ([`super::late_work`]), and the analysis-only metric `root` takes each blame sample's
//! amount after the chains of waits ([`super::chains`]), spread like its blame.
//!
//! Invariants: each distinct (process, frame, address kind) is symbolized once; the values
//! of the returned paths add up to the returned totals; a sample's value counts in its base
//! metric and in the derived metrics its flags select ([`super::metrics::merge`]), at its
//! process's calibration if it is a sampled estimate ([`super::calibration`]); a sample
//! whose metric index is not declared by its process header is ignored (neither counted nor
//! charged); no path holds two consecutive runtime locations; a location is put back only
//! where a return address proves it ([`super::tailcall::tail_called_through`]).
//!
//! Not async-signal-safe (allocates); single-threaded.

use super::calibration::Calibration;
use super::lock_sites::is_runtime_module;
use super::metrics::SampleMap;
use super::shifts::Shifts;
use super::symbolize::{CodeAddress, SourceFrame, Symbolizer};
use super::tailcall::{tail_called_through, CallSites, Callee, Definition, Physical, Reach, Site};
use super::wait_class::path_of_a_lock;
use super::{Loc, Names, SourceLine, WeightedPath};
use crate::format::read::{ModuleInfo, ProcessProfile, Profile, StackId};
use crate::format::Frame;
use std::collections::{HashMap, HashSet};
use std::ops::Range;

/// Sample values added up per path and per thread.
pub(super) struct Weighed {
    pub totals: Vec<u64>,
    pub samples: u64,
    /// Per (process index, tid): values per merged metric.
    pub per_thread: HashMap<(usize, u32), Vec<u64>>,
    pub paths: Vec<WeightedPath>,
}

/// Key of a distinct recorded path: process index, stack, whether frame 0 is a return
/// address.
pub(super) type RawKey = (usize, StackId, bool);

/// The source-level path (root first, runtime frames collapsed as in [`weigh`]) of each
/// recorded path in `keys`.
pub(super) fn expand_each(
    profile: &Profile,
    keys: &[RawKey],
    symbolizer: &mut Symbolizer,
    names: &mut Names,
) -> Vec<Vec<Loc>> {
    let mut expander = Expander::new(symbolizer, names);
    keys.iter()
        .map(|&(p, stack, first_is_return)| {
            let proc = &profile.processes[p];
            let mut locs = Vec::new();
            expander.expand(p, proc, proc.stacks.get(stack), first_is_return, &mut locs);
            locs
        })
        .collect()
}

/// Which of the recorded paths of process `p` given are a lock's by their callers' names
/// (`wait_class::path_of_a_lock`): for the late work of condition variables, semaphores
/// and futexes (`late_work`), which moves only an event's blame. All named in one pass.
pub(super) fn lock_paths_of<'a>(
    profile: &'a Profile,
    p: usize,
    symbolizer: &'a mut Symbolizer,
) -> impl FnOnce(&[(StackId, bool)]) -> HashSet<(StackId, bool)> + 'a {
    move |paths| {
        let keys: Vec<RawKey> = paths
            .iter()
            .map(|&(stack, first)| (p, stack, first))
            .collect();
        let mut names = Names::default();
        let expanded = expand_each(profile, &keys, symbolizer, &mut names);
        paths
            .iter()
            .zip(&expanded)
            .filter(|(_, locs)| path_of_a_lock(&names, locs))
            .map(|(&path, _)| path)
            .collect()
    }
}

/// Adds up the samples of the `selected` processes (only thread `tid`, if given).
/// `sample_maps[p]` maps process `p`'s samples to the merged ids they count in.
pub(super) fn weigh(
    profile: &Profile,
    selected: &[usize],
    tid: Option<u32>,
    sample_maps: &[SampleMap],
    (metric_count, root): (usize, Option<usize>),
    (symbolizer, shifts): (&mut Symbolizer, &mut Shifts),
    names: &mut Names,
) -> Weighed {
    let mut totals = vec![0u64; metric_count];
    let mut samples = 0u64;
    let mut per_thread: HashMap<(usize, u32), Vec<u64>> = HashMap::new();
    let mut raw_index: HashMap<RawKey, usize> = HashMap::new();
    let mut raw_keys: Vec<RawKey> = Vec::new();
    let mut raw_values: Vec<u64> = Vec::new();

    for &p in selected {
        let proc = &profile.processes[p];
        let calibration = Calibration::of(proc);
        // A held.contended sample repeats a work sample: not a sample of its own.
        let repeat = proc
            .header
            .metrics
            .iter()
            .position(|m| m.name == super::metrics::HELD_CONTENDED);
        // Blame of barriers, joins and events moves to the late thread's work meanwhile;
        // the root metric is blame passed along chains of waits.
        let shifted = shifts.of(profile, p, lock_paths_of(profile, p, symbolizer));
        let (moves, chained) = (&shifted.late_work, &shifted.chains);
        let blame = proc.metric(super::metrics::BLAME).map(usize::from);
        for (i, s) in proc.samples.iter().enumerate() {
            if tid.is_some_and(|t| t != s.tid) {
                continue;
            }
            let Some(targets) = sample_maps[p].targets(s.metric, s.flags) else {
                continue;
            };
            samples += u64::from(Some(usize::from(s.metric)) != repeat);
            let thread = per_thread
                .entry((p, s.tid))
                .or_insert_with(|| vec![0; metric_count]);
            let value = calibration.apply(s.value, s.flags);
            let mut add = |key: RawKey, value: u64, targets: &[usize]| {
                let slot = *raw_index.entry(key).or_insert_with(|| {
                    raw_keys.push(key);
                    raw_values.resize(raw_values.len() + metric_count, 0);
                    raw_keys.len() - 1
                });
                for &m in targets {
                    raw_values[slot * metric_count + m] += value;
                }
            };
            let shares = moves.get(&i).map_or(&[][..], Vec::as_slice);
            let own = (p, s.stack, s.first_is_return());
            let mut spread = |value: u64, targets: &[usize]| {
                let mut rest = value;
                for share in shares {
                    let part = ((value as f64 * share.share) as u64).min(rest);
                    rest -= part;
                    add((p, share.stack, share.first_is_return), part, targets);
                }
                if rest > 0 || shares.is_empty() {
                    add(own, rest, targets);
                }
            };
            spread(value, targets);
            for &m in targets {
                totals[m] += value;
                thread[m] += value;
            }
            if let (Some(root), true) = (root, Some(usize::from(s.metric)) == blame) {
                let delta = chained.delta.get(&i).copied().unwrap_or(0.0);
                let amount = (value as f64 + delta).max(0.0).round() as u64;
                spread(amount, &[root]);
                totals[root] += amount;
                thread[root] += amount;
            }
        }
    }

    let mut expander = Expander::new(symbolizer, names);
    let mut path_index: HashMap<Vec<Loc>, usize> = HashMap::new();
    let mut paths: Vec<WeightedPath> = Vec::new();
    let mut locs = Vec::new();
    for (slot, &(p, stack, first_is_return)) in raw_keys.iter().enumerate() {
        let proc = &profile.processes[p];
        expander.expand(p, proc, proc.stacks.get(stack), first_is_return, &mut locs);
        let values = &raw_values[slot * metric_count..(slot + 1) * metric_count];
        match path_index.get(&locs) {
            Some(&i) => {
                for (sum, v) in paths[i].values.iter_mut().zip(values) {
                    *sum += v;
                }
            }
            None => {
                path_index.insert(locs.clone(), paths.len());
                paths.push(WeightedPath {
                    locs: locs.clone(),
                    values: values.to_vec(),
                });
            }
        }
    }
    Weighed {
        totals,
        samples,
        per_thread,
        paths,
    }
}

/// The source locations of one recorded frame.
#[derive(Clone)]
struct Expanded {
    /// Range of the expander's arena, root first.
    locs: Range<usize>,
    /// The frame lies in the runtime library (then `locs` holds one location).
    runtime: bool,
}

/// Turns recorded frames into source-level locations, caching per distinct frame.
struct Expander<'a> {
    symbolizer: &'a mut Symbolizer,
    names: &'a mut Names,
    /// (process index, frame, is return address) -> its locations.
    cache: HashMap<(usize, Frame, bool), Expanded>,
    arena: Vec<Loc>,
    call_sites: CallSites,
    /// (process index, return-address frame) -> the functions its call may have reached (a
    /// range of `called` and `called_locs`), and how.
    callees: HashMap<(usize, Frame), (Range<usize>, Reach)>,
    called: Vec<Physical>,
    /// Their locations (no source line: where the jump was is not known).
    called_locs: Vec<Loc>,
    /// (process index, frame, is return address) -> the function it lies in (`None`: in a
    /// stub, or the truncation marker).
    physical: HashMap<(usize, Frame, bool), Option<Physical>>,
}

impl<'a> Expander<'a> {
    fn new(symbolizer: &'a mut Symbolizer, names: &'a mut Names) -> Expander<'a> {
        Expander {
            symbolizer,
            names,
            cache: HashMap::new(),
            arena: Vec::new(),
            call_sites: CallSites::default(),
            callees: HashMap::new(),
            called: Vec::new(),
            called_locs: Vec::new(),
            physical: HashMap::new(),
        }
    }

    /// Writes the root-first source path of `frames` (leaf first) into `out`, collapsing
    /// each run of runtime frames into its outermost frame and putting back the functions
    /// tail-called through.
    fn expand(
        &mut self,
        p: usize,
        proc: &ProcessProfile,
        frames: &[Frame],
        first_is_return: bool,
        out: &mut Vec<Loc>,
    ) {
        out.clear();
        if frames.is_empty() {
            let function = self.names.intern_function("[no call path]", "");
            out.push(pseudo(function));
            return;
        }
        // Root first: the first frame of a runtime run is its outermost one.
        let mut in_runtime = false;
        // A run of runtime frames whose outermost one is internal, not an entry point.
        let mut internal_run: Option<Range<usize>> = None;
        // Whether that run's name is an entry point inside it rather than its outermost frame.
        let mut run_named = false;
        // The previous (root-ward) frame, when it is a return address in the program.
        let mut caller: Option<Frame> = None;
        for (i, &frame) in frames.iter().enumerate().rev() {
            let is_return = i > 0 || first_is_return;
            let expanded = match self.cache.get(&(p, frame, is_return)) {
                Some(expanded) => expanded.clone(),
                None => {
                    let expanded = self.symbolize(proc, frame, is_return);
                    self.cache.insert((p, frame, is_return), expanded.clone());
                    expanded
                }
            };
            if let Some(caller) = caller {
                let here = (frame, is_return);
                out.extend(self.tail_called(p, proc, caller, here, &expanded));
            }
            if !(expanded.runtime && in_runtime) {
                if expanded.runtime && self.is_runtime_internal(&expanded) {
                    // Left out unless the path ends in this run.
                    internal_run = Some(expanded.locs.clone());
                    run_named = false;
                } else {
                    out.extend_from_slice(&self.arena[expanded.locs]);
                }
            } else if internal_run.is_some() && !run_named && !self.is_runtime_internal(&expanded) {
                // An entry point the runtime's own function called (the end of an OpenMP
                // region, `omp_implicit_barrier`): it names the run if the path ends there.
                internal_run = Some(expanded.locs.clone());
                run_named = true;
            }
            if !expanded.runtime {
                internal_run = None;
            }
            in_runtime = expanded.runtime;
            caller = (!expanded.runtime && is_return).then_some(frame);
        }
        if let Some(run) = internal_run {
            out.extend_from_slice(&self.arena[run]);
        }
    }

    /// Whether a runtime frame's function is one of the runtime's own (a Rust path) rather
    /// than an interposed entry point (a C name).
    fn is_runtime_internal(&self, expanded: &Expanded) -> bool {
        self.arena[expanded.locs.clone()]
            .first()
            .is_some_and(|loc| self.names.function(loc.function).name.contains("::"))
    }

    /// The location of the function that the call before return address `caller` reached,
    /// when the next frame, `here` (frame, is return address) with locations `expanded`, does
    /// not lie in it: it was left by a tail call ([`tail_called_through`]).
    fn tail_called(
        &mut self,
        p: usize,
        proc: &ProcessProfile,
        caller: Frame,
        (frame, is_return): (Frame, bool),
        expanded: &Expanded,
    ) -> Option<Loc> {
        let (range, reach) = self.callees(p, proc, caller);
        if range.is_empty() {
            return None;
        }
        let inner = self.physical(p, proc, frame, is_return, expanded)?;
        let i = tail_called_through(&self.called[range.clone()], reach, &inner)?;
        Some(self.called_locs[range.start + i])
    }

    /// The functions the call before return address `caller` may have reached (a range of
    /// `called`): the one it names, or each definition of the name it imports; empty when
    /// its bytes prove nothing, or an import's definition cannot be told.
    fn callees(&mut self, p: usize, proc: &ProcessProfile, caller: Frame) -> (Range<usize>, Reach) {
        if let Some(hit) = self.callees.get(&(p, caller)) {
            return hit.clone();
        }
        let start = self.called.len();
        let mut reach = Reach::Direct;
        if let Some(module) = known_module(proc, caller) {
            match self.call_sites.callee(&module.path, caller.offset) {
                Some(Callee::Local(target)) => self.push_called(module, target),
                Some(Callee::Import(name)) => {
                    reach = Reach::Import;
                    self.push_definitions(proc, &name);
                }
                None => {}
            }
        }
        let found = (start..self.called.len(), reach);
        self.callees.insert((p, caller), found.clone());
        found
    }

    /// Pushes each function called `name` that the process's modules export, unless one of
    /// them cannot be told (then none).
    fn push_definitions(&mut self, proc: &ProcessProfile, name: &str) {
        let mut found: Vec<(&ModuleInfo, u64)> = Vec::new();
        for module in &proc.modules {
            match self.call_sites.definition(&module.path, name) {
                Definition::Absent => {}
                Definition::Unknown => return,
                // A module loaded again (dlopen after dlclose) defines it once.
                Definition::At(start) => {
                    if !found
                        .iter()
                        .any(|&(m, s)| m.path == module.path && s == start)
                    {
                        found.push((module, start));
                    }
                }
            }
        }
        for (module, start) in found {
            self.push_called(module, start);
        }
    }

    /// Pushes the function starting at `start` of `module` to `called`.
    fn push_called(&mut self, module: &ModuleInfo, start: u64) {
        let chain = self
            .symbolizer
            .symbolize(Some(module), CodeAddress::InstructionPointer(start));
        let outermost = chain.last().expect("a symbolization has a frame");
        let mut loc = self.loc(outermost, &module.path);
        loc.inlined = false;
        loc.line = SourceLine::default();
        self.called.push(Physical {
            module: module.id,
            start: Some(start),
            function: loc.function,
        });
        self.called_locs.push(loc);
    }

    /// The out-of-line function `frame` lies in (its outermost location in `expanded`);
    /// `None` for a stub and for the truncation marker.
    fn physical(
        &mut self,
        p: usize,
        proc: &ProcessProfile,
        frame: Frame,
        is_return: bool,
        expanded: &Expanded,
    ) -> Option<Physical> {
        if let Some(&hit) = self.physical.get(&(p, frame, is_return)) {
            return hit;
        }
        let site = match known_module(proc, frame) {
            Some(module) => {
                let address = CodeAddress::of(frame.offset, is_return);
                self.call_sites.site(&module.path, address)
            }
            None => Site::Function(None),
        };
        let physical = match (site, frame == Frame::TRUNCATED) {
            (Site::Function(start), false) => Some(Physical {
                module: frame.module,
                start,
                function: self.arena[expanded.locs.start].function,
            }),
            _ => None,
        };
        self.physical.insert((p, frame, is_return), physical);
        physical
    }

    /// Symbolizes one frame into the arena (root first). A runtime frame gets only its
    /// out-of-line function.
    fn symbolize(&mut self, proc: &ProcessProfile, frame: Frame, is_return: bool) -> Expanded {
        let start = self.arena.len();
        if frame == Frame::TRUNCATED {
            let function = self.names.intern_function("[truncated]", "");
            self.arena.push(pseudo(function));
            return Expanded {
                locs: start..self.arena.len(),
                runtime: false,
            };
        }
        let module = known_module(proc, frame);
        let chain = self
            .symbolizer
            .symbolize(module, CodeAddress::of(frame.offset, is_return));
        let module_path = module.map_or("", |m| m.path.as_str());
        let runtime = is_runtime_module(module_path);
        // The chain is innermost first and its last frame is the out-of-line function.
        let keep = if runtime { 1 } else { chain.len() };
        for source in chain.iter().rev().take(keep) {
            let mut loc = self.loc(source, module_path);
            if runtime {
                // Where inside the entry point the runtime was tells the user nothing.
                loc.line = SourceLine::default();
            }
            self.arena.push(loc);
        }
        Expanded {
            locs: start..self.arena.len(),
            runtime,
        }
    }

    fn loc(&mut self, source: &SourceFrame, module: &str) -> Loc {
        Loc {
            function: self.names.intern_function(&source.function, module),
            line: SourceLine {
                file: source.file.as_deref().map(|f| self.names.intern_file(f)),
                line: source.line,
            },
            inlined: source.inlined,
        }
    }
}

/// The module of `frame`, when it lies in one the process recorded.
fn known_module(proc: &ProcessProfile, frame: Frame) -> Option<&ModuleInfo> {
    (frame.module != 0)
        .then(|| proc.module(frame.module))
        .flatten()
}

fn pseudo(function: u32) -> Loc {
    Loc {
        function,
        line: SourceLine::default(),
        inlined: false,
    }
}

#[cfg(test)]
mod tests {
    use crate::attribution::testutil::{
        add_frames, analyze_renamed, app, lock_profile, path_names, rt,
    };

    /// The distinct paths of an analysis with their values, as names, sorted.
    fn paths(a: &crate::attribution::Analysis) -> Vec<(String, Vec<u64>)> {
        let mut paths: Vec<(String, Vec<u64>)> = a
            .paths
            .iter()
            .map(|p| (path_names(a, &p.locs).join(" "), p.values.clone()))
            .collect();
        paths.sort();
        paths
    }

    #[test]
    fn runs_of_runtime_frames_collapse_into_their_outermost_frame() {
        let mut profile = lock_profile();
        // Two separate runs in one path stay two frames.
        let (start, worker, lookup) = (app(0x50), app(0x80), app(0x60));
        let two_runs = [
            start,
            rt(0x400),
            rt(0x410),
            worker,
            lookup,
            rt(0x200),
            rt(0x100),
        ];
        add_frames(&mut profile.processes[0], 101, 1, &two_runs, 700);
        let a = analyze_renamed(&profile);
        let ms = 1_000_000;
        assert_eq!(
            paths(&a),
            [
                (
                    "_start blameprof_rt::thread_start worker lookup g".into(),
                    vec![4 * ms, 0, 0, 0]
                ),
                (
                    "_start blameprof_rt::thread_start worker lookup pthread_mutex_lock".into(),
                    vec![0, 700, 0, 0]
                ),
                ("_start worker insert".into(), vec![3 * ms, 0, 0, 0]),
                // One recorded path ends in the bare lock function; both now read the same.
                (
                    "_start worker insert pthread_mutex_lock".into(),
                    vec![0, ms, 0, 0]
                ),
                (
                    "_start worker insert pthread_mutex_unlock".into(),
                    vec![0, 0, 4_800_000, 4_800_000]
                ),
                (
                    "_start worker lookup pthread_mutex_lock".into(),
                    vec![0, 6 * ms, 0, 0]
                ),
                (
                    "_start worker lookup pthread_mutex_unlock".into(),
                    vec![0, 0, 3 * ms / 2, 3 * ms / 2]
                ),
                ("main f g".into(), vec![2 * ms, 0, 0, 0]),
            ]
        );
        let unlock = a
            .paths
            .iter()
            .find(|p| path_names(&a, &p.locs).ends_with(&["pthread_mutex_unlock".to_owned()]))
            .unwrap();
        let leaf = a.names.function(unlock.locs.last().unwrap().function);
        assert!(leaf.module.ends_with("libblameprof_rt.so"), "{leaf:?}");
        assert!(!leaf.name.contains("settle"));
    }
}
