//! Symbolization: module-relative code addresses to function names, source files and lines.
//!
//! Job: for one recorded address in one module, give the chain of source frames it stands
//! for, the innermost (deepest inlined) frame first and the real, out-of-line function last.
//! Sources, in order of preference: DWARF (from the module itself, or from separate debug
//! info: by build-id, `<debug dir>/.build-id/xx/yyyy.debug`, else by the module's
//! `.gnu_debuglink`, the named file next to the module, in its `.debug/` directory or under
//! `<debug dir>/<module's directory>/`, with the CRC32 it records), then the ELF symbol
//! table (`.symtab`, else `.dynsym`), then a `module+0xoffset` label.
//!
//! Invariants:
//! - every answer has at least one frame, and exactly its last frame has `inlined == false`;
//! - a module file is opened once, and each distinct recorded address (instruction pointer
//!   or return address) in it is resolved once;
//! - a module whose build-id differs from the recorded one is never symbolized: its frames
//!   are labelled `[module changed since recording]`, since its addresses would lie.
//!
//! Not async-signal-safe (allocates, maps files); not thread-safe (`&mut self` caches).

use super::symtab::SymbolTable;
use crate::format::read::ModuleInfo;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A recorded code address, module-relative (or absolute when the module is unknown).
///
/// An interrupted instruction pointer is looked up as is; a return address points after
/// its call instruction, so the call site is found at `address - 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodeAddress {
    InstructionPointer(u64),
    ReturnAddress(u64),
}

impl CodeAddress {
    /// A recorded frame's address: a return address, or an interrupted instruction pointer.
    pub fn of(address: u64, is_return: bool) -> CodeAddress {
        match is_return {
            true => CodeAddress::ReturnAddress(address),
            false => CodeAddress::InstructionPointer(address),
        }
    }

    /// The address as the unwinder recorded it.
    pub fn recorded(self) -> u64 {
        match self {
            CodeAddress::InstructionPointer(a) | CodeAddress::ReturnAddress(a) => a,
        }
    }

    /// The address to look up in debug information.
    pub fn lookup(self) -> u64 {
        match self {
            CodeAddress::InstructionPointer(a) => a,
            CodeAddress::ReturnAddress(a) => a.saturating_sub(1),
        }
    }
}

/// One source-level frame: a function, possibly inlined into the next frame of its chain.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SourceFrame {
    /// Demangled function name, or a bracketed label when the function is not known.
    pub function: String,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// Whether this frame was inlined into the frame that follows it in the chain.
    pub inlined: bool,
}

impl SourceFrame {
    fn label(function: String) -> SourceFrame {
        SourceFrame {
            function,
            file: None,
            line: None,
            inlined: false,
        }
    }
}

/// Resolves addresses of many modules, caching opened modules and answers.
pub struct Symbolizer {
    debug_dir: PathBuf,
    modules: HashMap<(String, Vec<u8>), ModuleSymbols>,
    /// Addresses looked up so far, for a progress display on another thread.
    resolved: Arc<AtomicU64>,
}

impl Default for Symbolizer {
    fn default() -> Self {
        Symbolizer::new()
    }
}

impl Symbolizer {
    /// A symbolizer that looks for separate debug info under `/usr/lib/debug`.
    pub fn new() -> Symbolizer {
        Symbolizer::with_debug_dir(PathBuf::from("/usr/lib/debug"))
    }

    /// A symbolizer that looks for separate debug info under `debug_dir/.build-id/`.
    pub fn with_debug_dir(debug_dir: PathBuf) -> Symbolizer {
        Symbolizer {
            debug_dir,
            modules: HashMap::new(),
            resolved: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The count of addresses looked up so far, which grows as the symbolizer works.
    pub fn resolved(&self) -> Arc<AtomicU64> {
        self.resolved.clone()
    }

    /// The source frames for `address`, innermost first. `module` is `None` when the address
    /// lies in no known module (it is then absolute).
    pub fn symbolize(
        &mut self,
        module: Option<&ModuleInfo>,
        address: CodeAddress,
    ) -> Rc<[SourceFrame]> {
        let Some(module) = module.filter(|m| !m.path.is_empty()) else {
            let label = format!("[unknown] {:#x}", address.recorded());
            return Rc::from(vec![SourceFrame::label(label)]);
        };
        let key = (module.path.clone(), module.build_id.clone());
        let debug_dir = &self.debug_dir;
        self.resolved.fetch_add(1, Ordering::Relaxed);
        self.modules
            .entry(key)
            .or_insert_with(|| ModuleSymbols::open(module, debug_dir))
            .symbolize(address)
    }
}

impl Symbolizer {
    /// The global or static variable at `offset` (an ELF virtual address) of `module`: its
    /// demangled name (without a Rust hash) and the offset into it; `None` when no sized
    /// data symbol covers it (heap and stack memory, stripped modules).
    pub fn data_symbol(&mut self, module: &ModuleInfo, offset: u64) -> Option<(String, u64)> {
        if module.path.is_empty() {
            return None;
        }
        let key = (module.path.clone(), module.build_id.clone());
        let debug_dir = &self.debug_dir;
        let symbols = self
            .modules
            .entry(key)
            .or_insert_with(|| ModuleSymbols::open(module, debug_dir));
        let ModuleSymbols::Loaded(m) = symbols else {
            return None;
        };
        let (raw, within) = m.symbols.find_data(offset)?;
        let name = demangle_symbol(raw);
        Some((strip_rust_hash(&name).to_owned(), within))
    }
}

/// A symbol table name, demangled if it is mangled: only C++ (`_Z…`) and Rust (`_ZN…E`,
/// `_R…`) names are. A C name is kept as written: short ones are valid C++ *type*
/// encodings that a demangler would otherwise turn into types (`m` into "unsigned long",
/// `rw` into "wchar_t restrict", `f` into "float").
fn demangle_symbol(raw: &str) -> String {
    if raw.starts_with("_Z") || raw.starts_with("__Z") || raw.starts_with("_R") {
        addr2line::demangle_auto(raw.into(), None).into_owned()
    } else {
        raw.to_owned()
    }
}

/// `a::b::h0123456789abcdef` without its `::h…` hash (legacy Rust mangling).
fn strip_rust_hash(name: &str) -> &str {
    match name.rsplit_once("::h") {
        Some((head, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            head
        }
        _ => name,
    }
}

/// What is known about one module file.
enum ModuleSymbols {
    /// A pseudo-module without a file, such as `[vdso]`: every frame is its name.
    Pseudo(Rc<[SourceFrame]>),
    /// The file cannot be used; frames get `prefix` + `name+0xoffset`.
    Unreadable {
        prefix: &'static str,
        name: String,
    },
    Loaded(Box<LoadedModule>),
}

struct LoadedModule {
    name: String,
    /// DWARF and symbols: the module itself, or its separate debug file.
    debug: addr2line::Loader,
    /// Function symbols of the module and of its separate debug file.
    symbols: SymbolTable,
    cache: HashMap<CodeAddress, Rc<[SourceFrame]>>,
}

impl ModuleSymbols {
    fn open(module: &ModuleInfo, debug_dir: &Path) -> ModuleSymbols {
        let name = module_name(&module.path).to_owned();
        if module.path.starts_with('[') {
            return ModuleSymbols::Pseudo(Rc::from(vec![SourceFrame::label(module.path.clone())]));
        }
        let Some(facts) = FileFacts::read(Path::new(&module.path)) else {
            return ModuleSymbols::Unreadable { prefix: "", name };
        };
        if !module.build_id.is_empty() && facts.build_id != module.build_id {
            return ModuleSymbols::Unreadable {
                prefix: "[module changed since recording] ",
                name,
            };
        }
        let module_path = Path::new(&module.path);
        let separate = (!facts.has_dwarf)
            .then(|| {
                build_id_debug_file(debug_dir, &facts.build_id).or_else(|| {
                    let link = facts.debuglink.as_ref()?;
                    debuglink_file(module_path, debug_dir, link)
                })
            })
            .flatten();
        let (debug_path, symbols) = match &separate {
            Some(debug_file) => (
                debug_file.as_path(),
                SymbolTable::read(&[module_path, debug_file]),
            ),
            None => (module_path, SymbolTable::read(&[module_path])),
        };
        match addr2line::Loader::new(debug_path).ok() {
            Some(debug) => ModuleSymbols::Loaded(Box::new(LoadedModule {
                name,
                debug,
                symbols,
                cache: HashMap::new(),
            })),
            None => ModuleSymbols::Unreadable { prefix: "", name },
        }
    }

    fn symbolize(&mut self, address: CodeAddress) -> Rc<[SourceFrame]> {
        match self {
            ModuleSymbols::Pseudo(frames) => frames.clone(),
            ModuleSymbols::Unreadable { prefix, name } => Rc::from(vec![SourceFrame::label(
                format!("{prefix}{name}+{:#x}", address.recorded()),
            )]),
            ModuleSymbols::Loaded(m) => {
                if let Some(hit) = m.cache.get(&address) {
                    return hit.clone();
                }
                let frames: Rc<[SourceFrame]> = Rc::from(m.resolve(address));
                m.cache.insert(address, frames.clone());
                frames
            }
        }
    }
}

impl LoadedModule {
    fn resolve(&self, address: CodeAddress) -> Vec<SourceFrame> {
        let probe = address.lookup();
        let mut frames = self.dwarf_frames(probe);
        if frames.is_empty() {
            frames.push(SourceFrame::label(String::new()));
        }
        // No DWARF, or DWARF that knows a location but not its function (assembly, missing
        // DIEs): name the function from the symbol table, else by address. DWARF may also
        // name a C++ member only by its bare name (`_M_run`); the linker's name is qualified.
        let outermost = frames.last_mut().expect("at least one frame");
        if outermost.function.is_empty() {
            // Without a name, a function is known by where it starts (unwind tables), so
            // all its addresses add up in one row; failing that, by the address itself.
            outermost.function = self.symbol_name(probe).unwrap_or_else(|| {
                let start = self.symbols.function_start(probe);
                format!("{}+{:#x}", self.name, start.unwrap_or(address.recorded()))
            });
        } else if !outermost.function.contains("::") {
            if let Some(qualified) = self.symbol_name(probe).filter(|n| n.contains("::")) {
                outermost.function = qualified;
            }
        }
        frames
    }

    /// Frames from DWARF, innermost first; empty when DWARF does not cover `probe`.
    fn dwarf_frames(&self, probe: u64) -> Vec<SourceFrame> {
        let mut frames = Vec::new();
        let Ok(mut iter) = self.debug.find_frames(probe) else {
            return frames;
        };
        while let Ok(Some(frame)) = iter.next() {
            let function = frame
                .function
                .as_ref()
                .and_then(|f| f.demangle().ok())
                .map(|name| name.into_owned())
                .unwrap_or_default();
            let (file, line) = frame
                .location
                .map(|l| (l.file.map(str::to_owned), l.line))
                .unwrap_or_default();
            frames.push(SourceFrame {
                function,
                file,
                line,
                inlined: true,
            });
        }
        if let Some(last) = frames.last_mut() {
            last.inlined = false;
        }
        // Inlined frames without a name cannot be told apart; fold them into their caller.
        frames.retain(|f| !(f.inlined && f.function.is_empty()));
        frames
    }

    fn symbol_name(&self, probe: u64) -> Option<String> {
        let raw = self.symbols.find(probe)?;
        Some(demangle_symbol(raw))
    }
}

/// Facts read from a module file's headers.
struct FileFacts {
    build_id: Vec<u8>,
    has_dwarf: bool,
    /// `.gnu_debuglink`: the separate debug file's name and its CRC32.
    debuglink: Option<(PathBuf, u32)>,
}

impl FileFacts {
    /// Reads only the headers and notes it needs, through a read cache (no mapping).
    fn read(path: &Path) -> Option<FileFacts> {
        use object::{Object, ObjectSection};
        let file = std::fs::File::open(path).ok()?;
        let cache = object::read::ReadCache::new(file);
        let obj = object::File::parse(&cache).ok()?;
        use std::os::unix::ffi::OsStrExt;
        Some(FileFacts {
            build_id: obj.build_id().ok().flatten().unwrap_or_default().to_vec(),
            has_dwarf: obj
                .section_by_name(".debug_info")
                .is_some_and(|s| s.size() > 0),
            debuglink: obj
                .gnu_debuglink()
                .ok()
                .flatten()
                .map(|(name, crc)| (PathBuf::from(std::ffi::OsStr::from_bytes(name)), crc)),
        })
    }
}

/// `<debug_dir>/.build-id/xx/yyyy.debug` for a build-id, when that file exists.
fn build_id_debug_file(debug_dir: &Path, build_id: &[u8]) -> Option<PathBuf> {
    let (first, rest) = build_id.split_first()?;
    let rest: String = rest.iter().map(|b| format!("{b:02x}")).collect();
    let path = debug_dir
        .join(".build-id")
        .join(format!("{first:02x}"))
        .join(format!("{rest}.debug"));
    path.is_file().then_some(path)
}

/// The separate debug file `.gnu_debuglink` names for the module at `module`: `name` in
/// the module's directory, in its `.debug/` directory, or under `debug_dir` followed by the
/// module's directory (GDB's order); the first whose CRC32 is `crc`.
fn debuglink_file(
    module: &Path,
    debug_dir: &Path,
    (name, crc): &(PathBuf, u32),
) -> Option<PathBuf> {
    // A bare file name: a link naming a path elsewhere is not followed; and a module
    // known by an absolute path (not one relative to wherever the report runs).
    if name.components().count() != 1 || !module.is_absolute() {
        return None;
    }
    let dir = module.parent()?;
    let candidates = [
        dir.join(name),
        dir.join(".debug").join(name),
        debug_dir
            .join(dir.strip_prefix("/").unwrap_or(dir))
            .join(name),
    ];
    candidates
        .into_iter()
        .filter(|p| p.as_path() != module && p.is_file())
        .find(|p| crc32_of(p) == Some(*crc))
}

/// The CRC32 (as `.gnu_debuglink` records it) of a file's contents, read in pieces.
fn crc32_of(path: &Path) -> Option<u32> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    let mut hasher = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Some(hasher.finalize()),
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

/// The file name of a module path, for labels.
pub fn module_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
#[path = "symbolize_tests.rs"]
mod tests;
