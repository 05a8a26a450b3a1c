//! The DNS section of `tacho top --batch --dns`, as dnstop's tables: totals, answers by code,
//! response times, then the failing and the slowest names. Names and addresses come off the
//! wire and are escaped.

use std::collections::BTreeMap;
use std::io::{self, Write};

use crate::diagnose::model::dns::{Dns, DnsName};
use crate::text::Escaped;

/// Writes the section when the sample has DNS figures.
pub fn write(out: &mut impl Write, dns: Option<&Dns>) -> io::Result<()> {
    let Some(d) = dns else {
        return Ok(());
    };
    let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
    writeln!(
        out,
        "\nDNS     {:.1} queries/s, {:.1} answers/s, {} unanswered; response ms p50 {} p90 {} p99 {}",
        d.queries_per_s,
        d.answers_per_s,
        d.unanswered,
        ms(d.response_p50_ms),
        ms(d.response_p90_ms),
        ms(d.response_p99_ms),
    )?;
    for (title, counts) in [
        ("answers", &d.rcodes),
        ("types", &d.qtypes),
        ("clients", &d.sources),
        ("servers", &d.destinations),
    ] {
        if !counts.is_empty() {
            writeln!(out, "  {title:<8} {}", joined(counts))?;
        }
    }
    names(out, "failing", &d.failing, |n| joined(&n.failures))?;
    names(out, "slowest", &d.slowest, |n| {
        n.max_ms.map_or("-".into(), |m| format!("{m:.1} ms"))
    })
}

/// `NOERROR 12, NXDOMAIN 3`, keys escaped.
fn joined(counts: &BTreeMap<String, u64>) -> String {
    counts
        .iter()
        .map(|(k, n)| format!("{} {n}", Escaped(k)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn names(
    out: &mut impl Write,
    title: &str,
    list: &[DnsName],
    what: impl Fn(&DnsName) -> String,
) -> io::Result<()> {
    for (i, n) in list.iter().enumerate() {
        let head = if i == 0 { title } else { "" };
        writeln!(
            out,
            "  {head:<8} {:<40} {:>6} queries  {}",
            Escaped(&n.name),
            n.queries,
            what(n)
        )?;
    }
    Ok(())
}
