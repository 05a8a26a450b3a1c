//! `tacho time CMD…`: resolve hyperfine-style options, run, print, export, save.

use super::interrupt;
use super::record::{RunSaver, check_prom_textfile, unix_now_s, write_prom_textfile};
use crate::cli::TimeArgs;
use crate::kernel::SysRoot;
use crate::kernel::host::Host;
use crate::kernel::tunables::SystemTunables;
use crate::report::hyperfine as export;
use crate::report::outfile::{Existing, OutFile};
use crate::report::prom::RunInfo;
use crate::report::prom::time as prom_time;
use crate::timing::exec::{self, Executor, Interrupted, Invocation, Measurement, Spawner};
use crate::timing::result::{self, Context, TimeReport};
use crate::timing::schedule::{self, Plan, RunCount};
use anyhow::{Context as _, Result, bail};
use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

/// Runs `tacho time`: 128 plus the signal after an interruption, 0 otherwise.
pub fn run(args: &TimeArgs) -> Result<ExitCode> {
    let (plan, names) = resolve(args)?;
    if let Some(path) = &args.record.prom_textfile {
        check_prom_textfile(path)?;
    }
    let saver = RunSaver::open(&args.record.save)?;
    // Export files are created before the runs so a wrong path fails at once, not after them.
    let exports = Exports::open(args)?;
    if !args.keep_children {
        exec::adopt_orphans().context("cannot become the subreaper of the timed commands")?;
    }
    let mut spawner = Progress {
        inner: Spawner {
            show_output: args.show_output,
            max_time: args.max_time,
            signal: Some(forwarded_signal()?),
            keep_children: args.keep_children,
            adopted_orphans: !args.keep_children,
        },
        runs: HashMap::new(),
        ends: HashMap::new(),
        shown: None,
    };
    let outcome = schedule::run(&plan, &mut spawner);
    if let Err(e) = &outcome
        && e.downcast_ref::<Interrupted>().is_none()
    {
        // A failing command is what an alert on the textfile is for: record it.
        record_failure(args, &spawner.tallies(&plan, &names)).map_err(|write_error| {
            interrupt::clear_status();
            anyhow::anyhow!("{e:#}; {write_error:#}")
        })?;
    }
    interrupt::clear_status();
    let outcome = match outcome {
        Err(e) if e.downcast_ref::<Interrupted>().is_some() => {
            let signal = e
                .downcast_ref::<Interrupted>()
                .map_or(libc::SIGINT, |i| i.signal);
            eprintln!("tacho: interrupted before the first timed run ended; nothing to report");
            return Ok(interrupted_status(signal));
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
    // Exports and the textfile are read by scripts that cannot tell a cut-short run: they are
    // left as they were; the report and the store say "interrupted".
    if let Some(signal) = outcome.interrupted {
        drop(exports);
        saver.print_and_save(&report, args.json, |r, mut out| {
            crate::report::time::write_human(r, &mut out)
        })?;
        let files = [
            &args.export_json,
            &args.export_csv,
            &args.export_markdown,
            &args.record.prom_textfile,
        ];
        if files.iter().any(|f| f.is_some()) {
            eprintln!("tacho: interrupted: the export files and textfile were left as they were");
        }
        return Ok(interrupted_status(signal));
    }
    exports.write(&report)?;
    let run_id = saver.print_and_save(&report, args.json, |r, mut out| {
        crate::report::time::write_human(r, &mut out)
    })?;
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

/// As a shell reports a process that a signal ended: 130 for SIGINT, 143 for SIGTERM.
fn interrupted_status(signal: i32) -> ExitCode {
    ExitCode::from(u8::try_from(128 + signal).unwrap_or(interrupt::EXIT_INTERRUPTED))
}

/// The number of the first SIGINT, SIGTERM or SIGHUP, which the run in progress is given in
/// turn (runs have their own process group, out of reach of the terminal's Ctrl-C); a third
/// one exits at once, as elsewhere (`interrupt`).
fn forwarded_signal() -> Result<Arc<AtomicUsize>> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let _stop = interrupt::stop_flag()?;
    let which = Arc::new(AtomicUsize::new(0));
    for signal in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register_usize(signal, Arc::clone(&which), signal as usize)?;
    }
    Ok(which)
}

/// Counts each command's runs (warm-up included) on a terminal's status line (stderr), at
/// most ten updates a second.
struct Progress {
    inner: Spawner,
    runs: HashMap<String, u64>,
    /// Per command line: runs that ended, failed ones, and the last one's exit.
    ends: HashMap<String, (u64, u64, crate::timing::exec::Exit)>,
    shown: Option<Instant>,
}

impl Progress {
    /// How each timed command fared so far, under its display name.
    fn tallies(&self, plan: &Plan, names: &[String]) -> Vec<prom_time::CommandTally> {
        plan.commands
            .iter()
            .zip(names)
            .map(|(inv, name)| {
                let (runs, failed, last) = self.ends.get(&inv.line).copied().unwrap_or((
                    0,
                    0,
                    crate::timing::exec::Exit::Code(0),
                ));
                prom_time::CommandTally {
                    command: name.clone(),
                    runs,
                    failed,
                    last_exit_code: last.code(),
                }
            })
            .collect()
    }
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
        let m = self.inner.measure(inv)?;
        let end = self.ends.entry(inv.line.clone()).or_insert((0, 0, m.exit));
        end.0 += 1;
        end.1 += u64::from(!m.exit.success());
        end.2 = m.exit;
        Ok(m)
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

/// The export files asked for, each a temporary file beside its final name from before the
/// first run, so a wrong path fails at once; renamed into place after the runs. If the runs
/// fail, the temporary files are removed and existing exports are left as they were.
struct Exports {
    files: Vec<(OutFile, ExportKind)>,
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
            let file = OutFile::create(path, Existing::Replace)
                .with_context(|| format!("cannot create the export file {}", path.display()))?;
            files.push((file, kind));
        }
        Ok(Exports { files })
    }

    fn write(self, report: &TimeReport) -> Result<()> {
        let plain: Vec<_> = report.results.iter().map(|r| r.result.clone()).collect();
        for (file, kind) in self.files {
            let path = file.path().to_path_buf();
            let context = || format!("cannot write the export file {}", path.display());
            let mut out = BufWriter::new(file);
            match kind {
                ExportKind::Json => export::json(&plain, &mut out),
                ExportKind::Csv => export::csv(&plain, &mut out),
                ExportKind::Markdown => export::markdown(&plain, &report.relative, &mut out),
            }
            .and_then(|()| out.flush())
            .with_context(context)?;
            out.into_inner()
                .map_err(|e| e.into_error())
                .with_context(context)?
                .commit()
                .with_context(context)?;
        }
        Ok(())
    }
}

/// The Prometheus textfile of a run a failing command stopped, when one was asked for.
fn record_failure(args: &TimeArgs, tallies: &[prom_time::CommandTally]) -> Result<()> {
    let Some(path) = &args.record.prom_textfile else {
        return Ok(());
    };
    let info = RunInfo {
        label: args.record.save.label.as_deref(),
        run_id: None,
        timestamp_s: unix_now_s(),
    };
    let text = prom_time::render_failure(tallies, &info, env!("CARGO_PKG_VERSION"));
    write_prom_textfile(path, &text)
}
