//! A target that fails in the middle of a run, with I/Os still in flight: tacho stops with a
//! one-line error (exit 2) and neither panics nor aborts. The io_uring engine waits for every
//! I/O in flight before it frees their buffers; in this (debug) build it also paints a canary
//! over each buffer after that wait and checks it just before freeing, so a read that landed
//! late would end the run with a panic instead of the error.
//!
//! The target is a file on a FUSE filesystem (tests/helpers/passfs.py) whose reads fail once a
//! number of them succeeded; it needs root (for allow_other) and python3-fusepy.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The FUSE filesystem with one 16 MiB file; unmounted and its server stopped on drop.
struct EioFs {
    fs: FuseMount,
    _backing: tempfile::TempDir,
}

impl EioFs {
    /// None (after saying why) when FUSE cannot be used here.
    fn start(test: &str, good_reads: u32, delay: Duration, mode: &str) -> Option<EioFs> {
        if !is_root() {
            skip(&format!("{test}: needs root to mount a FUSE filesystem"));
            return None;
        }
        let fusepy = Command::new(PYTHON)
            .args(["-c", "import fusepy"])
            .stderr(Stdio::null())
            .status();
        if !fusepy.is_ok_and(|s| s.success()) {
            skip(&format!("{test}: python3-fusepy is not installed"));
            return None;
        }
        let backing = tempfile::tempdir_in("/dev/shm").unwrap();
        let mut data = vec![0u8; 16 << 20];
        fastrand::Rng::with_seed(12).fill(&mut data);
        std::fs::write(backing.path().join("target"), &data).unwrap();
        let (good, delay) = (good_reads.to_string(), delay.as_secs_f64().to_string());
        let fs = FuseMount::start(
            backing.path(),
            &[
                "--fail-after",
                &good,
                "--fail-mode",
                mode,
                "--delay",
                &delay,
                "--direct-io",
            ],
        );
        Some(EioFs {
            fs,
            _backing: backing,
        })
    }

    fn target(&self) -> PathBuf {
        self.fs.path().join("target")
    }
}

/// A loop device over a file; detached on drop.
struct Loop(String);

impl Loop {
    fn attach(file: &Path) -> Loop {
        let out = sh("losetup", &["-f", "--show", file.to_str().unwrap()]);
        Loop(out.trim().to_owned())
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

/// Runs a 16-deep io_uring read test on `target` and returns tacho's one-line error.
fn failing_run(test: &str, target: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "bench",
        "disk",
        target.to_str().unwrap(),
        "--rw",
        "randread",
        "--engine",
        "io_uring",
        "--iodepth",
        "16",
        "--bs",
        "4k",
        "--size",
        "8M",
        "--runtime",
        "20s",
        "--ramp",
        "0s",
        "--repeat",
        "1",
    ];
    args.extend_from_slice(extra);
    let o = run(&args);
    let err = stderr(&o);
    assert!(
        !err.contains("panicked") && !err.contains("written after the ring was drained"),
        "{test}: {err}"
    );
    assert_error(&o)
}

/// Each read takes this long in the FUSE server, so others are in flight when one fails.
const DELAY: Duration = Duration::from_millis(20);

#[test]
fn an_eio_on_a_file_with_reads_in_flight_is_a_one_line_error() {
    for extra in [&[][..], &["--buffered"]] {
        let Some(fs) = EioFs::start("eio_file", 40, DELAY, "eio") else {
            return;
        };
        let line = failing_run("eio_file", &fs.target(), extra);
        assert!(
            line.contains("Input/output error"),
            "names the error: {line}"
        );
    }
}

#[test]
fn a_short_read_with_reads_in_flight_is_a_one_line_error() {
    let Some(fs) = EioFs::start("short_read", 40, DELAY, "short") else {
        return;
    };
    let line = failing_run("short_read", &fs.target(), &[]);
    assert!(
        line.contains("short read"),
        "says the read was short: {line}"
    );
}

/// The case the drain exists for: O_DIRECT reads of a block device cannot be cancelled, and
/// the device fills their buffers whenever they complete. Here a loop device over the FUSE
/// file; the reads after the failing one complete about 20 ms late.
#[test]
fn an_eio_on_a_block_device_with_reads_in_flight_is_a_one_line_error() {
    let Some(fs) = EioFs::start("eio_block_device", 400, DELAY, "eio") else {
        return;
    };
    let dev = Loop::attach(&fs.target());
    let line = failing_run("eio_block_device", Path::new(&dev.0), &[]);
    assert!(
        line.contains("Input/output error"),
        "names the error: {line}"
    );
}
