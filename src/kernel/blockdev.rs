//! Block devices from sysfs: what a device number is, and which physical disks lie under it.
//!
//! Everything starts from `<sys>/dev/block/MAJ:MIN`, a symlink to the device's directory under
//! `/sys/devices`. A partition's directory sits inside its disk's directory, and stacked
//! devices (dm, md) list what they are built on in `slaves/` and what is built on them in
//! `holders/`. The benchmark records diskstats for the target device and for these leaves,
//! because a dm or md device's own counters hide how the load lands on the disks.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::mounts::parse_devno;
use super::{KernelError, Result, SysRoot, read_optional, read_text, read_u64};

/// Deepest device stack followed; real stacks are a handful deep, so more means a cycle.
const MAX_DEPTH: usize = 16;

/// What kind of block device a sysfs directory describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceKind {
    /// A whole disk (sda, vda, nvme0n1, zram0).
    Disk,
    /// A partition of a disk, of an md array or of a loop device.
    Partition,
    /// A device-mapper device (LVM, dm-crypt, multipath).
    DeviceMapper,
    /// An md software RAID array.
    Md,
    /// A loop device backed by a file.
    Loop,
}

/// A block device as sysfs describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlockDevice {
    /// Kernel name (`vda`, `vda1`, `dm-0`, `md0`, `loop3`, `nvme0n1p2`).
    pub name: String,
    /// Name an admin knows: the dm name (`vg0-root`) for device-mapper, else `name`.
    pub display_name: String,
    /// Device major number.
    pub major: u32,
    /// Device minor number.
    pub minor: u32,
    /// Disk, partition, dm, md or loop.
    pub kind: DeviceKind,
    /// The whole disk: the parent for a partition, else the device itself.
    pub disk: String,
    /// Size in bytes (sysfs `size` counts 512-byte sectors whatever the block size).
    pub size_bytes: u64,
    /// Smallest unit the device can address.
    pub logical_block_size: u64,
    /// Smallest unit the device writes without read-modify-write.
    pub physical_block_size: u64,
    /// Whether the device says it spins; `None` when sysfs lacks the attribute.
    pub rotational: Option<bool>,
    /// Model string of the disk's hardware, if it reports one.
    pub model: Option<String>,
    /// The active I/O scheduler (`mq-deadline`, `none`).
    pub scheduler: Option<String>,
    /// Whether the kernel marks the device read-only.
    pub read_only: bool,
    /// The file behind a loop device, if bound.
    pub loop_backing_file: Option<String>,
    /// The device's canonical sysfs directory (for further lookups; not part of the JSON).
    #[serde(skip)]
    pub sys_path: PathBuf,
}

/// The device with number `major:minor`.
pub fn resolve(root: &SysRoot, major: u32, minor: u32) -> Result<BlockDevice> {
    let link = root.sys.join(format!("dev/block/{major}:{minor}"));
    from_sys_dir(&super::canonical(&link)?)
}

/// The device behind `path`: the node's own device if `path` is a block device node
/// (`st_rdev`), otherwise the device of the filesystem holding the file (`st_dev`).
///
/// Filesystems without a single backing device (tmpfs, overlayfs, btrfs) have an anonymous
/// device number with no sysfs entry; that is a clean `Read` error naming the missing link.
pub fn from_path(root: &SysRoot, path: &Path) -> Result<BlockDevice> {
    let meta = std::fs::metadata(path).map_err(|source| KernelError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let dev = if meta.file_type().is_block_device() {
        meta.rdev()
    } else {
        meta.dev()
    };
    resolve(root, libc::major(dev), libc::minor(dev))
}

/// Reads the device whose canonical sysfs directory is `dir`.
pub fn from_sys_dir(dir: &Path) -> Result<BlockDevice> {
    let name = file_name(dir)?;
    let dev_file = dir.join("dev");
    let (major, minor) = parse_devno(&read_text(&dev_file)?)
        .ok_or_else(|| KernelError::parse(&dev_file, None, "expected MAJOR:MINOR".to_string()))?;
    let is_partition = dir.join("partition").exists();
    // A partition has no queue/ or device/ of its own: they belong to the disk around it.
    let disk_dir = match dir.parent() {
        Some(parent) if is_partition => parent,
        _ => dir,
    };
    let kind = if is_partition {
        DeviceKind::Partition
    } else if name.starts_with("dm-") || dir.join("dm").is_dir() {
        DeviceKind::DeviceMapper
    } else if name.starts_with("md") || dir.join("md").is_dir() {
        DeviceKind::Md
    } else if name.starts_with("loop") {
        DeviceKind::Loop
    } else {
        DeviceKind::Disk
    };
    let queue = disk_dir.join("queue");
    let display_name = match kind {
        DeviceKind::DeviceMapper => trimmed(&dir.join("dm/name"))?,
        _ => None,
    };
    let loop_backing_file = match kind {
        DeviceKind::Loop => trimmed(&dir.join("loop/backing_file"))?,
        _ => None,
    };
    Ok(BlockDevice {
        display_name: display_name.unwrap_or_else(|| name.clone()),
        disk: file_name(disk_dir)?,
        name,
        major,
        minor,
        kind,
        size_bytes: read_u64(&dir.join("size"))?.saturating_mul(512),
        logical_block_size: read_u64(&queue.join("logical_block_size"))?,
        physical_block_size: read_u64(&queue.join("physical_block_size"))?,
        rotational: read_flag(&queue.join("rotational"))?,
        model: trimmed(&disk_dir.join("device/model"))?,
        scheduler: read_optional(&queue.join("scheduler"))?
            .and_then(|s| super::bracketed_choice(&s)),
        read_only: read_flag(&dir.join("ro"))?.unwrap_or(false),
        loop_backing_file,
        sys_path: dir.to_path_buf(),
    })
}

/// Whether a loop device does direct I/O on its backing file (`loop/dio`): `Some(false)` means
/// its reads and writes go through the backing file's page cache. `None` for other devices or
/// a kernel without the attribute.
pub fn loop_direct_io(dev: &BlockDevice) -> Option<bool> {
    if dev.kind != DeviceKind::Loop {
        return None;
    }
    read_flag(&dev.sys_path.join("loop/dio")).ok().flatten()
}

/// A 0/1 attribute; missing is `None`, anything else is a parse error.
fn read_flag(path: &Path) -> Result<Option<bool>> {
    match read_optional(path)?.as_deref().map(str::trim) {
        None => Ok(None),
        Some("0") => Ok(Some(false)),
        Some("1") => Ok(Some(true)),
        Some(other) => Err(KernelError::parse(
            path,
            None,
            format!("expected 0 or 1, found {other:?}"),
        )),
    }
}

/// A text attribute, trimmed; missing or blank is `None` (vendors pad models with spaces).
fn trimmed(path: &Path) -> Result<Option<String>> {
    Ok(read_optional(path)?
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty()))
}

fn file_name(dir: &Path) -> Result<String> {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| KernelError::parse(dir, None, "not a device directory".to_string()))
}

/// Names in a sysfs directory, sorted; a missing directory is empty (older kernels and some
/// device types have no `holders/` or `slaves/`).
pub(crate) fn list_names(dir: &Path) -> Result<Vec<String>> {
    let Some(entries) = super::read_dir_optional(dir)? else {
        return Ok(Vec::new());
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| KernelError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    Ok(names)
}

/// Partitions of `dev` (empty for a device that is itself a partition or has none), in
/// sysfs name order. Like [`leaves`], works from `dev.sys_path` alone.
pub fn partitions(_root: &SysRoot, dev: &BlockDevice) -> Result<Vec<BlockDevice>> {
    list_names(&dev.sys_path)?
        .into_iter()
        .map(|name| dev.sys_path.join(name))
        .filter(|dir| dir.join("partition").is_file())
        .map(|dir| from_sys_dir(&dir))
        .collect()
}

/// What is built on `dev` or on any of its partitions (dm or md names from `holders/`):
/// non-empty means the device is in use even if nothing is mounted.
pub fn holders(root: &SysRoot, dev: &BlockDevice) -> Result<Vec<String>> {
    let mut names = list_names(&dev.sys_path.join("holders"))?;
    for part in partitions(root, dev)? {
        names.extend(list_names(&part.sys_path.join("holders"))?);
    }
    names.sort();
    names.dedup();
    Ok(names)
}

/// The whole physical disks under `dev`: a partition leads to its disk, a dm or md device to
/// its `slaves/`, recursively (dm-0 on md0 on sda1 + sdb1 gives sda and sdb). Deduplicated,
/// in discovery order. A loop device is its own leaf (its backing file is not followed).
///
/// The sysfs links inside `dev.sys_path` lead everywhere needed, so the root is not read;
/// it is taken for the same call shape as every other reader.
pub fn leaves(_root: &SysRoot, dev: &BlockDevice) -> Result<Vec<BlockDevice>> {
    let mut out = Vec::new();
    collect_leaves(dev, 0, &mut out)?;
    Ok(out)
}

fn collect_leaves(dev: &BlockDevice, depth: usize, out: &mut Vec<BlockDevice>) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(KernelError::parse(
            &dev.sys_path.join("slaves"),
            None,
            format!("device stack deeper than {MAX_DEPTH}; is there a cycle?"),
        ));
    }
    if dev.kind == DeviceKind::Partition
        && let Some(disk_dir) = dev.sys_path.parent()
    {
        return collect_leaves(&from_sys_dir(disk_dir)?, depth + 1, out);
    }
    let slaves_dir = dev.sys_path.join("slaves");
    let slaves = list_names(&slaves_dir)?;
    if slaves.is_empty() {
        if !out.iter().any(|d| same_device(d, dev)) {
            out.push(dev.clone());
        }
        return Ok(());
    }
    for slave in slaves {
        let below = from_sys_dir(&super::canonical(&slaves_dir.join(slave))?)?;
        collect_leaves(&below, depth + 1, out)?;
    }
    Ok(())
}

/// What `dev` is built on directly (`slaves/`): the members of an md array, the physical
/// volumes under an LVM volume, the device under a dm-crypt or dm-delay mapping.
pub fn slaves(_root: &SysRoot, dev: &BlockDevice) -> Result<Vec<BlockDevice>> {
    let dir = dev.sys_path.join("slaves");
    list_names(&dir)?
        .into_iter()
        .map(|name| from_sys_dir(&super::canonical(&dir.join(name))?))
        .collect()
}

/// `dev` itself followed by its leaves, without repeats: the devices whose diskstats deltas
/// the benchmark records (for a plain disk that is just the disk).
pub fn devices_for_stats(root: &SysRoot, dev: &BlockDevice) -> Result<Vec<BlockDevice>> {
    let mut out = vec![dev.clone()];
    for leaf in leaves(root, dev)? {
        if !out.iter().any(|d| same_device(d, &leaf)) {
            out.push(leaf);
        }
    }
    Ok(out)
}

/// Every block device in `<sys>/block` (whole disks, dm, md, loop, zram; no partitions),
/// in name order.
pub fn disks(root: &SysRoot) -> Result<Vec<BlockDevice>> {
    list_names(&root.sys.join("block"))?
        .into_iter()
        .map(|name| from_sys_dir(&super::canonical(&root.sys.join("block").join(name))?))
        .collect()
}

/// What a disk's hardware (or emulated hardware) says about itself, for telling an NVMe
/// drive from a SATA SSD or a virtual disk: the `rotational` flag alone cannot (virtio disks
/// report 1).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DiskHardware {
    /// The driver bound to the disk's device (`virtio_blk`, `sd`, `xen_blkfront`); NVMe
    /// namespaces have none of their own.
    pub driver: Option<String>,
    /// Bus of the disk's device (`virtio`, `scsi`, `nvme`, `xen`).
    pub subsystem: Option<String>,
    /// Vendor string or id (`ATA`, `QEMU`, `0x1af4` for virtio).
    pub vendor: Option<String>,
    /// Largest discard the queue accepts; 0 means the device does not take discards.
    pub discard_max_bytes: Option<u64>,
    /// The drive's own cache mode as SCSI/SATA reports it (`write back`, `write through`),
    /// from `device/scsi_disk/*/cache_type`.
    pub device_cache_type: Option<String>,
}

/// Reads [`DiskHardware`] of a whole disk.
pub fn hardware(dev: &BlockDevice) -> Result<DiskHardware> {
    let device = dev.sys_path.join("device");
    let link_name = |path: &Path| {
        std::fs::read_link(path)
            .ok()
            .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
    };
    let scsi_disk = list_names(&device.join("scsi_disk"))?;
    let device_cache_type = match scsi_disk.first() {
        Some(name) => trimmed(&device.join("scsi_disk").join(name).join("cache_type"))?,
        None => None,
    };
    let discard = dev.sys_path.join("queue/discard_max_bytes");
    Ok(DiskHardware {
        driver: link_name(&device.join("driver")),
        subsystem: link_name(&device.join("subsystem")),
        vendor: trimmed(&device.join("vendor"))?,
        discard_max_bytes: match read_optional(&discard)? {
            Some(text) => Some(super::parse_u64(text.trim(), &discard)?),
            None => None,
        },
        device_cache_type,
    })
}

fn same_device(a: &BlockDevice, b: &BlockDevice) -> bool {
    (a.major, a.minor) == (b.major, b.minor)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod real_tests;
