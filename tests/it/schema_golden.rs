//! The stored schema and the JSON read back from it, pinned byte for byte: documents written by
//! tacho 0.1.0 (`tests/fixtures/schema/`: `runs export` of nine stored runs of every kind, a
//! second host's runs, and the live `--json` documents of each command) are imported into a
//! fresh store, and what the store holds (its rows) and every command that reads them back
//! prints (`runs list/show/export`, `compare`, `compare --by host`, `drift`, `diff`) must equal
//! the goldens under `tests/fixtures/schema/golden/`, written by that version. A change to how
//! documents are read or written shows here as a changed byte.
//!
//! `TACHO_BLESS=1` rewrites the goldens instead of comparing (only for a deliberate change of
//! output, reviewed in the diff).

use crate::common::*;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schema")
}

/// Compares `text` with the golden `name` (or writes it under `TACHO_BLESS=1`); collects
/// mismatches so one run names every golden that changed.
struct Goldens {
    bless: bool,
    changed: Vec<String>,
}

impl Goldens {
    fn new() -> Goldens {
        Goldens {
            bless: std::env::var_os("TACHO_BLESS").is_some(),
            changed: Vec::new(),
        }
    }

    fn check(&mut self, name: &str, text: &str) {
        let path = fixtures().join("golden").join(name);
        if self.bless {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, text).unwrap();
            return;
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (TACHO_BLESS=1 writes it)", path.display()));
        if want != text {
            let line = want
                .lines()
                .zip(text.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(want.lines().count().min(text.lines().count()));
            self.changed.push(format!(
                "{name}: first difference at line {}:\n  want {:?}\n  got  {:?}",
                line + 1,
                want.lines().nth(line),
                text.lines().nth(line)
            ));
        }
    }

    fn finish(self) {
        assert!(
            self.changed.is_empty(),
            "outputs differ from the goldens:\n{}",
            self.changed.join("\n")
        );
    }
}

/// `tacho ARGS` on the store DB, run in the repository's root (so paths print as given); its stdout,
/// which must be a success.
fn out(db: &Path, args: &[&str]) -> String {
    out_exit(db, args, 0)
}

/// As [`out`], for a command whose success exits `code` (`diff` exits 1 on differences).
fn out_exit(db: &Path, args: &[&str], code: i32) -> String {
    let mut cmd = tacho();
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .env("TACHO_DB", db);
    let o = run_cmd(cmd);
    assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

/// Every row of the store's tables, one line each, in a fixed order; `mask` names columns
/// whose values are made at import (a new run's id and time) and printed as `*`.
fn rows(db: &Path, mask: &[&str]) -> String {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut text = String::new();
    for (table, order) in [
        ("runs", "id"),
        ("tests", "run_id, seq"),
        ("figures", "run_id, seq, sample, direction"),
    ] {
        let mut stmt = conn
            .prepare(&format!("SELECT * FROM {table} ORDER BY {order}"))
            .unwrap();
        let names: Vec<String> = stmt.column_names().map(str::to_string).collect();
        let mut q = stmt.query([]).unwrap();
        while let Some(row) = q.next().unwrap() {
            let cells: Vec<String> = names
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    let v: rusqlite::types::Value = row.get(i).unwrap();
                    if mask.contains(&n.as_str()) {
                        return format!("{n}=*");
                    }
                    format!("{n}={v:?}")
                })
                .collect();
            text.push_str(&format!("{table}: {}\n", cells.join(" | ")));
        }
    }
    text
}

#[test]
fn stored_runs_read_back_as_version_0_1_0_wrote_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let mut g = Goldens::new();
    out(&db, &["runs", "import", "tests/fixtures/schema/runs.json"]);
    out(
        &db,
        &["runs", "import", "tests/fixtures/schema/other-host.json"],
    );
    g.check("rows.txt", &rows(&db, &[]));
    let ids: Vec<String> = (1..=12).map(|i| i.to_string()).collect();
    let mut export = vec!["runs", "export"];
    export.extend(ids.iter().map(String::as_str));
    g.check("export.json", &out(&db, &export));
    g.check("list.json", &out(&db, &["runs", "list", "--json"]));
    g.check("list.txt", &out(&db, &["runs", "list"]));
    for id in &ids {
        g.check(
            &format!("show-{id}.json"),
            &out(&db, &["runs", "show", id, "--json"]),
        );
        g.check(&format!("show-{id}.txt"), &out(&db, &["runs", "show", id]));
    }
    for (name, args) in [
        ("compare-1-9.json", &["compare", "1", "9", "--json"][..]),
        ("compare-1-9.txt", &["compare", "1", "9"]),
        ("compare-1-9.csv", &["compare", "1", "9", "--csv"]),
        ("compare-1-9.md", &["compare", "1", "9", "--markdown"]),
        (
            "compare-1-2-3-10.json",
            &["compare", "1", "2", "3", "10", "--json"],
        ),
        ("fleet.json", &["compare", "--by", "host", "--json"]),
        ("fleet.txt", &["compare", "--by", "host"]),
        ("drift.json", &["drift", "--json"]),
        ("drift.txt", &["drift"]),
    ] {
        g.check(name, &out(&db, args));
    }
    g.finish();
}

#[test]
fn live_documents_and_fio_import_as_version_0_1_0_stored_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("live.db");
    let mut g = Goldens::new();
    let files = [
        "tests/fixtures/schema/live/disk-etcd.json",
        "tests/fixtures/schema/live/disk-custom.json",
        "tests/fixtures/schema/live/cpu.json",
        "tests/fixtures/schema/live/mem.json",
        "tests/fixtures/schema/live/time.json",
        "tests/fixtures/schema/live/check.json",
        "tests/fixtures/fio/three-jobs.json",
        "tests/fixtures/fio/etcd-fdatasync.json",
    ];
    for f in files {
        out(&db, &["runs", "import", f]);
    }
    // An import is given a new id and, without a time of its own, the time of the import.
    g.check("live-rows.txt", &rows(&db, &["created_at", "uuid"]));
    for id in 1..=files.len() {
        let id = id.to_string();
        let show = out(&db, &["runs", "show", &id, "--json"]);
        let masked: String = show
            .lines()
            .map(|l| {
                let t = l.trim_start();
                if t.starts_with("\"created_at\"") || t.starts_with("\"uuid\"") {
                    format!("{}*", &l[..l.find(':').unwrap() + 1])
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        g.check(&format!("live-show-{id}.json"), &masked);
    }
    // A second cpu, mem and time run (9, 10, 11) to compare with the first.
    for f in &files[2..5] {
        out(&db, &["runs", "import", f]);
    }
    for (a, b) in [("1", "2"), ("3", "9"), ("4", "10"), ("5", "11")] {
        for format in ["--json", "--csv"] {
            let text = out(&db, &["compare", a, b, format]);
            let kept: Vec<&str> = text
                .lines()
                .filter(|l| !l.contains("\"created_at\"") && !l.contains("\"uuid\""))
                .collect();
            let ext = &format[2..];
            g.check(&format!("live-compare-{a}-{b}.{ext}"), &kept.join("\n"));
        }
    }
    let diff = [
        "diff",
        "tests/fixtures/snapshot/a.json",
        "tests/fixtures/snapshot/b.json",
    ];
    g.check("diff.txt", &out_exit(&db, &diff, 1));
    g.check(
        "diff.json",
        &out_exit(&db, &[&diff[..], &["--json"]].concat(), 1),
    );
    g.finish();
}
