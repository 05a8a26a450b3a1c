//! `tacho bench mem` for people: the verdict, the warnings and a table per level.

use crate::membench::MemReport;
use crate::text::Escaped;
use crate::units::{format_bandwidth, format_size};
use std::io::Write;

/// Writes the memory report for a terminal: verdict, warnings and a table per level.
pub fn write_human(r: &MemReport, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "{}", Escaped(&verdict(r)))?;
    for w in &r.warnings {
        writeln!(out, "warning [{}]: {}", w.code, Escaped(&w.message))?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "{:<5} {:>9}  {:>11} {:>11} {:>11} {:>9}   {:>11} {:>11} {:>11} {:>9}",
        "level",
        "set",
        "read",
        "write",
        "copy",
        "latency",
        "read all",
        "write all",
        "copy all",
        "lat. all"
    )?;
    for l in &r.levels {
        write!(
            out,
            "{:<5} {:>9}  {:>11} {:>11} {:>11} {:>9}",
            l.name,
            format_size(l.size_bytes),
            format_bandwidth(l.read_bytes_per_s),
            format_bandwidth(l.write_bytes_per_s),
            format_bandwidth(l.copy_bytes_per_s),
            format!("{:.1} ns", l.latency_ns)
        )?;
        if let Some(a) = &l.all_threads {
            write!(
                out,
                "   {:>11} {:>11} {:>11} {:>9}",
                format_bandwidth(a.read_bytes_per_s),
                format_bandwidth(a.write_bytes_per_s),
                format_bandwidth(a.copy_bytes_per_s),
                format!("{:.1} ns", a.latency_ns)
            )?;
        }
        writeln!(out)?;
    }
    writeln!(out)?;
    let threads = r
        .levels
        .iter()
        .find_map(|l| l.all_threads.as_ref().map(|a| a.threads));
    writeln!(
        out,
        "median of {} repeats of {:.0} ms per figure; \"all\" = {} threads, shared levels split \
         between them; copy counts bytes copied; latency is a random pointer chase.",
        r.repeat,
        r.runtime_s * 1e3,
        threads.map_or("no other".into(), |t| t.to_string())
    )
}

fn verdict(r: &MemReport) -> String {
    let Some(dram) = r.levels.iter().find(|l| l.name == "DRAM") else {
        let first = &r.levels[0];
        return format!(
            "{} read {} on 1 thread, latency {:.1} ns",
            first.name,
            format_bandwidth(first.read_bytes_per_s),
            first.latency_ns
        );
    };
    let all = dram
        .all_threads
        .as_ref()
        .map(|a| {
            format!(
                ", {} with {} threads",
                format_bandwidth(a.read_bytes_per_s),
                a.threads
            )
        })
        .unwrap_or_default();
    format!(
        "DRAM read {} on 1 thread{all}; random access {:.0} ns",
        format_bandwidth(dram.read_bytes_per_s),
        dram.latency_ns
    )
}
