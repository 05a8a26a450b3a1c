//! The fleet's window (`tacho top --from … --to … --db`): for each host of the shared store
//! that recorded in the window, its findings with how long they lasted and whom they named,
//! worst first.

use serde::Serialize;

use crate::diagnose::findings::Severity;
use crate::history::interval::Interval;
use crate::history::summary::{self, FindingSpan};
use crate::labels::Labels;

/// Schema of `tacho top --db … --json` over the fleet.
pub const SCHEMA: &str = "tacho.fleet.v1";

/// The fleet over a window.
#[derive(Debug, Clone, Serialize)]
pub struct Fleet {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// Start of the window, seconds since the Unix epoch.
    pub from_unix_s: f64,
    /// End of the window.
    pub to_unix_s: f64,
    /// Hosts selected that recorded in the window.
    pub hosts_recorded: usize,
    /// Those with findings, worst first.
    pub hosts: Vec<HostFindings>,
}

/// One host's findings over the window.
#[derive(Debug, Clone, Serialize)]
pub struct HostFindings {
    /// Its machine id.
    pub machine_id: String,
    /// Its host name.
    pub hostname: String,
    /// Its labels.
    pub labels: Labels,
    /// Intervals it recorded in the window.
    pub intervals: i64,
    /// Its worst finding's severity.
    pub worst: Severity,
    /// How long its findings lasted, summed over them, seconds.
    pub finding_s: f64,
    /// Each finding's spans, worst and longest first.
    pub findings: Vec<Span>,
}

/// A finding's span on a host.
#[derive(Debug, Clone, Serialize)]
pub struct Span {
    /// The span as the host's replay summary has it.
    #[serde(flatten)]
    pub span: FindingSpan,
    /// How long it lasted, seconds.
    pub duration_s: f64,
}

/// A host that recorded in the window: (machine id, host name, labels, intervals).
pub type Recorded = (String, String, Labels, i64);

/// The fleet's window from the hosts that recorded in it and, per host (by machine id), its
/// intervals with findings, oldest first.
pub fn build(
    from: f64,
    to: f64,
    recorded: Vec<Recorded>,
    mut findings: std::collections::HashMap<String, Vec<Interval>>,
) -> Fleet {
    let hosts_recorded = recorded.len();
    let mut hosts: Vec<HostFindings> = recorded
        .into_iter()
        .filter_map(|(machine_id, hostname, labels, intervals)| {
            let of_host = findings.remove(&machine_id)?;
            let mut spans: Vec<Span> = summary::of_intervals(from, to, of_host, 0)
                .findings
                .into_iter()
                .map(|span| Span {
                    duration_s: span.to_unix_s - span.from_unix_s,
                    span,
                })
                .collect();
            spans.sort_by(|a, b| {
                b.span
                    .severity
                    .cmp(&a.span.severity)
                    .then(b.duration_s.total_cmp(&a.duration_s))
            });
            let worst = spans.first()?.span.severity;
            Some(HostFindings {
                machine_id,
                hostname,
                labels,
                intervals,
                worst,
                finding_s: spans.iter().map(|s| s.duration_s).sum(),
                findings: spans,
            })
        })
        .collect();
    hosts.sort_by(|a, b| {
        b.worst
            .cmp(&a.worst)
            .then(b.finding_s.total_cmp(&a.finding_s))
            .then(a.hostname.cmp(&b.hostname))
            .then(a.machine_id.cmp(&b.machine_id))
    });
    Fleet {
        schema: SCHEMA,
        from_unix_s: from,
        to_unix_s: to,
        hosts_recorded,
        hosts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::findings::Code;
    use crate::history::interval::{Found, Named};

    fn found(start: f64, severity: Severity, comm: &str) -> Interval {
        Interval {
            start_unix_s: start,
            end_unix_s: start + 10.0,
            findings: vec![Found {
                code: Code::DiskBusy,
                severity,
                subject: "sda".into(),
                message: "busy".into(),
                culprits: vec![Named {
                    comm: comm.into(),
                    unit: None,
                    share_pct: 90.0,
                }],
            }],
            ..Interval::default()
        }
    }

    /// Consecutive intervals make one span; hosts sort by their worst finding, then by how
    /// long their findings lasted; a host without findings is only counted.
    #[test]
    fn hosts_sort_worst_first_and_spans_join() {
        let recorded = vec![
            ("a".into(), "a".into(), Labels::new(), 6),
            ("b".into(), "b".into(), Labels::new(), 6),
            ("c".into(), "c".into(), Labels::new(), 6),
        ];
        let mut findings = std::collections::HashMap::new();
        findings.insert(
            "a".to_owned(),
            vec![
                found(0.0, Severity::Warning, "dd"),
                found(10.0, Severity::Warning, "dd"),
                found(20.0, Severity::Warning, "dd"),
            ],
        );
        findings.insert("b".to_owned(), vec![found(30.0, Severity::Critical, "cp")]);
        let f = build(0.0, 60.0, recorded, findings);
        assert_eq!(f.hosts_recorded, 3);
        let names: Vec<&str> = f.hosts.iter().map(|h| h.hostname.as_str()).collect();
        assert_eq!(names, ["b", "a"]);
        assert_eq!(f.hosts[1].findings.len(), 1);
        assert_eq!(f.hosts[1].findings[0].duration_s, 30.0);
        assert_eq!(f.hosts[1].findings[0].span.culprits[0].intervals, 3);
    }
}
