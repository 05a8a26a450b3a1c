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
    if d.unmatched > 0 {
        writeln!(
            out,
            "  unmatched {} matched no query in flight (not counted)",
            crate::units::plural(d.unmatched, "answer")
        )?;
    }
    let dropped = [
        (d.names_dropped, "name"),
        (d.sources_dropped, "client"),
        (d.destinations_dropped, "server"),
    ];
    if dropped.iter().any(|(n, _)| *n > 0) {
        let parts: Vec<String> = dropped
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, by)| format!("{n} by {by}"))
            .collect();
        writeln!(
            out,
            "  dropped  queries not listed (table full): {}",
            parts.join(", ")
        )?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::model::dns::between;
    use crate::net::dns::{DnsCounts, NameCounts};

    #[test]
    fn tables_list_codes_and_names_escaped() {
        let mut c = DnsCounts {
            queries: 4,
            answers: 3,
            response_ms: vec![1.0, 2.0, 30.0],
            ..DnsCounts::default()
        };
        c.rcodes.insert("NOERROR".into(), 2);
        c.rcodes.insert("NXDOMAIN".into(), 1);
        let mut n = NameCounts {
            queries: 1,
            max_ms: Some(30.0),
            ..NameCounts::default()
        };
        n.rcodes.insert("NXDOMAIN".into(), 1);
        c.names.insert("evil\u{1b}]0;pwned\u{7}.test".into(), n);
        let mut out = Vec::new();
        write(&mut out, Some(&between(&c, 2.0))).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("2.0 queries/s, 1.5 answers/s"), "{text}");
        assert!(text.contains("answers  NOERROR 2, NXDOMAIN 1"), "{text}");
        assert!(text.contains("p99 30.0"), "{text}");
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text:?}"
        );
        assert!(text.contains("failing  evil\\e]0;pwned\\a.test"), "{text}");
        c.unmatched = 5;
        c.sources_dropped = 7;
        let mut out = Vec::new();
        write(&mut out, Some(&between(&c, 2.0))).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("unmatched 5 answers matched no query"),
            "{text}"
        );
        assert!(text.contains("(table full): 7 by client\n"), "{text}");
        let mut none = Vec::new();
        write(&mut none, None).unwrap();
        assert!(none.is_empty());
    }
}
