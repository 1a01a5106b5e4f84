//! Tests of symbolization against small programs compiled here with gcc/g++.

use super::*;
use crate::attribution::testutil::{module, TempDir};
use object::{Object, ObjectSymbol};
use std::process::Command;

const PROGRAM: &str = r#"
static inline __attribute__((always_inline)) unsigned mix(const char *s)
{
    unsigned h = 2166136261u;
    while (*s) { h ^= (unsigned char)*s++; h *= 16777619u; } /* INLINE_LINE */
    return h;
}

__attribute__((noinline)) unsigned hash_all(int n, char **v)
{
    unsigned t = 0;
    for (int i = 0; i < n; i++) t += mix(v[i]); /* CALL_LINE */
    return t;
}

int main(int argc, char **argv) { return (int)hash_all(argc, argv); }
"#;

fn line_of(marker: &str) -> u32 {
    PROGRAM
        .lines()
        .position(|l| l.contains(marker))
        .expect("marker in program") as u32
        + 1
}

fn run(cmd: &mut Command) {
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(status.success(), "{cmd:?} failed");
}

/// Compiles `source` (C, or C++ when `cxx`) with `flags` into `dir/name`.
fn compile(dir: &Path, name: &str, source: &str, cxx: bool, flags: &[&str]) -> PathBuf {
    let src = dir.join(if cxx { "prog.cc" } else { "prog.c" });
    std::fs::write(&src, source).expect("write source");
    let out = dir.join(name);
    let compiler = if cxx { "g++" } else { "gcc" };
    run(Command::new(compiler)
        .args(flags)
        .arg("-Wl,--build-id")
        .arg(&src)
        .arg("-o")
        .arg(&out));
    out
}

/// (address, size) of the symbol `name`, and the file's build-id.
fn symbol(path: &Path, name: &str) -> (u64, u64, Vec<u8>) {
    let data = std::fs::read(path).expect("read binary");
    let file = object::File::parse(&*data).expect("parse binary");
    let sym = file
        .symbols()
        .find(|s| s.name() == Ok(name))
        .unwrap_or_else(|| panic!("no symbol {name}"));
    let build_id = file.build_id().unwrap().unwrap_or_default().to_vec();
    (sym.address(), sym.size(), build_id)
}

fn functions(frames: &[SourceFrame]) -> Vec<&str> {
    frames.iter().map(|f| f.function.as_str()).collect()
}

/// Finds an address in `hash_all` whose frames are mix (inlined) in hash_all, and checks
/// files and lines.
fn check_inlined(binary: &Path, symbolizer: &mut Symbolizer) {
    let (start, size, build_id) = symbol(binary, "hash_all");
    let m = module(1, binary.to_str().unwrap(), build_id);
    let found = (start..start + size)
        .map(|a| symbolizer.symbolize(Some(&m), CodeAddress::InstructionPointer(a)))
        .find(|frames| {
            functions(frames) == ["mix", "hash_all"]
                && frames[0].line == Some(line_of("INLINE_LINE"))
        })
        .expect("an address of hash_all inside the loop of the inlined mix");
    assert!(found[0].inlined && !found[1].inlined);
    assert!(found[0].file.as_deref().unwrap().ends_with("prog.c"));
    assert_eq!(found[1].line, Some(line_of("CALL_LINE")));
    assert!(found[1].file.as_deref().unwrap().ends_with("prog.c"));
}

#[test]
fn dwarf_gives_inlined_frames_with_file_and_line() {
    let tmp = TempDir::new("sym-dwarf");
    let dir = &tmp.0;
    let binary = compile(dir, "prog", PROGRAM, false, &["-g", "-O1"]);
    check_inlined(&binary, &mut Symbolizer::new());
}

#[test]
fn return_addresses_are_looked_up_one_byte_back() {
    let tmp = TempDir::new("sym-ret");
    let dir = &tmp.0;
    let binary = compile(dir, "prog", PROGRAM, false, &["-g", "-O1"]);
    let (main, _, build_id) = symbol(&binary, "main");
    let m = module(1, binary.to_str().unwrap(), build_id);
    let mut s = Symbolizer::new();
    let ret = s.symbolize(Some(&m), CodeAddress::ReturnAddress(main + 1));
    assert_eq!(functions(&ret), ["main"]);
    assert_eq!(ret[0].line, Some(line_of("int main")));
}

#[test]
fn separate_debug_info_is_found_by_build_id() {
    let tmp = TempDir::new("sym-debuglink");
    let dir = &tmp.0;
    let binary = compile(dir, "prog", PROGRAM, false, &["-g", "-O1"]);
    let (_, _, build_id) = symbol(&binary, "hash_all");
    let hex: String = build_id.iter().map(|b| format!("{b:02x}")).collect();
    let debug_dir = dir.join("debug");
    let target = debug_dir.join(".build-id").join(&hex[..2]);
    std::fs::create_dir_all(&target).unwrap();
    let debug_file = target.join(format!("{}.debug", &hex[2..]));
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&binary)
        .arg(&debug_file));
    run(Command::new("strip").arg("--strip-debug").arg(&binary));
    check_inlined(&binary, &mut Symbolizer::with_debug_dir(debug_dir));
}

/// A module stripped of its DWARF, with `.gnu_debuglink` naming a debug file: found in the
/// module's `.debug/` directory when its CRC32 matches, and not when it does not.
#[test]
fn separate_debug_info_is_found_by_gnu_debuglink() {
    let tmp = TempDir::new("sym-gnu-debuglink");
    let dir = &tmp.0;
    let binary = compile(
        dir,
        "prog",
        PROGRAM,
        false,
        &["-g", "-O1", "-Wl,--build-id=none"],
    );
    let debug = dir.join(".debug");
    std::fs::create_dir_all(&debug).unwrap();
    let debug_file = debug.join("prog.debug");
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&binary)
        .arg(&debug_file));
    run(Command::new("strip").arg("--strip-debug").arg(&binary));
    run(Command::new("objcopy")
        .arg(format!("--add-gnu-debuglink={}", debug_file.display()))
        .arg(&binary));
    // No build-id: only the link can find it (the debug directory is empty).
    let empty = dir.join("no-debug-dir");
    check_inlined(&binary, &mut Symbolizer::with_debug_dir(empty.clone()));
    // A debug file of other contents (a stale build) is refused: no line, only symbols.
    let mut stale = std::fs::read(&debug_file).unwrap();
    stale.push(0);
    std::fs::write(&debug_file, stale).unwrap();
    let (start, _, build_id) = symbol(&binary, "hash_all");
    let m = module(1, binary.to_str().unwrap(), build_id);
    let frames = Symbolizer::with_debug_dir(empty)
        .symbolize(Some(&m), CodeAddress::InstructionPointer(start));
    assert_eq!(functions(&frames), ["hash_all"]);
    assert_eq!(
        frames[0].line, None,
        "no line from a debug file whose CRC differs"
    );
}

#[test]
fn symbol_table_without_dwarf_then_module_offset_label() {
    let tmp = TempDir::new("sym-symtab");
    let dir = &tmp.0;
    let binary = compile(dir, "prog", PROGRAM, false, &["-O1"]);
    let (start, _, build_id) = symbol(&binary, "hash_all");
    let m = module(1, binary.to_str().unwrap(), build_id.clone());
    let mut s = Symbolizer::new();
    let frames = s.symbolize(Some(&m), CodeAddress::InstructionPointer(start + 2));
    assert_eq!(functions(&frames), ["hash_all"]);
    assert_eq!((frames[0].file.as_deref(), frames[0].line), (None, None));

    run(Command::new("strip").arg("-s").arg(&binary));
    let frames = Symbolizer::new().symbolize(Some(&m), CodeAddress::InstructionPointer(start));
    assert_eq!(functions(&frames), [format!("prog+{start:#x}")]);
}

#[test]
fn cxx_names_are_demangled() {
    let tmp = TempDir::new("sym-cxx");
    let dir = &tmp.0;
    let source =
        "namespace geo { __attribute__((noinline)) int area(int w, int h) { return w * h; } }\n\
                  int main(int c, char **) { return geo::area(c, c); }\n";
    let binary = compile(dir, "prog", source, true, &["-g", "-O1"]);
    let data = std::fs::read(&binary).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let area = file
        .symbols()
        .find(|s| s.name().is_ok_and(|n| n.contains("4area")))
        .expect("mangled geo::area")
        .address();
    let build_id = file.build_id().unwrap().unwrap_or_default().to_vec();
    let m = module(1, binary.to_str().unwrap(), build_id);
    let frames = Symbolizer::new().symbolize(Some(&m), CodeAddress::InstructionPointer(area));
    assert_eq!(functions(&frames), ["geo::area(int, int)"]);
}

/// C names that are also C++ type encodings stay C names: a lock `m` or `rw` and a
/// function `f` (in a module without DWARF, named from its symbol table) were reported as
/// "unsigned long", "wchar_t restrict" and "float".
#[test]
fn c_names_are_not_demangled_as_types() {
    let tmp = TempDir::new("sym-c-names");
    let dir = &tmp.0;
    let source = "int m[4], rw[4];\n\
                  __attribute__((noinline)) int f(int x) { return x * m[x & 3] + rw[x & 3]; }\n\
                  int main(int c, char **v) { (void)v; return f(c); }\n";
    let binary = compile(dir, "prog", source, false, &["-O1"]);
    let data = std::fs::read(&binary).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let address = |name: &str| {
        file.symbols()
            .find(|s| s.name() == Ok(name))
            .unwrap_or_else(|| panic!("no symbol {name}"))
            .address()
    };
    let build_id = file.build_id().unwrap().unwrap_or_default().to_vec();
    let module = module(1, binary.to_str().unwrap(), build_id);
    let mut s = Symbolizer::new();
    for name in ["m", "rw"] {
        assert_eq!(
            s.data_symbol(&module, address(name) + 4),
            Some((name.to_owned(), 4))
        );
    }
    let frames = s.symbolize(Some(&module), CodeAddress::InstructionPointer(address("f")));
    assert_eq!(functions(&frames), ["f"]);
}

#[test]
fn labels_for_unknown_changed_missing_and_pseudo_modules() {
    let tmp = TempDir::new("sym-labels");
    let dir = &tmp.0;
    let binary = compile(dir, "prog", PROGRAM, false, &["-g", "-O1"]);
    let mut s = Symbolizer::new();
    let ip = CodeAddress::InstructionPointer(0x1234);
    assert_eq!(functions(&s.symbolize(None, ip)), ["[unknown] 0x1234"]);
    let changed = module(1, binary.to_str().unwrap(), vec![1, 2, 3]);
    assert_eq!(
        functions(&s.symbolize(Some(&changed), ip)),
        ["[module changed since recording] prog+0x1234"]
    );
    let missing = module(2, "/nonexistent/libgone.so", vec![]);
    assert_eq!(
        functions(&s.symbolize(Some(&missing), ip)),
        ["libgone.so+0x1234"]
    );
    let vdso = module(3, "[vdso]", vec![]);
    assert_eq!(functions(&s.symbolize(Some(&vdso), ip)), ["[vdso]"]);
}

#[test]
fn analysis_expands_inlined_frames_into_the_tree() {
    use crate::attribution::cct::top_down;
    use crate::attribution::testutil::{find_path, process};
    use crate::attribution::{analyze, Filter};
    use crate::format::read::{Profile, Sample};
    use crate::format::Frame;

    let tmp = TempDir::new("sym-tree");
    let dir = &tmp.0;
    let binary = compile(dir, "prog", PROGRAM, false, &["-g", "-O1"]);
    let (start, size, build_id) = symbol(&binary, "hash_all");
    let (main, _, _) = symbol(&binary, "main");
    let m = module(1, binary.to_str().unwrap(), build_id);
    let mut sym = Symbolizer::new();
    let leaf = (start..start + size)
        .find(|&a| {
            let frames = sym.symbolize(Some(&m), CodeAddress::InstructionPointer(a));
            functions(&frames) == ["mix", "hash_all"]
                && frames[0].line == Some(line_of("INLINE_LINE"))
        })
        .expect("inlined address");

    let mut p = process(7, &["work"]);
    p.modules.push(m);
    let stack = p.stacks.intern(&[
        Frame {
            module: 1,
            offset: leaf,
        },
        Frame {
            module: 1,
            offset: main + 1,
        },
    ]);
    p.samples.push(Sample {
        tid: 7,
        metric: 0,
        flags: 0,
        value: 5_000_000,
        stack,
        object: 0,
        time: 0,
        span: 0,
    });
    let profile = Profile {
        path: dir.to_owned(),
        processes: vec![p],
        skipped: Vec::new(),
    };
    let a = analyze(
        &profile,
        Filter::default(),
        &mut sym,
        &mut Default::default(),
    )
    .unwrap();
    let t = top_down(&a);
    let mix = find_path(&a, &t, &["main", "hash_all", "mix"]);
    assert!(t.node(mix).inlined);
    assert_eq!(t.exclusive(mix), &[5_000_000]);
    let line = t.hottest_line(mix, 0).unwrap();
    assert_eq!(line.line, Some(line_of("INLINE_LINE")));
    assert!(a.names.file(line.file.unwrap()).ends_with("prog.c"));
    let caller = find_path(&a, &t, &["main", "hash_all"]);
    assert_eq!(
        t.hottest_line(caller, 0).unwrap().line,
        Some(line_of("CALL_LINE"))
    );
    assert_eq!(
        a.names.function(t.node(caller).function).module,
        binary.to_str().unwrap()
    );
}

#[test]
fn a_runtime_frame_keeps_only_its_out_of_line_function_without_a_line() {
    use crate::attribution::testutil::{add_frames, analyze_renamed, app, path_names, process};
    use crate::format::read::Profile;
    use crate::format::Frame;

    // The program stands in for the runtime library: only the file name matters.
    let tmp = TempDir::new("sym-runtime");
    let binary = compile(&tmp.0, "libblameprof_rt.so", PROGRAM, false, &["-g", "-O1"]);
    let (start, size, build_id) = symbol(&binary, "hash_all");
    let m = module(1, binary.to_str().unwrap(), build_id);
    let mut sym = Symbolizer::new();
    // A return address whose call site is inside `mix`, inlined into `hash_all`.
    let ret = (start + 1..start + size)
        .find(|&a| {
            let frames = sym.symbolize(Some(&m), CodeAddress::ReturnAddress(a));
            functions(&frames) == ["mix", "hash_all"] && frames[0].line.is_some()
        })
        .expect("inlined address");

    let mut p = process(7, &["work"]);
    p.modules.push(m);
    let runtime = Frame {
        module: 1,
        offset: ret,
    };
    add_frames(&mut p, 7, 0, &[app(0x30), runtime, app(0x10)], 1);
    let profile = Profile {
        path: tmp.0.clone(),
        processes: vec![p],
        skipped: Vec::new(),
    };
    let a = analyze_renamed(&profile);
    let path = &a.paths[0].locs;
    assert_eq!(path_names(&a, path), ["main", "hash_all", "g"]);
    assert!(!path[1].inlined);
    assert_eq!(path[1].line, crate::attribution::SourceLine::default());
}
