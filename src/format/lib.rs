//! The profile format: the small, versioned contract between the measurement runtime and the
//! analysis. Documented for humans in `docs/profile-format.md`.
//!
//! A profile is a directory holding one *part* file (`*.bpp`) per process image (a fork or an
//! exec starts a new part). A part is a 16-byte file header followed by self-contained chunks,
//! each with its own length and CRC-32, so a process that dies leaves every chunk it had
//! written readable. Chunks hold records; see [`RecordTag`].
//!
//! [`wire`] encodes without allocating (async-signal-safe); [`read`] decodes (allocates; not
//! for the runtime); [`protocol`] holds the rest of what the runtime and the CLI share
//! (environment variables, file names, metrics).

pub mod protocol;
pub mod read;
pub mod wire;

/// First 8 bytes of every part file.
pub const FILE_MAGIC: [u8; 8] = *b"BLMPROF\0";
/// First 4 bytes of every chunk.
pub const CHUNK_MAGIC: [u8; 4] = *b"BCK1";
/// The format version this build writes and the newest it reads. Version 2 added
/// [`RecordTag::ObjectSample`], [`RecordTag::LockStats`] and the monotonic times at the end
/// of `ThreadStart`, `ThreadEnd` and `ProcessEnd`; version 3 added [`RecordTag::Time`];
/// version 4 added [`RecordTag::LockInterval`] and [`LockStats::try_fail_site`]; version 5
/// added the thread's unsampled CPU time at the end of `ThreadEnd`; versions 1 to 4 still
/// read (1 with no lock table, 1 and 2 with no sample times, 1 to 3 with no intervals, 1 to
/// 4 with no unsampled tails).
pub const FORMAT_VERSION: u32 = 5;
/// The first version whose samples carry times ([`RecordTag::Time`]).
pub const SAMPLE_TIME_VERSION: u32 = 3;
/// The first version with lock statistics.
pub const LOCK_TABLE_VERSION: u32 = 2;
/// The first version with per-interval lock counts ([`RecordTag::LockInterval`]).
pub const LOCK_INTERVAL_VERSION: u32 = 4;
/// The first version whose `ThreadEnd` records carry the thread's CPU time after its last
/// work sample (`read::ThreadInfo::tail_ns`).
pub const TAIL_VERSION: u32 = 5;
/// The length of the runtime's lock intervals ([`LockInterval`]): the finest interval a
/// timeline can show.
pub const LOCK_INTERVAL_NS: u64 = 100_000_000;
/// Stack depth at which the runtime truncates a call path; the path then ends with a
/// [`Frame::TRUNCATED`] marker frame on the root side.
pub const MAX_STACK_DEPTH: usize = 512;

/// Record types inside a chunk payload. Each record is the tag byte followed by its fields,
/// integers as LEB128 varints and strings/byte strings as a varint length plus bytes.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordTag {
    /// pid, ppid, exec generation, start time (ns since the epoch), argv count + strings,
    /// executable path, sample source name, requested Hz, effective period (ns),
    /// metric count + (name, unit, description).
    Process = 1,
    /// id, base (load bias), start, end, path, build-id bytes.
    ModuleLoad = 2,
    /// id.
    ModuleUnload = 3,
    /// tid, start routine frame (module, offset; module 0 and offset 0 = none), name, flags
    /// (bit 0: main thread); version 2: start time (monotonic ns).
    ThreadStart = 4,
    /// tid, name, thread CPU time (ns); version 2: end time (monotonic ns).
    ThreadEnd = 5,
    /// metric index, value, flags ([`SAMPLE_TRUNCATED`], [`SAMPLE_FIRST_IS_RETURN`]),
    /// depth, shared (root-side frames equal to the previous sample of the same chunk), then
    /// `depth - shared` frames, leaf first. The thread is the chunk's writer.
    Sample = 6,
    /// name, value: a cumulative counter of the process (lost samples and why).
    Counter = 7,
    /// Clean end of the process image: exit reason (0 exit, 1 exec); version 2: end time
    /// (monotonic ns).
    ProcessEnd = 8,
    /// A [`RecordTag::Sample`] about one lock or other waited-on object: metric index, value,
    /// flags, the object's address, then depth, shared and frames as in a `Sample`.
    ObjectSample = 9,
    /// The counters of one lock or waited-on object ([`LockStats`]): address, kind code,
    /// flags ([`LOCK_DESTROYED`]), init site, then the counters in
    /// [`LockStats::counts`]'s order (the first [`LockStats::COUNTS_V2`] before version 3).
    LockStats = 10,
    /// The time of the samples that follow in the chunk, until the next `Time` (version 3):
    /// the change from the previous `Time` of the chunk (0 at its start), zigzag-encoded
    /// (monotonic ns: when the sample's event ended, a wait's end or a release, or when a
    /// timer sample was taken), then the event's span (ns: the wait's or hold's length; 0
    /// none or unknown).
    Time = 11,
    /// What one lock's row counted in one interval ([`LockInterval`], version 4): address,
    /// interval start (monotonic ns), interval length (ns), then the counts in
    /// [`LockInterval::counts`]'s order.
    LockInterval = 12,
}

impl RecordTag {
    pub fn from_u8(v: u8) -> Option<RecordTag> {
        Some(match v {
            1 => RecordTag::Process,
            2 => RecordTag::ModuleLoad,
            3 => RecordTag::ModuleUnload,
            4 => RecordTag::ThreadStart,
            5 => RecordTag::ThreadEnd,
            6 => RecordTag::Sample,
            7 => RecordTag::Counter,
            8 => RecordTag::ProcessEnd,
            9 => RecordTag::ObjectSample,
            10 => RecordTag::LockStats,
            11 => RecordTag::Time,
            12 => RecordTag::LockInterval,
            _ => return None,
        })
    }
}

/// Sample flag: the call path was cut at [`MAX_STACK_DEPTH`].
pub const SAMPLE_TRUNCATED: u8 = 1;
/// Sample flag: frame 0 is a return address (synchronous unwind), not an interrupted pc.
pub const SAMPLE_FIRST_IS_RETURN: u8 = 2;
/// Sample flags, bits 2..=5: the [`WaitKind`] of an idleness or blame sample (0: none).
pub const SAMPLE_KIND_SHIFT: u8 = 2;
/// Mask of the wait kind once shifted down by [`SAMPLE_KIND_SHIFT`].
pub const SAMPLE_KIND_MASK: u8 = 0xF;
/// Sample flag: an idleness sample of a wait that ended without the event it waited for
/// (timed out, interrupted, or returned with no wake the runtime saw): nobody is blamed.
pub const SAMPLE_UNBLAMED: u8 = 0x40;
/// Sample flag: the value of an idleness or blame sample is a sampled estimate (a contended
/// acquisition measured for several, see the `contended_*_wait_ns` counters): the analysis
/// calibrates it by its process's ratio of measured to estimated contended waiting.
pub const SAMPLE_SCALED: u8 = 0x80;

/// What a thread waited on: the primitive behind an idleness or blame sample. Carried in the
/// sample flags; the analysis derives one metric per kind (`idleness.condvar`, ...).
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WaitKind {
    Spin = 1,
    Mutex = 2,
    RwLock = 3,
    CondVar = 4,
    Semaphore = 5,
    Barrier = 6,
    Join = 7,
    Futex = 8,
}

impl WaitKind {
    pub const ALL: [WaitKind; 8] = [
        WaitKind::Spin,
        WaitKind::Mutex,
        WaitKind::RwLock,
        WaitKind::CondVar,
        WaitKind::Semaphore,
        WaitKind::Barrier,
        WaitKind::Join,
        WaitKind::Futex,
    ];

    /// The kind of a code (`kind as u8`), if any.
    pub fn from_code(code: u8) -> Option<WaitKind> {
        WaitKind::ALL.into_iter().find(|k| *k as u8 == code)
    }

    /// The kind encoded in a sample's flags, if any.
    pub fn from_flags(flags: u8) -> Option<WaitKind> {
        let code = (flags >> SAMPLE_KIND_SHIFT) & SAMPLE_KIND_MASK;
        WaitKind::ALL.into_iter().find(|k| *k as u8 == code)
    }

    /// The flag bits that encode this kind.
    pub const fn flags(self) -> u8 {
        (self as u8) << SAMPLE_KIND_SHIFT
    }

    /// Whether the lock keeps its holder's thread id (glibc's mutexes, and rwlocks held by a
    /// writer), which `held.contended` needs: spin locks, futex words and events do not.
    pub const fn names_its_holder(self) -> bool {
        matches!(self, WaitKind::Mutex | WaitKind::RwLock)
    }

    /// Short name, used as the suffix of the derived metrics (`idleness.<name>`).
    pub const fn name(self) -> &'static str {
        match self {
            WaitKind::Spin => "spin",
            WaitKind::Mutex => "mutex",
            WaitKind::RwLock => "rwlock",
            WaitKind::CondVar => "condvar",
            WaitKind::Semaphore => "semaphore",
            WaitKind::Barrier => "barrier",
            WaitKind::Join => "join",
            WaitKind::Futex => "futex",
        }
    }
}

/// One frame of a call path as recorded: a module-relative address. For frames other than
/// the first, `offset` is a return address (look up `offset - 1` for the call site).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Frame {
    /// Module id from a [`RecordTag::ModuleLoad`] record; 0 = no known module, and then
    /// `offset` is the absolute address.
    pub module: u32,
    /// Address relative to the module's load bias (= the ELF virtual address).
    pub offset: u64,
}

impl Frame {
    /// Marker placed at the root end of a truncated call path.
    pub const TRUNCATED: Frame = Frame {
        module: u32::MAX,
        offset: 0,
    };
}

/// The usual mean number of a thread's lock acquisitions between two it samples for the
/// lock table's acquisition counts (each sampled one counts for itself and the ones until
/// the next): a thread that would sample more than about two every 100 µs samples fewer,
/// and one taking fewer than about one lock every 100 µs counts every acquisition
/// (`locks::acquisition_sampling`).
pub const ACQUISITION_SAMPLING_PERIOD: u32 = 256;

/// LockStats flag: the lock was destroyed (or re-initialised) after these counts; a later
/// record at the same address is another lock.
pub const LOCK_DESTROYED: u8 = 1;

/// What the runtime counted for one lock or waited-on object (a [`RecordTag::LockStats`]
/// record). Counts marked *sampled* are estimates: a sampled event counts for the events
/// it stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LockStats {
    pub address: u64,
    /// A [`WaitKind`] code.
    pub kind: u8,
    pub flags: u8,
    /// Where it was initialised: the (absolute) return address of its `pthread_*_init`
    /// call; 0 when unknown (a static initialiser, or never initialised by a call).
    pub init_site: u64,
    /// Acquisitions, contended or not (sampled: one in up to about
    /// [`ACQUISITION_SAMPLING_PERIOD`] of a thread's, each counting for the period it
    /// starts, less what did not come of a thread's last).
    pub acquisitions: u64,
    /// How many sampled acquisitions `acquisitions` was estimated from.
    pub acquisition_samples: u64,
    /// Of `acquisitions`, those made by a successful trylock (sampled likewise).
    pub try_acquired: u64,
    /// Trylocks that found the lock held (exact).
    pub try_failed: u64,
    /// Waits: contended acquisitions (every one, measured for the blame or not), or waits
    /// for an event (exact).
    pub contended: u64,
    /// How many of those were measured for the blame (registered with the lock).
    pub contended_measured: u64,
    /// Nanoseconds waited, summed (exact: every wait is timed).
    pub wait_ns: u64,
    /// The longest single wait (ns).
    pub max_wait_ns: u64,
    /// The most measured waiters registered at once.
    pub peak_waiters: u64,
    /// Holds that others waited for (version 3): releases that took blame, each standing
    /// for as many holds as the runtime's hold sampling made it count for.
    pub contended_holds: u64,
    /// Of those, the ones timed (version 3; scaled likewise: a mutex's, from the hold's
    /// start when the runtime knew it, else from its first waiter's arrival), and their
    /// hold time summed (ns).
    pub timed_holds: u64,
    pub contended_hold_ns: u64,
    /// Where its failed trylocks were called from (version 4): the (absolute) return
    /// address of the call when every failed trylock came from that one site,
    /// [`TRY_SITES_MANY`] when they came from several, 0 when unknown or none failed.
    pub try_fail_site: u64,
}

/// [`LockStats::try_fail_site`] of a lock whose trylocks failed at more than one site.
pub const TRY_SITES_MANY: u64 = 1;

impl LockStats {
    /// Counts a LockStats record holds: 9 in format version 2, 12 in version 3, then these.
    pub const COUNTS_V2: usize = 9;
    pub const COUNTS_V3: usize = 12;
    pub const COUNTS: usize = 13;

    /// Field values after address, kind and flags, in record order.
    pub fn counts(&self) -> [u64; Self::COUNTS] {
        [
            self.acquisitions,
            self.acquisition_samples,
            self.try_acquired,
            self.try_failed,
            self.contended,
            self.contended_measured,
            self.wait_ns,
            self.max_wait_ns,
            self.peak_waiters,
            self.contended_holds,
            self.timed_holds,
            self.contended_hold_ns,
            self.try_fail_site,
        ]
    }

    /// Adds `o`'s counts to these: sums (saturating), and the larger of the maxima
    /// (`max_wait_ns`, `peak_waiters`); the address, kind, flags and sites stay these.
    pub fn add_counts(&mut self, o: &LockStats) {
        let sums = [
            (&mut self.acquisitions, o.acquisitions),
            (&mut self.acquisition_samples, o.acquisition_samples),
            (&mut self.try_acquired, o.try_acquired),
            (&mut self.try_failed, o.try_failed),
            (&mut self.contended, o.contended),
            (&mut self.contended_measured, o.contended_measured),
            (&mut self.wait_ns, o.wait_ns),
            (&mut self.contended_holds, o.contended_holds),
            (&mut self.timed_holds, o.timed_holds),
            (&mut self.contended_hold_ns, o.contended_hold_ns),
        ];
        for (sum, v) in sums {
            *sum = sum.saturating_add(v);
        }
        self.max_wait_ns = self.max_wait_ns.max(o.max_wait_ns);
        self.peak_waiters = self.peak_waiters.max(o.peak_waiters);
    }

    /// The inverse of [`LockStats::counts`].
    pub fn from_counts(
        (address, kind, flags, init_site): (u64, u8, u8, u64),
        c: [u64; Self::COUNTS],
    ) -> LockStats {
        LockStats {
            address,
            kind,
            flags,
            init_site,
            acquisitions: c[0],
            acquisition_samples: c[1],
            try_acquired: c[2],
            try_failed: c[3],
            contended: c[4],
            contended_measured: c[5],
            wait_ns: c[6],
            max_wait_ns: c[7],
            peak_waiters: c[8],
            contended_holds: c[9],
            timed_holds: c[10],
            contended_hold_ns: c[11],
            try_fail_site: c[12],
        }
    }
}

/// What one lock's row counted in one interval of the run (a [`RecordTag::LockInterval`]
/// record): the counts that samples cannot tell over time (a wait's and a release's
/// samples carry their own times). Intervals are [`LOCK_INTERVAL_NS`] long, aligned on the
/// monotonic clock; an interval in which a lock counted nothing has no record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LockInterval {
    pub address: u64,
    /// The interval's start and length (monotonic ns).
    pub start_ns: u64,
    pub length_ns: u64,
    /// Acquisitions (sampled, as [`LockStats::acquisitions`]) and how many sampled ones
    /// they were estimated from.
    pub acquisitions: u64,
    pub acquisition_samples: u64,
    /// Trylocks that found the lock held (exact).
    pub try_failed: u64,
}

impl LockInterval {
    pub const COUNTS: usize = 3;

    /// The counts after address, start and length, in record order.
    pub fn counts(&self) -> [u64; Self::COUNTS] {
        [self.acquisitions, self.acquisition_samples, self.try_failed]
    }
}

/// Definition of a metric carried by samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricDef {
    pub name: String,
    pub unit: String,
    pub description: String,
}

/// Names of the process counters the runtime writes (see [`RecordTag::Counter`]).
pub mod counters {
    /// Samples dropped because the thread was inside the runtime (guard held).
    pub const DROPPED_BUSY: &str = "samples_dropped_busy";
    /// Samples dropped while the module list was being updated (dlopen/dlclose).
    pub const DROPPED_MODULES_UPDATING: &str = "samples_dropped_modules_updating";
    /// Samples dropped because the per-thread buffer could not be flushed.
    pub const DROPPED_FLUSH_FAILED: &str = "samples_dropped_flush_failed";
    /// Samples dropped because the thread had no runtime state (not yet set up / torn down).
    pub const DROPPED_NO_THREAD_STATE: &str = "samples_dropped_no_thread_state";
    /// Samples dropped because every shared unwind cache was in use by other threads' unwinds.
    pub const DROPPED_NO_UNWIND_CACHE: &str = "samples_dropped_no_unwind_cache";
    /// Samples whose call path was cut at the maximum depth (kept, marked truncated).
    pub const TRUNCATED_STACKS: &str = "stacks_truncated";
    /// Samples whose unwind stopped early with an error (kept, shorter path).
    pub const UNWIND_ERRORS: &str = "unwind_errors";
    /// Thread timers that could not be created, or re-armed after a sample (their threads are
    /// not sampled from then on).
    pub const TIMER_FAILURES: &str = "timer_failures";
    /// Threads that got the tick-limited CPU-time timer because perf was refused them
    /// (usually the descriptor limit), while the process uses perf.
    pub const TIMER_FALLBACKS: &str = "timer_fallbacks";
    /// Bytes of sample data that could not be written to the profile.
    pub const WRITE_ERRORS: &str = "write_errors";
    /// Samples not written because their process's part reached its size limit
    /// (`blameprof run --max-size`).
    pub const DROPPED_SIZE_LIMIT: &str = "samples_dropped_size_limit";
    /// Bytes of records (threads, modules, locks) not written because the part reached its
    /// size limit and the records' headroom past it (a sixteenth).
    pub const RECORDS_DROPPED_SIZE_LIMIT: &str = "record_bytes_dropped_size_limit";
    /// Times the program asked to block the sampling signal (`pthread_sigmask`,
    /// `sigprocmask`, often with every signal, for `signalfd` or `sigwait`): it was left
    /// unblocked, or the thread would never be sampled.
    pub const SIGNAL_UNBLOCKED: &str = "sampling_signal_kept_unblocked";
    /// The error number of the last write that failed (28: ENOSPC, the disk is full).
    pub const WRITE_LAST_ERRNO: &str = "write_last_errno";
    /// Times the part's descriptor was found closed or replaced by the program behind the
    /// runtime's back (a raw system call) and the part was reopened by its path.
    pub const PART_REOPENED: &str = "part_reopened";
    /// CPU time (ns) of threads the runtime never saw start (made by raw `clone`, not
    /// `pthread_create`), which have no timer and are not in the profile: the process's CPU
    /// clock less its known threads' (each ended thread's small remainder after its end
    /// record is allowed for).
    pub const UNSEEN_THREADS_CPU: &str = "unseen_threads_cpu_ns";
    /// Exec calls given an environment that does not pass profiling on (no `LD_PRELOAD` of
    /// the runtime, or no `BLAMEPROF_OUTPUT`: the program cleared or replaced its
    /// environment): the images they started are not in the profile.
    pub const EXECS_UNPROFILED: &str = "execs_unprofiled";
    /// Times the program `dup2`ed onto a descriptor of the runtime's, which was moved first.
    pub const DESCRIPTORS_MOVED: &str = "runtime_descriptors_moved";
    /// Descriptors of the runtime's whose number was too high to be protected from the
    /// program's `close` calls.
    pub const DESCRIPTORS_UNTRACKED: &str = "runtime_descriptors_untracked";
    /// Timed waits that gave up (idleness nobody is blamed for), and were not followed by
    /// another wait of the thread on the same object from the same call site.
    pub const WAITS_TIMED_OUT: &str = "waits_timed_out";
    /// Waits that ended without their event (timed out, interrupted, spurious) and were
    /// followed by the thread's next wait on the same object from the same call site: still
    /// waiting for the same event, their waiting is carried into that wait and blamed on
    /// whoever ends it.
    pub const WAITS_CARRIED: &str = "waits_carried";
    /// Waits interrupted by a signal, EINTR (idleness nobody is blamed for).
    pub const WAITS_INTERRUPTED: &str = "waits_interrupted";
    /// Waits that returned success with no wake-up the runtime saw: spurious wake-ups, or
    /// events from outside its view (idleness nobody is blamed for).
    pub const WAITS_SPURIOUS: &str = "waits_spurious";
    /// Waits that could not be monitored (no memory left for their state).
    pub const WAITS_UNMONITORED: &str = "waits_unmonitored";
    /// Nanoseconds of measured lock waiting that could not be recorded as idleness.
    pub const IDLENESS_UNRECORDED: &str = "idleness_unrecorded_ns";
    /// Nanoseconds of blame still pending on locks destroyed before it was settled, or that
    /// could not be recorded at a mutex's release.
    pub const BLAME_UNSETTLED: &str = "blame_unsettled_ns";
    /// Mutex holds whose blame was reconstructed approximately: more waiters came and went
    /// during the hold than the mutex's waiter-time history keeps, or the thread held more
    /// mutexes others waited for at once than it notes (`locks::hold_starts`).
    pub const HOLDS_APPROXIMATED: &str = "mutex_holds_approximated";
    /// Mutex holds whose blame is the estimate scaled from the measured waiters: the
    /// integral that counts every waiter not registered one by one (`locks::arrivals`)
    /// also counted another mutex's waiters sharing its counter during the hold.
    pub const HOLDS_BLAME_ESTIMATED: &str = "mutex_holds_blame_estimated";
    /// Process-shared spin locks beyond the tracked number (they might get converted).
    pub const SHARED_SPIN_LOCKS_UNTRACKED: &str = "shared_spin_locks_untracked";
    /// Most spin locks in the monitored representation at once (memory gauge).
    pub const MONITORED_SPIN_LOCKS_PEAK: &str = "monitored_spin_locks_peak";
    /// Most waited-on objects (mutexes, condition variables, futexes...) with monitoring
    /// state at once (memory gauge).
    pub const MONITORED_WAIT_OBJECTS_PEAK: &str = "monitored_wait_objects_peak";
    /// Allocations made inside the sampling signal handler: always 0 (a runtime bug
    /// otherwise; the handler must not allocate).
    pub const HANDLER_ALLOCATIONS: &str = "handler_allocations";
    /// Most bytes the runtime had allocated from its own heap at once (memory gauge).
    pub const RUNTIME_HEAP_PEAK: &str = "runtime_heap_peak_bytes";
    /// The longest thinning window of short synchronous samples a thread went up to, when
    /// a thread kept more of them than the runtime's budget (a rate gauge; 0 otherwise).
    pub const THINNING_WINDOW_PEAK: &str = "thinning_window_peak_ns";
    /// Contended lock acquisitions (mutexes, rwlocks) the runtime saw: a try failed and the
    /// thread went on to wait.
    pub const CONTENDED_ACQUISITIONS: &str = "contended_acquisitions";
    /// Of those, how many were measured. When a thread has more than the runtime's budget,
    /// it measures a random subset and scales each one's idleness and blame by its sampling
    /// period, so totals stay unbiased (`locks::contention_sampling`).
    pub const CONTENDED_MEASURED: &str = "contended_measured";
    /// The longest sampling period of contended acquisitions a thread went up to (1: every
    /// one was measured; a rate gauge).
    pub const CONTENDED_PERIOD_PEAK: &str = "contended_sampling_period_peak";
    /// Nanoseconds waited by every contended acquisition a thread made while it was
    /// sampling them (measured or not: each one's wait is timed, only its registration for
    /// the blame is sampled).
    pub const CONTENDED_SAMPLED_WAIT: &str = "contended_sampled_wait_ns";
    /// The same waiting as estimated by the measured ones, each scaled by its sampling
    /// period. The analysis multiplies every [`super::SAMPLE_SCALED`] sample of the process
    /// by [`CONTENDED_SAMPLED_WAIT`] / this: a measured wait slows the holds it overlaps
    /// (their releases take its blame), so measured waits run longer than the ones they
    /// stand for, and this ratio takes that out of the totals.
    pub const CONTENDED_SCALED_WAIT: &str = "contended_scaled_wait_ns";
    /// Mutex holds that began without waiting (a successful try or lock) while others may
    /// have waited for the mutex (measured waiters were registered on it, or on another
    /// object sharing its wait-table bucket): the holds whose start must be noted for their
    /// blame.
    pub const CONTENDED_HOLDS: &str = "contended_holds";
    /// Of those, how many were noted. When a thread has more than the runtime's budget, it
    /// notes a random subset and counts each one's blame as many times as its sampling
    /// period (`locks::hold_sampling`); the others take none.
    pub const CONTENDED_HOLDS_NOTED: &str = "contended_holds_noted";
    /// The longest sampling period of such holds a thread went up to (a rate gauge).
    pub const CONTENDED_HOLD_PERIOD_PEAK: &str = "contended_hold_sampling_period_peak";

    /// Lock events (sampled acquisitions, waits, failed trylocks) of locks that found no
    /// room in the runtime's lock table: counted here instead of in a lock's row.
    pub const LOCK_EVENTS_UNTABLED: &str = "lock_events_untabled";
    /// Lock events counted in a row after their lock was gone (an event racing its
    /// object's destroy, or a lock freed without its destroy and another kind of object
    /// made at its address): dropped from the rows, counted here.
    pub const LOCK_EVENTS_STRAY: &str = "lock_events_stray";
    /// Lock inits whose init site the runtime could not keep: another lock's entry took its
    /// slot in the fixed init-site table (more locks alive at once than its 65,536 slots,
    /// or two in one slot; a lock freed without its destroy keeps its slot until then), or
    /// the table of distinct sites was full. Those locks are named another way and are in
    /// no init-site group, so a group may count fewer locks than the program made.
    pub const INIT_SITES_DISPLACED: &str = "init_sites_displaced";
    /// Most locks in the runtime's lock table at once (memory gauge).
    pub const LOCK_TABLE_PEAK: &str = "lock_table_peak";
    /// Timer samples whose check of the locks the thread may hold failed for another reason
    /// than a lock gone (`process_vm_readv` refused: seccomp, no such call): their
    /// `held.contended` is missing.
    pub const HELD_CHECKS_FAILED: &str = "held_checks_failed";
    /// Nanoseconds of `held.blocked` (blocking calls inside holds others waited for) that
    /// could not be recorded.
    pub const HELD_BLOCKED_UNRECORDED: &str = "held_blocked_unrecorded_ns";
    /// 1 when the runtime could not count the process's lock acquisitions (not x86-64, or
    /// not loaded at start-up: its thread-locals are not in the static TLS block).
    pub const ACQUISITIONS_UNCOUNTED: &str = "acquisitions_uncounted";

    /// Counters that count lost samples (summed into "lost samples" by reports).
    pub const LOST_SAMPLE_COUNTERS: &[&str] = &[
        DROPPED_BUSY,
        DROPPED_MODULES_UPDATING,
        DROPPED_FLUSH_FAILED,
        DROPPED_NO_THREAD_STATE,
        DROPPED_NO_UNWIND_CACHE,
        DROPPED_SIZE_LIMIT,
    ];
}
