//! Test helpers: small synthetic profiles whose frames lie in no module, with the unknown
//! addresses renamed after analysis to readable function names. Lock profiles add frames
//! in a runtime library that does not exist on disk, renamed likewise. Test-only.

use super::cct::{NodeId, Tree};
use super::symbolize::Symbolizer;
use super::{analyze, Analysis, Filter};
use crate::format::read::{ModuleInfo, ProcessProfile, Profile, Sample, ThreadInfo};
use crate::format::{Frame, MetricDef};

/// Readable names of the fake addresses used by tests.
pub(crate) const NAMES: &[(u64, &str)] = &[
    (0x10, "g"),
    (0x20, "f"),
    (0x30, "main"),
    (0x40, "h"),
    (0x50, "_start"),
    (0x60, "lookup"),
    (0x70, "insert"),
    (0x80, "worker"),
];

/// Module id of the runtime library in lock profiles.
pub(crate) const RT_MODULE: u32 = 7;
/// Its path: named like the runtime, but no file (frames get `libblameprof_rt.so+0x...`).
pub(crate) const RT_PATH: &str = "/nonexistent/blameprof/libblameprof_rt.so";

/// Readable names of the fake runtime offsets used by tests.
pub(crate) const RT_NAMES: &[(u64, &str)] = &[
    (0x100, "blameprof::locks::mutex::slow_lock"),
    (0x110, "blameprof::locks::blame::settle"),
    (0x120, "blameprof::locks::blame::charge"),
    (0x200, "pthread_mutex_lock"),
    (0x300, "pthread_mutex_unlock"),
    (0x400, "blameprof_rt::thread_start"),
    (0x410, "blameprof_rt::thread_start_inner"),
    (0x500, "pthread_cond_wait"),
    (0x600, "pthread_cond_signal"),
];

/// An application frame (no module) at fake address `offset`.
pub(crate) fn app(offset: u64) -> Frame {
    Frame { module: 0, offset }
}

/// A frame in the runtime library at fake offset `offset`.
pub(crate) fn rt(offset: u64) -> Frame {
    Frame {
        module: RT_MODULE,
        offset,
    }
}

pub(crate) fn metric(name: &str) -> MetricDef {
    MetricDef {
        name: name.into(),
        unit: "ns".into(),
        description: format!("{name} time"),
    }
}

/// An empty process image with pid `pid`, metrics `metrics` and thread `pid` (main).
pub(crate) fn process(pid: u32, metrics: &[&str]) -> ProcessProfile {
    let mut p = ProcessProfile::default();
    p.header.pid = pid;
    p.header.argv = vec!["./app".into(), "--fast".into()];
    p.header.exe = "/bin/app".into();
    p.header.sample_source = "itimer-prof".into();
    p.header.requested_hz = 200;
    p.header.period_ns = 5_000_000;
    p.header.metrics = metrics.iter().map(|m| metric(m)).collect();
    p.threads.push(ThreadInfo {
        tid: pid,
        name: "app".into(),
        is_main: true,
        ..Default::default()
    });
    p
}

/// Adds a sample; `root_first` are fake addresses, outermost first.
pub(crate) fn add_sample(
    p: &mut ProcessProfile,
    tid: u32,
    metric: u8,
    root_first: &[u64],
    value: u64,
) {
    let frames: Vec<Frame> = root_first
        .iter()
        .rev()
        .map(|&offset| Frame { module: 0, offset })
        .collect();
    let stack = p.stacks.intern(&frames);
    p.samples.push(Sample {
        tid,
        metric,
        flags: 0,
        value,
        stack,
        object: 0,
        time: 0,
        span: 0,
    });
}

/// Adds a sample with root-first `frames` (mixing [`app`] and [`rt`] frames).
pub(crate) fn add_frames(
    p: &mut ProcessProfile,
    tid: u32,
    metric: u8,
    root_first: &[Frame],
    value: u64,
) {
    add_flagged(p, tid, metric, root_first, value, 0);
}

/// Adds a sample with root-first `frames` and sample flags `flags` (a wait kind's
/// [`crate::format::WaitKind::flags`], [`crate::format::SAMPLE_UNBLAMED`], ...).
pub(crate) fn add_flagged(
    p: &mut ProcessProfile,
    tid: u32,
    metric: u8,
    root_first: &[Frame],
    value: u64,
    flags: u8,
) {
    let frames: Vec<Frame> = root_first.iter().rev().copied().collect();
    let stack = p.stacks.intern(&frames);
    p.samples.push(Sample {
        tid,
        metric,
        flags,
        value,
        stack,
        object: 0,
        time: 0,
        span: 0,
    });
}

/// A process as the lock-blame runtime writes it (docs/lock-blame-contract.md): metrics
/// work (0), idleness (1), blame (2); the runtime module; main thread 100 and two workers,
/// 101 and 102, started at `worker`. Costs (ms):
///
/// | thread | metric | path (root first; `rt:` runtime frames) | ms |
/// |---|---|---|---|
/// | 100 | work | main f g | 2 |
/// | 101 | work | _start rt:thread_start rt:thread_start_inner worker lookup g | 4 |
/// | 101 | idleness | _start worker lookup rt:pthread_mutex_lock rt:slow_lock | 6 |
/// | 101 | blame | _start worker lookup rt:pthread_mutex_unlock rt:settle | 1.5 |
/// | 102 | work | _start worker insert | 3 |
/// | 102 | idleness | _start worker insert rt:pthread_mutex_lock | 1 |
/// | 102 | blame | _start worker insert rt:pthread_mutex_unlock rt:settle rt:charge | 4.8 |
///
/// Totals: work 9, idleness 7, blame 6.3, effort 16 ms.
pub(crate) fn lock_process() -> ProcessProfile {
    let mut p = process(100, &["work", "idleness", "blame"]);
    p.modules.push(module(RT_MODULE, RT_PATH, Vec::new()));
    for tid in [101, 102] {
        p.threads.push(ThreadInfo {
            tid,
            name: "worker".into(),
            start_routine: Some(app(0x80)),
            ..Default::default()
        });
    }
    let (start, worker, lookup, insert) = (app(0x50), app(0x80), app(0x60), app(0x70));
    let (lock, unlock) = (rt(0x200), rt(0x300));
    add_frames(
        &mut p,
        100,
        0,
        &[app(0x30), app(0x20), app(0x10)],
        2_000_000,
    );
    let trampoline = [start, rt(0x400), rt(0x410), worker, lookup, app(0x10)];
    add_frames(&mut p, 101, 0, &trampoline, 4_000_000);
    add_frames(
        &mut p,
        101,
        1,
        &[start, worker, lookup, lock, rt(0x100)],
        6_000_000,
    );
    add_frames(
        &mut p,
        101,
        2,
        &[start, worker, lookup, unlock, rt(0x110)],
        1_500_000,
    );
    add_frames(&mut p, 102, 0, &[start, worker, insert], 3_000_000);
    add_frames(&mut p, 102, 1, &[start, worker, insert, lock], 1_000_000);
    let deep_unlock = [start, worker, insert, unlock, rt(0x110), rt(0x120)];
    add_frames(&mut p, 102, 2, &deep_unlock, 4_800_000);
    p
}

/// [`lock_process`] as a runtime that records wait kinds writes it: its idleness and blame
/// samples are marked as mutex waits, and condition variables and a kind-less unblamed
/// wait are added. Added costs (ms):
///
/// | thread | metric | flags | path (root first) | ms |
/// |---|---|---|---|---|
/// | 101 | idleness | condvar | _start worker lookup rt:pthread_cond_wait | 3 |
/// | 102 | idleness | condvar, unblamed | _start worker insert rt:pthread_cond_wait | 0.5 |
/// | 102 | blame | condvar | _start worker insert rt:pthread_cond_signal | 2 |
/// | 100 | idleness | unblamed | main f rt:pthread_cond_wait | 0.25 |
/// | 100 | work | futex (ignored: work has no kinds) | main h | 1 |
///
/// Totals: work 10, idleness 10.75, blame 8.3; idleness.mutex 7, idleness.condvar 3.5,
/// idleness.unblamed 0.75, blame.mutex 6.3, blame.condvar 2.
pub(crate) fn kinds_process() -> ProcessProfile {
    use crate::format::{WaitKind, SAMPLE_UNBLAMED};
    let mut p = lock_process();
    for s in &mut p.samples {
        if s.metric != 0 {
            s.flags |= WaitKind::Mutex.flags();
        }
    }
    let (start, worker, lookup, insert) = (app(0x50), app(0x80), app(0x60), app(0x70));
    let (wait, signal) = (rt(0x500), rt(0x600));
    let condvar = WaitKind::CondVar.flags();
    let samples: [(u32, u8, &[Frame], u64, u8); 5] = [
        (101, 1, &[start, worker, lookup, wait], 3_000_000, condvar),
        (
            102,
            1,
            &[start, worker, insert, wait],
            500_000,
            condvar | SAMPLE_UNBLAMED,
        ),
        (102, 2, &[start, worker, insert, signal], 2_000_000, condvar),
        (
            100,
            1,
            &[app(0x30), app(0x20), wait],
            250_000,
            SAMPLE_UNBLAMED,
        ),
        (
            100,
            0,
            &[app(0x30), app(0x40)],
            1_000_000,
            WaitKind::Futex.flags(),
        ),
    ];
    for (tid, metric, frames, value, flags) in samples {
        add_flagged(&mut p, tid, metric, frames, value, flags);
    }
    p
}

/// A one-process profile of [`lock_process`].
pub(crate) fn lock_profile() -> Profile {
    Profile {
        path: "blameprof-locks".into(),
        processes: vec![lock_process()],
        skipped: Vec::new(),
    }
}

/// Gives every location of function `name` the source line `file:line` (as if from debug
/// info), in all paths of `a`.
pub(crate) fn set_line(a: &mut Analysis, name: &str, file: &str, line: u32) {
    let file = a.names.intern_file(file);
    for path in &mut a.paths {
        for loc in &mut path.locs {
            if a.names.function(loc.function).name == name {
                loc.line = super::SourceLine {
                    file: Some(file),
                    line: Some(line),
                };
            }
        }
    }
}

/// The function names of a path, root first.
pub(crate) fn path_names(a: &Analysis, locs: &[super::Loc]) -> Vec<String> {
    locs.iter()
        .map(|l| a.names.function(l.function).name.clone())
        .collect()
}

/// A one-process profile (pid 100, metric "work") with the given root-first samples.
pub(crate) fn profile_of(stacks: &[(&[u64], u64)]) -> Profile {
    let mut p = process(100, &["work"]);
    for (path, value) in stacks {
        add_sample(&mut p, 100, 0, path, *value);
    }
    Profile {
        path: "blameprof-test".into(),
        processes: vec![p],
        skipped: Vec::new(),
    }
}

/// Analyses `profile` unfiltered and renames the fake addresses.
pub(crate) fn analyze_renamed(profile: &Profile) -> Analysis {
    let mut a = analyze(
        profile,
        Filter::default(),
        &mut Symbolizer::new(),
        &mut Default::default(),
    )
    .expect("analysis");
    let names = a.names.functions.iter_mut().map(|f| &mut f.name);
    let routines = a
        .threads
        .iter_mut()
        .filter_map(|t| t.start_routine.as_mut());
    for name in names.chain(routines) {
        let app = NAMES
            .iter()
            .find(|(addr, _)| *name == format!("[unknown] {addr:#x}"));
        let runtime = RT_NAMES
            .iter()
            .find(|(offset, _)| *name == format!("libblameprof_rt.so+{offset:#x}"));
        if let Some((_, readable)) = app.or(runtime) {
            *name = (*readable).to_owned();
        }
    }
    a
}

pub(crate) fn analysis_of(stacks: &[(&[u64], u64)]) -> Analysis {
    analyze_renamed(&profile_of(stacks))
}

pub(crate) fn fname<'a>(a: &'a Analysis, t: &Tree, id: NodeId) -> &'a str {
    &a.names.function(t.node(id).function).name
}

/// The node reached from the roots by following functions named `names`.
pub(crate) fn find_path(a: &Analysis, t: &Tree, names: &[&str]) -> NodeId {
    let mut candidates = t.roots().to_vec();
    let mut found = None;
    for name in names {
        let id = *candidates
            .iter()
            .find(|&&c| fname(a, t, c) == *name)
            .unwrap_or_else(|| panic!("no node {name} on path {names:?}"));
        candidates = t.children(id).to_vec();
        found = Some(id);
    }
    found.expect("non-empty path")
}

/// A fresh temporary directory, removed when dropped.
pub(crate) struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub(crate) fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("blameprof-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temporary directory");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A module entry for a real file.
pub(crate) fn module(id: u32, path: &str, build_id: Vec<u8>) -> ModuleInfo {
    ModuleInfo {
        id,
        path: path.into(),
        build_id,
        base: 0x5555_0000_0000,
        start: 0x5555_0000_0000,
        end: 0x5555_0010_0000,
    }
}

/// Writes `p` as part file `dir/<pid>.bpp` with the runtime's encoder: the process record,
/// modules, threads and counters in one chunk, then one chunk of samples per thread.
pub(crate) fn write_part(dir: &std::path::Path, p: &ProcessProfile) {
    use crate::format::wire::{chunk_header, file_header, RecordWriter};
    use crate::format::RecordTag;
    let mut file = file_header().to_vec();
    let mut chunk = |tid: u32, fill: &mut dyn FnMut(&mut RecordWriter)| {
        let mut buf = vec![0u8; 1 << 20];
        let mut w = RecordWriter::new(&mut buf, 0);
        fill(&mut w);
        w.commit();
        let len = w.committed();
        file.extend_from_slice(&chunk_header(&buf[..len], tid));
        file.extend_from_slice(&buf[..len]);
    };
    let h = &p.header;
    chunk(h.pid, &mut |w| {
        let ok = "test profile fits the buffer";
        w.tag(RecordTag::Process).expect(ok);
        for v in [h.pid, h.ppid, h.exec_generation] {
            w.varint(u64::from(v)).expect(ok);
        }
        w.varint(h.start_time_ns).expect(ok);
        w.varint(h.argv.len() as u64).expect(ok);
        for a in &h.argv {
            w.bytes(a.as_bytes()).expect(ok);
        }
        w.bytes(h.exe.as_bytes()).expect(ok);
        w.bytes(h.sample_source.as_bytes()).expect(ok);
        w.varint(h.requested_hz).expect(ok);
        w.varint(h.period_ns).expect(ok);
        w.varint(h.metrics.len() as u64).expect(ok);
        for m in &h.metrics {
            for s in [&m.name, &m.unit, &m.description] {
                w.bytes(s.as_bytes()).expect(ok);
            }
        }
        for m in &p.modules {
            w.tag(RecordTag::ModuleLoad).expect(ok);
            w.varint(u64::from(m.id)).expect(ok);
            for v in [m.base, m.start, m.end] {
                w.varint(v).expect(ok);
            }
            w.bytes(m.path.as_bytes()).expect(ok);
            w.bytes(&m.build_id).expect(ok);
        }
        for t in &p.threads {
            w.tag(RecordTag::ThreadStart).expect(ok);
            w.varint(u64::from(t.tid)).expect(ok);
            w.frame(t.start_routine.unwrap_or_default()).expect(ok);
            w.bytes(t.name.as_bytes()).expect(ok);
            w.u8(u8::from(t.is_main)).expect(ok);
            w.varint(t.start_ns.unwrap_or(0)).expect(ok);
        }
        for l in &p.locks {
            w.tag(RecordTag::LockStats).expect(ok);
            w.varint(l.address).expect(ok);
            w.u8(l.kind).expect(ok);
            w.u8(l.flags).expect(ok);
            w.varint(l.init_site).expect(ok);
            for v in l.counts() {
                w.varint(v).expect(ok);
            }
        }
        for (name, value) in &p.counters {
            w.tag(RecordTag::Counter).expect(ok);
            w.bytes(name.as_bytes()).expect(ok);
            w.varint(*value).expect(ok);
        }
    });
    let mut tids: Vec<u32> = p.samples.iter().map(|s| s.tid).collect();
    tids.sort();
    tids.dedup();
    for tid in tids {
        chunk(tid, &mut |w| {
            let mut time = (0u64, 0u64);
            for s in p.samples.iter().filter(|s| s.tid == tid) {
                if (s.time, s.span) != time {
                    w.tag(RecordTag::Time).unwrap();
                    w.signed(s.time.wrapping_sub(time.0) as i64).unwrap();
                    w.varint(s.span).unwrap();
                    time = (s.time, s.span);
                }
                let frames = p.stacks.get(s.stack);
                let tag = if s.object != 0 {
                    RecordTag::ObjectSample
                } else {
                    RecordTag::Sample
                };
                w.tag(tag).unwrap();
                w.u8(s.metric).unwrap();
                w.varint(s.value).unwrap();
                w.u8(s.flags).unwrap();
                if s.object != 0 {
                    w.varint(s.object).unwrap();
                }
                w.varint(frames.len() as u64).unwrap();
                w.varint(0).unwrap();
                for &f in frames {
                    w.frame(f).unwrap();
                }
            }
        });
    }
    std::fs::write(dir.join(format!("{}.bpp", h.pid)), file).expect("write part");
}

/// The lock of [`lock_table_process`].
pub(crate) const TABLE_LOCK: u64 = 0x7f00_0000_a000;

/// [`lock_process`] as a runtime with lock tables writes it (format version 2): its
/// idleness and blame samples are about one mutex at [`TABLE_LOCK`], whose counts say 1000
/// acquisitions (sampled 4 times), 40 contended, 3 failed trylocks of 103, 7 ms waited (the
/// longest wait 1 ms, 3 waiters at most; 30 holds others waited for, 20 of them timed, for
/// 4 ms); its three threads ran 10 ms each; insert
/// computed 2 ms in `g` while others waited for the lock (held.contended).
pub(crate) fn lock_table_process() -> ProcessProfile {
    let mut p = lock_process();
    p.version = crate::format::FORMAT_VERSION;
    // Insert computed 2 ms of its 3 in `app(0x10)` while lookup waited for its lock.
    p.header.metrics.push(metric("held.contended"));
    let inside = [app(0x50), app(0x80), app(0x70), app(0x10)];
    add_frames(&mut p, 102, 3, &inside, 2_000_000);
    for s in p.samples.iter_mut().filter(|s| s.metric > 0) {
        s.object = TABLE_LOCK;
    }
    for t in &mut p.threads {
        t.start_ns = Some(1_000_000);
        t.end_ns = Some(11_000_000);
    }
    p.locks.push(crate::format::LockStats {
        address: TABLE_LOCK,
        kind: crate::format::WaitKind::Mutex as u8,
        flags: 0,
        init_site: 0,
        acquisitions: 1000,
        acquisition_samples: 4,
        try_acquired: 100,
        try_failed: 3,
        contended: 40,
        contended_measured: 40,
        wait_ns: 7_000_000,
        max_wait_ns: 1_000_000,
        peak_waiters: 3,
        contended_holds: 30,
        timed_holds: 20,
        contended_hold_ns: 4_000_000,
        try_fail_site: 0,
    });
    p
}

/// `text` with the fake addresses of [`NAMES`] and [`RT_NAMES`] replaced by their names.
pub(crate) fn readable(text: &str) -> String {
    let mut s = text.to_owned();
    for (addr, name) in NAMES {
        s = s.replace(&format!("[unknown] {addr:#x}"), name);
    }
    for (offset, name) in RT_NAMES {
        s = s.replace(&format!("libblameprof_rt.so+{offset:#x}"), name);
    }
    s
}

/// The lock table of `p`, with the fake addresses in its names made readable.
pub(crate) fn lock_table_of(p: ProcessProfile) -> super::locks::LockTable {
    let profile = Profile {
        path: "test".into(),
        processes: vec![p],
        skipped: Vec::new(),
    };
    let mut t = super::locks::lock_table(
        &profile,
        Filter::default(),
        &mut Symbolizer::new(),
        &mut Default::default(),
    )
    .expect("lock table");
    for l in &mut t.locks {
        l.name = readable(&l.name);
        let Some(d) = l.detail.as_deref_mut() else {
            continue;
        };
        let sites = d
            .waiters
            .iter_mut()
            .chain(d.holders.iter_mut())
            .chain(d.inside.iter_mut())
            .map(|w| &mut w.0);
        let pairs = d
            .pairs
            .iter_mut()
            .flat_map(|p| [&mut p.waiter, &mut p.holder]);
        for s in sites.chain(pairs) {
            s.caller = readable(&s.caller);
            s.lock_function = readable(&s.lock_function);
        }
    }
    for g in &mut t.groups {
        g.name = readable(&g.name);
    }
    t
}
