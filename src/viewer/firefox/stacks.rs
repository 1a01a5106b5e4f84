//! The Firefox export's call paths: each sample's path as named frames (the symbolizer's,
//! inlined functions their own frames, a run of runtime frames the lock function the
//! program called), and the source file of each function, filled into the profile's
//! function tables afterwards.
//!
//! Invariants: a path is named once per (process image, stack, frame 0's kind); a function
//! name found in two files keeps none. Not async-signal-safe (allocates).

use crate::attribution::lock_sites::is_runtime_module;
use crate::attribution::symbolize::{CodeAddress, Symbolizer};
use crate::format::read::{ModuleInfo, ProcessProfile, Sample, StackId};
use crate::format::Frame;
use serde_json::Value;
use std::collections::HashMap;
use std::rc::Rc;

/// One source-level frame of a call path as the timeline shows it.
pub(super) struct Named {
    pub(super) function: Rc<str>,
    /// In the runtime library: the lock function the program called.
    pub(super) runtime: bool,
}

/// Call paths as named frames, root first, per (process index, stack, whether frame 0 is a
/// return address), and the source file of each function name (`None`: several).
pub(super) struct Stacks {
    symbolizer: Symbolizer,
    paths: HashMap<(usize, StackId, bool), Rc<[Named]>>,
    pub(super) files: HashMap<Rc<str>, Option<String>>,
}

impl Stacks {
    /// Paths named by `symbolizer` (the export's, warm from its analysis).
    pub(super) fn new(symbolizer: Symbolizer) -> Stacks {
        Stacks {
            symbolizer,
            paths: HashMap::new(),
            files: HashMap::new(),
        }
    }

    /// The symbolizer, given back to its owner.
    pub(super) fn into_symbolizer(self) -> Symbolizer {
        self.symbolizer
    }

    /// The call path of sample `s` of process `p` (`proc`), root first.
    pub(super) fn path(&mut self, p: usize, proc: &ProcessProfile, s: &Sample) -> Rc<[Named]> {
        let key = (p, s.stack, s.first_is_return());
        if let Some(path) = self.paths.get(&key) {
            return path.clone();
        }
        let path: Rc<[Named]> = self.expand(proc, proc.stacks.get(s.stack), key.2).into();
        self.paths.insert(key, path.clone());
        path
    }

    /// The named frames of `frames` (leaf first), root first: each run of runtime frames
    /// becomes its outermost function, left out when that is one of the runtime's own (a
    /// Rust path: the thread-start trampoline) unless the path ends in it.
    fn expand(
        &mut self,
        proc: &ProcessProfile,
        frames: &[Frame],
        first_is_return: bool,
    ) -> Vec<Named> {
        let label = |name: &str| Named {
            function: name.into(),
            runtime: false,
        };
        if frames.is_empty() {
            return vec![label("[no call path]")];
        }
        let mut out = Vec::new();
        let mut in_runtime = false;
        let mut internal_run = None;
        for (i, &frame) in frames.iter().enumerate().rev() {
            if frame == Frame::TRUNCATED {
                out.push(label("[truncated]"));
                (in_runtime, internal_run) = (false, None);
                continue;
            }
            let module = known_module(proc, frame);
            let runtime = module.is_some_and(|m| is_runtime_module(&m.path));
            let address = CodeAddress::of(frame.offset, i > 0 || first_is_return);
            let chain = self.symbolizer.symbolize(module, address);
            if runtime {
                if !in_runtime {
                    let entry = chain.last().map_or("[runtime]", |f| f.function.as_str());
                    let named = Named {
                        function: entry.into(),
                        runtime: true,
                    };
                    match entry.contains("::") {
                        true => internal_run = Some(named),
                        false => out.push(named),
                    }
                }
            } else {
                internal_run = None;
                for source in chain.iter().rev() {
                    let function: Rc<str> = source.function.as_str().into();
                    self.note_file(&function, source.file.as_deref());
                    out.push(Named {
                        function,
                        runtime: false,
                    });
                }
            }
            in_runtime = runtime;
        }
        out.extend(internal_run);
        out
    }

    /// Records that `function` is in `file`; a name found in two files keeps none.
    fn note_file(&mut self, function: &Rc<str>, file: Option<&str>) {
        let Some(file) = file else {
            return;
        };
        match self.files.get(function) {
            None => {
                self.files.insert(function.clone(), Some(file.to_owned()));
            }
            Some(Some(known)) if known != file => {
                self.files.insert(function.clone(), None);
            }
            Some(_) => {}
        }
    }
}

/// The module of `frame`, when it lies in one the process recorded.
pub(super) fn known_module(proc: &ProcessProfile, frame: Frame) -> Option<&ModuleInfo> {
    (frame.module != 0)
        .then(|| proc.module(frame.module))
        .flatten()
}

/// The function that called the lock function in `path` (the innermost runtime frame's
/// caller; the leaf when there is none).
pub(super) fn lock_caller(path: &[Named]) -> &str {
    let at = match path.iter().rposition(|n| n.runtime) {
        Some(i) => i.checked_sub(1),
        None => path.len().checked_sub(1),
    };
    at.map_or("", |i| &path[i].function)
}

/// Fills each thread's `funcTable.fileName` (string indices, `null` when unknown) from
/// `files`, by function name: fxprof-processed-profile 0.8 writes none for label frames.
pub(super) fn add_file_names(doc: &mut Value, files: &HashMap<Rc<str>, Option<String>>) {
    let Some(threads) = doc.get_mut("threads").and_then(Value::as_array_mut) else {
        return;
    };
    for thread in threads.iter_mut().filter_map(Value::as_object_mut) {
        let Some(Value::Array(mut strings)) = thread.get_mut("stringArray").map(Value::take) else {
            continue;
        };
        if let Some(funcs) = thread.get_mut("funcTable").and_then(Value::as_object_mut) {
            let names = funcs.get("name").and_then(Value::as_array);
            let file_names = names.map(|names| file_column(names, &mut strings, files));
            if let Some(column) = file_names {
                funcs.insert("fileName".to_owned(), Value::Array(column));
            }
        }
        thread.insert("stringArray".to_owned(), Value::Array(strings));
    }
}

/// The `fileName` column of a function table whose `name` column is `names` (indices into
/// `strings`, to which the file names are added).
pub(super) fn file_column(
    names: &[Value],
    strings: &mut Vec<Value>,
    files: &HashMap<Rc<str>, Option<String>>,
) -> Vec<Value> {
    let mut added: HashMap<String, usize> = HashMap::new();
    let file_of = |name: &Value, strings: &[Value]| {
        let name = name
            .as_u64()
            .and_then(|i| strings.get(usize::try_from(i).ok()?));
        name.and_then(Value::as_str)
            .and_then(|n| files.get(n))
            .and_then(Option::clone)
    };
    names
        .iter()
        .map(|name| match file_of(name, strings) {
            Some(file) => {
                let at = *added.entry(file).or_insert_with_key(|file| {
                    strings.push(Value::String(file.clone()));
                    strings.len() - 1
                });
                Value::from(at)
            }
            None => Value::Null,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_fill_the_function_tables() {
        let mut doc = serde_json::json!({"threads": [{
            "stringArray": ["main", "lookup", "shared"],
            "funcTable": {"name": [0, 1, 2, 0], "fileName": [null, null, null, null]}
        }]});
        let files: HashMap<Rc<str>, Option<String>> = [
            ("main".into(), Some("app.c".to_owned())),
            ("shared".into(), None),
        ]
        .into_iter()
        .collect();
        add_file_names(&mut doc, &files);
        let thread = &doc["threads"][0];
        assert_eq!(
            thread["funcTable"]["fileName"],
            serde_json::json!([3, null, null, 3])
        );
        assert_eq!(thread["stringArray"][3], "app.c");
    }

    #[test]
    fn a_function_found_in_two_files_keeps_none() {
        let mut stacks = Stacks::new(Symbolizer::new());
        let name: Rc<str> = "helper".into();
        stacks.note_file(&name, Some("a.h"));
        stacks.note_file(&name, Some("a.h"));
        assert_eq!(stacks.files[&name], Some("a.h".to_owned()));
        stacks.note_file(&name, Some("b.h"));
        stacks.note_file(&name, Some("a.h"));
        assert_eq!(stacks.files[&name], None);
    }
}
