//! `blameprof`: the command-line front end (never instrumented itself).

mod cli;

use clap::{Parser, Subcommand};

/// Who made your threads wait: a CPU-time call-path profiler with lock blame shifting.
#[derive(Debug, Parser)]
#[command(name = "blameprof", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a program under the profiler: blameprof run [OPTIONS] -- COMMAND [ARGS...]
    Run(cli::run::RunArgs),
    /// Show a profile: top-down, bottom-up or flat, as text or JSON
    Report(blameprof::viewer::commands::ReportArgs),
    /// Render a profile as a flame graph SVG
    Flamegraph(blameprof::viewer::commands::FlamegraphArgs),
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
            let first = rendered
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid arguments")
                .trim_start_matches("error: ");
            eprintln!("blameprof: error: {first} (see 'blameprof --help')");
            std::process::exit(2);
        }
    };
    let result = match &cli.command {
        Command::Run(args) => cli::run::run(args),
        Command::Report(args) => {
            let mut out = std::io::stdout().lock();
            blameprof::viewer::commands::report(args, &mut out).map(|()| 0)
        }
        Command::Flamegraph(args) => blameprof::viewer::commands::flamegraph(args).map(|()| {
            eprintln!(
                "blameprof: flame graph written to {}",
                args.output.display()
            );
            0
        }),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            let code = e
                .downcast_ref::<cli::preflight::LaunchError>()
                .map_or(1, cli::preflight::LaunchError::exit_code);
            eprintln!("blameprof: error: {}", one_line(&e));
            std::process::exit(code);
        }
    }
}

/// The error and its causes on one line.
fn one_line(e: &anyhow::Error) -> String {
    format!("{e:#}").replace('\n', " ")
}
