//! Per-process block IOPS and latency (`tacho top` as root, eBPF): a fio job at a fixed rate
//! on a slowed loop device is given its own request count, rate and p99 as fio measured them,
//! and a process with a hostile name has its row in JSON and an escaped one in the text.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::{
    self, FuseMount, Killed, LoopDev, SpawnPiped, is_root, skip, stderr, tacho, wait_output,
};

/// The rows of `block_io_processes` of one sample for `pid` on `device`.
fn rows<'a>(doc: &'a Value, pid: u32, device: &str) -> Vec<&'a Value> {
    doc["block_io_processes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["pid"] == pid && r["device"] == device)
        .collect()
}

#[test]
fn a_fio_job_at_a_fixed_rate_gets_its_iops_count_and_p99() {
    let test = "a_fio_job_at_a_fixed_rate_gets_its_iops_count_and_p99";
    if !is_root() {
        return skip(&format!("{test}: needs root"));
    }
    if !common::have_tool("fio") {
        return skip(&format!("{test}: fio is not installed"));
    }
    // Every read takes ~2 ms (a FUSE server sleeping under the loop device's image), so fio's
    // completion latency is nearly all block-layer time; 200 reads/s at queue depth 1 leave
    // the device idle 60% of the time, so the rate holds.
    let backing = tempfile::tempdir_in("/dev/shm").unwrap();
    let fs = FuseMount::start(backing.path(), &["--delay", "0.002", "--direct-io"]);
    let Some(dev) = LoopDev::new_in(test, 16 << 20, fs.path()) else {
        return;
    };
    let name = dev.name();
    let mut top = Killed(
        tacho()
            .args(["top", "--json", "--interval", "1s", "--top", "50"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(top.0.stdout.take().unwrap()).lines();
    // The first line means the programs are attached.
    let _ = lines.next().unwrap().unwrap();
    // --thread: the job's I/O is submitted by fio's own process (one pid to look for).
    let fio = Command::new("fio")
        .args([
            "--name=iops",
            &format!("--filename={}", dev.path()),
            "--rw=randread",
            "--bs=4k",
            "--direct=1",
            "--ioengine=psync",
            "--rate_iops=200",
            "--runtime=6",
            "--time_based",
            "--thread",
            "--output-format=json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = fio.id();
    let fio = fio.wait_with_output().unwrap();
    assert!(fio.status.success(), "{}", stderr(&fio));
    let report: Value = serde_json::from_slice(&fio.stdout).unwrap();
    let read = &report["jobs"][0]["read"];
    let reads = read["total_ios"].as_u64().unwrap();
    // fio has exited: read until an interval after its busy ones shows none of its I/O.
    let mut busy: Vec<Value> = Vec::new();
    let mut counted = 0.0;
    let mut seen = Vec::new();
    for _ in 0..20 {
        let doc: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        let mine = rows(&doc, pid, &name);
        seen.push((
            doc["interval_s"].clone(),
            mine.first().map(|r| r["iops"].clone()),
        ));
        assert!(mine.len() <= 1, "one row per process and device: {doc}");
        match mine.first() {
            Some(r) => {
                // The rate times the sample's interval is the interval's request count.
                counted += r["iops"].as_f64().unwrap() * doc["interval_s"].as_f64().unwrap();
                busy.push((*r).clone());
            }
            None if !busy.is_empty() => break,
            None => {}
        }
    }
    // A loaded machine has stretched one of top's intervals to 3.4 s: the run's 6 s may
    // span as few as three.
    assert!(
        busy.len() >= 3,
        "fio ({pid}) showed in {} intervals on {name}: {seen:?}",
        busy.len()
    );
    // Every request fio completed, counted once (tracing began before fio started).
    println!("fio {reads} reads, traced {counted:.1}; rows {busy:?}");
    assert!(
        (counted - reads as f64).abs() <= reads as f64 * 0.01 + 2.0,
        "traced {counted:.1} reads vs fio's {reads}"
    );
    // The intervals wholly inside the run hold fio's rate, all of it reads.
    for r in &busy[1..busy.len() - 1] {
        let iops = r["iops"].as_f64().unwrap();
        assert!(
            (iops - 200.0).abs() <= 200.0 * 0.05,
            "{iops} IOPS in a whole interval of a 200 IOPS job: {r}"
        );
        assert_eq!(r["read_iops"], r["iops"], "{r}");
        assert_eq!(r["write_iops"].as_f64(), Some(0.0), "{r}");
        let bytes = r["bytes_per_s"].as_f64().unwrap();
        assert!((bytes - iops * 4096.0).abs() < 1.0, "{r}");
    }
    // tacho's per-process buckets are a quarter octave wide: a percentile interpolated in its
    // bucket is within a quarter of the true value (seen: p50 2.39 ms against fio's 2.25 ms).
    let pct = |p: &str| read["clat_ns"]["percentile"][p].as_f64().unwrap() / 1e6;
    let (fio_p50, fio_p99, fio_p999) = (pct("50.000000"), pct("99.000000"), pct("99.900000"));
    let mut p99s: Vec<f64> = busy[1..busy.len() - 1]
        .iter()
        .map(|r| r["lat_p99_ms"].as_f64().unwrap())
        .collect();
    p99s.sort_by(f64::total_cmp);
    let highest = p99s[p99s.len() - 1];
    let p50 = busy[1]["lat_p50_ms"].as_f64().unwrap();
    println!(
        "p99s {p99s:?} ms vs fio p99 {fio_p99:.3}, p99.9 {fio_p999:.3} ms; \
         p50 {p50:.3} ms vs fio {fio_p50:.3} ms"
    );
    // An interval's p99 is its second slowest request of ~200, so it can be compared with
    // fio's run-wide p99 only in bulk: fio's twelve slowest of ~1,200 reads may fall two to an
    // interval (seen in CI: whole intervals 4.72 and 7.34 ms against fio's p99 5.21 ms). A
    // bound that holds for every interval but one: tacho times a read from issue to
    // completion, inside fio's submit-to-reap clat, so no more reads pass a latency by
    // tacho's clock than by fio's; about one read passes fio's p99.9, so at most one interval
    // holds two reads beyond it. Buckets are a quarter octave (x1.19) wide, hence the 1.25.
    // And the slowest interval's p99 reaches half of fio's: fio's tail also holds its own
    // wake-up after each read, which a loaded machine stretches (seen under the whole suite:
    // 3.15-3.67 ms traced against fio's 5.34 ms).
    let beyond = p99s.iter().filter(|&&p| p > fio_p999 * 1.25).count();
    assert!(
        beyond <= 1 && highest >= fio_p99 * 0.5,
        "whole intervals' p99s {p99s:?} ms vs fio's p99 {fio_p99:.3} and p99.9 {fio_p999:.3} ms"
    );
    for r in &busy[1..busy.len() - 1] {
        let (p50, p99) = (r["lat_p50_ms"].as_f64(), r["lat_p99_ms"].as_f64());
        assert!(p50 <= p99, "{r}");
    }
    assert!(
        p50 <= fio_p50 * 1.25 && p50 >= fio_p50 * 0.75,
        "p50 {p50:.3} ms vs fio clat {fio_p50:.3} ms"
    );
    // One reader at queue depth 1: nearly all of its time is the device's.
    for r in &busy[1..busy.len() - 1] {
        let queued = r["queued_pct"].as_f64().unwrap();
        let mean = r["lat_mean_ms"].as_f64().unwrap();
        let queue = r["queue_mean_ms"].as_f64().unwrap();
        assert!((0.0..20.0).contains(&queued), "{r}");
        assert!((queue / mean * 100.0 - queued).abs() < 1e-6, "{r}");
        assert!(mean >= 1.9 && mean <= fio_p99 * 1.1, "{r}");
    }
}

/// Renames itself (PR_SET_NAME) to a name with an escape sequence and a newline, then reads
/// 4 KiB blocks of its device with O_DIRECT, ~500 a second, until killed.
const HOSTILE_READER: &str = r#"
import ctypes, mmap, os, sys, time
ctypes.CDLL(None).prctl(15, b"io\x1b[2J\nevil", 0, 0, 0)
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
size = os.lseek(fd, 0, os.SEEK_END)
buf = mmap.mmap(-1, 4096)
off = 0
print("renamed", flush=True)
while True:
    os.preadv(fd, [buf], off)
    off = (off + 4096) % size
    time.sleep(0.002)
"#;

#[test]
fn a_hostile_process_name_has_its_block_io_row_in_json_and_escaped_in_text() {
    let test = "a_hostile_process_name_has_its_block_io_row_in_json_and_escaped_in_text";
    let Some(dev) = LoopDev::new(test, 16 << 20) else {
        return;
    };
    let name = dev.name();
    let mut reader = Killed(
        Command::new("python3")
            .args(["-c", HOSTILE_READER, dev.path()])
            .stdout(Stdio::piped())
            .spawn()
            .expect("cannot start python3"),
    );
    let pid = reader.0.id();
    let mut line = String::new();
    BufReader::new(reader.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "renamed");
    let each = ["top", "--interval", "500ms", "--count", "3", "--top", "50"];
    let json = wait_output(
        tacho().args(each).arg("--json").spawn_piped(),
        Duration::from_secs(60),
    );
    // 1 is a warning verdict (another test's load): the figures are written all the same.
    assert!(
        json.status.code().is_some_and(|c| c <= 1),
        "{}",
        stderr(&json)
    );
    let docs: Vec<Value> = String::from_utf8_lossy(&json.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let row = docs
        .iter()
        .find_map(|d| rows(d, pid, &name).first().map(|r| (*r).clone()))
        .unwrap_or_else(|| panic!("no block_io_processes row for {pid} on {name}: {docs:?}"));
    assert_eq!(row["comm"], "io\u{1b}[2J\nevil", "{row}");
    for field in [
        "pid",
        "comm",
        "unit",
        "exited",
        "device",
        "iops",
        "read_iops",
        "write_iops",
        "bytes_per_s",
        "lat_p50_ms",
        "lat_p99_ms",
        "lat_mean_ms",
        "queue_mean_ms",
        "queued_pct",
    ] {
        assert!(row.get(field).is_some(), "no {field}: {row}");
    }
    let iops = row["read_iops"].as_f64().unwrap();
    assert!(iops > 50.0, "{row}");
    assert!(
        row["lat_p99_ms"].as_f64().unwrap() >= row["lat_p50_ms"].as_f64().unwrap(),
        "{row}"
    );
    // Its service, when it has one, has a row too with at least its requests.
    if let Some(unit) = row["unit"].as_str() {
        let units = docs
            .iter()
            .flat_map(|d| d["block_io_units"].as_array().cloned().unwrap_or_default())
            .find(|u| u["unit"] == unit && u["device"] == name.as_str());
        let u = units.unwrap_or_else(|| panic!("no block_io_units row for {unit}: {docs:?}"));
        assert!(u["processes"].as_u64().unwrap() >= 1, "{u}");
    }

    let text = wait_output(
        tacho().args(each).arg("--batch").spawn_piped(),
        Duration::from_secs(60),
    );
    assert!(
        text.status.code().is_some_and(|c| c <= 1),
        "{}",
        stderr(&text)
    );
    let out = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        !out.contains('\u{1b}'),
        "a raw ESC reached the text: {out:?}"
    );
    assert!(out.contains("Block I/O by process (eBPF"), "{out}");
    let ours: Vec<&str> = out
        .lines()
        .filter(|l| l.trim_start().starts_with(&format!("{pid} ")) && l.contains(&name))
        .collect();
    assert!(!ours.is_empty(), "no row for {pid} on {name}:\n{out}");
    assert!(
        ours.iter().all(|l| l.contains("io\\e[2J\\nevil")),
        "not escaped: {ours:?}"
    );
    assert!(!out.lines().any(|l| l.starts_with("evil")), "{out}");
}
