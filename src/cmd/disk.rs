//! `tacho bench disk`: inspect the target, refuse what is unsafe, plan, run, report.

use super::progress::Bar;
use super::record::Recorder;
use crate::bench::honesty::{self, Context};
use crate::bench::hostcache::ProbeOutcome;
use crate::bench::plan::{self, Plan};
use crate::bench::result::{
    BenchReport, Judgement, SCHEMA, Status, SuiteRef, TargetInfo, TestResult, Warning,
};
use crate::bench::target::{self, Inspected, Target};
use crate::bench::{backing, fio_cmd, fiojob, run, suite, verdict};
use crate::cli::DiskArgs;
use crate::io::{self, Control, EngineKind};
use crate::kernel::host::Host;
use crate::kernel::link::{self, Link};
use crate::kernel::meminfo::read_meminfo;
use crate::kernel::tunables::Tunables;
use crate::kernel::{SysRoot, blockdev};
use crate::report;
use crate::warning::Code;
use anyhow::{Result, bail};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Runs `tacho bench disk`: the exit status is 1 when the etcd suite's threshold failed, 130 after
/// Ctrl-C.
pub fn run(args: &DiskArgs) -> Result<ExitCode> {
    if args.list_suites {
        return list_suites(args.json);
    }
    let root = SysRoot::real();
    let mut warnings = Vec::new();
    let engine = choose_engine(args.engine, &mut warnings);
    let jobs = args.fio_job.as_deref().map(read_jobs).transpose()?;
    let (path, job_note) = match &jobs {
        Some(jobs) => job_target(jobs, &args.target)?,
        None => (args.target.clone(), None),
    };
    let opened = target::open(&path)?;
    let inspected = target::inspect(&root, &opened)?;
    let options = args.options();
    let mut plan = match &jobs {
        Some(jobs) => fiojob::plan(jobs, &inspected, engine, args.repeat)?,
        None => plan::plan(&options, &inspected, engine)?,
    };
    if args.print_fio {
        std::io::stdout().write_all(fio_cmd::commands(&plan, &inspected).as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(available) = read_meminfo(&root).ok().and_then(|m| m.get("MemAvailable")) {
        plan.check_memory(available)?;
    }
    let virtual_disk = inspected
        .device
        .as_ref()
        .and_then(|d| backing::virtual_disk(&root, d));
    // Only a disk the hypervisor provides can hide a host cache, so only there is it default.
    plan.probe_cache = options.probe_cache.unwrap_or(virtual_disk.is_some());
    // The probe overwrites a few blocks: on a file or device, only with the admin's consent.
    let consent = target::consent_if_writing(
        plan.writes || plan.probe_cache && args.destroy_data,
        &root,
        &opened,
        &inspected,
        args.destroy_data,
    )?;
    warnings.extend(inspected.notes.iter().cloned());
    warnings.extend(job_note);
    // A [global] line's note comes with every job that inherits it: say it once.
    for note in jobs.iter().flatten().flat_map(|j| &j.notes) {
        if !warnings.contains(note) {
            warnings.push(note.clone());
        }
    }
    let device = inspected.device.as_ref();
    if let Some(message) = device.and_then(|d| backing::buffered_loop(&root, d)) {
        warnings.push(Warning {
            code: Code::LoopBuffered,
            message,
        });
    }

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
        plan.tests.iter_mut().for_each(|t| t.spec.set_buffered());
        warnings.push(Warning {
            code: Code::DirectUnsupported,
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
        suite: suite_ref(&plan, args),
        tests: Vec::new(),
        judgement: None,
        warnings,
        host_cache: None,
        interrupted: false,
    };
    let link = single_disk_link(&root, &inspected);
    let ctx = Context {
        target: &report.target,
        host: &report.host,
        link: link.as_ref(),
        virtual_disk: virtual_disk.as_deref(),
        hole_bytes: hole_bytes(&inspected, &target, plan.region_bytes),
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
            honesty::sort_by_weight(&mut test.warnings);
            recorder.test(test);
        },
    )?;
    drop(target);
    report.warnings.extend(run_warnings);
    match outcome.probe {
        Some(ProbeOutcome::Ran(found)) => {
            if found.seen() {
                report.warnings.push(Warning {
                    code: Code::HostCache,
                    message: found.summary.clone(),
                });
            } else if !found.conclusive {
                report.warnings.push(Warning {
                    code: Code::HostCacheUnprobed,
                    message: found.summary.clone(),
                });
            } else if let Some(vm) = report
                .warnings
                .iter_mut()
                .find(|w| w.code == Code::VmDetected)
            {
                // The probe looked from inside: say so next to "cannot be verified".
                vm.message.push_str(
                    "; the host-cache probe saw no sign of a host cache (a cache larger than \
                     the region would not show)",
                );
            }
            report.host_cache = Some(found);
        }
        // Asked for, or on by default (a virtual disk): either way the reader is told why not.
        Some(ProbeOutcome::Skipped(why)) => report.warnings.push(Warning {
            code: Code::HostCacheUnprobed,
            message: why,
        }),
        None => {}
    }
    honesty::sort_by_weight(&mut report.warnings);
    report.judgement = judge(plan.threshold, &outcome.tests);
    report.tests = outcome.tests;
    report.interrupted = outcome.interrupted;

    let printed = if args.json {
        report::json::write(&report, &mut std::io::stdout().lock())
    } else {
        let width = crate::fit::stdout_width();
        let mut out = crate::fit::Fit::new(std::io::stdout().lock(), width);
        report::table::write(&report, &mut out, width).and_then(|()| out.flush())
    };
    // Saved whatever became of the output: a reader that closed the pipe early (`| head`)
    // did not make the run fail.
    recorder.finish(&report)?;
    printed?;
    Ok(if report.interrupted {
        ExitCode::from(super::EXIT_INTERRUPTED)
    } else if report
        .judgement
        .as_ref()
        .is_some_and(|j| j.status == Status::Fail)
    {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// A fio job file is a few KiB; anything past this is not one (`/dev/zero` would never end).
const JOB_FILE_LIMIT: u64 = 1 << 20;

/// The jobs of a fio job file, each refused option named.
fn read_jobs(file: &Path) -> Result<Vec<fiojob::Job>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(file)
        .and_then(|f| f.take(JOB_FILE_LIMIT + 1).read_to_end(&mut bytes))
        .map_err(|e| anyhow::anyhow!("cannot read the job file {}: {e}", file.display()))?;
    if bytes.len() as u64 > JOB_FILE_LIMIT {
        bail!(
            "the job file {} is larger than 1 MiB, which no fio job file is; give a fio job file",
            file.display()
        );
    }
    let text = String::from_utf8(bytes).map_err(|_| {
        anyhow::anyhow!(
            "the job file {} is not text (UTF-8); give a fio job file",
            file.display()
        )
    })?;
    let sections =
        fiojob::parse(&text).map_err(|e| anyhow::anyhow!("job file {}: {e}", file.display()))?;
    sections
        .iter()
        .map(fiojob::job)
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("job file {}: {e}", file.display()))
}

/// Where the jobs run: the one place their filename/directory names, else `given`. A file
/// fio would create is not created by name: tacho makes its own test file in that directory.
fn job_target(jobs: &[fiojob::Job], given: &Path) -> Result<(PathBuf, Option<Warning>)> {
    let mut named = jobs.iter().filter_map(|j| j.target.as_ref());
    let Some(first) = named.next() else {
        return Ok((given.to_path_buf(), None));
    };
    if let Some(other) = named.find(|t| *t != first) {
        bail!(
            "the jobs name two targets ({} and {}); tacho runs against one: give every job the \
             same filename and directory",
            first.display(),
            other.display()
        );
    }
    if first.exists() {
        return Ok((first.clone(), None));
    }
    match first
        .parent()
        .filter(|p| p.is_dir() || p.as_os_str().is_empty())
    {
        Some(dir) => {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            Ok((
                dir.to_path_buf(),
                Some(Warning {
                    code: Code::FioFileReplaced,
                    message: format!(
                        "{} does not exist: fio would create it; tacho tests with its own \
                         temporary file in {} instead",
                        first.display(),
                        dir.display()
                    ),
                }),
            ))
        }
        None => bail!(
            "the job file's target {} does not exist, nor does its directory; create the \
             directory or fix filename/directory",
            first.display()
        ),
    }
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

/// The etcd suite's verdict: fdatasync p99 against the threshold. A test cut short by a signal
/// is not judged: its p99 rests on fewer samples than the method asks for.
fn judge(threshold: Option<std::time::Duration>, tests: &[TestResult]) -> Option<Judgement> {
    let threshold = threshold?;
    let p99 = tests
        .iter()
        .filter(|t| !t.interrupted)
        .find_map(|t| t.sync)?
        .lat_ns
        .p99;
    let limit = threshold.as_nanos() as u64;
    Some(Judgement {
        status: verdict::etcd_status(p99 as f64, limit as f64),
        metric: "fdatasync p99",
        value_ns: p99,
        threshold_ns: limit,
    })
}

/// Holes in the region of an existing file the tests read; a test file tacho lays out has none.
fn hole_bytes(inspected: &Inspected, target: &Target, region: u64) -> u64 {
    if inspected.kind != target::Kind::File {
        return 0;
    }
    target
        .open(false)
        .ok()
        .and_then(|f| backing::hole_bytes(&f, region))
        .unwrap_or(0)
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

fn suite_ref(plan: &Plan, args: &DiskArgs) -> Option<SuiteRef> {
    plan.suite.as_ref().map(|s| SuiteRef {
        name: s.name,
        version: s.version,
        standard: plan.standard,
        repeat: plan.repeat,
        changed: method_changes(args),
    })
}

/// The options that changed a suite's method, in words (`runtime 1s`), so a stored run says
/// what made it non-standard.
fn method_changes(args: &DiskArgs) -> Vec<String> {
    let secs = |d: std::time::Duration| format!("{}s", d.as_secs_f64());
    let mut out = Vec::new();
    if let Some(d) = args.runtime {
        out.push(format!("runtime {}", secs(d)));
    }
    if let Some(d) = args.ramp {
        out.push(format!("ramp {}", secs(d)));
    }
    if let Some(size) = args.size {
        out.push(format!("size {}", crate::units::format_size(size)));
    }
    if args.buffered {
        out.push("buffered".into());
    }
    out
}

/// io_uring unless asked otherwise; psync, with a note, where io_uring is blocked.
fn choose_engine(asked: Option<EngineKind>, warnings: &mut Vec<Warning>) -> EngineKind {
    let wanted = asked.unwrap_or(EngineKind::IoUring);
    if wanted == EngineKind::IoUring && !io::io_uring_available() {
        warnings.push(Warning {
            code: Code::IoUringUnavailable,
            message: "io_uring is not available here (old kernel, container seccomp filter or \
                      kernel.io_uring_disabled); using psync, one thread per queued I/O"
                .into(),
        });
        return EngineKind::Psync;
    }
    wanted
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{JobParams, JobSpec, Measured, Rw, SyncEvery, SyncKind};
    use std::time::Duration;

    fn wal_test(p99_ms: u64) -> TestResult {
        let spec = JobSpec::new(JobParams {
            rw: Rw::Write,
            bs: 2300,
            bssplit: vec![],
            iodepth: 1,
            numjobs: 1,
            region_bytes: 22 << 20,
            runtime: Duration::from_secs(300),
            ramp: Duration::ZERO,
            io_limit: None,
            rwmixread: 50,
            sync: Some(SyncEvery {
                kind: SyncKind::Fdatasync,
                every: 1,
            }),
            open_sync: None,
            direct: false,
            engine: EngineKind::Sync,
            seed: 1,
        })
        .unwrap();
        let mut m = Measured::default();
        for _ in 0..100 {
            m.sync.record(0, p99_ms * 1_000_000);
        }
        m.elapsed = Duration::from_secs(1);
        TestResult::new("etcd WAL".into(), &spec, &[m], Vec::new())
    }

    #[test]
    fn an_interrupted_test_is_not_judged() {
        let limit = Some(Duration::from_millis(10));
        let judged = judge(limit, &[wal_test(2)]).expect("a whole test is judged");
        assert_eq!(judged.status, Status::Pass);
        assert_eq!(judge(limit, &[wal_test(20)]).unwrap().status, Status::Fail);
        let mut cut = wal_test(2);
        cut.interrupted = true;
        assert!(judge(limit, &[cut]).is_none());
    }
}
