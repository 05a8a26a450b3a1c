//! A group of four loop devices with one slow member: tacho top's verdict must name it.
//! Two ways to build the group, each skipped with its reason where the kernel lacks it:
//! a dm striped table with one member behind dm-delay (needs device-mapper), and a btrfs
//! RAID0 with one member's image on a FUSE filesystem that delays every I/O (for kernels
//! without device-mapper, such as this project's Firecracker VMs). Every dm device, mount,
//! loop device and FUSE server is removed.

use crate::common::*;
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Removes the dm devices it created, newest first, even when the test fails.
struct DmGuard(Vec<String>);

impl DmGuard {
    fn create(&mut self, name: &str, table: &str) {
        sh("dmsetup", &["create", name, "--table", table]);
        self.0.push(name.to_string());
    }
}

impl Drop for DmGuard {
    fn drop(&mut self) {
        for name in self.0.iter().rev() {
            // A device can stay busy for a moment after the last I/O; retry briefly.
            for _ in 0..50 {
                let ok = Command::new("dmsetup")
                    .args(["remove", name])
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success());
                if ok {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Why device-mapper's delay and striped targets cannot be used here, if they cannot.
/// What `dm_missing` says when the kernel itself has no device-mapper (or lacks a target):
/// the one skip CI accepts for this test.
const DM_ABSENT: &str = "this kernel has no device-mapper";

fn dm_missing() -> Option<String> {
    if !is_root() {
        return Some("needs root".into());
    }
    if !have_tool("dmsetup") {
        return Some("dmsetup is not installed (apt-get install dmsetup)".into());
    }
    let targets = |_: ()| {
        Command::new("dmsetup")
            .arg("targets")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let Some(mut list) = targets(()) else {
        return Some(DM_ABSENT.into());
    };
    if !list.contains("delay") {
        let _ = Command::new("modprobe")
            .arg("dm-delay")
            .stderr(Stdio::null())
            .status();
        list = targets(()).unwrap_or_default();
    }
    for target in ["delay", "striped"] {
        if !list.lines().any(|l| l.starts_with(target)) {
            return Some(format!("{DM_ABSENT}: no dm-{target} target"));
        }
    }
    None
}

/// The one hot-disk finding of a 4 s `tacho top` sample during which 30 direct 256 KiB writes
/// go to `target`.
fn hot_disk_while_writing(target: &str) -> Value {
    let top = tacho()
        .args(["top", "--json", "--interval", "4s", "--count", "1"])
        .spawn_piped();
    std::thread::sleep(Duration::from_millis(500));
    sh(
        "dd",
        &[
            "if=/dev/zero",
            &format!("of={target}"),
            "bs=256k",
            "count=30",
            "oflag=direct",
            "status=none",
        ],
    );
    let o = wait_output(top, Duration::from_secs(30));
    let s: Value = serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
    let hot: Vec<&Value> = s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "hot_disk")
        .collect();
    assert_eq!(hot.len(), 1, "{}", s["findings"]);
    hot[0].clone()
}

#[test]
fn the_verdict_names_the_slow_member_of_a_dm_group() {
    if let Some(why) = dm_missing() {
        if why.starts_with(DM_ABSENT) {
            skip_kernel_lacks(KernelLacks::DeviceMapper, &format!("hot-disk test: {why}"));
        } else {
            skip(&format!("hot-disk test: {why}"));
        }
        return;
    }
    const MEMBER: u64 = 64 << 20;
    let loops: Vec<LoopDev> = (0..4)
        .map_while(|_| LoopDev::new("hot-disk test", MEMBER))
        .collect();
    if loops.len() < 4 {
        return;
    }
    let sectors = MEMBER / 512;
    let tag = std::process::id();
    let (slow, stripe) = (format!("tacho-slow-{tag}"), format!("tacho-stripe-{tag}"));
    let mut dm = DmGuard(Vec::new());
    dm.create(
        &slow,
        &format!("0 {sectors} delay {} 0 60", loops[2].path()),
    );
    dm.create(
        &stripe,
        &format!(
            "0 {} striped 4 128 {} 0 {} 0 /dev/mapper/{slow} 0 {} 0",
            sectors * 4,
            loops[0].path(),
            loops[1].path(),
            loops[3].path()
        ),
    );
    let slow_kernel_name = std::fs::canonicalize(format!("/dev/mapper/{slow}"))
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let _ = Command::new("udevadm").arg("settle").status();

    // 256 KiB writes span all four 64 KiB chunks: every member gets the same requests.
    let hot = hot_disk_while_writing(&format!("/dev/mapper/{stripe}"));
    assert_eq!(hot["subject"], slow_kernel_name.as_str(), "{hot}");
    let message = hot["message"].as_str().unwrap();
    assert!(
        message.contains(&slow) && message.contains(&stripe),
        "{message}"
    );
}

/// Why a btrfs RAID with a FUSE-delayed member cannot be built here, if it cannot.
fn btrfs_fuse_missing() -> Option<String> {
    if !is_root() {
        return Some("needs root".into());
    }
    if !have_tool("mkfs.btrfs") {
        return Some("mkfs.btrfs is not installed (apt-get install btrfs-progs)".into());
    }
    let filesystems = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    for fs in ["btrfs", "fuse"] {
        if !filesystems.split_whitespace().any(|w| w == fs) {
            return Some(format!("this kernel has no {fs} filesystem"));
        }
    }
    let fusepy = Command::new(PYTHON)
        .args(["-c", "import fusepy"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !fusepy {
        return Some(format!(
            "{PYTHON} cannot import fusepy (apt-get install python3-fusepy)"
        ));
    }
    None
}

#[test]
fn the_verdict_names_the_slow_member_of_a_btrfs_raid() {
    if let Some(why) = btrfs_fuse_missing() {
        skip(&format!("btrfs hot-disk test: {why}"));
        return;
    }
    // Declared in this order so they drop in reverse: unmount btrfs, detach the loops,
    // then stop the FUSE server under the slow member's image.
    let slow_backing = tempfile::tempdir_in("/dev/shm").unwrap();
    let slow_fs = FuseMount::start(slow_backing.path(), &["--delay", "0.02"]);
    const MEMBER: u64 = 256 << 20;
    let Some(slow) = LoopDev::new_in("btrfs hot-disk test", MEMBER, slow_fs.path()) else {
        return;
    };
    let peers: Vec<LoopDev> = (0..3)
        .map_while(|_| LoopDev::new("btrfs hot-disk test", MEMBER))
        .collect();
    if peers.len() < 3 {
        return;
    }
    let label = format!("tacho-hot-{}", std::process::id());
    let members = [
        peers[0].path(),
        peers[1].path(),
        slow.path(),
        peers[2].path(),
    ];
    let mut mkfs = vec!["-q", "-f", "-K", "-L", &label, "-d", "raid0", "-m", "raid0"];
    mkfs.extend(members);
    sh("mkfs.btrfs", &mkfs);
    let dir = tempfile::tempdir().unwrap();
    let _mounted = MountGuard::mount(&[peers[0].path()], dir.path()).unwrap();

    // RAID0 stripes 64 KiB per device: each aligned 256 KiB write reaches all four.
    let hot = hot_disk_while_writing(&dir.path().join("f").display().to_string());
    assert_eq!(hot["subject"], slow.name().as_str(), "{hot}");
    let message = hot["message"].as_str().unwrap();
    assert!(
        message.contains(&label) && message.contains("btrfs") && message.contains("3 peers"),
        "{message}"
    );
}
