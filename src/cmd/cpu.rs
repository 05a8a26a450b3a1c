//! `tacho bench cpu`: resolve options, run the kernels, report, save.

use super::interrupt::{self, EXIT_INTERRUPTED};
use super::record::RunSaver;
use crate::cli::CpuArgs;
use crate::cpubench::KernelName;
use crate::cpubench::{self, Config, CpuReport};
use crate::kernel::SysRoot;
use crate::parallel::usable_cpus;
use crate::text::Escaped;
use crate::units::format_count;
use anyhow::Result;
use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

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
    saver.print_and_save(&report, args.json, |r, mut out| write_human(r, &mut out))?;
    Ok(if report.interrupted || stop.load(Ordering::Relaxed) {
        ExitCode::from(EXIT_INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    })
}

fn write_human(r: &CpuReport, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "{}", Escaped(&verdict(r)))?;
    for w in &r.warnings {
        writeln!(out, "warning [{}]: {}", w.code, Escaped(&w.message))?;
    }
    writeln!(out)?;
    let t = r.all_threads.threads;
    writeln!(
        out,
        "{:<8}  {:>10}  {:>7}  {:>10}  {:>7}  {:>7}",
        "kernel",
        "1 thread",
        "spread",
        format!("{t} threads"),
        "spread",
        "scaling"
    )?;
    for (one, all) in r.single_thread.kernels.iter().zip(&r.all_threads.kernels) {
        let scaling = if one.ops_per_s > 0.0 {
            all.ops_per_s / one.ops_per_s
        } else {
            0.0
        };
        writeln!(
            out,
            "{:<8}  {:>10}  {:>6.1}%  {:>10}  {:>6.1}%  {:>6.2}×",
            one.name,
            format_count(one.ops_per_s),
            one.spread_pct,
            format_count(all.ops_per_s),
            all.spread_pct,
            scaling
        )?;
    }
    writeln!(
        out,
        "{:<8}  {:>10}  {:>7}  {:>10}  {:>7}  {:>6.2}×",
        "score",
        format_count(r.single_thread.ops_per_s),
        "",
        format_count(r.all_threads.ops_per_s),
        "",
        r.scaling
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "ops/s, median of {} repeats of {} each; score = geometric mean of the kernels.",
        r.repeat,
        humantime(r.runtime_s)
    )?;
    for k in &r.single_thread.kernels {
        writeln!(out, "  {:<8} one op = {}", k.name, k.op)?;
    }
    Ok(())
}

fn verdict(r: &CpuReport) -> String {
    let primes = r
        .single_thread
        .kernels
        .iter()
        .find(|k| k.name == "primes")
        .map(|k| {
            format!(
                " ({:.0} primes events/s, as sysbench cpu counts)",
                k.ops_per_s
            )
        })
        .unwrap_or_default();
    format!(
        "CPU score {} on 1 thread{primes}; {} threads {:.2}× that ({:.0}% of ideal)",
        format_count(r.single_thread.ops_per_s),
        r.all_threads.threads,
        r.scaling,
        r.scaling_pct_of_ideal
    )
}

fn humantime(s: f64) -> String {
    if s < 1.0 {
        format!("{:.0} ms", s * 1e3)
    } else {
        format!("{s:.1} s")
    }
}
