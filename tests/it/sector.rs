//! `files --sector` speaks blktrace's language: blkparse prints sectors from the start of the
//! whole disk. On a loop device with a GPT partition at 1 MiB holding ext4, a file's sectors
//! (known from FIEMAP through `filefrag`) are named by whole-disk numbers given with the disk
//! or with the partition, and by partition-relative numbers with `--relative`.

use crate::common::{
    MountGuard, assert_error, have_tool, is_root, parse_json, run, sh, skip, stdout,
};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Where the partition starts, in 512-byte sectors (1 MiB, as fdisk and parted place it).
const PART_START: u64 = 2048;

/// A loop device with partition scanning over a private image; detached on drop.
struct PartitionedLoop {
    disk: PathBuf,
    _image: tempfile::NamedTempFile,
}

impl PartitionedLoop {
    fn new(test: &str) -> Option<PartitionedLoop> {
        if !is_root() {
            skip(&format!("{test}: needs root for a loop device"));
            return None;
        }
        for tool in ["losetup", "sfdisk", "filefrag", "mkfs.ext4"] {
            if !have_tool(tool) {
                skip(&format!("{test}: {tool} is not installed"));
                return None;
            }
        }
        let image = tempfile::Builder::new()
            .prefix("tacho-itest-sector-")
            .suffix(".img")
            .tempfile_in("/dev/shm")
            .expect("cannot create an image");
        image.as_file().set_len(64 << 20).unwrap();
        let mut sfdisk = Command::new("sfdisk")
            .args(["--quiet"])
            .arg(image.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("cannot run sfdisk");
        std::io::Write::write_all(
            &mut sfdisk.stdin.take().unwrap(),
            format!("label: gpt\nstart={PART_START}, type=linux\n").as_bytes(),
        )
        .unwrap();
        assert!(sfdisk.wait().unwrap().success(), "sfdisk failed");
        let disk = sh(
            "losetup",
            &["-P", "-f", "--show", image.path().to_str().unwrap()],
        );
        Some(PartitionedLoop {
            disk: PathBuf::from(disk.trim()),
            _image: image,
        })
    }

    fn disk(&self) -> &str {
        self.disk.to_str().unwrap()
    }

    /// The first partition's node, once it exists.
    fn partition(&self) -> String {
        let part = format!("{}p1", self.disk());
        // `losetup -P` does not always scan the table here; partx adds what is missing
        // (and fails harmlessly when the partition is already known).
        let _ = Command::new("partx")
            .args(["-a", self.disk()])
            .stderr(std::process::Stdio::null())
            .status();
        let start = Instant::now();
        while !Path::new(&part).exists() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "{part} never appeared"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        part
    }
}

impl Drop for PartitionedLoop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.disk).status();
    }
}

/// The first physical sector of `file`, counted from the start of its partition (FIEMAP's
/// physical offsets are device-relative), from `filefrag -v -b512`.
fn first_sector(file: &Path) -> u64 {
    let out = sh("filefrag", &["-v", "-b512", file.to_str().unwrap()]);
    // "   0:        0..    1023:      34816..     35839:   1024:             last,eof"
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("0:"))
        .unwrap_or_else(|| panic!("no extent 0 in: {out}"));
    let physical = line.split(':').nth(2).unwrap();
    physical.split("..").next().unwrap().trim().parse().unwrap()
}

#[test]
fn blktrace_sectors_name_the_file_via_disk_partition_and_relative() {
    let Some(lo) = PartitionedLoop::new("sector numbering") else {
        return;
    };
    let part = lo.partition();
    sh("mkfs.ext4", &["-q", "-F", &part]);
    let dir = tempfile::tempdir().unwrap();
    let _mount = MountGuard::mount(&[&part], dir.path()).expect("cannot mount the partition");
    // Two files of 512 KiB: a number read with the wrong convention (2048 sectors, 1 MiB,
    // off) lies past the first file.
    let mut files = Vec::new();
    for (name, byte) in [("first.bin", 0xa5u8), ("second.bin", 0x5a)] {
        let path = dir.path().join(name);
        std::fs::write(&path, vec![byte; 512 << 10]).unwrap();
        std::fs::File::open(&path).unwrap().sync_all().unwrap();
        files.push(path);
    }
    let relative = first_sector(&files[0]) + 3;
    let whole = relative + PART_START;

    // The whole disk: tacho finds the partition and its filesystem.
    let v = parse_json(&run(&[
        "files",
        "--sector",
        lo.disk(),
        &whole.to_string(),
        "--json",
    ]));
    assert_eq!(v["numbering"], "whole-disk", "{v}");
    let s = &v["sectors"][0];
    assert_eq!(s["device"], part.as_str(), "{v}");
    assert_eq!(s["device_sector"], relative, "{v}");
    let owner = s["owners"][0]["path"].as_str().unwrap_or_default();
    assert_eq!(Path::new(owner), files[0], "{v}");
    assert_eq!(s["owners"][0]["offset_bytes"], 3 * 512, "{v}");

    // The partition with a whole-disk number (blktrace -d /dev/sda1 prints these).
    let o = run(&["files", "--sector", &part, &whole.to_string()]);
    let text = stdout(&o);
    assert!(o.status.success(), "{text}");
    assert!(
        text.contains(&format!("{whole}: {} (offset 1536)", files[0].display())),
        "{text}"
    );
    assert!(text.contains("from the start of disk"), "{text}");

    // The partition with a partition-relative number, asked for by --relative.
    let o = run(&[
        "files",
        "--sector",
        &part,
        &relative.to_string(),
        "--relative",
    ]);
    let text = stdout(&o);
    assert!(
        text.contains(&format!("{relative}: {} (offset 1536)", files[0].display())),
        "{text}"
    );
    assert!(text.contains("--relative"), "{text}");

    // A sector in the partition table belongs to no partition.
    let v = parse_json(&run(&["files", "--sector", lo.disk(), "1", "--json"]));
    let note = v["sectors"][0]["note"].as_str().unwrap_or_default();
    assert!(note.contains("no partition"), "{v}");

    // A whole-disk number outside the partition is refused with the way out.
    let line = assert_error(&run(&["files", "--sector", &part, "100"]));
    assert!(line.contains("--relative"), "{line}");
    // --relative means nothing for a partitioned disk.
    let line = assert_error(&run(&["files", "--sector", lo.disk(), "100", "--relative"]));
    assert!(line.contains("whole disk"), "{line}");
}
