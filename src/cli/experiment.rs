//! `tacho experiment`: the arguments, checked and resolved in `cmd::experiment`.

use clap::Args;

#[derive(Debug, Args)]
pub struct ExperimentArgs {
    /// The setting to try, SETTING=VALUE: thp.enabled, thp.defrag, block.DEV.scheduler,
    /// block.DEV.read_ahead_kb, cpu.governor, vm.swappiness, vm.dirty_ratio and the other vm
    /// dirty settings, vm.vfs_cache_pressure, vm.zone_reclaim_mode, vm.min_free_kbytes,
    /// kernel.numa_balancing, mount:/MOUNTPOINT (atime mode), lazytime:/MOUNTPOINT (on, off).
    /// One at a time, or several with --together
    #[arg(long, value_name = "SETTING=VALUE")]
    pub change: Vec<String>,

    /// A change the catalogue lacks: a shell command line (sh -c) that makes it, run before
    /// each changed round; exit status 0 means it took. Needs --revert-cmd
    #[arg(long, value_name = "APPLY")]
    pub change_cmd: Option<String>,

    /// The shell command line that undoes --change-cmd, run after each changed round and at
    /// the end; exit status 0 means it is undone. Recorded in the revert journal, so
    /// `--recover` and the next tacho start run it after a crash
    #[arg(long, value_name = "REVERT")]
    pub revert_cmd: Option<String>,

    /// Judge several --change (or --change and --change-cmd) as one change
    #[arg(long)]
    pub together: bool,

    /// A series: after the first change, try SETTING=VALUE against the settings kept so far
    /// (each step kept only if it was a win), and say what the kept steps gained together and
    /// when the last steps stopped paying off. Repeat for more steps
    #[arg(long, value_name = "SETTING=VALUE")]
    pub then: Vec<String>,

    /// What measures each round: a tacho measuring command ('bench disk /data --suite oltp',
    /// 'bench cpu', 'bench mem', 'time CMD'), judged by its headline figure, or top (CPU
    /// figures over the run of --workload)
    #[arg(long, value_name = "CMD")]
    pub measure: Option<String>,

    /// With --measure top: the command line run (sh -c) in each round
    #[arg(long, value_name = "CMD")]
    pub workload: Option<String>,

    /// With --measure top: the figure judged: system or user (the workload's CPU seconds),
    /// wall (its run time), machine-system (the machine's system CPU %) [default: wall]
    #[arg(long, value_name = "NAME")]
    pub figure: Option<String>,

    /// Rounds of each side, baseline and changed, in turns (after one warm-up round), exactly.
    /// Without it: 5, then more until the effect's 95% interval is within --precision, up to
    /// --max-rounds
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(2..=1000))]
    pub rounds: Option<u32>,

    /// Without --rounds: add rounds until the 95% interval of the effect is this many percent
    /// of the baseline either side, or narrower
    #[arg(long, value_name = "PCT", default_value_t = 5.0, conflicts_with = "rounds", value_parser = precision)]
    pub precision: f64,

    /// Without --rounds: the most rounds of each side that --precision may take
    #[arg(long, value_name = "N", default_value_t = 20, conflicts_with = "rounds", value_parser = clap::value_parser!(u32).range(5..=1000))]
    pub max_rounds: u32,

    /// Change the settings without asking (needed when stdin is not a terminal)
    #[arg(long)]
    pub yes: bool,

    /// Restore what an experiment that was killed left changed (from its journal), and exit
    #[arg(long, conflicts_with_all = ["change", "change_cmd", "revert_cmd", "measure", "workload", "figure", "together", "then"])]
    pub recover: bool,

    /// Print one JSON document (schema tacho.experiment.v1) on stdout
    #[arg(long)]
    pub json: bool,

    /// Also write the compare report of the two saved sides, a self-contained HTML page
    #[arg(long, value_name = "FILE", conflicts_with_all = ["then", "no_save", "recover"])]
    pub html: Option<std::path::PathBuf>,

    // The sides saved as runs (baseline and changed; each step's in a series).
    #[command(flatten)]
    pub save: super::SaveArgs,
}

/// A precision in percent: above 0, at most 100.
fn precision(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 100.0 => Ok(v),
        _ => Err(format!(
            "{s:?} is not a precision: give a percentage above 0 and at most 100, e.g. 5"
        )),
    }
}
