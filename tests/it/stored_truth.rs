//! What a run showed live, it still shows once stored: the flush row and the etcd judgement in
//! `runs show` and `compare` (text, Markdown, CSV, JSON, HTML), method changes listed as
//! configuration differences, warnings kept, a `--json | head` run stored as finished;
//! `compare` says when runs share no test; its table stays aligned under any label; the HTML
//! report fits a phone and a desktop screen, with legends and no empty chart.

use crate::common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use tacho::units::format_latency_ns;
use unicode_width::UnicodeWidthStr;

fn with_db<'a>(db: &'a Path, args: &[&'a str]) -> Vec<&'a str> {
    let mut v = args.to_vec();
    v.extend(["--db", db.to_str().unwrap()]);
    v
}

/// A shortened etcd suite run against `threshold`: 4 MiB, 1 s per repeat (non-standard).
/// Returns the live JSON document.
fn etcd(db: &Path, threshold: &str, label: Option<&str>) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "bench",
        "disk",
        dir.path().to_str().unwrap(),
        "--suite",
        "etcd",
        "--size",
        "4M",
        "--runtime",
        "1s",
        "--threshold",
        threshold,
        "--json",
    ];
    if let Some(l) = label {
        args.extend(["--label", l]);
    }
    let o = run(&with_db(db, &args));
    let doc = parse_json(&o);
    // A failed judgement exits 1; anything else is an error here.
    let expected = if doc["judgement"]["status"] == "fail" {
        1
    } else {
        0
    };
    assert_eq!(o.status.code(), Some(expected), "{}", stderr(&o));
    doc
}

/// Two stored etcd runs: run 1 passes (a limit of 10 s that no disk misses), run 2 fails (a
/// limit of 1 µs that no disk meets). Returns the database and both live documents.
fn pass_and_fail(dir: &Path) -> (PathBuf, Value, Value) {
    let db = dir.join("etcd.db");
    let pass = etcd(&db, "10s", Some("pass"));
    let fail = etcd(&db, "1us", None);
    assert_eq!(pass["judgement"]["status"], "pass", "{}", pass["judgement"]);
    assert_eq!(fail["judgement"]["status"], "fail", "{}", fail["judgement"]);
    (db, pass, fail)
}

fn flush_p99(doc: &Value) -> f64 {
    doc["tests"][0]["sync"]["lat_ns"]["p99"]
        .as_f64()
        .unwrap_or_else(|| panic!("no flush p99 in {}", doc["tests"][0]))
}

fn ok(o: &std::process::Output) -> String {
    assert_eq!(o.status.code(), Some(0), "{}", stderr(o));
    stdout(o)
}

#[test]
fn etcd_pass_and_fail_show_flushes_judgements_and_threshold_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let (db, pass, fail) = pass_and_fail(dir.path());
    let (p1, p2) = (flush_p99(&pass), flush_p99(&fail));
    let (f1, f2) = (format_latency_ns(p1), format_latency_ns(p2));

    // runs show, text and Markdown: the flush row with its count and the judgement.
    for format in [&[][..], &["--markdown"][..]] {
        let text = ok(&run(&with_db(
            &db,
            &[&["runs", "show", "2"][..], format].concat(),
        )));
        let count = fail["tests"][0]["sync"]["count"].as_u64().unwrap();
        let flush_row = text
            .lines()
            .find(|l| l.contains("fdatasync") && l.contains(&format!("{count} flushes")))
            .unwrap_or_else(|| panic!("no flush row with the count {count}:\n{text}"));
        assert!(
            flush_row.contains(&f2),
            "flush p99 {f2} missing: {flush_row}"
        );
        assert!(
            text.contains("FAIL") && text.contains(&format_latency_ns(1000.0)),
            "judgement and limit missing:\n{text}"
        );
    }
    // runs show --csv and --html: the flush p99 and the judgement with its limit.
    let csv_text = ok(&run(&with_db(&db, &["runs", "show", "2", "--csv"])));
    assert!(
        csv_text.contains(&format!(",sync,lat_p99_ns,{p2}")),
        "no flush p99 {p2}:\n{csv_text}"
    );
    assert!(
        csv_text.contains("fdatasync p99,,,,,judgement,judgement,fail")
            && csv_text.contains("fdatasync p99,,,,,judgement,threshold_ns,1000"),
        "{csv_text}"
    );
    let shown = dir.path().join("show.html");
    ok(&run(&with_db(
        &db,
        &["runs", "show", "2", "--html", shown.to_str().unwrap()],
    )));
    let page = std::fs::read_to_string(&shown).unwrap();
    assert!(
        page.contains("p99 flush latency")
            && page.contains("FAIL: fdatasync p99")
            && page.contains(&tacho::report::html::esc(&f2)),
        "runs show --html lacks the flush row or the judgement"
    );

    // runs show --json: the stored document keeps the judgement, the flushes and the suite.
    let doc = json_ok(&run(&with_db(&db, &["runs", "show", "1", "--json"])));
    assert_eq!(doc["judgement"], pass["judgement"]);
    assert_eq!(doc["tests"][0]["sync"], pass["tests"][0]["sync"]);
    assert_eq!(doc["suite"], pass["suite"]);
    assert_eq!(doc["warnings"], pass["warnings"]);

    // compare, text and Markdown: both flush p99s, both verdicts, the threshold change.
    for format in [&[][..], &["--markdown"][..]] {
        let text = ok(&run(&with_db(
            &db,
            &[&["compare", "1", "2"][..], format].concat(),
        )));
        let verdict = text.lines().next().unwrap();
        assert!(
            verdict.contains("PASS → FAIL") && !verdict.starts_with("no significant difference"),
            "{verdict}"
        );
        let row = text
            .lines()
            .skip(1)
            .find(|l| l.contains("p99 flush latency"))
            .unwrap_or_else(|| panic!("no flush p99 row:\n{text}"));
        assert!(row.contains(&f1) && row.contains(&f2), "{row}");
        assert!(text.contains("PASS: fdatasync p99"), "{text}");
        assert!(text.contains("FAIL: fdatasync p99"), "{text}");
        let limits = format!(
            "threshold: {} → {}",
            format_latency_ns(1e10),
            format_latency_ns(1e3)
        );
        assert!(text.contains(&limits), "{limits} missing:\n{text}");
    }

    // compare --json: the flush rows carry both figures; runs carry their judgements.
    let v = json_ok(&run(&with_db(&db, &["compare", "1", "2", "--json"])));
    let rows = v["rows"].as_array().unwrap();
    let p99 = rows
        .iter()
        .find(|r| r["direction"] == "sync" && r["metric"] == "lat_p99_ns")
        .unwrap_or_else(|| panic!("no flush p99 row: {v}"));
    assert_eq!(p99["headline"], true);
    assert_eq!(p99["cells"][0]["value"].as_f64(), Some(p1));
    assert_eq!(p99["cells"][1]["value"].as_f64(), Some(p2));
    assert_eq!(p99["cells"][1]["samples"].as_array().unwrap().len(), 3);
    assert!(rows.iter().any(|r| r["direction"] == "sync"
        && r["metric"] == "lat_mean_ns"
        && r["headline"] == true));
    assert_eq!(v["runs"][0]["judgement"]["status"], "pass");
    assert_eq!(v["runs"][1]["judgement"]["status"], "fail");
    assert_eq!(
        v["runs"][1]["judgement"]["threshold_ns"].as_f64(),
        Some(1e3)
    );
    let threshold = v["fingerprint"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["key"] == "threshold")
        .unwrap();
    assert_eq!(threshold["differs"], true);

    // compare --csv: the flush p99 row and the judgement rows.
    let o = run(&with_db(&db, &["compare", "1", "2", "--csv"]));
    let mut reader = csv::Reader::from_reader(&o.stdout[..]);
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let find = |direction: &str, metric: &str| {
        records
            .iter()
            .find(|r| r[col("direction")] == *direction && r[col("metric")] == *metric)
            .unwrap_or_else(|| panic!("no {direction} {metric} row: {records:?}"))
    };
    let sync = find("sync", "lat_p99_ns");
    assert_eq!(sync[col("run1")].parse::<f64>().unwrap(), p1);
    assert_eq!(sync[col("run2")].parse::<f64>().unwrap(), p2);
    let judged = find("judgement", "judgement");
    assert_eq!(
        (&judged[col("run1")], &judged[col("run2")]),
        ("pass", "fail")
    );
    let limit = find("judgement", "threshold_ns");
    assert_eq!(limit[col("run1")].parse::<f64>().unwrap(), 1e10);
    assert_eq!(limit[col("run2")].parse::<f64>().unwrap(), 1e3);

    // HTML: the flush figures, both judgements, the threshold row marked as differing.
    let html = dir.path().join("etcd.html");
    ok(&run(&with_db(
        &db,
        &["compare", "1", "2", "--html", html.to_str().unwrap()],
    )));
    let page = std::fs::read_to_string(&html).unwrap();
    for needle in [
        "p99 flush latency",
        "PASS: fdatasync p99",
        "FAIL: fdatasync p99",
        &tacho::report::html::esc(&f1),
        &tacho::report::html::esc(&f2),
    ] {
        assert!(page.contains(needle), "{needle} missing from the HTML");
    }
    assert!(
        page.contains(&format!(
            "<tr class=\"differs\"><td>threshold</td><td>{}</td><td>{}</td></tr>",
            format_latency_ns(1e10),
            format_latency_ns(1e3)
        )),
        "threshold row"
    );
}

#[test]
fn a_judgement_worse_at_the_same_limit_fails_the_regression_check() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.db");
    let doc = |status: &str, limit: u64| {
        json!({
            "schema": "tacho.bench.v1", "host": {"hostname": "h"}, "target": {"path": "/d"},
            "suite": {"name": "etcd", "version": 1, "standard": true, "repeat": 1},
            "judgement": {"status": status, "metric": "fdatasync p99", "value_ns": 5000,
                          "threshold_ns": limit},
            "tests": [{"name": "etcd WAL", "rw": "write", "bs_bytes": 2300, "iodepth": 1,
                       "numjobs": 1, "sync_every": {"kind": "fdatasync", "every": 1},
                       "write": {"iops": 100.0}, "sync": {"count": 10, "lat_ns": {"p99": 5000}}}],
            "warnings": [],
        })
    };
    let file = dir.path().join("j.json");
    let docs = [doc("pass", 10_000), doc("fail", 10_000), doc("fail", 1_000)];
    let text: Vec<String> = docs.iter().map(Value::to_string).collect();
    std::fs::write(&file, text.join("\n")).unwrap();
    ok(&run(&with_db(
        &db,
        &["runs", "import", file.to_str().unwrap()],
    )));
    let o = run(&with_db(
        &db,
        &["compare", "1", "2", "--fail-on-regression", "5"],
    ));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("judgement FAIL in run 2"),
        "{}",
        stderr(&o)
    );
    // A different limit explains the change: listed, not a regression of the disk.
    let o = run(&with_db(
        &db,
        &["compare", "1", "3", "--fail-on-regression", "5"],
    ));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("threshold: 10.0µs → 1.00µs"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn a_shortened_suite_is_marked_and_listed_as_a_method_change() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db");
    etcd(&db, "10s", None);
    // The same run as a standard one would be recorded (the standard etcd suite runs up to
    // 300 s per repeat, too long for a test).
    let o = run(&with_db(&db, &["runs", "export", "1"]));
    let mut doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["suite"]["standard"], false, "stored without its method");
    doc["suite"]["standard"] = json!(true);
    doc["suite"].as_object_mut().unwrap().remove("changed");
    doc["run"]["label"] = json!("standard");
    // An edited copy is another run: without the original's run id it imports as a new one.
    doc["run"].as_object_mut().unwrap().remove("uuid");
    let file = dir.path().join("standard.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    ok(&run(&with_db(
        &db,
        &["runs", "import", file.to_str().unwrap()],
    )));

    let list = ok(&run(&with_db(&db, &["runs", "list"])));
    let line = |id: &str| {
        list.lines()
            .find(|l| l.trim_start().starts_with(&format!("{id} ")))
            .unwrap()
            .to_string()
    };
    assert!(
        line("1").contains("etcd v1 (non-standard: runtime 1s, size 4MiB)"),
        "{list}"
    );
    assert!(!line("2").contains("non-standard"), "{list}");
    let v = json_ok(&run(&with_db(&db, &["runs", "list", "--json"])));
    assert_eq!(v["runs"][0]["standard"], false);
    assert_eq!(v["runs"][1]["standard"], true);

    let text = ok(&run(&with_db(&db, &["compare", "2", "1"])));
    assert!(
        text.contains("suite: etcd v1 → etcd v1 (non-standard: runtime 1s, size 4MiB)"),
        "{text}"
    );
}

/// Engine, size, runtime and repeats of custom tests, and the options of `time` and
/// `bench cpu`, are configuration differences.
#[test]
fn changed_options_are_configuration_differences() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("o.db");
    let target = tempfile::tempdir().unwrap();
    let t = target.path().to_str().unwrap();
    let base = ["--rw", "randread", "--bs", "4k", "--json"];
    for extra in [
        &["--size", "8M", "--runtime", "300ms", "--engine", "sync"][..],
        &[
            "--size",
            "16M",
            "--runtime",
            "600ms",
            "--engine",
            "psync",
            "--repeat",
            "2",
        ][..],
    ] {
        json_ok(&run(&with_db(
            &db,
            &[&["bench", "disk", t][..], &base[..], extra].concat(),
        )));
    }
    let text = ok(&run(&with_db(&db, &["compare", "1", "2"])));
    for change in [
        "engine: sync → psync",
        "size: 8MiB → 16MiB",
        "runtime: 0.3s → 0.6s",
        "repeats: 1 → 2",
    ] {
        assert!(text.contains(change), "{change} missing:\n{text}");
    }

    for runs in ["2", "3"] {
        ok(&run(&with_db(&db, &["time", "-N", "--runs", runs, "true"])));
    }
    let text = ok(&run(&with_db(&db, &["compare", "3", "4"])));
    assert!(text.contains("runs: 2 → 3"), "{text}");
    assert!(
        text.lines()
            .next()
            .unwrap()
            .contains("against baseline run 3"),
        "{text}"
    );

    for repeat in ["2", "3"] {
        ok(&run(&with_db(
            &db,
            &[
                "bench",
                "cpu",
                "--kernel",
                "integer",
                "--threads",
                "1",
                "--runtime",
                "50ms",
                "--repeat",
                repeat,
            ],
        )));
    }
    let text = ok(&run(&with_db(&db, &["compare", "5", "6"])));
    assert!(text.contains("repeats: 2 → 3"), "{text}");
}

#[test]
fn warnings_are_shown_with_the_run_in_compare() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    let doc = |label: &str, warnings: Value| {
        json!({
            "schema": "tacho.bench.v1", "run": {"label": label}, "host": {"hostname": "h"},
            "target": {"path": "/d"},
            "tests": [{"name": "RND4K Q1T1", "rw": "randread", "bs_bytes": 4096, "iodepth": 1,
                       "numjobs": 1, "read": {"iops": 100.0, "lat_ns": {"p99": 9000}},
                       "warnings": []}],
            "warnings": warnings,
        })
    };
    let file = dir.path().join("w.json");
    let docs = [
        doc("a", json!([])),
        doc(
            "b",
            json!([{"code": "cache-suspected", "message": "faster than the device"}]),
        ),
    ];
    let text: Vec<String> = docs.iter().map(Value::to_string).collect();
    std::fs::write(&file, text.join("\n")).unwrap();
    ok(&run(&with_db(
        &db,
        &["runs", "import", file.to_str().unwrap()],
    )));
    let text = ok(&run(&with_db(&db, &["compare", "1", "2"])));
    assert!(
        text.contains("warning run 2 [cache-suspected]: faster than the device"),
        "{text}"
    );
    let v = json_ok(&run(&with_db(&db, &["compare", "1", "2", "--json"])));
    assert_eq!(
        v["runs"][1]["warnings"][0],
        "[cache-suspected]: faster than the device"
    );
}

/// Runs a benchmark whose stdout is a pipe closed before it prints (`--json | head -0`).
fn with_closed_stdout(db: &Path, args: &[&str]) -> std::process::ExitStatus {
    let mut cmd = tacho();
    cmd.args(with_db(db, args));
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("cannot start tacho");
    drop(child.stdout.take());
    wait_limited(&mut child, std::time::Duration::from_secs(60))
}

#[test]
fn a_run_cut_off_by_a_closed_pipe_is_stored_as_finished() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let target = tempfile::tempdir().unwrap();
    let disk = tiny_disk(target.path().to_str().unwrap(), &["--json"]);
    let status = with_closed_stdout(&db, &disk);
    assert!(status.success(), "{status}");
    let status = with_closed_stdout(&db, &["time", "-N", "--runs", "2", "true", "--json"]);
    assert!(status.success(), "{status}");
    let v = json_ok(&run(&with_db(&db, &["runs", "list", "--json"])));
    let runs: Vec<(&str, &str)> = v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["kind"].as_str().unwrap(), r["status"].as_str().unwrap()))
        .collect();
    assert_eq!(runs, [("disk", "finished"), ("time", "finished")]);
}

/// A document with one randread 4k test at `iodepth`, repeated (so significance is known).
fn qd_doc(label: Option<&str>, iodepth: u64, iops: &[f64]) -> Value {
    let dir = |v: f64| json!({"iops": v, "lat_ns": {"p99": 1e9 / v}});
    json!({
        "schema": "tacho.bench.v1", "run": {"label": label}, "host": {"hostname": "h"},
        "target": {"path": "/d"},
        "tests": [
            {"name": format!("RND4K Q{iodepth}T1"), "rw": "randread", "bs_bytes": 4096,
             "iodepth": iodepth, "numjobs": 1, "read": dir(iops[0]),
             "repeats": iops.iter().map(|&v| json!({"read": dir(v)})).collect::<Vec<_>>()},
            {"name": "SEQ1M Q8T1", "rw": "read", "bs_bytes": 1 << 20, "iodepth": 8,
             "numjobs": 1, "read": {"bw_bytes_per_s": 1e9, "lat_ns": {"p99": 1e6}}},
        ],
        "warnings": [],
    })
}

fn import_all(db: &Path, dir: &Path, docs: &[Value]) {
    let file = dir.join(format!("docs-{}.json", docs.len()));
    let text: Vec<String> = docs.iter().map(Value::to_string).collect();
    std::fs::write(&file, text.join("\n")).unwrap();
    ok(&run(&with_db(
        db,
        &["runs", "import", file.to_str().unwrap()],
    )));
}

#[test]
fn runs_without_a_common_test_say_so_and_fail_the_check() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("n.db");
    let mut q32 = qd_doc(None, 32, &[100.0, 101.0, 99.0]);
    let mut q1 = qd_doc(None, 1, &[50.0, 51.0, 49.0]);
    // Only the queue-depth test each: nothing in common.
    q32["tests"].as_array_mut().unwrap().truncate(1);
    q1["tests"].as_array_mut().unwrap().truncate(1);
    import_all(&db, dir.path(), &[q32, q1]);
    let text = ok(&run(&with_db(&db, &["compare", "1", "2"])));
    let verdict = text.lines().next().unwrap();
    assert!(verdict.starts_with("no tests in common"), "{verdict}");
    assert!(
        !text.contains("no significant difference against"),
        "{text}"
    );
    let v = json_ok(&run(&with_db(&db, &["compare", "1", "2", "--json"])));
    assert_eq!(v["tests_in_common"], 0);
    let o = run(&with_db(
        &db,
        &["compare", "1", "2", "--fail-on-regression", "5"],
    ));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no tests in common"), "{}", stderr(&o));

    // A timed command against a disk run: refused, naming the reason.
    ok(&run(&with_db(&db, &["time", "-N", "--runs", "2", "true"])));
    let o = run(&with_db(
        &db,
        &["compare", "1", "3", "--fail-on-regression", "5"],
    ));
    let line = assert_error(&o);
    assert!(line.contains("no tests in common"), "{line}");
}

#[test]
fn the_table_stays_aligned_whatever_the_label_and_note() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    import_all(
        &db,
        dir.path(),
        &[
            qd_doc(None, 32, &[100.0, 101.0, 99.0]),
            // Significantly worse IOPS, and the sequential test without repeats (`?`).
            qd_doc(Some("基准 ✅ 測試"), 32, &[80.0, 81.0, 79.0]),
            qd_doc(Some("after"), 32, &[100.0, 102.0, 98.0]),
        ],
    );
    let text = ok(&run(&with_db(&db, &["compare", "1", "2", "3"])));
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("test "))
        .take_while(|l| !l.is_empty())
        .collect();
    assert!(table.len() >= 5, "{text}");
    assert!(
        text.contains("worse (") && text.contains(" ?") && text.contains("n.s."),
        "every kind of note: {text}"
    );
    // Right-aligned figures: every line ends in the same screen column.
    let widths: Vec<usize> = table.iter().map(|l| l.width()).collect();
    assert!(
        widths.iter().all(|w| *w == widths[0]),
        "ragged table {widths:?}:\n{}",
        table.join("\n")
    );
    // Each run named once: `run 1`, never `run 1 (run 1)`.
    assert!(table[0].contains("  run 1  "), "{}", table[0]);
    assert!(table[0].contains("#2 基准 ✅ 測試"), "{}", table[0]);
    assert!(
        !text.contains("run 1 (run 1)") && !text.contains("#1 run 1"),
        "{text}"
    );
    assert!(
        text.lines()
            .next()
            .unwrap()
            .contains("against baseline run 1;"),
        "{text}"
    );
}

/// The report opened in headless Chromium inside a frame `width` pixels wide: the page's
/// scroll width against its window width, the charts without a drawn series, the charts
/// without a legend after them, and the number of charts.
fn measure(chromium: &str, page: &Path, width: u32) -> (u64, u64, u64, u64, u64) {
    let dir = page.parent().unwrap();
    let frame = dir.join(format!("frame-{width}.html"));
    std::fs::write(
        &frame,
        format!(
            "<!DOCTYPE html><html><body style=\"margin:0\"><iframe id=\"f\" src=\"{}\" \
             style=\"width:{width}px;height:900px;border:0\"></iframe><script>\
             document.getElementById('f').onload = function () {{\
               var d = this.contentDocument, charts = d.querySelectorAll('svg.chart');\
               var empty = 0, unexplained = 0;\
               charts.forEach(function (c) {{\
                 if (!c.querySelector('.series')) empty++;\
                 var n = c.nextElementSibling;\
                 if (!n || !n.classList.contains('legend')) unexplained++;\
               }});\
               document.body.setAttribute('data-m', [d.documentElement.scrollWidth,\
                 this.contentWindow.innerWidth, empty, unexplained, charts.length].join(' '));\
             }};</script></body></html>",
            page.file_name().unwrap().to_str().unwrap()
        ),
    )
    .unwrap();
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = chromium_command(chromium, profile.path());
    cmd.args([
        "--allow-file-access-from-files",
        "--virtual-time-budget=5000",
        "--dump-dom",
    ])
    .arg(format!("file://{}", frame.display()));
    let dom = stdout(&run_cmd(cmd));
    let m = dom
        .split("data-m=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_else(|| panic!("the page was not measured: {dom}"));
    let n: Vec<u64> = m.split(' ').map(|x| x.parse().unwrap()).collect();
    (n[0], n[1], n[2], n[3], n[4])
}

/// Pixels of each run's colour (#0072B2 for the first, #E69F00 for the second) in a
/// screenshot of the page at `width`.
fn colours(chromium: &str, page: &Path, width: u32) -> (usize, usize) {
    let profile = tempfile::tempdir().unwrap();
    let shot = page.with_extension(format!("{width}.png"));
    let mut cmd = chromium_command(chromium, profile.path());
    cmd.arg(format!("--window-size={width},3000"))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", page.display()));
    let o = run_cmd(cmd);
    assert!(shot.exists(), "no screenshot: {}", stderr(&o));
    let n = count_pixels(&shot, &[[0x00, 0x72, 0xB2], [0xE6, 0x9F, 0x00]]);
    (n[0], n[1])
}

#[test]
fn the_html_report_fits_phone_and_desktop_with_legends_and_drawn_charts() {
    let Some(chromium) = chromium() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let target = tempfile::tempdir().unwrap();
    let t = target.path().to_str().unwrap();
    // Disk runs of this machine: their fingerprint has long values (mount options, mitigations).
    for label in ["before", "after"] {
        json_ok(&run(&with_db(
            &db,
            &tiny_disk(
                t,
                &["--rw", "randread", "--bs", "4k", "--json", "--label", label],
            ),
        )));
    }
    for runs in ["3", "5"] {
        ok(&run(&with_db(&db, &["time", "-N", "--runs", runs, "true"])));
    }
    let disk = dir.path().join("disk.html");
    let time = dir.path().join("time.html");
    for (page, ids) in [(&disk, ["1", "2"]), (&time, ["3", "4"])] {
        ok(&run(&with_db(
            &db,
            &["compare", ids[0], ids[1], "--html", page.to_str().unwrap()],
        )));
    }
    let disk_page = std::fs::read_to_string(&disk).unwrap();
    assert!(disk_page.contains("<th>target</th>"), "no target column");
    assert!(
        disk_page.contains(&format!("<td data-label=\"target\">{t}</td>")),
        "target path missing"
    );
    let time_page = std::fs::read_to_string(&time).unwrap();
    assert!(
        time_page.contains("<td data-label=\"source\">time "),
        "a time run's source reads time"
    );
    assert!(
        time_page.contains("class=\"chart times\"") && !time_page.contains("chart latency"),
        "a time run charts its run times, not latency percentiles"
    );
    // Every sample of both runs is drawn: 3 and 5 run times.
    assert_eq!(time_page.matches("<circle class=\"series\"").count(), 8);

    for page in [&disk, &time] {
        for width in [1400, 390] {
            let (scroll, inner, empty, unexplained, charts) = measure(chromium, page, width);
            assert_eq!(inner, u64::from(width));
            assert!(
                scroll <= inner,
                "{} overflows at {width} px: {scroll} > {inner}",
                page.display()
            );
            assert!(charts >= 1, "{}: no charts", page.display());
            assert_eq!(empty, 0, "{}: charts without a series", page.display());
            assert_eq!(
                unexplained,
                0,
                "{}: charts without a legend",
                page.display()
            );
            // Both runs' colours drawn (charts and legends): no chart left empty on screen.
            let (blue, orange) = colours(chromium, page, width);
            assert!(
                blue > 200 && orange > 200,
                "{} at {width} px: blue {blue}, orange {orange} pixels",
                page.display()
            );
        }
    }
}
