//! `tacho bench disk`: inspect the target, refuse what is unsafe, plan, run, report.

use super::progress::Bar;
use super::record::Recorder;
use crate::bench::plan::{self, Plan};
use crate::bench::result::{BenchReport, SCHEMA, SuiteRef, TargetInfo, Warning};
use crate::bench::run;
use crate::bench::target::{self, Target};
use crate::cli::DiskArgs;
use crate::io::{self, Control, EngineKind};
use crate::kernel::SysRoot;
use crate::kernel::host::Host;
use crate::kernel::tunables::Tunables;
use crate::report;
use anyhow::Result;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Exit status after Ctrl-C, as shells report a process killed by SIGINT.
const EXIT_INTERRUPTED: u8 = 130;

pub fn run(args: &DiskArgs) -> Result<ExitCode> {
    let root = SysRoot::real();
    let mut warnings = Vec::new();
    let engine = choose_engine(args.engine, &mut warnings);
    let inspected = target::inspect(&root, &args.target, args.size)?;
    let plan = plan::plan(args, &inspected, engine)?;
    if plan.writes {
        target::check_write_allowed(&root, &inspected, args.destroy_data)?;
    }
    warnings.extend(inspected.notes.iter().cloned());
    if !plan.direct {
        warnings.push(Warning {
            code: "buffered",
            message: "buffered I/O goes through the page cache: reads may come from RAM and \
                      writes may not reach the disk within the test"
                .into(),
        });
    }

    let stop = Arc::new(AtomicBool::new(false));
    install_signal_handlers(&stop)?;
    // The target (and its test file) lives until the report is written, then is removed.
    let (target, notes) = Target::prepare(&inspected, plan.region_bytes, plan.writes, plan.direct)?;
    warnings.extend(notes);
    let ctl = Control::new(stop);
    let mut report = BenchReport {
        schema: SCHEMA,
        tool_version: env!("CARGO_PKG_VERSION"),
        host: Host::read(&root),
        tunables: Tunables::read(&root, &inspected.stats_devnos),
        target: TargetInfo {
            region_bytes: plan.region_bytes,
            ..inspected.info
        },
        suite: suite_ref(&plan),
        tests: Vec::new(),
        warnings,
        interrupted: false,
    };
    let mut recorder = Recorder::begin(&args.record, &report)?;
    let outcome = run::run(
        &root,
        &plan,
        &target,
        &inspected.stats_devnos,
        &ctl,
        &Bar::new(),
        &mut |test| recorder.test(test),
    )?;
    drop(target);
    report.tests = outcome.tests;
    report.interrupted = outcome.interrupted;

    let mut out = std::io::stdout().lock();
    if args.json {
        report::json::write(&report, &mut out)?;
    } else {
        report::table::write(&report, &mut out)?;
    }
    recorder.finish(&report)?;
    Ok(if report.interrupted {
        ExitCode::from(EXIT_INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    })
}

fn suite_ref(plan: &Plan) -> Option<SuiteRef> {
    plan.suite.as_ref().map(|s| SuiteRef {
        name: s.name,
        version: s.version,
    })
}

/// io_uring unless asked otherwise; psync, with a note, where io_uring is blocked.
fn choose_engine(asked: Option<EngineKind>, warnings: &mut Vec<Warning>) -> EngineKind {
    let wanted = asked.unwrap_or(EngineKind::IoUring);
    if wanted == EngineKind::IoUring && !io::io_uring_available() {
        warnings.push(Warning {
            code: "io-uring-unavailable",
            message: "io_uring is not available here (old kernel, container seccomp filter or \
                      kernel.io_uring_disabled); using psync, one thread per queued I/O"
                .into(),
        });
        return EngineKind::Psync;
    }
    wanted
}

/// First Ctrl-C, SIGTERM or SIGHUP: stop after in-flight I/O, report what finished, remove the test
/// file. A second one exits at once (the next run removes the file it leaves).
fn install_signal_handlers(stop: &Arc<AtomicBool>) -> Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    // SIGHUP too: a closed ssh session must not leave a gigabyte behind.
    for signal in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register_conditional_shutdown(
            signal,
            i32::from(EXIT_INTERRUPTED),
            Arc::clone(stop),
        )?;
        signal_hook::flag::register(signal, Arc::clone(stop))?;
    }
    Ok(())
}
