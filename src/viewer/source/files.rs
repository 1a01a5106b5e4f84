//! The source files of `report --source`: each file its debug information names, read from
//! where it was recorded or next to the module (tabs expanded, its age against the
//! module's checked), and the lines a function's own code spans, from the module's DWARF.
//!
//! Invariants: a file that cannot be read is described (where it was looked for, why not),
//! never an error here: the listing decides.
//!
//! Not async-signal-safe (allocates, does I/O).

use std::io;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

/// Tab stops of source text.
const TAB_STOP: usize = 8;

/// A source file as found (or not) for the listing.
#[derive(Debug, Default)]
pub(super) struct SourceFile {
    /// Where its text was read from; `None`: nowhere.
    pub(super) read_from: Option<PathBuf>,
    /// Where it was looked for, in order.
    pub(super) looked_in: Vec<PathBuf>,
    /// Why the first path could not be read, when it could not.
    pub(super) error: Option<String>,
    /// Its lines, tabs expanded (empty when not found).
    pub(super) lines: Vec<String>,
    /// It was modified after the module: its lines may not match the code any more.
    pub(super) newer_than_module: bool,
}

/// Reads the source file the debug information recorded as `recorded`: at that path when
/// it is absolute, then next to the module files `modules` (the recorded path under a
/// module's directory, and its file name there), then (a relative path) under the current
/// directory.
pub(super) fn read_source(recorded: &str, modules: &[&str]) -> SourceFile {
    let path = Path::new(recorded);
    let mut looked_in: Vec<PathBuf> = Vec::new();
    let mut candidate = |p: PathBuf| {
        if !looked_in.contains(&p) {
            looked_in.push(p);
        }
    };
    if path.is_absolute() {
        candidate(path.to_path_buf());
    }
    let dirs = modules
        .iter()
        .filter_map(|m| Path::new(m).parent())
        .filter(|d| d.is_absolute());
    for dir in dirs {
        if path.is_relative() {
            candidate(dir.join(path));
        }
        if let Some(name) = path.file_name() {
            candidate(dir.join(name));
        }
    }
    if path.is_relative() {
        candidate(path.to_path_buf());
    }
    let mut file = SourceFile::default();
    for p in &looked_in {
        match std::fs::read(p) {
            Ok(bytes) => {
                file.lines = String::from_utf8_lossy(&bytes)
                    .lines()
                    .map(expand_tabs)
                    .collect();
                file.newer_than_module = newer_than_any(p, modules);
                file.read_from = Some(p.clone());
                break;
            }
            Err(e) if file.error.is_none() => {
                file.error = Some(match e.kind() {
                    io::ErrorKind::NotFound => "not found".to_owned(),
                    _ => e.to_string(),
                })
            }
            Err(_) => {}
        }
    }
    file.looked_in = looked_in;
    file
}

/// Whether `source` was modified after every one of the `modules` files that exist (and
/// there is one).
fn newer_than_any(source: &Path, modules: &[&str]) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let Some(source) = modified(source) else {
        return false;
    };
    let built: Vec<_> = modules
        .iter()
        .filter_map(|m| modified(Path::new(m)))
        .collect();
    !built.is_empty() && built.iter().all(|&b| source > b)
}

/// `line` with tabs expanded to [`TAB_STOP`] columns and other control characters shown as
/// spaces, so that the columns of the listing stay aligned.
fn expand_tabs(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut column = 0;
    for c in line.chars() {
        match c {
            '\t' => {
                let n = TAB_STOP - column % TAB_STOP;
                out.extend(std::iter::repeat(' ').take(n));
                column += n;
            }
            c if c.is_control() => {
                out.push(' ');
                column += 1;
            }
            c => {
                out.push(c);
                column += 1;
            }
        }
    }
    out
}

/// The first and last lines of `file` at which the code of the function `function` of the
/// module at `module` is (its own lines, not those of callees inlined into it), from the
/// module's symbol table and DWARF line table. `None` when the module, the symbol (a
/// function inlined everywhere has none) or the debug information is missing.
pub(super) fn body_lines(module: &str, function: &str, file: &str) -> Option<RangeInclusive<u32>> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let opened = std::fs::File::open(module).ok()?;
    // SAFETY: a read-only private mapping, dropped before returning; a file truncated
    // meanwhile by another process could fault, as for any mapped debug file.
    let map = unsafe { memmap2::Mmap::map(&opened) }.ok()?;
    let elf = object::File::parse(&*map).ok()?;
    let named = |raw: &str| {
        let name = addr2line::demangle_auto(raw.into(), None);
        // GCC's clones: `f.constprop.0`, `f.part.0`, `f(int) [clone .isra.0]`.
        name.strip_prefix(function).is_some_and(|rest| {
            rest.is_empty() || rest.starts_with('.') || rest.starts_with(" [clone .")
        })
    };
    let ranges: Vec<(u64, u64)> = elf
        .symbols()
        .chain(elf.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
        .filter(|s| s.name().is_ok_and(named))
        .map(|s| (s.address(), s.address() + s.size()))
        .collect();
    if ranges.is_empty() {
        return None;
    }
    let dwarf = addr2line::Loader::new(module).ok()?;
    let mut lines: Option<(u32, u32)> = None;
    for (start, end) in ranges {
        let Ok(rows) = dwarf.find_location_range(start, end) else {
            continue;
        };
        for (address, _, _) in rows {
            if let Some(line) = own_line(&dwarf, address, file) {
                lines = Some(lines.map_or((line, line), |(a, b)| (a.min(line), b.max(line))));
            }
        }
    }
    lines.map(|(first, last)| first..=last)
}

/// The line of `file` at which the outermost function at `address` is (the call site of
/// the callees inlined there); `None` when it is in another file or unknown.
fn own_line(dwarf: &addr2line::Loader, address: u64, file: &str) -> Option<u32> {
    let mut frames = dwarf.find_frames(address).ok()?;
    let mut outermost = None;
    while let Ok(Some(frame)) = frames.next() {
        outermost = frame.location;
    }
    let location = outermost?;
    (location.file? == file)
        .then_some(location.line?)
        .filter(|&l| l > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tabs_expand_to_stops_of_eight() {
        assert_eq!(expand_tabs("\tx"), "        x");
        assert_eq!(expand_tabs("ab\tc\td"), "ab      c       d");
        assert_eq!(expand_tabs("a\u{c}b"), "a b");
    }
}
