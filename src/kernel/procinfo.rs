//! Per-process facts read only for the few processes a verdict may name: which cgroups a
//! process is in (/proc/PID/cgroup), which block devices its open files live on
//! (/proc/PID/fd), and its swap use (VmSwap in /proc/PID/status).
//!
//! Descriptors are never opened, nor stat'ed through (a stat on a file of a user's FUSE
//! mount waits for that user's server): /proc/PID/fdinfo/N gives the open flags and the
//! mount id, the process's mountinfo maps the id to the filesystem's device. Only a device
//! node (on devtmpfs or tmpfs, answered in the kernel) is stat'ed, for the device it is.

use std::collections::HashMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};

use super::SysRoot;

/// Where a process sits in the cgroup trees that say who it belongs to.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessCgroups {
    /// The cgroup that names its service: the v2 path, or the v1 `name=systemd` path.
    pub unit_path: Option<String>,
    /// The cgroup whose I/O counters count its I/O: v1 `blkio`, else the v2 path.
    pub io_path: Option<String>,
}

/// A block device that one of a process's open files is on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OpenDevice {
    /// Device number: the device itself for an open block device, else the filesystem's.
    pub major: u32,
    /// Minor device number.
    pub minor: u32,
    /// Opened for writing (else for reading only).
    pub write: bool,
    /// What the descriptor points at, as /proc shows it (any user chooses file names).
    pub path: String,
}

/// Parses /proc/PID/cgroup (`ID:CONTROLLERS:PATH` lines).
pub fn parse_cgroup(text: &str) -> ProcessCgroups {
    let mut out = ProcessCgroups::default();
    let mut v2 = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let path = path.to_string();
        if controllers.is_empty() {
            v2 = Some(path);
        } else if controllers == "name=systemd" {
            out.unit_path = Some(path);
        } else if controllers.split(',').any(|c| c == "blkio") {
            out.io_path = Some(path);
        }
    }
    // On a hybrid host the v2 tree mirrors systemd's; a v2 path of "/" says nothing.
    if let Some(v2) = v2 {
        if out.unit_path.is_none() || v2 != "/" {
            out.unit_path = Some(v2.clone());
        }
        if out.io_path.is_none() {
            out.io_path = Some(v2);
        }
    }
    out
}

/// Reads /proc/PID/cgroup; `None` when the process is gone or the file is unreadable.
pub fn read_cgroups(root: &SysRoot, pid: u32) -> Option<ProcessCgroups> {
    let text = std::fs::read_to_string(root.proc.join(pid.to_string()).join("cgroup")).ok()?;
    Some(parse_cgroup(&text))
}

/// The service a cgroup path names: its last `.service`, `.scope` or container-like
/// component (`/system.slice/nginx.service` gives `nginx.service`); `None` for the root.
pub fn unit_of(path: &str) -> Option<String> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    parts
        .iter()
        .rev()
        .find(|p| p.ends_with(".service") || p.ends_with(".scope"))
        .or(parts.last())
        .map(|p| p.to_string())
}

/// Block devices under the process's open files, one entry per device and mode, at most
/// `limit` descriptors looked at (a process with 100,000 sockets is not worth a second).
pub fn read_open_devices(root: &SysRoot, pid: u32, limit: usize) -> Vec<OpenDevice> {
    let dir = root.proc.join(pid.to_string());
    // Its own mount table: mount ids are those of its namespace.
    let Ok(mountinfo) = std::fs::read_to_string(dir.join("mountinfo")) else {
        return Vec::new();
    };
    let mounts = parse_mount_ids(&mountinfo);
    let Ok(entries) = std::fs::read_dir(dir.join("fd")) else {
        return Vec::new();
    };
    let mut out: Vec<OpenDevice> = Vec::new();
    for entry in entries.flatten().take(limit) {
        let fdinfo = dir.join("fdinfo").join(entry.file_name());
        let Some((flags, mnt_id)) = std::fs::read_to_string(fdinfo)
            .ok()
            .and_then(|t| parse_fdinfo(&t))
        else {
            continue;
        };
        // Sockets, pipes and anonymous inodes live on internal mounts, absent here.
        let Some((major, minor, fs_type)) = mounts.get(&mnt_id) else {
            continue;
        };
        let devno = if matches!(fs_type.as_str(), "devtmpfs" | "tmpfs") {
            // A device node: stat through the link is answered by the in-kernel /dev
            // filesystem, never by a user's FUSE server that could stall the sample.
            match std::fs::metadata(entry.path()) {
                Ok(m) if m.file_type().is_block_device() => {
                    (libc::major(m.rdev()), libc::minor(m.rdev()))
                }
                _ => continue,
            }
        } else {
            (*major, *minor)
        };
        // Anonymous devices (proc, overlay, btrfs subvolumes, FUSE) have major 0.
        if devno.0 == 0 {
            continue;
        }
        let write = flags & libc::O_ACCMODE as u32 != libc::O_RDONLY as u32;
        if out
            .iter()
            .any(|o| (o.major, o.minor, o.write) == (devno.0, devno.1, write))
        {
            continue;
        }
        out.push(OpenDevice {
            major: devno.0,
            minor: devno.1,
            write,
            path: std::fs::read_link(entry.path())
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default(),
        });
    }
    out
}

/// The `flags` (octal) and `mnt_id` lines of /proc/PID/fdinfo/N.
pub fn parse_fdinfo(text: &str) -> Option<(u32, u64)> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    let flags = u32::from_str_radix(field("flags:")?, 8).ok()?;
    let mnt_id = field("mnt_id:")?.parse().ok()?;
    Some((flags, mnt_id))
}

/// Mount id → (major, minor, filesystem type) from a mountinfo text; lines that do not
/// parse are skipped.
pub fn parse_mount_ids(text: &str) -> HashMap<u64, (u32, u32, String)> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        let (Some(id), Some(devno)) = (words.first(), words.get(2)) else {
            continue;
        };
        let fs_type = words
            .iter()
            .position(|w| *w == "-")
            .and_then(|i| words.get(i + 1));
        if let (Ok(id), Some((major, minor)), Some(fs_type)) = (
            id.parse::<u64>(),
            super::mounts::parse_devno(devno),
            fs_type,
        ) {
            out.insert(id, (major, minor, fs_type.to_string()));
        }
    }
    out
}

/// VmSwap of /proc/PID/status in bytes; `None` when unreadable or absent (kernel threads).
pub fn read_swap_bytes(root: &SysRoot, pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(root.proc.join(pid.to_string()).join("status")).ok()?;
    parse_vm_swap(&text)
}

/// The `VmSwap:  N kB` line of /proc/PID/status, in bytes.
pub fn parse_vm_swap(text: &str) -> Option<u64> {
    let line = text.lines().find_map(|l| l.strip_prefix("VmSwap:"))?;
    let kb: u64 = line.split_whitespace().next()?.parse().ok()?;
    kb.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cgroup_paths_on_hybrid_and_unified_hosts() {
        let hybrid =
            "12:blkio:/job\n4:memory:/m\n1:name=systemd:/user.slice/session-3.scope\n0::/\n";
        let c = parse_cgroup(hybrid);
        assert_eq!(c.io_path.as_deref(), Some("/job"));
        assert_eq!(c.unit_path.as_deref(), Some("/user.slice/session-3.scope"));
        let unified = parse_cgroup("0::/system.slice/nginx.service\n");
        assert_eq!(
            unified.io_path.as_deref(),
            Some("/system.slice/nginx.service")
        );
        assert_eq!(
            unit_of("/system.slice/nginx.service").as_deref(),
            Some("nginx.service")
        );
        assert_eq!(
            unit_of("/user.slice/session-3.scope/x").as_deref(),
            Some("session-3.scope")
        );
        assert_eq!(unit_of("/"), None);
    }

    #[test]
    fn fdinfo_and_mount_ids() {
        assert_eq!(
            parse_fdinfo("pos:\t0\nflags:\t0100001\nmnt_id:\t24\nino:\t3\n"),
            Some((0o100001, 24))
        );
        assert_eq!(parse_fdinfo("flags:\t09\nmnt_id:\t1\n"), None);
        let m = parse_mount_ids(
            "24 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n25 24 0:5 / /dev rw - devtmpfs udev rw\nbad line\n",
        );
        assert_eq!(m[&24], (254, 1, "ext4".to_string()));
        assert_eq!(m[&25].2, "devtmpfs");
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn vm_swap_and_this_process_open_devices() {
        assert_eq!(
            parse_vm_swap("Name:\tx\nVmSwap:\t   12 kB\n"),
            Some(12 * 1024)
        );
        assert_eq!(parse_vm_swap("Name:\tkthreadd\n"), None);
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let _f = std::fs::File::create(dir.path().join("w")).unwrap();
        let st_dev = std::fs::metadata(dir.path()).unwrap().dev();
        let open = read_open_devices(&SysRoot::real(), std::process::id(), 10_000);
        assert!(
            open.iter().any(
                |d| d.write && (d.major, d.minor) == (libc::major(st_dev), libc::minor(st_dev))
            ),
            "{open:?}"
        );
    }

    proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC{0,200}") {
            let _ = parse_cgroup(&s);
            let _ = parse_vm_swap(&s);
            let _ = unit_of(&s);
            let _ = parse_fdinfo(&s);
            let _ = parse_mount_ids(&s);
        }
    }
}
