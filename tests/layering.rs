//! The layering of every crate, checked on its sources (docs/architecture.md): within a
//! crate, no file imports another that imports it back, however long the chain; and no file
//! imports against the layer order. In the analysis crate the command line (`cli`) is above
//! the viewer, which is above the analysis (`attribution`). Between crates the compiler
//! keeps the order (a crate can import only its dependencies), and this test checks that
//! each crate depends only on those below it: the measurement's crates, lowest first,
//! `blameprof-sys`, `blameprof-unwind`, `blameprof-locks` (the lock mechanism),
//! `blameprof-sampler` and `blameprof-measure` (the lock policy and the lifecycle), then
//! the runtime; the analysis (`blameprof`) depends on none of them.
//!
//! What is read: a file's code without its comments and string literals, and without the
//! items marked `#[cfg(test)]` (a test module, a test-only helper or import), however far
//! into the file they are; modules declared `#[cfg(test)]` are left out whole.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One crate's modules: module path (`policy::record`) -> its code, as read.
type Modules = BTreeMap<String, String>;

/// The analysis crate (`src/lib.rs`): the analysis, the viewer and the command line.
fn analysis() -> Modules {
    let src = root().join("src");
    let mut found = Modules::new();
    for dir in ["attribution", "viewer", "cli"] {
        collect(&src.join(dir), dir, &mut found);
    }
    found
}

/// A crate whose root is `dir/lib.rs` and whose modules are the files below it.
fn crate_at(dir: &Path) -> Modules {
    let mut found = Modules::new();
    collect(dir, "", &mut found);
    found
}

fn collect(dir: &Path, prefix: &str, out: &mut Modules) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("source directory")
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        let join = |name: &str| match prefix {
            "" => name.to_string(),
            p => format!("{p}::{name}"),
        };
        if path.is_dir() {
            collect(&path, &join(&stem), out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let name = match stem.as_str() {
                "mod" | "lib" => prefix.to_string(),
                _ => join(&stem),
            };
            add(&path, &name, out);
        }
    }
    // Modules declared under `#[cfg(test)]` (and theirs) are test code.
    let test_only: Vec<String> = out
        .iter()
        .flat_map(|(m, text)| {
            test_modules(&strip_comments_and_strings(text))
                .map(|c| child(m, &c))
                .collect::<Vec<_>>()
        })
        .collect();
    out.retain(|m, _| {
        !test_only
            .iter()
            .any(|t| m == t || m.starts_with(&format!("{t}::")))
    });
}

fn child(module: &str, name: &str) -> String {
    match module {
        "" => name.to_string(),
        m => format!("{m}::{name}"),
    }
}

fn add(path: &Path, module: &str, out: &mut Modules) {
    let text = std::fs::read_to_string(path).expect("source file");
    out.insert(module.to_string(), text);
}

/// The names of the modules a file declares under `#[cfg(test)]`.
fn test_modules(code: &str) -> impl Iterator<Item = String> + '_ {
    code.match_indices("#[cfg(test)]")
        .filter_map(move |(i, a)| {
            let rest = skip_attributes(&code[i + a.len()..]);
            let rest = rest.strip_prefix("pub(crate) ").unwrap_or(rest);
            let rest = rest.strip_prefix("pub ").unwrap_or(rest);
            let name: String = rest
                .strip_prefix("mod ")?
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            Some(name)
        })
}

/// `text` after any further attributes and white space.
fn skip_attributes(mut text: &str) -> &str {
    loop {
        text = text.trim_start();
        if !text.starts_with("#[") {
            return text;
        }
        let mut depth = 0;
        for (i, c) in text.char_indices() {
            match c {
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        text = &text[i + 1..];
                        break;
                    }
                }
                _ => {}
            }
        }
    }
}

/// The code of a file with comments and the contents of string and character literals
/// blanked (so that braces and paths inside them are not read as code).
fn strip_comments_and_strings(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            i += end;
        } else if rest.starts_with("/*") {
            let end = rest.find("*/").map_or(rest.len(), |e| e + 2);
            i += end;
            out.push(' ');
        } else if rest.starts_with("r\"") || rest.starts_with("r#") || rest.starts_with("br\"") {
            let start = rest.find('r').unwrap() + 1;
            let hashes = rest[start..].chars().take_while(|&c| c == '#').count();
            if rest[start + hashes..].starts_with('"') {
                let close = format!("\"{}", "#".repeat(hashes));
                let body = start + hashes + 1;
                let end = rest[body..]
                    .find(&close)
                    .map_or(rest.len(), |e| body + e + close.len());
                i += end;
                out.push_str("\"\"");
            } else {
                out.push('r');
                i += 1;
            }
        } else if rest.starts_with('"') {
            let mut j = 1;
            while j < rest.len() {
                match rest.as_bytes()[j] {
                    b'\\' => j += 2,
                    b'"' => break,
                    _ => j += 1,
                }
            }
            i += (j + 1).min(rest.len());
            out.push_str("\"\"");
        } else if rest.starts_with('\'') {
            // A character literal ('x', '\n', '{'), else a lifetime.
            let chars: Vec<char> = rest.chars().take(12).collect();
            let len = if chars.get(1) == Some(&'\\') {
                chars[2..].iter().position(|&c| c == '\'').map(|p| p + 3)
            } else if chars.get(2) == Some(&'\'') {
                Some(3)
            } else {
                None
            };
            match len {
                Some(n) => {
                    i += chars[..n].iter().map(|c| c.len_utf8()).sum::<usize>();
                    out.push_str("' '");
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The code of a file without its comments, literals and `#[cfg(test)]` items.
fn code(text: &str) -> String {
    let text = strip_comments_and_strings(text);
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        rest = skip_item(skip_attributes(&rest[at + "#[cfg(test)]".len()..]));
    }
    out.push_str(rest);
    out
}

/// `text` after its first item: up to a `;` before any brace, or a balanced `{...}` block
/// (and the `;` a `{...}` initializer ends with).
fn skip_item(text: &str) -> &str {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            ';' if depth == 0 => return &text[i + 1..],
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    let after = &text[i + 1..];
                    return after.trim_start().strip_prefix(';').unwrap_or(after);
                }
            }
            _ => {}
        }
    }
    ""
}

/// The modules a module's code names through `crate::` or `super::` paths, resolved to the
/// longest known module path.
fn imports(module: &str, text: &str, known: &Modules) -> BTreeSet<String> {
    let code = code(text);
    let parent = |m: &str| {
        m.rsplit_once("::")
            .map_or(String::new(), |(p, _)| p.to_string())
    };
    let mut found = BTreeSet::new();
    for prefix in ["crate::", "super::"] {
        for (i, _) in code.match_indices(prefix) {
            // Not the tail of a longer name (`my_crate::`), nor a `super::` after `super::`.
            let before = code[..i].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut after = &code[i + prefix.len()..];
            let mut root = match prefix {
                "crate::" => String::new(),
                _ => parent(module),
            };
            while let Some(more) = after.strip_prefix("super::") {
                root = parent(&root);
                after = more;
            }
            let path: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let full = child(&root, &path);
            let full = full.trim_end_matches(':').to_string();
            // A group (`a::{b, c::D}`): each member is a path of its own.
            let mut paths = vec![full.clone()];
            if let Some(group) = after[path.len()..].strip_prefix('{') {
                let members = group.split('}').next().unwrap_or_default();
                for member in members.split(',') {
                    let member: String = member
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                        .collect();
                    paths.push(child(&full, &member));
                }
            }
            for mut candidate in paths {
                loop {
                    if known.contains_key(&candidate) && candidate != module {
                        found.insert(candidate);
                        break;
                    }
                    match candidate.rsplit_once("::") {
                        Some((p, _)) => candidate = p.to_string(),
                        None => break,
                    }
                }
            }
        }
    }
    found.remove("");
    found
}

type Graph = BTreeMap<String, BTreeSet<String>>;

fn graph(known: &Modules) -> Graph {
    known
        .iter()
        .map(|(m, text)| (m.clone(), imports(m, text, known)))
        .collect()
}

/// Every crate's import graph, by crate name.
fn crates() -> Vec<(&'static str, Graph)> {
    let mut all: Vec<(&'static str, Graph)> = CRATES
        .iter()
        .map(|&(name, dir)| (name, graph(&crate_at(&root().join(dir)))))
        .collect();
    all.push(("blameprof", graph(&analysis())));
    all
}

/// The crates of one folder each (their root `lib.rs` there), lowest first: each may depend
/// on those before it only.
const CRATES: [(&str, &str); 7] = [
    ("blameprof-format", "src/format"),
    ("blameprof-sys", "src/sys"),
    ("blameprof-unwind", "src/unwind"),
    ("blameprof-locks", "src/locks"),
    ("blameprof-sampler", "src/sampler"),
    ("blameprof-measure", "src/measure"),
    ("blameprof-runtime", "runtime/src"),
];

/// The workspace crates a crate's manifest depends on (its `[dependencies]` only).
fn workspace_dependencies(manifest: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(manifest).expect("manifest");
    let mut in_dependencies = false;
    let mut found = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
        } else if in_dependencies && line.starts_with("blameprof-") {
            found.push(
                line.split([' ', '='])
                    .next()
                    .unwrap_or_default()
                    .to_string(),
            );
        }
    }
    found
}

/// A module path's parents are not imports of it (a `mod.rs` declares its children).
fn is_ancestor(a: &str, b: &str) -> bool {
    a.is_empty() || b.starts_with(&format!("{a}::"))
}

/// A loop of imports among distinct, unrelated modules of `g`, if there is one.
fn find_loop(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        g: &Graph,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(pos) = stack.iter().position(|s| s == m) {
            let mut cycle = stack[pos..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        stack.push(m.to_string());
        for next in g.get(m).into_iter().flatten() {
            if is_ancestor(m, next) || is_ancestor(next, m) {
                continue;
            }
            if let Some(cycle) = visit(next, g, stack, done) {
                return Some(cycle);
            }
        }
        stack.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|m| visit(m, g, &mut Vec::new(), &mut done))
}

#[test]
fn no_file_imports_one_that_imports_it_back() {
    let crates = crates();
    for (name, g) in &crates {
        assert!(g.len() > 2, "{name}: found only {} modules", g.len());
        if let Some(cycle) = find_loop(g) {
            panic!("import loop in {name}: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn tiers_import_only_downwards() {
    let crates = crates();
    let mut wrong = Vec::new();
    let tier = |m: &str| {
        ["attribution", "viewer", "cli"]
            .iter()
            .position(|t| m == *t || m.starts_with(&format!("{t}::")))
    };
    for (name, g) in &crates {
        for (m, deps) in g {
            for d in deps {
                if *name == "blameprof" && tier(d) > tier(m) {
                    wrong.push(format!("{name}: {m} imports {d}"));
                }
            }
        }
    }
    // Between crates: each depends on crates below it only, and the analysis on none of
    // the measurement's.
    for (i, (name, dir)) in CRATES.iter().enumerate() {
        let manifest = match *dir {
            "runtime/src" => root().join("runtime/Cargo.toml"),
            d => root().join(d).join("Cargo.toml"),
        };
        for dep in workspace_dependencies(&manifest) {
            if !CRATES[..i].iter().any(|(below, _)| *below == dep) {
                wrong.push(format!("{name} depends on {dep}, not below it"));
            }
        }
    }
    for dep in workspace_dependencies(&root().join("Cargo.toml")) {
        if dep != "blameprof-format" {
            wrong.push(format!("blameprof depends on {dep}, a measurement crate"));
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the tiers:\n{}",
        wrong.join("\n")
    );
    // The check sees real imports: the policy uses the sampler, the CLI the viewer.
    let g = |name: &str| &crates.iter().find(|(n, _)| *n == name).unwrap().1;
    assert!(g("blameprof-sampler")["buffer"].contains("output"));
    assert!(g("blameprof-measure")["policy::record"].contains("policy::bookkeeping"));
    assert!(
        workspace_dependencies(&root().join("src/measure/Cargo.toml"))
            .contains(&"blameprof-sampler".to_string())
    );
    assert!(g("blameprof")["cli::report"].contains("viewer::locks"));
}

#[test]
fn test_items_are_skipped_and_the_rest_of_the_file_read() {
    let text = "use crate::a;\n#[cfg(test)]\nfn helper() { let _ = \"}\"; crate::b::f() }\n\
                use crate::c;\n#[cfg(test)]\nuse crate::d;\n#[cfg(test)]\nmod tests {\n use crate::e;\n}\n";
    let known: Modules = ["a", "b", "c", "d", "e", "m"]
        .iter()
        .map(|m| (m.to_string(), String::new()))
        .collect();
    let found: Vec<String> = imports("m", text, &known).into_iter().collect();
    assert_eq!(found, ["a", "c"]);
}
