//! `tacho top` as root splits each device's await into queue and service time (eBPF): the
//! honest `svctm`. A loop device under an O_DIRECT writer gets both, and they add up to no more
//! than its await allows (log2 histograms: within a factor of two).

mod common;

use common::{Killed, LoopDev, direct_writer, is_root, skip, tacho};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::Stdio;

#[test]
fn a_busy_device_shows_queue_and_service_time_within_its_await() {
    let test = "a_busy_device_shows_queue_and_service_time_within_its_await";
    if !is_root() {
        return skip(&format!("{test}: needs root"));
    }
    let Some(dev) = LoopDev::new(test, 64 << 20) else {
        return;
    };
    let path = dev.dev.to_str().unwrap().to_owned();
    let name = path.trim_start_matches("/dev/").to_owned();
    let _writer = direct_writer(&path);
    let mut top = Killed(
        tacho()
            .args(["top", "--json", "--interval", "500ms", "--count", "6"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let lines = BufReader::new(top.0.stdout.take().unwrap()).lines();
    let mut seen = None;
    for line in lines.map_while(Result::ok) {
        let sample: Value = serde_json::from_str(&line).unwrap();
        let disk = sample["disks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == name.as_str())
            .cloned();
        if let Some(d) = disk.filter(|d| d["w_per_s"].as_f64().unwrap_or(0.0) > 100.0) {
            seen = Some(d);
        }
    }
    let d = seen.unwrap_or_else(|| panic!("{name} never showed the writer"));
    let service = d["service_p50_ms"].as_f64().expect("service time traced");
    let p99 = d["service_p99_ms"].as_f64().expect("service p99 traced");
    let queue = d["queue_p50_ms"].as_f64().expect("queue time traced");
    let await_ms = d["w_await_ms"].as_f64().unwrap();
    assert!(service > 0.0 && p99 >= service && queue >= 0.0, "{d}");
    assert!(
        service <= 2.0 * await_ms + 0.01,
        "service p50 {service} ms beyond twice the await {await_ms} ms: {d}"
    );
}
