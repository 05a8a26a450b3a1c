//! `tacho bench mem`: read the caches, plan the working sets, run, report, save.

use super::interrupt::{self, EXIT_INTERRUPTED};
use super::record::RunSaver;
use crate::bench::result::Warning;
use crate::cli::MemArgs;
use crate::kernel::host::Host;
use crate::kernel::meminfo::read_meminfo;
use crate::kernel::tunables::SystemTunables;
use crate::kernel::{SysRoot, cache};
use crate::membench::{self, Config, MemReport};
use crate::parallel::usable_cpus;
use crate::text::Escaped;
use crate::units::{format_bandwidth, format_bytes_approx, format_size};
use anyhow::{Result, bail};
use std::io::Write;
use std::process::ExitCode;

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
            code: "dram-size-reduced",
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
    saver.print_and_save(&report, args.json, |r, mut out| write_human(r, &mut out))?;
    Ok(if report.interrupted {
        ExitCode::from(EXIT_INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    })
}

fn write_human(r: &MemReport, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "{}", Escaped(&verdict(r)))?;
    for w in &r.warnings {
        writeln!(out, "warning [{}]: {}", w.code, Escaped(&w.message))?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "{:<5} {:>9}  {:>11} {:>11} {:>11} {:>9}   {:>11} {:>11} {:>11} {:>9}",
        "level",
        "set",
        "read",
        "write",
        "copy",
        "latency",
        "read all",
        "write all",
        "copy all",
        "lat. all"
    )?;
    for l in &r.levels {
        write!(
            out,
            "{:<5} {:>9}  {:>11} {:>11} {:>11} {:>9}",
            l.name,
            format_size(l.size_bytes),
            format_bandwidth(l.read_bytes_per_s),
            format_bandwidth(l.write_bytes_per_s),
            format_bandwidth(l.copy_bytes_per_s),
            format!("{:.1} ns", l.latency_ns)
        )?;
        if let Some(a) = &l.all_threads {
            write!(
                out,
                "   {:>11} {:>11} {:>11} {:>9}",
                format_bandwidth(a.read_bytes_per_s),
                format_bandwidth(a.write_bytes_per_s),
                format_bandwidth(a.copy_bytes_per_s),
                format!("{:.1} ns", a.latency_ns)
            )?;
        }
        writeln!(out)?;
    }
    writeln!(out)?;
    let threads = r
        .levels
        .iter()
        .find_map(|l| l.all_threads.as_ref().map(|a| a.threads));
    writeln!(
        out,
        "median of {} repeats of {:.0} ms per figure; \"all\" = {} threads, shared levels split \
         between them; copy counts bytes copied; latency is a random pointer chase.",
        r.repeat,
        r.runtime_s * 1e3,
        threads.map_or("no other".into(), |t| t.to_string())
    )
}

fn verdict(r: &MemReport) -> String {
    let Some(dram) = r.levels.iter().find(|l| l.name == "DRAM") else {
        let first = &r.levels[0];
        return format!(
            "{} read {} on 1 thread, latency {:.1} ns",
            first.name,
            format_bandwidth(first.read_bytes_per_s),
            first.latency_ns
        );
    };
    let all = dram
        .all_threads
        .as_ref()
        .map(|a| {
            format!(
                ", {} with {} threads",
                format_bandwidth(a.read_bytes_per_s),
                a.threads
            )
        })
        .unwrap_or_default();
    format!(
        "DRAM read {} on 1 thread{all}; random access {:.0} ns",
        format_bandwidth(dram.read_bytes_per_s),
        dram.latency_ns
    )
}
