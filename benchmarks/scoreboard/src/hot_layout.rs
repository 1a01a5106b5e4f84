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
    let (functions, exported) = runtime_functions(runtime)?;
    let mut cost: HashMap<String, Heat> = HashMap::new();
    for w in workloads {
        eprintln!("scoreboard: callgrind {}", w.name);
        let dir = scratch.join(format!("hot-{}", w.name));
        crate::accuracy::remove(&dir)?;
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
        proc::run(&mut cmd, false, Some(LIMIT))?.check(&format!("callgrind {}", w.name))?;
        let text = fs::read_to_string(&cg_out)
            .with_context(|| format!("cannot read {}", cg_out.display()))?;
        for (name, ir) in self_costs(&text) {
            if functions.contains(&name) {
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
    fs::write(out, script(&cost, &exported))
        .with_context(|| format!("cannot write {}", out.display()))
}

/// The runtime's functions, from `nm`: all of them, and those it exports (its interposed
/// entry points).
fn runtime_functions(runtime: &Path) -> Result<(HashSet<String>, Vec<String>)> {
    let out = Command::new("nm")
        .arg("--defined-only")
        .arg(runtime)
        .output()
        .context("cannot run nm (binutils)")?;
    if !out.status.success() {
        bail!("nm {} failed", runtime.display());
    }
    let (mut all, mut exported) = (HashSet::new(), Vec::new());
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let [_, kind, name] = line.split_whitespace().collect::<Vec<_>>()[..] {
            if matches!(kind, "t" | "T" | "W" | "w") {
                all.insert(name.to_string());
            }
            if kind == "T" {
                exported.push(name.to_string());
            }
        }
    }
    exported.sort();
    Ok((all, exported))
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

/// A symbol name as a section-name glob: the parts that change between builds become `*`.
pub fn name_pattern(name: &str) -> String {
    let mut s = name.to_string();
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

/// The linker script: rules first, then the measured functions, those that ran in the most
/// runs first (what every program runs comes first, packed in the fewest pages), then by
/// instructions, then the exported functions that did not run.
fn script(cost: &HashMap<String, Heat>, exported: &[String]) -> String {
    let mut hot: Vec<(&String, &Heat)> = cost.iter().collect();
    hot.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let mut s = String::from(
        "/* Hot layout of the preloaded runtime: the functions that run, packed at the start of\n \
         * its code so that the kernel's 64 KiB fault-around windows make little of it resident.\n \
         * Generated by `scoreboard --hot-layout runtime/hot.ld` (callgrind over the workloads;\n \
         * what runs in the most workloads first); regenerate after large changes to the\n \
         * runtime. A pattern that matches nothing costs nothing; a function it misses only\n \
         * lands in the ordinary .text. The PLT (calls from the C parts to libc) goes first:\n \
         * lld would put it after all the code, in a fault-around window of its own. */\n\
         SECTIONS {\n  .plt : { *(.plt) }\n  .text.hot : {\n",
    );
    let mut seen = HashSet::new();
    for rule in BY_RULE {
        s.push_str(&format!("    {rule}\n"));
    }
    let measured = hot.into_iter().map(|(n, _)| n.as_str());
    for name in measured.chain(exported.iter().map(String::as_str)) {
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
