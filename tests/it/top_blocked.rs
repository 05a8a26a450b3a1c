//! Who is behind %iowait (`io_waiters`): a reader held back by a blkio throttle sleeps in the
//! block layer, and `top` names it, both where it finds the blocked threads among the task
//! iterator's thread states (root, eBPF) and where it reads every thread's /proc stat.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{LoopDev, is_root, parse_json, run, skip, stderr};

/// A blkio cgroup throttling reads of one device; on drop the throttle is lifted (so its
/// reader's request completes), the reader reaped and the cgroup removed.
struct Throttled {
    group: PathBuf,
    device: String,
    reader: Option<Child>,
}

impl Drop for Throttled {
    fn drop(&mut self) {
        let _ = std::fs::write(
            self.group.join("blkio.throttle.read_bps_device"),
            format!("{} 0", self.device),
        );
        if let Some(mut reader) = self.reader.take() {
            let _ = reader.kill();
            let _ = reader.wait();
        }
        let _ = std::fs::remove_dir(&self.group);
    }
}

/// The state letter in /proc/PID/stat.
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

#[test]
fn a_reader_held_by_a_throttle_is_named_as_waiting_on_the_disk() {
    let test = "a_reader_held_by_a_throttle_is_named_as_waiting_on_the_disk";
    if !is_root() {
        return skip(&format!("{test}: needs root for a blkio throttle"));
    }
    let blkio = Path::new("/sys/fs/cgroup/blkio");
    if !blkio.join("blkio.throttle.read_bps_device").exists() {
        return skip(&format!(
            "{test}: no cgroup v1 blkio controller with throttling"
        ));
    }
    let Some(dev) = LoopDev::new(test, 8 << 20) else {
        return;
    };
    let rdev = std::fs::metadata(&dev.dev).unwrap().rdev();
    let mut throttled = Throttled {
        group: blkio.join(format!("tacho-itest-{}", std::process::id())),
        device: format!("{}:{}", libc::major(rdev), libc::minor(rdev)),
        reader: None,
    };
    std::fs::create_dir(&throttled.group).unwrap();
    // 4 KiB/s: the reader's 64 KiB take 16 s, far longer than the test.
    std::fs::write(
        throttled.group.join("blkio.throttle.read_bps_device"),
        format!("{} 4096", throttled.device),
    )
    .unwrap();
    let script = format!(
        "echo $$ > {}/cgroup.procs && exec dd if={} of=/dev/null bs=64k count=1 iflag=direct",
        throttled.group.display(),
        dev.path()
    );
    let reader = Command::new("sh")
        .args(["-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = reader.id();
    throttled.reader = Some(reader);
    let deadline = Instant::now() + Duration::from_secs(10);
    while state(pid) != Some('D') {
        assert!(Instant::now() < deadline, "the reader never blocked");
        std::thread::sleep(Duration::from_millis(20));
    }
    for options in [&[][..], &["--no-ebpf"]] {
        let mut args = vec!["top", "--json", "--count", "1", "--interval", "200ms"];
        args.extend_from_slice(options);
        let o = run(&args);
        let v = parse_json(&o);
        let waiters = v["io_waiters"].as_array().cloned().unwrap_or_default();
        let found = waiters.iter().find(|w| w["pid"] == pid);
        assert!(
            found.is_some_and(|w| w["thread"] == "dd" && w["tid"] == pid),
            "{options:?}: dd (pid {pid}) not among the waiters {waiters:?}; stderr: {}",
            stderr(&o)
        );
        assert_eq!(found.unwrap()["waits_on"], "disk", "{options:?}");
    }
}
