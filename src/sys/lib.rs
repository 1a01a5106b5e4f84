//! blameprof's measurement base, the lowest of the crates that run inside the profiled
//! process: [`calls`], the system calls the runtime makes directly (ids, the CPU mask,
//! closing and writing its own descriptors), and [`runtime_lock`], the lock that guards the
//! runtime's own bookkeeping across `fork`.
//!
//! It imports no other blameprof crate; the unwinder, the lock mechanism, the sampler and
//! the measurement layer above them all use it (see `docs/architecture.md`).

pub mod calls;
pub mod runtime_lock;
