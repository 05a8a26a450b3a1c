//! Who is responsible: the processes (and services) behind a device's I/O, the CPUs' time
//! and memory growth in one interval, each with how it was attributed.
//!
//! Disk I/O is attributed from the best source there is, in order:
//! 1. [`Attribution::Exact`] from per-I/O tracing, when `tacho top` traces block I/O with
//!    eBPF (root): each request's submitting process ([`traced_culprits`]).
//! 2. [`Attribution::Exact`]: the kernel's per-cgroup per-device counters (cgroup v2
//!    `io.stat`, v1 `blkio.throttle.io_service_bytes`), narrowed to one process when it is
//!    the only one in its cgroup doing I/O (or the only one there with the device open).
//! 3. [`Attribution::Likely`]: a process's own byte counters (/proc/PID/io, which do not say
//!    which device) tied to a device by the files it has open on it.

use std::collections::HashMap;

use super::Disk;
pub use super::blame::{Attribution, Culprit, Direction};
use super::fold::fold;
use super::process::Delta;
use crate::bpf::block::{Op, ProcIo};
use crate::diagnose::sample::Sample;
use crate::diagnose::sample::devices::Devices;
use crate::kernel::procinfo::{self, OpenDevice};

/// How eBPF-attributed disk culprits say they were known.
pub(super) const TRACED_SOURCE: &str = "eBPF block tracepoints: the process submitting each \
                                        request (writeback counted for the process that \
                                        dirtied the pages)";

/// Culprits named per verdict.
const MAX_CULPRITS: usize = 3;

/// Culprits of one interval, by what they are blamed for; findings pick from here.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Culprits {
    /// Per device (kernel name): the direction judged and who.
    pub disks: HashMap<String, (Direction, Vec<Culprit>)>,
    /// Top CPU consumers, user and system split.
    pub cpu: Vec<Culprit>,
    /// Top system-time consumers.
    pub system: Vec<Culprit>,
    /// Processes growing, faulting or swapped most.
    pub memory: Vec<Culprit>,
}

/// One command's processes (same unit) folded into one culprit, as the disk and CPU
/// verdicts fold theirs.
pub fn fold_culprits(members: Vec<Culprit>) -> Vec<Culprit> {
    fold(members, 1)
}

/// Everything in [`Culprits`] for the interval `a`..`b`.
pub fn culprits(
    a: &Sample,
    b: &Sample,
    deltas: &[Delta],
    disks: &[Disk],
    devices: &Devices,
    dt: f64,
    ticks_per_s: f64,
) -> Culprits {
    let mut out = Culprits::default();
    for d in disks {
        if let Some(c) = disk(a, b, deltas, d, devices, dt) {
            out.disks.insert(d.device.name.clone(), c);
        }
    }
    super::loops::through_loops(&mut out.disks, disks, devices, MAX_CULPRITS);
    let pct = |ticks: u64| ticks as f64 / ticks_per_s / dt * 100.0;
    let total: u64 = deltas.iter().map(|d| d.utime + d.stime).sum();
    let mut by_cpu: Vec<&Delta> = deltas.iter().filter(|d| d.utime + d.stime > 0).collect();
    by_cpu.sort_by_key(|d| std::cmp::Reverse(d.utime + d.stime));
    let cpu_source = |d: &Delta| Attribution::Exact {
        source: if d.exited {
            "taskstats exit record".into()
        } else {
            "/proc/PID/stat utime and stime".into()
        },
    };
    let cpu_culprit = |d: &Delta, part: u64, whole: u64| Culprit {
        user_pct: Some(pct(d.utime)),
        system_pct: Some(pct(d.stime)),
        ..Culprit::of(d, part as f64 * 100.0 / whole.max(1) as f64, cpu_source(d))
    };
    out.cpu = fold(
        by_cpu
            .iter()
            .map(|d| cpu_culprit(d, d.utime + d.stime, total))
            .collect(),
        MAX_CULPRITS,
    );
    let system: u64 = deltas.iter().map(|d| d.stime).sum();
    let mut by_system: Vec<&Delta> = deltas.iter().filter(|d| d.stime > 0).collect();
    by_system.sort_by_key(|d| std::cmp::Reverse(d.stime));
    out.system = fold(
        by_system
            .iter()
            .map(|d| cpu_culprit(d, d.stime, system))
            .collect(),
        MAX_CULPRITS,
    );
    out.memory = memory(deltas, dt);
    out
}

/// The largest RSS growth, the most major faults and the most swap, one culprit each (a
/// process leading two lists is named once).
fn memory(deltas: &[Delta], dt: f64) -> Vec<Culprit> {
    // Each list: the measure per process (0 when it has none), the process with the most of
    // it, and the sum over all, for its share.
    let rank = |source: &'static str, of: fn(&Delta) -> u64| {
        let top = deltas.iter().filter(|d| of(d) > 0).max_by_key(|d| of(d));
        let whole: u64 = deltas.iter().map(of).sum();
        (source, top, whole as f64)
    };
    let ranked: [(&str, Option<&Delta>, f64); 3] = [
        rank("/proc/PID/stat rss (RSS growth)", |d| {
            d.rss_growth_bytes.max(0).unsigned_abs()
        }),
        rank("/proc/PID/stat majflt (major faults)", |d| d.major_faults),
        rank("/proc/PID/status VmSwap (swap in use)", |d| {
            d.swap_bytes.unwrap_or(0)
        }),
    ];
    let mut out: Vec<Culprit> = Vec::new();
    for (i, (source, d, whole)) in ranked.into_iter().enumerate() {
        let Some(d) = d else { continue };
        if out.iter().any(|c| c.pid == Some(d.pid)) {
            continue;
        }
        let part = match i {
            0 => d.rss_growth_bytes as f64,
            1 => d.major_faults as f64,
            _ => d.swap_bytes.unwrap_or(0) as f64,
        };
        out.push(Culprit {
            rss_growth_bytes: Some(d.rss_growth_bytes),
            major_faults_per_s: Some(d.major_faults as f64 / dt),
            swap_bytes: d.swap_bytes,
            ..Culprit::of(
                d,
                part * 100.0 / whole.max(1.0),
                Attribution::Exact {
                    source: source.into(),
                },
            )
        });
    }
    out
}

/// The whole disk a device number belongs to (a partition's parent), by kernel name.
fn disk_name(devices: &Devices, major: u32, minor: u32) -> Option<&str> {
    let info = devices.get(&(major, minor))?;
    Some(info.parent.as_deref().unwrap_or(&info.name))
}

/// The processes eBPF saw submit I/O to `dev` in the direction judged, with their shares of
/// what it saw there; `None` when it saw none (then the other sources speak).
fn traced_culprits(
    traced: &[ProcIo],
    deltas: &[Delta],
    (a, b): (&Sample, &Sample),
    dev: (u32, u32),
    writes: bool,
    dt: f64,
) -> Option<Vec<Culprit>> {
    let op = if writes { Op::Write } else { Op::Read };
    let mut by_pid: HashMap<u32, (u64, &str)> = HashMap::new();
    for t in traced.iter().filter(|t| t.dev == dev && t.op == op) {
        let e = by_pid.entry(t.pid).or_insert((0, &t.comm));
        e.0 += t.bytes;
    }
    let total: u64 = by_pid.values().map(|(b, _)| b).sum();
    if total == 0 {
        return None;
    }
    let source = TRACED_SOURCE;
    let out: Vec<Culprit> = by_pid
        .into_iter()
        .map(|(pid, (bytes, comm))| {
            let share = bytes as f64 * 100.0 / total as f64;
            let attribution = Attribution::Exact {
                source: source.into(),
            };
            let culprit = match deltas.iter().find(|d| d.pid == pid) {
                Some(d) => Culprit::of(d, share, attribution),
                // A kernel thread, or a process the interval's scan and exit records do not
                // hold: named as traced, with what the samples knew of it.
                None => traced_alone(pid, comm, (a, b), share, attribution),
            };
            Culprit {
                bytes_per_s: Some(bytes as f64 / dt),
                ..culprit
            }
        })
        .collect();
    Some(fold(out, MAX_CULPRITS))
}

/// A traced process that is in neither the scan nor the exit records of the interval. The
/// tracer is read just before each scan, so one that submitted I/O after that read and ended
/// before the scan reached it was counted among the previous sample's exits: that record (and
/// its parent's cgroup, which a child starts in) names its unit, as its siblings'.
pub(super) fn traced_alone(
    pid: u32,
    comm: &str,
    (a, b): (&Sample, &Sample),
    share: f64,
    attribution: Attribution,
) -> Culprit {
    let gone = a.exited.iter().find(|x| x.tgid == pid && pid != 0);
    let unit = [
        b.details.get(&pid),
        a.details.get(&pid),
        gone.and_then(|x| b.details.get(&x.ppid)),
        gone.and_then(|x| a.details.get(&x.ppid)),
    ]
    .into_iter()
    .flatten()
    .find_map(|d| d.cgroups.as_ref()?.unit_path.as_deref())
    .and_then(procinfo::unit_of);
    Culprit {
        exited: gone.is_some(),
        ..Culprit::named(
            (pid != 0).then_some(pid),
            comm.to_string(),
            unit,
            share,
            attribution,
        )
    }
}

/// Who moved the bytes of device `d` in its busier direction; `None` when it moved none.
fn disk<'p>(
    a: &Sample,
    b: &Sample,
    deltas: &'p [Delta],
    d: &Disk,
    devices: &Devices,
    dt: f64,
) -> Option<(Direction, Vec<Culprit>)> {
    let write_total = d.write_bytes.unwrap_or(0) as f64;
    let read_total = d.rkb_per_s.unwrap_or(0.0) * 1024.0 * dt;
    let writes = write_total >= read_total;
    let (dir, total) = if writes {
        (Direction::Writes, write_total)
    } else {
        (Direction::Reads, read_total)
    };
    if total <= 0.0 {
        return None;
    }
    let (major, minor) = devices
        .iter()
        .find(|(_, i)| i.name == d.device.name)
        .map(|(k, _)| *k)?;
    let bytes = |p: &Delta| {
        if writes {
            p.write_bytes.unwrap_or(0)
        } else {
            p.read_bytes.unwrap_or(0)
        }
    };
    fn open_on<'p>(
        p: &'p Delta,
        devices: &Devices,
        disk: &str,
        writes: bool,
    ) -> Option<&'p OpenDevice> {
        p.open_devices
            .iter()
            .find(|o| (o.write || !writes) && disk_name(devices, o.major, o.minor) == Some(disk))
    }
    let on_device = |p: &'p Delta| open_on(p, devices, &d.device.name, writes);
    // 1. Per-I/O tracing: every request's submitter, exactly.
    if let Some(traced) = &b.block_io
        && let Some(out) = traced_culprits(traced, deltas, (a, b), (major, minor), writes, dt)
    {
        return Some((dir, out));
    }
    let mut out: Vec<Culprit> = Vec::new();
    let counted = b.cgroups.cgroups.iter().any(|c| {
        c.devices
            .iter()
            .any(|x| (x.major, x.minor) == (major, minor))
    });

    // 2. The kernel's per-cgroup counters for this device.
    for cg in &b.cgroups.cgroups {
        let Some(now) = cg
            .devices
            .iter()
            .find(|x| (x.major, x.minor) == (major, minor))
        else {
            continue;
        };
        let then = a
            .cgroups
            .cgroups
            .iter()
            .find(|p| p.path == cg.path)
            .and_then(|p| {
                p.devices
                    .iter()
                    .find(|x| (x.major, x.minor) == (major, minor))
            });
        let moved = if writes {
            now.wbytes.saturating_sub(then.map_or(0, |t| t.wbytes))
        } else {
            now.rbytes.saturating_sub(then.map_or(0, |t| t.rbytes))
        };
        if moved == 0 {
            continue;
        }
        let share = moved as f64 * 100.0 / total;
        let source = &b.cgroups.source;
        let members: Vec<&Delta> = deltas
            .iter()
            .filter(|p| p.io_cgroup.as_deref() == Some(&cg.path) && bytes(p) > 0)
            .collect();
        let openers: Vec<&Delta> = members
            .iter()
            .copied()
            .filter(|p| on_device(p).is_some())
            .collect();
        let rate = Some(moved as f64 / dt);
        let one = match (members.as_slice(), openers.as_slice()) {
            ([p], _) => Some((*p, "the only process in it doing storage I/O")),
            (_, [p]) => Some((*p, "the only process in it with the device open")),
            _ => None,
        };
        if let Some((p, why)) = one {
            out.push(Culprit {
                bytes_per_s: rate,
                ..Culprit::of(
                    p,
                    share,
                    Attribution::Exact {
                        source: format!("{source} of cgroup {}; {why}", cg.path),
                    },
                )
            });
        } else if members.is_empty() {
            out.push(Culprit {
                bytes_per_s: rate,
                ..Culprit::named(
                    None,
                    procinfo::unit_of(&cg.path).unwrap_or_else(|| cg.path.clone()),
                    procinfo::unit_of(&cg.path),
                    share,
                    Attribution::Exact {
                        source: format!(
                            "{source} of cgroup {}; no process in it can be named (kernel writeback, or processes gone)",
                            cg.path
                        ),
                    },
                )
            });
        } else {
            let pool = if openers.is_empty() {
                &members
            } else {
                &openers
            };
            let sum: u64 = pool.iter().map(|p| bytes(p)).sum();
            for p in pool {
                let part = bytes(p) as f64 / sum.max(1) as f64;
                out.push(Culprit {
                    bytes_per_s: Some(moved as f64 * part / dt),
                    ..Culprit::of(
                        p,
                        share * part,
                        Attribution::Likely {
                            reason: format!(
                                "{source} count {} bytes for cgroup {}, shared by {} processes doing I/O; split by their /proc/PID/io",
                                moved,
                                cg.path,
                                pool.len()
                            ),
                        },
                    )
                });
            }
        }
    }

    // 3. Without kernel counters for the device: per-process bytes tied to it by open files.
    if !counted {
        for p in deltas.iter().filter(|p| bytes(p) > 0) {
            if out.iter().any(|c| c.pid == Some(p.pid)) {
                continue;
            }
            let Some(open) = on_device(p) else { continue };
            let others = p
                .open_devices
                .iter()
                .filter(|o| o.write || !writes)
                .filter_map(|o| disk_name(devices, o.major, o.minor))
                .filter(|n| *n != d.device.name)
                .collect::<std::collections::BTreeSet<_>>()
                .len();
            let part = bytes(p) as f64 / (others + 1) as f64;
            let mode = if writes { "for writing" } else { "" };
            let reason = if others == 0 {
                format!(
                    "it has {} open {mode} and no other device; its /proc/PID/io bytes ({}) are taken as this device's",
                    open.path,
                    bytes(p)
                )
            } else {
                format!(
                    "it has {} open {mode} and files on {others} other devices; its /proc/PID/io bytes are split evenly",
                    open.path
                )
            };
            out.push(Culprit {
                bytes_per_s: Some(part / dt),
                ..Culprit::of(
                    p,
                    (part * 100.0 / total).min(100.0),
                    Attribution::Likely { reason },
                )
            });
        }
    }
    Some((dir, fold(out, MAX_CULPRITS)))
}
