//! `tacho bench cpu` and `tacho bench mem` end to end with tiny runtimes: the JSON schema and
//! that every figure was measured. No timing is asserted (machines are noisy); see
//! benches/ for the figures.

use crate::common::*;
use serde_json::Value;

fn kernels(pass: &Value) -> Vec<&str> {
    pass["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect()
}

#[test]
fn cpu_json_has_both_passes_and_every_kernel() {
    let v = json_ok(&run(&[
        "bench",
        "cpu",
        "--runtime",
        "20ms",
        "--repeat",
        "2",
        "--threads",
        "2",
        "--json",
    ]));
    assert_eq!(v["schema"], "tacho.cpu.v1");
    assert!(v["host"].is_object());
    for pass in ["single_thread", "all_threads"] {
        let p = &v[pass];
        assert!(p["ops_per_s"].as_f64().unwrap() > 0.0, "{pass}: {p}");
        assert_eq!(kernels(p), ["primes", "integer", "float", "hash"]);
        for k in p["kernels"].as_array().unwrap() {
            assert!(k["ops_per_s"].as_f64().unwrap() > 0.0, "{k}");
            assert!(k["spread_pct"].as_f64().unwrap() >= 0.0, "{k}");
            assert_eq!(k["repeats_ops_per_s"].as_array().unwrap().len(), 2);
            assert!(!k["op"].as_str().unwrap().is_empty());
        }
    }
    assert_eq!(v["single_thread"]["threads"], 1);
    assert_eq!(v["all_threads"]["threads"], 2);
    assert!(v["scaling"].as_f64().unwrap() > 0.0);
    assert_eq!(v["interrupted"], false);
}

#[test]
fn cpu_kernel_filter_and_human_verdict() {
    let v = json_ok(&run(&[
        "bench",
        "cpu",
        "--runtime",
        "10ms",
        "--repeat",
        "1",
        "--kernel",
        "primes",
        "--json",
    ]));
    assert_eq!(kernels(&v["single_thread"]), ["primes"]);
    let o = run(&[
        "bench",
        "cpu",
        "--runtime",
        "10ms",
        "--repeat",
        "1",
        "--kernel",
        "hash",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("CPU score "), "{}", stdout(&o));
}

#[test]
fn mem_json_has_every_level_and_figure() {
    let v = json_ok(&run(&[
        "bench",
        "mem",
        "--runtime",
        "5ms",
        "--repeat",
        "1",
        "--dram-size",
        "16M",
        "--threads",
        "2",
        "--json",
    ]));
    assert_eq!(v["schema"], "tacho.mem.v1");
    let levels = v["levels"].as_array().unwrap();
    let names: Vec<&str> = levels.iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(names.last(), Some(&"DRAM"), "{names:?}");
    // Cache levels appear when sysfs describes them, in order.
    let caches = v["caches"].as_array().unwrap().len();
    assert_eq!(levels.len(), caches.min(3) + 1, "{names:?}");
    for l in levels {
        for key in [
            "read_bytes_per_s",
            "write_bytes_per_s",
            "copy_bytes_per_s",
            "latency_ns",
        ] {
            assert!(l[key].as_f64().unwrap() > 0.0, "{key} in {l}");
            assert!(
                l["all_threads"][key].as_f64().unwrap() > 0.0,
                "all_threads {key} in {l}"
            );
        }
        assert!(l["size_bytes"].as_u64().unwrap() > 0);
        assert_eq!(l["all_threads"]["threads"], 2);
    }
    let dram = levels.last().unwrap();
    assert_eq!(dram["size_bytes"], 16 << 20);
    assert_eq!(dram["all_threads"]["size_bytes"], 8 << 20);
}

#[test]
fn mem_level_filter_and_refusals() {
    let v = json_ok(&run(&[
        "bench",
        "mem",
        "--runtime",
        "5ms",
        "--repeat",
        "1",
        "--level",
        "dram",
        "--dram-size",
        "4M",
        "--threads",
        "1",
        "--json",
    ]));
    let levels = v["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 1);
    assert!(
        levels[0]["all_threads"].is_null(),
        "one thread: no all-threads pass"
    );
    let line = assert_error(&run(&["bench", "mem", "--dram-size", "100T"]));
    assert!(line.contains("--dram-size"), "{line}");
    let line = assert_error(&run(&["bench", "cpu", "--repeat", "0"]));
    assert!(line.contains("--repeat"), "{line}");
}
