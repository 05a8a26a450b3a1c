//! `tacho bench disk`: inspect the target, refuse what is unsafe, plan, run, report.

use super::progress::Bar;
use super::record::Recorder;
use crate::bench::honesty::{self, Context};
use crate::bench::plan::{self, Plan};
use crate::bench::result::{
    BenchReport, Judgement, SCHEMA, SuiteRef, TargetInfo, TestResult, Warning,
};
use crate::bench::target::{self, Inspected, Target};
use crate::bench::{fio_cmd, run, suite};
use crate::cli::DiskArgs;
use crate::io::{self, Control, EngineKind};
use crate::kernel::host::Host;
use crate::kernel::link::{self, Link};
use crate::kernel::tunables::Tunables;
use crate::kernel::{SysRoot, blockdev};
use crate::report;
use anyhow::{Result, bail};
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// A pass by less than this share of the threshold is called marginal.
const MARGINAL_FRACTION: f64 = 0.2;

pub fn run(args: &DiskArgs) -> Result<ExitCode> {
    if args.list_suites {
        return list_suites(args.json);
    }
    let root = SysRoot::real();
    let mut warnings = Vec::new();
    let engine = choose_engine(args.engine, &mut warnings);
    let opened = target::open(&args.target)?;
    let inspected = target::inspect(&root, &opened)?;
    let mut plan = plan::plan(args, &inspected, engine)?;
    if args.print_fio {
        std::io::stdout().write_all(fio_cmd::commands(&plan, &inspected).as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let consent = if plan.writes {
        Some(target::check_write_allowed(
            &root,
            &opened,
            &inspected,
            args.destroy_data,
        )?)
    } else {
        None
    };
    warnings.extend(inspected.notes.iter().cloned());

    let stop = Arc::new(AtomicBool::new(false));
    super::stop_on_signals(&stop)?;
    // The target (and its test file) lives until the report is written, then is removed.
    let (target, notes) = Target::prepare(&opened, &inspected, consent, plan.region_bytes)?;
    warnings.extend(notes);
    if plan.any_direct() && !target.direct_supported()? {
        if !args.allow_buffered {
            bail!(
                "{} does not support direct I/O (O_DIRECT); add --buffered or --allow-buffered \
                 (results then include the page cache)",
                inspected.path.display()
            );
        }
        plan.tests.iter_mut().for_each(|t| t.spec.direct = false);
        warnings.push(Warning {
            code: "direct-unsupported",
            message: format!(
                "{} refused direct I/O, so every test ran buffered (--allow-buffered): the page \
                 cache is part of these figures",
                inspected.path.display()
            ),
        });
    }
    let mut report = BenchReport {
        schema: SCHEMA,
        tool_version: env!("CARGO_PKG_VERSION"),
        host: Host::read(&root),
        tunables: Tunables::read(&root, &inspected.stats_devnos),
        target: TargetInfo {
            region_bytes: plan.region_bytes,
            ..inspected.info.clone()
        },
        suite: suite_ref(&plan),
        tests: Vec::new(),
        judgement: None,
        warnings,
        interrupted: false,
    };
    let link = single_disk_link(&root, &inspected);
    let ctx = Context {
        target: &report.target,
        host: &report.host,
        link: link.as_ref(),
    };
    let run_warnings = honesty::run_warnings(&ctx);
    // Saved as each test finishes, warnings included, so Ctrl-C keeps what finished.
    let mut recorder = Recorder::begin(&args.record, &report)?;
    let ctl = Control::new(stop);
    let outcome = run::run(
        &root,
        &plan,
        &target,
        &inspected.stats_devnos,
        &ctl,
        &Bar::new(),
        &mut |test: &mut TestResult| {
            test.warnings = honesty::test_warnings(&ctx, test);
            recorder.test(test);
        },
    )?;
    drop(target);
    report.warnings.extend(run_warnings);
    report.judgement = judge(&plan, &outcome.tests);
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
        ExitCode::from(super::EXIT_INTERRUPTED)
    } else if report
        .judgement
        .as_ref()
        .is_some_and(|j| j.status == "fail")
    {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn list_suites(json: bool) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    let suites = suite::all();
    if json {
        let doc = serde_json::json!({ "schema": "tacho.suites.v1", "suites": suites });
        serde_json::to_writer_pretty(&mut out, &doc)?;
        writeln!(out)?;
    } else {
        report::suites::write(&suites, &mut out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The etcd suite's verdict: fdatasync p99 against the threshold.
fn judge(plan: &Plan, tests: &[TestResult]) -> Option<Judgement> {
    let threshold = plan.threshold?;
    let p99 = tests.iter().find_map(|t| t.sync)?.lat_ns.p99;
    let limit = threshold.as_nanos() as u64;
    let status = if p99 >= limit {
        "fail"
    } else if p99 as f64 >= limit as f64 * (1.0 - MARGINAL_FRACTION) {
        "marginal"
    } else {
        "pass"
    };
    Some(Judgement {
        status,
        metric: "fdatasync p99",
        value_ns: p99,
        threshold_ns: limit,
    })
}

/// The link of the one physical disk under the target; with several (RAID, LVM over many
/// disks) their sum is not a single link's limit, so no check is made.
fn single_disk_link(root: &SysRoot, t: &Inspected) -> Option<Link> {
    let device = t.device.as_ref()?;
    match blockdev::leaves(root, device).ok()?.as_slice() {
        [disk] => link::link_of(root, disk),
        _ => None,
    }
}

fn suite_ref(plan: &Plan) -> Option<SuiteRef> {
    plan.suite.as_ref().map(|s| SuiteRef {
        name: s.name,
        version: s.version,
        standard: plan.standard,
        repeat: plan.repeat,
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
