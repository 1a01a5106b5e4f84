//! The module set the signal handler unwinds with, and its publication protocol.
//!
//! Job: hold framehop's unwinder plus a sorted table of module address ranges (to turn
//! absolute addresses into module-relative [`Frame`]s), and let the handler use them while
//! other threads update them after `dlopen`/`dlclose`.
//!
//! Protocol (a try-lock that never waits on the reader side):
//! - readers (the signal handler) increment `readers`, then check `writer`; if an update is
//!   under way they back off at once and the caller drops the sample (counted);
//! - the single writer (updates are serialised by a mutex) raises `writer`, waits until
//!   `readers` drains to zero, mutates, then lowers `writer`.
//!
//! A reader is never blocked, so a sample that interrupts the writer's own thread simply
//! backs off: no deadlock is possible. [`ModuleSet::try_read`] is async-signal-safe;
//! [`ModuleSet::refresh`] is not.

use super::modules::{loaded_modules, LoadedModule, SharedBytes};
use super::no_alloc::NoAllocation;
use crate::format::Frame;
use crate::runtime_lock::SpinLock;
use framehop::x86_64::UnwinderX86_64;
use framehop::{ExplicitModuleSectionInfo, Unwinder};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// framehop's unwinder over runtime-owned section bytes, never allocating while unwinding.
pub type FrameUnwinder = UnwinderX86_64<SharedBytes, NoAllocation>;

/// What the handler needs: the unwinder and the address-range table.
pub struct Modules {
    pub unwinder: FrameUnwinder,
    /// (start, end, bias, id), sorted by start, non-overlapping.
    ranges: Vec<(u64, u64, u64, u32)>,
}

impl Modules {
    /// Module-relative form of an absolute address. Async-signal-safe.
    pub fn frame_for(&self, addr: u64) -> Frame {
        let i = self.ranges.partition_point(|r| r.0 <= addr);
        if i > 0 {
            let (_, end, bias, id) = self.ranges[i - 1];
            if addr < end {
                return Frame {
                    module: id,
                    offset: addr.wrapping_sub(bias),
                };
            }
        }
        Frame {
            module: 0,
            offset: addr,
        }
    }
}

/// Modules added and removed by one refresh, with the ids given to them.
#[derive(Default)]
pub struct ModuleChanges {
    pub added: Vec<(u32, LoadedModule)>,
    pub removed: Vec<u32>,
}

/// The published module set. One per process (`static`).
pub struct ModuleSet {
    current: UnsafeCell<Option<Modules>>,
    writer: AtomicBool,
    readers: AtomicUsize,
    /// Serialises writers and remembers the id of every loaded module.
    known: SpinLock<Vec<(u32, LoadedModule)>>,
}

// SAFETY: `current` is only mutated by the single writer (holding `known`) after it has
// raised `writer` and seen `readers` at zero; readers only dereference it between
// incrementing `readers` and decrementing it, having seen `writer` low. Hence no reference
// to `current` is ever alive while it is mutated.
unsafe impl Sync for ModuleSet {}

/// A read permit; while alive, the module set cannot change.
pub struct ReadGuard<'a> {
    set: &'a ModuleSet,
    modules: &'a Modules,
}

impl std::ops::Deref for ReadGuard<'_> {
    type Target = Modules;
    fn deref(&self) -> &Modules {
        self.modules
    }
}

impl Drop for ReadGuard<'_> {
    fn drop(&mut self) {
        self.set.readers.fetch_sub(1, Ordering::Release);
    }
}

impl ModuleSet {
    pub const fn new() -> Self {
        ModuleSet {
            current: UnsafeCell::new(None),
            writer: AtomicBool::new(false),
            readers: AtomicUsize::new(0),
            known: SpinLock::new(Vec::new()),
        }
    }

    /// Gets read access, or `None` while an update is under way or before the first
    /// refresh. Async-signal-safe and wait-free.
    pub fn try_read(&self) -> Option<ReadGuard<'_>> {
        self.readers.fetch_add(1, Ordering::SeqCst);
        if self.writer.load(Ordering::SeqCst) {
            self.readers.fetch_sub(1, Ordering::Release);
            return None;
        }
        // SAFETY: see the `Sync` impl: `writer` was low after we registered as a reader, so
        // no writer will touch `current` until we deregister (in `ReadGuard::drop`).
        let modules = unsafe { (*self.current.get()).as_ref() };
        match modules {
            Some(modules) => Some(ReadGuard { set: self, modules }),
            None => {
                self.readers.fetch_sub(1, Ordering::Release);
                None
            }
        }
    }

    /// Re-reads the loaded modules and publishes a new set if anything changed. Returns what
    /// changed, with module ids (never reused; ids start at `first_id`). Not
    /// async-signal-safe; must not be called from the signal handler.
    ///
    /// The first refresh (at start-up) borrows the modules' unwind sections from their
    /// mappings: the program's start-up objects are never unloaded, and a `dlclose` calls
    /// [`ModuleSet::own_sections`] first. Modules that appear later (`dlopen`) may be
    /// unloaded by calls the runtime does not see, so their sections are copied.
    pub fn refresh(&self, next_id: &mut u32) -> ModuleChanges {
        let mut known = self.known.lock();
        let first = known.is_empty();
        let now = loaded_modules();
        let mut changes = ModuleChanges::default();
        let mut kept: Vec<(u32, LoadedModule)> = Vec::with_capacity(now.len());
        for m in now {
            if let Some((id, k)) = known.iter().find(|(_, k)| k.same_object(&m)) {
                kept.push((*id, k.clone()));
            } else {
                let id = *next_id;
                *next_id += 1;
                let m = if first { m } else { m.owned() };
                changes.added.push((id, m.clone()));
                kept.push((id, m));
            }
        }
        for (id, _) in known.iter() {
            if !kept.iter().any(|(k, _)| k == id) {
                changes.removed.push(*id);
            }
        }
        if changes.added.is_empty() && changes.removed.is_empty() && !first {
            return changes;
        }
        self.publish(build(&kept));
        *known = kept;
        changes
    }

    /// Before a `dlclose`, which may unmap modules: copies every section still borrowed
    /// from a module's mapping and publishes the set that uses the copies. Not
    /// async-signal-safe.
    pub fn own_sections(&self) {
        let mut known = self.known.lock();
        if !known.iter().any(|(_, m)| m.borrows()) {
            return;
        }
        for (_, m) in known.iter_mut() {
            *m = m.owned();
        }
        self.publish(build(&known));
    }

    /// Replaces the published set; the caller holds `known` (the single writer).
    fn publish(&self, modules: Modules) {
        self.writer.store(true, Ordering::SeqCst);
        while self.readers.load(Ordering::SeqCst) != 0 {
            std::hint::spin_loop();
        }
        // SAFETY: the caller holds `known` (single writer), `writer` is raised and no reader
        // is registered, so nothing references `current` (see the `Sync` impl).
        let old = unsafe { (*self.current.get()).replace(modules) };
        self.writer.store(false, Ordering::SeqCst);
        drop(old);
    }

    /// `pthread_atfork` prepare: hold the module list across the fork.
    pub fn fork_prepare(&self) {
        self.known.raw_lock();
    }

    /// `pthread_atfork` parent and child: release what [`ModuleSet::fork_prepare`] took.
    pub fn fork_release(&self) {
        self.known.raw_unlock();
    }

    /// A snapshot of the loaded modules with their ids. Not async-signal-safe.
    pub fn snapshot(&self) -> Vec<(u32, LoadedModule)> {
        self.known.lock().clone()
    }
}

impl Default for ModuleSet {
    fn default() -> Self {
        Self::new()
    }
}

fn build(modules: &[(u32, LoadedModule)]) -> Modules {
    let mut unwinder = FrameUnwinder::new();
    let mut ranges = Vec::with_capacity(modules.len());
    for (id, m) in modules {
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            eh_frame_svma: m.eh_frame.as_ref().map(|s| s.svma.clone()),
            eh_frame: m.eh_frame.as_ref().map(|s| s.data.clone()),
            eh_frame_hdr_svma: m.eh_frame_hdr.as_ref().map(|s| s.svma.clone()),
            eh_frame_hdr: m.eh_frame_hdr.as_ref().map(|s| s.data.clone()),
            ..Default::default()
        };
        unwinder.add_module(framehop::Module::new(
            m.path.clone(),
            m.avma.clone(),
            m.bias,
            info,
        ));
        ranges.push((m.avma.start, m.avma.end, m.bias, *id));
    }
    ranges.sort_unstable();
    Modules { unwinder, ranges }
}
