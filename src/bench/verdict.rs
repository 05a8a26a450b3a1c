//! The first line of every benchmark: the answer, in words, before the table.

use super::result::{BenchReport, Judgement, Status, TestResult};
use crate::units::{format_bandwidth, format_count, format_latency_ns, format_size};
use crate::warning::Code;

/// How storage behaves, judged by the median latency of one 4 KiB random read at a time —
/// the figure that separates device classes most clearly (NVMe ≈ 10–100 µs, SATA SSD ≈ 100–300
/// µs, network and busy virtual disks ≈ 0.3–2 ms, spinning disks ≥ 2 ms of seek).
pub fn device_class(q1_read_p50_ns: u64) -> &'static str {
    match q1_read_p50_ns {
        0..=120_000 => "NVMe-class latency",
        120_001..=400_000 => "SSD-class latency",
        400_001..=2_000_000 => "network-storage-class latency",
        _ => "spinning-disk-class latency",
    }
}

/// A pass by less than this share of the threshold is called marginal.
const MARGINAL_FRACTION: f64 = 0.2;

/// The etcd check's status for a fdatasync p99 against its limit: `fail` at or over it,
/// `marginal` within a fifth of it, else `pass`. Both the live run and `compare` (for a run
/// that recorded no judgement, such as fio's) judge with it.
pub fn etcd_status(p99_ns: f64, limit_ns: f64) -> Status {
    if p99_ns >= limit_ns {
        Status::Fail
    } else if p99_ns >= limit_ns * (1.0 - MARGINAL_FRACTION) {
        Status::Marginal
    } else {
        Status::Pass
    }
}

/// The one-line answer at the top of the disk report: the target, then its headline figures or the
/// suite's judgement.
pub fn verdict(report: &BenchReport) -> String {
    let where_ = target_words(report);
    if report.tests.is_empty() {
        return format!("{where_}: interrupted before any test finished");
    }
    let body = match (&report.judgement, &report.suite) {
        (Some(j), _) => judgement_words(j),
        // The suites built around CrystalDiskMark's figures read best as those figures; the
        // others (k8s, iometer, oltp) as their named tests.
        (None, Some(s)) if ["quick", "cdm", "full"].contains(&s.name.as_str()) => {
            suite_summary(&report.tests)
        }
        (None, Some(_)) => report
            .tests
            .iter()
            .map(|t| format!("{} {} IOPS", t.name, format_count(t.total_iops())))
            .collect::<Vec<_>>()
            .join(", "),
        (None, None) => report
            .tests
            .iter()
            .map(custom_summary)
            .collect::<Vec<_>>()
            .join("; "),
    };
    let mut line = format!("{where_}: {body}");
    if report.interrupted {
        line.push_str(" (interrupted: partial results)");
    }
    // As the table prints them: one line per run warning, one per code among the tests'.
    let mut codes: Vec<Code> = report
        .tests
        .iter()
        .flat_map(|t| t.warnings.iter().map(|w| w.code))
        .collect();
    codes.sort_unstable();
    codes.dedup();
    let warnings = report.warnings.len() + codes.len();
    if warnings > 0 {
        line.push_str(&format!(
            " — {warnings} warning{}:",
            if warnings == 1 { "" } else { "s" }
        ));
    }
    line
}

fn judgement_words(j: &Judgement) -> String {
    let value = format_latency_ns(j.value_ns as f64);
    let limit = format_latency_ns(j.threshold_ns as f64);
    match j.status {
        Status::Pass => format!(
            "PASS for etcd: {} {value}, under the {limit} limit",
            j.metric
        ),
        Status::Marginal => format!(
            "MARGINAL for etcd: {} {value} is within 20% of the {limit} limit; production has \
             other writers, so expect slow WAL syncs under load",
            j.metric
        ),
        Status::Fail => format!(
            "FAIL for etcd: {} {value} is over the {limit} limit; etcd will log slow WAL syncs \
             and may lose leader elections",
            j.metric
        ),
    }
}

fn target_words(report: &BenchReport) -> String {
    let t = &report.target;
    match (t.devices.first(), &t.filesystem, &t.mount_point) {
        (Some(dev), Some(fs), Some(mp)) => format!("{dev} ({fs} on {mp})"),
        (Some(dev), _, _) => dev.clone(),
        (None, Some(fs), Some(mp)) => format!("{fs} on {mp}"),
        (None, _, _) => t.path.clone(),
    }
}

fn suite_summary(tests: &[TestResult]) -> String {
    let find = |name: &str| tests.iter().find(|t| t.name == name);
    let mut parts = Vec::new();
    if let Some(q1) = find("RND4K Q1T1 read").and_then(|t| t.read) {
        parts.push(format!(
            "{} ({} per 4k read at QD1)",
            device_class(q1.lat_ns.p50),
            format_latency_ns(q1.lat_ns.p50 as f64)
        ));
    }
    let iops =
        |name, label| find(name).map(|t| format!("{} {label}", format_count(t.total_iops())));
    let bw =
        |name, label| find(name).map(|t| format!("{} {label}", format_bandwidth(t.total_bw())));
    parts.extend(iops("RND4K Q32T1 read", "IOPS random read"));
    parts.extend(iops("RND4K Q32T1 write", "random write at QD32"));
    parts.extend(bw("SEQ1M Q8T1 read", "sequential read"));
    parts.extend(bw("SEQ1M Q8T1 write", "write"));
    if let Some(sync) = tests.iter().find_map(|t| t.sync) {
        parts.push(format!(
            "fdatasync p99 {}",
            format_latency_ns(sync.lat_ns.p99 as f64)
        ));
    }
    if parts.is_empty() {
        return tests
            .iter()
            .map(custom_summary)
            .collect::<Vec<_>>()
            .join("; ");
    }
    parts.join(", ")
}

fn custom_summary(t: &TestResult) -> String {
    let size = if t.bssplit.is_empty() {
        format_size(t.bs_bytes)
    } else {
        "mix".into()
    };
    let mut s = format!("{} {size} QD{}", t.rw, t.iodepth);
    if t.numjobs > 1 {
        s.push_str(&format!("×{}", t.numjobs));
    }
    let p99 = [t.read, t.write]
        .iter()
        .flatten()
        .map(|d| d.lat_ns.p99)
        .max()
        .unwrap_or(0);
    s.push_str(&format!(
        ": {} IOPS, {}, p99 {}",
        format_count(t.total_iops()),
        format_bandwidth(t.total_bw()),
        format_latency_ns(p99 as f64)
    ));
    if let Some(sync) = t.sync {
        s.push_str(&format!(
            ", flush p99 {}",
            format_latency_ns(sync.lat_ns.p99 as f64)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_by_latency() {
        assert_eq!(device_class(60_000), "NVMe-class latency");
        assert_eq!(device_class(200_000), "SSD-class latency");
        assert_eq!(device_class(900_000), "network-storage-class latency");
        assert_eq!(device_class(8_000_000), "spinning-disk-class latency");
    }
}
