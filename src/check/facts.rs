//! Everything the rules look at, read once. Reading never fails as a whole: what is absent is
//! `None` or empty, and what exists but cannot be read is listed in `unreadable` (and shown),
//! so a gap is never mistaken for a healthy setting.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::kernel::blockdev::{self, BlockDevice, DiskHardware};
use crate::kernel::cpupower::CpuPower;
use crate::kernel::fsinfo::{self, Ext4Info, TrimSchedule};
use crate::kernel::host::{self, Host};
use crate::kernel::kconfig::{self, KernelConfig};
use crate::kernel::mdstat::{self, MdArray};
use crate::kernel::meminfo::{self, Meminfo, VmStat};
use crate::kernel::mounts::{self, Mount, SwapArea};
use crate::kernel::tunables::{QueueTunables, SystemTunables};
use crate::kernel::{KernelError, SysRoot, read_optional, sysctl};

/// The sysctls the rules judge.
pub const SYSCTLS: &[&str] = &[
    "vm.swappiness",
    "vm.dirty_ratio",
    "vm.dirty_background_ratio",
    "vm.dirty_bytes",
    "vm.dirty_background_bytes",
    "vm.zone_reclaim_mode",
    "vm.overcommit_memory",
    "kernel.numa_balancing",
    "kernel.task_delayacct",
    "dev.raid.speed_limit_max",
];

/// Where databases keep their files on common distributions.
pub const DATABASE_DIRS: &[&str] = &[
    "var/lib/postgresql",
    "var/lib/pgsql",
    "var/lib/mysql",
    "var/lib/mongodb",
    "var/lib/mongo",
    "var/lib/redis",
    "var/lib/etcd",
    "var/lib/cassandra",
    "var/lib/clickhouse",
    "var/lib/elasticsearch",
    "var/lib/influxdb",
];

/// A whole disk and its queue settings.
#[derive(Debug, Clone)]
pub struct Disk {
    pub dev: BlockDevice,
    pub queue: Option<QueueTunables>,
    pub hw: DiskHardware,
}

/// A database directory found on this machine.
#[derive(Debug, Clone)]
pub struct DbDir {
    /// As the machine sees it (`/var/lib/postgresql`, symlinks resolved).
    pub path: PathBuf,
    pub mount: Option<Mount>,
    /// The no-copy-on-write attribute, where the filesystem has one.
    pub nocow: Option<bool>,
}

/// Filesystems on block devices whose options tacho judges.
pub const DISK_FILESYSTEMS: &[&str] = &["ext4", "ext3", "ext2", "xfs", "btrfs", "f2fs", "bcachefs"];

/// Everything the rules judge, read once from the system under a root; what could not be read is in
/// `unreadable`.
#[derive(Debug, Clone)]
pub struct Facts {
    /// The machine: OS, CPU, memory, virtualization.
    pub host: Host,
    /// The kernel command line (/proc/cmdline); `None` when unreadable.
    pub cmdline: Option<String>,
    /// THP enabled/defrag, CPU governor, vulnerabilities.
    pub tunables: SystemTunables,
    /// The values of [`SYSCTLS`] this kernel has.
    pub sysctl: BTreeMap<&'static str, u64>,
    /// /proc/meminfo; `None` when unreadable.
    pub meminfo: Option<Meminfo>,
    /// /proc/vmstat; `None` when unreadable.
    pub vmstat: Option<VmStat>,
    /// The kernel build configuration; `None` when neither /proc/config.gz nor /boot/config-*
    /// exists.
    pub config: Option<KernelConfig>,
    /// IOMMU groups by domain type (`DMA` strict, `DMA-FQ` lazy, `identity`).
    pub iommu_groups: BTreeMap<String, u64>,
    /// Whole disks with their queue settings.
    pub disks: Vec<Disk>,
    /// Every mount, from mountinfo.
    pub mounts: Vec<Mount>,
    /// The block device behind each mount's device number (partitions, dm, md included).
    pub mount_devices: BTreeMap<(u32, u32), BlockDevice>,
    /// Hardware of the devices in `mount_devices` (a partition's is its disk's).
    pub mount_hardware: BTreeMap<(u32, u32), DiskHardware>,
    /// ext4 superblock facts by device name, for each mounted ext4 filesystem.
    pub ext4: BTreeMap<String, Ext4Info>,
    /// Whether fstrim.timer will trim SSDs.
    pub trim: TrimSchedule,
    /// Disk mounts another user controls (the mounted root is theirs, or it sits under a
    /// directory others own or can write, as a mount in /tmp does), with why: the scripts
    /// leave them to the admin.
    pub others_mounts: BTreeMap<PathBuf, String>,
    /// Active swap areas.
    pub swaps: Vec<SwapArea>,
    /// The whole disks under each swap area (by its path), for judging their speed.
    pub swap_disks: BTreeMap<String, Vec<String>>,
    pub md: Vec<MdArray>,
    pub power: CpuPower,
    pub numa_nodes: Option<u64>,
    pub db_dirs: Vec<DbDir>,
    /// The VM disks of a Proxmox VE host; `None` elsewhere.
    pub pve: Option<super::proxmox::PveHost>,
    /// What exists but could not be read or parsed.
    pub unreadable: Vec<String>,
}

impl Facts {
    /// Reads every fact under `root`; never fails (what cannot be read is listed in `unreadable`).
    pub fn read(root: &SysRoot) -> Facts {
        let mut unreadable: Vec<String> = Vec::new();
        let keep = &mut |e: KernelError| unreadable.push(e.to_string());
        let host = Host::read(root);
        let tunables = SystemTunables::read(root);
        let cmdline = read_optional(&root.proc.join("cmdline"))
            .map(|c| c.map(|c| c.trim().to_string()))
            .unwrap_or_else(|e| {
                keep(e);
                None
            });
        let mut sysctls = BTreeMap::new();
        for name in SYSCTLS {
            match sysctl::read_u64(root, name) {
                Ok(Some(v)) => {
                    sysctls.insert(*name, v);
                }
                Ok(None) => {}
                Err(e) => keep(e),
            }
        }
        let meminfo = optional(meminfo::read_meminfo(root), keep);
        let vmstat = optional(meminfo::read_vmstat(root), keep);
        let config = optional(kconfig::read(root, host.kernel.as_deref()), keep).flatten();
        let iommu_groups = optional(kconfig::iommu_group_types(root), keep).unwrap_or_default();
        let disks = read_disks(root, keep);
        let mounts = optional(mounts::read_mounts(root), keep).unwrap_or_default();
        let (mount_devices, mount_hardware) = mount_devices(root, &mounts);
        let mut ext4 = BTreeMap::new();
        for m in mounts.iter().filter(|m| m.fs_type == "ext4") {
            if let Some(dev) = mount_devices.get(&(m.major, m.minor)) {
                match fsinfo::ext4(root, &dev.name) {
                    Ok(Some(info)) => {
                        ext4.insert(dev.name.clone(), info);
                    }
                    Ok(None) => {}
                    Err(e) => keep(e),
                }
            }
        }
        let swaps = optional(mounts::swap_areas(root), keep).unwrap_or_default();
        let swap_disks = swaps
            .iter()
            .map(|a| (a.path.clone(), swap_disks(root, a, &mounts)))
            .collect();
        let md = optional(mdstat::read(root), keep).unwrap_or_default();
        let power = optional(CpuPower::read(root), keep).unwrap_or_default();
        let numa_nodes = optional(host::numa_nodes(root), keep).flatten();
        let db_dirs = database_dirs(root, &mounts);
        let trim = fsinfo::trim_schedule(root);
        let others_mounts = mounts
            .iter()
            .filter(|m| DISK_FILESYSTEMS.contains(&m.fs_type.as_str()))
            .filter_map(|m| Some((m.mount_point.clone(), others_control(root, &m.mount_point)?)))
            .collect();
        let pve = super::proxmox::read(root);
        if let Some(p) = &pve {
            unreadable.extend(p.unreadable.iter().cloned());
        }
        unreadable.extend(host.unreadable.iter().cloned());
        unreadable.extend(tunables.unreadable.iter().cloned());
        Facts {
            host,
            cmdline,
            tunables,
            sysctl: sysctls,
            meminfo,
            vmstat,
            config,
            iommu_groups,
            disks,
            mounts,
            mount_devices,
            mount_hardware,
            ext4,
            trim,
            others_mounts,
            swaps,
            swap_disks,
            md,
            power,
            numa_nodes,
            db_dirs,
            pve,
            unreadable,
        }
    }

    /// The value of a kernel command-line option (`iommu.strict`), the last one winning.
    pub fn cmdline_option(&self, name: &str) -> Option<String> {
        crate::kernel::tunables::cmdline_option(self.cmdline.as_deref()?, name)
    }

    /// True when the command line has the bare flag or `name=...`.
    pub fn cmdline_has(&self, name: &str) -> bool {
        self.cmdline.as_deref().is_some_and(|c| {
            c.split_whitespace()
                .take_while(|w| *w != "--")
                .any(|w| w == name || w.split_once('=').is_some_and(|(k, _)| k == name))
        })
    }

    /// The disk named `name`, if it is a whole disk tacho read.
    pub fn disk(&self, name: &str) -> Option<&Disk> {
        self.disks.iter().find(|d| d.dev.name == name)
    }
}

/// `Some` value, `None` when the file is absent, and other errors recorded.
/// Why another user controls the mount at `mount_point`, if one does: its root is not
/// root's, or a directory above it is another user's or writable by every user (anyone may
/// have made the directory a mount in /tmp sits on, and its owner mounts there again).
fn others_control(root: &SysRoot, mount_point: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let stat = |p: &Path| std::fs::symlink_metadata(root.fs.join(p.strip_prefix("/").ok()?)).ok();
    let top = stat(mount_point)?;
    if top.uid() != 0 {
        return Some(format!("its root belongs to uid {}", top.uid()));
    }
    for dir in mount_point.ancestors().skip(1) {
        let meta = stat(dir)?;
        if meta.uid() != 0 {
            return Some(format!(
                "it is under {}, which uid {} owns",
                dir.display(),
                meta.uid()
            ));
        }
        if meta.mode() & 0o002 != 0 {
            return Some(format!(
                "it is under {}, which every user can write",
                dir.display()
            ));
        }
    }
    None
}

fn optional<T>(r: crate::kernel::Result<T>, keep: &mut dyn FnMut(KernelError)) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) if e.is_not_found() => None,
        Err(e) => {
            keep(e);
            None
        }
    }
}

fn read_disks(root: &SysRoot, keep: &mut dyn FnMut(KernelError)) -> Vec<Disk> {
    let devs = match blockdev::disks(root) {
        Ok(devs) => devs,
        Err(e) => {
            if !e.is_not_found() {
                keep(e);
            }
            return Vec::new();
        }
    };
    let mut disks = Vec::new();
    for dev in devs {
        let queue = QueueTunables::read(root, &dev.name).unwrap_or_else(|e| {
            keep(e);
            None
        });
        let hw = blockdev::hardware(&dev).unwrap_or_else(|e| {
            keep(e);
            DiskHardware::default()
        });
        disks.push(Disk { dev, queue, hw });
    }
    disks
}

type MountDevices = (
    BTreeMap<(u32, u32), BlockDevice>,
    BTreeMap<(u32, u32), DiskHardware>,
);

/// Resolves each block-backed mount's device; virtual filesystems (no sysfs entry) are left
/// out silently, since that is what they are.
fn mount_devices(root: &SysRoot, mounts: &[Mount]) -> MountDevices {
    let mut devs = BTreeMap::new();
    let mut hws = BTreeMap::new();
    for m in mounts.iter().filter(|m| m.major != 0) {
        let key = (m.major, m.minor);
        if devs.contains_key(&key) {
            continue;
        }
        let Ok(dev) = blockdev::resolve(root, m.major, m.minor) else {
            continue;
        };
        // A partition's queue and hardware are its disk's.
        let hw_dev = match dev.sys_path.parent() {
            Some(parent) if dev.kind == blockdev::DeviceKind::Partition => {
                blockdev::from_sys_dir(parent).ok()
            }
            _ => Some(dev.clone()),
        };
        if let Some(hw) = hw_dev.and_then(|d| blockdev::hardware(&d).ok()) {
            hws.insert(key, hw);
        }
        devs.insert(key, dev);
    }
    (devs, hws)
}

/// The whole disks under a swap partition (by kernel name) or a swap file (through the
/// filesystem holding it); empty when they cannot be found.
fn swap_disks(root: &SysRoot, area: &SwapArea, mounts: &[Mount]) -> Vec<String> {
    let dev = if area.kind == "partition" {
        Path::new(&area.path)
            .file_name()
            .map(|n| root.sys.join("class/block").join(n))
            .and_then(|link| crate::kernel::canonical(&link).ok())
            .and_then(|dir| blockdev::from_sys_dir(&dir).ok())
    } else {
        mounts::mount_containing(mounts, Path::new(&area.path))
            .and_then(|m| blockdev::resolve(root, m.major, m.minor).ok())
    };
    dev.and_then(|d| blockdev::leaves(root, &d).ok())
        .map(|leaves| leaves.into_iter().map(|d| d.name).collect())
        .unwrap_or_default()
}

/// Database directories that exist under the `fs` root, with the mount holding each.
fn database_dirs(root: &SysRoot, mounts: &[Mount]) -> Vec<DbDir> {
    let fs_root = std::fs::canonicalize(&root.fs).unwrap_or_else(|_| root.fs.clone());
    DATABASE_DIRS
        .iter()
        .filter_map(|rel| {
            let real = std::fs::canonicalize(root.fs.join(rel)).ok()?;
            let inside = real.strip_prefix(&fs_root).ok()?;
            let path = Path::new("/").join(inside);
            Some(DbDir {
                mount: mounts::mount_containing(mounts, &path).cloned(),
                nocow: fsinfo::nocow(&real).ok().flatten(),
                path,
            })
        })
        .collect()
}
