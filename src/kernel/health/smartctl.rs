//! smartctl's JSON output (`smartctl -j`, smartmontools 7.0+) into [`DriveHealth`].
//!
//! Only the fields tacho shows are modelled; every one is optional because smartctl prints
//! what the drive reports and nothing else. A field of the wrong type fails the parse with a
//! message (never a panic, never a zero).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::{DriveHealth, DriveKind, HealthError};

/// NVMe "data units" are thousands of 512-byte units (NVMe base specification, SMART log).
const NVME_DATA_UNIT_BYTES: u64 = 512_000;

/// smartctl's output is a few kilobytes; more than this is not smartctl.
const MAX_OUTPUT_BYTES: u64 = 16 << 20;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Output {
    smartctl: Option<Smartctl>,
    device: Option<Device>,
    model_name: Option<String>,
    scsi_model_name: Option<String>,
    rotation_rate: Option<u64>,
    logical_block_size: Option<u64>,
    power_on_time: Option<PowerOnTime>,
    smart_status: Option<SmartStatus>,
    ata_smart_attributes: Option<AtaAttributes>,
    ata_device_statistics: Option<DeviceStatistics>,
    nvme_smart_health_information_log: Option<NvmeLog>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Smartctl {
    messages: Vec<Message>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Message {
    string: String,
    severity: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Device {
    protocol: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PowerOnTime {
    hours: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct SmartStatus {
    passed: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct AtaAttributes {
    table: Vec<Attribute>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Attribute {
    id: u64,
    name: String,
    raw: Raw,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Raw {
    value: Option<u64>,
    string: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct DeviceStatistics {
    pages: Vec<StatisticsPage>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StatisticsPage {
    table: Vec<Statistic>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Statistic {
    name: String,
    value: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct NvmeLog {
    percentage_used: Option<u64>,
    data_units_read: Option<u64>,
    data_units_written: Option<u64>,
    power_on_hours: Option<u64>,
    media_errors: Option<u64>,
}

/// ATA attribute names that count host bytes written, with their unit ("lba" = the drive's
/// logical block size). smartmontools' drive database gives each vendor's counter its name.
const WRITE_ATTRIBUTES: [(&str, Unit); 5] = [
    ("Total_LBAs_Written", Unit::Lba),
    ("Host_Writes_32MiB", Unit::Bytes(32 << 20)),
    ("Host_Writes_GiB", Unit::Bytes(1 << 30)),
    ("Lifetime_Writes_GiB", Unit::Bytes(1 << 30)),
    ("Host_Writes_MiB", Unit::Bytes(1 << 20)),
];

/// The read counterparts of [`WRITE_ATTRIBUTES`].
const READ_ATTRIBUTES: [(&str, Unit); 5] = [
    ("Total_LBAs_Read", Unit::Lba),
    ("Host_Reads_32MiB", Unit::Bytes(32 << 20)),
    ("Host_Reads_GiB", Unit::Bytes(1 << 30)),
    ("Lifetime_Reads_GiB", Unit::Bytes(1 << 30)),
    ("Host_Reads_MiB", Unit::Bytes(1 << 20)),
];

#[derive(Debug, Clone, Copy)]
enum Unit {
    Lba,
    Bytes(u64),
}

/// Parses the text smartctl printed with `-j`.
pub fn parse_smartctl_json(text: &str) -> Result<DriveHealth, HealthError> {
    let out: Output = serde_json::from_str(text).map_err(|e| HealthError::Json(e.to_string()))?;
    let mut health = DriveHealth {
        model: out.model_name.clone().or(out.scsi_model_name.clone()),
        power_on_hours: out.power_on_time.as_ref().and_then(|p| p.hours),
        smart_passed: out.smart_status.as_ref().and_then(|s| s.passed),
        ..DriveHealth::default()
    };
    let protocol = out.device.as_ref().and_then(|d| d.protocol.as_deref());
    health.kind = Some(match (protocol, out.rotation_rate) {
        (Some("NVMe"), _) => DriveKind::Nvme,
        (Some("ATA"), Some(0)) => DriveKind::AtaSsd,
        (Some("ATA"), Some(_)) => DriveKind::AtaHdd,
        _ => DriveKind::Other,
    });
    if let Some(log) = &out.nvme_smart_health_information_log {
        health.bytes_written = log
            .data_units_written
            .and_then(|u| u.checked_mul(NVME_DATA_UNIT_BYTES));
        health.bytes_read = log
            .data_units_read
            .and_then(|u| u.checked_mul(NVME_DATA_UNIT_BYTES));
        health.percentage_used = log.percentage_used;
        health.power_on_hours = log.power_on_hours.or(health.power_on_hours);
        health.media_errors = log.media_errors;
    }
    if let Some(attributes) = &out.ata_smart_attributes {
        ata_attributes(&mut health, &attributes.table, out.logical_block_size);
    }
    if let Some(stats) = &out.ata_device_statistics {
        device_statistics(&mut health, stats, out.logical_block_size);
    }
    if let Some(smartctl) = &out.smartctl {
        health.notes.extend(
            smartctl
                .messages
                .iter()
                .filter(|m| m.severity.as_deref() == Some("error"))
                .map(|m| format!("smartctl: {}", m.string)),
        );
    }
    Ok(health)
}

/// A raw value as a plain count: smartctl packs several fields into some raw values (the
/// temperature's "26 (Min/Max 20/33)"), and only a raw string equal to the number is one.
fn plain_count(raw: &Raw) -> Option<u64> {
    let value = raw.value?;
    (raw.string.as_deref().map(str::trim) == Some(value.to_string().as_str())).then_some(value)
}

fn ata_attributes(health: &mut DriveHealth, table: &[Attribute], block: Option<u64>) {
    let find_id = |id: u64| {
        table
            .iter()
            .find(|a| a.id == id)
            .and_then(|a| plain_count(&a.raw))
    };
    health.reallocated_sectors = find_id(5);
    health.media_errors = health.media_errors.or(find_id(187));
    health.pending_sectors = find_id(197);
    let bytes = |names: &[(&str, Unit)]| {
        names.iter().find_map(|(name, unit)| {
            let raw = plain_count(&table.iter().find(|a| a.name == *name)?.raw)?;
            let scale = match unit {
                Unit::Lba => block.unwrap_or(512),
                Unit::Bytes(b) => *b,
            };
            raw.checked_mul(scale)
        })
    };
    health.bytes_written = health.bytes_written.or(bytes(&WRITE_ATTRIBUTES));
    health.bytes_read = health.bytes_read.or(bytes(&READ_ATTRIBUTES));
}

/// ATA device statistics (`-l devstat`, ACS-3): the standard counters, preferred over
/// vendor attributes when present.
fn device_statistics(health: &mut DriveHealth, stats: &DeviceStatistics, block: Option<u64>) {
    let find = |name: &str| {
        stats
            .pages
            .iter()
            .flat_map(|p| &p.table)
            .find(|s| s.name == name)
            .and_then(|s| s.value)
    };
    let sectors = |name| find(name).and_then(|n| n.checked_mul(block.unwrap_or(512)));
    if let Some(written) = sectors("Logical Sectors Written") {
        health.bytes_written = Some(written);
    }
    if let Some(read) = sectors("Logical Sectors Read") {
        health.bytes_read = Some(read);
    }
    if let Some(used) = find("Percentage Used Endurance Indicator") {
        health.percentage_used = Some(used);
    }
}

/// Where smartmontools installs smartctl, searched in order. PATH is never used: tacho runs
/// as root, and a PATH entry another user can write would run their program.
const SMARTCTL_PATHS: [&str; 3] = [
    "/usr/sbin/smartctl",
    "/sbin/smartctl",
    "/usr/local/sbin/smartctl",
];

/// The first installed smartctl that only root can replace: a regular file owned by root,
/// not writable by group or others.
pub fn find_smartctl() -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    SMARTCTL_PATHS.iter().map(PathBuf::from).find(|path| {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.uid() == 0 && m.mode() & 0o022 == 0)
    })
}

/// Runs `smartctl -j -a -l devstat DEVICE` and returns what it printed. smartctl's exit
/// status is a bit mask that is non-zero for mere warnings, so the JSON is returned whenever
/// there is any; the caller reads its messages. Killed after `timeout` (a drive that stops
/// answering can hang it).
pub fn run_smartctl(
    smartctl: &Path,
    device: &Path,
    timeout: Duration,
) -> Result<String, HealthError> {
    let mut command = Command::new(smartctl);
    command
        .args(["-j", "-a", "-l", "devstat"])
        .arg(device)
        .env_clear()
        .env("LC_ALL", "C");
    output_within(command, timeout).map_err(|why| HealthError::Smartctl {
        path: smartctl.display().to_string(),
        why,
    })
}

/// Why running smartctl gave no output to read.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// It could not be started.
    #[error("cannot run it: {0}")]
    Spawn(std::io::Error),
    /// Its standard output was not a pipe.
    #[error("no output pipe")]
    NoPipe,
    /// It did not finish in time and was killed.
    #[error("no answer within {:.1} s; the drive may be hanging", .0.as_secs_f64())]
    Timeout(Duration),
    /// Waiting for it failed.
    #[error("cannot wait for it: {0}")]
    Wait(std::io::Error),
    /// The thread reading its output panicked.
    #[error("its output reader failed")]
    Reader,
    /// Its output could not be read (or was not UTF-8).
    #[error("unreadable output: {0}")]
    Read(std::io::Error),
    /// It printed nothing before exiting with this status.
    #[error("printed nothing ({0})")]
    Empty(std::process::ExitStatus),
}

/// Runs `command` and returns its standard output, or why not; kills it after `timeout`.
fn output_within(mut command: Command, timeout: Duration) -> Result<String, RunError> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(RunError::Spawn)?;
    let Some(stdout) = child.stdout.take() else {
        return Err(RunError::NoPipe);
    };
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        stdout
            .take(MAX_OUTPUT_BYTES)
            .read_to_string(&mut text)
            .map(|_| text)
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(RunError::Timeout(timeout));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(RunError::Wait(e)),
        }
    };
    let text = reader
        .join()
        .map_err(|_| RunError::Reader)?
        .map_err(RunError::Read)?;
    if text.trim().is_empty() {
        return Err(RunError::Empty(status));
    }
    Ok(text)
}

#[cfg(test)]
mod tests;
