//! Checks made before launching a program under the profiler.
//!
//! Job: find the program the way `execvp` would, and refuse, with a message saying why and
//! what to do, anything `LD_PRELOAD` cannot work on: a missing or non-executable file, a
//! statically linked program, a setuid/setgid one (the loader ignores `LD_PRELOAD` for them).
//! Scripts are checked through their `#!` interpreter. Not used by the runtime.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Why a program cannot be profiled. Each message is one line naming the problem and fix.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("no command given: usage is 'blameprof run [OPTIONS] -- COMMAND [ARGS...]'")]
    NoCommand,
    #[error("unknown option '{0}' for 'blameprof run' (see 'blameprof run --help'; put the program after --)")]
    UnknownOption(String),
    #[error("command not found: '{0}' (check the name, or give a path such as ./{0})")]
    NotFound(String),
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
            LaunchError::NotFound(_) => 127,
            _ => 126,
        }
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
            Err(LaunchError::NotFound(command.to_string()))
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
        .map_err(|_| LaunchError::NotFound(path.display().to_string()))?;
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
            Err(LaunchError::NotFound(_))
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
