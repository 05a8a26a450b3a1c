//! The `tacho` binary: parses the command line, runs it through the library, and prints a
//! failure as one escaped line with exit status 2.

use clap::Parser;
use clap::error::ErrorKind;
use std::process::ExitCode;
use tacho::cli::Cli;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version: print as clap does, exit 0.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // `tacho` alone: the command list (on stderr), exit 2.
            let _ = e.print();
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("tacho: {}", tacho::cli::errors::one_line(&e));
            return ExitCode::from(2);
        }
    };
    match tacho::cmd::run(cli) {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // Errors can quote paths and names read from the system: escaped for the terminal.
            eprintln!(
                "tacho: {}",
                tacho::text::Escaped(&one_line(&format!("{e:#}")))
            );
            ExitCode::from(2)
        }
    }
}

/// Library errors chain their causes with ": " under `{:#}`; keep them on one line.
fn one_line(text: &str) -> String {
    text.lines().map(str::trim).collect::<Vec<_>>().join(" ")
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    // serde_json wraps the write error of `--json` output in its own error type.
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind)
            .or_else(|| c.downcast_ref::<serde_json::Error>()?.io_error_kind())
            == Some(std::io::ErrorKind::BrokenPipe)
    })
}
