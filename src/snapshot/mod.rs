//! `tacho snapshot`: the machine's performance-relevant configuration as one JSON document
//! (`tacho.snapshot.v1`), and `tacho diff`: what differs between two of them.
//!
//! A snapshot only reads (like `check`). Values that change by themselves from boot to boot
//! or second to second (boot_id, random UUIDs, entropy, counters) are left out at capture
//! ([`noise`]) so that two snapshots of one machine are equal.

pub mod diff;
pub(crate) mod explain;
pub mod noise;
mod shape;

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use serde::Serialize;

use crate::kernel::blockdev::{self, DeviceKind};
use crate::kernel::cpupower::CpuPower;
use crate::kernel::host::{self, Host};
use crate::kernel::mounts::{self, SwapArea};
use crate::kernel::tunables::{QueueTunables, SystemTunables};
use crate::kernel::{SysRoot, kconfig, read_optional, sysctl};

/// The `schema` of every snapshot document; a reader refuses any other.
pub const SCHEMA: &str = "tacho.snapshot.v1";

/// One machine's performance-relevant configuration, as `tacho snapshot` writes it.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// The tacho version that took it (Cargo package version).
    pub tool_version: &'static str,
    /// When it was taken, seconds since the Unix epoch (ignored by `diff`).
    pub taken_at_unix_s: u64,
    /// The machine: name, OS, CPU, memory, virtualization.
    pub host: SnapHost,
    /// The running kernel: release, version, command line and build configuration.
    pub kernel: SnapKernel,
    /// Every readable /proc/sys value by sysctl name, per-boot noise removed.
    pub sysctl: BTreeMap<String, String>,
    /// Every file under /sys/kernel/mm/transparent_hugepage (khugepaged/ included), with
    /// multiple-choice files reduced to the active choice.
    pub thp: BTreeMap<String, String>,
    /// CPU frequency governor, driver, boost and idle states.
    pub cpu: SnapCpu,
    /// /sys/devices/system/cpu/vulnerabilities, by file.
    pub vulnerabilities: BTreeMap<String, String>,
    /// IOMMU groups by domain type (`DMA` strict, `DMA-FQ` lazy, `identity`).
    pub iommu_groups: BTreeMap<String, u64>,
    /// Block devices with their request-queue settings (devices of size 0, such as unbound loop
    /// devices and empty drives, left out).
    pub devices: Vec<SnapDevice>,
    /// Mounts of real filesystems (virtual ones such as proc, sysfs and cgroup left out).
    pub mounts: Vec<SnapMount>,
    /// Active swap areas, from /proc/swaps.
    pub swaps: Vec<SwapArea>,
    /// Files that exist but could not be read, and write-only sysctls (never opened).
    pub unreadable: Vec<String>,
}

/// What the machine is and what it runs on.
#[derive(Debug, Clone, Serialize)]
pub struct SnapHost {
    /// Host name (ignored by `diff`: two machines are compared by their settings).
    pub hostname: Option<String>,
    /// `/etc/machine-id` (ignored by `diff`), so the shared store tells machines apart.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine_id: Option<String>,
    /// The host's labels (`TACHO_LABELS`; ignored by `diff`).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: crate::labels::Labels,
    /// `PRETTY_NAME` from os-release (`Debian GNU/Linux 12 (bookworm)`).
    pub os: Option<String>,
    /// CPU model name from /proc/cpuinfo (first CPU).
    pub cpu_model: Option<String>,
    /// Online CPUs.
    pub cpus: Option<u64>,
    /// Total memory in bytes (`MemTotal` of /proc/meminfo).
    pub mem_total_bytes: Option<u64>,
    /// Microcode revision of the first CPU in /proc/cpuinfo, as printed (`0xf0`); `None` on CPUs
    /// that do not report one.
    pub microcode: Option<String>,
    /// Online NUMA nodes; `None` without NUMA support.
    pub numa_nodes: Option<u64>,
    /// The hypervisor detected (`kvm`, `xen`, …); `None` when nothing indicated a VM.
    pub virtualization: Option<String>,
    /// The observations behind `virtualization`, in words (ignored by `diff`).
    pub virtualization_evidence: Vec<String>,
}

/// The running kernel.
#[derive(Debug, Clone, Serialize)]
pub struct SnapKernel {
    /// `uname -r`.
    pub release: Option<String>,
    /// `uname -v` (build number and date).
    pub version: Option<String>,
    /// The kernel command line (/proc/cmdline).
    pub cmdline: Option<String>,
    /// Where `config` came from (/proc/config.gz or /boot/config-*); `None` if neither exists.
    pub config_source: Option<String>,
    /// CONFIG_ options; `n` for "is not set".
    pub config: BTreeMap<String, String>,
}

/// CPU frequency scaling and idle states.
#[derive(Debug, Clone, Serialize)]
pub struct SnapCpu {
    /// `scaling_governor` of CPU 0 (`performance`, `powersave`, `schedutil`); `None` without
    /// cpufreq.
    pub governor: Option<String>,
    /// Driver, boost, frequency limits and idle states, flattened into this object.
    #[serde(flatten)]
    pub power: CpuPower,
}

/// One block device and its queue settings.
#[derive(Debug, Clone, Serialize)]
pub struct SnapDevice {
    /// Kernel name (`sda`, `nvme0n1`, `md0`).
    pub name: String,
    /// Whole disk, partition, or virtual device (dm, md, loop…).
    pub kind: DeviceKind,
    /// Model string of the hardware, if it reports one.
    pub model: Option<String>,
    /// Capacity in bytes.
    pub size_bytes: u64,
    /// Whether the device says it spins; `None` when sysfs lacks the attribute.
    pub rotational: Option<bool>,
    /// The driver bound to the device (`virtio_blk`, `sd`, `nvme`); `None` when there is none.
    pub driver: Option<String>,
    /// Largest discard the queue accepts, in bytes; 0 means no discard support, `None` when
    /// unreadable.
    pub discard_max_bytes: Option<u64>,
    /// Scheduler, read-ahead, queue depth and the rest, flattened into this object; `None` when
    /// sysfs has no request queue for the device.
    #[serde(flatten)]
    pub queue: Option<QueueTunables>,
}

/// One mounted filesystem.
#[derive(Debug, Clone, Serialize)]
pub struct SnapMount {
    /// Invalid UTF-8 shown as U+FFFD; the exact bytes are then in `mount_point_hex`.
    pub mount_point: String,
    /// The mount point's bytes in hex, only when they are not UTF-8 (see [`crate::text`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mount_point_hex: Option<String>,
    /// Filesystem type (`ext4`, `xfs`, `tmpfs`).
    pub fs_type: String,
    /// What was mounted (`/dev/vda`, `tmpfs`); `None` when the kernel says `none`.
    pub source: Option<String>,
    /// Per-mount then superblock options, comma-separated, duplicates removed.
    pub options: String,
}

/// Virtual filesystems whose mounts say nothing about performance and vary with every
/// container runtime (cgroup trees, /proc, /sys, devpts).
const SKIP_FS: &[&str] = &[
    "proc",
    "sysfs",
    "devpts",
    "cgroup",
    "cgroup2",
    "securityfs",
    "pstore",
    "bpf",
    "debugfs",
    "tracefs",
    "configfs",
    "fusectl",
    "mqueue",
    "hugetlbfs",
    "autofs",
    "binfmt_misc",
    "nsfs",
    "rpc_pipefs",
    "efivarfs",
    "selinuxfs",
];

impl Snapshot {
    /// Reads everything; never fails (what cannot be read is listed in `unreadable`).
    pub fn capture(root: &SysRoot) -> Snapshot {
        let mut unreadable = Vec::new();
        let mut keep = |e: crate::kernel::KernelError| {
            if !e.is_not_found() {
                unreadable.push(e.to_string());
            }
        };
        let h = Host::read(root);
        let tunables = SystemTunables::read(root);
        let cpuinfo = read_optional(&root.proc.join("cpuinfo")).unwrap_or_else(|e| {
            keep(e);
            None
        });
        let config = kconfig::read(root, h.kernel.as_deref()).unwrap_or_else(|e| {
            keep(e);
            None
        });
        let text = |rel: &str| -> Option<String> {
            read_optional(&root.proc.join(rel))
                .ok()
                .flatten()
                .map(|s| s.trim().to_string())
        };
        let all = sysctl::read_all(root);
        let sysctl = all
            .values
            .into_iter()
            .filter(|(k, _)| !noise::is_noise(&format!("sysctl.{k}")))
            .collect();
        let power = CpuPower::read(root).unwrap_or_else(|e| {
            keep(e);
            CpuPower::default()
        });
        let devices = devices(root, &mut keep);
        let mounts = mounts::read_mounts(root)
            .unwrap_or_else(|e| {
                keep(e);
                Vec::new()
            })
            .into_iter()
            .filter(|m| !SKIP_FS.contains(&m.fs_type.as_str()))
            .map(|m| SnapMount {
                mount_point: m.mount_point.to_string_lossy().into_owned(),
                mount_point_hex: crate::text::hex_if_not_utf8(m.mount_point.as_os_str().as_bytes()),
                fs_type: m.fs_type,
                source: m.source,
                options: m.options,
            })
            .collect();
        let swaps = mounts::swap_areas(root).unwrap_or_else(|e| {
            keep(e);
            Vec::new()
        });
        let iommu_groups = kconfig::iommu_group_types(root).unwrap_or_else(|e| {
            keep(e);
            BTreeMap::new()
        });
        let numa_nodes = host::numa_nodes(root).unwrap_or_else(|e| {
            keep(e);
            None
        });
        unreadable.extend(h.unreadable.iter().cloned());
        unreadable.extend(tunables.unreadable.iter().cloned());
        unreadable.extend(all.unreadable.iter().map(|u| format!("sysctl {u}")));
        unreadable.extend(
            all.write_only
                .iter()
                .map(|w| format!("sysctl {w}: write-only")),
        );
        Snapshot {
            schema: SCHEMA,
            tool_version: env!("CARGO_PKG_VERSION"),
            taken_at_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            host: SnapHost {
                hostname: h.hostname,
                machine_id: h.machine_id,
                labels: h.labels,
                os: h.os,
                cpu_model: h.cpu_model,
                cpus: h.cpus,
                mem_total_bytes: h.mem_total_bytes,
                microcode: cpuinfo
                    .as_deref()
                    .and_then(|c| host::cpuinfo_field(c, "microcode")),
                numa_nodes,
                virtualization: h.virtualization,
                virtualization_evidence: h.virtualization_evidence,
            },
            kernel: SnapKernel {
                release: h.kernel,
                version: text("sys/kernel/version"),
                cmdline: text("cmdline"),
                config_source: config
                    .as_ref()
                    .map(|c| c.source.to_string_lossy().into_owned()),
                config: config.map(|c| c.options).unwrap_or_default(),
            },
            sysctl,
            thp: thp(&root.sys.join("kernel/mm/transparent_hugepage")),
            cpu: SnapCpu {
                governor: tunables.cpu_governor,
                power,
            },
            vulnerabilities: tunables.vulnerabilities,
            iommu_groups,
            devices,
            mounts,
            swaps,
            unreadable,
        }
    }
}

fn devices(root: &SysRoot, keep: &mut dyn FnMut(crate::kernel::KernelError)) -> Vec<SnapDevice> {
    let disks = blockdev::disks(root).unwrap_or_else(|e| {
        keep(e);
        Vec::new()
    });
    disks
        .into_iter()
        // Unbound loop devices and empty drives have nothing to compare.
        .filter(|d| d.size_bytes > 0)
        .map(|d| {
            let hw = blockdev::hardware(&d).unwrap_or_default();
            let queue = QueueTunables::read(root, &d.name).unwrap_or_else(|e| {
                keep(e);
                None
            });
            SnapDevice {
                kind: d.kind,
                model: d.model,
                size_bytes: d.size_bytes,
                rotational: d.rotational,
                driver: hw.driver,
                discard_max_bytes: hw.discard_max_bytes,
                queue,
                name: d.name,
            }
        })
        .collect()
}

/// Every THP setting file, by path below the THP directory (`enabled`, `khugepaged/defrag`).
fn thp(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for sub in ["", "khugepaged"] {
        let Ok(entries) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        for e in entries.flatten() {
            if !e.path().is_file() {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(e.path()) else {
                continue;
            };
            let name = e.file_name().to_string_lossy().into_owned();
            let key = if sub.is_empty() {
                name
            } else {
                format!("{sub}/{name}")
            };
            let value = crate::kernel::bracketed_choice(&text)
                .unwrap_or_else(|| text.split_whitespace().collect::<Vec<_>>().join(" "));
            // khugepaged's full_scans and pages_collapsed are counters, not settings.
            if !noise::is_noise(&format!("thp.{key}")) {
                out.insert(key, value);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
