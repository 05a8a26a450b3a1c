//! Cgroup limits and the counters that say how often they bit, for the cgroups that have one:
//! CPU quota (v1 `cpu.cfs_quota_us`/`cpu.cfs_period_us`, v2 `cpu.max`; throttling in
//! `cpu.stat`), memory (v2 `memory.max`/`memory.high` with `memory.events` and the cgroup's
//! `memory.pressure`; v1 `memory.limit_in_bytes` with `memory.failcnt`, v1 keeps no stall
//! time) and block I/O (v2 `io.max` with `io.stat`; v1 `blkio.throttle.*_device` with
//! `blkio.throttle.io_service_bytes`/`io_serviced`).
//!
//! Every file is read tolerantly: a cgroup whose files vanish (a service stopped) or do not
//! parse is left out of the sample, never a failed sample.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::SysRoot;
use super::cgroup::{CgroupDeviceIo, parse_blkio_v1, parse_io_stat};
use super::mounts::{parse_devno, read_mounts};
use crate::words::words;

/// Levels walked below a hierarchy's root (systemd and container trees are a few deep).
const MAX_DEPTH: usize = 32;
/// Directories looked at per hierarchy and sample: a host with more cgroups than this is
/// judged on the first ones in sorted order (a second each would cost too much).
const MAX_DIRS: usize = 4096;
/// Pids kept per limited cgroup, to name who runs in it.
const MAX_PIDS: usize = 32;
/// v1 writes "no limit" as the largest page-aligned number (9223372036854771712 on 4 KiB
/// pages); anything this large is no limit.
const V1_UNLIMITED: u64 = 1 << 62;

words! {
    /// Which cgroup interface a limit was read from.
    pub enum Hierarchy {
        /// A cgroup v1 controller's own hierarchy.
        V1 = "v1",
        /// The unified cgroup2 hierarchy.
        V2 = "v2",
    }
}

/// Where a limited cgroup is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Place {
    /// The interface its files belong to.
    pub hierarchy: Hierarchy,
    /// Its directory as mounted (`/sys/fs/cgroup/cpu/system.slice/nginx.service`), which
    /// findings give as evidence.
    pub dir: String,
    /// Its path below the hierarchy's root (`/system.slice/nginx.service`), naming the unit.
    pub path: String,
    /// The first processes in its `cgroup.procs`.
    pub pids: Vec<u32>,
}

/// A CPU quota and its throttling counters (cumulative).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuQuota {
    /// The cgroup.
    pub place: Place,
    /// CPU time allowed per period, microseconds.
    pub quota_us: u64,
    /// The period, microseconds.
    pub period_us: u64,
    /// Periods in which the cgroup had runnable tasks.
    pub nr_periods: u64,
    /// Of them, periods in which it used up its quota and was stopped.
    pub nr_throttled: u64,
    /// Time its tasks spent stopped, microseconds.
    pub throttled_us: u64,
}

/// A memory limit and its counters (cumulative).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryLimit {
    /// The cgroup.
    pub place: Place,
    /// The hard limit (v2 `memory.max`, v1 `memory.limit_in_bytes`), if set.
    pub max_bytes: Option<u64>,
    /// The throttling limit (v2 `memory.high`), if set.
    pub high_bytes: Option<u64>,
    /// Memory in use (v2 `memory.current`, v1 `memory.usage_in_bytes`).
    pub current_bytes: Option<u64>,
    /// v2 `memory.events` `high`: times reclaim was forced to keep it under memory.high.
    pub high_events: Option<u64>,
    /// v2 `memory.events` `max`: times it reached memory.max.
    pub max_events: Option<u64>,
    /// v2 `memory.events` `oom_kill`: processes killed by the OOM killer in it.
    pub oom_kills: Option<u64>,
    /// v1 `memory.failcnt`: times its usage hit the limit.
    pub failcnt: Option<u64>,
    /// v2 `memory.pressure` `some` total: time its tasks stalled on memory, microseconds.
    pub stall_us: Option<u64>,
}

/// One device's I/O limits in a cgroup; `None` is no limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceLimit {
    /// Device major number.
    pub major: u32,
    /// Device minor number.
    pub minor: u32,
    /// Bytes read per second.
    pub rbps: Option<u64>,
    /// Bytes written per second.
    pub wbps: Option<u64>,
    /// Reads per second.
    pub riops: Option<u64>,
    /// Writes per second.
    pub wiops: Option<u64>,
}

/// Block I/O limits and the cgroup's own I/O counters (cumulative).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoLimit {
    /// The cgroup.
    pub place: Place,
    /// Devices with at least one limit.
    pub limits: Vec<DeviceLimit>,
    /// Its I/O per device (v2 io.stat, v1 blkio.throttle.io_service_bytes/io_serviced).
    pub counters: Vec<CgroupDeviceIo>,
}

/// Every limited cgroup found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Cgroups with a CPU quota.
    pub cpu: Vec<CpuQuota>,
    /// Cgroups with a memory limit.
    pub memory: Vec<MemoryLimit>,
    /// Cgroups with an I/O limit.
    pub io: Vec<IoLimit>,
}

impl Limits {
    /// No cgroup has a limit (records then leave the field out).
    pub fn is_empty(&self) -> bool {
        self.cpu.is_empty() && self.memory.is_empty() && self.io.is_empty()
    }
}

/// A mounted hierarchy: where it shows (for evidence), where it is read from (rebased into a
/// fixture tree), and its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mounted {
    hierarchy: Hierarchy,
    controllers: Vec<String>,
    shown: PathBuf,
    read: PathBuf,
}

/// The cgroup hierarchies mounted (v1 controllers' and cgroup2), found once.
pub fn hierarchies(root: &SysRoot) -> Vec<Mounted> {
    let Ok(mounts) = read_mounts(root) else {
        return Vec::new();
    };
    mounts
        .iter()
        .filter_map(|m| {
            let (hierarchy, controllers) = match m.fs_type.as_str() {
                "cgroup2" => (Hierarchy::V2, Vec::new()),
                "cgroup" => (
                    Hierarchy::V1,
                    m.options
                        .split(',')
                        .filter(|o| ["cpu", "memory", "blkio"].contains(o))
                        .map(str::to_string)
                        .collect(),
                ),
                _ => return None,
            };
            // A v1 hierarchy of other controllers (name=systemd, pids) has no limits here.
            if hierarchy == Hierarchy::V1 && controllers.is_empty() {
                return None;
            }
            let read = match m.mount_point.strip_prefix("/sys") {
                Ok(rest) => root.sys.join(rest),
                Err(_) => m.mount_point.clone(),
            };
            Some(Mounted {
                hierarchy,
                controllers,
                shown: m.mount_point.clone(),
                read,
            })
        })
        .collect()
}

/// Reads the limited cgroups of every hierarchy in `mounted`.
pub fn read_limits(mounted: &[Mounted]) -> Limits {
    let mut out = Limits::default();
    for m in mounted {
        let has = |c: &str| m.hierarchy == Hierarchy::V2 || m.controllers.iter().any(|x| x == c);
        let mut seen = 0;
        walk(&m.read, "", 0, &mut seen, &mut |dir, rel| {
            let place = || Place {
                hierarchy: m.hierarchy,
                dir: m
                    .shown
                    .join(rel.trim_start_matches('/'))
                    .display()
                    .to_string(),
                path: if rel.is_empty() {
                    "/".into()
                } else {
                    rel.into()
                },
                pids: pids(dir),
            };
            // The root cgroup has no limits of its own (v2 has none of these files there).
            if rel.is_empty() {
                return;
            }
            if has("cpu")
                && let Some(q) = cpu_quota(dir, m.hierarchy, place)
            {
                out.cpu.push(q);
            }
            if has("memory")
                && let Some(l) = memory_limit(dir, m.hierarchy, place)
            {
                out.memory.push(l);
            }
            if has("blkio")
                && let Some(l) = io_limit(dir, m.hierarchy, place)
            {
                out.io.push(l);
            }
        });
    }
    out
}

fn walk(dir: &Path, rel: &str, depth: usize, seen: &mut usize, f: &mut impl FnMut(&Path, &str)) {
    if *seen >= MAX_DIRS {
        return;
    }
    *seen += 1;
    f(dir, rel);
    if depth >= MAX_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut children: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    children.sort();
    for c in children {
        walk(&dir.join(&c), &format!("{rel}/{c}"), depth + 1, seen, f);
    }
}

fn read(dir: &Path, file: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(file)).ok()
}

fn pids(dir: &Path) -> Vec<u32> {
    read(dir, "cgroup.procs")
        .map(|t| parse_pids(&t))
        .unwrap_or_default()
}

/// `cgroup.procs`: one pid a line; the first [`MAX_PIDS`].
pub fn parse_pids(text: &str) -> Vec<u32> {
    text.lines()
        .filter_map(|l| l.trim().parse().ok())
        .take(MAX_PIDS)
        .collect()
}

/// The value of `key` in a flat-keyed file (`nr_throttled 12`, `oom_kill 0`).
pub fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// A v2 limit file's value: `max` is no limit (`Some(None)`), a number is a limit.
fn v2_limit(word: &str) -> Option<Option<u64>> {
    match word.trim() {
        "max" => Some(None),
        n => n.parse().ok().map(Some),
    }
}

/// v2 `cpu.max`: `QUOTA PERIOD`, `max PERIOD` for none. Returns (quota, period) when limited.
pub fn parse_cpu_max(text: &str) -> Option<(u64, u64)> {
    let mut w = text.split_whitespace();
    let quota = v2_limit(w.next()?)??;
    let period: u64 = w.next()?.parse().ok()?;
    (period > 0).then_some((quota, period))
}

fn cpu_quota(dir: &Path, h: Hierarchy, place: impl FnOnce() -> Place) -> Option<CpuQuota> {
    let (quota_us, period_us) = match h {
        Hierarchy::V1 => {
            let quota: i64 = read(dir, "cpu.cfs_quota_us")?.trim().parse().ok()?;
            let period: u64 = read(dir, "cpu.cfs_period_us")?.trim().parse().ok()?;
            (u64::try_from(quota).ok()?, period)
        }
        Hierarchy::V2 => parse_cpu_max(&read(dir, "cpu.max")?)?,
    };
    let stat = read(dir, "cpu.stat")?;
    let throttled_us = match h {
        Hierarchy::V1 => keyed(&stat, "throttled_time")? / 1000,
        Hierarchy::V2 => keyed(&stat, "throttled_usec")?,
    };
    Some(CpuQuota {
        place: place(),
        quota_us,
        period_us,
        nr_periods: keyed(&stat, "nr_periods")?,
        nr_throttled: keyed(&stat, "nr_throttled")?,
        throttled_us,
    })
}

/// The `total=` of a PSI file's `some` line.
pub fn psi_some_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("total="))?
        .parse()
        .ok()
}

fn memory_limit(dir: &Path, h: Hierarchy, place: impl FnOnce() -> Place) -> Option<MemoryLimit> {
    let number = |file: &str| read(dir, file).and_then(|t| t.trim().parse::<u64>().ok());
    let (max_bytes, high_bytes) = match h {
        Hierarchy::V1 => (
            number("memory.limit_in_bytes").filter(|&b| b < V1_UNLIMITED),
            None,
        ),
        Hierarchy::V2 => (
            v2_limit(&read(dir, "memory.max")?)?,
            v2_limit(&read(dir, "memory.high")?)?,
        ),
    };
    if max_bytes.is_none() && high_bytes.is_none() {
        return None;
    }
    let v2 = h == Hierarchy::V2;
    let events = v2
        .then(|| read(dir, "memory.events"))
        .flatten()
        .unwrap_or_default();
    Some(MemoryLimit {
        place: place(),
        max_bytes,
        high_bytes,
        current_bytes: number(if v2 {
            "memory.current"
        } else {
            "memory.usage_in_bytes"
        }),
        high_events: keyed(&events, "high"),
        max_events: keyed(&events, "max"),
        oom_kills: keyed(&events, "oom_kill"),
        failcnt: (!v2).then(|| number("memory.failcnt")).flatten(),
        stall_us: v2
            .then(|| read(dir, "memory.pressure"))
            .flatten()
            .and_then(|t| psi_some_total(&t)),
    })
}

/// v2 `io.max`: `MAJ:MIN rbps=N wbps=max riops=N wiops=max` a line; devices with no limit
/// at all are left out.
pub fn parse_io_max(text: &str) -> Vec<DeviceLimit> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let (major, minor) = parse_devno(words.next()?)?;
            let mut d = DeviceLimit {
                major,
                minor,
                ..DeviceLimit::default()
            };
            for w in words {
                let Some((key, value)) = w.split_once('=') else {
                    continue;
                };
                let slot = match key {
                    "rbps" => &mut d.rbps,
                    "wbps" => &mut d.wbps,
                    "riops" => &mut d.riops,
                    "wiops" => &mut d.wiops,
                    _ => continue,
                };
                *slot = v2_limit(value)?;
            }
            limited(&d).then_some(d)
        })
        .collect()
}

fn limited(d: &DeviceLimit) -> bool {
    d.rbps.is_some() || d.wbps.is_some() || d.riops.is_some() || d.wiops.is_some()
}

/// Which of a [`DeviceLimit`]'s limits a v1 file sets.
type Slot = fn(&mut DeviceLimit) -> &mut Option<u64>;

/// v1 `blkio.throttle.*_device`: `MAJ:MIN VALUE` a line, merged into `limits`.
pub fn merge_v1_device_limits(text: &str, limits: &mut Vec<DeviceLimit>, slot: Slot) {
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some(Some((major, minor))), Some(Ok(value))) = (
            words.next().map(parse_devno),
            words.next().map(str::parse::<u64>),
        ) else {
            continue;
        };
        let at = match limits
            .iter()
            .position(|d| (d.major, d.minor) == (major, minor))
        {
            Some(at) => at,
            None => {
                limits.push(DeviceLimit {
                    major,
                    minor,
                    ..DeviceLimit::default()
                });
                limits.len() - 1
            }
        };
        *slot(&mut limits[at]) = Some(value);
    }
}

fn io_limit(dir: &Path, h: Hierarchy, place: impl FnOnce() -> Place) -> Option<IoLimit> {
    let (limits, counters) = match h {
        Hierarchy::V2 => {
            let limits = parse_io_max(&read(dir, "io.max")?);
            let stat = read(dir, "io.stat").unwrap_or_default();
            (limits, parse_io_stat(&stat, &dir.join("io.stat")).ok()?)
        }
        Hierarchy::V1 => {
            let mut limits = Vec::new();
            let files: [(&str, Slot); 4] = [
                ("blkio.throttle.read_bps_device", |d| &mut d.rbps),
                ("blkio.throttle.write_bps_device", |d| &mut d.wbps),
                ("blkio.throttle.read_iops_device", |d| &mut d.riops),
                ("blkio.throttle.write_iops_device", |d| &mut d.wiops),
            ];
            for (file, slot) in files {
                merge_v1_device_limits(&read(dir, file)?, &mut limits, slot);
            }
            let bytes_file = dir.join("blkio.throttle.io_service_bytes");
            let ios_file = dir.join("blkio.throttle.io_serviced");
            let mut counters =
                parse_blkio_v1(&read(dir, "blkio.throttle.io_service_bytes")?, &bytes_file).ok()?;
            let ios = parse_blkio_v1(&read(dir, "blkio.throttle.io_serviced")?, &ios_file).ok()?;
            for d in &mut counters {
                if let Some(n) = ios
                    .iter()
                    .find(|n| (n.major, n.minor) == (d.major, d.minor))
                {
                    (d.rios, d.wios) = (n.rbytes, n.wbytes);
                }
            }
            (limits, counters)
        }
    };
    (!limits.is_empty()).then(|| IoLimit {
        place: place(),
        limits,
        counters,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::fixture::{mkdir, write};
    use proptest::prelude::*;

    /// A hybrid host: v1 cpu, memory and blkio with one limited cgroup each, and a cgroup2
    /// tree with one service limited on all three.
    fn tree(t: &Path) -> SysRoot {
        write(
            t,
            "proc/self/mountinfo",
            "30 23 0:26 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n\
             31 23 0:27 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
             32 23 0:28 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
             33 23 0:29 / /sys/fs/cgroup/blkio rw - cgroup cgroup rw,blkio\n",
        );
        let cpu = "sys/fs/cgroup/cpu,cpuacct";
        write(t, &format!("{cpu}/cpu.cfs_quota_us"), "-1\n");
        write(t, &format!("{cpu}/cpu.cfs_period_us"), "100000\n");
        write(
            t,
            &format!("{cpu}/cpu.stat"),
            "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n",
        );
        write(t, &format!("{cpu}/idle/cpu.cfs_quota_us"), "-1\n");
        write(t, &format!("{cpu}/idle/cpu.cfs_period_us"), "100000\n");
        write(
            t,
            &format!("{cpu}/idle/cpu.stat"),
            "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n",
        );
        write(t, &format!("{cpu}/burn/cpu.cfs_quota_us"), "20000\n");
        write(t, &format!("{cpu}/burn/cpu.cfs_period_us"), "100000\n");
        write(
            t,
            &format!("{cpu}/burn/cpu.stat"),
            "nr_periods 50\nnr_throttled 40\nthrottled_time 3200000000\nnr_bursts 0\n",
        );
        write(t, &format!("{cpu}/burn/cgroup.procs"), "77\n78\n");
        let mem = "sys/fs/cgroup/memory";
        write(
            t,
            &format!("{mem}/memory.limit_in_bytes"),
            "9223372036854771712\n",
        );
        write(t, &format!("{mem}/job/memory.limit_in_bytes"), "33554432\n");
        write(t, &format!("{mem}/job/memory.usage_in_bytes"), "33550000\n");
        write(t, &format!("{mem}/job/memory.failcnt"), "912\n");
        write(
            t,
            &format!("{mem}/free/memory.limit_in_bytes"),
            "9223372036854771712\n",
        );
        let blk = "sys/fs/cgroup/blkio/slow";
        write(t, &format!("{blk}/blkio.throttle.read_bps_device"), "");
        write(
            t,
            &format!("{blk}/blkio.throttle.write_bps_device"),
            "7:0 1048576\n",
        );
        write(t, &format!("{blk}/blkio.throttle.read_iops_device"), "");
        write(
            t,
            &format!("{blk}/blkio.throttle.write_iops_device"),
            "7:0 100\n",
        );
        write(
            t,
            &format!("{blk}/blkio.throttle.io_service_bytes"),
            "7:0 Read 0\n7:0 Write 5242880\nTotal 5242880\n",
        );
        write(
            t,
            &format!("{blk}/blkio.throttle.io_serviced"),
            "7:0 Read 0\n7:0 Write 40\nTotal 40\n",
        );
        let v2 = "sys/fs/cgroup/unified/system.slice/nginx.service";
        mkdir(t, "sys/fs/cgroup/unified/init.scope");
        write(t, &format!("{v2}/cpu.max"), "50000 100000\n");
        write(
            t,
            &format!("{v2}/cpu.stat"),
            "usage_usec 9\nnr_periods 100\nnr_throttled 38\nthrottled_usec 1900000\n",
        );
        write(t, &format!("{v2}/memory.max"), "max\n");
        write(t, &format!("{v2}/memory.high"), "536870912\n");
        write(t, &format!("{v2}/memory.current"), "536000000\n");
        write(
            t,
            &format!("{v2}/memory.events"),
            "low 0\nhigh 17\nmax 0\noom 0\noom_kill 0\n",
        );
        write(
            t,
            &format!("{v2}/memory.pressure"),
            "some avg10=1.00 avg60=0.50 avg300=0.10 total=250000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        );
        write(
            t,
            &format!("{v2}/io.max"),
            "8:0 rbps=max wbps=10485760 riops=max wiops=max\n",
        );
        write(
            t,
            &format!("{v2}/io.stat"),
            "8:0 rbytes=0 wbytes=52428800 rios=0 wios=50 dbytes=0 dios=0\n",
        );
        write(t, &format!("{v2}/cgroup.procs"), "812\n");
        SysRoot::under(t)
    }

    #[test]
    fn reads_the_limited_cgroups_of_both_hierarchies() {
        let dir = tempfile::tempdir().unwrap();
        let root = tree(dir.path());
        let l = read_limits(&hierarchies(&root));
        let cpu: Vec<(&str, Hierarchy, u64, u64, u64, u64, u64)> = l
            .cpu
            .iter()
            .map(|q| {
                (
                    q.place.path.as_str(),
                    q.place.hierarchy,
                    q.quota_us,
                    q.period_us,
                    q.nr_periods,
                    q.nr_throttled,
                    q.throttled_us,
                )
            })
            .collect();
        assert_eq!(
            cpu,
            [
                (
                    "/system.slice/nginx.service",
                    Hierarchy::V2,
                    50000,
                    100000,
                    100,
                    38,
                    1900000
                ),
                ("/burn", Hierarchy::V1, 20000, 100000, 50, 40, 3200000),
            ]
        );
        assert_eq!(l.cpu[1].place.dir, "/sys/fs/cgroup/cpu,cpuacct/burn");
        assert_eq!(l.cpu[1].place.pids, [77, 78]);
        assert_eq!(l.memory.len(), 2);
        let nginx = &l.memory[0];
        assert_eq!(
            (
                nginx.max_bytes,
                nginx.high_bytes,
                nginx.high_events,
                nginx.stall_us
            ),
            (None, Some(536870912), Some(17), Some(250000))
        );
        let job = &l.memory[1];
        assert_eq!(
            (
                job.place.path.as_str(),
                job.max_bytes,
                job.failcnt,
                job.high_events
            ),
            ("/job", Some(33554432), Some(912), None)
        );
        assert_eq!(l.io.len(), 2);
        assert_eq!(l.io[0].limits[0].wbps, Some(10485760));
        assert_eq!(l.io[0].counters[0].wbytes, 52428800);
        let slow = &l.io[1];
        assert_eq!(slow.place.dir, "/sys/fs/cgroup/blkio/slow");
        assert_eq!(
            (
                slow.limits[0].wbps,
                slow.limits[0].wiops,
                slow.limits[0].rbps
            ),
            (Some(1048576), Some(100), None)
        );
        assert_eq!(
            (slow.counters[0].wbytes, slow.counters[0].wios),
            (5242880, 40)
        );
    }

    #[test]
    fn a_vanished_or_garbled_cgroup_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let root = tree(dir.path());
        let cpu = dir.path().join("sys/fs/cgroup/cpu,cpuacct/burn");
        std::fs::write(cpu.join("cpu.stat"), "nr_periods x\n").unwrap();
        let gone = dir
            .path()
            .join("sys/fs/cgroup/unified/system.slice/nginx.service");
        std::fs::remove_file(gone.join("cpu.max")).unwrap();
        let l = read_limits(&hierarchies(&root));
        assert!(l.cpu.is_empty(), "{:?}", l.cpu);
    }

    #[test]
    fn parses_v2_limit_files() {
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        assert_eq!(parse_cpu_max("25000 50000\n"), Some((25000, 50000)));
        assert_eq!(parse_cpu_max("25000 0\n"), None);
        let io = parse_io_max("8:0 rbps=max wbps=max riops=max wiops=max\n259:1 riops=300\n");
        assert_eq!(io.len(), 1);
        assert_eq!((io[0].major, io[0].minor, io[0].riops), (259, 1, Some(300)));
        assert_eq!(psi_some_total("some avg10=0.00 total=42\n"), Some(42));
        for h in Hierarchy::ALL {
            assert_eq!(serde_json::to_string(h).unwrap(), format!("\"{h}\""));
        }
    }

    proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC{0,200}") {
            let _ = parse_cpu_max(&s);
            let _ = parse_io_max(&s);
            let _ = parse_pids(&s);
            let _ = keyed(&s, "nr_throttled");
            let _ = psi_some_total(&s);
            let mut limits = Vec::new();
            merge_v1_device_limits(&s, &mut limits, |d| &mut d.wbps);
        }
    }
}
