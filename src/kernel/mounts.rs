//! Mounts and swaps: which filesystem a path lives on, and which devices are in use.
//!
//! The benchmark needs the mount of its target directory (filesystem type, options, the
//! device whose diskstats to watch); `safety` needs every mounted device and active swap.

use super::Malformed;
use std::path::{Path, PathBuf};

use procfs_core::process::MountInfo;
use serde::Serialize;

use super::{KernelError, Result, SysRoot, unescape_octal, unescape_octal_bytes};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

/// One entry of /proc/self/mountinfo.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mount {
    /// Where it is mounted, with the kernel's `\040` escapes undone.
    pub mount_point: PathBuf,
    /// Filesystem type (`ext4`, `xfs`, `tmpfs`).
    pub fs_type: String,
    /// What was mounted (`/dev/vda`, `tmpfs`); `None` when the kernel says `none`.
    pub source: Option<String>,
    /// Per-mount options then superblock options, comma-separated, duplicates removed.
    pub options: String,
    /// Major of the filesystem's st_dev (0 for virtual and some multi-device filesystems).
    pub major: u32,
    /// Minor of the filesystem's st_dev.
    pub minor: u32,
}

/// All mounts visible to this process, in mount order.
pub fn read_mounts(root: &SysRoot) -> Result<Vec<Mount>> {
    let path = root.proc.join("self/mountinfo");
    let bytes = std::fs::read(&path).map_err(|source| KernelError::Read {
        path: path.clone(),
        source,
    })?;
    parse_mountinfo_bytes(&bytes, &path)
}

/// Parses the text of a mountinfo file; `path` only names the file in errors. Tests feed it
/// text; the reader itself goes through `parse_mountinfo_bytes`.
#[cfg(test)]
pub fn parse_mountinfo(text: &str, path: &Path) -> Result<Vec<Mount>> {
    parse_mountinfo_bytes(text.as_bytes(), path)
}

/// Parses mountinfo as the kernel writes it: bytes, since a mount point need not be UTF-8
/// (the kernel escapes only space, tab, newline and backslash).
fn parse_mountinfo_bytes(bytes: &[u8], path: &Path) -> Result<Vec<Mount>> {
    bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, raw)| !raw.trim_ascii().is_empty())
        .map(|(i, raw)| {
            parse_line(&String::from_utf8_lossy(raw), raw)
                .map_err(|reason| KernelError::parse(path, Some(i + 1), reason))
        })
        .collect()
}

fn parse_line(line: &str, raw: &[u8]) -> std::result::Result<Mount, Malformed> {
    let info = MountInfo::from_line(line).map_err(|e| format!("{e}: {line:?}"))?;
    let (major, minor) = parse_devno(&info.majmin)
        .ok_or_else(|| format!("bad device number {:?}: {line:?}", info.majmin))?;
    // procfs-core keeps options in hash maps, losing the kernel's order; the raw fields are
    // the 6th and the last of the line (MountInfo::from_line has validated the layout).
    let mount_opts = line.split(' ').nth(5).unwrap_or_default();
    let super_opts = line.rsplit(' ').next().unwrap_or_default();
    Ok(Mount {
        // The 5th field, from the raw bytes: the parsed one went through lossy UTF-8.
        mount_point: raw
            .split(|&b| b == b' ')
            .nth(4)
            .map(|f| PathBuf::from(OsString::from_vec(unescape_octal_bytes(f))))
            .unwrap_or_else(|| PathBuf::from(unescape_octal(&info.mount_point.to_string_lossy()))),
        fs_type: info.fs_type,
        source: info.mount_source.as_deref().map(unescape_octal),
        options: join_options(mount_opts, super_opts),
        major,
        minor,
    })
}

/// Parses `MAJ:MIN` as the kernel prints device numbers.
pub fn parse_devno(text: &str) -> Option<(u32, u32)> {
    let (major, minor) = text.trim().split_once(':')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

fn join_options(mount_opts: &str, super_opts: &str) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for opt in mount_opts.split(',').chain(super_opts.split(',')) {
        if !opt.is_empty() && !seen.contains(&opt) {
            seen.push(opt);
        }
    }
    seen.join(",")
}

/// The mount holding `path`: the entry with the longest mount point that is a prefix of the
/// canonical path (symlinks resolved, so `/var/lib -> /data/lib` finds `/data`).
pub fn mount_of_path(root: &SysRoot, path: &Path) -> Result<Mount> {
    let canonical = super::canonical(path)?;
    let mounts = read_mounts(root)?;
    mount_containing(&mounts, &canonical)
        .cloned()
        .ok_or_else(|| {
            KernelError::parse(
                &root.proc.join("self/mountinfo"),
                None,
                format!("no mount contains {}", canonical.display()),
            )
        })
}

/// The mount in `mounts` containing the already canonical `path`. Prefixes are compared by
/// whole components (`/data` does not contain `/database`); when one mount point is mounted
/// over another, the later entry is the visible one.
pub fn mount_containing<'a>(mounts: &'a [Mount], path: &Path) -> Option<&'a Mount> {
    mounts
        .iter()
        .filter(|m| path.starts_with(&m.mount_point))
        .max_by_key(|m| m.mount_point.components().count())
}

/// Device numbers and mount points of everything mounted (virtual filesystems included:
/// callers compare against a block device's numbers, which virtual ones never match).
pub fn mounted_devnos(root: &SysRoot) -> Result<Vec<(u32, u32, String)>> {
    Ok(read_mounts(root)?
        .into_iter()
        .map(|m| {
            (
                m.major,
                m.minor,
                m.mount_point.to_string_lossy().into_owned(),
            )
        })
        .collect())
}

/// Device or file paths of active swap areas, from `<proc>/swaps`.
pub fn active_swaps(root: &SysRoot) -> Result<Vec<String>> {
    Ok(swap_areas(root)?.into_iter().map(|s| s.path).collect())
}

/// One active swap area, as /proc/swaps lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SwapArea {
    /// Device or file path, with the kernel's `\040` escapes undone.
    pub path: String,
    /// `partition` or `file`.
    pub kind: String,
    /// Size of the area in bytes (the kernel prints KiB).
    pub size_bytes: u64,
    /// Bytes of it in use, in bytes (the kernel prints KiB).
    pub used_bytes: u64,
    /// Higher is used first.
    pub priority: i64,
}

/// The active swap areas, from `<proc>/swaps`.
pub fn swap_areas(root: &SysRoot) -> Result<Vec<SwapArea>> {
    let path = root.proc.join("swaps");
    parse_swap_areas(&super::read_text(&path)?, &path)
}

/// Parses the text of /proc/swaps (a header line, then `Filename Type Size Used Priority`,
/// sizes in KiB).
pub fn parse_swap_areas(text: &str, path: &Path) -> Result<Vec<SwapArea>> {
    let mut swaps = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let bad = || KernelError::parse(path, Some(i + 1), format!("expected 5 fields: {line:?}"));
        match fields.as_slice() {
            [] => continue,
            ["Filename", ..] if i == 0 => continue,
            [name, kind, size, used, priority] => {
                let kib = |w: &str| w.parse::<u64>().ok().and_then(|k| k.checked_mul(1024));
                swaps.push(SwapArea {
                    path: unescape_octal(name),
                    kind: (*kind).to_string(),
                    size_bytes: kib(size).ok_or_else(bad)?,
                    used_bytes: kib(used).ok_or_else(bad)?,
                    priority: priority.parse().map_err(|_| bad())?,
                });
            }
            _ => return Err(bad()),
        }
    }
    Ok(swaps)
}

#[cfg(test)]
mod tests;
