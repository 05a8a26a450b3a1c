//! The NVMe SMART / Health Information log page (log id 0x02), read natively with the
//! admin-command ioctl when smartctl is not installed.
//!
//! Hand-written with `libc` (already a dependency) because the request is one fixed 72-byte
//! structure from the kernel's uapi `linux/nvme_ioctl.h`; the nvme crates on crates.io wrap
//! far more than this one read.

use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use super::{DriveHealth, DriveKind, HealthError, HealthSource};

/// Size of the SMART / Health log page (NVMe base specification, figure "SMART / Health
/// Information Log Page").
pub const SMART_LOG_BYTES: usize = 512;

/// NVMe "data units" are thousands of 512-byte units.
const DATA_UNIT_BYTES: u128 = 512_000;

/// `struct nvme_admin_cmd` from `linux/nvme_ioctl.h` (also `nvme_passthru_cmd`).
#[repr(C)]
#[derive(Default)]
struct AdminCmd {
    opcode: u8,
    flags: u8,
    rsvd1: u16,
    nsid: u32,
    cdw2: u32,
    cdw3: u32,
    metadata: u64,
    addr: u64,
    metadata_len: u32,
    data_len: u32,
    cdw10: u32,
    cdw11: u32,
    cdw12: u32,
    cdw13: u32,
    cdw14: u32,
    cdw15: u32,
    timeout_ms: u32,
    result: u32,
}

const _: () = assert!(std::mem::size_of::<AdminCmd>() == 72);

/// `_IOWR('N', 0x41, struct nvme_admin_cmd)`: direction read|write (3) in bits 30-31, the
/// argument size in bits 16-29, the type in bits 8-15, the number in bits 0-7.
const NVME_IOCTL_ADMIN_CMD: u32 =
    (3 << 30) | ((std::mem::size_of::<AdminCmd>() as u32) << 16) | ((b'N' as u32) << 8) | 0x41;

/// Admin opcode Get Log Page.
const GET_LOG_PAGE: u8 = 0x02;
/// Log identifier of the SMART / Health Information page.
const SMART_LOG_ID: u32 = 0x02;
/// The controller-wide log (not one namespace's).
const ALL_NAMESPACES: u32 = 0xffff_ffff;

/// Reads the SMART / Health log of the NVMe drive behind `device` (a namespace block device
/// such as `/dev/nvme0n1`; the kernel passes admin commands through it). Needs
/// CAP_SYS_ADMIN. The path is opened once, without following a link, and must be a block
/// device.
pub fn read_nvme_smart_log(device: &Path) -> Result<[u8; SMART_LOG_BYTES], HealthError> {
    let fail = |reason: String| HealthError::Nvme {
        device: device.display().to_string(),
        reason,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(device)
        .map_err(|e| fail(e.to_string()))?;
    let meta = file.metadata().map_err(|e| fail(e.to_string()))?;
    if !meta.file_type().is_block_device() {
        return Err(fail("not a block device".into()));
    }
    let mut page = [0u8; SMART_LOG_BYTES];
    let dwords = (SMART_LOG_BYTES / 4) as u32;
    let mut cmd = AdminCmd {
        opcode: GET_LOG_PAGE,
        nsid: ALL_NAMESPACES,
        addr: page.as_mut_ptr() as u64,
        data_len: SMART_LOG_BYTES as u32,
        // Number of dwords minus one in bits 16-27, the log id in bits 0-7.
        cdw10: ((dwords - 1) << 16) | SMART_LOG_ID,
        ..AdminCmd::default()
    };
    // SAFETY: `cmd` is a valid `nvme_admin_cmd` for the duration of the call and `addr`
    // points at `page`, which is `data_len` bytes long and outlives the call.
    let rc = unsafe {
        libc::ioctl(
            file.as_raw_fd(),
            NVME_IOCTL_ADMIN_CMD as _,
            &mut cmd as *mut AdminCmd,
        )
    };
    match rc {
        0 => Ok(page),
        r if r < 0 => Err(fail(std::io::Error::last_os_error().to_string())),
        status => Err(fail(format!(
            "the drive answered with NVMe status {status:#x}"
        ))),
    }
}

/// Parses a SMART / Health log page. Offsets are the NVMe base specification's; 128-bit
/// counters that do not fit in `u64` bytes are `None`.
pub fn parse_smart_log(page: &[u8]) -> DriveHealth {
    let u128_at = |at: usize| -> Option<u128> {
        Some(u128::from_le_bytes(page.get(at..at + 16)?.try_into().ok()?))
    };
    let count = |at: usize| u128_at(at).and_then(|v| u64::try_from(v).ok());
    let bytes = |at: usize| {
        u128_at(at)
            .and_then(|units| units.checked_mul(DATA_UNIT_BYTES))
            .and_then(|b| u64::try_from(b).ok())
    };
    let mut notes = Vec::new();
    if page.len() < SMART_LOG_BYTES {
        notes.push(format!(
            "the NVMe health log was {} bytes, not {SMART_LOG_BYTES}",
            page.len()
        ));
    }
    DriveHealth {
        source: Some(HealthSource::NvmeIoctl),
        kind: Some(DriveKind::Nvme),
        model: None,
        percentage_used: page.get(5).map(|&p| u64::from(p)),
        bytes_read: bytes(32),
        bytes_written: bytes(48),
        power_on_hours: count(128),
        media_errors: count(160),
        reallocated_sectors: None,
        pending_sectors: None,
        // Critical warning bits 0-4 (spare, temperature, reliability, read-only, backup).
        smart_passed: page.first().map(|w| w & 0x1f == 0),
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn put(page: &mut [u8], at: usize, value: u128) {
        page[at..at + 16].copy_from_slice(&value.to_le_bytes());
    }

    #[test]
    fn log_page_fields_at_their_spec_offsets() {
        let mut page = [0u8; SMART_LOG_BYTES];
        page[5] = 13;
        put(&mut page, 32, 7);
        put(&mut page, 48, 38_477_000);
        put(&mut page, 128, 5_100);
        put(&mut page, 160, 2);
        let h = parse_smart_log(&page);
        assert_eq!(h.percentage_used, Some(13));
        assert_eq!(h.bytes_read, Some(7 * 512_000));
        assert_eq!(h.bytes_written, Some(38_477_000 * 512_000));
        assert_eq!(h.power_on_hours, Some(5_100));
        assert_eq!(h.media_errors, Some(2));
        assert_eq!(h.smart_passed, Some(true));
    }

    #[test]
    fn counters_beyond_u64_bytes_are_none_not_wrapped() {
        let mut page = [0u8; SMART_LOG_BYTES];
        put(&mut page, 48, u128::from(u64::MAX));
        page[0] = 0x04;
        let h = parse_smart_log(&page);
        assert_eq!(h.bytes_written, None);
        assert_eq!(h.smart_passed, Some(false));
    }

    #[test]
    fn only_a_block_device_is_asked_and_links_are_not_followed() {
        let e = read_nvme_smart_log(Path::new("/dev/null")).unwrap_err();
        assert!(e.to_string().ends_with("not a block device"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("nvme0n1");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        let e = read_nvme_smart_log(&link).unwrap_err().to_string();
        assert!(e.contains("symbolic links"), "{e}");
    }

    #[test]
    fn ioctl_number_matches_the_kernel_header() {
        // NVME_IOCTL_ADMIN_CMD as the C preprocessor expands it on Linux.
        assert_eq!(NVME_IOCTL_ADMIN_CMD, 0xC048_4E41);
    }

    proptest! {
        #[test]
        fn any_bytes_never_panic(page in prop::collection::vec(any::<u8>(), 0..600)) {
            let _ = parse_smart_log(&page);
        }
    }
}
