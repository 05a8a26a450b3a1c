//! The bus a disk hangs on and how many bytes per second it can carry: a negotiated PCIe link
//! (NVMe), a SATA link, or a USB port. A benchmark faster than its link measured a cache.

use super::SysRoot;
use super::blockdev::BlockDevice;
use serde::Serialize;
use std::path::Path;

/// The link a disk hangs on: what it is and its ceiling in bytes per second.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    /// What it is, as an admin would say it: "PCIe 8.0 GT/s x4", "SATA 6.0 Gbps", "USB 480 Mbps".
    pub description: String,
    /// Payload bytes per second the link can carry at most (line coding removed).
    pub bytes_per_s: f64,
}

/// The link of a whole disk, found by walking up its sysfs device path; `None` for virtual
/// devices (virtio, loop, dm, md) and whatever sysfs does not describe.
pub fn link_of(root: &SysRoot, disk: &BlockDevice) -> Option<Link> {
    let mut dir = disk.sys_path.as_path();
    while let Some(parent) = dir.parent() {
        if !parent.starts_with(&root.sys) || parent == root.sys {
            break;
        }
        dir = parent;
        if let Some(link) = pcie(dir).or_else(|| usb(dir)) {
            return Some(link);
        }
        let name = dir.file_name()?.to_str()?;
        if let Some(port) = name
            .strip_prefix("ata")
            .filter(|n| n.parse::<u32>().is_ok())
        {
            let spd = root.sys.join(format!("class/ata_link/link{port}/sata_spd"));
            return read(&spd).and_then(|text| parse_sata(&text));
        }
    }
    None
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn pcie(dir: &Path) -> Option<Link> {
    let speed = read(&dir.join("current_link_speed"))?;
    let width = read(&dir.join("current_link_width"))?;
    parse_pcie(&speed, &width)
}

fn usb(dir: &Path) -> Option<Link> {
    // A USB device directory has both; interfaces and hubs' ports lack `busnum`.
    read(&dir.join("busnum"))?;
    parse_usb(&read(&dir.join("speed"))?)
}

/// `8.0 GT/s PCIe` and `4` → 8 GT/s × 4 lanes × 128/130 ÷ 8 bits.
pub fn parse_pcie(speed: &str, width: &str) -> Option<Link> {
    let gts: f64 = speed.split_whitespace().next()?.parse().ok()?;
    let lanes: u32 = width.trim().parse().ok()?;
    if !(gts > 0.0 && gts < 1000.0) || lanes == 0 || lanes > 64 {
        return None;
    }
    // PCIe 1 and 2 use 8b/10b line coding, PCIe 3 and later 128b/130b.
    let coding = if gts <= 5.0 { 0.8 } else { 128.0 / 130.0 };
    Some(Link {
        description: format!("PCIe {gts:.1} GT/s x{lanes}"),
        bytes_per_s: gts * 1e9 * f64::from(lanes) * coding / 8.0,
    })
}

/// `6.0 Gbps` → 6 Gbit/s with 8b/10b coding: 600 MB/s.
pub fn parse_sata(text: &str) -> Option<Link> {
    let gbps: f64 = text.split_whitespace().next()?.parse().ok()?;
    (gbps > 0.0 && gbps < 100.0).then(|| Link {
        description: format!("SATA {gbps:.1} Gbps"),
        bytes_per_s: gbps * 1e9 * 0.8 / 8.0,
    })
}

/// `480` (Mbit/s, as sysfs gives it) → raw rate ÷ 8; USB's own overheads make the true payload
/// lower still, so this bound is generous.
pub fn parse_usb(text: &str) -> Option<Link> {
    let mbps: f64 = text.trim().parse().ok()?;
    (mbps > 0.0 && mbps < 1e6).then(|| Link {
        description: format!("USB {mbps} Mbps"),
        bytes_per_s: mbps * 1e6 / 8.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::blockdev;
    use proptest::prelude::*;
    use std::fs;

    #[test]
    fn parses_links() {
        let nvme = parse_pcie("8.0 GT/s PCIe\n", "4\n").unwrap();
        assert_eq!(nvme.description, "PCIe 8.0 GT/s x4");
        assert!((nvme.bytes_per_s - 3.938e9).abs() < 1e7);
        let gen2 = parse_pcie("5.0 GT/s PCIe", "1").unwrap();
        assert_eq!(gen2.bytes_per_s, 5e8);
        assert_eq!(parse_sata("6.0 Gbps\n").unwrap().bytes_per_s, 6e8);
        assert_eq!(parse_usb("480\n").unwrap().bytes_per_s, 6e7);
        assert!(parse_pcie("Unknown", "0").is_none());
        assert!(parse_sata("<unknown>").is_none());
    }

    fn disk_at(sys: &Path, devpath: &str, name: &str) -> BlockDevice {
        let dir = sys.join(devpath).join("block").join(name);
        fs::create_dir_all(dir.join("queue")).unwrap();
        fs::write(dir.join("dev"), "8:0\n").unwrap();
        fs::write(dir.join("size"), "1000\n").unwrap();
        fs::write(dir.join("queue/logical_block_size"), "512\n").unwrap();
        fs::write(dir.join("queue/physical_block_size"), "512\n").unwrap();
        blockdev::from_sys_dir(&dir).unwrap()
    }

    #[test]
    fn finds_the_link_of_sata_and_nvme_disks() {
        let tmp = tempfile::tempdir().unwrap();
        let root = SysRoot::under(tmp.path());
        let sata = disk_at(
            &root.sys,
            "devices/pci0000:00/0000:00:17.0/ata3/host2/target2:0:0/2:0:0:0",
            "sda",
        );
        fs::create_dir_all(root.sys.join("class/ata_link/link3")).unwrap();
        fs::write(root.sys.join("class/ata_link/link3/sata_spd"), "3.0 Gbps\n").unwrap();
        assert_eq!(link_of(&root, &sata).unwrap().description, "SATA 3.0 Gbps");

        let pci = "devices/pci0000:00/0000:00:1d.0/0000:3d:00.0";
        let nvme = disk_at(&root.sys, &format!("{pci}/nvme/nvme0"), "nvme0n1");
        fs::write(
            root.sys.join(pci).join("current_link_speed"),
            "16.0 GT/s PCIe\n",
        )
        .unwrap();
        fs::write(root.sys.join(pci).join("current_link_width"), "4\n").unwrap();
        assert_eq!(
            link_of(&root, &nvme).unwrap().description,
            "PCIe 16.0 GT/s x4"
        );

        let virtio = disk_at(&root.sys, "devices/virtual/virtio1", "vda");
        assert_eq!(link_of(&root, &virtio), None);
    }

    proptest! {
        #[test]
        fn parsers_never_panic(a in ".{0,20}", b in ".{0,8}") {
            let _ = parse_pcie(&a, &b);
            let _ = parse_sata(&a);
            let _ = parse_usb(&a);
        }
    }
}
