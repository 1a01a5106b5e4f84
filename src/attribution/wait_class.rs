//! Waiting for a lock apart from waiting for an event (issue 40).
//!
//! Job: a thread blocked on a mutex, an rwlock or a spin lock waits for *another thread's
//! critical section*: that is contention, and its holder is a culprit. A thread blocked on a
//! barrier or a join, or on a condition variable, a semaphore or a futex used to wait for
//! work, waits for *an event*: often an idle worker with nothing to do, or a main thread
//! waiting for its workers, which is no lock problem, and its waker (a signaller, a poster,
//! a thread that ended) no culprit of one. [`class_of`] tells which a wait kind is. A
//! condition variable, a semaphore or a raw futex may also be the way a lock is built
//! (CPython's GIL is a condition variable that `take_gil` waits on; Rust's `std` and
//! `parking_lot` mutexes wait on futexes, as do their condition variables, thread parking
//! and channels): its use tells, by the names of the functions that called it
//! ([`called_by_a_lock`]; a caller with no name, in a stripped binary, counts as a lock's:
//! waiting is never called harmless without evidence); a futex's use also by how its waits
//! end: waits nobody wakes (at most `EVENT_FUTEX_BLAME` of them blamed: they time out, or
//! return at once as the word changed, stress-ng's futex stressor) wait for no holder,
//! whatever the names. [`PathClasses`] gives each path's waiting (or blame) per class,
//! reading a path's names once.
//!
//! Invariants: every value of a base metric goes to exactly one class (a sample without a
//! kind, as older runtimes wrote every one, is a lock's: it was lock waiting by definition
//! then). Pure; not used from the runtime (analysis code).

use super::lock_sites::is_runtime_module;
use super::lock_wrappers::named_caller;
use super::metrics::Part;
use super::{Analysis, Loc, Names};
use crate::format::WaitKind;
use std::cell::OnceCell;

/// What a waiting thread waited for (`class as usize` indexes [`PathClasses::split`]'s
/// array).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitClass {
    /// Another thread's critical section: a mutex, rwlock, spin lock, or a lock built on a
    /// condition variable, a semaphore or a futex.
    Lock = 0,
    /// An event: a signal, a post, a barrier's last arrival, a thread's end, a futex wake
    /// that hands over no lock.
    Event = 1,
}

/// The class of a wait kind, or `None` for the kinds locks are built on as well as events
/// (condition variables, semaphores, futexes: [`called_by_a_lock`] tells).
pub fn class_of(kind: WaitKind) -> Option<WaitClass> {
    match kind {
        WaitKind::Spin | WaitKind::Mutex | WaitKind::RwLock => Some(WaitClass::Lock),
        WaitKind::Barrier | WaitKind::Join => Some(WaitClass::Event),
        WaitKind::CondVar | WaitKind::Semaphore | WaitKind::Futex => None,
    }
}

/// Words (lowercase) of a function's name that make it a lock's: `take_gil`, `drop_gil`,
/// `RawMutex::lock_slow`, `Mutex::lock_contended`, `RwLock::read_contended`, a program's
/// own `spin_lock` or `acquire_lock`.
const LOCK_WORDS: [&str; 5] = ["lock", "mutex", "rwlock", "spinlock", "gil"];

/// Whether function `name` is a lock's by its words: the name without its parameters and
/// template or generic arguments, cut into words at every character that is not a letter
/// or digit and where a lowercase letter meets an uppercase one (`RwLock` is `rw lock`,
/// `BlockingAwaitState` is `blocking await state`: no lock).
fn names_a_lock(name: &str) -> bool {
    let name = name.split('(').next().unwrap_or(name);
    let mut word = String::new();
    let mut found = false;
    let mut end_word = |word: &mut String| {
        found |= LOCK_WORDS.contains(&word.as_str());
        word.clear();
    };
    let mut depth = 0u32;
    let mut previous_lower = false;
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            _ if depth > 0 => {}
            c if c.is_ascii_alphanumeric() => {
                if c.is_ascii_uppercase() && previous_lower {
                    end_word(&mut word);
                }
                previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
                word.push(c.to_ascii_lowercase());
                continue;
            }
            _ => {}
        }
        previous_lower = false;
        end_word(&mut word);
    }
    end_word(&mut word);
    found
}

/// Whether the wait (or wake) of root-first `locs`, whose innermost runtime frame is at
/// `runtime`, is a lock's: the frames from the one named as its caller (past language
/// wrappers, and out to the function it is inlined into) to the runtime's say so by name.
/// A condition variable, semaphore or futex used for an event (a queue's, thread parking,
/// a channel, a `Once`) is not.
/// A frame the symbolizer could not name (`[unknown] 0x...`, `module+0x...`: a stripped
/// binary, such as the distribution's CPython, whose GIL is a condition variable) counts
/// as a lock's: waiting is not called harmless without evidence.
fn called_by_a_lock(names: &Names, locs: &[Loc], runtime: usize) -> bool {
    let mut from = named_caller(names, locs, runtime).unwrap_or(runtime);
    // A caller inlined into another is one frame with it: CPython's `PyCOND_TIMEDWAIT`,
    // inlined into `take_gil`, is the GIL's.
    while from > 0 && from < runtime && locs[from].inlined {
        from -= 1;
    }
    locs[from..runtime].iter().any(|l| {
        let name = &names.function(l.function).name;
        unnamed(name) || names_a_lock(name)
    })
}

/// Whether `name` is the symbolizer's label for an address it found no name for.
fn unnamed(name: &str) -> bool {
    name.starts_with("[unknown]")
        || name
            .rsplit_once("+0x")
            .is_some_and(|(_, hex)| !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()))
}

/// The most of a futex word's waiting its wakers may take as blame for the word to be used
/// as an event rather than a lock: a lock's waiters are woken by its holders' releases,
/// which take their waiting; a word whose waits time out, or return at once because its
/// value changed (stress-ng's futex stressor: all of them), is no lock anyone held.
pub const EVENT_FUTEX_BLAME: f64 = 0.1;

/// Whether waiting of which at most `blamed` ns of `waited` was blamed on the wakes that
/// ended it is polled: at most [`EVENT_FUTEX_BLAME`] of it (a futex word so waited on is an
/// event's, not a lock's). The one rule of the lock table and of the summary's classes.
pub fn polled(blamed: u64, waited: u64) -> bool {
    blamed as f64 <= EVENT_FUTEX_BLAME * waited as f64
}

/// The classes of the waiting on each path of an analysis. Where a path's wait kind does
/// not say (a condition variable's, semaphore's or futex's), its callers' names are read
/// once, on first need, and kept: the summary asks the same path many times.
pub struct PathClasses<'a> {
    analysis: &'a Analysis,
    /// Per path (by index): whether its waiting of an undecided kind is a lock's.
    by_use: Vec<OnceCell<bool>>,
    /// The metrics of idleness and of its unblamed part, when the analysis has them.
    idleness: Option<(usize, usize)>,
}

impl<'a> PathClasses<'a> {
    pub fn new(analysis: &'a Analysis) -> PathClasses<'a> {
        let unblamed = format!("idleness.{}", super::metrics::UNBLAMED);
        let idleness = analysis
            .metrics
            .id("idleness")
            .ok()
            .zip(analysis.metrics.id(&unblamed).ok());
        PathClasses {
            analysis,
            by_use: (0..analysis.paths.len()).map(|_| OnceCell::new()).collect(),
            idleness,
        }
    }

    /// Whether the waits on `path` mostly ended with no wake (timed out, interrupted, or
    /// returned at once: a futex word whose value had changed): its idleness is [`polled`]
    /// by its blamed part. A futex so waited on is polled or slept on, not a lock anyone
    /// held (the lock table's rule, by blame).
    fn mostly_unblamed(&self, path: usize) -> bool {
        self.idleness.is_some_and(|(idle, unblamed)| {
            let values = &self.analysis.paths[path].values;
            let blamed = values[idle].saturating_sub(values[unblamed]);
            values[idle] > 0 && polled(blamed, values[idle])
        })
    }

    /// The value of merged base metric `base` on path `path` (an index into the
    /// analysis' paths) per wait kind it names, with the class of each: `(kind, class,
    /// value)`, kinds in metric order. The path's kind-less rest is not in it.
    pub fn by_kind(
        &self,
        path: usize,
        base: usize,
    ) -> impl Iterator<Item = (WaitKind, WaitClass, u64)> + '_ {
        let a = self.analysis;
        let values = &a.paths[path].values;
        values
            .iter()
            .enumerate()
            .filter(|&(_, &value)| value > 0)
            .filter_map(move |(m, &value)| match a.metrics.derived_from(m) {
                Some((b, Part::Kind(kind))) if b == base => {
                    let class = class_of(kind).unwrap_or_else(|| {
                        let by_use = &self.by_use[path];
                        let named =
                            *by_use.get_or_init(|| path_of_a_lock(&a.names, &a.paths[path].locs));
                        let polled = kind == WaitKind::Futex && self.mostly_unblamed(path);
                        match named && !polled {
                            true => WaitClass::Lock,
                            false => WaitClass::Event,
                        }
                    });
                    Some((kind, class, value))
                }
                _ => None,
            })
    }

    /// The value of merged base metric `base` on path `path`, split `[lock, event]` by
    /// what was waited for (`base`: idleness or blame, whose derived metrics by kind say
    /// what; a path's kind-less rest is a lock's).
    pub fn split(&self, path: usize, base: usize) -> [u64; 2] {
        let total = self.analysis.paths[path].values[base];
        if total == 0 {
            return [0, 0];
        }
        let event: u64 = self
            .by_kind(path, base)
            .filter(|&(_, class, _)| class == WaitClass::Event)
            .map(|(_, _, v)| v)
            .sum();
        let event = event.min(total);
        [total - event, event]
    }

    /// [`PathClasses::split`] summed over all paths.
    pub fn totals(&self, base: usize) -> [u64; 2] {
        (0..self.analysis.paths.len()).fold([0, 0], |[lock, event], i| {
            let [l, e] = self.split(i, base);
            [lock + l, event + e]
        })
    }
}

/// [`called_by_a_lock`] for a whole root-first path (its innermost runtime frame found
/// here); a path without one is no lock's. The one rule of the summary's classes and the
/// lock table's.
pub fn path_of_a_lock(names: &Names, locs: &[Loc]) -> bool {
    let is_runtime = |l: &Loc| is_runtime_module(&names.function(l.function).module);
    locs.iter()
        .rposition(is_runtime)
        .is_some_and(|i| called_by_a_lock(names, locs, i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::testutil::{add_flagged, analyze_renamed, app, kinds_process, rt};
    use crate::format::read::Profile;

    fn analysis(p: crate::format::read::ProcessProfile) -> Analysis {
        analyze_renamed(&Profile {
            path: "blameprof-classes".into(),
            processes: vec![p],
            skipped: Vec::new(),
        })
    }

    /// Sums of `base` per class over all paths.
    fn totals(a: &Analysis, base: &str) -> [u64; 2] {
        PathClasses::new(a).totals(a.metrics.id(base).unwrap())
    }

    #[test]
    fn locks_and_events_are_told_by_kind_and_kindless_waiting_is_a_locks() {
        // Idleness: mutex 7, condvar 3.5, kind-less 0.25 ms; blame: mutex 6.3, condvar 2.
        let a = analysis(kinds_process());
        assert_eq!(totals(&a, "idleness"), [7_250_000, 3_500_000]);
        assert_eq!(totals(&a, "blame"), [6_300_000, 2_000_000]);
        assert_eq!(totals(&a, "work"), [10_000_000, 0]);
    }

    #[test]
    fn lock_words_are_whole_words_of_the_name_without_its_arguments() {
        for lock in [
            "take_gil",
            "drop_gil",
            "parking_lot::raw_mutex::RawMutex::lock_slow",
            "std::sys::sync::rwlock::futex::RwLock::read_contended",
            "rocksdb::port::Mutex::Lock()",
            "my_spinlock_acquire",
        ] {
            assert!(names_a_lock(lock), "{lock}");
        }
        assert!(unnamed("python3.11+0x4f92c0") && unnamed("[unknown] 0x20"));
        assert!(!unnamed("take_order") && !unnamed("f+0xzz"));
        for event in [
            "rocksdb::WriteThread::BlockingAwaitState(rocksdb::WriteThread::Writer*, unsigned char)",
            "std::condition_variable::wait(std::unique_lock<std::mutex>&)",
            "wait<consume()::<lambda()> >",
            "std::sys::sync::condvar::futex::Condvar::wait",
            "clock_tick",
            "rocksdb::ThreadPoolImpl::Impl::BGThread(unsigned long)",
            "take_order",
            "std::sync::Condvar::wait::<std::sync::MutexGuard<u32>>",
        ] {
            assert!(!names_a_lock(event), "{event}");
        }
    }

    #[test]
    fn a_caller_inlined_into_a_locks_function_is_the_locks() {
        let mut names = Names::default();
        let python = "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0";
        let eval = names.intern_function("_PyEval_EvalFrameDefault", python);
        let take = names.intern_function("take_gil", python);
        let cond = names.intern_function("PyCOND_TIMEDWAIT", python);
        let wait = names.intern_function("pthread_cond_timedwait", "libblameprof_rt.so");
        let at = |function, inlined| Loc {
            function,
            line: crate::attribution::SourceLine {
                file: None,
                line: None,
            },
            inlined,
        };
        // CPython's GIL wait: PyCOND_TIMEDWAIT is inlined into take_gil.
        let gil = [
            at(eval, false),
            at(take, false),
            at(cond, true),
            at(wait, false),
        ];
        assert!(called_by_a_lock(&names, &gil, 3));
        // Called, not inlined, the same helper speaks for itself alone.
        let called = [
            at(eval, false),
            at(take, false),
            at(cond, false),
            at(wait, false),
        ];
        assert!(!called_by_a_lock(&names, &called, 3));
    }

    #[test]
    fn a_futex_is_a_lock_when_its_wrappers_say_so() {
        let mut p = kinds_process();
        let futex = WaitKind::Futex.flags();
        // A Rust mutex (2 ms) and a Rust condition variable (5 ms), both on futexes, and a
        // program's own futex event (1 ms) with no wrapper at all.
        let (user, lock_contended, cv_wait, syscall) = (app(0x90), app(0xa0), app(0xb0), rt(0x700));
        add_flagged(
            &mut p,
            101,
            1,
            &[user, lock_contended, syscall],
            2_000_000,
            futex,
        );
        add_flagged(&mut p, 101, 1, &[user, cv_wait, syscall], 5_000_000, futex);
        add_flagged(&mut p, 102, 1, &[app(0x70), syscall], 1_000_000, futex);
        let mut a = analysis(p);
        for f in &mut a.names.functions {
            f.name = match f.name.as_str() {
                "[unknown] 0x90" => "app::drain",
                "[unknown] 0xa0" => "std::sys::sync::mutex::futex::Mutex::lock_contended",
                "[unknown] 0xb0" => "std::sys::sync::condvar::futex::Condvar::wait",
                other => other,
            }
            .to_owned();
        }
        assert_eq!(
            totals(&a, "idleness"),
            [7_250_000 + 2_000_000, 3_500_000 + 5_000_000 + 1_000_000]
        );
    }

    #[test]
    fn a_futex_whose_waits_nobody_ends_is_an_event_whatever_its_names() {
        let mut p = kinds_process();
        let futex = WaitKind::Futex.flags();
        let unblamed = futex | crate::format::SAMPLE_UNBLAMED;
        // Stripped callers (no names: a lock's by its names). One word's waits all time out
        // or return at once (4 ms, unblamed); another's are woken, but for 0.1 ms of 2 ms.
        let syscall = rt(0x700);
        add_flagged(&mut p, 101, 1, &[app(0x90), syscall], 4_000_000, unblamed);
        add_flagged(&mut p, 102, 1, &[app(0xa0), syscall], 1_900_000, unblamed);
        add_flagged(&mut p, 102, 1, &[app(0xa0), syscall], 100_000, futex);
        // A third's are woken, 1 ms of 2 ms: a lock.
        add_flagged(&mut p, 103, 1, &[app(0xb0), syscall], 1_000_000, unblamed);
        add_flagged(&mut p, 103, 1, &[app(0xb0), syscall], 1_000_000, futex);
        let a = analysis(p);
        assert_eq!(
            totals(&a, "idleness"),
            [7_250_000 + 2_000_000, 3_500_000 + 6_000_000]
        );
    }
}
