use super::*;
use crate::totals::{SCHEMA, SinceBoot, project};

const GB: u64 = 1_000_000_000;

fn report(disks: Vec<DiskTotals>, daily: Vec<DayTotals>) -> DiskReport {
    DiskReport {
        schema: SCHEMA,
        days: 7,
        disks,
        daily,
        writers: vec![],
        notes: vec![],
    }
}

fn render(r: &DiskReport) -> String {
    let mut out = Vec::new();
    text(r, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn ssd() -> DiskTotals {
    let health = DriveHealth {
        source: Some(HealthSource::SmartctlFile),
        kind: Some(DriveKind::AtaSsd),
        model: Some("Evil\x1b[2JSSD".into()),
        bytes_written: Some(19_700 * GB),
        bytes_read: Some(4_000 * GB),
        power_on_hours: Some(5_113),
        pending_sectors: Some(0),
        ..DriveHealth::default()
    };
    let rate = DailyRate {
        bytes_written_per_day: 93e9,
        bytes_read_per_day: 1e9,
        basis: RateBasis::SinceBoot,
        days: 3.25,
    };
    DiskTotals {
        name: "sda".into(),
        projection: Some(project(&health, rate.bytes_written_per_day, Some(150_000 * GB)).unwrap()),
        health: Some(health),
        no_health: None,
        since_boot: Some(SinceBoot {
            days: 3.25,
            bytes_written: 302 * GB,
            bytes_read: 3 * GB,
        }),
        rate: Some(rate),
        notes: vec![],
    }
}

#[test]
fn projection_reads_like_the_issue_and_says_its_basis() {
    let text = render(&report(vec![ssd()], vec![]));
    assert!(
        text.contains(
            "at 86.6 GiB/day (since boot, 3.2 days), 19.7 TB written = 13% of the 150 TBW \
             warranty; 3.8 years to go"
        ),
        "{text}"
    );
    assert!(text.contains("17.9 TiB written, 3.64 TiB read"), "{text}");
    assert!(text.contains("0 pending sectors"), "{text}");
}

#[test]
fn drive_text_is_escaped() {
    let text = render(&report(vec![ssd()], vec![]));
    assert!(!text.contains('\x1b'), "{text}");
    assert!(text.contains("Evil\\e[2JSSD"), "{text}");
}

#[test]
fn a_silent_drive_is_one_sentence() {
    let disk = DiskTotals {
        name: "vda".into(),
        health: None,
        no_health: Some("vda: virtio disk, the drive reports no health data".into()),
        since_boot: None,
        rate: None,
        projection: None,
        notes: vec![],
    };
    let text = render(&report(vec![disk], vec![]));
    assert_eq!(text, "vda: virtio disk, the drive reports no health data\n");
}

#[test]
fn synthetic_days_render_as_the_per_day_table() {
    let days = vec![
        DayTotals {
            day: "2026-11-21".into(),
            disk: "sda".into(),
            bytes_read: Some(1_500_000_000),
            bytes_written: Some(93 * GB),
            seconds: 86_400.0,
        },
        DayTotals {
            day: "2026-11-22".into(),
            disk: "sda".into(),
            bytes_read: None,
            bytes_written: Some(812),
            seconds: 3_600.0,
        },
    ];
    let text = render(&report(vec![], days.clone()));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[2].split_whitespace().collect::<Vec<_>>(),
        ["day", "disk", "read", "written", "recorded"]
    );
    assert_eq!(
        lines[3].split_whitespace().collect::<Vec<_>>(),
        [
            "2026-11-21",
            "sda",
            "1.40",
            "GiB",
            "86.6",
            "GiB",
            "24.0",
            "h"
        ]
    );
    assert_eq!(
        lines[4].split_whitespace().collect::<Vec<_>>(),
        ["2026-11-22", "sda", "-", "812", "B", "1.0", "h"]
    );
    let mut out = Vec::new();
    json(&report(vec![], days), &mut out).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(doc["schema"], "tacho.report-disk.v1");
    assert_eq!(doc["daily"][1]["bytes_read"], serde_json::Value::Null);
    assert_eq!(doc["daily"][0]["bytes_written"], 93 * GB);
}

#[test]
fn decimal_sizes_keep_three_digits() {
    assert_eq!(si(0.0), "0 B");
    assert_eq!(si(999.0), "999 B");
    assert_eq!(si(1_000.0), "1.00 kB");
    assert_eq!(si(93e9), "93.0 GB");
    assert_eq!(si(19.7e12), "19.7 TB");
    assert_eq!(si(150e12), "150 TB");
    assert_eq!(tbw(150_000 * GB), "150");
    assert_eq!(tbw(1_200 * GB), "1.2");
}

#[test]
fn short_remaining_endurance_is_said_in_days() {
    let disk = ssd();
    let rate = disk.rate.clone().unwrap();
    let health = disk.health.clone().unwrap();
    let at = |rated_gb: u64| {
        let p = project(&health, rate.bytes_written_per_day, Some(rated_gb * GB)).unwrap();
        projection(&p, &rate)
    };
    assert!(
        at(19_700 + 93 * 30).ends_with("; 30 days to go"),
        "{}",
        at(19_730)
    );
    assert!(
        at(19_710).ends_with("; under a day to go"),
        "{}",
        at(19_710)
    );
    assert!(
        at(19_000).ends_with("; past its rated endurance"),
        "{}",
        at(19_000)
    );
}

#[test]
fn a_days_writers_show_amplification_and_names_escaped() {
    let mut r = report(vec![], vec![]);
    r.writers = vec![crate::totals::DayWriters {
        day: "2026-11-22".into(),
        processes: vec![crate::totals::Writer {
            name: "evil\x1b[2J".into(),
            pid: Some(42),
            bytes_written: 2 * GB,
        }],
        services: vec![],
        device_bytes_written: 6 * GB,
        process_bytes_written: 2 * GB,
        amplification: Some(3.0),
        covered_s: 86_400.0,
    }];
    let text = render(&r);
    assert!(text.contains("write amplification 3.00"), "{text}");
    assert!(text.contains("[42]") && !text.contains('\x1b'), "{text}");
}
