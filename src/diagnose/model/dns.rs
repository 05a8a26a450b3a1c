//! DNS over the interval, from the capture's counts: rates, answers by code, response-time
//! percentiles, and the names that fail or answer slowest (as dnstop's tables).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::net::dns::DnsCounts;
use crate::stats::quantile;

/// Names listed in each table.
const TOP: usize = 10;

/// One name with how often it was asked and failed, and its slowest answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DnsName {
    /// The name asked (lower case, as captured; escape before printing).
    pub name: String,
    /// Queries for it.
    pub queries: u64,
    /// Answers that were not NOERROR, by code.
    pub failures: BTreeMap<String, u64>,
    /// Slowest answer, milliseconds.
    pub max_ms: Option<f64>,
}

/// DNS traffic seen on this machine's interfaces over the interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dns {
    /// Queries per second.
    pub queries_per_s: f64,
    /// Answers per second.
    pub answers_per_s: f64,
    /// Queries given up without an answer after 5 s.
    pub unanswered: u64,
    /// Answers by response code, counts.
    pub rcodes: BTreeMap<String, u64>,
    /// Queries by record type, counts.
    pub qtypes: BTreeMap<String, u64>,
    /// Queries by client address, counts (the busiest ten).
    pub sources: BTreeMap<String, u64>,
    /// Queries by server address and port, counts (the busiest ten).
    pub destinations: BTreeMap<String, u64>,
    /// Response time percentiles of the matched answers, milliseconds.
    pub response_p50_ms: Option<f64>,
    /// 90th percentile.
    pub response_p90_ms: Option<f64>,
    /// 99th percentile.
    pub response_p99_ms: Option<f64>,
    /// Names with the most failed answers (NXDOMAIN, SERVFAIL, REFUSED, …).
    pub failing: Vec<DnsName>,
    /// Names with the slowest answers.
    pub slowest: Vec<DnsName>,
    /// Queries whose name was not kept (the name table was full).
    pub names_dropped: u64,
    /// Queries whose client was not kept (the client table was full).
    pub sources_dropped: u64,
    /// Queries whose server was not kept (the server table was full).
    pub destinations_dropped: u64,
    /// Datagrams that said they were answers but matched no query in flight (not counted
    /// as answers: anyone can send them).
    pub unmatched: u64,
    /// Datagrams on port 53 that were not DNS.
    pub malformed: u64,
}

/// The interval's view of `c`, counted over `dt` seconds.
pub(crate) fn between(c: &DnsCounts, dt: f64) -> Dns {
    let names: Vec<DnsName> = c
        .names
        .iter()
        .map(|(name, n)| DnsName {
            name: name.clone(),
            queries: n.queries,
            failures: n
                .rcodes
                .iter()
                .filter(|(code, _)| code.as_str() != "NOERROR")
                .map(|(code, k)| (code.clone(), *k))
                .collect(),
            max_ms: n.max_ms,
        })
        .collect();
    let failed = |n: &DnsName| n.failures.values().sum::<u64>();
    let mut failing: Vec<DnsName> = names.iter().filter(|n| failed(n) > 0).cloned().collect();
    failing.sort_by(|a, b| failed(b).cmp(&failed(a)).then(a.name.cmp(&b.name)));
    failing.truncate(TOP);
    let mut slowest: Vec<DnsName> = names.into_iter().filter(|n| n.max_ms.is_some()).collect();
    slowest.sort_by(|a, b| {
        b.max_ms
            .partial_cmp(&a.max_ms)
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    slowest.truncate(TOP);
    let mut ms = c.response_ms.clone();
    let mut pct = |q: f64| quantile(&mut ms, q);
    Dns {
        queries_per_s: c.queries as f64 / dt,
        answers_per_s: c.answers as f64 / dt,
        unanswered: c.unanswered,
        rcodes: c.rcodes.clone(),
        qtypes: c.qtypes.clone(),
        sources: busiest(&c.sources),
        destinations: busiest(&c.destinations),
        response_p50_ms: pct(0.5),
        response_p90_ms: pct(0.9),
        response_p99_ms: pct(0.99),
        failing,
        slowest,
        names_dropped: c.names_dropped,
        sources_dropped: c.sources_dropped,
        destinations_dropped: c.destinations_dropped,
        unmatched: c.unmatched,
        malformed: c.malformed,
    }
}

/// The ten largest counts of `m`.
fn busiest(m: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let mut v: Vec<(&String, &u64)> = m.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1));
    v.into_iter()
        .take(TOP)
        .map(|(k, n)| (k.clone(), *n))
        .collect()
}
