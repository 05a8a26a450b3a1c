//! From an event to a path: directory handles through `open_by_handle_at`, descriptors through
//! `/proc/self/fd`.
//!
//! A path is resolved when tacho reads the event, not when it happened: a file deleted in
//! between still shows its name (the directory's handle outlives it), and one whose directory
//! is gone shows `(deleted directory)/name`. Directory paths are cached: across reads when
//! tacho sees every directory move and delete (the cache is dropped on each), otherwise for one
//! read of the queue only, so a renamed directory is never shown under its old name for long.

use super::fanotify::Fid;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What an event's directory is shown as when its handle no longer opens.
pub const DELETED_DIR: &str = "(deleted directory)";

/// Maps filesystem ids to an open directory on that filesystem (the `mount_fd` that
/// `open_by_handle_at` needs), and caches directory paths for one batch of events.
pub struct Resolver {
    mounts: HashMap<[u8; 8], OwnedFd>,
    cache: HashMap<(Vec<u8>, [u8; 8], i32), Option<PathBuf>>,
    handle_buf: Vec<u32>,
    /// Whether the cache outlives a batch (see [`Resolver::keep_across_batches`]).
    persistent: bool,
}

/// Directory paths cached before the cache is emptied (a bound on memory, not a policy).
const MAX_CACHED: usize = 65_536;

impl Resolver {
    /// A resolver with no filesystem known yet and an empty cache.
    pub fn new() -> Resolver {
        Resolver {
            mounts: HashMap::new(),
            cache: HashMap::new(),
            handle_buf: Vec::new(),
            persistent: false,
        }
    }

    /// Remembers `mount_point` as the way into the filesystem it holds; the first mount of a
    /// filesystem wins (mounts are listed in mount order, so later bind mounts of a
    /// subdirectory do not shorten the paths shown).
    pub fn add_mount(&mut self, mount_point: &Path) -> io::Result<()> {
        let dir = std::fs::File::open(mount_point)?;
        let fsid = fsid_of(&dir)?;
        self.mounts.entry(fsid).or_insert_with(|| dir.into());
        Ok(())
    }

    /// Keeps directory paths across batches; only for groups that report every directory
    /// move and delete, which must then call [`Resolver::invalidate`].
    pub fn keep_across_batches(&mut self) {
        self.persistent = true;
    }

    /// Called before each batch of events.
    pub fn new_batch(&mut self) {
        if !self.persistent || self.cache.len() > MAX_CACHED {
            self.cache.clear();
        }
    }

    /// A directory moved or was deleted: any cached path may be wrong now.
    pub fn invalidate(&mut self) {
        self.cache.clear();
    }

    /// The path of a DFID_NAME event: the directory's path joined with the name (`.` means
    /// the directory itself).
    pub fn path_of_dir_entry(&mut self, dir: &Fid<'_>, name: Option<&[u8]>) -> PathBuf {
        let key = (dir.handle.to_vec(), dir.fsid, dir.handle_type);
        let dir_path = match self.cache.get(&key) {
            Some(cached) => cached.clone(),
            None => {
                let resolved = self.open_dir(dir).ok();
                self.cache.insert(key, resolved.clone());
                resolved
            }
        };
        let dir_path = dir_path.unwrap_or_else(|| PathBuf::from(DELETED_DIR));
        match name {
            None | Some(b".") | Some(b"") => dir_path,
            Some(name) => dir_path.join(OsStr::from_bytes(name)),
        }
    }

    fn open_dir(&mut self, dir: &Fid<'_>) -> io::Result<PathBuf> {
        let mount = self
            .mounts
            .get(&dir.fsid)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        // struct file_handle: handle_bytes (u32), handle_type (i32), then the handle; built in
        // a u32 buffer so it is aligned as the kernel expects.
        let words = 2 + dir.handle.len().div_ceil(4);
        self.handle_buf.clear();
        self.handle_buf.resize(words, 0);
        self.handle_buf[0] = dir.handle.len() as u32;
        self.handle_buf[1] = dir.handle_type as u32;
        for (i, byte) in dir.handle.iter().enumerate() {
            let word = &mut self.handle_buf[2 + i / 4];
            let mut bytes = word.to_ne_bytes();
            bytes[i % 4] = *byte;
            *word = u32::from_ne_bytes(bytes);
        }
        // SAFETY: the buffer holds a complete struct file_handle whose handle_bytes matches the
        // bytes that follow; the kernel only reads it. O_PATH opens nothing for I/O and so
        // causes no fanotify event of its own.
        let fd = unsafe {
            libc::open_by_handle_at(
                mount.as_raw_fd(),
                self.handle_buf.as_mut_ptr().cast(),
                libc::O_PATH | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new descriptor from the kernel, owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        path_of_fd(&fd)
    }
}

impl Default for Resolver {
    fn default() -> Self {
        Resolver::new()
    }
}

/// The path an open descriptor refers to, as /proc/self/fd shows it.
pub fn path_of_fd(fd: &OwnedFd) -> io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// The filesystem id (statfs f_fsid) of an open file, as fanotify reports it in events.
fn fsid_of(file: &std::fs::File) -> io::Result<[u8; 8]> {
    // f_fsid is two ints, laid out exactly as fanotify's __kernel_fsid_t; rustix's statvfs
    // holds them as one u64, the first in the low half.
    let fsid = rustix::fs::fstatvfs(file)?.f_fsid;
    let (a, b) = (fsid as u32, (fsid >> 32) as u32);
    let mut bytes = [0u8; 8];
    bytes[..4].copy_from_slice(&a.to_ne_bytes());
    bytes[4..].copy_from_slice(&b.to_ne_bytes());
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_filesystems_and_dead_handles_show_as_deleted_directories() {
        let mut r = Resolver::new();
        let fid = Fid {
            fsid: [0xee; 8],
            handle_type: 1,
            handle: &[0; 8],
        };
        assert_eq!(
            r.path_of_dir_entry(&fid, Some(b"f.txt")),
            Path::new(DELETED_DIR).join("f.txt")
        );
        assert_eq!(
            r.path_of_dir_entry(&fid, Some(b".")),
            Path::new(DELETED_DIR)
        );
    }

    #[test]
    fn descriptors_resolve_through_proc() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x");
        std::fs::write(&file, b"1").unwrap();
        let fd: OwnedFd = std::fs::File::open(&file).unwrap().into();
        assert_eq!(
            path_of_fd(&fd).unwrap(),
            std::fs::canonicalize(&file).unwrap()
        );
    }

    #[test]
    fn mounts_are_keyed_by_fsid() {
        let mut r = Resolver::new();
        r.add_mount(Path::new("/")).unwrap();
        r.add_mount(Path::new("/")).unwrap();
        assert_eq!(r.mounts.len(), 1);
    }
}
