//! Compiles the C shim for the variadic exec functions (see csrc/exec_variadic.c).
fn main() {
    println!("cargo:rerun-if-changed=csrc/exec_variadic.c");
    cc::Build::new()
        .file("csrc/exec_variadic.c")
        .flag_if_supported("-Wall")
        .compile("exec_variadic");
}
