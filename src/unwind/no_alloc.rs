//! framehop's allocation policy for the runtime: unwinding that never allocates, with the
//! CFI evaluator's storage in fixed arrays sized for x86-64.
//!
//! Job: the type parameter every unwinder and unwind cache of the runtime is built with.
//! Types only; nothing here runs (async-signal-safe by construction).

use framehop::AllocationPolicy;

/// framehop's allocation-free unwinding, with CFI rows sized for x86-64.
///
/// framehop's own `MustNotAllocateDuringUnwind` gives each row of the CFI state machine
/// room for 192 register rules, which makes every cache's gimli context 25 KiB; x86-64 has
/// 17 registers that CFI describes (16 general-purpose and the return address), and even
/// glibc's signal trampoline, which describes them all, stays under 32. A row with more
/// rules fails to unwind (counted as an unwind error), as one with more than 192 does with
/// framehop. The context is 4.3 KiB.
pub struct NoAllocation;

/// Fixed-size storage of gimli's CFI evaluation (see [`NoAllocation`]).
pub struct CompactCfiStorage;

impl<O: framehop_gimli::ReaderOffset> framehop_gimli::UnwindContextStorage<O>
    for CompactCfiStorage
{
    type Rules = [(framehop_gimli::Register, framehop_gimli::RegisterRule<O>); 32];
    /// `DW_CFA_remember_state` nesting, as in framehop.
    type Stack = [framehop_gimli::UnwindTableRow<O, Self>; 4];
}

impl<R: framehop_gimli::Reader> framehop_gimli::EvaluationStorage<R> for CompactCfiStorage {
    type Stack = [framehop_gimli::Value; 64];
    type ExpressionStack = [(R, R); 4];
    type Result = [framehop_gimli::Piece<R>; 1];
}

impl AllocationPolicy for NoAllocation {
    type GimliUnwindContextStorage<O: framehop_gimli::ReaderOffset> = CompactCfiStorage;
    type GimliEvaluationStorage<R: framehop_gimli::Reader> = CompactCfiStorage;
}
