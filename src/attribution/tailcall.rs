//! Recovering a caller that a tail call removed from the stack.
//!
//! Job: a function whose last act is `pthread_mutex_unlock(&m)` is compiled, at -O2, to a
//! *jump* to it: when the unlock runs, that function's frame is gone, and the stack says the
//! unlock was called by the function's own caller. Blame would land one level too high. The
//! return address on the stack still points after the caller's `call` instruction; when that
//! is a direct `call rel32` whose target is a function of the same module (not a PLT stub
//! standing for the lock function itself), that target is the function that tail-called the
//! lock function, and it is put back in the path.
//!
//! Only a target that is exactly the start of a known function (symbol or unwind-table
//! entry) is accepted, so a coincidental 0xE8 byte never invents a frame.
//!
//! Not async-signal-safe (reads files); used by the analysis.

use object::{Object, ObjectSection, SectionKind};
use std::collections::HashMap;
use std::path::Path;

/// Code sections and PLT ranges of one module, read from its file.
struct ModuleCode {
    /// (start address, bytes) of executable sections.
    text: Vec<(u64, Vec<u8>)>,
    /// Address ranges of PLT sections (calls there stand for imported functions).
    plt: Vec<(u64, u64)>,
    /// Sorted function start addresses (symbols and unwind-table entries).
    starts: Vec<u64>,
}

impl ModuleCode {
    fn read(path: &Path) -> Option<ModuleCode> {
        let data = std::fs::read(path).ok()?;
        let obj = object::File::parse(&*data).ok()?;
        let mut text = Vec::new();
        let mut plt = Vec::new();
        for s in obj.sections() {
            let name = s.name().unwrap_or_default();
            if name.starts_with(".plt") {
                plt.push((s.address(), s.address() + s.size()));
            } else if s.kind() == SectionKind::Text {
                if let Ok(bytes) = s.data() {
                    text.push((s.address(), bytes.to_vec()));
                }
            }
        }
        let table = super::symtab::SymbolTable::read(&[path]);
        Some(ModuleCode {
            text,
            plt,
            starts: table.function_starts(),
        })
    }

    fn bytes(&self, address: u64, len: usize) -> Option<&[u8]> {
        self.text.iter().find_map(|(start, bytes)| {
            let offset = usize::try_from(address.checked_sub(*start)?).ok()?;
            bytes.get(offset..offset.checked_add(len)?)
        })
    }

    /// The function a direct call ending at `return_address` called, if it is a real
    /// function of this module (not a PLT stub).
    fn direct_callee(&self, return_address: u64) -> Option<u64> {
        let call = self.bytes(return_address.checked_sub(5)?, 5)?;
        if call[0] != 0xE8 {
            return None;
        }
        let rel = i32::from_le_bytes(call[1..5].try_into().ok()?);
        let target = return_address.wrapping_add_signed(i64::from(rel));
        let in_plt = self.plt.iter().any(|&(s, e)| (s..e).contains(&target));
        let is_function = self.starts.binary_search(&target).is_ok();
        (!in_plt && is_function).then_some(target)
    }
}

/// Per-module call-site decoder, caching each module's code.
#[derive(Default)]
pub struct CallSites {
    modules: HashMap<String, Option<ModuleCode>>,
}

impl CallSites {
    /// For a return address (module-relative) in the module at `path`: the function its call
    /// instruction called directly, when that function is absent from the recorded path
    /// because it tail-called the next frame.
    pub fn tail_called(&mut self, path: &str, return_address: u64) -> Option<u64> {
        if path.starts_with('[') {
            return None;
        }
        self.modules
            .entry(path.to_owned())
            .or_insert_with(|| ModuleCode::read(Path::new(path)))
            .as_ref()?
            .direct_callee(return_address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A program where `insert` tail-calls an external function and `main` calls `insert`.
    fn build() -> Option<std::path::PathBuf> {
        let dir = std::env::temp_dir().join(format!("bp-tailcall-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let src = dir.join("t.c");
        std::fs::write(
            &src,
            "#include <pthread.h>\n\
             static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;\n\
             int counter;\n\
             __attribute__((noinline)) int insert(void) { pthread_mutex_lock(&m); counter++; return pthread_mutex_unlock(&m); }\n\
             int main(void) { int r = insert(); __asm__ volatile(\"\" ::: \"memory\"); return r; }\n",
        )
        .ok()?;
        let exe = dir.join("t");
        let ok = std::process::Command::new("gcc")
            .args(["-O2", "-g", "-pthread", "-o"])
            .arg(&exe)
            .arg(&src)
            .status()
            .ok()?
            .success();
        ok.then_some(exe)
    }

    #[test]
    fn finds_the_function_that_tail_called_and_ignores_plt_calls() {
        let exe = build().expect("gcc builds the test program");
        let code = ModuleCode::read(&exe).unwrap();
        let table = super::super::symtab::SymbolTable::read(&[&exe]);
        let name_at = |a: u64| table.find(a).map(str::to_owned);
        // Every direct call site in the text: find the one in main that calls insert.
        let mut found_insert = false;
        let mut saw_plt_call = false;
        for (start, bytes) in &code.text {
            for i in 0..bytes.len().saturating_sub(5) {
                let ret = start + i as u64 + 5;
                if bytes[i] != 0xE8 || name_at(ret - 1).is_none() {
                    continue;
                }
                let rel = i32::from_le_bytes(bytes[i + 1..i + 5].try_into().unwrap());
                let target = ret.wrapping_add_signed(i64::from(rel));
                match code.direct_callee(ret) {
                    Some(t) if name_at(t).as_deref() == Some("insert") => found_insert = true,
                    None if code.plt.iter().any(|&(s, e)| (s..e).contains(&target)) => {
                        saw_plt_call = true
                    }
                    _ => {}
                }
            }
        }
        assert!(found_insert, "main's call to insert is recognised");
        assert!(
            saw_plt_call,
            "calls through the PLT are not taken for tail calls"
        );
    }
}
