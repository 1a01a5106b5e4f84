//! `blameprof run -o DIR`: where the profile may go, and with what permissions.
//!
//! A new directory is created 0700 and the runtime's part files 0600 (only the user can
//! read a profile: it holds command lines, paths and code addresses). An old profile of the
//! user's is replaced, and only when it holds nothing but part files; anything else at DIR
//! is refused with one line naming the fix, and left exactly as it was: a regular file, a
//! directory with other files, a subdirectory or link named like a part, another user's
//! directory, and a symbolic link at DIR (to a profile, to a file, or dangling), which is
//! never followed, with or without a trailing slash.

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use common::*;

/// `blameprof run -o out -- sh -c CMD`.
fn run_sh(out: &Path, cmd: &str) -> Run {
    profile_run(out, 200, Path::new("sh"), &["-c", cmd], &[])
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("stat {}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// Every entry of `dir` by name, with its content for files and its target for links: what
/// a refused run must leave unchanged.
fn snapshot(dir: &Path) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            let what = if t.is_symlink() {
                format!("-> {}", fs::read_link(e.path()).unwrap().display())
            } else if t.is_dir() {
                format!("dir {:?}", snapshot(&e.path()))
            } else {
                String::from_utf8_lossy(&fs::read(e.path()).unwrap()).into_owned()
            };
            (e.file_name().to_string_lossy().into_owned(), what)
        })
        .collect();
    v.sort();
    v
}

/// Asserts `run` was refused cleanly with a message containing each of `says`.
fn assert_refused(run: &Run, what: &str, says: &[&str]) {
    assert_clean_error(run, what);
    for s in says.iter().chain(&["-o"]) {
        assert!(
            run.stderr.contains(s),
            "{what}: the error should say {s:?}\n{}",
            run.describe()
        );
    }
}

/// A profile of `sh -c 'true; true'` (sh and its children: a part each) in a new directory.
fn fresh_profile(name: &str) -> PathBuf {
    let out = scratch_dir(name).join("prof");
    let run = run_sh(&out, "/bin/true; /bin/true");
    assert!(run.status.success(), "{}", run.describe());
    out
}

/// The directory is 0700 and every part 0600, whatever the umask allows beyond that.
///
/// The parts' mode is set by the runtime (`src/sampler/output.rs`, which opens them 0600).
#[test]
fn new_profile_directory_and_parts_are_private() {
    let out = fresh_profile("private");
    assert_eq!(mode(&out), 0o700, "profile directory mode");
    let parts = part_files(&out);
    assert!(parts.len() >= 2, "sh and its children: {parts:?}");
    for part in &parts {
        assert_eq!(mode(part), 0o600, "mode of {}", part.display());
    }
}

/// An old profile is replaced: its parts are gone, the new run's are there, and the
/// directory is private even if it was not before.
#[test]
fn old_profile_is_replaced() {
    let out = fresh_profile("replace");
    let old = part_files(&out);
    fs::set_permissions(&out, fs::Permissions::from_mode(0o755)).unwrap();
    let run = run_sh(&out, "/bin/true");
    assert!(run.status.success(), "{}", run.describe());
    let new = part_files(&out);
    assert!(!new.is_empty(), "no parts written");
    assert!(
        new.iter().all(|p| !old.contains(p)),
        "old parts left: {old:?} / {new:?}"
    );
    assert_eq!(mode(&out), 0o700);
    // An empty directory is a profile with no parts yet.
    let empty = scratch_dir("replace-empty").join("prof");
    fs::create_dir(&empty).unwrap();
    let run = run_sh(&empty, "/bin/true");
    assert!(run.status.success(), "{}", run.describe());
    assert_eq!(mode(&empty), 0o700);
    assert!(!part_files(&empty).is_empty(), "no parts written");
}

/// A directory holding anything but part files is refused and left alone: another file, a
/// subdirectory named like a part (with a file inside), a link named like a part.
#[test]
fn directory_with_other_files_is_refused() {
    let base = scratch_dir("not-a-profile");
    let outside = base.join("precious.txt");
    fs::write(&outside, "not yours to delete").unwrap();
    type Setup = fn(&Path, &Path);
    let cases: [(&str, &str, Setup); 3] = [
        ("notes.txt", "a text file", |dir, _| {
            fs::write(dir.join("notes.txt"), "my notes").unwrap()
        }),
        ("7.bpp", "a subdirectory named like a part", |dir, _| {
            fs::create_dir(dir.join("7.bpp")).unwrap();
            fs::write(dir.join("7.bpp").join("inside"), "kept").unwrap();
        }),
        ("8.bpp", "a link named like a part", |dir, outside| {
            std::os::unix::fs::symlink(outside, dir.join("8.bpp")).unwrap()
        }),
    ];
    for (entry, what, setup) in cases {
        let out = fresh_profile("not-a-profile-case");
        setup(&out, &outside);
        let before = snapshot(&out);
        let run = run_sh(&out, "/bin/true");
        assert_refused(&run, what, &["not a blameprof profile", entry]);
        assert_eq!(snapshot(&out), before, "{what}: the directory was changed");
    }
    assert_eq!(fs::read_to_string(&outside).unwrap(), "not yours to delete");
}

/// A regular file at DIR is refused and unchanged.
#[test]
fn regular_file_is_refused() {
    let file = scratch_dir("file").join("prof");
    fs::write(&file, "a file").unwrap();
    let run = run_sh(&file, "/bin/true");
    assert_refused(&run, "a regular file", &["is not a directory"]);
    assert_eq!(fs::read_to_string(&file).unwrap(), "a file");
}

/// A symbolic link at DIR is refused, never followed: to an old profile (which would be
/// replaced), to a file (another user's, say), or dangling (a directory would be created
/// where it points); with a trailing slash too. The message names the target.
#[test]
fn symbolic_link_is_refused_and_not_followed() {
    let base = scratch_dir("symlink");
    let profile = fresh_profile("symlink-target");
    let profile_before = snapshot(&profile);
    let file = base.join("victim.txt");
    fs::write(&file, "someone's file").unwrap();
    let nowhere = base.join("created-through-a-link");
    for (name, target) in [
        ("to-profile", &profile),
        ("to-file", &file),
        ("dangling", &nowhere),
    ] {
        let link = base.join(name);
        std::os::unix::fs::symlink(target, &link).unwrap();
        for given in [link.clone(), PathBuf::from(format!("{}/", link.display()))] {
            let what = format!("a link {}", given.display());
            let run = run_sh(&given, "/bin/true");
            let target = target.display().to_string();
            assert_refused(&run, &what, &["symbolic link", &target]);
            assert_eq!(
                fs::read_link(&link).unwrap(),
                *target,
                "{what}: link changed"
            );
        }
    }
    assert_eq!(
        snapshot(&profile),
        profile_before,
        "the linked profile changed"
    );
    assert_eq!(fs::read_to_string(&file).unwrap(), "someone's file");
    assert!(
        !nowhere.exists(),
        "a directory was created through a dangling link"
    );
}

/// Another user's directory is refused, even one that holds only part files (as root, the
/// test gives a scratch profile to `nobody`; otherwise it uses `/`, which is root's).
#[test]
fn another_users_directory_is_refused() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let (out, before) = if root {
        let out = fresh_profile("other-user");
        let nobody = 65534;
        std::os::unix::fs::chown(&out, Some(nobody), Some(nobody)).unwrap();
        assert_eq!(fs::metadata(&out).unwrap().uid(), nobody);
        let before = snapshot(&out);
        (out, Some(before))
    } else {
        (PathBuf::from("/"), None)
    };
    let run = run_sh(&out, "/bin/true");
    assert_refused(
        &run,
        "another user's directory",
        &["belongs to another user"],
    );
    if let Some(before) = before {
        assert_eq!(snapshot(&out), before, "the other user's profile changed");
    }
}

/// The default output (no -o) is private too.
#[test]
fn default_output_directory_is_private() {
    let dir = scratch_dir("default-output");
    let mut cmd = std::process::Command::new(blameprof());
    cmd.current_dir(&dir)
        .args(["run", "-q", "--", "/bin/true"])
        .env_remove("BLAMEPROF_OUTPUT");
    let run = run_with_timeout(&mut cmd, RUN_TIMEOUT);
    assert!(run.status.success(), "{}", run.describe());
    let made: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(made.len(), 1, "one profile directory: {made:?}");
    assert_eq!(mode(&made[0]), 0o700, "{}", made[0].display());
}
