//! The results store through the binary: bench saves runs (test by test, with labels, even
//! when interrupted), `runs list|show|rm|export|import`, concurrent writers, damaged and
//! foreign files, the first schema's databases, and the Prometheus textfile.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

const FIO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/fio/three-jobs.json"
);

/// A tempdir holding a database path (the file does not exist yet).
fn db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.db");
    (dir, path)
}

fn with_db<'a>(db: &'a Path, args: &[&'a str]) -> Vec<&'a str> {
    let mut v = args.to_vec();
    v.extend(["--db", db.to_str().unwrap()]);
    v
}

/// A tiny randread bench in a fresh tempdir, saved into `db` with `extra` options.
fn bench(db: &Path, extra: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["bench", "disk", dir.path().to_str().unwrap(), "--json"];
    args.extend_from_slice(TINY);
    args.extend(["--db", db.to_str().unwrap()]);
    if !extra.contains(&"--rw") {
        args.extend(["--rw", "randread"]);
    }
    args.extend_from_slice(extra);
    let v = json_ok(&run(&args));
    assert_empty(dir.path());
    v
}

fn list(db: &Path) -> Vec<Value> {
    let v = json_ok(&run(&with_db(db, &["runs", "list", "--json"])));
    assert_eq!(v["schema"], "tacho.runs.v1");
    v["runs"].as_array().unwrap().clone()
}

fn show(db: &Path, id: i64) -> Value {
    let id = id.to_string();
    json_ok(&run(&with_db(db, &["runs", "show", &id, "--json"])))
}

#[test]
fn bench_saves_the_run_with_its_label_and_fingerprint() {
    let (_d, db) = db();
    let report = bench(&db, &["--label", "before THP off"]);
    let runs = list(&db);
    assert_eq!(runs.len(), 1);
    let r = &runs[0];
    assert_eq!(r["label"], "before THP off");
    assert_eq!(
        (r["status"].as_str(), r["source"].as_str()),
        (Some("finished"), Some("bench"))
    );
    assert_eq!(r["tests"], 1);
    assert_eq!(r["hostname"], report["host"]["hostname"]);

    let stored = show(&db, r["id"].as_i64().unwrap());
    assert_eq!(stored["schema"], "tacho.bench.v1");
    assert_eq!(stored["run"]["label"], "before THP off");
    // Every figure and field the benchmark printed is stored, unchanged.
    assert_eq!(stored["tests"], report["tests"]);
    assert_eq!(stored["host"], report["host"]);
    assert_eq!(stored["target"], report["target"]);
    assert_eq!(stored["tunables"], report["tunables"]);
    // The fingerprint holds the kernel settings the issue lists.
    for key in [
        "thp_enabled",
        "thp_defrag",
        "cpu_governor",
        "mitigations",
        "devices",
    ] {
        assert!(
            report["tunables"].get(key).is_some(),
            "tunables.{key} missing: {}",
            report["tunables"]
        );
    }
}

#[test]
fn no_save_leaves_no_database() {
    let (_d, db) = db();
    bench(&db, &["--no-save"]);
    assert!(!db.exists(), "--no-save created {}", db.display());
    // Readers do not create one either, and an empty store lists nothing.
    assert!(list(&db).is_empty());
    assert!(!db.exists());
    let o = run(&with_db(&db, &["runs", "list"]));
    assert!(stdout(&o).contains("no runs stored yet"), "{}", stdout(&o));
}

#[test]
fn tacho_db_environment_variable_selects_the_database() {
    let (_d, db) = db();
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = tacho();
    cmd.args([
        "bench",
        "disk",
        dir.path().to_str().unwrap(),
        "--rw",
        "randread",
    ])
    .args(TINY)
    .env("TACHO_DB", &db);
    let o = run_cmd(cmd);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("saved as run 1"), "{}", stderr(&o));
    assert_eq!(list(&db).len(), 1);
}

#[test]
fn two_benchmarks_saving_at_once_lose_nothing() {
    let (_d, db) = db();
    let dirs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let children: Vec<_> = dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| {
            let label = format!("parallel {i}");
            tacho()
                .args([
                    "bench",
                    "disk",
                    dir.path().to_str().unwrap(),
                    "--suite",
                    "quick",
                ])
                .args([
                    "--size",
                    "8M",
                    "--runtime",
                    "200ms",
                    "--ramp",
                    "0",
                    "--label",
                    &label,
                ])
                .args(["--db", db.to_str().unwrap()])
                .spawn_piped()
        })
        .collect();
    for child in children {
        let o = wait_output(child, Duration::from_secs(120));
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let runs = list(&db);
    assert_eq!(runs.len(), 2);
    for r in &runs {
        assert_eq!(r["status"], "finished");
        assert_eq!(r["tests"], 7, "quick has 7 tests: {r}");
        let stored = show(&db, r["id"].as_i64().unwrap());
        assert_eq!(stored["tests"].as_array().unwrap().len(), 7);
    }
}

#[test]
fn concurrent_imports_lose_nothing() {
    let (d, db) = db();
    // 4 processes × 10 files (one run each) written at the same time into a new file, so they
    // also race to create it.
    let files: Vec<String> = (0..10)
        .map(|i| {
            let p = d.path().join(format!("fio-{i}.json"));
            std::fs::copy(FIO, &p).unwrap();
            p.to_str().unwrap().to_owned()
        })
        .collect();
    let children: Vec<_> = (0..4)
        .map(|_| {
            // One `runs import` per file, so each process opens, writes and closes 10 times.
            let script = files
                .iter()
                .map(|f| {
                    format!(
                        "{} runs import --db {} {f} >/dev/null || exit 1",
                        env!("CARGO_BIN_EXE_tacho"),
                        db.display()
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            std::process::Command::new("sh")
                .args(["-c", &script])
                .spawn_piped()
        })
        .collect();
    for child in children {
        let o = wait_output(child, Duration::from_secs(120));
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let runs = list(&db);
    assert_eq!(runs.len(), 40);
    let ids: std::collections::BTreeSet<i64> =
        runs.iter().map(|r| r["id"].as_i64().unwrap()).collect();
    assert_eq!(ids.len(), 40, "ids are unique");
    assert!(runs.iter().all(|r| r["tests"] == 3));
}

#[test]
fn an_interrupted_suite_keeps_the_tests_that_finished() {
    let (_d, db) = db();
    let dir = tempfile::tempdir().unwrap();
    let child = tacho()
        .args([
            "bench",
            "disk",
            dir.path().to_str().unwrap(),
            "--suite",
            "quick",
        ])
        .args([
            "--size",
            "8M",
            "--runtime",
            "700ms",
            "--ramp",
            "0",
            "--json",
        ])
        .args(["--db", db.to_str().unwrap()])
        .spawn_piped();
    // Wait until the first test is in the store, then Ctrl-C.
    let start = Instant::now();
    loop {
        let saved = db.exists()
            && list(&db)
                .first()
                .is_some_and(|r| r["tests"].as_i64() >= Some(1));
        if saved {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no test saved in 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: signalling the child we started.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let o = wait_output(child, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert_empty(dir.path());
    let printed = parse_json(&o);
    let r = &list(&db)[0];
    assert_eq!(r["status"], "interrupted");
    let stored = show(&db, r["id"].as_i64().unwrap());
    assert_eq!(stored["tests"], printed["tests"], "stored = printed");
    assert!(!stored["tests"].as_array().unwrap().is_empty());
}

#[test]
fn a_killed_run_shows_as_abandoned_not_running() {
    let (_d, db) = db();
    let dir = tempfile::tempdir().unwrap();
    let mut child = tacho()
        .args(["bench", "disk", dir.path().to_str().unwrap()])
        .args(["--rw", "randread", "--size", "8M", "--runtime", "60s"])
        .args(["--db", db.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !(db.exists() && list(&db).first().is_some_and(|r| r["status"] == "running")) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the run was not begun in 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let r = &list(&db)[0];
    assert_eq!(r["status"], "abandoned", "{r}");
    let shown = show(&db, r["id"].as_i64().unwrap());
    assert_eq!(shown["run"]["status"], "abandoned");
}

#[test]
fn export_and_import_move_runs_between_databases() {
    let (_a, here) = db();
    let (_b, there) = db();
    bench(&here, &["--label", "one"]);
    bench(&here, &["--label", "two"]);
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("runs.json");
    let o = run(&with_db(
        &here,
        &["runs", "export", "1", "2", "-o", file.to_str().unwrap()],
    ));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    // To stdout as well: the same documents.
    let o = run(&with_db(&here, &["runs", "export", "1", "2"]));
    assert_eq!(stdout(&o), std::fs::read_to_string(&file).unwrap());

    let o = run(&with_db(
        &there,
        &["runs", "import", file.to_str().unwrap(), "--json"],
    ));
    let v = json_ok(&o);
    assert_eq!(v["schema"], "tacho.runs.import.v1");
    assert_eq!(v["runs"].as_array().unwrap().len(), 2);
    let runs = list(&there);
    assert_eq!(runs[0]["label"], "one");
    assert_eq!(runs[1]["label"], "two");
    assert_eq!(runs[0]["source"], "import");
    for id in [1, 2] {
        let (a, b) = (show(&here, id), show(&there, id));
        for key in ["tests", "host", "target", "tunables", "warnings"] {
            assert_eq!(a[key], b[key], "{key} changed in the move");
        }
        assert_eq!(a["run"]["created_at"], b["run"]["created_at"]);
    }
}

#[test]
fn fio_json_import_becomes_a_run_with_one_test_per_job() {
    let (_d, db) = db();
    let o = run(&with_db(&db, &["runs", "import", FIO]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("imported run 1"), "{}", stdout(&o));
    let r = &list(&db)[0];
    assert_eq!(
        (r["source"].as_str(), r["tests"].as_i64()),
        (Some("fio"), Some(3))
    );
    assert_eq!(r["label"], "fio three-jobs.json");
    let fio: Value = serde_json::from_str(&std::fs::read_to_string(FIO).unwrap()).unwrap();
    let stored = show(&db, 1);
    let t = &stored["tests"][0];
    assert_eq!(t["name"], "randread-4k-q16");
    assert_eq!(t["read"]["iops"], fio["jobs"][0]["read"]["iops"]);
    // The human table shows the imported figures.
    let o = run(&with_db(&db, &["runs", "show", "1"]));
    assert!(stdout(&o).contains("randread-4k-q16"), "{}", stdout(&o));
    assert!(
        stdout(&o)
            .lines()
            .next()
            .unwrap()
            .starts_with("run 1 (fio three-jobs.json)")
    );
}

#[test]
fn rm_removes_only_what_it_was_given() {
    let (_d, db) = db();
    for _ in 0..3 {
        assert_eq!(
            run(&with_db(&db, &["runs", "import", FIO])).status.code(),
            Some(0)
        );
    }
    let o = run(&with_db(&db, &["runs", "rm", "2"]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let ids: Vec<i64> = list(&db)
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [1, 3]);
    let e = assert_error(&run(&with_db(&db, &["runs", "rm", "1", "99"])));
    assert!(
        e.contains("no run 99") && e.contains("nothing removed"),
        "{e}"
    );
    assert_eq!(list(&db).len(), 2);
    let e = assert_error(&run(&with_db(&db, &["runs", "show", "2"])));
    assert!(e.contains("no run 2"), "{e}");
}

#[test]
fn damaged_and_foreign_files_are_refused_untouched() {
    let d = tempfile::tempdir().unwrap();
    let garbage = d.path().join("garbage.db");
    std::fs::write(&garbage, "not a database at all\n".repeat(500)).unwrap();
    let foreign = d.path().join("foreign.db");
    rusqlite::Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        .unwrap();
    // A real store cut short: its header survives, its pages do not.
    let (_t, truncated) = db();
    assert_eq!(
        run(&with_db(&truncated, &["runs", "import", FIO]))
            .status
            .code(),
        Some(0)
    );
    let len = std::fs::metadata(&truncated).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&truncated)
        .unwrap()
        .set_len(len / 2)
        .unwrap();

    for (path, expect) in [
        (&garbage, "not a tacho results database"),
        (&foreign, "another program"),
        (&truncated, "not a tacho results database"),
    ] {
        let before = std::fs::read(path).unwrap();
        let e = assert_error(&run(&with_db(path, &["runs", "show", "1"])));
        assert!(
            e.contains(expect) && e.contains("--db"),
            "{}: {e}",
            path.display()
        );
        // A benchmark is refused before it writes a byte, and the file is not altered.
        let target = tempfile::tempdir().unwrap();
        let args = tiny_disk(target.path().to_str().unwrap(), &["--rw", "randread"]);
        let e = assert_error(&run(&with_db(path, &args)));
        assert!(e.contains(expect), "{e}");
        assert_empty(target.path());
        assert_eq!(
            std::fs::read(path).unwrap(),
            before,
            "{} changed",
            path.display()
        );
        let e = assert_error(&run(&with_db(path, &["runs", "import", FIO])));
        assert!(e.contains(expect), "{e}");
    }
}

#[test]
fn a_first_schema_database_is_migrated_and_compares() {
    let (_d, db) = db();
    let sql = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/store/schema-1.sql"
    ))
    .unwrap();
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(&sql)
        .unwrap();

    let runs = list(&db);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["label"], "saved by schema 1");
    let version: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 5);
    // The figures table was filled from the stored JSON: the old run compares with a new one.
    bench(&db, &["--label", "new", "--iodepth", "16"]);
    let v = json_ok(&run(&with_db(&db, &["compare", "1", "2", "--json"])));
    let iops = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "iops")
        .expect("an IOPS row");
    assert!(iops["cells"][0]["value"].as_f64().unwrap() > 0.0, "{iops}");
    assert!(iops["cells"][1]["value"].as_f64().unwrap() > 0.0, "{iops}");
}

#[test]
fn prometheus_textfile_is_valid_and_replaced_atomically() {
    let (d, db) = db();
    let prom = d.path().join("tacho.prom");
    std::fs::write(&prom, "old content\n").unwrap();
    let label = "quote \" backslash \\ label";
    bench(
        &db,
        &[
            "--label",
            label,
            "--prom-textfile",
            prom.to_str().unwrap(),
            "--rw",
            "randrw",
            "--fdatasync",
            "1",
        ],
    );
    let text = std::fs::read_to_string(&prom).unwrap();
    let mut names = std::collections::BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            assert!(
                rest.starts_with("HELP tacho_bench_") || rest.starts_with("TYPE tacho_bench_"),
                "{line}"
            );
            continue;
        }
        // name{labels} value
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("no value: {line}"));
        assert!(value.parse::<f64>().is_ok(), "bad value in {line}");
        let (name, labels) = series
            .split_once('{')
            .unwrap_or_else(|| panic!("no labels: {line}"));
        assert!(labels.ends_with('}'), "{line}");
        assert!(name.starts_with("tacho_bench_"), "{line}");
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{line}"
        );
        names.insert(name.to_owned());
    }
    for expected in [
        "tacho_bench_iops",
        "tacho_bench_bandwidth_bytes_per_second",
        "tacho_bench_latency_seconds",
        "tacho_bench_latency_seconds_count",
        "tacho_bench_run_info",
    ] {
        assert!(names.contains(expected), "{expected} missing from:\n{text}");
    }
    assert!(text.contains(r#"direction="read""#), "{text}");
    assert!(text.contains(r#"direction="write""#), "{text}");
    assert!(names.contains("tacho_bench_sync_latency_seconds"), "{text}");
    assert!(text.contains(r#"direction="write""#), "{text}");
    assert!(names.contains("tacho_bench_sync_latency_seconds"), "{text}");
    assert!(
        text.contains(r#"label="quote \" backslash \\ label""#),
        "{text}"
    );
    assert_eq!(
        entries(d.path()),
        ["results.db", "tacho.prom"],
        "temp files left"
    );
    assert_promtool_accepts(&prom);
}

#[test]
fn bad_store_input_is_one_line_and_exit_2() {
    let (d, db) = db();
    let not_json = d.path().join("notes.txt");
    std::fs::write(&not_json, "hello").unwrap();
    let other = d.path().join("other.json");
    std::fs::write(&other, r#"{"schema": "tacho.top.v1"}"#).unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["runs", "import", "/nonexistent/x.json"],
            "cannot read /nonexistent/x.json",
        ),
        (
            vec!["runs", "import", not_json.to_str().unwrap()],
            "no JSON document",
        ),
        (
            vec!["runs", "import", FIO, other.to_str().unwrap()],
            "tacho.top.v1",
        ),
        (vec!["runs", "show", "1"], "no results database"),
        (vec!["runs", "show", "0"], "not a run id"),
        (
            vec!["runs", "show", "1", "--json", "--csv"],
            "cannot be used with",
        ),
        (vec!["compare", "1"], "at least two"),
        (vec!["compare", "1", "2"], "no results database"),
        (
            vec!["compare", "1", "2", "--fail-on-regression", "lots"],
            "not a percentage",
        ),
        (
            vec!["runs", "import", FIO, "--label", "two\nlines"],
            "one line",
        ),
        (
            vec![
                "bench",
                "disk",
                d.path().to_str().unwrap(),
                "--rw",
                "randread",
                "--prom-textfile",
                "/nonexistent/tacho.prom",
            ],
            "Prometheus textfile",
        ),
    ];
    for (args, expect) in cases {
        let e = assert_error(&run(&with_db(&db, &args)));
        assert!(e.contains(expect), "{args:?}: {e}");
    }
    // The failed import of FIO + other stored nothing.
    assert!(!db.exists());
}

#[test]
fn bench_alone_saves_where_tacho_db_points() {
    // `tacho bench` builds its options without clap; TACHO_DB must still hold, and HOME must
    // stay untouched.
    let (_d, db) = db();
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let child = tacho()
        .arg("bench")
        .current_dir(dir.path())
        .env("TACHO_DB", &db)
        .env("HOME", home.path())
        .env_remove("XDG_DATA_HOME")
        .spawn_piped();
    let start = Instant::now();
    while entries(dir.path()).is_empty() {
        assert!(start.elapsed() < Duration::from_secs(30), "no test file");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signalling the child we started.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let o = wait_output(child, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert_empty(dir.path());
    assert_empty(home.path());
    let runs = list(&db);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["status"], "interrupted");
    assert_eq!(runs[0]["suite"], "quick");
}
