//! Records written outside the signal handler: process header, modules, thread start/end,
//! counters and the end marker.
//!
//! Job: encode those records (which carry variable-length strings) into a heap buffer and
//! append them as one chunk. Not async-signal-safe (allocates); called at start-up, thread
//! start/end, `dlopen`, fork, exec and exit.

use super::config::{Config, Source};
use super::counters::{self, Counter};
use super::output::{self, Chunk, Unwritten};
use crate::format::protocol::METRICS;
use crate::format::wire::{Full, RecordWriter, CHUNK_HEADER_LEN, MAX_CHUNK_LEN};
use crate::format::{Frame, LockInterval, LockStats, RecordTag};
use crate::unwind::modules::LoadedModule;

/// Builds one chunk with `encode` and appends it to the part file.
pub fn write(tid: u32, encode: impl Fn(&mut RecordWriter) -> Result<(), Full>) {
    write_as(tid, Chunk::Records, encode);
}

/// [`write`] for the image's last chunk, which the part's size limit never drops.
pub fn write_end(tid: u32, encode: impl Fn(&mut RecordWriter) -> Result<(), Full>) {
    write_as(tid, Chunk::End, encode);
}

fn write_as(tid: u32, what: Chunk, encode: impl Fn(&mut RecordWriter) -> Result<(), Full>) {
    let mut size = 4096;
    loop {
        let mut buf = vec![0u8; size];
        let mut w = RecordWriter::new(&mut buf, CHUNK_HEADER_LEN);
        match encode(&mut w) {
            Ok(()) => {
                let len = w.committed();
                if output::write_chunk(&mut buf[..len], tid, what) == Err(Unwritten::OverLimit) {
                    counters::add(Counter::RecordsDroppedSizeLimit, len as u64);
                }
                return;
            }
            Err(Full) if size < MAX_CHUNK_LEN => size *= 4,
            Err(Full) => return,
        }
    }
}

/// The process header: who we are and how we sample.
pub fn process(
    w: &mut RecordWriter,
    cfg: &Config,
    generation: u32,
    source: Source,
) -> Result<(), Full> {
    let (pid, ppid) = (crate::sys::getpid(), crate::sys::getppid());
    let argv: Vec<Vec<u8>> = std::fs::read("/proc/self/cmdline")
        .unwrap_or_default()
        .split(|&b| b == 0)
        .map(<[u8]>::to_vec)
        .collect();
    let argv = argv.split_last().map_or(
        &argv[..],
        |(last, rest)| {
            if last.is_empty() {
                rest
            } else {
                &argv[..]
            }
        },
    );
    let exe = std::fs::read_link("/proc/self/exe").unwrap_or_default();
    w.tag(RecordTag::Process)?;
    w.varint(pid as u64)?;
    w.varint(ppid as u64)?;
    w.varint(u64::from(generation))?;
    w.varint(super::clock::realtime_ns())?;
    w.varint(argv.len() as u64)?;
    for arg in argv {
        w.bytes(arg)?;
    }
    w.bytes(exe.to_string_lossy().as_bytes())?;
    w.bytes(source.name().as_bytes())?;
    w.varint(cfg.frequency)?;
    w.varint(cfg.period_ns())?;
    w.varint(METRICS.len() as u64)?;
    for metric in METRICS {
        w.bytes(metric.name.as_bytes())?;
        w.bytes(metric.unit.as_bytes())?;
        w.bytes(metric.description.as_bytes())?;
    }
    w.commit();
    Ok(())
}

pub fn module_load(w: &mut RecordWriter, id: u32, m: &LoadedModule) -> Result<(), Full> {
    w.tag(RecordTag::ModuleLoad)?;
    w.varint(u64::from(id))?;
    w.varint(m.bias)?;
    w.varint(m.avma.start)?;
    w.varint(m.avma.end)?;
    w.bytes(m.path.as_bytes())?;
    w.bytes(&m.build_id)?;
    w.commit();
    Ok(())
}

pub fn module_unload(w: &mut RecordWriter, id: u32) -> Result<(), Full> {
    w.tag(RecordTag::ModuleUnload)?;
    w.varint(u64::from(id))?;
    w.commit();
    Ok(())
}

pub fn thread_start(
    w: &mut RecordWriter,
    tid: u32,
    routine: Frame,
    name: &[u8],
    is_main: bool,
) -> Result<(), Full> {
    w.tag(RecordTag::ThreadStart)?;
    w.varint(u64::from(tid))?;
    w.frame(routine)?;
    w.bytes(name)?;
    w.u8(u8::from(is_main))?;
    w.varint(super::clock::monotonic_ns())?;
    w.commit();
    Ok(())
}

/// A thread's end: its CPU time, and the part of it after its last work sample (`tail_ns`).
pub fn thread_end(
    w: &mut RecordWriter,
    tid: u32,
    name: &[u8],
    cpu_ns: u64,
    tail_ns: u64,
) -> Result<(), Full> {
    w.tag(RecordTag::ThreadEnd)?;
    w.varint(u64::from(tid))?;
    w.bytes(name)?;
    w.varint(cpu_ns)?;
    w.varint(super::clock::monotonic_ns())?;
    w.varint(tail_ns)?;
    w.commit();
    Ok(())
}

/// A lock's counters (`locks::lock_table`). Allocation-free.
pub fn lock_stats(w: &mut RecordWriter, stats: &LockStats) -> Result<(), Full> {
    w.tag(RecordTag::LockStats)?;
    w.varint(stats.address)?;
    w.u8(stats.kind)?;
    w.u8(stats.flags)?;
    w.varint(stats.init_site)?;
    for v in stats.counts() {
        w.varint(v)?;
    }
    w.commit();
    Ok(())
}

/// A lock's counts of one interval (`locks::lock_table`). Allocation-free.
pub fn lock_interval(w: &mut RecordWriter, interval: &LockInterval) -> Result<(), Full> {
    w.tag(RecordTag::LockInterval)?;
    w.varint(interval.address)?;
    w.varint(interval.start_ns)?;
    w.varint(interval.length_ns)?;
    for v in interval.counts() {
        w.varint(v)?;
    }
    w.commit();
    Ok(())
}

/// Counters, then the end marker. `reason`: 0 exit, 1 exec. The caller brings the runtime
/// heap's peak gauge up to date first.
pub fn process_end(w: &mut RecordWriter, reason: u8) -> Result<(), Full> {
    counters::encode(w)?;
    w.tag(RecordTag::ProcessEnd)?;
    w.u8(reason)?;
    w.varint(super::clock::monotonic_ns())?;
    w.commit();
    Ok(())
}

/// The name of thread `tid` of this process, from procfs ("" if gone).
pub fn thread_name(tid: u32) -> Vec<u8> {
    let mut name = std::fs::read(format!("/proc/self/task/{tid}/comm")).unwrap_or_default();
    while name.last() == Some(&b'\n') {
        name.pop();
    }
    name
}
