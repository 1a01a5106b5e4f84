//! ELF symbol tables with sizes: which function, if any, contains an address, and which
//! data object (a global or static variable: a lock's name in the lock view).
//!
//! Job: answer "which symbol covers this address" from `.symtab` and `.dynsym` of a module
//! (and of its separate debug file), honouring symbol sizes. A nearest-preceding lookup
//! would name an unrelated exported function for code in a stripped library's local
//! functions; here an address outside every sized symbol has no name. For such code the
//! table still knows where the *function* starts, from the unwind tables (`.eh_frame` has
//! one entry per function, stripped or not), so the caller can label all of a nameless
//! function's addresses alike, `module+0xSTART`, instead of one row per address.
//!
//! Not async-signal-safe (reads files, allocates).

use object::{Object, ObjectSymbol, SymbolKind};
use std::path::Path;

/// Function symbols of one module, sorted by address.
#[derive(Debug, Default)]
pub struct SymbolTable {
    /// (start, size, raw name); size 0 = unknown extent.
    symbols: Vec<(u64, u64, String)>,
    /// (start, end) of every function described by `.eh_frame`, sorted.
    functions: Vec<(u64, u64)>,
    /// Sized data objects: (start, size, raw name), sorted.
    data: Vec<(u64, u64, String)>,
}

impl SymbolTable {
    /// Reads the function symbols of every file in `paths` (missing files are skipped).
    pub fn read(paths: &[&Path]) -> SymbolTable {
        let mut symbols = Vec::new();
        let mut functions = Vec::new();
        let mut data = Vec::new();
        for path in paths {
            let Ok(file) = std::fs::File::open(path) else {
                continue;
            };
            // SAFETY: the mapping is read-only and private; module files are not expected
            // to change while a report runs (a changed build-id is refused earlier).
            let Ok(map) = (unsafe { memmap2::Mmap::map(&file) }) else {
                continue;
            };
            let Ok(obj) = object::File::parse(&*map) else {
                continue;
            };
            if functions.is_empty() {
                functions = eh_frame_functions(&obj);
            }
            for sym in obj.symbols().chain(obj.dynamic_symbols()) {
                let list = match sym.kind() {
                    SymbolKind::Text => &mut symbols,
                    SymbolKind::Data if sym.size() > 0 => &mut data,
                    _ => continue,
                };
                if sym.address() == 0 {
                    continue;
                }
                if let Ok(name) = sym.name() {
                    if !name.is_empty() {
                        list.push((sym.address(), sym.size(), name.to_owned()));
                    }
                }
            }
        }
        symbols.sort();
        // Prefer, at one address, the entry with a known size.
        symbols.dedup_by(|later, earlier| later.0 == earlier.0 && (earlier.1 > 0 || later.1 == 0));
        functions.sort_unstable();
        data.sort();
        data.dedup_by(|later, earlier| later.0 == earlier.0);
        SymbolTable {
            symbols,
            functions,
            data,
        }
    }

    /// The data object containing `address`: its raw name, and the offset into it.
    pub fn find_data(&self, address: u64) -> Option<(&str, u64)> {
        let i = self.data.partition_point(|s| s.0 <= address);
        self.data[..i]
            .iter()
            .rev()
            .take(8)
            .find(|(start, size, _)| address < start.saturating_add(*size))
            .map(|(start, _, name)| (name.as_str(), address - start))
    }

    /// Every known function start (symbols and unwind-table entries), sorted, deduplicated.
    pub fn function_starts(&self) -> Vec<u64> {
        let mut starts: Vec<u64> = self
            .symbols
            .iter()
            .map(|s| s.0)
            .chain(self.functions.iter().map(|f| f.0))
            .collect();
        starts.sort_unstable();
        starts.dedup();
        starts
    }

    /// Start of the function containing `address`, from the unwind tables.
    pub fn function_start(&self, address: u64) -> Option<u64> {
        let i = self.functions.partition_point(|f| f.0 <= address);
        let (start, end) = *self.functions.get(i.checked_sub(1)?)?;
        (address < end).then_some(start)
    }

    /// The raw (mangled) name of the function containing `address`.
    pub fn find(&self, address: u64) -> Option<&str> {
        let i = self.symbols.partition_point(|s| s.0 <= address);
        // Symbols may nest (aliases, local labels): look back over those starting at or
        // before `address` for one whose extent covers it.
        self.symbols[..i]
            .iter()
            .rev()
            .take(8)
            .find(|(start, size, _)| *size > 0 && address < start + size)
            .map(|(_, _, name)| name.as_str())
    }
}

/// (start, end) of each FDE in the module's `.eh_frame`.
fn eh_frame_functions(obj: &object::File) -> Vec<(u64, u64)> {
    use gimli::UnwindSection;
    use object::ObjectSection;
    let Some(section) = obj.section_by_name(".eh_frame") else {
        return Vec::new();
    };
    let Ok(data) = section.data() else {
        return Vec::new();
    };
    let endian = if obj.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let mut eh_frame = gimli::EhFrame::new(data, endian);
    eh_frame.set_address_size(if obj.is_64() { 8 } else { 4 });
    let mut bases = gimli::BaseAddresses::default().set_eh_frame(section.address());
    if let Some(text) = obj.section_by_name(".text") {
        bases = bases.set_text(text.address());
    }
    if let Some(got) = obj.section_by_name(".got") {
        bases = bases.set_got(got.address());
    }
    let mut functions = Vec::new();
    let mut entries = eh_frame.entries(&bases);
    // Bounded by the section's size: every entry consumes bytes.
    while let Ok(Some(entry)) = entries.next() {
        if let gimli::CieOrFde::Fde(partial) = entry {
            if let Ok(fde) =
                partial.parse(|section, bases, offset| section.cie_from_offset(bases, offset))
            {
                if fde.len() > 0 {
                    functions.push((fde.initial_address(), fde.initial_address() + fde.len()));
                }
            }
        }
    }
    functions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_outside_sized_symbols_have_no_name() {
        let table = SymbolTable {
            symbols: vec![(0x100, 0x10, "f".into()), (0x200, 0x20, "g".into())],
            functions: vec![(0x100, 0x110), (0x140, 0x180)],
            data: vec![
                (0x1000, 0x28, "lock".into()),
                (0x1040, 0x400, "buckets".into()),
            ],
        };
        assert_eq!(table.find_data(0x1000), Some(("lock", 0)));
        assert_eq!(table.find_data(0x1030), None, "between objects");
        assert_eq!(table.find_data(0x1040 + 0x140), Some(("buckets", 0x140)));
        assert_eq!(table.find(0x105), Some("f"));
        assert_eq!(table.find(0x110), None, "just past f");
        assert_eq!(
            table.find(0x150),
            None,
            "a gap, e.g. a stripped local function"
        );
        assert_eq!(table.find(0x21f), Some("g"));
        assert_eq!(table.find(0x50), None);
        // ...but the unwind tables still tell which function the gap belongs to.
        assert_eq!(table.function_start(0x150), Some(0x140));
        assert_eq!(table.function_start(0x120), None);
    }

    #[test]
    fn reads_sized_function_symbols_of_a_real_binary() {
        let exe = std::env::current_exe().unwrap();
        let table = SymbolTable::read(&[&exe]);
        // Any sizeable function of this test binary (names change with inlining and LTO).
        let (start, size, name) = table
            .symbols
            .iter()
            .find(|(_, size, _)| *size > 16)
            .expect("the test binary has sized function symbols");
        assert_eq!(table.find(start + size / 2), Some(name.as_str()));
        assert_eq!(table.function_start(start + size / 2), Some(*start));
    }
}
