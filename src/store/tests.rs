use super::document::parse_documents;
use super::*;
use serde_json::json;

fn doc(label: &str, iops: f64) -> Value {
    json!({
        "schema": "tacho.bench.v1",
        "tool_version": "0.1.0",
        "run": {"label": label},
        "host": {"hostname": "h1"},
        "target": {"path": "/data", "scheduler": "none"},
        "suite": {"name": "quick", "version": 1},
        "tests": [
            {"name": "RND4K Q1T1", "rw": "randread", "bs_bytes": 4096, "iodepth": 1, "numjobs": 1,
             "read": {"iops": iops, "bw_bytes_per_s": iops * 4096.0,
                      "lat_ns": {"mean": 100, "p99": 200}}}
        ],
        "warnings": [],
        "interrupted": false
    })
}

use crate::store::RunStatus;
use serde_json::Value;

fn new_run(label: &str, iops: f64) -> NewRun {
    NewRun::from_bench_doc(&doc(label, iops), crate::store::RunSource::Import).unwrap()
}

#[test]
fn saves_loads_and_removes() {
    let dir = tempfile::tempdir().unwrap();
    // Only the default file's directory is made; a typed path's must exist.
    assert!(Store::open(&dir.path().join("sub/dir/tacho.db")).is_err());
    assert!(!dir.path().join("sub").exists());
    let path = dir.path().join("tacho.db");
    let mut store = Store::open(&path).unwrap();
    let a = store.insert_run(&new_run("a", 100.0)).unwrap();
    let b = store.insert_run(&new_run("b", 200.0)).unwrap();
    assert!(b > a);
    let list = store.list().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].label.as_deref(), Some("a"));
    assert_eq!(list[0].tests, 1);
    assert_eq!(list[0].hostname.as_deref(), Some("h1"));
    assert!(list[0].created_at.ends_with('Z'), "{}", list[0].created_at);

    let run = store.load(b).unwrap();
    assert_eq!(run.suite, Some(("quick".into(), 1)));
    assert_eq!(run.tests[0].figures[0].iops, Some(200.0));
    assert_eq!(run.tests[0].figures[0].lat_ns[3], Some(200.0));
    assert_eq!(run.to_document()["tests"], doc("b", 200.0)["tests"]);

    store.remove(&[a]).unwrap();
    assert!(store.load(a).unwrap_err().to_string().contains("no run"));
    let err = store.remove(&[b, 999]).unwrap_err().to_string();
    assert!(
        err.contains("no run 999") && err.contains("nothing removed"),
        "{err}"
    );
    assert_eq!(store.list().unwrap().len(), 1, "b survives the failed rm");
    drop(store);
    // Figures go with their run.
    let conn = Connection::open(&path).unwrap();
    let figures: i64 = conn
        .query_row("SELECT count(*) FROM figures", [], |r| r.get(0))
        .unwrap();
    assert_eq!(figures, 1);
}

#[test]
fn a_run_saved_test_by_test() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("t.db")).unwrap();
    let mut run = new_run("live", 1.0);
    let id = store.begin_run(&run).unwrap();
    assert_eq!(store.load(id).unwrap().status, RunStatus::Running);
    store.add_test(id, 0, &run.tests[0].value()).unwrap();
    run.extra.insert("warnings".into(), json!([{"code": "x"}]));
    run.status = RunStatus::Interrupted;
    store.finish_run(id, &run).unwrap();
    let back = store.load(id).unwrap();
    assert_eq!(back.status, RunStatus::Interrupted);
    assert_eq!(back.tests.len(), 1);
    assert_eq!(back.extra["warnings"][0]["code"], "x");
}

#[test]
fn refuses_foreign_newer_and_corrupt_files_without_touching_them() {
    let dir = tempfile::tempdir().unwrap();

    let foreign = dir.path().join("foreign.db");
    Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE invoices (id INTEGER)")
        .unwrap();
    let before = std::fs::read(&foreign).unwrap();
    let err = Store::open(&foreign).err().unwrap().to_string();
    assert!(err.contains("another program"), "{err}");
    assert_eq!(std::fs::read(&foreign).unwrap(), before);

    let newer = dir.path().join("newer.db");
    drop(Store::open(&newer).unwrap());
    Connection::open(&newer)
        .unwrap()
        .execute_batch("PRAGMA user_version = 99")
        .unwrap();
    let err = Store::open(&newer).err().unwrap().to_string();
    assert!(err.contains("newer tacho"), "{err}");

    let garbage = dir.path().join("garbage.db");
    std::fs::write(
        &garbage,
        "this is not a database, it is a shopping list\n".repeat(100),
    )
    .unwrap();
    let err = Store::open(&garbage).err().unwrap().to_string();
    assert!(err.contains("not a tacho results database"), "{err}");
    assert!(!err.contains('\n'));
}

#[test]
fn a_missing_file_is_not_created_by_readers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("none.db");
    assert!(Store::open_existing(&path).unwrap().is_none());
    assert!(!path.exists());
}

#[test]
fn migrates_a_schema_1_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(schema::SCHEMA_1).unwrap();
        conn.execute_batch(&format!(
            "PRAGMA application_id = {}; PRAGMA user_version = 1;",
            schema::APPLICATION_ID
        ))
        .unwrap();
        let test = doc("old", 42.0)["tests"][0].to_string();
        conn.execute(
            "INSERT INTO runs (created_at, label, kind, status, source, host_json, target_json,
                extra_json) VALUES ('2026-01-01T00:00:00Z', 'old', 'disk', 'finished', 'bench',
                '{}', '{}', '{}')",
            [],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO tests (run_id, seq, name, json) VALUES (1, 0, 'RND4K Q1T1', ?1)",
            [test],
        )
        .unwrap();
    }
    let store = Store::open(&path).unwrap();
    let run = store.load(1).unwrap();
    assert_eq!(
        run.tests[0].figures.len(),
        1,
        "figures filled from the JSON"
    );
    assert_eq!(run.tests[0].figures[0].iops, Some(42.0));
    let version: i64 = store
        .conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, schema::LATEST);
    let uuid: String = store
        .conn
        .query_row("SELECT uuid FROM runs WHERE id = 1", [], |r| r.get(0))
        .unwrap();
    let parsed = uuid::Uuid::parse_str(&uuid).expect("a UUID backfilled");
    assert_eq!(parsed.get_version_num(), 4, "{uuid}");
}

// Read back through the rows `runs push` uploads.
#[cfg(feature = "pg")]
#[test]
fn every_run_gets_its_own_uuid() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("u.db")).unwrap();
    let run = NewRun::from_bench_doc(&doc("u", 1.0), crate::store::RunSource::Import).unwrap();
    let a = store.insert_run(&run).unwrap();
    let b = store.insert_run(&run).unwrap();
    let runs = store.raw_runs().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!((runs[0].id, runs[1].id), (a, b));
    assert_ne!(runs[0].uuid, runs[1].uuid);
    assert_eq!(runs[0].tests.len(), 1, "tests come along");
}

#[test]
fn default_path_follows_xdg() {
    let p = |x: Option<&str>, h: Option<&str>| {
        default_path(x.map(PathBuf::from), h.map(PathBuf::from)).map(|p| p.display().to_string())
    };
    assert_eq!(p(Some("/x"), Some("/home/a")).unwrap(), "/x/tacho/tacho.db");
    assert_eq!(
        p(Some("relative"), Some("/home/a")).unwrap(),
        "/home/a/.local/share/tacho/tacho.db"
    );
    assert!(p(None, None).unwrap_err().to_string().contains("--db"));
}

#[test]
fn flushes_and_the_suite_method_survive_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let mut d = doc("f", 100.0);
    d["suite"] = json!({"name": "etcd", "version": 1, "standard": false, "repeat": 3,
                        "changed": ["runtime 1s"]});
    d["tests"][0]["sync"] = json!({"count": 9, "lat_ns": {"mean": 50, "p99": 90}});
    d["tests"][0]["repeats"] = json!([{"sync": {"count": 4, "lat_ns": {"p99": 80}}},
                                      {"sync": {"count": 5, "lat_ns": {"p99": 95}}}]);
    let mut store = Store::open(&path).unwrap();
    let id = store
        .insert_run(&NewRun::from_bench_doc(&d, crate::store::RunSource::Import).unwrap())
        .unwrap();
    let sync_p99 = |run: &StoredRun| -> Vec<(u32, Option<f64>)> {
        run.tests[0]
            .figures
            .iter()
            .filter(|f| f.direction == "sync")
            .map(|f| (f.sample, f.lat_ns[3]))
            .collect()
    };
    let run = store.load(id).unwrap();
    assert_eq!(
        sync_p99(&run),
        [(0, Some(90.0)), (1, Some(80.0)), (2, Some(95.0))]
    );
    assert_eq!(run.to_document()["suite"], d["suite"]);
    assert_eq!(run.standard(), Some(false));
    let listed = &store.list().unwrap()[0];
    assert_eq!(
        (listed.standard, listed.changed.clone()),
        (Some(false), vec!["runtime 1s".to_string()])
    );
    // A run saved before flushes were indexed has them in its JSON only: still loaded.
    store
        .conn
        .execute("DELETE FROM figures WHERE direction = 'sync'", [])
        .unwrap();
    assert_eq!(sync_p99(&store.load(id).unwrap()).len(), 3);
}

/// The parsers take files from anywhere: whatever the bytes, they answer `Ok` or `Err`, and
/// every run they accept holds only figures the store can keep.
mod parsers_never_panic {
    use super::*;
    use proptest::prelude::*;

    const FIO: &str = include_str!("../../tests/fixtures/fio/three-jobs.json");

    fn bench_doc() -> String {
        let mut d = doc("p", 100.0);
        d["tests"][0]["repeats"] = json!([{"read": {"iops": 99.0}}, {"read": {"iops": 101.0}}]);
        format!("note\r\n{}\n", serde_json::to_string_pretty(&d).unwrap())
    }

    /// Every accepted run passes the same checks an import makes.
    fn accepted_is_sound(bytes: &[u8]) {
        if let Ok(runs) = parse_documents(bytes) {
            for run in runs {
                assert!(run::RunKind::ALL.contains(&run.kind));
                for (i, t) in run.tests.iter().enumerate() {
                    run::check_test(i, &t.value()).unwrap();
                    for f in figures::of_test(&t.value()) {
                        for v in [f.iops, f.bw_bytes_per_s, f.ops_per_s]
                            .into_iter()
                            .chain(f.lat_ns)
                            .flatten()
                        {
                            assert!(v.is_finite() && v >= 0.0, "{v}");
                        }
                    }
                }
            }
        }
    }

    /// A valid document with some bytes replaced, removed or inserted.
    fn mutated(base: String) -> impl Strategy<Value = Vec<u8>> {
        let len = base.len();
        proptest::collection::vec((0..len, any::<u8>(), 0..3u8), 1..8).prop_map(move |edits| {
            let mut bytes = base.clone().into_bytes();
            for (at, byte, how) in edits {
                let at = at.min(bytes.len().saturating_sub(1));
                match how {
                    0 => bytes[at] = byte,
                    1 => {
                        bytes.remove(at);
                    }
                    _ => bytes.insert(at, byte),
                }
            }
            bytes
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            accepted_is_sound(&bytes);
        }

        #[test]
        fn on_arbitrary_text_around_json(pre in "[ -~\r\n\u{feff}µ…]{0,40}", post in "[ -~\r\n{}\\[\\]]{0,40}") {
            accepted_is_sound(format!("{pre}\n{}\n{post}", bench_doc()).as_bytes());
        }

        #[test]
        fn on_mutated_bench_documents(bytes in mutated(bench_doc())) {
            accepted_is_sound(&bytes);
        }

        #[test]
        fn on_mutated_fio_output(bytes in mutated(FIO.to_string())) {
            accepted_is_sound(&bytes);
        }
    }
}

#[test]
fn a_run_whose_saver_is_gone_from_procfs_is_abandoned() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let mut store = Store::open(&path).unwrap();
    let id = store.begin_run(&new_run("live", 1.0)).unwrap();
    // This process saves it, and this /proc shows this process: still running.
    assert_eq!(store.load(id).unwrap().status, RunStatus::Running);
    // Under a /proc where no process lives (a fixture tree), its saver is gone.
    let empty = tempfile::tempdir().unwrap();
    std::fs::create_dir(empty.path().join("proc")).unwrap();
    let store = Store::open(&path)
        .unwrap()
        .with_sys_root(crate::kernel::SysRoot::under(empty.path()));
    assert_eq!(store.load(id).unwrap().status, RunStatus::Abandoned);
    assert_eq!(store.list().unwrap()[0].status, RunStatus::Abandoned);
}

#[test]
fn a_kind_this_tacho_does_not_know_is_an_error_that_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("t.db")).unwrap();
    let id = store.insert_run(&new_run("a", 1.0)).unwrap();
    store
        .conn
        .execute("UPDATE runs SET kind = 'gpu' WHERE id = ?1", [id])
        .unwrap();
    let err = format!("{:#}", store.load(id).unwrap_err());
    assert!(
        err.contains("\"gpu\"") && err.contains("does not know"),
        "{err}"
    );
    assert!(store.list().is_err());
}

/// A `run` or `suite` that is not an object says nothing (serde would read an array's items
/// as the object's fields in order).
#[test]
fn a_run_or_suite_that_is_an_array_is_not_read_as_one() {
    let mut d = doc("x", 1.0);
    d["run"] = json!([1, "label", "2026-01-01T00:00:00Z", "cpu"]);
    d["suite"] = json!(["quick", 1, false]);
    let run = NewRun::from_bench_doc(&d, crate::store::RunSource::Import).unwrap();
    assert_eq!(
        (run.kind, run.label, run.suite),
        (RunKind::Disk, None, None)
    );
    assert_eq!(run::suite_standard(&run.extra), None);
}
