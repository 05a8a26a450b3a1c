//! A cgroup (v2) holding the runs of one `tacho time`, where tacho may make one: a process
//! that leaves its run's process group (`setsid`, a daemon's double fork) stays in the cgroup,
//! and `cgroup.kill` ends it with the run. Needs root and a mounted cgroup2 hierarchy (also
//! the `unified` one of hybrid systems, and kernel 5.14 for `cgroup.kill`); without them the
//! process group alone is used.
//!
//! Each run's process joins the cgroup itself, between fork and exec, by writing to a
//! `cgroup.procs` descriptor opened here beforehand, so nothing it starts is ever outside.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const PREFIX: &str = "tacho-time.";

pub struct RunCgroup {
    dir: PathBuf,
    procs: File,
}

impl RunCgroup {
    /// `None` when tacho may not or cannot make one (see the module docs).
    pub fn create() -> Option<RunCgroup> {
        if !rustix::process::geteuid().is_root() {
            return None;
        }
        let parent = own_cgroup_dir(
            &std::fs::read_to_string("/proc/self/mountinfo").ok()?,
            &std::fs::read_to_string("/proc/self/cgroup").ok()?,
        )?;
        remove_stale(&parent);
        let dir = parent.join(format!("{PREFIX}{}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let usable = dir.join("cgroup.kill").exists();
        let procs = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"));
        match procs {
            Ok(procs) if usable => Some(RunCgroup { dir, procs }),
            _ => {
                let _ = std::fs::remove_dir(&dir);
                None
            }
        }
    }

    /// The descriptor a new run writes "0" to, to join the cgroup.
    pub fn procs_fd(&self) -> RawFd {
        self.procs.as_raw_fd()
    }

    /// Whether any process is still in the cgroup.
    pub fn populated(&self) -> bool {
        std::fs::read_to_string(self.dir.join("cgroup.events"))
            .is_ok_and(|t| t.lines().any(|l| l == "populated 1"))
    }

    /// SIGKILLs everything in the cgroup and waits (briefly) until it is empty.
    pub fn kill(&self) {
        let killed = std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.kill"))
            .and_then(|mut f| f.write_all(b"1"));
        let until = Instant::now() + Duration::from_secs(1);
        while killed.is_ok() && self.populated() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The directory of this process's own cgroup in the cgroup2 hierarchy.
fn own_cgroup_dir(mountinfo: &str, cgroup: &str) -> Option<PathBuf> {
    // mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - FSTYPE SOURCE SUPER".
    let mount = mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let fields: Vec<&str> = left.split(' ').collect();
        // Only a mount of the hierarchy's root, so paths from /proc/self/cgroup apply.
        let root_mount = right.starts_with("cgroup2 ") && fields.get(3) == Some(&"/");
        fields.get(4).copied().filter(|_| root_mount)
    })?;
    // A mount point with escaped characters (\040 for a space) is not worth decoding.
    if mount.contains('\\') {
        return None;
    }
    let own = cgroup.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some(Path::new(mount).join(own.trim_start_matches('/')))
}

/// Removes the empty cgroups of `tacho time` runs that were killed before they could.
fn remove_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|p| p.parse::<i32>().ok());
        // SAFETY: signal 0 only asks whether the process exists.
        let gone = |p: i32| unsafe { libc::kill(p, 0) } != 0;
        // rmdir refuses a cgroup that still holds processes.
        if pid.is_some_and(|p| p > 0 && gone(p)) {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// Joins the cgroup behind `procs_fd`; run in the child between fork and exec, so only an
/// async-signal-safe call. A failure leaves the run outside, still ended with its group.
pub fn join(procs_fd: RawFd) {
    // SAFETY: write(2) on a descriptor the parent opened, from a static buffer.
    unsafe { libc::write(procs_fd, b"0".as_ptr().cast(), 1) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_cgroup2_mount_and_own_path() {
        let hybrid = "30 25 0:26 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
                      41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        assert_eq!(
            own_cgroup_dir(hybrid, "4:memory:/x\n0::/\n"),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let pure = "29 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(
            own_cgroup_dir(pure, "0::/user.slice/session-3.scope\n"),
            Some(PathBuf::from("/sys/fs/cgroup/user.slice/session-3.scope"))
        );
        // v1 only, or a bind mount of a sub-tree: no usable hierarchy.
        assert_eq!(
            own_cgroup_dir("30 25 0:26 / /c rw - cgroup cgroup rw\n", "0::/\n"),
            None
        );
        let sub = "29 23 0:26 /x /c rw - cgroup2 cgroup2 rw\n";
        assert_eq!(own_cgroup_dir(sub, "0::/x\n"), None);
    }
}
