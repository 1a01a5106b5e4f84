//! Builds the runtime library (`runtime/`, the cdylib `blameprof run` preloads) and hands it
//! to the CLI to embed, so that one binary is all a user installs (`cargo install --path .`).
//!
//! Cargo cannot depend on a cdylib as an artifact (unstable), so this script runs Cargo
//! again, for the `blameprof-runtime` package of this workspace, with a target directory of
//! its own (the outer build holds the lock of its own one): `<target>/<profile>/
//! embedded-runtime`. That build is incremental, and Cargo itself decides whether anything
//! changed; it shares the outer build's jobserver, so it never runs more jobs than asked.
//!
//! Output: `$OUT_DIR/libblameprof_rt.so`, and `BLAMEPROF_RUNTIME_HASH` (FNV-1a, 64 bits, of
//! its bytes, in hex), which names the per-user cache directory it is written to at run time
//! (`src/cli/runtime_file.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;

const PACKAGE: &str = "blameprof-runtime";
const LIBRARY: &str = "libblameprof_rt.so";

fn main() {
    let root = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env("OUT_DIR"));
    for watched in ["runtime", "src", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    // OUT_DIR is <target>[/<triple>]/<profile dir>/build/<package>-<hash>/out; the profile
    // directory is named for the profile ("debug" for dev).
    let profile_dir = out
        .ancestors()
        .nth(3)
        .expect("OUT_DIR lies under the target directory");
    let dir_name = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .expect("the profile directory has a name");
    let profile = if dir_name == "debug" { "dev" } else { dir_name };
    let target_dir = profile_dir.join("embedded-runtime");
    let built = build_runtime(&root, &target_dir, profile, dir_name);
    let bytes = std::fs::read(&built).unwrap_or_else(|e| {
        panic!(
            "cannot read the runtime just built, {}: {e}",
            built.display()
        )
    });
    std::fs::write(out.join(LIBRARY), &bytes)
        .unwrap_or_else(|e| panic!("cannot copy the runtime into {}: {e}", out.display()));
    println!(
        "cargo:rustc-env=BLAMEPROF_RUNTIME_HASH={:016x}",
        fnv1a(&bytes)
    );
}

/// Runs `cargo build -p blameprof-runtime` with `profile`, for the target this build is
/// for, into `target_dir`; the library's path (`dir_name`: the profile's directory).
fn build_runtime(root: &Path, target_dir: &Path, profile: &str, dir_name: &str) -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target = env("TARGET");
    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .arg("--package")
        .arg(PACKAGE)
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir)
        .arg("--profile")
        .arg(profile)
        .arg("--target")
        .arg(&target);
    if std::env::var("CARGO_NET_OFFLINE").is_ok_and(|v| v == "true") {
        cmd.arg("--offline");
    }
    // Settings meant for the outer build only: its target directory, the flags Cargo
    // encoded for it (the inner Cargo reads the user's own RUSTFLAGS and configuration
    // itself), and a linter or coverage tool run on the outer build's crates.
    for var in [
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET_DIR",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CLIPPY_ARGS",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build the runtime library: {e}"));
    assert!(
        status.success(),
        "building the runtime library ({PACKAGE}) failed: see its errors above"
    );
    target_dir.join(target).join(dir_name).join(LIBRARY)
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("cargo sets {name} for build scripts"))
}

/// FNV-1a, 64 bits: names the runtime's cache directory (not a security measure: the
/// directory is the user's own, and its file is compared byte for byte before use).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
