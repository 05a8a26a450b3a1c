//! What the benchmark runs against, and whether it may write there.
//!
//! The target's path is resolved exactly once: [`open`] opens it (symlinks the admin named
//! are followed at that moment) and from then on only that descriptor, and descriptors derived
//! from it, are used: for the checks, the test file, the device claim and every worker. A path
//! another user swaps after that (a symlink flipped between devices, a test file renamed aside)
//! changes nothing tacho touches.
//!
//! [`inspect`] only reads (metadata, /proc, /sys), so every refusal happens before anything is
//! created. [`check_write_allowed`] claims a block device and judges what that claimed
//! descriptor holds; [`Target::prepare`] then makes the test file, if any.

pub use super::result::Kind;
use super::result::{TargetInfo, Warning};
use super::testfile::{TestFile, remove_stale_files};
use crate::kernel::blockdev::{self, BlockDevice};
use crate::kernel::{SysRoot, mounts};
use crate::safety::links::{self, Unresolved};
use crate::safety::{self, DeviceState};
use crate::warning::Code;
use anyhow::{Context, Result, bail};
use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;
use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Test file size when the target is a directory and `--size` is not given.
pub const DEFAULT_FILE_SIZE: u64 = 1 << 30;

/// The result of looking at a target without touching it.
#[derive(Debug)]
pub struct Inspected {
    /// File, directory or block device.
    pub kind: Kind,
    /// The path as the user gave it.
    pub path: PathBuf,
    /// What the report says about the target.
    pub info: TargetInfo,
    /// The device under the target, when it has one (tmpfs and btrfs have none in sysfs).
    pub device: Option<BlockDevice>,
    /// Devices whose /proc/diskstats counters the tests record.
    pub stats_devnos: Vec<(u32, u32)>,
    /// The file or device size; for a directory, the default test file size.
    pub capacity: u64,
    /// For a directory, the bytes its filesystem has free for this user; `None` for a file or
    /// device, or when the filesystem does not say.
    pub free_bytes: Option<u64>,
    /// Reasons to doubt the figures that the target itself gives (no device in sysfs,
    /// memory-backed, …).
    pub notes: Vec<Warning>,
}

/// The target as the admin named it, opened once: everything later derives from `handle`.
pub struct Opened {
    /// As the admin gave it, for messages.
    pub path: PathBuf,
    handle: OwnedFd,
}

/// Resolves and opens the target, once. A link on the way is followed (as dd and mkfs do)
/// only when root or the running user owns it: another user's link could be re-pointed at a
/// device with data on it.
pub fn open(path: &Path) -> Result<Opened> {
    // O_PATH: no open of a device or FIFO happens, so looking has no side effect.
    let handle = links::open_trusted(path).map_err(|e| match e {
        Unresolved::Open(Errno::NOENT) => anyhow::anyhow!(
            "target {} does not exist; give an existing directory, file or block device",
            path.display()
        ),
        Unresolved::Open(Errno::ACCESS | Errno::PERM) => anyhow::anyhow!(
            "no permission to look at {}; run as a user who can read it",
            path.display()
        ),
        Unresolved::Open(e) => anyhow::anyhow!(
            "cannot read target {}: {}",
            path.display(),
            std::io::Error::from(e)
        ),
        Unresolved::ForeignLink { link, uid } => anyhow::anyhow!(
            "refusing target {}: it goes through the symbolic link {}, owned by uid {uid}, who \
             could point it anywhere (a device with data, say); give the path it leads to",
            path.display(),
            link.display()
        ),
        Unresolved::TooManyLinks => anyhow::anyhow!(
            "target {} goes through more than 40 symbolic links (a loop?); give the real path",
            path.display()
        ),
    })?;
    Ok(Opened {
        path: path.to_path_buf(),
        handle,
    })
}

/// Looks at the opened target without touching it.
pub fn inspect(root: &SysRoot, target: &Opened) -> Result<Inspected> {
    let (path, handle) = (target.path.as_path(), &target.handle);
    let st = rustix::fs::fstat(handle)
        .map_err(|e| anyhow::anyhow!("cannot read target {}: {e}", path.display()))?;
    let kind = match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => Kind::Directory,
        FileType::RegularFile => Kind::File,
        FileType::BlockDevice => Kind::BlockDevice,
        _ => bail!(
            "target {} is neither a directory, a regular file nor a block device; give one of \
             those",
            path.display()
        ),
    };
    // The device number comes from the descriptor, never from the path again.
    let devno = if kind == Kind::BlockDevice {
        st.st_rdev
    } else {
        st.st_dev
    };
    let device = blockdev::resolve(root, rustix::fs::major(devno), rustix::fs::minor(devno)).ok();
    // Where the descriptor really points, for the report and the mount table (informational).
    let resolved = std::fs::read_link(fd_path(handle.as_fd())).unwrap_or_else(|_| path.into());
    let mount = match kind {
        Kind::BlockDevice => None,
        _ => mounts::mount_of_path(root, &resolved).ok(),
    };
    let mut notes = Vec::new();
    let capacity = match kind {
        Kind::Directory => DEFAULT_FILE_SIZE,
        Kind::File => st.st_size as u64,
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
                code: Code::NoDevice,
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
            code: Code::MemoryBacked,
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
        path: resolved.display().to_string(),
        kind,
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
        free_bytes: (kind == Kind::Directory)
            .then(|| rustix::fs::fstatvfs(handle).ok())
            .flatten()
            .map(|v| v.f_bavail.saturating_mul(v.f_frsize)),
        notes,
    })
}

/// Consent to write to the target. For a block device it carries the exclusive claim whose
/// content was judged, so the checked descriptor is the one written through.
pub struct WriteConsent {
    claim: Option<File>,
}

/// The consent a run needs when it `writes`, judged by [`check_write_allowed`]; `None` for a
/// run that only reads.
pub fn consent_if_writing(
    writes: bool,
    root: &SysRoot,
    opened: &Opened,
    t: &Inspected,
    destroy_data: bool,
) -> Result<Option<WriteConsent>> {
    writes
        .then(|| check_write_allowed(root, opened, t, destroy_data))
        .transpose()
}

/// Refuses writes tacho has no consent for: into an existing file, or onto a block device that
/// is in use or holds data.
pub fn check_write_allowed(
    root: &SysRoot,
    opened: &Opened,
    t: &Inspected,
    destroy_data: bool,
) -> Result<WriteConsent> {
    match t.kind {
        Kind::Directory => Ok(WriteConsent { claim: None }),
        Kind::File if destroy_data => Ok(WriteConsent { claim: None }),
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
            // Claimed first, so nothing can mount it between the check and the writes. Read
            // only: a refused device is never opened for writing (udev rescans a device whenever
            // a writer closes it); the workers' writable descriptors derive from this claim.
            let claim = match reopen(opened.handle.as_fd(), false, libc::O_EXCL) {
                Ok(claim) => claim,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    // Held by something: name it when the facts tell what.
                    let reader = reopen(opened.handle.as_fd(), false, 0)
                        .map_err(|e| open_error(&t.path, e))?;
                    let state = device_state(root, &t.path, dev, &reader)?;
                    return Err(match safety::write_refusal(&state, destroy_data) {
                        Some(refusal) => refusal.into(),
                        None => open_error(&t.path, e),
                    });
                }
                Err(e) => return Err(open_error(&t.path, e)),
            };
            let state = device_state(root, &t.path, dev, &claim)?;
            match safety::write_refusal(&state, destroy_data) {
                Some(refusal) => Err(refusal.into()),
                None => Ok(WriteConsent { claim: Some(claim) }),
            }
        }
    }
}

/// Judges the device behind `reader`, a descriptor of the opened target.
fn device_state(
    root: &SysRoot,
    path: &Path,
    dev: &BlockDevice,
    reader: &File,
) -> Result<DeviceState> {
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
    let signatures = safety::detect(reader, dev.size_bytes)
        .with_context(|| format!("cannot read the first blocks of {}", path.display()))?;
    Ok(DeviceState {
        device: path.to_path_buf(),
        mounts,
        swaps,
        holders,
        signatures,
    })
}

/// A prepared target: the descriptor every worker's is derived from, and the test file removed
/// on drop.
pub struct Target {
    /// For messages: the test file, or the file or device as the admin named it.
    pub path: PathBuf,
    /// Whether it was opened for writing.
    pub writes: bool,
    /// Created by tacho: removed on drop, and laid out before the first test.
    pub test_file: Option<TestFile>,
    /// The test file's creating descriptor, the device's exclusive claim (held through the
    /// run, so nothing can mount the device while tacho writes to it), or the opened target.
    base: OwnedFd,
}

impl Target {
    /// Creates the test file (directories); `consent` is given when the run writes.
    pub fn prepare(
        opened: &Opened,
        t: &Inspected,
        consent: Option<WriteConsent>,
        region: u64,
    ) -> Result<(Target, Vec<Warning>)> {
        let mut notes = Vec::new();
        // A test file is always writable: tacho lays it out.
        let writes = consent.is_some() || t.kind == Kind::Directory;
        let (path, test_file, base) = match t.kind {
            Kind::Directory => {
                // Relative to the handle: "." is the directory inspected, whatever its path
                // names now. Readable, to list it for stale files.
                let dir = rustix::fs::openat(
                    &opened.handle,
                    ".",
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|e| open_error(&t.path, e.into()))?;
                notes.extend(remove_stale_files(dir.as_fd(), &t.path));
                let file = TestFile::create(dir, &t.path, region)?;
                let base = file
                    .descriptor()
                    .try_clone_to_owned()
                    .context("cannot duplicate the test file's descriptor")?;
                (file.path.clone(), Some(file), base)
            }
            Kind::File | Kind::BlockDevice => {
                let base = match consent.and_then(|c| c.claim) {
                    Some(claim) => claim.into(),
                    None => opened
                        .handle
                        .try_clone()
                        .context("cannot duplicate the target's descriptor")?,
                };
                (t.path.clone(), None, base)
            }
        };
        let target = Target {
            path,
            writes,
            test_file,
            base,
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

    /// A worker's own descriptor of the target (own file position, own O_DIRECT flag):
    /// read-only unless the run writes.
    pub fn open(&self, direct: bool) -> std::io::Result<File> {
        self.open_with(direct, 0)
    }

    /// Like [`Target::open`], with more open flags (O_DSYNC, O_SYNC).
    pub fn open_with(&self, direct: bool, flags: i32) -> std::io::Result<File> {
        reopen(
            self.base.as_fd(),
            self.writes,
            flags | if direct { libc::O_DIRECT } else { 0 },
        )
    }

    /// Empties the test file and gives it back its size with no blocks: the next writes
    /// allocate them, as into a file just created. A no-op for a file or device.
    pub fn renew_test_file(&self) -> std::io::Result<()> {
        match &self.test_file {
            Some(f) => f.renew(),
            None => Ok(()),
        }
    }

    /// The directory holding a test file, or the file or device itself.
    pub fn location(&self) -> &Path {
        self.test_file.as_ref().map_or(&self.path, |f| f.dir_path())
    }

    /// Whether the target is a regular file (tacho's test file or the admin's).
    pub fn is_file(&self) -> bool {
        rustix::fs::fstat(&self.base)
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::RegularFile)
    }

    /// Whether the target is a file on a filesystem with no space left: a short write there
    /// means the filesystem filled up.
    pub fn filesystem_full(&self) -> bool {
        self.is_file() && rustix::fs::fstatvfs(&self.base).is_ok_and(|vfs| vfs.f_bavail == 0)
    }
}

/// Opens the object behind `fd` again: `/proc/self/fd/N` leads to the very inode the descriptor
/// holds (it is not a path walk), with new flags and a file position of its own.
fn reopen(fd: BorrowedFd<'_>, write: bool, flags: i32) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(flags)
        .open(fd_path(fd))
        .map_err(|e| match e.raw_os_error() {
            // The descriptor is open, so only a missing /proc can hide it.
            Some(libc::ENOENT) => std::io::Error::other(
                "cannot reopen the target through /proc/self/fd; is /proc mounted?",
            ),
            _ => e,
        })
}

fn fd_path(fd: BorrowedFd<'_>) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
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
