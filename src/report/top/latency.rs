//! `tacho top --latency`: per-device queue, service and total time (log2 histograms like
//! biolatency, percentiles from finer buckets) and the bytes each process submitted to each
//! device, from the eBPF block tracer. Text for `--batch`, one JSON object per interval for
//! `--json`.

use std::io::Write;

use serde::Serialize;

use crate::bpf::block::{BlockSample, Dev, DevLatency, Op};
use crate::bpf::hist::{bounds_us, log2_us, percentile_us};
use crate::text::escape;

/// One device's latency in one interval.
#[derive(Serialize)]
struct DeviceOut<'a> {
    device: &'a str,
    major: u32,
    minor: u32,
    queue: Split,
    service: Split,
    total: Split,
}

/// One histogram with its percentiles (µs, `null` when no request completed).
#[derive(Serialize)]
struct Split {
    requests: u64,
    p50_us: Option<f64>,
    p90_us: Option<f64>,
    p99_us: Option<f64>,
    /// Counts per log2 slot: slot i holds [2^i, 2^(i+1)) µs, slot 0 also below 1 µs.
    log2_us: Vec<u64>,
    /// The finer buckets the percentiles come from, non-empty ones only: [low µs, high µs,
    /// count], so intervals can be merged without losing precision.
    buckets: Vec<(f64, f64, u64)>,
}

fn split(hist: &[u64]) -> Split {
    let mut log2 = log2_us(hist);
    let end = log2.iter().rposition(|&c| c > 0).map_or(0, |i| i + 1);
    log2.truncate(end);
    Split {
        requests: hist.iter().sum(),
        p50_us: percentile_us(hist, 0.50),
        p90_us: percentile_us(hist, 0.90),
        p99_us: percentile_us(hist, 0.99),
        log2_us: log2,
        buckets: hist
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(b, &c)| {
                let (low, high) = bounds_us(b);
                (low, high, c)
            })
            .collect(),
    }
}

/// One process's I/O to one device.
#[derive(Serialize)]
struct ProcOut<'a> {
    pid: u32,
    comm: &'a str,
    cgroup: u64,
    device: &'a str,
    op: Op,
    bytes: u64,
    requests: u64,
}

/// A sample with device names resolved by the caller (`name(dev)`), and the interval's
/// verdict (top's).
pub(crate) fn write_json(
    out: &mut impl Write,
    interval_s: f64,
    verdict: &str,
    sample: &BlockSample,
    name: &dyn Fn(Dev) -> String,
) -> std::io::Result<()> {
    let names: Vec<(Dev, String)> = devices(sample).into_iter().map(|d| (d, name(d))).collect();
    let find = |d: Dev| {
        names
            .iter()
            .find(|(n, _)| *n == d)
            .map_or("?", |(_, s)| s.as_str())
    };
    let devices: Vec<DeviceOut> = names
        .iter()
        .filter_map(|(dev, device)| {
            let lat = sample.latency.get(dev)?;
            Some(DeviceOut {
                device,
                major: dev.0,
                minor: dev.1,
                queue: split(&lat.queue),
                service: split(&lat.service),
                total: split(&lat.total),
            })
        })
        .collect();
    let processes: Vec<ProcOut> = sample
        .procs
        .iter()
        .map(|p| ProcOut {
            pid: p.pid,
            comm: &p.comm,
            cgroup: p.cgroup,
            device: find(p.dev),
            op: p.op,
            bytes: p.bytes,
            requests: p.requests,
        })
        .collect();
    let doc = serde_json::json!({
        "schema": "tacho.top.latency.v1",
        "verdict": verdict,
        "interval_s": interval_s,
        "source": "ebpf",
        "devices": devices,
        "processes": processes,
        "dropped_requests": sample.dropped,
    });
    serde_json::to_writer(&mut *out, &doc)?;
    writeln!(out)
}

/// The same as text: a percentile line and a histogram per device, then the processes.
pub(crate) fn write_text(
    out: &mut impl Write,
    sample: &BlockSample,
    top: usize,
    name: &dyn Fn(Dev) -> String,
) -> std::io::Result<()> {
    let us = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    writeln!(
        out,
        "Block latency (eBPF; µs): queue = submit→dispatch, service = dispatch→done, total = both"
    )?;
    for dev in devices(sample) {
        let Some(DevLatency {
            queue,
            service,
            total,
        }) = sample.latency.get(&dev)
        else {
            continue;
        };
        let device = name(dev);
        for (label, hist) in [("queue", queue), ("service", service), ("total", total)] {
            let s = split(hist);
            writeln!(
                out,
                "{:<10} {label:<7} n={:<8} p50 {:>7} p90 {:>7} p99 {:>7}",
                escape(&device),
                s.requests,
                us(s.p50_us),
                us(s.p90_us),
                us(s.p99_us)
            )?;
            let peak = s.log2_us.iter().copied().max().unwrap_or(0).max(1);
            for (slot, &count) in s.log2_us.iter().enumerate() {
                let low = if slot == 0 { 0 } else { 1u64 << slot };
                let bar = "*".repeat(((count * 40).div_ceil(peak)) as usize);
                writeln!(
                    out,
                    "  {low:>10} -> {:<10} {count:>9} |{bar:<40}|",
                    (1u64 << (slot + 1)) - 1
                )?;
            }
        }
    }
    if sample.dropped > 0 {
        writeln!(
            out,
            "{} not counted: the tracer's process or device table is full",
            crate::units::plural(sample.dropped, "request")
        )?;
    }
    writeln!(
        out,
        "{:>8} {:<16} {:<10} {:<6} {:>12} {:>9}",
        "PID", "COMMAND", "DEVICE", "OP", "BYTES", "REQS"
    )?;
    for p in sample.procs.iter().take(top) {
        let op = match p.op {
            Op::Read => "read",
            Op::Write => "write",
            Op::Other => "other",
        };
        writeln!(
            out,
            "{:>8} {:<16} {:<10} {op:<6} {:>12} {:>9}",
            p.pid,
            escape(&p.comm),
            escape(&name(p.dev)),
            p.bytes,
            p.requests
        )?;
    }
    writeln!(out)
}

fn devices(sample: &BlockSample) -> Vec<Dev> {
    let mut devs: Vec<Dev> = sample.latency.keys().copied().collect();
    devs.extend(sample.procs.iter().map(|p| p.dev));
    devs.sort_unstable();
    devs.dedup();
    devs
}
