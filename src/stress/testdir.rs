//! The hdd workers' directory: `.tacho-stress.<pid>` inside the directory the user chose,
//! removed with everything in it when the run ends (normally, on error, or on a signal that
//! the run turns into a stop). One left by a killed run is removed by the next run, which can
//! tell from the pid in its name that its owner is gone.

use std::io;
use std::path::{Path, PathBuf};

const PREFIX: &str = ".tacho-stress.";

pub struct TestDir {
    path: PathBuf,
}

impl TestDir {
    pub fn create(parent: &Path) -> io::Result<TestDir> {
        remove_stale(parent);
        let path = parent.join(format!("{PREFIX}{}", std::process::id()));
        std::fs::create_dir(&path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot create the test directory {}: {e}", path.display()),
            )
        })?;
        Ok(TestDir { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Removes `.tacho-stress.<pid>` directories whose process no longer exists.
fn remove_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if pid > 0 && !alive(pid) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_removed_and_stale_ones_swept() {
        let parent = tempfile::tempdir().unwrap();
        // pid 0x7fff_fff0 does not exist: a stale directory from a killed run.
        let stale = parent.path().join(format!("{PREFIX}{}", 0x7fff_fff0));
        std::fs::create_dir(&stale).unwrap();
        std::fs::write(stale.join("hdd.0"), b"x").unwrap();
        let keep = parent.path().join("unrelated");
        std::fs::create_dir(&keep).unwrap();
        let dir = TestDir::create(parent.path()).unwrap();
        assert!(!stale.exists());
        assert!(keep.exists());
        std::fs::write(dir.path().join("hdd.0"), b"x").unwrap();
        let path = dir.path().to_path_buf();
        drop(dir);
        assert!(!path.exists());
        assert!(TestDir::create(&parent.path().join("missing")).is_err());
    }
}
