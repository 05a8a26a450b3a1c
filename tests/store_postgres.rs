//! The shared PostgreSQL store: `runs push` from many processes at once keeps every run once,
//! migrations from an empty database, and bad URLs or logins as one line without the password.
//!
//! The server comes from `TACHO_TEST_PG`, an admin URL such as
//! `postgres://postgres:PASSWORD@127.0.0.1:5432/postgres` (`.ci/run` starts Debian's cluster
//! and sets it, with `?sslmode=disable`: its cluster's certificate is self-signed). Each test creates its own database with a unique name and drops it after.

mod common;

use common::*;
use postgres::{Client, NoTls};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const FIO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/fio/three-jobs.json"
);

/// A database of its own on the test server, dropped when the test ends (even on failure).
struct TestDb {
    admin: String,
    name: String,
    url: String,
}

impl TestDb {
    /// `None` (after `skip`) when no server is configured.
    fn new(tag: &str) -> Option<TestDb> {
        let Ok(admin) = std::env::var("TACHO_TEST_PG") else {
            skip("TACHO_TEST_PG is not set: no PostgreSQL server to test against");
            return None;
        };
        let name = format!(
            "tacho_{tag}_{}_{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        );
        let (path, query) = admin.split_once('?').unwrap_or((admin.as_str(), ""));
        let (base, _) = path
            .rsplit_once('/')
            .expect("TACHO_TEST_PG has a /DATABASE");
        let url = match query {
            "" => format!("{base}/{name}"),
            q => format!("{base}/{name}?{q}"),
        };
        let mut client = Client::connect(&admin, NoTls).expect("cannot reach TACHO_TEST_PG");
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        Some(TestDb { admin, name, url })
    }

    fn client(&self) -> Client {
        Client::connect(&self.url, NoTls).unwrap()
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Ok(mut c) = Client::connect(&self.admin, NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// A local SQLite store with `n` imported runs.
fn local_store(dir: &Path, n: usize) -> String {
    let db = dir.join("local.db");
    let files: Vec<String> = (0..n)
        .map(|i| {
            let p = dir.join(format!("fio-{i}.json"));
            std::fs::copy(FIO, &p).unwrap();
            p.to_str().unwrap().to_owned()
        })
        .collect();
    let mut args = vec!["runs", "import", "--db", db.to_str().unwrap()];
    args.extend(files.iter().map(String::as_str));
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    db.to_str().unwrap().to_owned()
}

fn count(c: &mut Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).unwrap().get(0)
}

#[test]
fn concurrent_retried_pushes_keep_every_run_once() {
    let Some(pg) = TestDb::new("push") else {
        return;
    };
    let dirs: Vec<tempfile::TempDir> = (0..8).map(|_| tempfile::tempdir().unwrap()).collect();
    let locals: Vec<String> = dirs.iter().map(|d| local_store(d.path(), 5)).collect();
    // 8 hosts push at once, each twice (the retry finds its runs there), into a database
    // nobody has migrated yet, so they also race to create the tables.
    let children: Vec<_> = locals
        .iter()
        .map(|local| {
            let push = format!(
                "{bin} runs push --db '{url}' --from {local}",
                bin = env!("CARGO_BIN_EXE_tacho"),
                url = pg.url
            );
            Command::new("sh")
                .args(["-c", &format!("{push} && {push}")])
                .spawn_piped()
        })
        .collect();
    for child in children {
        let o = wait_output(child, Duration::from_secs(120));
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let out = stdout(&o);
        assert!(out.contains("pushed 5 new run(s)"), "{out}");
        assert!(
            out.contains("pushed 0 new run(s)") && out.contains("5 already there"),
            "{out}"
        );
    }
    let mut c = pg.client();
    assert_eq!(count(&mut c, "SELECT count(*) FROM runs"), 40);
    assert_eq!(count(&mut c, "SELECT count(DISTINCT uuid) FROM runs"), 40);
    let tests = count(&mut c, "SELECT count(*) FROM tests");
    assert!(tests == 120, "every run has its tests: {tests}");
}

#[test]
fn pushed_runs_keep_their_stored_fields() {
    let Some(pg) = TestDb::new("same") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let local = local_store(dir.path(), 1);
    let o = run(&["runs", "push", "--db", &pg.url, "--from", &local]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let shown = json_ok(&run(&["runs", "show", "1", "--db", &local, "--json"]));
    let mut c = pg.client();
    let row = c
        .query_one(
            "SELECT r.created_at, r.label, t.json FROM runs r
             JOIN tests t ON t.run_id = r.id AND t.seq = 0",
            &[],
        )
        .unwrap();
    let created: String = row.get(0);
    let label: Option<String> = row.get(1);
    let test: String = row.get(2);
    let test: serde_json::Value = serde_json::from_str(&test).unwrap();
    assert_eq!(shown["tests"][0]["name"], test["name"]);
    assert_eq!(shown["tests"][0], test, "the test JSON as stored");
    assert_eq!(shown["run"]["label"].as_str(), label.as_deref());
    assert_eq!(shown["run"]["created_at"].as_str(), Some(created.as_str()));
}

#[test]
fn migrates_an_empty_database_once_and_reopens() {
    let Some(pg) = TestDb::new("migrate") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let local = local_store(dir.path(), 1);
    for _ in 0..2 {
        let o = run(&["runs", "push", "--db", &pg.url, "--from", &local]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let mut c = pg.client();
    assert_eq!(count(&mut c, "SELECT version FROM tacho_schema"), 1);
    assert_eq!(count(&mut c, "SELECT count(*) FROM tacho_schema"), 1);
}

#[test]
fn bad_urls_and_logins_are_one_line_without_the_password() {
    let Some(pg) = TestDb::new("bad") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let local = local_store(dir.path(), 1);
    let wrong_pw = pg
        .url
        .replacen("://postgres:", "://postgres:Wr0ngSecret", 1);
    assert_ne!(
        wrong_pw, pg.url,
        "TACHO_TEST_PG must log in with a password"
    );
    let unreachable = "postgres://postgres:Wr0ngSecret@127.0.0.1:1/x";
    let bad = "postgres://postgres:Wr0ngSecret@127.0.0.1:notaport/x";
    for (url, says) in [
        (wrong_pw.as_str(), "refused the login"),
        (unreachable, "cannot reach"),
        (bad, "not a usable PostgreSQL URL"),
    ] {
        let o = run(&["runs", "push", "--db", url, "--from", &local]);
        let line = assert_error(&o);
        assert!(line.contains(says), "{line}");
        assert!(!line.contains("Wr0ngSecret"), "password printed: {line}");
    }
    // TLS is verified: the test server's certificate is self-signed (or it has no TLS at all).
    let (path, _) = pg.url.split_once('?').unwrap_or((pg.url.as_str(), ""));
    let require = format!("{path}?sslmode=require");
    let line = assert_error(&run(&["runs", "push", "--db", &require, "--from", &local]));
    assert!(line.contains("TLS"), "{line}");
    let o = run(&["runs", "list", "--db", unreachable]);
    let line = assert_error(&o);
    assert!(!line.contains("Wr0ngSecret"), "password printed: {line}");
}
