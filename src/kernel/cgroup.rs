//! cgroup v2 I/O per device (`io.stat`): which service drives which disk.
//!
//! Every cgroup's io.stat counts its whole subtree, so only the deepest cgroups that have one
//! are reported (a parent would count its children twice). io.stat exists only where the
//! `io` controller is enabled, which hosts with a hybrid v1/v2 layout (blkio on v1) do not
//! do: [`CgroupIoScan::unavailable`] then says why nothing is shown.

use std::path::{Path, PathBuf};

use super::mounts::read_mounts;
use super::{KernelError, Result, SysRoot, read_optional};

/// One cgroup's cumulative I/O on one device.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct CgroupDeviceIo {
    pub major: u32,
    pub minor: u32,
    pub rbytes: u64,
    pub wbytes: u64,
    pub rios: u64,
    pub wios: u64,
    pub dbytes: u64,
    pub dios: u64,
}

/// A cgroup and its io.stat lines.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CgroupIo {
    /// Path below the cgroup2 mount, e.g. `/system.slice/nginx.service`.
    pub path: String,
    pub devices: Vec<CgroupDeviceIo>,
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct CgroupIoScan {
    pub cgroups: Vec<CgroupIo>,
    /// Why there is no per-cgroup I/O, when there is none to show.
    pub unavailable: Option<String>,
}

/// Deepest cgroups below this many levels are not walked (systemd trees are a few deep).
const MAX_DEPTH: usize = 32;

/// Where cgroup2 is mounted, rebased into `root` (a fixture's `sys/fs/cgroup` when the
/// mount point is under /sys); `None` when no cgroup2 filesystem is mounted.
pub fn find_cgroup2(root: &SysRoot) -> Result<Option<PathBuf>> {
    let mounts = read_mounts(root)?;
    Ok(mounts.iter().find(|m| m.fs_type == "cgroup2").map(|m| {
        match m.mount_point.strip_prefix("/sys") {
            Ok(rest) => root.sys.join(rest),
            Err(_) => m.mount_point.clone(),
        }
    }))
}

/// Reads io.stat of the deepest cgroups under the cgroup2 mount `dir`.
pub fn read_cgroup_io(dir: &Path) -> Result<CgroupIoScan> {
    let controllers = read_optional(&dir.join("cgroup.controllers"))?.unwrap_or_default();
    if !controllers.split_whitespace().any(|c| c == "io") {
        return Ok(CgroupIoScan {
            cgroups: Vec::new(),
            unavailable: Some(format!(
                "the io controller is not enabled on cgroup v2 at {} (on this host it is \
                 bound to cgroup v1 blkio, or disabled)",
                dir.display()
            )),
        });
    }
    let mut found = Vec::new();
    walk(dir, "", 0, &mut found)?;
    Ok(CgroupIoScan {
        cgroups: found,
        unavailable: None,
    })
}

/// Depth-first; returns whether anything at or below `dir` had an io.stat.
fn walk(dir: &Path, rel: &str, depth: usize, out: &mut Vec<CgroupIo>) -> Result<bool> {
    let mut below = false;
    if depth < MAX_DEPTH {
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            // Removed while walking (a service stopped): nothing below it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(source) => {
                return Err(KernelError::Read {
                    path: dir.to_path_buf(),
                    source,
                });
            }
        };
        let mut children: Vec<_> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        children.sort();
        for child in children {
            below |= walk(&dir.join(&child), &format!("{rel}/{child}"), depth + 1, out)?;
        }
    }
    if below {
        return Ok(true);
    }
    let path = dir.join("io.stat");
    match read_optional(&path)? {
        None => Ok(false),
        Some(text) => {
            let devices = parse_io_stat(&text, &path)?;
            let rel = if rel.is_empty() { "/" } else { rel };
            out.push(CgroupIo {
                path: rel.to_string(),
                devices,
            });
            Ok(true)
        }
    }
}

/// Parses io.stat: `MAJ:MIN rbytes=N wbytes=N rios=N wios=N dbytes=N dios=N`, with other
/// `key=value` pairs (io.cost, io.latency statistics) ignored.
pub fn parse_io_stat(text: &str, path: &Path) -> Result<Vec<CgroupDeviceIo>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut words = line.split_whitespace();
        let Some(devno) = words.next() else { continue };
        let err =
            |reason: &str| KernelError::parse(path, Some(i + 1), format!("{reason}: {line:?}"));
        let (major, minor) =
            super::mounts::parse_devno(devno).ok_or_else(|| err("expected MAJOR:MINOR first"))?;
        let mut d = CgroupDeviceIo {
            major,
            minor,
            ..CgroupDeviceIo::default()
        };
        for word in words {
            let (key, value) = word
                .split_once('=')
                .ok_or_else(|| err("expected key=value"))?;
            let slot = match key {
                "rbytes" => &mut d.rbytes,
                "wbytes" => &mut d.wbytes,
                "rios" => &mut d.rios,
                "wios" => &mut d.wios,
                "dbytes" => &mut d.dbytes,
                "dios" => &mut d.dios,
                _ => continue,
            };
            *slot = value
                .parse()
                .map_err(|_| err("a counter is not a number"))?;
        }
        out.push(d);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::fixture::{mkdir, write};
    use proptest::prelude::*;

    /// io.stat as the kernel (6.x) writes it, with iocost fields on one line.
    const IO_STAT: &str = "254:0 rbytes=1048576 wbytes=4096000 rios=256 wios=1000 dbytes=0 dios=0\n\
                           7:0 rbytes=0 wbytes=8192 rios=0 wios=2 dbytes=0 dios=0 cost.vrate=100.00 cost.usage=1\n";

    #[test]
    fn parses_io_stat() {
        let d = parse_io_stat(IO_STAT, Path::new("/io.stat")).unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!((d[0].major, d[0].minor, d[0].wios), (254, 0, 1000));
        assert_eq!(d[1].wbytes, 8192);
        for bad in ["x rbytes=1", "8:0 rbytes", "8:0 rbytes=x"] {
            let err = parse_io_stat(&format!("8:1 rbytes=1\n{bad}\n"), Path::new("/cg/io.stat"));
            assert!(err.unwrap_err().to_string().contains("/cg/io.stat line 2"));
        }
    }

    #[test]
    fn reports_only_the_deepest_cgroups() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        write(
            t,
            "sys/fs/cgroup/cgroup.controllers",
            "cpuset cpu io memory pids\n",
        );
        write(t, "sys/fs/cgroup/system.slice/io.stat", IO_STAT);
        write(
            t,
            "sys/fs/cgroup/system.slice/nginx.service/io.stat",
            IO_STAT,
        );
        write(t, "sys/fs/cgroup/system.slice/cron.service/io.stat", "");
        write(t, "sys/fs/cgroup/user.slice/io.stat", IO_STAT);
        mkdir(t, "sys/fs/cgroup/init.scope");
        write(
            t,
            "proc/self/mountinfo",
            "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw\n",
        );
        let root = SysRoot::under(t);
        let mount = find_cgroup2(&root).unwrap().unwrap();
        assert_eq!(mount, root.sys.join("fs/cgroup"));
        let scan = read_cgroup_io(&mount).unwrap();
        let paths: Vec<&str> = scan.cgroups.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/system.slice/cron.service",
                "/system.slice/nginx.service",
                "/user.slice"
            ]
        );
        assert!(scan.unavailable.is_none());
    }

    #[test]
    fn says_why_when_the_io_controller_is_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "cgroup.controllers", "hugetlb\n");
        let scan = read_cgroup_io(dir.path()).unwrap();
        assert!(scan.cgroups.is_empty());
        assert!(scan.unavailable.unwrap().contains("io controller"));
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,200}") {
            let _ = parse_io_stat(&s, Path::new("/x"));
        }
    }
}
