//! `tacho report disk`: each disk's lifetime figures and endurance projection as text, and the
//! `tacho.report-disk.v1` JSON document.
//!
//! Bytes are binary (GiB, TiB) as everywhere in tacho, except the bytes written that the
//! projection sets against a drive's rating: drive makers rate endurance in decimal terabytes
//! written (TBW), so that one figure is in decimal TB beside it.

use std::io::{self, Write};

use crate::kernel::health::{DriveHealth, DriveKind, HealthSource};
use crate::text::Escaped;
use crate::totals::{
    DailyRate, DayTotals, DayWriters, DiskReport, DiskTotals, Projection, RateBasis, RatedFrom,
};

/// Writes the report as one pretty-printed JSON document.
pub fn json(report: &DiskReport, out: &mut impl Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report)?;
    writeln!(out)
}

/// Writes the report for people: one block per disk, the per-day table, then notes.
pub fn text(report: &DiskReport, out: &mut impl Write) -> io::Result<()> {
    for (i, disk) in report.disks.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        disk_block(disk, out)?;
    }
    if report.disks.is_empty() {
        writeln!(out, "no disks")?;
    }
    if !report.daily.is_empty() {
        writeln!(out)?;
        daily_table(&report.daily, out)?;
    }
    for day in &report.writers {
        writeln!(out)?;
        writers_block(day, out)?;
    }
    for note in &report.notes {
        writeln!(out, "note: {}", Escaped(note))?;
    }
    Ok(())
}

fn disk_block(disk: &DiskTotals, out: &mut impl Write) -> io::Result<()> {
    match (&disk.health, &disk.no_health) {
        (Some(h), _) => {
            writeln!(out, "{}  {}", Escaped(&disk.name), heading(h))?;
            health_lines(h, out)?;
        }
        (None, Some(why)) => writeln!(out, "{}", Escaped(why))?,
        (None, None) => writeln!(out, "{}", Escaped(&disk.name))?,
    }
    if let Some(sb) = &disk.since_boot {
        write!(
            out,
            "  {:<12}{} written, {} read in {:.1} days",
            "since boot",
            size(sb.bytes_written as f64),
            size(sb.bytes_read as f64),
            sb.days
        )?;
        match crate::totals::rate_since_boot(Some(sb)) {
            Some(rate) => writeln!(out, " ({}/day written)", size(rate.bytes_written_per_day))?,
            None => writeln!(out)?,
        }
    }
    if let (Some(rate), Some(p)) = (&disk.rate, &disk.projection) {
        writeln!(out, "  {:<12}{}", "projection", projection(p, rate))?;
    }
    for note in disk
        .notes
        .iter()
        .chain(disk.health.iter().flat_map(|h| &h.notes))
    {
        writeln!(out, "  note: {}", Escaped(note))?;
    }
    Ok(())
}

fn heading(h: &DriveHealth) -> String {
    let kind = match h.kind {
        Some(DriveKind::Nvme) => Some("NVMe"),
        Some(DriveKind::AtaSsd) => Some("SATA SSD"),
        Some(DriveKind::AtaHdd) => Some("hard disk"),
        Some(DriveKind::Other) | None => None,
    };
    let source = match h.source {
        Some(HealthSource::Smartctl) => Some("from smartctl"),
        Some(HealthSource::SmartctlFile) => Some("from a saved smartctl output"),
        Some(HealthSource::NvmeIoctl) => Some("from the NVMe health log"),
        None => None,
    };
    let model = h.model.as_deref().map(|m| Escaped(m).to_string());
    [model.as_deref(), kind, source]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" · ")
}

fn health_lines(h: &DriveHealth, out: &mut impl Write) -> io::Result<()> {
    let or_dash = |v: Option<u64>| v.map_or("-".to_string(), |b| size(b as f64));
    writeln!(
        out,
        "  {:<12}{} written, {} read",
        "lifetime",
        or_dash(h.bytes_written),
        or_dash(h.bytes_read)
    )?;
    if let Some(used) = h.percentage_used {
        writeln!(out, "  {:<12}{used}% of rated endurance used", "wear")?;
    }
    if let Some(hours) = h.power_on_hours {
        writeln!(
            out,
            "  {:<12}{hours} h ({:.1} years)",
            "power-on",
            hours as f64 / 24.0 / 365.25
        )?;
    }
    let errors: Vec<String> = [
        (h.reallocated_sectors, "reallocated sectors"),
        (h.pending_sectors, "pending sectors"),
        (h.media_errors, "media errors"),
    ]
    .into_iter()
    .filter_map(|(v, what)| v.map(|n| format!("{n} {what}")))
    .collect();
    if !errors.is_empty() {
        writeln!(out, "  {:<12}{}", "errors", errors.join(", "))?;
    }
    if h.smart_passed == Some(false) {
        writeln!(out, "  {:<12}the drive's self-assessment FAILED", "health")?;
    }
    Ok(())
}

/// "at 93.0 GB/day (since boot, 0.4 days), 19.7 TB written = 13% of the 150 TBW warranty;
/// 4.2 years to go".
fn projection(p: &Projection, rate: &DailyRate) -> String {
    let basis = match rate.basis {
        RateBasis::History => format!("history, {:.0} days", rate.days),
        RateBasis::SinceBoot => format!("since boot, {:.1} days", rate.days),
    };
    let rating = match p.rated_from {
        RatedFrom::Warranty => format!("the {} TBW warranty", tbw(p.rated_bytes)),
        RatedFrom::PercentageUsed => {
            format!("the {} TBW the drive's wear implies", tbw(p.rated_bytes))
        }
    };
    let end = match p.years_left {
        Some(years) if years * 365.25 < 1.0 => "under a day to go".to_string(),
        Some(years) if years < 1.0 => format!("{:.0} days to go", years * 365.25),
        Some(years) => format!("{years:.1} years to go"),
        None if p.rated_bytes <= p.bytes_written => "past its rated endurance".to_string(),
        None => "no writes at this rate".to_string(),
    };
    format!(
        "at {}/day ({basis}), {} written = {:.0}% of {rating}; {end}",
        size(p.bytes_per_day),
        si(p.bytes_written as f64),
        p.percent_used
    )
}

fn daily_table(days: &[DayTotals], out: &mut impl Write) -> io::Result<()> {
    let or_dash = |v: Option<u64>| v.map_or("-".to_string(), |b| size(b as f64));
    writeln!(
        out,
        "{:<12}{:<12}{:>10}{:>10}{:>10}",
        "day", "disk", "read", "written", "recorded"
    )?;
    for d in days {
        writeln!(
            out,
            "{:<12}{:<12}{:>10}{:>10}{:>10}",
            Escaped(&d.day),
            Escaped(&d.disk),
            or_dash(d.bytes_read),
            or_dash(d.bytes_written),
            recorded(d.seconds)
        )?;
    }
    Ok(())
}

/// One day's write amplification and top writers.
fn writers_block(day: &DayWriters, out: &mut impl Write) -> io::Result<()> {
    let amp = day
        .amplification
        .map_or("- (processes wrote nothing)".to_string(), |a| {
            format!("{a:.2}")
        });
    writeln!(
        out,
        "{}: write amplification {amp} (device {} / processes {}, {} recorded)",
        Escaped(&day.day),
        size(day.device_bytes_written as f64),
        size(day.process_bytes_written as f64),
        recorded(day.covered_s)
    )?;
    for w in day.processes.iter().chain(&day.services) {
        let pid = w.pid.map_or(String::new(), |p| format!(" [{p}]"));
        writeln!(
            out,
            "  {:>10}  {}{pid}",
            size(w.bytes_written as f64),
            Escaped(&w.name)
        )?;
    }
    Ok(())
}

/// How long a day's samples span: `24.0 h`, `1.5 h`, `12 min`.
fn recorded(seconds: f64) -> String {
    if seconds >= 3600.0 {
        format!("{:.1} h", seconds / 3600.0)
    } else {
        format!("{:.0} min", seconds / 60.0)
    }
}

/// Bytes in binary units, as tacho shows them everywhere: `812 B`, `86.6 GiB`.
fn size(bytes: f64) -> String {
    crate::units::format_bytes_approx(bytes.max(0.0) as u64)
}

/// Decimal bytes with three significant digits, for bytes set against a TBW rating: `812 B`,
/// `93.0 GB`, `19.7 TB`.
fn si(bytes: f64) -> String {
    const UNITS: [&str; 6] = ["B", "kB", "MB", "GB", "TB", "PB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 999.5 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        return format!("{value:.0} B");
    }
    let digits = if value >= 99.95 {
        0
    } else if value >= 9.995 {
        1
    } else {
        2
    };
    format!("{value:.digits$} {}", UNITS[unit])
}

/// Terabytes written as a warranty states them: `150`, `1.2`, `0.35`.
fn tbw(bytes: u64) -> String {
    let tb = bytes as f64 / 1e12;
    let text = format!("{tb:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests;
