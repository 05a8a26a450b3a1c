use super::*;
use crate::store::{StoredTest, figures};
use serde_json::json;

/// A randread 4k QD1 test whose repeats read `iops` (the reported figure is their median).
fn test(name: &str, iops: &[f64]) -> StoredTest {
    let mut sorted = iops.to_vec();
    sorted.sort_by(f64::total_cmp);
    let dir = |v: f64| json!({"iops": v, "bw_bytes_per_s": v * 4096.0, "lat_ns": {"p99": 1e9 / v}});
    let mut t = json!({
        "name": name, "rw": "randread", "bs_bytes": 4096, "iodepth": 1, "numjobs": 1,
        "read": dir(sorted[sorted.len() / 2]),
    });
    if iops.len() > 1 {
        t["repeats"] = iops.iter().map(|&v| json!({"read": dir(v)})).collect();
    }
    StoredTest {
        name: name.into(),
        figures: figures::of_test(&t),
        json: t,
    }
}

fn run(id: i64, suite_version: i64, tests: Vec<StoredTest>) -> StoredRun {
    StoredRun {
        uuid: None,
        id,
        created_at: "2026-01-01T00:00:00Z".into(),
        label: Some(format!("label {id}")),
        kind: crate::store::RunKind::Disk,
        status: crate::store::RunStatus::Finished,
        source: crate::store::RunSource::Bench,
        tool_version: Some("0.1.0".into()),
        suite: Some(("quick".into(), suite_version)),
        host: json!({"hostname": "h"}),
        target: json!({}),
        extra: serde_json::Map::new(),
        tests,
    }
}

fn iops_cell(c: &Comparison, run: usize) -> Cell {
    let row = c
        .rows()
        .find(|r| r.metric == Metric::Iops)
        .expect("an IOPS row");
    row.cells[run].clone().expect("a cell")
}

#[test]
fn a_clear_drop_is_significantly_worse_and_a_regression() {
    let c = compare(&[
        run(1, 1, vec![test("RND4K Q1T1", &[1000.0, 1010.0, 990.0])]),
        run(2, 1, vec![test("RND4K Q1T1", &[800.0, 805.0, 795.0])]),
    ]);
    let cell = iops_cell(&c, 1);
    assert!(
        matches!(cell.significance, Significance::Worse { .. }),
        "{cell:?}"
    );
    assert!((cell.change_pct.unwrap() + 20.0).abs() < 1e-9);
    // p99 latency went up: also worse.
    let p99 = c.rows().find(|r| r.metric == Metric::LatP99).unwrap();
    assert!(matches!(
        p99.cells[1].as_ref().unwrap().significance,
        Significance::Worse { .. }
    ));
    assert_eq!(c.regressions(10.0).len(), 2);
    assert!(c.regressions(25.0).is_empty());
    assert!(
        c.verdict().starts_with("2 figures significantly worse"),
        "{}",
        c.verdict()
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
}

#[test]
fn noise_is_no_significant_difference() {
    let c = compare(&[
        run(1, 1, vec![test("t", &[1000.0, 1200.0, 800.0])]),
        run(2, 1, vec![test("t", &[1100.0, 900.0, 1150.0])]),
    ]);
    assert!(matches!(
        iops_cell(&c, 1).significance,
        Significance::NoDifference { .. }
    ));
    assert!(c.regressions(0.0).is_empty());
    assert!(
        c.verdict().starts_with("no significant difference"),
        "{}",
        c.verdict()
    );
}

#[test]
fn single_samples_have_unknown_significance() {
    let c = compare(&[
        run(1, 1, vec![test("t", &[1000.0])]),
        run(2, 1, vec![test("t", &[500.0])]),
    ]);
    assert_eq!(iops_cell(&c, 1).significance, Significance::NoRepeats);
    assert!(c.regressions(10.0).is_empty());
    assert_eq!(c.untestable_regressions(10.0), 2);
    assert!(
        c.verdict().starts_with("no repeats: significance unknown"),
        "{}",
        c.verdict()
    );
}

#[test]
fn tests_match_by_work_not_name_and_gaps_are_named() {
    let mut other = test("randread-4k-q1", &[900.0]);
    other.json["engine"] = json!("libaio");
    let mut seq = test("SEQ", &[10.0]);
    seq.json["rw"] = json!("read");
    let c = compare(&[
        run(1, 1, vec![test("RND4K Q1T1", &[1000.0]), seq]),
        run(2, 1, vec![other]),
    ]);
    assert_eq!(c.tests.len(), 2);
    assert_eq!(c.tests[0].name, "RND4K Q1T1 = randread-4k-q1");
    assert!(
        c.warnings.iter().any(|w| w == "test SEQ is not in run 2"),
        "{:?}",
        c.warnings
    );
}

#[test]
fn different_suite_versions_are_flagged() {
    let c = compare(&[
        run(1, 1, vec![test("t", &[1.0])]),
        run(2, 2, vec![test("t", &[1.0])]),
    ]);
    assert!(
        c.warnings
            .iter()
            .any(|w| w.contains("DIFFERENT SUITE VERSIONS: quick v1 (run 1), v2 (run 2)")),
        "{:?}",
        c.warnings
    );
}

/// The match key of a test, as a string.
fn key_of(w: &WorkView, name: &str) -> String {
    let mut key = String::new();
    match_key(&mut key, w, name);
    key
}

/// The match key and the test's description read every field from the document the model
/// types write: a renamed field in `TestResult` or `SyncEvery` fails here, not in a report.
#[test]
fn the_match_key_reads_what_the_test_result_writes() {
    use crate::bench::result::TestResult;
    use crate::io::Measured;
    use crate::io::spec::{EngineKind, JobParams, JobSpec, Rw, SyncEvery, SyncKind};
    use std::time::Duration;
    let spec = JobSpec::new(JobParams {
        rw: Rw::RandRw,
        bs: 2300,
        bssplit: Vec::new(),
        iodepth: 4,
        numjobs: 2,
        region_bytes: 1 << 30,
        runtime: Duration::from_secs(1),
        ramp: Duration::ZERO,
        io_limit: None,
        rwmixread: 70,
        sync: Some(SyncEvery {
            kind: SyncKind::Fdatasync,
            every: 3,
        }),
        open_sync: None,
        direct: true,
        engine: EngineKind::IoUring,
        seed: 1,
    })
    .unwrap();
    let result = TestResult::new("w".into(), &spec, &[Measured::default()], Vec::new());
    let json = serde_json::to_value(&result).unwrap();
    assert_eq!(
        key_of(&view(&json), "w"),
        "randrw bs=2300 qd=4 jobs=2 mix=70 sync=fdatasync/3"
    );
    // Read from the stored text as `compare` reads it, the same.
    let (work, _, _) =
        crate::store::stored::view_text::<crate::store::stored::CompareTestView>(&json.to_string())
            .split();
    assert_eq!(
        key_of(&work, "w"),
        "randrw bs=2300 qd=4 jobs=2 mix=70 sync=fdatasync/3"
    );
    let stored = StoredTest {
        name: "w".into(),
        figures: figures::of_test(&json),
        json,
    };
    let c = compare(&[run(1, 1, vec![stored])]);
    let info = &c.tests[0];
    assert_eq!(info.rw.as_deref(), Some("randrw"));
    assert_eq!(
        (info.bs_bytes, info.iodepth, info.numjobs),
        (Some(2300), Some(4), Some(2))
    );
    assert_eq!(info.sync_kind.as_deref(), Some("fdatasync"));
    // A document without `rw` (a cpu kernel, a timed command) is matched by name.
    assert_eq!(
        key_of(&view(&json!({"ops_per_s": 1.0})), "sha256"),
        "name:sha256"
    );
}

/// The HTML page draws at most its bound of tests, says so among its warnings, and draws the
/// same sections for those tests as a page of them alone.
#[test]
fn the_page_draws_a_bounded_number_of_tests_and_says_so() {
    let tests = |n: usize| -> Vec<StoredTest> {
        (0..n)
            .map(|i| test(&format!("t{i}"), &[100.0 + i as f64, 110.0, 120.0]))
            .collect()
    };
    let page = |c: &Comparison, most: usize| {
        let mut out = Vec::new();
        crate::report::html::write_at_most(c, "t", &[], most, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    };
    let three = compare(&[run(1, 1, tests(3)), run(2, 1, tests(3))]);
    let two = compare(&[run(1, 1, tests(2)), run(2, 1, tests(2))]);
    let cut = page(&three, 2);
    assert!(
        cut.contains("this page draws the first 2 of 3 tests"),
        "{cut}"
    );
    let whole = page(&two, 2);
    assert!(!whole.contains("this page draws"));
    let sections = |p: &str| p[p.find("<h2>Tests</h2>").unwrap()..].to_string();
    assert_eq!(
        sections(&cut),
        sections(&whole).replace("2 tests", "3 tests")
    );
}
