//! What `--help` shows after the options (examples, one command per line), and the manual
//! pages generated from the same command-line definition (`blameprof man`).
//!
//! Not async-signal-safe (allocates, does I/O).

use anyhow::Context;
use std::path::Path;

pub const MAIN: &str = "\
Examples:
  blameprof run -- ./server --threads 8       profile; prints victims and culprits
  blameprof report                            the newest profile here, top-down
  blameprof report --view locks               which locks, who waited behind whom
  blameprof report --format html              an interactive page: blameprof-report.html
  blameprof flamegraph --metric blame         who made threads wait, as a flame graph
  blameprof diff before.prof after.prof       what a change gained

Metrics: work (CPU time), idleness (waiting, at the waiter), blame (that waiting, at the
code that held the lock or sent the signal), held.contended; by primitive, e.g.
blame.mutex. See 'blameprof <command> --help'.";

pub const RUN: &str = "\
Examples:
  blameprof run -- ./app arg1 arg2            profile at 200 samples/s per thread
  blameprof run -F 1000 -o app.prof -- ./app  1 kHz (a perf timer), into app.prof/
  blameprof run -q -- make -j8                no summary; children and exec'd programs too
  blameprof run --max-size 100M -- ./daemon   a service that runs for days: bounded disk";

pub const REPORT: &str = "\
Examples:
  blameprof report                                    newest ./blameprof-* profile, top-down
  blameprof report app.prof --view bottom-up --metric blame
                                                      culprits first, their callers beneath
  blameprof report --metrics work,idleness,blame --percent-of effort
  blameprof report --view locks --lock table_lock     one lock in full
  blameprof report --view flat --format json > flat.json
  blameprof report --source lookup                    lookup's lines with their costs
  blameprof report --format html -o report.html       interactive, self-contained page
  blameprof report --format pprof -o app.pb.gz        for 'go tool pprof'
  blameprof report --format folded --metric blame     for flamegraph.pl, inferno, speedscope
  blameprof report --format firefox -o app.json       for profiler.firefox.com";

pub const FLAMEGRAPH: &str = "\
Examples:
  blameprof flamegraph                                work of the newest profile
  blameprof flamegraph app.prof --metric blame -o blame.svg
  blameprof flamegraph --metric idleness.mutex --thread 4242";

pub const TIMELINE: &str = "\
Examples:
  blameprof timeline                                  timeline.svg of the newest profile
  blameprof timeline app.prof --interval 250ms -o phases.svg
  blameprof report --view timeline --interval 500ms   the same as text (--format json)";

pub const DIFF: &str = "\
Examples:
  blameprof diff before.prof after.prof               biggest changes in work
  blameprof diff before.prof after.prof --metric blame
  blameprof diff before.prof after.prof -o diff.svg   differential flame graph
  blameprof diff before.prof after.prof -o gone.svg --widths before
                                                      the same, with what was removed drawn";

pub const COMPLETIONS: &str = "\
Examples:
  blameprof completions bash > ~/.local/share/bash-completion/completions/blameprof
  blameprof completions zsh > ~/.zfunc/_blameprof
  blameprof completions fish > ~/.config/fish/completions/blameprof.fish";

pub const MAN: &str = "\
Examples:
  blameprof man | man -l -
  blameprof man --dir ~/.local/share/man/man1";

/// Writes the manual page of `cmd` to standard output, or one page per command (and
/// subcommand) into `dir`.
pub fn man_pages(cmd: clap::Command, dir: Option<&Path>) -> anyhow::Result<()> {
    let Some(dir) = dir else {
        let mut out = std::io::stdout().lock();
        return clap_mangen::Man::new(cmd)
            .render(&mut out)
            .context("cannot write the manual page");
    };
    std::fs::create_dir_all(dir).with_context(|| {
        format!(
            "cannot create {}: pass a writable directory to --dir",
            dir.display()
        )
    })?;
    clap_mangen::generate_to(cmd, dir).with_context(|| {
        format!(
            "cannot write the manual pages into {}: pass a writable directory to --dir",
            dir.display()
        )
    })
}
