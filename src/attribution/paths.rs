//! From samples to weighted source-level call paths.
//!
//! Job: add up sample values per distinct recorded call path (so a million samples cost a
//! million hash lookups, not a million symbolizations), then turn each distinct recorded
//! path into a root-first path of [`Loc`]s, expanding inlined frames, and merge recorded
//! paths that read the same at source level.
//!
//! Invariants: each distinct (process, frame, address kind) is symbolized once; the values
//! of the returned paths add up to the returned totals; a sample whose metric index is not
//! declared by its process header is ignored (neither counted nor charged).
//!
//! Not async-signal-safe (allocates); single-threaded.

use super::symbolize::{CodeAddress, SourceFrame, Symbolizer};
use super::{Loc, Names, SourceLine, WeightedPath};
use crate::format::read::{ProcessProfile, Profile, StackId};
use crate::format::Frame;
use std::collections::HashMap;
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
type RawKey = (usize, StackId, bool);

/// Adds up the samples of the `selected` processes (only thread `tid`, if given).
/// `metric_maps[p]` maps process `p`'s metric indices to merged ids.
pub(super) fn weigh(
    profile: &Profile,
    selected: &[usize],
    tid: Option<u32>,
    metric_maps: &[Vec<usize>],
    metric_count: usize,
    symbolizer: &mut Symbolizer,
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
        for s in &proc.samples {
            if tid.is_some_and(|t| t != s.tid) {
                continue;
            }
            let Some(&m) = metric_maps[p].get(usize::from(s.metric)) else {
                continue;
            };
            samples += 1;
            totals[m] += s.value;
            per_thread
                .entry((p, s.tid))
                .or_insert_with(|| vec![0; metric_count])[m] += s.value;
            let key = (p, s.stack, s.first_is_return());
            let slot = *raw_index.entry(key).or_insert_with(|| {
                raw_keys.push(key);
                raw_values.resize(raw_values.len() + metric_count, 0);
                raw_keys.len() - 1
            });
            raw_values[slot * metric_count + m] += s.value;
        }
    }

    let mut expander = Expander {
        symbolizer,
        names,
        cache: HashMap::new(),
        arena: Vec::new(),
    };
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

/// Turns recorded frames into source-level locations, caching per distinct frame.
struct Expander<'a> {
    symbolizer: &'a mut Symbolizer,
    names: &'a mut Names,
    /// (process index, frame, is return address) -> range of `arena`, root first.
    cache: HashMap<(usize, Frame, bool), Range<usize>>,
    arena: Vec<Loc>,
}

impl Expander<'_> {
    /// Writes the root-first source path of `frames` (leaf first) into `out`.
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
        for (i, &frame) in frames.iter().enumerate().rev() {
            let is_return = i > 0 || first_is_return;
            let range = match self.cache.get(&(p, frame, is_return)) {
                Some(range) => range.clone(),
                None => {
                    let range = self.symbolize(proc, frame, is_return);
                    self.cache.insert((p, frame, is_return), range.clone());
                    range
                }
            };
            out.extend_from_slice(&self.arena[range]);
        }
    }

    /// Symbolizes one frame into the arena (root first); returns its range.
    fn symbolize(&mut self, proc: &ProcessProfile, frame: Frame, is_return: bool) -> Range<usize> {
        let start = self.arena.len();
        if frame == Frame::TRUNCATED {
            let function = self.names.intern_function("[truncated]", "");
            self.arena.push(pseudo(function));
            return start..self.arena.len();
        }
        let module = (frame.module != 0)
            .then(|| proc.module(frame.module))
            .flatten();
        let address = if is_return {
            CodeAddress::ReturnAddress(frame.offset)
        } else {
            CodeAddress::InstructionPointer(frame.offset)
        };
        let chain = self.symbolizer.symbolize(module, address);
        let module_path = module.map_or("", |m| m.path.as_str());
        for source in chain.iter().rev() {
            let loc = self.loc(source, module_path);
            self.arena.push(loc);
        }
        start..self.arena.len()
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

fn pseudo(function: u32) -> Loc {
    Loc {
        function,
        line: SourceLine::default(),
        inlined: false,
    }
}
