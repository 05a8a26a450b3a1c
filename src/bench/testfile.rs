//! The temporary test file tacho creates in a directory target: sized only when it fits with
//! 5% of the filesystem left free, removed on drop (success, error, signal), and found and
//! removed by the next run when a killed run left it behind.
//!
//! The directory may be writable by other users, who can rename the file aside and plant a
//! symlink (to a root-owned file, to a block device) at its name. So the name is used only
//! relative to the directory's descriptor, never followed: the file is created with
//! `O_EXCL|O_NOFOLLOW`, its creating descriptor is kept for the whole run (every user of the
//! file gets one derived from it), and the name is unlinked only while it still names that
//! very inode. A run holds an exclusive `flock` on its file throughout, which is how another
//! run tells a live file from one a killed run left (whatever the binary is called, whatever
//! PID namespace it runs in).

use super::result::Warning;
use crate::units::format_size;
use crate::warning::Code;
use anyhow::{Context, Result, bail};
use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags, Stat};
use rustix::io::Errno;
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

/// A test file never leaves its filesystem with less than this share free.
const MIN_FREE_FRACTION: f64 = 0.05;
const TEST_FILE_PREFIX: &str = ".tacho-bench.";

/// A test file tacho created; removed when dropped (success, error, or signal).
pub struct TestFile {
    /// Removal by the signal handler if the run is abandoned; first, so it is unregistered
    /// before the directory's descriptor closes.
    _abandon: Option<crate::abandon::Registered>,
    /// For messages: the directory as the admin named it, joined with the file's name.
    pub path: PathBuf,
    dir_path: PathBuf,
    /// The directory, opened once; the name is only ever looked up relative to it.
    dir: OwnedFd,
    name: String,
    /// The creating descriptor, locked for the whole run.
    file: File,
}

impl TestFile {
    /// Creates the file in `dir` (a descriptor of the directory named `dir_path`).
    pub(super) fn create(dir: OwnedFd, dir_path: &Path, size: u64) -> Result<TestFile> {
        free_space_for_test(dir.as_fd(), dir_path, size)?;
        let name = format!(
            "{TEST_FILE_PREFIX}{}.{:08x}.tmp",
            std::process::id(),
            fastrand::u32(..)
        );
        let fd = rustix::fs::openat(
            &dir,
            name.as_str(),
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::RUSR | Mode::WUSR,
        )
        .map_err(|e| create_error(dir_path, e))?;
        // Marks the file live at once. Blocking: another run's stale check may hold the lock
        // for an instant. Where the filesystem has no locks, stale checks cannot lock it either
        // and so leave it alone.
        let _ = rustix::fs::flock(&fd, FlockOperation::LockExclusive);
        let abandon = rustix::fs::fstat(&fd).ok().and_then(|st| {
            let entry = crate::abandon::Entry::File(st.st_dev, st.st_ino);
            crate::abandon::register(dir.as_fd(), &name, entry)
        });
        let guard = TestFile {
            _abandon: abandon,
            path: dir_path.join(&name),
            dir_path: dir_path.to_path_buf(),
            dir,
            name,
            file: fd.into(),
        };
        // Reserve the space up front so a full disk fails now, not halfway through a test.
        match rustix::fs::fallocate(&guard.file, rustix::fs::FallocateFlags::empty(), 0, size) {
            // Filesystems without fallocate (ext2, FAT, some network ones) get the space as it
            // is written, and can fill up during the run.
            Ok(()) | Err(Errno::OPNOTSUPP) => {}
            Err(e) => bail!(
                "cannot reserve {} in {}: {}",
                format_size(size),
                dir_path.display(),
                std::io::Error::from(e)
            ),
        }
        guard
            .file
            .set_len(size)
            .with_context(|| format!("cannot size the test file in {}", dir_path.display()))?;
        Ok(guard)
    }

    /// The creating descriptor, for deriving the workers' own.
    pub(super) fn descriptor(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// Drops every block and gives the file back its size, as a hole.
    pub(super) fn renew(&self) -> std::io::Result<()> {
        let size = self.file.metadata()?.len();
        self.file.set_len(0)?;
        self.file.set_len(size)
    }

    /// The directory as the admin named it.
    pub fn dir_path(&self) -> &Path {
        &self.dir_path
    }
}

impl Drop for TestFile {
    fn drop(&mut self) {
        // Frees the space even when the name no longer leads to the file.
        let _ = self.file.set_len(0);
        let ours = rustix::fs::fstat(&self.file);
        let named = rustix::fs::statat(&self.dir, self.name.as_str(), AtFlags::SYMLINK_NOFOLLOW);
        match (ours, named) {
            (Ok(ours), Ok(named)) if same_inode(&ours, &named) => {
                let _ = rustix::fs::unlinkat(&self.dir, self.name.as_str(), AtFlags::empty());
            }
            _ => eprintln!(
                "tacho: warning: {} was renamed or replaced by another program during the run; \
                 left that name alone (the test file was emptied)",
                self.path.display()
            ),
        }
    }
}

fn same_inode(a: &Stat, b: &Stat) -> bool {
    a.st_dev == b.st_dev && a.st_ino == b.st_ino
}

/// Removes test files left by tacho runs that were killed: files of this user that no process
/// holds locked.
pub(super) fn remove_stale_files(dir: BorrowedFd<'_>, dir_path: &Path) -> Vec<Warning> {
    let Ok(entries) = rustix::fs::Dir::read_from(dir) else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().to_str() else {
            continue;
        };
        let Some(pid) = stale_pid(name) else {
            continue;
        };
        if remove_if_stale(dir, name) {
            notes.push(Warning {
                code: Code::RemovedStaleFile,
                message: format!(
                    "removed {}, left behind by a tacho run (pid {pid}) that was killed",
                    dir_path.join(name).display()
                ),
            });
        }
    }
    notes
}

/// Removes `name` from `dir` if it is a regular file of this user that no process holds
/// locked, and the name still leads to the file that was judged.
fn remove_if_stale(dir: BorrowedFd<'_>, name: &str) -> bool {
    let me = rustix::process::geteuid().as_raw();
    let acceptable =
        |st: &Stat| FileType::from_raw_mode(st.st_mode) == FileType::RegularFile && st.st_uid == me;
    // Looked at before opening, so no device or FIFO of that name is ever opened.
    let Ok(before) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
        return false;
    };
    if !acceptable(&before) {
        return false;
    }
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY;
    let Ok(fd) = rustix::fs::openat(dir, name, flags | OFlags::CLOEXEC, Mode::empty()) else {
        return false;
    };
    let Ok(st) = rustix::fs::fstat(&fd) else {
        return false;
    };
    if !acceptable(&st) || !same_inode(&st, &before) {
        return false;
    }
    // Held by a live run (or locks unsupported here): not stale.
    if rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive).is_err() {
        return false;
    }
    let still_named = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|named| same_inode(&named, &st));
    still_named && rustix::fs::unlinkat(dir, name, AtFlags::empty()).is_ok()
}

/// The pid in a test file name `.tacho-bench.<pid>.<hex>.tmp`, if it is one.
fn stale_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(TEST_FILE_PREFIX)?.strip_suffix(".tmp")?;
    let (pid, nonce) = rest.split_once('.')?;
    (nonce.len() == 8 && nonce.chars().all(|c| c.is_ascii_hexdigit())).then_some(())?;
    pid.parse().ok()
}

/// Checks that a test file of `size` bytes fits and leaves 5% of the filesystem free.
/// Why a test file cannot be created in `dir_path`, with the fix.
fn create_error(dir_path: &Path, e: Errno) -> anyhow::Error {
    match e {
        Errno::ROFS => anyhow::anyhow!(
            "{} is on a read-only filesystem; choose a writable directory",
            dir_path.display()
        ),
        Errno::ACCESS | Errno::PERM => anyhow::anyhow!(
            "no permission to create a test file in {}; choose a directory you can write to",
            dir_path.display()
        ),
        _ => anyhow::anyhow!(
            "cannot create a test file in {}: {}",
            dir_path.display(),
            std::io::Error::from(e)
        ),
    }
}

fn free_space_for_test(dir: BorrowedFd<'_>, dir_path: &Path, size: u64) -> Result<u64> {
    // A directory that cannot be written is that, whatever its filesystem's figures (a full
    // filesystem mounted read-only says "0 free").
    rustix::fs::accessat(dir, ".", rustix::fs::Access::WRITE_OK, AtFlags::EACCESS)
        .map_err(|e| create_error(dir_path, e))?;
    let vfs = rustix::fs::fstatvfs(dir).map_err(|e| {
        anyhow::anyhow!(
            "cannot read free space of {}: {}",
            dir_path.display(),
            std::io::Error::from(e)
        )
    })?;
    let (avail, total) = (vfs.f_bavail * vfs.f_frsize, vfs.f_blocks * vfs.f_frsize);
    let reserve = (total as f64 * MIN_FREE_FRACTION) as u64;
    if avail.saturating_sub(size) < reserve {
        bail!(
            "not enough free space in {} for a {} test file: {} free of {}, and tacho leaves at \
             least 5% free; use a smaller --size or another directory",
            dir_path.display(),
            format_size(size),
            human(avail),
            human(total)
        );
    }
    Ok(size)
}

fn human(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_dir(path: &Path) -> OwnedFd {
        rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap()
    }

    #[test]
    fn stale_names() {
        assert_eq!(stale_pid(".tacho-bench.1234.0badf00d.tmp"), Some(1234));
        assert_eq!(stale_pid(".tacho-bench.1234.tmp"), None);
        assert_eq!(stale_pid(".tacho-bench.x.0badf00d.tmp"), None);
        assert_eq!(stale_pid("data.tmp"), None);
        assert_eq!(stale_pid(".tacho-bench.1.0badf00z.tmp"), None);
    }

    #[test]
    fn unlocked_files_are_removed_and_locked_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let dead = dir.path().join(".tacho-bench.2147483647.0000abcd.tmp");
        // Our own pid: only the lock tells it is alive.
        let live = dir
            .path()
            .join(format!(".tacho-bench.{}.0000dcba.tmp", std::process::id()));
        let foreign = dir.path().join("mine.tmp");
        for f in [&dead, &live, &foreign] {
            std::fs::write(f, b"x").unwrap();
        }
        let holder = File::open(&live).unwrap();
        rustix::fs::flock(&holder, FlockOperation::LockExclusive).unwrap();
        let notes = remove_stale_files(open_dir(dir.path()).as_fd(), dir.path());
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!(notes[0].code, Code::RemovedStaleFile);
        assert!(!dead.exists());
        assert!(live.exists());
        assert!(foreign.exists());
    }

    #[test]
    fn symlinks_and_directories_named_like_test_files_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let link = dir.path().join(".tacho-bench.2147483647.0000abcd.tmp");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let subdir = dir.path().join(".tacho-bench.2147483646.0000abcd.tmp");
        std::fs::create_dir(&subdir).unwrap();
        let notes = remove_stale_files(open_dir(dir.path()).as_fd(), dir.path());
        assert!(notes.is_empty(), "{notes:?}");
        assert!(link.symlink_metadata().is_ok());
        assert!(subdir.is_dir());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    }

    #[test]
    fn a_renewed_file_keeps_its_size_and_loses_its_blocks() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let file = TestFile::create(open_dir(dir.path()), dir.path(), 1 << 20).unwrap();
        std::fs::write(&file.path, vec![1u8; 1 << 20]).unwrap();
        assert!(std::fs::metadata(&file.path).unwrap().blocks() > 0);
        file.renew().unwrap();
        let meta = std::fs::metadata(&file.path).unwrap();
        assert_eq!((meta.len(), meta.blocks()), (1 << 20, 0));
    }

    #[test]
    fn the_file_is_removed_only_while_its_name_is_ours() {
        let dir = tempfile::tempdir().unwrap();
        let file = TestFile::create(open_dir(dir.path()), dir.path(), 4096).unwrap();
        let aside = dir.path().join("aside");
        std::fs::rename(&file.path, &aside).unwrap();
        let planted = file.path.clone();
        std::fs::write(&planted, b"someone else's").unwrap();
        drop(file);
        assert_eq!(std::fs::read(&planted).unwrap(), b"someone else's");
        assert_eq!(std::fs::metadata(&aside).unwrap().len(), 0, "emptied");

        let file = TestFile::create(open_dir(dir.path()), dir.path(), 4096).unwrap();
        let path = file.path.clone();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 4096);
        drop(file);
        assert!(!path.exists());
    }
}
