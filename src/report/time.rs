//! `tacho time` for people: the verdict (fastest command, relative speeds with their
//! confidence), then each command's figures as hyperfine prints them.

use crate::timing::result::TimeReport;
use crate::units::{format_bytes_approx, plural};
use std::io::Write;

/// Verdict, warnings, then one block per command as hyperfine prints it, plus peak memory.
pub fn write_human(report: &TimeReport, out: &mut impl Write) -> std::io::Result<()> {
    // Commands are shown as typed; escaped so a control character in one stays visible.
    writeln!(out, "{}", crate::text::Escaped(&verdict(report)))?;
    for r in &report.results {
        for w in &r.warnings {
            writeln!(
                out,
                "warning [{}] '{}': {}",
                w.code,
                crate::text::Escaped(&r.result.command),
                crate::text::Escaped(&w.message)
            )?;
        }
    }
    for (i, t) in report.results.iter().enumerate() {
        let r = &t.result;
        writeln!(out)?;
        writeln!(
            out,
            "Command {}: {}",
            i + 1,
            crate::text::Escaped(&r.command)
        )?;
        let sd = r.stddev.map_or("-".into(), format_secs);
        writeln!(
            out,
            "  Time (mean ± σ):    {} ± {}    [User: {}, System: {}]",
            format_secs(r.mean),
            sd,
            format_secs(r.user),
            format_secs(r.system)
        )?;
        writeln!(
            out,
            "  Range (min … max):  {} … {}    median {}, {}",
            format_secs(r.min),
            format_secs(r.max),
            format_secs(r.median),
            plural(r.times.len() as u64, "run")
        )?;
        writeln!(
            out,
            "  Peak memory:        {}",
            format_bytes_approx(r.peak_memory_bytes())
        )?;
    }
    if report.relative.len() > 1 {
        writeln!(out)?;
        writeln!(out, "Relative to the fastest (95% confidence interval):")?;
        for q in &report.relative {
            writeln!(
                out,
                "  {:>6.2}× ({:.2}–{:.2})  {}",
                q.ratio,
                q.ci95_low,
                q.ci95_high,
                crate::text::Escaped(&q.command)
            )?;
        }
    }
    if let Some(s) = report.shell_spawn_s {
        writeln!(out)?;
        writeln!(
            out,
            "shell: {} ({} per start, subtracted); runs {}",
            report.shell.as_deref().unwrap_or("-"),
            format_secs(s),
            if report.interleaved {
                "interleaved"
            } else {
                "in blocks"
            }
        )?;
    }
    Ok(())
}

/// One line a tired admin can act on.
fn verdict(report: &TimeReport) -> String {
    let results = &report.results;
    if results.len() == 1 {
        let r = &results[0].result;
        return format!(
            "'{}': {} (mean of {}, σ {}), peak memory {}",
            r.command,
            format_secs(r.mean),
            plural(r.times.len() as u64, "run"),
            r.stddev.map_or("-".into(), format_secs),
            format_bytes_approx(r.peak_memory_bytes())
        );
    }
    let Some(fastest) = report.relative.iter().position(|q| q.ratio == 1.0) else {
        return "no results".into();
    };
    let fastest_name = &report.relative[fastest].command;
    // The closest competitor decides whether "fastest" means anything.
    let runner_up = report
        .relative
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != fastest)
        .min_by(|a, b| a.1.ratio.total_cmp(&b.1.ratio))
        .map(|(_, q)| q);
    match runner_up {
        Some(q) if q.significant => format!(
            "'{fastest_name}' is fastest: {:.2}× faster than '{}' (95% CI {:.2}–{:.2})",
            q.ratio, q.command, q.ci95_low, q.ci95_high
        ),
        Some(q) => format!(
            "no significant difference between '{fastest_name}' and '{}' (ratio {:.2}, 95% CI \
             {:.2}–{:.2}); run more (--runs) to separate them",
            q.command, q.ratio, q.ci95_low, q.ci95_high
        ),
        None => "no results".into(),
    }
}

/// Seconds in the unit that keeps three significant digits: `612 µs`, `12.3 ms`, `1.25 s`.
fn format_secs(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.1} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{s:.3} s")
    }
}
