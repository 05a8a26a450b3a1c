//! Per-process CPU and I/O rates (what pidstat -d -u and iotop show) and per-cgroup I/O per
//! device, between two samples.

use std::collections::HashMap;

use serde::Serialize;

use super::ModelOptions;
use crate::choice::Choice;
use crate::diagnose::sample::Sample;
use crate::kernel::cgroup::CgroupIoScan;
use crate::kernel::diskstats::DiskCounters;
use crate::kernel::process::{ProcessCounters, ProcessIo};
use crate::kernel::procinfo::{self, OpenDevice};

/// What the process table is sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    /// Bytes read and written per second.
    Io,
    /// CPU time.
    Cpu,
    /// Time waiting for block I/O (delay accounting).
    Delay,
}

impl Choice for SortKey {
    const ALL: &'static [Self] = &[SortKey::Io, SortKey::Cpu, SortKey::Delay];

    fn word(self) -> &'static str {
        match self {
            SortKey::Io => "io",
            SortKey::Cpu => "cpu",
            SortKey::Delay => "delay",
        }
    }

    fn help(self) -> Option<&'static str> {
        Some(match self {
            SortKey::Io => "Bytes read and written per second",
            SortKey::Cpu => "CPU time",
            SortKey::Delay => "Time waiting for block I/O (delay accounting)",
        })
    }
}

/// One process's activity over the interval, pidstat- and iotop-style.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Process {
    /// Process id.
    pub pid: u32,
    /// The command name, invalid UTF-8 shown as U+FFFD.
    pub comm: String,
    /// The name's exact bytes in hex, only when they are not UTF-8 (see [`crate::text`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm_hex: Option<String>,
    /// State letter at the end of the interval (`R` running, `S` sleeping, `D` waiting, usually for
    /// I/O, …).
    pub state: String,
    /// CPU time as a share of one CPU (pidstat's %CPU: 200 is two CPUs busy).
    pub cpu_pct: f64,
    /// User-mode CPU time as a share of one CPU, in percent.
    pub user_pct: f64,
    /// Kernel-mode CPU time as a share of one CPU, in percent.
    pub system_pct: f64,
    /// Bytes fetched from storage per second (`null` when /proc/PID/io was unreadable).
    pub read_bytes_per_s: Option<f64>,
    /// Bytes sent to storage per second (page cache pages dirtied).
    pub write_bytes_per_s: Option<f64>,
    /// Written bytes cancelled by truncation or deletion, per second (pidstat's kB_ccwr/s).
    pub cancelled_write_bytes_per_s: Option<f64>,
    /// Share of the interval spent waiting for block I/O (iotop's IO%); `null` while
    /// delay accounting is off.
    pub io_delay_pct: Option<f64>,
    /// The service (systemd unit, scope or container cgroup) it runs in, when known.
    pub unit: Option<String>,
    /// It exited during the interval; its figures are its final ones (taskstats).
    pub exited: bool,
}

/// What one process did in the interval, before rates: the material of rows, culprits and
/// accumulated totals.
#[derive(Debug, Clone, Default)]
pub struct Delta {
    /// Process id.
    pub pid: u32,
    /// Start time (clock ticks after boot); 0 for a process that exited unseen.
    pub start_ticks: u64,
    /// Command name.
    pub comm: String,
    /// The name's bytes in hex when not UTF-8.
    pub comm_hex: Option<String>,
    /// State letter, `X` once exited.
    pub state: char,
    /// User CPU time, clock ticks.
    pub utime: u64,
    /// System CPU time, clock ticks.
    pub stime: u64,
    /// Time waiting for block I/O, clock ticks.
    pub blkio_ticks: u64,
    /// Bytes fetched from storage; `None` when /proc/PID/io was unreadable.
    pub read_bytes: Option<u64>,
    /// Bytes sent to storage.
    pub write_bytes: Option<u64>,
    /// Written bytes cancelled.
    pub cancelled_write_bytes: Option<u64>,
    /// Major page faults.
    pub major_faults: u64,
    /// RSS change, bytes (negative when it shrank).
    pub rss_growth_bytes: i64,
    /// VmSwap, when read.
    pub swap_bytes: Option<u64>,
    /// Its service (see [`Process::unit`]).
    pub unit: Option<String>,
    /// The cgroup whose I/O counters count its I/O.
    pub io_cgroup: Option<String>,
    /// Block devices of its open files.
    pub open_devices: Vec<OpenDevice>,
    /// It exited in the interval.
    pub exited: bool,
}

/// What every process did between two samples: those in both (same pid and start time), and
/// those that exited after the first (their exit records less what the first sample had
/// counted; threads that exited in earlier intervals make this an undercount, never more).
pub fn deltas(a: &Sample, b: &Sample, opts: &ModelOptions) -> Vec<Delta> {
    let before: HashMap<u32, &ProcessCounters> =
        a.processes.processes.iter().map(|p| (p.pid, p)).collect();
    // A parent's /proc/PID/io grows by each child's bytes when it reaps the child (the
    // kernel adds them, as it does CPU time to cutime): take the exited children's bytes
    // back off, so a shell is not blamed for its dd. Reaping a child that exited in an
    // earlier interval escapes this; that is rare (parents wait promptly).
    let mut reaped: HashMap<u32, (u64, u64, u64)> = HashMap::new();
    for x in &b.exited {
        let r = reaped.entry(x.ppid).or_default();
        r.0 = r.0.saturating_add(x.read_bytes);
        r.1 = r.1.saturating_add(x.write_bytes);
        r.2 = r.2.saturating_add(x.cancelled_write_bytes);
    }
    let mut all = Vec::new();
    for p in &b.processes.processes {
        // Same pid and start time: the same process (pids are reused). One born after the
        // first sample counts from nothing, so a burst that starts mid-interval is not lost.
        let born = ProcessCounters {
            io: p.io.map(|_| ProcessIo::default()),
            ..ProcessCounters::default()
        };
        let q = match before
            .get(&p.pid)
            .filter(|q| q.start_ticks == p.start_ticks)
        {
            Some(q) => *q,
            None if born_after(a, p, opts) => &born,
            None => continue,
        };
        let io = p.io.zip(q.io);
        let children = reaped.get(&p.pid).copied().unwrap_or_default();
        let bytes = |f: fn(&ProcessIo) -> u64, of_children: u64| {
            io.map(|(now, then)| f(&now).saturating_sub(f(&then)).saturating_sub(of_children))
        };
        let detail = b.details.get(&p.pid);
        let cgroups = detail.and_then(|d| d.cgroups.as_ref());
        all.push(Delta {
            pid: p.pid,
            start_ticks: p.start_ticks,
            comm: p.comm.clone(),
            comm_hex: p.comm_hex.clone(),
            state: p.state,
            utime: p.utime.saturating_sub(q.utime),
            stime: p.stime.saturating_sub(q.stime),
            blkio_ticks: p.blkio_ticks.saturating_sub(q.blkio_ticks),
            read_bytes: bytes(|i| i.read_bytes, children.0),
            write_bytes: bytes(|i| i.write_bytes, children.1),
            cancelled_write_bytes: bytes(|i| i.cancelled_write_bytes, children.2),
            major_faults: p.major_faults.saturating_sub(q.major_faults),
            rss_growth_bytes: (p.rss_pages as i64 - q.rss_pages as i64)
                .saturating_mul(opts.page_size as i64),
            swap_bytes: detail.and_then(|d| d.swap_bytes),
            unit: cgroups
                .and_then(|c| c.unit_path.as_deref())
                .and_then(procinfo::unit_of),
            io_cgroup: cgroups.and_then(|c| c.io_path.clone()),
            open_devices: detail.map(|d| d.open_devices.clone()).unwrap_or_default(),
            exited: false,
        });
    }
    let ticks = |us: u64| (us as f64 * opts.ticks_per_s / 1e6) as u64;
    for x in &b.exited {
        if b.processes.processes.iter().any(|p| p.pid == x.tgid) {
            // Only a thread of a live process: /proc/PID/io already counts it.
            continue;
        }
        let q = before
            .get(&x.tgid)
            .filter(|q| q.comm == x.comm && q.comm_hex == x.comm_hex);
        let qi = q.and_then(|q| q.io).unwrap_or_default();
        let detail = a.details.get(&x.tgid);
        // One born and gone within the interval was never read: a child starts in its
        // parent's cgroup, so the parent's (a shell loop's, a build's) names its unit.
        let cgroups = [
            a.details.get(&x.tgid),
            b.details.get(&x.ppid),
            a.details.get(&x.ppid),
        ]
        .into_iter()
        .flatten()
        .find_map(|d| d.cgroups.as_ref());
        all.push(Delta {
            pid: x.tgid,
            start_ticks: q.map_or(0, |q| q.start_ticks),
            comm: x.comm.clone(),
            comm_hex: x.comm_hex.clone(),
            state: 'X',
            utime: ticks(x.utime_us).saturating_sub(q.map_or(0, |q| q.utime)),
            stime: ticks(x.stime_us).saturating_sub(q.map_or(0, |q| q.stime)),
            blkio_ticks: 0,
            read_bytes: Some(x.read_bytes.saturating_sub(qi.read_bytes)),
            write_bytes: Some(x.write_bytes.saturating_sub(qi.write_bytes)),
            cancelled_write_bytes: Some(
                x.cancelled_write_bytes
                    .saturating_sub(qi.cancelled_write_bytes),
            ),
            major_faults: x
                .major_faults
                .saturating_sub(q.map_or(0, |q| q.major_faults)),
            rss_growth_bytes: 0,
            swap_bytes: None,
            unit: cgroups
                .and_then(|c| c.unit_path.as_deref())
                .and_then(procinfo::unit_of),
            io_cgroup: cgroups.and_then(|c| c.io_path.clone()),
            open_devices: detail.map(|d| d.open_devices.clone()).unwrap_or_default(),
            exited: true,
        });
    }
    for d in &mut all {
        d.bound();
    }
    all
}

/// More than one process can do in an interval: 2^40 bytes (a terabyte) or clock ticks (350
/// years at 100 Hz). A larger difference comes from a damaged or crafted sample (a replayed
/// history is whatever its file says), and is cut to this, so the sums over every process
/// stay far from overflowing.
pub const MAX_DELTA: u64 = 1 << 40;

impl Delta {
    fn bound(&mut self) {
        for v in [
            &mut self.utime,
            &mut self.stime,
            &mut self.blkio_ticks,
            &mut self.major_faults,
        ] {
            *v = (*v).min(MAX_DELTA);
        }
        for v in [
            &mut self.read_bytes,
            &mut self.write_bytes,
            &mut self.cancelled_write_bytes,
            &mut self.swap_bytes,
        ]
        .into_iter()
        .flatten()
        {
            *v = (*v).min(MAX_DELTA);
        }
        let max = MAX_DELTA as i64;
        self.rss_growth_bytes = self.rss_growth_bytes.clamp(-max, max);
    }
}

/// Whether `p` started after sample `a` scanned the processes. Start times are whole clock
/// ticks since boot, rounded down, so one born in the tick of the scan counts as newborn
/// (counting from nothing adds at most that tick of its life). Records written before the boot
/// clock was kept fall back to /proc/stat's boot time, whole seconds rounded down: a process
/// born less than a second after `a` may then be taken for older and skipped for one
/// interval, never the other way round, which would count a process's lifetime twice. Without
/// either, every new process counts from nothing, as the history summary always did.
fn born_after(a: &Sample, p: &ProcessCounters, opts: &ModelOptions) -> bool {
    let started = |ticks: u64| ticks as f64 / opts.ticks_per_s;
    if let Some(scan) = a.boot_clock_s {
        return started(p.start_ticks.saturating_add(1)) > scan;
    }
    a.stat
        .boot_time_s
        .is_none_or(|boot| boot as f64 + started(p.start_ticks) > a.unix_time_s)
}

/// The processes shown, and sums over all of them.
pub struct Processes {
    /// The rows shown: the busiest `top` by the sort key.
    pub top: Vec<Process>,
    /// write_bytes of every process whose /proc/PID/io was readable.
    pub total_write_bytes: u64,
}

/// Rows (rates) from the interval's [`deltas`], sorted and cut to `opts.top`.
pub fn processes_between(deltas: &[Delta], dt: f64, opts: &ModelOptions) -> Processes {
    let per_cpu_pct = |ticks: u64| ticks as f64 / opts.ticks_per_s / dt * 100.0;
    let per_s = |v: Option<u64>| v.map(|v| v as f64 / dt);
    let total_write_bytes = deltas
        .iter()
        .filter_map(|d| d.write_bytes)
        .fold(0u64, u64::saturating_add);
    let mut all: Vec<Process> = deltas
        .iter()
        .map(|d| Process {
            pid: d.pid,
            comm: d.comm.clone(),
            comm_hex: d.comm_hex.clone(),
            state: d.state.to_string(),
            cpu_pct: per_cpu_pct(d.utime + d.stime),
            user_pct: per_cpu_pct(d.utime),
            system_pct: per_cpu_pct(d.stime),
            read_bytes_per_s: per_s(d.read_bytes),
            write_bytes_per_s: per_s(d.write_bytes),
            cancelled_write_bytes_per_s: per_s(d.cancelled_write_bytes),
            io_delay_pct: (opts.delayacct != Some(false) && !d.exited)
                .then(|| per_cpu_pct(d.blkio_ticks).min(100.0)),
            unit: d.unit.clone(),
            exited: d.exited,
        })
        .collect();
    let io = |p: &Process| p.read_bytes_per_s.unwrap_or(0.0) + p.write_bytes_per_s.unwrap_or(0.0);
    let key = |p: &Process| match opts.sort {
        SortKey::Io => io(p),
        SortKey::Cpu => p.cpu_pct,
        SortKey::Delay => p.io_delay_pct.unwrap_or(0.0),
    };
    // Only processes that did something; ties broken by pid for stable output.
    all.retain(|p| io(p) > 0.0 || p.cpu_pct > 0.0 || p.io_delay_pct.unwrap_or(0.0) > 0.0);
    all.sort_by(|x, y| {
        key(y)
            .total_cmp(&key(x))
            .then(y.cpu_pct.total_cmp(&x.cpu_pct))
            .then(x.pid.cmp(&y.pid))
    });
    all.truncate(opts.top);
    Processes {
        top: all,
        total_write_bytes,
    }
}

/// One cgroup's I/O on one device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CgroupDevice {
    /// Kernel name of the device (from /proc/diskstats), or `MAJ:MIN` when unknown.
    pub device: String,
    /// Bytes read per second.
    pub rbytes_per_s: f64,
    /// Bytes written per second.
    pub wbytes_per_s: f64,
    /// Read requests per second.
    pub rios_per_s: f64,
    /// Write requests per second.
    pub wios_per_s: f64,
    /// Bytes discarded per second.
    pub dbytes_per_s: f64,
}

/// One cgroup's I/O over the interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cgroup {
    /// `/system.slice/nginx.service`.
    pub path: String,
    /// One entry per device it did I/O on.
    pub devices: Vec<CgroupDevice>,
}

/// Cgroups with I/O in the interval, busiest first, at most `top`.
pub fn cgroups_between(
    a: &CgroupIoScan,
    b: &CgroupIoScan,
    disks: &[DiskCounters],
    dt: f64,
    top: usize,
) -> Vec<Cgroup> {
    let name = |major: u32, minor: u32| {
        disks
            .iter()
            .find(|d| (d.major, d.minor) == (major, minor))
            .map(|d| d.name.clone())
            .unwrap_or_else(|| format!("{major}:{minor}"))
    };
    let rate = |x: u64, y: u64| y.saturating_sub(x) as f64 / dt;
    let mut out: Vec<(f64, Cgroup)> = Vec::new();
    for cg in &b.cgroups {
        let Some(prev) = a.cgroups.iter().find(|p| p.path == cg.path) else {
            continue;
        };
        let mut devices = Vec::new();
        for d in &cg.devices {
            let p = prev
                .devices
                .iter()
                .find(|p| (p.major, p.minor) == (d.major, d.minor))
                .cloned()
                .unwrap_or_default();
            let dev = CgroupDevice {
                device: name(d.major, d.minor),
                rbytes_per_s: rate(p.rbytes, d.rbytes),
                wbytes_per_s: rate(p.wbytes, d.wbytes),
                rios_per_s: rate(p.rios, d.rios),
                wios_per_s: rate(p.wios, d.wios),
                dbytes_per_s: rate(p.dbytes, d.dbytes),
            };
            if dev.rbytes_per_s + dev.wbytes_per_s + dev.dbytes_per_s > 0.0 {
                devices.push(dev);
            }
        }
        if devices.is_empty() {
            continue;
        }
        let total: f64 = devices
            .iter()
            .map(|d| d.rbytes_per_s + d.wbytes_per_s)
            .sum();
        devices.sort_by(|x, y| {
            (y.rbytes_per_s + y.wbytes_per_s).total_cmp(&(x.rbytes_per_s + x.wbytes_per_s))
        });
        out.push((
            total,
            Cgroup {
                path: cg.path.clone(),
                devices,
            },
        ));
    }
    out.sort_by(|x, y| y.0.total_cmp(&x.0));
    out.into_iter().take(top).map(|(_, c)| c).collect()
}
