//! Totals since a start (iotop's `-a`): bytes read and written and CPU time per process and
//! per service, summed over every interval, exited processes included (their exit records).
//!
//! Used by `tacho top --accumulate` and by the screen's `a` key: keep one [`Accumulator`],
//! call [`Accumulator::add`] with each interval's two samples, and [`Accumulator::apply`] to
//! put the totals on the interval's [`TopSample`](super::TopSample); `Accumulator::new`
//! again restarts from zero.

use std::collections::HashMap;

use serde::Serialize;

use super::process::{self, SortKey};
use super::{ModelOptions, TopSample};
use crate::diagnose::sample::Sample;

/// One process's totals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AccumulatedProcess {
    /// Process id.
    pub pid: u32,
    /// Command name, invalid UTF-8 shown as U+FFFD.
    pub comm: String,
    /// The name's exact bytes in hex, only when they are not UTF-8 (see [`crate::text`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm_hex: Option<String>,
    /// Its service, when known.
    pub unit: Option<String>,
    /// Bytes fetched from storage since the start.
    pub read_bytes: u64,
    /// Bytes sent to storage since the start.
    pub write_bytes: u64,
    /// User CPU time, seconds.
    pub user_s: f64,
    /// System CPU time, seconds.
    pub system_s: f64,
    /// Time waiting for block I/O, seconds (0 while delay accounting is off).
    pub io_delay_s: f64,
    /// It has exited.
    pub exited: bool,
}

/// One service's totals (processes with no known service are summed under `-`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AccumulatedService {
    /// Unit, scope or container cgroup name.
    pub unit: String,
    /// Bytes fetched from storage.
    pub read_bytes: u64,
    /// Bytes sent to storage.
    pub write_bytes: u64,
    /// CPU time (user + system), seconds.
    pub cpu_s: f64,
    /// Processes that contributed.
    pub processes: usize,
}

/// The totals as shown: the top processes and services by the sort key.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Accumulated {
    /// When accumulation started, seconds since the Unix epoch.
    pub since_unix_s: f64,
    /// Processes, most first.
    pub processes: Vec<AccumulatedProcess>,
    /// Services, most first.
    pub services: Vec<AccumulatedService>,
}

/// Running totals; see the module docs.
#[derive(Debug, Clone, Default)]
pub struct Accumulator {
    since_unix_s: Option<f64>,
    /// By (pid, start ticks): pids are reused.
    processes: HashMap<(u32, u64), AccumulatedProcess>,
}

impl Accumulator {
    /// Empty totals; they start with the first interval added.
    pub fn new() -> Accumulator {
        Accumulator::default()
    }

    /// Adds what every process did between `a` and `b`.
    pub fn add(&mut self, a: &Sample, b: &Sample, opts: &ModelOptions) {
        self.since_unix_s.get_or_insert(a.unix_time_s);
        let secs = |ticks: u64| ticks as f64 / opts.ticks_per_s;
        for d in process::deltas(a, b, opts) {
            let (r, w) = (d.read_bytes.unwrap_or(0), d.write_bytes.unwrap_or(0));
            if r == 0 && w == 0 && d.utime + d.stime + d.blkio_ticks == 0 {
                continue;
            }
            let e = self
                .processes
                .entry((d.pid, d.start_ticks))
                .or_insert_with(|| AccumulatedProcess {
                    pid: d.pid,
                    comm: d.comm.clone(),
                    comm_hex: d.comm_hex.clone(),
                    unit: None,
                    read_bytes: 0,
                    write_bytes: 0,
                    user_s: 0.0,
                    system_s: 0.0,
                    io_delay_s: 0.0,
                    exited: false,
                });
            e.comm.clone_from(&d.comm);
            if d.unit.is_some() {
                e.unit.clone_from(&d.unit);
            }
            e.read_bytes = e.read_bytes.saturating_add(r);
            e.write_bytes = e.write_bytes.saturating_add(w);
            e.user_s += secs(d.utime);
            e.system_s += secs(d.stime);
            e.io_delay_s += secs(d.blkio_ticks);
            e.exited |= d.exited;
        }
    }

    /// The top `top` processes and services by `sort`.
    pub fn totals(&self, top: usize, sort: SortKey) -> Accumulated {
        let key = |io: u64, cpu: f64, delay: f64| match sort {
            SortKey::Io => io as f64,
            SortKey::Cpu => cpu,
            SortKey::Delay => delay,
        };
        let mut processes: Vec<AccumulatedProcess> = self.processes.values().cloned().collect();
        processes.sort_by(|x, y| {
            let kx = key(
                x.read_bytes + x.write_bytes,
                x.user_s + x.system_s,
                x.io_delay_s,
            );
            let ky = key(
                y.read_bytes + y.write_bytes,
                y.user_s + y.system_s,
                y.io_delay_s,
            );
            ky.total_cmp(&kx).then(x.pid.cmp(&y.pid))
        });
        let mut services: HashMap<String, AccumulatedService> = HashMap::new();
        for p in self.processes.values() {
            let unit = p.unit.clone().unwrap_or_else(|| "-".into());
            let s = services
                .entry(unit.clone())
                .or_insert_with(|| AccumulatedService {
                    unit,
                    read_bytes: 0,
                    write_bytes: 0,
                    cpu_s: 0.0,
                    processes: 0,
                });
            s.read_bytes = s.read_bytes.saturating_add(p.read_bytes);
            s.write_bytes = s.write_bytes.saturating_add(p.write_bytes);
            s.cpu_s += p.user_s + p.system_s;
            s.processes += 1;
        }
        let mut services: Vec<AccumulatedService> = services.into_values().collect();
        services.sort_by(|x, y| {
            key(y.read_bytes + y.write_bytes, y.cpu_s, 0.0)
                .total_cmp(&key(x.read_bytes + x.write_bytes, x.cpu_s, 0.0))
                .then(x.unit.cmp(&y.unit))
        });
        processes.truncate(top);
        services.truncate(top);
        Accumulated {
            since_unix_s: self.since_unix_s.unwrap_or(0.0),
            processes,
            services,
        }
    }

    /// Adds the interval `a`..`b` and puts the totals on its sample `s`.
    pub fn apply(&mut self, a: &Sample, b: &Sample, opts: &ModelOptions, s: &mut TopSample) {
        self.add(a, b, opts);
        s.accumulated = Some(self.totals(opts.top, opts.sort));
    }
}
