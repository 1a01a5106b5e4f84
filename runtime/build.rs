//! Compiles the C shim for the variadic exec functions (see csrc/exec_variadic.c), and
//! links the library with cold.ld (code the profiled program never runs kept apart).
fn main() {
    println!("cargo:rerun-if-changed=csrc/exec_variadic.c");
    println!("cargo:rerun-if-changed=cold.ld");
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-T,{dir}/cold.ld");
    cc::Build::new()
        .file("csrc/exec_variadic.c")
        .flag_if_supported("-Wall")
        .compile("exec_variadic");
}
