//! What each block device in /proc/diskstats is (disk, partition, dm, md, loop), what admins
//! call it, and what it is built on: read from sysfs once per device, not every sample.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;

use serde::Serialize;

use crate::kernel::blockdev::{self, DeviceKind};
use crate::kernel::diskstats::DiskCounters;
use crate::kernel::{SysRoot, read_optional};

/// A device as `tacho top` describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct DeviceInfo {
    /// Kernel name (`dm-0`), as iostat prints it by default.
    pub name: String,
    /// The name admins know: the dm name (`vg0-data`), else the kernel name.
    pub display_name: String,
    /// Whole disk, partition, device-mapper, md or loop device.
    pub kind: DeviceKind,
    /// The whole disk of a partition.
    pub parent: Option<String>,
    /// Whether it says it spins; `None` when sysfs does not say.
    pub rotational: Option<bool>,
    /// A hypervisor's disk (virtio, Xen, VMware, Hyper-V, QEMU): its rotational flag says
    /// nothing about the storage behind it, which serves requests in parallel.
    pub virtual_disk: bool,
    /// Kernel names of what it is built on directly (md members, LVM physical volumes).
    pub slaves: Vec<String>,
    /// Device-mapper UUID (`LVM-<vg uuid><lv uuid>`, `CRYPT-…`), for grouping LVM volumes.
    pub dm_uuid: Option<String>,
    /// A loop device's backing file and the device (major, minor) of the filesystem holding
    /// it: what the loop's writes become writes to (absent from records written before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backing: Option<(String, (u32, u32))>,
}

impl DeviceInfo {
    /// What can be said from the diskstats name alone, when sysfs has no entry for it.
    fn from_name(name: &str) -> DeviceInfo {
        let kind = if name.starts_with("dm-") {
            DeviceKind::DeviceMapper
        } else if name.starts_with("md") {
            DeviceKind::Md
        } else if name.starts_with("loop") {
            DeviceKind::Loop
        } else {
            DeviceKind::Disk
        };
        DeviceInfo {
            name: name.to_string(),
            display_name: name.to_string(),
            kind,
            parent: None,
            rotational: None,
            virtual_disk: name.starts_with("vd") || name.starts_with("xvd"),
            slaves: Vec::new(),
            dm_uuid: None,
            backing: None,
        }
    }

    /// Physical disks whose bytes count towards write amplification: not partitions, dm, md
    /// or loop devices (their bytes reach a disk below, and would be counted twice), and
    /// not RAM-backed zram or ram disks.
    pub fn is_physical_disk(&self) -> bool {
        self.kind == DeviceKind::Disk
            && !self.name.starts_with("zram")
            && !self.name.starts_with("ram")
    }
}

/// Device descriptions by major:minor.
pub type Devices = HashMap<(u32, u32), DeviceInfo>;

/// Describes every device in `stats` not yet in `known`, and again a loop device whose backing
/// file changed (it can be detached and attached to another at any time: one sysfs read per
/// loop device and sample tells); forgets devices that are gone.
pub fn refresh(root: &SysRoot, known: &mut Devices, stats: &[DiskCounters]) {
    known.retain(|devno, _| stats.iter().any(|s| (s.major, s.minor) == *devno));
    for s in stats {
        let devno = (s.major, s.minor);
        let stale = match known.get(&devno) {
            None => true,
            Some(d) if d.kind == DeviceKind::Loop => {
                let file = root.sys.join(format!(
                    "dev/block/{}:{}/loop/backing_file",
                    s.major, s.minor
                ));
                let now = read_optional(&file).ok().flatten();
                now.as_deref().map(str::trim) != d.backing.as_ref().map(|b| b.0.as_str())
            }
            Some(_) => false,
        };
        if stale {
            known.insert(devno, describe(root, s));
        }
    }
}

/// Reads one device from sysfs. A device sysfs cannot describe (it vanished, or a fixture
/// has no sysfs) keeps what its name tells: a description is a label, never worth failing
/// a sample for.
fn describe(root: &SysRoot, s: &DiskCounters) -> DeviceInfo {
    let Ok(dev) = blockdev::resolve(root, s.major, s.minor) else {
        return DeviceInfo::from_name(&s.name);
    };
    let slaves = blockdev::slaves(root, &dev)
        .map(|v| v.into_iter().map(|d| d.name).collect())
        .unwrap_or_default();
    let dm_uuid = read_optional(&dev.sys_path.join("dm/uuid"))
        .ok()
        .flatten()
        .map(|u| u.trim().to_string())
        .filter(|u| !u.is_empty());
    // The file as sysfs names it (" (deleted)" once unlinked: then it holds no name to stat).
    let backing = dev.loop_backing_file.as_ref().and_then(|file| {
        let meta = std::fs::metadata(file).ok()?;
        let dev = meta.dev();
        Some((
            file.clone(),
            (rustix::fs::major(dev), rustix::fs::minor(dev)),
        ))
    });
    DeviceInfo {
        backing,
        virtual_disk: is_virtual(&dev),
        parent: (dev.kind == DeviceKind::Partition).then(|| dev.disk.clone()),
        name: s.name.clone(),
        display_name: dev.display_name,
        kind: dev.kind,
        rotational: dev.rotational,
        slaves,
        dm_uuid,
    }
}

/// Virtual disks by bus (virtio, Xen) or by the model string hypervisors give their
/// emulated SCSI and ATA disks.
fn is_virtual(dev: &blockdev::BlockDevice) -> bool {
    let path = dev.sys_path.to_string_lossy();
    let model = dev
        .model
        .as_deref()
        .unwrap_or_default()
        .to_ascii_lowercase();
    path.contains("/virtio")
        || path.contains("/vbd-")
        || dev.name.starts_with("xvd")
        || ["virtual", "qemu", "vmware", "vbox"]
            .iter()
            .any(|m| model.contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::diskstats::parse_diskstats;
    use std::path::Path;

    const FIX: &str = "tests/fixtures/top/firecracker";

    #[test]
    fn describes_the_captured_devices() {
        let root = SysRoot::new(format!("{FIX}/a/proc"), format!("{FIX}/sys"));
        let text = std::fs::read_to_string(format!("{FIX}/a/proc/diskstats")).unwrap();
        let stats = parse_diskstats(&text, Path::new("diskstats")).unwrap();
        let mut devices = Devices::new();
        refresh(&root, &mut devices, &stats);
        let vda = &devices[&(254, 0)];
        // virtio says it spins; tacho knows better.
        assert_eq!((vda.kind, vda.rotational), (DeviceKind::Disk, Some(true)));
        assert!(vda.virtual_disk);
        assert!(vda.is_physical_disk());
        let loop0 = &devices[&(7, 0)];
        assert_eq!(loop0.kind, DeviceKind::Loop);
        assert!(!loop0.is_physical_disk());
        assert!(!devices[&(253, 0)].is_physical_disk(), "zram is RAM");

        let gone = stats
            .iter()
            .filter(|s| s.name != "vda")
            .cloned()
            .collect::<Vec<_>>();
        refresh(&root, &mut devices, &gone);
        assert!(!devices.contains_key(&(254, 0)));
    }

    #[test]
    fn unknown_devices_keep_their_name() {
        let root = SysRoot::new("/nonexistent", "/nonexistent");
        let stats = parse_diskstats("253 3 dm-3 1 0 8 0 0 0 0 0 0 0 0", Path::new("d")).unwrap();
        let mut devices = Devices::new();
        refresh(&root, &mut devices, &stats);
        assert_eq!(devices[&(253, 3)].kind, DeviceKind::DeviceMapper);
    }
}
