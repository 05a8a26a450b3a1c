//! `tacho report disk` through the binary: this VM's virtio disk (no health data), real
//! smartctl captures fed with `--smartctl-json` (see tests/fixtures/smart/README.md), and bad
//! input.

use crate::common;
use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn capture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/smart")
        .join(name)
}

/// (sectors read, sectors written) of `disk` in /proc/diskstats now.
fn sectors(disk: &str) -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/diskstats").unwrap();
    let fields: Vec<&str> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.get(2) == Some(&disk))
        .unwrap_or_else(|| panic!("{disk} not in /proc/diskstats"));
    (fields[5].parse().unwrap(), fields[9].parse().unwrap())
}

/// The virtio disk of this VM (and of CI), if there is one.
fn virtio_disk() -> Option<&'static str> {
    Path::new("/sys/block/vda").exists().then_some("vda")
}

#[test]
fn virtio_disk_states_no_health_data_and_counts_since_boot() {
    let Some(disk) = virtio_disk() else {
        return skip("no virtio disk vda on this machine");
    };
    let before = sectors(disk);
    let doc = json_ok(&run(&["report", "disk", "--json"]));
    let after = sectors(disk);
    assert_eq!(doc["schema"], "tacho.report-disk.v1");
    let entry = doc["disks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == disk)
        .unwrap_or_else(|| panic!("{disk} missing from {doc}"));
    assert_eq!(entry["health"], Value::Null);
    assert_eq!(
        entry["no_health"],
        "vda: virtio disk, the drive reports no health data"
    );
    assert_eq!(entry["projection"], Value::Null);
    let written = entry["since_boot"]["bytes_written"].as_u64().unwrap();
    let read = entry["since_boot"]["bytes_read"].as_u64().unwrap();
    assert!(
        (before.1 * 512..=after.1 * 512).contains(&written),
        "{written} not within the kernel's {before:?}..{after:?} sectors"
    );
    assert!((before.0 * 512..=after.0 * 512).contains(&read));
    assert_eq!(entry["rate"]["basis"], "since_boot");

    let text = stdout(&run(&["report", "disk", disk]));
    assert!(
        text.starts_with("vda: virtio disk, the drive reports no health data\n"),
        "{text}"
    );
    assert!(text.contains("  since boot  "), "{text}");
}

#[test]
fn captures_give_their_figures_and_a_projection() {
    let Some(disk) = virtio_disk() else {
        return skip("no virtio disk vda on this machine");
    };
    let sata = capture("sata-ssd.json");
    let o = run(&[
        "report",
        "disk",
        disk,
        "--smartctl-json",
        sata.to_str().unwrap(),
        "--rated-tbw",
        "150",
        "--json",
    ]);
    let doc = json_ok(&o);
    let entry = &doc["disks"][0];
    let health = &entry["health"];
    assert_eq!(health["source"], "smartctl_file");
    assert_eq!(health["kind"], "ata_ssd");
    let written = 1_375_952_821u64 * 512;
    assert_eq!(health["bytes_written"], written);
    assert_eq!(health["power_on_hours"], 7753);
    assert_eq!(health["reallocated_sectors"], 0);
    let p = &entry["projection"];
    assert_eq!(p["rated_from"], "warranty");
    assert_eq!(p["rated_bytes"], 150_000_000_000_000u64);
    let percent = p["percent_used"].as_f64().unwrap();
    assert!(
        (percent - written as f64 * 100.0 / 150e12).abs() < 1e-9,
        "{p}"
    );
    let per_day = p["bytes_per_day"].as_f64().unwrap();
    assert_eq!(
        per_day,
        entry["rate"]["bytes_written_per_day"].as_f64().unwrap()
    );
    let years = p["years_left"].as_f64().unwrap();
    let expected = (150e12 - written as f64) / per_day / 365.25;
    assert!(
        (years - expected).abs() <= expected * 1e-9,
        "{years} vs {expected}"
    );

    let nvme = capture("nvme.json");
    let text = stdout(&run(&[
        "report",
        "disk",
        disk,
        "--smartctl-json",
        nvme.to_str().unwrap(),
        "--rated-tbw",
        "150",
    ]));
    assert!(
        text.contains("Samsung SSD 970 EVO Plus 250GB · NVMe"),
        "{text}"
    );
    assert!(text.contains("1.01 TB written, 1.04 TB read"), "{text}");
    assert!(text.contains("of the 150 TBW warranty"), "{text}");
    assert!(text.contains("(since boot, "), "{text}");

    let hdd = capture("hdd.json");
    let text = stdout(&run(&[
        "report",
        "disk",
        disk,
        "--smartctl-json",
        hdd.to_str().unwrap(),
    ]));
    assert!(text.contains("ST16000NM001G-2KK103 · hard disk"), "{text}");
    assert!(
        text.contains("0 reallocated sectors, 0 pending sectors"),
        "{text}"
    );
    assert!(
        text.contains("no projection: the drive reports no wear figure"),
        "{text}"
    );
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let e = assert_error(&run(&["report", "disk", "sdz9"]));
    assert!(
        e.contains("unknown disk \"sdz9\"") && e.contains("lsblk -d"),
        "{e}"
    );
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.json");
    let e = assert_error(&run(&[
        "report",
        "disk",
        "vda",
        "--smartctl-json",
        missing.to_str().unwrap(),
    ]));
    assert!(e.contains("cannot read --smartctl-json"), "{e}");
    let not_json = dir.path().join("x.json");
    std::fs::write(&not_json, "smartctl 7.3 2022-02-28\n").unwrap();
    let e = assert_error(&run(&[
        "report",
        "disk",
        "vda",
        "--smartctl-json",
        not_json.to_str().unwrap(),
    ]));
    assert!(e.contains("smartctl -j -a"), "{e}");
    let sata = capture("sata-ssd.json");
    let e = assert_error(&run(&[
        "report",
        "disk",
        "--smartctl-json",
        sata.to_str().unwrap(),
    ]));
    assert!(e.contains("name exactly one disk"), "{e}");
    let e = assert_error(&run(&["report", "disk", "vda", "--rated-tbw", "-3"]));
    assert!(e.contains("terabytes written"), "{e}");
    assert_error(&run(&["report", "disk", "--days", "0"]));
    assert_eq!(
        common::entries(dir.path()),
        ["x.json"],
        "nothing left behind"
    );
}
