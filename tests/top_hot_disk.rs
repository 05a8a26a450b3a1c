//! A dm striped table over four loop devices, one of them behind dm-delay: tacho top's
//! verdict must name the slow member. Needs root, dmsetup and the kernel's dm-delay and
//! striped targets; skips with the reason otherwise. Every dm device and loop is removed.

mod common;

use common::*;
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
        return Some("this kernel has no device-mapper (dmsetup targets failed)".into());
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
            return Some(format!("the kernel lacks the dm-{target} target"));
        }
    }
    None
}

#[test]
fn the_verdict_names_the_slow_member_of_a_dm_group() {
    if let Some(why) = dm_missing() {
        skip(&format!("hot-disk test: {why}"));
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

    let top = tacho()
        .args(["top", "--json", "--interval", "4s", "--count", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // 256 KiB writes span all four 64 KiB chunks: every member gets the same requests.
    sh(
        "dd",
        &[
            "if=/dev/zero",
            &format!("of=/dev/mapper/{stripe}"),
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
    assert_eq!(hot[0]["subject"], slow_kernel_name.as_str(), "{}", hot[0]);
    let message = hot[0]["message"].as_str().unwrap();
    assert!(
        message.contains(&slow) && message.contains(&stripe),
        "{message}"
    );
}
