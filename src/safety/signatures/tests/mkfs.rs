//! Images made by the real tools, so offsets are checked against what admins' disks hold.
//!
//! mkfs and friends all work on plain sparse files, so neither root nor loop devices are
//! needed. A missing tool skips its test with a message on stderr (written directly, so cargo's
//! output capture does not hide it) naming the package to install.
//!
//! Each image is checked twice: with libblkid (what `detect` does), and with tacho's table
//! alone (the fallback where libblkid is missing), which knows only today's dozen formats.
//!
//! Debian/Ubuntu packages for the full set: e2fsprogs, util-linux, xfsprogs, btrfs-progs,
//! dosfstools, exfatprogs, ntfs-3g, fdisk, cryptsetup-bin, xorriso, f2fs-tools, nilfs-tools,
//! jfsutils, udftools, squashfs-tools, erofs-utils, and lvm2 (see `lvm.rs`). Debian 12 packages
//! neither hfsprogs nor bcachefs-tools.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use tempfile::TempDir;

use super::MIB;
use crate::safety::blkid;
use crate::safety::signatures::detect_with;

/// Finds `tool` on PATH or in the sbin directories an unprivileged PATH often lacks.
pub(super) fn find_tool(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(tool))
        .find(|candidate| candidate.is_file())
}

/// The tool's path, or `None` after telling the reader that the test is skipped.
pub(super) fn require(test: &str, tool: &str, package: &str) -> Option<PathBuf> {
    let found = find_tool(tool);
    if found.is_none() {
        let _ = writeln!(
            std::io::stderr(),
            "skipping {test}: {tool} not found (apt-get install {package})"
        );
    }
    found
}

/// A sparse image file of `len` bytes in a fresh temporary directory.
pub(super) fn sparse_image(len: u64) -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("create temp dir");
    let path = dir.path().join("disk.img");
    std::fs::File::create(&path)
        .and_then(|f| f.set_len(len))
        .expect("create image");
    (dir, path)
}

/// Runs `tool args…` fed with `stdin`; a failure fails the test with the tool's stderr.
pub(super) fn run(tool: &Path, args: &[&str], stdin: &str) {
    let mut child = Command::new(tool)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tool");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("feed tool");
    let out = child.wait_with_output().expect("wait for tool");
    assert!(
        out.status.success(),
        "{} {args:?} failed: {}",
        tool.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What was found, as (name, offset) pairs: `all` with libblkid, `table` by the table alone.
#[derive(Debug)]
pub(super) struct Finds {
    pub all: Vec<(String, u64)>,
    pub table: Vec<(String, u64)>,
}

pub(super) fn detect_path(path: &Path) -> Finds {
    let file = std::fs::File::open(path).expect("open image");
    let len = file.metadata().expect("image size").len();
    let pairs = |use_blkid| -> Vec<(String, u64)> {
        let found = detect_with(&file, len, use_blkid).expect("detect");
        found.into_iter().map(|s| (s.name, s.offset)).collect()
    };
    Finds {
        all: pairs(true),
        table: pairs(false),
    }
}

pub(super) fn one(name: &str, offset: u64) -> Vec<(String, u64)> {
    vec![(name.to_owned(), offset)]
}

/// Checks what libblkid and the table found: `blkid` with libblkid (the table's find of the
/// same format is folded into it), `table` without.
pub(super) fn expect(test: &str, finds: &Finds, blkid: (&str, u64), table: Option<(&str, u64)>) {
    let table = table
        .map(|(name, offset)| one(name, offset))
        .unwrap_or_default();
    assert_eq!(finds.table, table, "{test}: the table alone");
    if blkid::available() {
        assert_eq!(finds.all, one(blkid.0, blkid.1), "{test}: with libblkid");
    } else {
        let _ = writeln!(
            std::io::stderr(),
            "{test}: libblkid is not installed, only the table was checked"
        );
        assert_eq!(finds.all, table, "{test}: without libblkid");
    }
}

/// Formats a fresh image with `tool args… <image>` and returns what was detected.
fn format(len: u64, tool: &Path, args: &[&str]) -> Finds {
    let (_dir, image) = sparse_image(len);
    let image_arg = image.to_str().expect("utf-8 temp path");
    let mut all: Vec<&str> = args.to_vec();
    all.push(image_arg);
    run(tool, &all, "");
    detect_path(&image)
}

/// Like [`format`], for tools that build an image from a directory: `{image}` and `{dir}` in
/// `args` are replaced by the image's path and a directory holding one file.
fn build(tool: &Path, args: &[&str]) -> Finds {
    let dir = tempfile::tempdir().expect("create temp dir");
    let content = dir.path().join("content");
    std::fs::create_dir(&content).expect("create content dir");
    std::fs::write(content.join("hello.txt"), b"hello").expect("write content");
    let image = dir.path().join("fs.img");
    let (image_arg, content_arg) = (
        image.to_str().expect("utf-8"),
        content.to_str().expect("utf-8"),
    );
    let all: Vec<&str> = args
        .iter()
        .map(|a| match *a {
            "{image}" => image_arg,
            "{dir}" => content_arg,
            other => other,
        })
        .collect();
    run(tool, &all, "");
    detect_path(&image)
}

#[test]
fn mkfs_ext2_ext3_ext4() {
    for version in ["ext2", "ext3", "ext4"] {
        let tool = format!("mkfs.{version}");
        let Some(tool) = require("mkfs_ext2_ext3_ext4", &tool, "e2fsprogs") else {
            return;
        };
        let found = format(32 * MIB, &tool, &["-F", "-q"]);
        expect(version, &found, (version, 1080), Some(("ext2/3/4", 1080)));
    }
}

#[test]
fn mkfs_xfs() {
    let Some(tool) = require("mkfs_xfs", "mkfs.xfs", "xfsprogs") else {
        return;
    };
    // Current xfsprogs refuses filesystems under 300 MiB; the image is sparse.
    let found = format(512 * MIB, &tool, &["-f", "-q"]);
    expect("xfs", &found, ("xfs", 0), Some(("xfs", 0)));
}

#[test]
fn mkfs_btrfs() {
    let Some(tool) = require("mkfs_btrfs", "mkfs.btrfs", "btrfs-progs") else {
        return;
    };
    let found = format(256 * MIB, &tool, &["-f", "-q"]);
    expect("btrfs", &found, ("btrfs", 65600), Some(("btrfs", 65600)));
}

#[test]
fn mkswap() {
    let Some(tool) = require("mkswap", "mkswap", "util-linux") else {
        return;
    };
    let found = format(32 * MIB, &tool, &[]);
    // The magic ends the first page: 4086 with 4 KiB pages.
    let page_end = found.table.first().map_or(0, |(_, offset)| *offset);
    expect("swap", &found, ("swap", page_end), Some(("swap", page_end)));
}

#[test]
fn mkfs_vfat_all_fat_sizes() {
    let Some(tool) = require("mkfs_vfat_all_fat_sizes", "mkfs.vfat", "dosfstools") else {
        return;
    };
    for (bits, len, offset) in [
        ("12", 4 * MIB, 54),
        ("16", 64 * MIB, 54),
        ("32", 64 * MIB, 82),
    ] {
        let found = format(len, &tool, &["-F", bits]);
        // libblkid also counts the boot sector's jump instruction at 0 as a vfat magic, and
        // the first copy is the one reported.
        let table = Some(("vfat", offset));
        expect(&format!("FAT{bits}"), &found, ("vfat", 0), table);
    }
}

#[test]
fn mkfs_exfat() {
    let Some(tool) = require("mkfs_exfat", "mkfs.exfat", "exfatprogs") else {
        return;
    };
    let found = format(64 * MIB, &tool, &[]);
    expect("exfat", &found, ("exfat", 3), Some(("exfat", 3)));
}

#[test]
fn mkfs_ntfs() {
    let Some(tool) = require("mkfs_ntfs", "mkfs.ntfs", "ntfs-3g") else {
        return;
    };
    // -F: the target is a file, not a block device; -f: skip zeroing it.
    let found = format(64 * MIB, &tool, &["-F", "-f", "-q"]);
    expect("ntfs", &found, ("ntfs", 3), Some(("ntfs", 3)));
}

#[test]
fn sfdisk_dos_and_gpt() {
    let Some(tool) = require("sfdisk_dos_and_gpt", "sfdisk", "fdisk") else {
        return;
    };
    for (script, name, offset) in [
        ("label: dos\nstart=2048, size=8192, type=83\n", "dos", 510),
        ("label: gpt\nstart=2048, size=8192\n", "gpt", 512),
    ] {
        let (_dir, image) = sparse_image(32 * MIB);
        run(&tool, &["--quiet", image.to_str().expect("utf-8")], script);
        let found = detect_path(&image);
        expect(name, &found, (name, offset), Some((name, offset)));
    }
}

#[test]
fn cryptsetup_luks1_and_luks2() {
    let Some(tool) = require("cryptsetup_luks1_and_luks2", "cryptsetup", "cryptsetup-bin") else {
        return;
    };
    for luks_type in ["luks1", "luks2"] {
        let (dir, image) = sparse_image(32 * MIB);
        let key = dir.path().join("key");
        std::fs::write(&key, b"not a secret").expect("write key file");
        let args = [
            "luksFormat",
            "--batch-mode",
            "--type",
            luks_type,
            // The fastest key derivation cryptsetup allows: the test is about the header.
            "--pbkdf",
            "pbkdf2",
            "--pbkdf-force-iterations",
            "1000",
            "--key-file",
            key.to_str().expect("utf-8"),
            image.to_str().expect("utf-8"),
        ];
        run(&tool, &args, "");
        let found = detect_path(&image);
        let luks = ("crypto_LUKS", 0);
        expect(luks_type, &found, luks, Some(luks));
    }
}

#[test]
fn iso9660_image() {
    let tool = ["xorriso", "genisoimage", "mkisofs"]
        .into_iter()
        .find_map(|t| find_tool(t).map(|path| (t, path)));
    let Some((name, tool)) = tool else {
        let _ = writeln!(
            std::io::stderr(),
            "skipping iso9660_image: no xorriso, genisoimage or mkisofs (apt-get install xorriso)"
        );
        return;
    };
    let mut args = if name == "xorriso" {
        vec!["-as", "mkisofs"]
    } else {
        vec![]
    };
    args.extend(["-quiet", "-o", "{image}", "{dir}"]);
    let found = build(&tool, &args);
    let iso = ("iso9660", 32769);
    expect("iso9660", &found, iso, Some(iso));
}

/// Formats the table does not know: found only through libblkid.
fn blkid_only(test: &str, found: &Finds, name: &str, offset: u64) {
    if !blkid::available() {
        let _ = writeln!(
            std::io::stderr(),
            "skipping {test}: libblkid is not installed (apt-get install libblkid1)"
        );
        return;
    }
    expect(test, found, (name, offset), None);
}

#[test]
fn mkfs_f2fs() {
    let Some(tool) = require("mkfs_f2fs", "mkfs.f2fs", "f2fs-tools") else {
        return;
    };
    blkid_only(
        "f2fs",
        &format(64 * MIB, &tool, &["-q", "-f"]),
        "f2fs",
        1024,
    );
}

#[test]
fn mkfs_nilfs2() {
    let Some(tool) = require("mkfs_nilfs2", "mkfs.nilfs2", "nilfs-tools") else {
        return;
    };
    // -B 16: shorter segments, so 64 MiB is enough. The backup superblock at the end is the
    // same format, reported once.
    let found = format(64 * MIB, &tool, &["-q", "-f", "-B", "16"]);
    blkid_only("nilfs2", &found, "nilfs2", 1030);
}

#[test]
fn mkfs_minix() {
    let Some(tool) = require("mkfs_minix", "mkfs.minix", "util-linux") else {
        return;
    };
    blkid_only("minix", &format(16 * MIB, &tool, &[]), "minix", 1040);
}

#[test]
fn mkfs_jfs() {
    let Some(tool) = require("mkfs_jfs", "mkfs.jfs", "jfsutils") else {
        return;
    };
    blkid_only("jfs", &format(32 * MIB, &tool, &["-q"]), "jfs", 32768);
}

#[test]
fn mkfs_udf() {
    let Some(tool) = require("mkfs_udf", "mkfs.udf", "udftools") else {
        return;
    };
    blkid_only("udf", &format(16 * MIB, &tool, &[]), "udf", 32769);
}

#[test]
fn mksquashfs() {
    let Some(tool) = require("mksquashfs", "mksquashfs", "squashfs-tools") else {
        return;
    };
    let found = build(&tool, &["{dir}", "{image}", "-quiet", "-noappend"]);
    blkid_only("squashfs", &found, "squashfs", 0);
}

#[test]
fn mkfs_erofs() {
    let Some(tool) = require("mkfs_erofs", "mkfs.erofs", "erofs-utils") else {
        return;
    };
    blkid_only("erofs", &build(&tool, &["{image}", "{dir}"]), "erofs", 1024);
}

#[test]
fn ext4_written_at_one_mib_of_a_bare_device() {
    let Some(tool) = require("ext4_written_at_one_mib", "mkfs.ext4", "e2fsprogs") else {
        return;
    };
    let (_dir, fs) = sparse_image(8 * MIB);
    run(&tool, &["-F", "-q", fs.to_str().expect("utf-8")], "");
    let (_disk_dir, disk) = sparse_image(32 * MIB);
    let bytes = std::fs::read(&fs).expect("read ext4 image");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&disk)
        .and_then(|f| std::os::unix::fs::FileExt::write_all_at(&f, &bytes, MIB))
        .expect("write disk image");
    let found = detect_path(&disk);
    expect(
        "ext4 at 1 MiB",
        &found,
        ("ext4", MIB + 1080),
        Some(("ext2/3/4", MIB + 1080)),
    );
}
