//! `tacho stress`: load workers (cpu, vm, io, hdd) bounded by a time-out, and a sampler that
//! reports every second what the workers did and what the machine felt: the CPU split
//! (user/system/iowait from /proc/stat) and THP and compaction counters (/proc/vmstat), so
//! `tacho stress --vm 4` shows the system-time cost of transparent huge pages directly.

pub mod testdir;
pub mod workers;

use crate::kernel::SysRoot;
use crate::kernel::cpusplit::CpuSplit;
use crate::kernel::host::Host;
use crate::kernel::meminfo::{VmStat, read_vmstat};
use crate::kernel::stat::{CpuTicks, read_stat};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use testdir::TestDir;
use workers::WorkerError;

/// The `schema` of the `tacho stress --json` document.
pub const SCHEMA: &str = "tacho.stress.v1";

/// What to run, resolved and checked by `cmd::stress`.
#[derive(Debug, Clone)]
pub struct Plan {
    /// CPU workers (`--cpu`).
    pub cpu: u32,
    /// Busy share of each CPU worker's time, in percent (`--cpu-load`).
    pub cpu_load_pct: u8,
    /// Memory workers (`--vm`).
    pub vm: u32,
    /// Bytes each memory worker allocates and touches per pass (`--vm-bytes`).
    pub vm_bytes: u64,
    /// Memory workers allocate once and keep re-writing (`--vm-keep`) instead of freeing each pass.
    pub vm_keep: bool,
    /// Each memory worker stops after this many passes (`--vm-passes`): a fixed amount of
    /// work; the run ends when all have (or at the timeout).
    pub vm_passes: Option<u64>,
    /// sync() workers (`--io`).
    pub io: u32,
    /// Disk-write workers (`--hdd`).
    pub hdd: u32,
    /// Bytes each disk-write worker writes to its file before deleting it (`--hdd-bytes`).
    pub hdd_bytes: u64,
    /// Directory that receives the disk-write workers' own test directory (`--hdd-dir`).
    pub hdd_dir: PathBuf,
    /// The run ends after this long (`--timeout`), if no signal ends it first.
    pub timeout: Duration,
}

/// Work done so far by each class of worker (cumulative).
#[derive(Debug, Default)]
struct Counters {
    cpu_ops: AtomicU64,
    vm_bytes: AtomicU64,
    io_syncs: AtomicU64,
    hdd_bytes: AtomicU64,
    /// Memory workers that finished their `--vm-passes`.
    vm_done: AtomicU64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Work {
    cpu_ops: u64,
    vm_bytes: u64,
    io_syncs: u64,
    hdd_bytes: u64,
}

impl Counters {
    fn read(&self) -> Work {
        Work {
            cpu_ops: self.cpu_ops.load(Ordering::Relaxed),
            vm_bytes: self.vm_bytes.load(Ordering::Relaxed),
            io_syncs: self.io_syncs.load(Ordering::Relaxed),
            hdd_bytes: self.hdd_bytes.load(Ordering::Relaxed),
        }
    }
}

/// One interval (normally a second) of the run.
#[derive(Debug, Clone, Serialize)]
pub struct Second {
    /// Seconds since the start, at the end of the interval.
    pub t_s: f64,
    /// Rounds of the integer kernel per second, all CPU workers together.
    pub cpu_ops_per_s: f64,
    /// Bytes of memory written per second, all memory workers together.
    pub vm_touched_bytes_per_s: f64,
    /// sync() calls completed per second, all sync workers together.
    pub io_syncs_per_s: f64,
    /// Bytes written per second, all disk-write workers together.
    pub hdd_written_bytes_per_s: f64,
    /// The whole machine's CPU split; `null` if /proc/stat could not be read.
    pub cpu: Option<CpuSplit>,
    /// /proc/vmstat counter increases in the interval (absent counters left out).
    pub vmstat: BTreeMap<&'static str, u64>,
}

/// The result of `tacho stress` (the `tacho.stress.v1` document).
#[derive(Debug, Serialize)]
pub struct StressReport {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// The tacho version that ran it (Cargo package version).
    pub tool_version: &'static str,
    /// The machine it ran on.
    pub host: Host,
    /// How long the workers ran, in seconds.
    pub duration_s: f64,
    /// What each class of worker was asked to do and did.
    pub workers: WorkersSummary,
    /// CPU split over the whole run.
    pub cpu: Option<CpuSplit>,
    /// /proc/vmstat increases over the whole run.
    pub vmstat: BTreeMap<&'static str, u64>,
    /// tacho's own peak resident memory (VmHWM): the vm workers' touched pages show here.
    pub peak_rss_bytes: Option<u64>,
    /// One entry per sampling interval, in order.
    pub seconds: Vec<Second>,
    /// True when a signal ended the run before its time-out.
    pub interrupted: bool,
}

/// Totals of each class of worker over the whole run.
#[derive(Debug, Serialize)]
pub struct WorkersSummary {
    /// The CPU workers.
    pub cpu: CpuWorkers,
    /// The memory workers.
    pub vm: VmWorkers,
    /// The sync() workers.
    pub io: IoWorkers,
    /// The disk-write workers.
    pub hdd: HddWorkers,
}

/// What the CPU workers did.
#[derive(Debug, Serialize)]
pub struct CpuWorkers {
    /// Workers that ran (0: none asked for).
    pub count: u32,
    /// Busy share of each worker's time, in percent.
    pub load_pct: u8,
    /// Rounds of the integer kernel, all workers together.
    pub ops: u64,
    /// `ops` over the run's duration.
    pub ops_per_s: f64,
}

/// What the memory workers did.
#[derive(Debug, Serialize)]
pub struct VmWorkers {
    /// Workers that ran (0: none asked for).
    pub count: u32,
    /// Bytes each worker allocated and touched per pass.
    pub bytes_per_worker: u64,
    /// Whether the workers kept their memory instead of freeing it each pass.
    pub keep: bool,
    /// Passes each worker stopped after (`--vm-passes`); `null`: until the timeout.
    pub passes: Option<u64>,
    /// Bytes written to memory, all workers together (pages × 4 KiB).
    pub touched_bytes: u64,
    /// `touched_bytes` over the run's duration, bytes per second.
    pub touched_bytes_per_s: f64,
}

/// What the sync() workers did.
#[derive(Debug, Serialize)]
pub struct IoWorkers {
    /// Workers that ran (0: none asked for).
    pub count: u32,
    /// sync() calls completed, all workers together.
    pub syncs: u64,
    /// `syncs` over the run's duration, per second.
    pub syncs_per_s: f64,
}

/// What the disk-write workers did.
#[derive(Debug, Serialize)]
pub struct HddWorkers {
    /// Workers that ran (0: none asked for).
    pub count: u32,
    /// Bytes each worker wrote to its file before deleting it and starting over.
    pub bytes_per_worker: u64,
    /// The test directory the workers wrote in (removed at the end); `None` without disk-write
    /// workers.
    pub dir: Option<String>,
    /// Bytes written, all workers together.
    pub written_bytes: u64,
    /// `written_bytes` over the run's duration, bytes per second.
    pub written_bytes_per_s: f64,
}

/// /proc/vmstat counters that show transparent huge pages and compaction at work: the
/// system-time cost of THP that `--vm` workers are meant to expose.
pub const VMSTAT_KEYS: [&str; 7] = [
    "thp_fault_alloc",
    "thp_fault_fallback",
    "thp_collapse_alloc",
    "compact_stall",
    "compact_success",
    "compact_fail",
    "pgmajfault",
];

/// What the sampler reads from the kernel at each tick; `None` where a file was unreadable.
#[derive(Debug, Clone)]
struct KernelSample {
    ticks: Option<CpuTicks>,
    vm: Option<VmStat>,
}

fn sample(root: &SysRoot) -> KernelSample {
    KernelSample {
        ticks: read_stat(root).ok().map(|s| s.total),
        vm: read_vmstat(root).ok(),
    }
}

/// Increases of [`VMSTAT_KEYS`]; counters this kernel lacks, or that went backwards, are left
/// out.
fn vm_deltas(before: &KernelSample, after: &KernelSample) -> BTreeMap<&'static str, u64> {
    let (Some(a), Some(b)) = (&before.vm, &after.vm) else {
        return BTreeMap::new();
    };
    VMSTAT_KEYS
        .iter()
        .filter_map(|&k| Some((k, b.get(k)?.checked_sub(a.get(k)?)?)))
        .collect()
}

fn split(before: &KernelSample, after: &KernelSample) -> Option<CpuSplit> {
    CpuSplit::between(before.ticks.as_ref()?, after.ticks.as_ref()?)
}

fn per_s(count: u64, secs: f64) -> f64 {
    if secs > 0.0 { count as f64 / secs } else { 0.0 }
}

/// Starts the workers, samples every second (handing each to `on_second`), stops at the
/// time-out or when `interrupt` is set, joins the workers and removes the hdd directory.
/// A worker's failure stops the others and is returned after cleanup.
pub fn run(
    plan: &Plan,
    root: &SysRoot,
    interrupt: &AtomicBool,
    on_second: &mut dyn FnMut(&Second),
) -> Result<StressReport, StressError> {
    let dir = if plan.hdd > 0 {
        let mut dir = TestDir::create(&plan.hdd_dir).map_err(StressError::TestDir)?;
        for w in 0..plan.hdd as usize {
            dir.on_abandon_remove(&workers::hdd_file(w));
        }
        Some(dir)
    } else {
        None
    };
    let counters = Arc::new(Counters::default());
    let stop = Arc::new(AtomicBool::new(false));
    let first = sample(root);
    let start = Instant::now();
    let handles = spawn_workers(plan, dir.as_ref().map(TestDir::fd), &counters, &stop);

    let mut seconds = Vec::new();
    let (mut prev_work, mut prev_sample, mut prev_t) = (Work::default(), first.clone(), 0.0);
    let deadline = start + plan.timeout;
    let interrupted = loop {
        let next_tick = start + Duration::from_secs(seconds.len() as u64 + 1);
        let until = next_tick.min(deadline);
        while Instant::now() < until {
            if interrupt.load(Ordering::Relaxed) || ended(&handles, plan, &counters) {
                break;
            }
            std::thread::sleep(
                until
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(20)),
            );
        }
        let interrupted = interrupt.load(Ordering::Relaxed);
        let t = start.elapsed().as_secs_f64();
        let (work, now) = (counters.read(), sample(root));
        let dt = t - prev_t;
        // A sliver of an interval (a stop right after a tick) would print wild rates.
        if dt >= 0.05 {
            let s = Second {
                t_s: t,
                cpu_ops_per_s: per_s(work.cpu_ops - prev_work.cpu_ops, dt),
                vm_touched_bytes_per_s: per_s(work.vm_bytes - prev_work.vm_bytes, dt),
                io_syncs_per_s: per_s(work.io_syncs - prev_work.io_syncs, dt),
                hdd_written_bytes_per_s: per_s(work.hdd_bytes - prev_work.hdd_bytes, dt),
                cpu: split(&prev_sample, &now),
                vmstat: vm_deltas(&prev_sample, &now),
            };
            on_second(&s);
            seconds.push(s);
            (prev_work, prev_sample, prev_t) = (work, now, t);
        }
        if interrupted || ended(&handles, plan, &counters) || Instant::now() >= deadline {
            break interrupted;
        }
    };
    stop.store(true, Ordering::Relaxed);
    let mut first_error = None;
    for h in handles {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(_) => {
                first_error.get_or_insert(WorkerError::Panicked);
            }
        }
    }
    let duration_s = start.elapsed().as_secs_f64();
    let last = sample(root);
    let dir_name = dir.as_ref().map(|d| d.path().display().to_string());
    drop(dir);
    if let Some(e) = first_error {
        return Err(e.into());
    }
    let work = counters.read();
    let report = StressReport {
        schema: SCHEMA,
        tool_version: env!("CARGO_PKG_VERSION"),
        host: Host::read(root),
        duration_s,
        workers: WorkersSummary {
            cpu: CpuWorkers {
                count: plan.cpu,
                load_pct: plan.cpu_load_pct,
                ops: work.cpu_ops,
                ops_per_s: per_s(work.cpu_ops, duration_s),
            },
            vm: VmWorkers {
                count: plan.vm,
                bytes_per_worker: plan.vm_bytes,
                keep: plan.vm_keep,
                passes: plan.vm_passes,
                touched_bytes: work.vm_bytes,
                touched_bytes_per_s: per_s(work.vm_bytes, duration_s),
            },
            io: IoWorkers {
                count: plan.io,
                syncs: work.io_syncs,
                syncs_per_s: per_s(work.io_syncs, duration_s),
            },
            hdd: HddWorkers {
                count: plan.hdd,
                bytes_per_worker: plan.hdd_bytes,
                dir: dir_name,
                written_bytes: work.hdd_bytes,
                written_bytes_per_s: per_s(work.hdd_bytes, duration_s),
            },
        },
        cpu: split(&first, &last),
        vmstat: vm_deltas(&first, &last),
        peak_rss_bytes: peak_rss(root),
        seconds,
        interrupted,
    };
    Ok(report)
}

/// Why a stress run stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum StressError {
    /// The hdd workers' directory could not be made.
    #[error("{0}")]
    TestDir(std::io::Error),
    /// A worker failed (the others were stopped).
    #[error(transparent)]
    Worker(#[from] WorkerError),
}

type Handle = std::thread::JoinHandle<Result<(), WorkerError>>;

/// True when the run must end before its timeout: a worker stopped without being told to
/// (it failed), or every memory worker finished its `--vm-passes`.
fn ended(handles: &[Handle], plan: &Plan, counters: &Counters) -> bool {
    let finished = handles.iter().filter(|h| h.is_finished()).count() as u64;
    let passed = counters.vm_done.load(Ordering::Relaxed);
    finished > passed || (plan.vm_passes.is_some() && plan.vm > 0 && passed == u64::from(plan.vm))
}

fn spawn_workers(
    plan: &Plan,
    dir: Option<Arc<std::os::fd::OwnedFd>>,
    counters: &Arc<Counters>,
    stop: &Arc<AtomicBool>,
) -> Vec<Handle> {
    let mut handles: Vec<Handle> = Vec::new();
    let spawn = |handles: &mut Vec<Handle>,
                 f: Box<dyn FnOnce() -> Result<(), WorkerError> + Send>| {
        handles.push(std::thread::spawn(f));
    };
    for _ in 0..plan.cpu {
        let (c, s, load) = (Arc::clone(counters), Arc::clone(stop), plan.cpu_load_pct);
        spawn(
            &mut handles,
            Box::new(move || {
                workers::cpu(load, &s, &c.cpu_ops);
                Ok(())
            }),
        );
    }
    for _ in 0..plan.vm {
        let (c, s) = (Arc::clone(counters), Arc::clone(stop));
        let (bytes, keep, passes) = (plan.vm_bytes, plan.vm_keep, plan.vm_passes);
        spawn(
            &mut handles,
            Box::new(move || {
                workers::vm(bytes, keep, passes, &s, &c.vm_bytes)?;
                c.vm_done.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }),
        );
    }
    for _ in 0..plan.io {
        let (c, s) = (Arc::clone(counters), Arc::clone(stop));
        spawn(
            &mut handles,
            Box::new(move || {
                workers::io(&s, &c.io_syncs);
                Ok(())
            }),
        );
    }
    if let Some(dir) = dir {
        for w in 0..plan.hdd as usize {
            let (c, s, d, bytes) = (
                Arc::clone(counters),
                Arc::clone(stop),
                Arc::clone(&dir),
                plan.hdd_bytes,
            );
            spawn(
                &mut handles,
                Box::new(move || workers::hdd(&d, w, bytes, &s, &c.hdd_bytes)),
            );
        }
    }
    handles
}

/// VmHWM of this process from /proc/self/status.
fn peak_rss(root: &SysRoot) -> Option<u64> {
    let text = std::fs::read_to_string(root.proc.join("self/status")).ok()?;
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}
