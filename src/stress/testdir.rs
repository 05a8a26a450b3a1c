//! The hdd workers' directory: `.tacho-stress.<pid>` inside the directory the user chose,
//! removed with everything in it when the run ends (normally, on error, or on a signal that
//! the run turns into a stop).
//!
//! The chosen directory may be writable by other users, who can rename entries in it and plant
//! links. So the test directory is made 0700 and opened once (`O_DIRECTORY|O_NOFOLLOW`); the
//! workers create, write and unlink their files relative to that descriptor, never by path, so
//! a directory renamed aside and replaced keeps them in the one tacho made, where nobody else
//! can plant anything.
//!
//! A directory left by a killed run is removed by the next run when it is the running user's,
//! its run is gone (no lock on it: each run holds `flock` on its directory until it ends; and
//! no process with its pid, for directories of versions without the lock), and it is emptied
//! through its own descriptor, so nothing outside it is ever followed or removed.

use crate::abandon::Entry;
use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags};
use std::ffi::OsString;
use std::io;
use std::os::fd::AsFd;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const PREFIX: &str = ".tacho-stress.";

/// A private (0700) `.tacho-stress.<pid>` directory for the disk-write workers, locked while the
/// run lasts and removed with its contents on drop.
pub struct TestDir {
    /// Removal by the signal handler if the run is abandoned (the workers' files, then the
    /// directory); first, so they are unregistered before the descriptors close.
    abandon: Vec<crate::abandon::Registered>,
    parent: OwnedFd,
    name: OsString,
    /// Locked (`flock`) for the whole run: the mark of a live run.
    dir: Arc<OwnedFd>,
    path: PathBuf,
}

impl TestDir {
    /// Makes and locks the directory inside `parent_path`, first removing those of runs that are
    /// gone; the error names the directory.
    pub fn create(parent_path: &Path) -> io::Result<TestDir> {
        let name = OsString::from(format!("{PREFIX}{}", std::process::id()));
        let path = parent_path.join(&name);
        let fail = |e: io::Error| {
            io::Error::new(
                e.kind(),
                format!("cannot create the test directory {}: {e}", path.display()),
            )
        };
        let parent = rustix::fs::open(
            parent_path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| fail(e.into()))?;
        remove_stale(&parent);
        rustix::fs::mkdirat(&parent, &name, Mode::from_raw_mode(0o700))
            .map_err(|e| fail(e.into()))?;
        let dir = open_dir(&parent, &name).map_err(|e| fail(e.into()))?;
        rustix::fs::flock(&dir, FlockOperation::NonBlockingLockExclusive)
            .map_err(|e| fail(e.into()))?;
        let abandon = name
            .to_str()
            .and_then(|n| crate::abandon::register(parent.as_fd(), n, Entry::Directory))
            .into_iter()
            .collect();
        Ok(TestDir {
            abandon,
            parent,
            name,
            dir: Arc::new(dir),
            path,
        })
    }

    /// Registers a worker's file `name` in the directory for removal if the run is
    /// abandoned.
    pub fn on_abandon_remove(&mut self, name: &str) {
        self.abandon.extend(crate::abandon::register(
            self.dir.as_fd(),
            name,
            Entry::PrivateFile,
        ));
    }

    /// The directory's descriptor, for the workers.
    pub fn fd(&self) -> Arc<OwnedFd> {
        Arc::clone(&self.dir)
    }

    /// Where the directory is, for messages and the report.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        remove(&self.parent, &self.name, &self.dir);
    }
}

fn open_dir(parent: &OwnedFd, name: &OsString) -> rustix::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::openat(parent, name, flags, Mode::empty())
}

/// Unlinks the files in `dir` through its descriptor, then removes `name` from `parent` only if
/// it is still that directory (it may have been renamed, and another put in its place).
fn remove(parent: &OwnedFd, name: &OsString, dir: &OwnedFd) {
    if let Ok(entries) = rustix::fs::Dir::read_from(dir) {
        for entry in entries.flatten() {
            let n = entry.file_name().to_bytes();
            if n != b"." && n != b".." {
                // Only files: tacho makes nothing else here, and never descends.
                let _ = rustix::fs::unlinkat(dir, entry.file_name(), AtFlags::empty());
            }
        }
    }
    let same = match (
        rustix::fs::fstat(dir),
        rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW),
    ) {
        (Ok(a), Ok(b)) => a.st_dev == b.st_dev && a.st_ino == b.st_ino,
        _ => false,
    };
    if same {
        let _ = rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR);
    }
}

/// Removes `.tacho-stress.<pid>` directories of runs that are gone (see the module docs).
fn remove_stale(parent: &OwnedFd) {
    let Ok(entries) = rustix::fs::Dir::read_from(parent) else {
        return;
    };
    let me = rustix::process::geteuid().as_raw();
    for entry in entries.flatten() {
        let name = OsString::from(std::ffi::OsStr::from_bytes(entry.file_name().to_bytes()));
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        // O_NOFOLLOW: a link by that name is not a directory of ours.
        let Ok(dir) = open_dir(parent, &name) else {
            continue;
        };
        let ours = rustix::fs::fstat(&dir).is_ok_and(|st| st.st_uid == me);
        if !ours || pid <= 0 || alive(pid) {
            continue;
        }
        if rustix::fs::flock(&dir, FlockOperation::NonBlockingLockExclusive).is_ok() {
            remove(parent, &name, &dir);
        }
    }
}

fn alive(pid: i32) -> bool {
    // Signal 0 only checks that the process exists; EPERM: it exists, as another user's.
    rustix::process::Pid::from_raw(pid).is_some_and(|p| {
        matches!(
            rustix::process::test_kill_process(p),
            Ok(()) | Err(rustix::io::Errno::PERM)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn created_private_removed_and_stale_ones_swept() {
        let parent = tempfile::tempdir().unwrap();
        // pid 0x7fff_fff0 does not exist: a stale directory from a killed run.
        let stale = parent.path().join(format!("{PREFIX}{}", 0x7fff_fff0));
        std::fs::create_dir(&stale).unwrap();
        std::fs::write(stale.join("hdd.0"), b"x").unwrap();
        // A link by a stale name is left alone, and what it points at is not touched.
        let target = parent.path().join("elsewhere");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("hdd.0"), b"x").unwrap();
        let link = parent.path().join(format!("{PREFIX}{}", 0x7fff_fff1));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let dir = TestDir::create(parent.path()).unwrap();
        assert!(!stale.exists());
        assert!(target.join("hdd.0").exists());
        assert!(link.symlink_metadata().is_ok());
        let mode = std::fs::metadata(dir.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        std::fs::write(dir.path().join("hdd.0"), b"x").unwrap();
        let path = dir.path().to_path_buf();
        drop(dir);
        assert!(!path.exists());
        assert!(TestDir::create(&parent.path().join("missing")).is_err());
    }

    #[test]
    fn a_locked_directory_is_not_stale() {
        let parent = tempfile::tempdir().unwrap();
        let name = OsString::from(format!("{PREFIX}{}", 0x7fff_fff2));
        let p = rustix::fs::open(parent.path(), OFlags::RDONLY, Mode::empty()).unwrap();
        rustix::fs::mkdirat(&p, &name, Mode::from_raw_mode(0o700)).unwrap();
        let held = open_dir(&p, &name).unwrap();
        rustix::fs::flock(&held, FlockOperation::LockExclusive).unwrap();
        // A live run in another pid namespace: no process by that pid here, but the lock.
        remove_stale(&p);
        assert!(parent.path().join(&name).exists());
        drop(held);
        remove_stale(&p);
        assert!(!parent.path().join(&name).exists());
    }

    #[test]
    fn a_directory_renamed_aside_is_emptied_and_its_replacement_kept() {
        let parent = tempfile::tempdir().unwrap();
        let dir = TestDir::create(parent.path()).unwrap();
        let fd = dir.fd();
        let aside = parent.path().join("aside");
        std::fs::rename(dir.path(), &aside).unwrap();
        std::fs::create_dir(dir.path()).unwrap();
        std::fs::write(dir.path().join("theirs"), b"x").unwrap();
        let f = rustix::fs::openat(
            &*fd,
            "hdd.0",
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
            Mode::from_raw_mode(0o600),
        )
        .unwrap();
        drop(f);
        assert!(
            aside.join("hdd.0").exists(),
            "the descriptor followed the rename"
        );
        let path = dir.path().to_path_buf();
        drop(dir);
        assert!(path.join("theirs").exists());
        assert!(!aside.join("hdd.0").exists());
    }
}
