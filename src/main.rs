//! `blameprof`: the command-line front end (never instrumented itself).

use blameprof::cli::{self, help};
use clap::{CommandFactory, Parser, Subcommand};

/// Who made your threads wait: a CPU-time call-path profiler with lock blame shifting.
#[derive(Debug, Parser)]
#[command(name = "blameprof", version, about, after_help = help::MAIN)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a program under the profiler: blameprof run [OPTIONS] -- COMMAND [ARGS...]
    #[command(after_help = help::RUN)]
    Run(cli::run::RunArgs),
    /// Show a profile: trees, flat, threads or locks, as text or JSON; or export it (HTML,
    /// pprof, folded stacks, Firefox Profiler)
    #[command(after_help = help::REPORT)]
    Report(cli::report::ReportArgs),
    /// Render a profile as a flame graph SVG
    #[command(after_help = help::FLAMEGRAPH)]
    Flamegraph(cli::flamegraph::FlamegraphArgs),
    /// Draw the top locks' pressure over time, and each thread's state, as an SVG
    #[command(after_help = help::TIMELINE)]
    Timeline(cli::timeline::TimelineArgs),
    /// Compare two profiles: the biggest changes per function and per lock
    #[command(after_help = help::DIFF)]
    Diff(cli::diff::DiffArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    #[command(after_help = help::COMPLETIONS)]
    Completions {
        /// The shell to complete for
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), or write one page per command into a directory
    #[command(after_help = help::MAN)]
    Man {
        /// Write blameprof.1, blameprof-run.1, ... into this directory instead
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
    },
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                std::process::exit(
                    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                        2
                    } else {
                        0
                    },
                );
            }
            let rendered = e.to_string();
            let mut lines = rendered.lines().filter(|l| !l.trim().is_empty());
            let mut first = lines
                .next()
                .unwrap_or("invalid arguments")
                .trim_start_matches("error: ")
                .to_owned();
            // "the following required arguments were not provided:" names them next.
            if first.ends_with(':') {
                if let Some(next) = lines.next() {
                    first = format!("{first} {}", next.trim());
                }
            }
            eprintln!("blameprof: error: {first} (see 'blameprof --help')");
            std::process::exit(2);
        }
    };
    // What writes to standard output stops quietly when its reader is gone (`| head`).
    let to_stdout = !matches!(cli.command, Command::Run(_));
    let result = match &cli.command {
        Command::Run(args) => cli::run::run(args),
        Command::Report(args) => {
            let mut out = std::io::stdout().lock();
            cli::report::report(args, &mut out).map(|file| {
                if let Some(file) = file {
                    eprintln!("blameprof: report written to {}", file.display());
                }
                0
            })
        }
        Command::Flamegraph(args) => cli::flamegraph::flamegraph(args).map(|()| {
            eprintln!(
                "blameprof: flame graph written to {}",
                args.output.display()
            );
            0
        }),
        Command::Timeline(args) => cli::timeline::picture(args).map(|()| {
            eprintln!("blameprof: timeline written to {}", args.output.display());
            0
        }),
        Command::Diff(args) => {
            let mut out = std::io::stdout().lock();
            cli::diff::run(args, &mut out).map(|()| 0)
        }
        Command::Completions { shell } => {
            // Into memory first: clap_complete panics on a failed write (a closed pipe).
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "blameprof", &mut script);
            std::io::Write::write_all(&mut std::io::stdout().lock(), &script)
                .map(|()| 0)
                .map_err(anyhow::Error::from)
        }
        Command::Man { dir } => help::man_pages(Cli::command(), dir.as_deref()).map(|()| 0),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) if to_stdout && broken_pipe(&e) => std::process::exit(0),
        Err(e) => {
            let code = e
                .downcast_ref::<cli::preflight::LaunchError>()
                .map_or(1, cli::preflight::LaunchError::exit_code);
            eprintln!("blameprof: error: {}", one_line(&e));
            std::process::exit(code);
        }
    }
}

/// Whether the error is a write to a pipe whose reader is gone.
fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The error and its causes on one line.
fn one_line(e: &anyhow::Error) -> String {
    format!("{e:#}").replace('\n', " ")
}
