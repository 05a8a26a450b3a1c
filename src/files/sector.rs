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
use crate::kernel::blockdev::{self, BlockDevice, DeviceKind};
use crate::kernel::mounts::{self, Mount};
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The `schema` of the `tacho files --sector --json` document.
pub const SCHEMA: &str = "tacho.files.sector.v1";
/// Bytes per sector in the numbers given (blktrace's unit, whatever the device's block size).
pub const SECTOR_BYTES: u64 = 512;

/// Why the sectors could not be mapped; each message names the device and the fix.
#[derive(Debug, thiserror::Error)]
pub enum SectorError {
    /// The device could not be opened or examined.
    #[error("{}: {source}; give a block device such as /dev/sda1", dev.display())]
    Open {
        /// The device as given.
        dev: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The path given is not a block device.
    #[error("{} is not a block device; give the device a filesystem lives on, e.g. /dev/sda1", .0.display())]
    NotBlock(PathBuf),
    /// No filesystem on the device is mounted.
    #[error("{} is not mounted; mount it (read-only is enough) so tacho can ask its filesystem", .0.display())]
    NotMounted(PathBuf),
    /// A sector lies beyond the device's last one.
    #[error("sector {sector} is past the end of {} ({sectors} sectors of 512 bytes)", dev.display())]
    PastEnd {
        /// The device as given.
        dev: PathBuf,
        /// The sector asked about.
        sector: u64,
        /// The device's size, in 512-byte sectors.
        sectors: u64,
    },
    /// A whole-disk sector number that falls outside the partition given.
    #[error(
        "sector {sector} is not in {}, which holds sectors {start} to {last} of disk {disk} \
         (numbers count from the start of the disk, as blkparse prints them); add --relative \
         if {sector} counts from the start of the partition", dev.display()
    )]
    OutsidePartition {
        /// The partition as given.
        dev: PathBuf,
        /// The sector asked about, counted from the start of the disk.
        sector: u64,
        /// The partition's first sector on its disk.
        start: u64,
        /// The partition's last sector on its disk.
        last: u64,
        /// The disk's kernel name.
        disk: String,
    },
    /// `--relative` given with a whole disk (`example` names one of its partitions).
    #[error(
        "--relative counts from the start of a partition, but {} is a whole disk; give the \
         partition (e.g. /dev/{example}) or drop --relative", dev.display()
    )]
    RelativeOnDisk { dev: PathBuf, example: String },
    /// The btrfs chunk tree could not be read.
    #[error("cannot read the btrfs chunk tree of {}: {source}", mount.display())]
    Btrfs {
        /// The btrfs mount point asked.
        mount: PathBuf,
        /// The error opening the mount point or of the ioctl.
        source: std::io::Error,
    },
    /// Reading the device's sysfs entry or mountinfo failed.
    #[error(transparent)]
    Kernel(#[from] crate::kernel::KernelError),
}

/// A file holding a sector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Owner {
    /// The file's full path (escaped for the terminal when printed).
    pub path: String,
    /// Where in the file the sector's first byte lies.
    pub offset_bytes: u64,
    /// The extent is shared with other files (reflink, snapshot).
    pub shared: bool,
    /// The extent is compressed or encoded: the offset is approximate.
    pub encoded: bool,
}

/// How the sector numbers given count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Numbering {
    /// From the start of the whole disk, as blktrace and blkparse print them (the default).
    WholeDisk,
    /// From the start of the partition given (`--relative`).
    PartitionRelative,
}

/// The answer for one sector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SectorOwners {
    /// The number as given.
    pub sector: u64,
    /// The partition (or whole device) holding it; None when it lies in no partition.
    pub device: Option<String>,
    /// The sector counted from the start of `device`.
    pub device_sector: u64,
    /// Byte offset from the start of `device`.
    pub byte: u64,
    /// Every file holding the sector (several when the extent is shared).
    pub owners: Vec<Owner>,
    /// Why no owner can be named, when none is (free space, metadata, unmapped btrfs space).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A filesystem that holds one of the sectors asked about.
#[derive(Debug, Clone, Serialize)]
pub struct Filesystem {
    /// The device's kernel name (`sda1`).
    pub device: String,
    /// Where the device starts on its disk, in 512-byte sectors (0 for a whole disk).
    pub start_sector: u64,
    /// Filesystem type (`ext4`, `xfs`, `btrfs`).
    pub fs_type: String,
    /// Where it is mounted.
    pub mount_points: Vec<String>,
}

/// The whole answer.
#[derive(Debug, Clone, Serialize)]
pub struct Located {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// The device as given.
    pub device: String,
    /// The whole disk it belongs to (kernel name).
    pub disk: String,
    /// Whether the numbers given count from the disk's or the partition's start.
    pub numbering: Numbering,
    /// The filesystem's type and mount points when every sector lies on one (kept from the
    /// first form of this answer, which knew only one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fs_type: Option<String>,
    /// The mount points of that filesystem (see `fs_type`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mount_points: Option<Vec<String>>,
    /// Every filesystem holding one of the sectors.
    pub filesystems: Vec<Filesystem>,
    /// Files and directories whose extents were read.
    pub files_examined: u64,
    /// One answer per sector, in the order given.
    pub sectors: Vec<SectorOwners>,
}

/// Where to look for a sector's byte in FIEMAP's address space.
struct Target {
    index: usize,
    address: u64,
    done: bool,
}

/// A partition (or an unpartitioned device) and its place on the disk, in sectors.
struct Region {
    path: PathBuf,
    major: u32,
    minor: u32,
    start: u64,
    sectors: u64,
}

impl Region {
    fn of(path: PathBuf, dev: &BlockDevice) -> Result<Region, SectorError> {
        let start = if dev.kind == DeviceKind::Partition {
            crate::kernel::read_u64(&dev.sys_path.join("start"))?
        } else {
            0
        };
        Ok(Region {
            path,
            major: dev.major,
            minor: dev.minor,
            start,
            sectors: dev.size_bytes / SECTOR_BYTES,
        })
    }

    fn holds(&self, disk_sector: u64) -> bool {
        disk_sector >= self.start && disk_sector - self.start < self.sectors
    }
}

/// Which files own `sectors` of `dev`. `dev` may be a whole disk (each sector is looked up in
/// the partition holding it) or a partition (sectors count from the start of its disk unless
/// `numbering` says they count from the partition's own start).
pub fn locate(
    root: &SysRoot,
    dev: &Path,
    sectors: &[u64],
    numbering: Numbering,
) -> Result<Located, SectorError> {
    let meta = std::fs::metadata(dev).map_err(|source| SectorError::Open {
        dev: dev.to_path_buf(),
        source,
    })?;
    if !meta.file_type().is_block_device() {
        return Err(SectorError::NotBlock(dev.to_path_buf()));
    }
    let rdev = meta.rdev();
    let given = blockdev::resolve(root, libc::major(rdev), libc::minor(rdev))?;
    let this = Region::of(dev.to_path_buf(), &given)?;
    let partitions = if given.kind == DeviceKind::Partition {
        Vec::new()
    } else {
        blockdev::partitions(root, &given)?
    };
    if numbering == Numbering::PartitionRelative
        && let Some(first) = partitions.first()
    {
        return Err(SectorError::RelativeOnDisk {
            dev: dev.to_path_buf(),
            example: first.name.clone(),
        });
    }
    let regions: Vec<Region> = if partitions.is_empty() {
        vec![this]
    } else {
        partitions
            .iter()
            .map(|p| Region::of(Path::new("/dev").join(&p.name), p))
            .collect::<Result<_, _>>()?
    };
    let disk_sectors = if given.kind == DeviceKind::Partition {
        None
    } else {
        Some(given.size_bytes / SECTOR_BYTES)
    };
    // Each sector: the region holding it and its number within that region.
    let mut placed: Vec<Option<(usize, u64)>> = Vec::with_capacity(sectors.len());
    for &sector in sectors {
        if let Some(total) = disk_sectors
            && sector >= total
        {
            return Err(SectorError::PastEnd {
                dev: dev.to_path_buf(),
                sector,
                sectors: total,
            });
        }
        let region = &regions[0];
        placed.push(match (numbering, given.kind) {
            (Numbering::WholeDisk, DeviceKind::Partition) if !region.holds(sector) => {
                return Err(SectorError::OutsidePartition {
                    dev: dev.to_path_buf(),
                    sector,
                    start: region.start,
                    last: region.start + region.sectors.saturating_sub(1),
                    disk: given.disk.clone(),
                });
            }
            (Numbering::WholeDisk, _) => regions
                .iter()
                .position(|r| r.holds(sector))
                .map(|i| (i, sector - regions[i].start)),
            (Numbering::PartitionRelative, _) if sector >= region.sectors => {
                return Err(SectorError::PastEnd {
                    dev: dev.to_path_buf(),
                    sector,
                    sectors: region.sectors,
                });
            }
            (Numbering::PartitionRelative, _) => Some((0, sector)),
        });
    }
    let mut answers: Vec<SectorOwners> = sectors
        .iter()
        .zip(&placed)
        .map(|(&sector, place)| SectorOwners {
            sector,
            device: place.map(|(i, _)| regions[i].path.display().to_string()),
            device_sector: place.map_or(sector, |(_, s)| s),
            byte: place.map_or(sector, |(_, s)| s) * SECTOR_BYTES,
            owners: Vec::new(),
            note: place.is_none().then(|| {
                format!(
                    "in no partition of {}: partition table or unallocated space",
                    given.disk
                )
            }),
        })
        .collect();
    let all = mounts::read_mounts(root)?;
    let mut filesystems = Vec::new();
    let mut files_examined = 0;
    for (i, region) in regions.iter().enumerate() {
        let wanted: Vec<usize> = (0..placed.len())
            .filter(|&k| placed[k].is_some_and(|(r, _)| r == i))
            .collect();
        if wanted.is_empty() {
            continue;
        }
        let (fs, files) = locate_in(&all, region, &wanted, &mut answers)?;
        filesystems.push(fs);
        files_examined += files;
    }
    for answer in &mut answers {
        if answer.owners.is_empty() && answer.note.is_none() {
            answer.note = Some("no file: free space or filesystem metadata".into());
        }
        answer.owners.sort_by(|a, b| a.path.cmp(&b.path));
    }
    let only = match filesystems.as_slice() {
        [fs] => Some(fs),
        _ => None,
    };
    Ok(Located {
        schema: SCHEMA,
        device: dev.display().to_string(),
        disk: given.disk.clone(),
        numbering,
        fs_type: only.map(|fs| fs.fs_type.clone()),
        mount_points: only.map(|fs| fs.mount_points.clone()),
        filesystems,
        files_examined,
        sectors: answers,
    })
}

/// Finds the owners of the sectors `wanted` (indexes into `answers`, whose `byte` is already
/// relative to `region`) on the filesystem mounted from `region`.
fn locate_in(
    all: &[Mount],
    region: &Region,
    wanted: &[usize],
    answers: &mut [SectorOwners],
) -> Result<(Filesystem, u64), SectorError> {
    let dev = region.path.as_path();
    let canonical = std::fs::canonicalize(dev).unwrap_or_else(|_| dev.to_path_buf());
    let ours: Vec<&Mount> = all
        .iter()
        .filter(|m| {
            (m.major, m.minor) == (region.major, region.minor)
                || m.source
                    .as_deref()
                    .is_some_and(|s| std::fs::canonicalize(s).is_ok_and(|c| c == canonical))
        })
        .collect();
    let Some(first) = ours.first() else {
        return Err(SectorError::NotMounted(dev.to_path_buf()));
    };
    let fs_type = first.fs_type.clone();
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
        for &index in wanted {
            let answer = &mut answers[index];
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
        targets = wanted
            .iter()
            .map(|&index| Target {
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
        walk.dir(&m.mount_point, &mut targets, answers);
    }
    let fs = Filesystem {
        device: dev.display().to_string(),
        start_sector: region.start,
        fs_type,
        mount_points: ours
            .iter()
            .map(|m| m.mount_point.display().to_string())
            .collect(),
    };
    Ok((fs, walk.files))
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
