//! Per-process IOPS and latency from the block tracer (biotop's view): for each process that
//! completed block I/O on a device in the interval, its requests per second (read, write and
//! all), bytes per second, and the p50/p99 of its requests' whole times (creation →
//! completion, as iostat's await counts them) with the part they spent queued; the same summed
//! per service. Only where `tacho top` traces block I/O with eBPF (root).

use std::collections::HashMap;

use serde::Serialize;

use super::blame::{Attribution, Culprit};
use super::process::Delta;
use crate::bpf::block::{Dev, Op, ProcIo};
use crate::bpf::hist::proc_percentile_us;
use crate::diagnose::sample::Sample;
use crate::diagnose::sample::devices::Devices;

/// The figures of one process (or service) on one device over the interval.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct BlockIoFigures {
    /// Requests completed per second, every operation (reads, writes, flushes, discards).
    pub iops: f64,
    /// Reads completed per second.
    pub read_iops: f64,
    /// Writes completed per second.
    pub write_iops: f64,
    /// Bytes completed per second.
    pub bytes_per_s: f64,
    /// Median whole time of a request (creation → completion), ms; `null` when no request's
    /// creation was seen (begun before tracing started).
    pub lat_p50_ms: Option<f64>,
    /// 99th percentile of that time, ms (from buckets a quarter octave wide, interpolated).
    pub lat_p99_ms: Option<f64>,
    /// Mean of that time, ms.
    pub lat_mean_ms: Option<f64>,
    /// Mean time a request waited before dispatch to the driver, ms.
    pub queue_mean_ms: Option<f64>,
    /// Share of the requests' whole time spent queued, percent (queue_mean over lat_mean).
    pub queued_pct: Option<f64>,
}

/// One process's block I/O on one device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BlockIoProcess {
    /// Its process id; `null` for requests no process submitted as tacho saw (begun before
    /// tracing started, or made by the block layer itself).
    pub pid: Option<u32>,
    /// Command name as the kernel gave it (escaped when shown as text).
    pub comm: String,
    /// The name's exact bytes in hex when they are not UTF-8 (`comm` is then lossy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm_hex: Option<String>,
    /// The service it runs in.
    pub unit: Option<String>,
    /// It exited during the interval.
    pub exited: bool,
    /// The device (kernel name).
    pub device: String,
    /// Its figures.
    #[serde(flatten)]
    pub figures: BlockIoFigures,
}

/// One service's block I/O on one device: its processes' requests together.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BlockIoUnit {
    /// The service (systemd unit).
    pub unit: String,
    /// The device (kernel name).
    pub device: String,
    /// How many of its processes did I/O there.
    pub processes: usize,
    /// Their figures together.
    #[serde(flatten)]
    pub figures: BlockIoFigures,
}

/// What one process (or service) did on one device, summed over operations.
#[derive(Default)]
struct Sum {
    reads: u64,
    writes: u64,
    requests: u64,
    bytes: u64,
    total_ns: u64,
    queue_ns: u64,
    latency: Vec<(u16, u64)>,
}

impl Sum {
    /// Saturating: a hostile history's counts near u64::MAX stop there, never panic.
    fn add(&mut self, t: &ProcIo) {
        let (reads, writes) = match t.op {
            Op::Read => (t.requests, 0),
            Op::Write => (0, t.requests),
            Op::Other => (0, 0),
        };
        self.merge(&Sum {
            reads,
            writes,
            requests: t.requests,
            bytes: t.bytes,
            total_ns: t.total_ns,
            queue_ns: t.queue_ns,
            latency: t.latency.clone(),
        });
    }

    fn merge(&mut self, o: &Sum) {
        self.reads = self.reads.saturating_add(o.reads);
        self.writes = self.writes.saturating_add(o.writes);
        self.requests = self.requests.saturating_add(o.requests);
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.total_ns = self.total_ns.saturating_add(o.total_ns);
        self.queue_ns = self.queue_ns.saturating_add(o.queue_ns);
        self.latency.extend_from_slice(&o.latency);
    }

    fn figures(&self, dt: f64) -> BlockIoFigures {
        let timed: f64 = self.latency.iter().map(|(_, c)| *c as f64).sum();
        let ms = |q: f64| proc_percentile_us(&self.latency, q).map(|us| us / 1000.0);
        let mean = |ns: u64| (timed > 0.0).then(|| ns as f64 / timed / 1e6);
        BlockIoFigures {
            iops: self.requests as f64 / dt,
            read_iops: self.reads as f64 / dt,
            write_iops: self.writes as f64 / dt,
            bytes_per_s: self.bytes as f64 / dt,
            lat_p50_ms: ms(0.50),
            lat_p99_ms: ms(0.99),
            lat_mean_ms: mean(self.total_ns),
            queue_mean_ms: mean(self.queue_ns),
            queued_pct: (timed > 0.0 && self.total_ns > 0)
                .then(|| self.queue_ns as f64 * 100.0 / self.total_ns as f64),
        }
    }
}

/// Every process that completed block I/O in the interval, per device, most requests first,
/// and the services they run in; `traced` is the tracer's interval (`b.block_io`).
pub(super) fn rows(
    traced: &[ProcIo],
    deltas: &[Delta],
    (a, b): (&Sample, &Sample),
    devices: &Devices,
    dt: f64,
) -> (Vec<BlockIoProcess>, Vec<BlockIoUnit>) {
    let mut by: HashMap<(u32, Dev), (Sum, &str)> = HashMap::new();
    for t in traced.iter().filter(|t| t.requests > 0 || t.bytes > 0) {
        by.entry((t.pid, t.dev))
            .or_insert_with(|| (Sum::default(), &t.comm))
            .0
            .add(t);
    }
    let device = |dev: Dev| {
        devices
            .get(&dev)
            .map_or_else(|| format!("{}:{}", dev.0, dev.1), |i| i.name.clone())
    };
    let mut units: HashMap<(String, String), (Sum, usize)> = HashMap::new();
    let mut procs: Vec<(BlockIoProcess, u64)> = by
        .into_iter()
        .map(|((pid, dev), (sum, comm))| {
            let named = match deltas.iter().find(|d| d.pid == pid && pid != 0) {
                Some(d) => Culprit::of(d, 0.0, traced_attribution()),
                None => super::culprits::traced_alone(pid, comm, (a, b), 0.0, traced_attribution()),
            };
            let device = device(dev);
            if let Some(u) = &named.unit {
                let e = units.entry((u.clone(), device.clone())).or_default();
                e.0.merge(&sum);
                e.1 += 1;
            }
            let row = BlockIoProcess {
                pid: named.pid,
                comm: named.comm,
                comm_hex: named.comm_hex,
                unit: named.unit,
                exited: named.exited,
                device,
                figures: sum.figures(dt),
            };
            (row, sum.requests)
        })
        .collect();
    procs.sort_by(|(x, xn), (y, yn)| {
        yn.cmp(xn)
            .then(y.figures.bytes_per_s.total_cmp(&x.figures.bytes_per_s))
            .then(x.pid.cmp(&y.pid))
            .then(x.device.cmp(&y.device))
    });
    let mut units: Vec<(BlockIoUnit, u64)> = units
        .into_iter()
        .map(|((unit, device), (sum, processes))| {
            let row = BlockIoUnit {
                unit,
                device,
                processes,
                figures: sum.figures(dt),
            };
            (row, sum.requests)
        })
        .collect();
    units.sort_by(|(x, xn), (y, yn)| {
        yn.cmp(xn)
            .then(x.unit.cmp(&y.unit))
            .then(x.device.cmp(&y.device))
    });
    (
        procs.into_iter().map(|(r, _)| r).collect(),
        units.into_iter().map(|(r, _)| r).collect(),
    )
}

fn traced_attribution() -> Attribution {
    Attribution::Exact {
        source: super::culprits::TRACED_SOURCE.into(),
    }
}

/// Gives the disk culprits eBPF named their figures on that device: a process its IOPS, p99
/// and queued share; one command's processes folded together their summed IOPS (each member
/// its own figures).
pub(super) fn annotate(
    disks: &mut HashMap<String, (super::culprits::Direction, Vec<Culprit>)>,
    rows: &[BlockIoProcess],
) {
    let traced = |c: &Culprit| matches!(&c.attribution, Attribution::Exact { source } if source == super::culprits::TRACED_SOURCE);
    let set = |c: &mut Culprit, device: &str| {
        let Some(pid) = c.pid else { return };
        if let Some(r) = rows
            .iter()
            .find(|r| r.pid == Some(pid) && r.device == device)
        {
            c.iops = Some(r.figures.iops);
            c.lat_p99_ms = r.figures.lat_p99_ms;
            c.queued_pct = r.figures.queued_pct;
        }
    };
    for (device, (_, culprits)) in disks.iter_mut() {
        for c in culprits.iter_mut().filter(|c| traced(c)) {
            set(c, device);
            for m in &mut c.members {
                set(m, device);
            }
            if c.processes.is_some() {
                let iops: Vec<f64> = c.members.iter().filter_map(|m| m.iops).collect();
                c.iops = (!iops.is_empty()).then(|| iops.iter().sum());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::hist::proc_bucket;

    fn io(op: Op, requests: u64, ms: &[(u64, u64)], queue_ns: u64) -> ProcIo {
        ProcIo {
            pid: 812,
            comm: "postgres".into(),
            cgroup: 1,
            dev: (254, 0),
            op,
            bytes: requests * 8192,
            requests,
            total_ns: ms.iter().map(|(m, c)| m * 1_000_000 * c).sum(),
            queue_ns,
            latency: ms
                .iter()
                .map(|&(m, c)| (proc_bucket(m * 1_000_000) as u16, c))
                .collect(),
        }
    }

    #[test]
    fn figures_add_operations_and_take_percentiles_of_their_times() {
        let mut s = Sum::default();
        // 2 s: 3,000 reads at 2 ms, 990 writes at 4 ms and 10 at 40 ms; 60% of it queued.
        s.add(&io(Op::Read, 3000, &[(2, 3000)], 0));
        s.add(&io(Op::Write, 1000, &[(4, 990), (40, 10)], 0));
        s.queue_ns = s.total_ns * 6 / 10;
        let f = s.figures(2.0);
        assert_eq!((f.iops, f.read_iops, f.write_iops), (2000.0, 1500.0, 500.0));
        assert_eq!(f.bytes_per_s, 4000.0 * 8192.0 / 2.0);
        let p50 = f.lat_p50_ms.unwrap();
        assert!((p50 - 2.0).abs() < 0.5, "{p50}");
        let p99 = f.lat_p99_ms.unwrap();
        assert!((p99 - 4.0).abs() < 1.0, "{p99}");
        let mean = (3000.0 * 2.0 + 990.0 * 4.0 + 10.0 * 40.0) / 4000.0;
        assert!((f.lat_mean_ms.unwrap() - mean).abs() < 1e-9);
        assert!((f.queued_pct.unwrap() - 60.0).abs() < 1e-6);
        assert!((f.queue_mean_ms.unwrap() - mean * 0.6).abs() < 1e-6);
    }

    #[test]
    fn culprits_traced_by_ebpf_get_their_row_s_figures_others_none() {
        use super::super::culprits::Direction;
        let row = |pid: u32, device: &str, iops: f64| BlockIoProcess {
            pid: Some(pid),
            comm: "dd".into(),
            comm_hex: None,
            unit: None,
            exited: false,
            device: device.into(),
            figures: BlockIoFigures {
                iops,
                lat_p99_ms: Some(3.0),
                queued_pct: Some(10.0),
                ..BlockIoFigures::default()
            },
        };
        let rows = [
            row(1, "vda", 100.0),
            row(1, "vdb", 7.0),
            row(2, "vda", 50.0),
        ];
        let culprit = |pid: u32, source: &str| {
            Culprit::named(
                Some(pid),
                "dd".into(),
                None,
                50.0,
                Attribution::Exact {
                    source: source.into(),
                },
            )
        };
        let traced = super::super::culprits::TRACED_SOURCE;
        let mut disks = HashMap::new();
        disks.insert(
            "vda".to_string(),
            (
                Direction::Writes,
                vec![culprit(1, traced), culprit(2, "cgroup v2 io.stat")],
            ),
        );
        annotate(&mut disks, &rows);
        let (_, c) = &disks["vda"];
        assert_eq!(
            (c[0].iops, c[0].lat_p99_ms, c[0].queued_pct),
            (Some(100.0), Some(3.0), Some(10.0))
        );
        // Not attributed by eBPF: no figures, though the tracer has its row.
        assert_eq!((c[1].iops, c[1].lat_p99_ms), (None, None));
    }

    #[test]
    fn a_hostile_history_s_huge_counts_saturate() {
        let mut s = Sum::default();
        let mut big = io(Op::Write, 1, &[(2, 1)], u64::MAX);
        big.requests = u64::MAX;
        big.bytes = u64::MAX;
        big.total_ns = u64::MAX;
        big.latency = vec![(40, u64::MAX), (95, u64::MAX), (u16::MAX, 3)];
        s.add(&big);
        s.add(&big);
        let f = s.figures(1.0);
        assert_eq!(f.iops, u64::MAX as f64);
        assert!(f.lat_p99_ms.is_some_and(f64::is_finite));
        assert!(f.queued_pct.is_some_and(|q| q <= 100.0));
    }

    #[test]
    fn requests_of_unknown_creation_count_but_give_no_latency() {
        let mut s = Sum::default();
        s.add(&io(Op::Read, 50, &[], 0));
        let f = s.figures(1.0);
        assert_eq!(f.iops, 50.0);
        assert_eq!(
            (f.lat_p50_ms, f.lat_p99_ms, f.lat_mean_ms, f.queued_pct),
            (None, None, None, None)
        );
    }
}
