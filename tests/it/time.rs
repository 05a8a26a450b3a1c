//! `tacho time` end to end: hyperfine's export shape, interleaving, failures, --max-time,
//! per-run peak memory, bad input. Commands are tiny (`true`, `echo`) so every test is quick.

use crate::common::*;
use serde_json::Value;
use std::path::Path;

/// Every key hyperfine's JSON export has for a command (hyperfine 1.18 and later; older ones
/// lack `memory_usage_byte`).
const HYPERFINE_KEYS: [&str; 11] = [
    "command",
    "mean",
    "stddev",
    "median",
    "user",
    "system",
    "min",
    "max",
    "times",
    "memory_usage_byte",
    "exit_codes",
];

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn export_json_has_hyperfines_shape_and_loads_back() {
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("out.json");
    let o = run(&[
        "time",
        "-N",
        "--runs",
        "3",
        "-i",
        "true",
        "false",
        "--export-json",
        export.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc = read_json(&export);
    let top: Vec<&String> = doc.as_object().unwrap().keys().collect();
    assert_eq!(top, ["results"], "hyperfine's export has only `results`");
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for r in results {
        let obj = r.as_object().unwrap();
        for key in HYPERFINE_KEYS {
            assert!(obj.contains_key(key), "missing {key} in {r}");
        }
        assert_eq!(obj.len(), HYPERFINE_KEYS.len(), "extra keys in {r}");
        assert_eq!(r["times"].as_array().unwrap().len(), 3);
        assert_eq!(r["memory_usage_byte"].as_array().unwrap().len(), 3);
        for k in ["mean", "stddev", "median", "user", "system", "min", "max"] {
            assert!(r[k].as_f64().unwrap() >= 0.0, "{k} in {r}");
        }
        assert!(r["min"].as_f64() <= r["median"].as_f64());
        assert!(r["median"].as_f64() <= r["max"].as_f64());
    }
    assert_eq!(results[0]["command"], "true");
    assert_eq!(results[0]["exit_codes"], serde_json::json!([0, 0, 0]));
    assert_eq!(results[1]["exit_codes"], serde_json::json!([1, 1, 1]));
}

#[test]
fn export_json_has_every_key_the_installed_hyperfine_writes() {
    if !have_tool("hyperfine") {
        skip(
            "export_json_has_every_key_the_installed_hyperfine_writes: hyperfine is not installed",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (ours, theirs) = (dir.path().join("t.json"), dir.path().join("h.json"));
    sh(
        "hyperfine",
        &[
            "-N",
            "--runs",
            "2",
            "--style",
            "none",
            "true",
            "--export-json",
            theirs.to_str().unwrap(),
        ],
    );
    let o = run(&[
        "time",
        "-N",
        "--runs",
        "2",
        "true",
        "--export-json",
        ours.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let (ours, theirs) = (read_json(&ours), read_json(&theirs));
    for key in theirs["results"][0].as_object().unwrap().keys() {
        assert!(
            ours["results"][0].get(key).is_some(),
            "hyperfine writes `{key}`, tacho does not"
        );
    }
}

#[test]
fn json_report_adds_schema_relative_speed_and_warnings() {
    let o = run(&["time", "-N", "--runs", "4", "true", "sleep 0.01", "--json"]);
    let v = json_ok(&o);
    assert_eq!(v["schema"], "tacho.time.v1");
    assert_eq!(v["interleaved"], true);
    assert_eq!(v["shell"], Value::Null);
    let results = v["results"].as_array().unwrap();
    for r in results {
        for key in HYPERFINE_KEYS {
            assert!(r.get(key).is_some(), "missing {key}");
        }
        assert!(r["warnings"].is_array());
    }
    let rel = v["relative"].as_array().unwrap();
    assert_eq!(rel.len(), 2);
    assert_eq!(rel[0]["ratio"], 1.0, "true is the fastest");
    let slow = &rel[1];
    assert!(slow["ratio"].as_f64().unwrap() > 1.0);
    assert!(slow["ci95_low"].as_f64().unwrap() <= slow["ratio"].as_f64().unwrap());
    assert!(slow["ci95_high"].as_f64().unwrap() >= slow["ratio"].as_f64().unwrap());
}

/// Each command appends its letter to a log; the log shows the order the runs happened in.
fn run_order(extra: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let cmd = |c: &str| format!("printf {c} >> {}", log.display());
    let (a, b) = (cmd("a"), cmd("b"));
    let mut args = vec!["time", "--runs", "3", "--warmup", "1"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[&a, &b]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    std::fs::read_to_string(&log).unwrap()
}

#[test]
fn runs_are_interleaved_by_default_and_in_blocks_on_request() {
    assert_eq!(run_order(&[]), "abababab");
    assert_eq!(run_order(&["--no-interleave"]), "aaaabbbb");
}

#[test]
fn prepare_setup_and_cleanup_run_around_the_runs() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let w = |c: &str| format!("printf {c} >> {}", log.display());
    let o = run(&[
        "time",
        "--runs",
        "2",
        "--setup",
        &w("S"),
        "--prepare",
        &w("p"),
        "--cleanup",
        &w("C"),
        &w("x"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "SpxpxC");
}

#[test]
fn a_failing_command_is_an_error_unless_ignored() {
    let line = assert_error(&run(&["time", "-N", "--runs", "2", "false"]));
    assert!(line.contains("exited with code 1"), "{line}");
    assert!(line.contains("--ignore-failure"), "{line}");
    let v = json_ok(&run(&[
        "time", "-N", "--runs", "2", "-i", "false", "--json",
    ]));
    let codes: Vec<&str> = v["results"][0]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"nonzero-exit"), "{codes:?}");
}

#[test]
fn max_time_kills_a_run() {
    let line = assert_error(&run(&[
        "time",
        "-N",
        "--runs",
        "1",
        "--max-time",
        "100ms",
        "sleep 5",
    ]));
    assert!(line.contains("--max-time"), "{line}");
    let v = json_ok(&run(&[
        "time",
        "-N",
        "--runs",
        "1",
        "--max-time",
        "100ms",
        "-i",
        "sleep 5",
        "--json",
    ]));
    let r = &v["results"][0];
    assert_eq!(r["exit_codes"], serde_json::json!([null]));
    assert_eq!(r["timed_out_runs"], 1);
    // One run, in the singular.
    let o = run(&[
        "time",
        "-N",
        "--runs",
        "1",
        "--max-time",
        "100ms",
        "-i",
        "sleep 5",
    ]);
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(text.contains("1 run was killed at --max-time"), "{text}");
    // A failed run of one, in the singular too (it said "1 of 1 runs failed").
    let o = run(&["time", "-N", "--runs", "1", "-i", "false"]);
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(text.contains("1 of 1 run failed"), "{text}");
}

#[test]
fn peak_memory_is_per_run_not_the_largest_child_so_far() {
    if !have_tool("python3") {
        skip("peak_memory_is_per_run_not_the_largest_child_so_far: python3 is not installed");
        return;
    }
    // 64 MiB written (so resident), then a tiny command interleaved after it.
    let big = "python3 -c \"b = bytearray(b'x' * (64 << 20))\"";
    let v = json_ok(&run(&["time", "-N", "--runs", "2", big, "true", "--json"]));
    let mem = |i: usize| -> Vec<u64> {
        v["results"][i]["memory_usage_byte"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.as_u64().unwrap())
            .collect()
    };
    assert!(mem(0).iter().all(|&m| m >= 64 << 20), "{:?}", mem(0));
    assert!(mem(1).iter().all(|&m| m < 64 << 20), "{:?}", mem(1));
}

#[test]
fn csv_and_markdown_exports() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, md) = (dir.path().join("o.csv"), dir.path().join("o.md"));
    let o = run(&[
        "time",
        "-N",
        "--runs",
        "2",
        "true",
        "--export-csv",
        csv.to_str().unwrap(),
        "--export-markdown",
        md.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let csv = std::fs::read_to_string(csv).unwrap();
    assert!(
        csv.starts_with("command,mean,stddev,median,user,system,min,max\ntrue,"),
        "{csv}"
    );
    let md = std::fs::read_to_string(md).unwrap();
    assert!(md.starts_with("| Command | Mean ["), "{md}");
    assert!(md.contains("| `true` |"), "{md}");
}

#[test]
fn human_output_leads_with_the_verdict() {
    let o = run(&["time", "-N", "--runs", "3", "true"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let first = out.lines().next().unwrap();
    assert!(first.starts_with("'true': "), "{first}");
    assert!(first.contains("peak memory"), "{first}");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/dir/out.json");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["time", "-N", "--runs", "1", "/nonexistent/cmd"],
            "cannot start",
        ),
        (
            vec!["time", "-N", "--runs", "1", "echo 'unclosed"],
            "quotes",
        ),
        (
            vec![
                "time", "--runs", "1", "-p", "true", "-p", "true", "a", "b", "c",
            ],
            "--prepare",
        ),
        (
            vec!["time", "--min-runs", "5", "--max-runs", "2", "true"],
            "--max-runs",
        ),
        (vec!["time", "--runs", "0", "true"], "0"),
        (vec!["time", "--max-time", "0s", "true"], "zero"),
        (
            vec![
                "time",
                "--runs",
                "1",
                "true",
                "--export-json",
                missing.to_str().unwrap(),
            ],
            "export",
        ),
        (vec!["time"], "CMD"),
        (
            vec![
                "time",
                "--runs",
                "1",
                "true",
                "--prom-textfile",
                missing.to_str().unwrap(),
            ],
            "Prometheus textfile",
        ),
        (
            vec![
                "time",
                "--runs",
                "1",
                "true",
                "--prom-textfile",
                dir.path().to_str().unwrap(),
            ],
            "is a directory",
        ),
    ];
    let db = dir.path().join("t.db");
    for (mut args, word) in cases {
        args.extend(["--db", db.to_str().unwrap()]);
        let line = assert_error(&run(&args));
        assert!(line.contains(word), "{args:?}: expected '{word}' in {line}");
    }
    // Refused before anything ran: no database, no export, no textfile.
    assert_empty(dir.path());
}

/// Pids of processes whose command line is exactly `words`.
fn processes(words: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = words
        .iter()
        .flat_map(|w| [w.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want))
        .collect()
}

#[test]
fn ctrl_c_kills_a_run_bounded_by_max_time() {
    use std::time::{Duration, Instant};
    // A duration no other test uses, so the process is recognisably this test's.
    let cmd = ["sleep", "7.31"];
    let child = tacho()
        .args(["time", "--runs", "1", "--max-time", "30s", "sleep 7.31"])
        .spawn_piped();
    let start = Instant::now();
    while processes(&cmd).is_empty() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        !processes(&cmd).is_empty(),
        "the timed command never started"
    );
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = wait_output(child, Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(
        processes(&cmd).is_empty(),
        "the timed command outlived tacho"
    );
}

/// Ctrl-C after some runs reports the runs that finished, marked interrupted, and saves them,
/// as `bench` does; the export files, read by scripts that cannot tell, are not written.
#[test]
fn sigint_after_some_runs_reports_the_finished_ones() {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let export = dir.path().join("export.json");
    let line = format!("echo run >> {}; sleep 0.05", log.display());
    let child = tacho()
        .args(["time", "--runs", "1000", "--json", &line, "--export-json"])
        .arg(&export)
        .spawn_piped();
    let runs = || {
        std::fs::read_to_string(&log)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    let start = Instant::now();
    while runs() < 5 && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(runs() >= 5, "the runs never started");
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = wait_output(child, Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let v = parse_json(&o);
    assert_eq!(v["interrupted"], true, "{v}");
    let result = &v["results"][0];
    let timed = result["times"].as_array().unwrap().len();
    // The run the signal cut short is not counted; the shell's calibration adds none.
    assert!(timed >= 4 && timed <= runs(), "{timed} of {} runs", runs());
    assert!(result["mean"].as_f64().unwrap() > 0.0, "{result}");
    assert_eq!(result["warnings"][0]["code"], "interrupted", "{result}");
    assert!(stderr(&o).contains("saved as run"), "{}", stderr(&o));
    assert_eq!(entries(dir.path()), ["runs.log"]);
}

#[test]
fn a_failed_run_leaves_no_export_behind() {
    let dir = tempfile::tempdir().unwrap();
    let new = dir.path().join("new.json");
    let old = dir.path().join("old.csv");
    std::fs::write(&old, "previous results\n").unwrap();
    let o = run(&[
        "time",
        "-N",
        "--runs",
        "1",
        "false",
        "--export-json",
        new.to_str().unwrap(),
        "--export-csv",
        old.to_str().unwrap(),
    ]);
    assert_error(&o);
    assert!(!new.exists(), "a new export file was left behind");
    assert_eq!(std::fs::read_to_string(&old).unwrap(), "previous results\n");
}

#[test]
fn prometheus_textfile_has_times_failures_and_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let prom = dir.path().join("time.prom");
    let db = dir.path().join("t.db");
    let o = run(&[
        "time",
        "--db",
        db.to_str().unwrap(),
        "--runs",
        "3",
        "--ignore-failure",
        "--label",
        "status page",
        "--prom-textfile",
        prom.to_str().unwrap(),
        "--json",
        "sleep 0.01",
        "exit 3",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&prom).unwrap();
    for line in [
        r#"tacho_time_seconds_count{command="sleep 0.01"} 3"#,
        r#"tacho_time_failed_runs{command="sleep 0.01"} 0"#,
        r#"tacho_time_failed_runs{command="exit 3"} 3"#,
        r#"tacho_time_run_info{label="status page",run_id="1","#,
    ] {
        assert!(text.contains(line), "no {line:?} in:\n{text}");
    }
    // Quantile 0.5 is the median the JSON reports, in seconds.
    let reported = parse_json(&o)["results"][0]["median"].as_f64().unwrap();
    let median = text
        .lines()
        .find(|l| l.starts_with(r#"tacho_time_seconds{command="sleep 0.01",quantile="0.5"}"#))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap();
    assert!(
        (median - reported).abs() <= 1e-9 * reported.max(1.0),
        "{median} vs {reported}"
    );
    assert_promtool_accepts(&prom);
}

/// Kills, when a test ends however it ends, the processes whose command line is `words`: a
/// failing test must not leave its `sleep` behind.
struct Reaper(Vec<String>);

impl Reaper {
    fn new(words: &[&str]) -> Reaper {
        Reaper(words.iter().map(|w| w.to_string()).collect())
    }

    fn running(&self) -> Vec<u32> {
        let words: Vec<&str> = self.0.iter().map(String::as_str).collect();
        processes(&words)
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        for pid in self.running() {
            // SAFETY: signalling a process this test started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }
}

/// A `sleep` duration no other test uses, so its process is recognisably this test's.
fn unique_sleep(tag: u32) -> String {
    format!("301.{}{tag}", std::process::id())
}

#[test]
fn a_runs_background_child_is_ended_with_the_run() {
    for (tag, extra) in [(1, &[][..]), (2, &["--max-time", "30s"][..])] {
        let secs = unique_sleep(tag);
        let reaper = Reaper::new(&["sleep", &secs]);
        let line = format!("sh -c \"sleep {secs} & exit 0\"");
        let mut args = vec!["time", "--runs", "1", "--no-save", &line];
        args.extend_from_slice(extra);
        let o = run(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            reaper.running().is_empty(),
            "{extra:?}: the run's background sleep outlived it"
        );
    }
}

#[test]
fn keep_children_leaves_a_background_child_running() {
    let secs = unique_sleep(3);
    let reaper = Reaper::new(&["sleep", &secs]);
    let line = format!("sh -c \"sleep {secs} & exit 0\"");
    let o = run(&["time", "--runs", "1", "--no-save", "--keep-children", &line]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(reaper.running().len(), 1, "--keep-children ended the sleep");
}

#[test]
fn sigterm_to_tacho_ends_the_run_in_progress() {
    use std::time::{Duration, Instant};
    for (tag, extra) in [(4, &[][..]), (5, &["--max-time", "60s"][..])] {
        let secs = unique_sleep(tag);
        let reaper = Reaper::new(&["sleep", &secs]);
        let line = format!("sleep {secs}");
        let child = tacho()
            .args(["time", "--runs", "1", "--no-save", &line])
            .args(extra)
            .spawn_piped();
        let start = Instant::now();
        while reaper.running().is_empty() && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            !reaper.running().is_empty(),
            "the timed command never started"
        );
        // SAFETY: signalling the child this test started.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let o = wait_output(child, Duration::from_secs(10));
        assert_eq!(o.status.code(), Some(143), "{extra:?}: {}", stderr(&o));
        assert!(
            reaper.running().is_empty(),
            "{extra:?}: the timed command outlived tacho"
        );
    }
}

#[test]
fn a_child_that_leaves_the_process_group_is_ended_too() {
    let secs = unique_sleep(6);
    let reaper = Reaper::new(&["sleep", &secs]);
    let line = format!("sh -c \"setsid sleep {secs} & exit 0\"");
    let o = run(&["time", "--runs", "1", "--no-save", &line]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        reaper.running().is_empty(),
        "a setsid child outlived its run"
    );
}
