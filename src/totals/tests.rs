use super::*;

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
    assert!(zero.contains("0% used"), "{zero}");
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
