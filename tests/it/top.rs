//! `tacho top` through the binary: JSON lines, text, bad input, the Prometheus endpoint, and
//! side-by-side agreement with iostat -x and free on the same interval.

use crate::common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::Command;
use std::time::{Duration, Instant};

fn json_lines(o: &std::process::Output) -> Vec<Value> {
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[test]
fn json_is_one_object_per_sample_with_the_documented_fields() {
    let o = run(&["top", "--json", "--count", "2", "--interval", "200ms"]);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
    let samples = json_lines(&o);
    assert_eq!(samples.len(), 2);
    for s in &samples {
        assert_eq!(s["schema"], "tacho.top.v3");
        assert!(s["verdict"].as_str().is_some_and(|v| !v.is_empty()));
        for k in [
            "user_pct",
            "system_pct",
            "iowait_pct",
            "irq_pct",
            "softirq_pct",
            "steal_pct",
            "idle_pct",
        ] {
            assert!(s["cpu"][k].is_number(), "cpu.{k}");
        }
        for k in [
            "total_bytes",
            "used_bytes",
            "free_bytes",
            "shared_bytes",
            "buffers_bytes",
            "cache_bytes",
            "available_bytes",
        ] {
            assert!(s["memory"][k].is_u64(), "memory.{k}");
        }
        let disks = s["disks"].as_array().unwrap();
        assert!(!disks.is_empty());
        for k in [
            "name",
            "r_per_s",
            "w_per_s",
            "rkb_per_s",
            "wkb_per_s",
            "r_await_ms",
            "w_await_ms",
            "aqu_sz",
            "util_pct",
        ] {
            assert!(!disks[0][k].is_null(), "disks[].{k}");
        }
        assert!(s["processes"].is_array() && s["net"].is_array() && s["findings"].is_array());
        assert!(s["psi"].is_object());
        let interval = s["interval_s"].as_f64().unwrap();
        assert!((0.15..1.0).contains(&interval), "{interval}");
        // Exit 1 exactly when a warning was found.
        let warned = s["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["severity"] != "info");
        if warned {
            assert_eq!(o.status.code(), Some(1));
        }
    }
}

#[test]
fn batch_text_leads_with_the_verdict_and_uses_iostat_names() {
    let o = run(&[
        "top",
        "--batch",
        "--count",
        "1",
        "--interval",
        "200ms",
        "--sort",
        "cpu",
    ]);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
    let text = stdout(&o);
    let first = text.lines().next().unwrap();
    assert!(
        !first.starts_with(' ') && !first.contains("%usr") && !first.contains("UTC"),
        "{first}"
    );
    for header in [
        "%soft",
        "available",
        "rareq-sz",
        "w_await",
        "aqu-sz",
        "%util",
        "kB_wr/s",
        "rxkB/s",
    ] {
        assert!(text.contains(header), "missing {header} in\n{text}");
    }
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
}

#[test]
fn bad_input_is_one_line_naming_the_fix() {
    for (args, needle) in [
        (vec!["top", "--batch", "--interval", "10ms"], "100ms"),
        (vec!["top", "--batch", "--interval", "-1s"], "negative"),
        (vec!["top", "--batch", "--count", "0"], "count"),
        (vec!["top", "--batch", "--top", "0"], "top"),
        (vec!["top", "--listen", "localhost"], "listen"),
        (vec!["top", "--sort", "size"], "sort"),
        // No terminal (stdout is a pipe here) and no --batch/--json.
        (vec!["top", "--count", "1"], "--batch"),
    ] {
        let o = run(&args);
        let line = assert_error(&o);
        assert!(line.contains(needle), "{args:?}: {line}");
    }
}

#[test]
fn a_taken_port_is_a_clean_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let o = run(&["top", "--json", "--count", "1", "--listen", &addr]);
    let line = assert_error(&o);
    assert!(line.contains(&addr) && line.contains("--listen"), "{line}");
}

#[test]
fn listen_serves_prometheus_text_on_loopback() {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = tacho()
        .args([
            "top",
            "--json",
            "--interval",
            "200ms",
            "--count",
            "50",
            "--listen",
            &addr,
        ])
        .spawn_piped();
    let mut lines = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    lines.read_line(&mut first).unwrap();
    let sample: Value = serde_json::from_str(&first).unwrap();
    let metrics = http_get(port, "/metrics");
    let missing = http_get(port, "/other");
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        metrics.starts_with("HTTP/1.1 200") || metrics.starts_with("HTTP/1.0 200"),
        "{metrics}"
    );
    assert!(metrics.contains("text/plain; version=0.0.4"), "{metrics}");
    for name in [
        "tacho_cpu_user_ratio ",
        "tacho_memory_available_bytes ",
        "tacho_load_runnable ",
        "# TYPE tacho_disk_util_ratio gauge",
    ] {
        assert!(metrics.contains(name), "missing {name}");
    }
    let disk = sample["disks"][0]["name"].as_str().unwrap();
    assert!(
        metrics.contains(&format!("tacho_disk_w_await_seconds{{device=\"{disk}\"")),
        "{metrics}"
    );
    assert!(missing.contains(" 404 "), "{missing}");
}

/// Reads a number from iostat's JSON (it prints two decimals).
fn iostat_field(dev: &Value, key: &str) -> f64 {
    dev[key]
        .as_f64()
        .unwrap_or_else(|| panic!("iostat has no {key}: {dev}"))
}

/// Waits until `/proc/diskstats` shows no I/O on `name` over three polls in a row (another
/// reader of a new device, such as udev's blkid, has finished).
fn wait_until_idle(name: &str) {
    let counters = || {
        let text = std::fs::read_to_string("/proc/diskstats").unwrap();
        text.lines()
            .find(|l| l.split_whitespace().nth(2) == Some(name))
            .map(str::to_string)
    };
    let start = Instant::now();
    let (mut last, mut same) = (counters(), 0);
    while same < 3 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{name} never went idle: {last:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
        let now = counters();
        same = if now == last { same + 1 } else { 0 };
        last = now;
    }
}

/// Waits until process `pid`'s main thread sleeps out its interval, which both tools do
/// right after reading their first counters (tacho in nanosleep, iostat in pause for its
/// alarm).
fn wait_asleep(pid: u32, what: &str) {
    let mut sleeping = vec![
        libc::SYS_nanosleep,
        libc::SYS_clock_nanosleep,
        libc::SYS_rt_sigsuspend,
    ];
    #[cfg(target_arch = "x86_64")]
    sleeping.push(libc::SYS_pause);
    let sleeping: Vec<String> = sleeping.iter().map(|n| n.to_string()).collect();
    let start = Instant::now();
    loop {
        let syscall = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
        let number = syscall.split_whitespace().next().unwrap_or_default();
        if sleeping.iter().any(|n| n == number) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what} never started its interval: {syscall}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn disk_columns_agree_with_iostat_on_the_same_interval() {
    if !have_tool("iostat") {
        skip("iostat comparison: sysstat is not installed (apt-get install sysstat)");
        return;
    }
    let Some(lo) = LoopDev::new("iostat comparison", 64 << 20) else {
        return;
    };
    let name = lo.name();
    // Let udev finish probing the new device, so only our load lands in the window.
    let _ = Command::new("udevadm").arg("settle").status();
    wait_until_idle(&name);
    // Both tools open a 3 s window; the load runs entirely inside both.
    let iostat = Command::new("iostat")
        .args(["-x", "-d", "-y", "-o", "JSON", &name, "3", "1"])
        .spawn_piped();
    let top = tacho()
        .args(["top", "--json", "--interval", "3s", "--count", "1"])
        .spawn_piped();
    // Both have read their first counters once they sleep out their interval.
    wait_asleep(iostat.id(), "iostat");
    wait_asleep(top.id(), "tacho top");
    let dev = lo.path();
    sh(
        "dd",
        &[
            "if=/dev/zero",
            &format!("of={dev}"),
            "bs=4k",
            "count=3000",
            "oflag=direct",
            "status=none",
        ],
    );
    sh(
        "dd",
        &[
            &format!("if={dev}"),
            "of=/dev/null",
            "bs=16k",
            "count=1000",
            "iflag=direct",
            "status=none",
        ],
    );
    sh(
        "dd",
        &[
            "if=/dev/zero",
            &format!("of={dev}"),
            "bs=64k",
            "count=200",
            "oflag=dsync",
            "status=none",
        ],
    );
    let iostat = wait_output(iostat, Duration::from_secs(30));
    let top = wait_output(top, Duration::from_secs(30));
    let io: Value = serde_json::from_slice(&iostat.stdout).unwrap();
    let io_dev = &io["sysstat"]["hosts"][0]["statistics"][0]["disk"][0];
    assert_eq!(io_dev["disk_device"], name.as_str());
    let t = &json_lines(&top)[0];
    let t_dev = t["disks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == name.as_str())
        .unwrap();

    assert!(
        iostat_field(io_dev, "w/s") > 100.0,
        "the load must show: {io_dev}"
    );
    // Per-request columns come from the same deltas: equal within iostat's rounding.
    for (ours, theirs) in [
        ("rrqm_pct", "rrqm"),
        ("r_await_ms", "r_await"),
        ("rareq_sz_kb", "rareq-sz"),
        ("wrqm_pct", "wrqm"),
        ("w_await_ms", "w_await"),
        ("wareq_sz_kb", "wareq-sz"),
        ("f_await_ms", "f_await"),
        ("d_await_ms", "d_await"),
    ] {
        let (a, b) = (t_dev[ours].as_f64().unwrap(), iostat_field(io_dev, theirs));
        assert!((a - b).abs() <= 0.0051, "{ours}: tacho {a} vs iostat {b}");
    }
    // Per-second columns divide the same deltas by each tool's own clock (iostat's is
    // /proc/uptime in hundredths of a second; tacho's a monotonic stamp beside its read), which
    // a loaded machine skews by tens of milliseconds between the stamp and the read (seen: 1.6%
    // over 3 s). So every column must show the same ratio of the two clocks, and that ratio
    // stay near 1.
    let clocks = t_dev["w_per_s"].as_f64().unwrap() / iostat_field(io_dev, "w/s");
    assert!(
        (0.9..=1.1).contains(&clocks),
        "the two intervals differ by {clocks}"
    );
    for (ours, theirs) in [
        ("r_per_s", "r/s"),
        ("rkb_per_s", "rkB/s"),
        ("rrqm_per_s", "rrqm/s"),
        ("w_per_s", "w/s"),
        ("wkb_per_s", "wkB/s"),
        ("wrqm_per_s", "wrqm/s"),
        ("d_per_s", "d/s"),
        ("dkb_per_s", "dkB/s"),
        ("f_per_s", "f/s"),
        ("aqu_sz", "aqu-sz"),
        ("util_pct", "util"),
    ] {
        let (a, b) = (t_dev[ours].as_f64().unwrap(), iostat_field(io_dev, theirs));
        assert!(
            (a - b * clocks).abs() <= 0.0051 + 0.002 * b.abs(),
            "{ours}: tacho {a} vs iostat {b} (clocks {clocks})"
        );
    }
}

#[test]
fn memory_columns_agree_with_free() {
    if !have_tool("free") {
        skip("free comparison: procps is not installed (apt-get install procps)");
        return;
    }
    let free = |_: ()| -> Vec<u64> {
        let out = sh("free", &["-b"]);
        let mem = out.lines().find(|l| l.starts_with("Mem:")).unwrap();
        mem.split_whitespace()
            .skip(1)
            .map(|v| v.parse().unwrap())
            .collect()
    };
    let version = sh("free", &["-V"]);
    // procps-ng before 4.0.1 computed used differently.
    let new_used = !["3.", "4.0.0"]
        .iter()
        .any(|v| version.contains(&format!("procps-ng {v}")));
    let before = free(());
    let o = run(&["top", "--json", "--count", "1", "--interval", "100ms"]);
    let after = free(());
    let m = &json_lines(&o)[0]["memory"];
    let keys = [
        "total_bytes",
        "used_bytes",
        "free_bytes",
        "shared_bytes",
        "cache_bytes",
        "available_bytes",
    ];
    // free -b: total used free shared buff/cache available; buff/cache = buffers + cache.
    for (i, key) in keys.iter().enumerate() {
        if *key == "used_bytes" && !new_used {
            continue;
        }
        let ours = if *key == "cache_bytes" {
            m["buffers_bytes"].as_u64().unwrap() + m["cache_bytes"].as_u64().unwrap()
        } else {
            m[key].as_u64().unwrap()
        };
        let (lo, hi) = (before[i].min(after[i]), before[i].max(after[i]));
        // Memory moves between the readings; 64 MiB covers a busy build next door.
        let slack = if i == 0 { 0 } else { 64 << 20 };
        assert!(
            ours + slack >= lo && ours <= hi + slack,
            "{key}: tacho {ours} vs free {before:?} / {after:?}"
        );
    }
}

/// A writer of its own (not a thread of this test process, whose other tests write too):
/// 1 MiB, flushed, every 20 ms or more, the file cut back at 256 MiB.
const WRITER: &str = r#"
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
block = b"\x07" * (1 << 20)
written = 0
print("writing", flush=True)
while True:
    os.write(fd, block)
    os.fdatasync(fd)
    written += len(block)
    if written >= 256 << 20:
        written = 0
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
    time.sleep(0.02)
"#;

#[test]
fn a_process_writing_shows_up_with_its_bytes() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut writer = Command::new("python3")
        .args(["-c", WRITER])
        .arg(dir.path().join("w"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("cannot start python3");
    let mut line = String::new();
    BufReader::new(writer.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "writing");
    let o = run(&[
        "top",
        "--json",
        "--count",
        "1",
        "--interval",
        "1s",
        "--top",
        "1000",
    ]);
    let pid = writer.id();
    let _ = writer.kill();
    let _ = writer.wait();
    let s = &json_lines(&o)[0];
    let row = s["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("pid {pid} not among {}", s["processes"]));
    // At most 50 MiB/s by construction (1 MiB every 20 ms or more).
    let w = row["write_bytes_per_s"].as_f64().unwrap();
    assert!(w > 0.0 && w <= 60.0 * 1048576.0, "{w}");
}

/// Descriptors `pid` holds on /proc files of the processes in `of`.
fn fds_on(pid: u32, of: &[u32]) -> usize {
    let prefixes: Vec<String> = of.iter().map(|p| format!("/proc/{p}/")).collect();
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter(|t| {
            let t = t.to_string_lossy();
            prefixes.iter().any(|p| t.starts_with(p.as_str()))
        })
        .count()
}

#[test]
fn process_files_kept_open_are_closed_when_their_processes_exit() {
    // The /proc scan's descriptors: as root, top otherwise reads processes from its task
    // iterator and keeps no /proc file open (see src/diagnose/sample/tasks.rs).
    let mut child = tacho()
        .args([
            "top",
            "--json",
            "--no-ebpf",
            "--interval",
            "200ms",
            "--count",
            "200",
        ])
        .spawn_piped();
    let tacho_pid = child.id();
    let mut lines = BufReader::new(child.stdout.take().unwrap());
    let mut next_sample = || {
        let mut line = String::new();
        lines.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "top ended early");
    };
    next_sample();
    let mut sleepers: Vec<std::process::Child> = (0..100)
        .map(|_| Command::new("sleep").arg("60").spawn().unwrap())
        .collect();
    let pids: Vec<u32> = sleepers.iter().map(|s| s.id()).collect();
    // Within a few samples (a line may already wait in the pipe, the next scan may have begun
    // before the last spawn, and a loaded machine delays the scans) every sleeper has been
    // read: its stat and io are kept open.
    let mut during = 0;
    for _ in 0..20 {
        next_sample();
        during = fds_on(tacho_pid, &pids);
        if during >= 200 {
            break;
        }
    }
    for s in &mut sleepers {
        let _ = s.kill();
        let _ = s.wait();
    }
    // Lines written before the kill may still wait in the pipe (a loaded machine reads them
    // late): read on until a scan has dropped them, for at most 40 samples (8 s).
    let mut after = fds_on(tacho_pid, &pids);
    for _ in 0..40 {
        if after == 0 {
            break;
        }
        next_sample();
        after = fds_on(tacho_pid, &pids);
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        during, 200,
        "descriptors on the sleepers' /proc files while they ran"
    );
    assert_eq!(
        after, 0,
        "descriptors on their /proc files after they exited"
    );
}

#[test]
fn net_shows_only_the_network_after_the_verdicts() {
    let o = run(&[
        "top",
        "--batch",
        "--net",
        "--interval",
        "200ms",
        "--count",
        "1",
    ]);
    assert!(o.status.code().is_some_and(|c| c <= 1), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("\nIFACE "), "{text}");
    assert!(
        !text.contains("\nCPU ") && !text.contains("\nDevice"),
        "{text}"
    );
    assert!(text.contains(" UTC  interval "), "{text}");
}

/// `top --batch` as `iostat -z`: an idle device (a fresh loop device) is left out, with a line
/// saying how many and which flag lists them, and `--show-idle` lists it; a note is printed
/// once, not with every sample (run as nobody, the note that other users' /proc/PID/io is
/// unreadable comes every sample); on a terminal 80 columns wide (COLUMNS), no line is wider.
#[test]
fn batch_hides_idle_devices_says_each_note_once_and_fits_the_terminal() {
    if !is_root() {
        skip("batch_hides_idle_devices: needs root for a loop device and setpriv");
        return;
    }
    let Some(lo) = LoopDev::new("top-idle", 16 << 20) else {
        skip("batch_hides_idle_devices: no loop device could be attached");
        return;
    };
    let name = lo.name();
    let sample = ["top", "--batch", "--count", "3", "--interval", "300ms"];
    let listed = |text: &str| {
        text.lines()
            .any(|l| l.split(' ').next() == Some(name.as_str()))
    };
    let o = run(&sample);
    let text = stdout(&o);
    assert!(!listed(&text), "{name} listed while idle:\n{text}");
    assert!(
        text.contains("idle devices not listed; --show-idle lists them"),
        "{text}"
    );
    let mut all = sample.to_vec();
    all.push("--show-idle");
    let text = stdout(&run(&all));
    assert!(listed(&text), "{name} not listed with --show-idle:\n{text}");

    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_tacho"))
        .args(sample)
        .env("TACHO_DB", scratch_db());
    let o = run_cmd(cmd);
    let text = stdout(&o);
    let notes: Vec<&str> = text.lines().filter(|l| l.starts_with("  note: ")).collect();
    assert!(
        notes.iter().any(|n| n.contains("/proc/PID/io unreadable")),
        "{text}"
    );
    for n in &notes {
        let words = |l: &str| l.replace(|c: char| c.is_ascii_digit(), "");
        let times = notes.iter().filter(|m| words(m) == words(n)).count();
        assert_eq!(times, 1, "said {times} times: {n}\n{text}");
    }

    let mut cmd = tacho();
    cmd.args(sample).env("COLUMNS", "80");
    let (shown, o) = on_terminal(cmd, 200, false);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
    assert!(shown.contains("%util"), "{shown}");
    assert_eq!(wider_than(&shown, 80), Vec::<String>::new(), "{shown}");
}
