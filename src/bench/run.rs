//! Runs a plan's tests one after another against a prepared target, recording each test's
//! device counters around it.

use super::hostcache::{self, ProbeOutcome};
use super::plan::Plan;
use super::result::{Histograms, TestResult};
use super::suite::UntilFlat;
use super::sustained::{self, Precondition};
use super::target::Target;
use crate::io::{self, Control, EngineError, EngineKind, JobParams, JobSpec, Rw};
use crate::kernel::SysRoot;
use crate::kernel::diskstats::{self, DiskCounters, DiskDelta};
use crate::units::format_size;
use anyhow::{Context, Result};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Shows what is running; the terminal gets a progress bar, everything else nothing.
pub trait Progress: Sync {
    /// A phase of known length starts (`total` in bytes for lay-out, or the test's duration).
    fn start(&self, label: &str, total: Work, ctl: &Control);
    /// Called about four times a second with the control's counters.
    fn tick(&self, ctl: &Control);
    /// The run ended: clear whatever is shown.
    fn finish(&self);
    /// Test `n` of `of` (counted from 1) starts, with about `left` of planned time to go
    /// (this test's included). Said only for runs of more than one test.
    fn whole_run(&self, n: usize, of: usize, left: Duration);
}

/// How much of a phase there is, for a progress bar.
#[derive(Clone, Copy, Debug)]
pub enum Work {
    /// Bytes to write (laying out the test file).
    Bytes(u64),
    /// A fixed duration (one test's ramp plus runtime).
    Time(Duration),
}

/// Tests that ran, in plan order (the last one cut short when `interrupted`), and whether a
/// signal stopped the run early.
pub struct Outcome {
    pub tests: Vec<TestResult>,
    /// The host-cache probe's outcome, when the plan asked for it.
    pub probe: Option<ProbeOutcome>,
    /// How the region was preconditioned, when the plan asked for it and it finished.
    pub precondition: Option<Precondition>,
    pub interrupted: bool,
}

pub fn run(
    root: &SysRoot,
    plan: &Plan,
    target: &Target,
    stats_devnos: &[(u32, u32)],
    ctl: &Control,
    progress: &dyn Progress,
    on_test: &mut dyn FnMut(&mut TestResult),
) -> Result<Outcome> {
    let mut tests = Vec::new();
    let mut precondition = None;
    if let Some(round) = plan.precondition {
        precondition = precondition_region(plan, target, round, ctl, progress)?;
        if precondition.is_none() {
            return Ok(Outcome {
                tests,
                probe: None,
                precondition,
                interrupted: true,
            });
        }
    }
    // Preconditioning wrote the region already.
    if target.test_file.is_some() && plan.prefill && precondition.is_none() {
        let writer = target
            .open(false)
            .context("cannot open the test file to lay it out")?;
        progress.start(
            "laying out the test file",
            Work::Bytes(plan.region_bytes),
            ctl,
        );
        let done = watch(ctl, progress, None, || {
            io::fill(&writer, plan.region_bytes, ctl)
        });
        progress.finish();
        if !done.map_err(|e| engine_error(e, target, false))? {
            return Ok(Outcome {
                tests,
                probe: None,
                precondition,
                interrupted: true,
            });
        }
    }
    // After the layout (its blocks are the cold ones) and before any test touches the region.
    let probe = plan.probe_cache.then(|| {
        progress.start("probing for a host cache", Work::Time(Duration::ZERO), ctl);
        let outcome = if target.test_file.is_some() && !plan.prefill {
            // Unwritten blocks read as zeros from metadata: no cold data to compare with.
            ProbeOutcome::Skipped(
                "the host-cache probe needs a laid-out test file, and this suite writes into an \
                 empty one; give a file or device with --destroy-data"
                    .into(),
            )
        } else {
            // A test file tacho laid out holds only blocks written moments ago.
            let just_written = target.test_file.is_some();
            probe_cache(target, plan.region_bytes, plan.lbs, just_written, ctl)
        };
        progress.finish();
        outcome
    });
    let mut interrupted = false;
    for (i, test) in plan.tests.iter().enumerate() {
        if ctl.stopped() {
            interrupted = true;
            break;
        }
        if plan.tests.len() > 1 {
            progress.whole_run(i + 1, plan.tests.len(), planned_time(plan, i));
        }
        let spec = &test.spec;
        let flags = spec.open_sync().map_or(0, |s| s.flag());
        let open = || target.open_with(spec.direct(), flags);
        let before = device_counters(root, stats_devnos);
        let mut repeats = Vec::new();
        for n in 1..=plan.repeat {
            if ctl.stopped() {
                interrupted = true;
                break;
            }
            // A buffered read must start cold (fio's invalidate=1). A buffered write-only test
            // is left alone: evicting pages would make partial-page writes read them back,
            // work the workload never asked for.
            if test.fresh {
                target
                    .renew_test_file()
                    .context("cannot empty the test file")?;
            }
            if !spec.direct() && spec.rw().reads() {
                io::drop_cached_pages(&open().context("cannot open the target")?);
            }
            let label = if plan.repeat > 1 {
                format!("{} ({n}/{})", test.name, plan.repeat)
            } else {
                test.name.clone()
            };
            progress.start(&label, Work::Time(spec.ramp() + spec.runtime()), ctl);
            ctl.clear_end();
            let flat = test.until_flat.map(|u| (u, plan.flat_for));
            let measured = watch(ctl, progress, flat, || io::run_job(spec, &open, ctl));
            progress.finish();
            let measured = measured.map_err(|e| engine_error(e, target, spec.direct()))?;
            if ctl.stopped() {
                // Cut short by a signal: what it measured is kept, as fio prints the job it was
                // running, and marked so nobody takes it for a whole test. Stopped in the ramp,
                // it measured nothing.
                interrupted = true;
                if measured.read.ios + measured.write.ios > 0 {
                    repeats.push(measured);
                }
                break;
            }
            repeats.push(measured);
        }
        if repeats.is_empty() {
            break;
        }
        if spec.rw().writes() {
            // What is still in the page cache (or a volatile device cache) has not reached the
            // device yet: flush before reading its counters, so they show what was written.
            open()
                .and_then(|f| f.sync_all())
                .map_err(|e| engine_error(io::EngineError::Open(e), target, spec.direct()))?;
        }
        let device = match (before, device_counters(root, stats_devnos)) {
            (Some(b), Some(a)) => diskstats::deltas(&b, &a),
            _ => Vec::<DiskDelta>::new(),
        };
        let mut result = TestResult::new(test.name.clone(), spec, &repeats, device);
        result.interrupted = interrupted;
        if plan.histograms {
            result.histograms = Some(Histograms::of(&repeats));
        }
        if test.until_flat.is_some() {
            result.cliff = sustained::cliff(&result.first_repeat_bytes_per_s());
        }
        // Handed out as soon as it exists (to add warnings, to save it), so a crash or Ctrl-C in
        // a later test keeps it.
        on_test(&mut result);
        tests.push(result);
        if interrupted {
            break;
        }
    }
    Ok(Outcome {
        tests,
        probe,
        precondition,
        interrupted,
    })
}

/// The writes of `--precondition` on a plan: block sizes and depths of the sequential passes
/// and of the random rounds (`--print-fio` prints the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreconditionShape {
    /// The largest of 128 KiB down to 4 KiB that divides the region (else the logical block).
    pub sequential_bs: u64,
    /// 4 KiB, or the logical block when larger.
    pub random_bs: u64,
    /// I/Os in flight of the passes and of the rounds (1 with the sync engine).
    pub sequential_depth: u32,
    pub random_depth: u32,
}

impl PreconditionShape {
    /// Sequential passes over the region before the random rounds.
    pub const PASSES: u32 = 2;

    /// The shape on `plan`'s region with `engine`.
    pub fn of(plan: &Plan, engine: EngineKind) -> PreconditionShape {
        let region = plan.region_bytes;
        let fits =
            |bs: u64| bs <= region && region.is_multiple_of(bs) && bs.is_multiple_of(plan.lbs);
        // The sync engine runs one I/O at a time.
        let depth = |d: u32| if engine == EngineKind::Sync { 1 } else { d };
        PreconditionShape {
            sequential_bs: [128 << 10, 64 << 10, 32 << 10, 16 << 10, 8 << 10, 4 << 10]
                .into_iter()
                .find(|&bs| fits(bs))
                .unwrap_or(plan.lbs),
            random_bs: plan.lbs.max(4096),
            sequential_depth: depth(8),
            random_depth: depth(32),
        }
    }
}

/// Preconditions the region as SNIA's PTS does: written twice sequentially, then random
/// writes in rounds of `round` until [`sustained::steady`] holds over the last five, or
/// [`sustained::MAX_ROUNDS`] ran. `None` when a signal stopped it.
fn precondition_region(
    plan: &Plan,
    target: &Target,
    round: Duration,
    ctl: &Control,
    progress: &dyn Progress,
) -> Result<Option<Precondition>> {
    let Some(first) = plan.tests.first() else {
        return Ok(None);
    };
    let (engine, direct, region) = (first.spec.engine(), first.spec.direct(), plan.region_bytes);
    let shape = PreconditionShape::of(plan, engine);
    let (seq_bs, rand_bs) = (shape.sequential_bs, shape.random_bs);
    if rand_bs > region {
        anyhow::bail!(
            "--precondition writes {} blocks, and the region is {}; use a larger --size",
            format_size(rand_bs),
            format_size(region)
        );
    }
    let spec = |rw, bs, iodepth, runtime, io_limit| {
        JobSpec::new(JobParams {
            rw,
            bs,
            bssplit: Vec::new(),
            iodepth,
            numjobs: 1,
            region_bytes: region,
            runtime,
            ramp: Duration::ZERO,
            io_limit,
            rwmixread: 50,
            sync: None,
            open_sync: None,
            direct,
            engine,
            seed: fastrand::u64(..1 << 63),
        })
    };
    let open = || target.open_with(direct, 0);
    const PASSES: u32 = PreconditionShape::PASSES;
    // A pass ends when the region is written: the runtime only bounds a device that stalls.
    let pass = spec(
        Rw::Write,
        seq_bs,
        shape.sequential_depth,
        Duration::from_secs(7 * 24 * 3600),
        Some(region),
    )?;
    for n in 1..=PASSES {
        progress.start(
            &format!("preconditioning: sequential pass {n}/{PASSES}"),
            Work::Bytes(region),
            ctl,
        );
        let done = watch(ctl, progress, None, || io::run_job(&pass, &open, ctl));
        progress.finish();
        done.map_err(|e| engine_error(e, target, direct))?;
        if ctl.stopped() {
            return Ok(None);
        }
    }
    let random = spec(Rw::RandWrite, rand_bs, shape.random_depth, round, None)?;
    let mut rounds = Vec::new();
    while rounds.len() < sustained::MAX_ROUNDS && !sustained::steady(&rounds) {
        progress.start(
            &format!("preconditioning: random round {}", rounds.len() + 1),
            Work::Time(round),
            ctl,
        );
        let done = watch(ctl, progress, None, || io::run_job(&random, &open, ctl));
        progress.finish();
        let m = done.map_err(|e| engine_error(e, target, direct))?;
        if ctl.stopped() {
            return Ok(None);
        }
        let secs = m.elapsed.as_secs_f64();
        rounds.push(if secs > 0.0 {
            m.write.ios as f64 / secs
        } else {
            0.0
        });
    }
    let steady = sustained::steady(&rounds);
    let last = &rounds[rounds.len().saturating_sub(sustained::STEADY_ROUNDS)..];
    Ok(Some(Precondition {
        sequential_passes: PASSES,
        sequential_bs_bytes: seq_bs,
        random_bs_bytes: rand_bs,
        iodepth: shape.random_depth,
        round_s: round.as_secs_f64(),
        steady_iops: steady.then(|| last.iter().sum::<f64>() / last.len() as f64),
        rounds_iops: rounds,
        steady,
    }))
}

/// The planned time of the tests from index `from` on: each one's ramp and runtime, times the
/// repeats. A test bounded by its size (dd, etcd) may end sooner: its runtime is its cap.
fn planned_time(plan: &Plan, from: usize) -> Duration {
    plan.tests[from..]
        .iter()
        .map(|t| (t.spec.ramp() + t.spec.runtime()) * plan.repeat)
        .sum()
}

/// Runs the probe on a prepared target over its first `region` bytes, when the run may write
/// there and the target takes O_DIRECT; otherwise says why not. `lbs` is the logical block size.
fn probe_cache(
    target: &Target,
    region: u64,
    lbs: u64,
    just_written: bool,
    ctl: &Control,
) -> ProbeOutcome {
    let skip = |why: String| ProbeOutcome::Skipped(why);
    if !target.writes {
        return skip(
            "the host-cache probe writes a few blocks, and this run only reads; add \
             --destroy-data to let it (or give a directory)"
                .into(),
        );
    }
    let block = lbs.max(4096);
    let file = match target.open(true) {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            return skip("the host-cache probe needs direct I/O, which the target refuses".into());
        }
        Err(e) => return skip(format!("the host-cache probe cannot open the target: {e}")),
    };
    match hostcache::probe(&file, region, block, just_written, ctl) {
        Ok(Some(found)) => ProbeOutcome::Ran(found),
        Ok(None) if ctl.stopped() => skip("the host-cache probe was interrupted".into()),
        Ok(None) => skip(format!(
            "the host-cache probe did not run: it spreads its reads over at least {} and the \
             region is {}; use --size {} or more (or --no-probe-cache)",
            format_size(hostcache::min_region()),
            format_size(region),
            format_size(hostcache::min_region())
        )),
        Err(e) => skip(format!("the host-cache probe failed: {e}")),
    }
}

/// Runs `work` while a second thread feeds the progress display and, for a sustained test
/// (`flat`: its rule and how long the rate must be flat), ends the test once the rule holds.
fn watch<T: Send>(
    ctl: &Control,
    progress: &dyn Progress,
    flat: Option<(UntilFlat, Duration)>,
    work: impl FnOnce() -> T + Send,
) -> T {
    let finished = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let ticker = s.spawn(|| {
            let mut rates = Rates::start(ctl);
            while !finished.load(std::sync::atomic::Ordering::Relaxed) {
                progress.tick(ctl);
                if let Some((until, secs)) = flat
                    && rates.step(ctl)
                    && sustained::may_stop(
                        &rates.per_second,
                        secs.as_secs() as usize,
                        until == UntilFlat::AfterCliff,
                    )
                {
                    ctl.end();
                }
                std::thread::park_timeout(Duration::from_millis(250));
            }
        });
        let result = work();
        finished.store(true, std::sync::atomic::Ordering::Relaxed);
        // Wake the ticker so the test's end is not delayed by its sleep.
        ticker.thread().unpark();
        result
    })
}

/// Bytes per second of the running test, from the workers' published progress.
struct Rates {
    per_second: Vec<f64>,
    mark: Instant,
    bytes: u64,
}

impl Rates {
    fn start(ctl: &Control) -> Rates {
        Rates {
            per_second: Vec::new(),
            mark: Instant::now(),
            bytes: ctl.done_bytes.load(Ordering::Relaxed),
        }
    }

    /// Adds a second's rate once a second has passed since the last; true when it did.
    fn step(&mut self, ctl: &Control) -> bool {
        let elapsed = self.mark.elapsed();
        if elapsed < Duration::from_secs(1) {
            return false;
        }
        let bytes = ctl.done_bytes.load(Ordering::Relaxed);
        self.per_second
            .push(bytes.saturating_sub(self.bytes) as f64 / elapsed.as_secs_f64());
        self.bytes = bytes;
        self.mark = Instant::now();
        true
    }
}

fn device_counters(root: &SysRoot, devnos: &[(u32, u32)]) -> Option<Vec<DiskCounters>> {
    let all = diskstats::read_diskstats(root).ok()?;
    Some(
        all.into_iter()
            .filter(|c| devnos.contains(&(c.major, c.minor)))
            .collect(),
    )
}

fn engine_error(e: EngineError, target: &Target, direct: bool) -> anyhow::Error {
    if e.raw_os_error() == Some(libc::EINVAL) && direct {
        anyhow::anyhow!(
            "{e}: {} refused direct I/O at this size or offset; add --buffered, or use a block \
             size the device accepts",
            target.path.display()
        )
    } else if target.is_file() && filled_up(&e, target) {
        anyhow::anyhow!(
            "the filesystem holding {} filled up during the test (ENOSPC); free space or use a \
             smaller --size",
            target.location().display()
        )
    } else if e.raw_os_error() == Some(libc::ENOSPC) {
        anyhow::anyhow!("{e}: the device is full; use a smaller --size")
    } else {
        anyhow::anyhow!("{e} (target {})", target.path.display())
    }
}

/// ENOSPC, or a write cut short on a filesystem with no space left (the error a retry of the
/// rest would have given).
fn filled_up(e: &EngineError, target: &Target) -> bool {
    e.raw_os_error() == Some(libc::ENOSPC)
        || matches!(e, EngineError::Short { op: "write", .. }) && target.filesystem_full()
}
