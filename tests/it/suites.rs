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
