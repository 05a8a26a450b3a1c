//! The shared PostgreSQL store: `runs push` from many processes at once keeps every run once,
//! migrations from an empty database, and bad URLs or logins as one line without the password.
//!
//! The server comes from `TACHO_TEST_PG`, an admin URL such as
//! `postgres://postgres:PASSWORD@127.0.0.1:5432/postgres` (`.ci/run` starts Debian's cluster
//! and sets it, with `?sslmode=disable`: its cluster's certificate is self-signed). Each test creates its own database with a unique name and drops it after.

mod common;

use common::pg::TestDb;
use common::*;
use postgres::Client;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const FIO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/fio/three-jobs.json"
);

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
    assert_eq!(count(&mut c, "SELECT version FROM tacho_schema"), 2);
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

/// The run documents of `runs export`, without the ids each store gave its imports.
fn exported(db: &str, ids: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec!["runs", "export", "--db", db];
    args.extend(ids);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    serde_json::Deserializer::from_slice(&o.stdout)
        .into_iter::<serde_json::Value>()
        .map(|d| {
            let mut d = d.unwrap();
            let run = d["run"].as_object_mut().unwrap();
            run.remove("id");
            assert!(run.remove("uuid").is_some_and(|u| u.is_string()));
            d
        })
        .collect()
}

fn listed(db: &str) -> Vec<serde_json::Value> {
    let v = json_ok(&run(&["runs", "list", "--db", db, "--json"]));
    v["runs"].as_array().unwrap().clone()
}

#[test]
fn every_runs_command_works_on_the_shared_store_as_on_a_file() {
    let Some(pg) = TestDb::new("cmds") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("same.db");
    let local = local.to_str().unwrap();
    for db in [pg.url.as_str(), local] {
        for _ in 0..2 {
            let o = run(&["runs", "import", "--db", db, FIO]);
            assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        }
    }
    // The same two imports read back the same from either store.
    let (shared, file) = (listed(&pg.url), listed(local));
    assert_eq!(shared.len(), 2);
    for (s, f) in shared.iter().zip(&file) {
        for key in ["kind", "status", "source", "label", "tests", "hostname"] {
            assert_eq!(s[key], f[key], "{key}");
        }
    }
    assert_eq!(exported(&pg.url, &["1", "2"]), exported(local, &["1", "2"]));
    let show =
        |db: &str| json_ok(&run(&["runs", "show", "2", "--db", db, "--json"]))["tests"].clone();
    assert_eq!(show(&pg.url), show(local));
    // compare reads through the same loader.
    let table = |db: &str| {
        let o = run(&["compare", "1", "2", "--db", db, "--csv"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        stdout(&o)
    };
    assert_eq!(table(&pg.url), table(local));
    // TACHO_DB names the server as --db does.
    let o = tacho()
        .args(["runs", "list", "--json"])
        .env("TACHO_DB", &pg.url)
        .output()
        .unwrap();
    assert_eq!(json_ok(&o)["runs"].as_array().unwrap().len(), 2);
    // rm: a missing id removes nothing; then one run goes, with its tests.
    let line = assert_error(&run(&["runs", "rm", "1", "99", "--db", &pg.url]));
    assert!(line.contains("no run 99"), "{line}");
    assert_eq!(listed(&pg.url).len(), 2);
    let o = run(&["runs", "rm", "1", "--db", &pg.url]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let left = listed(&pg.url);
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["id"], 2);
    let mut c = pg.client();
    assert_eq!(
        count(&mut c, "SELECT count(*) FROM tests WHERE run_id = 1"),
        0
    );
    // A run exported from a host keeps its run id: importing it twice stores it once.
    let file = dir.path().join("export.json");
    let o = run(&[
        "runs",
        "export",
        "1",
        "--db",
        local,
        "-o",
        file.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let import = || {
        json_ok(&run(&[
            "runs",
            "import",
            "--db",
            &pg.url,
            "--json",
            file.to_str().unwrap(),
        ]))
    };
    let (first, again) = (import(), import());
    assert_eq!(first["runs"][0]["already_there"], false);
    assert_eq!(again["runs"][0]["already_there"], true);
    assert_eq!(again["runs"][0]["id"], first["runs"][0]["id"]);
    assert_eq!(listed(&pg.url).len(), 2);
}

#[test]
fn benchmarks_save_to_the_shared_store_test_by_test_and_whole() {
    let Some(pg) = TestDb::new("save") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "bench",
        "disk",
        dir.path().to_str().unwrap(),
        "--rw",
        "randread",
    ];
    args.extend_from_slice(TINY);
    args.extend(["--db", &pg.url, "--label", "shared"]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("saved as run 1 in"), "{}", stderr(&o));
    assert!(!stderr(&o).contains(":tacho"), "password printed");
    let o = run(&["time", "--runs", "2", "true", "--db", &pg.url]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let runs = listed(&pg.url);
    let kinds: Vec<&str> = runs.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["disk", "time"]);
    assert_eq!(runs[0]["status"], "finished");
    assert_eq!(runs[0]["label"], "shared");
    assert_eq!(runs[0]["tests"], 1);
    let shown = json_ok(&run(&["runs", "show", "1", "--db", &pg.url, "--json"]));
    assert!(shown["tests"][0]["read"]["iops"].as_f64().unwrap() > 0.0);
}

#[test]
fn credentials_come_from_the_password_file_and_the_pg_variables() {
    let Some(pg) = TestDb::new("pgpass") else {
        return;
    };
    let admin = std::env::var("TACHO_TEST_PG").unwrap();
    let rest = admin.split_once("://").unwrap().1;
    let (userinfo, hostpart) = rest.rsplit_once('@').unwrap();
    let (user, password) = userinfo.split_once(':').unwrap();
    let hostport = hostpart.split(['/', '?']).next().unwrap();
    let (host, port) = hostport.split_once(':').unwrap_or((hostport, "5432"));
    let dir = tempfile::tempdir().unwrap();
    let pgpass = dir.path().join("pgpass");
    std::fs::write(
        &pgpass,
        format!("{host}:{port}:{}:{user}:{password}\n", pg.name),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    // No password, host or port in the URL: they come from PGHOST, PGPORT and the file.
    let url = format!("postgres://{user}@/{}?sslmode=disable", pg.name);
    let list = |file_mode: u32| {
        std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(file_mode)).unwrap();
        tacho()
            .args(["runs", "list", "--db", &url])
            .env("PGPASSFILE", &pgpass)
            .env("PGHOST", host)
            .env("PGPORT", port)
            .env_remove("PGPASSWORD")
            .output()
            .unwrap()
    };
    let o = list(0o600);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // A password file others can read is not used, and the note says why.
    let o = list(0o644);
    let err = stderr(&o);
    assert!(err.contains("chmod 0600"), "{err}");
    assert_eq!(o.status.code(), Some(2), "{err}");
}
