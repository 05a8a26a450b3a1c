//! One module per subcommand: resolve options, call the library, report.

mod compare;
pub mod cpu;
pub mod disk;
pub mod files;
mod interrupt;
pub mod mem;
mod output;
mod progress;
mod record;
mod runs;
mod sector;
pub mod stress;
pub mod time;
pub mod top;

use crate::cli::{BenchWhat, Cli, Command, DiskArgs};
use anyhow::Result;
use clap::CommandFactory;
use std::process::ExitCode;

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
        Command::Runs(command) => runs::run(command),
        Command::Compare(args) => compare::run(&args),
        Command::Top(args) => top::run(&args),
        Command::Time(args) => time::run(&args),
        Command::Stress(args) => stress::run(&args),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "tacho", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man => {
            clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
