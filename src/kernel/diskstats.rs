//! /proc/diskstats: cumulative per-device I/O counters, and deltas between two samples.
//!
//! The benchmark samples these before and after a test to cross-check what it issued against
//! what the device saw. Raw counters are stored as read; [`DiskDelta`] computes differences
//! so that a counter going backwards gives "no value" (`None`), never an underflow.

use super::Malformed;
use std::path::Path;

use procfs_core::DiskStat;
use serde::Serialize;

use super::{KernelError, Result, SysRoot};

/// diskstats counts sectors of 512 bytes whatever the device's logical block size.
pub const SECTOR_BYTES: u64 = 512;

/// One line of /proc/diskstats, as the kernel reports it (cumulative since boot).
///
/// Fields after `weighted_ms` exist only on newer kernels: discard fields since 4.18 (18
/// fields per line), flush fields since 5.5 (20 fields per line); they are `None` otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct DiskCounters {
    /// Kernel device name (`vda`, `dm-0`, `nvme0n1p2`).
    pub name: String,
    /// Device major number.
    pub major: u32,
    /// Device minor number.
    pub minor: u32,
    /// Reads completed.
    pub reads: u64,
    /// Adjacent reads merged into one request.
    pub reads_merged: u64,
    /// 512-byte sectors read.
    pub sectors_read: u64,
    /// Milliseconds spent by all reads (sum over requests, so it can exceed wall time).
    pub read_ms: u64,
    /// Writes completed.
    pub writes: u64,
    /// Adjacent writes merged into one request.
    pub writes_merged: u64,
    /// 512-byte sectors written.
    pub sectors_written: u64,
    /// Milliseconds spent by all writes.
    pub write_ms: u64,
    /// I/Os currently in flight (a gauge, not a counter).
    pub in_flight: u64,
    /// Milliseconds the device had at least one I/O in flight (busy time, iostat's %util).
    pub io_ms: u64,
    /// In-flight count integrated over time, in milliseconds (iostat's aqu-sz).
    pub weighted_ms: u64,
    /// Discards completed (kernel 4.18+).
    pub discards: Option<u64>,
    /// Discards merged (kernel 4.18+).
    pub discards_merged: Option<u64>,
    /// 512-byte sectors discarded (kernel 4.18+).
    pub sectors_discarded: Option<u64>,
    /// Milliseconds spent by all discards (kernel 4.18+).
    pub discard_ms: Option<u64>,
    /// Flush requests completed (kernel 5.5+).
    pub flushes: Option<u64>,
    /// Milliseconds spent by all flushes (kernel 5.5+).
    pub flush_ms: Option<u64>,
}

/// Reads `<proc>/diskstats`: one entry per block device and partition.
pub fn read_diskstats(root: &SysRoot) -> Result<Vec<DiskCounters>> {
    let path = root.proc.join("diskstats");
    parse_diskstats(&super::read_text(&path)?, &path)
}

/// Parses the text of /proc/diskstats; `path` only names the file in errors.
pub fn parse_diskstats(text: &str, path: &Path) -> Result<Vec<DiskCounters>> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            parse_line(line).map_err(|reason| KernelError::parse(path, Some(i + 1), reason))
        })
        .collect()
}

/// Finds the counters of device `major:minor` in a sample.
pub fn find(stats: &[DiskCounters], major: u32, minor: u32) -> Option<&DiskCounters> {
    stats.iter().find(|s| s.major == major && s.minor == minor)
}

fn parse_line(line: &str) -> std::result::Result<DiskCounters, Malformed> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    // procfs-core reads the optional trailing fields leniently (garbage becomes None); we
    // insist every counter is a number so a corrupted line is an error, not a missing value.
    if tokens.len() < 14 {
        return Err(Malformed(format!(
            "expected at least 14 fields, found {}: {line:?}",
            tokens.len()
        )));
    }
    if let Some(bad) = tokens[3..].iter().find(|t| t.parse::<u64>().is_err()) {
        return Err(Malformed(format!(
            "counter {bad:?} is not a number: {line:?}"
        )));
    }
    let stat = DiskStat::from_line(line).map_err(|e| format!("{e}: {line:?}"))?;
    let device_number =
        |n: i32| u32::try_from(n).map_err(|_| format!("negative device number {n}"));
    Ok(DiskCounters {
        major: device_number(stat.major)?,
        minor: device_number(stat.minor)?,
        name: stat.name,
        reads: stat.reads,
        reads_merged: stat.merged,
        sectors_read: stat.sectors_read,
        read_ms: stat.time_reading,
        writes: stat.writes,
        writes_merged: stat.writes_merged,
        sectors_written: stat.sectors_written,
        write_ms: stat.time_writing,
        in_flight: stat.in_progress,
        io_ms: stat.time_in_progress,
        weighted_ms: stat.weighted_time_in_progress,
        discards: stat.discards,
        discards_merged: stat.discards_merged,
        sectors_discarded: stat.sectors_discarded,
        discard_ms: stat.time_discarding,
        flushes: stat.flushes,
        flush_ms: stat.time_flushing,
    })
}

/// What one device did between two samples; the `device` part of a benchmark result.
///
/// Every value is `None` when it cannot be known: the kernel lacks the field, or the counter
/// went backwards (device removed and re-added, or a 32-bit count wrapped). A missing value is
/// honest; a huge bogus delta or a silent zero would not be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiskDelta {
    /// Kernel device name.
    pub name: String,
    /// Reads completed.
    pub reads: Option<u64>,
    /// Bytes read.
    pub read_bytes: Option<u64>,
    /// Writes completed.
    pub writes: Option<u64>,
    /// Bytes written.
    pub write_bytes: Option<u64>,
    /// Flushes completed (kernel 5.5+).
    pub flushes: Option<u64>,
    /// Milliseconds spent by all reads.
    pub read_ms: Option<u64>,
    /// Milliseconds spent by all writes.
    pub write_ms: Option<u64>,
    /// Milliseconds the device was busy (at least one I/O in flight).
    pub io_ms: Option<u64>,
    /// Discards completed (kernel 4.18+).
    pub discards: Option<u64>,
    /// Bytes discarded (kernel 4.18+).
    pub discard_bytes: Option<u64>,
}

impl DiskDelta {
    /// The change from `before` to `after`, which must be samples of the same device (match
    /// them by major:minor, or use [`deltas`]).
    pub fn between(before: &DiskCounters, after: &DiskCounters) -> DiskDelta {
        let sectors = |b, a| count(b, a).and_then(|s| s.checked_mul(SECTOR_BYTES));
        let both = |b: Option<u64>, a: Option<u64>| b.zip(a);
        DiskDelta {
            name: after.name.clone(),
            reads: count(before.reads, after.reads),
            read_bytes: sectors(before.sectors_read, after.sectors_read),
            writes: count(before.writes, after.writes),
            write_bytes: sectors(before.sectors_written, after.sectors_written),
            flushes: both(before.flushes, after.flushes).and_then(|(b, a)| count(b, a)),
            read_ms: millis(before.read_ms, after.read_ms),
            write_ms: millis(before.write_ms, after.write_ms),
            io_ms: millis(before.io_ms, after.io_ms),
            discards: both(before.discards, after.discards).and_then(|(b, a)| count(b, a)),
            discard_bytes: both(before.sectors_discarded, after.sectors_discarded)
                .and_then(|(b, a)| sectors(b, a)),
        }
    }
}

/// Deltas for every device present in both samples, matched by major:minor (names can be
/// reused by a different device after hot-plug; device numbers of a live device cannot).
pub fn deltas(before: &[DiskCounters], after: &[DiskCounters]) -> Vec<DiskDelta> {
    after
        .iter()
        .filter_map(|a| find(before, a.major, a.minor).map(|b| DiskDelta::between(b, a)))
        .collect()
}

/// Difference of an event count; backwards means reset, so no value.
pub(crate) fn count(before: u64, after: u64) -> Option<u64> {
    after.checked_sub(before)
}

/// Difference of a millisecond field. The kernel prints these as 32-bit (`%u`), so they wrap
/// after 2^32 ms (49.7 days of summed time, reached in days under deep queues). A backwards
/// step is taken as one wrap only when the wrapped difference is under half the range, which
/// a real wrap between two nearby samples always is; otherwise it was a reset: no value.
pub(crate) fn millis(before: u64, after: u64) -> Option<u64> {
    const RANGE: u64 = 1 << 32;
    if after >= before {
        return Some(after - before);
    }
    if before >= RANGE || after >= RANGE {
        return None;
    }
    let wrapped = RANGE - before + after;
    (wrapped < RANGE / 2).then_some(wrapped)
}

#[cfg(test)]
mod tests;
