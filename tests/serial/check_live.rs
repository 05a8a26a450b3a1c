//! `tacho check` follows real changes on this machine: THP enabled switched to always and
//! back, a disk's scheduler switched. Needs root and writable /sys files; every change is
//! undone by a guard when the test ends, passes, fails or panics. These tests are in their
//! own binary so no other test reads the machine while they change it.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn choices(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .map(|w| w.trim_matches(['[', ']']).to_string())
        .collect()
}

/// The finding `id` about `subject` from `tacho check --json --profile PROFILE`.
fn finding(profile: &str, id: &str, subject: Option<&str>) -> Value {
    let o = run(&["check", "--json", "--profile", profile]);
    let v = json_ok(&o);
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id && f["subject"].as_str() == subject)
        .cloned()
        .unwrap_or_else(|| panic!("no {id} {subject:?} finding in {v}"))
}

fn writable(path: &Path, test: &str) -> bool {
    if !is_root() {
        skip(&format!("{test}: needs root to change {}", path.display()));
        return false;
    }
    let ok = std::fs::OpenOptions::new().write(true).open(path).is_ok();
    if !ok {
        skip(&format!("{test}: {} is not writable here", path.display()));
    }
    ok
}

#[test]
fn thp_always_and_back_changes_the_finding() {
    let _kernel_wide = crate::common::kernel_wide();
    let path = Path::new("/sys/kernel/mm/transparent_hugepage/enabled");
    if !path.exists() || !writable(path, "thp_always_and_back") {
        return;
    }
    let guard = Restore::save(path).expect("THP enabled has an active choice");
    guard.set("always");
    let f = finding("redis", "thp_enabled", None);
    assert!(
        f["severity"] == "warn" || f["severity"] == "crit",
        "THP always for Redis: {f}"
    );
    assert!(f["evidence"][0]["value"] == "always", "{f}");
    assert_eq!(
        f["fix"],
        "echo never > /sys/kernel/mm/transparent_hugepage/enabled"
    );
    assert!(
        f["revert"]
            .as_str()
            .unwrap()
            .starts_with("echo always > /sys/kernel/mm/transparent_hugepage/enabled")
    );
    guard.set("never");
    let f = finding("redis", "thp_enabled", None);
    assert_eq!(f["severity"], "ok", "{f}");
    drop(guard);
    let restored = active(&std::fs::read_to_string(path).unwrap());
    let f = finding("default", "thp_enabled", None);
    assert_eq!(f["evidence"][0]["value"].as_str(), restored.as_deref());
}

#[test]
fn changing_a_scheduler_changes_the_finding() {
    let _kernel_wide = crate::common::kernel_wide();
    // The first disk with a scheduler choice and an io_scheduler finding (vda here).
    let disk = ["vda", "nvme0n1", "sda", "xvda"]
        .into_iter()
        .find(|d| Path::new(&format!("/sys/block/{d}/queue/scheduler")).exists());
    let Some(disk) = disk else {
        skip("changing_a_scheduler: no vda, nvme0n1, sda or xvda disk");
        return;
    };
    let path = PathBuf::from(format!("/sys/block/{disk}/queue/scheduler"));
    if !writable(&path, "changing_a_scheduler") {
        return;
    }
    let available = choices(&path);
    let guard = Restore::save(&path).expect("the scheduler file has an active choice");
    let original = finding("default", "io_scheduler", Some(disk));
    let mut seen = Vec::new();
    for sched in ["none", "bfq", "mq-deadline"] {
        if !available.iter().any(|a| a == sched) {
            continue;
        }
        guard.set(sched);
        let f = finding("default", "io_scheduler", Some(disk));
        assert_eq!(f["evidence"][1]["value"], sched, "{f}");
        seen.push((sched, f["severity"].as_str().unwrap().to_string()));
    }
    drop(guard);
    assert_eq!(
        finding("default", "io_scheduler", Some(disk))["severity"],
        original["severity"],
        "restored"
    );
    // Different schedulers get different verdicts on every kind of device tacho knows.
    let mut severities: Vec<&str> = seen.iter().map(|(_, s)| s.as_str()).collect();
    severities.sort_unstable();
    severities.dedup();
    assert!(severities.len() >= 2, "{seen:?}");
    if disk == "vda" {
        // A virtio disk reports rotational 1, yet none is right for it and bfq is not.
        assert!(seen.contains(&("none", "ok".to_string())), "{seen:?}");
        if available.iter().any(|a| a == "bfq") {
            assert!(seen.contains(&("bfq", "warn".to_string())), "{seen:?}");
        }
    }
}
