//! The command line as a person at a terminal meets it: text that fits the terminal and is
//! styled there only (and never with `NO_COLOR`), help with examples, shell completions and
//! a manual page generated from the same definition.
//!
//! A terminal is given by `script` (util-linux), which runs a command on a pseudo-terminal.

mod common;

use common::*;
use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

/// A small profile to report on.
fn profile(name: &str) -> std::path::PathBuf {
    let dir = scratch_dir(name).join("prof");
    let prog = compile_c("split.c", "terminal_split", &[]);
    profile_ok(&dir, 1000, &prog, &["2", "0.3"]);
    dir
}

/// Runs `blameprof ARGS` on a pseudo-terminal `columns` wide, with `env` set; its output.
fn on_terminal(args: &str, columns: u32, env: &str) -> String {
    // The terminal's own environment: the test harness's may say NO_COLOR.
    let inner = format!(
        "env -u NO_COLOR -u CLICOLOR -u CLICOLOR_FORCE TERM=xterm {env} COLUMNS={columns} {} {args}",
        blameprof()
    );
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &inner, "/dev/null"]);
    let run = run_with_timeout(&mut cmd, TOOL_TIMEOUT);
    assert!(
        run.status.success(),
        "script (util-linux) runs the command on a terminal; install util-linux if it is \
         missing\n{}",
        run.describe()
    );
    run.stdout.replace('\r', "")
}

/// `text` without ANSI escape sequences.
fn plain(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn text_fits_the_terminal_and_is_styled_only_there() {
    let dir = profile("terminal-report");
    let args = format!("report {} --depth 8", dir.display());
    let styled = on_terminal(&args, 60, "");
    assert!(
        styled.contains("\u{1b}["),
        "the hot path is styled:\n{styled}"
    );
    let rows = plain(&styled);
    for line in rows.lines() {
        assert!(
            line.chars().count() <= 60,
            "a line wider than the 60-column terminal: {line:?}"
        );
    }
    assert!(rows.contains("hot_a") || rows.contains('…'), "{rows}");
    // NO_COLOR: no escape sequence, still cut to the width.
    let uncoloured = on_terminal(&args, 60, "NO_COLOR=1");
    assert!(!uncoloured.contains('\u{1b}'), "{uncoloured}");
    assert!(uncoloured.lines().all(|l| l.chars().count() <= 60));
    // A pipe: neither styled nor cut.
    let piped = report_ok(&dir, &["--depth", "8"]);
    assert!(!piped.stdout.contains('\u{1b}'));
    assert!(
        piped.stdout.lines().any(|l| l.chars().count() > 60),
        "a pipe gets whole lines:\n{}",
        piped.stdout
    );
}

#[test]
fn every_command_has_examples_completions_and_a_manual_page() {
    for command in ["run", "report", "flamegraph", "diff", "completions", "man"] {
        let run = blameprof_cmd(&[command, "--help"]);
        assert!(run.status.success(), "{}", run.describe());
        assert!(
            run.stdout.contains("Examples:")
                && run.stdout.contains(&format!("blameprof {command}")),
            "{command} --help shows examples of itself:\n{}",
            run.stdout
        );
    }
    let bash = blameprof_cmd(&["completions", "bash"]);
    assert!(bash.status.success(), "{}", bash.describe());
    for word in ["complete -F", "flamegraph", "--metric", "--view"] {
        assert!(bash.stdout.contains(word), "bash completion lacks {word}");
    }
    // The script is valid bash: sourcing it defines the completion function.
    let check = format!(
        "source /dev/stdin <<'EOF'\n{}\nEOF\ndeclare -F _blameprof",
        bash.stdout
    );
    let mut cmd = Command::new("bash");
    cmd.args(["-c", &check]);
    let sourced = run_with_timeout(&mut cmd, TOOL_TIMEOUT);
    assert!(sourced.status.success(), "{}", sourced.describe());
    for shell in ["zsh", "fish"] {
        let run = blameprof_cmd(&["completions", shell]);
        assert!(
            run.status.success() && run.stdout.contains("report"),
            "{shell}"
        );
    }
    let bad = blameprof_cmd(&["completions", "tcsh"]);
    assert_clean_error(&bad, "completions for an unknown shell");

    let man = blameprof_cmd(&["man"]);
    assert!(man.status.success(), "{}", man.describe());
    assert!(man.stdout.contains(".TH blameprof 1"), "{}", man.stdout);
    let dir = scratch_dir("man-pages");
    let pages = dir.join("man1");
    let run = blameprof_cmd(&[OsStr::new("man"), OsStr::new("--dir"), pages.as_os_str()]);
    assert!(run.status.success(), "{}", run.describe());
    for page in ["blameprof.1", "blameprof-run.1", "blameprof-report.1"] {
        let text = std::fs::read_to_string(Path::new(&pages).join(page))
            .unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.contains(".TH"), "{page} is a manual page");
    }
}
