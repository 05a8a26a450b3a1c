//! The fleet's history (issue 33): real `tacho record --db` processes of three "machines"
//! (different machine ids and labels) send their intervals to the shared store; `tacho top
//! --db --label` answers which host had which findings and whom they named. A recorder whose
//! server stops and comes back loses no interval and stores none twice; an uninitialised store
//! stops the recorder at once.

use crate::common::pg::{OwnCluster, TestDb};
use crate::common::*;
use postgres::{Client, NoTls};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn rfc3339(unix_s: f64) -> String {
    chrono::DateTime::from_timestamp(unix_s.floor() as i64, 0)
        .unwrap()
        .to_rfc3339()
}

/// The SQL of the shipped dashboard's history panels (PostgreSQL data source) by title, with
/// Grafana's `$__timeFilter(at)` expanded as Grafana does for `from..to`.
fn history_panels(from: &str, to: &str) -> Vec<(String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/contrib/grafana/tacho.json");
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let panels: Vec<(String, String)> = dash["panels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["datasource"]["type"] == "grafana-postgresql-datasource")
        .map(|p| {
            let sql = p["targets"][0]["rawSql"].as_str().unwrap();
            assert!(!sql.contains("::"), "a cast in {sql}");
            let sql = sql.replace(
                "$__timeFilter(at)",
                &format!("at BETWEEN '{from}' AND '{to}'"),
            );
            (p["title"].as_str().unwrap().to_owned(), sql)
        })
        .collect();
    assert_eq!(panels.len(), 2, "the dashboard's history panels");
    panels
}

/// The rows of the history panel whose title starts with `title`.
fn panel_rows(c: &mut Client, from: f64, to: f64, title: &str) -> Vec<postgres::Row> {
    let (_, sql) = history_panels(&rfc3339(from), &rfc3339(to))
        .into_iter()
        .find(|(t, _)| t.starts_with(title))
        .unwrap_or_else(|| panic!("no panel {title}"));
    c.query(&sql, &[]).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// A machine id of 32 hex digits made from `n`.
fn machine_id(n: u32) -> String {
    format!(
        "{:08x}{:024x}",
        0x1357_9bdf_u32.wrapping_mul(n),
        0x7ac0_0000_u64 + u64::from(n)
    )
}

/// A recorder for machine `id` with `labels`, sending to `url`; stopped (SIGTERM, so it
/// flushes) by [`stop`].
fn recorder(dir: &std::path::Path, url: &str, id: &str, labels: &[&str], extra: &[&str]) -> Child {
    let mut cmd = tacho();
    cmd.args(["record", "--interval", "1s", "--db", url, "--history"])
        .arg(dir.join("history.db"))
        .env("TACHO_TEST_MACHINE_ID", id);
    for l in labels {
        cmd.args(["--label", l]);
    }
    cmd.args(extra).spawn_piped()
}

/// Stops a recorder as its service manager would and returns what it said.
fn stop(child: Child) -> std::process::Output {
    // SAFETY: signals the child this test started.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    wait_output(child, LIMIT)
}

fn rows_of(c: &mut Client, id: &str) -> i64 {
    c.query_one(
        "SELECT count(*) FROM tacho_history WHERE machine_id = $1",
        &[&id],
    )
    .unwrap()
    .get(0)
}

/// Waits until `id` has at least `n` intervals on the server.
fn wait_rows(c: &mut Client, id: &str, n: i64) {
    let start = Instant::now();
    while rows_of(c, id) < n {
        assert!(
            start.elapsed() < LIMIT,
            "{id}: fewer than {n} intervals arrived"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn top_over_the_fleet_names_the_host_and_the_writer_by_label() {
    if !is_root() {
        skip("fleet history: the planted writer writes to a loop device: needs root");
        return;
    }
    let Some(pg) = TestDb::new("fleet_hist") else {
        return;
    };
    let Some(dev) = LoopDev::direct_on_disk("fleet history") else {
        return;
    };
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let ids: Vec<String> = (1..=3).map(machine_id).collect();
    let labels: [&[&str]; 3] = [
        &["role=db", "dc=fra1"],
        &["role=web", "dc=fra1"],
        &["role=web", "dc=ams1"],
    ];
    let t0 = now_unix();
    let recorders: Vec<Child> = (0..3)
        .map(|i| recorder(dirs[i].path(), &pg.url, &ids[i], labels[i], &[]))
        .collect();
    let mut c = pg.client();
    for id in &ids {
        wait_rows(&mut c, id, 1);
    }
    // The writer: dd under a name no other process has.
    let name = format!("fleetw{}", std::process::id() % 100_000);
    let tools = tempfile::tempdir().unwrap();
    let writer = tools.path().join(&name);
    std::fs::copy("/bin/dd", &writer).unwrap();
    let writing = now_unix();
    let end = Instant::now() + Duration::from_secs(4);
    while Instant::now() < end {
        let s = Command::new(&writer)
            .args([
                "if=/dev/zero",
                "bs=4k",
                "count=200",
                "oflag=direct,dsync",
                "status=none",
            ])
            .arg(format!("of={}", dev.path()))
            .status()
            .unwrap();
        assert!(s.success());
    }
    let after = rows_of(&mut c, &ids[0]);
    wait_rows(&mut c, &ids[0], after + 2);
    for r in recorders {
        let o = stop(r);
        assert!(
            stderr(&o).contains("sending each interval to"),
            "{}",
            stderr(&o)
        );
    }
    let window = |label: &str| {
        json_ok(&run(&[
            "top",
            "--from",
            &rfc3339(t0 - 1.0),
            "--to",
            &rfc3339(now_unix() + 1.0),
            "--db",
            &pg.url,
            "--label",
            label,
            "--json",
        ]))
    };
    let db = window("role=db");
    assert_eq!(db["schema"], "tacho.fleet.v1");
    assert_eq!(db["hosts_recorded"], 1, "{db}");
    let hosts = db["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 1, "{db}");
    assert_eq!(hosts[0]["machine_id"], ids[0].as_str());
    assert_eq!(hosts[0]["labels"]["role"], "db");
    let named: Vec<&str> = hosts[0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["subject"] == dev.name().as_str())
        .flat_map(|f| f["culprits"].as_array().unwrap())
        .filter_map(|c| c["comm"].as_str())
        .collect();
    assert!(
        named.contains(&name.as_str()),
        "{name} not named on {}: {db}",
        dev.name()
    );
    assert!(
        hosts[0]["findings"][0]["duration_s"].as_f64().unwrap() > 0.0,
        "{db}"
    );
    // The others are web hosts: not in the db window, and the db host not in theirs.
    let web = window("role=web");
    assert_eq!(web["hosts_recorded"], 2, "{web}");
    assert!(!web.to_string().contains(&ids[0]), "{web}");
    // The text form names the host and the writer too.
    let o = run(&[
        "top",
        "--from",
        &rfc3339(t0 - 1.0),
        "--db",
        &pg.url,
        "--label",
        "role=db",
        "--label",
        "dc=fra1",
    ]);
    let text = stdout(&o);
    assert!(text.contains(&ids[0]) && text.contains(&name), "{text}");
    assert!(!text.contains(&ids[1]) && !text.contains(&ids[2]), "{text}");
    // --host naming one machine: its replay summary, as the host's own history gives it.
    let o = run(&[
        "top",
        "--from",
        &rfc3339(t0 - 1.0),
        "--db",
        &pg.url,
        "--host",
        &ids[0],
        "--json",
    ]);
    let central = json_ok(&o);
    assert_eq!(central["schema"], "tacho.history.v1");
    let local = json_ok(&run(&[
        "top",
        "--from",
        &rfc3339(t0 - 1.0),
        "--history",
        dirs[0].path().join("history.db").to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(
        central["intervals"], local["intervals"],
        "{central}\n{local}"
    );
    // Its incident report from the store: the writer's finding in the verdicts, naming it,
    // and marked on the device's charts from when it wrote.
    let page = dirs[0].path().join("incident.html");
    let o = run(&[
        "top",
        "--from",
        &rfc3339(t0 - 1.0),
        "--db",
        &pg.url,
        "--host",
        &ids[0],
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    let verdict = html
        .split(&format!("data-subject=\"{}\"", dev.name()))
        .nth(1)
        .and_then(|s| s.split("</li>").next())
        .unwrap_or_else(|| panic!("no verdict on {}: {html}", dev.name()));
    assert!(verdict.contains(&name), "{verdict}");
    let data = html
        .split("<script type=\"application/json\" id=\"tacho-data\">")
        .nth(1)
        .and_then(|s| s.split("</script>").next())
        .unwrap();
    let doc: serde_json::Value = serde_json::from_str(data).unwrap();
    let charts = doc["charts"].as_array().unwrap();
    assert!(
        charts.iter().any(|c| c["subject"] == dev.name().as_str()
            && c["id"].as_str().unwrap().starts_with("disk-util-")),
        "no utilisation chart of {}: {data}",
        dev.name()
    );
    assert!(
        doc["marks"].as_array().unwrap().iter().any(|m| {
            let from = m["from"].as_f64().unwrap();
            m["subject"] == dev.name().as_str() && from >= writing - 2.0 && from <= writing + 4.0
        }),
        "no mark on {} from {writing}: {data}",
        dev.name()
    );
    assert!(
        html.contains("the shared store keeps each interval compact"),
        "{html}"
    );
    // All the hosts of the window: a row of small charts each, worst first as the fleet's
    // summary ranks them (all three watched the same writer here), its findings marked.
    let o = run(&[
        "top",
        "--from",
        &rfc3339(t0 - 1.0),
        "--db",
        &pg.url,
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    let order: Vec<&str> = html
        .split("<section class=\"host\" data-machine-id=\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap())
        .collect();
    let all = json_ok(&run(&[
        "top",
        "--from",
        &rfc3339(t0 - 1.0),
        "--db",
        &pg.url,
        "--json",
    ]));
    let ranked: Vec<&str> = all["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["machine_id"].as_str().unwrap())
        .collect();
    assert_eq!(order.len(), 3, "{order:?}");
    assert_eq!(order[..ranked.len()], ranked[..], "{all}");
    let data = html
        .split("<script type=\"application/json\" id=\"tacho-data\">")
        .nth(1)
        .and_then(|s| s.split("</script>").next())
        .unwrap();
    let docs: serde_json::Value = serde_json::from_str(data).unwrap();
    let first = &docs[0];
    assert!(first["charts"].as_array().unwrap().len() >= 3, "{data}");
    assert!(
        first["marks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["subject"] == dev.name().as_str()),
        "{data}"
    );
    let codes = |s: &serde_json::Value| {
        let mut v: Vec<String> = s["findings"]
            .as_array()
            .unwrap()
            .iter()
            // To the millisecond: the server keeps times to the microsecond.
            .map(|f| {
                let from = f["from_unix_s"].as_f64().unwrap();
                format!("{} {} {:.3}", f["code"], f["subject"], from)
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(codes(&central), codes(&local));
    // The dashboard's history panels, as Grafana runs them: the writer's host and finding
    // with the writer named, and each recorder's CPU series.
    let found = panel_rows(&mut c, t0 - 1.0, now_unix() + 1.0, "Findings");
    assert!(
        found.iter().any(|r| {
            r.get::<_, String>("machine id") == ids[0]
                && r.get::<_, String>("subject") == dev.name()
                && r.get::<_, Option<String>>("named").as_deref() == Some(name.as_str())
        }),
        "{found:?}"
    );
    let cpu = panel_rows(&mut c, t0 - 1.0, now_unix() + 1.0, "CPU busy");
    for id in &ids {
        let series = format!(" {}", &id[..8]);
        assert!(
            cpu.iter()
                .any(|r| r.get::<_, String>("metric").ends_with(&series)
                    && r.get::<_, Option<f32>>("cpu_busy_pct").is_some()),
            "{id}: {cpu:?}"
        );
    }
    // The figures summed from the compact rows are the local replay's: bytes exact, the
    // busiest process by I/O the same with the same bytes, peaks to the tenth kept.
    for key in [
        "gaps",
        "device_write_bytes",
        "process_write_bytes",
        "networks",
    ] {
        assert_eq!(central[key], local[key], "{key}:\n{central}\n{local}");
    }
    let disks = |s: &serde_json::Value| {
        let mut v: Vec<String> = s["disks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| format!("{} {} {}", d["name"], d["read_bytes"], d["write_bytes"]))
            .collect();
        v.sort();
        v
    };
    assert_eq!(disks(&central), disks(&local));
    // The busiest process by I/O is the same. Its bytes are the local replay's but for the
    // intervals where it was not among the compact row's top processes (its first and last
    // moments, when other tests' processes on this machine wrote more): at most those, a
    // sliver of what it wrote (seen in CI: 90,112 of 265,682,944 bytes).
    let first = |s: &serde_json::Value| {
        let p = &s["top_io"][0];
        (p["pid"].clone(), p["comm"].clone())
    };
    assert_eq!(first(&central), first(&local));
    let bytes = |s: &serde_json::Value| s["top_io"][0]["write_bytes"].as_f64().unwrap();
    assert!(
        bytes(&central) <= bytes(&local) && bytes(&central) >= 0.99 * bytes(&local),
        "{} against {}",
        bytes(&central),
        bytes(&local)
    );
    let peak = |s: &serde_json::Value| s["peaks"]["cpu_busy_pct"]["value"].as_f64().unwrap();
    assert!((peak(&central) - peak(&local)).abs() <= 0.05 + 1e-9);
}

#[test]
fn a_server_stopped_and_started_loses_no_interval_and_stores_none_twice() {
    let Some(cluster) = OwnCluster::start("fleet restart") else {
        return;
    };
    let o = run(&["store", "init", "--db", &cluster.url]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let dir = tempfile::tempdir().unwrap();
    let id = machine_id(9);
    let samples = 10;
    let child = recorder(
        dir.path(),
        &cluster.url,
        &id,
        &["role=db"],
        &["--count", &samples.to_string()],
    );
    let mut c = Client::connect(&cluster.url, NoTls).unwrap();
    wait_rows(&mut c, &id, 2);
    drop(c);
    cluster.down();
    std::thread::sleep(Duration::from_secs(3));
    cluster.up();
    let o = wait_output(child, LIMIT);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("cannot send to the shared store"), "{err}");
    assert!(
        err.contains("answers again") && err.contains("none lost"),
        "{err}"
    );
    let mut c = Client::connect(&cluster.url, NoTls).unwrap();
    let (n, distinct): (i64, i64) = {
        let r = c
            .query_one(
                "SELECT count(*), count(DISTINCT at) FROM tacho_history WHERE machine_id = $1",
                &[&id],
            )
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!(n, distinct, "an interval stored twice");
    // Every interval the local history has (one fewer than its samples) is on the server.
    let local = json_ok(&run(&[
        "top",
        "--from",
        "1h ago",
        "--history",
        dir.path().join("history.db").to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(local["intervals"].as_i64(), Some(n), "{local}");
    assert_eq!(n, samples - 1 - local["gaps"].as_i64().unwrap(), "{err}");
    // Each interval starts where the one before it ended: no hole where the server was down.
    let spans: Vec<(f64, f64)> = c
        .query(
            "SELECT extract(epoch FROM at)::FLOAT8 - seconds, extract(epoch FROM at)::FLOAT8
             FROM tacho_history ORDER BY at",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(spans.len() as i64, n);
    if local["gaps"] == 0 {
        for w in spans.windows(2) {
            assert!((w[1].0 - w[0].1).abs() < 0.01, "a hole: {spans:?}");
        }
    }
}

#[test]
fn a_recorder_against_an_uninitialised_store_stops_at_once() {
    let Some(pg) = TestDb::empty("fleet_uninit") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let o = tacho()
        .args(["record", "--count", "1", "--db", &pg.url, "--history"])
        .arg(dir.path().join("history.db"))
        .env("TACHO_TEST_MACHINE_ID", machine_id(1))
        .output()
        .unwrap();
    let line = assert_error(&o);
    assert!(line.contains("tacho store init"), "{line}");
    // A bad label is refused before anything starts.
    let line = assert_error(&run(&["record", "--label", "no equals", "--count", "1"]));
    assert!(line.contains("KEY=VALUE"), "{line}");
}

/// Runs carry their machine's id and labels: two machines with one host name stay two in
/// `compare --by host`, and `runs list`, `compare --by host` and `drift` select by label and
/// host, on a file and on the shared store alike.
#[test]
fn runs_carry_machine_ids_and_labels_and_are_selected_by_them() {
    let Some(pg) = TestDb::new("fleet_labels") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("runs.db");
    for db in [pg.url.as_str(), file.to_str().unwrap()] {
        for (n, labels) in [(1, "role=db,dc=fra1"), (2, "role=web"), (3, "role=db")] {
            for _ in 0..2 {
                let o = tacho()
                    .args(["time", "--runs", "2", "true", "--db", db])
                    .env("TACHO_TEST_MACHINE_ID", machine_id(n))
                    .env("TACHO_LABELS", labels)
                    .output()
                    .unwrap();
                assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
            }
            let o = tacho()
                .args(["snapshot", "--save", "--db", db])
                .env("TACHO_TEST_MACHINE_ID", machine_id(n))
                .env("TACHO_LABELS", labels)
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        }
        let listed = |args: &[&str]| {
            let mut all = vec!["runs", "list", "--json", "--db", db];
            all.extend(args);
            json_ok(&run(&all))["runs"].as_array().unwrap().clone()
        };
        let db_runs = listed(&["--label", "role=db"]);
        assert_eq!(db_runs.len(), 6, "{db_runs:?}");
        assert!(db_runs.iter().all(|r| r["labels"]["role"] == "db"));
        assert_eq!(
            listed(&["--label", "role=db", "--label", "dc=fra1"]).len(),
            3
        );
        assert_eq!(listed(&["--host", &machine_id(2)]).len(), 3);
        // One host name, three machines: three hosts, told apart by their machine ids.
        let compare = |args: &[&str]| {
            let mut all = vec![
                "compare", "--by", "host", "--kind", "time", "--json", "--db", db,
            ];
            all.extend(args);
            let o = run(&all);
            assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
            serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
        };
        let all = compare(&[]).to_string();
        for n in 1..=3 {
            assert!(all.contains(&machine_id(n)), "{all}");
        }
        let dbs = compare(&["--label", "role=db"]).to_string();
        assert!(!dbs.contains(&machine_id(2)), "{dbs}");
        // drift: one snapshot per machine, of those with the label.
        let drift = |args: &[&str]| {
            let mut all = vec!["drift", "--json", "--db", db];
            all.extend(args);
            let o = run(&all);
            assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
            serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["hosts"].clone()
        };
        assert_eq!(drift(&[]), 3);
        assert_eq!(drift(&["--label", "role=db"]), 2);
    }
}

/// The config file's `db_url` and `[labels]` feed `record` as `--db` and `--label` do (flags
/// win over them).
#[test]
fn record_takes_the_store_and_labels_from_the_config_file() {
    let Some(pg) = TestDb::new("fleet_config") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tacho.toml");
    std::fs::write(
        &file,
        format!("db_url = \"{}\"\n[labels]\nrole = \"cfg\"\n", pg.url),
    )
    .unwrap();
    let record = |extra: &[&str], id: u32| {
        let mut cmd = tacho();
        cmd.env_remove("TACHO_DB")
            .env_remove("TACHO_LABELS")
            .env("TACHO_TEST_MACHINE_ID", machine_id(id))
            .arg("--config")
            .arg(&file)
            .args(["record", "--interval", "1s", "--count", "2", "--history"])
            .arg(dir.path().join(format!("h{id}.db")))
            .args(extra);
        let o = cmd.output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    };
    record(&[], 1);
    record(&["--label", "role=flag"], 2);
    let mut c = pg.client();
    for (id, role) in [(1, "cfg"), (2, "flag")] {
        let got: String = c
            .query_one(
                "SELECT labels->>'role' FROM tacho_history WHERE machine_id = $1 LIMIT 1",
                &[&machine_id(id)],
            )
            .unwrap()
            .get(0);
        assert_eq!(got, role);
    }
}

/// A store of schema 3 (`tests/fixtures/pg/schema3.sql`: what `store init` and two hosts'
/// recorders of that version left, ten intervals whose figures are one recorded on a test
/// machine, two of them with a finding) is refused until `store init` migrates it; then its
/// intervals read back whole into the compact rows, and a host role granted what schema 3
/// asked for records as before.
#[test]
fn store_init_moves_a_schema_3_history_into_the_compact_rows() {
    let Some(pg) = TestDb::empty("fleet_v3") else {
        return;
    };
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/pg/schema3.sql");
    pg.client()
        .batch_execute(&std::fs::read_to_string(fixture).unwrap())
        .unwrap();
    let host = pg.role_with("v3host", |role| {
        format!(
            "GRANT USAGE ON SCHEMA public TO {role};
             GRANT SELECT ON runs, tests, tacho_schema, tacho_hosts, tacho_history TO {role};
             GRANT INSERT ON runs, tests, tacho_hosts, tacho_history TO {role};
             GRANT EXECUTE ON FUNCTION tacho_history_partition(DATE) TO {role};"
        )
    });
    let mut c = pg.client();
    // The figures of the recorded interval every fixture row holds.
    let doc: String = c
        .query_one(
            "SELECT summary::TEXT FROM tacho_history ORDER BY at LIMIT 1",
            &[],
        )
        .unwrap()
        .get(0);
    let doc: serde_json::Value = serde_json::from_str(&doc).unwrap();
    let (from, to) = ("2026-11-20T03:00:00Z", "2026-11-20T03:01:00Z");
    let top_host = |url: &str| {
        run(&[
            "top",
            "--from",
            from,
            "--to",
            to,
            "--db",
            url,
            "--host",
            "v3-host-1",
            "--json",
        ])
    };
    let line = assert_error(&top_host(&pg.url));
    assert!(
        line.contains("schema version 3") && line.contains("store init"),
        "{line}"
    );
    let o = run(&["store", "init", "--db", &pg.url]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("from version 3"), "{}", stderr(&o));
    let s = json_ok(&top_host(&pg.url));
    assert_eq!(s["intervals"], 5, "{s}");
    assert_eq!(s["gaps"], 0, "{s}");
    let n = |v: &serde_json::Value| v.as_u64().unwrap();
    assert_eq!(
        n(&s["device_write_bytes"]),
        5 * n(&doc["device_write_bytes"])
    );
    assert_eq!(s["peaks"]["cpu_busy_pct"]["value"], doc["cpu_busy_pct"]);
    let pids = |list: &serde_json::Value| {
        let mut v: Vec<u64> = list
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| n(&p["read_bytes"]) + n(&p["write_bytes"]) > 0)
            .map(|p| n(&p["pid"]))
            .collect();
        v.sort();
        v
    };
    assert_eq!(pids(&s["top_io"]), pids(&doc["processes"]), "{s}");
    let finding = &s["findings"][0];
    assert_eq!(finding["code"], "disk_busy", "{s}");
    assert_eq!(finding["culprits"][0]["comm"], "backup", "{s}");
    assert_eq!(finding["culprits"][0]["intervals"], 2, "{s}");
    assert_eq!(
        finding["to_unix_s"].as_f64().unwrap() - finding["from_unix_s"].as_f64().unwrap(),
        20.0
    );
    let fleet = json_ok(&run(&[
        "top", "--from", from, "--to", to, "--db", &pg.url, "--label", "role=db", "--json",
    ]));
    assert_eq!(fleet["hosts_recorded"], 1, "{fleet}");
    assert_eq!(fleet["hosts"][0]["hostname"], "v3-host-1", "{fleet}");
    // The dashboard's findings panel shows the migrated finding, by the role a host has.
    let mut as_host = Client::connect(&host, NoTls).unwrap();
    let found = panel_rows(&mut as_host, 1_795_143_500.0, 1_795_143_700.0, "Findings");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].get::<_, String>("host"), "v3-host-1");
    assert_eq!(found[0].get::<_, i64>("intervals"), 2);
    assert_eq!(
        found[0].get::<_, Option<String>>("named").as_deref(),
        Some("backup")
    );
    // The view keeps schema 3's columns for those who queried them.
    let rows: i64 = c
        .query_one(
            "SELECT count(*) FROM tacho_history WHERE labels->>'role' = 'web'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(rows, 5);
    // The role made for schema 3 records into the new tables without new grants.
    let dir = tempfile::tempdir().unwrap();
    let o = tacho()
        .args(["record", "--interval", "1s", "--count", "2", "--db", &host])
        .arg("--history")
        .arg(dir.path().join("history.db"))
        .env("TACHO_TEST_MACHINE_ID", machine_id(33))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(rows_of(&mut c, &machine_id(33)), 1);
}
