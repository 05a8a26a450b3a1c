//! Bytes each disk read and wrote per local calendar day, from the recorded raw counters:
//! what `tacho report disk` tabulates and projects from.
//!
//! A day's bytes are the difference of the disk's cumulative counters between the last sample
//! before the day began (or the day's first sample, when recording started that day) and the
//! day's last sample; only those two samples are decoded per day. A counter that went
//! backwards within the span (a reboot, a device re-created) makes that day "unknown" for the
//! disk rather than a wrong figure.

use chrono::{DateTime, Local, NaiveDate, TimeZone};

use super::History;
use crate::kernel::diskstats::DiskCounters;
use crate::totals::{DayTotals, DayWriters, WRITER_DAYS, Writer, amplification};
use anyhow::Result;

/// Bytes in a diskstats sector, whatever the device's logical block size.
const SECTOR_BYTES: u64 = 512;

/// Per-day totals per disk for the `days` local days up to and including `now`'s, oldest
/// first; days without samples are left out.
pub fn day_totals(history: &History, days: u32, now: DateTime<Local>) -> Result<Vec<DayTotals>> {
    let times = history.times()?;
    let today = now.date_naive();
    let first_day = today - chrono::Days::new(u64::from(days.saturating_sub(1)));
    let mut out = Vec::new();
    let mut day = first_day;
    while day <= today {
        let (start, end) = (midnight(day), midnight(day + chrono::Days::new(1)));
        let in_day: Vec<f64> = times
            .iter()
            .copied()
            .filter(|&t| t >= start && t < end)
            .collect();
        if let (Some(&first), Some(&last)) = (in_day.first(), in_day.last()) {
            // The sample just before midnight carries the day's first interval.
            let base_t = times.iter().copied().rfind(|&t| t < start).unwrap_or(first);
            let base = at(history, base_t)?;
            let last_rec = at(history, last)?;
            if let (Some(a), Some(b)) = (base, last_rec) {
                let seconds = (last - base_t.max(start)).max(0.0);
                out.extend(between(&day.to_string(), &a, &b, seconds));
            }
        }
        day = day + chrono::Days::new(1);
    }
    Ok(out)
}

/// Top `top` writers and the write amplification of each of the last
/// `days.min(WRITER_DAYS)` local days up to `now`'s, oldest first; days without samples are
/// left out.
pub fn day_writers(
    history: &History,
    days: u32,
    top: usize,
    now: DateTime<Local>,
) -> Result<Vec<DayWriters>> {
    let today = now.date_naive();
    let first_day = today - chrono::Days::new(u64::from(days.min(WRITER_DAYS).saturating_sub(1)));
    let mut out = Vec::new();
    let mut day = first_day;
    while day <= today {
        let (start, end) = (midnight(day), midnight(day + chrono::Days::new(1)));
        let s = super::summary::summarise(history, start, end, usize::MAX)?;
        if s.intervals + s.gaps > 0 {
            out.push(writers_of(&day.to_string(), &s, top));
        }
        day = day + chrono::Days::new(1);
    }
    Ok(out)
}

/// A day's writers and amplification from its window summary. Amplification is physical
/// disks' bytes (no partitions, loop, dm or md, which would count a write twice) over the
/// bytes of the processes whose /proc/PID/io was readable, as `tacho top` computes it.
fn writers_of(day: &str, s: &super::summary::Summary, top: usize) -> DayWriters {
    let device = s.device_write_bytes;
    let process = s.process_write_bytes;
    let mut processes: Vec<Writer> = s
        .top_io
        .iter()
        .filter(|p| p.write_bytes > 0)
        .map(|p| Writer {
            name: p.comm.clone(),
            pid: Some(p.pid),
            bytes_written: p.write_bytes,
        })
        .collect();
    processes.sort_by_key(|w| std::cmp::Reverse(w.bytes_written));
    let mut services: Vec<Writer> = s
        .services
        .iter()
        .filter(|p| p.write_bytes > 0)
        .map(|p| Writer {
            name: p.path.clone(),
            pid: None,
            bytes_written: p.write_bytes,
        })
        .collect();
    services.sort_by_key(|w| std::cmp::Reverse(w.bytes_written));
    processes.truncate(top);
    services.truncate(top);
    DayWriters {
        day: day.to_string(),
        processes,
        services,
        device_bytes_written: device,
        process_bytes_written: process,
        amplification: amplification(device, process),
        covered_s: s.covered_s,
    }
}

/// Unix time of local midnight starting `day` (the earliest valid time that day, for days
/// whose midnight a DST change skips).
fn midnight(day: NaiveDate) -> f64 {
    let naive = day.and_hms_opt(0, 0, 0).unwrap_or_default();
    Local
        .from_local_datetime(&naive)
        .earliest()
        .map_or(naive.and_utc().timestamp() as f64, |t| t.timestamp() as f64)
}

/// The disks' counters of the sample at `t`.
fn at(history: &History, t: f64) -> Result<Option<Vec<DiskCounters>>> {
    Ok(history.recent(t, 1)?.pop().map(|r| r.sample.disks))
}

/// Each disk present in both readings: its bytes read and written between them.
fn between(day: &str, a: &[DiskCounters], b: &[DiskCounters], seconds: f64) -> Vec<DayTotals> {
    b.iter()
        .filter_map(|now| {
            let then = a.iter().find(|d| d.name == now.name)?;
            let delta = |x: u64, y: u64| y.checked_sub(x).map(|s| s.saturating_mul(SECTOR_BYTES));
            Some(DayTotals {
                day: day.to_string(),
                disk: now.name.clone(),
                bytes_read: delta(then.sectors_read, now.sectors_read),
                bytes_written: delta(then.sectors_written, now.sectors_written),
                seconds,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One disk as /proc/diskstats would list it, with these sector counts.
    fn disk(name: &str, read_sectors: u64, written_sectors: u64) -> DiskCounters {
        let line = format!("254 0 {name} 1 0 {read_sectors} 1 1 0 {written_sectors} 1 0 1 2\n");
        crate::kernel::diskstats::parse_diskstats(&line, std::path::Path::new("diskstats"))
            .unwrap()
            .remove(0)
    }

    #[test]
    fn a_days_amplification_is_disk_over_all_process_writes_and_writers_are_ranked() {
        use crate::history::summary::{DiskTotal, ProcessTotal, ServiceTotal, Window};
        let mut s = Window::new(0.0, 86_400.0).finish(5);
        let disk = |name: &str, write_bytes| DiskTotal {
            name: name.into(),
            display_name: name.into(),
            read_bytes: 0,
            write_bytes,
            peak_util_pct: 0.0,
            peak_util_unix_s: 0.0,
        };
        let proc_ = |pid, comm: &str, write_bytes| ProcessTotal {
            pid,
            comm: comm.into(),
            read_bytes: 7,
            write_bytes,
            cpu_s: 0.0,
        };
        s.disks = vec![disk("vda", 9_000), disk("vdb", 3_000)];
        s.top_io = vec![
            proc_(1, "small", 1_000),
            proc_(2, "big", 3_000),
            proc_(3, "reader", 0),
        ];
        s.services = vec![ServiceTotal {
            path: "/system.slice/x.service".into(),
            read_bytes: 0,
            write_bytes: 4_000,
        }];
        // The physical disks' and the readable processes' sums, as the intervals' write
        // amplification counted them (a partition's bytes in `disks` would count twice).
        s.device_write_bytes = 12_000;
        s.process_write_bytes = 4_000;
        let day = writers_of("2026-11-22", &s, 1);
        assert_eq!(
            day.amplification,
            Some(3.0),
            "12,000 device / 4,000 process bytes"
        );
        assert_eq!(
            day.process_bytes_written, 4_000,
            "the whole day's process bytes, not only the top writers'"
        );
        assert_eq!(day.processes.len(), 1);
        assert_eq!(day.processes[0].name, "big");
        assert_eq!(day.services[0].pid, None);
        s.process_write_bytes = 0;
        assert_eq!(
            writers_of("d", &s, 5).amplification,
            None,
            "processes wrote nothing"
        );
    }

    #[test]
    fn a_day_is_the_counter_difference_and_a_reset_is_unknown() {
        let a = [
            disk("vda", 100, 1_000),
            disk("sdb", 5, 50),
            disk("gone", 1, 1),
        ];
        let b = [
            disk("vda", 300, 3_000),
            disk("sdb", 1, 60),
            disk("new", 9, 9),
        ];
        let days = between("2026-11-22", &a, &b, 3_600.0);
        assert_eq!(days.len(), 2, "only disks in both readings: {days:?}");
        assert_eq!(days[0].disk, "vda");
        assert_eq!(days[0].bytes_read, Some(200 * 512));
        assert_eq!(days[0].bytes_written, Some(2_000 * 512));
        assert_eq!(days[1].bytes_read, None, "a counter that went back");
        assert_eq!(days[1].bytes_written, Some(10 * 512));
        assert_eq!(days[1].seconds, 3_600.0);
    }
}
