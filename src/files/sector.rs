//! Which file owns a sector of a block device: the answer `debugfs icheck` + `ncheck` give on
//! ext4, for any filesystem with FIEMAP (ext4, XFS, btrfs).
//!
//! The filesystem must be mounted: tacho walks it from its mount points (not crossing into
//! other mounts), asks FIEMAP where each regular file and directory lies, and matches the
//! sectors' byte offsets. On btrfs, FIEMAP speaks btrfs's logical addresses, so device offsets
//! are first mapped through the chunk tree ([`super::btrfs`]). The walk stops early once every
//! sector has an owner whose extent is not shared; shared extents (reflinks, snapshots) keep
//! it going so every owner is found.

use super::btrfs;
use super::fiemap::{self, EXTENT_ENCODED, EXTENT_SHARED};
use crate::kernel::SysRoot;
use crate::kernel::mounts::{self, Mount};
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

pub const SCHEMA: &str = "tacho.files.sector.v1";
pub const SECTOR_BYTES: u64 = 512;

#[derive(Debug, thiserror::Error)]
pub enum SectorError {
    #[error("{}: {source}; give a block device such as /dev/sda1", dev.display())]
    Open {
        dev: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not a block device; give the device a filesystem lives on, e.g. /dev/sda1", .0.display())]
    NotBlock(PathBuf),
    #[error("{} is not mounted; mount it (read-only is enough) so tacho can ask its filesystem", .0.display())]
    NotMounted(PathBuf),
    #[error("sector {sector} is past the end of {} ({sectors} sectors of 512 bytes)", dev.display())]
    PastEnd {
        dev: PathBuf,
        sector: u64,
        sectors: u64,
    },
    #[error("cannot read the btrfs chunk tree of {}: {source}", mount.display())]
    Btrfs {
        mount: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Kernel(#[from] crate::kernel::KernelError),
}

/// A file holding a sector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Owner {
    pub path: String,
    /// Where in the file the sector's first byte lies.
    pub offset_bytes: u64,
    /// The extent is shared with other files (reflink, snapshot).
    pub shared: bool,
    /// The extent is compressed or encoded: the offset is approximate.
    pub encoded: bool,
}

/// The answer for one sector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SectorOwners {
    pub sector: u64,
    pub byte: u64,
    pub owners: Vec<Owner>,
    /// Why no owner can be named, when none is (free space, metadata, unmapped btrfs space).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The whole answer.
#[derive(Debug, Clone, Serialize)]
pub struct Located {
    pub schema: &'static str,
    pub device: String,
    pub fs_type: String,
    pub mount_points: Vec<String>,
    pub files_examined: u64,
    pub sectors: Vec<SectorOwners>,
}

/// Where to look for a sector's byte in FIEMAP's address space.
struct Target {
    index: usize,
    address: u64,
    done: bool,
}

pub fn locate(root: &SysRoot, dev: &Path, sectors: &[u64]) -> Result<Located, SectorError> {
    let meta = std::fs::metadata(dev).map_err(|source| SectorError::Open {
        dev: dev.to_path_buf(),
        source,
    })?;
    if !meta.file_type().is_block_device() {
        return Err(SectorError::NotBlock(dev.to_path_buf()));
    }
    let rdev = meta.rdev();
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    let size = crate::kernel::blockdev::resolve(root, major, minor)?.size_bytes;
    for &sector in sectors {
        if sector.checked_mul(SECTOR_BYTES).is_none_or(|b| b >= size) {
            return Err(SectorError::PastEnd {
                dev: dev.to_path_buf(),
                sector,
                sectors: size / SECTOR_BYTES,
            });
        }
    }
    let all = mounts::read_mounts(root)?;
    let canonical = std::fs::canonicalize(dev).unwrap_or_else(|_| dev.to_path_buf());
    let ours: Vec<&Mount> = all
        .iter()
        .filter(|m| {
            (m.major, m.minor) == (major, minor)
                || m.source
                    .as_deref()
                    .is_some_and(|s| std::fs::canonicalize(s).is_ok_and(|c| c == canonical))
        })
        .collect();
    let Some(first) = ours.first() else {
        return Err(SectorError::NotMounted(dev.to_path_buf()));
    };
    let fs_type = first.fs_type.clone();
    let mut answers: Vec<SectorOwners> = sectors
        .iter()
        .map(|&sector| SectorOwners {
            sector,
            byte: sector * SECTOR_BYTES,
            owners: Vec::new(),
            note: None,
        })
        .collect();
    let mut targets = Vec::new();
    if fs_type == "btrfs" {
        let dir = File::open(&first.mount_point).map_err(|source| SectorError::Btrfs {
            mount: first.mount_point.clone(),
            source,
        })?;
        let btrfs_err = |source| SectorError::Btrfs {
            mount: first.mount_point.clone(),
            source,
        };
        let chunks = btrfs::read_chunks(&dir).map_err(btrfs_err)?;
        let devid = btrfs::devid_of(&dir, dev).map_err(btrfs_err)?.unwrap_or(1);
        for (index, answer) in answers.iter_mut().enumerate() {
            match btrfs::physical_to_logical(&chunks, devid, answer.byte) {
                Ok(address) => targets.push(Target {
                    index,
                    address,
                    done: false,
                }),
                Err(e) => answer.note = Some(e.to_string()),
            }
        }
    } else {
        targets = (0..answers.len())
            .map(|index| Target {
                index,
                address: answers[index].byte,
                done: false,
            })
            .collect();
    }
    let other_mounts: Vec<PathBuf> = all
        .iter()
        .filter(|m| !ours.iter().any(|o| o.mount_point == m.mount_point))
        .map(|m| m.mount_point.clone())
        .collect();
    let mut walk = Walk {
        other_mounts,
        files: 0,
    };
    let mut seen_roots: Vec<PathBuf> = Vec::new();
    for m in &ours {
        if seen_roots.iter().any(|r| m.mount_point.starts_with(r)) {
            continue; // a mount of the same filesystem inside one already walked
        }
        seen_roots.push(m.mount_point.clone());
        walk.dir(&m.mount_point, &mut targets, &mut answers);
    }
    for answer in &mut answers {
        if answer.owners.is_empty() && answer.note.is_none() {
            answer.note = Some("no file: free space or filesystem metadata".into());
        }
        answer.owners.sort_by(|a, b| a.path.cmp(&b.path));
    }
    Ok(Located {
        schema: SCHEMA,
        device: dev.display().to_string(),
        fs_type,
        mount_points: ours
            .iter()
            .map(|m| m.mount_point.display().to_string())
            .collect(),
        files_examined: walk.files,
        sectors: answers,
    })
}

struct Walk {
    other_mounts: Vec<PathBuf>,
    files: u64,
}

impl Walk {
    /// Depth-first over `top`, staying on this filesystem, until every target is done.
    fn dir(&mut self, top: &Path, targets: &mut [Target], answers: &mut [SectorOwners]) {
        let mut stack = vec![top.to_path_buf()];
        while let Some(dir) = stack.pop() {
            if targets.iter().all(|t| t.done) {
                return;
            }
            self.file(&dir, targets, answers);
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = entry.path();
                if kind.is_dir() {
                    if !self.other_mounts.contains(&path) {
                        stack.push(path);
                    }
                } else if kind.is_file() {
                    self.file(&path, targets, answers);
                }
            }
        }
    }

    fn file(&mut self, path: &Path, targets: &mut [Target], answers: &mut [SectorOwners]) {
        // O_NOATIME: looking must not change the files looked at; O_NONBLOCK: never wait on
        // a lease.
        let Ok(file) = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOATIME | libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
        else {
            return;
        };
        self.files += 1;
        let Ok(extents) = fiemap::extents(&file) else {
            return;
        };
        for extent in extents.iter().filter(|e| e.is_mapped()) {
            for target in targets.iter_mut() {
                let inside = target.address >= extent.physical
                    && target.address - extent.physical < extent.length;
                if !inside {
                    continue;
                }
                let shared = extent.flags & EXTENT_SHARED != 0;
                answers[target.index].owners.push(Owner {
                    path: path.display().to_string(),
                    offset_bytes: extent.logical + (target.address - extent.physical),
                    shared,
                    encoded: extent.flags & EXTENT_ENCODED != 0,
                });
                if !shared {
                    target.done = true;
                }
            }
        }
    }
}
