//! A private cgroup v1 directory for a test, removed on drop (after the processes in it are
//! gone: declare it before them).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::skip;

/// The directory `name` under a v1 hierarchy's mount (`blkio`, `memory`, `systemd`).
pub struct Cgroup(pub PathBuf);

impl Cgroup {
    /// Returns None (after saying why) where this kernel has no such hierarchy, or without
    /// root, which making a cgroup needs.
    pub fn new(controller: &str, name: &str) -> Option<Cgroup> {
        let mount = Path::new("/sys/fs/cgroup").join(controller);
        if !mount.join("cgroup.procs").exists() {
            skip(&format!("{name}: no cgroup v1 {controller} hierarchy"));
            return None;
        }
        if !super::is_root() {
            skip(&format!("{name}: making a cgroup needs root"));
            return None;
        }
        let dir = mount.join(name);
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("cannot create {dir:?}: {e}"));
        Some(Cgroup(dir))
    }

    /// Writes a control file of the cgroup.
    pub fn set(&self, file: &str, value: &str) {
        std::fs::write(self.0.join(file), value)
            .unwrap_or_else(|e| panic!("cannot write {value:?} to {file}: {e}"));
    }

    /// `sh -c` that moves itself into this cgroup, then execs `cmd`.
    pub fn command(&self, cmd: &[&str]) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(format!(
                "echo $$ > '{}/cgroup.procs' && exec \"$@\"",
                self.0.display()
            ))
            .arg("sh")
            .args(cmd);
        c
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        for _ in 0..100 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
