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
use crate::totals::DayTotals;
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
    Ok(history.range(t, t)?.pop().map(|r| r.sample.disks))
}

/// Each disk present in both readings: its bytes read and written between them.
fn between(day: &str, a: &[DiskCounters], b: &[DiskCounters], seconds: f64) -> Vec<DayTotals> {
    b.iter()
        .filter_map(|now| {
            let then = a.iter().find(|d| d.name == now.name)?;
            let delta = |x: u64, y: u64| y.checked_sub(x).map(|s| s * SECTOR_BYTES);
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
