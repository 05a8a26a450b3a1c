//! `tacho ping`: ioping's lines and summary, its JSON, and the usual write safety.

use crate::common;
use crate::common::{LoopDev, assert_empty, assert_error, json_ok, run, stdout};

#[test]
fn a_directory_is_pinged_through_a_test_file_that_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let o = run(&["ping", "-c", "4", "-i", "0", d]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("request=")).collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(lines[0].ends_with("(warmup)"), "{text}");
    assert!(lines[1].starts_with("4KiB <<< "), "{text}");
    assert!(text.contains("ping statistics ---"), "{text}");
    assert!(text.contains("3 requests completed in "), "{text}");
    assert!(text.contains("min/avg/max/mdev = "), "{text}");
    assert_empty(dir.path());
}

#[test]
fn the_json_summary_is_computed_from_the_counted_requests() {
    let dir = tempfile::tempdir().unwrap();
    let doc = json_ok(&run(&[
        "ping",
        "-c",
        "5",
        "-i",
        "0",
        "-s",
        "8k",
        "--json",
        dir.path().to_str().unwrap(),
    ]));
    assert_eq!(doc["schema"], "tacho.ping.v1");
    let reqs = doc["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 5);
    assert_eq!(reqs[0]["warmup"], true);
    let times: Vec<u64> = reqs[1..]
        .iter()
        .map(|r| r["time_ns"].as_u64().unwrap())
        .collect();
    for r in reqs {
        let off = r["offset"].as_u64().unwrap();
        assert!(off % 8192 == 0 && off + 8192 <= 1 << 20, "{r}");
    }
    let s = &doc["summary"];
    assert_eq!(s["requests"], 4);
    assert_eq!(s["bytes"], 4 * 8192);
    assert_eq!(s["min_ns"].as_u64(), times.iter().min().copied());
    assert_eq!(s["max_ns"].as_u64(), times.iter().max().copied());
    assert_eq!(s["total_ns"].as_u64(), Some(times.iter().sum()));
    // The mean and the standard deviation of the population (ioping's mdev), as computed
    // from the list: the running figures agree to the nanosecond's rounding.
    let n = times.len() as f64;
    let mean = times.iter().sum::<u64>() as f64 / n;
    let mdev = (times
        .iter()
        .map(|&t| (t as f64 - mean).powi(2))
        .sum::<f64>()
        / n)
        .sqrt();
    assert_eq!(s["avg_ns"].as_u64(), Some(mean.round() as u64));
    let got = s["mdev_ns"].as_f64().unwrap();
    assert!((got - mdev).abs() <= 1.0, "mdev {got} against {mdev}");
    assert_eq!(doc["target"]["direct"], true);
    assert_eq!(doc["interrupted"], false);
}

/// Resident memory of `pid`, KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

#[test]
fn an_endless_ping_without_pause_runs_in_constant_memory() {
    use std::io::Read;
    use std::time::Duration;
    // Buffered, so requests are as fast as the page cache answers (ioping -i 0 -C).
    let dir = tempfile::tempdir().unwrap();
    for json in [false, true] {
        let mut cmd = common::tacho();
        cmd.args(["ping", "-i", "0", "--buffered"]);
        if json {
            cmd.arg("--json");
        }
        let mut child = cmd
            .arg(dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut out = child.stdout.take().unwrap();
        let lines = std::thread::spawn(move || {
            let mut n = 0u64;
            let mut buf = vec![0u8; 1 << 16];
            while let Ok(got) = out.read(&mut buf) {
                if got == 0 {
                    break;
                }
                n += buf[..got].iter().filter(|&&b| b == b'\n').count() as u64;
            }
            n
        });
        std::thread::sleep(Duration::from_secs(4));
        let early = rss_kib(child.id());
        std::thread::sleep(Duration::from_secs(4));
        let late = rss_kib(child.id());
        // SAFETY: signals the child this test started.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let status = common::wait_limited(&mut child, Duration::from_secs(30));
        assert_eq!(status.code(), Some(0));
        let requests = lines.join().unwrap();
        assert!(
            requests > 20_000,
            "only {requests} requests: too few to tell"
        );
        // A list of requests grew by about 40 bytes each (1 MiB per 26,000 requests).
        assert!(
            late <= early + 512,
            "json {json}: {early} KiB after 4 s, {late} KiB after 8 s ({requests} requests)"
        );
    }
    assert_empty(dir.path());
}

#[test]
fn writes_to_data_need_consent_and_bad_sizes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data");
    std::fs::write(&file, vec![7u8; 1 << 20]).unwrap();
    let f = file.to_str().unwrap();
    let err = assert_error(&run(&["ping", "--write", "-c", "2", f]));
    assert!(err.contains("--destroy-data"), "{err}");
    assert_eq!(std::fs::read(&file).unwrap(), vec![7u8; 1 << 20]);
    let err = assert_error(&run(&["ping", "-c", "2", "-s", "1000", f]));
    assert!(err.contains("logical block size"), "{err}");
    let err = assert_error(&run(&["ping", "-c", "2", "-S", "4k", "-s", "8k", f]));
    assert!(err.contains("--work-size"), "{err}");
    let err = assert_error(&run(&["ping", "-c", "2", "-S", "2M", f]));
    assert!(err.contains("larger than the target"), "{err}");
}

#[test]
fn consented_writes_change_only_the_working_set() {
    let Some(lo) = LoopDev::new("ping writes", 4 << 20) else {
        return;
    };
    let before = lo.content();
    let doc = json_ok(&run(&[
        "ping",
        "--write",
        "--destroy-data",
        "-c",
        "3",
        "-i",
        "0",
        "-S",
        "64k",
        "--json",
        lo.path(),
    ]));
    assert_eq!(doc["target"]["operation"], "write");
    let after = lo.content();
    assert_ne!(before[..64 << 10], after[..64 << 10], "writes landed");
    assert_eq!(
        before[64 << 10..],
        after[64 << 10..],
        "outside the working set"
    );
}

#[test]
fn ctrl_c_ends_an_endless_ping_with_the_summary_and_no_file_left() {
    use std::io::{BufRead, BufReader, Read};
    let dir = tempfile::tempdir().unwrap();
    let mut child = common::tacho()
        .args(["ping", "-i", "20ms"])
        .arg(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    // Waits for the third request's line: the warm-up and two counted ones.
    while seen.matches("request=").count() < 3 {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "ended early: {seen}");
        seen.push_str(&line);
    }
    // SAFETY: signals the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    out.read_to_string(&mut seen).unwrap();
    let status = common::wait_limited(&mut child, std::time::Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{seen}");
    assert!(seen.contains("ping statistics ---"), "{seen}");
    assert!(seen.contains("min/avg/max/mdev = "), "{seen}");
    assert_empty(dir.path());
}
