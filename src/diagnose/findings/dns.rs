//! DNS verdicts: a resolver that fails or stops answering a share of the queries.

use super::{Code, Finding};
use crate::diagnose::model::TopSample;

/// Answers (or lost queries) in an interval before a share means anything.
const MIN_QUERIES: u64 = 10;
/// Share of answers that are server failures or refusals, or of queries lost, worth a look.
const FAILED_PCT: f64 = 20.0;

/// Failures the resolver reports (SERVFAIL, REFUSED) and queries it never answered; not
/// NXDOMAIN, which search domains make common on healthy machines.
pub(super) fn failures(s: &TopSample, out: &mut Vec<Finding>) {
    let Some(d) = &s.dns else { return };
    let answers: u64 = d.rcodes.values().sum();
    let failed: u64 = ["SERVFAIL", "REFUSED"]
        .iter()
        .filter_map(|c| d.rcodes.get(*c))
        .sum();
    let asked = answers + d.unanswered;
    if asked < MIN_QUERIES {
        return;
    }
    let pct = (failed + d.unanswered) as f64 / asked as f64 * 100.0;
    if pct < FAILED_PCT {
        return;
    }
    let worst = d
        .failing
        .iter()
        .find(|n| n.failures.contains_key("SERVFAIL") || n.failures.contains_key("REFUSED"))
        .map(|n| format!("; most failed: {}", n.name))
        .unwrap_or_default();
    let msg = format!(
        "DNS: {pct:.0}% of {asked} queries failed ({failed} SERVFAIL or REFUSED, {} unanswered){worst}",
        d.unanswered
    );
    out.push(Finding::warning(Code::DnsFailures, "dns", msg));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::findings::tests::fixture_top_sample;
    use crate::diagnose::model::dns::between;
    use crate::net::dns::{DnsCounts, NameCounts};

    fn sample(noerror: u64, servfail: u64, unanswered: u64) -> TopSample {
        let mut c = DnsCounts {
            answers: noerror + servfail,
            unanswered,
            ..DnsCounts::default()
        };
        c.rcodes.insert("NOERROR".into(), noerror);
        if servfail > 0 {
            c.rcodes.insert("SERVFAIL".into(), servfail);
            let mut n = NameCounts::default();
            n.rcodes.insert("SERVFAIL".into(), servfail);
            c.names.insert("fail.test".into(), n);
        }
        let mut s = fixture_top_sample();
        s.dns = Some(between(&c, 1.0));
        s
    }

    #[test]
    fn a_failing_resolver_is_named_and_a_healthy_one_is_not() {
        let mut out = Vec::new();
        failures(&sample(30, 10, 0), &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(
            out[0].message,
            "DNS: 25% of 40 queries failed (10 SERVFAIL or REFUSED, 0 unanswered); most failed: fail.test"
        );
        let mut out = Vec::new();
        failures(&sample(95, 5, 0), &mut out);
        failures(&sample(3, 3, 0), &mut out);
        assert!(out.is_empty(), "{out:?}");
        failures(&sample(10, 0, 10), &mut out);
        assert_eq!(out.len(), 1, "lost queries count: {out:?}");
    }
}
