//! `tacho experiment`: the arguments, checked and resolved in `cmd::experiment`.

use clap::Args;

#[derive(Debug, Args)]
pub struct ExperimentArgs {
    /// The setting to try, SETTING=VALUE: thp.enabled, thp.defrag, block.DEV.scheduler,
    /// block.DEV.read_ahead_kb, cpu.governor, vm.swappiness, vm.dirty_ratio and the other vm
    /// dirty settings, vm.vfs_cache_pressure, vm.zone_reclaim_mode, vm.min_free_kbytes,
    /// kernel.numa_balancing. One at a time, or several with --together
    #[arg(long, value_name = "SETTING=VALUE")]
    pub change: Vec<String>,

    /// Judge several --change as one change
    #[arg(long)]
    pub together: bool,

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

    /// Rounds of each side, baseline and changed, in turns (after one warm-up round)
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(2..=1000))]
    pub rounds: u32,

    /// Change the settings without asking (needed when stdin is not a terminal)
    #[arg(long)]
    pub yes: bool,

    /// Restore what an experiment that was killed left changed (from its journal), and exit
    #[arg(long, conflicts_with_all = ["change", "measure", "workload", "figure", "together"])]
    pub recover: bool,

    /// Print one JSON document (schema tacho.experiment.v1) on stdout
    #[arg(long)]
    pub json: bool,
}
