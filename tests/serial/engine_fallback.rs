//! Where io_uring is blocked, `bench disk` runs on psync and says so. The test blocks it the
//! way a hardened host does, with the `kernel.io_uring_disabled` sysctl (Linux 6.6+), and puts
//! the old value back. The sysctl is machine-wide: this test lives in tests/serial, whose
//! tests run one at a time, and no test of tests/it runs meanwhile (`cargo test` runs test
//! binaries one after another; a runner that runs binaries in parallel, such as
//! cargo-nextest, must run tests/serial alone).

use crate::common::*;

const SYSCTL: &str = "/proc/sys/kernel/io_uring_disabled";

/// Sets the sysctl; restores the value it found on drop, even when the test fails.
struct IoUringDisabled(String);

impl IoUringDisabled {
    fn set(value: &str) -> IoUringDisabled {
        let old = std::fs::read_to_string(SYSCTL).unwrap();
        std::fs::write(SYSCTL, value).unwrap();
        IoUringDisabled(old.trim().to_string())
    }
}

impl Drop for IoUringDisabled {
    fn drop(&mut self) {
        let _ = std::fs::write(SYSCTL, &self.0);
    }
}

#[test]
fn blocked_io_uring_falls_back_to_psync_with_a_warning() {
    let _kernel_wide = crate::common::kernel_wide();
    if !is_root() {
        skip("io_uring fallback: needs root to set kernel.io_uring_disabled");
        return;
    }
    if !std::path::Path::new(SYSCTL).exists() {
        skip("io_uring fallback: this kernel has no kernel.io_uring_disabled (Linux < 6.6)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let args = tiny_disk(
        dir.path().to_str().unwrap(),
        &[
            "--json",
            "--rw",
            "randread",
            "--bs",
            "4k",
            "--iodepth",
            "8",
            "--no-save",
        ],
    );

    let report = {
        let _blocked = IoUringDisabled::set("2");
        json_ok(&run(&args))
    };
    assert!(
        warning_codes(&report).contains(&"io-uring-unavailable".to_string()),
        "{:?}",
        warning_codes(&report)
    );
    let test = &tests_of(&report)[0];
    assert_eq!(test["engine"], "psync");
    assert_eq!(test["iodepth"], 8);
    assert!(test["read"]["iops"].as_f64().unwrap() > 0.0, "{test}");
    assert_empty(dir.path());

    // With the sysctl restored, the same run uses io_uring again and does not warn.
    let report = json_ok(&run(&args));
    assert_eq!(tests_of(&report)[0]["engine"], "io_uring");
    assert!(!warning_codes(&report).contains(&"io-uring-unavailable".to_string()));
}
