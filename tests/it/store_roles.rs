//! Least privilege on the shared store (issue 33): a host role made from `store init`'s grants
//! saves and pushes its own runs, and PostgreSQL itself refuses it DDL, deleting, and
//! changing or adding rows in another role's name.

use crate::common::pg::TestDb;
use crate::common::*;
use postgres::{Client, NoTls};

const FIO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/fio/three-jobs.json"
);

/// What PostgreSQL said when it refused `sql`, failing the test when it did not.
fn refused(c: &mut Client, sql: &str) -> String {
    match c.batch_execute(sql) {
        Ok(()) => panic!("PostgreSQL let a host role run: {sql}"),
        Err(e) => e
            .as_db_error()
            .map_or(e.to_string(), |d| d.message().to_owned()),
    }
}

fn count(c: &mut Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).unwrap().get(0)
}

#[test]
fn a_host_role_adds_its_own_rows_and_nothing_else() {
    let Some(pg) = TestDb::new("roles") else {
        return;
    };
    let (one, two) = (pg.host_role("one"), pg.host_role("two"));
    // Each host saves runs whole (import), test by test (bench disk) and by push.
    let o = run(&["runs", "import", "--db", &one, FIO]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().to_str().unwrap();
    let mut args = tiny_disk(target, &["--rw", "randread"]);
    args.extend(["--db", &two]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let local = dir.path().join("local.db");
    let local = local.to_str().unwrap();
    let o = run(&["runs", "import", "--db", local, FIO]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&["runs", "push", "--db", &two, "--from", local]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("pushed 1 new run(s)"), "{}", stdout(&o));

    let mut admin = pg.client();
    let role_of = |c: &mut Client, id: i64| -> String {
        c.query_one("SELECT db_role FROM runs WHERE id = $1", &[&id])
            .unwrap()
            .get(0)
    };
    let one_role = role_of(&mut admin, 1);
    let two_role = role_of(&mut admin, 2);
    assert_ne!(one_role, two_role);
    assert_eq!(role_of(&mut admin, 3), two_role);
    let status = |c: &mut Client| -> String {
        c.query_one("SELECT status FROM runs WHERE id = 1", &[])
            .unwrap()
            .get(0)
    };
    let before = status(&mut admin);

    // Host two against host one's rows: every attempt refused or matching nothing.
    let mut c = Client::connect(&two, NoTls).unwrap();
    assert_eq!(count(&mut c, "SELECT count(*) FROM runs"), 3, "reads all");
    for sql in [
        "DELETE FROM runs WHERE id = 1",
        "DELETE FROM tests WHERE run_id = 1",
        "TRUNCATE runs CASCADE",
        "UPDATE runs SET label = 'mine' WHERE id = 1",
        "UPDATE tests SET json = '{}' WHERE run_id = 1",
    ] {
        let why = refused(&mut c, sql);
        assert!(why.contains("permission denied"), "{sql}: {why}");
    }
    // Updating its own runs' status is granted; another's rows are not seen by UPDATE.
    let n = c
        .execute("UPDATE runs SET status = 'failed' WHERE id = 1", &[])
        .unwrap();
    assert_eq!(n, 0, "updated host one's run");
    assert_eq!(status(&mut admin), before);
    let n = c
        .execute(
            &format!("UPDATE runs SET db_role = '{one_role}' WHERE id = 2"),
            &[],
        )
        .map_or(0, |n| n);
    assert_eq!(n, 0, "gave its run to host one");
    for sql in [
        format!(
            "INSERT INTO runs (uuid, created_at, kind, status, source, host_json, target_json, \
             extra_json, db_role) VALUES (gen_random_uuid(), 'x', 'disk', 'finished', 'fio', \
             '{{}}', '{{}}', '{{}}', '{one_role}')"
        ),
        "INSERT INTO tests (run_id, seq, name, json) VALUES (1, 99, 'x', '{}')".to_owned(),
    ] {
        let why = refused(&mut c, &sql);
        assert!(why.contains("row-level security"), "{sql}: {why}");
    }
    for sql in [
        "CREATE TABLE evil (x int)",
        "ALTER TABLE runs DISABLE ROW LEVEL SECURITY",
        "DROP POLICY read_all ON runs",
        "ALTER TABLE runs ADD COLUMN evil int",
    ] {
        let why = refused(&mut c, sql);
        assert!(
            why.contains("permission denied") || why.contains("must be owner"),
            "{sql}: {why}"
        );
    }
    assert_eq!(
        count(&mut admin, "SELECT count(*) FROM tests WHERE run_id = 1"),
        3
    );
    // runs rm needs the administrator: refused for a host, even for its own run.
    let line = assert_error(&run(&["runs", "rm", "2", "--db", &two]));
    assert!(line.contains("administrator"), "{line}");
    assert!(!line.contains("host-pw"), "{line}");
    let o = run(&["runs", "rm", "1", "--db", &pg.url]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(count(&mut admin, "SELECT count(*) FROM runs"), 2);
    // History: host one records for its machine; host two can neither write rows for that
    // machine nor record as it, nor delete, change or drop history.
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.db");
    let record = |url: &str, id: &str| {
        tacho()
            .args([
                "record",
                "--interval",
                "1s",
                "--count",
                "2",
                "--db",
                url,
                "--history",
            ])
            .arg(&history)
            .env("TACHO_TEST_MACHINE_ID", id)
            .output()
            .unwrap()
    };
    let one_id = "0123456789abcdef0123456789abcdef";
    let o = record(&one, one_id);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(count(&mut admin, "SELECT count(*) FROM tacho_history"), 1);
    let line = assert_error(&record(&two, one_id));
    assert!(line.contains("recorded by the role"), "{line}");
    // Rows (intervals, or names) for host one's machine, in host one's numbers.
    for sql in [
        format!(
            "INSERT INTO tacho_intervals (host, names, at, seconds, figures) \
             SELECT n.host, n.id, now(), 1, '{{}}' FROM tacho_host_names n \
             JOIN tacho_hosts h ON h.id = n.host WHERE h.machine_id = '{one_id}'"
        ),
        format!(
            "INSERT INTO tacho_host_names (host, hostname, labels) \
             SELECT id, 'evil', '{{}}' FROM tacho_hosts WHERE machine_id = '{one_id}'"
        ),
    ] {
        let why = refused(&mut c, &sql);
        assert!(why.contains("row-level security"), "{sql}: {why}");
    }
    // tacho_history is a view of them: nobody writes through it.
    for sql in [
        "DELETE FROM tacho_history",
        "UPDATE tacho_history SET findings = '[]'",
        "INSERT INTO tacho_history (machine_id, hostname, labels, at, seconds, findings, \
         figures) VALUES ('x', 'x', '{}', now(), 1, '[]', '{}')",
    ] {
        let why = refused(&mut c, sql);
        assert!(
            why.contains("permission denied") || why.contains("view"),
            "{sql}: {why}"
        );
    }
    for sql in [
        "DELETE FROM tacho_intervals",
        "UPDATE tacho_intervals SET findings = '[]'",
        "DELETE FROM tacho_host_names",
        "UPDATE tacho_host_names SET hostname = 'evil'",
        "DELETE FROM tacho_hosts",
        "UPDATE tacho_hosts SET db_role = current_user",
        "CREATE TABLE tacho_intervals_20000101 PARTITION OF tacho_intervals \
         FOR VALUES FROM ('2000-01-01') TO ('2000-01-02')",
    ] {
        let why = refused(&mut c, sql);
        assert!(why.contains("permission denied"), "{sql}: {why}");
    }
    let line = assert_error(&run(&[
        "store",
        "prune",
        "--older-than",
        "1d",
        "--db",
        &two,
    ]));
    assert!(line.contains("administrator"), "{line}");
    // The administrator drops whole days: a day long past goes, today stays.
    admin
        .batch_execute("SELECT tacho_history_partition('2000-01-01')")
        .unwrap();
    let o = run(&["store", "prune", "--older-than", "90d", "--db", &pg.url]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("dropped 1 day(s)") && stdout(&o).contains("2000-01-01"),
        "{}",
        stdout(&o)
    );
    assert_eq!(count(&mut admin, "SELECT count(*) FROM tacho_history"), 1);
    // A host role cannot run store init.
    let line = assert_error(&run(&["store", "init", "--db", &two]));
    assert!(line.contains("owner or a superuser"), "{line}");
}
