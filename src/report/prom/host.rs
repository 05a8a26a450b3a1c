//! What `/metrics` adds to a `tacho top` sample about the host itself: the figures of the
//! latest stored benchmark of each suite this host ran, the verdicts of the settings audit
//! (`tacho check`), and the transparent-huge-page mode — what the shipped alerts need for etcd
//! fsync latency, THP on database hosts and benchmark regressions. Base units, as everywhere.

use super::{Family, exposition};
use crate::check::Finding;
use crate::compare::Metric;
use crate::store::StoredRun;

/// The host's figures to render.
pub struct HostFigures<'a> {
    /// The latest finished run of each suite (or kind) of this host.
    pub runs: &'a [StoredRun],
    /// `tacho check`'s findings, every severity.
    pub findings: &'a [Finding],
    /// `/sys/kernel/mm/transparent_hugepage/enabled`'s active choice.
    pub thp_enabled: Option<&'a str>,
}

/// The latencies exported per direction, as (metric, quantile label).
const LATENCIES: [(Metric, &str); 3] = [
    (Metric::LatP50, "0.5"),
    (Metric::LatP99, "0.99"),
    (Metric::LatMean, "mean"),
];

/// The host's families as exposition text.
pub fn render(h: &HostFigures) -> String {
    let mut iops = Family::new(
        "tacho_stored_bench_iops",
        "I/O operations per second of the latest stored benchmark of this host, per suite and test.",
    );
    let mut bw = Family::new(
        "tacho_stored_bench_bandwidth_bytes_per_second",
        "Bandwidth of the latest stored benchmark of this host, per suite and test.",
    );
    let mut ops = Family::new(
        "tacho_stored_bench_ops_per_second",
        "Operations per second of the latest stored CPU benchmark of this host.",
    );
    let mut lat = Family::new(
        "tacho_stored_bench_latency_seconds",
        "Latency of the latest stored benchmark of this host (quantile 0.5, 0.99 or mean); \
         direction sync is fsync/fdatasync.",
    );
    let mut when = Family::new(
        "tacho_stored_bench_timestamp_seconds",
        "When the latest stored benchmark of this suite ran, Unix time.",
    );
    for run in h.runs {
        let suite = run
            .suite
            .as_ref()
            .map_or_else(|| run.kind.to_string(), |(s, _)| s.clone());
        let kind = run.kind.as_str();
        if let Ok(t) = chrono::DateTime::parse_from_rfc3339(&run.created_at) {
            when.sample(
                &[
                    ("suite", &suite),
                    ("kind", kind),
                    ("run_id", &run.id.to_string()),
                ],
                None,
                t.timestamp() as f64,
            );
        }
        let names = super::numbered(run.tests.iter().map(|t| t.name.as_str()));
        for (test, name) in run.tests.iter().zip(&names) {
            for f in test.figures.iter().filter(|f| f.sample == 0) {
                let labels = [
                    ("suite", suite.as_str()),
                    ("test", name.as_str()),
                    ("direction", f.direction),
                ];
                if let Some(v) = f.iops {
                    iops.sample(&labels, None, v);
                }
                if let Some(v) = f.bw_bytes_per_s {
                    bw.sample(&labels, None, v);
                }
                if let Some(v) = f.ops_per_s {
                    ops.sample(&labels, None, v);
                }
                for (metric, quantile) in LATENCIES {
                    if let Some(ns) = metric.of(f) {
                        lat.sample(&labels, Some(quantile), ns / 1e9);
                    }
                }
            }
        }
    }
    let mut check = Family::new(
        "tacho_check_finding",
        "A tacho check verdict on a setting of this host (1 per finding; severity ok, info, \
         warn or crit).",
    );
    for f in h.findings {
        let severity = serde_json::to_value(f.severity)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        check.sample(
            &[
                ("id", f.id),
                ("subject", f.subject.as_deref().unwrap_or("")),
                ("severity", &severity),
            ],
            None,
            1.0,
        );
    }
    let mut thp = Family::new(
        "tacho_thp_enabled",
        "Transparent huge pages mode of this host (1 for the active one: always, madvise or \
         never).",
    );
    if let Some(mode) = h.thp_enabled {
        thp.sample(&[("mode", mode)], None, 1.0);
    }
    exposition(&[iops, bw, ops, lat, when, check, thp])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{RunKind, RunSource, RunStatus, StoredTest, figures};
    use serde_json::json;

    #[test]
    fn stored_figures_are_in_seconds_and_bytes_labelled_by_suite_and_test() {
        let test = json!({
            "name": "etcd \"wal\"", "read": null,
            "write": {"iops": 400.0, "bw_bytes_per_s": 920_000.0},
            "sync": {"lat_ns": {"p99": 3_100_000.0, "p50": 900_000.0}},
        });
        let run = StoredRun {
            id: 4,
            created_at: "2026-11-23T07:00:00Z".into(),
            label: None,
            kind: RunKind::Disk,
            status: RunStatus::Finished,
            source: RunSource::Bench,
            tool_version: None,
            suite: Some(("etcd".into(), 1)),
            host: json!({}),
            target: json!({}),
            extra: serde_json::Map::new(),
            tests: vec![StoredTest {
                name: "etcd \"wal\"".into(),
                figures: figures::of_test(&test),
                json: test,
            }],
            uuid: None,
        };
        let text = render(&HostFigures {
            runs: &[run],
            findings: &[],
            thp_enabled: Some("always"),
        });
        for line in [
            "tacho_stored_bench_iops{suite=\"etcd\",test=\"etcd \\\"wal\\\"\",direction=\"write\"} 400\n",
            "tacho_stored_bench_latency_seconds{suite=\"etcd\",test=\"etcd \\\"wal\\\"\",direction=\"sync\",quantile=\"0.99\"} 0.0031\n",
            "tacho_stored_bench_timestamp_seconds{suite=\"etcd\",kind=\"disk\",run_id=\"4\"} 1795417200\n",
            "tacho_thp_enabled{mode=\"always\"} 1\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert!(
            !text.contains("tacho_check_finding"),
            "no findings, no family"
        );
    }
}
