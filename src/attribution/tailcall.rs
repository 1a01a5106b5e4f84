//! Recovering a function that a tail call removed from the stack.
//!
//! Job: at -O2 a function whose last act is a call *jumps* to the callee instead
//! (`return worker(x);`, `return pthread_mutex_unlock(&m);`): while the callee runs, that
//! function's frame is gone and the stack says the callee was called by the function's own
//! caller; a function that only forwards to another would get no cost at all. The caller's
//! return address still points after its call instruction. When that instruction names the
//! function it called, and the frame nearer the leaf is not in that function, the function
//! was tail-called through, and [`super::paths`] puts it back between the two frames.
//!
//! What a call instruction proves ([`CallSites::callee`]):
//! - `call rel32` (E8) to exactly the start of a known function of the same module (symbol
//!   or unwind-table entry): that function. Any other target proves nothing, so a
//!   coincidental E8 byte never invents a frame.
//! - `call rel32` to a PLT stub, or `call *disp32(%rip)` (FF 15, code built with
//!   `-fno-plt`): the function imported through the stub's GOT slot, by the name its dynamic
//!   relocation gives. It stands for a definition in another module
//!   ([`CallSites::definition`]); it is put back only when exactly one module defines that
//!   name, never for an IFUNC (whose implementation is chosen at load time and named
//!   differently), and only above a frame of its own module ([`Reach::Import`]).
//!
//! The frame nearer the leaf is compared as the out-of-line function it lies in
//! ([`Physical`]; inlined frames do not count), never when it lies in a stub ([`Site`]).
//! - Anything else (a call through a register or memory: function pointers, virtual calls)
//!   proves nothing, and a function reached that way is not recovered.
//!
//! Limits: only the function the call reached can be put back. Of a chain `a` →(call) `f`
//! →(jump) `g` →(jump) `h`, the stack holds no trace of `g`: the path reads `a -> f -> h`.
//! Where in the recovered function the jump was is not known, so it has no source line.
//!
//! Invariants: a module file is read once; answers depend on the file's bytes only.
//!
//! Not async-signal-safe (reads files); used by the analysis.

use super::symbolize::CodeAddress;
use super::FunctionId;
use object::elf::{R_X86_64_GLOB_DAT, R_X86_64_JUMP_SLOT, STT_GNU_IFUNC};
use object::read::elf::ElfFile64;
use object::{
    Endianness, Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationFlags,
    RelocationTarget, SectionKind, SymbolKind,
};
use std::cell::OnceCell;
use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// What the call instruction before a return address reached, as far as its bytes prove it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Callee {
    /// The function starting at this address of the caller's own module.
    Local(u64),
    /// A function imported by this name, through a PLT stub or a GOT slot.
    Import(String),
}

/// Where an imported name is defined in one module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Definition {
    /// Not defined (or not exported) there.
    Absent,
    /// A function starting at this address.
    At(u64),
    /// Defined, but which code runs cannot be told: an IFUNC, or versions of the name at
    /// different addresses.
    Unknown,
}

/// Where in its module a code address lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    /// In a function starting at this address (the nearest known start at or below it), if
    /// any is known.
    Function(Option<u64>),
    /// In code that is no function of the program: a PLT stub (it runs for the import it
    /// stands for), or a signal-return trampoline (the frame above it is an interrupted
    /// instruction, not a return address).
    Stub,
}

/// The out-of-line function a frame lies in, or one a call may have reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Physical {
    /// Id of its module in the process.
    pub module: u32,
    /// Its start, when known.
    pub start: Option<u64>,
    /// Its outermost (not inlined) symbolized function.
    pub function: FunctionId,
}

impl Physical {
    /// Whether `frame` lies in this function: the same module, and the same start or the
    /// same name (a function's split-off `.cold` part starts elsewhere, but DWARF names it
    /// after its function).
    fn contains(&self, frame: &Physical) -> bool {
        let same_start = self.start.is_some() && self.start == frame.start;
        self.module == frame.module && (same_start || self.function == frame.function)
    }
}

/// How a call reached the functions it may have reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// `call rel32` to a function of the caller's own module.
    Direct,
    /// Through a PLT stub or a GOT slot. The first call of a lazily bound import runs the
    /// dynamic linker before the import, so only a frame in the import's own module shows
    /// that the import ran and jumped onwards.
    Import,
}

/// Of the functions a call may have reached (`called`: the one it names, or each definition
/// of the name it imports), which was tail-called through before the frame it leads to,
/// `inner`: none when `inner` lies in one of them (an ordinary call), when the call may have
/// reached several (the proof names no single one), or when an import's frame lies outside
/// the import's module.
pub fn tail_called_through(called: &[Physical], reach: Reach, inner: &Physical) -> Option<usize> {
    if called.iter().any(|f| f.contains(inner)) {
        return None;
    }
    match called {
        [one] if reach == Reach::Direct || one.module == inner.module => Some(0),
        _ => None,
    }
}

/// Code, PLT stubs, function starts, imports and exports of one module, read from its file.
struct ModuleCode {
    map: memmap2::Mmap,
    /// (address, file range) of each executable section (PLT sections included).
    text: Vec<(u64, Range<usize>)>,
    /// Address ranges of PLT sections (calls there stand for imported functions).
    plt: Vec<Range<u64>>,
    /// Sorted function start addresses (symbols and unwind-table entries), read when first
    /// needed: a module may be read only for its exports.
    starts: OnceCell<Vec<u64>>,
    path: PathBuf,
    /// GOT slot address -> the name of the function imported through it.
    slots: HashMap<u64, String>,
    /// Exported function name -> where it is defined.
    exports: HashMap<String, Definition>,
}

/// The bytes of glibc's (`mov $15,%rax; syscall`) and musl's (`mov $15,%eax; syscall`)
/// signal-return trampolines, `__restore_rt`.
const SIGRETURN: [&[u8]; 2] = [
    &[0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05],
    &[0xb8, 0x0f, 0, 0, 0, 0x0f, 0x05],
];

impl ModuleCode {
    fn read(path: &Path) -> Option<ModuleCode> {
        let file = std::fs::File::open(path).ok()?;
        // SAFETY: a read-only private mapping; module files are not expected to change while
        // a report runs (a changed build-id is refused by the symbolizer).
        let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
        let elf = ElfFile64::<Endianness>::parse(&*map).ok()?;
        let mut text = Vec::new();
        let mut plt = Vec::new();
        for s in elf.sections() {
            if s.name().unwrap_or_default().starts_with(".plt") {
                plt.push(s.address()..s.address() + s.size());
            }
            if s.kind() == SectionKind::Text {
                if let Some((offset, size)) = s.file_range() {
                    let offset = usize::try_from(offset).ok()?;
                    text.push((s.address(), offset..offset + usize::try_from(size).ok()?));
                }
            }
        }
        let slots = import_slots(&elf);
        let exports = exports(&elf);
        Some(ModuleCode {
            text,
            plt,
            starts: OnceCell::new(),
            path: path.to_owned(),
            slots,
            exports,
            map,
        })
    }

    fn starts(&self) -> &[u64] {
        self.starts
            .get_or_init(|| super::symtab::SymbolTable::read(&[&self.path]).function_starts())
    }

    fn bytes(&self, address: u64, len: usize) -> Option<&[u8]> {
        self.text.iter().find_map(|(start, range)| {
            let offset = usize::try_from(address.checked_sub(*start)?).ok()?;
            let end = offset.checked_add(len)?;
            (end <= range.len()).then(|| &self.map[range.start + offset..range.start + end])
        })
    }

    fn in_plt(&self, address: u64) -> bool {
        self.plt.iter().any(|r| r.contains(&address))
    }

    /// What the call instruction ending at `return_address` reached (see the module docs).
    fn callee(&self, return_address: u64) -> Option<Callee> {
        if let Some(call) = self.bytes(return_address.checked_sub(5)?, 5) {
            if call[0] == 0xE8 {
                let target = return_address.wrapping_add_signed(i64::from(rel32(&call[1..])?));
                return self.direct_callee(target);
            }
        }
        let call = self.bytes(return_address.checked_sub(6)?, 6)?;
        if call[..2] != [0xFF, 0x15] {
            return None;
        }
        let slot = return_address.wrapping_add_signed(i64::from(rel32(&call[2..])?));
        self.slots.get(&slot).cloned().map(Callee::Import)
    }

    /// What a `call rel32` to `target` reached: a function of this module, or the import of
    /// a PLT stub; nothing when `target` is neither a function start nor a decodable stub.
    fn direct_callee(&self, target: u64) -> Option<Callee> {
        if self.in_plt(target) {
            let slot = self.plt_slot(target)?;
            return self.slots.get(&slot).cloned().map(Callee::Import);
        }
        self.starts()
            .binary_search(&target)
            .is_ok()
            .then_some(Callee::Local(target))
    }

    /// The GOT slot a PLT stub jumps through: `[endbr64] [bnd] jmp *disp32(%rip)`, the shape
    /// of `.plt` entries, `.plt.sec` (CET) and `.plt.got` entries.
    fn plt_slot(&self, stub: u64) -> Option<u64> {
        let mut at = stub;
        if self.bytes(at, 4)? == [0xF3, 0x0F, 0x1E, 0xFA] {
            at += 4;
        }
        if self.bytes(at, 1)? == [0xF2] {
            at += 1;
        }
        let jmp = self.bytes(at, 6)?;
        if jmp[..2] != [0xFF, 0x25] {
            return None;
        }
        Some((at + 6).wrapping_add_signed(i64::from(rel32(&jmp[2..])?)))
    }

    fn site(&self, address: CodeAddress) -> Site {
        let sigreturn = SIGRETURN
            .iter()
            .any(|code| self.bytes(address.recorded(), code.len()) == Some(code));
        if sigreturn || self.in_plt(address.lookup()) {
            return Site::Stub;
        }
        let starts = self.starts();
        let i = starts.partition_point(|&s| s <= address.lookup());
        Site::Function(i.checked_sub(1).map(|i| starts[i]))
    }
}

fn rel32(bytes: &[u8]) -> Option<i32> {
    Some(i32::from_le_bytes(bytes.get(..4)?.try_into().ok()?))
}

/// GOT slot -> imported function name, from the dynamic relocations that fill the slots
/// (`R_X86_64_JUMP_SLOT` for PLT stubs, `R_X86_64_GLOB_DAT` for `.plt.got` and `-fno-plt`).
fn import_slots(elf: &ElfFile64<Endianness>) -> HashMap<u64, String> {
    let (Some(relocations), Some(symbols)) =
        (elf.dynamic_relocations(), elf.dynamic_symbol_table())
    else {
        return HashMap::new();
    };
    relocations
        .filter(|(_, r)| {
            matches!(r.flags(), RelocationFlags::Elf { r_type }
                if r_type == R_X86_64_JUMP_SLOT || r_type == R_X86_64_GLOB_DAT)
        })
        .filter_map(|(slot, r)| {
            let RelocationTarget::Symbol(index) = r.target() else {
                return None;
            };
            let symbol = symbols.symbol_by_index(index).ok()?;
            let name = symbol.name().ok().filter(|n| !n.is_empty())?;
            Some((slot, name.to_owned()))
        })
        .collect()
}

/// Exported function name -> its definition, from the dynamic symbol table.
fn exports(elf: &ElfFile64<Endianness>) -> HashMap<String, Definition> {
    let mut exports = HashMap::new();
    for symbol in elf.dynamic_symbols() {
        // (`is_definition` leaves IFUNCs out, and they are the ones to know about.)
        if symbol.is_undefined() || symbol.kind() != SymbolKind::Text {
            continue;
        }
        let Ok(name) = symbol.name() else { continue };
        let here = match symbol.elf_symbol().st_type() {
            STT_GNU_IFUNC => Definition::Unknown,
            _ => Definition::At(symbol.address()),
        };
        exports
            .entry(name.to_owned())
            .and_modify(|seen| {
                if *seen != here {
                    *seen = Definition::Unknown;
                }
            })
            .or_insert(here);
    }
    exports
}

/// Per-module call-site decoder, caching each module's code.
#[derive(Default)]
pub struct CallSites {
    modules: HashMap<String, Option<ModuleCode>>,
}

impl CallSites {
    fn module(&mut self, path: &str) -> Option<&ModuleCode> {
        if path.is_empty() || path.starts_with('[') {
            return None;
        }
        self.modules
            .entry(path.to_owned())
            .or_insert_with(|| ModuleCode::read(Path::new(path)))
            .as_ref()
    }

    /// What the call instruction before a return address (module-relative) in the module at
    /// `path` reached, if its bytes prove it.
    pub fn callee(&mut self, path: &str, return_address: u64) -> Option<Callee> {
        self.module(path)?.callee(return_address)
    }

    /// Where a recorded address (module-relative) of the module at `path` lies.
    pub fn site(&mut self, path: &str, address: CodeAddress) -> Site {
        self.module(path)
            .map_or(Site::Function(None), |code| code.site(address))
    }

    /// Where the module at `path` defines the exported function `name`.
    pub fn definition(&mut self, path: &str, name: &str) -> Definition {
        self.module(path)
            .and_then(|code| code.exports.get(name).copied())
            .unwrap_or(Definition::Absent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::testutil::TempDir;

    /// Builds `source` with gcc -O2 -g and `flags` in a fresh directory: the directory
    /// (removed when dropped) and the program's path.
    fn build(name: &str, source: &str, flags: &[&str]) -> (TempDir, PathBuf) {
        let dir = TempDir::new(&format!("tailcall-{name}"));
        let src = dir.0.join("t.c");
        std::fs::write(&src, source).unwrap();
        let exe = dir.0.join("t");
        let status = std::process::Command::new("gcc")
            .args(["-O2", "-g", "-pthread", "-o"])
            .arg(&exe)
            .arg(&src)
            .args(flags)
            .status()
            .expect("gcc runs");
        assert!(status.success(), "gcc builds the test program");
        (dir, exe)
    }

    /// `insert` tail-calls an imported function, `main` calls `insert` and the import.
    const LOCKS: &str = "#include <pthread.h>\n\
         static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;\n\
         int counter;\n\
         __attribute__((noinline)) int insert(void) { pthread_mutex_lock(&m); counter++; return pthread_mutex_unlock(&m); }\n\
         int main(void) { int r = insert(); __asm__ volatile(\"\" ::: \"memory\"); return r + pthread_mutex_trylock(&m); }\n";

    /// Every callee the module's direct and GOT calls prove, by the name of the function
    /// they reached (`@name` for imports).
    fn proven_callees(exe: &Path) -> Vec<String> {
        let code = ModuleCode::read(exe).unwrap();
        let table = super::super::symtab::SymbolTable::read(&[exe]);
        let mut found = Vec::new();
        for (start, range) in &code.text {
            for i in 0..range.len() as u64 {
                match code.callee(start + i) {
                    Some(Callee::Local(t)) => found.push(table.find(t).unwrap_or("?").to_owned()),
                    Some(Callee::Import(name)) => found.push(format!("@{name}")),
                    None => {}
                }
            }
        }
        found
    }

    #[test]
    fn direct_calls_prove_local_functions_and_plt_calls_their_imports() {
        let (_dir, exe) = build("plt", LOCKS, &[]);
        let found = proven_callees(&exe);
        assert!(found.contains(&"insert".to_owned()), "{found:?}");
        for import in ["@pthread_mutex_lock", "@pthread_mutex_trylock"] {
            assert!(found.contains(&import.to_owned()), "{import}: {found:?}");
        }
        // insert's tail call is a jump, not a call: nothing proves pthread_mutex_unlock.
        assert!(!found.contains(&"@pthread_mutex_unlock".to_owned()));
    }

    #[test]
    fn calls_through_the_got_prove_their_imports() {
        let (_dir, exe) = build("noplt", LOCKS, &["-fno-plt"]);
        let found = proven_callees(&exe);
        assert!(found.contains(&"insert".to_owned()), "{found:?}");
        assert!(
            found.contains(&"@pthread_mutex_lock".to_owned()),
            "{found:?}"
        );
    }

    #[test]
    fn a_module_exports_its_functions_and_ifuncs_are_not_resolved() {
        let libc = ["/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("a libc to read");
        let mut sites = CallSites::default();
        assert!(matches!(
            sites.definition(libc, "qsort"),
            Definition::At(a) if a > 0
        ));
        assert_eq!(sites.definition(libc, "memcpy"), Definition::Unknown);
        assert_eq!(sites.definition(libc, "no_such_fn"), Definition::Absent);
    }

    fn f(module: u32, start: u64, function: FunctionId) -> Physical {
        Physical {
            module,
            start: Some(start),
            function,
        }
    }

    #[test]
    fn a_function_is_put_back_only_when_the_frame_it_leads_to_lies_elsewhere() {
        use Reach::Direct;
        let worker = f(1, 0x100, 1);
        let dispatch = f(1, 0x200, 2);
        let put_back = |called: &[Physical], inner| tail_called_through(called, Direct, &inner);
        // An ordinary call: the callee runs.
        assert_eq!(put_back(&[worker], f(1, 0x100, 1)), None);
        // Recursion: dispatch called dispatch, which runs.
        assert_eq!(put_back(&[dispatch], dispatch), None);
        // dispatch was called, worker runs: dispatch jumped to it.
        assert_eq!(put_back(&[dispatch], worker), Some(0));
        // ... also when the frame is in another module (a jump to a library function).
        assert_eq!(put_back(&[dispatch], f(2, 0x200, 5)), Some(0));
        // A split-off part (`dispatch.cold`) starts elsewhere but is named dispatch.
        assert_eq!(put_back(&[dispatch], f(1, 0x900, 2)), None);
        // Named differently (a symbol table and DWARF disagree) at the same start.
        let same_start = Physical {
            function: 9,
            ..dispatch
        };
        assert_eq!(put_back(&[dispatch], same_start), None);
        // No known start: compared by name only.
        let unknown = Physical {
            module: 1,
            start: None,
            function: 3,
        };
        assert_eq!(put_back(&[dispatch], unknown), Some(0));
        // Nothing proven, nothing put back.
        assert_eq!(put_back(&[], worker), None);
    }

    #[test]
    fn an_import_is_put_back_only_above_its_own_module_and_when_defined_once() {
        let forward = f(2, 0x1d0, 4);
        let in_its_library = f(2, 0x120, 5);
        let in_the_dynamic_linker = f(3, 0x400, 6);
        assert_eq!(
            tail_called_through(&[forward], Reach::Import, &in_its_library),
            Some(0)
        );
        assert_eq!(
            tail_called_through(&[forward], Reach::Import, &forward),
            None
        );
        // Bound lazily: the dynamic linker runs before the import.
        assert_eq!(
            tail_called_through(&[forward], Reach::Import, &in_the_dynamic_linker),
            None
        );
        // Defined twice (interposed): running in either proves nothing, and running
        // elsewhere does not say which was called.
        let (rt_lock, libc_lock) = (f(7, 0x10, 6), f(4, 0x20, 7));
        let both = [rt_lock, libc_lock];
        assert_eq!(tail_called_through(&both, Reach::Import, &rt_lock), None);
        assert_eq!(
            tail_called_through(&both, Reach::Import, &f(4, 0x90, 8)),
            None
        );
    }
}
