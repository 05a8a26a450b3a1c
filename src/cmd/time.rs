//! `tacho time CMD…`: resolve hyperfine-style options, run, print, export, save.

use super::interrupt;
use super::record::{RunSaver, check_prom_textfile, unix_now_s, write_prom_textfile};
use crate::cli::TimeArgs;
use crate::kernel::SysRoot;
use crate::kernel::host::Host;
use crate::kernel::tunables::SystemTunables;
use crate::report::prom::RunInfo;
use crate::report::prom_time;
use crate::timing::exec::{Executor, Interrupted, Invocation, Measurement, Spawner};
use crate::timing::export;
use crate::timing::result::{self, Context, TimeReport};
use crate::timing::schedule::{self, Plan, RunCount};
use crate::units::format_bytes_approx;
use anyhow::{Context as _, Result, bail};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

pub fn run(args: &TimeArgs) -> Result<ExitCode> {
    let (plan, names) = resolve(args)?;
    if let Some(path) = &args.record.prom_textfile {
        check_prom_textfile(path)?;
    }
    let saver = RunSaver::open(&args.record.save)?;
    // Export files are created before the runs so a wrong path fails at once, not after them.
    let exports = Exports::open(args)?;
    let mut spawner = Progress {
        inner: Spawner {
            show_output: args.show_output,
            max_time: args.max_time,
            // Runs bounded by --max-time get their own process group, out of reach of the
            // terminal's Ctrl-C; tacho then kills them itself. Otherwise Ctrl-C ends both.
            interrupt: match args.max_time {
                Some(_) => Some(interrupt::stop_flag()?),
                None => None,
            },
        },
        runs: HashMap::new(),
        shown: None,
    };
    let outcome = schedule::run(&plan, &mut spawner);
    interrupt::clear_status();
    let outcome = match outcome {
        Err(e) if e.downcast_ref::<Interrupted>().is_some() => {
            eprintln!("tacho: interrupted; the run in progress was killed, nothing reported");
            return Ok(ExitCode::from(interrupt::EXIT_INTERRUPTED));
        }
        other => other?,
    };
    let ctx = Context {
        shell: plan.shell.is_some(),
        warmup: plan.warmup > 0,
        prepare: !plan.prepare.is_empty(),
    };
    let report = result::report(
        (
            Host::read(&SysRoot::real()),
            SystemTunables::read(&SysRoot::real()),
        ),
        &names,
        &outcome,
        plan.interleave,
        plan.shell.clone(),
        ctx,
    );
    exports.write(&report)?;
    let run_id = saver.print_and_save(&report, args.json, |r, mut out| write_human(r, &mut out))?;
    if let Some(path) = &args.record.prom_textfile {
        let info = RunInfo {
            label: args.record.save.label.as_deref(),
            run_id,
            timestamp_s: unix_now_s(),
        };
        write_prom_textfile(path, &prom_time::render(&report, &info))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Counts each command's runs (warm-up included) on a terminal's status line (stderr), at
/// most ten updates a second.
struct Progress {
    inner: Spawner,
    runs: HashMap<String, u64>,
    shown: Option<Instant>,
}

impl Executor for Progress {
    fn measure(&mut self, inv: &Invocation) -> Result<Measurement> {
        let n = self.runs.entry(inv.line.clone()).or_default();
        *n += 1;
        if self
            .shown
            .is_none_or(|t| t.elapsed() >= Duration::from_millis(100))
        {
            let text = if inv.line.is_empty() {
                "time: measuring the shell's start-up".to_string()
            } else {
                format!("time: '{}' run {n}", inv.line)
            };
            interrupt::status_line(&text);
            self.shown = Some(Instant::now());
        }
        self.inner.measure(inv)
    }
}

/// Validates the options and builds the plan and the display names.
fn resolve(args: &TimeArgs) -> Result<(Plan, Vec<String>)> {
    let shell = if args.no_shell || args.shell == "none" {
        None
    } else {
        Some(args.shell.clone())
    };
    let inv = |line: &str| Invocation::new(line, shell.as_deref());
    let commands = args
        .commands
        .iter()
        .map(|c| inv(c))
        .collect::<Result<Vec<_>>>()?;
    let n = commands.len();
    if args.prepare.len() > 1 && args.prepare.len() != n {
        bail!(
            "{} --prepare commands for {n} commands; give one for all, or one per command",
            args.prepare.len()
        );
    }
    if !args.command_name.is_empty() && args.command_name.len() != n {
        bail!(
            "{} --command-name values for {n} commands; give one name per command",
            args.command_name.len()
        );
    }
    if let (Some(max), None) = (args.max_runs, args.runs)
        && max < args.min_runs
    {
        bail!(
            "--max-runs {max} is below --min-runs {}; raise --max-runs or lower --min-runs",
            args.min_runs
        );
    }
    let runs = match args.runs {
        Some(n) => RunCount::Exact(n),
        None => RunCount::Auto {
            min: args.min_runs,
            max: args.max_runs,
            min_time_s: args.min_benchmarking_time.as_secs_f64(),
        },
    };
    let names = if args.command_name.is_empty() {
        args.commands.clone()
    } else {
        args.command_name.clone()
    };
    let plan = Plan {
        commands,
        setup: args.setup.as_deref().map(inv).transpose()?,
        prepare: args.prepare.iter().map(|p| inv(p)).collect::<Result<_>>()?,
        cleanup: args.cleanup.as_deref().map(inv).transpose()?,
        shell,
        warmup: args.warmup,
        runs,
        interleave: !args.no_interleave,
        ignore_failure: args.ignore_failure,
    };
    Ok((plan, names))
}

/// The export files asked for, opened (not truncated) before any run so a wrong path fails at
/// once. If the runs fail, files this run created are removed and existing ones are left as
/// they were.
struct Exports {
    files: Vec<ExportFile>,
}

struct ExportFile {
    path: PathBuf,
    kind: ExportKind,
    file: Option<File>,
    created: bool,
}

#[derive(Clone, Copy)]
enum ExportKind {
    Json,
    Csv,
    Markdown,
}

impl Exports {
    fn open(args: &TimeArgs) -> Result<Exports> {
        let mut files = Vec::new();
        for (path, kind) in [
            (&args.export_json, ExportKind::Json),
            (&args.export_csv, ExportKind::Csv),
            (&args.export_markdown, ExportKind::Markdown),
        ] {
            let Some(path) = path else { continue };
            let created = !path.exists();
            let file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .with_context(|| format!("cannot create the export file {}", path.display()))?;
            files.push(ExportFile {
                path: path.clone(),
                kind,
                file: Some(file),
                created,
            });
        }
        Ok(Exports { files })
    }

    fn write(mut self, report: &TimeReport) -> Result<()> {
        let plain: Vec<_> = report.results.iter().map(|r| r.result.clone()).collect();
        for f in &mut self.files {
            let Some(file) = f.file.take() else { continue };
            let context = || format!("cannot write the export file {}", f.path.display());
            file.set_len(0).with_context(context)?;
            let mut out = BufWriter::new(file);
            match f.kind {
                ExportKind::Json => export::json(&plain, &mut out),
                ExportKind::Csv => export::csv(&plain, &mut out),
                ExportKind::Markdown => export::markdown(&plain, &report.relative, &mut out),
            }
            .and_then(|()| out.flush())
            .with_context(context)?;
            f.created = false;
        }
        Ok(())
    }
}

impl Drop for Exports {
    fn drop(&mut self) {
        for f in &self.files {
            if f.created {
                let _ = std::fs::remove_file(&f.path);
            }
        }
    }
}

/// Verdict, warnings, then one block per command as hyperfine prints it, plus peak memory.
fn write_human(report: &TimeReport, out: &mut impl Write) -> std::io::Result<()> {
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
            "  Range (min … max):  {} … {}    median {}, {} runs",
            format_secs(r.min),
            format_secs(r.max),
            format_secs(r.median),
            r.times.len()
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
            "'{}': {} (mean of {} runs, σ {}), peak memory {}",
            r.command,
            format_secs(r.mean),
            r.times.len(),
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
