//! `cargo install --path .` gives one working binary: the runtime library is built with it
//! and embedded, so the installed `blameprof` profiles a program with nothing else present
//! (no library next to it, no `BLAMEPROF_RUNTIME`, a fresh home directory).
//!
//! The install builds into `target/install-test` (its own target directory: the test's
//! own build holds the lock of `target/`): a full release build the first time, a few
//! seconds when nothing changed.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Installs the workspace's `blameprof` under `prefix` with `cargo install`.
fn cargo_install(prefix: &Path) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["install", "--locked", "--path"])
        .arg(root)
        .arg("--root")
        .arg(prefix)
        .env("CARGO_TARGET_DIR", root.join("target").join("install-test"));
    let run = run_with_timeout(&mut cmd, Duration::from_secs(1800));
    assert!(
        run.status.success(),
        "cargo install failed\n{}",
        run.describe()
    );
}

/// Every file under `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                found.push(p);
            }
        }
    }
    found
}

#[test]
fn cargo_install_gives_one_binary_that_profiles_with_nothing_else_present() {
    let dir = scratch_dir("install");
    let prefix = dir.join("prefix");
    cargo_install(&prefix);
    let installed = prefix.join("bin").join("blameprof");
    let libraries: Vec<PathBuf> = files(&prefix)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "so"))
        .collect();
    assert!(
        installed.is_file() && libraries.is_empty(),
        "the install holds {:?}",
        files(&prefix)
    );

    // A contended program, run by the installed binary alone: a fresh HOME, no override.
    let program = compile_c("three_holders.c", "install_three_holders", &[]);
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let out = dir.join("profile");
    let mut cmd = Command::new(&installed);
    cmd.env_remove("BLAMEPROF_RUNTIME")
        .env_remove("XDG_CACHE_HOME")
        .env("HOME", &home)
        .arg("run")
        .arg("-q")
        .arg("-o")
        .arg(&out)
        .arg("--")
        .arg(&program)
        .args(["1", "3", "2"]);
    let run = run_with_timeout(&mut cmd, RUN_TIMEOUT);
    assert!(run.status.success(), "{}", run.describe());
    let cached: Vec<PathBuf> = files(&home.join(".cache").join("blameprof"));
    assert_eq!(
        cached.len(),
        1,
        "one library in the user's cache: {cached:?}"
    );
    assert!(cached[0].ends_with("libblameprof_rt.so"), "{cached:?}");

    // The profile holds the blame of each holder, as the program measured it.
    let t = truth(&run.stdout);
    let flat = report_json_metric(&out, "blame.mutex", &["--view", "flat"]);
    for f in ["hold_1ms", "hold_2ms", "hold_3ms"] {
        let want = t[&format!("blame_{f}_ns")] as f64;
        let got = flat_metric(&flat, f, "blame.mutex").0 as f64;
        assert!(
            (got - want).abs() <= 0.2 * want,
            "{f}: blame {got} ns, the program measured {want} ns"
        );
    }

    // A second run uses the same file (the same inode); a damaged one is written again.
    use std::os::unix::fs::MetadataExt;
    let inode = std::fs::metadata(&cached[0]).unwrap().ino();
    let run = run_with_timeout(&mut cmd, RUN_TIMEOUT);
    assert!(run.status.success(), "{}", run.describe());
    assert_eq!(std::fs::metadata(&cached[0]).unwrap().ino(), inode);
    std::fs::write(&cached[0], b"damaged").unwrap();
    let run = run_with_timeout(&mut cmd, RUN_TIMEOUT);
    assert!(run.status.success(), "{}", run.describe());
    let len = std::fs::metadata(&cached[0]).unwrap().len();
    assert!(
        len > 100_000,
        "the damaged library was rewritten ({len} bytes)"
    );
    let again = report_json_metric(&out, "blame.mutex", &["--view", "flat"]);
    assert!(flat_metric(&again, "hold_3ms", "blame.mutex").0 > 0);
}
