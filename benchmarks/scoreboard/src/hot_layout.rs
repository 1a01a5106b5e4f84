//! `scoreboard --hot-layout FILE`: which of the runtime's functions run, as a linker script
//! that places them together (`runtime/hot.ld`).
//!
//! Why: the kernel maps a shared library's code in 64 KiB windows around each page fault
//! (fault-around), so a program's resident memory grows by every 64 KiB window of the runtime
//! in which any function runs. Packing the functions that run into one output section at the
//! start of the code keeps that to the few windows they fill.
//!
//! How: every workload runs once, at a small scale, under `valgrind --tool=callgrind` with the
//! runtime preloaded as `blameprof run` would (1 kHz); each function of the runtime with
//! instructions executed in any run is hot. The script lists them by section name, hottest
//! first, with the parts of the names that change from build to build (legacy hashes, crate
//! disambiguators, LTO suffixes) as wildcards, so it stays valid while the code around it
//! changes. Code that runs on some machines only (CPU-feature variants) or for some
//! programs only (the interposed entry points a workload does not call) is added by rule.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use blameprof_format::protocol::{ENV_FREQUENCY, ENV_OUTPUT};

use crate::proc;
use crate::workloads::Workload;

/// Scale of the callgrind runs: enough to reach every steady-state path, cheap under
/// valgrind's ~50x slowdown.
const SCALE: &str = "0.05";
/// Limit of one callgrind run.
const LIMIT: Duration = Duration::from_secs(600);

/// Input sections placed in the hot section whatever the runs show: start-up and exit code
/// linked in from the C toolchain, and every exported function (the interposed entry points:
/// a program calls those the workloads do not). Code with CPU-feature variants would need
/// them all here too (the runs see valgrind's CPU, not the user's); the runtime has none
/// since its checksum is byte-wise (`format::wire::crc32`).
const BY_RULE: &[&str] = &[
    "*crtbeginS.o(.text .text.*)",
    "*libc_nonshared.a:*(.text .text.*)",
];

/// How hot a function is: in how many runs it ran, and how many instructions in all.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Heat {
    runs: u32,
    instructions: u64,
}

/// Runs the workloads under callgrind and writes the linker script to `out`.
pub fn generate(runtime: &Path, workloads: &[Workload], scratch: &Path, out: &Path) -> Result<()> {
    let functions = runtime_functions(runtime)?;
    let cost = executed(runtime, &functions, workloads, scratch)?;
    let mut rest = previous_patterns(out, &functions);
    rest.extend(
        functions
            .iter()
            .filter(|f| f.exported)
            .map(|f| f.name.clone()),
    );
    fs::write(out, script(&cost, &rest)).with_context(|| format!("cannot write {}", out.display()))
}

/// Runs the workloads under callgrind against the runtime as built (with its hot layout):
/// the functions that ran but lie outside its `.text.hot` section, by name. Empty when the
/// layout holds everything these workloads run.
pub fn check(runtime: &Path, workloads: &[Workload], scratch: &Path) -> Result<Vec<String>> {
    let functions = runtime_functions(runtime)?;
    let sections = section_ranges(runtime)?;
    let Some(hot) = sections.get(".text.hot").cloned() else {
        bail!(
            "{} has no .text.hot section: was it linked with runtime/hot.ld?",
            runtime.display()
        );
    };
    let cost = executed(runtime, &functions, workloads, scratch)?;
    let mut outside: Vec<String> = functions
        .iter()
        .filter(|f| cost.contains_key(&f.name) && !hot.contains(&f.address))
        // Only code sections the layout places: the rest (.init, .fini, the PLT) is not
        // in the linker's ordinary text either.
        .filter(|f| {
            [".text", ".text.cold"]
                .iter()
                .any(|s| sections.get(*s).is_some_and(|r| r.contains(&f.address)))
        })
        .map(|f| f.name.clone())
        .collect();
    outside.sort();
    outside.dedup();
    Ok(outside)
}

/// Each runtime function that ran in any of the workloads (under callgrind, the runtime
/// preloaded as `blameprof run` would at 1 kHz), with how hot it is.
fn executed(
    runtime: &Path,
    functions: &[Function],
    workloads: &[Workload],
    scratch: &Path,
) -> Result<HashMap<String, Heat>> {
    let names: HashSet<&str> = functions.iter().map(|f| f.name.as_str()).collect();
    let mut cost: HashMap<String, Heat> = HashMap::new();
    for w in workloads {
        eprintln!("scoreboard: callgrind {}", w.name);
        let dir = scratch.join(format!("hot-{}", w.name));
        fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let cg_out = dir.join("callgrind.out");
        let mut cmd = Command::new("valgrind");
        cmd.arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}", cg_out.display()))
            .arg("--demangle=no")
            .arg(&w.binary)
            .arg(SCALE)
            .env("LD_PRELOAD", runtime)
            .env(ENV_OUTPUT, &dir)
            .env(ENV_FREQUENCY, "1000");
        proc::run(&mut cmd, false, Some(LIMIT))
            .context("cannot run valgrind (install it: scripts/install-system-packages.sh)")?
            .check(&format!("callgrind {}", w.name))?;
        let text = fs::read_to_string(&cg_out)
            .with_context(|| format!("cannot read {}", cg_out.display()))?;
        for (name, ir) in self_costs(&text) {
            if names.contains(name.as_str()) {
                let heat = cost.entry(name).or_default();
                heat.runs += 1;
                heat.instructions += ir;
            }
        }
        crate::accuracy::remove(&dir)?;
    }
    if cost.is_empty() {
        bail!("callgrind saw no instruction of {}", runtime.display());
    }
    Ok(cost)
}

/// The function patterns of the layout `out` already holds that still match a function of
/// the runtime: kept after the measured ones, since what a run reaches depends on timing
/// (a contended path of the standard library's `RwLock`, a futex wake chain) and one
/// callgrind run per workload can miss what another run takes. A renamed function's
/// pattern matches nothing and is dropped.
fn previous_patterns(out: &Path, functions: &[Function]) -> Vec<String> {
    let text = fs::read_to_string(out).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("*(.text.")?.split_once(' '))
        .map(|(pattern, _)| pattern.to_string())
        .filter(|p| functions.iter().any(|f| glob(p, &f.name)))
        .collect()
}

/// Whether `name` matches `pattern`, whose only wildcard is `*` (as the linker matches
/// section names).
fn glob(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// A function of the runtime: its symbol, address, and whether it is exported (an
/// interposed entry point).
struct Function {
    name: String,
    address: u64,
    exported: bool,
}

/// The address ranges of the runtime's sections, by name (`readelf -SW`).
fn section_ranges(runtime: &Path) -> Result<HashMap<String, std::ops::Range<u64>>> {
    let out = Command::new("readelf")
        .arg("-SW")
        .arg(runtime)
        .output()
        .context("cannot run readelf (binutils)")?;
    if !out.status.success() {
        bail!("readelf {} failed", runtime.display());
    }
    Ok(parse_sections(&String::from_utf8_lossy(&out.stdout)))
}

/// Section name -> address range, from `readelf -SW` lines such as
/// `  [14] .text.hot  PROGBITS  0000000000012000 012000 02c5a1 00  AX  0   0 16`.
fn parse_sections(text: &str) -> HashMap<String, std::ops::Range<u64>> {
    let mut ranges = HashMap::new();
    for line in text.lines() {
        let Some((_, rest)) = line.split_once(']') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if let [name, _kind, address, _offset, size, ..] = fields[..] {
            if let (Ok(a), Ok(n)) = (
                u64::from_str_radix(address, 16),
                u64::from_str_radix(size, 16),
            ) {
                ranges.insert(name.to_string(), a..a + n);
            }
        }
    }
    ranges
}

/// The runtime's functions, from `nm`, with their addresses.
fn runtime_functions(runtime: &Path) -> Result<Vec<Function>> {
    let out = Command::new("nm")
        .arg("--defined-only")
        .arg(runtime)
        .output()
        .context("cannot run nm (binutils)")?;
    if !out.status.success() {
        bail!("nm {} failed", runtime.display());
    }
    let mut functions = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let [address, kind, name] = line.split_whitespace().collect::<Vec<_>>()[..] {
            if matches!(kind, "t" | "T" | "W" | "w") {
                functions.push(Function {
                    name: name.to_string(),
                    address: u64::from_str_radix(address, 16).unwrap_or(0),
                    exported: kind == "T",
                });
            }
        }
    }
    functions.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(functions)
}

/// Self cost (instructions) of each function named in a callgrind output file.
///
/// Functions are taken by name, whatever object callgrind assigns them to: it assigns code run
/// in a signal handler to an unknown object (`???`). The format names functions (`fn=`,
/// `cfn=`) with compression: `(id) name` the first time, `(id)` after; a `'N` suffix marks a
/// recursion level. Cost lines after `fn=` are the function's own; the one cost line after a
/// `calls=` line is the call's inclusive cost, not counted.
pub fn self_costs(text: &str) -> HashMap<String, u64> {
    let mut functions: HashMap<String, String> = HashMap::new();
    let mut costs = HashMap::new();
    let mut current: Option<String> = None;
    let mut skip_next_cost = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("fn=") {
            let name = resolve(&mut functions, rest);
            current = Some(name.split('\'').next().unwrap_or_default().to_string());
        } else if let Some(rest) = line.strip_prefix("cfn=") {
            resolve(&mut functions, rest);
        } else if line.starts_with("calls=") {
            skip_next_cost = true;
        } else if line.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '+' | '-' | '*')) {
            if std::mem::take(&mut skip_next_cost) {
                continue;
            }
            let ir: u64 = line
                .split_whitespace()
                .nth(1)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            if let (Some(f), true) = (&current, ir > 0) {
                *costs.entry(f.clone()).or_default() += ir;
            }
        }
    }
    costs
}

/// Resolves a compressed name, `(id) name` or `(id)`, recording new ids.
fn resolve(table: &mut HashMap<String, String>, field: &str) -> String {
    let field = field.trim();
    let Some(rest) = field.strip_prefix('(') else {
        return field.to_string();
    };
    let Some((id, name)) = rest.split_once(')') else {
        return field.to_string();
    };
    let name = name.trim();
    if name.is_empty() {
        table.get(id).cloned().unwrap_or_default()
    } else {
        table.insert(id.to_string(), name.to_string());
        name.to_string()
    }
}

/// The crates of the runtime, whose functions' patterns leave their crate and module path
/// out.
const OWN_CRATES: [&str; 7] = [
    "blameprof_measure",
    "blameprof_sampler",
    "blameprof_locks",
    "blameprof_unwind",
    "blameprof_sys",
    "blameprof_format",
    "blameprof_rt",
];

/// A symbol name as a section-name glob: the parts that change between builds become `*`,
/// and so do the module paths of the runtime's own functions (see [`without_modules`]).
pub fn name_pattern(name: &str) -> String {
    let mut s = without_modules(name).unwrap_or_else(|| name.to_string());
    // Legacy mangling's hash: `17h` + 16 hex digits + `E`.
    if let Some(pos) = s.rfind("17h") {
        let tail = &s[pos + 3..];
        if tail.len() == 17
            && tail.ends_with('E')
            && tail[..16].bytes().all(|b| b.is_ascii_hexdigit())
        {
            s.replace_range(pos + 3..pos + 19, "*");
        }
    }
    // LTO and local-symbol suffixes: `.llvm.123`, `.886`, `.cold`.
    if let Some(dot) = s.find('.') {
        s.truncate(dot);
        s.push('*');
    }
    // v0 mangling's crate disambiguators: `Cs` + base-62 + `_`.
    let mut out = String::with_capacity(s.len());
    let mut rest = s.as_str();
    while let Some(pos) = rest.find("Cs") {
        out.push_str(&rest[..pos + 2]);
        let after = &rest[pos + 2..];
        let len = after.bytes().take_while(u8::is_ascii_alphanumeric).count();
        if len > 0 && after.as_bytes().get(len) == Some(&b'_') {
            out.push_str("*_");
            rest = &after[len + 1..];
        } else {
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// A legacy-mangled name of one of the runtime's own functions with its crate and the
/// modules between it and the function as `*`, keeping the type of a method (a segment that
/// starts with a capital letter): `_ZN17blameprof_measure6policy6record4Kept2of17h…E`
/// becomes `_ZN*blameprof_*4Kept2of17h…E`. Moving a function to another module, or to
/// another of the runtime's crates, then leaves the hot layout valid; renaming it does not
/// (the check finds that). `None` for other names.
fn without_modules(name: &str) -> Option<String> {
    let mut rest = name.strip_prefix("_ZN")?;
    let mut segments = Vec::new();
    while let Some(len_end) = rest.find(|c: char| !c.is_ascii_digit()).filter(|&e| e > 0) {
        let len: usize = rest[..len_end].parse().ok()?;
        let segment = rest.get(len_end..len_end + len)?;
        segments.push(segment);
        rest = &rest[len_end + len..];
    }
    let (&krate, path) = segments.split_first()?;
    if !OWN_CRATES.contains(&krate) || path.len() < 2 {
        return None;
    }
    // The last segment is the hash (`h` + 16 hex digits); the one before, the function.
    let (&hash, named) = path.split_last()?;
    if hash.len() != 17 || !hash.starts_with('h') {
        return None;
    }
    let (&function, owners) = named.split_last()?;
    let mut kept = vec![function];
    if let Some(&owner) = owners
        .last()
        .filter(|o| o.starts_with(|c: char| c.is_ascii_uppercase()))
    {
        kept.insert(0, owner);
    }
    let mut out = String::from("_ZN*blameprof_*");
    for k in kept {
        out.push_str(&format!("{}{k}", k.len()));
    }
    out.push_str(&format!("17{hash}{rest}"));
    Some(out)
}

/// The linker script: rules first, then the measured functions, those that ran in the most
/// runs first (what every program runs comes first, packed in the fewest pages), then by
/// instructions, then `rest` (patterns kept from the previous layout, the exported
/// functions), each pattern once.
fn script(cost: &HashMap<String, Heat>, rest: &[String]) -> String {
    let mut hot: Vec<(&String, &Heat)> = cost.iter().collect();
    hot.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let mut s = String::from(
        "/* Hot layout of the preloaded runtime: the functions that run, packed at the start of\n \
         * its code so that the kernel's 64 KiB fault-around windows make little of it resident.\n \
         * Generated by `scoreboard --hot-layout runtime/hot.ld` (callgrind over the workloads;\n \
         * what runs in the most workloads first); regenerate after large changes to the\n \
         * runtime. The runtime's own functions are named without their crate and module\n \
         * path, so moving one between modules or crates keeps it here; renaming one does not,\n \
         * and the scoreboard's `--check-hot-layout` (run by its tests) fails when a function\n \
         * that runs lies outside. Patterns of the previous layout that still match are kept\n \
         * (what runs depends on timing). A pattern that matches nothing costs nothing. The\n \
         * PLT (calls from the C parts to libc) goes first: lld would put it after all the code,\n \
         * in a fault-around window of its own. */\n\
         SECTIONS {\n  .plt : { *(.plt) }\n  .text.hot : {\n",
    );
    let mut seen = HashSet::new();
    for rule in BY_RULE {
        s.push_str(&format!("    {rule}\n"));
    }
    let measured = hot.into_iter().map(|(n, _)| n.as_str());
    for name in measured.chain(rest.iter().map(String::as_str)) {
        if name.starts_with("0x") {
            continue; // an address callgrind could not name (no symbol): nothing to match
        }
        let p = name_pattern(name);
        if seen.insert(p.clone()) {
            s.push_str(&format!("    *(.text.{p} .text.unlikely.{p})\n"));
        }
    }
    s.push_str("  }\n} INSERT BEFORE .text;\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_hide_what_changes_between_builds() {
        assert_eq!(
            name_pattern("_ZN9blameprof7sampler7handler2on17h0123456789abcdefE"),
            "_ZN9blameprof7sampler7handler2on17h*E"
        );
        assert_eq!(
            name_pattern("_RNvMs0_NtNtCsjrHSEGnQ3l9_3std3sys4OnceCs4X4t9plMPHF_9addr2line"),
            "_RNvMs0_NtNtCs*_3std3sys4OnceCs*_9addr2line"
        );
        assert_eq!(
            name_pattern("_ZN4core3str7pattern.886"),
            "_ZN4core3str7pattern*"
        );
        assert_eq!(name_pattern("pthread_mutex_lock"), "pthread_mutex_lock");
    }

    #[test]
    fn own_functions_are_matched_wherever_their_module_is() {
        assert_eq!(
            name_pattern("_ZN17blameprof_measure6policy6record4Kept2of17h0123456789abcdefE"),
            "_ZN*blameprof_*4Kept2of17h*E"
        );
        assert_eq!(
            name_pattern("_ZN15blameprof_locks10wait_table6depart17h0123456789abcdefE"),
            "_ZN*blameprof_*6depart17h*E"
        );
        assert_eq!(
            name_pattern("_ZN5gimli4read3cfi8next_row17h0123456789abcdefE"),
            "_ZN5gimli4read3cfi8next_row17h*E",
            "other crates keep their paths"
        );
    }

    #[test]
    fn globs_match_as_the_linker_does() {
        assert!(glob(
            "_ZN*blameprof_*4Kept2of17h*E",
            "_ZN17blameprof_measure6policy6record4Kept2of17h0123456789abcdefE"
        ));
        assert!(!glob(
            "_ZN*blameprof_*4Kept2of17h*E",
            "_ZN17blameprof_measure4Kept3off17h0E"
        ));
        assert!(glob("pthread_mutex_lock", "pthread_mutex_lock"));
        assert!(!glob("pthread_mutex_lock", "pthread_mutex_lock2"));
        assert!(glob("_ZN101_$LT$framehop*", "_ZN101_$LT$framehop..x"));
    }

    #[test]
    fn sections_are_read_from_readelf() {
        let text = "  [12] .plt              PROGBITS        0000000000011000 011000 000a10 10  AX  0   0 16\n  \
                    [14] .text.hot         PROGBITS        0000000000012000 012000 000100 00  AX  0   0 16\n";
        let s = parse_sections(text);
        assert_eq!(s[".text.hot"], 0x12000..0x12100);
        assert_eq!(s[".plt"], 0x11000..0x11a10);
    }

    #[test]
    fn self_costs_follow_name_compression_and_skip_call_costs() {
        let text = "events: Ir\n\
                    ob=(1) /x/libblameprof_rt.so\n\
                    fl=(1) ???\n\
                    fn=(1) hot_a\n\
                    0 10\n\
                    cob=(2) /usr/lib/libc.so.6\n\
                    cfn=(2) memcpy\n\
                    calls=1 0\n\
                    0 500\n\
                    +1 5\n\
                    ob=(2)\n\
                    fn=(2)\n\
                    0 700\n\
                    ob=(1)\n\
                    fn=(1)\n\
                    * 3\n\
                    fn=(3) cold_b\n\
                    0 0\n\
                    fn=(4) ioctl'2\n\
                    0 7\n";
        let c = self_costs(text);
        assert_eq!(c.get("hot_a"), Some(&18));
        assert_eq!(c.get("memcpy"), Some(&700));
        assert_eq!(c.get("cold_b"), None, "no instruction executed");
        assert_eq!(c.get("ioctl"), Some(&7), "recursion level dropped");
    }

    #[test]
    fn script_lists_rules_measured_then_exported_once() {
        let heat = |runs, instructions| Heat { runs, instructions };
        let cost = HashMap::from([("b".to_string(), heat(2, 5)), ("a".to_string(), heat(2, 9))]);
        let s = script(&cost, &["a".to_string(), "sem_wait".to_string()]);
        let a = s.find("*(.text.a ").unwrap();
        let b = s.find("*(.text.b ").unwrap();
        let sem = s.find("*(.text.sem_wait ").unwrap();
        assert!(s.find("crtbeginS").unwrap() < a && a < b && b < sem);
        assert_eq!(s.matches("*(.text.a ").count(), 1);
        assert!(s.find(".plt :").unwrap() < s.find(".text.hot :").unwrap());
        assert!(s.trim_end().ends_with("INSERT BEFORE .text;"));
    }
}
