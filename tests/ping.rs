//! `tacho ping`: ioping's lines and summary, its JSON, and the usual write safety.

mod common;

use common::{LoopDev, assert_empty, assert_error, json_ok, run, stdout};

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
    assert_eq!(doc["target"]["direct"], true);
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
