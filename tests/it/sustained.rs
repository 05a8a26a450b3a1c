//! `bench disk --suite sustained`: a device that writes fast until its cache is full and slowly
//! after has its cliff found where it is. The device is a loop device over an image on a FUSE
//! filesystem (tests/helpers/passfs.py) that writes at 16 MiB/s for the first 40 MiB it is given
//! and at 4 MiB/s after. The run's HTML page draws its bandwidth per second, the cliff marked.

use crate::common::*;

const MIB: u64 = 1 << 20;
const CACHE: u64 = 40 * MIB;

#[test]
fn the_cliff_of_a_device_whose_cache_fills_is_found_where_it_is() {
    if let Some(why) = fuse_missing() {
        skip(&format!("sustained cliff test: {why}"));
        return;
    }
    let backing = tempfile::tempdir_in("/dev/shm").unwrap();
    let fs = FuseMount::start(
        backing.path(),
        &[
            "--write-rate",
            &(16 * MIB).to_string(),
            "--slow-after",
            &CACHE.to_string(),
            "--slow-rate",
            &(4 * MIB).to_string(),
        ],
    );
    let Some(dev) = LoopDev::new_in("sustained cliff test", 64 * MIB, fs.path()) else {
        return;
    };
    let db = tempfile::tempdir().unwrap();
    let db_file = db.path().join("runs.db");
    let db_file = db_file.to_str().unwrap();
    let o = run(&[
        "bench",
        "disk",
        dev.path(),
        "--suite",
        "sustained",
        "--size",
        "64M",
        "--flat-for",
        "2s",
        "--destroy-data",
        "--json",
        "--db",
        db_file,
    ]);
    let v = json_ok(&o);
    assert_eq!(v["suite"]["name"], "sustained", "{v}");
    assert_eq!(v["suite"]["standard"], false);
    let seq = &v["tests"][0];
    let cliff = &seq["cliff"];
    let before = cliff["bytes_before"].as_f64().expect("a cliff") as u64;
    assert!(
        before.abs_diff(CACHE) <= CACHE / 10,
        "cliff after {before} bytes, the cache holds {CACHE}: {seq}"
    );
    let pct = cliff["after_pct"].as_f64().unwrap();
    assert!((10.0..=40.0).contains(&pct), "{cliff}");
    assert!(seq["timeline"].as_array().unwrap().len() >= 3, "{seq}");
    // The cliff is the finding: no "run longer" warning beside it.
    let codes: Vec<&str> = seq["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["code"].as_str().unwrap())
        .collect();
    assert!(!codes.contains(&"not-steady-state"), "{codes:?}");
    // The random test runs after it, on the spent cache, until its rate is flat.
    let rand = &v["tests"][1];
    assert_eq!(rand["rw"], "randwrite", "{rand}");
    assert!(rand["write"]["bytes"].as_u64().unwrap() > 0);
    assert!(!v["interrupted"].as_bool().unwrap());

    // The run's page draws each test's bandwidth second by second, the cliff marked where it
    // was found, and says it in words.
    let page = db.path().join("run.html");
    let o = run(&[
        "runs",
        "show",
        "1",
        "--db",
        db_file,
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(
        html.matches("<polyline class=\"rate\"").count(),
        2,
        "{html}"
    );
    let at = cliff["at_s"].as_f64().unwrap();
    assert_eq!(html.matches("<line class=\"cliff\"").count(), 1, "{html}");
    assert!(html.contains(&format!("data-at-s=\"{at:.1}\"")), "{html}");
    assert!(
        html.contains(&format!("cliff after {at:.0} s: ")) && html.contains("no cliff"),
        "{html}"
    );
    // One point per second of the first repeat, each test.
    let seq_points = seq["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["repeat"] == 1)
        .count();
    let drawn = html
        .split("<polyline class=\"rate\"")
        .nth(1)
        .and_then(|l| l.split("points=\"").nth(1))
        .and_then(|l| l.split('"').next())
        .unwrap();
    assert_eq!(drawn.split(' ').count(), seq_points, "{drawn}");
    assert!(
        !html.to_lowercase().contains("<script"),
        "the run page stays script-free"
    );
}

/// The SNIA rule over the last five rounds, computed here from the recorded rounds.
fn steady_by_the_rule(rounds: &[f64]) -> bool {
    let w = &rounds[rounds.len() - 5..];
    let mean = w.iter().sum::<f64>() / 5.0;
    let within = w.iter().all(|r| (r - mean).abs() <= 0.2 * mean);
    let slope: f64 = w
        .iter()
        .enumerate()
        .map(|(i, r)| (i as f64 - 2.0) * (r - mean))
        .sum::<f64>()
        / 10.0;
    within && (slope * 4.0).abs() <= 0.1 * mean
}

#[test]
fn preconditioning_reaches_steady_state_is_recorded_and_compare_keeps_it_apart() {
    if let Some(why) = fuse_missing() {
        skip(&format!("precondition test: {why}"));
        return;
    }
    // The two sequential passes over 4 MiB go at 8 MiB/s (a second), the random rounds after
    // them at 1 MiB/s: a pace the FUSE server keeps whatever the machine's load, so the rounds
    // settle as a real device's would.
    let backing = tempfile::tempdir_in("/dev/shm").unwrap();
    let fs = FuseMount::start(
        backing.path(),
        &[
            "--write-rate",
            &(8 * MIB).to_string(),
            "--slow-after",
            &(8 * MIB).to_string(),
            "--slow-rate",
            &MIB.to_string(),
        ],
    );
    let Some(dev) = LoopDev::new_in("precondition test", 4 * MIB, fs.path()) else {
        return;
    };
    let store = tempfile::tempdir().unwrap();
    let db = store.path().join("runs.db");
    let db = db.to_str().unwrap();
    let bench = |extra: &[&str]| {
        let mut args = vec![
            "bench",
            "disk",
            dev.path(),
            "--rw",
            "randwrite",
            "--iodepth",
            "4",
            "--runtime",
            "1s",
            "--destroy-data",
            "--json",
            "--db",
            db,
        ];
        args.extend(extra);
        json_ok(&run(&args))
    };
    let pre = bench(&["--precondition", "--precondition-round", "500ms"]);
    let p = &pre["precondition"];
    assert_eq!(p["sequential_passes"], 2, "{p}");
    let rounds: Vec<f64> = p["rounds_iops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_f64().unwrap())
        .collect();
    assert_eq!(p["steady"], true, "not steady in 25 rounds: {p}");
    assert!(rounds.len() >= 5 && steady_by_the_rule(&rounds), "{p}");
    // It stopped at the first round the rule held.
    assert!(
        rounds.len() == 5 || !steady_by_the_rule(&rounds[..rounds.len() - 1]),
        "{p}"
    );
    let fresh = bench(&[]);
    assert!(fresh.get("precondition").is_none(), "{fresh}");

    let refused = run(&["compare", "1", "2", "--db", db]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    let err = stderr(&refused);
    assert!(
        err.contains("run 1 was preconditioned")
            && err.contains("run 2 was not")
            && err.contains("--force"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let forced = run(&["compare", "1", "2", "--db", db, "--force"]);
    assert_eq!(forced.status.code(), Some(0), "{}", stderr(&forced));
    // The stored run keeps the record.
    let exported = stdout(&run(&["runs", "export", "1", "--db", db]));
    assert!(
        exported.contains("\"rounds_iops\"") && exported.contains("\"steady\": true"),
        "{exported}"
    );
}
