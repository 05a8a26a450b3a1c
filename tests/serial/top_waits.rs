//! `tacho top` names what holds work back while nothing is saturated: a cgroup's CPU quota
//! (issue 32, "Throttling, named") and the tasks behind %iowait ("iowait explained"), checked
//! in the JSON and the text of the running binary. Every wait is for a sample that shows the
//! condition, within a generous number of samples.

use crate::common::cgroup::Cgroup;
use crate::common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::Stdio;

/// `n` Python busy loops in `cg`, killed when dropped.
fn burners(cg: &Cgroup, n: usize) -> Vec<Killed> {
    (0..n)
        .map(|_| {
            Killed(
                cg.command(&["python3", "-c", "while True: pass"])
                    .spawn()
                    .unwrap(),
            )
        })
        .collect()
}

/// Samples looked at before a test gives up (the VM is shared and slow at times).
const SAMPLES: &str = "40";

/// Runs `tacho top` with `args` until a line of its stdout satisfies `ok` (then stops it), or
/// it ends after its `--count`; returns that line, or `None` with every line printed.
fn first_line(args: &[&str], ok: impl Fn(&str) -> bool) -> Option<String> {
    let mut top = Killed(
        tacho()
            .args(["top", "--interval", "1s", "--count", SAMPLES, "--no-ebpf"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start tacho top"),
    );
    let out = BufReader::new(top.0.stdout.take().unwrap());
    let mut seen = Vec::new();
    for line in out.lines().map_while(Result::ok) {
        if ok(&line) {
            return Some(line);
        }
        seen.push(line);
    }
    eprintln!("{}", seen.join("\n"));
    None
}

fn findings(line: &str) -> Vec<Value> {
    let v: Value = serde_json::from_str(line).expect("a JSON line");
    v["findings"].as_array().unwrap().clone()
}

#[test]
fn a_cpu_burner_under_a_v1_quota_is_named_throttled_with_its_quota() {
    let _machine = kernel_wide();
    let name = format!("tacho-itest-throttle-{}", std::process::id());
    let Some(cg) = Cgroup::new("cpu", &name) else {
        return;
    };
    cg.set("cpu.cfs_period_us", "100000");
    cg.set("cpu.cfs_quota_us", "20000");
    // Two burners want 200% of a CPU: the quota bites in every period even on a busy VM.
    let burners = burners(&cg, 2);
    let pids: Vec<u64> = burners.iter().map(|b| u64::from(b.0.id())).collect();
    let subject = format!("/{name}");
    let throttled = |f: &Value| f["code"] == "cpu_throttled" && f["subject"] == subject.as_str();
    let line = first_line(&["--json", "--top", "1000"], |l| {
        findings(l).iter().any(&throttled)
    })
    .expect("no sample named the cgroup throttled");
    let all = findings(&line);
    let f = all.iter().find(|f| throttled(f)).unwrap();
    let message = f["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("{name} throttled ")) && message.contains("CPUQuota=20%"),
        "{message}"
    );
    assert!(
        message.contains(&format!("/sys/fs/cgroup/cpu/{name}/cpu.stat")),
        "{message}"
    );
    assert!(message.contains("cpu.cfs_quota_us"), "the fix: {message}");
    let named: Vec<u64> = f["culprits"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["pid"].as_u64())
        .collect();
    assert!(named.iter().any(|p| pids.contains(p)), "{f:#}");
    let v: Value = serde_json::from_str(&line).unwrap();
    let t = &v["throttling"]["cpu"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["cgroup"] == subject.as_str())
        .cloned()
        .unwrap();
    assert_eq!(
        (t["quota_us"].as_u64(), t["period_us"].as_u64()),
        (Some(20000), Some(100000))
    );
    assert!(t["throttled_periods"].as_u64().unwrap() > 0, "{t:#}");
    // The text verdicts say the same.
    let text = first_line(&["--batch"], |l| {
        l.contains(&format!("{name} throttled ")) && l.contains("CPUQuota=20%")
    });
    assert!(
        text.is_some(),
        "no --batch verdict named the cgroup throttled"
    );
    drop(burners);
}

/// Reads a block device with O_DIRECT, 4 KiB at a time from the start, round and round.
const READER: &str = r#"
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
size = os.lseek(fd, 0, os.SEEK_END)
buf = mmap.mmap(-1, 4096)
off = 0
while True:
    os.preadv(fd, [buf], off)
    off = (off + 4096) % size
"#;

#[test]
fn a_reader_in_d_state_on_a_slow_device_is_named_behind_the_io_wait() {
    let _machine = kernel_wide();
    let test = "iowait_d_state";
    if !is_root() {
        skip(&format!("{test}: needs root for a loop device and FUSE"));
        return;
    }
    // Every read of the loop device's backing file waits 0.5 s in the FUSE server.
    let backing = tempfile::tempdir().unwrap();
    let fuse = FuseMount::start(backing.path(), &["--delay", "0.5", "--direct-io"]);
    let Some(dev) = LoopDev::new_in(test, 16 << 20, fuse.path()) else {
        return;
    };
    let reader = Killed(
        std::process::Command::new("python3")
            .args(["-c", READER, dev.path()])
            .spawn()
            .unwrap(),
    );
    let pid = u64::from(reader.0.id());
    let named = format!("(pid {pid}");
    let explains = |f: &Value| {
        ["iowait_tasks", "iowait_idle_disks"].contains(&f["code"].as_str().unwrap_or(""))
            && f["message"].as_str().unwrap().contains(&named)
    };
    let line = first_line(&["--json"], |l| findings(l).iter().any(&explains))
        .expect("no sample named the reader behind the I/O wait");
    let v: Value = serde_json::from_str(&line).unwrap();
    let f = findings(&line).into_iter().find(|f| explains(f)).unwrap();
    let message = f["message"].as_str().unwrap();
    eprintln!("{message}");
    assert!(message.contains("D state"), "{message}");
    let waiter = v["io_waiters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["pid"].as_u64() == Some(pid))
        .cloned()
        .unwrap_or_else(|| panic!("{:#}", v["io_waiters"]));
    assert_eq!(waiter["comm"], "python3", "{waiter:#}");
    assert_eq!(waiter["waits_on"], "disk", "{waiter:#}");
    // The text verdicts name it too.
    let text = first_line(&["--batch"], |l| {
        l.contains(&named) && l.contains("D state")
    });
    assert!(text.is_some(), "no --batch verdict named the reader");
    drop(reader);
    drop(dev);
    drop(fuse);
}

fn devno(dev: &LoopDev) -> String {
    use std::os::unix::fs::MetadataExt;
    let rdev = std::fs::metadata(dev.path()).unwrap().rdev();
    format!("{}:{}", libc::major(rdev), libc::minor(rdev))
}

/// The first finding with `code` about the cgroup `/name` in a `top --json` sample, or a
/// panic naming what was awaited.
fn limit_finding(code: &str, name: &str) -> Value {
    let subject = format!("/{name}");
    let about = |f: &Value| f["code"] == code && f["subject"] == subject.as_str();
    let line = first_line(&["--json", "--top", "1000"], |l| {
        findings(l).iter().any(about)
    })
    .unwrap_or_else(|| panic!("no sample had {code} about {subject}"));
    findings(&line).into_iter().find(about).unwrap()
}

#[test]
fn a_writer_at_its_v1_blkio_limit_is_named_held_at_it() {
    let _machine = kernel_wide();
    let test = "io_throttled";
    let Some(dev) = LoopDev::new(test, 64 << 20) else {
        return;
    };
    let name = format!("tacho-itest-{test}-{}", std::process::id());
    let Some(cg) = Cgroup::new("blkio", &name) else {
        return;
    };
    cg.set(
        "blkio.throttle.write_bps_device",
        &format!("{} 1048576", devno(&dev)),
    );
    // 64 KiB direct writes, round and round: sixteen a second at the limit, so each
    // interval's rate is close to it.
    let w = Killed(
        cg.command(&["python3", "-c", DIRECT_WRITER, dev.path()])
            .spawn()
            .unwrap(),
    );
    let f = limit_finding("io_throttled", &name);
    let message = f["message"].as_str().unwrap();
    eprintln!("{message}");
    assert!(
        message.starts_with(&format!("{name} held at its I/O limit on {}: ", dev.name()))
            && message.contains("written of wbps 1.00 MiB/s"),
        "{message}"
    );
    assert!(
        message.contains("blkio.throttle.write_bps_device"),
        "the fix: {message}"
    );
    let pids: Vec<u64> = f["culprits"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["pid"].as_u64())
        .collect();
    assert!(pids.contains(&u64::from(w.0.id())), "{f:#}");
    drop(w);
}

#[test]
fn a_reader_over_its_v1_memory_limit_is_named_with_its_failures() {
    let _machine = kernel_wide();
    let test = "memory_limited";
    let Some(dev) = LoopDev::new(test, 128 << 20) else {
        return;
    };
    let name = format!("tacho-itest-{test}-{}", std::process::id());
    let Some(cg) = Cgroup::new("memory", &name) else {
        return;
    };
    cg.set("memory.limit_in_bytes", &(16u64 << 20).to_string());
    // Buffered reads of 128 MiB through a 16 MiB limit: the page cache it fills is reclaimed
    // at the limit, over and over, each time counted in memory.failcnt.
    let reader = r#"
import sys
while True:
    with open(sys.argv[1], "rb") as f:
        while f.read(1 << 20):
            pass
"#;
    let r = Killed(
        cg.command(&["python3", "-c", reader, dev.path()])
            .spawn()
            .unwrap(),
    );
    let f = limit_finding("memory_limited", &name);
    let message = f["message"].as_str().unwrap();
    eprintln!("{message}");
    assert!(
        message.starts_with(&format!("{name} hit its memory limit 16.0 MiB "))
            && message.contains("memory.failcnt"),
        "{message}"
    );
    assert!(
        message.contains("memory.limit_in_bytes"),
        "the fix: {message}"
    );
    drop(r);
}

/// The recorder keeps the limited cgroups' counters, so a replay names the throttling too.
#[test]
fn a_replay_names_the_throttled_cgroup_the_recorder_saw() {
    let _machine = kernel_wide();
    let name = format!("tacho-itest-throttle-replay-{}", std::process::id());
    let Some(cg) = Cgroup::new("cpu", &name) else {
        return;
    };
    cg.set("cpu.cfs_quota_us", "20000");
    let burners = burners(&cg, 2);
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.db");
    let recorder = Killed(
        tacho()
            .args(["record", "--interval", "1s", "--history"])
            .arg(&history)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let subject = format!("/{name}");
    let start = std::time::Instant::now();
    let f = loop {
        let o = run(&[
            "top",
            "--replay",
            "--json",
            "--history",
            history.to_str().unwrap(),
        ]);
        if o.status.success() {
            let line = stdout(&o);
            if let Some(f) = findings(line.trim())
                .into_iter()
                .find(|f| f["code"] == "cpu_throttled" && f["subject"] == subject.as_str())
            {
                break f;
            }
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "no replayed interval named {subject} throttled: {}",
            stderr(&o)
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    assert!(
        f["message"].as_str().unwrap().contains("CPUQuota=20%"),
        "{f:#}"
    );
    drop(recorder);
    drop(burners);
}
