//! Checks made before launching a program under the profiler.
//!
//! Job: find the program the way `execvp` would, and refuse, with a message saying why and
//! what to do, anything `LD_PRELOAD` cannot work on: a missing or non-executable file, a
//! statically linked program, a setuid/setgid one (the loader ignores `LD_PRELOAD` for them).
//! Scripts are checked through their `#!` interpreter. Also checks the output path given with
//! `-o` ([`check_output`]). Not used by the runtime.
//!
//! Invariant of the output check: only a missing path or a directory of this user's holding
//! nothing but part files (regular files named as the runtime names them) is accepted, and a
//! symbolic link at the path is never followed, so replacing an old profile can only ever
//! remove that user's own part files.

use crate::format::protocol::PART_SUFFIX;
use std::ffi::OsStr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why a program cannot be profiled. Each message is one line naming the problem and fix.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("no command given: usage is 'blameprof run [OPTIONS] -- COMMAND [ARGS...]'")]
    NoCommand,
    #[error("unknown option '{0}' for 'blameprof run' (see 'blameprof run --help'; put the program after --)")]
    UnknownOption(String),
    #[error("command not found: '{0}' is in no directory of PATH (check the name, or give its path, e.g. ./{0} for a program in this directory)")]
    NotFound(String),
    #[error("no such file: '{0}' (check the path)")]
    NoSuchFile(String),
    #[error("'{0}' is not executable (make it executable with chmod +x, or check the path)")]
    NotExecutable(PathBuf),
    #[error("'{0}' is statically linked: LD_PRELOAD cannot inject the profiler into it; rebuild it as a dynamically linked program")]
    Static(PathBuf),
    #[error("'{0}' is setuid/setgid: the dynamic loader ignores LD_PRELOAD for such programs; profile a copy without the setuid/setgid bit")]
    Setuid(PathBuf),
}

impl LaunchError {
    /// Exit status, following the shell's conventions (127 not found, 126 cannot execute).
    pub fn exit_code(&self) -> i32 {
        match self {
            LaunchError::NoCommand | LaunchError::UnknownOption(_) => 2,
            LaunchError::NotFound(_) | LaunchError::NoSuchFile(_) => 127,
            _ => 126,
        }
    }
}

/// Why the path given with `-o` cannot hold the profile. One line each, naming the fix.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("output '{path}' is a symbolic link (to '{target}'): blameprof does not write through links; pass the path it points to, or a new path, with -o")]
    Symlink { path: PathBuf, target: PathBuf },
    #[error("output '{0}' exists and is not a directory: choose another path with -o")]
    NotADirectory(PathBuf),
    #[error(
        "output '{path}' belongs to another user (uid {owner}): choose a path of your own with -o"
    )]
    NotOwned { path: PathBuf, owner: u32 },
    #[error("output '{path}' exists and is not a blameprof profile (it holds '{entry}'): choose another path with -o, or move it away first")]
    NotAProfile { path: PathBuf, entry: String },
    #[error("cannot inspect output '{path}': {source}: choose another path with -o")]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What the path given with `-o` holds, once found fit for a profile.
#[derive(Debug, PartialEq, Eq)]
pub enum Output {
    /// Nothing yet.
    New,
    /// An old profile of this user's: a directory holding these part files and nothing else
    /// (none: an empty directory).
    OldProfile(Vec<PathBuf>),
}

/// Checks the output path of `blameprof run -o PATH`, without following a symbolic link at
/// `path` itself (links among its parent directories are followed as usual). Refuses a link,
/// anything but a directory, a directory of another user's, and a directory holding anything
/// but part files: a subdirectory or a link, even named like a part, is not one.
pub fn check_output(path: &Path) -> Result<Output, OutputError> {
    let unreadable = |source| OutputError::Unreadable {
        path: path.to_owned(),
        source,
    };
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Output::New),
        Err(e) => return Err(unreadable(e)),
    };
    if meta.file_type().is_symlink() {
        return Err(OutputError::Symlink {
            path: path.to_owned(),
            target: std::fs::read_link(path).map_err(unreadable)?,
        });
    }
    if !meta.is_dir() {
        return Err(OutputError::NotADirectory(path.to_owned()));
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Err(OutputError::NotOwned {
            path: path.to_owned(),
            owner: meta.uid(),
        });
    }
    let mut parts = Vec::new();
    for entry in std::fs::read_dir(path).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        // The entry's own type: a link is not followed.
        let regular = entry.file_type().is_ok_and(|t| t.is_file());
        if !regular || !is_part_name(&entry.file_name()) {
            return Err(OutputError::NotAProfile {
                path: path.to_owned(),
                entry: entry.file_name().to_string_lossy().into_owned(),
            });
        }
        parts.push(entry.path());
    }
    parts.sort();
    Ok(Output::OldProfile(parts))
}

/// Whether `name` is one the runtime gives parts: `<pid>.bpp` or `<pid>.<n>.bpp`.
fn is_part_name(name: &OsStr) -> bool {
    let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(PART_SUFFIX)) else {
        return false;
    };
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match stem.split_once('.') {
        Some((pid, generation)) => number(pid) && number(generation),
        None => number(stem),
    }
}

/// Resolves `command` like `execvp` and checks that it can be profiled.
pub fn check(command: &str) -> Result<PathBuf, LaunchError> {
    let path = resolve(command)?;
    check_file(&path, 0)?;
    Ok(path)
}

fn resolve(command: &str) -> Result<PathBuf, LaunchError> {
    if command.is_empty() {
        return Err(LaunchError::NoCommand);
    }
    if command.starts_with('-') {
        // clap hands everything after the first unknown word to COMMAND; no program is
        // named like an option, so this is a mistyped blameprof option.
        return Err(LaunchError::UnknownOption(command.to_string()));
    }
    if command.contains('/') {
        let p = PathBuf::from(command);
        return if p.exists() {
            Ok(p)
        } else {
            Err(LaunchError::NoSuchFile(command.to_string()))
        };
    }
    let search = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut found_non_exec = None;
    for dir in std::env::split_paths(&search) {
        let candidate = dir.join(command);
        if candidate.is_file() {
            if is_executable(&candidate) {
                return Ok(candidate);
            }
            found_non_exec.get_or_insert(candidate);
        }
    }
    match found_non_exec {
        Some(p) => Err(LaunchError::NotExecutable(p)),
        None => Err(LaunchError::NotFound(command.to_string())),
    }
}

fn is_executable(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn check_file(path: &Path, depth: u32) -> Result<(), LaunchError> {
    let meta = path
        .metadata()
        .map_err(|_| LaunchError::NoSuchFile(path.display().to_string()))?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(LaunchError::NotExecutable(path.to_owned()));
    }
    if meta.permissions().mode() & 0o6000 != 0 {
        return Err(LaunchError::Setuid(path.to_owned()));
    }
    let Ok(data) = std::fs::read(path) else {
        return Err(LaunchError::NotExecutable(path.to_owned()));
    };
    if let Some(rest) = data.strip_prefix(b"#!") {
        // A script: what runs is its interpreter.
        let line = rest.split(|&b| b == b'\n').next().unwrap_or_default();
        let line = String::from_utf8_lossy(line);
        if let Some(interp) = line.split_whitespace().next() {
            if depth < 4 {
                return check_file(Path::new(interp), depth + 1);
            }
        }
        return Ok(());
    }
    if is_static_elf(&data) {
        return Err(LaunchError::Static(path.to_owned()));
    }
    Ok(())
}

/// An ELF executable without a program interpreter never runs the dynamic loader.
fn is_static_elf(data: &[u8]) -> bool {
    use object::read::elf::{ElfFile64, FileHeader, ProgramHeader};
    let Ok(elf) = ElfFile64::<object::Endianness>::parse(data) else {
        return false;
    };
    let endian = elf.endian();
    let Ok(phdrs) = elf.elf_header().program_headers(endian, data) else {
        return false;
    };
    !phdrs
        .iter()
        .any(|p| p.p_type(endian) == object::elf::PT_INTERP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_names_are_the_runtimes() {
        for name in ["123.bpp", "123.1.bpp", "7.42.bpp"] {
            assert!(is_part_name(OsStr::new(name)), "{name}");
        }
        for name in [
            ".bpp",
            "x.bpp",
            "1.bpp.txt",
            "1..bpp",
            "1.2.3.bpp",
            "-1.bpp",
            "1.x.bpp",
        ] {
            assert!(!is_part_name(OsStr::new(name)), "{name}");
        }
    }

    #[test]
    fn finds_programs_on_path_and_accepts_dynamic_ones() {
        let sh = check("sh").expect("sh is a dynamically linked program on PATH");
        assert!(sh.is_absolute());
    }

    #[test]
    fn refuses_missing_and_non_executable() {
        assert!(matches!(
            check("no-such-program-xyz"),
            Err(LaunchError::NotFound(_))
        ));
        assert!(matches!(
            check("./no/such/file"),
            Err(LaunchError::NoSuchFile(_))
        ));
        let f = std::env::temp_dir().join(format!("bp-noexec-{}", std::process::id()));
        std::fs::write(&f, b"data").unwrap();
        assert!(matches!(
            check(f.to_str().unwrap()),
            Err(LaunchError::NotExecutable(_))
        ));
        std::fs::remove_file(f).unwrap();
    }
}
