//! Compiles the C shim for the variadic exec functions (see csrc/exec_variadic.c), and
//! links the library with hot.ld (the code that runs packed together) and cold.ld (code the
//! profiled program never runs kept apart), and with libgcc's unwinder built in.
fn main() {
    println!("cargo:rerun-if-changed=csrc/exec_variadic.c");
    println!("cargo:rerun-if-changed=cold.ld");
    println!("cargo:rerun-if-changed=hot.ld");
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-T,{dir}/hot.ld");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-T,{dir}/cold.ld");
    link_unwinder_statically();
    cc::Build::new()
        .file("csrc/exec_variadic.c")
        .flag_if_supported("-Wall")
        .compile("exec_variadic");
}

/// Links libgcc's unwinder (`libgcc_eh.a`, what `-static-libgcc` uses) into the runtime, so
/// that the standard library's panic and backtrace support finds `_Unwind_*` here and the
/// runtime does not need `libgcc_s.so.1`: loading and relocating that library made about
/// 100 KiB of a C program's memory resident for code that runs only on a panic. The archive is
/// linked whole because the standard library, which references it, comes later on the link
/// line; `--as-needed` (rustc's default) then drops `libgcc_s`. Its code is linked apart
/// with the other cold code (cold.ld).
fn link_unwinder_statically() {
    let out = std::process::Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .expect("cannot run the C compiler to find libgcc_eh.a");
    let path = std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let dir = path
        .parent()
        .filter(|_| path.is_absolute() && path.exists())
        .unwrap_or_else(|| panic!("libgcc_eh.a not found (gcc installed?): {}", path.display()));
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=static:+whole-archive=gcc_eh");
}
