//! Prometheus text exposition format for node_exporter's textfile collector: a benchmark's
//! figures as gauges named `tacho_bench_*`, labelled by test, direction and device.
//!
//! Written to a temporary file in the target directory and renamed over the target, because
//! the collector may read the directory at any moment and must never see half a file.

use super::{Family, exposition};
use crate::bench::result::BenchReport;
use crate::io::LatencySummary;

/// Quantile label and field of [`LatencySummary`] (max is quantile 1, as Prometheus summaries do).
/// Reads one figure out of a latency summary.
type Pick = fn(&LatencySummary) -> u64;

const QUANTILES: [(&str, Pick); 6] = [
    ("0.5", |l| l.p50),
    ("0.9", |l| l.p90),
    ("0.99", |l| l.p99),
    ("0.999", |l| l.p99_9),
    ("0.9999", |l| l.p99_99),
    ("1", |l| l.max),
];

/// What the run is called outside the figures.
pub struct RunInfo<'a> {
    /// The run's `--label`, if given.
    pub label: Option<&'a str>,
    /// Id in the results store, when saved.
    pub run_id: Option<i64>,
    /// Seconds since the epoch when the run ended.
    pub timestamp_s: u64,
}

/// The exposition text for a finished benchmark.
pub fn render(report: &BenchReport, info: &RunInfo) -> String {
    let device = report.target.devices.first().map_or("", String::as_str);
    let mut families: Vec<Family> = vec![
        Family::new(
            "tacho_bench_iops",
            "I/O operations per second measured by tacho bench.",
        ),
        Family::new(
            "tacho_bench_bandwidth_bytes_per_second",
            "Bytes per second measured by tacho bench.",
        ),
        Family::summary(
            "tacho_bench_latency_seconds",
            "I/O latency from submission to completion, by quantile (1 is the maximum).",
        ),
        Family::summary(
            "tacho_bench_sync_latency_seconds",
            "fsync/fdatasync latency, by quantile (1 is the maximum).",
        ),
    ];
    let names = super::numbered(report.tests.iter().map(|t| t.name.as_str()));
    for (t, name) in report.tests.iter().zip(&names) {
        for (direction, d) in [("read", t.read), ("write", t.write)] {
            let Some(d) = d else { continue };
            let labels = [
                ("test", name.as_str()),
                ("direction", direction),
                ("device", device),
            ];
            families[0].sample(&labels, None, d.iops);
            families[1].sample(&labels, None, d.bw_bytes_per_s);
            latency(&mut families[2], &labels, &d.lat_ns, d.ios);
        }
        if let Some(sync) = t.sync {
            let labels = [
                ("test", name.as_str()),
                ("direction", "sync"),
                ("device", device),
            ];
            latency(&mut families[3], &labels, &sync.lat_ns, sync.count);
        }
    }
    let mut info_family = Family::new(
        "tacho_bench_run_info",
        "Always 1; the labels describe the last tacho bench run.",
    );
    let id = info.run_id.map(|i| i.to_string()).unwrap_or_default();
    let (suite, version) = report
        .suite
        .as_ref()
        .map_or((String::new(), String::new()), |s| {
            (s.name.to_string(), s.version.to_string())
        });
    info_family.sample(
        &[
            ("label", info.label.unwrap_or("")),
            ("run_id", &id),
            ("suite", &suite),
            ("suite_version", &version),
            ("target", &report.target.path),
            ("device", device),
            ("tool_version", report.tool_version),
        ],
        None,
        1.0,
    );
    let mut ts = Family::new(
        "tacho_bench_run_timestamp_seconds",
        "When the last tacho bench run ended, in seconds since the epoch.",
    );
    ts.sample(&[("device", device)], None, info.timestamp_s as f64);
    let mut interrupted = Family::new(
        "tacho_bench_run_interrupted",
        "1 when the last run was cut short and covers only the tests that finished.",
    );
    interrupted.sample(
        &[("device", device)],
        None,
        f64::from(u8::from(report.interrupted)),
    );
    families.extend([info_family, ts, interrupted]);
    exposition(&families)
}

/// A latency summary's quantiles, sum and count, in seconds.
fn latency(f: &mut Family, labels: &[(&str, &str)], lat: &LatencySummary, count: u64) {
    for (q, get) in QUANTILES {
        f.sample(labels, Some(q), get(lat) as f64 / 1e9);
    }
    // The sum of all latencies, recovered from the mean.
    let sum = lat.mean as f64 * count as f64 / 1e9;
    f.sample_named("_sum", labels, None, sum);
    f.sample_named("_count", labels, None, count as f64);
}
