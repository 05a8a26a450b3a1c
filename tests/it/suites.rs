//! Suites, repeats, block-size mixes, the etcd verdict and `--print-fio`.

use crate::common::*;
use serde_json::Value;

fn bench_json(dir: &std::path::Path, extra: &[&str]) -> (Value, Option<i32>) {
    let mut args = vec!["bench", "disk", dir.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let o = run(&args);
    let v = parse_json(&o);
    assert_empty(dir);
    (v, o.status.code())
}

#[test]
fn list_suites_names_every_suite_with_its_version() {
    let v = json_ok(&run(&["bench", "disk", "--list-suites", "--json"]));
    assert_eq!(v["schema"], "tacho.suites.v1");
    let names: Vec<&str> = v["suites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            assert!(s["version"].as_u64().unwrap() >= 1);
            assert!(!s["tests"].as_array().unwrap().is_empty());
            s["name"].as_str().unwrap()
        })
        .collect();
    for want in [
        "quick", "cdm", "cdm-nvme", "etcd", "k8s", "iometer", "oltp", "full",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let text = stdout(&run(&["bench", "disk", "--list-suites"]));
    assert!(text.contains("etcd v1") && text.contains("2300B"), "{text}");
}

#[test]
fn print_fio_lines_are_accepted_by_fio() {
    if !have_tool("fio") {
        skip("print_fio_lines_are_accepted_by_fio: fio is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().to_str().unwrap();
    for suite in [
        "quick", "cdm", "cdm-nvme", "etcd", "k8s", "iometer", "oltp", "full",
    ] {
        let o = run(&["bench", "disk", target, "--suite", suite, "--print-fio"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let lines: Vec<String> = stdout(&o)
            .lines()
            .filter(|l| l.starts_with("fio "))
            .map(str::to_owned)
            .collect();
        assert!(!lines.is_empty(), "{suite}: no fio command");
        for line in lines {
            let status = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("{line} --parse-only"))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "fio --parse-only rejected: {line}");
        }
    }
    // Printing runs nothing and creates nothing.
    assert_empty(dir.path());
}

#[test]
fn print_fio_of_sustained_and_precondition_uses_fios_steady_state() {
    if !have_tool("fio") {
        skip("print_fio_of_sustained_and_precondition: fio is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().to_str().unwrap();
    let o = run(&[
        "bench",
        "disk",
        target,
        "--suite",
        "sustained",
        "--flat-for",
        "12s",
        "--precondition",
        "--precondition-round",
        "7s",
        "--print-fio",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("fio ")).collect();
    // Two precondition jobs, then the suite's two tests.
    assert_eq!(lines.len(), 4, "{text}");
    assert!(
        lines[0].contains("--rw=write") && lines[0].contains("--loops=2"),
        "{text}"
    );
    assert!(
        lines[1].contains("--rw=randwrite")
            && lines[1].contains("--ss=iops_slope:10%")
            && lines[1].contains("--ss_dur=35s")
            && lines[1].contains("--runtime=175s"),
        "{text}"
    );
    for l in &lines[2..] {
        assert!(
            l.contains("--ss=bw:20%")
                && l.contains("--ss_dur=12s")
                && l.contains("--write_bw_log="),
            "{text}"
        );
    }
    // What fio does otherwise is said in comments.
    assert!(
        text.contains("# Not the same: fio takes one criterion per job"),
        "{text}"
    );
    assert!(
        text.contains("# Not the same: tacho counts a flat rate only after"),
        "{text}"
    );
    for line in lines {
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{line} --parse-only"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "fio --parse-only rejected: {line}");
    }
    assert_empty(dir.path());
}

#[test]
fn repeats_report_every_run_the_pooled_figures_a_spread_and_a_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let (v, code) = bench_json(
        dir.path(),
        &[
            "--rw",
            "randread",
            "--size",
            "8M",
            "--runtime",
            "1100ms",
            "--repeat",
            "3",
        ],
    );
    assert_eq!(code, Some(0));
    let t = &v["tests"][0];
    let repeats = t["repeats"].as_array().unwrap();
    assert_eq!(repeats.len(), 3);
    let mut iops: Vec<f64> = repeats
        .iter()
        .map(|r| r["read"]["iops"].as_f64().unwrap())
        .collect();
    iops.sort_by(f64::total_cmp);
    let spread = t["spread_pct"].as_f64().unwrap();
    assert!((spread - (iops[2] - iops[0]) / iops[1] * 100.0).abs() < 1e-6);
    let total: u64 = repeats
        .iter()
        .map(|r| r["read"]["ios"].as_u64().unwrap())
        .sum();
    assert_eq!(t["read"]["ios"].as_u64().unwrap(), total);
    // The row pools the repeats: all their I/Os over all their time.
    let secs: f64 = repeats
        .iter()
        .map(|r| r["runtime_s"].as_f64().unwrap())
        .sum();
    let pooled = total as f64 / secs;
    assert!((t["read"]["iops"].as_f64().unwrap() - pooled).abs() < pooled * 1e-9);
    // One whole second per repeat.
    let timeline = t["timeline"].as_array().unwrap();
    let per_repeat: Vec<u64> = timeline
        .iter()
        .map(|p| p["repeat"].as_u64().unwrap())
        .collect();
    assert_eq!(per_repeat, vec![1, 2, 3]);
    assert!(timeline.iter().all(|p| p["iops"].as_f64().unwrap() > 0.0));
}

#[test]
fn a_block_size_mix_uses_every_size() {
    let dir = tempfile::tempdir().unwrap();
    let (v, code) = bench_json(
        dir.path(),
        &[
            "--rw",
            "randrw",
            "--bssplit",
            "4k/50:64k/50",
            "--size",
            "8M",
            "--runtime",
            "300ms",
        ],
    );
    assert_eq!(code, Some(0));
    let t = &v["tests"][0];
    assert_eq!(t["bs_bytes"], 65536);
    assert_eq!(t["bssplit"].as_array().unwrap().len(), 2);
    let read = &t["read"];
    let (ios, bytes) = (
        read["ios"].as_u64().unwrap(),
        read["bytes"].as_u64().unwrap(),
    );
    // Half 4 KiB, half 64 KiB: the mean size is near 34 KiB, far from either size alone.
    let mean = bytes as f64 / ios as f64;
    assert!(mean > 20_000.0 && mean < 50_000.0, "mean I/O size {mean}");
}

#[test]
fn bad_mixes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().to_str().unwrap();
    for (mix, rw, word) in [
        ("4k/50:64k/40", "randread", "100"),
        ("4k", "randread", "SIZE/PERCENT"),
        ("4k/60:64k/40", "read", "random"),
        ("1000/100", "randread", "multiple of 512"),
    ] {
        let o = run(&["bench", "disk", target, "--rw", rw, "--bssplit", mix]);
        let line = assert_error(&o);
        assert!(line.contains(word), "{mix}: {line}");
    }
    assert_empty(dir.path());
}

#[test]
fn etcd_suite_judges_fdatasync_p99() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let (v, code) = bench_json(dir.path(), &["--suite", "etcd", "--repeat", "1"]);
    assert_eq!(v["suite"]["name"], "etcd");
    assert_eq!(v["suite"]["standard"], true);
    let t = &v["tests"][0];
    assert_eq!(t["bs_bytes"], 2300);
    assert_eq!(t["engine"], "sync");
    assert_eq!(t["direct"], false);
    // 22 MiB of 2300-byte writes, each flushed.
    let writes = t["write"]["ios"].as_u64().unwrap();
    assert_eq!(writes, (22 << 20) / 2300);
    assert_eq!(t["sync"]["count"].as_u64().unwrap(), writes);
    let j = &v["judgement"];
    assert_eq!(j["threshold_ns"], 10_000_000);
    assert_eq!(j["value_ns"], t["sync"]["lat_ns"]["p99"]);
    let status = j["status"].as_str().unwrap();
    assert!(["pass", "marginal", "fail"].contains(&status));
    assert_eq!(code, Some(if status == "fail" { 1 } else { 0 }));

    // No disk flushes in a microsecond: a failing verdict and exit code 1.
    let (v, code) = bench_json(
        dir.path(),
        &[
            "--suite",
            "etcd",
            "--repeat",
            "1",
            "--threshold",
            "1us",
            "--size",
            "1M",
        ],
    );
    assert_eq!(v["judgement"]["status"], "fail");
    assert_eq!(v["suite"]["standard"], false, "--size changes the method");
    assert_eq!(code, Some(1));
}

#[test]
fn threshold_needs_the_etcd_suite() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(&[
        "bench",
        "disk",
        dir.path().to_str().unwrap(),
        "--threshold",
        "5ms",
    ]);
    assert!(assert_error(&o).contains("--suite etcd"));
}

#[test]
fn a_shortened_suite_is_marked_non_standard() {
    let dir = tempfile::tempdir().unwrap();
    let (v, code) = bench_json(
        dir.path(),
        &[
            "--suite",
            "oltp",
            "--runtime",
            "200ms",
            "--ramp",
            "0",
            "--size",
            "16M",
            "--repeat",
            "1",
        ],
    );
    assert_eq!(code, Some(0));
    assert_eq!(v["suite"]["name"], "oltp");
    assert_eq!(v["suite"]["version"], 1);
    assert_eq!(v["suite"]["standard"], false);
    assert_eq!(v["suite"]["repeat"], 1);
    let t = &v["tests"][0];
    assert_eq!(t["rwmixread"], 57);
    assert!(t["read"].is_object() && t["write"].is_object());
}

/// A suite says where the whole run is: a line per test in a log ("test 1 of 7, about … left"),
/// and on a terminal a line above the bar, neither ever wider than the terminal (each line the
/// bar draws starts a row: none is the wrapped tail of another).
#[test]
fn a_suite_tells_test_n_of_all_and_the_time_left_and_its_bar_never_wraps() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().to_str().unwrap();
    let args = [
        "bench",
        "disk",
        target,
        "--suite",
        "quick",
        "--size",
        "8M",
        "--runtime",
        "300ms",
        "--ramp",
        "0",
        "--repeat",
        "1",
    ];
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let log = stderr(&o);
    assert!(log.contains("test 1 of 7, about 3 s left"), "{log}");
    assert!(log.contains("test 7 of 7, about 1 s left"), "{log}");

    for cols in [50u16, 80] {
        let mut cmd = tacho();
        cmd.args(args).env_remove("COLUMNS");
        let (drawn, o) = on_terminal(cmd, cols, true);
        assert!(o.status.success(), "{drawn}");
        assert!(drawn.contains("test 2 of 7, about"), "{drawn}");
        // The bar pads each of its lines to the terminal's width: cut what it drew at every
        // redraw into rows, and each row begins one of its lines.
        let plain = strip_csi(&drawn);
        for piece in plain.split(['\r', '\n']) {
            let chars: Vec<char> = piece.chars().collect();
            for row in chars.chunks(usize::from(cols)) {
                let row: String = row.iter().collect();
                let row = row.trim();
                let begins = row.is_empty()
                    || row.starts_with("test ")
                    || row.contains('[')
                    || row.contains("IOPS")
                    || !piece.contains('[');
                assert!(
                    begins,
                    "{cols} columns: {row:?} is the tail of a wrapped line in {piece:?}"
                );
            }
        }
    }
    assert_empty(dir.path());
}

/// `text` without its CSI control sequences (cursor moves, line clears).
fn strip_csi(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.next() == Some('[') {
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
