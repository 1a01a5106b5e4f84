//! The runtime library `blameprof run` preloads: embedded in this binary when it is built
//! (`build.rs`), and written once per user, per build, to a private cache from which the
//! program's loader maps it.
//!
//! Job: give `run` the path of a file whose bytes are exactly the embedded library, named
//! `libblameprof_rt.so` (reports recognise the runtime's frames by that name), or the
//! library `BLAMEPROF_RUNTIME` names.
//!
//! Invariants: the cache is `$XDG_CACHE_HOME/blameprof` (else `~/.cache/blameprof`), with
//! one directory per build, `runtime-<hash of the library>`; both are directories of this
//! user's, not links, writable by nobody else, or nothing is written there. A file already
//! there is used only if it is a regular file of this user's with exactly the embedded
//! bytes; any other is replaced. A new file is written under a unique temporary name and
//! renamed into place, so that concurrent runs never see half a library and a program
//! already running keeps the one it mapped. So the library is never stale: a new build has
//! a new hash, and a damaged file is rewritten. Old builds' directories stay (a few MiB
//! each); removing `~/.cache/blameprof` is always safe between runs.

use crate::format::protocol::RUNTIME_LIBRARY;
use anyhow::{anyhow, bail, Context};
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Overrides the embedded runtime library.
const ENV_RUNTIME: &str = "BLAMEPROF_RUNTIME";

/// The runtime library, as built with this binary.
static EMBEDDED: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libblameprof_rt.so"));
/// Its hash (`build.rs`), which names its cache directory.
const HASH: &str = env!("BLAMEPROF_RUNTIME_HASH");

/// The runtime library to preload: `$BLAMEPROF_RUNTIME`, else the embedded one, written to
/// the cache if it is not there yet. Its real path, which ends in `libblameprof_rt.so`.
pub fn runtime_path() -> anyhow::Result<PathBuf> {
    match std::env::var_os(ENV_RUNTIME) {
        Some(p) => overridden(PathBuf::from(p)),
        None => {
            let base = cache_base().ok_or_else(|| {
                anyhow!(
                    "cannot place the runtime library: neither HOME nor XDG_CACHE_HOME is \
                     set: set one of them, or point {ENV_RUNTIME} at {RUNTIME_LIBRARY}"
                )
            })?;
            cached(&base, HASH, EMBEDDED)
        }
    }
}

/// The library `BLAMEPROF_RUNTIME` names, checked.
fn overridden(path: PathBuf) -> anyhow::Result<PathBuf> {
    if !path.is_file() {
        bail!(
            "{ENV_RUNTIME}={} does not name a file: point it at {RUNTIME_LIBRARY}, or unset it \
             to use the one built into blameprof",
            path.display()
        );
    }
    let real = std::fs::canonicalize(&path).unwrap_or(path);
    // The program loads the library by this path, and the analysis knows the runtime's
    // frames (to fold them into the lock function the program called) by its file name:
    // under another name its internals would show up in the program's call paths.
    if real.file_name() != Some(std::ffi::OsStr::new(RUNTIME_LIBRARY)) {
        bail!(
            "the runtime library {} is not named {RUNTIME_LIBRARY} (the name reports recognise \
             its frames by): copy or rename it to a file of that name",
            real.display()
        );
    }
    Ok(real)
}

/// `$XDG_CACHE_HOME/blameprof` when that is an absolute path (the XDG rule), else
/// `$HOME/.cache/blameprof` when `$HOME` is this user's (under `sudo`, which keeps the
/// invoking user's `HOME`, root must not create files in it), else
/// `/tmp/blameprof-<uid>` (checked like any cache directory).
fn cache_base() -> Option<PathBuf> {
    if let Some(xdg) = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
    {
        return Some(xdg.join("blameprof"));
    }
    let me = nix::unistd::geteuid().as_raw();
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .filter(|h| std::fs::metadata(h).is_ok_and(|m| m.uid() == me));
    Some(match home {
        Some(home) => home.join(".cache").join("blameprof"),
        None => std::env::temp_dir().join(format!("blameprof-{me}")),
    })
}

/// The path of `bytes` as `RUNTIME_LIBRARY` in `base/runtime-<hash>`, written if missing or
/// different.
fn cached(base: &Path, hash: &str, bytes: &[u8]) -> anyhow::Result<PathBuf> {
    if let Some(parent) = base.parent() {
        std::fs::create_dir_all(parent).with_context(|| {
            format!(
                "cannot create the cache directory {}: make it writable, or set \
                 XDG_CACHE_HOME or {ENV_RUNTIME}",
                parent.display()
            )
        })?;
    }
    private_dir(base)?;
    let dir = base.join(format!("runtime-{hash}"));
    private_dir(&dir)?;
    let path = dir.join(RUNTIME_LIBRARY);
    // LD_PRELOAD splits its list at spaces and colons: such a path would not be loaded.
    if path
        .to_str()
        .map_or(true, |p| p.contains([' ', ':', '\t', '\n']))
    {
        bail!(
            "the cache directory {} has a space, colon or non-UTF-8 byte in its path, which \
             LD_PRELOAD cannot carry: set XDG_CACHE_HOME to a plain path, or point \
             {ENV_RUNTIME} at a copy of {RUNTIME_LIBRARY}",
            dir.display()
        );
    }
    if !holds(&path, bytes) {
        write_new(&dir, &path, bytes)?;
    }
    refuse_noexec(&dir)?;
    Ok(path)
}

/// Makes `dir` (mode 0700) unless it exists; either way it must be a directory of this
/// user's, not a link, that nobody else can write to.
fn private_dir(dir: &Path) -> anyhow::Result<()> {
    match DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(anyhow!(
                "cannot create the cache directory {}: {e}: make its parent writable, or set \
                 XDG_CACHE_HOME or {ENV_RUNTIME}",
                dir.display()
            ))
        }
    }
    let meta = std::fs::symlink_metadata(dir)
        .with_context(|| format!("cannot inspect the cache directory {}", dir.display()))?;
    let me = nix::unistd::geteuid().as_raw();
    if !meta.file_type().is_dir() || meta.uid() != me || meta.mode() & 0o022 != 0 {
        bail!(
            "{} is not a private directory of yours (a link, another user's, or writable by \
             others), so the runtime library is not written there: remove it, or set \
             XDG_CACHE_HOME or {ENV_RUNTIME}",
            dir.display()
        );
    }
    Ok(())
}

/// Whether `path` is a regular file of this user's, not a link, holding exactly `bytes`.
fn holds(path: &Path, bytes: &[u8]) -> bool {
    let Ok(mut file) = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    else {
        return false;
    };
    let Ok(meta) = file.metadata() else {
        return false;
    };
    let me = nix::unistd::geteuid().as_raw();
    if !meta.is_file() || meta.uid() != me || meta.len() != bytes.len() as u64 {
        return false;
    }
    let mut found = Vec::with_capacity(bytes.len());
    file.read_to_end(&mut found).is_ok() && found == bytes
}

/// Writes `bytes` to a new file in `dir` and renames it to `path`.
fn write_new(dir: &Path, path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let cannot = |e: std::io::Error| {
        anyhow!(
            "cannot write the runtime library to {}: {e}: free some space or make it \
             writable, or set XDG_CACHE_HOME or {ENV_RUNTIME}",
            dir.display()
        )
    };
    // A name of our own: another run (in another pid namespace sharing this directory)
    // may be writing one of the same name; a file this run did not create is never removed.
    let (temp, mut file) = (0..16)
        .find_map(|attempt| {
            let temp = dir.join(format!(
                ".{RUNTIME_LIBRARY}.{}.{nanos}.{attempt}",
                std::process::id()
            ));
            let opened = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o700)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&temp);
            match opened {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => None,
                other => Some(other.map(|f: File| (temp, f))),
            }
        })
        .unwrap_or_else(|| Err(std::io::ErrorKind::AlreadyExists.into()))
        .map_err(cannot)?;
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&temp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(cannot(e));
    }
    Ok(())
}

/// Fails when `dir` lies on a file system mounted `noexec`: the loader could not map the
/// library from there, and would run the program unprofiled with only a warning.
fn refuse_noexec(dir: &Path) -> anyhow::Result<()> {
    use nix::sys::statvfs::{statvfs, FsFlags};
    let stat = statvfs(dir).map_err(|e| {
        anyhow::anyhow!(
            "cannot inspect the file system of {}: {}",
            dir.display(),
            std::io::Error::from(e)
        )
    })?;
    if stat.flags().contains(FsFlags::ST_NOEXEC) {
        bail!(
            "the cache directory {} is on a file system mounted noexec, from which the \
             runtime library cannot be loaded: set XDG_CACHE_HOME to a directory elsewhere, or \
             point {ENV_RUNTIME} at a copy of {RUNTIME_LIBRARY}",
            dir.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "blameprof-runtime-file-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_library_is_written_once_privately_and_rewritten_when_damaged() {
        let dir = scratch("write");
        let base = dir.join("cache").join("blameprof");
        let bytes = b"\x7fELF not really a library".to_vec();
        let path = cached(&base, "0123", &bytes).unwrap();
        assert_eq!(path, base.join("runtime-0123").join(RUNTIME_LIBRARY));
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        for d in [&base, &base.join("runtime-0123")] {
            let mode = std::fs::metadata(d).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{} is private", d.display());
        }
        // Used again as it is (same inode), then rewritten when truncated.
        let inode = std::fs::metadata(&path).unwrap().ino();
        assert_eq!(cached(&base, "0123", &bytes).unwrap(), path);
        assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode);
        std::fs::write(&path, &bytes[..4]).unwrap();
        cached(&base, "0123", &bytes).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        // No temporary file is left behind.
        let entries = std::fs::read_dir(base.join("runtime-0123"))
            .unwrap()
            .count();
        assert_eq!(entries, 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_link_or_a_shared_directory_is_refused() {
        let dir = scratch("refuse");
        let elsewhere = dir.join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let base = dir.join("linked");
        std::os::unix::fs::symlink(&elsewhere, &base).unwrap();
        let err = cached(&base, "0123", b"x").unwrap_err().to_string();
        assert!(err.contains("not a private directory"), "{err}");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        let shared = dir.join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = cached(&shared, "0123", b"x").unwrap_err().to_string();
        assert!(err.contains("writable by others"), "{err}");
        // A link in place of the library is replaced, never followed.
        let base = dir.join("ok");
        let lib_dir = base.join("runtime-0123");
        std::fs::create_dir_all(&lib_dir).unwrap();
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::set_permissions(&lib_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let target = dir.join("target");
        std::fs::write(&target, b"keep").unwrap();
        std::os::unix::fs::symlink(&target, lib_dir.join(RUNTIME_LIBRARY)).unwrap();
        let path = cached(&base, "0123", b"library").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"library");
        assert!(!std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
