//! `report --format pprof`: the profile as a gzipped pprof `profile.proto`, for `go tool
//! pprof`, pprof's web UI and the tools that read it.
//!
//! Job: one sample type per metric of the analysis (work, idleness, blame, held.contended
//! and the derived per-kind ones, `idleness.mutex`, `blame.spin`, ...: values in
//! "nanoseconds" for metrics in ns, else in "count"), the default one the `--metric` of the
//! report; a sample per call path per thread, labelled with the thread (`thread`: its name,
//! `tid`) and its process (`pid`); the part of a path's values that is waiting on one kind
//! of primitive is a sample of its own labelled `lock_kind` (`mutex`, `condvar`, ...).
//! Call paths are the analysis's (runtime frames collapsed into the lock function, tail
//! calls put back): one analysis per thread, since [`Analysis`] merges threads. Each frame
//! is a location with its function, source file and line, the functions inlined into it
//! as more lines of the same location (innermost first); a location belongs to the mapping
//! of its module.
//!
//! Invariants: per sample type, the values of all samples add up to the analysis's total
//! of that metric (the threads' analyses partition the samples; splitting by kind moves
//! values, never copies them); every id a sample, location or line names exists; string 0
//! is "". Not async-signal-safe (allocates, does I/O).

mod proto;

use super::export::Export;
use crate::attribution::clock::Clock;
use crate::attribution::metrics::{MetricTable, Part};
use crate::attribution::{analyze, Analysis, Filter, Loc};
use crate::format::read::{ModuleInfo, ProcessProfile, Profile};
use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, Write};

/// Writes the gzipped pprof profile of `export` to `out` (its symbolizer names each
/// thread's frames).
pub fn write(export: &mut Export, out: &mut dyn Write) -> io::Result<()> {
    let profile = build(export)?;
    let mut gz = GzEncoder::new(out, Compression::default());
    gz.write_all(&profile.encode_to_vec())?;
    gz.finish()?;
    Ok(())
}

/// The pprof profile of `export`.
fn build(export: &mut Export) -> io::Result<proto::Profile> {
    let analysis = &export.analysis;
    let mut b = Builder::new(&export.profile, analysis.filter);
    let metrics = analysis.metrics.defs();
    let sample_type = metrics
        .iter()
        .map(|m| b.value_type(&m.name, pprof_unit(&m.unit)))
        .collect();
    let (symbolizer, shifts) = (&mut export.symbolizer, &mut export.shifts);
    for thread in threads(&export.profile, analysis) {
        let filter = Filter {
            pid: Some(thread.pid),
            tid: Some(thread.tid),
        };
        let of_thread =
            analyze(&export.profile, filter, symbolizer, shifts).map_err(io::Error::other)?;
        b.add_thread(&thread, &of_thread, &analysis.metrics)?;
    }
    let processes: Vec<&ProcessProfile> = b.processes().collect();
    let time_nanos = processes.iter().map(|p| p.header.start_time_ns).min();
    let end_nanos = processes.iter().map(|p| Clock::of(p).epoch_end()).max();
    let period_ns = analysis.processes.first().map_or(0, |p| p.period_ns);
    let period_type = b.value_type("cpu", "nanoseconds");
    let comment = vec![
        b.string(&format!("blameprof: {}", super::command_line(analysis))),
        b.string(&format!("profile: {}", analysis.profile_path.display())),
        b.string(&format!("sampling: {}", super::describe_sources(analysis))),
    ];
    let default_sample_type = b.string(&metrics[export.metric].name);
    Ok(proto::Profile {
        sample_type,
        sample: b.samples,
        mapping: b.mappings,
        location: b.locations,
        function: b.functions,
        time_nanos: signed(time_nanos.unwrap_or(0)),
        duration_nanos: signed(
            end_nanos
                .unwrap_or(0)
                .saturating_sub(time_nanos.unwrap_or(0)),
        ),
        period_type: Some(period_type),
        period: signed(period_ns),
        comment,
        default_sample_type,
        string_table: b.strings,
    })
}

/// pprof's name for a metric's unit: "nanoseconds" for ns, "count" for plain numbers.
fn pprof_unit(unit: &str) -> &str {
    match unit {
        "ns" => "nanoseconds",
        "" => "count",
        other => other,
    }
}

/// A value as pprof's signed 64-bit integer (saturating).
fn signed(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A thread of the selection, as its samples' labels name it.
struct Thread {
    pid: u32,
    tid: u32,
    name: String,
}

/// Every thread of the selected processes that has samples or a start record (the exec
/// generations of one pid are one thread), by pid then tid.
fn threads(profile: &Profile, analysis: &Analysis) -> Vec<Thread> {
    let filter = analysis.filter;
    let mut ids: BTreeSet<(u32, u32)> = BTreeSet::new();
    for proc in selected(profile, filter) {
        let pid = proc.header.pid;
        let tids = proc.threads.iter().map(|t| t.tid);
        let sampled = proc.samples.iter().map(|s| s.tid);
        ids.extend(tids.chain(sampled).map(|tid| (pid, tid)));
    }
    ids.retain(|&(_, tid)| filter.tid.map_or(true, |t| t == tid));
    ids.into_iter()
        .map(|(pid, tid)| Thread {
            pid,
            tid,
            name: analysis
                .threads
                .iter()
                .rev()
                .find(|t| t.pid == pid && t.tid == tid && !t.name.is_empty())
                .map_or_else(String::new, |t| t.name.clone()),
        })
        .collect()
}

/// The processes of `profile` that `filter` selects.
fn selected(profile: &Profile, filter: Filter) -> impl Iterator<Item = &ProcessProfile> {
    profile
        .processes
        .iter()
        .filter(move |p| filter.pid.map_or(true, |pid| p.header.pid == pid))
}

/// A function as pprof keys it: name, source file and mapping (string and mapping ids).
type FunctionKey = (i64, i64, u64);
/// A location as pprof keys it: its mapping and its lines (function id, line).
type LocationKey = (u64, Vec<(u64, i64)>);

/// The tables of a profile being built, with the indices that keep their entries unique.
struct Builder<'a> {
    profile: &'a Profile,
    filter: Filter,
    strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    mappings: Vec<proto::Mapping>,
    mapping_ids: HashMap<String, u64>,
    functions: Vec<proto::Function>,
    function_ids: HashMap<FunctionKey, u64>,
    locations: Vec<proto::Location>,
    location_ids: HashMap<LocationKey, u64>,
    samples: Vec<proto::Sample>,
}

impl<'a> Builder<'a> {
    fn new(profile: &'a Profile, filter: Filter) -> Builder<'a> {
        let mut b = Builder {
            profile,
            filter,
            strings: Vec::new(),
            string_ids: HashMap::new(),
            mappings: Vec::new(),
            mapping_ids: HashMap::new(),
            functions: Vec::new(),
            function_ids: HashMap::new(),
            locations: Vec::new(),
            location_ids: HashMap::new(),
            samples: Vec::new(),
        };
        b.string("");
        b
    }

    fn processes(&self) -> impl Iterator<Item = &'a ProcessProfile> {
        selected(self.profile, self.filter)
    }

    /// The index of `s` in the string table.
    fn string(&mut self, s: &str) -> i64 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = self.strings.len() as i64;
        self.strings.push(s.to_owned());
        self.string_ids.insert(s.to_owned(), id);
        id
    }

    fn value_type(&mut self, r#type: &str, unit: &str) -> proto::ValueType {
        proto::ValueType {
            r#type: self.string(r#type),
            unit: self.string(unit),
        }
    }

    /// Adds the samples of one thread, from `of_thread` (its analysis), with values in the
    /// merged metric order of `metrics` (the whole selection's).
    fn add_thread(
        &mut self,
        thread: &Thread,
        of_thread: &Analysis,
        metrics: &MetricTable,
    ) -> io::Result<()> {
        let to_merged = of_thread
            .metrics
            .defs()
            .iter()
            .map(|d| metrics.id(&d.name))
            .collect::<Result<Vec<usize>, _>>()
            .map_err(io::Error::other)?;
        let mut labels = vec![
            self.label_num("tid", thread.tid),
            self.label_num("pid", thread.pid),
        ];
        // An empty string is string 0, which pprof reads as a number: a nameless thread
        // has no `thread` label.
        if !thread.name.is_empty() {
            labels.push(self.label_str("thread", &thread.name));
        }
        for path in &of_thread.paths {
            let location_id = self.location_ids(of_thread, &path.locs);
            let parts = split_by_kind(&of_thread.metrics, &path.values, &to_merged, metrics.len());
            for (kind, values) in parts {
                let mut label = labels.clone();
                if let Some(kind) = kind {
                    label.push(self.label_str("lock_kind", kind));
                }
                self.samples.push(proto::Sample {
                    location_id: location_id.clone(),
                    value: values.into_iter().map(signed).collect(),
                    label,
                });
            }
        }
        Ok(())
    }

    fn label_str(&mut self, key: &str, value: &str) -> proto::Label {
        proto::Label {
            key: self.string(key),
            str: self.string(value),
            num: 0,
        }
    }

    fn label_num(&mut self, key: &str, value: u32) -> proto::Label {
        proto::Label {
            key: self.string(key),
            str: 0,
            num: i64::from(value),
        }
    }

    /// The location ids of a root-first path, leaf first: each out-of-line frame with the
    /// frames inlined into it is one location.
    fn location_ids(&mut self, a: &Analysis, locs: &[Loc]) -> Vec<u64> {
        let mut ids = Vec::new();
        let mut start = 0;
        for end in 1..=locs.len() {
            if end == locs.len() || !locs[end].inlined {
                ids.push(self.location(a, &locs[start..end]));
                start = end;
            }
        }
        ids.reverse();
        ids
    }

    /// The id of the location of `group`: an out-of-line frame, then the frames inlined
    /// into it, root first.
    fn location(&mut self, a: &Analysis, group: &[Loc]) -> u64 {
        let module = &a.names.function(group[0].function).module;
        let mapping_id = self.mapping(module);
        let lines: Vec<(u64, i64)> = group
            .iter()
            .rev()
            .map(|loc| {
                let line = loc.line.line.map_or(0, i64::from);
                (self.function(a, loc, mapping_id), line)
            })
            .collect();
        let key = (mapping_id, lines);
        if let Some(&id) = self.location_ids.get(&key) {
            return id;
        }
        let id = self.locations.len() as u64 + 1;
        self.locations.push(proto::Location {
            id,
            mapping_id,
            line: key
                .1
                .iter()
                .map(|&(function_id, line)| proto::Line { function_id, line })
                .collect(),
        });
        self.location_ids.insert(key, id);
        id
    }

    /// The id of the function of `loc` (in the mapping `mapping_id`).
    fn function(&mut self, a: &Analysis, loc: &Loc, mapping_id: u64) -> u64 {
        let name = self.string(&a.names.function(loc.function).name);
        let file = match loc.line.file {
            Some(file) => self.string(a.names.file(file)),
            None => 0,
        };
        let key = (name, file, mapping_id);
        if let Some(&id) = self.function_ids.get(&key) {
            return id;
        }
        let id = self.functions.len() as u64 + 1;
        self.functions.push(proto::Function {
            id,
            name,
            system_name: name,
            filename: file,
        });
        self.function_ids.insert(key, id);
        id
    }

    /// The id of the mapping of the module at `path`; 0 (none) for frames in no module.
    fn mapping(&mut self, path: &str) -> u64 {
        if path.is_empty() {
            return 0;
        }
        if let Some(&id) = self.mapping_ids.get(path) {
            return id;
        }
        let module: Option<&ModuleInfo> = self
            .processes()
            .flat_map(|p| &p.modules)
            .find(|m| m.path == path);
        let build_id: String = module.map_or_else(String::new, |m| {
            m.build_id.iter().map(|b| format!("{b:02x}")).collect()
        });
        let id = self.mappings.len() as u64 + 1;
        let mapping = proto::Mapping {
            id,
            memory_start: module.map_or(0, |m| m.start),
            memory_limit: module.map_or(0, |m| m.end),
            filename: self.string(path),
            build_id: self.string(&build_id),
            // Symbolized already: pprof must not look for the files to symbolize again.
            has_functions: true,
            has_filenames: true,
            has_line_numbers: true,
            has_inline_frames: true,
        };
        self.mappings.push(mapping);
        self.mapping_ids.insert(path.to_owned(), id);
        id
    }
}

/// The values of one path of a thread's analysis (per metric of `metrics`) as pprof
/// samples, in the merged order (`to_merged[m]`, `len` metrics): per wait kind whose
/// derived metrics have values, a sample with them and the same amounts of their base
/// metrics (labelled with the kind), then what is left (work, waiting of no kind,
/// `idleness.unblamed`), unlabelled. Samples without values are left out.
fn split_by_kind(
    metrics: &MetricTable,
    values: &[u64],
    to_merged: &[usize],
    len: usize,
) -> Vec<(Option<&'static str>, Vec<u64>)> {
    let mut rest = vec![0u64; len];
    let mut kinds: BTreeMap<&'static str, Vec<u64>> = BTreeMap::new();
    for (m, &v) in values.iter().enumerate() {
        match metrics.derived_from(m) {
            Some((base, Part::Kind(kind))) => {
                let of_kind = kinds.entry(kind.name()).or_insert_with(|| vec![0; len]);
                of_kind[to_merged[base]] += v;
                of_kind[to_merged[m]] += v;
            }
            _ => rest[to_merged[m]] += v,
        }
    }
    for of_kind in kinds.values() {
        for (left, taken) in rest.iter_mut().zip(of_kind) {
            *left = left.saturating_sub(*taken);
        }
    }
    kinds
        .into_iter()
        .map(|(kind, values)| (Some(kind), values))
        .chain([(None, rest)])
        .filter(|(_, values)| values.iter().any(|&v| v > 0))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::testutil::{analyze_renamed, kinds_process, lock_profile, path_names};
    use flate2::read::GzDecoder;
    use std::io::Read;

    fn export_of(profile: Profile) -> Export {
        Export::of_all(profile, 1)
    }

    fn kinds_export() -> Export {
        export_of(Profile {
            path: "blameprof-kinds".into(),
            processes: vec![kinds_process()],
            skipped: Vec::new(),
        })
    }

    fn string(p: &proto::Profile, id: i64) -> &str {
        &p.string_table[id as usize]
    }

    /// The label `key` of `s`: its string, or its number as a string.
    fn label(p: &proto::Profile, s: &proto::Sample, key: &str) -> Option<String> {
        let l = s.label.iter().find(|l| string(p, l.key) == key)?;
        Some(match l.str {
            0 => l.num.to_string(),
            id => string(p, id).to_owned(),
        })
    }

    #[test]
    fn every_metric_is_a_sample_type_with_the_analysiss_totals_per_thread() {
        let mut export = kinds_export();
        let p = build(&mut export).expect("pprof profile");
        let a = &export.analysis;
        assert_eq!(string(&p, 0), "");
        let types: Vec<(&str, &str)> = p
            .sample_type
            .iter()
            .map(|t| (string(&p, t.r#type), string(&p, t.unit)))
            .collect();
        let names: Vec<&str> = a.metrics.defs().iter().map(|d| d.name.as_str()).collect();
        assert_eq!(types.iter().map(|t| t.0).collect::<Vec<_>>(), names);
        assert!(types.iter().all(|t| t.1 == "nanoseconds"), "{types:?}");
        assert_eq!(string(&p, p.default_sample_type), "idleness");
        for (m, &total) in a.totals.iter().enumerate() {
            let sum: i64 = p.sample.iter().map(|s| s.value[m]).sum();
            assert_eq!(sum, total as i64, "{}", names[m]);
        }
        for t in &a.threads {
            let of_thread: Vec<&proto::Sample> = p
                .sample
                .iter()
                .filter(|s| label(&p, s, "tid") == Some(t.tid.to_string()))
                .collect();
            for (m, &total) in t.totals.iter().enumerate() {
                let sum: i64 = of_thread.iter().map(|s| s.value[m]).sum();
                assert_eq!(sum, total as i64, "thread {}: {}", t.tid, names[m]);
            }
            for s in of_thread {
                assert_eq!(label(&p, s, "pid"), Some("100".to_owned()));
                let name = label(&p, s, "thread").unwrap_or_default();
                assert_eq!(name, t.name, "thread {}", t.tid);
            }
        }
    }

    #[test]
    fn waiting_of_one_kind_is_a_sample_of_its_own_labelled_with_it() {
        let mut export = kinds_export();
        let p = build(&mut export).expect("pprof profile");
        let metrics = &export.analysis.metrics;
        let id = |name: &str| metrics.id(name).expect(name);
        for s in &p.sample {
            let kinds: Vec<&str> = (0..metrics.len())
                .filter(|&m| s.value[m] > 0)
                .filter_map(|m| match metrics.derived_from(m) {
                    Some((_, Part::Kind(kind))) => Some(kind.name()),
                    _ => None,
                })
                .collect();
            match label(&p, s, "lock_kind") {
                Some(kind) => {
                    assert_eq!(kinds, [kind.as_str()], "{s:?}");
                    // The base metrics carry the kind's amounts, nothing else.
                    assert_eq!(s.value[id("work")], 0);
                    for base in ["idleness", "blame"] {
                        let derived = metrics.id(&format!("{base}.{kind}"));
                        let of_kind = derived.map_or(0, |d| s.value[d]);
                        assert_eq!(s.value[id(base)], of_kind, "{base} of {kind}: {s:?}");
                    }
                }
                None => assert!(kinds.is_empty(), "{s:?}"),
            }
        }
        // The kind-less unblamed wait of thread 100 stays unlabelled, in idleness and
        // idleness.unblamed.
        let unlabelled_unblamed = p.sample.iter().any(|s| {
            label(&p, s, "lock_kind").is_none()
                && s.value[id("idleness")] == 250_000
                && s.value[id("idleness.unblamed")] == 250_000
        });
        assert!(unlabelled_unblamed, "{:?}", p.sample);
    }

    #[test]
    fn runtime_frames_map_to_the_runtime_and_frames_in_no_module_to_none() {
        let mut export = export_of(lock_profile());
        let p = build(&mut export).expect("pprof profile");
        let runtime: Vec<&proto::Mapping> = p
            .mapping
            .iter()
            .filter(|m| string(&p, m.filename).ends_with("libblameprof_rt.so"))
            .collect();
        assert_eq!(runtime.len(), 1, "{:?}", p.mapping);
        assert!(runtime[0].has_functions && runtime[0].has_inline_frames);
        let function =
            |l: &proto::Location| string(&p, p.function[l.line[0].function_id as usize - 1].name);
        for l in &p.location {
            let name = function(l);
            match name.starts_with("libblameprof_rt.so+") {
                true => assert_eq!(l.mapping_id, runtime[0].id, "{name}"),
                false => assert_eq!(l.mapping_id, 0, "{name}"),
            }
        }
    }

    #[test]
    fn inlined_frames_are_lines_of_one_location_innermost_first() {
        let profile = lock_profile();
        let a = analyze_renamed(&profile);
        let main_f_g = a
            .paths
            .iter()
            .position(|p| path_names(&a, &p.locs) == ["main", "f", "g"])
            .expect("a path main f g");
        let mut locs = a.paths[main_f_g].locs.clone();
        // g was inlined into f.
        locs[2].inlined = true;
        let mut b = Builder::new(&profile, Filter::default());
        let ids = b.location_ids(&a, &locs);
        assert_eq!(ids.len(), 2, "main, then f with g inlined");
        let names = |id: u64| -> Vec<String> {
            b.locations[id as usize - 1]
                .line
                .iter()
                .map(|l| b.strings[b.functions[l.function_id as usize - 1].name as usize].clone())
                .collect()
        };
        assert_eq!(
            names(ids[0]),
            ["g", "f"],
            "leaf first, innermost line first"
        );
        assert_eq!(names(ids[1]), ["main"]);
        assert_eq!(b.location_ids(&a, &locs), ids, "locations are interned");
    }

    #[test]
    fn writes_a_gzipped_profile_proto() {
        let mut export = kinds_export();
        let mut bytes = Vec::new();
        write(&mut export, &mut bytes).expect("write");
        let mut raw = Vec::new();
        GzDecoder::new(&bytes[..])
            .read_to_end(&mut raw)
            .expect("gzip");
        let decoded = proto::Profile::decode(&raw[..]).expect("profile.proto");
        assert_eq!(decoded, build(&mut export).expect("pprof profile"));
        assert_eq!(decoded.period, 5_000_000);
        assert_eq!(
            string(
                &decoded,
                decoded.period_type.as_ref().expect("period type").unit
            ),
            "nanoseconds"
        );
    }
}
