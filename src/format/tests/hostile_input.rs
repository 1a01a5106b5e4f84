//! The reader on damaged and hostile input: random bytes, and valid parts (written with the
//! crate's own encoder, [`RecordWriter`]) damaged by byte flips, truncations, insertions,
//! removals, reordered chunks and length fields set to huge values, both as the file stands
//! (the checksums then catch most damage) and inside chunk payloads whose headers are then
//! rewritten to match (length and CRC), so that the record decoder itself sees hostile but
//! checksummed bytes. Plus crafted parts aimed at the reader's costs (colliding call paths,
//! many modules and threads, the deepest shared paths, huge lengths) and part files that are
//! not regular files.
//!
//! Every read must end, in a [`ReadError`] with a one-line message or a profile, and never
//! panic; it must return within [`TIME_LIMIT`] (a watchdog for hangs, not a performance
//! bound: reads here take well under a millisecond each, the crafted ones tens of
//! milliseconds); and its memory must stay within [`memory_bound`] of the input's size, the
//! most the format can express, so that no length or count read from the file sizes an
//! allocation. Salvage must keep what precedes the damage that fails a strict read.

use blameprof_format::read::{decode_part, read_profile, ReadError, ReadOptions};
use blameprof_format::wire::{chunk_header, file_header, RecordWriter, CHUNK_HEADER_LEN};
use blameprof_format::{
    Frame, LockInterval, LockStats, RecordTag, FORMAT_VERSION, MAX_STACK_DEPTH, TAIL_VERSION,
};
use proptest::prelude::*;
use proptest::sample::Index;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

/// How long one read (strict, salvage and samples-skipped) may take before it counts as a
/// hang.
const TIME_LIMIT: Duration = Duration::from_secs(10);

/// The most memory a read of `len` input bytes may hold at once. A sample record of about 10
/// bytes can name a new path of `MAX_STACK_DEPTH + 1` frames (16 bytes each) by sharing all
/// but one frame with its predecessor: under 1 KiB per input byte, doubled for vectors that
/// grow by doubling, with room to spare; plus a fixed allowance for the tables' first
/// allocations.
fn memory_bound(len: usize) -> usize {
    (256 << 10) + 4096 * len
}

// ---------------------------------------------------------------------------------------
// Memory accounting: a global allocator that counts, per thread, the bytes live since the
// count was reset, their peak and the largest single request.

struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(grown: isize, request: usize) {
    // `try_with`: constant-initialised cells without destructors stay usable until the
    // thread ends, and these calls allocate nothing.
    let _ = LIVE.try_with(|live| {
        live.set(live.get() + grown);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(live.get())));
    });
    let _ = LARGEST.try_with(|largest| largest.set(largest.get().max(request)));
}

// SAFETY: every method forwards to the system allocator with the caller's arguments and
// returns its result unchanged; the bookkeeping only updates thread-local counters.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is the system allocator's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            note(layout.size() as isize, layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            note(layout.size() as isize, layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by this allocator, i.e. the system's, with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        note(-(layout.size() as isize), 0);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`, and `new_size` meets `realloc`'s contract by the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            note(new_size as isize - layout.size() as isize, new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f`, returning its result with the peak of the bytes it held at once and its largest
/// single allocation.
fn measured<T>(f: impl FnOnce() -> T) -> (T, usize, usize) {
    LIVE.with(|c| c.set(0));
    PEAK.with(|c| c.set(0));
    LARGEST.with(|c| c.set(0));
    let result = f();
    (
        result,
        PEAK.with(Cell::get).max(0) as usize,
        LARGEST.with(Cell::get),
    )
}

// ---------------------------------------------------------------------------------------
// Reading under the watchdog.

/// What a read gave: the error message, or the profile's sample and call-path counts and
/// its damage note.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Failed {
        message: String,
        /// A damaged chunk (the kinds salvage skips), not the file header.
        chunk_damage: bool,
    },
    Read {
        samples: usize,
        stacks: usize,
        threads: usize,
        damage: Option<String>,
    },
}

fn outcome(result: Result<blameprof_format::read::ProcessProfile, ReadError>) -> Outcome {
    match result {
        Ok(p) => Outcome::Read {
            samples: p.samples.len(),
            stacks: p.stacks.len(),
            threads: p.threads.len(),
            damage: p.damage,
        },
        Err(e) => Outcome::Failed {
            chunk_damage: matches!(
                e,
                ReadError::Truncated { offset, .. } | ReadError::Corrupted { offset, .. }
                    if offset >= CHUNK_HEADER_LEN as u64
            ),
            message: e.to_string(),
        },
    }
}

/// The three reads of one input: strict, salvage, and strict without keeping samples.
struct Reads {
    strict: Outcome,
    salvage: Outcome,
    skip_samples: Outcome,
}

/// Reads `data` strictly, with salvage and without samples, on a thread of its own under
/// [`TIME_LIMIT`], checking each read's memory, and the contract between the three.
fn read_all(data: Vec<u8>) -> Reads {
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let path = Path::new("/profiles/hostile/1.bpp");
        let mut outcomes = Vec::new();
        for opts in [
            ReadOptions::default(),
            ReadOptions {
                salvage: true,
                ..Default::default()
            },
            ReadOptions {
                skip_samples: true,
                ..Default::default()
            },
        ] {
            let (outcome, peak, largest) = measured(|| outcome(decode_part(path, &data, opts)));
            outcomes.push((outcome, peak, largest));
        }
        let _ = tx.send((data.len(), outcomes));
    });
    let (len, outcomes) = match rx.recv_timeout(TIME_LIMIT) {
        Ok(done) => done,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("the reader did not return within {TIME_LIMIT:?} (a hang)")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            let payload = reader
                .join()
                .expect_err("the reader ended without an outcome");
            let what = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or(payload.downcast_ref::<&str>().copied())
                .unwrap_or("(not a string)");
            panic!("the reader panicked: {what}");
        }
    };
    for (outcome, peak, largest) in &outcomes {
        assert!(
            *peak <= memory_bound(len),
            "a read of {len} bytes held {peak} bytes at once (largest allocation {largest}): \
             more than the format can express ({outcome:?})"
        );
        if let Outcome::Failed { message, .. } = outcome {
            assert!(
                !message.contains('\n') && message.contains("1.bpp"),
                "errors are one line naming the file: {message:?}"
            );
        }
    }
    let mut outcomes = outcomes.into_iter().map(|(o, _, _)| o);
    let reads = Reads {
        strict: outcomes.next().expect("strict"),
        salvage: outcomes.next().expect("salvage"),
        skip_samples: outcomes.next().expect("skip samples"),
    };
    check_salvage(&reads);
    reads
}

/// Salvage keeps what precedes a damaged chunk, says why it stopped, and changes nothing
/// for an intact part; skipping samples fails exactly where a full read does.
fn check_salvage(r: &Reads) {
    match (&r.strict, &r.salvage) {
        (
            Outcome::Failed {
                message,
                chunk_damage: true,
            },
            Outcome::Read { damage, .. },
        ) => assert_eq!(damage.as_ref(), Some(message), "salvage notes the damage"),
        (
            Outcome::Failed {
                chunk_damage: true, ..
            },
            salvaged,
        ) => {
            panic!("salvage failed on chunk damage: {salvaged:?}")
        }
        (Outcome::Failed { .. }, salvaged) => assert_eq!(
            &r.strict, salvaged,
            "damage to the file header fails with or without salvage"
        ),
        (Outcome::Read { .. }, salvaged) => assert_eq!(&r.strict, salvaged, "intact part"),
    }
    match (&r.strict, &r.skip_samples) {
        (Outcome::Failed { .. }, skipped) => assert_eq!(&r.strict, skipped),
        (Outcome::Read { threads, .. }, Outcome::Read { threads: t, .. }) => {
            assert_eq!(threads, t, "threads with or without samples")
        }
        (_, skipped) => panic!("an intact part failed without samples: {skipped:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// Valid parts: a model, its strategy, and its encoding with the crate's writer.

#[derive(Debug, Clone)]
enum Rec {
    ModuleLoad {
        id: u32,
        base: u64,
        start: u64,
        end: u64,
        path: String,
        build_id: Vec<u8>,
    },
    ModuleUnload(u32),
    ThreadStart {
        tid: u32,
        routine: Frame,
        name: String,
        main: bool,
        start: u64,
    },
    ThreadEnd {
        tid: u32,
        name: String,
        cpu: u64,
        end: u64,
        tail: u64,
    },
    /// `keep`: root-side frames to share with the previous sample (at most its depth).
    Sample {
        metric: u8,
        value: u64,
        flags: u8,
        object: Option<u64>,
        keep: usize,
        frames: Vec<Frame>,
    },
    Counter {
        name: String,
        value: u64,
    },
    ProcessEnd {
        reason: u8,
        end: u64,
    },
    Lock {
        address: u64,
        kind: u8,
        flags: u8,
        init_site: u64,
        counts: [u64; LockStats::COUNTS],
    },
    Interval {
        address: u64,
        start: u64,
        length: u64,
        counts: [u64; LockInterval::COUNTS],
    },
    Time {
        change: i64,
        span: u64,
    },
}

#[derive(Debug, Clone)]
struct Process {
    pid: u32,
    argv: Vec<String>,
    exe: String,
    metrics: Vec<String>,
}

#[derive(Debug, Clone)]
struct Model {
    version: u32,
    process: Process,
    /// Chunks after the first (which holds the Process record): writer tid and records.
    chunks: Vec<(u32, Vec<Rec>)>,
}

fn text() -> impl Strategy<Value = String> {
    "[ -~]{0,12}"
}

fn number() -> impl Strategy<Value = u64> {
    prop_oneof![0..300u64, any::<u64>()]
}

fn frame() -> impl Strategy<Value = Frame> {
    (prop_oneof![0..4u32, any::<u32>()], number())
        .prop_map(|(module, offset)| Frame { module, offset })
}

fn rec() -> impl Strategy<Value = Rec> {
    let sample = (
        0..6u8,
        number(),
        any::<u8>(),
        proptest::option::of(number()),
        0..40usize,
        proptest::collection::vec(frame(), 0..24),
    )
        .prop_map(|(metric, value, flags, object, keep, frames)| Rec::Sample {
            metric,
            value,
            flags,
            object,
            keep,
            frames,
        });
    prop_oneof![
        8 => sample,
        3 => (any::<i64>(), number()).prop_map(|(change, span)| Rec::Time { change, span }),
        1 => (0..8u32, number(), number(), number(), text(), proptest::collection::vec(any::<u8>(), 0..20))
            .prop_map(|(id, base, start, end, path, build_id)| Rec::ModuleLoad { id, base, start, end, path, build_id }),
        1 => (0..8u32).prop_map(Rec::ModuleUnload),
        1 => (1..6u32, frame(), text(), any::<bool>(), number())
            .prop_map(|(tid, routine, name, main, start)| Rec::ThreadStart { tid, routine, name, main, start }),
        1 => (1..6u32, text(), number(), number(), number())
            .prop_map(|(tid, name, cpu, end, tail)| Rec::ThreadEnd { tid, name, cpu, end, tail }),
        1 => (prop_oneof![Just("write_errors".to_string()), text()], number())
            .prop_map(|(name, value)| Rec::Counter { name, value }),
        1 => (0..2u8, number()).prop_map(|(reason, end)| Rec::ProcessEnd { reason, end }),
        1 => (number(), 0..10u8, any::<u8>(), number(), proptest::array::uniform13(number()))
            .prop_map(|(address, kind, flags, init_site, counts)| Rec::Lock { address, kind, flags, init_site, counts }),
        1 => (number(), number(), number(), proptest::array::uniform3(number()))
            .prop_map(|(address, start, length, counts)| Rec::Interval { address, start, length, counts }),
    ]
}

fn model() -> impl Strategy<Value = Model> {
    let process = (
        any::<u32>(),
        proptest::collection::vec(text(), 0..4),
        text(),
        proptest::collection::vec(text(), 0..5),
    )
        .prop_map(|(pid, argv, exe, metrics)| Process {
            pid,
            argv,
            exe,
            metrics,
        });
    let chunks =
        proptest::collection::vec((1..6u32, proptest::collection::vec(rec(), 0..24)), 0..5);
    (1..=FORMAT_VERSION, process, chunks).prop_map(|(version, process, chunks)| Model {
        version,
        process,
        chunks,
    })
}

/// A sample as read: tid, metric, value, flags, object, path (leaf first), time, span.
type SampleRead = (u32, u8, u64, u8, u64, Vec<Frame>, u64, u64);

/// What a strict read of an encoded model must give.
#[derive(Debug, Default)]
struct Expected {
    samples: Vec<SampleRead>,
    modules: BTreeMap<u32, (u64, u64, u64, String, Vec<u8>)>,
    tids: BTreeSet<u32>,
    counters: BTreeMap<String, u64>,
    locks: Vec<LockStats>,
    intervals: Vec<LockInterval>,
    ended: bool,
}

/// A part as chunks, before any damage: the file header, each chunk's writer and payload,
/// and where its length and count fields start (chunk, offset in the payload).
#[derive(Debug, Clone)]
struct Part {
    header: [u8; 16],
    chunks: Vec<(u32, Vec<u8>)>,
    lengths: Vec<(usize, usize)>,
}

impl Part {
    /// The file bytes, every chunk header matching its payload.
    fn bytes(&self) -> Vec<u8> {
        let mut file = self.header.to_vec();
        for (tid, payload) in &self.chunks {
            file.extend_from_slice(&chunk_header(payload, *tid));
            file.extend_from_slice(payload);
        }
        file
    }
}

const OK: &str = "a generated chunk fits its 64 KiB buffer";

/// Encodes one chunk with `fill`, which is given the writer and a function that notes the
/// start of a length field about to be written.
fn chunk(
    lengths: &mut Vec<(usize, usize)>,
    index: usize,
    fill: impl FnOnce(&mut RecordWriter, &mut dyn FnMut(&mut RecordWriter)),
) -> Vec<u8> {
    let mut buf = vec![0u8; 1 << 16];
    let mut w = RecordWriter::new(&mut buf, 0);
    let mut mark = |w: &mut RecordWriter| {
        w.commit();
        lengths.push((index, w.committed()));
    };
    fill(&mut w, &mut mark);
    w.commit();
    let len = w.committed();
    buf.truncate(len);
    buf
}

fn encode(m: &Model) -> (Part, Expected) {
    let v = m.version;
    let mut header = file_header();
    header[8..12].copy_from_slice(&v.to_le_bytes());
    let mut lengths = Vec::new();
    let mut expected = Expected::default();
    let p = &m.process;
    let first = chunk(&mut lengths, 0, |w, mark| {
        w.tag(RecordTag::Process).expect(OK);
        for n in [p.pid, 0, 0] {
            w.varint(u64::from(n)).expect(OK);
        }
        w.varint(1_700_000_000_000_000_000).expect(OK);
        mark(w);
        w.varint(p.argv.len() as u64).expect(OK);
        let strings = p.argv.iter().map(String::as_str);
        for s in strings.chain([p.exe.as_str(), "cpu-timer"]) {
            mark(w);
            w.bytes(s.as_bytes()).expect(OK);
        }
        w.varint(200).expect(OK);
        w.varint(5_000_000).expect(OK);
        mark(w);
        w.varint(p.metrics.len() as u64).expect(OK);
        for name in &p.metrics {
            for s in [name.as_str(), "ns", "a metric"] {
                mark(w);
                w.bytes(s.as_bytes()).expect(OK);
            }
        }
    });
    let mut chunks = vec![(p.pid, first)];
    for (tid, recs) in &m.chunks {
        let index = chunks.len();
        let mut prev: Vec<Frame> = Vec::new();
        let mut time = (0u64, 0u64);
        let mut sampled = false;
        let payload = chunk(&mut lengths, index, |w, mark| {
            for rec in recs {
                encode_rec(w, mark, rec, v, &mut prev, &mut time, &mut expected, *tid);
                sampled |= matches!(rec, Rec::Sample { .. });
            }
        });
        if sampled {
            expected.tids.insert(*tid);
        }
        chunks.push((*tid, payload));
    }
    let part = Part {
        header,
        chunks,
        lengths,
    };
    (part, expected)
}

#[allow(clippy::too_many_arguments)]
fn encode_rec(
    w: &mut RecordWriter,
    mark: &mut dyn FnMut(&mut RecordWriter),
    rec: &Rec,
    version: u32,
    prev: &mut Vec<Frame>,
    time: &mut (u64, u64),
    e: &mut Expected,
    tid: u32,
) {
    let mut bytes = |w: &mut RecordWriter, b: &[u8]| {
        mark(w);
        w.bytes(b).expect(OK);
    };
    match rec {
        Rec::ModuleLoad {
            id,
            base,
            start,
            end,
            path,
            build_id,
        } => {
            w.tag(RecordTag::ModuleLoad).expect(OK);
            for n in [u64::from(*id), *base, *start, *end] {
                w.varint(n).expect(OK);
            }
            bytes(w, path.as_bytes());
            bytes(w, build_id);
            let module = (*base, *start, *end, path.clone(), build_id.clone());
            e.modules.insert(*id, module);
        }
        Rec::ModuleUnload(id) => {
            w.tag(RecordTag::ModuleUnload).expect(OK);
            w.varint(u64::from(*id)).expect(OK);
        }
        Rec::ThreadStart {
            tid,
            routine,
            name,
            main,
            start,
        } => {
            w.tag(RecordTag::ThreadStart).expect(OK);
            w.varint(u64::from(*tid)).expect(OK);
            w.frame(*routine).expect(OK);
            bytes(w, name.as_bytes());
            w.u8(u8::from(*main)).expect(OK);
            if version >= 2 {
                w.varint(*start).expect(OK);
            }
            e.tids.insert(*tid);
        }
        Rec::ThreadEnd {
            tid,
            name,
            cpu,
            end,
            tail,
        } => {
            w.tag(RecordTag::ThreadEnd).expect(OK);
            w.varint(u64::from(*tid)).expect(OK);
            bytes(w, name.as_bytes());
            w.varint(*cpu).expect(OK);
            if version >= 2 {
                w.varint(*end).expect(OK);
            }
            if version >= TAIL_VERSION {
                w.varint(*tail).expect(OK);
            }
            e.tids.insert(*tid);
        }
        Rec::Sample {
            metric,
            value,
            flags,
            object,
            keep,
            frames,
        } => {
            let object = object.filter(|_| version >= 2);
            let shared = (*keep).min(prev.len());
            let new = &frames[..frames.len().min(MAX_STACK_DEPTH + 1 - shared)];
            w.tag(match object {
                Some(_) => RecordTag::ObjectSample,
                None => RecordTag::Sample,
            })
            .expect(OK);
            w.u8(*metric).expect(OK);
            w.varint(*value).expect(OK);
            w.u8(*flags).expect(OK);
            if let Some(object) = object {
                w.varint(object).expect(OK);
            }
            mark(w);
            w.varint((shared + new.len()) as u64).expect(OK);
            mark(w);
            w.varint(shared as u64).expect(OK);
            for f in new {
                w.frame(*f).expect(OK);
            }
            let mut path = new.to_vec();
            path.extend_from_slice(&prev[prev.len() - shared..]);
            *prev = path.clone();
            let (t, span) = *time;
            let object = object.unwrap_or(0);
            e.samples
                .push((tid, *metric, *value, *flags, object, path, t, span));
        }
        Rec::Counter { name, value } => {
            w.tag(RecordTag::Counter).expect(OK);
            bytes(w, name.as_bytes());
            w.varint(*value).expect(OK);
            let slot = e.counters.entry(name.clone()).or_default();
            *slot = (*slot).max(*value);
        }
        Rec::ProcessEnd { reason, end } => {
            w.tag(RecordTag::ProcessEnd).expect(OK);
            w.u8(*reason).expect(OK);
            if version >= 2 {
                w.varint(*end).expect(OK);
            }
            e.ended = true;
        }
        Rec::Lock {
            address,
            kind,
            flags,
            init_site,
            counts,
        } => {
            if version < 2 {
                return;
            }
            w.tag(RecordTag::LockStats).expect(OK);
            w.varint(*address).expect(OK);
            w.u8(*kind).expect(OK);
            w.u8(*flags).expect(OK);
            w.varint(*init_site).expect(OK);
            let n = match version {
                2 => LockStats::COUNTS_V2,
                3 => LockStats::COUNTS_V3,
                _ => LockStats::COUNTS,
            };
            let mut written = [0u64; LockStats::COUNTS];
            written[..n].copy_from_slice(&counts[..n]);
            for c in &written[..n] {
                w.varint(*c).expect(OK);
            }
            e.locks.push(LockStats::from_counts(
                (*address, *kind, *flags, *init_site),
                written,
            ));
        }
        Rec::Interval {
            address,
            start,
            length,
            counts,
        } => {
            if version < 4 {
                return;
            }
            w.tag(RecordTag::LockInterval).expect(OK);
            for v in [*address, *start, *length].iter().chain(counts) {
                w.varint(*v).expect(OK);
            }
            let [acquisitions, acquisition_samples, try_failed] = *counts;
            e.intervals.push(LockInterval {
                address: *address,
                start_ns: *start,
                length_ns: *length,
                acquisitions,
                acquisition_samples,
                try_failed,
            });
        }
        Rec::Time { change, span } => {
            if version < 3 {
                return;
            }
            w.tag(RecordTag::Time).expect(OK);
            w.signed(*change).expect(OK);
            w.varint(*span).expect(OK);
            *time = (time.0.wrapping_add(*change as u64), *span);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Damage.

/// Values written over a length or count field.
fn huge() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(u64::MAX),
        Just(u64::MAX / 2),
        Just(1 << 62),
        Just(1 << 40),
        Just(u64::from(u32::MAX)),
        Just(1 << 31),
        Just(1 << 24),
        Just(MAX_STACK_DEPTH as u64 + 1),
        Just(MAX_STACK_DEPTH as u64 + 2),
        any::<u64>(),
    ]
}

/// Damage inside a chunk's payload: the chunk's header is then rewritten to match.
#[derive(Debug, Clone)]
enum PayloadDamage {
    Flip {
        chunk: Index,
        at: Index,
        mask: u8,
    },
    Truncate {
        chunk: Index,
        at: Index,
    },
    Insert {
        chunk: Index,
        at: Index,
        bytes: Vec<u8>,
    },
    Remove {
        chunk: Index,
        at: Index,
        len: usize,
    },
    /// A length or count field (string length, argc, metric count, depth, shared) set to a
    /// huge value.
    Length {
        field: Index,
        value: u64,
    },
    /// Chunks reordered (samples before the Process record, ...) or repeated.
    Move {
        from: Index,
        to: Index,
        copy: bool,
    },
}

/// Damage to the file as it stands: chunk headers keep their old length and CRC.
#[derive(Debug, Clone)]
enum FileDamage {
    Flip {
        at: Index,
        mask: u8,
    },
    Truncate {
        at: Index,
    },
    Insert {
        at: Index,
        bytes: Vec<u8>,
    },
    Remove {
        at: Index,
        len: usize,
    },
    /// A chunk header's payload length set to a huge value.
    ChunkLength {
        chunk: Index,
        len: u32,
    },
}

fn payload_damage() -> impl Strategy<Value = PayloadDamage> {
    let bytes = proptest::collection::vec(any::<u8>(), 1..12);
    prop_oneof![
        3 => (any::<Index>(), any::<Index>(), 1..=255u8)
            .prop_map(|(chunk, at, mask)| PayloadDamage::Flip { chunk, at, mask }),
        1 => (any::<Index>(), any::<Index>())
            .prop_map(|(chunk, at)| PayloadDamage::Truncate { chunk, at }),
        1 => (any::<Index>(), any::<Index>(), bytes)
            .prop_map(|(chunk, at, bytes)| PayloadDamage::Insert { chunk, at, bytes }),
        1 => (any::<Index>(), any::<Index>(), 1..16usize)
            .prop_map(|(chunk, at, len)| PayloadDamage::Remove { chunk, at, len }),
        3 => (any::<Index>(), huge()).prop_map(|(field, value)| PayloadDamage::Length { field, value }),
        1 => (any::<Index>(), any::<Index>(), any::<bool>())
            .prop_map(|(from, to, copy)| PayloadDamage::Move { from, to, copy }),
    ]
}

fn file_damage() -> impl Strategy<Value = FileDamage> {
    let len = prop_oneof![
        Just(u32::MAX),
        Just(u32::MAX - 15),
        Just(1 << 31),
        Just(1 << 20),
        any::<u32>()
    ];
    prop_oneof![
        3 => (any::<Index>(), 1..=255u8).prop_map(|(at, mask)| FileDamage::Flip { at, mask }),
        1 => any::<Index>().prop_map(|at| FileDamage::Truncate { at }),
        1 => (any::<Index>(), proptest::collection::vec(any::<u8>(), 1..24))
            .prop_map(|(at, bytes)| FileDamage::Insert { at, bytes }),
        1 => (any::<Index>(), 1..24usize).prop_map(|(at, len)| FileDamage::Remove { at, len }),
        1 => (any::<Index>(), len).prop_map(|(chunk, len)| FileDamage::ChunkLength { chunk, len }),
    ]
}

/// The length of the varint at the start of `bytes` (all of it if unterminated).
fn varint_len(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .position(|b| b & 0x80 == 0)
        .map_or(bytes.len(), |i| i + 1)
}

fn encode_varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

fn damage_payloads(part: &mut Part, damage: &[PayloadDamage]) {
    let lengths = part.lengths.clone();
    for d in damage {
        let chunks = &mut part.chunks;
        fn payload<'c>(chunks: &'c mut [(u32, Vec<u8>)], chunk: &Index) -> &'c mut Vec<u8> {
            let i = chunk.index(chunks.len());
            &mut chunks[i].1
        }
        match d {
            PayloadDamage::Flip { chunk, at, mask } => {
                let p = payload(chunks, chunk);
                if !p.is_empty() {
                    let i = at.index(p.len());
                    p[i] ^= mask;
                }
            }
            PayloadDamage::Truncate { chunk, at } => {
                let p = payload(chunks, chunk);
                let keep = at.index(p.len() + 1);
                p.truncate(keep);
            }
            PayloadDamage::Insert { chunk, at, bytes } => {
                let p = payload(chunks, chunk);
                let i = at.index(p.len() + 1);
                p.splice(i..i, bytes.iter().copied());
            }
            PayloadDamage::Remove { chunk, at, len } => {
                let p = payload(chunks, chunk);
                if !p.is_empty() {
                    let i = at.index(p.len());
                    p.drain(i..(i + len).min(p.len()));
                }
            }
            PayloadDamage::Length { field, value } => {
                // Fields are noted in the undamaged payloads: earlier damage may have moved
                // them, which only makes this one more arbitrary splice.
                if lengths.is_empty() {
                    continue;
                }
                let (chunk, offset) = lengths[field.index(lengths.len())];
                let Some((_, p)) = chunks.get_mut(chunk) else {
                    continue;
                };
                if offset < p.len() {
                    let old = varint_len(&p[offset..]);
                    p.splice(offset..offset + old, encode_varint(*value));
                }
            }
            PayloadDamage::Move { from, to, copy } => {
                let from = from.index(chunks.len());
                let moved = if *copy {
                    chunks[from].clone()
                } else {
                    chunks.remove(from)
                };
                let to = to.index(chunks.len() + 1);
                chunks.insert(to, moved);
            }
        }
    }
}

/// The offsets of the chunk headers in the part's bytes (before file damage).
fn chunk_offsets(part: &Part) -> Vec<usize> {
    let mut at = part.header.len();
    part.chunks
        .iter()
        .map(|(_, payload)| {
            let start = at;
            at += CHUNK_HEADER_LEN + payload.len();
            start
        })
        .collect()
}

fn damage_file(file: &mut Vec<u8>, chunk_starts: &[usize], damage: &[FileDamage]) {
    for d in damage {
        match d {
            FileDamage::Flip { at, mask } => {
                let i = at.index(file.len());
                file[i] ^= mask;
            }
            FileDamage::Truncate { at } => {
                let keep = at.index(file.len());
                file.truncate(keep);
            }
            FileDamage::Insert { at, bytes } => {
                let i = at.index(file.len() + 1);
                file.splice(i..i, bytes.iter().copied());
            }
            FileDamage::Remove { at, len } => {
                let i = at.index(file.len());
                let end = (i + len).min(file.len());
                file.drain(i..end);
            }
            FileDamage::ChunkLength { chunk, len } => {
                if chunk_starts.is_empty() {
                    continue;
                }
                let field = chunk_starts[chunk.index(chunk_starts.len())] + 4;
                if let Some(slot) = file.get_mut(field..field + 4) {
                    slot.copy_from_slice(&len.to_le_bytes());
                }
            }
        }
        if file.is_empty() {
            return;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Properties.

/// Random payloads behind valid chunk headers: each piece a record tag followed by
/// arbitrary bytes, so that the decoder gets past the tag byte into the fields.
fn random_payload() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        (1..=12u8, proptest::collection::vec(any::<u8>(), 0..24)),
        0..12,
    )
    .prop_map(|pieces| {
        pieces
            .into_iter()
            .flat_map(|(tag, rest)| std::iter::once(tag).chain(rest))
            .collect()
    })
}

/// Random input of three kinds: bytes alone, bytes after a valid file header, and random
/// payloads in checksummed chunks after a valid file header.
fn random_input() -> impl Strategy<Value = Vec<u8>> {
    let bytes = proptest::collection::vec(any::<u8>(), 0..512);
    let version = 0..=FORMAT_VERSION + 1;
    prop_oneof![
        bytes.clone(),
        (version.clone(), bytes).prop_map(|(v, tail)| {
            let mut file = file_header().to_vec();
            file[8..12].copy_from_slice(&v.to_le_bytes());
            file.extend(tail);
            file
        }),
        (
            version,
            proptest::collection::vec((any::<u32>(), random_payload()), 1..6)
        )
            .prop_map(|(v, chunks)| {
                let mut file = file_header().to_vec();
                file[8..12].copy_from_slice(&v.to_le_bytes());
                for (tid, payload) in chunks {
                    file.extend_from_slice(&chunk_header(&payload, tid));
                    file.extend(payload);
                }
                file
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn random_input_never_panics_hangs_or_balloons(data in random_input()) {
        read_all(data);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// The generator's parts are valid, and read back as written: damage below starts from
    /// real profiles.
    #[test]
    fn generated_parts_read_back_as_written(m in model()) {
        let (part, e) = encode(&m);
        let data = part.bytes();
        let r = read_all(data.clone());
        prop_assert!(matches!(r.strict, Outcome::Read { damage: None, .. }), "{:?}", r.strict);
        let p = decode_part(Path::new("1.bpp"), &data, ReadOptions::default()).expect("valid");
        prop_assert_eq!(p.version, m.version);
        prop_assert_eq!(p.header.pid, m.process.pid);
        prop_assert_eq!(&p.header.argv, &m.process.argv);
        prop_assert_eq!(&p.header.exe, &m.process.exe);
        let metrics: Vec<&str> = p.header.metrics.iter().map(|d| d.name.as_str()).collect();
        prop_assert_eq!(metrics, m.process.metrics.iter().map(String::as_str).collect::<Vec<_>>());
        let samples: Vec<_> = p
            .samples
            .iter()
            .map(|s| {
                let path = p.stacks.get(s.stack).to_vec();
                (s.tid, s.metric, s.value, s.flags, s.object, path, s.time, s.span)
            })
            .collect();
        prop_assert_eq!(samples, e.samples);
        let modules: BTreeMap<u32, _> = p
            .modules
            .iter()
            .map(|m| (m.id, (m.base, m.start, m.end, m.path.clone(), m.build_id.clone())))
            .collect();
        prop_assert_eq!(p.modules.len(), modules.len(), "one entry per module id");
        prop_assert_eq!(modules, e.modules);
        let tids: BTreeSet<u32> = p.threads.iter().map(|t| t.tid).collect();
        prop_assert_eq!(p.threads.len(), tids.len(), "one entry per thread");
        prop_assert_eq!(tids, e.tids);
        prop_assert_eq!(p.counters, e.counters.into_iter().collect::<Vec<_>>());
        prop_assert_eq!(p.locks, e.locks);
        prop_assert_eq!(p.lock_intervals, e.intervals);
        prop_assert_eq!(p.ended_cleanly, e.ended);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 5000, ..ProptestConfig::default() })]

    #[test]
    fn damaged_parts_never_panic_hang_or_balloon(
        m in model(),
        inside in proptest::collection::vec(payload_damage(), 0..4),
        outside in proptest::collection::vec(file_damage(), 0..3),
    ) {
        let (mut part, _) = encode(&m);
        damage_payloads(&mut part, &inside);
        let starts = chunk_offsets(&part);
        let mut file = part.bytes();
        damage_file(&mut file, &starts, &outside);
        let r = read_all(file);
        if outside.is_empty() {
            // Every checksum matches: nothing can be truncated, only misread or refused.
            prop_assert!(
                !matches!(&r.strict, Outcome::Failed { message, .. } if message.contains("truncated")),
                "{:?}", r.strict
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Crafted parts aimed at the reader's costs.

/// A part of one chunk, written by thread 1: a Process record with one metric, then
/// whatever `body` writes.
fn crafted(body: impl FnOnce(&mut RecordWriter)) -> Vec<u8> {
    let mut buf = vec![0u8; 8 << 20];
    let mut w = RecordWriter::new(&mut buf, 0);
    w.tag(RecordTag::Process).expect(OK);
    for n in [1, 0, 0, 0, 0] {
        w.varint(n).expect(OK);
    }
    w.bytes(b"/bin/crafted").expect(OK);
    w.bytes(b"cpu-timer").expect(OK);
    w.varint(200).expect(OK);
    w.varint(5_000_000).expect(OK);
    w.varint(1).expect(OK);
    for s in ["work", "ns", "cpu time"] {
        w.bytes(s.as_bytes()).expect(OK);
    }
    body(&mut w);
    w.commit();
    let len = w.committed();
    let mut file = file_header().to_vec();
    file.extend_from_slice(&chunk_header(&buf[..len], 1));
    file.extend_from_slice(&buf[..len]);
    file
}

/// A one-frame sample at `offset` in module 0.
fn sample_at(w: &mut RecordWriter, offset: u64) {
    w.tag(RecordTag::Sample).expect(OK);
    for n in [0, 1, 0, 1, 0, 0] {
        w.varint(n).expect(OK);
    }
    w.varint(offset).expect(OK);
}

fn read_ok(data: Vec<u8>) -> (usize, usize, usize) {
    match read_all(data).strict {
        Outcome::Read {
            samples,
            stacks,
            threads,
            damage: None,
        } => (samples, stacks, threads),
        other => panic!("a crafted valid part failed: {other:?}"),
    }
}

/// 100,000 one-frame paths built to share one bucket and one control byte under the
/// unkeyed Fx hash the reader used before: that read took over 20 s (quadratic), under the
/// keyed hash it is linear.
#[test]
fn paths_crafted_to_collide_read_in_linear_time() {
    const FX: u64 = 0xf135_7aea_2e62_a9c5;
    let mut inverse = FX;
    for _ in 0..6 {
        inverse = inverse.wrapping_mul(2u64.wrapping_sub(FX.wrapping_mul(inverse)));
    }
    let before = FX.wrapping_mul(FX);
    let data = crafted(|w| {
        for i in 0..100_000u64 {
            let state = (0x12345 << 38) | (0x55 << 31) | i;
            sample_at(w, state.wrapping_mul(inverse).wrapping_sub(before));
        }
    });
    assert_eq!(read_ok(data), (100_000, 100_000, 1));
}

/// 300,000 module loads and 300,000 thread starts with distinct ids: each is found by a
/// lookup, not a scan of the ones before (which made such a part take minutes).
#[test]
fn many_modules_and_threads_read_in_linear_time() {
    let data = crafted(|w| {
        for id in 1..=300_000u64 {
            w.tag(RecordTag::ModuleLoad).expect(OK);
            for n in [id, 0, 0, 0, 0, 0] {
                w.varint(n).expect(OK);
            }
            w.tag(RecordTag::ThreadStart).expect(OK);
            for n in [id, 0, 0, 0, 0, 0] {
                w.varint(n).expect(OK);
            }
        }
    });
    read_all(data.clone());
    let p = decode_part(Path::new("1.bpp"), &data, ReadOptions::default()).expect("valid");
    assert_eq!((p.modules.len(), p.threads.len()), (300_000, 300_000));
}

/// The format's largest expansion: a path of `MAX_STACK_DEPTH + 1` frames, then samples of
/// 10 bytes each that share all but a new leaf with it. Within the memory bound.
#[test]
fn deepest_shared_paths_stay_within_the_memory_bound() {
    let depth = MAX_STACK_DEPTH as u64 + 1;
    let data = crafted(|w| {
        w.tag(RecordTag::Sample).expect(OK);
        for n in [0, 1, 0, depth, 0] {
            w.varint(n).expect(OK);
        }
        for i in 0..depth {
            w.frame(Frame {
                module: 0,
                offset: i,
            })
            .expect(OK);
        }
        for leaf in 0..2_000 {
            w.tag(RecordTag::Sample).expect(OK);
            for n in [0, 1, 0, depth, depth - 1, 0, 1000 + leaf] {
                w.varint(n).expect(OK);
            }
        }
    });
    assert_eq!(read_ok(data), (2_001, 2_001, 1));
}

/// Length and count fields set to huge values behind a valid checksum: refused, with no
/// allocation of the size they name.
#[test]
fn huge_lengths_are_refused_without_allocating_them() {
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    for huge in [u64::MAX, u64::from(u32::MAX), 1 << 40] {
        cases.push((
            "string length",
            crafted(|w| {
                w.tag(RecordTag::Counter).expect(OK);
                w.varint(huge).expect(OK);
            }),
        ));
        cases.push((
            "argv count",
            crafted(|w| {
                w.tag(RecordTag::Process).expect(OK);
                for n in [1, 0, 0, 0, huge] {
                    w.varint(n).expect(OK);
                }
            }),
        ));
        cases.push((
            "metric count",
            crafted(|w| {
                w.tag(RecordTag::Process).expect(OK);
                for n in [1, 0, 0, 0, 0, 0, 0, 200, 1, huge] {
                    w.varint(n).expect(OK);
                }
            }),
        ));
        cases.push((
            "depth",
            crafted(|w| {
                w.tag(RecordTag::Sample).expect(OK);
                for n in [0, 1, 0, huge, 0] {
                    w.varint(n).expect(OK);
                }
            }),
        ));
    }
    let mut whole_chunk = crafted(|_| {});
    whole_chunk[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
    cases.push(("chunk length", whole_chunk));
    for (what, data) in cases {
        let r = read_all(data);
        assert!(
            matches!(
                r.strict,
                Outcome::Failed {
                    chunk_damage: true,
                    ..
                }
            ),
            "{what}: {:?}",
            r.strict
        );
    }
}

/// A `.bpp` in a profile directory that is a FIFO, a directory or a link to a device is
/// refused before it is read: a FIFO would block the read, `/dev/zero` never end.
#[test]
fn part_files_that_are_not_regular_files_are_refused() {
    let base = std::env::temp_dir().join(format!("blameprof-hostile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    type Make = fn(&Path);
    let parts: [(&str, Make); 3] = [
        ("fifo", |p| {
            let made = std::process::Command::new("mkfifo").arg(p).status();
            assert!(made.is_ok_and(|s| s.success()), "mkfifo {}", p.display());
        }),
        ("directory", |p| std::fs::create_dir(p).expect("mkdir")),
        ("device", |p| {
            std::os::unix::fs::symlink("/dev/zero", p).expect("symlink");
        }),
    ];
    for (what, make) in parts {
        let dir = base.join(what);
        std::fs::create_dir_all(&dir).expect("profile dir");
        let part = dir.join("100.bpp");
        make(&part);
        let (tx, rx) = std::sync::mpsc::channel();
        let read_dir = dir.clone();
        std::thread::spawn(move || {
            let _ = tx.send(read_profile(&read_dir, ReadOptions::default()).map(|_| ()));
        });
        let result = rx
            .recv_timeout(TIME_LIMIT)
            .unwrap_or_else(|_| panic!("{what}: the read did not return"));
        match result {
            Err(e @ ReadError::NotAFile(_)) => {
                let message = e.to_string();
                assert!(message.contains("100.bpp") && message.contains("not a regular file"));
            }
            other => panic!("{what}: {other:?}"),
        }
        // Passed on its own, too (a directory is then read as a profile directory).
        if what != "directory" {
            let direct = read_profile(&part, ReadOptions::default());
            assert!(
                matches!(direct, Err(ReadError::NotAFile(_))),
                "{what}: {direct:?}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&base);
}
