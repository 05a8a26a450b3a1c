//! Disk verdicts: saturation judged by device type, and hot disks among their peers.

use std::collections::{HashMap, VecDeque};

use super::{Code, Finding, Severity};
use crate::diagnose::model::TopSample;
use crate::diagnose::model::culprits::{Attribution, Culprit, Direction};
use crate::diagnose::model::disk::{Disk, worst_await};
use crate::diagnose::model::groups::Kind;
use crate::kernel::blockdev::DeviceKind;
use crate::stats::{mad, median};
use crate::units::format_bytes_approx;

/// %util at which a single-queue rotational disk is saturated: it serves one request at a
/// time, so busy all the time means requests queue.
const ROTATIONAL_UTIL_PCT: f64 = 90.0;
/// Average queue length from which a parallel device (SSD, NVMe, virtual) counts as loaded;
/// below it, a slow await is the device's latency, not queueing.
const PARALLEL_QUEUE: f64 = 4.0;
/// await this many times the device's own baseline means requests wait in a queue.
const BASELINE_FACTOR: f64 = 3.0;
/// Baseline samples needed before a device is judged against itself.
const BASELINE_MIN: usize = 5;
/// PSI io `some` (avg10) from which tasks are visibly held up by I/O.
const PSI_IO_SOME_PCT: f64 = 20.0;

/// Devices judged for saturation: whole disks only (partitions, dm and md pass load to
/// the disks below, which are judged themselves), and not RAM-backed zram.
fn judged(d: &Disk) -> bool {
    matches!(d.device.kind, DeviceKind::Disk | DeviceKind::Loop)
        && !d.device.name.starts_with("zram")
}

fn label(d: &Disk) -> String {
    if d.device.display_name != d.device.name {
        format!("{} ({})", d.device.name, d.device.display_name)
    } else {
        d.device.name.clone()
    }
}

pub fn saturation(s: &TopSample, history: &HashMap<String, VecDeque<f64>>, out: &mut Vec<Finding>) {
    let psi_io = s.psi.io.as_ref().map(|p| p.some.avg10_pct);
    for d in s.disks.iter().filter(|d| judged(d)) {
        let util = d.util_pct.unwrap_or(0.0);
        let queue = d.aqu_sz.unwrap_or(0.0);
        // Loop devices and hypervisors' disks report rotational=1 whatever backs them.
        let rotational = d.device.rotational == Some(true)
            && d.device.kind != DeviceKind::Loop
            && !d.device.virtual_disk;
        if rotational {
            if util >= ROTATIONAL_UTIL_PCT {
                out.push(Finding::warning(Code::DiskSaturated, d.device.name.clone(), format!(
                        "{} is saturated: {util:.0}% busy, queue {queue:.1}{} (rotational disk: %util is the measure)",
                        label(d),
                        await_text(d),
                    )));
            }
            continue;
        }
        if queue < PARALLEL_QUEUE {
            continue;
        }
        let Some((dir, now)) = worst_await(d) else {
            continue;
        };
        let baseline = history
            .get(&d.device.name)
            .filter(|h| h.len() >= BASELINE_MIN)
            .and_then(|h| median(&h.iter().copied().collect::<Vec<_>>()));
        let over_baseline = baseline.filter(|&b| now >= BASELINE_FACTOR * b.max(0.1));
        let psi_high = psi_io.filter(|&p| p >= PSI_IO_SOME_PCT);
        let why = match (over_baseline, psi_high) {
            (Some(b), _) => format!("{dir} {now:.1} ms vs {b:.1} ms baseline"),
            (None, Some(p)) => {
                format!("{dir} {now:.1} ms, tasks stalled on I/O {p:.0}% of the time")
            }
            (None, None) => continue,
        };
        out.push(Finding::warning(Code::DiskSaturated, d.device.name.clone(), format!(
                "{} is saturated: queue {queue:.1}, {why} (%util {util:.0}% says little for a device that serves requests in parallel)",
                label(d)
            )));
    }
    if let Some(p) = s.psi.io.as_ref().and_then(|p| p.full.as_ref())
        && p.avg10_pct >= 10.0
        && !out.iter().any(|f| f.code == Code::DiskSaturated)
    {
        out.push(Finding::warning(
            Code::IoPressure,
            "io",
            format!(
                "all running tasks were stalled on I/O {:.0}% of the last 10 s (PSI io full)",
                p.avg10_pct
            ),
        ));
    }
}

/// %util from which a device with no saturation verdict is still worth naming its users
/// (an Info finding: a busy device is not yet a problem).
const BUSY_UTIL_PCT: f64 = 50.0;

/// Busy devices without a saturation verdict: who keeps them busy.
pub fn busy(s: &TopSample, out: &mut Vec<Finding>) {
    for d in s.disks.iter().filter(|d| judged(d)) {
        let util = d.util_pct.unwrap_or(0.0);
        if util < BUSY_UTIL_PCT || out.iter().any(|f| f.subject == d.device.name) {
            continue;
        }
        let Some((dir, culprits)) = s.culprits.disks.get(&d.device.name) else {
            continue;
        };
        let (rate, verb) = match dir {
            Direction::Writes => (d.wkb_per_s, "written"),
            Direction::Reads => (d.rkb_per_s, "read"),
        };
        out.push(Finding {
            code: Code::DiskBusy,
            severity: Severity::Info,
            subject: d.device.name.clone(),
            message: format!(
                "{} busy: {util:.0}% util, {}/s {verb}",
                label(d),
                format_bytes_approx((rate.unwrap_or(0.0) * 1024.0) as u64)
            ),
            culprits: culprits.clone(),
        });
    }
}

/// Attaches each disk finding's culprits and names them in its message. An I/O stall with no
/// device named (`io_pressure`) names the busiest device that has culprits, and them.
pub fn blame(s: &TopSample, findings: &mut [Finding]) {
    for f in findings.iter_mut() {
        let (device, lead) = match f.code {
            Code::DiskSaturated | Code::HotDisk | Code::DiskBusy => {
                (f.subject.clone(), String::new())
            }
            Code::IoPressure => match busiest_with_culprits(s) {
                Some(d) => (
                    d.device.name.clone(),
                    format!(
                        "busiest device {} ({:.0}% util), ",
                        label(d),
                        d.util_pct.unwrap_or(0.0)
                    ),
                ),
                None => continue,
            },
            _ => continue,
        };
        let Some((dir, culprits)) = s.culprits.disks.get(&device) else {
            continue;
        };
        if culprits.is_empty() {
            continue;
        }
        // The first culprit eBPF gave figures says how its I/O fared; more would crowd it.
        let mut figured = false;
        let named: Vec<String> = culprits
            .iter()
            .map(|c| {
                let mut text = share_text(c, *dir);
                if !figured && let Some(io) = io_text(c) {
                    text.push_str(&io);
                    figured = true;
                }
                text
            })
            .collect();
        f.message = format!("{}: {lead}{}", f.message, named.join(", "));
        f.culprits.clone_from(culprits);
    }
}

/// The judged device with the highest %util among those whose users are known.
fn busiest_with_culprits(s: &TopSample) -> Option<&Disk> {
    s.disks
        .iter()
        .filter(|d| judged(d))
        .filter(|d| {
            s.culprits
                .disks
                .get(&d.device.name)
                .is_some_and(|c| !c.1.is_empty())
        })
        .max_by(|a, b| {
            a.util_pct
                .unwrap_or(0.0)
                .total_cmp(&b.util_pct.unwrap_or(0.0))
        })
}

/// `81% of writes from dd (pid 4242, session-3.scope)`, or `~40% of writes likely from …`.
fn share_text(c: &Culprit, dir: Direction) -> String {
    match c.attribution {
        Attribution::Exact { .. } => format!("{:.0}% of {dir} from {}", c.share_pct, c.who()),
        Attribution::Likely { .. } => {
            format!("~{:.0}% of {dir} likely from {}", c.share_pct, c.who())
        }
    }
}

/// ` at 4.1k IOPS (p99 38 ms, 82% of its time queued)`: what the block tracer measured of a
/// culprit's requests on the device; `None` without its figures.
fn io_text(c: &Culprit) -> Option<String> {
    let iops = c.iops?;
    let mut parts = Vec::new();
    if let Some(p99) = c.lat_p99_ms {
        parts.push(if p99 < 1.0 {
            format!("p99 {:.0} µs", p99 * 1000.0)
        } else if p99 < 100.0 {
            format!("p99 {p99:.1} ms")
        } else {
            format!("p99 {p99:.0} ms")
        });
    }
    if let Some(q) = c.queued_pct {
        parts.push(format!("{q:.0}% of its time queued"));
    }
    let detail = if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    };
    Some(format!(
        " at {} IOPS{detail}",
        crate::units::format_count(iops)
    ))
}

fn await_text(d: &Disk) -> String {
    worst_await(d)
        .map(|(dir, a)| format!(", {dir} {a:.1} ms"))
        .unwrap_or_default()
}

/// A member's await must exceed the peers' median by this many scaled MADs…
const MAD_FACTOR: f64 = 3.0;
/// …and be at least this many times the median…
const MEDIAN_FACTOR: f64 = 2.0;
/// …and at least this much higher, so microsecond jitter between idle SSDs is not news.
const AWAIT_MIN_GAP_MS: f64 = 5.0;
const UTIL_MIN_GAP_PCT: f64 = 20.0;
/// Scales the MAD to a standard deviation for normally distributed values.
const MAD_SCALE: f64 = 1.4826;

/// A column compared among peers: name, how to read it, the smallest gap that matters, unit.
type Metric = (&'static str, fn(&Disk) -> Option<f64>, f64, &'static str);

/// One finding per group: the member furthest above its peers, by await or %util.
pub fn hot_disks(s: &TopSample, out: &mut Vec<Finding>) {
    for g in &s.groups {
        let members: Vec<&Disk> = s
            .disks
            .iter()
            .filter(|d| g.members.contains(&d.device.name))
            .collect();
        if members.len() < 3 {
            continue;
        }
        let metrics: [Metric; 3] = [
            (
                "r_await",
                |d| d.r_await_ms.filter(|_| d.r_per_s.unwrap_or(0.0) > 0.0),
                AWAIT_MIN_GAP_MS,
                " ms",
            ),
            (
                "w_await",
                |d| d.w_await_ms.filter(|_| d.w_per_s.unwrap_or(0.0) > 0.0),
                AWAIT_MIN_GAP_MS,
                " ms",
            ),
            ("%util", |d| d.util_pct, UTIL_MIN_GAP_PCT, "%"),
        ];
        let mut worst: Option<(f64, Finding)> = None;
        for (metric, value, min_gap, unit) in metrics {
            let vals: Vec<(&Disk, f64)> = members
                .iter()
                .filter_map(|d| Some((*d, value(d)?)))
                .collect();
            if vals.len() < 3 {
                continue;
            }
            let xs: Vec<f64> = vals.iter().map(|(_, v)| *v).collect();
            let (Some(m), Some(spread)) = (median(&xs), mad(&xs)) else {
                continue;
            };
            for (d, v) in &vals {
                let gap = v - m;
                let hot = gap >= min_gap
                    && *v >= MEDIAN_FACTOR * m
                    && gap > MAD_FACTOR * MAD_SCALE * spread;
                // Rank candidates by how many of the group's spreads they stand out.
                let score = gap / (MAD_SCALE * spread).max(min_gap / 10.0);
                if hot && worst.as_ref().is_none_or(|(s, _)| score > *s) {
                    worst = Some((
                        score,
                        Finding::warning(
                            Code::HotDisk,
                            d.device.name.clone(),
                            format!(
                                "{}: {metric} {v:.1}{unit} vs {m:.1}{unit} for its {} peers in {} ({})",
                                label(d),
                                members.len() - 1,
                                g.name,
                                group_kind(g.kind),
                            ),
                        ),
                    ));
                }
            }
        }
        if let Some((_, f)) = worst {
            out.push(f);
        }
    }
}

fn group_kind(kind: Kind) -> &'static str {
    match kind {
        Kind::Md => "md array",
        Kind::Lvm => "LVM volume group",
        Kind::Btrfs => "btrfs filesystem",
        Kind::Dm => "dm table",
    }
}
