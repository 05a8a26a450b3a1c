//! One `tacho bench disk` run, from resolved options to the finished report: choose the
//! engine, open and inspect the target, plan, refuse what is unsafe, prepare the test file,
//! run the tests, and gather every warning in its order. The command line only resolves
//! arguments and picks the reporter; the store follows the run through an [`Observer`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Result, bail};

use crate::bench::honesty::{self, Context};
use crate::bench::hostcache::ProbeOutcome;
use crate::bench::plan::{self, DiskOptions, Plan};
use crate::bench::result::{
    BenchReport, Group, Judgement, SCHEMA, Status, SuiteRef, TargetInfo, TestResult,
};
use crate::bench::run::{self, Progress};
use crate::bench::target::{self, Inspected, Opened, Target};
use crate::bench::verdict;
use crate::bench::{backing, fio_cmd, fiojob};
use crate::io::{self, Control, EngineKind};
use crate::kernel::host::Host;
use crate::kernel::link::{self, Link};
use crate::kernel::meminfo::read_meminfo;
use crate::kernel::tunables::Tunables;
use crate::kernel::{SysRoot, blockdev};
use crate::warning::{Code, Warning};

/// What the command line resolved: the run's inputs, none of the argument parser's types.
#[derive(Debug, Clone)]
pub struct Request {
    /// The target given (a fio job file's own filename/directory wins).
    pub target: PathBuf,
    /// The test or suite and its options.
    pub options: DiskOptions,
    /// The engine asked for; io_uring by default.
    pub engine: Option<EngineKind>,
    /// The jobs of `--fio-job`, read and checked.
    pub jobs: Option<Vec<fiojob::Job>>,
    /// `--repeat`.
    pub repeat: Option<u32>,
    /// `--destroy-data`: the admin's consent to write over the target.
    pub destroy_data: bool,
    /// `--allow-buffered`: run buffered where direct I/O is refused.
    pub allow_buffered: bool,
    /// The options that changed a suite's method, in words (`runtime 1s`).
    pub method_changes: Vec<String>,
    /// `--group NAME --hosts N|a,b,c`: start together with the group's other hosts, and keep
    /// the latency histograms so the group's percentiles can be merged.
    pub group: Option<(String, Hosts)>,
}

/// Whom a `--group` waits for: a number of hosts, or these hosts by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hosts {
    /// Any this many runs of the group.
    Count(u32),
    /// One run of each of these host names (as the hosts' kernels name themselves).
    Named(Vec<String>),
}

impl Hosts {
    /// How many hosts the group waits for.
    pub fn count(&self) -> u32 {
        match self {
            Hosts::Count(n) => *n,
            Hosts::Named(names) => u32::try_from(names.len()).unwrap_or(u32::MAX),
        }
    }

    /// Reads `--hosts`: a count from 1 to 10000, or a comma list of distinct host names.
    pub fn parse(text: &str) -> Result<Hosts, String> {
        const MAX: usize = 10_000;
        if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            return match text.parse::<u32>() {
                Ok(n) if (1..=MAX as u32).contains(&n) => Ok(Hosts::Count(n)),
                _ => Err(format!(
                    "{text} hosts is not a group size; give 1 to {MAX}, or the hosts' names, \
                     e.g. db1,db2,db3"
                )),
            };
        }
        let names: Vec<String> = text.split(',').map(|n| n.trim().to_string()).collect();
        if let Some(bad) = names.iter().find(|n| {
            n.is_empty()
                || n.len() > 253
                || !n
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
        }) {
            // Quoted: an empty name (`a,,b`) would otherwise read as nothing at all.
            return Err(format!(
                "\"{}\" is not a host name; give a count or host names (letters, digits, '.', \
                 '-', '_') separated by commas, e.g. db1,db2,db3",
                crate::text::escape(bad)
            ));
        }
        if names.len() > MAX {
            return Err(format!("more than {MAX} hosts; give at most {MAX} names"));
        }
        for (i, n) in names.iter().enumerate() {
            if names[..i].contains(n) {
                return Err(format!(
                    "{n} is named twice in --hosts; name each host once"
                ));
            }
        }
        Ok(Hosts::Named(names))
    }
}

/// Follows a run: told the report's head before the first test and each test as it
/// finishes (the store saves test by test, so Ctrl-C keeps what finished).
pub trait Observer {
    /// The report as it stands before any test; an error stops the run before it starts.
    fn started(&mut self, report: &BenchReport) -> Result<()>;
    /// A finished test, its warnings attached.
    fn test(&mut self, test: &TestResult);
}

/// How a finished run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Every test ran and no threshold failed.
    Passed,
    /// A suite's threshold failed (the etcd suite's fdatasync p99).
    ThresholdFailed,
    /// A signal cut it short.
    Interrupted,
}

impl BenchReport {
    /// How the run ended: the exit status follows it.
    pub fn ending(&self) -> Ending {
        if self.interrupted {
            Ending::Interrupted
        } else if self
            .judgement
            .as_ref()
            .is_some_and(|j| j.status == Status::Fail)
        {
            Ending::ThresholdFailed
        } else {
            Ending::Passed
        }
    }
}

/// A target opened and inspected and its plan made; nothing written yet.
pub struct Planned {
    root: SysRoot,
    opened: Opened,
    inspected: Inspected,
    plan: Plan,
    /// psync standing in for io_uring.
    engine_note: Option<Warning>,
    /// The job file's target replaced by a test file.
    job_note: Option<Warning>,
}

/// Opens and inspects the target and plans the tests.
pub fn plan(root: SysRoot, req: &Request) -> Result<Planned> {
    let (engine, engine_note) = choose_engine(req.engine);
    let (path, job_note) = match &req.jobs {
        Some(jobs) => job_target(jobs, &req.target)?,
        None => (req.target.clone(), None),
    };
    let opened = target::open(&path)?;
    let inspected = target::inspect(&root, &opened)?;
    let plan = match &req.jobs {
        Some(jobs) => fiojob::plan(jobs, &inspected, engine, req.repeat)?,
        None => plan::plan(&req.options, &inspected, engine)?,
    };
    Ok(Planned {
        root,
        opened,
        inspected,
        plan,
        engine_note,
        job_note,
    })
}

impl Planned {
    /// The fio command lines that run the same tests (`--print-fio`).
    pub fn fio_commands(&self) -> String {
        fio_cmd::commands(&self.plan, &self.inspected)
    }

    /// Checks memory and consent, prepares the target, runs every test (until `stop`) and
    /// returns the report with its warnings sorted and the suite's verdict.
    pub fn run(
        self,
        req: &Request,
        stop: Arc<AtomicBool>,
        progress: &dyn Progress,
        observer: &mut dyn Observer,
    ) -> Result<BenchReport> {
        let Planned {
            root,
            opened,
            inspected,
            mut plan,
            engine_note,
            job_note,
        } = self;
        if let Some(available) = read_meminfo(&root).ok().and_then(|m| m.get("MemAvailable")) {
            plan.check_memory(available)?;
        }
        let virtual_disk = inspected
            .device
            .as_ref()
            .and_then(|d| backing::virtual_disk(&root, d));
        // Only a disk the hypervisor provides can hide a host cache, so only there is it
        // default.
        plan.probe_cache = req.options.probe_cache.unwrap_or(virtual_disk.is_some());
        // The probe overwrites a few blocks: on a file or device, only with the admin's consent.
        let consent = target::consent_if_writing(
            plan.writes || plan.probe_cache && req.destroy_data,
            &root,
            &opened,
            &inspected,
            req.destroy_data,
        )?;
        // The engine's note first, then the target's, then the job file's.
        let mut warnings: Vec<Warning> = engine_note.into_iter().collect();
        warnings.extend(inspected.notes.iter().cloned());
        warnings.extend(job_note);
        // A [global] line's note comes with every job that inherits it: say it once.
        for note in req.jobs.iter().flatten().flat_map(|j| &j.notes) {
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

        // The target (and its test file) lives until the tests are done, then is removed.
        let (target, notes) = Target::prepare(&opened, &inspected, consent, plan.region_bytes)?;
        warnings.extend(notes);
        if plan.any_direct() && !target.direct_supported()? {
            if !req.allow_buffered {
                bail!(
                    "{} does not support direct I/O (O_DIRECT); add --buffered or \
                     --allow-buffered (results then include the page cache)",
                    inspected.path.display()
                );
            }
            plan.tests.iter_mut().for_each(|t| t.spec.set_buffered());
            warnings.push(Warning {
                code: Code::DirectUnsupported,
                message: format!(
                    "{} refused direct I/O, so every test ran buffered (--allow-buffered): the \
                     page cache is part of these figures",
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
            suite: suite_ref(&plan, req),
            tests: Vec::new(),
            judgement: None,
            warnings,
            host_cache: None,
            precondition: None,
            like: None,
            group: req.group.as_ref().map(|(name, hosts)| Group {
                name: name.clone(),
                hosts: hosts.count(),
                names: match hosts {
                    Hosts::Named(names) => names.clone(),
                    Hosts::Count(_) => Vec::new(),
                },
                runs: Vec::new(),
                started_unix_ns: None,
            }),
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
        observer.started(&report)?;
        plan.histograms = req.group.is_some();
        let ctl = Control::new(stop);
        let outcome = run::run(
            &root,
            &plan,
            &target,
            &inspected.stats_devnos,
            &ctl,
            progress,
            &mut |test: &mut TestResult| {
                test.warnings = honesty::test_warnings(&ctx, test);
                honesty::sort_by_weight(&mut test.warnings);
                observer.test(test);
            },
        )?;
        drop(target);
        report.warnings.extend(run_warnings);
        probe_warnings(outcome.probe, &mut report);
        honesty::sort_by_weight(&mut report.warnings);
        report.precondition = outcome.precondition;
        report.judgement = judge(plan.threshold, &outcome.tests);
        report.tests = outcome.tests;
        report.interrupted = outcome.interrupted;
        Ok(report)
    }
}

/// What the host-cache probe found, as warnings and the report's `host_cache`.
fn probe_warnings(probe: Option<ProbeOutcome>, report: &mut BenchReport) {
    match probe {
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

/// The etcd suite's verdict: fdatasync p99 against the threshold. A test cut short by a signal
/// is not judged: its p99 rests on fewer samples than the method asks for.
fn judge(threshold: Option<Duration>, tests: &[TestResult]) -> Option<Judgement> {
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

fn suite_ref(plan: &Plan, req: &Request) -> Option<SuiteRef> {
    plan.suite.as_ref().map(|s| SuiteRef {
        name: s.name.to_string(),
        version: s.version,
        standard: plan.standard,
        repeat: plan.repeat,
        changed: req.method_changes.clone(),
    })
}

/// io_uring unless asked otherwise; psync, with a note, where io_uring is blocked.
fn choose_engine(asked: Option<EngineKind>) -> (EngineKind, Option<Warning>) {
    let wanted = asked.unwrap_or(EngineKind::IoUring);
    if wanted == EngineKind::IoUring && !io::io_uring_available() {
        let note = Warning {
            code: Code::IoUringUnavailable,
            message: "io_uring is not available here (old kernel, container seccomp filter or \
                      kernel.io_uring_disabled); using psync, one thread per queued I/O"
                .into(),
        };
        return (EngineKind::Psync, Some(note));
    }
    (wanted, None)
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

    #[test]
    fn hosts_are_a_count_or_distinct_names() {
        assert_eq!(Hosts::parse("3"), Ok(Hosts::Count(3)));
        assert_eq!(
            Hosts::parse("db1, db2.example,db_3"),
            Ok(Hosts::Named(vec![
                "db1".into(),
                "db2.example".into(),
                "db_3".into()
            ]))
        );
        for bad in ["0", "10001", "", "a,,b", "a,a", "a b", "x\u{1b}[2J"] {
            let e = Hosts::parse(bad).unwrap_err();
            assert!(!e.contains('\u{1b}') && !e.contains('\n'), "{e}");
        }
        assert_eq!(Hosts::parse("a,b").unwrap().count(), 2);
    }
}
