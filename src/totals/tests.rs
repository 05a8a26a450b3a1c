use super::*;
use std::path::Path;

const GB: u64 = 1_000_000_000;
const TB: u64 = 1_000 * GB;

fn written(bytes: u64, used: Option<u64>) -> DriveHealth {
    DriveHealth {
        bytes_written: Some(bytes),
        percentage_used: used,
        ..DriveHealth::default()
    }
}

fn day(day: &str, disk: &str, read: u64, written: Option<u64>) -> DayTotals {
    DayTotals {
        day: day.into(),
        disk: disk.into(),
        bytes_read: Some(read),
        bytes_written: written,
        seconds: 86_400.0,
    }
}

#[test]
fn warranty_projection_matches_the_issue_example() {
    // 19.7 TB written of a 150 TBW warranty at 93 GB/day.
    let p = project(&written(19_700 * GB, None), 93e9, Some(150 * TB)).unwrap();
    assert_eq!(p.rated_from, RatedFrom::Warranty);
    assert!((p.percent_used - 13.13).abs() < 0.01, "{}", p.percent_used);
    let years = p.years_left.unwrap();
    assert!(
        (years - (130_300.0 / 93.0 / 365.25)).abs() < 1e-9,
        "{years}"
    );
}

#[test]
fn wear_projection_estimates_the_rating_from_percentage_used() {
    let p = project(&written(10 * TB, Some(20)), 50e9, None).unwrap();
    assert_eq!(p.rated_from, RatedFrom::PercentageUsed);
    assert_eq!(p.rated_bytes, 50 * TB);
    assert_eq!(p.percent_used, 20.0);
    assert!((p.years_left.unwrap() - 40e12 / 50e9 / 365.25).abs() < 1e-9);
}

#[test]
fn no_projection_without_bytes_or_wear_and_no_years_past_the_rating() {
    assert!(project(&DriveHealth::default(), 1e9, Some(TB)).is_err());
    let zero = project(&written(TB, Some(0)), 1e9, None).unwrap_err();
    assert_eq!(zero, NoProjection::NoneUsedYet);
    assert!(zero.to_string().contains("0% used"), "{zero}");
    assert!(project(&written(TB, None), 1e9, None).is_err());
    let past = project(&written(2 * TB, None), 1e9, Some(TB)).unwrap();
    assert_eq!(past.years_left, None);
    assert_eq!(past.percent_used, 200.0);
    let idle = project(&written(TB, None), 0.0, Some(2 * TB)).unwrap();
    assert_eq!(idle.years_left, None);
}

#[test]
fn history_rate_is_the_mean_of_the_disks_known_days() {
    let days = vec![
        day("2026-11-20", "sda", 10, Some(90 * GB)),
        day("2026-11-21", "sda", 30, Some(96 * GB)),
        day("2026-11-21", "sdb", 0, Some(TB)),
        day("2026-11-22", "sda", 0, None),
    ];
    let rate = rate_from_history(&days, "sda").unwrap();
    assert_eq!(rate.basis, RateBasis::History);
    assert_eq!(rate.days, 2.0);
    assert_eq!(rate.bytes_written_per_day, 93e9);
    assert_eq!(rate.bytes_read_per_day, 20.0);
    assert_eq!(rate_from_history(&days, "sdc"), None);
}

#[test]
fn since_boot_rate_divides_by_days_up_and_needs_a_minute() {
    let sb = SinceBoot {
        days: 2.0,
        bytes_written: 10 * GB,
        bytes_read: 4 * GB,
    };
    let rate = rate_since_boot(Some(&sb)).unwrap();
    assert_eq!(rate.basis, RateBasis::SinceBoot);
    assert_eq!(rate.bytes_written_per_day, 5e9);
    let fresh = SinceBoot {
        days: 30.0 / 86_400.0,
        ..sb
    };
    assert_eq!(rate_since_boot(Some(&fresh)), None);
}

#[test]
fn history_wins_over_since_boot_and_a_silent_drive_is_said_in_words() {
    let sb = SinceBoot {
        days: 1.0,
        bytes_written: GB,
        bytes_read: GB,
    };
    let days = vec![day("2026-11-21", "sda", 0, Some(93 * GB))];
    let t = disk_totals(
        "sda",
        Ok(written(TB, None)),
        Some(sb.clone()),
        &days,
        Some(150 * TB),
    );
    assert_eq!(t.rate.unwrap().basis, RateBasis::History);
    assert_eq!(t.projection.unwrap().bytes_per_day, 93e9);

    let silent = DriveHealth {
        notes: vec!["smartctl: Unable to detect device type".into()],
        ..DriveHealth::default()
    };
    let t = disk_totals("sdz", Ok(silent), Some(sb), &[], None);
    assert_eq!(t.health, None);
    let why = t.no_health.unwrap();
    assert!(
        why.starts_with("sdz: the drive reports no health data"),
        "{why}"
    );
}

/// A machine with a virtio disk (vda), a SATA disk (sda), a loop device, up two days.
fn machine() -> (tempfile::TempDir, SysRoot) {
    use crate::kernel::fixture::{mkdir, symlink, write};
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path();
    let disks = [
        (
            "vda",
            "254:0",
            "devices/pci0000:00/0000:00:02.0/virtio1/block",
            Some("virtio"),
        ),
        (
            "sda",
            "8:0",
            "devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block",
            Some("scsi"),
        ),
        ("loop0", "7:0", "devices/virtual/block", None),
    ];
    for (name, devno, parent, bus) in disks {
        let rel = format!("sys/{parent}/{name}");
        write(t, &format!("{rel}/dev"), &format!("{devno}\n"));
        write(t, &format!("{rel}/size"), "2097152\n");
        write(t, &format!("{rel}/ro"), "0\n");
        write(t, &format!("{rel}/queue/logical_block_size"), "512\n");
        write(t, &format!("{rel}/queue/physical_block_size"), "512\n");
        write(t, &format!("{rel}/queue/rotational"), "1\n");
        symlink(
            t,
            &format!("sys/block/{name}"),
            &format!("../{parent}/{name}"),
        );
        if let Some(bus) = bus {
            mkdir(t, &format!("{rel}/device"));
            symlink(
                t,
                &format!("{rel}/device/subsystem"),
                &format!("../../../bus/{bus}"),
            );
        }
    }
    write(
        t,
        "proc/diskstats",
        " 254 0 vda 10 0 2000 5 20 0 4000 9 0 10 14\n   8 0 sda 1 0 8 1 2 0 16 1 0 2 2\n   7 0 loop0 1 0 8 1 0 0 0 0 0 1 1\n",
    );
    write(t, "proc/uptime", "172800.00 1000.00\n");
    let root = SysRoot::under(t);
    (dir, root)
}

#[test]
fn virtio_says_no_health_and_a_missing_smartctl_names_its_figures() {
    let (_dir, root) = machine();
    let report = collect(&root, &Options::default()).unwrap();
    let names: Vec<&str> = report.disks.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["sda", "vda"], "loop devices are not drives");
    let vda = &report.disks[1];
    assert_eq!(
        vda.no_health.as_deref(),
        Some("vda: virtio disk, the drive reports no health data")
    );
    let sb = vda.since_boot.as_ref().unwrap();
    assert_eq!(
        (sb.bytes_written, sb.bytes_read, sb.days),
        (4000 * 512, 2000 * 512, 2.0)
    );
    assert_eq!(
        vda.rate.as_ref().unwrap().bytes_written_per_day,
        2000.0 * 512.0
    );
    let sda = &report.disks[0];
    assert!(
        sda.no_health
            .as_deref()
            .unwrap()
            .contains("without smartctl")
    );
    let note = report
        .notes
        .iter()
        .find(|n| n.contains("smartctl is not installed"))
        .unwrap();
    for figure in [
        "bytes written",
        "power-on hours",
        "reallocated and pending sectors",
    ] {
        assert!(note.contains(figure), "{note}");
    }
}

#[test]
fn only_virtual_disks_need_no_smartctl_note() {
    let (_dir, root) = machine();
    let options = Options {
        disks: vec!["/dev/vda".into()],
        ..Options::default()
    };
    let report = collect(&root, &options).unwrap();
    assert!(
        report.notes.iter().all(|n| !n.contains("smartctl")),
        "{:?}",
        report.notes
    );
}

#[test]
fn unknown_disks_and_one_drive_options_are_refused() {
    let (_dir, root) = machine();
    let ask = |disks: &[&str], capture: bool| {
        let options = Options {
            disks: disks.iter().map(|d| d.to_string()).collect(),
            smartctl_capture: capture.then(|| "{}".to_string()),
            ..Options::default()
        };
        collect(&root, &options).unwrap_err().to_string()
    };
    let e = ask(&["sdz"], false);
    assert!(
        e.starts_with("unknown disk \"sdz\"")
            && e.contains("sda, vda, 1 loop device")
            && !e.contains("loop0"),
        "{e}"
    );
    assert!(ask(&["vda1"], false).contains("unknown disk"));
    assert!(ask(&[], true).contains("--smartctl-json applies to one drive"));
    assert!(ask(&["sda", "vda"], true).contains("name exactly one disk"));
}

#[test]
fn a_capture_stands_for_the_named_disk_with_its_kernel_rate() {
    let (_dir, root) = machine();
    let capture = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/smart/sata-ssd.json"),
    )
    .unwrap();
    let options = Options {
        disks: vec!["vda".into()],
        smartctl_capture: Some(capture),
        rated_bytes: Some(150 * TB),
        ..Options::default()
    };
    let report = collect(&root, &options).unwrap();
    let vda = &report.disks[0];
    let h = vda.health.as_ref().unwrap();
    assert_eq!(h.source, Some(HealthSource::SmartctlFile));
    let p = vda.projection.as_ref().unwrap();
    assert_eq!(p.bytes_written, 1_375_952_821 * 512);
    assert_eq!(p.bytes_per_day, 2000.0 * 512.0);
    assert_eq!(p.rated_from, RatedFrom::Warranty);
}

#[test]
fn amplification_is_device_over_process_bytes_and_none_without_process_writes() {
    assert_eq!(super::amplification(3_000, 1_000), Some(3.0));
    assert_eq!(super::amplification(500, 1_000), Some(0.5));
    assert_eq!(super::amplification(500, 0), None);
}
