//! `tacho drift` over a fleet's saved snapshots and checks: a THP setting planted on 3 of 40
//! hosts is found and named with its hosts, on a local file and on a real PostgreSQL store;
//! `snapshot --save` and `check --save` store this machine's.

#[cfg(feature = "pg")]
use crate::common::pg::TestDb;
use crate::common::*;
use serde_json::Value;
use std::path::Path;

/// This machine's snapshot as 40 hosts' (db-1 … db-40), THP `always` on db-2, db-7 and
/// db-31 where the rest have the machine's own setting; one file per host.
fn plant(dir: &Path) -> (Vec<String>, String) {
    let o = run(&["snapshot"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let snap: Value = serde_json::from_slice(&o.stdout).unwrap();
    let own = snap["thp"]["enabled"].as_str().unwrap().to_owned();
    assert_ne!(
        own, "always",
        "this test plants always; the machine must not have it"
    );
    let files = (1..=40)
        .map(|i| {
            let mut doc = snap.clone();
            doc["host"]["hostname"] = format!("db-{i}").into();
            if [2, 7, 31].contains(&i) {
                doc["thp"]["enabled"] = "always".into();
            }
            let path = dir.join(format!("db-{i}.json"));
            std::fs::write(&path, doc.to_string()).unwrap();
            path.to_str().unwrap().to_owned()
        })
        .collect();
    (files, own)
}

fn check_drift(db: &str, dir: &Path) {
    let (files, own) = plant(dir);
    let mut args = vec!["runs", "import", "--db", db];
    args.extend(files.iter().map(String::as_str));
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    let text = stdout(&run(&["drift", "--db", db]));
    let expected = format!("thp.enabled: always on 3 hosts (db-2, db-7, db-31), {own} on 37");
    assert!(
        text.lines().nth(1) == Some(expected.as_str()),
        "the planted setting is the first difference:\n{text}"
    );
    assert!(
        text.starts_with("1 setting differs across 40 hosts"),
        "{text}"
    );

    let doc = json_ok(&run(&["drift", "--db", db, "--json"]));
    assert_eq!(doc["schema"], "tacho.drift.v1");
    let settings = doc["settings"].as_array().unwrap();
    assert_eq!(settings.len(), 1, "{settings:?}");
    assert_eq!(settings[0]["key"], "thp.enabled");
    assert_eq!(settings[0]["relevant"], true);
    assert_eq!(settings[0]["values"][0]["count"], 3);
    assert_eq!(settings[0]["values"][1]["count"], 37);

    // --strict fails on it; hosts without the planted ones show no drift.
    assert_eq!(
        run(&["drift", "--db", db, "--strict"]).status.code(),
        Some(1)
    );
    let o = run(&["drift", "--db", db, "--strict", "--host", "db-1*"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("0 settings differ across 11 hosts"),
        "{}",
        stdout(&o)
    );

    let csv = stdout(&run(&["drift", "--db", db, "--csv"]));
    assert!(csv.contains("thp.enabled,yes,db-7,always"), "{csv}");
    let page = dir.join("drift.html");
    let o = run(&["drift", "--db", db, "--html", page.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("<div class=\"minority\">always on 3: db-2, db-7, db-31</div>"),
        "{html}"
    );
}

#[test]
fn drift_finds_thp_planted_on_3_of_40_hosts_in_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("fleet.db");
    check_drift(db.to_str().unwrap(), dir.path());
}

#[cfg(feature = "pg")]
#[test]
fn drift_finds_thp_planted_on_3_of_40_hosts_in_postgres() {
    let Some(pg) = TestDb::new("drift") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    check_drift(&pg.url, dir.path());
}

#[test]
fn snapshot_and_check_save_this_machine_and_drift_needs_two_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("own.db");
    let db = db.to_str().unwrap();
    let o = run(&["snapshot", "--save", "--db", db]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(o.stdout.is_empty(), "saved, not printed");
    assert!(stderr(&o).contains("saved as run 1"), "{}", stderr(&o));
    let o = run(&["check", "--save", "--db", db, "--json", "--label", "before"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let printed = json_ok(&o);
    assert!(printed["host"]["hostname"].is_string());
    let runs = json_ok(&run(&["runs", "list", "--db", db, "--json"]));
    let kinds: Vec<&str> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["snapshot", "check"]);
    assert_eq!(runs["runs"][1]["label"], "before");
    let line = assert_error(&run(&["drift", "--db", db]));
    assert!(line.contains("at least two hosts; found 1"), "{line}");
    let line = assert_error(&run(&["compare", "1", "2", "--db", db]));
    assert!(line.contains("tacho drift"), "{line}");
}

/// Item 11 of issue 28: `drift --csv` writes host names and setting values from the runs as
/// spreadsheet text: no cell a spreadsheet runs as a formula, no control byte (checked with
/// Python's csv module); the Markdown list escapes overrides as well.
#[test]
fn drift_csv_and_markdown_keep_hostile_hosts_and_values_inert() {
    let o = run(&["snapshot"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let snap: Value = serde_json::from_slice(&o.stdout).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("drift.db");
    let db = db.to_str().unwrap();
    let hosts = [
        "db-1",
        "=HYPERLINK(\"http://x\")",
        "+cmd|' /C calc'!A0\u{202e}\u{1b}]0;x\u{7}",
    ];
    let mut args = vec!["runs", "import", "--db", db];
    let mut files = Vec::new();
    for (i, host) in hosts.iter().enumerate() {
        let mut doc = snap.clone();
        doc["host"]["hostname"] = (*host).into();
        doc["thp"]["enabled"] = match i {
            0 => "never".into(),
            1 => "-2+3\r\n@SUM(A1)".into(),
            _ => "@x\u{202e}\u{1b}[2J".into(),
        };
        let path = dir.path().join(format!("h{i}.json"));
        std::fs::write(&path, doc.to_string()).unwrap();
        files.push(path.to_str().unwrap().to_owned());
    }
    args.extend(files.iter().map(String::as_str));
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&["drift", "--db", db, "--csv"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_spreadsheet_safe("drift --csv", &stdout(&o));
    // The hostile hosts and values are there, as text a spreadsheet shows and a terminal
    // prints inert.
    let cells = csv_cells(&stdout(&o));
    for inert in [
        r#"'=HYPERLINK("http://x")"#,
        r"'+cmd|' /C calc'!A0\u{202e}\e]0;x\a",
        r"'-2+3\r\n@SUM(A1)",
        r"'@x\u{202e}\e[2J",
    ] {
        assert!(
            cells.iter().any(|c| c == inert),
            "{inert:?} not among {cells:?}"
        );
    }
    let o = run(&["drift", "--db", db, "--markdown"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for raw in ["\u{202e}", "\u{1b}", "\u{7}", "\r"] {
        assert!(!stdout(&o).contains(raw), "Markdown holds {raw:?}");
    }
}
