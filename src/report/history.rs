//! The text form of a history window (`tacho top --from … --to …`).

use std::io::{self, Write};

use chrono::{Local, TimeZone};

use crate::history::summary::{NamedTotal, Peak, Summary};
use crate::text::Escaped;
use crate::units::format_bytes_approx;

/// Local wall-clock time of a Unix time: `02:13:05`, with the date when `dated`.
fn clock(unix_s: f64, dated: bool) -> String {
    let format = if dated {
        "%Y-%m-%d %H:%M:%S"
    } else {
        "%H:%M:%S"
    };
    Local
        .timestamp_opt(unix_s.floor() as i64, 0)
        .single()
        .map_or_else(|| format!("{unix_s:.0}"), |t| t.format(format).to_string())
}

/// Who a finding named: `dd (backup.service) 93% in 4 intervals, …`, escaped.
pub fn named(culprits: &[NamedTotal]) -> String {
    culprits
        .iter()
        .map(|c| {
            let unit = c
                .unit
                .as_deref()
                .map(|u| format!(" ({})", Escaped(u)))
                .unwrap_or_default();
            format!(
                "{}{unit} up to {:.0}% in {}",
                Escaped(&c.comm),
                c.peak_share_pct,
                crate::units::plural(c.intervals as u64, "interval")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Writes the summary: window, findings with their spans, totals, top lists, peaks.
pub fn write_summary(out: &mut impl Write, s: &Summary) -> io::Result<()> {
    writeln!(
        out,
        "{} – {}: {} ({:.0} s){}",
        clock(s.from_unix_s, true),
        clock(s.to_unix_s, true),
        crate::units::plural(s.intervals as u64, "interval"),
        s.covered_s,
        if s.gaps > 0 {
            format!(
                ", {} where nothing was recorded",
                crate::units::plural(s.gaps as u64, "gap")
            )
        } else {
            String::new()
        }
    )?;
    if s.intervals == 0 {
        writeln!(out, "nothing was recorded in this window")?;
        return Ok(());
    }
    if s.exit_overruns > 0 {
        writeln!(
            out,
            "note: some exit records were lost ({} overruns of the kernel's buffer): processes \
             that exited in this window may be missing or undercounted",
            s.exit_overruns
        )?;
    }
    writeln!(out, "\nFindings")?;
    if s.findings.is_empty() {
        writeln!(out, "  nothing stood out")?;
    }
    for f in &s.findings {
        writeln!(
            out,
            "  {}–{}  {:?}  {}",
            clock(f.from_unix_s, false),
            clock(f.to_unix_s, false),
            f.severity,
            Escaped(&f.message)
        )?;
        if !f.culprits.is_empty() {
            writeln!(out, "      named: {}", named(&f.culprits))?;
        }
    }
    writeln!(out, "\nDisks               read       written   peak util")?;
    for d in &s.disks {
        writeln!(
            out,
            "  {:<14} {:>10}  {:>10}   {:>5.1}% at {}",
            Escaped(&d.display_name).to_string(),
            format_bytes_approx(d.read_bytes),
            format_bytes_approx(d.write_bytes),
            d.peak_util_pct,
            clock(d.peak_util_unix_s, false)
        )?;
    }
    writeln!(out, "\nTop processes by I/O      read       written")?;
    for p in &s.top_io {
        writeln!(
            out,
            "  {:>7} {:<16} {:>10}  {:>10}",
            p.pid,
            Escaped(&p.comm).to_string(),
            format_bytes_approx(p.read_bytes),
            format_bytes_approx(p.write_bytes)
        )?;
    }
    writeln!(out, "\nTop processes by CPU")?;
    for p in &s.top_cpu {
        writeln!(
            out,
            "  {:>7} {:<16} {:>9.1} s",
            p.pid,
            Escaped(&p.comm).to_string(),
            p.cpu_s
        )?;
    }
    if !s.services.is_empty() {
        writeln!(out, "\nTop services (cgroups) by I/O")?;
        for c in &s.services {
            writeln!(
                out,
                "  {:<40} read {:>10}  written {:>10}",
                Escaped(&c.path).to_string(),
                format_bytes_approx(c.read_bytes),
                format_bytes_approx(c.write_bytes)
            )?;
        }
    }
    writeln!(out, "\nPeaks")?;
    let pct = |name: &str, p: &Option<Peak>, out: &mut dyn Write| -> io::Result<()> {
        match p {
            Some(p) => writeln!(
                out,
                "  {name:<24} {:>6.1}% at {}",
                p.value,
                clock(p.unix_s, false)
            ),
            None => writeln!(out, "  {name:<24} not measured"),
        }
    };
    pct("CPU busy", &s.peaks.cpu_busy_pct, out)?;
    pct("I/O stall (PSI some)", &s.peaks.io_stall_pct, out)?;
    pct("memory stall (PSI some)", &s.peaks.memory_stall_pct, out)?;
    if let Some(p) = s.peaks.min_available_bytes {
        writeln!(
            out,
            "  {:<24} {:>7} at {}",
            "lowest available memory",
            format_bytes_approx(p.value as u64),
            clock(p.unix_s, false)
        )?;
    }
    Ok(())
}

/// Writes the fleet's window: each host with findings (worst first), its findings with how
/// long they lasted and whom they named; the hosts without findings as a count.
#[cfg(feature = "pg")]
pub fn write_fleet(out: &mut impl Write, f: &crate::history::fleet::Fleet) -> io::Result<()> {
    writeln!(
        out,
        "{} – {}: {} recorded, {} with findings",
        clock(f.from_unix_s, true),
        clock(f.to_unix_s, true),
        crate::units::plural(f.hosts_recorded as u64, "host"),
        f.hosts.len()
    )?;
    if f.hosts_recorded == 0 {
        writeln!(
            out,
            "no selected host recorded in this window (tacho record --db sends each interval)"
        )?;
    }
    for h in &f.hosts {
        let labels: Vec<String> = h
            .labels
            .iter()
            .map(|(k, v)| format!("{}={}", Escaped(k), Escaped(v)))
            .collect();
        writeln!(
            out,
            "\n{} ({})  {}  {}",
            Escaped(&h.hostname),
            Escaped(&h.machine_id),
            if labels.is_empty() {
                "no labels".to_owned()
            } else {
                labels.join(",")
            },
            crate::units::plural(h.intervals as u64, "interval")
        )?;
        for s in &h.findings {
            writeln!(
                out,
                "  {:?}  {}  {} for {:.0} s ({}–{}): {}",
                s.span.severity,
                s.span.code,
                Escaped(&s.span.subject),
                s.duration_s,
                clock(s.span.from_unix_s, false),
                clock(s.span.to_unix_s, false),
                Escaped(&s.span.message)
            )?;
            if !s.span.culprits.is_empty() {
                writeln!(out, "      named: {}", named(&s.span.culprits))?;
            }
        }
    }
    Ok(())
}
