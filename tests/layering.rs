//! The measurement crate's layering, checked on its sources (docs/architecture.md): no file
//! imports another that imports it back, however long the chain; the lock mechanism
//! (`src/locks`, but its `policy/`) never imports the sampler; the sampler never imports the
//! lock policy or the lifecycle. (Crossing crates is the compiler's job: the analysis
//! cannot import the measurement, which is not its dependency.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The measurement crate's modules: module path (`locks::policy::record`) -> file.
fn modules() -> BTreeMap<String, PathBuf> {
    let mut found = BTreeMap::new();
    for (root, dir) in [
        ("sampler", "sampler"),
        ("locks", "locks"),
        ("unwind", "unwind"),
    ] {
        collect(&src().join(dir), root, &mut found);
    }
    for leaf in ["lifecycle", "sys", "runtime_lock"] {
        found.insert(leaf.to_string(), src().join(format!("measure/{leaf}.rs")));
    }
    found
}

fn collect(dir: &Path, prefix: &str, out: &mut BTreeMap<String, PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("source directory") {
        let path = entry.expect("directory entry").path();
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            collect(&path, &format!("{prefix}::{stem}"), out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let name = match stem.as_str() {
                "mod" => prefix.to_string(),
                _ => format!("{prefix}::{stem}"),
            };
            out.insert(name, path);
        }
    }
}

/// The modules a file's non-test code names through `crate::` or `super::` paths,
/// resolved to the longest known module path.
fn imports(module: &str, file: &Path, known: &BTreeMap<String, PathBuf>) -> BTreeSet<String> {
    let text = std::fs::read_to_string(file).expect("source file");
    let code: String = text
        .split("#[cfg(test)]")
        .next()
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    // `super` is the module's parent, whether its file is a `mod.rs` or not.
    let base = module
        .rsplit_once("::")
        .map_or(String::new(), |(p, _)| p.to_string());
    let mut found = BTreeSet::new();
    for (prefix, root) in [("crate::", String::new()), ("super::", base)] {
        for (i, _) in code.match_indices(prefix) {
            let after = &code[i + prefix.len()..];
            let path: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let full = if root.is_empty() {
                path.clone()
            } else {
                format!("{root}::{path}")
            };
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
                    paths.push(format!("{full}::{member}"));
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
    found
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let known = modules();
    known
        .iter()
        .map(|(m, f)| (m.clone(), imports(m, f, &known)))
        .collect()
}

/// A module path's parents are not imports of it (a `mod.rs` declares its children).
fn is_ancestor(a: &str, b: &str) -> bool {
    b.starts_with(&format!("{a}::"))
}

#[test]
fn no_file_imports_one_that_imports_it_back() {
    let g = graph();
    assert!(g.len() > 40, "found only {} modules", g.len());
    // Depth-first search for a cycle among the edges between distinct, unrelated modules.
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(pos) = stack.iter().position(|s| s == m) {
            return Some(stack[pos..].to_vec());
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
    for m in g.keys() {
        if let Some(cycle) = visit(m, &g, &mut Vec::new(), &mut done) {
            panic!("import loop: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn tiers_import_only_downwards() {
    let g = graph();
    let mut wrong = Vec::new();
    for (m, deps) in &g {
        let mechanism = m.starts_with("locks") && !m.starts_with("locks::policy");
        for d in deps {
            let bad = (mechanism && (d.starts_with("sampler") || d.starts_with("locks::policy")))
                || (m.starts_with("sampler")
                    && (d.starts_with("locks::policy") || d == "lifecycle"))
                || (m.starts_with("unwind")
                    && (d.starts_with("sampler") || d.starts_with("locks")));
            if bad {
                wrong.push(format!("{m} imports {d}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the tiers:\n{}",
        wrong.join("\n")
    );
    // The check sees real imports: the policy uses the sampler.
    assert!(g["locks::policy::record"].contains("sampler::sync_sample"));
}
