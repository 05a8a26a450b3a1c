//! tacho never destroys data without consent and never leaves a test file behind: block
//! devices with a filesystem, mounted devices, existing files, signals, stale files.
//! Loop device tests need root and losetup; each makes its own image and detaches it.

use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

const IMAGE: u64 = 64 << 20;

/// The loop device's entry in a test's `device` array.
fn device_entry<'a>(test: &'a Value, name: &str) -> &'a Value {
    test["device"]
        .as_array()
        .expect("device is an array")
        .iter()
        .find(|d| d["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in device array of {test}"))
}

fn bench_dev(dev: &LoopDev, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["bench", "disk", dev.path(), "--json"];
    args.extend_from_slice(TINY);
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn direct_io_on_an_empty_loop_device_reaches_the_device() {
    let Some(dev) = LoopDev::new("direct_io_on_an_empty_loop_device", IMAGE) else {
        return;
    };
    // All zeros: no signature, so writing needs no --destroy-data.
    let o = bench_dev(&dev, &["--rw", "randwrite", "--direct"]);
    let v = json_ok(&o);
    assert_eq!(v["target"]["kind"], "block_device");
    let t = &tests_of(&v)[0];
    assert_eq!(t["direct"], true);
    assert!(t["write"]["ios"].as_u64().unwrap() > 0);
    let d = device_entry(t, &dev.name());
    assert!(d["writes"].as_u64().unwrap() > 0, "no writes counted: {d}");

    let o = bench_dev(&dev, &["--rw", "randread", "--direct"]);
    let v = json_ok(&o);
    let t = &tests_of(&v)[0];
    assert!(t["read"]["ios"].as_u64().unwrap() > 0);
    let d = device_entry(t, &dev.name());
    assert!(d["reads"].as_u64().unwrap() > 0, "no reads counted: {d}");
}

/// A loop device carrying a fresh ext4 filesystem, or None (with a SKIP line).
fn ext4_loop(test: &str) -> Option<LoopDev> {
    if is_root() && !have_tool("mkfs.ext4") {
        skip(&format!("{test}: mkfs.ext4 is not installed"));
        return None;
    }
    let dev = LoopDev::new(test, IMAGE)?;
    if !dev.mkfs_ext4() {
        skip(&format!("{test}: mkfs.ext4 failed on {}", dev.path()));
        return None;
    }
    Some(dev)
}

#[test]
fn writing_over_ext4_is_refused_without_destroy_data() {
    let Some(dev) = ext4_loop("writing_over_ext4_is_refused") else {
        return;
    };
    let before = dev.content();
    for rw in ["write", "randwrite", "randrw"] {
        let line = assert_error(&bench_dev(&dev, &["--rw", rw]));
        // "ext4" by libblkid, "ext2/3/4" by tacho's table where libblkid is missing.
        assert!(
            line.contains("ext4") || line.contains("ext2/3/4"),
            "names the filesystem: {line}"
        );
        assert!(line.contains("--destroy-data"), "names the fix: {line}");
    }
    // The suite writes too.
    let line = assert_error(&run(&["bench", "disk", dev.path(), "--size", "8M"]));
    assert!(line.contains("--destroy-data"), "{line}");
    assert!(
        dev.content() == before,
        "the device changed after a refusal"
    );

    // Reading is harmless and allowed.
    let o = bench_dev(&dev, &["--rw", "randread"]);
    let v = json_ok(&o);
    assert!(tests_of(&v)[0]["read"]["ios"].as_u64().unwrap() > 0);
    assert!(dev.content() == before, "a read test changed the device");

    // With consent, it runs.
    let o = bench_dev(&dev, &["--rw", "randwrite", "--destroy-data"]);
    let v = json_ok(&o);
    assert!(tests_of(&v)[0]["write"]["ios"].as_u64().unwrap() > 0);
}

#[test]
fn a_mounted_device_is_refused_even_with_destroy_data() {
    let Some(dev) = ext4_loop("a_mounted_device_is_refused") else {
        return;
    };
    let mnt = tempfile::tempdir().unwrap();
    let _mounted = match MountGuard::mount(&[dev.path()], mnt.path()) {
        Ok(m) => m,
        Err(e) => {
            skip(&format!("a_mounted_device_is_refused: mount failed: {e}"));
            return;
        }
    };
    for extra in [&["--destroy-data"][..], &[]] {
        let mut args = vec!["--rw", "randwrite"];
        args.extend_from_slice(extra);
        let line = assert_error(&bench_dev(&dev, &args));
        assert!(line.contains("mounted"), "says it is mounted: {line}");
        assert!(
            line.contains(mnt.path().to_str().unwrap()),
            "names the mount point: {line}"
        );
    }
    // Content is not compared here: a mounted ext4 writes to itself (lazy inode-table init,
    // superblock). The filesystem must still work.
    std::fs::write(mnt.path().join("still-here"), b"ok").unwrap();
    assert_eq!(std::fs::read(mnt.path().join("still-here")).unwrap(), b"ok");
}

#[test]
fn writing_into_an_existing_file_needs_destroy_data() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("precious.dat");
    let data: Vec<u8> = (0..(8u32 << 20))
        .map(|i| (i * 7 + i / 4096) as u8)
        .collect();
    std::fs::write(&file, &data).unwrap();
    let path = file.to_str().unwrap();
    for rw in ["write", "randwrite", "rw"] {
        let line = assert_error(&run(&[
            "bench",
            "disk",
            path,
            "--buffered",
            "--rw",
            rw,
            "--runtime",
            "300ms",
        ]));
        assert!(line.contains("--destroy-data"), "{line}");
    }
    assert!(std::fs::read(&file).unwrap() == data, "the file changed");

    let o = run(&[
        "bench",
        "disk",
        path,
        "--json",
        "--buffered",
        "--rw",
        "randread",
        "--runtime",
        "300ms",
    ]);
    let v = json_ok(&o);
    assert_eq!(v["target"]["kind"], "file");
    assert!(tests_of(&v)[0]["read"]["ios"].as_u64().unwrap() > 0);
    assert!(std::fs::read(&file).unwrap() == data, "reading changed it");
    assert_eq!(entries(dir.path()), vec!["precious.dat"]);

    let o = run(&[
        "bench",
        "disk",
        path,
        "--json",
        "--buffered",
        "--rw",
        "randwrite",
        "--runtime",
        "300ms",
        "--destroy-data",
    ]);
    json_ok(&o);
    assert_eq!(entries(dir.path()), vec!["precious.dat"], "no extra file");
}

fn test_files(dir: &Path) -> Vec<String> {
    entries(dir)
        .into_iter()
        .filter(|n| n.starts_with(".tacho-bench."))
        .collect()
}

/// Starts a 30 s test, waits for its test file, sends `signal`, and expects exit 130 within a
/// few seconds with the directory empty.
/// With `during` set, the signal waits until the progress bar shows that phase (a test's name);
/// without, it lands at once, while the file is laid out.
fn interrupted_run_cleans_up(signal: libc::c_int, name: &str, during: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let mut screen = ProgressScreen::new();
    let child = tacho()
        .args([
            "bench",
            "disk",
            dir.path().to_str().unwrap(),
            "--json",
            "--buffered",
            "--rw",
            "randwrite",
            "--size",
            "8M",
            "--runtime",
            "30s",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(screen.stderr())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut child = child;
    wait_for_test_file(dir.path(), &mut child);
    let file = &test_files(dir.path())[0];
    let expected = format!(".tacho-bench.{pid}.");
    assert!(file.starts_with(&expected), "{file} names pid {pid}");
    assert!(file.ends_with(".tmp") && file.len() == expected.len() + 8 + 4);
    if let Some(phase) = during {
        screen.wait_for(phase, &mut child);
    }
    self::signal(&child, signal);
    let sent = Instant::now();
    let o = wait_output(child, Duration::from_secs(10));
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "{name}: took {:?} to stop",
        sent.elapsed()
    );
    assert_eq!(o.status.code(), Some(130), "{name}: stderr {}", stderr(&o));
    assert_empty(dir.path());
    let v = parse_json(&o);
    assert_eq!(v["interrupted"], true, "{name}");
    // Cut during the lay-out nothing was measured; during the test, what it measured is kept
    // and marked.
    for t in v["tests"].as_array().unwrap() {
        assert_eq!(t["interrupted"], true, "{name}: {t}");
    }
}

#[test]
fn sigint_stops_the_run_and_removes_the_test_file() {
    interrupted_run_cleans_up(libc::SIGINT, "SIGINT", Some("randwrite 4KiB"));
}

#[test]
fn sigterm_stops_the_run_and_removes_the_test_file() {
    interrupted_run_cleans_up(libc::SIGTERM, "SIGTERM", Some("randwrite 4KiB"));
}

#[test]
fn sigint_during_layout_removes_the_test_file() {
    interrupted_run_cleans_up(libc::SIGINT, "SIGINT at once", None);
}

#[test]
fn a_stale_file_of_a_dead_run_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    // pid 2^31-1 is above any pid_max, so no such process exists.
    let stale = dir.path().join(".tacho-bench.2147483647.0000abcd.tmp");
    std::fs::write(&stale, b"left by a killed run").unwrap();
    let mine = dir.path().join("not-tachos.tmp");
    std::fs::write(&mine, b"keep").unwrap();
    let args = tiny_disk(
        dir.path().to_str().unwrap(),
        &["--json", "--buffered", "--rw", "randread"],
    );
    let v = json_ok(&run(&args));
    assert!(!stale.exists(), "the stale file is still there");
    assert_eq!(entries(dir.path()), vec!["not-tachos.tmp"]);
    let w = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "removed-stale-file")
        .unwrap_or_else(|| panic!("no removed-stale-file warning in {}", v["warnings"]));
    assert!(w["message"].as_str().unwrap().contains("2147483647"));

    // The table output says so too.
    std::fs::write(&stale, b"again").unwrap();
    let args = tiny_disk(
        dir.path().to_str().unwrap(),
        &["--buffered", "--rw", "randread"],
    );
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let all = stdout(&o) + &stderr(&o);
    assert!(all.contains("removed"), "no word about the removal: {all}");
    assert!(!stale.exists());
}

/// Polls until a `.tacho-bench.*` file exists in `dir` (10 s at most).
fn wait_for_test_file(dir: &Path, child: &mut std::process::Child) {
    let start = Instant::now();
    while test_files(dir).is_empty() {
        if start.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no test file appeared in {} within 10 s", dir.display());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn signal(child: &std::process::Child, sig: libc::c_int) {
    // SAFETY: signalling the child we started.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, sig) }, 0);
}

#[test]
fn an_interrupted_suite_reports_the_tests_that_finished() {
    let dir = tempfile::tempdir().unwrap();
    let mut screen = ProgressScreen::new();
    let mut child = tacho()
        .args([
            "bench",
            "disk",
            dir.path().to_str().unwrap(),
            "--json",
            "--buffered",
            "--size",
            "8M",
            "--runtime",
            "500ms",
            "--ramp",
            "0s",
            "--repeat",
            "1",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(screen.stderr())
        .spawn()
        .unwrap();
    // The fourth of the seven quick tests is under way: three finished, three not begun.
    screen.wait_for("RND4K Q32T1 write", &mut child);
    signal(&child, libc::SIGINT);
    let o = wait_output(child, Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(130), "stderr: {}", stderr(&o));
    assert_empty(dir.path());
    let v = parse_json(&o);
    assert_eq!(v["interrupted"], true);
    assert_eq!(v["suite"]["name"], "quick");
    let done = v["tests"].as_array().unwrap();
    assert!(
        (1..7).contains(&done.len()),
        "expected some but not all of the 7 quick tests, got {}",
        done.len()
    );
    // The test the signal cut is the last one, marked; the others ran fully.
    let (last, finished) = done.split_last().unwrap();
    for t in finished {
        assert_eq!(t["interrupted"], false, "{t}");
        assert!(
            t["runtime_s"].as_f64().unwrap() >= 0.45,
            "a finished test ran fully: {t}"
        );
    }
    if last["interrupted"] == false {
        assert!(last["runtime_s"].as_f64().unwrap() >= 0.45, "{last}");
    }
}

#[test]
fn bench_alone_runs_the_quick_suite_in_the_current_directory() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = tacho().arg("bench").current_dir(dir.path()).spawn_piped();
    wait_for_test_file(dir.path(), &mut child);
    signal(&child, libc::SIGTERM);
    let o = wait_output(child, Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(130), "stderr: {}", stderr(&o));
    assert_empty(dir.path());
    assert!(stdout(&o).contains("interrupted"), "says it was cut short");
}

#[test]
fn a_second_signal_exits_at_once_and_the_next_run_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = tacho()
        .args([
            "bench",
            "disk",
            dir.path().to_str().unwrap(),
            "--json",
            "--buffered",
            "--rw",
            "randread",
            "--size",
            "8M",
            "--runtime",
            "30s",
        ])
        .spawn_piped();
    wait_for_test_file(dir.path(), &mut child);
    signal(&child, libc::SIGINT);
    signal(&child, libc::SIGINT);
    let o = wait_output(child, Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(130), "stderr: {}", stderr(&o));
    // The file may or may not have been removed before the second signal; the next run
    // must leave the directory empty either way.
    let left = test_files(dir.path());
    let args = tiny_disk(
        dir.path().to_str().unwrap(),
        &["--json", "--buffered", "--rw", "randread"],
    );
    let v = json_ok(&run(&args));
    assert_empty(dir.path());
    let removed = warning_codes(&v)
        .iter()
        .filter(|c| *c == "removed-stale-file")
        .count();
    assert_eq!(removed, left.len(), "one warning per stale file {left:?}");
}

/// An admin's script unmounts right after a benchmark: tacho must not keep the filesystem busy
/// after it exits (closing an io_uring tears it down asynchronously, with the registered file
/// still open, unless tacho unregisters it first).
#[test]
fn umount_right_after_an_io_uring_run_succeeds() {
    let Some(dev) = ext4_loop("umount_right_after_an_io_uring_run") else {
        return;
    };
    let mnt = tempfile::tempdir().unwrap();
    let guard = match MountGuard::mount(&[dev.path()], mnt.path()) {
        Ok(m) => m,
        Err(e) => {
            skip(&format!(
                "umount_right_after_an_io_uring_run: mount failed: {e}"
            ));
            return;
        }
    };
    let args = tiny_disk(
        mnt.path().to_str().unwrap(),
        &["--rw", "randwrite", "--engine", "io_uring"],
    );
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let status = std::process::Command::new("umount")
        .arg(mnt.path())
        .status()
        .unwrap();
    assert!(status.success(), "umount right after tacho exited failed");
    drop(guard);
}

/// A hash of the whole device, read through it in 1 MiB pieces (an XFS device is 320 MiB).
fn device_hash(dev: &LoopDev) -> u64 {
    use std::hash::Hasher;
    use std::io::Read;
    let mut file = std::fs::File::open(&dev.dev).expect("cannot open the loop device");
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).expect("cannot read the loop device");
        if n == 0 {
            return hasher.finish();
        }
        hasher.write(&buf[..n]);
    }
}

/// Writes `bytes` at `offset` of the device, as `dd seek=` would.
fn write_into(dev: &LoopDev, offset: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&dev.dev)
        .expect("cannot open the loop device for writing");
    file.write_all_at(bytes, offset)
        .expect("cannot write the loop device");
    file.sync_all().expect("cannot flush the loop device");
}

/// How a test puts a signature on its device.
enum Make<'a> {
    /// `tool ARGS…` with `{dev}` replaced by the device, or `tool ARGS… DEVICE` without one.
    OnDevice(&'a [&'a str]),
    /// `tool ARGS…` with `{image}` replaced by a new image file and `{dir}` by a directory
    /// holding one file, then the image copied to the start of the device: for tools that
    /// build an image from a directory.
    Image(&'a [&'a str]),
}

/// Makes a signature with `tool` on a fresh loop device of `size` bytes, then checks that a
/// sequential write test is refused with a message naming `words` and `--destroy-data`, and
/// that the device is byte-identical afterwards.
fn refused_and_untouched(
    test: &str,
    size: u64,
    tool: &str,
    package: &str,
    make: Make,
    words: &str,
) {
    if is_root() && !have_tool(tool) {
        skip(&format!(
            "{test}: {tool} is not installed (apt-get install {package})"
        ));
        return;
    }
    let Some(dev) = LoopDev::new(test, size) else {
        return;
    };
    match make {
        Make::OnDevice(args) => {
            let mut all: Vec<&str> = args
                .iter()
                .map(|a| if *a == "{dev}" { dev.path() } else { a })
                .collect();
            if !args.contains(&"{dev}") {
                all.push(dev.path());
            }
            sh(tool, &all);
        }
        Make::Image(args) => {
            let dir = tempfile::tempdir().unwrap();
            let content = dir.path().join("content");
            std::fs::create_dir(&content).unwrap();
            std::fs::write(content.join("hello.txt"), b"hello").unwrap();
            let image = dir.path().join("fs.img");
            let (image, content) = (image.to_str().unwrap(), content.to_str().unwrap());
            let all: Vec<&str> = args
                .iter()
                .map(|a| match *a {
                    "{image}" => image,
                    "{dir}" => content,
                    other => other,
                })
                .collect();
            sh(tool, &all);
            write_into(&dev, 0, &std::fs::read(image).unwrap());
        }
    }
    let before = device_hash(&dev);
    let line = assert_error(&bench_dev(&dev, &["--rw", "write"]));
    let lower = line.to_lowercase();
    assert!(
        lower.contains(&words.to_lowercase()),
        "{test}: names {words:?}: {line}"
    );
    assert!(
        line.contains("--destroy-data"),
        "{test}: names the fix: {line}"
    );
    assert_eq!(
        device_hash(&dev),
        before,
        "{test}: the device changed after a refusal"
    );
}

#[test]
fn f2fs_is_refused_and_untouched() {
    let make = Make::OnDevice(&["-q", "-f"]);
    refused_and_untouched("f2fs", IMAGE, "mkfs.f2fs", "f2fs-tools", make, "f2fs");
}

#[test]
fn nilfs2_is_refused_and_untouched() {
    // -B 16: shorter segments, so 64 MiB is enough.
    let make = Make::OnDevice(&["-q", "-f", "-B", "16"]);
    refused_and_untouched(
        "nilfs2",
        IMAGE,
        "mkfs.nilfs2",
        "nilfs-tools",
        make,
        "nilfs2",
    );
}

#[test]
fn minix_is_refused_and_untouched() {
    let make = Make::OnDevice(&[]);
    refused_and_untouched("minix", IMAGE, "mkfs.minix", "util-linux", make, "minix");
}

#[test]
fn jfs_is_refused_and_untouched() {
    let make = Make::OnDevice(&["-q"]);
    refused_and_untouched("jfs", IMAGE, "mkfs.jfs", "jfsutils", make, "jfs");
}

#[test]
fn udf_is_refused_and_untouched() {
    let make = Make::OnDevice(&[]);
    refused_and_untouched("udf", IMAGE, "mkfs.udf", "udftools", make, "udf");
}

#[test]
fn squashfs_is_refused_and_untouched() {
    let make = Make::Image(&["{dir}", "{image}", "-quiet", "-noappend"]);
    refused_and_untouched(
        "squashfs",
        IMAGE,
        "mksquashfs",
        "squashfs-tools",
        make,
        "squashfs",
    );
}

#[test]
fn erofs_is_refused_and_untouched() {
    let make = Make::Image(&["{image}", "{dir}"]);
    refused_and_untouched("erofs", IMAGE, "mkfs.erofs", "erofs-utils", make, "erofs");
}

#[test]
fn ext2_and_ext3_are_refused_and_untouched() {
    for (tool, name) in [("mkfs.ext2", "ext2"), ("mkfs.ext3", "ext3")] {
        let make = Make::OnDevice(&["-q", "-F"]);
        refused_and_untouched(name, IMAGE, tool, "e2fsprogs", make, name);
    }
}

#[test]
fn xfs_is_refused_and_untouched() {
    // Current xfsprogs refuses filesystems under 300 MiB; the image in /dev/shm is sparse.
    let make = Make::OnDevice(&["-q", "-f"]);
    refused_and_untouched("xfs", 320 << 20, "mkfs.xfs", "xfsprogs", make, "xfs");
}

#[test]
fn btrfs_is_refused_and_untouched() {
    let make = Make::OnDevice(&["-q", "-f"]);
    refused_and_untouched(
        "btrfs",
        128 << 20,
        "mkfs.btrfs",
        "btrfs-progs",
        make,
        "btrfs",
    );
}

#[test]
fn fat_exfat_and_ntfs_are_refused_and_untouched() {
    let cases: [(&str, &[&str], &str, &str); 3] = [
        ("mkfs.vfat", &[], "dosfstools", "vfat"),
        ("mkfs.exfat", &[], "exfatprogs", "exfat"),
        // -f: skip zeroing the device.
        ("mkfs.ntfs", &["-f", "-q"], "ntfs-3g", "ntfs"),
    ];
    for (tool, args, package, name) in cases {
        refused_and_untouched(name, IMAGE, tool, package, Make::OnDevice(args), name);
    }
}

#[test]
fn swap_is_refused_and_untouched() {
    let make = Make::OnDevice(&[]);
    refused_and_untouched("swap", IMAGE, "mkswap", "util-linux", make, "swap");
}

#[test]
fn lvm2_physical_volume_is_refused_and_untouched() {
    // --devices limits LVM to this device, ignoring the host's devices file and filters.
    let make = Make::OnDevice(&["-q", "--devices", "{dev}", "{dev}"]);
    refused_and_untouched("lvm2_pv", IMAGE, "pvcreate", "lvm2", make, "LVM2");
}

#[test]
fn luks_is_refused_and_untouched() {
    let key = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(key.path(), b"not a secret").unwrap();
    let key = key.path().to_str().unwrap().to_owned();
    let args = [
        "luksFormat",
        "--batch-mode",
        "--type",
        "luks2",
        // The fastest key derivation cryptsetup allows: the test is about the header.
        "--pbkdf",
        "pbkdf2",
        "--pbkdf-force-iterations",
        "1000",
        "--key-file",
        &key,
    ];
    let make = Make::OnDevice(&args);
    refused_and_untouched("luks", IMAGE, "cryptsetup", "cryptsetup-bin", make, "LUKS");
}

#[test]
fn iso9660_is_refused_and_untouched() {
    let make = Make::Image(&["-as", "mkisofs", "-quiet", "-o", "{image}", "{dir}"]);
    refused_and_untouched("iso9660", IMAGE, "xorriso", "xorriso", make, "iso9660");
}

#[test]
fn ext4_at_one_mib_without_a_partition_table_is_refused_and_untouched() {
    let test = "ext4_at_one_mib";
    if is_root() && !have_tool("mkfs.ext4") {
        skip(&format!("{test}: mkfs.ext4 is not installed"));
        return;
    }
    let Some(dev) = LoopDev::new(test, IMAGE) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("ext4.img");
    std::fs::File::create(&image)
        .and_then(|f| f.set_len(8 << 20))
        .unwrap();
    sh("mkfs.ext4", &["-q", "-F", image.to_str().unwrap()]);
    write_into(&dev, 1 << 20, &std::fs::read(&image).unwrap());
    let before = device_hash(&dev);
    let line = assert_error(&bench_dev(&dev, &["--rw", "write"]));
    assert!(line.contains("ext4"), "names the filesystem: {line}");
    assert!(line.contains("at offset 1 MiB"), "says where: {line}");
    assert_eq!(
        device_hash(&dev),
        before,
        "the device changed after a refusal"
    );
}
