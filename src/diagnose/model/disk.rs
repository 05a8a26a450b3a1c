//! Every `iostat -x` column from two /proc/diskstats samples, with sysstat's formulas.
//!
//! sysstat (iostat.c `write_ext_stat`, rd_stats.c `compute_ext_disk_stats`, 12.x):
//! per-second values are deltas over the interval; `%rrqm` is merges / (merges + requests);
//! `r_await` is read milliseconds / reads; `rareq-sz` is sectors / reads / 2 (kB); `aqu-sz`
//! is the weighted in-flight milliseconds per millisecond; `%util` is busy milliseconds per
//! millisecond × 100 (not capped, as iostat does not). A ratio with no requests is 0, as
//! iostat prints it. Differences: a counter that went backwards (device re-created) gives
//! `null` here instead of 0, and discard and flush columns are `null` on kernels without
//! those fields instead of 0.

use serde::Serialize;

use crate::diagnose::sample::devices::DeviceInfo;
use crate::kernel::blockdev::DeviceKind;
use crate::kernel::diskstats::{DiskCounters, SECTOR_BYTES, count, millis};

/// One device's `iostat -x` line, plus what tacho knows about the device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Disk {
    /// The device as the sampler describes it; the line shows its kernel name, display name,
    /// kind, parent, rotational and virtual flags, not what it is built on.
    #[serde(flatten, serialize_with = "line_fields")]
    pub device: DeviceInfo,
    /// md array, LVM volume group or dm table this device is a member of.
    pub group: Option<String>,
    /// Reads completed per second (iostat `r/s`); `None` when the counter went backwards.
    pub r_per_s: Option<f64>,
    /// Kilobytes read per second (`rkB/s`).
    pub rkb_per_s: Option<f64>,
    /// Read requests merged per second (`rrqm/s`).
    pub rrqm_per_s: Option<f64>,
    /// Share of read requests merged, in percent (`%rrqm`).
    pub rrqm_pct: Option<f64>,
    /// Mean time a read took, queue included, in milliseconds (`r_await`).
    pub r_await_ms: Option<f64>,
    /// Mean read size in kilobytes (`rareq-sz`).
    pub rareq_sz_kb: Option<f64>,
    /// Writes completed per second (`w/s`).
    pub w_per_s: Option<f64>,
    /// Kilobytes written per second (`wkB/s`).
    pub wkb_per_s: Option<f64>,
    /// Write requests merged per second (`wrqm/s`).
    pub wrqm_per_s: Option<f64>,
    /// Share of write requests merged, in percent (`%wrqm`).
    pub wrqm_pct: Option<f64>,
    /// Mean time a write took, queue included, in milliseconds (`w_await`).
    pub w_await_ms: Option<f64>,
    /// Mean write size in kilobytes (`wareq-sz`).
    pub wareq_sz_kb: Option<f64>,
    /// Discards completed per second (`d/s`); `None` on kernels without discard fields.
    pub d_per_s: Option<f64>,
    /// Kilobytes discarded per second (`dkB/s`).
    pub dkb_per_s: Option<f64>,
    /// Discard requests merged per second (`drqm/s`).
    pub drqm_per_s: Option<f64>,
    /// Share of discard requests merged, in percent (`%drqm`).
    pub drqm_pct: Option<f64>,
    /// Mean time a discard took, in milliseconds (`d_await`).
    pub d_await_ms: Option<f64>,
    /// Mean discard size in kilobytes (`dareq-sz`).
    pub dareq_sz_kb: Option<f64>,
    /// Flushes completed per second (`f/s`); `None` on kernels without flush fields.
    pub f_per_s: Option<f64>,
    /// Mean time a flush took, in milliseconds (`f_await`).
    pub f_await_ms: Option<f64>,
    /// Mean requests in flight (`aqu-sz`).
    pub aqu_sz: Option<f64>,
    /// Share of the interval the device was busy, in percent, not capped at 100 (`%util`).
    pub util_pct: Option<f64>,
    /// Bytes written in the interval (for write amplification; not an iostat column).
    #[serde(skip)]
    pub write_bytes: Option<u64>,
    /// Median time a request waited before the driver got it, in milliseconds (eBPF:
    /// submission → dispatch); `None` without the tracer or without requests.
    pub queue_p50_ms: Option<f64>,
    /// Median time the device took to serve a request once dispatched, in milliseconds (eBPF:
    /// dispatch → completion): the honest `svctm` iostat no longer prints.
    pub service_p50_ms: Option<f64>,
    /// 99th percentile of that service time, in milliseconds.
    pub service_p99_ms: Option<f64>,
    /// The interval's traced queue and service times by log2 µs slot, for `/metrics`'
    /// histograms (the JSON has the percentiles above); `None` without the tracer or requests.
    #[serde(skip)]
    pub latency_log2: Option<Box<LatencyLog2>>,
}

/// A device's queue and service times of one interval, folded into log2 µs slots.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyLog2 {
    /// Creation → dispatch.
    pub queue: crate::bpf::hist::Log2Hist,
    /// Dispatch → completion.
    pub service: crate::bpf::hist::Log2Hist,
}

impl Disk {
    /// Adds the traced queue and service times (from buckets an eighth of an octave wide,
    /// interpolated, so within a few percent of the exact value).
    pub fn set_latency(&mut self, lat: &crate::bpf::block::DevLatency) {
        let ms = |hist: &[u64], q| crate::bpf::hist::percentile_us(hist, q).map(|us| us / 1e3);
        self.queue_p50_ms = ms(&lat.queue, 0.5);
        self.service_p50_ms = ms(&lat.service, 0.5);
        self.service_p99_ms = ms(&lat.service, 0.99);
        self.latency_log2 = Some(Box::new(LatencyLog2 {
            queue: crate::bpf::hist::Log2Hist::of(&lat.queue),
            service: crate::bpf::hist::Log2Hist::of(&lat.service),
        }));
    }
}

/// The fields of a device its iostat line shows, in the order they have always been written.
fn line_fields<S: serde::Serializer>(d: &DeviceInfo, s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Line<'a> {
        name: &'a str,
        display_name: &'a str,
        kind: DeviceKind,
        parent: &'a Option<String>,
        rotational: Option<bool>,
        virtual_disk: bool,
    }
    Line {
        name: &d.name,
        display_name: &d.display_name,
        kind: d.kind,
        parent: &d.parent,
        rotational: d.rotational,
        virtual_disk: d.virtual_disk,
    }
    .serialize(s)
}

/// One direction's columns: requests/s, kB/s, merges/s, %merged, await, request size.
struct Direction {
    per_s: Option<f64>,
    kb_per_s: Option<f64>,
    rqm_per_s: Option<f64>,
    rqm_pct: Option<f64>,
    await_ms: Option<f64>,
    areq_sz_kb: Option<f64>,
}

/// Deltas of one direction: requests, merges, sectors, milliseconds.
fn direction(
    ios: Option<u64>,
    merges: Option<u64>,
    sectors: Option<u64>,
    ms: Option<u64>,
    dt_s: f64,
) -> Direction {
    let rate = |d: Option<u64>| d.map(|d| d as f64 / dt_s);
    let per_request = |num: Option<u64>| match (num, ios) {
        (Some(n), Some(i)) if i > 0 => Some(n as f64 / i as f64),
        (Some(_), Some(_)) => Some(0.0),
        _ => None,
    };
    Direction {
        per_s: rate(ios),
        kb_per_s: rate(sectors).map(|s| s / 2.0),
        rqm_per_s: rate(merges),
        rqm_pct: match (merges, ios) {
            (Some(m), Some(i)) if m + i > 0 => Some(m as f64 * 100.0 / (m + i) as f64),
            (Some(_), Some(_)) => Some(0.0),
            _ => None,
        },
        await_ms: per_request(ms),
        areq_sz_kb: per_request(sectors).map(|s| s / 2.0),
    }
}

fn opt_count(before: Option<u64>, after: Option<u64>) -> Option<u64> {
    count(before?, after?)
}

fn opt_millis(before: Option<u64>, after: Option<u64>) -> Option<u64> {
    millis(before?, after?)
}

/// The iostat line of one device between two samples `dt_s` seconds apart.
pub fn disk_between(
    before: &DiskCounters,
    after: &DiskCounters,
    info: &DeviceInfo,
    group: Option<String>,
    dt_s: f64,
) -> Disk {
    let r = direction(
        count(before.reads, after.reads),
        count(before.reads_merged, after.reads_merged),
        count(before.sectors_read, after.sectors_read),
        millis(before.read_ms, after.read_ms),
        dt_s,
    );
    let w = direction(
        count(before.writes, after.writes),
        count(before.writes_merged, after.writes_merged),
        count(before.sectors_written, after.sectors_written),
        millis(before.write_ms, after.write_ms),
        dt_s,
    );
    let d = direction(
        opt_count(before.discards, after.discards),
        opt_count(before.discards_merged, after.discards_merged),
        opt_count(before.sectors_discarded, after.sectors_discarded),
        opt_millis(before.discard_ms, after.discard_ms),
        dt_s,
    );
    let f = direction(
        opt_count(before.flushes, after.flushes),
        Some(0),
        Some(0),
        opt_millis(before.flush_ms, after.flush_ms),
        dt_s,
    );
    let per_ms = |ms: Option<u64>| ms.map(|ms| ms as f64 / (dt_s * 1000.0));
    Disk {
        device: info.clone(),
        group,
        r_per_s: r.per_s,
        rkb_per_s: r.kb_per_s,
        rrqm_per_s: r.rqm_per_s,
        rrqm_pct: r.rqm_pct,
        r_await_ms: r.await_ms,
        rareq_sz_kb: r.areq_sz_kb,
        w_per_s: w.per_s,
        wkb_per_s: w.kb_per_s,
        wrqm_per_s: w.rqm_per_s,
        wrqm_pct: w.rqm_pct,
        w_await_ms: w.await_ms,
        wareq_sz_kb: w.areq_sz_kb,
        d_per_s: d.per_s,
        dkb_per_s: d.kb_per_s,
        drqm_per_s: d.rqm_per_s,
        drqm_pct: d.rqm_pct,
        d_await_ms: d.await_ms,
        dareq_sz_kb: d.areq_sz_kb,
        f_per_s: f.per_s,
        f_await_ms: f.await_ms,
        aqu_sz: per_ms(millis(before.weighted_ms, after.weighted_ms)),
        util_pct: per_ms(millis(before.io_ms, after.io_ms)).map(|u| u * 100.0),
        write_bytes: count(before.sectors_written, after.sectors_written)
            .and_then(|s| s.checked_mul(SECTOR_BYTES)),
        queue_p50_ms: None,
        service_p50_ms: None,
        service_p99_ms: None,
        latency_log2: None,
    }
}

/// iostat leaves out devices that never did any I/O since boot (unless `-p ALL`/`-z`);
/// tacho does the same so idle loop devices do not crowd the table.
pub fn ever_used(c: &DiskCounters) -> bool {
    c.reads > 0 || c.writes > 0 || c.discards.unwrap_or(0) > 0 || c.flushes.unwrap_or(0) > 0
}

/// The larger of read and write await, with its direction's name; for findings.
pub fn worst_await(d: &Disk) -> Option<(&'static str, f64)> {
    let r = d
        .r_await_ms
        .filter(|_| d.r_per_s.unwrap_or(0.0) > 0.0)
        .map(|a| ("r_await", a));
    let w = d
        .w_await_ms
        .filter(|_| d.w_per_s.unwrap_or(0.0) > 0.0)
        .map(|a| ("w_await", a));
    match (r, w) {
        (Some(r), Some(w)) => Some(if w.1 > r.1 { w } else { r }),
        (r, w) => r.or(w),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::diskstats::parse_diskstats;
    use std::path::Path;

    fn counters(line: &str) -> DiskCounters {
        parse_diskstats(line, Path::new("d")).unwrap().remove(0)
    }

    fn info() -> DeviceInfo {
        DeviceInfo {
            name: "sda".into(),
            display_name: "sda".into(),
            kind: DeviceKind::Disk,
            parent: None,
            rotational: Some(true),
            virtual_disk: false,
            slaves: vec![],
            dm_uuid: None,
            backing: None,
        }
    }

    /// Figures worked out by hand from sysstat's formulas.
    #[test]
    fn matches_sysstat_formulas() {
        // 2 s apart: 100 reads (+25 merged) of 800 sectors in 300 ms; 50 writes (0 merged)
        // of 1000 sectors in 1000 ms; 4 discards of 64 sectors in 8 ms; 10 flushes in 20 ms;
        // busy 1500 ms; weighted 3000 ms.
        let a = counters(
            "8 0 sda 1000 100 9000 500 2000 30 40000 7000 0 10000 20000 10 0 640 40 100 300",
        );
        let b = counters(
            "8 0 sda 1100 125 9800 800 2050 30 41000 8000 1 11500 23000 14 0 704 48 110 320",
        );
        let d = disk_between(&a, &b, &info(), None, 2.0);
        assert_eq!(d.r_per_s, Some(50.0));
        assert_eq!(d.rkb_per_s, Some(200.0));
        assert_eq!(d.rrqm_per_s, Some(12.5));
        assert_eq!(d.rrqm_pct, Some(20.0));
        assert_eq!(d.r_await_ms, Some(3.0));
        assert_eq!(d.rareq_sz_kb, Some(4.0));
        assert_eq!(d.w_per_s, Some(25.0));
        assert_eq!(d.wkb_per_s, Some(250.0));
        assert_eq!((d.wrqm_per_s, d.wrqm_pct), (Some(0.0), Some(0.0)));
        assert_eq!(d.w_await_ms, Some(20.0));
        assert_eq!(d.wareq_sz_kb, Some(10.0));
        assert_eq!(
            (d.d_per_s, d.dkb_per_s, d.d_await_ms),
            (Some(2.0), Some(16.0), Some(2.0))
        );
        assert_eq!(d.dareq_sz_kb, Some(8.0));
        assert_eq!((d.f_per_s, d.f_await_ms), (Some(5.0), Some(2.0)));
        assert_eq!(d.aqu_sz, Some(1.5));
        assert_eq!(d.util_pct, Some(75.0));
        assert_eq!(d.write_bytes, Some(1000 * 512));
        assert_eq!(worst_await(&d), Some(("w_await", 20.0)));
    }

    #[test]
    fn idle_and_old_kernels_and_resets() {
        let a = counters("8 0 sda 10 0 80 5 0 0 0 0 0 5 5");
        let d = disk_between(&a, &a, &info(), None, 1.0);
        assert_eq!(
            (d.r_per_s, d.r_await_ms, d.rrqm_pct),
            (Some(0.0), Some(0.0), Some(0.0))
        );
        assert_eq!((d.d_per_s, d.f_per_s), (None, None));
        assert_eq!(worst_await(&d), None);
        let reset = counters("8 0 sda 1 0 8 1 0 0 0 0 0 1 1");
        let d = disk_between(&a, &reset, &info(), None, 1.0);
        assert_eq!((d.r_per_s, d.r_await_ms, d.rkb_per_s), (None, None, None));
        assert!(ever_used(&a) && !ever_used(&counters("7 2 loop2 0 0 0 0 0 0 0 0 0 0 0")));
    }
}
