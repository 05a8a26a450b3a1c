//! An LVM2 physical volume made by pvcreate. LVM only labels block devices, so the image is
//! attached to a loop device first; that needs root, and the test skips without it.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::MIB;
use super::mkfs::{detect_path, expect, find_tool, require, run, sparse_image};

/// Detaches the loop device even when an assertion fails, so no test leaves one behind.
struct LoopDevice {
    losetup: PathBuf,
    path: String,
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = Command::new(&self.losetup)
            .args(["-d", &self.path])
            .status();
    }
}

fn skip(reason: &str) {
    let _ = writeln!(
        std::io::stderr(),
        "skipping pvcreate_on_loop_device: {reason}"
    );
}

fn attach(losetup: &Path, image: &Path) -> Option<LoopDevice> {
    let out = Command::new(losetup)
        .args(["--find", "--show"])
        .arg(image)
        .output()
        .ok()?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !path.is_empty()).then(|| LoopDevice {
        losetup: losetup.to_owned(),
        path,
    })
}

#[test]
fn pvcreate_on_loop_device() {
    let Some(pvcreate) = require("pvcreate_on_loop_device", "pvcreate", "lvm2") else {
        return;
    };
    let Some(losetup) = find_tool("losetup") else {
        return skip("losetup not found (apt-get install mount)");
    };
    // The owner of /proc/self is this process's effective user.
    if std::fs::metadata("/proc/self").map(|m| m.uid()).ok() != Some(0) {
        return skip("needs root for a loop device");
    }
    let (_dir, image) = sparse_image(16 * MIB);
    let Some(device) = attach(&losetup, &image) else {
        return skip("no free loop device");
    };
    // --devices limits LVM to this device, ignoring the host's devices file and filters.
    run(
        &pvcreate,
        &["-q", "--devices", &device.path, &device.path],
        "",
    );
    drop(device);
    let lvm = ("LVM2_member", 512 + 24);
    expect("pvcreate", &detect_path(&image), lvm, Some(lvm));
}
