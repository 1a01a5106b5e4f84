//! The findings' load-imbalance rules: stages (the threads of one start routine) of which
//! one waits while another computes, with SyncPerf's split of the threads by work, and
//! threads of one stage whose work differs much.
//!
//! Invariants: the main thread and threads of unknown start routine take no part; a
//! thread's waiting leaves out its joins (a parent waiting for its children is not
//! imbalance). Not async-signal-safe (allocates); single-threaded.

use super::roles::{group_roles, role_path, Label};
use super::{
    ratio, Finding, Kind, Value, MIN_IMBALANCE_NS, MIN_IMBALANCE_OF_MEAN, MIN_STAGE_NS,
    STAGE_COMPUTING, STAGE_WAITING, THREAD_IMBALANCE,
};
use crate::attribution::calibration::Calibration;
use crate::attribution::clock::end_of_image;
use crate::attribution::symbolize::{CodeAddress, Symbolizer};
use crate::attribution::tailcall::{CallSites, Callee};
use crate::format::read::ProcessProfile;
use crate::format::{protocol, Frame, WaitKind};
use std::collections::{BTreeMap, HashMap};

/// One thread's work and waiting (calibrated ns; waiting without its joins), and its
/// lifetime (ns; none without thread times).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ThreadLoad {
    pub pid: u32,
    pub tid: u32,
    /// Its stage: its start routine's function, or, where threads of one routine do
    /// different work, the function where its role parts from theirs ([`roles`]).
    pub routine: String,
    pub work_ns: u64,
    pub wait_ns: u64,
    /// The waiting it made others do by its wakes ([`wakes_a_stage`]: its blame as a
    /// signaller, poster or barrier's last arrival).
    pub blame_ns: u64,
    /// The function its stage calls for its work where another thread of the stage calls
    /// another ([`role_names`]): what tells its share of the stage's work from theirs.
    pub role_callee: Option<String>,
    /// When it started (monotonic ns) and how long it lived (none without thread times).
    pub start_ns: Option<u64>,
    pub life_ns: Option<u64>,
}

/// Each non-main thread with a known start routine: its work and its waiting, but for its
/// joins (a parent waiting for its children is not imbalance), in its stage.
pub(super) fn thread_loads(
    procs: &[&ProcessProfile],
    symbolizer: &mut Symbolizer,
) -> Vec<ThreadLoad> {
    let mut out = Vec::new();
    for p in procs {
        let metric = |name: &str| p.header.metrics.iter().position(|m| m.name == name);
        let (work, idleness, blame) = (
            metric(protocol::WORK.name),
            metric(protocol::IDLENESS.name),
            metric(protocol::BLAME.name),
        );
        let calibration = Calibration::of(p);
        let end_of_process = end_of_image(p);
        let mut sums: HashMap<u32, (u64, u64, u64)> = HashMap::new();
        // Each thread's work samples whose path reaches its outermost frame: its role.
        let mut worked: HashMap<u32, Vec<(&[Frame], u64)>> = HashMap::new();
        for s in &p.samples {
            let m = Some(usize::from(s.metric));
            let value = calibration.apply(s.value, s.flags);
            let sum = sums.entry(s.tid).or_default();
            if m == work {
                sum.0 = sum.0.saturating_add(value);
                if !s.truncated() {
                    worked
                        .entry(s.tid)
                        .or_default()
                        .push((p.stacks.get(s.stack), value));
                }
            } else if m == idleness && WaitKind::from_flags(s.flags) != Some(WaitKind::Join) {
                sum.1 = sum.1.saturating_add(value);
            } else if m == blame && wakes_a_stage(WaitKind::from_flags(s.flags)) {
                sum.2 = sum.2.saturating_add(value);
            }
        }
        let mut by_routine: BTreeMap<String, Vec<ThreadLoad>> = BTreeMap::new();
        for t in p.threads.iter().filter(|t| !t.is_main) {
            let Some(frame) = t.start_routine else {
                continue;
            };
            let start = CodeAddress::InstructionPointer(frame.offset);
            let Some(routine) = outermost_function(symbolizer, p, frame.module, start) else {
                continue;
            };
            let (work_ns, wait_ns, blame_ns) = sums.get(&t.tid).copied().unwrap_or_default();
            let life_ns = t
                .start_ns
                .zip(t.end_ns.or(end_of_process))
                .map(|(start, end)| end.saturating_sub(start));
            by_routine
                .entry(routine.clone())
                .or_default()
                .push(ThreadLoad {
                    pid: p.header.pid,
                    tid: t.tid,
                    routine,
                    work_ns,
                    wait_ns,
                    blame_ns,
                    role_callee: None,
                    start_ns: t.start_ns,
                    life_ns,
                });
        }
        for (_, mut threads) in by_routine {
            let paths: Vec<Option<Vec<Frame>>> = threads
                .iter()
                .map(|t| worked.get(&t.tid).and_then(|w| role_path(w)))
                .collect();
            let (of_thread, labels) = group_roles(&paths);
            let names = role_names(symbolizer, p, &labels);
            for (t, g) in threads.iter_mut().zip(of_thread) {
                let Some((name, called)) = g.map(|g| &names[g]) else {
                    continue;
                };
                if let Some(name) = name {
                    t.routine = name.clone();
                }
                t.role_callee = called.clone();
            }
            out.extend(threads);
        }
    }
    out
}

/// Each role's name: the function of the call site where it parts from the others; and
/// where two roles part at call sites of one function (`stage` calling `slow_stage` on one
/// thread and `fast_stage` on another: one stage whose threads got different work), the
/// function each calls there ([`ThreadLoad::role_callee`]).
fn role_names(
    symbolizer: &mut Symbolizer,
    p: &ProcessProfile,
    labels: &[Option<Label>],
) -> Vec<(Option<String>, Option<String>)> {
    let callers: Vec<Option<String>> = labels
        .iter()
        .map(|l| {
            let call = l.as_ref()?.call;
            let at = CodeAddress::ReturnAddress(call.offset);
            outermost_function(symbolizer, p, call.module, at)
        })
        .collect();
    let mut call_sites = CallSites::default();
    labels
        .iter()
        .zip(&callers)
        .map(|(label, caller)| {
            let shared = caller.is_some() && callers.iter().filter(|c| *c == caller).count() > 1;
            let called = match (shared, label) {
                (true, Some(l)) => called(symbolizer, &mut call_sites, p, l),
                _ => None,
            };
            (caller.clone(), called)
        })
        .collect()
}

/// The function the call site of `label` called: named by its call instruction (a tail
/// call may have left no frame of it), else the function of the frame beneath it on the
/// role's path.
fn called(
    symbolizer: &mut Symbolizer,
    call_sites: &mut CallSites,
    p: &ProcessProfile,
    label: &Label,
) -> Option<String> {
    let module = label.call.module;
    let path = p.module(module).map_or("", |m| m.path.as_str());
    match call_sites.callee(path, label.call.offset) {
        Some(Callee::Local(start)) => outermost_function(
            symbolizer,
            p,
            module,
            CodeAddress::InstructionPointer(start),
        ),
        Some(Callee::Import(name)) => Some(name),
        None => {
            let beneath = label.callee?;
            let at = CodeAddress::ReturnAddress(beneath.offset);
            outermost_function(symbolizer, p, beneath.module, at)
        }
    }
}

/// The outermost function of the inline chain at `address` in `module`: the function whose
/// code it is, not what that function inlined (a thread's routine, the call site a role
/// parts at).
fn outermost_function(
    symbolizer: &mut Symbolizer,
    p: &ProcessProfile,
    module: u32,
    address: CodeAddress,
) -> Option<String> {
    let chain = symbolizer.symbolize(p.module(module), address);
    chain.last().map(|f| f.function.clone())
}

/// Whether blame of `kind` is a stage handing work or a turn to another: a condition
/// variable's signal, a semaphore's post, a barrier's last arrival. A lock's holder makes
/// others wait too, but that is the lock findings' (a long critical section is no stage
/// short of threads: the bundled example's auditor read "worker vs auditor"), and a
/// thread's end is its joiner's.
fn wakes_a_stage(kind: Option<WaitKind>) -> bool {
    matches!(
        kind,
        Some(WaitKind::CondVar | WaitKind::Semaphore | WaitKind::Barrier)
    )
}

/// A stage: the threads of one start routine in one process.
pub(super) struct Stage<'a> {
    pub(super) routine: &'a str,
    pub(super) threads: Vec<&'a ThreadLoad>,
    pub(super) work_ns: u64,
    pub(super) wait_ns: u64,
    /// The waiting its threads made others do.
    pub(super) blame_ns: u64,
}

impl Stage<'_> {
    /// Its waiting over its work and waiting.
    fn waiting_share(&self) -> f64 {
        ratio(
            self.wait_ns as f64,
            self.work_ns.saturating_add(self.wait_ns) as f64,
        )
    }

    /// From its first thread's start to its last one's end (none without thread times).
    fn span(&self) -> Option<(u64, u64)> {
        self.threads.iter().try_fold(None, |span, t| {
            let start = t.start_ns?;
            let end = start.saturating_add(t.life_ns?);
            Some(Some(match span {
                None => (start, end),
                Some((s, e)) => (start.min(s), end.max(e)),
            }))
        })?
    }

    /// Whether it ran beside `other` for at least half of the shorter one's span (stages
    /// that ran one after the other, db_bench's fill and read threads, wait for no one
    /// another); without thread times, yes.
    fn ran_beside(&self, other: &Stage) -> bool {
        let (Some(a), Some(b)) = (self.span(), other.span()) else {
            return true;
        };
        let overlap = a.1.min(b.1).saturating_sub(a.0.max(b.0));
        let shorter = (a.1 - a.0).min(b.1 - b.0);
        overlap.saturating_mul(2) >= shorter
    }
}

/// Load imbalance between the stages of each process, and between the threads of each
/// stage.
pub(super) fn imbalance_findings(loads: &[ThreadLoad]) -> Vec<Finding> {
    let mut by: BTreeMap<(u32, &str), Vec<&ThreadLoad>> = BTreeMap::new();
    for t in loads {
        by.entry((t.pid, &t.routine)).or_default().push(t);
    }
    let mut processes: BTreeMap<u32, Vec<Stage>> = BTreeMap::new();
    for ((pid, routine), threads) in by {
        let work_ns = threads
            .iter()
            .fold(0u64, |t, l| t.saturating_add(l.work_ns));
        let wait_ns = threads
            .iter()
            .fold(0u64, |t, l| t.saturating_add(l.wait_ns));
        let blame_ns = threads
            .iter()
            .fold(0u64, |t, l| t.saturating_add(l.blame_ns));
        processes.entry(pid).or_default().push(Stage {
            routine,
            threads,
            work_ns,
            wait_ns,
            blame_ns,
        });
    }
    let mut out = Vec::new();
    for (pid, stages) in &processes {
        out.extend(stage_imbalance(*pid, stages));
        out.extend(stages.iter().filter_map(|s| thread_imbalance(*pid, s)));
    }
    out
}

/// One stage waits at least [`STAGE_WAITING`] of its time while another, running beside
/// it, waits at most [`STAGE_COMPUTING`] and its wakes ([`wakes_a_stage`]) ended at least
/// [`MIN_IMBALANCE_NS`] of waiting (the one waiting most against the computing one beside
/// it whose wakes ended most: what it waits for), and threads in proportion to the stages'
/// work would be another split than theirs (else there is nothing to move: a stage of one
/// thread waiting for events is no imbalance). Only stages that did at least [`MIN_IMBALANCE_NS`] of work take part: a
/// pool that never computed (RocksDB's compaction threads in a short run) waits for
/// something other than the stages' work, and is no stage to give threads to or take
/// them from.
fn stage_imbalance(pid: u32, stages: &[Stage]) -> Option<Finding> {
    let working: Vec<&Stage> = stages
        .iter()
        .filter(|s| s.work_ns >= MIN_IMBALANCE_NS)
        .collect();
    let by_share = |a: &&&Stage, b: &&&Stage| a.waiting_share().total_cmp(&b.waiting_share());
    let waiting = *working.iter().max_by(by_share)?;
    // What it waits for: of the stages computing beside it, the one whose wakes ended most
    // waiting (signals, posts). A stage that computes and wakes nobody (an auditor on its
    // own data, however long it holds a lock the others want) is not what they wait for.
    let computing = *working
        .iter()
        .filter(|s| !std::ptr::eq(**s, waiting) && s.ran_beside(waiting))
        .filter(|s| s.waiting_share() <= STAGE_COMPUTING)
        .max_by_key(|s| s.blame_ns)?;
    let imbalanced = waiting.waiting_share() >= STAGE_WAITING
        && waiting.wait_ns >= MIN_STAGE_NS
        && computing.work_ns >= MIN_STAGE_NS
        && computing.blame_ns >= MIN_IMBALANCE_NS;
    if !imbalanced {
        return None;
    }
    let threads = |s: &Stage| s.threads.len() as u64;
    let current: Vec<(String, u64)> = working
        .iter()
        .map(|s| (s.routine.to_owned(), threads(s)))
        .collect();
    let suggested = split_threads(&working);
    if suggested == current {
        return None;
    }
    Some(Finding {
        kind: Kind::LoadImbalance,
        subject: format!("{} vs {}", waiting.routine, computing.routine),
        pid,
        lock_kind: None,
        locks: Vec::new(),
        evidence: vec![
            ("waiting_stage", Value::Name(waiting.routine.to_owned())),
            ("waiting_stage_threads", Value::Count(threads(waiting))),
            ("waiting_stage_share", Value::Share(waiting.waiting_share())),
            ("waiting_stage_work_ns", Value::Ns(waiting.work_ns)),
            ("waiting_stage_wait_ns", Value::Ns(waiting.wait_ns)),
            ("computing_stage", Value::Name(computing.routine.to_owned())),
            ("computing_stage_threads", Value::Count(threads(computing))),
            (
                "computing_stage_share",
                Value::Share(computing.waiting_share()),
            ),
            ("computing_stage_work_ns", Value::Ns(computing.work_ns)),
            ("computing_stage_blame_ns", Value::Ns(computing.blame_ns)),
            ("computing_stage_wait_ns", Value::Ns(computing.wait_ns)),
            ("threads", Value::Threads(current)),
            ("suggested_threads", Value::Threads(suggested)),
        ],
        text: "stage {waiting_stage} ({waiting_stage_threads} threads) waits \
               {waiting_stage_share} of its time ({waiting_stage_wait_ns}; work \
               {waiting_stage_work_ns}) while stage {computing_stage} \
               ({computing_stage_threads} threads) computes (work {computing_stage_work_ns}, \
               waiting {computing_stage_share}) and its wakes (signals, posts) ended \
               {computing_stage_blame_ns} of waiting"
            .to_owned(),
        fix: match threads(computing) {
            // One thread: more threads help only if its work can be split, which the
            // profile cannot tell (a serial stage is the program's bottleneck, not short of
            // threads).
            1 => "{computing_stage} is one thread computing while {waiting_stage} waits for \
                  it: the serial bottleneck; make it faster or move work from it to \
                  {waiting_stage}; if its work can be split, give it threads in proportion \
                  to its work: {suggested_threads} (now {threads}; same total)"
                .to_owned(),
            _ => "give each stage threads in proportion to its work: {suggested_threads} (now \
                  {threads}; same total), or move work from {computing_stage} to \
                  {waiting_stage}"
                .to_owned(),
        },
        // The waiting the computing stage made, at most the waiting stage's.
        cost_ns: waiting.wait_ns.min(computing.blame_ns),
    })
}

/// SyncPerf's split: the stages' threads (the same total) in proportion to each stage's
/// work, at least one each (largest remainders).
pub(super) fn split_threads(stages: &[&Stage]) -> Vec<(String, u64)> {
    let total: u64 = stages.iter().map(|s| s.threads.len() as u64).sum();
    let work: f64 = stages.iter().map(|s| s.work_ns as f64).sum();
    let ideal: Vec<f64> = stages
        .iter()
        .map(|s| total as f64 * ratio(s.work_ns as f64, work))
        .collect();
    let mut seats: Vec<u64> = ideal.iter().map(|&i| (i.floor() as u64).max(1)).collect();
    // Every stage has a thread, so `total` covers one seat each; more than `total` only
    // when a stage was rounded up to one: taken back from the largest.
    while seats.iter().sum::<u64>() > total {
        let Some(largest) = (0..seats.len()).max_by_key(|&i| seats[i]) else {
            break;
        };
        seats[largest] -= 1;
    }
    let mut order: Vec<usize> = (0..seats.len()).collect();
    order.sort_by(|&a, &b| {
        let frac = |i: usize| ideal[i] - ideal[i].floor();
        frac(b).total_cmp(&frac(a)).then(a.cmp(&b))
    });
    for &i in order.iter().cycle().take(stages.len() * total as usize) {
        if seats.iter().sum::<u64>() >= total {
            break;
        }
        seats[i] += 1;
    }
    stages
        .iter()
        .zip(seats)
        .map(|(s, n)| (s.routine.to_owned(), n))
        .collect()
}

/// The threads of one stage: the most loaded one's work exceeds the least loaded one's by
/// more than [`THREAD_IMBALANCE`], by at least [`MIN_IMBALANCE_NS`] and
/// [`MIN_IMBALANCE_OF_MEAN`] of their mean, and the least loaded one spent at least half
/// that difference not computing where the other computed: waiting more, or ending sooner
/// (threads that only got unequal shares of the CPUs, runnable all along, are not
/// imbalanced: the scheduler, not the program, divided their time); and the most loaded one
/// computed at least as long as it waited (threads that mostly wait have time to spare).
fn thread_imbalance(pid: u32, s: &Stage) -> Option<Finding> {
    if s.threads.len() < 2 {
        return None;
    }
    let most = s.threads.iter().max_by_key(|t| (t.work_ns, t.tid))?;
    let least = s.threads.iter().min_by_key(|t| (t.work_ns, t.tid))?;
    let mean = s.work_ns / s.threads.len() as u64;
    let difference = most.work_ns - least.work_ns;
    let idle = least.wait_ns.saturating_sub(most.wait_ns).saturating_add(
        most.life_ns
            .zip(least.life_ns)
            .map_or(0, |(m, l)| m.saturating_sub(l)),
    );
    let imbalanced = most.work_ns as f64 > (1.0 + THREAD_IMBALANCE) * least.work_ns as f64
        && difference >= MIN_IMBALANCE_NS
        && difference as f64 >= MIN_IMBALANCE_OF_MEAN * mean as f64
        && idle >= difference / 2
        && most.wait_ns <= most.work_ns;
    if !imbalanced {
        return None;
    }
    // Where the threads' work differs, when the stage calls one function for the most
    // loaded thread's work and another for the least loaded one's.
    let code = match (&most.role_callee, &least.role_callee) {
        (Some(heavy), Some(light)) if heavy != light => Some((heavy, light)),
        _ => None,
    };
    let mut evidence = vec![
        ("stage", Value::Name(s.routine.to_owned())),
        ("threads", Value::Count(s.threads.len() as u64)),
        ("max_work_ns", Value::Ns(most.work_ns)),
        ("max_work_tid", Value::Id(u64::from(most.tid))),
        ("min_work_ns", Value::Ns(least.work_ns)),
        ("min_work_tid", Value::Id(u64::from(least.tid))),
        ("mean_work_ns", Value::Ns(mean)),
        ("min_work_idle_ns", Value::Ns(idle)),
        (
            "factor",
            Value::Factor(ratio(most.work_ns as f64, least.work_ns as f64)),
        ),
    ];
    let mut text = "its {threads} threads computed from {min_work_ns} (thread {min_work_tid}) to \
                    {max_work_ns} (thread {max_work_tid}); mean {mean_work_ns}; the least \
                    loaded one spent {min_work_idle_ns} more waiting or ended that much sooner"
        .to_owned();
    let mut fix = "divide the work of {stage} evenly: smaller tasks from a shared queue (dynamic \
                   scheduling) rather than a fixed share per thread"
        .to_owned();
    if let Some((heavy, light)) = code {
        evidence.push(("max_work_in", Value::Name(heavy.clone())));
        evidence.push(("min_work_in", Value::Name(light.clone())));
        text.push_str(
            "; {stage} calls {max_work_in} for the most loaded one's work and {min_work_in} \
             for the least loaded one's",
        );
        fix = "divide the work of {stage} evenly: {max_work_in}'s share against \
               {min_work_in}'s is fixed per thread; split it into smaller tasks from a shared \
               queue (dynamic scheduling), or make {max_work_in} faster"
            .to_owned();
    }
    Some(Finding {
        kind: Kind::LoadImbalance,
        subject: match code {
            Some((heavy, light)) => format!("{} ({heavy} vs {light})", s.routine),
            None => s.routine.to_owned(),
        },
        pid,
        lock_kind: None,
        locks: Vec::new(),
        evidence,
        text,
        fix,
        // What the least loaded thread could have computed: its extra idle time, at most the
        // work between it and the most loaded one.
        cost_ns: idle.min(difference),
    })
}
