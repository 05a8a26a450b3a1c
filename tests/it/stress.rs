//! `tacho stress` end to end: the load is real (CPU ticks in /proc/stat, resident memory),
//! hdd files are removed (also after SIGINT), and impossible requests are refused. Runs last
//! well under a second each.

use crate::common::*;
use std::time::{Duration, Instant};

/// Busy ticks of all CPUs from the `cpu` line of /proc/stat (user nice system irq softirq
/// steal).
fn busy_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let f: Vec<u64> = stat
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    f[0] + f[1] + f[2] + f[5] + f[6] + f[7]
}

fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_CLK_TCK) }) as u64
}

#[test]
fn cpu_load_shows_in_proc_stat() {
    let before = busy_ticks();
    let v = json_ok(&run(&[
        "stress",
        "--cpu",
        "1",
        "--timeout",
        "600ms",
        "--json",
    ]));
    let after = busy_ticks();
    assert_eq!(v["schema"], "tacho.stress.v1");
    assert!(v["workers"]["cpu"]["ops"].as_u64().unwrap() > 0);
    // One busy CPU for 0.6 s is 0.6 s of ticks; demand half of it (other load only adds).
    let expected = ticks_per_second() * 6 / 10;
    assert!(
        after - before >= expected / 2,
        "busy ticks rose by {} (expected at least {})",
        after - before,
        expected / 2
    );
    let split = &v["cpu"];
    assert!(split["user_pct"].as_f64().unwrap() > 0.0, "{split}");
    assert!(v["vmstat"].is_object());
    assert!(!v["seconds"].as_array().unwrap().is_empty());
}

fn vm_hwm_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

#[test]
fn vm_workers_touch_their_memory() {
    const BYTES: u64 = 64 << 20;
    let mut child = tacho()
        .args([
            "stress",
            "--vm",
            "1",
            "--vm-bytes",
            "64M",
            "--vm-keep",
            "--timeout",
            "800ms",
        ])
        .args(["--json"])
        .spawn_piped();
    let pid = child.id();
    // Watch the worker's process from outside: its high-water RSS must reach the request.
    let mut peak = 0;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        match vm_hwm_bytes(pid) {
            Some(b) => peak = peak.max(b),
            None => break,
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = wait_output(child, Duration::from_secs(30));
    let v = json_ok(&o);
    assert!(peak >= BYTES * 9 / 10, "VmHWM peaked at {peak} bytes");
    assert!(v["workers"]["vm"]["touched_bytes"].as_u64().unwrap() >= BYTES);
    assert!(v["peak_rss_bytes"].as_u64().unwrap() >= BYTES * 9 / 10);
}

#[test]
fn hdd_files_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let v = json_ok(&run(&[
        "stress",
        "--hdd",
        "2",
        "--hdd-bytes",
        "4M",
        "--hdd-dir",
        dir.path().to_str().unwrap(),
        // Long enough for a first write on a machine running other builds (300 ms once saw
        // none, so the removal below would have been of nothing).
        "--timeout",
        "1500ms",
        "--json",
    ]));
    assert!(v["workers"]["hdd"]["written_bytes"].as_u64().unwrap() > 0);
    assert_empty(dir.path());
}

#[test]
fn hdd_files_are_removed_after_sigint() {
    let dir = tempfile::tempdir().unwrap();
    let child = tacho()
        .args([
            "stress",
            "--hdd",
            "1",
            "--hdd-bytes",
            "8M",
            "--timeout",
            "30s",
            "--json",
        ])
        .arg("--hdd-dir")
        .arg(dir.path())
        .spawn_piped();
    // Wait until the worker has made its directory and file.
    let start = Instant::now();
    while entries(dir.path()).is_empty() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        !entries(dir.path()).is_empty(),
        "the hdd worker never started"
    );
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = wait_output(child, Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let v = parse_json(&o);
    assert_eq!(v["interrupted"], true);
    assert_empty(dir.path());
}

/// `stress --hdd 2` writing into `dir`, once its workers have made their files.
fn hdd_workers_writing(dir: &std::path::Path) -> std::process::Child {
    let child = tacho()
        .args([
            "stress",
            "--hdd",
            "2",
            "--hdd-bytes",
            "64M",
            "--timeout",
            "30s",
            "--json",
        ])
        .arg("--hdd-dir")
        .arg(dir)
        .spawn_piped();
    let start = Instant::now();
    while entries(dir).is_empty() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!entries(dir).is_empty(), "the hdd workers never started");
    std::thread::sleep(Duration::from_millis(300));
    child
}

/// Ctrl-C pressed twice, or `timeout -s INT` (which signals the process, then its group): the
/// second signal must not cost the summary or leave the hdd files.
#[test]
fn hdd_files_are_removed_after_two_sigints() {
    let dir = tempfile::tempdir().unwrap();
    let child = hdd_workers_writing(dir.path());
    signal_at_once(&child, &[libc::SIGINT, libc::SIGTERM]);
    let o = wait_output(child, Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let v = parse_json(&o);
    assert_eq!(v["interrupted"], true);
    assert!(
        v["workers"]["hdd"]["written_bytes"].as_u64().unwrap() > 0,
        "{v}"
    );
    assert_empty(dir.path());
}

/// A third signal abandons the run at once (no summary), but the signal handler first removes
/// the hdd files and their directory.
#[test]
fn a_third_signal_abandons_but_removes_the_hdd_files() {
    let dir = tempfile::tempdir().unwrap();
    let child = hdd_workers_writing(dir.path());
    signal_at_once(&child, &[libc::SIGINT, libc::SIGTERM, libc::SIGHUP]);
    let o = wait_output(child, Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(
        o.stdout.is_empty(),
        "abandoned, yet summarised: {}",
        stdout(&o)
    );
    assert_empty(dir.path());
}

/// Delivers `signals` together, before the run can act on the first (as `timeout -s INT`'s
/// two, or Ctrl-C pressed again at once): sent while it is stopped, each a different signal
/// (one of a kind stays pending only once), then continued.
fn signal_at_once(child: &std::process::Child, signals: &[i32]) {
    let pid = child.id() as libc::pid_t;
    let all = [&[libc::SIGSTOP][..], signals, &[libc::SIGCONT]].concat();
    for signal in all {
        // SAFETY: signalling the child this test started.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    }
}

#[test]
fn too_much_memory_is_refused_unless_forced() {
    let line = assert_error(&run(&["stress", "--vm", "1", "--vm-bytes", "100T"]));
    assert!(
        line.contains("MemAvailable") && line.contains("--force"),
        "{line}"
    );
    let line = assert_error(&run(&["stress", "--vm", "2", "--vm-bytes", "150%"]));
    assert!(line.contains("percentage"), "{line}");
}

#[test]
fn other_bad_requests() {
    let line = assert_error(&run(&["stress"]));
    assert!(line.contains("--cpu"), "{line}");
    let line = assert_error(&run(&["stress", "--hdd", "1", "--hdd-bytes", "100T"]));
    assert!(line.contains("--hdd-bytes"), "{line}");
    let line = assert_error(&run(&[
        "stress",
        "--hdd",
        "1",
        "--hdd-dir",
        "/nonexistent/x",
    ]));
    assert!(line.contains("--hdd-dir"), "{line}");
    let line = assert_error(&run(&["stress", "--cpu", "1", "--cpu-load", "0"]));
    assert!(line.contains("--cpu-load"), "{line}");
    let line = assert_error(&run(&["stress", "--cpu", "1", "--timeout", "0"]));
    assert!(line.contains("zero"), "{line}");
}

#[test]
fn human_output_prints_a_line_per_interval() {
    // The last, partial interval gets its line too (a whole second would make a slow test).
    let o = run(&[
        "stress",
        "--cpu",
        "1",
        "--cpu-load",
        "50",
        "--timeout",
        "300ms",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("stress: 1 cpu at 50%"), "{out}");
    assert!(
        lines[1].contains("cpu ops/s") && lines[1].contains("thp_alloc"),
        "{out}"
    );
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines[2].trim_start().starts_with("0."), "{out}");
    assert!(lines.last().unwrap().starts_with("done after"), "{out}");
}

/// On a terminal 80 columns wide (COLUMNS over the terminal's 200) no line of `stress` is
/// wider: the per-second table leaves out its least important columns (THP, compaction)
/// and keeps the workers' rates; piped, every column is there.
#[test]
fn on_a_narrow_terminal_stress_fits() {
    let args = ["stress", "--cpu", "1", "--timeout", "1500ms"];
    let mut cmd = tacho();
    cmd.args(args).env("COLUMNS", "80");
    let (shown, o) = on_terminal(cmd, 200, false);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(wider_than(&shown, 80), Vec::<String>::new(), "{shown}");
    let header = shown.lines().find(|l| l.contains("cpu ops/s")).unwrap();
    assert!(!header.contains("compact"), "{header}");
    let piped = stdout(&run(&args));
    let header = piped.lines().find(|l| l.contains("cpu ops/s")).unwrap();
    assert!(header.contains("compact") && header.len() > 80, "{header}");
}
