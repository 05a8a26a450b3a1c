//! `tacho runs show --group NAME`: a group's runs as one result, in text or JSON.

use crate::compare::group::GroupResult;
use crate::text::Escaped;
use crate::units::{format_bandwidth, format_count, format_latency_ns};
use std::io::{self, Write};

/// The JSON document (`tacho.group.v1`).
pub fn write_json(g: &GroupResult, out: &mut impl Write) -> io::Result<()> {
    let doc = serde_json::json!({ "schema": "tacho.group.v1", "group": g });
    serde_json::to_writer_pretty(&mut *out, &doc)?;
    writeln!(out)
}

/// A line per test and direction: the group's totals and merged percentiles, then each host's
/// share, the slowest named.
pub fn write_text(g: &GroupResult, out: &mut impl Write) -> io::Result<()> {
    let hosts: Vec<String> = g
        .runs
        .iter()
        .map(|m| format!("{} (run {})", Escaped(&m.host), m.run))
        .collect();
    writeln!(
        out,
        "group {}: {} hosts started together: {}",
        Escaped(&g.group),
        g.runs.len(),
        hosts.join(", ")
    )?;
    writeln!(
        out,
        "percentiles are of every request of every host (their histograms merged)"
    )?;
    for t in &g.tests {
        for d in &t.directions {
            let lat = d
                .lat_ns
                .map_or("latency: - (no histograms kept)".into(), |p| {
                    format!(
                        "p50 {}, p99 {}, p99.9 {}, max {}",
                        format_latency_ns(p.p50 as f64),
                        format_latency_ns(p.p99 as f64),
                        format_latency_ns(p.p99_9 as f64),
                        format_latency_ns(p.max as f64)
                    )
                });
            writeln!(
                out,
                "{} {}: {} IOPS, {}, {lat}",
                Escaped(&t.name),
                d.direction,
                format_count(d.iops),
                format_bandwidth(d.bw_bytes_per_s)
            )?;
            let shares: Vec<String> = d
                .hosts
                .iter()
                .map(|h| format!("run {} {:.0}%", h.run, h.share_pct))
                .collect();
            let slowest = d.slowest.as_ref().map_or(String::new(), |m| {
                format!("; slowest: {} (run {})", Escaped(&m.host), m.run)
            });
            writeln!(out, "  shares: {}{slowest}", shares.join(", "))?;
        }
    }
    Ok(())
}
