//! Kernel settings that silently change benchmark results: transparent huge pages, the CPU
//! frequency governor, CPU vulnerability mitigations, and each block device's request queue
//! (scheduler, nr_requests, read-ahead, write cache mode).
//!
//! The results store records them with every run so `compare` can name the configuration
//! delta between two runs; `check` and `snapshot` read the same settings. Like
//! [`Host`](super::host::Host), reading the whole set never fails: absent settings are `None`
//! (a VM without cpufreq has no governor) and unreadable ones are listed in `unreadable`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::{KernelError, Result, SysRoot, read_optional};

/// System-wide settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SystemTunables {
    /// Active mode of `/sys/kernel/mm/transparent_hugepage/enabled` (`always`, `madvise`, `never`).
    pub thp_enabled: Option<String>,
    /// Active mode of `/sys/kernel/mm/transparent_hugepage/defrag`.
    pub thp_defrag: Option<String>,
    /// The CPU frequency governor when every CPU uses the same one, else `mixed: a, b`;
    /// `None` without cpufreq (common in VMs, where the host decides).
    pub cpu_governor: Option<String>,
    /// One line over `/sys/devices/system/cpu/vulnerabilities`, e.g.
    /// `vulnerable: spec_store_bypass; mitigated: spectre_v1, spectre_v2; 16 not affected`.
    pub mitigations: Option<String>,
    /// The `mitigations=` kernel command-line option, if given (`off` disables them all).
    pub mitigations_cmdline: Option<String>,
    /// Each vulnerability file's text, by file name.
    pub vulnerabilities: BTreeMap<String, String>,
    /// Files that exist but could not be read or parsed, with the reason.
    pub unreadable: Vec<String>,
}

/// Everything a benchmark run records about kernel settings: the system-wide ones and the
/// request queue of each disk under the target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tunables {
    /// The system-wide settings (flattened into the same JSON object).
    #[serde(flatten)]
    pub system: SystemTunables,
    /// One entry per whole disk (or dm/md device) under the target, in the order given.
    pub devices: Vec<QueueTunables>,
}

impl Tunables {
    /// System settings plus the queues of the devices `devnos` (a partition counts as its
    /// disk); never fails, like [`SystemTunables::read`].
    pub fn read(root: &SysRoot, devnos: &[(u32, u32)]) -> Tunables {
        let mut system = SystemTunables::read(root);
        let mut devices: Vec<QueueTunables> = Vec::new();
        for &(major, minor) in devnos {
            let queue = super::blockdev::resolve(root, major, minor)
                .and_then(|dev| QueueTunables::read(root, &dev.disk));
            match queue {
                Ok(Some(q)) if !devices.iter().any(|d| d.device == q.device) => devices.push(q),
                Ok(_) => {}
                Err(e) => system.unreadable.push(e.to_string()),
            }
        }
        Tunables { system, devices }
    }
}

/// The request-queue settings of one block device (`/sys/class/block/NAME/queue`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueTunables {
    /// Kernel name of the device (`vda`, `nvme0n1`, `dm-0`).
    pub device: String,
    /// Active I/O scheduler (`none`, `mq-deadline`, `bfq`, `kyber`).
    pub scheduler: Option<String>,
    /// Requests the queue holds per hardware queue.
    pub nr_requests: Option<u64>,
    /// Read-ahead window in KiB.
    pub read_ahead_kb: Option<u64>,
    /// `write back` (the device has a volatile cache that needs flushes) or `write through`.
    pub write_cache: Option<String>,
}

impl SystemTunables {
    /// Reads every system-wide setting; never fails (see the module docs).
    pub fn read(root: &SysRoot) -> SystemTunables {
        let mut unreadable = Vec::new();
        let mut keep = |r: Result<Option<String>>| {
            r.unwrap_or_else(|e| {
                unreadable.push(e.to_string());
                None
            })
        };
        let thp = root.sys.join("kernel/mm/transparent_hugepage");
        let thp_enabled = keep(choice(&thp.join("enabled")));
        let thp_defrag = keep(choice(&thp.join("defrag")));
        let cmdline = keep(read_optional(&root.proc.join("cmdline")));
        let cpu_governor = match cpu_governors(root) {
            Ok(per_cpu) => summarize_governors(&per_cpu),
            Err(e) => {
                unreadable.push(e.to_string());
                None
            }
        };
        let vulnerabilities = vulnerabilities(root).unwrap_or_else(|e| {
            unreadable.push(e.to_string());
            BTreeMap::new()
        });
        SystemTunables {
            thp_enabled,
            thp_defrag,
            cpu_governor,
            mitigations: summarize_vulnerabilities(&vulnerabilities),
            mitigations_cmdline: cmdline
                .as_deref()
                .and_then(|c| cmdline_option(c, "mitigations")),
            vulnerabilities,
            unreadable,
        }
    }
}

impl QueueTunables {
    /// The queue settings of the device with kernel name `device`; `Ok(None)` when it has no
    /// queue directory of its own (partitions share their disk's).
    pub fn read(root: &SysRoot, device: &str) -> Result<Option<QueueTunables>> {
        let queue = root.sys.join("class/block").join(device).join("queue");
        if !queue.is_dir() {
            return Ok(None);
        }
        let text = |name: &str| -> Result<Option<String>> {
            Ok(read_optional(&queue.join(name))?
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty()))
        };
        let number = |name: &str| -> Result<Option<u64>> {
            text(name)?
                .map(|t| super::parse_u64(&t, &queue.join(name)))
                .transpose()
        };
        Ok(Some(QueueTunables {
            device: device.to_string(),
            scheduler: read_optional(&queue.join("scheduler"))?.and_then(|s| bracketed_choice(&s)),
            nr_requests: number("nr_requests")?,
            read_ahead_kb: number("read_ahead_kb")?,
            write_cache: text("write_cache")?,
        }))
    }
}

pub use super::bracketed_choice;

fn choice(path: &Path) -> Result<Option<String>> {
    match read_optional(path)? {
        None => Ok(None),
        Some(text) => bracketed_choice(&text).map(Some).ok_or_else(|| {
            KernelError::parse(
                path,
                None,
                format!(
                    "expected choices with one in brackets, found {:?}",
                    text.trim()
                ),
            )
        }),
    }
}

/// Each online CPU's `cpufreq/scaling_governor`, by CPU number; empty without cpufreq.
pub fn cpu_governors(root: &SysRoot) -> Result<BTreeMap<u32, String>> {
    let dir = root.sys.join("devices/system/cpu");
    let Some(entries) = super::read_dir_optional(&dir)? else {
        return Ok(BTreeMap::new());
    };
    let mut out = BTreeMap::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(cpu) = name.strip_prefix("cpu").and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let path = entry.path().join("cpufreq/scaling_governor");
        if let Some(governor) = read_optional(&path)? {
            out.insert(cpu, governor.trim().to_string());
        }
    }
    Ok(out)
}

/// `performance` when all CPUs agree, `mixed: performance, powersave` when they do not.
pub fn summarize_governors(per_cpu: &BTreeMap<u32, String>) -> Option<String> {
    let mut distinct: Vec<&str> = per_cpu.values().map(String::as_str).collect();
    distinct.sort_unstable();
    distinct.dedup();
    match distinct.as_slice() {
        [] => None,
        [one] => Some((*one).to_string()),
        many => Some(format!("mixed: {}", many.join(", "))),
    }
}

/// Every file of `/sys/devices/system/cpu/vulnerabilities`, trimmed; empty on kernels
/// without the directory.
pub fn vulnerabilities(root: &SysRoot) -> Result<BTreeMap<String, String>> {
    let dir = root.sys.join("devices/system/cpu/vulnerabilities");
    let Some(entries) = super::read_dir_optional(&dir)? else {
        return Ok(BTreeMap::new());
    };
    let mut out = BTreeMap::new();
    for entry in entries.flatten() {
        if let Some(text) = read_optional(&entry.path())? {
            out.insert(
                entry.file_name().to_string_lossy().into_owned(),
                text.trim().to_string(),
            );
        }
    }
    Ok(out)
}

/// One line naming what is vulnerable and what is mitigated and counting the rest, so two
/// machines' lines differ exactly when their exposure differs.
pub fn summarize_vulnerabilities(vulns: &BTreeMap<String, String>) -> Option<String> {
    if vulns.is_empty() {
        return None;
    }
    let (mut vulnerable, mut mitigated, mut other) = (Vec::new(), Vec::new(), Vec::new());
    let mut not_affected = 0;
    for (name, status) in vulns {
        // KVM-prefixed lines ("KVM: Mitigation: ...") describe the same states.
        let status = status.strip_prefix("KVM: ").unwrap_or(status);
        if status.starts_with("Not affected") {
            not_affected += 1;
        } else if status.starts_with("Vulnerable") {
            vulnerable.push(name.as_str());
        } else if status.starts_with("Mitigation") {
            mitigated.push(name.as_str());
        } else {
            other.push(name.as_str());
        }
    }
    let mut parts = Vec::new();
    for (word, names) in [
        ("vulnerable", &vulnerable),
        ("mitigated", &mitigated),
        ("unknown", &other),
    ] {
        if !names.is_empty() {
            parts.push(format!("{word}: {}", names.join(", ")));
        }
    }
    if not_affected > 0 {
        parts.push(format!("{not_affected} not affected"));
    }
    Some(parts.join("; "))
}

/// The value of `name=value` on a kernel command line (the last one wins, as in the kernel).
pub fn cmdline_option(cmdline: &str, name: &str) -> Option<String> {
    cmdline
        .split_whitespace()
        // Everything after a bare `--` goes to init, not to the kernel.
        .take_while(|w| *w != "--")
        .filter_map(|w| w.split_once('='))
        .filter(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
        .last()
}

#[cfg(test)]
mod tests;
