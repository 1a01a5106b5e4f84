//! Language runtimes' lock wrappers: the frames between the user's code and the pthread
//! function it reached through its language's lock types.
//!
//! Job: tell whether a frame belongs to a wrapper, so that the lists that name *who* waited
//! or made others wait (the run summary's victims and culprits, the lock view's waiter and
//! holder sites, a lock's init site) name the user's `read_table`, not
//! `__glibcxx_rwlock_rdlock`, and the user's `consume`, not
//! `wait<consume()::<lambda()> >`. Call paths keep every frame: only the name chosen for a
//! site skips wrappers.
//!
//! A frame is a wrapper when its function is one, by its name: libstdc++'s `__gthread_*`
//! and `__glibcxx_*`; anything in `std::` (C++'s mutex, lock and condition variable classes,
//! `std::thread::join`; Rust's `std::sync`, `std::sys`, `std::thread`); `core::ptr::
//! drop_in_place` of such a type (a guard dropped); `parking_lot`, `parking_lot_core` and
//! `lock_api` (Rust). Or by where its code is, for inlined frames whose debug name is
//! unqualified (`lock`, `wait<...>`): a C++ standard library header (an `include/c++/`
//! directory), Rust's standard library sources (`library/std/`, `library/core/`), a
//! `parking_lot` or `lock_api` crate's sources; or out-of-line in `libstdc++` or `libc++`.
//! A user's own code called back from a wrapper (a predicate lambda, a `call_once`
//! closure) is in the user's files, so the walk stops there.
//!
//! Not async-signal-safe (allocates nothing, but is analysis code); pure.

use super::{Loc, Names};

/// Name prefixes of wrapper functions (after a leading `<` of a Rust trait method).
const NAME_PREFIXES: [&str; 7] = [
    "__gthread_",
    "__glibcxx_",
    "std::",
    "parking_lot::",
    "parking_lot_core::",
    "lock_api::",
    "core::ptr::drop_in_place<std::",
];

/// Parts of source paths of wrapper code: the C++ standard library's headers and Rust's
/// standard library sources.
const FILE_PARTS: [&str; 3] = ["/include/c++/", "/library/std/src/", "/library/core/src/"];

/// Crates whose sources (`/<crate>-<version>/src/`, as Cargo unpacks them) are wrappers.
const WRAPPER_CRATES: [&str; 3] = ["parking_lot", "parking_lot_core", "lock_api"];

/// Modules of out-of-line wrapper code (file name prefixes).
const MODULE_PREFIXES: [&str; 2] = ["libstdc++.so", "libc++.so"];

/// Whether a frame of function `name`, whose code is in source file `file` (if known) and
/// module `module`, is a language runtime's lock wrapper.
pub fn is_wrapper(name: &str, file: Option<&str>, module: &str) -> bool {
    let module_name = module.rsplit('/').next().unwrap_or(module);
    wrapper_name(name)
        || file.is_some_and(|f| FILE_PARTS.iter().any(|p| f.contains(p)) || in_wrapper_crate(f))
        || MODULE_PREFIXES.iter().any(|p| module_name.starts_with(p))
}

/// Whether a function name is a wrapper's. A trait method, `<Type as Trait>::method`, is
/// one only when both the type and the trait are: an implementation of the user's trait
/// for a standard type (`<std::vec::Vec<T> as app::Cache>::get`) is the user's code.
fn wrapper_name(name: &str) -> bool {
    let known = |n: &str| NAME_PREFIXES.iter().any(|p| n.starts_with(p));
    match name.strip_prefix('<') {
        Some(rest) => match rest.split_once(" as ") {
            Some((ty, tr)) => known(ty) && (known(tr) || tr.starts_with("core::")),
            None => known(rest),
        },
        None => known(name),
    }
}

/// Whether a source path lies in a wrapper crate's sources as Cargo unpacks them,
/// `.../<crate>-<digit>.../src/...`.
fn in_wrapper_crate(file: &str) -> bool {
    WRAPPER_CRATES.iter().any(|c| {
        file.match_indices(&format!("/{c}-")).any(|(i, m)| {
            let rest = &file[i + m.len()..];
            rest.starts_with(|ch: char| ch.is_ascii_digit())
                && rest
                    .split_once('/')
                    .is_some_and(|(_, tail)| tail.starts_with("src/"))
        })
    })
}

/// Whether `loc` is a wrapper frame.
pub fn is_wrapper_loc(names: &Names, loc: &Loc) -> bool {
    let function = names.function(loc.function);
    let file = loc.line.file.map(|f| names.file(f));
    is_wrapper(&function.name, file, &function.module)
}

/// The frame to name as the caller of the lock function at `lock` in root-first `locs`:
/// the innermost frame outward of it that is not a wrapper, or, when every one is, the
/// lock function's direct caller. `None` when the lock function is the outermost frame.
pub fn named_caller(names: &Names, locs: &[Loc], lock: usize) -> Option<usize> {
    let direct = lock.checked_sub(1)?;
    Some(
        (0..=direct)
            .rev()
            .find(|&i| !is_wrapper_loc(names, &locs[i]))
            .unwrap_or(direct),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn language_lock_wrappers_are_known_by_name_file_or_module() {
        let wrappers = [
            (
                "__glibcxx_rwlock_rdlock",
                Some("/usr/include/c++/12/shared_mutex"),
                "/app",
            ),
            ("__gthread_mutex_lock", None, "/app"),
            ("lock", Some("/usr/include/c++/12/bits/std_mutex.h"), "/app"),
            (
                "wait<consume()::<lambda()> >",
                Some("/usr/include/c++/12/condition_variable"),
                "/app",
            ),
            (
                "std::condition_variable::wait(std::unique_lock<std::mutex>&)",
                None,
                "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
            ),
            ("std::sync::poison::mutex::Mutex<T>::lock", None, "/app"),
            (
                "<std::sync::poison::mutex::MutexGuard<T> as core::ops::drop::Drop>::drop",
                None,
                "/app",
            ),
            (
                "lock_contended",
                Some("/rustc/abc/library/std/src/sys/sync/mutex/futex.rs"),
                "/app",
            ),
            ("parking_lot::raw_mutex::RawMutex::lock_slow", None, "/app"),
            (
                "lock",
                Some("/home/u/.cargo/registry/src/index.crates.io-x/lock_api-0.4.12/src/mutex.rs"),
                "/app",
            ),
        ];
        for (name, file, module) in wrappers {
            assert!(is_wrapper(name, file, module), "{name} is a wrapper");
        }
        let users = [
            ("read_table", Some("/src/app/table.cc"), "/app"),
            ("consume()::<lambda()>", Some("/src/app/queue.cc"), "/app"),
            ("lock", Some("/src/app/my_lock.c"), "/app"),
            ("app::Table::get", Some("/src/app/src/table.rs"), "/app"),
            ("standard_deviation", None, "/app"),
            ("<std::vec::Vec<T> as app::Cache>::get", None, "/app"),
            (
                "bench",
                Some("/home/u/parking_lot-bench/src/main.rs"),
                "/app",
            ),
        ];
        for (name, file, module) in users {
            assert!(!is_wrapper(name, file, module), "{name} is the user's");
        }
    }
}
