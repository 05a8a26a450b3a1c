//! What the benchmark runs against, and whether it may write there.
//!
//! [`inspect`] only reads (metadata, /proc, /sys, the device's first blocks), so every refusal
//! happens before anything is created. [`Target::prepare`] then makes the test file, if any.

use super::result::{TargetInfo, Warning};
use super::testfile::{TestFile, remove_stale_files};
use crate::kernel::blockdev::{self, BlockDevice};
use crate::kernel::{SysRoot, mounts};
use crate::safety::{self, DeviceState};
use anyhow::{Context, Result, bail};
use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Test file size when the target is a directory and `--size` is not given.
pub const DEFAULT_FILE_SIZE: u64 = 1 << 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Directory,
    File,
    BlockDevice,
}

/// The result of looking at a target without touching it.
#[derive(Debug)]
pub struct Inspected {
    pub kind: Kind,
    pub path: PathBuf,
    pub info: TargetInfo,
    /// The device under the target, when it has one (tmpfs and btrfs have none in sysfs).
    pub device: Option<BlockDevice>,
    /// Devices whose /proc/diskstats counters the tests record.
    pub stats_devnos: Vec<(u32, u32)>,
    /// The file or device size; for a directory, the default test file size.
    pub capacity: u64,
    pub notes: Vec<Warning>,
}

pub fn inspect(root: &SysRoot, path: &Path) -> Result<Inspected> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        ErrorKind::NotFound => anyhow::anyhow!(
            "target {} does not exist; give an existing directory, file or block device",
            path.display()
        ),
        ErrorKind::PermissionDenied => anyhow::anyhow!(
            "no permission to look at {}; run as a user who can read it",
            path.display()
        ),
        _ => anyhow::anyhow!("cannot read target {}: {e}", path.display()),
    })?;
    let kind = if meta.is_dir() {
        Kind::Directory
    } else if meta.is_file() {
        Kind::File
    } else if meta.file_type().is_block_device() {
        Kind::BlockDevice
    } else {
        bail!(
            "target {} is neither a directory, a regular file nor a block device; give one of those",
            path.display()
        );
    };
    let device = blockdev::from_path(root, path).ok();
    let mount = match kind {
        Kind::BlockDevice => None,
        _ => std::fs::canonicalize(path)
            .ok()
            .and_then(|p| mounts::mount_of_path(root, &p).ok()),
    };
    let mut notes = Vec::new();
    let capacity = match kind {
        Kind::Directory => DEFAULT_FILE_SIZE,
        Kind::File => meta.len(),
        Kind::BlockDevice => device
            .as_ref()
            .map(|d| d.size_bytes)
            .context("cannot find the block device in /sys; is sysfs mounted?")?,
    };
    if capacity == 0 && kind == Kind::Directory {
        bail!("--size must be larger than zero, e.g. 1G");
    }
    if capacity == 0 {
        bail!(
            "target {} is empty; give a file or device with data, or a directory",
            path.display()
        );
    }
    let stats = match &device {
        Some(d) => blockdev::devices_for_stats(root, d).unwrap_or_else(|_| vec![d.clone()]),
        None => {
            notes.push(Warning {
                code: "no-device",
                message: format!(
                    "{} has no single block device in /sys (tmpfs, btrfs, network or overlay \
                     filesystem), so device counters are not recorded",
                    path.display()
                ),
            });
            Vec::new()
        }
    };
    if let Some(m) = mount
        .as_ref()
        .filter(|m| matches!(m.fs_type.as_str(), "tmpfs" | "ramfs"))
    {
        notes.push(Warning {
            code: "memory-backed",
            message: format!(
                "{} is on {}, a filesystem in RAM: the figures measure memory, not a disk",
                path.display(),
                m.fs_type
            ),
        });
    }
    let leaf = stats
        .iter()
        .find(|d| d.rotational.is_some() || d.model.is_some());
    let info = TargetInfo {
        // Absolute, so results from different working directories compare.
        path: std::fs::canonicalize(path)
            .unwrap_or_else(|_| path.to_path_buf())
            .display()
            .to_string(),
        kind: match kind {
            Kind::Directory => "directory",
            Kind::File => "file",
            Kind::BlockDevice => "block_device",
        },
        region_bytes: 0,
        filesystem: mount.as_ref().map(|m| m.fs_type.clone()),
        mount_point: mount.as_ref().map(|m| m.mount_point.display().to_string()),
        mount_options: mount.as_ref().map(|m| m.options.clone()),
        devices: stats.iter().map(|d| d.display_name.clone()).collect(),
        device_model: leaf.and_then(|d| d.model.clone()),
        rotational: leaf.and_then(|d| d.rotational),
        scheduler: leaf.and_then(|d| d.scheduler.clone()),
        logical_block_size: device.as_ref().map_or(512, |d| d.logical_block_size as u32),
    };
    Ok(Inspected {
        kind,
        path: path.to_path_buf(),
        info,
        stats_devnos: stats.iter().map(|d| (d.major, d.minor)).collect(),
        device,
        capacity,
        notes,
    })
}

/// Refuses writes tacho has no consent for: into an existing file, or onto a block device that
/// is in use or holds data.
pub fn check_write_allowed(root: &SysRoot, t: &Inspected, destroy_data: bool) -> Result<()> {
    match t.kind {
        Kind::Directory => Ok(()),
        Kind::File if destroy_data => Ok(()),
        Kind::File => bail!(
            "refusing to write into the existing file {}: its data would be overwritten; pass \
             --destroy-data to allow it, or give a directory for a temporary test file",
            t.path.display()
        ),
        Kind::BlockDevice => {
            let dev = t
                .device
                .as_ref()
                .context("cannot find the block device in /sys; is sysfs mounted?")?;
            let state = device_state(root, &t.path, dev)?;
            match safety::write_refusal(&state, destroy_data) {
                Some(refusal) => Err(refusal.into()),
                None => Ok(()),
            }
        }
    }
}

fn device_state(root: &SysRoot, path: &Path, dev: &BlockDevice) -> Result<DeviceState> {
    let mut family = vec![dev.clone()];
    family.extend(blockdev::partitions(root, dev).unwrap_or_default());
    let mounted = mounts::mounted_devnos(root).context("cannot read the mount table")?;
    let mounts = mounted
        .into_iter()
        .filter_map(|(major, minor, mount_point)| {
            family
                .iter()
                .find(|d| d.major == major && d.minor == minor)
                .map(|d| safety::Mount {
                    source: d.name.clone(),
                    mount_point,
                })
        })
        .collect();
    let swaps = mounts::active_swaps(root)
        .context("cannot read /proc/swaps")?
        .into_iter()
        .filter(|swap| {
            blockdev::from_path(root, Path::new(swap)).is_ok_and(|s| {
                family
                    .iter()
                    .any(|d| d.major == s.major && d.minor == s.minor)
            })
        })
        .collect();
    let holders = blockdev::holders(root, dev).unwrap_or_default();
    let reader = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let signatures = safety::detect(&reader, dev.size_bytes)
        .with_context(|| format!("cannot read the first blocks of {}", path.display()))?;
    Ok(DeviceState {
        device: path.to_path_buf(),
        mounts,
        swaps,
        holders,
        signatures,
    })
}

/// A prepared target: the path every worker opens, and the test file removed on drop.
pub struct Target {
    pub path: PathBuf,
    pub writes: bool,
    /// Created by tacho: removed on drop, and laid out before the first test.
    pub test_file: Option<TestFile>,
    /// For block devices: an exclusive open held through the run, so nothing can mount the
    /// device while tacho writes to it (and tacho cannot start while something holds it).
    _claim: Option<File>,
}

impl Target {
    /// Creates the test file (directories) or claims the device (block devices written to).
    pub fn prepare(t: &Inspected, region: u64, writes: bool) -> Result<(Target, Vec<Warning>)> {
        let mut notes = Vec::new();
        let (path, test_file, claim) = match t.kind {
            Kind::Directory => {
                notes.extend(remove_stale_files(&t.path));
                let file = TestFile::create(&t.path, region)?;
                (file.path.clone(), Some(file), None)
            }
            Kind::File => (t.path.clone(), None, None),
            Kind::BlockDevice if writes => {
                let claim = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .custom_flags(libc::O_EXCL)
                    .open(&t.path)
                    .map_err(|e| open_error(&t.path, e))?;
                (t.path.clone(), None, Some(claim))
            }
            Kind::BlockDevice => (t.path.clone(), None, None),
        };
        let target = Target {
            path,
            // A test file is always writable: tacho lays it out.
            writes: writes || t.kind == Kind::Directory,
            test_file,
            _claim: claim,
        };
        target.open(false).map_err(|e| open_error(&t.path, e))?;
        Ok((target, notes))
    }

    /// Whether the target accepts O_DIRECT (tmpfs on older kernels, ramfs and some FUSE and
    /// network filesystems refuse it with EINVAL).
    pub fn direct_supported(&self) -> Result<bool> {
        match self.open(true) {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(false),
            Err(e) => Err(open_error(&self.path, e)),
        }
    }

    /// Opens the target as a worker does: read-only unless the run writes.
    pub fn open(&self, direct: bool) -> std::io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(self.writes)
            .custom_flags(if direct { libc::O_DIRECT } else { 0 })
            .open(&self.path)
    }
}

fn open_error(path: &Path, e: std::io::Error) -> anyhow::Error {
    match e.raw_os_error() {
        Some(libc::EROFS) => anyhow::anyhow!(
            "{} is on a read-only filesystem or device; choose a writable target",
            path.display()
        ),
        Some(libc::EACCES | libc::EPERM) => anyhow::anyhow!(
            "no permission to open {} for the test; run as a user who may (root for block devices)",
            path.display()
        ),
        Some(libc::EBUSY) => anyhow::anyhow!(
            "{} is in use (mounted or claimed by another program); stop that use first",
            path.display()
        ),
        _ => anyhow::anyhow!("cannot open {}: {e}", path.display()),
    }
}
