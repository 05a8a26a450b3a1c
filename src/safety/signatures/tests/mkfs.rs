//! Images made by the real tools, so offsets are checked against what admins' disks hold.
//!
//! mkfs and friends all work on plain sparse files, so neither root nor loop devices are
//! needed. A missing tool skips its test with a message on stderr (written directly, so cargo's
//! output capture does not hide it) naming the package to install.
//!
//! Debian/Ubuntu packages for the full set: e2fsprogs, util-linux, xfsprogs, btrfs-progs,
//! dosfstools, exfatprogs, ntfs-3g, fdisk, cryptsetup-bin, xorriso, and lvm2 (see `lvm.rs`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use tempfile::TempDir;

use super::MIB;
use crate::safety::{Signature, SignatureKind as K, detect};

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

pub(super) fn detect_path(path: &Path) -> Vec<Signature> {
    let file = std::fs::File::open(path).expect("open image");
    let len = file.metadata().expect("image size").len();
    detect(&file, len).expect("detect")
}

/// Formats a fresh image with `tool args… <image>` and returns what was detected.
fn format(len: u64, tool: &Path, args: &[&str]) -> Vec<Signature> {
    let (_dir, image) = sparse_image(len);
    let image_arg = image.to_str().expect("utf-8 temp path");
    let mut all: Vec<&str> = args.to_vec();
    all.push(image_arg);
    run(tool, &all, "");
    detect_path(&image)
}

fn kinds(found: &[Signature]) -> Vec<K> {
    found.iter().map(|s| s.kind).collect()
}

#[test]
fn mkfs_ext4() {
    let Some(tool) = require("mkfs_ext4", "mkfs.ext4", "e2fsprogs") else {
        return;
    };
    let found = format(32 * MIB, &tool, &["-F", "-q"]);
    assert_eq!(
        found,
        vec![Signature {
            kind: K::Ext,
            offset: 1080
        }]
    );
}

#[test]
fn mkfs_xfs() {
    let Some(tool) = require("mkfs_xfs", "mkfs.xfs", "xfsprogs") else {
        return;
    };
    // Current xfsprogs refuses filesystems under 300 MiB; the image is sparse.
    let found = format(512 * MIB, &tool, &["-f", "-q"]);
    assert_eq!(
        found,
        vec![Signature {
            kind: K::Xfs,
            offset: 0
        }]
    );
}

#[test]
fn mkfs_btrfs() {
    let Some(tool) = require("mkfs_btrfs", "mkfs.btrfs", "btrfs-progs") else {
        return;
    };
    let found = format(256 * MIB, &tool, &["-f", "-q"]);
    assert_eq!(
        found,
        vec![Signature {
            kind: K::Btrfs,
            offset: 65600
        }]
    );
}

#[test]
fn mkswap() {
    let Some(tool) = require("mkswap", "mkswap", "util-linux") else {
        return;
    };
    let found = format(32 * MIB, &tool, &[]);
    assert_eq!(kinds(&found), vec![K::Swap]);
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
        assert_eq!(
            found,
            vec![Signature {
                kind: K::Fat,
                offset
            }],
            "FAT{bits}"
        );
    }
}

#[test]
fn mkfs_exfat() {
    let Some(tool) = require("mkfs_exfat", "mkfs.exfat", "exfatprogs") else {
        return;
    };
    let found = format(64 * MIB, &tool, &[]);
    assert_eq!(
        found,
        vec![Signature {
            kind: K::ExFat,
            offset: 3
        }]
    );
}

#[test]
fn mkfs_ntfs() {
    let Some(tool) = require("mkfs_ntfs", "mkfs.ntfs", "ntfs-3g") else {
        return;
    };
    // -F: the target is a file, not a block device; -f: skip zeroing it.
    let found = format(64 * MIB, &tool, &["-F", "-f", "-q"]);
    assert_eq!(
        found,
        vec![Signature {
            kind: K::Ntfs,
            offset: 3
        }]
    );
}

#[test]
fn sfdisk_dos_and_gpt() {
    let Some(tool) = require("sfdisk_dos_and_gpt", "sfdisk", "fdisk") else {
        return;
    };
    for (script, expected) in [
        ("label: dos\nstart=2048, size=8192, type=83\n", vec![K::Mbr]),
        ("label: gpt\nstart=2048, size=8192\n", vec![K::Gpt]),
    ] {
        let (_dir, image) = sparse_image(32 * MIB);
        run(&tool, &["--quiet", image.to_str().expect("utf-8")], script);
        assert_eq!(kinds(&detect_path(&image)), expected, "{script}");
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
        assert_eq!(
            found,
            vec![Signature {
                kind: K::Luks,
                offset: 0
            }],
            "{luks_type}"
        );
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
    let dir = tempfile::tempdir().expect("create temp dir");
    let content = dir.path().join("content");
    std::fs::create_dir(&content).expect("create content dir");
    std::fs::write(content.join("hello.txt"), b"hello").expect("write content");
    let image = dir.path().join("cd.iso");
    let mut args = if name == "xorriso" {
        vec!["-as", "mkisofs"]
    } else {
        vec![]
    };
    args.extend(["-quiet", "-o", image.to_str().expect("utf-8")]);
    args.push(content.to_str().expect("utf-8"));
    run(&tool, &args, "");
    assert_eq!(
        detect_path(&image),
        vec![Signature {
            kind: K::Iso9660,
            offset: 32769
        }]
    );
}
