//! Ctrl-C keeps what was measured: the test a signal cuts short is reported (live output, JSON,
//! the store), marked interrupted, with the repeats that finished and the one that was running.

use crate::common::*;
use std::io::Read;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Reads completed on a block device so far (field 1 of /sys/block/NAME/stat).
fn reads_done(name: &str) -> u64 {
    let stat = std::fs::read_to_string(format!("/sys/block/{name}/stat")).unwrap();
    stat.split_whitespace().next().unwrap().parse().unwrap()
}

/// Waits until the device has completed `more` reads beyond `from`: the benchmark is measuring.
fn wait_for_reads(name: &str, from: u64, more: u64, child: &mut Child) {
    let start = Instant::now();
    while reads_done(name) < from + more {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("tacho ended ({status}) before reading from {name}");
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("{name} saw no reads within 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sigint(child: &Child) {
    // SAFETY: signalling the child this test started.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(rc, 0);
}

/// Delivers `signals` together, before the run can act on the first (as `timeout -s INT`'s
/// two, or Ctrl-C pressed again at once): sent while it is stopped, each a different signal
/// (one of a kind stays pending only once), then continued.
fn signal_at_once(child: &Child, signals: &[i32]) {
    let pid = child.id() as libc::pid_t;
    let all = [&[libc::SIGSTOP][..], signals, &[libc::SIGCONT]].concat();
    for signal in all {
        // SAFETY: signalling the child this test started.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    }
}

/// The run id from `saved as run N in …` on stderr.
fn saved_id(err: &str) -> String {
    let rest = err
        .split("saved as run ")
        .nth(1)
        .unwrap_or_else(|| panic!("not saved: {err}"));
    rest.split_whitespace().next().unwrap().to_string()
}

#[test]
fn sigint_in_a_long_test_keeps_it_marked_interrupted() {
    let Some(dev) = LoopDev::new("sigint_in_a_long_test", 256 << 20) else {
        return;
    };
    let db = tempfile::tempdir().unwrap();
    let db = db.path().join("runs.db");
    let before = reads_done(&dev.name());
    let mut child = tacho()
        .args([
            "bench",
            "disk",
            dev.path(),
            "--rw",
            "randread",
            "--runtime",
            "60s",
            "--json",
            "--db",
            db.to_str().unwrap(),
        ])
        .spawn_piped();
    wait_for_reads(&dev.name(), before, 2000, &mut child);
    sigint(&child);
    let o = wait_output(child, Duration::from_secs(15));
    assert_eq!(o.status.code(), Some(130), "stderr: {}", stderr(&o));
    let v = parse_json(&o);
    assert_eq!(v["interrupted"], true);
    let tests = tests_of(&v);
    assert_eq!(tests.len(), 1, "{v}");
    let t = &tests[0];
    assert_eq!(t["interrupted"], true, "{t}");
    assert!(t["read"]["ios"].as_u64().unwrap() > 0, "{t}");
    let ran = t["repeats"][0]["runtime_s"].as_f64().unwrap();
    assert!(ran > 0.0 && ran < 60.0, "its real duration: {ran}");
    assert!(warning_codes(&v).contains(&"interrupted".to_string()));

    // The store keeps it, marked, and shows it.
    let id = saved_id(&stderr(&o));
    let shown = run(&["runs", "show", &id, "--json", "--db", db.to_str().unwrap()]);
    let stored = json_ok(&shown);
    let text = stored.to_string();
    assert!(
        text.contains("randread") && text.contains("\"interrupted\":true"),
        "{text}"
    );
    let shown = run(&["runs", "show", &id, "--db", db.to_str().unwrap()]);
    assert_eq!(shown.status.code(), Some(0), "{}", stderr(&shown));
    assert!(stdout(&shown).contains("randread"), "{}", stdout(&shown));
}

#[test]
fn sigint_in_a_table_run_says_the_test_was_interrupted() {
    let Some(dev) = LoopDev::new("sigint_in_a_table_run", 256 << 20) else {
        return;
    };
    let before = reads_done(&dev.name());
    let mut child = tacho()
        .args([
            "bench",
            "disk",
            dev.path(),
            "--rw",
            "randread",
            "--runtime",
            "60s",
            "--no-save",
        ])
        .spawn_piped();
    wait_for_reads(&dev.name(), before, 2000, &mut child);
    sigint(&child);
    let o = wait_output(child, Duration::from_secs(15));
    assert_eq!(o.status.code(), Some(130), "stderr: {}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("warning [interrupted]"), "{out}");
    assert!(
        out.lines().any(|l| l.starts_with("randread")),
        "no row for the test: {out}"
    );
}

/// `bench disk` writing a 256 MiB test file in `dir`, once the file is there.
fn bench_writing(dir: &std::path::Path) -> std::process::Child {
    let mut child = tacho()
        .args(["bench", "disk"])
        .arg(dir)
        .args([
            "--rw",
            "write",
            "--size",
            "256M",
            "--runtime",
            "60s",
            "--no-save",
            // On a virtual disk the probe would come first and leave no test to report.
            "--no-probe-cache",
        ])
        .spawn_piped();
    let start = Instant::now();
    while !entries(dir).iter().any(|e| e.starts_with(".tacho-bench")) {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("tacho ended ({status}) before making its test file");
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no test file within 30 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// Ctrl-C pressed twice, or `timeout -s INT` (which signals the process, then its group): the
/// second signal must still remove the test file and print what was measured.
#[test]
fn two_sigints_still_remove_the_test_file_and_report() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let child = bench_writing(dir.path());
    // Writing for a while: the first test has figures to report.
    std::thread::sleep(Duration::from_secs(3));
    signal_at_once(&child, &[libc::SIGINT, libc::SIGTERM]);
    let o = wait_output(child, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(130), "stderr: {}", stderr(&o));
    assert_empty(dir.path());
    let out = stdout(&o);
    assert!(out.contains("warning [interrupted]"), "{out}");
    assert!(
        out.lines().any(|l| l.starts_with("write")),
        "no row for the test: {out}"
    );
}

/// A third signal abandons the run at once (no report), but not its 1 GiB-class test file:
/// the signal handler removes it before exiting.
#[test]
fn a_third_sigint_abandons_but_removes_the_test_file() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let child = bench_writing(dir.path());
    std::thread::sleep(Duration::from_millis(500));
    signal_at_once(&child, &[libc::SIGINT, libc::SIGTERM, libc::SIGHUP]);
    let o = wait_output(child, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(130), "stderr: {}", stderr(&o));
    assert!(
        o.stdout.is_empty(),
        "abandoned, yet reported: {}",
        stdout(&o)
    );
    assert_empty(dir.path());
}

/// A pseudo-terminal: tacho draws its progress bar only on a terminal.
#[test]
fn sigint_in_a_later_repeat_keeps_the_finished_ones() {
    let Some(dev) = LoopDev::new("sigint_in_a_later_repeat", 256 << 20) else {
        return;
    };
    let mut screen = ProgressScreen::new();
    let mut child = tacho()
        .args([
            "bench",
            "disk",
            dev.path(),
            "--rw",
            "randread",
            "--runtime",
            "2s",
            "--repeat",
            "3",
            "--json",
            "--no-save",
        ])
        .stdout(Stdio::piped())
        .stderr(screen.stderr())
        .spawn()
        .unwrap();
    // The progress bar names the repeat: wait until the second one is under way.
    screen.wait_for("(2/3)", &mut child);
    // Repeat 2 has measured something before the signal.
    wait_for_reads(&dev.name(), reads_done(&dev.name()), 2000, &mut child);
    sigint(&child);
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = out.read_to_string(&mut text);
        text
    });
    let status = wait_limited(&mut child, Duration::from_secs(15));
    assert_eq!(status.code(), Some(130));
    let v: serde_json::Value = serde_json::from_str(&reader.join().unwrap()).unwrap();
    let t = &tests_of(&v)[0];
    assert_eq!(t["interrupted"], true, "{t}");
    let repeats = t["repeats"].as_array().unwrap();
    assert_eq!(repeats.len(), 2, "the finished repeat and the cut one: {t}");
    let first = repeats[0]["runtime_s"].as_f64().unwrap();
    let cut = repeats[1]["runtime_s"].as_f64().unwrap();
    assert!(first >= 1.9, "repeat 1 ran fully: {first}");
    assert!(cut > 0.0 && cut < first, "repeat 2 was cut: {cut}");
    assert!(repeats[1]["read"]["ios"].as_u64().unwrap() > 0);
}
