//! Disk totals (`tacho report disk`): each disk's lifetime figures from its own health data,
//! its daily write rate, and how long its rated endurance lasts at that rate.
//!
//! The daily rate comes from per-day totals of the history store when there are any
//! ([`DayTotals`]), else from /proc/diskstats since boot divided by the uptime.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::kernel::SysRoot;
use crate::kernel::blockdev::{self, BlockDevice, DeviceKind};
use crate::kernel::diskstats::{self, SECTOR_BYTES};
use crate::kernel::health::{self, DriveHealth, HealthSource};

/// Schema name of the `--json` document.
pub const SCHEMA: &str = "tacho.report-disk.v1";

/// How long smartctl may take for one drive before it is killed.
const SMARTCTL_TIMEOUT: Duration = Duration::from_secs(20);

const SECONDS_PER_DAY: f64 = 86_400.0;
const DAYS_PER_YEAR: f64 = 365.25;

/// Bytes one disk moved on one calendar day, as the history store sums them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DayTotals {
    /// Local calendar day, `YYYY-MM-DD`.
    pub day: String,
    /// Kernel name of the disk (`vda`, `nvme0n1`).
    pub disk: String,
    /// Bytes read that day; `None` when the day's samples cannot tell.
    pub bytes_read: Option<u64>,
    /// Bytes written that day; `None` when the day's samples cannot tell.
    pub bytes_written: Option<u64>,
    /// Seconds of the day the recorded samples span (86,400 for a whole day): a day the
    /// recorder ran for an hour counts as an hour in the daily rate.
    pub seconds: f64,
}

/// One process or service among a day's top writers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Writer {
    /// Command name of the process, or the service's cgroup path.
    pub name: String,
    /// Process id; `None` for a service.
    pub pid: Option<u32>,
    /// Bytes it sent to storage that day.
    pub bytes_written: u64,
}

/// A day's top writers and its write amplification, from the history store.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DayWriters {
    /// Local calendar day, `YYYY-MM-DD`.
    pub day: String,
    /// Top processes by bytes written, most first.
    pub processes: Vec<Writer>,
    /// Top services by bytes written, most first.
    pub services: Vec<Writer>,
    /// Bytes the disks wrote that day (sum over the recorded disks).
    pub device_bytes_written: u64,
    /// Bytes processes sent to storage that day.
    pub process_bytes_written: u64,
    /// Device bytes / process bytes; `None` when processes wrote nothing.
    pub amplification: Option<f64>,
    /// Seconds of the day the recorded samples cover.
    pub covered_s: f64,
}

/// Most days whose top writers are decoded from the history (a full day of 300 processes
/// takes about 2.4 s to decode).
pub const WRITER_DAYS: u32 = 7;

/// Device bytes written over process bytes written; `None` when processes wrote nothing.
pub fn amplification(device_bytes: u64, process_bytes: u64) -> Option<f64> {
    (process_bytes > 0).then(|| device_bytes as f64 / process_bytes as f64)
}

/// What the caller asks for.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Kernel names of the disks to report; empty means every physical or virtual disk.
    pub disks: Vec<String>,
    /// How many days of history the per-day table covers.
    pub days: u32,
    /// A saved `smartctl -j` output to use instead of asking the (single) named disk.
    pub smartctl_capture: Option<String>,
    /// The drive's rated endurance (warranty TBW) in bytes, for the single named disk.
    pub rated_bytes: Option<u64>,
    /// Per-day totals from the history store; `None` when there is no store.
    pub history: Option<Vec<DayTotals>>,
    /// Per-day top writers from the history store; empty without one.
    pub writers: Vec<DayWriters>,
    /// The smartctl to run (see [`health::find_smartctl`]); `None` when not installed.
    pub smartctl: Option<PathBuf>,
}

/// Why the daily rate is what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RateBasis {
    /// The mean of the history store's per-day totals.
    History,
    /// /proc/diskstats since boot divided by the uptime.
    SinceBoot,
}

/// Bytes written per day and what that figure rests on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DailyRate {
    /// Mean bytes written per day.
    pub bytes_written_per_day: f64,
    /// Mean bytes read per day.
    pub bytes_read_per_day: f64,
    /// History or since boot.
    pub basis: RateBasis,
    /// How many days the mean covers (fractional since boot).
    pub days: f64,
}

/// Where the rated endurance of a projection comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RatedFrom {
    /// Given by the user (the warranty's TBW).
    Warranty,
    /// Estimated from the drive's own percentage used: written × 100 / percent.
    PercentageUsed,
}

/// How the lifetime writes compare with the rated endurance, and how long the rest lasts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Projection {
    /// The daily write rate the projection assumes.
    pub bytes_per_day: f64,
    /// Lifetime bytes written so far.
    pub bytes_written: u64,
    /// Rated endurance in bytes.
    pub rated_bytes: u64,
    /// Warranty figure or estimate from wear.
    pub rated_from: RatedFrom,
    /// Share of the rated endurance used, in percent.
    pub percent_used: f64,
    /// Years until the rated endurance is written at this rate; `None` when already past it
    /// or nothing is being written.
    pub years_left: Option<f64>,
}

/// What the kernel counted for a disk since boot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SinceBoot {
    /// Days since boot.
    pub days: f64,
    /// Bytes written since boot.
    pub bytes_written: u64,
    /// Bytes read since boot.
    pub bytes_read: u64,
}

/// Everything reported for one disk.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiskTotals {
    /// Kernel name (`vda`, `sda`, `nvme0n1`).
    pub name: String,
    /// The drive's own figures; `None` when it reports none or they could not be read.
    pub health: Option<DriveHealth>,
    /// Why there are no health figures, in words.
    pub no_health: Option<String>,
    /// Kernel counters since boot.
    pub since_boot: Option<SinceBoot>,
    /// Daily rate used for the projection.
    pub rate: Option<DailyRate>,
    /// Endurance projection, when the drive reports enough to make one.
    pub projection: Option<Projection>,
    /// Why a figure is missing, in words.
    pub notes: Vec<String>,
}

/// The `tacho report disk` document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiskReport {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// Days of history asked for.
    pub days: u32,
    /// One entry per disk, in name order.
    pub disks: Vec<DiskTotals>,
    /// Per-day totals from the history store (empty without one).
    pub daily: Vec<DayTotals>,
    /// Per-day top writers and write amplification (empty without a history store).
    pub writers: Vec<DayWriters>,
    /// Report-wide notes (no history store, no smartctl).
    pub notes: Vec<String>,
}

/// Why the report cannot be made: bad input, named in one line.
#[derive(Debug, thiserror::Error)]
pub enum TotalsError {
    /// A named disk is not a whole disk of this machine.
    #[error("unknown disk {name:?}: name a whole disk ({known}; see lsblk -d)")]
    UnknownDisk {
        /// What was asked for.
        name: String,
        /// The disks that exist.
        known: String,
    },
    /// An option that applies to one drive was given for several.
    #[error("{0} applies to one drive: name exactly one disk")]
    NeedsOneDisk(&'static str),
    /// The saved smartctl output could not be parsed.
    #[error(transparent)]
    Capture(#[from] health::HealthError),
    /// A kernel file could not be read.
    #[error(transparent)]
    Kernel(#[from] crate::kernel::KernelError),
}

/// Builds the report for this machine (or the fixture tree `root`).
pub fn collect(root: &SysRoot, options: &Options) -> Result<DiskReport, TotalsError> {
    let disks = chosen_disks(root, &options.disks)?;
    if options.disks.len() != 1 {
        if options.smartctl_capture.is_some() {
            return Err(TotalsError::NeedsOneDisk("--smartctl-json"));
        }
        if options.rated_bytes.is_some() {
            return Err(TotalsError::NeedsOneDisk("--rated-tbw"));
        }
    }
    let capture = match &options.smartctl_capture {
        Some(text) => Some(health::parse_smartctl_json(text)?),
        None => None,
    };
    let stats = diskstats::read_diskstats(root)?;
    let uptime = crate::kernel::uptime::read_uptime(root)?;
    let smartctl = options.smartctl.as_ref();
    let mut notes = Vec::new();
    let asks_smartctl = |d: &BlockDevice| virtual_bus(d).is_none() && !d.name.starts_with("nvme");
    if capture.is_none() && smartctl.is_none() && disks.iter().any(asks_smartctl) {
        notes.push(
            "smartctl is not installed (apt install smartmontools): lifetime bytes written and \
             read, power-on hours, wear, reallocated and pending sectors come from it for \
             SATA/SAS drives; NVMe drives are read natively"
                .to_string(),
        );
    }
    let history = options.history.as_deref().unwrap_or_default();
    if options.history.is_none() {
        notes.push("no history store: the per-day table needs `tacho record` running".into());
    }
    if options.days > WRITER_DAYS && options.history.is_some() {
        notes.push(format!(
            "top writers and write amplification cover the last {WRITER_DAYS} days only: \
             decoding a day of every process takes seconds"
        ));
    }
    // The per-day table of the disks reported only.
    let daily: Vec<DayTotals> = history
        .iter()
        .filter(|d| disks.iter().any(|k| k.name == d.disk))
        .cloned()
        .collect();
    let disks = disks
        .iter()
        .map(|dev| {
            let health = match &capture {
                Some(h) => Ok(DriveHealth {
                    source: Some(HealthSource::SmartctlFile),
                    ..h.clone()
                }),
                None => drive_health(dev, smartctl),
            };
            let counters = stats.iter().find(|c| c.name == dev.name);
            let since_boot = counters.map(|c| SinceBoot {
                days: uptime.as_secs_f64() / SECONDS_PER_DAY,
                bytes_written: c.sectors_written.saturating_mul(SECTOR_BYTES),
                bytes_read: c.sectors_read.saturating_mul(SECTOR_BYTES),
            });
            disk_totals(&dev.name, health, since_boot, history, options.rated_bytes)
        })
        .collect();
    Ok(DiskReport {
        schema: SCHEMA,
        days: options.days,
        disks,
        daily,
        writers: options.writers.clone(),
        notes,
    })
}

/// The whole block devices named (a `/dev/` prefix is allowed; a loop or dm device too, when
/// named), or every disk with a device behind it (no loop, dm, md or zram) when none is named.
/// The disks to suggest: every one but loop devices, which a machine can have dozens of and
/// are counted instead.
fn known_disks(all: &[BlockDevice]) -> String {
    let loops = all.iter().filter(|d| d.kind == DeviceKind::Loop).count();
    let mut names: Vec<String> = all
        .iter()
        .filter(|d| d.kind != DeviceKind::Loop)
        .map(|d| d.name.clone())
        .collect();
    match loops {
        0 => {}
        1 => names.push("1 loop device".into()),
        n => names.push(format!("{n} loop devices")),
    }
    names.join(", ")
}

fn chosen_disks(root: &SysRoot, names: &[String]) -> Result<Vec<BlockDevice>, TotalsError> {
    let all: Vec<BlockDevice> = blockdev::disks(root)?;
    if names.is_empty() {
        return Ok(all
            .into_iter()
            .filter(|d| {
                d.kind == DeviceKind::Disk
                    && d.sys_path.join("device").exists()
                    && !d.name.starts_with("sr")
            })
            .collect());
    }
    names
        .iter()
        .map(|name| {
            let bare = name.strip_prefix("/dev/").unwrap_or(name);
            all.iter()
                .find(|d| d.name == bare)
                .cloned()
                .ok_or_else(|| TotalsError::UnknownDisk {
                    name: name.clone(),
                    known: known_disks(&all),
                })
        })
        .collect()
}

/// Why a disk has no health figures, in words for its report.
#[derive(Debug, thiserror::Error)]
pub enum NoHealth {
    /// A virtual machine's disk, whose "drive" has nothing to report.
    #[error("{disk}: {bus} disk, the drive reports no health data")]
    Virtual {
        /// The disk's kernel name.
        disk: String,
        /// Its paravirtual bus (`virtio`, `xen`).
        bus: &'static str,
    },
    /// smartctl or the NVMe log could not be read.
    #[error("{disk}: {err}")]
    Unreadable {
        /// The disk's kernel name.
        disk: String,
        /// What went wrong.
        err: health::HealthError,
    },
    /// Not NVMe, and smartctl is not installed.
    #[error("{disk}: no health data without smartctl (apt install smartmontools)")]
    NoSmartctl {
        /// The disk's kernel name.
        disk: String,
    },
}

/// Why no endurance projection can be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoProjection {
    /// The drive does not count the bytes written to it.
    #[error("no projection: the drive does not report its lifetime bytes written")]
    NoBytesWritten,
    /// The drive's wear counter has not moved yet.
    #[error(
        "no projection: the drive reports 0% used, too early to tell its endurance; give the \
         warranty's --rated-tbw"
    )]
    NoneUsedYet,
    /// The drive reports no wear at all.
    #[error("no projection: the drive reports no wear figure; give the warranty's --rated-tbw")]
    NoWear,
}

/// Asks the drive: smartctl when installed, else the NVMe log natively.
fn drive_health(dev: &BlockDevice, smartctl: Option<&PathBuf>) -> Result<DriveHealth, NoHealth> {
    if let Some(bus) = virtual_bus(dev) {
        return Err(NoHealth::Virtual {
            disk: dev.name.clone(),
            bus,
        });
    }
    let device = PathBuf::from("/dev").join(&dev.name);
    let nvme = dev.name.starts_with("nvme");
    let asked = smartctl.map(|smartctl| {
        let text = health::run_smartctl(smartctl, &device, SMARTCTL_TIMEOUT)?;
        let mut h = health::parse_smartctl_json(&text)?;
        h.source = Some(HealthSource::Smartctl);
        Ok::<_, health::HealthError>(h)
    });
    match asked {
        // An NVMe drive smartctl could not read is asked natively below.
        Some(Ok(h)) if !nvme || !is_empty(&h) => Ok(h),
        Some(Err(err)) if !nvme => Err(NoHealth::Unreadable {
            disk: dev.name.clone(),
            err,
        }),
        _ if nvme => {
            let page =
                health::read_nvme_smart_log(&device).map_err(|err| NoHealth::Unreadable {
                    disk: dev.name.clone(),
                    err,
                })?;
            let mut h = health::parse_smart_log(&page);
            h.model = dev.model.clone();
            Ok(h)
        }
        _ => Err(NoHealth::NoSmartctl {
            disk: dev.name.clone(),
        }),
    }
}

/// The paravirtual bus of a virtual machine's disk (`virtio`, `xen`), whose "drive" has no
/// health data to give.
fn virtual_bus(dev: &BlockDevice) -> Option<&'static str> {
    let hardware = blockdev::hardware(dev).unwrap_or_default();
    [hardware.subsystem, hardware.driver]
        .into_iter()
        .flatten()
        .find_map(|s| match s.as_str() {
            "virtio" | "virtio_blk" => Some("virtio"),
            "xen" | "xen_blkfront" | "vbd" => Some("xen"),
            _ => None,
        })
}

/// One disk's entry from what was read.
fn disk_totals(
    name: &str,
    health: Result<DriveHealth, NoHealth>,
    since_boot: Option<SinceBoot>,
    history: &[DayTotals],
    rated_bytes: Option<u64>,
) -> DiskTotals {
    let mut notes = Vec::new();
    let rate = rate_from_history(history, name).or_else(|| rate_since_boot(since_boot.as_ref()));
    let (health, no_health) = match health {
        Ok(h) if is_empty(&h) => (None, Some(no_figures(name, &h))),
        Ok(h) => (Some(h), None),
        Err(why) => (None, Some(why.to_string())),
    };
    let projection = match (&health, &rate) {
        (Some(h), Some(rate)) => match project(h, rate.bytes_written_per_day, rated_bytes) {
            Ok(p) => Some(p),
            Err(why) => {
                notes.push(why.to_string());
                None
            }
        },
        (Some(_), None) => {
            notes.push("no daily rate: the kernel has no counters for this disk".into());
            None
        }
        _ => None,
    };
    DiskTotals {
        name: name.to_string(),
        health,
        no_health,
        since_boot,
        rate,
        projection,
        notes,
    }
}

/// A health read that produced no figure at all (smartctl could not talk to the drive).
fn is_empty(h: &DriveHealth) -> bool {
    [
        h.bytes_written,
        h.bytes_read,
        h.percentage_used,
        h.power_on_hours,
        h.reallocated_sectors,
        h.pending_sectors,
        h.media_errors,
    ]
    .iter()
    .all(Option::is_none)
}

fn no_figures(name: &str, h: &DriveHealth) -> String {
    match h.notes.first() {
        Some(why) => format!("{name}: the drive reports no health data ({why})"),
        None => format!("{name}: the drive reports no health data"),
    }
}

/// The mean daily bytes of `disk` over the history store's days; `None` without any day
/// that knows its bytes written. This is where the history store's per-day totals feed
/// the projection.
pub fn rate_from_history(days: &[DayTotals], disk: &str) -> Option<DailyRate> {
    let known: Vec<&DayTotals> = days
        .iter()
        .filter(|d| d.disk == disk && d.bytes_written.is_some())
        .collect();
    if known.is_empty() {
        return None;
    }
    // Weighted by the time each day's samples span, so a partial day (the day recording
    // started, today) does not pull the mean down.
    let seconds: f64 = known.iter().map(|d| d.seconds).sum();
    if seconds < 60.0 {
        return None;
    }
    let n = seconds / 86_400.0;
    let sum = |f: fn(&DayTotals) -> Option<u64>| {
        known.iter().map(|d| f(d).unwrap_or(0) as f64).sum::<f64>()
    };
    Some(DailyRate {
        bytes_written_per_day: sum(|d| d.bytes_written) / n,
        bytes_read_per_day: sum(|d| d.bytes_read) / n,
        basis: RateBasis::History,
        days: n,
    })
}

/// Since-boot counters ÷ uptime; `None` right after boot (under a minute: no rate yet).
pub fn rate_since_boot(since_boot: Option<&SinceBoot>) -> Option<DailyRate> {
    let sb = since_boot?;
    (sb.days * SECONDS_PER_DAY >= 60.0).then(|| DailyRate {
        bytes_written_per_day: sb.bytes_written as f64 / sb.days,
        bytes_read_per_day: sb.bytes_read as f64 / sb.days,
        basis: RateBasis::SinceBoot,
        days: sb.days,
    })
}

/// The endurance projection: against the warranty's rated bytes when given, else against
/// the endurance the drive's own percentage used implies.
pub fn project(
    health: &DriveHealth,
    bytes_per_day: f64,
    rated_bytes: Option<u64>,
) -> Result<Projection, NoProjection> {
    let written = health.bytes_written.ok_or(NoProjection::NoBytesWritten)?;
    let (rated, rated_from) = match (rated_bytes, health.percentage_used) {
        (Some(rated), _) if rated > 0 => (rated, RatedFrom::Warranty),
        (_, Some(used)) if used > 0 => (
            (written as f64 * 100.0 / used as f64) as u64,
            RatedFrom::PercentageUsed,
        ),
        (_, Some(_)) => return Err(NoProjection::NoneUsedYet),
        _ => return Err(NoProjection::NoWear),
    };
    let percent_used = match rated_from {
        RatedFrom::Warranty => written as f64 * 100.0 / rated as f64,
        RatedFrom::PercentageUsed => health.percentage_used.unwrap_or(0) as f64,
    };
    let years_left = (bytes_per_day > 0.0 && rated > written)
        .then(|| (rated - written) as f64 / bytes_per_day / DAYS_PER_YEAR);
    Ok(Projection {
        bytes_per_day,
        bytes_written: written,
        rated_bytes: rated,
        rated_from,
        percent_used,
        years_left,
    })
}

#[cfg(test)]
mod tests;
