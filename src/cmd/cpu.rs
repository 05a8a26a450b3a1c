//! `tacho bench cpu`: resolve options, run the kernels, report, save.

use super::interrupt::{self, EXIT_INTERRUPTED};
use super::record::RunSaver;
use crate::cli::CpuArgs;
use crate::cpubench::KernelName;
use crate::cpubench::{self, Config};
use crate::kernel::SysRoot;
use crate::parallel::usable_cpus;
use anyhow::Result;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

/// Runs `tacho bench cpu`: the exit status is 130 after Ctrl-C, 0 otherwise.
pub fn run(args: &CpuArgs) -> Result<ExitCode> {
    let mut kernels = if args.kernel.is_empty() {
        KernelName::all().to_vec()
    } else {
        args.kernel.clone()
    };
    kernels.dedup();
    let cfg = Config {
        threads: args.threads.map_or_else(usable_cpus, |t| t as usize),
        runtime: args.runtime,
        repeat: args.repeat,
        kernels,
    };
    let saver = RunSaver::open(&args.save)?;
    let stop = interrupt::stop_flag()?;
    let report = cpubench::run(&cfg, &SysRoot::real(), &stop, &|what| {
        interrupt::status_line(&format!("bench cpu: {what}"))
    });
    interrupt::clear_status();
    saver.print_and_save(&report, args.json, |r, mut out| {
        crate::report::cpu::write_human(r, &mut out)
    })?;
    Ok(if report.interrupted || stop.load(Ordering::Relaxed) {
        ExitCode::from(EXIT_INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    })
}
