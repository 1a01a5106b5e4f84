//! The runtime's memory footprint inside the profiled program.
//!
//! Proves that profiling does not give the program's threads malloc arenas: glibc creates
//! an arena (tens of KiB resident, kept after the thread exits) for each thread that calls
//! `malloc`, and the runtime must not be what makes a thread call it. The workload's threads
//! never allocate; after they are sampled, unwound and have their lock waits measured, glibc
//! itself reports how many arenas exist, and that count must be the unprofiled one.

mod common;

use common::*;

fn arenas(stdout: &str) -> u32 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("arenas "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no arena count in the output:\n{stdout}"))
}

#[test]
fn profiled_threads_get_no_malloc_arena() {
    let prog = compile_c(
        "malloc_free_threads.c",
        "malloc_free_threads",
        &["-O2", "-g", "-pthread"],
    );
    let plain = run_with_timeout(std::process::Command::new(&prog).arg("8"), RUN_TIMEOUT);
    assert!(plain.status.success(), "{}", plain.describe());
    assert_eq!(arenas(&plain.stdout), 1, "unprofiled: only the main arena");

    let out = scratch_dir("footprint").join("prof");
    let run = profile_ok(&out, 1000, &prog, &["8"]);
    assert_eq!(
        arenas(&run.stdout),
        1,
        "profiled threads got malloc arenas (the runtime called malloc in them)\n{}",
        run.describe()
    );
    // The threads were sampled: the runtime did run in them.
    let flat = report_json(&out, &["--view", "flat"]);
    assert!(
        flat_values(&flat, "worker").0 > 0,
        "no work recorded in the threads"
    );
}

/// The runtime library, built next to the blameprof binary (where `blameprof run` finds it).
fn runtime_library() -> std::path::PathBuf {
    std::path::Path::new(blameprof()).with_file_name(blameprof::format::RUNTIME_LIBRARY)
}

/// Code the profiled program never runs (the standard library's backtrace printer) is linked
/// apart from the code it does (runtime/cold.ld): otherwise the kernel's fault-around maps
/// it into every profiled process along with its neighbours.
#[test]
fn code_the_program_never_runs_is_linked_apart() {
    use object::{Object, ObjectSection, ObjectSymbol};
    let path = runtime_library();
    let data =
        std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let file = object::File::parse(&*data).expect("the runtime library is ELF");
    let cold = file
        .section_by_name(".text.cold")
        .expect("no .text.cold section: was the library linked with runtime/cold.ld?");
    let text = file.section_by_name(".text").expect("no .text section");
    let within =
        |s: &object::Section, addr: u64| addr >= s.address() && addr < s.address() + s.size();
    let mut cold_backtrace = 0;
    for sym in file.symbols() {
        let Ok(name) = sym.name() else { continue };
        if !name.contains("backtrace_rs") || sym.size() == 0 {
            continue;
        }
        assert!(
            !within(&text, sym.address()),
            "{name} is in .text, among the code that runs"
        );
        if within(&cold, sym.address()) {
            cold_backtrace += 1;
        }
    }
    assert!(
        cold_backtrace > 10,
        "only {cold_backtrace} backtrace functions in .text.cold"
    );
    assert!(
        cold.size() > 64 * 1024,
        ".text.cold holds only {} bytes: less than one fault-around window",
        cold.size()
    );
}
