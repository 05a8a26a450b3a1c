//! The host-cache probe against stand-ins for a VM's host: a loop device plays the virtual
//! disk, its backing file the host's image. Buffered (losetup's default) it has the host's page
//! cache, as `cache=writeback` does: detected. With `--direct-io=on` it is `cache=none`, and
//! over /dev/shm it is RAM all through: silent. A directory on this machine's real disk (the
//! probe's own test file) must be silent too.
//!
//! The test plays the host whose cache is smaller than the disk: before each probe it evicts
//! the backing file's pages, as a limited cache would have forgotten blocks written long ago.
//! The probe itself only reads and writes the loop device.

use crate::common;
use crate::common::{LoopDev, is_root, json_ok, skip, tacho};
use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::Path;

const IMAGE_BYTES: usize = 256 << 20;

/// A loop device over an image full of data (not sparse: a hole reads as zeros from metadata),
/// detached and removed on drop.
struct DataLoop {
    lo: LoopDev,
}

impl DataLoop {
    fn new(test: &str, dir: &Path, losetup_options: &[&str]) -> Option<DataLoop> {
        if !is_root() {
            skip(&format!("{test}: needs root for a loop device"));
            return None;
        }
        let mut image = tempfile::Builder::new()
            .prefix("tacho-hostcache-")
            .suffix(".img")
            .tempfile_in(dir)
            .expect("cannot create a loop image");
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let chunk: Vec<u8> = (0..1 << 20)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for _ in 0..IMAGE_BYTES / chunk.len() {
            image.write_all(&chunk).unwrap();
        }
        image.as_file().sync_all().unwrap();
        LoopDev::attach(test, image, losetup_options).map(|lo| DataLoop { lo })
    }

    /// The host forgets: the backing file's pages leave the page cache.
    fn evict(&self) {
        let f = File::open(self.lo.image()).unwrap();
        // SAFETY: advisory call on a descriptor we own.
        let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(rc, 0, "posix_fadvise");
    }

    /// Runs the probe (and a one-second read test) on the device; returns the probe's figures.
    fn probe(&self) -> serde_json::Value {
        self.evict();
        let o = tacho()
            .args(["bench", "disk"])
            .arg(&self.lo.dev)
            .args(["--probe-cache", "--destroy-data", "--rw", "read"])
            .args(["--runtime", "300ms", "--json"])
            .output()
            .unwrap();
        let doc = json_ok(&o);
        doc.get("host_cache")
            .cloned()
            .unwrap_or_else(|| panic!("no host_cache in {doc}"))
    }
}

/// On the ext4 disk, where the image's pages can be evicted to the real device.
fn disk_dir() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

fn seen(probe: &serde_json::Value) -> bool {
    probe["recent_writes_cached"] == true || probe["flushes_not_carried_out"] == true
}

#[test]
fn a_buffered_loop_device_is_a_host_cache_and_is_detected() {
    let Some(lo) = DataLoop::new("buffered loop", disk_dir(), &[]) else {
        return;
    };
    // This VM's timing swings: the cache must show in one of three probes.
    let probes: Vec<_> = (0..3).map(|_| lo.probe()).collect();
    let found = probes.iter().find(|p| p["recent_writes_cached"] == true);
    let found = found.unwrap_or_else(|| panic!("no probe saw the cache: {probes:#?}"));
    let words = found["summary"].as_str().unwrap();
    assert!(words.contains("faster than cold reads"), "{words}");
    assert!(words.contains("holds recent writes"), "{words}");
}

#[test]
fn a_direct_io_loop_device_is_silent() {
    let Some(lo) = DataLoop::new("direct-io loop", disk_dir(), &["--direct-io=on"]) else {
        return;
    };
    for _ in 0..2 {
        let p = lo.probe();
        assert!(!seen(&p), "cache=none must stay silent: {p:#}");
        assert!(p["summary"].as_str().unwrap().starts_with("nothing seen"));
    }
}

#[test]
fn a_loop_device_in_ram_is_silent() {
    let Some(lo) = DataLoop::new("tmpfs loop", Path::new("/dev/shm"), &[]) else {
        return;
    };
    for _ in 0..2 {
        let p = lo.probe();
        assert!(!seen(&p), "RAM all through must stay silent: {p:#}");
    }
}

#[test]
fn the_real_disk_through_its_own_test_file_is_silent_and_inconclusive() {
    let dir = tempfile::tempdir_in(disk_dir()).unwrap();
    let o = tacho()
        .args(["bench", "disk"])
        .arg(dir.path())
        .args(["--probe-cache", "--rw", "read", "--size", "256M"])
        .args(["--runtime", "300ms", "--json"])
        .output()
        .unwrap();
    let doc = json_ok(&o);
    let p = &doc["host_cache"];
    assert!(p.is_object(), "the probe ran: {doc}");
    assert!(!seen(p), "a plain direct test of the disk: {p:#}");
    // Its test file was laid out just before: seeing nothing there proves nothing, so no
    // warning may claim the probe found no host cache (issue 29).
    assert_eq!(p["conclusive"], false, "{p:#}");
    for w in doc["warnings"].as_array().unwrap() {
        let words = w["message"].as_str().unwrap();
        assert!(!words.contains("saw no sign"), "{words}");
    }
    // It says so instead, with the case that works.
    let w = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "host-cache-unprobed")
        .unwrap_or_else(|| panic!("no could-not-tell warning: {doc}"));
    let m = w["message"].as_str().unwrap();
    assert!(
        m.contains("could not tell") && m.contains("--destroy-data"),
        "{m}"
    );
    assert!(!m.contains("nothing seen (over"), "{m}");
    common::assert_empty(dir.path());
}

#[test]
fn a_read_only_run_says_why_it_could_not_probe() {
    let Some(lo) = DataLoop::new("read-only probe", Path::new("/dev/shm"), &[]) else {
        return;
    };
    let o = tacho()
        .args(["bench", "disk"])
        .arg(&lo.lo.dev)
        .args([
            "--probe-cache",
            "--rw",
            "read",
            "--runtime",
            "300ms",
            "--json",
        ])
        .output()
        .unwrap();
    let doc = json_ok(&o);
    assert!(doc.get("host_cache").is_none(), "{doc}");
    let w = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "host-cache-unprobed")
        .unwrap_or_else(|| panic!("no host-cache-unprobed warning: {doc}"));
    assert!(w["message"].as_str().unwrap().contains("--destroy-data"));
}

#[test]
fn the_probe_runs_by_default_on_a_virtual_disk_only() {
    let Some(lo) = DataLoop::new("default probe", disk_dir(), &["--direct-io=on"]) else {
        return;
    };
    let run = |extra: &[&str]| {
        let o = tacho()
            .args(["bench", "disk"])
            .arg(&lo.lo.dev)
            .args([
                "--destroy-data",
                "--rw",
                "read",
                "--runtime",
                "300ms",
                "--json",
            ])
            .args(extra)
            .output()
            .unwrap();
        json_ok(&o)
    };
    let doc = run(&[]);
    // A loop device counts as the disk holding its backing file: a virtual one in a VM.
    let in_vm = common::warning_codes(&doc).contains(&"vm-detected".to_string());
    assert_eq!(doc.get("host_cache").is_some(), in_vm, "{doc}");
    let doc = run(&["--no-probe-cache"]);
    assert!(doc.get("host_cache").is_none(), "{doc}");
}

#[test]
fn a_suite_without_layout_is_not_probed_over_unwritten_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let o = tacho()
        .args(["bench", "disk"])
        .arg(dir.path())
        .args(["--suite", "etcd", "--size", "2M", "--runtime", "300ms"])
        .args(["--probe-cache", "--json"])
        .output()
        .unwrap();
    // The etcd verdict may fail this disk (exit 1): the document is what matters here.
    assert_ne!(o.status.code(), Some(2), "{}", common::stderr(&o));
    let doc = common::parse_json(&o);
    assert!(doc.get("host_cache").is_none(), "{doc}");
    let codes = common::warning_codes(&doc);
    assert!(
        codes.contains(&"host-cache-unprobed".to_string()),
        "{codes:?}"
    );
}

/// On a virtual disk the probe is on by default: a region too small for it is said, with the
/// size that works, not left as a silent `null` (issue 29).
#[test]
fn a_region_too_small_for_the_default_probe_is_said() {
    let dir = tempfile::tempdir_in(disk_dir()).unwrap();
    let o = tacho()
        .args(["bench", "disk"])
        .arg(dir.path())
        .args([
            "--rw",
            "randread",
            "--size",
            "64M",
            "--runtime",
            "200ms",
            "--json",
        ])
        .output()
        .unwrap();
    let doc = json_ok(&o);
    if !common::warning_codes(&doc).contains(&"vm-detected".to_string()) {
        common::skip("a_region_too_small: the probe is on by default only on a virtual disk");
        return;
    }
    assert!(doc.get("host_cache").is_none(), "{doc}");
    let w = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "host-cache-unprobed")
        .unwrap_or_else(|| panic!("the skipped probe is not said: {doc}"));
    let m = w["message"].as_str().unwrap();
    assert!(m.contains("--size 160MiB"), "{m}");
}

/// A loop device that goes through its backing file's page cache (losetup's default) is RAM
/// to a benchmark as soon as its data was touched: said as `loop-buffered`, naming the file and
/// the fix; with `--direct-io=on` nothing is said (issue 29).
#[test]
fn a_loop_device_through_the_page_cache_is_named() {
    let bench = |lo: &DataLoop| {
        let o = tacho()
            .args(["bench", "disk"])
            .arg(&lo.lo.dev)
            .args(["--no-probe-cache", "--destroy-data", "--rw", "read"])
            .args(["--runtime", "300ms", "--json"])
            .output()
            .unwrap();
        json_ok(&o)
    };
    let Some(buffered) = DataLoop::new("loop-buffered", disk_dir(), &[]) else {
        return;
    };
    let doc = bench(&buffered);
    let w = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "loop-buffered")
        .unwrap_or_else(|| panic!("no loop-buffered warning: {doc}"));
    let m = w["message"].as_str().unwrap();
    let image = buffered.lo.image().to_str().unwrap();
    assert!(m.contains(image) && m.contains("--direct-io=on"), "{m}");
    drop(buffered);
    let Some(direct) = DataLoop::new("loop-direct", disk_dir(), &["--direct-io=on"]) else {
        return;
    };
    let doc = bench(&direct);
    let codes = common::warning_codes(&doc);
    assert!(!codes.contains(&"loop-buffered".to_string()), "{codes:?}");
}
