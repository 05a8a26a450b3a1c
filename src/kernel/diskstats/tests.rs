use super::*;
use crate::kernel::fixture;
use proptest::prelude::*;

/// Captured on this project's Firecracker VM, kernel 6.18: 20 fields per line.
const REAL_6_18: &str =
    include_str!("../../../tests/fixtures/kernel/diskstats-6.18-firecracker.txt");
/// Layout of kernels 4.18 to 5.4: 18 fields (discards, no flushes).
const LINE_18: &str = "   8       0 sda 91473 6230 6263890 35180 42157 35912 3186568 76292 0 51628 111472 812 0 2162688 75";
/// Layout of kernels before 4.18: 14 fields.
const LINE_14: &str = "   8       1 sda1 2319 1030 108466 1752 2037 3318 60280 2464 0 2112 4216";

fn path() -> &'static Path {
    Path::new("/proc/diskstats")
}

#[test]
fn reads_real_20_field_capture() {
    let dir = tempfile::tempdir().unwrap();
    fixture::write(dir.path(), "proc/diskstats", REAL_6_18);
    let stats = read_diskstats(&SysRoot::under(dir.path())).unwrap();
    assert_eq!(stats.len(), 10);
    let vda = find(&stats, 254, 0).unwrap();
    assert_eq!(vda.name, "vda");
    assert_eq!(vda.reads, 38208);
    assert_eq!(vda.sectors_written, 1596616);
    assert_eq!(vda.io_ms, 14912);
    assert_eq!(vda.discards, Some(5455));
    assert_eq!(vda.sectors_discarded, Some(315944));
    assert_eq!(vda.flushes, Some(2141));
    assert_eq!(vda.flush_ms, Some(145));
}

#[test]
fn older_layouts_leave_missing_fields_none() {
    let s = parse_diskstats(LINE_18, path()).unwrap().remove(0);
    assert_eq!(
        (s.discards, s.discard_ms, s.flushes),
        (Some(812), Some(75), None)
    );
    let s = parse_diskstats(LINE_14, path()).unwrap().remove(0);
    assert_eq!((s.name.as_str(), s.weighted_ms), ("sda1", 4216));
    assert_eq!((s.discards, s.flushes, s.flush_ms), (None, None, None));
}

#[test]
fn malformed_lines_are_errors_naming_file_and_line() {
    let text = format!("{LINE_14}\n   8 2 sda2 1 2 3\n");
    let err = parse_diskstats(&text, path()).unwrap_err().to_string();
    assert!(err.contains("/proc/diskstats line 2"), "{err}");
    let garbage_tail = format!("{LINE_18} x 1");
    assert!(parse_diskstats(&garbage_tail, path()).is_err());
    assert!(parse_diskstats("  -8 0 sda 1 1 1 1 1 1 1 1 1 1 1", path()).is_err());
    let missing = read_diskstats(&SysRoot::new("/nonexistent", "/nonexistent")).unwrap_err();
    assert!(missing.to_string().contains("/nonexistent/diskstats"));
}

fn counters(line: &str) -> DiskCounters {
    parse_diskstats(line, path()).unwrap().remove(0)
}

#[test]
fn delta_converts_sectors_to_bytes() {
    let before = counters("254 0 vda 10 0 100 5 20 0 200 7 0 30 40 1 0 8 0 3 1");
    let after = counters("254 0 vda 15 0 180 9 26 0 264 12 1 45 60 2 0 16 0 5 2");
    let d = DiskDelta::between(&before, &after);
    assert_eq!(d.reads, Some(5));
    assert_eq!(d.read_bytes, Some(80 * 512));
    assert_eq!(d.writes, Some(6));
    assert_eq!(d.write_bytes, Some(64 * 512));
    assert_eq!(
        (d.read_ms, d.write_ms, d.io_ms),
        (Some(4), Some(5), Some(15))
    );
    assert_eq!(
        (d.discards, d.discard_bytes, d.flushes),
        (Some(1), Some(8 * 512), Some(2))
    );
}

#[test]
fn counters_going_backwards_give_none_not_underflow() {
    let before = counters("254 0 vda 100 0 1000 50 100 0 1000 50 0 4294967000 50");
    let after = counters("254 0 vda 5 0 10 2 100 0 1000 60 0 200 50");
    let d = DiskDelta::between(&before, &after);
    assert_eq!((d.reads, d.read_bytes), (None, None));
    assert_eq!((d.writes, d.write_bytes), (Some(0), Some(0)));
    // read_ms fell from 50 to 2: not near the 32-bit limit, so a reset, not a wrap.
    assert_eq!(d.read_ms, None);
    // io_ms wrapped past 2^32 ms.
    assert_eq!(d.io_ms, Some(4294967296 - 4294967000 + 200));
    assert_eq!((d.flushes, d.discards), (None, None));
}

#[test]
fn deltas_match_devices_by_number() {
    let before = parse_diskstats(REAL_6_18, path()).unwrap();
    let mut after = before.clone();
    after.retain(|s| s.name == "vda");
    after[0].writes += 3;
    let d = deltas(&before, &after);
    assert_eq!(d.len(), 1);
    assert_eq!((d[0].name.as_str(), d[0].writes), ("vda", Some(3)));
}

#[test]
fn millis_edges() {
    assert_eq!(millis(u64::MAX, 0), None);
    assert_eq!(millis(0, u64::MAX), Some(u64::MAX));
    assert_eq!(millis(u32::MAX as u64, 0), Some(1));
}

proptest! {
    #[test]
    fn parser_never_panics(s in "\\PC*") {
        let _ = parse_diskstats(&s, path());
    }

    #[test]
    fn numeric_lines_never_panic(fields in proptest::collection::vec(any::<u64>(), 0..24)) {
        let line: Vec<String> = fields.iter().map(u64::to_string).collect();
        let _ = parse_diskstats(&format!("8 0 sda {}", line.join(" ")), path());
    }

    #[test]
    fn deltas_never_panic(a in proptest::collection::vec(any::<u64>(), 17),
                          b in proptest::collection::vec(any::<u64>(), 17)) {
        let line = |v: &[u64]| {
            let v: Vec<String> = v.iter().map(u64::to_string).collect();
            counters(&format!("8 0 sda {}", v.join(" ")))
        };
        let _ = DiskDelta::between(&line(&a), &line(&b));
    }
}
