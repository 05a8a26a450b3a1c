//! One module per subcommand: resolve options, call the library, report.

mod check;
mod compare;
pub(crate) mod cpu;
mod diff;
pub(crate) mod disk;
mod drift;
pub(crate) mod files;
mod files_bytes;
mod history;
mod interrupt;
mod man;
pub(crate) mod mem;
mod output;
mod ping;
mod profile;
mod progress;
mod record;
mod report;
mod runs;
mod sector;
mod snapshot;
pub(crate) mod stress;
pub(crate) mod time;
pub(crate) mod top;
mod top_latency;
mod top_metrics;
mod top_profile;

use crate::cli::{BenchWhat, Cli, Command, DiskArgs};
use anyhow::Result;
use clap::CommandFactory;
use std::process::ExitCode;

pub(crate) use interrupt::{EXIT_INTERRUPTED, stop_on_signals};

/// Runs the parsed command line. `Ok` carries the exit status the command chose (1 when it
/// found what it checks for: a failed threshold, a regression, differences, warnings; 128 plus
/// the signal after an interruption); an `Err` is a failure for `main` to print on one line
/// with exit status 2.
pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Bench(bench) => match bench.what {
            Some(BenchWhat::Disk(args)) => disk::run(&args),
            Some(BenchWhat::Cpu(args)) => cpu::run(&args),
            Some(BenchWhat::Mem(args)) => mem::run(&args),
            None => disk::run(&DiskArgs {
                target: ".".into(),
                ..DiskArgs::default()
            }),
        },
        Command::Files(args) => files::run(&args),
        Command::Profile(args) => profile::run(&args),
        Command::Runs(command) => runs::run(command),
        Command::Compare(args) => compare::run(&args),
        Command::Top(args) if history::wants_history(&args) => history::top(&args),
        Command::Top(args) => top::run(&args),
        Command::Record(args) => history::record(&args),
        Command::Check(args) => check::run(&args),
        Command::Snapshot(args) => snapshot::run(&args),
        Command::Diff(args) => diff::run(&args),
        Command::Drift(args) => drift::run(&args),
        Command::Time(args) => time::run(&args),
        Command::Ping(args) => ping::run(&args),
        Command::Stress(args) => stress::run(&args),
        Command::Report(args) => report::run(&args),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "tacho", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man(args) => man::run(&args),
    }
}
