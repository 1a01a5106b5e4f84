//! ELF symbol tables with sizes: which function, if any, contains an address.
//!
//! Job: answer "which symbol covers this address" from `.symtab` and `.dynsym` of a module
//! (and of its separate debug file), honouring symbol sizes. A nearest-preceding lookup
//! would name an unrelated exported function for code in a stripped library's local
//! functions; here an address outside every sized symbol has no name, and the caller labels
//! it `module+0xoffset` instead.
//!
//! Not async-signal-safe (reads files, allocates).

use object::{Object, ObjectSymbol, SymbolKind};
use std::path::Path;

/// Function symbols of one module, sorted by address.
#[derive(Debug, Default)]
pub struct SymbolTable {
    /// (start, size, raw name); size 0 = unknown extent.
    symbols: Vec<(u64, u64, String)>,
}

impl SymbolTable {
    /// Reads the function symbols of every file in `paths` (missing files are skipped).
    pub fn read(paths: &[&Path]) -> SymbolTable {
        let mut symbols = Vec::new();
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
            for sym in obj.symbols().chain(obj.dynamic_symbols()) {
                if sym.kind() != SymbolKind::Text || sym.address() == 0 {
                    continue;
                }
                if let Ok(name) = sym.name() {
                    if !name.is_empty() {
                        symbols.push((sym.address(), sym.size(), name.to_owned()));
                    }
                }
            }
        }
        symbols.sort();
        // Prefer, at one address, the entry with a known size.
        symbols.dedup_by(|later, earlier| later.0 == earlier.0 && (earlier.1 > 0 || later.1 == 0));
        SymbolTable { symbols }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_outside_sized_symbols_have_no_name() {
        let table = SymbolTable {
            symbols: vec![(0x100, 0x10, "f".into()), (0x200, 0x20, "g".into())],
        };
        assert_eq!(table.find(0x105), Some("f"));
        assert_eq!(table.find(0x110), None, "just past f");
        assert_eq!(
            table.find(0x150),
            None,
            "a gap, e.g. a stripped local function"
        );
        assert_eq!(table.find(0x21f), Some("g"));
        assert_eq!(table.find(0x50), None);
    }

    #[test]
    fn reads_sized_function_symbols_of_a_real_binary() {
        let exe = std::env::current_exe().unwrap();
        let table = SymbolTable::read(&[&exe]);
        let (start, size, name) = table
            .symbols
            .iter()
            .find(|(_, size, name)| *size > 1 && name.contains("reads_sized_function_symbols"))
            .expect("this test function is in the symbol table");
        assert_eq!(table.find(start + size / 2), Some(name.as_str()));
    }
}
