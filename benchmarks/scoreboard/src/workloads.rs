//! Finding and building the workloads: `*.c` and `*.rs` files of a directory
//! (`benchmarks/workloads/`), compiled into `target/scoreboard/bin` when the binary is older
//! than its source or than any shared header (`tests/programs/*.h`, `*.h` next to the source).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use anyhow::{bail, Context, Result};

/// Workloads whose name starts with this are scale workloads (`scale_locks`): no truth lines,
/// run only by the scale section.
pub const SCALE_PREFIX: &str = "scale_";

/// Workloads whose name starts with this count their own contended acquisitions
/// (`fidelity_trylock`): no truth lines, run only by the contention-fidelity section.
pub const FIDELITY_PREFIX: &str = "fidelity_";

/// One workload program.
#[derive(Debug, Clone)]
pub struct Workload {
    /// File stem: `lockheavy` for `lockheavy.c`.
    pub name: String,
    pub source: PathBuf,
    pub binary: PathBuf,
}

impl Workload {
    pub fn is_scale(&self) -> bool {
        self.name.starts_with(SCALE_PREFIX)
    }

    pub fn is_fidelity(&self) -> bool {
        self.name.starts_with(FIDELITY_PREFIX)
    }
}

/// The workloads in `dir` (sorted by name) that `only` selects (all when empty), binaries
/// to be placed in `bin_dir`. An error if `only` names one that does not exist.
pub fn discover(dir: &Path, bin_dir: &Path, only: &[String]) -> Result<Vec<Workload>> {
    let mut found = Vec::new();
    let entries = fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?;
    for entry in entries {
        let path = entry?.path();
        let ext = path.extension().and_then(|e| e.to_str());
        if !matches!(ext, Some("c" | "rs")) {
            continue;
        }
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        found.push(Workload {
            name: name.to_string(),
            binary: bin_dir.join(name),
            source: path.clone(),
        });
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    for w in found.windows(2) {
        if w[0].name == w[1].name {
            bail!("two workloads named {} in {}", w[0].name, dir.display());
        }
    }
    for name in only {
        if !found.iter().any(|w| &w.name == name) {
            bail!("no workload named {name} in {}", dir.display());
        }
    }
    if !only.is_empty() {
        found.retain(|w| only.contains(&w.name));
    }
    Ok(found)
}

fn mtime(path: &Path) -> Option<SystemTime> {
    fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// The newest modification time among `paths` and the `*.h` files of `dirs`.
fn newest_input(source: &Path, header_dirs: &[&Path]) -> Option<SystemTime> {
    let mut newest = mtime(source)?;
    for dir in header_dirs {
        let Ok(entries) = fs::read_dir(dir) else {
            continue;
        };
        for path in entries.flatten().map(|e| e.path()) {
            if path.extension().is_some_and(|e| e == "h") {
                newest = newest.max(mtime(&path).unwrap_or(newest));
            }
        }
    }
    Some(newest)
}

/// Compiles `w` unless its binary is newer than its inputs; `root` is the repository root
/// (for `-I tests/programs`). Returns whether it was (re)built.
pub fn build(w: &Workload, root: &Path) -> Result<bool> {
    let include = root.join("tests/programs");
    let source_dir = w.source.parent().unwrap_or(Path::new("."));
    let inputs = newest_input(&w.source, &[&include, source_dir])
        .with_context(|| format!("cannot stat {}", w.source.display()))?;
    if mtime(&w.binary).is_some_and(|b| b > inputs) {
        return Ok(false);
    }
    if let Some(dir) = w.binary.parent() {
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut cmd = if w.source.extension().is_some_and(|e| e == "rs") {
        let mut c = Command::new("rustc");
        c.args([
            "--edition",
            "2021",
            "-O",
            "-C",
            "debuginfo=line-tables-only",
        ])
        .args(["-C", "force-frame-pointers=yes", "-o"])
        .arg(&w.binary)
        .arg(&w.source);
        c
    } else {
        let mut c = Command::new("gcc");
        c.args(["-O2", "-g", "-pthread", "-fno-omit-frame-pointer", "-I"])
            .arg(&include)
            .arg(&w.source)
            .arg("-o")
            .arg(&w.binary)
            .arg("-lm");
        c
    };
    let out = cmd
        .output()
        .with_context(|| format!("cannot run the compiler for {}", w.name))?;
    if !out.status.success() {
        bail!(
            "building {} failed:\n{}",
            w.source.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(true)
}
