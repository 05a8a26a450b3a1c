//! The documents `runs import` reads, by version and by shape: one that names a newer version
//! of its schema than this tacho reads is refused with the fix (a newer tacho), and nothing is
//! stored; an array where the schema has an object (a judgement, a warning) reads as nothing
//! recorded, in `compare` and `runs show` as in the store, not element by element as fields.

use crate::common::*;
use serde_json::{Value, json};
use std::path::Path;

fn with_db<'a>(db: &'a Path, args: &[&'a str]) -> Vec<&'a str> {
    let mut v = args.to_vec();
    v.extend(["--db", db.to_str().unwrap()]);
    v
}

/// The first document of fixture file `name`.
fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/schema")
        .join(name);
    let bytes = std::fs::read(path).unwrap();
    let mut docs = serde_json::Deserializer::from_slice(&bytes).into_iter::<Value>();
    docs.next().unwrap().unwrap()
}

#[test]
fn a_document_of_a_newer_schema_version_is_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    for (doc, newer) in [
        (fixture("runs.json"), "tacho.bench.v2"),
        (fixture("live/cpu.json"), "tacho.cpu.v2"),
        (fixture("live/mem.json"), "tacho.mem.v3"),
        (fixture("live/time.json"), "tacho.time.v10"),
        (fixture("live/check.json"), "tacho.check.v2"),
    ] {
        let mut doc = doc;
        doc["schema"] = json!(newer);
        let file = dir.path().join("newer.json");
        std::fs::write(&file, doc.to_string()).unwrap();
        let o = run(&with_db(&db, &["runs", "import", file.to_str().unwrap()]));
        let line = assert_error(&o);
        for part in [newer, "newer than this tacho reads", "upgrade tacho"] {
            assert!(line.contains(part), "{part:?} not in {line}");
        }
        assert!(!line.contains("give tacho.bench.v1"), "{line}");
        assert!(!db.exists(), "nothing stored for {newer}");
    }
    // The version this tacho writes still reads; one never written is no schema it stores.
    let file = dir.path().join("v1.json");
    std::fs::write(&file, fixture("live/cpu.json").to_string()).unwrap();
    run_ok(&with_db(&db, &["runs", "import", file.to_str().unwrap()]));
    let mut doc = fixture("live/cpu.json");
    doc["schema"] = json!("tacho.cpu.v0");
    std::fs::write(&file, doc.to_string()).unwrap();
    let line = assert_error(&run(&with_db(
        &db,
        &["runs", "import", file.to_str().unwrap()],
    )));
    assert!(line.contains("cannot be imported (expected"), "{line}");
}

fn run_ok(args: &[&str]) -> String {
    let o = run(args);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

/// A disk run with one test; `judgement` and `warnings` as given, at the run and in the test.
fn disk_doc(judgement: Value, warnings: Value) -> Value {
    json!({
        "schema": "tacho.bench.v1", "host": {"hostname": "h"}, "target": {"path": "/d"},
        "judgement": judgement, "warnings": warnings,
        "tests": [{"name": "RND4K Q1T1", "rw": "randread", "bs_bytes": 4096, "iodepth": 1,
                   "numjobs": 1, "read": {"iops": 100.0, "lat_ns": {"p99": 1e6}},
                   "warnings": warnings}],
    })
}

#[test]
fn an_array_where_an_object_belongs_is_not_read_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let file = dir.path().join("runs.json");
    let docs = [
        disk_doc(
            json!(["fail", "fdatasync p99", 2e6, 1e6]),
            json!([["spread", "an array, not a warning"]]),
        ),
        disk_doc(
            json!({"status": "pass", "metric": "fdatasync p99", "value_ns": 1e5,
                   "threshold_ns": 1e6}),
            json!([{"code": "steal", "message": "an object, a warning"}]),
        ),
    ];
    let text: Vec<String> = docs.iter().map(Value::to_string).collect();
    std::fs::write(&file, text.join("\n")).unwrap();
    run_ok(&with_db(&db, &["runs", "import", file.to_str().unwrap()]));
    let compare = run_ok(&with_db(&db, &["compare", "1", "2"]));
    let json = run_ok(&with_db(&db, &["compare", "1", "2", "--json"]));
    let show = run_ok(&with_db(&db, &["runs", "show", "1"]));
    for out in [&compare, &json, &show] {
        assert!(!out.contains("an array, not a warning"), "{out}");
        assert!(!out.contains("FAIL"), "{out}");
    }
    // The objects of the other run are read as ever.
    assert!(compare.contains("an object, a warning"), "{compare}");
    assert!(compare.contains("PASS"), "{compare}");
}
