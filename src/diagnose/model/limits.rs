//! Cgroup limits that bit during the interval: CPU quota throttling, memory limits reached or
//! reclaimed under, I/O held at a limit; each with the cgroup, its unit, the file that shows
//! it, and the processes in it.

use serde::Serialize;

use super::blame::{Attribution, Culprit};
use super::process::Delta;
use crate::diagnose::sample::Sample;
use crate::kernel::cgroup::CgroupDeviceIo;
use crate::kernel::limits::{CpuQuota, Hierarchy, IoLimit, MemoryLimit, Place};
use crate::kernel::procinfo::unit_of;
use crate::words::words;

/// Processes named per limited cgroup.
const MAX_CULPRITS: usize = 3;
/// An I/O rate at this share of its limit or above is held at the limit.
const AT_LIMIT: f64 = 0.9;

/// The limits that bit in one interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Throttling {
    /// Cgroups throttled by their CPU quota.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cpu: Vec<CpuThrottled>,
    /// Cgroups that reached a memory limit or were reclaimed to stay under one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<MemoryLimited>,
    /// Cgroups whose I/O on a device ran at a limit.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub io: Vec<IoLimited>,
}

impl Throttling {
    /// Nothing bit (the JSON then has no `throttling`).
    pub fn is_empty(&self) -> bool {
        self.cpu.is_empty() && self.memory.is_empty() && self.io.is_empty()
    }
}

/// Which cgroup, as findings name it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Limited {
    /// Path below the hierarchy's root (`/system.slice/nginx.service`).
    pub cgroup: String,
    /// The unit or container it names (`nginx.service`).
    pub unit: Option<String>,
    /// The cgroup interface.
    pub hierarchy: Hierarchy,
    /// The file whose counters show it (`/sys/fs/cgroup/cpu/…/cpu.stat`).
    pub evidence: String,
    /// The processes in it, busiest first (from its `cgroup.procs`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub culprits: Vec<Culprit>,
}

/// A cgroup its CPU quota held back.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuThrottled {
    /// The cgroup.
    #[serde(flatten)]
    pub who: Limited,
    /// The quota as a share of one CPU (systemd's `CPUQuota=`), percent.
    pub quota_pct: f64,
    /// CPU time allowed per period, microseconds.
    pub quota_us: u64,
    /// The period, microseconds.
    pub period_us: u64,
    /// Periods in the interval in which it had work.
    pub periods: u64,
    /// Of them, periods in which it used its quota up and was stopped.
    pub throttled_periods: u64,
    /// `throttled_periods` as a share of `periods`, percent.
    pub throttled_pct: f64,
    /// Time its tasks were stopped in the interval, seconds (summed over CPUs).
    pub throttled_s: f64,
}

/// A cgroup that met its memory limit in the interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryLimited {
    /// The cgroup.
    #[serde(flatten)]
    pub who: Limited,
    /// Its hard limit, bytes.
    pub max_bytes: Option<u64>,
    /// Its throttling limit (v2 memory.high), bytes.
    pub high_bytes: Option<u64>,
    /// Memory in use at the end of the interval.
    pub current_bytes: Option<u64>,
    /// Times reclaim was forced to keep it under memory.high (v2).
    pub high_events: Option<u64>,
    /// Times it reached memory.max (v2).
    pub max_events: Option<u64>,
    /// Processes the OOM killer killed in it (v2).
    pub oom_kills: Option<u64>,
    /// Times its usage hit the limit (v1 memory.failcnt).
    pub failcnt: Option<u64>,
    /// Share of the interval its tasks stalled on memory (v2 memory.pressure), percent.
    pub stall_pct: Option<f64>,
}

words! {
    /// Which of a device's I/O limits.
    pub enum IoLimitKind {
        /// Bytes read per second.
        Rbps = "rbps",
        /// Bytes written per second.
        Wbps = "wbps",
        /// Reads per second.
        Riops = "riops",
        /// Writes per second.
        Wiops = "wiops",
    }
}

/// A cgroup whose I/O on a device ran at one of its limits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IoLimited {
    /// The cgroup.
    #[serde(flatten)]
    pub who: Limited,
    /// Device number, `MAJ:MIN`.
    pub device: String,
    /// The device's kernel name, where known.
    pub device_name: Option<String>,
    /// Which limit.
    pub limit: IoLimitKind,
    /// The limit, per second.
    pub limit_per_s: u64,
    /// The cgroup's rate in the interval, per second.
    pub rate_per_s: f64,
}

/// The limits that bit between `a` and `b`; `device_name` names a device number.
pub fn throttling(
    a: &Sample,
    b: &Sample,
    deltas: &[Delta],
    dt: f64,
    device_name: impl Fn(u32, u32) -> Option<String>,
) -> Throttling {
    let mut out = Throttling::default();
    for q in &b.limits.cpu {
        let Some(p) = a.limits.cpu.iter().find(|p| p.place.dir == q.place.dir) else {
            continue;
        };
        if let Some(t) = cpu(p, q, deltas) {
            out.cpu.push(t);
        }
    }
    for l in &b.limits.memory {
        let Some(p) = a.limits.memory.iter().find(|p| p.place.dir == l.place.dir) else {
            continue;
        };
        if let Some(m) = memory(p, l, deltas, dt) {
            out.memory.push(m);
        }
    }
    for l in &b.limits.io {
        let Some(p) = a.limits.io.iter().find(|p| p.place.dir == l.place.dir) else {
            continue;
        };
        out.io.extend(io(p, l, deltas, dt, &device_name));
    }
    out
}

fn limited(place: &Place, file: &str, culprits: Vec<Culprit>) -> Limited {
    Limited {
        cgroup: place.path.clone(),
        unit: unit_of(&place.path),
        hierarchy: place.hierarchy,
        evidence: format!("{}/{file}", place.dir),
        culprits,
    }
}

/// The processes of `place` that did something by `weight`, heaviest first, each with its
/// share of the cgroup's total.
fn members(place: &Place, deltas: &[Delta], weight: fn(&Delta) -> u64) -> Vec<Culprit> {
    let mut inside: Vec<&Delta> = deltas
        .iter()
        .filter(|d| place.pids.contains(&d.pid) && weight(d) > 0)
        .collect();
    inside.sort_by_key(|d| std::cmp::Reverse(weight(d)));
    let total: u64 = inside.iter().map(|d| weight(d)).sum();
    let source = format!("{}/cgroup.procs", place.dir);
    inside
        .into_iter()
        .take(MAX_CULPRITS)
        .map(|d| {
            Culprit::of(
                d,
                weight(d) as f64 * 100.0 / total.max(1) as f64,
                Attribution::Exact {
                    source: source.clone(),
                },
            )
        })
        .collect()
}

fn cpu_time(d: &Delta) -> u64 {
    d.utime + d.stime
}

fn cpu(a: &CpuQuota, b: &CpuQuota, deltas: &[Delta]) -> Option<CpuThrottled> {
    let periods = b.nr_periods.checked_sub(a.nr_periods)?;
    let throttled = b.nr_throttled.checked_sub(a.nr_throttled)?;
    if throttled == 0 || periods == 0 {
        return None;
    }
    Some(CpuThrottled {
        who: limited(&b.place, "cpu.stat", members(&b.place, deltas, cpu_time)),
        quota_pct: b.quota_us as f64 * 100.0 / b.period_us.max(1) as f64,
        quota_us: b.quota_us,
        period_us: b.period_us,
        periods,
        throttled_periods: throttled,
        throttled_pct: (throttled as f64 * 100.0 / periods as f64).min(100.0),
        throttled_s: b.throttled_us.saturating_sub(a.throttled_us) as f64 / 1e6,
    })
}

fn memory(a: &MemoryLimit, b: &MemoryLimit, deltas: &[Delta], dt: f64) -> Option<MemoryLimited> {
    let delta = |x: Option<u64>, y: Option<u64>| y?.checked_sub(x?);
    let high_events = delta(a.high_events, b.high_events);
    let max_events = delta(a.max_events, b.max_events);
    let oom_kills = delta(a.oom_kills, b.oom_kills);
    let failcnt = delta(a.failcnt, b.failcnt);
    let bit = [high_events, max_events, oom_kills, failcnt]
        .iter()
        .any(|n| n.is_some_and(|n| n > 0));
    if !bit {
        return None;
    }
    let file = match b.place.hierarchy {
        Hierarchy::V1 => "memory.failcnt",
        Hierarchy::V2 => "memory.events",
    };
    let faults_and_cpu = |d: &Delta| d.major_faults + d.utime + d.stime;
    Some(MemoryLimited {
        who: limited(&b.place, file, members(&b.place, deltas, faults_and_cpu)),
        max_bytes: b.max_bytes,
        high_bytes: b.high_bytes,
        current_bytes: b.current_bytes,
        high_events,
        max_events,
        oom_kills,
        failcnt,
        stall_pct: delta(a.stall_us, b.stall_us)
            .map(|us| (us as f64 / 1e6 / dt * 100.0).min(100.0)),
    })
}

fn io(
    a: &IoLimit,
    b: &IoLimit,
    deltas: &[Delta],
    dt: f64,
    device_name: &impl Fn(u32, u32) -> Option<String>,
) -> Vec<IoLimited> {
    let file = match b.place.hierarchy {
        Hierarchy::V1 => "blkio.throttle.io_service_bytes",
        Hierarchy::V2 => "io.stat",
    };
    let mut out = Vec::new();
    for lim in &b.limits {
        let find = |c: &[CgroupDeviceIo]| {
            c.iter()
                .find(|d| (d.major, d.minor) == (lim.major, lim.minor))
                .cloned()
        };
        let (Some(x), Some(y)) = (find(&a.counters), find(&b.counters)) else {
            continue;
        };
        let checks = [
            (IoLimitKind::Rbps, lim.rbps, x.rbytes, y.rbytes),
            (IoLimitKind::Wbps, lim.wbps, x.wbytes, y.wbytes),
            (IoLimitKind::Riops, lim.riops, x.rios, y.rios),
            (IoLimitKind::Wiops, lim.wiops, x.wios, y.wios),
        ];
        // The limit nearest to being exceeded holds the cgroup back; one entry per device.
        let worst = checks
            .into_iter()
            .filter_map(|(kind, limit, before, after)| {
                let limit = limit.filter(|&l| l > 0)?;
                let rate = after.checked_sub(before)? as f64 / dt;
                Some((kind, limit, rate, rate / limit as f64))
            })
            .filter(|c| c.3 >= AT_LIMIT)
            .max_by(|p, q| p.3.total_cmp(&q.3));
        let Some((kind, limit, rate, _)) = worst else {
            continue;
        };
        let io_bytes = |d: &Delta| d.read_bytes.unwrap_or(0) + d.write_bytes.unwrap_or(0);
        out.push(IoLimited {
            who: limited(&b.place, file, members(&b.place, deltas, io_bytes)),
            device: format!("{}:{}", lim.major, lim.minor),
            device_name: device_name(lim.major, lim.minor),
            limit: kind,
            limit_per_s: limit,
            rate_per_s: rate,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::limits::DeviceLimit;

    fn place(h: Hierarchy) -> Place {
        Place {
            hierarchy: h,
            dir: "/sys/fs/cgroup/system.slice/nginx.service".into(),
            path: "/system.slice/nginx.service".into(),
            pids: vec![],
        }
    }

    fn quota(periods: u64, throttled: u64, us: u64) -> CpuQuota {
        CpuQuota {
            place: place(Hierarchy::V2),
            quota_us: 50000,
            period_us: 100000,
            nr_periods: periods,
            nr_throttled: throttled,
            throttled_us: us,
        }
    }

    #[test]
    fn cpu_throttling_over_the_interval() {
        let t = cpu(&quota(100, 10, 0), &quota(150, 29, 950_000), &[]).unwrap();
        assert_eq!((t.periods, t.throttled_periods), (50, 19));
        assert_eq!((t.quota_pct, t.throttled_pct), (50.0, 38.0));
        assert_eq!(t.throttled_s, 0.95);
        assert_eq!(t.who.unit.as_deref(), Some("nginx.service"));
        assert_eq!(
            t.who.evidence,
            "/sys/fs/cgroup/system.slice/nginx.service/cpu.stat"
        );
        // Not throttled in the interval, or counters reset: nothing.
        assert!(cpu(&quota(100, 10, 0), &quota(150, 10, 0), &[]).is_none());
        assert!(cpu(&quota(100, 10, 0), &quota(5, 1, 0), &[]).is_none());
    }

    fn memory_limit(h: Hierarchy, high: u64, failcnt: u64) -> MemoryLimit {
        MemoryLimit {
            place: place(h),
            max_bytes: Some(1 << 30),
            high_bytes: Some(512 << 20),
            current_bytes: Some(500 << 20),
            high_events: (h == Hierarchy::V2).then_some(high),
            max_events: (h == Hierarchy::V2).then_some(0),
            oom_kills: (h == Hierarchy::V2).then_some(0),
            failcnt: (h == Hierarchy::V1).then_some(failcnt),
            stall_us: (h == Hierarchy::V2).then_some(high * 1000),
        }
    }

    #[test]
    fn memory_events_and_failures_over_the_interval() {
        let v2 = memory(
            &memory_limit(Hierarchy::V2, 3, 0),
            &memory_limit(Hierarchy::V2, 20, 0),
            &[],
            1.0,
        )
        .unwrap();
        assert_eq!((v2.high_events, v2.max_events), (Some(17), Some(0)));
        assert_eq!(v2.stall_pct.map(|p| (p * 10.0).round()), Some(17.0));
        let v1 = memory(
            &memory_limit(Hierarchy::V1, 0, 100),
            &memory_limit(Hierarchy::V1, 0, 130),
            &[],
            1.0,
        )
        .unwrap();
        assert_eq!((v1.failcnt, v1.stall_pct), (Some(30), None));
        assert!(v1.who.evidence.ends_with("/memory.failcnt"));
        let same = memory_limit(Hierarchy::V1, 0, 100);
        assert!(memory(&same, &same, &[], 1.0).is_none());
    }

    #[test]
    fn io_at_its_limit() {
        let at = |wbytes: u64, wios: u64| IoLimit {
            place: place(Hierarchy::V2),
            limits: vec![DeviceLimit {
                major: 8,
                minor: 0,
                wbps: Some(10 << 20),
                wiops: Some(1000),
                ..DeviceLimit::default()
            }],
            counters: vec![CgroupDeviceIo {
                major: 8,
                minor: 0,
                wbytes,
                wios,
                ..CgroupDeviceIo::default()
            }],
        };
        let name = |_, _| Some("sda".to_string());
        let held = io(&at(0, 0), &at(20 << 20, 100), &[], 2.0, &name);
        assert_eq!(held.len(), 1);
        assert_eq!(
            (held[0].limit, held[0].limit_per_s, held[0].rate_per_s),
            (IoLimitKind::Wbps, 10 << 20, (10 << 20) as f64)
        );
        assert_eq!(held[0].device_name.as_deref(), Some("sda"));
        // Half its limit is not held back.
        assert!(io(&at(0, 0), &at(10 << 20, 100), &[], 2.0, &name).is_empty());
        for k in IoLimitKind::ALL {
            assert_eq!(serde_json::to_string(k).unwrap(), format!("\"{k}\""));
        }
    }
}
