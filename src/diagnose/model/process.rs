//! Per-process CPU and I/O rates (what pidstat -d -u and iotop show) and per-cgroup I/O per
//! device, between two samples.

use std::collections::HashMap;

use serde::Serialize;

use super::ModelOptions;
use crate::choice::Choice;
use crate::kernel::cgroup::CgroupIoScan;
use crate::kernel::diskstats::DiskCounters;
use crate::kernel::process::ProcessScan;

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
}

/// The processes shown, and sums over all of them.
pub struct Processes {
    /// The processes shown: the first `top` by the sort key.
    pub top: Vec<Process>,
    /// write_bytes of every process present in both samples.
    pub total_write_bytes: u64,
}

/// Rates of every process present in both scans; the `top` busiest by `opts.sort` are kept.
pub fn processes_between(
    a: &ProcessScan,
    b: &ProcessScan,
    dt: f64,
    opts: &ModelOptions,
) -> Processes {
    let before: HashMap<u32, &crate::kernel::process::ProcessCounters> =
        a.processes.iter().map(|p| (p.pid, p)).collect();
    let per_cpu_pct = |ticks: u64| ticks as f64 / opts.ticks_per_s / dt * 100.0;
    let mut total_write_bytes = 0u64;
    let mut all = Vec::new();
    for p in &b.processes {
        // Same pid and start time: the same process (pids are reused).
        let Some(q) = before
            .get(&p.pid)
            .filter(|q| q.start_ticks == p.start_ticks)
        else {
            continue;
        };
        let utime = p.utime.saturating_sub(q.utime);
        let stime = p.stime.saturating_sub(q.stime);
        let io = p.io.zip(q.io);
        let bytes = |f: fn(&crate::kernel::process::ProcessIo) -> u64| {
            io.map(|(now, then)| f(&now).saturating_sub(f(&then)))
        };
        let write = bytes(|i| i.write_bytes);
        total_write_bytes = total_write_bytes.saturating_add(write.unwrap_or(0));
        let per_s = |v: Option<u64>| v.map(|v| v as f64 / dt);
        all.push(Process {
            pid: p.pid,
            comm: p.comm.clone(),
            comm_hex: p.comm_hex.clone(),
            state: p.state.to_string(),
            cpu_pct: per_cpu_pct(utime + stime),
            user_pct: per_cpu_pct(utime),
            system_pct: per_cpu_pct(stime),
            read_bytes_per_s: per_s(bytes(|i| i.read_bytes)),
            write_bytes_per_s: per_s(write),
            cancelled_write_bytes_per_s: per_s(bytes(|i| i.cancelled_write_bytes)),
            io_delay_pct: (opts.delayacct != Some(false))
                .then(|| per_cpu_pct(p.blkio_ticks.saturating_sub(q.blkio_ticks)).min(100.0)),
        });
    }
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
