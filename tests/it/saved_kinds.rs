//! `tacho time`, `bench cpu` and `bench mem` save their runs in the store, and `compare`
//! tests a later run against them: a command made slower is a significant regression, each
//! repeat (each timed run) a sample; runs of different kinds are refused; the documents
//! round-trip through export and import.

use crate::common::*;
use serde_json::Value;
use std::path::Path;

fn with_db<'a>(db: &'a Path, args: &[&'a str]) -> Vec<&'a str> {
    let mut v = args.to_vec();
    v.extend(["--db", db.to_str().unwrap()]);
    v
}

/// `tacho time` of `sleep $D` with D set, saved in `db`.
fn time_sleep(db: &Path, seconds: &str) -> std::process::Output {
    let mut cmd = tacho();
    cmd.env("D", seconds)
        .args(with_db(db, &["time", "--runs", "6", "--label", seconds]))
        .arg("sleep $D");
    run_cmd(cmd)
}

fn kinds(db: &Path) -> Vec<String> {
    let list = json_ok(&run(&with_db(db, &["runs", "list", "--json"])));
    list["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_slower_command_is_a_regression_against_its_saved_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    for (seconds, id) in [("0.01", 1), ("0.05", 2)] {
        let o = time_sleep(&db, seconds);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("saved as run {id} in")),
            "{}",
            stderr(&o)
        );
    }
    assert_eq!(kinds(&db), ["time", "time"]);

    let o = run(&with_db(
        &db,
        &["compare", "1", "2", "--json", "--fail-on-regression", "10"],
    ));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("regression: sleep $D mean time +"),
        "{}",
        stderr(&o)
    );
    let c = parse_json(&o);
    let rows = c["rows"].as_array().unwrap();
    let mean = rows
        .iter()
        .find(|r| r["metric"] == "lat_mean_ns" && r["direction"] == "wall")
        .unwrap();
    assert_eq!(mean["test"], "sleep $D");
    assert_eq!(mean["headline"], true);
    let later = &mean["cells"][1];
    assert_eq!(later["significance"], "worse", "{mean}");
    // Every timed run is a sample; the figure is the mean of them, in nanoseconds.
    let samples: Vec<f64> = later["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(samples.len(), 6);
    let mean_of = samples.iter().sum::<f64>() / 6.0;
    assert!((later["value"].as_f64().unwrap() - mean_of).abs() < 1.0);
    // Nanoseconds: sleep 0.05 is tens of millions of them, whatever the machine.
    assert!(mean_of > 20e6, "sleep 0.05 took {mean_of} ns");

    // The machine's settings are recorded with each run, for compare to show what changed.
    let fingerprint = c["fingerprint"].as_array().unwrap();
    for key in ["host", "THP", "mitigations"] {
        let row = fingerprint.iter().find(|r| r["key"] == key);
        assert!(
            row.is_some_and(|r| r["values"].as_array().unwrap().iter().all(Value::is_string)),
            "{key} in {fingerprint:?}"
        );
    }

    let table = stdout(&run(&with_db(&db, &["compare", "1", "2"])));
    assert!(
        table.contains("mean time") && table.contains("worse"),
        "{table}"
    );
}

#[test]
fn cpu_and_mem_runs_are_saved_with_their_repeats() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let cpu = [
        "bench",
        "cpu",
        "--kernel",
        "primes",
        "--runtime",
        "50ms",
        "--repeat",
        "3",
    ];
    let mem = [
        "bench",
        "mem",
        "--level",
        "l1",
        "--runtime",
        "20ms",
        "--repeat",
        "3",
    ];
    for args in [&cpu[..], &mem[..], &mem[..]] {
        let o = run(&with_db(&db, args));
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let list = json_ok(&run(&with_db(&db, &["runs", "list", "--json"])));
    let runs = list["runs"].as_array().unwrap();
    assert_eq!(kinds(&db), ["cpu", "mem", "mem"]);
    assert_eq!(
        (runs[0]["suite"].as_str(), runs[0]["tests"].as_i64()),
        (Some("cpu"), Some(4))
    );
    assert_eq!(runs[1]["suite"], "mem");

    let err = assert_error(&run(&with_db(&db, &["compare", "1", "2"])));
    assert!(err.contains("compare runs of one kind"), "{err}");

    // Export and import keep the kind; a --json document imports directly.
    let export = dir.path().join("cpu.json");
    let o = run(&with_db(
        &db,
        &["runs", "export", "1", "-o", export.to_str().unwrap()],
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    // The export keeps the run's id: importing it here again finds run 1 and adds nothing.
    let o = run(&with_db(&db, &["runs", "import", export.to_str().unwrap()]));
    assert!(
        stdout(&o).contains("run 1 already holds the run"),
        "{}",
        stdout(&o)
    );
    assert_eq!(kinds(&db), ["cpu", "mem", "mem"]);
    // Without its run id the document imports as a copy.
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&export).unwrap()).unwrap();
    doc["run"].as_object_mut().unwrap().remove("uuid");
    std::fs::write(&export, doc.to_string()).unwrap();
    let direct = dir.path().join("direct.json");
    let mut args = cpu.to_vec();
    args.extend(["--json", "--no-save"]);
    let o = run(&args);
    std::fs::write(&direct, &o.stdout).unwrap();
    for file in [&export, &direct] {
        let o = run(&with_db(&db, &["runs", "import", file.to_str().unwrap()]));
        assert!(o.status.success(), "{}", stderr(&o));
    }
    assert_eq!(kinds(&db), ["cpu", "mem", "mem", "cpu", "cpu"]);

    let compare = |a: &str, b: &str| json_ok(&run(&with_db(&db, &["compare", a, b, "--json"])));
    let row = |doc: &Value, test: &str, metric: &str, direction: &str| -> Value {
        doc["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["test"] == test && r["metric"] == metric && r["direction"] == direction)
            .cloned()
            .unwrap_or_else(|| panic!("no {test} {metric} {direction} in {doc}"))
    };
    let c = compare("1", "5");
    let primes = row(&c, "primes 1 thread", "ops_per_s", "run");
    assert_eq!(primes["headline"], true);
    for cell in primes["cells"].as_array().unwrap() {
        assert_eq!(cell["samples"].as_array().unwrap().len(), 3, "{cell}");
        assert!(cell["value"].as_f64().unwrap() > 0.0);
    }
    // The exported copy (run 4) holds the same figures as run 1 (to the last digits JSON's
    // decimal text keeps).
    let copy = row(&compare("1", "4"), "score all threads", "ops_per_s", "run");
    let change = copy["cells"][1]["change_pct"].as_f64().unwrap();
    assert!(change.abs() < 1e-9, "{copy}");

    let m = compare("2", "3");
    for direction in ["read", "write", "copy"] {
        let bw = row(&m, "L1 1 thread", "bw_bytes_per_s", direction);
        assert_eq!(bw["cells"][1]["samples"].as_array().unwrap().len(), 3);
        assert_eq!(bw["headline"], true);
    }
    let latency = row(&m, "L1 1 thread", "lat_mean_ns", "read");
    assert!(latency["cells"][1]["value"].as_f64().unwrap() > 0.0);
    assert_eq!(
        latency["headline"], true,
        "the mean is memory's only latency"
    );

    // A reader that goes away early (`| head`) ends the JSON output quietly, exit 0.
    let mut child = tacho()
        .args(with_db(&db, &["runs", "show", "1", "--json"]))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let status = wait_limited(&mut child, std::time::Duration::from_secs(30));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!((status.code(), err.as_str()), (Some(0), ""));
}

#[test]
fn no_save_leaves_no_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let o = run(&with_db(
        &db,
        &["time", "-N", "--runs", "2", "--no-save", "true"],
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("saved as run"));
    assert_empty(dir.path());
}

#[test]
fn an_unusable_database_stops_the_run_before_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "not a database").unwrap();
    for args in [
        &["bench", "cpu", "--kernel", "primes", "--runtime", "50ms"][..],
        &["bench", "mem", "--level", "l1", "--runtime", "20ms"][..],
        &["time", "--runs", "1", "true"][..],
    ] {
        let line = assert_error(&run(&with_db(&notes, args)));
        assert!(
            line.contains("not a tacho results database"),
            "{args:?}: {line}"
        );
    }
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "not a database");
    assert_eq!(entries(dir.path()), ["notes.txt"]);
}
