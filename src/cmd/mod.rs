//! One module per subcommand: resolve options, call the library, report.

pub mod cpu;
pub mod disk;
mod interrupt;
pub mod mem;
mod progress;
pub mod stress;
pub mod time;

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
