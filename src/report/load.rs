//! `tacho load`'s text: the request, one line per step (the latency-vs-throughput curve), the
//! knee with the steps on both sides, what bent on the server, the errors by kind.

use crate::load::{Report, Step};
use crate::text::Escaped;
use crate::units::format_latency_ns;
use std::io::{self, Write};

/// The server's findings, one indented line each, its text escaped.
fn findings(found: &[crate::load::ServerFinding], out: &mut dyn Write) -> io::Result<()> {
    for f in found {
        writeln!(
            out,
            "  {} {}: {}",
            f.code,
            Escaped(&f.subject),
            Escaped(&f.message)
        )?;
    }
    Ok(())
}

/// Writes the report as text.
pub fn write(r: &Report, out: &mut dyn Write) -> io::Result<()> {
    let t = &r.target;
    let plural = if t.connections == 1 { "" } else { "s" };
    if let [u] = t.urls.as_slice() {
        write!(out, "{} {}", Escaped(&u.method), Escaped(&u.url))?;
    } else {
        writeln!(out, "{} URLs, taken in turn by weight:", t.urls.len())?;
        for u in &t.urls {
            writeln!(
                out,
                "  {:>5} {} {}",
                u.weight,
                Escaped(&u.method),
                Escaped(&u.url)
            )?;
        }
        write!(out, "each origin")?;
    }
    let origins: Vec<String> = t
        .origins
        .iter()
        .map(|o| {
            let tls = match (&o.tls_version, o.verified) {
                (Some(v), Some(false)) => {
                    format!(", {v}, certificate NOT checked (--insecure)")
                }
                (Some(v), _) => format!(", {v}"),
                (None, _) => String::new(),
            };
            if t.origins.len() == 1 {
                format!("{}, {}{tls}", o.address, o.protocol)
            } else {
                format!("{} {}, {}{tls}", Escaped(&o.origin), o.address, o.protocol)
            }
        })
        .collect();
    let streams = if t.streams > 1 && t.origins.iter().any(|o| o.protocol == "HTTP/2") {
        format!(" (up to {} HTTP/2 streams each)", t.streams)
    } else {
        String::new()
    };
    writeln!(
        out,
        " ({}), {} connection{plural}{streams}; latency from each request's due time",
        origins.join("; "),
        t.connections,
    )?;
    writeln!(
        out,
        "{:>9} {:>9} {:>8} {:>7} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9}  bent",
        "offered", "achieved", "ok", "errors", "unsent", "p50", "p90", "p99", "p99.9", "max"
    )?;
    for s in &r.steps {
        let lat = |f: fn(&crate::load::Latency) -> f64| {
            s.latency_ns
                .as_ref()
                .map_or_else(|| "-".to_string(), |l| format_latency_ns(f(l)))
        };
        writeln!(
            out,
            "{:>9} {:>9.1} {:>8} {:>7} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9}  {}",
            s.offered_rps,
            s.achieved_rps,
            s.ok,
            s.errors.total(),
            s.unsent,
            lat(|l| l.p50),
            lat(|l| l.p90),
            lat(|l| l.p99),
            lat(|l| l.p99_9),
            lat(|l| l.max),
            if s.bent.is_empty() { "-" } else { "yes" }
        )?;
    }
    let errors: Vec<String> = r
        .steps
        .iter()
        .filter(|s| s.errors.total() > 0)
        .map(|s| {
            let kinds: Vec<String> = s
                .errors
                .kinds()
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            format!("{} rps: {}", s.offered_rps, kinds.join(", "))
        })
        .collect();
    if !errors.is_empty() {
        writeln!(out, "errors: {}", errors.join("; "))?;
    }
    if t.urls.len() > 1 {
        writeln!(out, "by URL (all steps):")?;
        for (i, u) in t.urls.iter().enumerate() {
            let mut sum = crate::load::UrlCounts::default();
            for c in r.steps.iter().filter_map(|s| s.by_url.get(i)) {
                sum += *c;
            }
            let kinds: Vec<String> = sum
                .errors
                .kinds()
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            writeln!(
                out,
                "  {} {}: sent {}, ok {}{}",
                Escaped(&u.method),
                Escaped(&u.url),
                sum.sent,
                sum.ok,
                if kinds.is_empty() {
                    String::new()
                } else {
                    format!(", {}", kinds.join(", "))
                }
            )?;
        }
    }
    if let Some(k) = &r.knee {
        match k.bent {
            Some(b) => {
                let bent = &r.steps[b];
                write!(out, "knee: {:.0} requests a second at most", k.rps)?;
                if let Some(h) = k.held {
                    write!(out, "; held at {}", figures(&r.steps[h]))?;
                }
                writeln!(out, "; bent at {}: {}", figures(bent), bent.bent.join("; "))?;
            }
            None => writeln!(
                out,
                "no knee up to {} requests a second (the most delivered: {:.0})",
                r.steps.last().map_or(0.0, |s| s.offered_rps),
                k.rps
            )?,
        }
        if let (Some(b), Some(what)) = (k.bent, &k.what_bent) {
            let first = r.steps.first().map_or(0.0, |s| s.offered_rps);
            if what.is_empty() {
                writeln!(
                    out,
                    "on the server at {} rps: no finding that was not there at {first} rps",
                    r.steps[b].offered_rps
                )?;
            } else {
                writeln!(
                    out,
                    "on the server at {} rps (not at {first} rps):",
                    r.steps[b].offered_rps
                )?;
                findings(what, out)?;
            }
        }
    } else if let Some(s) = r.steps.first() {
        if !s.bent.is_empty() {
            writeln!(out, "the service did not keep up: {}", s.bent.join("; "))?;
        }
        if let Some(lag) = &s.schedule_lag_ns {
            writeln!(
                out,
                "sent late by this generator: p50 {}, p99 {}, max {}",
                format_latency_ns(lag.p50),
                format_latency_ns(lag.p99),
                format_latency_ns(lag.max)
            )?;
        }
        if let Some(found) = s.server.as_ref().filter(|f| !f.is_empty()) {
            writeln!(out, "on the server:")?;
            findings(found, out)?;
        }
    }
    if r.interrupted {
        writeln!(out, "interrupted: the steps above are what was measured")?;
    }
    for n in &r.notes {
        writeln!(out, "note: {}", Escaped(n))?;
    }
    Ok(())
}

/// `200 rps offered (achieved 199, p99 6.1ms)`.
fn figures(s: &Step) -> String {
    let p99 = s
        .latency_ns
        .as_ref()
        .map_or_else(|| "-".to_string(), |l| format_latency_ns(l.p99));
    format!(
        "{} rps offered (achieved {:.0}, p99 {p99})",
        s.offered_rps, s.achieved_rps
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::load::knee::{Knee, Rule};
    use crate::load::{Errors, Latency, ServerFinding, TargetInfo};

    fn step(offered: f64, achieved: f64, bent: &[&str]) -> Step {
        Step {
            offered_rps: offered,
            duration_s: 1.0,
            due: offered as u64,
            sent: offered as u64,
            unsent: 0,
            ok: achieved as u64,
            errors: Errors {
                timeout: 2,
                ..Errors::default()
            },
            achieved_rps: achieved,
            latency_ns: Some(Latency {
                mean: 2e6,
                p50: 1e6,
                p90: 3e6,
                p99: 5e6,
                p99_9: 6e6,
                max: 7e6,
            }),
            schedule_lag_ns: None,
            by_url: Vec::new(),
            bent: bent.iter().map(|b| b.to_string()).collect(),
            server: None,
        }
    }

    /// A ramp of two steps that bent at the second, the server's finding carrying an escape.
    pub(crate) fn report() -> Report {
        Report {
            schema: crate::load::SCHEMA,
            tool_version: "0",
            host: crate::kernel::host::Host::read(&crate::kernel::SysRoot::new(
                "/nonexistent",
                "/nonexistent",
            )),
            target: TargetInfo {
                url: "http://127.0.0.1:8080/".into(),
                address: "127.0.0.1:8080".into(),
                method: "GET".into(),
                urls: vec![crate::load::UrlInfo {
                    url: "http://127.0.0.1:8080/".into(),
                    method: "GET".into(),
                    weight: 1,
                }],
                origins: vec![crate::load::Origin {
                    origin: "http://127.0.0.1:8080".into(),
                    address: "127.0.0.1:8080".into(),
                    protocol: "HTTP/1.1",
                    tls_version: None,
                    verified: None,
                }],
                connections: 1,
                streams: 10,
                timeout_s: 2.0,
                body_bytes: 0,
                local: true,
            },
            mode: "ramp",
            rule: Rule::new(None),
            steps: vec![
                step(100.0, 100.0, &[]),
                step(200.0, 150.0, &["achieved 75%"]),
            ],
            knee: Some(Knee {
                rps: 150.0,
                held: Some(0),
                bent: Some(1),
                what_bent: Some(vec![ServerFinding {
                    code: "cpu_saturated".into(),
                    subject: "cpu".into(),
                    message: "busy: evil\x1b[2J".into(),
                }]),
            }),
            notes: Vec::new(),
            interrupted: false,
        }
    }

    #[test]
    fn the_curve_the_knee_and_what_bent_with_text_from_the_system_escaped() {
        let report = report();
        let mut out = Vec::new();
        write(&report, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("GET http://127.0.0.1:8080/ (127.0.0.1:8080, HTTP/1.1), 1 connection;")
        );
        assert!(text.contains("knee: 150 requests a second at most; held at 100 rps offered"));
        assert!(
            text.contains("bent at 200 rps offered (achieved 150, p99 5"),
            "{text}"
        );
        assert!(
            text.contains("errors: 100 rps: timeout 2; 200 rps: timeout 2"),
            "{text}"
        );
        assert!(
            text.contains("on the server at 200 rps (not at 100 rps):"),
            "{text}"
        );
        assert!(!text.contains('\x1b'), "{text}");
    }
}
