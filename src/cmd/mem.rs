//! `tacho bench mem`: read the caches, plan the working sets, run, report, save.

use super::interrupt::{self, EXIT_INTERRUPTED};
use super::record::RunSaver;
use crate::bench::result::Warning;
use crate::cli::MemArgs;
use crate::kernel::host::Host;
use crate::kernel::meminfo::read_meminfo;
use crate::kernel::tunables::SystemTunables;
use crate::kernel::{SysRoot, cache};
use crate::membench::{self, Config};
use crate::parallel::usable_cpus;
use crate::units::{format_bytes_approx, format_size};
use crate::warning::Code;
use anyhow::{Result, bail};
use std::process::ExitCode;

/// Runs `tacho bench mem`: the exit status is 130 after Ctrl-C, 0 otherwise.
pub fn run(args: &MemArgs) -> Result<ExitCode> {
    let root = SysRoot::real();
    let caches = cache::read(&root)?;
    let mut levels = membench::plan_levels(&caches, args.dram_size, &args.level);
    if levels.is_empty() {
        bail!(
            "this machine has none of the levels asked for with --level; drop the option to measure all"
        );
    }
    // The DRAM set must fit in memory with room to spare, or the figure measures swapping.
    let mut notes = Vec::new();
    if let Some(avail) = read_meminfo(&root).ok().and_then(|m| m.get("MemAvailable"))
        && let Some(dram) = levels.iter_mut().find(|l| l.size_bytes > avail / 2)
    {
        if args.dram_size.is_some() {
            bail!(
                "--dram-size {} is more than half of the available memory ({}); give a smaller size",
                format_size(dram.size_bytes),
                format_bytes_approx(avail)
            );
        }
        notes.push(Warning {
            code: Code::DramSizeReduced,
            message: format!(
                "the DRAM working set was cut from {} to {} to fit in half of the available memory",
                format_size(dram.size_bytes),
                format_bytes_approx(avail / 2)
            ),
        });
        dram.size_bytes = avail / 2;
    }
    let cfg = Config {
        threads: args.threads.map_or_else(usable_cpus, |t| t as usize),
        runtime: args.runtime,
        repeat: args.repeat,
        levels,
    };
    let saver = RunSaver::open(&args.save)?;
    let stop = interrupt::stop_flag()?;
    let machine = (Host::read(&root), SystemTunables::read(&root));
    let mut report = membench::run(&cfg, machine, caches, &stop, &|what| {
        interrupt::status_line(&format!("bench mem: {what}"))
    });
    interrupt::clear_status();
    report.warnings.splice(0..0, notes);
    saver.print_and_save(&report, args.json, |r, mut out| {
        crate::report::mem::write_human(r, &mut out)
    })?;
    Ok(if report.interrupted {
        ExitCode::from(EXIT_INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    })
}
