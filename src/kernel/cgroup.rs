//! cgroup v2 I/O per device (`io.stat`): which service drives which disk.
//!
//! Every cgroup's io.stat counts its whole subtree, so only the deepest cgroups that have one
//! are reported (a parent would count its children twice). io.stat exists only where the
//! `io` controller is enabled, which hosts with a hybrid v1/v2 layout (blkio on v1) do not
//! do: [`CgroupIoScan::unavailable`] then says why nothing is shown.
//!
//! On such hosts cgroup v1 `blkio.throttle.io_service_bytes` counts each cgroup's own bytes
//! per device ([`find_blkio_v1`], [`read_blkio_v1`]). Since Linux 5.x it counts only on
//! devices that have a throttle rule in some cgroup; elsewhere it stays at zero.

use std::path::{Path, PathBuf};

use super::mounts::read_mounts;
use super::{KernelError, Result, SysRoot, read_optional};

/// One cgroup's cumulative I/O on one device.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct CgroupDeviceIo {
    /// Major number of the device (the `MAJ` of `MAJ:MIN`).
    pub major: u32,
    /// Minor number of the device.
    pub minor: u32,
    /// Bytes read since the cgroup was created.
    pub rbytes: u64,
    /// Bytes written since the cgroup was created.
    pub wbytes: u64,
    /// Read requests completed.
    pub rios: u64,
    /// Write requests completed.
    pub wios: u64,
    /// Bytes discarded (0 on kernels and devices without discard accounting).
    pub dbytes: u64,
    /// Discard requests completed.
    pub dios: u64,
}

/// A cgroup and its io.stat lines.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CgroupIo {
    /// Path below the cgroup2 mount, e.g. `/system.slice/nginx.service`.
    pub path: String,
    /// One entry per device in its io.stat, in file order.
    pub devices: Vec<CgroupDeviceIo>,
}

/// The result of walking the cgroup2 tree for io.stat files.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct CgroupIoScan {
    /// The deepest cgroups that have an io.stat (see the module docs).
    pub cgroups: Vec<CgroupIo>,
    /// Why there is no per-cgroup I/O, when there is none to show.
    pub unavailable: Option<String>,
    /// Which kernel counters these are (`cgroup v2 io.stat`, `cgroup v1 blkio…`), for
    /// saying how a culprit was attributed; empty when there are none.
    pub source: String,
}

/// The name of the v2 counters, as [`CgroupIoScan::source`] says it.
pub const SOURCE_V2: &str = "cgroup v2 io.stat";
/// The name of the v1 counters, as [`CgroupIoScan::source`] says it.
pub const SOURCE_V1: &str = "cgroup v1 blkio.throttle.io_service_bytes";

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
            source: String::new(),
        });
    }
    let mut found = Vec::new();
    walk(dir, "", 0, &mut found)?;
    Ok(CgroupIoScan {
        cgroups: found,
        unavailable: None,
        source: SOURCE_V2.into(),
    })
}

/// Where the cgroup v1 hierarchy with the blkio controller is mounted, rebased into `root`
/// like [`find_cgroup2`]; `None` when blkio is not on v1.
pub fn find_blkio_v1(root: &SysRoot) -> Result<Option<PathBuf>> {
    let mounts = read_mounts(root)?;
    Ok(mounts
        .iter()
        .find(|m| m.fs_type == "cgroup" && m.options.split(',').any(|o| o == "blkio"))
        .map(|m| match m.mount_point.strip_prefix("/sys") {
            Ok(rest) => root.sys.join(rest),
            Err(_) => m.mount_point.clone(),
        }))
}

/// Reads every cgroup's own (not recursive) `blkio.throttle.io_service_bytes` and
/// `io_serviced` under the v1 blkio mount `dir`; cgroups that did no I/O are left out.
pub fn read_blkio_v1(dir: &Path) -> Result<CgroupIoScan> {
    let mut found = Vec::new();
    walk_v1(dir, "", 0, &mut found)?;
    let unavailable = found.is_empty().then(|| {
        "the io controller is on cgroup v1 blkio, which counts per-cgroup bytes only on \
         devices that have a throttle rule, and none has counted any"
            .to_string()
    });
    Ok(CgroupIoScan {
        cgroups: found,
        unavailable,
        source: SOURCE_V1.into(),
    })
}

/// The names of the directories in a listing (child cgroups), sorted so the walk is stable.
fn subdirectories(entries: std::fs::ReadDir) -> Vec<String> {
    let mut children: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    children.sort();
    children
}

fn walk_v1(dir: &Path, rel: &str, depth: usize, out: &mut Vec<CgroupIo>) -> Result<()> {
    let bytes_path = dir.join("blkio.throttle.io_service_bytes");
    let Some(bytes) = read_optional(&bytes_path)? else {
        return Ok(());
    };
    let ios_path = dir.join("blkio.throttle.io_serviced");
    let ios = read_optional(&ios_path)?.unwrap_or_default();
    let mut devices = parse_blkio_v1(&bytes, &bytes_path)?;
    for d in parse_blkio_v1(&ios, &ios_path)? {
        if let Some(slot) = devices
            .iter_mut()
            .find(|x| (x.major, x.minor) == (d.major, d.minor))
        {
            (slot.rios, slot.wios, slot.dios) = (d.rbytes, d.wbytes, d.dbytes);
        }
    }
    devices.retain(|d| d.rbytes + d.wbytes + d.dbytes > 0);
    if !devices.is_empty() {
        out.push(CgroupIo {
            path: if rel.is_empty() {
                "/".into()
            } else {
                rel.into()
            },
            devices,
        });
    }
    if depth >= MAX_DEPTH {
        return Ok(());
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        // Removed while walking (a service stopped): nothing below it.
        return Ok(());
    };
    for child in subdirectories(entries) {
        walk_v1(&dir.join(&child), &format!("{rel}/{child}"), depth + 1, out)?;
    }
    Ok(())
}

/// Parses v1 blkio stat lines (`MAJ:MIN Read N`, `… Write N`, `… Discard N`, and
/// `Sync`/`Async`/`Total` lines, which are ignored) into per-device counters, the counts in
/// `rbytes`/`wbytes`/`dbytes` whatever they count (bytes or requests).
pub fn parse_blkio_v1(text: &str, path: &Path) -> Result<Vec<CgroupDeviceIo>> {
    let mut out: Vec<CgroupDeviceIo> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        // `Total N` closes the file.
        let [devno, op, value] = words[..] else {
            continue;
        };
        let err =
            |reason: &str| KernelError::parse(path, Some(i + 1), format!("{reason}: {line:?}"));
        let (major, minor) =
            super::mounts::parse_devno(devno).ok_or_else(|| err("expected MAJOR:MINOR first"))?;
        let value: u64 = value
            .parse()
            .map_err(|_| err("a counter is not a number"))?;
        let at = match out
            .iter()
            .position(|d| (d.major, d.minor) == (major, minor))
        {
            Some(at) => at,
            None => {
                out.push(CgroupDeviceIo {
                    major,
                    minor,
                    ..CgroupDeviceIo::default()
                });
                out.len() - 1
            }
        };
        let d = &mut out[at];
        match op {
            "Read" => d.rbytes = value,
            "Write" => d.wbytes = value,
            "Discard" => d.dbytes = value,
            _ => {}
        }
    }
    Ok(out)
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
        for child in subdirectories(entries) {
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

    #[test]
    fn reads_v1_blkio_per_cgroup() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        let stat = "7:0 Read 4096\n7:0 Write 52428800\n7:0 Sync 52428800\n7:0 Async 0\n7:0 Discard 0\n7:0 Total 52432896\nTotal 52432896\n";
        write(
            t,
            "sys/fs/cgroup/blkio/blkio.throttle.io_service_bytes",
            "Total 0\n",
        );
        write(
            t,
            "sys/fs/cgroup/blkio/job/blkio.throttle.io_service_bytes",
            stat,
        );
        write(
            t,
            "sys/fs/cgroup/blkio/job/blkio.throttle.io_serviced",
            "7:0 Read 1\n7:0 Write 50\nTotal 51\n",
        );
        write(
            t,
            "proc/self/mountinfo",
            "38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio\n",
        );
        let root = SysRoot::under(t);
        let mount = find_blkio_v1(&root).unwrap().unwrap();
        let scan = read_blkio_v1(&mount).unwrap();
        assert_eq!(scan.cgroups.len(), 1);
        let cg = &scan.cgroups[0];
        assert_eq!(cg.path, "/job");
        assert_eq!(
            (
                cg.devices[0].rbytes,
                cg.devices[0].wbytes,
                cg.devices[0].wios
            ),
            (4096, 52428800, 50)
        );
        assert_eq!(scan.source, SOURCE_V1);
        let err = parse_blkio_v1("7:0 Read x\n", Path::new("/b")).unwrap_err();
        assert!(err.to_string().contains("/b line 1"));
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,200}") {
            let _ = parse_io_stat(&s, Path::new("/x"));
            let _ = parse_blkio_v1(&s, Path::new("/x"));
        }
    }
}
