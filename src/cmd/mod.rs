//! One module per subcommand: resolve options, call the library, report.

mod check;
mod compare;
mod completions;
mod config;
pub(crate) mod cpu;
mod diff;
pub(crate) mod disk;
mod drift;
mod experiment;
pub(crate) mod files;
mod files_bytes;
mod fleet;
mod history;
mod interrupt;
mod load;
mod man;
pub(crate) mod mem;
mod output;
mod ping;
#[cfg(feature = "profile")]
mod profile;
#[cfg(feature = "profile")]
mod profile_waits;
mod progress;
mod record;
mod report;
mod runs;
mod sector;
mod snapshot;
#[cfg(feature = "pg")]
mod store;
pub(crate) mod stress;
pub(crate) mod time;
pub(crate) mod top;
mod top_latency;
mod top_metrics;
#[cfg(feature = "profile")]
mod top_profile;
// Without the profiler top still builds; `needs` refuses `top --profile` before it starts.
#[cfg(not(feature = "profile"))]
#[path = "top_profile_off.rs"]
mod top_profile;

use crate::cli::{BenchWhat, Cli, Command, DiskArgs};
use crate::features::Feature;
use anyhow::Result;
use std::process::ExitCode;

pub(crate) use interrupt::{EXIT_INTERRUPTED, stop_on_signals};

/// Runs the parsed command line. `Ok` carries the exit status the command chose (1 when it
/// found what it checks for: a failed threshold, a regression, differences, warnings; 128 plus
/// the signal after an interruption); an `Err` is a failure for `main` to print on one line
/// with exit status 2.
pub fn run(cli: Cli) -> Result<ExitCode> {
    if let Some(feature) = needs(&cli.command) {
        feature.require()?;
    }
    if !matches!(&cli.command, Command::Experiment(a) if a.recover) {
        experiment::recover_at_start();
    }
    let settings = config::settings(cli.config.as_deref(), &cli.command)?;
    // Every stored run carries this host's labels: a bad one stops the command before it
    // starts; the config file's, when TACHO_LABELS gives none.
    crate::labels::from_env().map_err(anyhow::Error::msg)?;
    crate::labels::configure(
        settings
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.value.clone()))
            .collect(),
    );
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
        #[cfg(feature = "profile")]
        Command::Profile(args) => profile::run(&args),
        #[cfg(not(feature = "profile"))]
        Command::Profile(_) => Err(crate::features::Missing(Feature::Profile).into()),
        Command::Runs(command) => runs::run(command),
        #[cfg(feature = "pg")]
        Command::Store(command) => store::run(command),
        #[cfg(not(feature = "pg"))]
        Command::Store(_) => Err(crate::features::Missing(Feature::Pg).into()),
        Command::Compare(args) => compare::run(&args),
        Command::Top(args) if history::wants_history(&args) => history::top(&args),
        Command::Top(args) => top::run(&args, &settings),
        Command::Record(args) => history::record(&args, &settings),
        Command::Config(crate::cli::ConfigCommand::Show(_)) => {
            config::show(&settings)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Check(args) => check::run(&args),
        Command::Snapshot(args) => snapshot::run(&args),
        Command::Diff(args) => diff::run(&args),
        Command::Drift(args) => drift::run(&args),
        Command::Time(args) => time::run(&args),
        Command::Ping(args) => ping::run(&args),
        Command::Load(args) => load::run(&args),
        Command::Stress(args) => stress::run(&args),
        Command::Experiment(args) => experiment::run(&args),
        Command::Report(args) => report::run(&args),
        Command::Completions { shell } => {
            completions::run(shell)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Man(args) => man::run(&args),
    }
}

/// The feature an option needs that its command does not, checked before the command starts so
/// a build without it fails at once rather than when the option is first used. (Commands that
/// need one fail at their own start; a PostgreSQL store where it is opened.)
fn needs(command: &Command) -> Option<Feature> {
    match command {
        Command::Top(args) if args.profile => Some(Feature::Profile),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(args).unwrap()
    }

    #[test]
    fn top_profile_needs_the_profiler() {
        let needs = |args: &[&str]| needs(&parse(args).command);
        assert_eq!(
            needs(&["tacho", "top", "--batch", "--profile"]),
            Some(Feature::Profile)
        );
        assert_eq!(needs(&["tacho", "top", "--batch"]), None);
    }

    /// Refused before anything runs: no sampling, no profile.
    #[cfg(not(feature = "profile"))]
    #[test]
    fn without_the_profiler_its_command_and_option_are_refused() {
        for args in [
            &["tacho", "profile"][..],
            &["tacho", "top", "--batch", "--profile"],
        ] {
            let e = run(parse(args)).unwrap_err().to_string();
            assert!(
                e.contains("built without the `profile` feature"),
                "{args:?}: {e}"
            );
        }
    }

    /// Refused before the local file is even looked for.
    #[cfg(not(feature = "pg"))]
    #[test]
    fn without_pg_runs_push_is_refused() {
        let cli = parse(&["tacho", "runs", "push", "--db", "postgres://u@db.example/r"]);
        let e = run(cli).unwrap_err().to_string();
        assert!(e.contains("built without the `pg` feature"), "{e}");
    }
}
