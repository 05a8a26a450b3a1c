//! Raw cumulative samples of everything `tacho top` shows, as the kernel reported them.
//!
//! A [`Sample`] holds counters exactly as read, and the moment they were read; rates are
//! computed later from two samples (`model`), never here. What could not be read for a
//! reason the admin should know (no PSI, no root for other users' /proc/PID/io, no io
//! controller on cgroup v2) is kept as a note beside the data, not turned into zeros.

pub mod conns;
pub mod details;
pub mod devices;
mod exits;
mod tasks;
pub mod waits;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::bpf::block::{BlockTracer, DevLatency, ProcIo};
use crate::kernel::blocked::{self, BlockedTask};
use crate::kernel::btrfs::{self, BtrfsFs};
use crate::kernel::cgroup::{self, CgroupIoScan};
use crate::kernel::diskstats::{self, DiskCounters};
use crate::kernel::limits::{self, Limits};
use crate::kernel::loadavg::{self, LoadAvg};
use crate::kernel::meminfo::{self, Meminfo, VmStat};
use crate::kernel::netdev::{self, NetCounters};
use crate::kernel::netlinkinfo::{self, LinkInfo};
use crate::kernel::pressure::{self, PressureAll};
use crate::kernel::process::{self, ProcessScan};
use crate::kernel::procfiles::ProcFiles;
use crate::kernel::stat::{self, KernelStat};
use crate::kernel::taskstats::{self, ExitListener, ExitedTask};
use crate::kernel::tc;
use crate::kernel::{Result, SysRoot};
use crate::net::capture::{CaptureError, DnsCapture};
use crate::net::dns::DnsCounts;
pub use details::ProcessDetail;
use devices::Devices;

/// Everything read at one moment. Serializable for the history store (`crate::history`):
/// `taken` is not stored (an `Instant` means nothing in another process); a reader rebuilds it
/// from `unix_time_s`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Sample {
    /// Monotonic time of the reading, for intervals.
    #[serde(skip, default = "Instant::now")]
    pub taken: Instant,
    /// Wall-clock time of the reading, seconds since the Unix epoch, for reports.
    pub unix_time_s: f64,
    /// Seconds since boot (CLOCK_BOOTTIME, the clock /proc/PID/stat start times count in) just
    /// before the process scan: a process missing from this sample was born after it exactly
    /// when its start time is later. /proc/stat's `btime` is whole seconds, which made a
    /// process born up to a second after a sample look older, and its first interval's bytes
    /// were lost (absent from records written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_clock_s: Option<f64>,
    /// /proc/stat: CPU ticks, context switches, run queue.
    pub stat: KernelStat,
    /// /proc/loadavg.
    pub loadavg: LoadAvg,
    /// /proc/meminfo.
    pub meminfo: Meminfo,
    /// /proc/vmstat counters.
    pub vmstat: VmStat,
    /// PSI of CPU, I/O and memory, each `None` where unavailable.
    pub pressure: PressureAll,
    /// /proc/diskstats, one entry per device.
    pub disks: Vec<DiskCounters>,
    /// Mounted btrfs filesystems, read every sample: one can be created on devices that
    /// are already known.
    pub btrfs: Vec<BtrfsFs>,
    pub processes: ProcessScan,
    pub cgroups: CgroupIoScan,
    /// Cgroups with a CPU, memory or I/O limit, and how often each bit (absent from records
    /// written before it was sampled).
    #[serde(default, skip_serializing_if = "Limits::is_empty")]
    pub limits: Limits,
    pub net: Vec<NetCounters>,
    /// Speed, duplex, overruns and carrier changes of the interfaces in `net`, from
    /// /sys/class/net (absent from records written before it was sampled).
    #[serde(default)]
    pub links: Vec<LinkInfo>,
    /// Processes that exited since the previous sample, with their final counters (per
    /// process: the records of its threads summed), from taskstats.
    pub exited: Vec<ExitedTask>,
    /// Why exits are not accounted (no root, no taskstats); `None` when they are.
    pub exits_unavailable: Option<String>,
    /// Times exit records were dropped since the previous sample (the kernel's buffer overran),
    /// so `exited` may miss some processes (absent from records written before it was kept).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub exit_overruns: u64,
    /// Established TCP connections and their owners (not kept in the history: a busy server
    /// has tens of thousands).
    #[serde(skip)]
    pub conns: conns::ConnScan,
    /// Block I/O per process, device and direction since the previous sample, traced with
    /// eBPF ([`Sampler::trace_block_io`]); kept in the history (absent from records written
    /// before it was), so a replay names writers exactly where the recorder could trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_io: Option<Vec<ProcIo>>,
    /// Why block I/O is not traced though it was asked for (no BPF, no BTF).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_io_unavailable: Option<String>,
    /// Per device (major, minor): queue and service time histograms since the previous
    /// sample, traced with eBPF; not kept in the history.
    #[serde(skip)]
    pub block_latency: Option<std::collections::HashMap<(u32, u32), DevLatency>>,
    /// DNS counted since the previous sample (`--dns`), not kept in the history.
    #[serde(skip)]
    pub dns: Option<DnsCounts>,
    /// Why DNS was asked for but is not counted (no root).
    #[serde(skip)]
    pub dns_unavailable: Option<String>,
    /// Who waited on what over the interval (`top --waits`, traced with eBPF): per process,
    /// time off the CPU by class; kept in the history, so a replay says the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits: Option<waits::WaitScan>,
    /// Why waits were asked for but are not traced (no root, no BPF).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits_unavailable: Option<String>,
    /// Threads in uninterruptible sleep and where they wait, read when /proc/stat counts
    /// tasks blocked on I/O (absent from records written before it was sampled).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<BlockedTask>,
    /// Cgroups, open devices and swap of the processes that did something since the
    /// previous sample (see [`details`]), by pid.
    pub details: HashMap<u32, ProcessDetail>,
}

/// Why the processes that exited between samples are not counted, for the sample's note.
#[derive(Debug, thiserror::Error)]
enum ExitsUnavailable {
    #[error("registering for taskstats needs root (CAP_NET_ADMIN)")]
    NotPermitted,
    #[error("taskstats: {0}")]
    Register(std::io::Error),
    /// Exit records describe this machine's tasks, never a fixture tree's.
    #[error("not this machine's /proc")]
    NotThisMachine,
}

/// Takes samples of one system; keeps what does not change between samples (device
/// descriptions, the cgroup2 mount, the delay-accounting switch).
#[derive(Debug)]
pub struct Sampler {
    root: SysRoot,
    devices: Devices,
    cgroup_mount: Option<PathBuf>,
    /// The cgroup v1 hierarchy with blkio, read when v2 has no io controller.
    blkio_v1: Option<PathBuf>,
    /// The cgroup hierarchies whose limits are read.
    hierarchies: Vec<limits::Mounted>,
    exits: std::result::Result<ExitListener, ExitsUnavailable>,
    /// Exit records of processes the last scan still saw, for the next sample.
    held_exits: Vec<ExitedTask>,
    details: details::Cache,
    /// /proc/PID/stat and io of the processes seen, kept open between samples.
    proc_files: ProcFiles,
    /// Owners of busy connections, kept while their sockets live.
    conn_tracker: conns::ConnTracker,
    /// The block I/O tracer, once asked for, or why it could not start.
    block: Option<std::result::Result<BlockTracer, crate::bpf::Refusal>>,
    /// The process scan from the tracer's task iterator, when it came with the tracer (else
    /// /proc's files, through `proc_files`); kept for the whole run.
    tasks: Option<tasks::TaskSource>,
    /// The DNS capture, once asked for ([`Sampler::capture_dns`]), or why it could not start.
    dns: Option<std::result::Result<DnsCapture, CaptureError>>,
    /// The off-CPU tracer, once asked for ([`Sampler::trace_waits`]), or why it could not
    /// start.
    waits: Option<std::result::Result<WaitTracker, String>>,
    /// `kernel.task_delayacct`, read once at start; `None` on kernels without the switch.
    pub delayacct: Option<bool>,
}

impl Sampler {
    pub fn new(root: SysRoot) -> Result<Sampler> {
        let cgroup_mount = cgroup::find_cgroup2(&root)?;
        let delayacct = process::read_task_delayacct(&root)?;
        let blkio_v1 = cgroup::find_blkio_v1(&root)?;
        // Exit records describe this machine's tasks: never mixed into a fixture tree.
        let exits = if root.proc == std::path::Path::new("/proc") {
            ExitListener::register(taskstats::configured_cpus()).map_err(|e| match e.kind() {
                std::io::ErrorKind::PermissionDenied => ExitsUnavailable::NotPermitted,
                _ => ExitsUnavailable::Register(e),
            })
        } else {
            Err(ExitsUnavailable::NotThisMachine)
        };
        Ok(Sampler {
            hierarchies: limits::hierarchies(&root),
            root,
            devices: Devices::new(),
            cgroup_mount,
            blkio_v1,
            exits,
            held_exits: Vec::new(),
            details: details::Cache::default(),
            proc_files: ProcFiles::default(),
            conn_tracker: conns::ConnTracker::default(),
            block: None,
            tasks: None,
            dns: None,
            waits: None,
            delayacct,
        })
    }

    /// Traces block I/O with eBPF from now on, so disk verdicts name the submitting processes
    /// exactly (root, BPF and kernel BTF; otherwise each sample says why not). The process
    /// scan then reads every task's counters from the tracer's task iterator where it loads
    /// (one read instead of two /proc files per process), and /proc's files otherwise.
    /// `keep`: take the tracer from the set kept loaded for the boot, or keep it for later
    /// runs (short runs gain most; a recorder running for days loads its own, so it never
    /// holds the set from them).
    pub fn trace_block_io(&mut self, keep: bool) {
        let block = BlockTracer::start(keep);
        // The iterator walks this machine's tasks by their kernel pids: only where /proc is
        // this machine's and shows those pids.
        if let Ok(tracer) = &block
            && self.root.proc == std::path::Path::new("/proc")
            && process::in_first_pid_namespace(&self.root)
        {
            self.tasks = tracer
                .task_iter()
                .ok()
                .map(|iter| tasks::TaskSource::new(iter, &self.root));
        }
        self.block = Some(block);
    }

    /// Traces who waits on what from now on (`top --waits`): root, BPF and kernel BTF;
    /// otherwise each sample says why not.
    pub fn trace_waits(&mut self) {
        self.waits = Some(start_waits());
    }

    /// Starts counting DNS on every interface from now on (root only; otherwise each sample
    /// says why not).
    pub fn capture_dns(&mut self) {
        self.dns = Some(DnsCapture::start());
    }

    /// Block devices seen in the latest sample, with their descriptions.
    pub fn devices(&self) -> &Devices {
        &self.devices
    }

    /// Reads everything once, now; a file that cannot be read or parsed is an error naming it.
    pub fn sample(&mut self) -> Result<Sample> {
        let root = &self.root;
        let taken = Instant::now();
        let unix_time_s = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        // Disks first and the slow process scan last: the device counters that iostat
        // comparisons need are then read closest to `taken`.
        let disks = diskstats::read_diskstats(root)?;
        // Peer groups only add a verdict; an unreadable /sys/fs/btrfs is not worth a sample.
        let btrfs = btrfs::read(root).unwrap_or_default();
        let stat = stat::read_stat(root)?;
        let loadavg = loadavg::read_loadavg(root)?;
        let meminfo = meminfo::read_meminfo(root)?;
        let vmstat = meminfo::read_vmstat(root)?;
        let pressure = pressure::read_pressure(root)?;
        let net = netdev::read_netdev(root)?;
        let mut links = netlinkinfo::read_links(root, net.iter().map(|n| n.name.as_str()));
        if root.proc == std::path::Path::new("/proc") {
            // Shapers only add a capacity where /sys has none or a wrong one; a dump that
            // fails (it needs no privilege) leaves the links as /sys describes them.
            if let Ok(shapers) = tc::root_shapers() {
                for l in &mut links {
                    l.shaper = l
                        .ifindex
                        .and_then(|i| shapers.get(&i))
                        .map(|s| (s.kind.clone(), s.bytes_per_s));
                }
            }
        }
        let mut cgroups = match &self.cgroup_mount {
            Some(dir) => cgroup::read_cgroup_io(dir)?,
            None => CgroupIoScan {
                cgroups: Vec::new(),
                unavailable: Some("no cgroup v2 filesystem is mounted".into()),
                source: String::new(),
            },
        };
        if cgroups.unavailable.is_some()
            && let Some(dir) = &self.blkio_v1
        {
            cgroups = cgroup::read_blkio_v1(dir)?;
        }
        let limits = limits::read_limits(&self.hierarchies);
        // The machine's own clock only: another root's start times count from its boot.
        let boot_clock_s = (root.proc == std::path::Path::new("/proc")).then(|| {
            let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
            t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
        });
        // Traced before the scan: a process that submitted I/O by now is either in the scan or
        // gone, and then its exit record is drained below, so each is named with its unit (a
        // `dd` born between the scan and the tracer's read was in neither, and unnamed).
        let (block_io, block_latency, block_io_unavailable) = match &mut self.block {
            None => (None, None, None),
            Some(Ok(tracer)) => {
                let traced = tracer.sample();
                (Some(traced.procs), Some(traced.latency), None)
            }
            Some(Err(why)) => (None, None, Some(why.to_string())),
        };
        let (waits, waits_unavailable) = match &mut self.waits {
            None => (None, None),
            Some(Ok(tracker)) => (Some(sample_waits(tracker, root)), None),
            Some(Err(why)) => (None, Some(why.clone())),
        };
        let processes = match &mut self.tasks {
            Some(source) => source.scan(root, &mut self.proc_files)?,
            None => process::read_processes(root, &mut self.proc_files)?,
        };
        // Drained after the scan, records of processes still in it held for the next sample
        // (see [`exits`]).
        let (exited, exit_overruns, exits_unavailable) = match &mut self.exits {
            Ok(l) => {
                let drained = l.drain();
                let mut tasks = std::mem::take(&mut self.held_exits);
                tasks.extend(drained.tasks);
                let live = processes.processes.iter().map(|p| p.pid).collect();
                let (now, held) = exits::split(tasks, &live);
                self.held_exits = held;
                (details::by_process(now), drained.overruns, None)
            }
            Err(why) => (Vec::new(), 0, Some(why.to_string())),
        };
        // Only when something waits: a scan of every thread costs more than the rest.
        let blocked = if stat.procs_blocked > 0 {
            match &self.tasks {
                Some(source) => source.blocked(root),
                None => blocked::read_blocked(root),
            }
        } else {
            Vec::new()
        };
        // Connections are this machine's (sock_diag answers for the caller's namespace).
        let conns = if root.proc == std::path::Path::new("/proc") {
            self.conn_tracker.scan(root)
        } else {
            conns::ConnScan::default()
        };
        let (dns, dns_unavailable) = match &self.dns {
            None => (None, None),
            Some(Ok(capture)) => (Some(capture.take()), None),
            Some(Err(why)) => (None, Some(why.to_string())),
        };
        let swap_used = meminfo
            .get("SwapTotal")
            .zip(meminfo.get("SwapFree"))
            .is_some_and(|(t, f)| t > f);
        let parents = exited.iter().map(|e| e.ppid).collect();
        let details = self.details.refresh(root, &processes, swap_used, &parents);
        devices::refresh(root, &mut self.devices, &disks);
        Ok(Sample {
            taken,
            unix_time_s,
            boot_clock_s,
            stat,
            loadavg,
            meminfo,
            vmstat,
            pressure,
            disks,
            btrfs,
            processes,
            cgroups,
            limits,
            net,
            links,
            exited,
            exits_unavailable,
            exit_overruns,
            conns,
            block_io,
            block_io_unavailable,
            block_latency,
            dns,
            dns_unavailable,
            waits,
            waits_unavailable,
            blocked,
            details,
        })
    }
}

#[cfg(all(feature = "bpf", feature = "profile"))]
use waits::WaitTracker;

/// Without both `bpf` and `profile` there is no tracer: never built.
#[cfg(not(all(feature = "bpf", feature = "profile")))]
#[derive(Debug)]
pub struct WaitTracker(std::convert::Infallible);

#[cfg(all(feature = "bpf", feature = "profile"))]
fn start_waits() -> std::result::Result<WaitTracker, String> {
    WaitTracker::start().map_err(|e| e.to_string())
}

#[cfg(not(all(feature = "bpf", feature = "profile")))]
fn start_waits() -> std::result::Result<WaitTracker, String> {
    #[cfg(feature = "bpf")]
    let why = "this build has no off-CPU classes (built without the `profile` feature)".into();
    #[cfg(not(feature = "bpf"))]
    let why = crate::bpf::missing().to_string();
    Err(why)
}

#[cfg(all(feature = "bpf", feature = "profile"))]
fn sample_waits(tracker: &mut WaitTracker, root: &SysRoot) -> waits::WaitScan {
    tracker.sample(root)
}

#[cfg(not(all(feature = "bpf", feature = "profile")))]
fn sample_waits(tracker: &mut WaitTracker, _: &SysRoot) -> waits::WaitScan {
    match tracker.0 {}
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_the_captured_tree() {
        let fix = "tests/fixtures/top/firecracker";
        let root = SysRoot::new(format!("{fix}/a/proc"), format!("{fix}/sys"));
        let mut sampler = Sampler::new(root).unwrap();
        assert_eq!(sampler.delayacct, Some(false));
        let s = sampler.sample().unwrap();
        assert_eq!(s.stat.cpus.len(), 2);
        assert!(s.pressure.io.is_some());
        assert!(s.processes.processes.iter().any(|p| p.comm == "dd"));
        // This host binds the io controller to cgroup v1, and the capture says so.
        assert!(s.cgroups.unavailable.unwrap().contains("io controller"));
        assert!(s.exits_unavailable.is_some());
        assert_eq!(sampler.devices()[&(254, 0)].name, "vda");
    }

    #[test]
    fn samples_this_machine() {
        let mut sampler = Sampler::new(SysRoot::real()).unwrap();
        let s = sampler.sample().unwrap();
        assert!(!s.disks.is_empty());
        assert!(s.meminfo.get("MemTotal").unwrap() > 0);
        assert!(
            s.processes
                .processes
                .iter()
                .any(|p| p.pid == std::process::id())
        );
        assert_eq!(sampler.devices().len(), s.disks.len());
    }
}
