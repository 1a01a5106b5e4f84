//! Bad input: every user error ends with a non-zero exit status and exactly one stderr line
//! starting `blameprof: error:`, never a panic or a usage dump. Covers `run` without or with
//! an unusable command (missing, not executable, statically linked, setuid), unknown flags,
//! an unwritable output location, and `report` / `flamegraph` on missing, empty, truncated,
//! corrupted and newer-version profiles, on hostile chunks behind valid checksums, on
//! randomly damaged chunks whose checksums were made to match (a report or a clean error,
//! never a panic), and on a directory whose part is a FIFO (refused, not waited on). Each
//! damaged profile has an undamaged control that reports fine, so the failures are caused
//! by the damage. (`tests/output_dir.rs` covers `run -o` on existing paths.)

mod common;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::*;

/// A small real profile (split.c, 2 threads) and its single part file.
fn real_profile() -> &'static (PathBuf, PathBuf) {
    static P: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    P.get_or_init(|| {
        let prog = split_c();
        let out = scratch_dir("bad-input-real").join("prof");
        profile_ok(&out, 1000, &prog, &["2", "0.3"]);
        let parts = part_files(&out);
        assert_eq!(
            parts.len(),
            1,
            "split should produce one part file: {parts:?}"
        );
        let len = fs::metadata(&parts[0]).unwrap().len();
        assert!(len > 256, "part file suspiciously small ({len} bytes)");
        let bytes = fs::read(&parts[0]).unwrap();
        assert_eq!(&bytes[..8], b"BLMPROF\0", "part file magic");
        assert_eq!(
            u32::from_le_bytes(bytes[8..12].try_into().unwrap()),
            blameprof::format::FORMAT_VERSION,
            "part file version"
        );
        (out, parts[0].clone())
    })
}

/// Copies the real profile into a new directory, applies `damage` to the part file's bytes,
/// and returns the new profile directory.
fn damaged_copy(name: &str, damage: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let (_, part) = real_profile();
    let dir = scratch_dir(name).join("prof");
    fs::create_dir_all(&dir).unwrap();
    let mut bytes = fs::read(part).unwrap();
    damage(&mut bytes);
    fs::write(dir.join(part.file_name().unwrap()), bytes).unwrap();
    dir
}

fn run_args<S: AsRef<OsStr>>(args: &[S]) -> Run {
    blameprof_cmd(args)
}

fn report_on(path: &Path) -> Run {
    run_args(&[OsStr::new("report"), path.as_os_str()])
}

#[test]
fn run_without_command() {
    assert_clean_error(&run_args(&["run"]), "blameprof run");
    let out = scratch_dir("no-cmd").join("prof");
    assert_clean_error(
        &run_args(&[
            OsStr::new("run"),
            OsStr::new("-o"),
            out.as_os_str(),
            OsStr::new("--"),
        ]),
        "blameprof run -o X --",
    );
}

#[test]
fn run_command_not_found() {
    let out = scratch_dir("not-found").join("prof");
    // A name is looked up in PATH; a path is not, and its advice is not to prefix it again.
    for (cmd, says) in [
        (
            "no-such-command-blameprof-test",
            "is in no directory of PATH (check the name, or give its path, \
             e.g. ./no-such-command-blameprof-test",
        ),
        (
            "/nonexistent/dir/program",
            "no such file: '/nonexistent/dir/program' (check the path)",
        ),
    ] {
        let run = run_args(&[
            OsStr::new("run"),
            OsStr::new("-o"),
            out.as_os_str(),
            OsStr::new("--"),
            OsStr::new(cmd),
        ]);
        assert_clean_error(&run, &format!("run -- {cmd}"));
        assert_eq!(run.code(), 127, "{}", run.describe());
        assert!(run.stderr.contains(says), "{}", run.describe());
        assert!(!run.stderr.contains(".//"), "{}", run.describe());
    }
}

#[test]
fn runtime_override_that_is_missing_or_misnamed() {
    let dir = scratch_dir("runtime-override");
    let renamed = dir.join("my-runtime.so");
    let real = runtime_library();
    fs::copy(&real, &renamed).unwrap();
    let link_dir = dir.join("link");
    fs::create_dir_all(&link_dir).unwrap();
    let link = link_dir.join("libblameprof_rt.so");
    std::os::unix::fs::symlink(&renamed, &link).unwrap();
    let missing = dir.join("nowhere").join("libblameprof_rt.so");
    for (runtime, says) in [
        (&missing, "does not name a file"),
        // Under another name, the report would show the runtime's internals as the
        // program's code; through a link, the program would load it by its real name.
        (&renamed, "is not named libblameprof_rt.so"),
        (&link, "is not named libblameprof_rt.so"),
    ] {
        let env = [("BLAMEPROF_RUNTIME", runtime.as_os_str())];
        let run = profile_run(&dir.join("prof"), 200, Path::new("true"), &[], &env);
        let what = format!("BLAMEPROF_RUNTIME={}", runtime.display());
        assert_clean_error(&run, &what);
        assert!(run.stderr.contains(says), "{what}: {}", run.describe());
    }
    // A copy under the right name in a directory of its own runs.
    let good = dir.join("good").join("libblameprof_rt.so");
    fs::create_dir_all(good.parent().unwrap()).unwrap();
    fs::copy(&real, &good).unwrap();
    let env = [("BLAMEPROF_RUNTIME", good.as_os_str())];
    let run = profile_run(&dir.join("prof-good"), 200, Path::new("true"), &[], &env);
    assert!(run.status.success(), "{}", run.describe());
}

#[test]
fn run_non_executable_file() {
    let dir = scratch_dir("non-exec");
    let file = dir.join("script.sh");
    fs::write(&file, "#!/bin/sh\necho hi\n").unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
    let out = dir.join("prof");
    let run = run_args(&[
        OsStr::new("run"),
        OsStr::new("-o"),
        out.as_os_str(),
        OsStr::new("--"),
        file.as_os_str(),
    ]);
    assert_clean_error(&run, "run -- non-executable file");
    // A directory is not a program either.
    let run = run_args(&[
        OsStr::new("run"),
        OsStr::new("-o"),
        out.as_os_str(),
        OsStr::new("--"),
        dir.as_os_str(),
    ]);
    assert_clean_error(&run, "run -- a directory");
}

#[test]
fn run_statically_linked_program() {
    let src = programs_dir().join("split.c");
    let prog =
        try_compile_c(&src, "split-static", &["-O2", "-static", "-pthread"]).unwrap_or_else(|e| {
            panic!(
                "cannot build a statically linked test program; install the Debian package \
             `libc6-dev` (static libc.a; see tests/SYSTEM-PACKAGES): {e}"
            )
        });
    let out = scratch_dir("static").join("prof");
    let run = run_args(&[
        OsStr::new("run"),
        OsStr::new("-o"),
        out.as_os_str(),
        OsStr::new("--"),
        prog.as_os_str(),
        OsStr::new("1"),
        OsStr::new("0.05"),
    ]);
    assert_clean_error(&run, "run -- statically linked program");
}

#[test]
fn run_setuid_program() {
    // We may run as root, but the loader ignores LD_PRELOAD for setuid programs: refuse.
    let dir = scratch_dir("setuid");
    let copy = dir.join("split-suid");
    fs::copy(split_c(), &copy).unwrap();
    fs::set_permissions(&copy, fs::Permissions::from_mode(0o4755)).unwrap();
    let out = dir.join("prof");
    let run = run_args(&[
        OsStr::new("run"),
        OsStr::new("-o"),
        out.as_os_str(),
        OsStr::new("--"),
        copy.as_os_str(),
        OsStr::new("1"),
        OsStr::new("0.05"),
    ]);
    assert_clean_error(&run, "run -- setuid program");
}

#[test]
fn unknown_flags() {
    assert_clean_error(&run_args(&["run", "--bogus", "--", "true"]), "run --bogus");
    assert_clean_error(&run_args(&["report", "--bogus"]), "report --bogus");
    let (prof, _) = real_profile();
    let run = run_args(&[
        OsStr::new("report"),
        prof.as_os_str(),
        OsStr::new("--view"),
        OsStr::new("sideways"),
    ]);
    assert_clean_error(&run, "report --view sideways");
    let run = run_args(&[
        OsStr::new("report"),
        prof.as_os_str(),
        OsStr::new("--metric"),
        OsStr::new("no-such-metric"),
    ]);
    assert_clean_error(&run, "report --metric no-such-metric");
    assert_clean_error(
        &run_args(&["run", "-F", "lots", "--", "true"]),
        "run -F lots",
    );
}

#[test]
fn unwritable_output_location() {
    let run = run_args(&["run", "-o", "/proc/forbidden/x", "--", "true"]);
    assert_clean_error(&run, "run -o /proc/forbidden/x");
}

#[test]
fn report_on_missing_path() {
    assert_clean_error(
        &report_on(Path::new("/nonexistent/blameprof-profile")),
        "report on missing path",
    );
}

/// A report that fails writes no file where `-o` points, and leaves an older one there as
/// it was: for every export and view, whether it fails before or after the output is opened.
#[test]
fn a_failed_report_leaves_no_output_file() {
    let dir = scratch_dir("failed-report-output");
    let (prof, _) = real_profile();
    for format in ["text", "json", "html", "pprof", "folded", "firefox"] {
        let out = dir.join(format!("out.{format}"));
        let run = run_args(&[
            OsStr::new("report"),
            OsStr::new("/nonexistent/blameprof-profile"),
            OsStr::new("--format"),
            OsStr::new(format),
            OsStr::new("-o"),
            out.as_os_str(),
        ]);
        assert_clean_error(
            &run,
            &format!("report --format {format} of a missing profile"),
        );
        assert!(!out.exists(), "{format}: {} was written", out.display());
        fs::write(&out, b"older").unwrap();
        let run = run_args(&[
            OsStr::new("report"),
            prof.as_os_str(),
            OsStr::new("--format"),
            OsStr::new(format),
            OsStr::new("--metric"),
            OsStr::new("no-such-metric"),
            OsStr::new("-o"),
            out.as_os_str(),
        ]);
        assert_clean_error(
            &run,
            &format!("report --format {format} --metric no-such-metric"),
        );
        assert_eq!(
            fs::read(&out).unwrap(),
            b"older",
            "{format}: the older file changed"
        );
    }
    let left: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().ends_with(".partial"))
        .collect();
    assert!(left.is_empty(), "partial files left: {left:?}");
}

#[test]
fn report_on_empty_file_and_empty_dir() {
    let dir = scratch_dir("empty");
    let file = dir.join("empty.bpp");
    fs::write(&file, b"").unwrap();
    assert_clean_error(&report_on(&file), "report on an empty file");
    let empty_dir = dir.join("empty-dir");
    fs::create_dir(&empty_dir).unwrap();
    assert_clean_error(&report_on(&empty_dir), "report on an empty directory");
    let not_profile = dir.join("text.bpp");
    fs::write(
        &not_profile,
        "this is not a profile, just some text long enough to parse\n".repeat(20),
    )
    .unwrap();
    assert_clean_error(&report_on(&not_profile), "report on a text file");
}

#[test]
fn report_on_undamaged_copy_works() {
    let dir = damaged_copy("control", |_| {});
    let flat = report_json(&dir, &["--view", "flat"]);
    assert!(samples(&flat) > 50, "control copy has too few samples");
}

/// A part that ends inside a chunk, before its end record, is what a process killed during
/// a write, out of disk, or still writing leaves: the report reads what precedes the cut and
/// says where the part was cut.
#[test]
fn report_on_truncated_profile() {
    let dir = damaged_copy("truncated", |b| {
        // Cut inside the chunk that spans the file's middle (halfway through its payload),
        // never at a chunk boundary: a file cut between chunks is a valid, shorter profile.
        let mut start = 16;
        loop {
            let len = u32::from_le_bytes(b[start + 4..start + 8].try_into().unwrap()) as usize;
            let end = start + 16 + len;
            if end >= b.len() / 2 {
                b.truncate(start + 16 + len / 2);
                break;
            }
            start = end;
        }
    });
    let run = report_on(&dir);
    assert!(run.status.success(), "{}", run.describe());
    assert!(
        run.stdout.contains("damaged:") && run.stdout.contains("ends inside a chunk at byte"),
        "{}",
        run.describe()
    );
    assert!(samples(&report_json(&dir, &["--view", "flat"])) > 0);
}

/// A part cut inside a chunk after its end record was damaged after it was written: a clean
/// error, or with --salvage what precedes the cut.
#[test]
fn report_on_a_profile_cut_after_its_end() {
    let dir = damaged_copy("cut-after-end", |b| {
        // A chunk header claiming more bytes than follow, after the whole part.
        b.extend_from_slice(b"BCK1");
        b.extend_from_slice(&1000u32.to_le_bytes());
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(&[1, 2, 3]);
    });
    assert_clean_error(&report_on(&dir), "report on a part cut after its end");
}

#[test]
fn report_on_corrupted_profile() {
    let dir = damaged_copy("corrupted", |b| {
        let mid = b.len() / 2;
        for x in &mut b[mid - 16..mid + 16] {
            *x ^= 0xA5;
        }
    });
    assert_clean_error(&report_on(&dir), "report on a corrupted profile");
}

#[test]
fn report_on_newer_version_profile() {
    let dir = damaged_copy("newer", |b| b[8..12].copy_from_slice(&999u32.to_le_bytes()));
    let run = report_on(&dir);
    assert_clean_error(&run, "report on a version-999 profile");
    assert!(
        run.stderr.contains("999"),
        "the error should name the unsupported version:\n{}",
        run.stderr
    );
}

#[test]
fn flamegraph_to_unwritable_path() {
    let (prof, _) = real_profile();
    let run = run_args(&[
        OsStr::new("flamegraph"),
        prof.as_os_str(),
        OsStr::new("--metric"),
        OsStr::new("work"),
        OsStr::new("-o"),
        OsStr::new("/nonexistent-dir/x.svg"),
    ]);
    assert_clean_error(&run, "flamegraph -o /nonexistent-dir/x.svg");
    assert!(!Path::new("/nonexistent-dir").exists());
}

/// The chunks of a part (writer tid, payload), after its 16-byte file header.
fn chunks_of(part: &[u8]) -> Vec<(u32, Vec<u8>)> {
    let mut chunks = Vec::new();
    let mut at = 16;
    while at + 16 <= part.len() {
        let len = u32::from_le_bytes(part[at + 4..at + 8].try_into().unwrap()) as usize;
        let tid = u32::from_le_bytes(part[at + 12..at + 16].try_into().unwrap());
        chunks.push((tid, part[at + 16..at + 16 + len].to_vec()));
        at += 16 + len;
    }
    assert_eq!(at, part.len(), "the real part is whole chunks");
    chunks
}

/// The part with `chunks` after `part`'s file header, each with its length and CRC.
fn with_chunks(part: &[u8], chunks: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let mut out = part[..16].to_vec();
    for (tid, payload) in chunks {
        out.extend_from_slice(&blameprof::format::wire::chunk_header(payload, *tid));
        out.extend_from_slice(payload);
    }
    out
}

fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out
}

#[test]
fn report_on_hostile_chunks_behind_valid_checksums() {
    let cases: [(&str, Vec<u8>); 5] = [
        ("an unknown record type", vec![0xEE]),
        (
            "a string of 2^64-1 bytes",
            [vec![7], varint(u64::MAX)].concat(),
        ),
        (
            "an argv of 2^64-1 strings",
            [vec![1, 1, 0, 0, 0], varint(u64::MAX)].concat(),
        ),
        (
            "a call path 2^40 frames deep",
            [vec![6, 0, 1, 0], varint(1 << 40), vec![0]].concat(),
        ),
        (
            "a path sharing frames with no predecessor",
            vec![6, 0, 1, 0, 2, 2],
        ),
    ];
    for (what, payload) in cases {
        for at in ["after the first chunk", "at the end"] {
            let dir = damaged_copy("hostile", |b| {
                let mut chunks = chunks_of(b);
                let i = if at == "at the end" { chunks.len() } else { 1 };
                chunks.insert(i, (1, payload.clone()));
                *b = with_chunks(b, &chunks);
            });
            let run = report_on(&dir);
            assert_clean_error(&run, &format!("report on {what} {at}"));
            assert!(
                run.stderr.contains("corrupted at byte") && run.stderr.contains("--salvage"),
                "{what} {at}: the error names the damage and the fix\n{}",
                run.describe()
            );
            if at == "at the end" {
                let salvaged = run_args(&[
                    OsStr::new("report"),
                    dir.as_os_str(),
                    OsStr::new("--salvage"),
                ]);
                assert!(salvaged.status.success(), "{what}: {}", salvaged.describe());
            }
        }
    }
}

/// Random damage to chunk payloads, with every chunk header rewritten to match: the reader
/// then decodes hostile records, and the analysis gets whatever they decode to. Each report
/// either works or fails with one clean line.
#[test]
fn report_on_randomly_damaged_checksummed_profiles() {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let (mut reports, mut errors) = (0, 0);
    for case in 0..24 {
        let dir = damaged_copy("random-damage", |b| {
            let mut chunks = chunks_of(b);
            for _ in 0..1 + next(3) {
                let c = next(chunks.len());
                let p = &mut chunks[c].1;
                if p.is_empty() {
                    continue;
                }
                let i = next(p.len());
                match next(3) {
                    0 => p[i] ^= 1 << next(8),
                    1 => p[i] = [0x00, 0x7F, 0x80, 0xFF][next(4)],
                    _ => {
                        let copied = p[i..(i + 1 + next(8)).min(p.len())].to_vec();
                        let to = next(p.len());
                        p.splice(to..to, copied);
                    }
                }
            }
            *b = with_chunks(b, &chunks);
        });
        let view = ["top-down", "bottom-up", "flat", "threads", "locks"][case % 5];
        let run = run_args(&[
            OsStr::new("report"),
            dir.as_os_str(),
            OsStr::new("--view"),
            OsStr::new(view),
        ]);
        if run.status.success() {
            reports += 1;
            assert!(
                !run.stderr.contains("panicked"),
                "case {case}: {}",
                run.describe()
            );
        } else {
            errors += 1;
            assert_clean_error(
                &run,
                &format!("report --view {view} on random damage {case}"),
            );
        }
    }
    assert!(errors > 0, "no damage was detected ({reports} reports)");
}

#[test]
fn report_on_profile_with_a_fifo_part() {
    let dir = damaged_copy("fifo-part", |_| {});
    let fifo = dir.join("99.bpp");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo {}", fifo.display());
    // A read would wait for a writer for ever: report_on's timeout fails the test then.
    let run = report_on(&dir);
    assert_clean_error(&run, "report on a directory with a FIFO part");
    assert!(
        run.stderr.contains("99.bpp") && run.stderr.contains("not a regular file"),
        "{}",
        run.describe()
    );
}

/// A reader that goes away (`blameprof man | head`) stops the writing quietly: exit status
/// 0, nothing on standard error.
#[test]
fn output_to_a_closed_pipe_ends_quietly() {
    for args in [&["man"][..], &["completions", "bash"][..]] {
        let mut child = std::process::Command::new(blameprof())
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("blameprof starts");
        // The read end is closed before anything is written: every write fails (EPIPE).
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("blameprof ends");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stderr.is_empty(),
            "blameprof {args:?} into a closed pipe: {}, stderr {stderr:?}",
            out.status
        );
    }
}
