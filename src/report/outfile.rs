//! Every file tacho writes by name goes through here, because tacho runs as root in directories
//! other users may write (a 0777 scratch directory, a service's own directory), where anyone
//! can plant a symbolic link at the output's name, pointing at a file root owns.
//!
//! The directory is opened once and everything after is relative to that descriptor. Contents
//! go to a new temporary file created with `O_CREAT|O_EXCL|O_NOFOLLOW` (so never an existing
//! file or a link), are flushed to disk, and the temporary file is renamed over the final
//! name, which readers (node_exporter's collector, a browser) therefore see whole or not at
//! all. A link or anything but a regular file at the final name is refused, before the
//! temporary file exists and again just before the rename; a name that was empty is taken with
//! `RENAME_NOREPLACE`, so something planted in between is refused too. A failure leaves no
//! temporary file behind.
//!
//! The directory's own path is followed as given (`/var/lib/node_exporter/textfile` is often a
//! link): it is the caller's choice, while the final name is the part strangers can reach.

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Reports and textfiles are read by other users (node_exporter runs as its own user).
const NEW_FILE_MODE: u32 = 0o644;

/// What may already be at the final name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// A regular file there is replaced (reports, exports, textfiles).
    Replace,
    /// Anything there is refused: the output must be a new file (`snapshot -o`, `files -o`).
    Refuse,
}

/// Why an output file was not written; each message names the file and the fix.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// A symbolic link sits at the name.
    #[error(
        "{} is a symbolic link; tacho never writes through a link or over one at an output's \
         name (another user may have planted it): remove it or choose another file name",
        .0.display()
    )]
    Symlink(PathBuf),
    /// Something other than a regular file sits at the name (the `&str` says what, e.g. "a
    /// directory").
    #[error("{path} is {kind}, not a regular file; choose a file name", path = .0.display(), kind = .1)]
    NotRegular(PathBuf, &'static str),
    /// A file exists at a name that must be new.
    #[error("{} already exists; choose a new file name (it is never overwritten)", .0.display())]
    Exists(PathBuf),
    /// Creating, writing or renaming the file failed.
    #[error("{path}: {err}", path = .0.display(), err = .1)]
    Io(PathBuf, io::Error),
}

/// An output being written: a temporary file beside the final name until [`commit`].
///
/// [`commit`]: OutFile::commit
pub struct OutFile {
    dir: OwnedFd,
    name: OsString,
    path: PathBuf,
    existing: Existing,
    /// The temporary file's name; `None` once renamed into place.
    tmp: Option<OsString>,
    file: File,
    mode: u32,
}

impl OutFile {
    /// Checks the final name and creates the temporary file, so a wrong path fails before any
    /// work is done.
    pub fn create(path: &Path, existing: Existing) -> Result<OutFile, OutputError> {
        let (dir, name) = open_parent(path)?;
        let mode = check_target(&dir, &name, path, existing)?.unwrap_or(NEW_FILE_MODE);
        let io_err = |e: io::Error| OutputError::Io(path.to_path_buf(), e);
        let (tmp, fd) = create_temporary(&dir, &name).map_err(io_err)?;
        Ok(OutFile {
            dir,
            name,
            path: path.to_path_buf(),
            existing,
            tmp: Some(tmp),
            file: File::from(fd),
            mode,
        })
    }

    /// The final name, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes the contents to disk and renames them into place.
    pub fn commit(mut self) -> Result<(), OutputError> {
        let io_err = |e: io::Error| OutputError::Io(self.path.clone(), e);
        self.file.sync_all().map_err(io_err)?;
        rustix::fs::fchmod(&self.file, Mode::from_raw_mode(self.mode))
            .map_err(|e| io_err(e.into()))?;
        let replace = check_target(&self.dir, &self.name, &self.path, self.existing)?.is_some();
        let tmp = self.tmp.as_deref().expect("renamed only here");
        let renamed = if replace {
            rustix::fs::renameat(&self.dir, tmp, &self.dir, &self.name)
        } else {
            no_replace_rename(&self.dir, tmp, &self.name)
        };
        match renamed {
            Ok(()) => {}
            Err(rustix::io::Errno::EXIST) => {
                // Planted after the check: say what is there now (the temporary file goes).
                check_target(&self.dir, &self.name, &self.path, Existing::Refuse)?;
                return Err(OutputError::Exists(self.path.clone()));
            }
            Err(e) => return Err(io_err(e.into())),
        }
        self.tmp = None;
        // The rename itself is durable only once the directory is flushed; a failure here
        // leaves the complete file in place, so it is not reported.
        let _ = rustix::fs::fsync(&self.dir);
        Ok(())
    }
}

impl Write for OutFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for OutFile {
    fn drop(&mut self) {
        if let Some(tmp) = &self.tmp {
            let _ = rustix::fs::unlinkat(&self.dir, tmp.as_os_str(), AtFlags::empty());
        }
    }
}

/// Writes `text` to `path` through a temporary file and a rename (see the module docs).
pub fn write_atomically(path: &Path, text: &[u8], existing: Existing) -> Result<(), OutputError> {
    let mut out = OutFile::create(path, existing)?;
    out.write_all(text)
        .map_err(|e| OutputError::Io(path.to_path_buf(), e))?;
    out.commit()
}

/// A file [`create_new_streaming`] made: removed when dropped unless [`NewFile::keep`] was
/// called, so output that failed halfway (a full filesystem) is not left for a reader to take
/// as whole. The name is removed only while it still names the file tacho made.
#[derive(Debug)]
pub struct NewFile {
    dir: OwnedFd,
    name: OsString,
    made: (u64, u64),
    keep: bool,
}

impl NewFile {
    /// The output is complete: leave it.
    pub fn keep(mut self) {
        self.keep = true;
    }
}

impl Drop for NewFile {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        let named = rustix::fs::statat(&self.dir, self.name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW);
        if named.is_ok_and(|st| (st.st_dev, st.st_ino) == self.made) {
            let _ = rustix::fs::unlinkat(&self.dir, self.name.as_os_str(), AtFlags::empty());
        }
    }
}

/// Creates a new file at `path` for output written as it arrives (`files -o`), where a rename
/// at the end would leave readers nothing until then. `O_CREAT|O_EXCL|O_NOFOLLOW` makes the
/// kernel refuse any existing name, a link included, so the file is always a new one of ours,
/// and the descriptor is kept: the name is never opened again (but to remove it, see
/// [`NewFile`]).
pub fn create_new_streaming(path: &Path) -> Result<(File, NewFile), OutputError> {
    let (dir, name) = open_parent(path)?;
    check_target(&dir, &name, path, Existing::Refuse)?;
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(&dir, &name, flags, Mode::from_raw_mode(NEW_FILE_MODE)) {
        Ok(fd) => {
            let st = rustix::fs::fstat(&fd).map_err(|e| OutputError::Io(path.into(), e.into()))?;
            let made = NewFile {
                dir,
                name,
                made: (st.st_dev, st.st_ino),
                keep: false,
            };
            Ok((File::from(fd), made))
        }
        Err(rustix::io::Errno::EXIST) => {
            check_target(&dir, &name, path, Existing::Refuse)?;
            Err(OutputError::Exists(path.to_path_buf()))
        }
        Err(e) => Err(OutputError::Io(path.to_path_buf(), e.into())),
    }
}

/// Checks the final name without writing anything, for options checked before a long run.
pub fn check(path: &Path, existing: Existing) -> Result<(), OutputError> {
    let (dir, name) = open_parent(path)?;
    check_target(&dir, &name, path, existing).map(drop)
}

/// The directory (opened) and the file name of `path`.
fn open_parent(path: &Path) -> Result<(OwnedFd, OsString), OutputError> {
    let bytes = path.as_os_str().as_bytes();
    let name = match path.file_name() {
        Some(n) if !bytes.ends_with(b"/") => n.to_os_string(),
        _ => return Err(OutputError::NotRegular(path.to_path_buf(), "a directory")),
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(rustix::fs::CWD, dir, flags, Mode::empty())
        .map_err(|e| OutputError::Io(dir.to_path_buf(), e.into()))?;
    Ok((fd, name))
}

/// What is at `name` now: nothing (`None`), or a regular file that may be replaced (`Some`
/// with the mode to give the new one); anything else is refused.
fn check_target(
    dir: &OwnedFd,
    name: &OsStr,
    path: &Path,
    existing: Existing,
) -> Result<Option<u32>, OutputError> {
    let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(OutputError::Io(path.to_path_buf(), e.into())),
    };
    let path = path.to_path_buf();
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Symlink => Err(OutputError::Symlink(path)),
        FileType::RegularFile if existing == Existing::Replace => {
            // Keep the owner's chosen permissions (a private report stays private); a file
            // someone else owns gets the default, never their choice.
            let own = st.st_uid == rustix::process::geteuid().as_raw();
            Ok(Some(if own {
                st.st_mode & 0o777
            } else {
                NEW_FILE_MODE
            }))
        }
        FileType::RegularFile => Err(OutputError::Exists(path)),
        FileType::Directory => Err(OutputError::NotRegular(path, "a directory")),
        FileType::BlockDevice => Err(OutputError::NotRegular(path, "a block device")),
        FileType::CharacterDevice => Err(OutputError::NotRegular(path, "a character device")),
        FileType::Fifo => Err(OutputError::NotRegular(path, "a FIFO")),
        FileType::Socket => Err(OutputError::NotRegular(path, "a socket")),
        FileType::Unknown => Err(OutputError::NotRegular(path, "of an unknown type")),
    }
}

/// A new, private (0600 until committed) file beside `name`. Its name does not end in `.prom`:
/// node_exporter's collector must not read it half-written.
fn create_temporary(dir: &OwnedFd, name: &OsStr) -> io::Result<(OsString, OwnedFd)> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut last = None;
    for _ in 0..16 {
        let mut tmp = OsString::from(".tacho-");
        // A long name is cut so the temporary one stays within NAME_MAX.
        let keep = name.as_bytes().len().min(200);
        tmp.push(OsStr::from_bytes(&name.as_bytes()[..keep]));
        tmp.push(format!(".{:08x}.tmp", fastrand::u32(..)));
        match rustix::fs::openat(dir, &tmp, flags, Mode::from_raw_mode(0o600)) {
            Ok(fd) => return Ok((tmp, fd)),
            Err(rustix::io::Errno::EXIST) => last = Some(rustix::io::Errno::EXIST),
            Err(e) => return Err(e.into()),
        }
    }
    Err(last.unwrap_or(rustix::io::Errno::EXIST).into())
}

/// Renames `from` to `to` unless `to` exists. Filesystems without `RENAME_NOREPLACE` get a
/// plain rename, which still replaces a planted link rather than following it.
fn no_replace_rename(dir: &OwnedFd, from: &OsStr, to: &OsStr) -> rustix::io::Result<()> {
    match rustix::fs::renameat_with(dir, from, dir, to, RenameFlags::NOREPLACE) {
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
            rustix::fs::renameat(dir, from, dir, to)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn entries(dir: &Path) -> usize {
        std::fs::read_dir(dir).unwrap().count()
    }

    #[test]
    fn replaces_a_regular_file_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tacho.prom");
        write_atomically(&path, b"a 1\n", Existing::Replace).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_atomically(&path, b"a 2\n", Existing::Replace).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a 2\n");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the owner's permissions are kept");
        assert_eq!(entries(dir.path()), 1);
    }

    #[test]
    fn refuses_links_directories_and_existing_files_leaving_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"secret").unwrap();
        let link = dir.path().join("out.json");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        for existing in [Existing::Replace, Existing::Refuse] {
            let err = write_atomically(&link, b"x", existing).unwrap_err();
            assert!(matches!(err, OutputError::Symlink(_)), "{err}");
        }
        assert!(matches!(
            create_new_streaming(&link).unwrap_err(),
            OutputError::Symlink(_)
        ));
        let err = write_atomically(dir.path(), b"x", Existing::Replace).unwrap_err();
        assert!(matches!(err, OutputError::NotRegular(..)), "{err}");
        let err = write_atomically(&victim, b"x", Existing::Refuse).unwrap_err();
        assert!(matches!(err, OutputError::Exists(_)), "{err}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"secret");
        assert_eq!(entries(dir.path()), 2);
    }

    #[test]
    fn a_link_planted_before_commit_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"secret").unwrap();
        let path = dir.path().join("report.html");
        let mut out = OutFile::create(&path, Existing::Replace).unwrap();
        out.write_all(b"<html>").unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        assert!(matches!(out.commit(), Err(OutputError::Symlink(_))));
        assert_eq!(std::fs::read(&victim).unwrap(), b"secret");
        assert_eq!(entries(dir.path()), 2, "the temporary file is gone");
    }

    #[test]
    fn dropped_without_commit_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let out = OutFile::create(&dir.path().join("a.csv"), Existing::Replace).unwrap();
        drop(out);
        assert_eq!(entries(dir.path()), 0);
    }
}
