//! A systemd unit's (or any named) cgroup in the cgroup v2 tree: its path below the mount, its
//! id (the directory's inode number, what `bpf_get_current_cgroup_id` returns) and its depth,
//! so a tracer can follow every process below it.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::SysRoot;
use super::cgroup::find_cgroup2;

/// Directories looked at, at most, while looking for a unit (a host has a few thousand).
const MAX_DIRS: usize = 100_000;

/// A cgroup found by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitCgroup {
    /// Its path below the cgroup2 mount, as /proc/PID/cgroup's `0::` line gives it.
    pub path: String,
    /// The cgroup's id.
    pub id: u64,
    /// Its depth: 1 for a child of the root.
    pub level: u32,
}

/// Why a unit was not found, for a one-line error.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UnitError {
    /// No cgroup2 filesystem is mounted.
    #[error("no cgroup v2 hierarchy is mounted, where units are followed")]
    NoCgroup2,
    /// No cgroup of that name.
    #[error("no cgroup named {0} in the cgroup v2 tree ({1})")]
    NotFound(String, String),
}

/// The shallowest cgroup named `name` (`nginx.service`, `docker-1234.scope`) under `root`'s
/// cgroup2 mount.
pub fn find_unit(root: &SysRoot, name: &str) -> Result<UnitCgroup, UnitError> {
    let mount = find_cgroup2(root)
        .ok()
        .flatten()
        .ok_or(UnitError::NoCgroup2)?;
    let not_found = || UnitError::NotFound(name.to_string(), mount.display().to_string());
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(not_found());
    }
    // Breadth first, so the unit itself is found before anything of the same name below it.
    let mut queue = std::collections::VecDeque::from([(mount.clone(), 0u32)]);
    let mut seen = 0;
    while let Some((dir, level)) = queue.pop_front() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_DIRS {
                return Err(not_found());
            }
            // Cgroups are directories; symlinks are not followed.
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let path = entry.path();
            if entry.file_name() == name {
                let id = std::fs::symlink_metadata(&path)
                    .map_err(|_| not_found())?
                    .ino();
                return Ok(UnitCgroup {
                    path: below(&mount, &path),
                    id,
                    level: level + 1,
                });
            }
            queue.push_back((path, level + 1));
        }
    }
    Err(not_found())
}

fn below(mount: &Path, path: &Path) -> String {
    format!(
        "/{}",
        path.strip_prefix(mount).unwrap_or(path).to_string_lossy()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unit_is_found_by_name_with_its_depth_and_id() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::under(dir.path());
        crate::kernel::fixture::write(
            dir.path(),
            "proc/self/mountinfo",
            "30 1 0:26 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
        );
        let unit = dir
            .path()
            .join("sys/fs/cgroup/unified/system.slice/nginx.service");
        std::fs::create_dir_all(unit.join("worker")).unwrap();
        let found = find_unit(&root, "nginx.service").unwrap();
        assert_eq!(found.path, "/system.slice/nginx.service");
        assert_eq!(found.level, 2);
        assert_eq!(found.id, std::fs::metadata(&unit).unwrap().ino());
        assert!(matches!(
            find_unit(&root, "mysql.service"),
            Err(UnitError::NotFound(..))
        ));
        assert!(find_unit(&root, "../etc").is_err());
    }
}
