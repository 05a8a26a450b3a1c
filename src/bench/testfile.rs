//! The temporary test file tacho creates in a directory target: sized only when it fits with
//! 5% of the filesystem left free, removed on drop (success, error, signal), and found and
//! removed by the next run when a killed run left it behind.

use super::result::Warning;
use crate::units::format_size;
use anyhow::{Context, Result, bail};
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

/// A test file never leaves its filesystem with less than this share free.
const MIN_FREE_FRACTION: f64 = 0.05;
const TEST_FILE_PREFIX: &str = ".tacho-bench.";

/// A test file tacho created; removed when dropped (success, error, or signal).
pub struct TestFile {
    pub path: PathBuf,
}

impl TestFile {
    pub(super) fn create(dir: &Path, size: u64) -> Result<TestFile> {
        free_space_for_test(dir, size)?;
        let name = format!(
            "{TEST_FILE_PREFIX}{}.{:08x}.tmp",
            std::process::id(),
            fastrand::u32(..)
        );
        let path = dir.join(name);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::EROFS) => anyhow::anyhow!(
                    "{} is on a read-only filesystem; choose a writable directory",
                    dir.display()
                ),
                Some(libc::EACCES | libc::EPERM) => anyhow::anyhow!(
                    "no permission to create a test file in {}; choose a directory you can \
                     write to",
                    dir.display()
                ),
                _ => anyhow::anyhow!("cannot create a test file in {}: {e}", dir.display()),
            })?;
        let guard = TestFile { path };
        // Reserve the space up front so a full disk fails now, not halfway through a test.
        // SAFETY: fallocate on a descriptor we own.
        let rc = unsafe {
            use std::os::fd::AsRawFd;
            libc::fallocate(file.as_raw_fd(), 0, 0, size as libc::off_t)
        };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            // Filesystems without fallocate (some network ones) get the space as it is written.
            if e.raw_os_error() != Some(libc::EOPNOTSUPP) {
                bail!(
                    "cannot reserve {} in {}: {e}",
                    format_size(size),
                    dir.display()
                );
            }
        }
        file.set_len(size)
            .with_context(|| format!("cannot size the test file in {}", dir.display()))?;
        Ok(guard)
    }
}

impl Drop for TestFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Removes test files left by tacho runs that were killed (their pid is gone).
pub(super) fn remove_stale_files(dir: &Path) -> Vec<Warning> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(stale_pid) else {
            continue;
        };
        if pid_alive(pid) {
            continue;
        }
        if std::fs::remove_file(entry.path()).is_ok() {
            notes.push(Warning {
                code: "removed-stale-file",
                message: format!(
                    "removed {}, left behind by a tacho run (pid {pid}) that was killed",
                    entry.path().display()
                ),
            });
        }
    }
    notes
}

/// The pid in a test file name `.tacho-bench.<pid>.<hex>.tmp`, if it is one.
fn stale_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(TEST_FILE_PREFIX)?.strip_suffix(".tmp")?;
    let (pid, nonce) = rest.split_once('.')?;
    (nonce.len() == 8 && nonce.chars().all(|c| c.is_ascii_hexdigit())).then_some(())?;
    pid.parse().ok()
}

fn pid_alive(pid: u32) -> bool {
    // A pid reused by another program does not keep a stale file alive.
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|comm| comm.trim() == "tacho")
}

/// Checks that a test file of `size` bytes fits and leaves 5% of the filesystem free.
fn free_space_for_test(dir: &Path, size: u64) -> Result<u64> {
    let (avail, total) = statvfs(dir)?;
    let reserve = (total as f64 * MIN_FREE_FRACTION) as u64;
    if avail.saturating_sub(size) < reserve {
        bail!(
            "not enough free space in {} for a {} test file: {} free of {}, and tacho leaves at \
             least 5% free; use a smaller --size or another directory",
            dir.display(),
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

fn statvfs(dir: &Path) -> Result<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .context("target path contains a NUL byte")?;
    // SAFETY: c is a valid C string; statvfs fills the zeroed struct we own.
    let st = unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut st) != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("cannot read free space of {}", dir.display()));
        }
        st
    };
    let frsize = st.f_frsize;
    Ok((st.f_bavail * frsize, st.f_blocks * frsize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_names() {
        assert_eq!(stale_pid(".tacho-bench.1234.0badf00d.tmp"), Some(1234));
        assert_eq!(stale_pid(".tacho-bench.1234.tmp"), None);
        assert_eq!(stale_pid(".tacho-bench.x.0badf00d.tmp"), None);
        assert_eq!(stale_pid("data.tmp"), None);
        assert_eq!(stale_pid(".tacho-bench.1.0badf00z.tmp"), None);
    }

    #[test]
    fn stale_files_of_dead_runs_are_removed_and_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        // pid 0x7fffffff cannot exist (above pid_max's ceiling of 2^22).
        let dead = dir.path().join(".tacho-bench.2147483647.0000abcd.tmp");
        let foreign = dir.path().join("mine.tmp");
        std::fs::write(&dead, b"x").unwrap();
        std::fs::write(&foreign, b"x").unwrap();
        let notes = remove_stale_files(dir.path());
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].code, "removed-stale-file");
        assert!(!dead.exists());
        assert!(foreign.exists());
    }
}
