//! Rates and figures from two raw samples: one [`TopSample`], the `tacho.top.v3` object.
//!
//! Everything here is computed from (previous, current, dt) with saturating or checked
//! deltas; nothing reads the kernel. Findings are added by `findings`, which needs history.

pub mod accumulate;
mod blame;
pub mod block_io;
pub mod conns;
pub mod cpu;
pub mod culprits;
pub mod disk;
pub(crate) mod dns;
pub mod finding;
mod fold;
pub mod groups;
pub mod limits;
mod loops;
pub mod memory;
pub mod net;
pub mod process;
pub mod waiters;
pub mod waits;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::diagnose::sample::Sample;
use crate::diagnose::sample::devices::Devices;
use crate::kernel::diskstats;
use crate::kernel::pressure::{Pressure, PressureLine};
pub use cpu::Cpu;
pub use disk::Disk;
use finding::Finding;
pub use memory::Memory;
pub use process::{Cgroup, Process, SortKey};

/// The `schema` of every `tacho top --json` line.
pub const SCHEMA: &str = "tacho.top.v3";

/// One interval, as printed, served and judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopSample {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// The tacho version that took the sample (Cargo package version).
    pub tool_version: &'static str,
    /// End of the interval, seconds since the Unix epoch.
    pub time_unix_s: f64,
    /// Length of the interval, in seconds.
    pub interval_s: f64,
    /// The one-line answer: the most severe finding, or that nothing stands out.
    pub verdict: String,
    /// What stands out in this interval, most severe first (filled by `findings`).
    pub findings: Vec<Finding>,
    /// What could not be measured and why (no PSI, no root, delay accounting off).
    pub notes: Vec<String>,
    /// CPU time split, all CPUs together and each.
    pub cpu: Cpu,
    /// Load averages, run queue and scheduler rates.
    pub load: Load,
    /// Memory as `free` shows it, and its swap and writeback rates.
    pub memory: Memory,
    /// Increase of THP, compaction, reclaim and swap counters over the interval.
    pub vm_events: BTreeMap<String, u64>,
    /// Pressure stall information per resource.
    pub psi: Psi,
    /// Every disk that has done I/O since boot, with its rates over the interval.
    pub disks: Vec<Disk>,
    /// md arrays, volume groups, dm tables and btrfs RAIDs, for hot-disk detection.
    pub groups: Vec<groups::Group>,
    /// The processes with the most of the `--sort` key, at most `--top` of them.
    pub processes: Vec<Process>,
    /// The cgroups with the most I/O, at most `--top` of them.
    pub cgroups: Vec<Cgroup>,
    /// Bytes the physical disks wrote against bytes processes sent to storage.
    pub write_amplification: WriteAmplification,
    /// Traffic per network interface, sorted by name.
    pub net: Vec<Net>,
    /// Capacity, utilisation, overruns and carrier changes of the interfaces in `net`.
    pub links: Vec<net::Link>,
    /// Totals since accumulation started (`--accumulate`, the screen's `a` key); `null`
    /// otherwise.
    pub accumulated: Option<accumulate::Accumulated>,
    /// TCP connections over the interval, grouped by peer, process and service; absent where
    /// sock_diag could not be read or none were established (replays take it from the
    /// record, which keeps this, not the raw connections).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connections: Option<conns::Conns>,
    /// DNS seen on the wire over the interval (`--dns`); absent without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dns: Option<dns::Dns>,
    /// Threads in uninterruptible sleep at the end of the interval and what they wait on,
    /// read when tasks were blocked on I/O; absent when none were.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub io_waiters: Vec<waiters::IoWaiter>,
    /// Block I/O per submitting process and device over the interval, most requests first:
    /// IOPS, bytes and the requests' p50/p99 whole time and queued part (eBPF, `tacho top` as
    /// root; at most `--top` rows); absent without the tracer or when none completed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub block_io_processes: Vec<block_io::BlockIoProcess>,
    /// The same per service (systemd unit) and device, its processes together.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub block_io_units: Vec<block_io::BlockIoUnit>,
    /// Who waited on what (`--waits`, traced with eBPF): per process, time off the CPU by
    /// class with what it waited on; absent when waits are not traced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waits: Option<waits::Waits>,
    /// Cgroup limits that held work back in the interval (CPU quota, memory, I/O); absent
    /// when none did.
    #[serde(skip_serializing_if = "limits::Throttling::is_empty")]
    pub throttling: limits::Throttling,
    /// Who is behind each resource's use, for the findings to name (they carry them).
    #[serde(skip)]
    pub culprits: culprits::Culprits,
}

/// Load averages and scheduler activity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Load {
    /// One-minute load average, from /proc/loadavg.
    pub load1: f64,
    /// Five-minute load average.
    pub load5: f64,
    /// Fifteen-minute load average.
    pub load15: f64,
    /// Threads running or waiting for a CPU (`procs_running`), the run queue.
    pub runnable: u64,
    /// Threads blocked on I/O (`procs_blocked`).
    pub blocked: u64,
    /// `None` when a counter went backwards between the samples (never within one boot; seen
    /// with restored or hand-made /proc captures).
    pub context_switches_per_s: Option<f64>,
    /// Interrupts serviced per second; `None` like `context_switches_per_s`.
    pub interrupts_per_s: Option<f64>,
    /// Processes and threads created per second; `None` like `context_switches_per_s`.
    pub forks_per_s: Option<f64>,
    /// CPUs with a `cpuN` line in /proc/stat (online CPUs).
    pub cpus: usize,
}

/// PSI per resource; `null` where the kernel does not provide it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Psi {
    /// CPU pressure.
    pub cpu: Option<PsiResource>,
    /// I/O pressure.
    pub io: Option<PsiResource>,
    /// Memory pressure.
    pub memory: Option<PsiResource>,
}

/// One resource's pressure over the interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PsiResource {
    /// At least one task stalled.
    pub some: PsiLine,
    /// All non-idle tasks stalled at once; `None` where the kernel has no `full` line (CPU before
    /// 5.13).
    pub full: Option<PsiLine>,
}

/// One `some` or `full` line: the kernel's averages and this interval's stall.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PsiLine {
    /// Percent of the last 10 s in stall, as the kernel averages it.
    pub avg10_pct: f64,
    /// Percent of the last 60 s.
    pub avg60_pct: f64,
    /// Percent of the last 300 s.
    pub avg300_pct: f64,
    /// Stall time during this interval.
    pub stall_ms: Option<f64>,
    /// Stall time as a share of the interval.
    pub stall_pct: Option<f64>,
}

/// Bytes the physical disks wrote vs bytes processes sent to storage, over the interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WriteAmplification {
    /// Bytes written by physical disks (not partitions, dm or md) in the interval.
    pub device_write_bytes: u64,
    /// Bytes processes caused to be written to storage in the interval (/proc/PID/io
    /// `write_bytes`).
    pub process_write_bytes: u64,
    /// device / process, from the processes whose /proc/PID/io was readable; `null` when
    /// they wrote nothing.
    pub ratio: Option<f64>,
    /// Processes whose bytes are in `process_write_bytes`, of all that were scanned: the
    /// ratio is over-stated by what the others wrote.
    pub processes_readable: usize,
    /// Processes scanned.
    pub processes_total: usize,
}

/// One network interface's rates over the interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Net {
    /// Interface name (`eth0`).
    pub name: String,
    /// Bytes received per second.
    pub rx_bytes_per_s: f64,
    /// Bytes sent per second.
    pub tx_bytes_per_s: f64,
    /// Packets received per second.
    pub rx_packets_per_s: f64,
    /// Packets sent per second.
    pub tx_packets_per_s: f64,
    /// Receive errors per second.
    pub rx_errors_per_s: f64,
    /// Transmit errors per second.
    pub tx_errors_per_s: f64,
    /// Received packets dropped per second.
    pub rx_drops_per_s: f64,
    /// Outgoing packets dropped per second.
    pub tx_drops_per_s: f64,
}

/// What the model needs beyond the two samples.
#[derive(Debug, Clone)]
pub struct ModelOptions {
    /// Processes and cgroups shown.
    pub top: usize,
    /// What the process list is sorted by.
    pub sort: SortKey,
    /// Clock ticks per second (USER_HZ) of /proc/stat and /proc/PID/stat times.
    pub ticks_per_s: f64,
    /// Bytes per memory page (for swap rates from page counts).
    pub page_size: u64,
    /// `kernel.task_delayacct`.
    pub delayacct: Option<bool>,
}

impl ModelOptions {
    /// This machine's tick rate and page size.
    pub fn for_this_host(top: usize, sort: SortKey, delayacct: Option<bool>) -> ModelOptions {
        // Both from the auxiliary vector the kernel gave the process, as sysconf reads them.
        let (ticks, page) = (
            rustix::param::clock_ticks_per_second(),
            rustix::param::page_size(),
        );
        ModelOptions {
            top,
            sort,
            ticks_per_s: if ticks > 0 { ticks as f64 } else { 100.0 },
            page_size: u64::try_from(page).ok().filter(|&p| p > 0).unwrap_or(4096),
            delayacct,
        }
    }
}

/// Builds the sample for the interval from `a` to `b`. Findings and the verdict are left
/// empty for `findings` to fill.
pub fn between(a: &Sample, b: &Sample, devices: &Devices, opts: &ModelOptions) -> TopSample {
    let dt = b
        .taken
        .saturating_duration_since(a.taken)
        .as_secs_f64()
        .max(1e-3);
    let mut notes = Vec::new();

    let groups = groups::groups(devices, &b.btrfs);
    let membership = groups::membership(&groups);
    let mut disks = Vec::new();
    for after in b.disks.iter().filter(|d| disk::ever_used(d)) {
        let (Some(before), Some(info)) = (
            diskstats::find(&a.disks, after.major, after.minor),
            devices.get(&(after.major, after.minor)),
        ) else {
            continue;
        };
        let group = membership.get(&after.name).cloned();
        let mut disk = disk::disk_between(before, after, info, group, dt);
        if let Some(lat) = b
            .block_latency
            .as_ref()
            .and_then(|l| l.get(&(after.major, after.minor)))
        {
            disk.set_latency(lat);
        }
        disks.push(disk);
    }
    let device_write_bytes: u64 = disks
        .iter()
        .filter(|d| {
            devices
                .values()
                .any(|i| i.name == d.device.name && i.is_physical_disk())
        })
        .filter_map(|d| d.write_bytes)
        .sum();

    let deltas = process::deltas(a, b, opts);
    let procs = process::processes_between(&deltas, dt, opts);
    if let Some(note) = io_denied_note(b) {
        notes.push(note);
    }
    if b.exit_overruns > 0 {
        notes.push(format!(
            "some exit records were lost ({} overruns of the kernel's buffer): processes that \
             exited in this interval may be missing or undercounted",
            b.exit_overruns
        ));
    }
    if let Some(why) = &b.exits_unavailable {
        notes.push(format!(
            "processes that exit between samples are not counted: {why}"
        ));
    }
    if let Some(why) = &b.conns.unavailable {
        notes.push(format!("no TCP connections: {why}"));
    }
    if b.conns.owners_denied > 0 {
        notes.push(format!(
            "the processes of some connections are unknown: {} processes' open files could \
             not be read (another user's process needs root)",
            b.conns.owners_denied
        ));
    }
    if let Some(why) = &b.block_io_unavailable {
        notes.push(format!(
            "disk culprits come from cgroup counters and /proc, not per-I/O tracing: {why}"
        ));
    }
    if let Some(why) = &b.waits_unavailable {
        notes.push(format!(
            "waits are not measured (who waits on what needs the off-CPU tracer): {why}; \
             /proc shows only the tasks blocked on I/O"
        ));
    }
    if let Some(lost) = b.waits.as_ref().map(|w| w.dropped).filter(|&n| n > 0) {
        notes.push(format!(
            "waits: {lost} more processes waited in this interval than the {} kept",
            crate::diagnose::sample::waits::MAX_PROCS
        ));
    }
    if let Some(why) = &b.dns_unavailable {
        notes.push(format!("no DNS figures: {why}"));
    }
    if opts.delayacct == Some(false) {
        notes.push(
            "I/O delay per process needs delay accounting: sysctl -w kernel.task_delayacct=1"
                .into(),
        );
    }
    if let Some(why) = &b.cgroups.unavailable {
        notes.push(format!("per-cgroup I/O unavailable: {why}"));
    }
    notes.extend(
        b.pressure
            .unavailable
            .iter()
            .map(|e| format!("PSI unavailable: {e}")),
    );

    let write_amplification = WriteAmplification {
        device_write_bytes,
        process_write_bytes: procs.total_write_bytes,
        ratio: (procs.total_write_bytes > 0)
            .then(|| device_write_bytes as f64 / procs.total_write_bytes as f64),
        processes_readable: b.processes.processes.len() - b.processes.io_denied,
        processes_total: b.processes.processes.len(),
    };
    let mut culprits = culprits::culprits(a, b, &deltas, &disks, devices, dt, opts.ticks_per_s);
    let (mut block_io_processes, mut block_io_units) = match &b.block_io {
        Some(traced) => block_io::rows(traced, &deltas, (a, b), devices, dt),
        None => (Vec::new(), Vec::new()),
    };
    block_io::annotate(&mut culprits.disks, &block_io_processes);
    block_io_processes.truncate(opts.top);
    block_io_units.truncate(opts.top);
    let throttling = limits::throttling(a, b, &deltas, dt, |major, minor| {
        devices.get(&(major, minor)).map(|i| i.name.clone())
    });

    let mut memory = memory::memory_of(&b.meminfo);
    let vm_events = memory::vm_events(&a.vmstat, &b.vmstat);
    let page_rate = |k: &str| {
        vm_events
            .get(k)
            .map(|&p| p.saturating_mul(opts.page_size) as f64 / dt)
    };
    memory.swap_in_bytes_per_s = page_rate("pswpin");
    memory.swap_out_bytes_per_s = page_rate("pswpout");

    let mut net: Vec<Net> = Vec::new();
    for n in &b.net {
        let Some(p) = a.net.iter().find(|p| p.name == n.name) else {
            continue;
        };
        // A counter that went backwards (the interface was re-created or its driver reset
        // it) gives no rate for this interval, not a rate of zero.
        let rate = |x: u64, y: u64| counter_rate(x, y, dt);
        let rates = (|| {
            Some(Net {
                name: n.name.clone(),
                rx_bytes_per_s: rate(p.rx_bytes, n.rx_bytes)?,
                tx_bytes_per_s: rate(p.tx_bytes, n.tx_bytes)?,
                rx_packets_per_s: rate(p.rx_packets, n.rx_packets)?,
                tx_packets_per_s: rate(p.tx_packets, n.tx_packets)?,
                rx_errors_per_s: rate(p.rx_errors, n.rx_errors)?,
                tx_errors_per_s: rate(p.tx_errors, n.tx_errors)?,
                rx_drops_per_s: rate(p.rx_drops, n.rx_drops)?,
                tx_drops_per_s: rate(p.tx_drops, n.tx_drops)?,
            })
        })();
        match rates {
            Some(rates) => net.push(rates),
            None => notes.push(format!(
                "{}: network counters went backwards (interface reset); no rates this interval",
                n.name
            )),
        }
    }
    net.sort_by(|x, y| x.name.cmp(&y.name));

    let psi_resource = |x: &Option<Pressure>, y: &Option<Pressure>| {
        let (x, y) = (x.as_ref()?, y.as_ref()?);
        let line = |p: Option<&PressureLine>, c: &PressureLine| {
            let stall_us = p.and_then(|p| c.total_us.checked_sub(p.total_us));
            PsiLine {
                avg10_pct: c.avg10,
                avg60_pct: c.avg60,
                avg300_pct: c.avg300,
                stall_ms: stall_us.map(|us| us as f64 / 1000.0),
                stall_pct: stall_us.map(|us| (us as f64 / 1e6 / dt * 100.0).min(100.0)),
            }
        };
        Some(PsiResource {
            some: line(Some(&x.some), &y.some),
            full: y.full.as_ref().map(|f| line(x.full.as_ref(), f)),
        })
    };

    TopSample {
        schema: SCHEMA,
        tool_version: env!("CARGO_PKG_VERSION"),
        time_unix_s: b.unix_time_s,
        interval_s: dt,
        verdict: String::new(),
        findings: Vec::new(),
        notes,
        cpu: cpu::cpu_between(&a.stat, &b.stat),
        load: Load {
            load1: b.loadavg.load1,
            load5: b.loadavg.load5,
            load15: b.loadavg.load15,
            runnable: b.stat.procs_running,
            blocked: b.stat.procs_blocked,
            context_switches_per_s: counter_rate(
                a.stat.context_switches,
                b.stat.context_switches,
                dt,
            ),
            interrupts_per_s: counter_rate(a.stat.interrupts, b.stat.interrupts, dt),
            forks_per_s: counter_rate(a.stat.forks, b.stat.forks, dt),
            cpus: b.stat.cpus.len(),
        },
        memory,
        vm_events,
        psi: Psi {
            cpu: psi_resource(&a.pressure.cpu, &b.pressure.cpu),
            io: psi_resource(&a.pressure.io, &b.pressure.io),
            memory: psi_resource(&a.pressure.memory, &b.pressure.memory),
        },
        cgroups: process::cgroups_between(&a.cgroups, &b.cgroups, &b.disks, dt, opts.top),
        disks,
        groups,
        processes: procs.top,
        write_amplification,
        links: net::links(&a.links, &b.links, &net, dt),
        net,
        accumulated: None,
        connections: conns::between(a, b, dt, opts.top),
        dns: b.dns.as_ref().map(|c| dns::between(c, dt)),
        io_waiters: waiters::waiters(b),
        block_io_processes,
        block_io_units,
        waits: waits::waits(b, &deltas, dt),
        throttling,
        culprits,
    }
}

/// Who could not be read and why, in words: as root, only tasks the kernel will not let even
/// root ptrace (seen for pid 1 on this project's VMs); as another user, other users'
/// processes.
fn io_denied_note(b: &Sample) -> Option<String> {
    let pids = &b.processes.io_denied_pids;
    if pids.is_empty() {
        return None;
    }
    let name = |pid: &u32| {
        let comm = b
            .processes
            .processes
            .iter()
            .find(|p| p.pid == *pid)
            .map_or("?", |p| p.comm.as_str());
        format!("{comm} (pid {pid})")
    };
    let mut named: Vec<String> = pids.iter().take(5).map(name).collect();
    if pids.len() > 5 {
        named.push(format!("and {} more", pids.len() - 5));
    }
    let root = rustix::process::geteuid().is_root();
    let why = if root {
        "the kernel refuses it even to root (its ptrace access check fails, as for a task in another user namespace or one marked undumpable); a fact of this kernel, not of tacho's rights"
    } else {
        "another user's process: run as root to read it"
    };
    Some(format!(
        "/proc/PID/io unreadable for {}: {why}; their I/O is left out of the table and of write amplification",
        named.join(", ")
    ))
}

#[cfg(test)]
pub(crate) mod tests;

/// The per-second rate of a counter between two readings `dt` seconds apart; `None` when it
/// went backwards (reset or re-created), never a rate of zero.
fn counter_rate(before: u64, after: u64, dt: f64) -> Option<f64> {
    after.checked_sub(before).map(|d| d as f64 / dt)
}
