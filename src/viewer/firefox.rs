//! `report --format firefox`: the profile in the Firefox Profiler's processed format (as
//! samply writes it, with `fxprof-processed-profile`), for profiler.firefox.com.
//!
//! Job: one process per process image of the selection, a track per thread (with its name,
//! start and end), and on each track
//! - a CPU sample per `work` sample, at its time, with its call path and its CPU time as
//!   the sample's CPU delta (the call tree counts samples, one per timer tick);
//! - an interval marker per `idleness` sample: the wait, ending at the sample's time and
//!   lasting its span (a spin wait's timer sample, without a span: its value), naming the
//!   kind of primitive, the lock, the idleness the sample counts for, and the holders
//!   blamed for it (the releases of the same lock by other threads that ended during the
//!   wait, with their overlap);
//! - a marker per `blame` sample at the release: over the hold when its length is known,
//!   else at the instant, naming the kind, the lock, the blame taken and the function that
//!   released it.
//!
//! Markers carry the sample's call path. Frames are named by the symbolizer: inlined
//! functions are frames of their own and each run of runtime frames is the lock function
//! the program called, as in the analysis, but the functions the analysis puts back where a
//! tail call left no frame are missing (`attribution::paths` keeps its expansion to
//! itself). The functions' source files are filled into the profile's function table,
//! which the crate leaves empty.
//!
//! Times (`attribution::clock`): samples carry monotonic nanoseconds; a process image's zero
//! is its first known time (its threads' starts, else its earliest sample), placed at the
//! image's start time (wall clock), and the profile's zero is the earliest image's start.
//!
//! Invariants: per thread, the CPU deltas add up to the analysis's `work` (to a microsecond
//! a sample) and the wait markers' idleness to its `idleness` for samples with a time
//! (format version 3 on; earlier profiles have CPU samples at their process's zero and no
//! markers); `held.contended` samples repeat `work` and add nothing. Not async-signal-safe
//! (allocates, does I/O).
//!
//! Files: this one lays out processes, threads, samples and markers; `firefox/stacks.rs`
//! names the call paths and fills in the source files, `firefox/markers.rs` holds the
//! markers and who a wait is blamed on.

mod markers;
mod stacks;

use super::export::Export;
use crate::attribution::clock::Clock;
use crate::attribution::metrics::{BLAME, IDLENESS, WORK};
use crate::attribution::Filter;
use crate::format::counters::{CONTENDED_SAMPLED_WAIT, CONTENDED_SCALED_WAIT};
use crate::format::read::{ProcessProfile, Sample, StackId};
use crate::format::{WaitKind, SAMPLE_SCALED, SAMPLE_UNBLAMED};
use fxprof_processed_profile::{
    CategoryColor, CategoryHandle, CategoryPairHandle, CpuDelta, Frame as FxFrame, FrameFlags,
    FrameInfo, MarkerTiming, ProcessHandle, Profile as FxProfile, ReferenceTimestamp,
    SamplingInterval, StackHandle, StaticSchemaMarker, StringHandle, ThreadHandle, Timestamp,
};
use markers::{blamed_on, BlameMarker, Release, WaitMarker};
use stacks::{add_file_names, lock_caller, Stacks};
use std::collections::HashMap;
use std::io::{self, Write};

/// Writes the Firefox Profiler profile of `export` to `out` (its symbolizer names the
/// frames; it is lent to the paths' builder and given back).
pub fn write(export: &mut Export, out: &mut dyn Write) -> io::Result<()> {
    let mut stacks = Stacks::new(std::mem::take(&mut export.symbolizer));
    let profile = build(export, &mut stacks);
    let doc = serde_json::to_value(&profile).map(|mut doc| {
        add_file_names(&mut doc, &stacks.files);
        doc
    });
    export.symbolizer = stacks.into_symbolizer();
    serde_json::to_writer(&mut *out, &doc?)?;
    Ok(())
}

/// The categories of frames and markers.
struct Categories {
    code: CategoryPairHandle,
    locks: CategoryPairHandle,
    waiting: CategoryHandle,
    blame: CategoryHandle,
}

/// The profile of `export`, its frames named by `stacks`.
fn build(export: &Export, stacks: &mut Stacks) -> FxProfile {
    let analysis = &export.analysis;
    let filter = analysis.filter;
    let selected: Vec<(usize, &ProcessProfile)> = export
        .profile
        .processes
        .iter()
        .enumerate()
        .filter(|(_, p)| filter.pid.map_or(true, |pid| p.header.pid == pid))
        .collect();
    let reference = selected
        .iter()
        .map(|(_, p)| p.header.start_time_ns)
        .min()
        .unwrap_or(0);
    let interval = analysis.processes.first().map_or(
        1_000_000_000 / crate::format::protocol::DEFAULT_FREQUENCY,
        |p| p.period_ns.max(1),
    );
    let mut profile = FxProfile::new(
        &super::command_line(analysis),
        ReferenceTimestamp::from_millis_since_unix_epoch(reference as f64 / 1e6),
        SamplingInterval::from_nanos(interval),
    );
    profile.set_symbolicated(true);
    let categories = Categories {
        code: profile.add_category("User", CategoryColor::Yellow).into(),
        locks: profile.add_category("Locks", CategoryColor::Purple).into(),
        waiting: profile.add_category("Waiting", CategoryColor::Red),
        blame: profile.add_category("Blame", CategoryColor::Orange),
    };
    let lock_names = export
        .locks
        .locks
        .iter()
        .map(|l| ((l.pid, l.address), l.name.as_str()))
        .collect();
    let mut writer = Writer {
        profile,
        stacks,
        categories,
        filter,
        lock_names,
    };
    for (p, proc) in selected {
        writer.add_process(p, proc, reference);
    }
    writer.profile
}

/// A process image being added.
struct Image<'a> {
    p: usize,
    proc: &'a ProcessProfile,
    clock: Clock,
    /// Nanoseconds from the profile's zero to the image's start.
    offset: u64,
    handle: ProcessHandle,
    threads: HashMap<u32, Track>,
    /// The contended-wait calibration (sampled / scaled waiting), when there is one.
    calibration: Option<(u64, u64)>,
}

/// A thread's track and the stacks interned for it.
struct Track {
    handle: ThreadHandle,
    name: String,
    stacks: HashMap<(StackId, bool), Option<StackHandle>>,
}

/// Adds process images to a Firefox profile.
struct Writer<'a, 'e> {
    profile: FxProfile,
    stacks: &'a mut Stacks,
    categories: Categories,
    /// The selection: only the samples of its threads are shown.
    filter: Filter,
    /// Lock names by (pid, address), from the lock table.
    lock_names: HashMap<(u32, u64), &'e str>,
}

impl Writer<'_, '_> {
    /// Adds process image `p` of the profile (`proc`), placed against the profile's zero,
    /// `reference` (ns since the epoch): its threads, samples and markers.
    fn add_process(&mut self, p: usize, proc: &ProcessProfile, reference: u64) {
        let clock = Clock::of(proc);
        let offset = clock.start_ns.saturating_sub(reference);
        let start = Timestamp::from_nanos_since_reference(offset);
        let name = process_name(proc);
        let handle = self.profile.add_process(&name, proc.header.pid, start);
        if let Some(end) = proc.end_ns {
            let end =
                Timestamp::from_nanos_since_reference(offset + end.saturating_sub(clock.origin));
            self.profile.set_process_end_time(handle, end);
        }
        let (sampled, scaled) = (
            proc.counter(CONTENDED_SAMPLED_WAIT),
            proc.counter(CONTENDED_SCALED_WAIT),
        );
        let mut image = Image {
            p,
            proc,
            clock,
            offset,
            handle,
            threads: HashMap::new(),
            calibration: (scaled > 0).then_some((sampled, scaled)),
        };
        let filter = self.filter;
        let wanted = |tid: u32| filter.tid.map_or(true, |t| t == tid);
        for t in proc.threads.iter().filter(|t| wanted(t.tid)) {
            self.track(&mut image, t.tid);
        }
        let metric = |s: &Sample| {
            proc.header
                .metrics
                .get(usize::from(s.metric))
                .map(|m| m.name.as_str())
        };
        let releases = self.releases(&mut image);
        for s in proc.samples.iter().filter(|s| wanted(s.tid)) {
            match metric(s) {
                Some(WORK) => self.add_cpu_sample(&mut image, s),
                Some(IDLENESS) if s.time > 0 => self.add_wait(&mut image, s, &releases),
                Some(BLAME) if s.time > 0 => self.add_blame(&mut image, s),
                _ => {}
            }
        }
    }

    /// The track of thread `tid`, added with its name, start and end when new.
    fn track<'i>(&mut self, image: &'i mut Image, tid: u32) -> &'i mut Track {
        let profile = &mut self.profile;
        image.threads.entry(tid).or_insert_with(|| {
            let info = image.proc.thread(tid);
            let at = |t: u64| image.offset + t.saturating_sub(image.clock.origin);
            let start = info.and_then(|t| t.start_ns).map_or(image.offset, at);
            let is_main = info.is_some_and(|t| t.is_main);
            let handle = profile.add_thread(
                image.handle,
                tid,
                Timestamp::from_nanos_since_reference(start),
                is_main,
            );
            let name = match info.map(|t| t.name.as_str()) {
                Some(name) if !name.is_empty() => name.to_owned(),
                _ => format!("thread {tid}"),
            };
            profile.set_thread_name(handle, &name);
            if let Some(end) = info.and_then(|t| t.end_ns) {
                profile.set_thread_end_time(handle, Timestamp::from_nanos_since_reference(at(end)));
            }
            profile.set_thread_show_markers_in_timeline(handle, true);
            Track {
                handle,
                name,
                stacks: HashMap::new(),
            }
        })
    }

    /// The timestamp of monotonic time `t` of `image`.
    fn timestamp(image: &Image, t: u64) -> Timestamp {
        Timestamp::from_nanos_since_reference(image.offset + t.saturating_sub(image.clock.origin))
    }

    /// The value sample `s` counts for: a scaled estimate calibrated as the analysis does
    /// (`attribution::calibration`).
    fn value(image: &Image, s: &Sample) -> u64 {
        match image.calibration {
            Some((num, den)) if s.flags & SAMPLE_SCALED != 0 => {
                let v = u128::from(s.value) * u128::from(num) / u128::from(den);
                u64::try_from(v).unwrap_or(u64::MAX)
            }
            _ => s.value,
        }
    }

    /// The stack of sample `s` on its thread's track.
    fn stack(&mut self, image: &mut Image, s: &Sample) -> Option<StackHandle> {
        let key = (s.stack, s.first_is_return());
        if let Some(&stack) = self.track(image, s.tid).stacks.get(&key) {
            return stack;
        }
        let path = self.stacks.path(image.p, image.proc, s);
        let frames: Vec<FrameInfo> = path
            .iter()
            .map(|n| FrameInfo {
                frame: FxFrame::Label(self.profile.intern_string(&n.function)),
                category_pair: match n.runtime {
                    true => self.categories.locks,
                    false => self.categories.code,
                },
                flags: FrameFlags::empty(),
            })
            .collect();
        let handle = self.track(image, s.tid).handle;
        let stack = self.profile.intern_stack_frames(handle, frames.into_iter());
        self.track(image, s.tid).stacks.insert(key, stack);
        stack
    }

    /// Adds `work` sample `s` as a CPU sample.
    fn add_cpu_sample(&mut self, image: &mut Image, s: &Sample) {
        let stack = self.stack(image, s);
        let thread = self.track(image, s.tid).handle;
        let at = Self::timestamp(image, s.time);
        let cpu = CpuDelta::from_nanos(s.value);
        self.profile.add_sample(thread, at, stack, cpu, 1);
    }

    /// The releases of each lock of `image` (by address), by end time.
    fn releases(&mut self, image: &mut Image) -> HashMap<u64, Vec<Release>> {
        let proc = image.proc;
        let mut releases: HashMap<u64, Vec<Release>> = HashMap::new();
        let blame = proc.header.metrics.iter().position(|m| m.name == BLAME);
        let of_blame =
            |s: &&Sample| Some(usize::from(s.metric)) == blame && s.object != 0 && s.time > 0;
        for s in proc.samples.iter().filter(of_blame) {
            let path = self.stacks.path(image.p, proc, s);
            let thread = match self.filter.tid.map_or(true, |t| t == s.tid) {
                true => self.track(image, s.tid).name.clone(),
                false => proc
                    .thread(s.tid)
                    .map_or_else(|| format!("thread {}", s.tid), |t| t.name.clone()),
            };
            releases.entry(s.object).or_default().push(Release {
                start: s.time.saturating_sub(s.span),
                end: s.time,
                tid: s.tid,
                holder: format!("{thread} in {}", lock_caller(&path)),
            });
        }
        for list in releases.values_mut() {
            list.sort_by_key(|r| r.end);
        }
        releases
    }

    /// Adds `idleness` sample `s` as a wait marker, blamed on the `releases` of its lock.
    fn add_wait(&mut self, image: &mut Image, s: &Sample, releases: &HashMap<u64, Vec<Release>>) {
        let idleness = Self::value(image, s);
        let length = match s.span {
            0 => s.value,
            span => span,
        };
        let (start, end) = (s.time.saturating_sub(length), s.time);
        let kind = WaitKind::from_flags(s.flags);
        let blamed = match s.flags & SAMPLE_UNBLAMED {
            0 => blamed_on(releases.get(&s.object), s.tid, start, end),
            _ => "nobody: the wait ended without the event (timed out, interrupted)".to_owned(),
        };
        let marker = WaitMarker {
            name: self
                .profile
                .intern_string(&format!("{} wait", kind_name(kind))),
            category: self.categories.waiting,
            kind: self.profile.intern_string(kind_name(kind)),
            lock: self.intern_lock(image, s.object, kind),
            idleness_ms: idleness as f64 / 1e6,
            blamed_on: self.profile.intern_string(&blamed),
        };
        let timing =
            MarkerTiming::Interval(Self::timestamp(image, start), Self::timestamp(image, end));
        self.add_marker(image, s, timing, marker);
    }

    /// Adds `blame` sample `s` as a blame marker.
    fn add_blame(&mut self, image: &mut Image, s: &Sample) {
        let blame = Self::value(image, s);
        let path = self.stacks.path(image.p, image.proc, s);
        let kind = WaitKind::from_flags(s.flags);
        let marker = BlameMarker {
            name: self
                .profile
                .intern_string(&format!("{} blame", kind_name(kind))),
            category: self.categories.blame,
            kind: self.profile.intern_string(kind_name(kind)),
            lock: self.intern_lock(image, s.object, kind),
            blame_ms: blame as f64 / 1e6,
            hold_ms: s.span as f64 / 1e6,
            site: self.profile.intern_string(lock_caller(&path)),
        };
        let end = Self::timestamp(image, s.time);
        let timing = match s.span {
            0 => MarkerTiming::Instant(end),
            span => {
                MarkerTiming::Interval(Self::timestamp(image, s.time.saturating_sub(span)), end)
            }
        };
        self.add_marker(image, s, timing, marker);
    }

    /// Adds `marker` for sample `s`, with its call path.
    fn add_marker(
        &mut self,
        image: &mut Image,
        s: &Sample,
        timing: MarkerTiming,
        marker: impl StaticSchemaMarker,
    ) {
        let stack = self.stack(image, s);
        let thread = self.track(image, s.tid).handle;
        let handle = self.profile.add_marker(thread, timing, marker);
        self.profile.set_marker_stack(thread, handle, stack);
    }

    /// The name of the lock at `address` of `image`: its row's in the lock table, else its
    /// kind and address.
    fn intern_lock(&mut self, image: &Image, address: u64, kind: Option<WaitKind>) -> StringHandle {
        let row = self.lock_names.get(&(image.proc.header.pid, address));
        let name = match (row, address) {
            (Some(&row), _) => row.to_owned(),
            (None, 0) => "unknown".to_owned(),
            (None, address) => format!("{} {address:#x}", kind_name(kind)),
        };
        self.profile.intern_string(&name)
    }
}

/// The name of a process image's track: its executable's file name.
fn process_name(proc: &ProcessProfile) -> String {
    let exe = match proc.header.exe.as_str() {
        "" => proc.header.argv.first().map_or("", String::as_str),
        exe => exe,
    };
    match exe.rsplit('/').next() {
        Some(name) if !name.is_empty() => name.to_owned(),
        _ => format!("pid {}", proc.header.pid),
    }
}

fn kind_name(kind: Option<WaitKind>) -> &'static str {
    kind.map_or("lock", WaitKind::name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::symbolize::Symbolizer;
    use crate::attribution::testutil::kinds_process;
    use crate::format::read::Profile;
    use serde_json::Value;

    const SECOND: u64 = 1_000_000_000;
    const MS: u64 = 1_000_000;

    fn export_of(proc: ProcessProfile) -> Export {
        let profile = Profile {
            path: "blameprof-firefox".into(),
            processes: vec![proc],
            skipped: Vec::new(),
        };
        Export::of_all(profile, 0)
    }

    /// [`kinds_process`] with times: its threads start at 1 s (monotonic), sample i is at
    /// 1 s + 10 (i + 1) ms, waits last their value and holds half a millisecond, all on
    /// lock 0x1000; thread 101's mutex wait (6 ms) is a scaled estimate, calibrated to half.
    fn timed_process() -> ProcessProfile {
        let mut p = kinds_process();
        p.header.start_time_ns = 1_700_000_000 * SECOND;
        for t in &mut p.threads {
            t.start_ns = Some(SECOND);
        }
        for (i, s) in p.samples.iter_mut().enumerate() {
            s.time = SECOND + 10 * MS * (i as u64 + 1);
            s.object = 0x1000;
            s.span = match s.metric {
                1 => s.value,
                2 => MS / 2,
                _ => 0,
            };
            if (s.tid, s.metric, s.value) == (101, 1, 6 * MS) {
                s.flags |= SAMPLE_SCALED;
            }
        }
        p.counters.push((CONTENDED_SAMPLED_WAIT.to_owned(), 1));
        p.counters.push((CONTENDED_SCALED_WAIT.to_owned(), 2));
        p
    }

    fn document(export: &Export) -> Value {
        let mut stacks = Stacks::new(Symbolizer::new());
        let profile = build(export, &mut stacks);
        let mut doc = serde_json::to_value(&profile).expect("JSON");
        add_file_names(&mut doc, &stacks.files);
        doc
    }

    fn thread(doc: &Value, tid: u32) -> &Value {
        doc["threads"]
            .as_array()
            .expect("threads")
            .iter()
            .find(|t| t["tid"].as_str() == Some(&tid.to_string()) || t["tid"] == tid)
            .unwrap_or_else(|| panic!("no thread {tid}"))
    }

    fn string(thread: &Value, index: &Value) -> String {
        let i = index.as_u64().expect("string index") as usize;
        thread["stringArray"][i]
            .as_str()
            .expect("string")
            .to_owned()
    }

    /// The markers of `thread` of type `kind`: (name, start, end, data), times in ns.
    fn markers(thread: &Value, kind: &str) -> Vec<(String, u64, Option<u64>, Value)> {
        let m = &thread["markers"];
        let ns = |v: &Value| v.as_f64().map(|ms| (ms * 1e6).round() as u64);
        (0..m["length"].as_u64().expect("length") as usize)
            .filter(|&i| m["data"][i]["type"] == kind)
            .map(|i| {
                let start = ns(&m["startTime"][i]).expect("start");
                (
                    string(thread, &m["name"][i]),
                    start,
                    ns(&m["endTime"][i]),
                    m["data"][i].clone(),
                )
            })
            .collect()
    }

    /// A duration field (ms) in ns.
    fn field_ns(data: &Value, field: &str) -> u64 {
        (data[field].as_f64().expect(field) * 1e6).round() as u64
    }

    #[test]
    fn each_thread_has_its_work_waits_and_blame() {
        let export = export_of(timed_process());
        let doc = document(&export);
        let a = &export.analysis;
        let id = |name: &str| a.metrics.id(name).expect(name);
        for t in &a.threads {
            let fx = thread(&doc, t.tid);
            assert_eq!(fx["name"], t.name.as_str());
            assert_eq!(fx["processName"], "app");
            let deltas = fx["samples"]["threadCPUDelta"].as_array().expect("deltas");
            let cpu: u64 = deltas.iter().map(|d| d.as_u64().expect("µs") * 1000).sum();
            assert_eq!(cpu, t.totals[id(WORK)], "thread {}", t.tid);
            let waits = markers(fx, "BlameprofWait");
            let idleness: u64 = waits.iter().map(|w| field_ns(&w.3, "idleness")).sum();
            assert_eq!(idleness, t.totals[id(IDLENESS)], "thread {}", t.tid);
            let blames = markers(fx, "BlameprofBlame");
            let blame: u64 = blames.iter().map(|b| field_ns(&b.3, "blame")).sum();
            assert_eq!(blame, t.totals[id(BLAME)], "thread {}", t.tid);
        }
        // Thread 101's scaled mutex wait counts for half its 6 ms, over its whole length,
        // at its time: the third sample, 1 s + 30 ms after the process's zero.
        let waits = markers(thread(&doc, 101), "BlameprofWait");
        let scaled = waits
            .iter()
            .find(|w| w.0 == "mutex wait")
            .expect("a mutex wait");
        assert_eq!(field_ns(&scaled.3, "idleness"), 3 * MS);
        assert_eq!((scaled.1, scaled.2), (24 * MS, Some(30 * MS)));
        // Blame: over the hold, named by the function that called the lock function.
        let blames = markers(thread(&doc, 102), "BlameprofBlame");
        let mutex = blames
            .iter()
            .find(|b| b.0 == "mutex blame")
            .expect("mutex blame");
        assert_eq!(mutex.2.zip(Some(mutex.1)).map(|(e, s)| e - s), Some(MS / 2));
        assert_eq!(
            string(thread(&doc, 102), &mutex.3["site"]),
            "[unknown] 0x70"
        );
        assert_eq!(field_ns(&mutex.3, "hold"), MS / 2);
    }

    #[test]
    fn samples_without_times_have_no_markers() {
        let export = export_of(kinds_process());
        let doc = document(&export);
        for t in doc["threads"].as_array().expect("threads") {
            assert_eq!(t["markers"]["length"], 0, "{}", t["name"]);
        }
        let samples = &thread(&doc, 101)["samples"];
        assert_eq!(samples["length"], 1, "thread 101's work sample");
    }

    #[test]
    fn a_process_clock_starts_at_its_first_known_time() {
        let mut p = timed_process();
        p.threads[1].end_ns = Some(5 * SECOND);
        let clock = Clock::of(&p);
        assert_eq!(clock.epoch(SECOND), p.header.start_time_ns);
        assert_eq!(
            clock.epoch(SECOND / 2),
            p.header.start_time_ns,
            "never before the start"
        );
        assert_eq!(clock.epoch_end(), p.header.start_time_ns + 4 * SECOND);
        p.threads.iter_mut().for_each(|t| t.start_ns = None);
        assert_eq!(
            Clock::of(&p).epoch(SECOND + 10 * MS),
            p.header.start_time_ns
        );
    }
}
