//! `tacho bench cpu` for people: the verdict, the warnings and a table per kernel.

use crate::cpubench::CpuReport;
use crate::text::Escaped;
use crate::units::format_count;
use std::io::Write;

/// Writes the CPU report for a terminal: the verdict, the warnings and a row per kernel (one thread
/// and all threads).
pub fn write_human(r: &CpuReport, out: &mut impl Write) -> std::io::Result<()> {
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
