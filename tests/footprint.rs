//! The runtime's memory footprint inside the profiled program.
//!
//! Proves that profiling does not give the program's threads malloc arenas: glibc creates
//! an arena (tens of KiB resident, kept after the thread exits) for each thread that calls
//! `malloc`, and the runtime must not be what makes a thread call it. The workload's threads
//! never allocate; after they are sampled, unwound and have their lock waits measured, glibc
//! itself reports how many arenas exist, and that count must be the unprofiled one.
//!
//! Also proves the layout that keeps the runtime's resident code small: what never runs linked
//! apart (runtime/cold.ld), what runs packed together (runtime/hot.ld), and no libgcc_s.

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

/// The bytes of the runtime library the workspace build leaves next to the CLI (built from
/// the same sources and profile as the copy the CLI embeds).
fn runtime_library_data() -> Vec<u8> {
    let path = runtime_library();
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Whether `addr` lies in section `s`.
fn within(s: &object::Section, addr: u64) -> bool {
    use object::ObjectSection;
    addr >= s.address() && addr < s.address() + s.size()
}

/// Code the profiled program never runs (the standard library's backtrace printer) is linked
/// apart from the code it does (runtime/cold.ld): otherwise the kernel's fault-around maps
/// it into every profiled process along with its neighbours.
#[test]
fn code_the_program_never_runs_is_linked_apart() {
    use object::{Object, ObjectSection, ObjectSymbol};
    let data = runtime_library_data();
    let file = object::File::parse(&*data).expect("the runtime library is ELF");
    let cold = file
        .section_by_name(".text.cold")
        .expect("no .text.cold section: was the library linked with runtime/cold.ld?");
    let text = file.section_by_name(".text").expect("no .text section");
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

/// `*`-only glob match, as the linker matches section names against runtime/hot.ld.
fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            name.starts_with(head)
                && (0..=name.len() - head.len()).any(|i| glob(tail, &name[head.len() + i..]))
        }
    }
}

/// The code that runs is packed at the start of the runtime's code (runtime/hot.ld): the PLT
/// comes first, the signal handler, the unwinder and the interposed lock functions lie in
/// `.text.hot` right after it, and the generated list still names the runtime's functions
/// (most of its patterns match a function there; if not, the code changed under it:
/// regenerate it with `scoreboard --hot-layout`).
#[test]
fn code_that_runs_is_packed_together() {
    use object::{Object, ObjectSection, ObjectSymbol};
    let data = runtime_library_data();
    let file = object::File::parse(&*data).expect("the runtime library is ELF");
    let hot = file
        .section_by_name(".text.hot")
        .expect("no .text.hot section: was the library linked with runtime/hot.ld?");
    let plt = file.section_by_name(".plt").expect("the runtime has a PLT");
    assert!(
        plt.address() < hot.address(),
        "the PLT is not before .text.hot: runtime/hot.ld places it"
    );
    let in_hot: Vec<&str> = file
        .symbols()
        .filter(|s| s.size() > 0 && within(&hot, s.address()))
        .filter_map(|s| s.name().ok())
        .collect();
    for wanted in [
        "on_sample_signal",
        "pthread_mutex_lock",
        "pthread_mutex_unlock",
        "unwind_frame",
        "Dlmalloc",
    ] {
        assert!(
            in_hot.iter().any(|n| n.contains(wanted)),
            "no function named like {wanted} in .text.hot"
        );
    }
    let script = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/runtime/hot.ld"))
        .expect("runtime/hot.ld");
    let patterns: Vec<&str> = script
        .lines()
        .filter_map(|l| l.trim().strip_prefix("*(.text."))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let matched = patterns
        .iter()
        .filter(|p| in_hot.iter().any(|n| glob(p, n)))
        .count();
    assert!(
        patterns.len() > 50 && matched * 10 >= patterns.len() * 8,
        "only {matched} of the {} function patterns of runtime/hot.ld match a function in \
         .text.hot: regenerate it (`scoreboard --hot-layout runtime/hot.ld`)",
        patterns.len()
    );
}

/// The runtime does not load libgcc_s (about 100 KiB resident in a C program that would not
/// load it otherwise): libgcc's unwinder is linked in, so no `_Unwind_*` symbol is imported.
#[test]
fn runtime_does_not_need_libgcc_s() {
    use object::{Object, ObjectSymbol};
    let data = runtime_library_data();
    let file = object::File::parse(&*data).expect("the runtime library is ELF");
    let imported: Vec<&str> = file
        .dynamic_symbols()
        .filter(|s| s.is_undefined())
        .filter_map(|s| s.name().ok())
        .filter(|n| n.starts_with("_Unwind_"))
        .collect();
    assert!(imported.is_empty(), "imports {imported:?}");
    let needed = needed_libraries(&data);
    assert!(
        needed.iter().any(|n| n.starts_with("libc.so")),
        "{needed:?}"
    );
    assert!(
        !needed.iter().any(|n| n.starts_with("libgcc_s")),
        "the runtime needs {needed:?}"
    );
}

/// The DT_NEEDED entries of an ELF shared library.
fn needed_libraries(data: &[u8]) -> Vec<String> {
    use object::read::elf::{Dyn, ElfFile64, FileHeader};
    let elf = ElfFile64::<object::Endianness>::parse(data).expect("ELF64");
    let endian = elf.endian();
    let sections = elf.elf_header().sections(endian, data).expect("sections");
    let (dynamic, link) = sections
        .dynamic(endian, data)
        .expect("dynamic section")
        .expect("a dynamic section");
    let strings = sections
        .strings(endian, data, link)
        .expect("dynamic strings");
    dynamic
        .iter()
        .filter(|d| d.tag32(endian) == Some(object::elf::DT_NEEDED))
        .filter_map(|d| d.string(endian, strings).ok())
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect()
}
