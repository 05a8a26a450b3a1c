//! Bad files in, nothing broken: imports with a byte-order mark, CRLF lines and text around the
//! JSON; fio 2's JSON (KiB/s and microseconds); hostile values refused by name with nothing
//! imported; snapshots with wrong types refused; files over the size limit refused unread; a
//! database on a read-only filesystem or owned by another user read but never written.

use crate::common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

const FIO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/fio/three-jobs.json"
);

const SNAPSHOT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/snapshot/a.json"
);

/// A tacho.bench.v1 document with one test per IOPS figure.
fn doc(label: &str, iops: &[f64]) -> Value {
    let tests: Vec<Value> = iops
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            json!({"name": format!("RND4K Q{}T1", i + 1), "rw": "randread", "bs_bytes": 4096,
                   "iodepth": i + 1, "numjobs": 1,
                   "read": {"iops": v, "bw_bytes_per_s": v * 4096.0,
                            "lat_ns": {"mean": 1000.0, "p99": 2000.0}},
                   "repeats": [{"read": {"iops": v}}, {"read": {"iops": v * 1.01}}]})
        })
        .collect();
    json!({"schema": "tacho.bench.v1", "tool_version": "0.1.0", "run": {"label": label},
           "host": {"hostname": "h"}, "target": {"path": "/x"}, "tests": tests})
}

struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("results.db")
    }

    fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    fn tacho(&self, args: &[&str]) -> std::process::Output {
        tacho_on(&self.db(), args)
    }

    fn import(&self, file: &Path) -> std::process::Output {
        self.tacho(&["runs", "import", file.to_str().unwrap(), "--json"])
    }

    /// The stored runs as exported documents.
    fn exported(&self, id: &str) -> Value {
        json_ok(&self.tacho(&["runs", "show", id, "--json"]))
    }
}

fn tacho_on(db: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = tacho();
    cmd.args(args).arg("--db").arg(db);
    run_cmd(cmd)
}

#[test]
fn crlf_and_a_byte_order_mark_before_the_json_import() {
    let s = Scratch::new();
    let body = serde_json::to_string_pretty(&doc("crlf", &[100.0])).unwrap();
    // Lines of text come first, as fio prints them; then the document, all with CRLF. Counting
    // one byte per line end put the JSON's start inside the `…` and panicked (exit 101).
    let text = format!("fio-3.33\nStarting 1 process\nrandread: Laying out IO file…\n{body}\n")
        .replace('\n', "\r\n");
    let crlf = s.file("crlf.json", text.as_bytes());
    let o = s.import(&crlf);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut bom = b"\xEF\xBB\xBF".to_vec();
    bom.extend_from_slice(body.as_bytes());
    let o = s.import(&s.file("bom.json", &bom));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for id in ["1", "2"] {
        let run = s.exported(id);
        assert_eq!(run["tests"][0]["read"]["iops"], 100.0, "run {id}");
    }
}

#[test]
fn fio_json_with_normal_output_around_it_imports() {
    let s = Scratch::new();
    let fio = std::fs::read_to_string(FIO).unwrap();
    // --output-format=json,normal: the human report comes with the JSON.
    let text = format!(
        "randread-4k-q16: (g=0): rw=randread, bs=(R) 4096B-4096B, ioengine=io_uring\n\
         fio-3.33\nStarting 4 processes\n{fio}\n\
         randread-4k-q16: (groupid=0, jobs=1): err= 0: pid=1\n  read: IOPS=71.5k, BW=279MiB/s\n\
         \x20    | 99.00th=[  367], 99.50th=[  758]\n\
         Run status group 0 (all jobs):\n   READ: bw=279MiB/s (293MB/s)\n"
    );
    let o = s.import(&s.file("both.out", text.as_bytes()));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let imported = parse_json(&o);
    assert_eq!(imported["runs"][0]["tests"], 3);
}

/// One job as fio 2.x printed it: bandwidth in KiB/s (`bw`), `io_bytes` in KiB, latencies in
/// microseconds under `clat`/`lat`, no `bw_bytes`, no `*_ns`.
fn fio2_doc() -> Value {
    json!({
        "fio version": "fio-2.2.10",
        "timestamp": 1500000000,
        "global options": {"ioengine": "libaio", "direct": "1", "filename": "/dev/sdb"},
        "jobs": [{
            "jobname": "randread", "groupid": 0, "error": 0,
            "job options": {"rw": "randread", "bs": "4k", "iodepth": "32"},
            "read": {
                "io_bytes": 409600, "bw": 40960, "iops": 10240.0, "runtime": 10000,
                "total_ios": 102400,
                "slat": {"min": 1, "max": 50, "mean": 2.5, "stddev": 1.0},
                "clat": {"min": 100, "max": 9000, "mean": 3000.0, "stddev": 500.0,
                         "percentile": {"50.000000": 2900, "90.000000": 3500,
                                        "99.000000": 4200, "99.900000": 7000,
                                        "99.990000": 8800, "0.00": 0}},
                "lat": {"min": 102, "max": 9010, "mean": 3002.5, "stddev": 500.0},
                "bw_min": 39000, "bw_max": 42000, "bw_agg": 100.0, "bw_mean": 40960.0
            },
            "write": {"io_bytes": 0, "bw": 0, "iops": 0.0, "runtime": 0, "total_ios": 0},
            "usr_cpu": 5.0, "sys_cpu": 20.0
        }]
    })
}

#[test]
fn old_fio_json_is_converted_from_kib_and_microseconds() {
    let s = Scratch::new();
    let file = s.file("fio2.json", fio2_doc().to_string().as_bytes());
    let o = s.import(&file);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let read = &s.exported("1")["tests"][0]["read"];
    assert_eq!(read["bw_bytes_per_s"].as_f64(), Some(40960.0 * 1024.0));
    assert_eq!(read["bytes"].as_u64(), Some(409600 * 1024));
    assert_eq!(read["iops"].as_f64(), Some(10240.0));
    let lat = &read["lat_ns"];
    assert_eq!(lat["p99"].as_f64(), Some(4_200_000.0), "{lat}");
    assert_eq!(lat["p50"].as_f64(), Some(2_900_000.0), "{lat}");
    assert_eq!(lat["mean"].as_f64(), Some(3_002_500.0), "{lat}");
    assert_eq!(lat["max"].as_f64(), Some(9_010_000.0), "{lat}");
    // And the text view shows it, not 0.00 MiB/s.
    let shown = stdout(&s.tacho(&["runs", "show", "1"]));
    assert!(
        shown.contains("40.0 MiB/s") || shown.contains("10.2k"),
        "{shown}"
    );
}

/// Each hostile document is refused in one line naming what is wrong, exit 2, and leaves no
/// database behind (nothing imported).
#[test]
fn hostile_values_are_refused_by_name_and_nothing_is_imported() {
    let with = |f: &dyn Fn(&mut Value)| {
        let mut d = doc("bad", &[100.0, 200.0]);
        f(&mut d);
        d.to_string()
    };
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "negative IOPS",
            with(&|d| d["tests"][1]["read"]["iops"] = json!(-5.0)),
            "read.iops is -5",
        ),
        (
            "negative latency in a repeat",
            with(&|d| d["tests"][0]["repeats"][1]["read"]["lat_ns"] = json!({"p99": -1})),
            "repeat 2: read.lat_ns.p99 is -1",
        ),
        (
            "a number too large for a float",
            with(&|d| d["tests"][0]["read"]["iops"] = json!("BIG")).replace("\"BIG\"", "1e999"),
            "number out of range",
        ),
        (
            "an unknown kind",
            with(&|d| d["run"]["kind"] = json!("gpu")),
            "run.kind is \"gpu\"",
        ),
        (
            "a figure that is text",
            with(&|d| d["tests"][0]["read"]["iops"] = json!("fast")),
            "read.iops is a string",
        ),
        (
            "an absurd block size",
            with(&|d| d["tests"][0]["bs_bytes"] = json!(1u64 << 50)),
            "\"bs_bytes\" is 1125899906842624",
        ),
        (
            "a test that is not an object",
            with(&|d| d["tests"][1] = json!(7)),
            "test 2",
        ),
        (
            "a host that is not an object",
            with(&|d| d["host"] = json!("h")),
            "\"host\" is a string",
        ),
    ];
    let mut fio = fio2_doc();
    fio["jobs"][0]["read"]["iops"] = json!(-10240.0);
    let mut fio_cases = vec![("negative fio IOPS", fio.to_string(), "read.iops is -10240")];
    let mut all = cases;
    all.append(&mut fio_cases);
    for (what, text, expected) in all {
        let s = Scratch::new();
        let file = s.file("bad.json", text.as_bytes());
        let line = assert_error(&s.import(&file));
        assert!(
            line.contains(expected) && line.contains("bad.json"),
            "{what}: {line}"
        );
        assert!(!s.db().exists(), "{what}: a database was created");
    }
}

/// The tests of a file are stored as they are read, inside one transaction over every file
/// given: a file bad at its last test stores nothing. A store holding a run is left as it was
/// (the next run still gets the next id), even when a good file came first in the same
/// import; a database that did not exist is not made, and nothing is left beside it.
#[test]
fn a_file_bad_at_its_last_test_leaves_the_store_as_it_was() {
    let s = Scratch::new();
    let mut iops: Vec<f64> = (0..2000).map(|i| 1000.0 + f64::from(i)).collect();
    iops.push(-1.0);
    let bad = s.file("bad.json", doc("late", &iops).to_string().as_bytes());
    let good = s.file(
        "good.json",
        doc("good", &[100.0, 200.0]).to_string().as_bytes(),
    );
    let line = assert_error(&s.import(&bad));
    assert!(
        line.contains("test 2001") && line.contains("read.iops is -1"),
        "{line}"
    );
    assert_eq!(entries(s.dir.path()), ["bad.json", "good.json"]);

    let o = s.import(&good);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rows = || {
        let db = rusqlite::Connection::open(s.db()).unwrap();
        let count = |sql: &str| db.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
        [
            "SELECT count(*) FROM runs",
            "SELECT count(*) FROM tests",
            "SELECT count(*) FROM figures",
            "SELECT seq FROM sqlite_sequence WHERE name = 'runs'",
        ]
        .map(count)
    };
    let before = rows();
    assert_eq!(before, [1, 2, 6, 1]);
    let both = [good.to_str().unwrap(), bad.to_str().unwrap()];
    let line = assert_error(&s.tacho(&[&["runs", "import"][..], &both].concat()));
    assert!(line.contains("test 2001"), "{line}");
    assert_eq!(rows(), before, "the failed import changed the store");
    let o = s.import(&good);
    assert_eq!(parse_json(&o)["runs"][0]["id"], 2, "{}", stderr(&o));
}

#[test]
fn a_snapshot_with_wrong_types_is_refused_by_name() {
    let s = Scratch::new();
    let mut snap: Value =
        serde_json::from_str(&std::fs::read_to_string(SNAPSHOT).unwrap()).unwrap();
    snap["sysctl"] = json!({"vm.swappiness": {"nested": 1}});
    let bad = s.file("snap.json", snap.to_string().as_bytes());
    let o = run(&["diff", bad.to_str().unwrap(), SNAPSHOT]);
    let line = assert_error(&o);
    assert!(
        line.contains("\"sysctl.vm.swappiness\" is an object"),
        "{line}"
    );
    snap["sysctl"] = json!({});
    snap["devices"] = json!([{"name": 5}]);
    let bad = s.file("snap2.json", snap.to_string().as_bytes());
    let line = assert_error(&run(&["diff", bad.to_str().unwrap(), SNAPSHOT]));
    assert!(line.contains("devices[0].name"), "{line}");
}

#[test]
fn a_file_over_the_size_limit_is_refused_unread() {
    let s = Scratch::new();
    let path = s.dir.path().join("huge.json");
    // Sparse: the refusal must come from the size, before a byte is read.
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(600 << 20).unwrap();
    let line = assert_error(&s.import(&path));
    assert!(
        line.contains("600 MiB") && line.contains("up to 512 MiB") && line.contains("split"),
        "{line}"
    );
    assert!(!s.db().exists());
    let snap = s.dir.path().join("huge-snap.json");
    std::fs::File::create(&snap)
        .unwrap()
        .set_len(100 << 20)
        .unwrap();
    let line = assert_error(&run(&["diff", snap.to_str().unwrap(), SNAPSHOT]));
    assert!(line.contains("at most 64.0 MiB"), "{line}");
}

/// A results database with two runs, the second still in its `-wal` file (a connection held
/// open keeps SQLite from folding it into the main file), copied into `to` with or without
/// the `-wal` and `-shm` files.
fn wal_database(s: &Scratch, to: &Path, sidecars: &[&str]) {
    let a = s.file("a.json", doc("a", &[100.0, 200.0]).to_string().as_bytes());
    assert!(s.import(&a).status.success());
    let holder = rusqlite::Connection::open(s.db()).unwrap();
    holder
        .query_row("SELECT count(*) FROM runs", [], |r| r.get::<_, i64>(0))
        .unwrap();
    let b = s.file("b.json", doc("b", &[90.0, 210.0]).to_string().as_bytes());
    assert!(s.import(&b).status.success());
    for ext in ["", "-wal", "-shm"] {
        if ext.is_empty() || sidecars.contains(&ext) {
            let mut from = s.db().into_os_string();
            from.push(ext);
            std::fs::copy(&from, to.join(format!("results.db{ext}"))).unwrap();
        }
    }
    drop(holder);
}

/// A tmpfs with `files` placed by `fill`, then remounted read-only.
fn read_only_mount(fill: impl FnOnce(&Path)) -> Option<(tempfile::TempDir, MountGuard)> {
    if !is_root() {
        skip("read-only database: mounting a read-only tmpfs needs root");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let guard = MountGuard::mount(&["-t", "tmpfs", "-o", "size=16m", "tmpfs"], dir.path())
        .expect("mount tmpfs");
    fill(dir.path());
    let o = Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    Some((dir, guard))
}

/// Readers work, writers refuse in one line saying the database is read-only.
fn assert_read_only_store(db: &Path) {
    let list = json_ok(&tacho_on(db, &["runs", "list", "--json"]));
    let labels: Vec<&str> = list["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["label"].as_str())
        .collect();
    assert_eq!(labels, ["a", "b"], "{list}");
    let shown = tacho_on(db, &["runs", "show", "2"]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    let export = tacho_on(db, &["runs", "export", "1", "2"]);
    assert!(export.status.success(), "{}", stderr(&export));
    let compared = tacho_on(db, &["compare", "1", "2", "--json"]);
    assert!(compared.status.success(), "{}", stderr(&compared));
    let doc_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(doc_file.path(), doc("c", &[1.0]).to_string()).unwrap();
    for args in [
        vec!["runs", "import", doc_file.path().to_str().unwrap()],
        vec!["runs", "rm", "1"],
        // Refused before the command is run, not after.
        vec!["time", "--runs", "1", "true"],
    ] {
        let line = assert_error(&tacho_on(db, &args));
        assert!(
            line.contains("read-only") && line.contains("--db"),
            "{args:?}: {line}"
        );
    }
}

#[test]
fn a_wal_database_on_a_read_only_mount_with_its_wal_and_shm_is_read() {
    let s = Scratch::new();
    let Some((dir, _guard)) = read_only_mount(|to| wal_database(&s, to, &["-wal", "-shm"])) else {
        return;
    };
    assert_read_only_store(&dir.path().join("results.db"));
}

#[test]
fn a_database_on_a_read_only_mount_without_wal_files_is_read() {
    let s = Scratch::new();
    let Some((dir, _guard)) = read_only_mount(|to| {
        wal_database(&s, to, &[]);
        // The copy above was taken before the second run was folded in; take the clean file.
        std::fs::copy(s.db(), to.join("results.db")).unwrap();
    }) else {
        return;
    };
    assert_read_only_store(&dir.path().join("results.db"));
}

#[test]
fn a_read_only_wal_with_changes_but_no_shm_is_refused_not_half_read() {
    let s = Scratch::new();
    let Some((dir, _guard)) = read_only_mount(|to| wal_database(&s, to, &["-wal"])) else {
        return;
    };
    let db = dir.path().join("results.db");
    let line = assert_error(&tacho_on(&db, &["runs", "list"]));
    assert!(
        line.contains("read-only") && line.contains("-wal"),
        "{line}"
    );
}

#[test]
fn a_database_another_user_owns_is_read_but_not_written() {
    if !is_root() {
        skip("database of another user: needs root to run tacho as nobody");
        return;
    }
    let s = Scratch::new();
    let a = s.file("a.json", doc("a", &[100.0, 200.0]).to_string().as_bytes());
    assert!(s.import(&a).status.success());
    let b = s.file("b.json", doc("b", &[90.0, 210.0]).to_string().as_bytes());
    assert!(s.import(&b).status.success());
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(s.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(s.db(), std::fs::Permissions::from_mode(0o644)).unwrap();
    let as_nobody = |args: &[&str]| {
        let mut cmd = as_nobody(env!("CARGO_BIN_EXE_tacho"));
        cmd.args(args)
            .arg("--db")
            .arg(s.db())
            .env("HOME", "/nonexistent")
            .stdin(std::process::Stdio::null());
        run_cmd(cmd)
    };
    let list = as_nobody(&["runs", "list"]);
    assert!(list.status.success(), "{}", stderr(&list));
    assert!(stdout(&list).contains('b'), "{}", stdout(&list));
    let compared = as_nobody(&["compare", "1", "2"]);
    assert!(compared.status.success(), "{}", stderr(&compared));
    let line = assert_error(&as_nobody(&["runs", "rm", "1"]));
    assert!(
        line.contains("read-only") && line.contains("--db"),
        "{line}"
    );
    // Nothing was created beside it by the readers.
    assert_eq!(entries(s.dir.path()), ["a.json", "b.json", "results.db"]);
}
