//! Fixture sysfs trees shaped like the real one (see tests/fixtures/kernel/sys-dev-block-ls.txt).

use super::*;
use crate::kernel::fixture::{mkdir, symlink, write};
use proptest::prelude::*;
use tempfile::TempDir;

const VIRTIO: &str = "devices/pci0000:00/0000:00:02.0/virtio1/block";
const SATA: &str = "devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block";
const VIRTUAL: &str = "devices/virtual/block";

/// Adds a device directory `sys/<parent>/<name>` and its `sys/dev/block` link.
fn add(t: &Path, parent: &str, name: &str, devno: &str, sectors: u64) -> String {
    let rel = format!("{parent}/{name}");
    write(t, &format!("sys/{rel}/dev"), &format!("{devno}\n"));
    write(t, &format!("sys/{rel}/size"), &format!("{sectors}\n"));
    write(t, &format!("sys/{rel}/ro"), "0\n");
    mkdir(t, &format!("sys/{rel}/holders"));
    mkdir(t, &format!("sys/{rel}/slaves"));
    symlink(
        t,
        &format!("sys/dev/block/{devno}"),
        &format!("../../{rel}"),
    );
    rel
}

/// A whole disk with a queue/ directory.
fn add_disk(t: &Path, parent: &str, name: &str, devno: &str, rotational: &str, sched: &str) {
    let rel = add(t, parent, name, devno, 2097152);
    write(t, &format!("sys/{rel}/queue/logical_block_size"), "512\n");
    write(t, &format!("sys/{rel}/queue/physical_block_size"), "4096\n");
    write(t, &format!("sys/{rel}/queue/rotational"), rotational);
    write(t, &format!("sys/{rel}/queue/scheduler"), sched);
}

fn add_part(t: &Path, disk_rel: &str, name: &str, devno: &str, number: u32) {
    let rel = add(t, disk_rel, name, devno, 1048576);
    write(t, &format!("sys/{rel}/partition"), &format!("{number}\n"));
}

/// `holder` is built on `slave`: links both ways, as the kernel does.
fn stack(t: &Path, holder_rel: &str, slave_rel: &str) {
    let name = |rel: &str| rel.rsplit('/').next().unwrap().to_string();
    let abs = |rel: &str| t.join("sys").join(rel).to_string_lossy().into_owned();
    symlink(
        t,
        &format!("sys/{holder_rel}/slaves/{}", name(slave_rel)),
        &abs(slave_rel),
    );
    symlink(
        t,
        &format!("sys/{slave_rel}/holders/{}", name(holder_rel)),
        &abs(holder_rel),
    );
}

/// vda (+vda1), sda+sdb with partitions under md0 under dm-0 (LVM), a loop device, an HDD.
fn tree() -> (TempDir, SysRoot) {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path();
    add_disk(
        t,
        VIRTIO,
        "vda",
        "254:0",
        "1\n",
        "none [mq-deadline] kyber bfq \n",
    );
    add_part(t, &format!("{VIRTIO}/vda"), "vda1", "254:1", 1);
    for (i, disk) in ["sda", "sdb"].iter().enumerate() {
        let parent = SATA.replace("0:0:0:0", &format!("{i}:0:0:0"));
        add_disk(
            t,
            &parent,
            disk,
            &format!("8:{}", i * 16),
            "0\n",
            "[none] mq-deadline\n",
        );
        write(
            t,
            &format!("sys/{parent}/{disk}/device/model"),
            "Samsung SSD 870   \n",
        );
        add_part(
            t,
            &format!("{parent}/{disk}"),
            &format!("{disk}1"),
            &format!("8:{}", i * 16 + 1),
            1,
        );
        stack(
            t,
            &format!("{VIRTUAL}/md0"),
            &format!("{parent}/{disk}/{disk}1"),
        );
    }
    add_disk(t, VIRTUAL, "md0", "9:0", "0\n", "none\n");
    write(t, &format!("sys/{VIRTUAL}/md0/md/level"), "raid1\n");
    add_disk(t, VIRTUAL, "dm-0", "253:0", "0\n", "none\n");
    write(t, &format!("sys/{VIRTUAL}/dm-0/dm/name"), "vg0-root\n");
    stack(t, &format!("{VIRTUAL}/dm-0"), &format!("{VIRTUAL}/md0"));
    add_disk(t, VIRTUAL, "loop3", "7:3", "1\n", "none [mq-deadline]\n");
    write(
        t,
        &format!("sys/{VIRTUAL}/loop3/loop/backing_file"),
        "/dev/shm/x.img\n",
    );
    write(t, &format!("sys/{VIRTUAL}/loop3/ro"), "1\n");
    add_disk(t, SATA, "sdc", "8:32", "1\n", "[bfq] none\n");
    write(
        t,
        &format!("sys/{SATA}/sdc/device/model"),
        "WDC WD40EFRX-68N\n",
    );
    let root = SysRoot::under(t);
    (dir, root)
}

fn names(devs: &[BlockDevice]) -> Vec<&str> {
    devs.iter().map(|d| d.name.as_str()).collect()
}

#[test]
fn partition_takes_queue_attributes_from_its_disk() {
    let (_dir, root) = tree();
    let p = resolve(&root, 254, 1).unwrap();
    assert_eq!((p.name.as_str(), p.disk.as_str()), ("vda1", "vda"));
    assert_eq!(p.kind, DeviceKind::Partition);
    assert_eq!(p.size_bytes, 1048576 * 512);
    assert_eq!((p.logical_block_size, p.physical_block_size), (512, 4096));
    assert_eq!(p.scheduler.as_deref(), Some("mq-deadline"));
    assert_eq!(p.rotational, Some(true));
    assert_eq!(names(&leaves(&root, &p).unwrap()), ["vda"]);
    assert_eq!(
        names(&devices_for_stats(&root, &p).unwrap()),
        ["vda1", "vda"]
    );
    let disk = resolve(&root, 254, 0).unwrap();
    assert_eq!(names(&partitions(&root, &disk).unwrap()), ["vda1"]);
    assert!(holders(&root, &disk).unwrap().is_empty());
}

#[test]
fn lvm_on_md_on_partitions_leads_to_both_disks() {
    let (_dir, root) = tree();
    let dm = resolve(&root, 253, 0).unwrap();
    assert_eq!(dm.kind, DeviceKind::DeviceMapper);
    assert_eq!(
        (dm.name.as_str(), dm.display_name.as_str()),
        ("dm-0", "vg0-root")
    );
    assert_eq!(dm.scheduler.as_deref(), Some("none"));
    let leaves = leaves(&root, &dm).unwrap();
    assert_eq!(names(&leaves), ["sda", "sdb"]);
    assert_eq!(leaves[0].model.as_deref(), Some("Samsung SSD 870"));
    assert_eq!(leaves[0].rotational, Some(false));
    assert_eq!(
        names(&devices_for_stats(&root, &dm).unwrap()),
        ["dm-0", "sda", "sdb"]
    );
    let md = resolve(&root, 9, 0).unwrap();
    assert_eq!(md.kind, DeviceKind::Md);
    assert_eq!(holders(&root, &md).unwrap(), ["dm-0"]);
    let sda = resolve(&root, 8, 0).unwrap();
    assert_eq!(holders(&root, &sda).unwrap(), ["md0"]);
}

#[test]
fn loop_and_rotational_disk() {
    let (_dir, root) = tree();
    let lo = resolve(&root, 7, 3).unwrap();
    assert_eq!(lo.kind, DeviceKind::Loop);
    assert_eq!(lo.loop_backing_file.as_deref(), Some("/dev/shm/x.img"));
    assert!(lo.read_only);
    assert_eq!(names(&leaves(&root, &lo).unwrap()), ["loop3"]);
    let hdd = resolve(&root, 8, 32).unwrap();
    assert_eq!(hdd.kind, DeviceKind::Disk);
    assert_eq!(hdd.rotational, Some(true));
    assert_eq!(hdd.scheduler.as_deref(), Some("bfq"));
    assert_eq!(hdd.model.as_deref(), Some("WDC WD40EFRX-68N"));
    assert!(!hdd.read_only);
}

#[test]
fn errors_name_the_file() {
    let (dir, root) = tree();
    let err = resolve(&root, 0, 42).unwrap_err();
    assert!(err.is_not_found());
    assert!(err.to_string().contains("dev/block/0:42"), "{err}");
    write(
        dir.path(),
        &format!("sys/{SATA}/sdc/queue/rotational"),
        "yes\n",
    );
    let err = resolve(&root, 8, 32).unwrap_err().to_string();
    assert!(
        err.contains("queue/rotational") && err.contains("\"yes\""),
        "{err}"
    );
    write(dir.path(), &format!("sys/{SATA}/sdc/size"), "\n");
    assert!(
        resolve(&root, 8, 32)
            .unwrap_err()
            .to_string()
            .contains("sdc/size")
    );
}

#[test]
fn cycles_are_an_error_not_a_stack_overflow() {
    let (dir, root) = tree();
    stack(
        dir.path(),
        &format!("{VIRTUAL}/md0"),
        &format!("{VIRTUAL}/dm-0"),
    );
    let dm = resolve(&root, 253, 0).unwrap();
    assert!(
        leaves(&root, &dm)
            .unwrap_err()
            .to_string()
            .contains("deeper")
    );
}

#[test]
fn scheduler_forms() {
    assert_eq!(
        crate::kernel::bracketed_choice("none [mq-deadline] kyber bfq\n").as_deref(),
        Some("mq-deadline")
    );
    assert_eq!(
        crate::kernel::bracketed_choice("none\n").as_deref(),
        Some("none")
    );
    assert_eq!(crate::kernel::bracketed_choice("none kyber"), None);
    assert_eq!(crate::kernel::bracketed_choice(""), None);
}

proptest! {
    #[test]
    fn scheduler_parser_never_panics(s in "\\PC*") {
        let _ = crate::kernel::bracketed_choice(&s);
    }
}

#[test]
fn lists_disks_and_their_hardware() {
    let (dir, root) = tree();
    let t = dir.path();
    for (name, parent) in [("vda", VIRTIO), ("md0", VIRTUAL), ("sdc", SATA)] {
        symlink(
            t,
            &format!("sys/block/{name}"),
            &format!("../{parent}/{name}"),
        );
    }
    symlink(
        t,
        &format!("sys/{VIRTIO}/vda/device/driver"),
        "../../../../bus/virtio/drivers/virtio_blk",
    );
    symlink(
        t,
        &format!("sys/{VIRTIO}/vda/device/subsystem"),
        "../../../../bus/virtio",
    );
    write(t, &format!("sys/{VIRTIO}/vda/device/vendor"), "0x1af4\n");
    write(
        t,
        &format!("sys/{VIRTIO}/vda/queue/discard_max_bytes"),
        "1073741824\n",
    );
    write(
        t,
        &format!("sys/{SATA}/sdc/device/scsi_disk/0:0:0:0/cache_type"),
        "write back\n",
    );
    let disks = disks(&root).unwrap();
    assert_eq!(names(&disks), ["md0", "sdc", "vda"]);
    let vda = hardware(&disks[2]).unwrap();
    assert_eq!(vda.driver.as_deref(), Some("virtio_blk"));
    assert_eq!(vda.subsystem.as_deref(), Some("virtio"));
    assert_eq!(vda.vendor.as_deref(), Some("0x1af4"));
    assert_eq!(vda.discard_max_bytes, Some(1 << 30));
    let sdc = hardware(&disks[1]).unwrap();
    assert_eq!(sdc.device_cache_type.as_deref(), Some("write back"));
    assert_eq!(sdc.driver, None);
}
