//! Paths of files known by (device, inode), found among a process's open descriptors
//! (`/proc/PID/fd`): what the byte tracer knows of a file is its inode, and a path is what a
//! person reads. A file the process has already closed is not found here; it stays known by
//! its device and inode.

use crate::kernel::SysRoot;
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A file as (major, minor, inode).
pub type FileId = ((u32, u32), u64);

/// The paths of those of `wanted` that process `pid` has open now.
pub fn open_paths(root: &SysRoot, pid: u32, wanted: &HashSet<FileId>) -> HashMap<FileId, PathBuf> {
    open_files(root, pid, wanted)
        .into_iter()
        .map(|(id, (path, _))| (id, path))
        .collect()
}

/// The paths and sizes of those of `wanted` that process `pid` has open now.
pub fn open_files(
    root: &SysRoot,
    pid: u32,
    wanted: &HashSet<FileId>,
) -> HashMap<FileId, (PathBuf, u64)> {
    let mut found = HashMap::new();
    let dir = root.proc.join(pid.to_string()).join("fd");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let link = entry.path();
        // Follows the descriptor to the open file itself: no path lookup another user could
        // redirect, the kernel hands over the very inode.
        let Ok(meta) = std::fs::metadata(&link) else {
            continue;
        };
        let dev = meta.dev();
        let id = ((rustix::fs::major(dev), rustix::fs::minor(dev)), meta.ino());
        if wanted.contains(&id)
            && !found.contains_key(&id)
            && let Ok(path) = std::fs::read_link(&link)
        {
            found.insert(id, (path, meta.len()));
        }
    }
    found
}

/// Bytes the kernel keeps of a name (`NAME_LEN` of bpf/files.bpf.c, less its NUL): a longer
/// name arrives cut to this.
const KERNEL_NAME_MAX: usize = 55;

/// Whether `path` (a descriptor's link, perhaps ending in `" (deleted)"`) can name the file the
/// kernel knew by the last component `name`: the same component, or its first 55 bytes when
/// the kernel's copy was cut. An inode number reused by a new file never lends the new
/// file's path to the old one's counts.
pub fn names_match(path: &Path, name: &[u8]) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Some(last) = path.file_name() else {
        return false;
    };
    let last = last.as_bytes();
    let last = last.strip_suffix(b" (deleted)").unwrap_or(last);
    if name.len() >= KERNEL_NAME_MAX {
        last.starts_with(name)
    } else {
        last == name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_this_process_holds_open_is_found_by_its_inode() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let meta = file.as_file().metadata().unwrap();
        let id = (
            (rustix::fs::major(meta.dev()), rustix::fs::minor(meta.dev())),
            meta.ino(),
        );
        let other = ((0, 0), 1);
        let found = open_paths(
            &SysRoot::real(),
            std::process::id(),
            &[id, other].into_iter().collect(),
        );
        assert_eq!(found.get(&id), Some(&file.path().to_path_buf()));
        assert!(!found.contains_key(&other));
    }

    #[test]
    fn a_path_names_a_file_only_by_the_kernels_last_component() {
        assert!(names_match(Path::new("/tmp/a"), b"a"));
        assert!(names_match(Path::new("/tmp/a (deleted)"), b"a"));
        assert!(!names_match(Path::new("/tmp/b"), b"a"));
        assert!(!names_match(Path::new("/tmp/ab"), b"a"));
        assert!(!names_match(Path::new("/"), b"a"));
        let long = "n".repeat(80);
        assert!(names_match(
            &Path::new("/x").join(&long),
            &long.as_bytes()[..55]
        ));
        assert!(!names_match(Path::new("/x/nn"), &long.as_bytes()[..55]));
    }
}
