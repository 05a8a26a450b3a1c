//! What really holds the target's data, for the honesty checks: a virtual disk (whose host may
//! cache it), or holes in a file (which read as zeros without touching any disk).

use crate::kernel::SysRoot;
use crate::kernel::blockdev::{self, BlockDevice, DeviceKind};
use rustix::fs::SeekFrom;
use rustix::io::Errno;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Drivers of disks a hypervisor emulates or paravirtualises: bound to the disk itself
/// (virtio-blk, Xen) or to the SCSI host adapter above it (virtio-scsi, VMware PVSCSI,
/// Hyper-V storvsc, Xen pvscsi).
const VIRTUAL_DRIVERS: [&str; 7] = [
    "virtio_blk",
    "xen_blkfront",
    "vbd",
    "virtio_scsi",
    "vmw_pvscsi",
    "hv_storvsc",
    "xen-scsifront",
];

/// SCSI vendor strings of emulated disks (QEMU's, VMware's, Hyper-V's, VirtualBox's) and the
/// virtio PCI vendor id.
const VIRTUAL_VENDORS: [&str; 5] = ["QEMU", "VMware", "Msft", "VBOX", "0x1af4"];

/// Loop devices over loop devices are followed this deep, no further.
const MAX_LOOP_DEPTH: usize = 8;

/// Names the virtual disk under `device` and the evidence (`vda: driver virtio_blk`), or None
/// when every disk under it is a real one, RAM (zram, a loop over tmpfs) or unknown. A loop
/// device counts as what holds its backing file.
pub fn virtual_disk(root: &SysRoot, device: &BlockDevice) -> Option<String> {
    virtual_disk_at(root, device, 0)
}

fn virtual_disk_at(root: &SysRoot, device: &BlockDevice, depth: usize) -> Option<String> {
    if depth > MAX_LOOP_DEPTH {
        return None;
    }
    let leaves = blockdev::leaves(root, device).unwrap_or_else(|_| vec![device.clone()]);
    leaves.iter().find_map(|leaf| {
        if leaf.kind == DeviceKind::Loop {
            let below = loop_backing_device(root, leaf)?;
            return virtual_disk_at(root, &below, depth + 1);
        }
        disk_evidence(root, leaf)
    })
}

/// Names a loop device under `device` that reads and writes its backing file through the page
/// cache (`loop/dio` 0, losetup's default), with the file: O_DIRECT stops at the loop device,
/// so data read or written before comes from RAM (a loop over a file on a disk benchmarked
/// at 4.78 GiB/s this way).
pub fn buffered_loop(root: &SysRoot, device: &BlockDevice) -> Option<String> {
    buffered_loop_at(root, device, 0)
}

fn buffered_loop_at(root: &SysRoot, device: &BlockDevice, depth: usize) -> Option<String> {
    if depth > MAX_LOOP_DEPTH {
        return None;
    }
    let leaves = blockdev::leaves(root, device).unwrap_or_else(|_| vec![device.clone()]);
    leaves.iter().find_map(|leaf| {
        if leaf.kind != DeviceKind::Loop {
            return None;
        }
        if blockdev::loop_direct_io(leaf) == Some(false) {
            return Some(format!(
                "{} goes through the page cache of its backing file {} (loop direct I/O is \
                 off): the figures include RAM, not only the disk below; attach it with \
                 `losetup --direct-io=on` to measure that disk",
                leaf.name,
                leaf.loop_backing_file.as_deref().unwrap_or("?")
            ));
        }
        let below = loop_backing_device(root, leaf)?;
        buffered_loop_at(root, &below, depth + 1)
    })
}

/// The block device holding a loop device's backing file; None for a file on a filesystem
/// without one (tmpfs, where the loop device is RAM).
fn loop_backing_device(root: &SysRoot, dev: &BlockDevice) -> Option<BlockDevice> {
    let file = dev.loop_backing_file.as_deref()?;
    // sysfs marks a backing file removed since with " (deleted)"; its device is gone from view.
    let meta = std::fs::metadata(Path::new(file)).ok()?;
    let (major, minor) = (libc::major(meta.dev()), libc::minor(meta.dev()));
    // Major 0 is the kernel's anonymous devices: tmpfs, btrfs subvolumes, overlays.
    if major == 0 {
        return None;
    }
    blockdev::resolve(root, major, minor).ok()
}

fn disk_evidence(root: &SysRoot, disk: &BlockDevice) -> Option<String> {
    let hw = blockdev::hardware(disk).ok()?;
    if let Some(driver) = hw.driver.as_deref().filter(|d| VIRTUAL_DRIVERS.contains(d)) {
        return Some(format!("{}: driver {driver}", disk.name));
    }
    if let Some(vendor) = hw
        .vendor
        .as_deref()
        .filter(|v| VIRTUAL_VENDORS.iter().any(|known| v.starts_with(known)))
    {
        return Some(format!("{}: vendor {vendor}", disk.name));
    }
    if let Some(model) = disk.model.as_deref().filter(|m| {
        ["QEMU", "Virtual disk", "Virtual Disk", "VBOX"]
            .iter()
            .any(|k| m.contains(k))
    }) {
        return Some(format!("{}: model {model}", disk.name));
    }
    adapter_driver(root, &disk.sys_path.join("device"))
        .map(|d| format!("{}: adapter {d}", disk.name))
}

/// A virtual SCSI host adapter's driver, found on the devices above a SCSI disk.
fn adapter_driver(root: &SysRoot, device: &Path) -> Option<String> {
    let devices = root.sys.join("devices");
    let mut dir = std::fs::canonicalize(device).ok()?;
    while dir.pop() && dir.starts_with(&devices) {
        let driver = std::fs::read_link(dir.join("driver")).ok();
        let name = driver
            .as_ref()
            .and_then(|d| d.file_name())
            .map(|n| n.to_string_lossy().into_owned());
        if let Some(name) = name.filter(|n| VIRTUAL_DRIVERS.contains(&n.as_str())) {
            return Some(name);
        }
    }
    None
}

/// Bytes of `[0, len)` of `file` that are holes (SEEK_DATA/SEEK_HOLE); None where the
/// filesystem cannot tell (it then reports the whole file as data, so this is never an
/// overstatement).
pub fn hole_bytes(file: &File, len: u64) -> Option<u64> {
    let (mut pos, mut holes) = (0u64, 0u64);
    // lseek's offsets are signed.
    if i64::try_from(len).is_err() {
        return None;
    }
    while pos < len {
        let data = match rustix::fs::seek(file, SeekFrom::Data(pos)) {
            Ok(data) => data.min(len),
            // ENXIO: no data after `pos`, the rest is a hole; anything else: cannot tell.
            Err(e) => return (e == Errno::NXIO).then(|| holes + (len - pos)),
        };
        holes += data - pos;
        if data >= len {
            break;
        }
        pos = rustix::fs::seek(file, SeekFrom::Hole(data)).ok()?;
    }
    Some(holes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Seek, SeekFrom, Write};

    #[test]
    fn holes_are_counted() {
        let mut f = tempfile::tempfile().unwrap();
        f.set_len(8 << 20).unwrap();
        f.seek(SeekFrom::Start(4 << 20)).unwrap();
        f.write_all(&vec![1u8; 1 << 20]).unwrap();
        f.sync_all().unwrap();
        // 7 MiB of holes (a block or so less where allocation rounds up); /tmp is ext4 or
        // tmpfs here, both of which report holes.
        let h = hole_bytes(&f, 8 << 20).unwrap();
        assert!((6 << 20..=7 << 20).contains(&h), "{h}");
        let full = tempfile::tempfile().unwrap();
        (&full).write_all(&vec![1u8; 1 << 20]).unwrap();
        assert_eq!(hole_bytes(&full, 1 << 20), Some(0));
    }
}
