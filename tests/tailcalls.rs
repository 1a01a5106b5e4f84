//! Call paths through tail calls and through code without unwind information. Proves that
//! (1) a function whose frame a tail call removed (`return worker(x);` at -O2) is put back
//! above the function it jumped to, with the CPU time the program measured for that
//! function (within 15%), also when it does nothing but forward, and through a PLT call into
//! a library; (2) no frame is invented: every function of the program is reached only from
//! its real caller, an ordinary call is left as it is, and of a chain of two tail calls only
//! the first function is put back (the stack holds no trace of the second); (3) code without
//! unwind information (assembly without CFI, machine code in an anonymous mapping) never
//! crashes the profiler or loses samples.

mod common;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use common::*;
use serde_json::Value;

/// |profiled - truth| / truth.
fn rel_err(profiled: u64, truth: u64) -> f64 {
    (profiled as f64 - truth as f64).abs() / truth as f64
}

/// tailcall.c with libtailcall.so, 0.4 CPU-seconds a phase at 1 kHz: (profile dir, truth).
fn tailcall_profile() -> &'static (PathBuf, HashMap<String, u64>) {
    static P: OnceLock<(PathBuf, HashMap<String, u64>)> = OnceLock::new();
    P.get_or_init(|| {
        let lib = compile_c(
            "tailcall_lib.c",
            "libtailcall.so",
            &["-O2", "-g", "-shared", "-fPIC"],
        );
        let rpath = format!("-Wl,-rpath,{}", lib.parent().unwrap().display());
        let prog = compile_c(
            "tailcall.c",
            "tailcall",
            &["-O2", "-g", lib.to_str().unwrap(), &rpath],
        );
        let out = scratch_dir("tailcall").join("prof");
        let run = profile_ok(&out, 1000, &prog, &["0.4"]);
        (out, truth(&run.stdout))
    })
}

/// Inclusive work of the nodes reached by exactly the consecutive functions `seq`.
fn work_at(top: &Value, seq: &[&str]) -> u64 {
    find_paths(top, seq).iter().map(|p| p.inclusive).sum()
}

/// Asserts that `callee`'s work (its own measure: `truth[key]`) is all under `caller`, and
/// within 15% of the truth.
fn assert_under(caller: &str, callee: &str, key: &str) {
    let (out, t) = tailcall_profile();
    let top = report_json(out, &["--view", "top-down"]);
    let flat = report_json(out, &["--view", "flat"]);
    let (callee_incl, _) = flat_values(&flat, callee);
    let under = work_at(&top, &["main", caller, callee]);
    assert!(
        rel_err(under, t[key]) < 0.15,
        "{callee} under main -> {caller}: profiled {under} ns, measured {} ns\n{}",
        t[key],
        describe_paths(&top, callee, 5)
    );
    assert_eq!(
        under,
        callee_incl,
        "all of {callee} must be under {caller}\n{}",
        describe_paths(&top, callee, 5)
    );
}

#[test]
fn a_function_that_tail_calls_is_put_back_above_its_callee() {
    assert_under("dispatch", "worker", "worker_ns");
    // dispatch's own setup stays dispatch's, with no frame put above it.
    let (out, t) = tailcall_profile();
    let flat = report_json(out, &["--view", "flat"]);
    let (_, own) = flat_values(&flat, "dispatch");
    assert!(
        rel_err(own, t["dispatch_ns"]) < 0.2,
        "dispatch: profiled {own} ns of its own, measured {} ns",
        t["dispatch_ns"]
    );
}

#[test]
fn a_function_that_only_forwards_gets_its_callees_cost() {
    assert_under("only_forwards", "worker2", "worker2_ns");
    let (out, _) = tailcall_profile();
    let flat = report_json(out, &["--view", "flat"]);
    let (incl, own) = flat_values(&flat, "only_forwards");
    assert_eq!(own, 0, "only_forwards computes nothing itself");
    assert!(
        incl > 0,
        "only_forwards must be shown, with its callee's cost"
    );
}

#[test]
fn a_library_function_called_through_the_plt_is_put_back() {
    assert_under("lib_forward", "lib_worker", "lib_worker_ns");
}

#[test]
fn an_ordinary_call_is_left_as_it_is() {
    assert_under("calls_normally", "worker3", "worker3_ns");
}

#[test]
fn of_a_chain_of_tail_calls_only_the_first_function_is_put_back() {
    // chain_outer jumps to chain_inner, which jumps to worker4: only main's call proves
    // anything, and it names chain_outer.
    assert_under("chain_outer", "worker4", "worker4_ns");
}

/// The function of the program each of its functions is called by (main: by libc's start).
const CALLERS: &[(&str, &str)] = &[
    ("dispatch", "main"),
    ("worker", "dispatch"),
    ("only_forwards", "main"),
    ("worker2", "only_forwards"),
    ("calls_normally", "main"),
    ("worker3", "calls_normally"),
    ("chain_outer", "main"),
    ("worker4", "chain_outer"),
    ("lib_forward", "main"),
    ("lib_worker", "lib_forward"),
];

/// Every (parent, child) pair of function names in a tree view.
fn edges(report: &Value) -> Vec<(String, String)> {
    fn walk(node: &Value, out: &mut Vec<(String, String)>) {
        for child in node["children"].as_array().into_iter().flatten() {
            out.push((func(node).to_owned(), func(child).to_owned()));
            walk(child, out);
        }
    }
    let mut out = Vec::new();
    for root in roots(report) {
        walk(root, &mut out);
    }
    out
}

#[test]
fn no_frame_is_invented() {
    let (out, _) = tailcall_profile();
    let top = report_json(out, &["--view", "top-down", "--min-percent", "0"]);
    let program: Vec<&str> = CALLERS.iter().map(|&(f, _)| f).collect();
    for (parent, child) in edges(&top) {
        let expected = CALLERS.iter().find(|&&(f, _)| f == child).map(|&(_, c)| c);
        if let Some(expected) = expected {
            assert_eq!(
                parent,
                expected,
                "{child} under {parent}\n{}",
                describe_paths(&top, &child, 5)
            );
        }
        // Nothing of the program (and no tail-called function) above main.
        if child == "main" {
            assert!(!program.contains(&parent.as_str()), "main under {parent}");
        }
    }
    let flat = report_json(out, &["--view", "flat"]);
    assert_eq!(
        flat_values(&flat, "chain_inner"),
        (0, 0),
        "chain_inner cannot be proven: it must not appear"
    );
}

/// tailcall_nocfi.c, 0.3 CPU-seconds a phase at 1 kHz: (profile dir, truth, run).
fn nocfi_profile() -> &'static (PathBuf, HashMap<String, u64>, Run) {
    static P: OnceLock<(PathBuf, HashMap<String, u64>, Run)> = OnceLock::new();
    P.get_or_init(|| {
        let prog = compile_c("tailcall_nocfi.c", "tailcall_nocfi", &["-O2", "-g"]);
        let out = scratch_dir("tailcall-nocfi").join("prof");
        let run = profile_ok(&out, 1000, &prog, &["0.3"]);
        (out, truth(&run.stdout), run)
    })
}

/// Exclusive work of the code in no module (`[unknown] 0x...`) in a flat report.
fn unknown_code_work(flat: &Value) -> u64 {
    roots(flat)
        .iter()
        .filter(|n| func(n).starts_with("[unknown]"))
        .map(|n| work(n, "exclusive"))
        .sum()
}

#[test]
fn code_without_unwind_information_keeps_its_samples() {
    let (out, t, run) = nocfi_profile();
    let flat = report_json(out, &["--view", "flat"]);
    let checks = [
        (
            "spin_nocfi",
            flat_values(&flat, "spin_nocfi").1,
            t["asm_ns"],
        ),
        (
            "jit_callback",
            flat_values(&flat, "jit_callback").1,
            t["callback_ns"],
        ),
        ("mapped code", unknown_code_work(&flat), t["jit_ns"]),
    ];
    for (what, profiled, measured) in checks {
        assert!(
            rel_err(profiled, measured) < 0.2,
            "{what}: profiled {profiled} ns, measured {measured} ns\n{}",
            run.describe()
        );
    }
    // A leaf without CFI that has not touched the stack: its return address is at the stack
    // pointer, where the unwinder looks for it, so its path is whole.
    let top = report_json(out, &["--view", "top-down"]);
    let whole = work_at(&top, &["main", "asm_phase", "spin_nocfi"]);
    assert!(
        whole as f64 > 0.9 * t["asm_ns"] as f64,
        "spin_nocfi's paths: {whole} ns of {} ns whole\n{}",
        t["asm_ns"],
        describe_paths(&top, "spin_nocfi", 5)
    );
}

/// The root of every path that ends in `leaf` (a name, or a prefix ending in a space).
fn roots_of(report: &Value, leaf: &str) -> Vec<String> {
    let mut found = Vec::new();
    for root in roots(report) {
        let mut stack = vec![root];
        while let Some(node) = stack.pop() {
            if func(node) == leaf || (leaf.ends_with(' ') && func(node).starts_with(leaf)) {
                found.push(func(root).to_owned());
            }
            stack.extend(node["children"].as_array().into_iter().flatten());
        }
    }
    found.sort();
    found.dedup();
    found
}

/// Call paths through code without unwind information are cut and marked, never made up:
/// `rbp` there may be any register (-O2 code uses it as an ordinary one; here it held the
/// thread's CPU-time nanoseconds the program keeps on its stack, which once made a root
/// frame `[unknown] 0x...`), so the unwinder stops at a frame in no module and ends the path
/// with `[truncated]`, as it does where it fails (`unwind/walk.rs`).
#[test]
fn paths_through_code_without_unwind_information_are_cut_and_marked() {
    let (out, _, _) = nocfi_profile();
    let top = report_json(out, &["--view", "top-down", "--min-percent", "0"]);
    for leaf in ["jit_callback", "[unknown] "] {
        for root in roots_of(&top, leaf) {
            assert!(
                root == "_start" || root == "[truncated]",
                "a path to {leaf} starts at {root}\n{}",
                describe_paths(&top, leaf.trim(), 5)
            );
        }
    }
}
