//! Each honesty warning, raised by a real situation built for it, and none of the data
//! warnings on a plain direct test of the real disk.

use crate::common::*;
use serde_json::Value;
use std::time::Duration;

/// A directory on the machine's real disk (tmpfs /tmp has no device counters).
fn disk_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/var/tmp").unwrap()
}

fn bench(dir: &std::path::Path, extra: &[&str]) -> Value {
    let mut args = vec!["bench", "disk", dir.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let v = json_ok(&run(&args));
    assert_empty(dir);
    v
}

fn has_device_counters(v: &Value) -> bool {
    v["tests"][0]["device"]
        .as_array()
        .is_some_and(|d| !d.is_empty())
}

/// Warnings that say the figures are wrong, as opposed to where the run happened.
const DATA_WARNINGS: [&str; 7] = [
    "cache-suspected",
    "fits-in-ram",
    "cow-fs",
    "compressing-fs",
    "faster-than-device",
    "direct-unsupported",
    "spread-high",
];

#[test]
fn plain_direct_test_of_the_real_disk_raises_no_data_warning() {
    let dir = disk_dir();
    let v = bench(
        dir.path(),
        &["--rw", "randread", "--size", "64M", "--runtime", "1s"],
    );
    let codes = warning_codes(&v);
    for code in DATA_WARNINGS {
        assert!(!codes.iter().any(|c| c == code), "{code} raised: {codes:?}");
    }
}

#[test]
fn buffered_rereads_of_a_small_file_are_a_cache() {
    let dir = disk_dir();
    let v = bench(
        dir.path(),
        &[
            "--buffered",
            "--rw",
            "read",
            "--size",
            "8M",
            "--runtime",
            "1s",
        ],
    );
    let codes = warning_codes(&v);
    assert!(codes.contains(&"fits-in-ram".to_owned()), "{codes:?}");
    if !has_device_counters(&v) {
        skip("buffered_rereads_of_a_small_file_are_a_cache: /var/tmp has no block device");
        return;
    }
    // Re-reading 8 MiB for a second issues far more than the device completes.
    assert!(codes.contains(&"cache-suspected".to_owned()), "{codes:?}");
}

#[test]
fn a_stalled_repeat_makes_the_spread_high() {
    let dir = disk_dir();
    let mut cmd = tacho();
    cmd.args(["bench", "disk", dir.path().to_str().unwrap(), "--json"])
        .args(["--rw", "randread", "--size", "16M", "--runtime", "1s"])
        .args(["--repeat", "3", "--randseed", "1"]);
    let mut screen = ProgressScreen::new();
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(screen.stderr())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    // Freeze tacho for 600 ms inside its second repeat: a competitor taking the machine away,
    // as a noisy neighbour or a backup job does.
    screen.wait_for("(2/3)", &mut child);
    // SAFETY: signals to our own child process.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(600));
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let o = wait_output(child, Duration::from_secs(60));
    let v = json_ok(&o);
    let t = &v["tests"][0];
    assert_eq!(t["repeats"].as_array().unwrap().len(), 3);
    let spread = t["spread_pct"].as_f64().expect("spread_pct with 3 repeats");
    assert!(spread > 10.0, "spread {spread}");
    assert!(warning_codes(&v).contains(&"spread-high".to_owned()));
    assert_empty(dir.path());
}

#[test]
fn btrfs_with_compression_is_cow_and_compressing() {
    if !have_tool("mkfs.btrfs") {
        skip("btrfs_with_compression_is_cow_and_compressing: mkfs.btrfs not installed");
        return;
    }
    let Some(dev) = LoopDev::new("btrfs_with_compression", 320 << 20) else {
        return;
    };
    let ok = std::process::Command::new("mkfs.btrfs")
        .args(["-q", "-f", dev.path()])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        skip("btrfs_with_compression_is_cow_and_compressing: mkfs.btrfs failed");
        return;
    }
    let mnt = tempfile::tempdir().unwrap();
    let guard = match MountGuard::mount(&["-o", "compress=zstd", dev.path()], mnt.path()) {
        Ok(g) => g,
        Err(e) => {
            skip(&format!("btrfs_with_compression: mount failed: {e}"));
            return;
        }
    };
    let v = bench(
        mnt.path(),
        &["--rw", "randwrite", "--size", "16M", "--runtime", "200ms"],
    );
    let codes = warning_codes(&v);
    assert!(codes.contains(&"cow-fs".to_owned()), "{codes:?}");
    assert!(codes.contains(&"compressing-fs".to_owned()), "{codes:?}");
    drop(guard);
}

#[test]
fn a_filesystem_without_direct_io_runs_buffered_only_when_allowed() {
    if !is_root() {
        skip("a_filesystem_without_direct_io: needs root to mount ramfs");
        return;
    }
    let mnt = tempfile::tempdir().unwrap();
    let guard = match MountGuard::mount(&["-t", "ramfs", "ramfs"], mnt.path()) {
        Ok(g) => g,
        Err(e) => {
            skip(&format!(
                "a_filesystem_without_direct_io: ramfs mount failed: {e}"
            ));
            return;
        }
    };
    let dir = mnt.path().to_str().unwrap();
    let refused = run(&["bench", "disk", dir, "--rw", "read", "--size", "1M"]);
    let line = assert_error(&refused);
    assert!(line.contains("--buffered"), "{line}");
    assert_empty(mnt.path());
    let v = bench(
        mnt.path(),
        &[
            "--rw",
            "read",
            "--size",
            "1M",
            "--runtime",
            "100ms",
            "--allow-buffered",
        ],
    );
    assert!(warning_codes(&v).contains(&"direct-unsupported".to_owned()));
    assert_eq!(v["tests"][0]["direct"], false);
    drop(guard);
}
