//! A drive's own lifetime figures (SMART for ATA, the SMART / Health log for NVMe): bytes
//! written and read, wear, power-on hours, media errors.
//!
//! Two sources: smartctl's JSON output (smartmontools knows every vendor's attribute quirks,
//! so it is preferred when installed) and, for NVMe without smartctl, the admin Get Log Page
//! command issued natively. Virtual disks (virtio, xen) report neither; callers say so in
//! words rather than showing zeros.

mod nvme;
mod smartctl;

pub use nvme::{parse_smart_log, read_nvme_smart_log};
pub use smartctl::{find_smartctl, parse_smartctl_json, run_smartctl};

use serde::Serialize;

/// Where a [`DriveHealth`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthSource {
    /// `smartctl -j -a` (smartmontools), run by tacho.
    Smartctl,
    /// A saved `smartctl -j` output given as a file.
    SmartctlFile,
    /// The NVMe SMART / Health log page (log id 0x02), read by an admin ioctl.
    NvmeIoctl,
}

/// What sort of drive reported the figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DriveKind {
    /// An NVMe SSD.
    Nvme,
    /// An ATA/SATA SSD (rotation rate 0).
    AtaSsd,
    /// A spinning ATA/SATA hard disk.
    AtaHdd,
    /// Anything else smartctl spoke to (SCSI/SAS, unknown rotation).
    Other,
}

/// Lifetime figures a drive reports about itself. Every figure is `None` when the drive does
/// not report it (never 0 in its place).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DriveHealth {
    /// Where the figures came from; `None` only in parser tests.
    pub source: Option<HealthSource>,
    /// NVMe, SATA SSD, hard disk or other.
    pub kind: Option<DriveKind>,
    /// Model string as the drive reports it (untrusted text: escape before display).
    pub model: Option<String>,
    /// Bytes the host wrote to the drive over its life.
    pub bytes_written: Option<u64>,
    /// Bytes the host read from the drive over its life.
    pub bytes_read: Option<u64>,
    /// The drive's own estimate of its rated endurance used, in percent (may exceed 100).
    pub percentage_used: Option<u64>,
    /// Hours the drive has been powered on.
    pub power_on_hours: Option<u64>,
    /// Sectors remapped to spares (ATA attribute 5).
    pub reallocated_sectors: Option<u64>,
    /// Sectors waiting to be remapped (ATA attribute 197).
    pub pending_sectors: Option<u64>,
    /// Unrecovered data-integrity errors (NVMe media errors, ATA attribute 187).
    pub media_errors: Option<u64>,
    /// Whether the drive's overall self-assessment passed.
    pub smart_passed: Option<bool>,
    /// What could not be read or was left out, in words.
    pub notes: Vec<String>,
}

/// Why a drive's health could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    /// smartctl's output was not the JSON it documents.
    #[error("smartctl output is not valid smartctl JSON: {0}")]
    Json(String),
    /// smartctl could not be run, or did not finish in time.
    #[error("{path}: {why}")]
    Smartctl {
        /// The smartctl that was run.
        path: String,
        /// What went wrong.
        why: smartctl::RunError,
    },
    /// The NVMe device could not be opened or the ioctl failed.
    #[error("cannot read the NVMe health log of {device}: {reason}")]
    Nvme {
        /// The device path.
        device: String,
        /// The system's reason.
        reason: String,
    },
}
