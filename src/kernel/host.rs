//! Host fingerprint stored with every result: which machine, kernel and OS produced it, and
//! whether a hypervisor sits between tacho and the disk (whose cache can flatter results).
//!
//! Reading the fingerprint never fails: a missing file leaves its field `None`; a file that
//! exists but cannot be read or parsed also leaves it `None` and is listed in `unreadable`, so
//! the gap is visible rather than silent.

use super::Malformed;
use std::path::Path;

use serde::Serialize;

use super::{KernelError, Result, SysRoot, read_optional, read_text};

/// What machine a result came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Host {
    /// Kernel host name (`/proc/sys/kernel/hostname`).
    pub hostname: Option<String>,
    /// The machine's identity (`/etc/machine-id`, 32 hex digits): two machines with one host
    /// name stay two. `None` when the file is missing or not a machine id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine_id: Option<String>,
    /// The host's labels (`TACHO_LABELS`, else the config file's), stored with its runs for
    /// selecting them.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: crate::labels::Labels,
    /// Kernel release, as `uname -r` prints it.
    pub kernel: Option<String>,
    /// `PRETTY_NAME` from os-release (`Debian GNU/Linux 12 (bookworm)`).
    pub os: Option<String>,
    /// CPU model name from /proc/cpuinfo (first CPU).
    pub cpu_model: Option<String>,
    /// Online CPUs.
    pub cpus: Option<u64>,
    /// Total RAM the kernel manages (`MemTotal`).
    pub mem_total_bytes: Option<u64>,
    /// Hypervisor identified from what was seen (`kvm`, `vmware`, `firecracker`, or
    /// `unidentified` when only the CPU's hypervisor flag says there is one); `None` when
    /// nothing indicated a VM, which on non-x86 CPUs does not prove bare metal.
    pub virtualization: Option<String>,
    /// The observations behind `virtualization`, in words.
    pub virtualization_evidence: Vec<String>,
    /// Files that exist but could not be read or parsed, with the reason.
    pub unreadable: Vec<String>,
}

impl Host {
    /// Reads the fingerprint; never fails and never panics (see the module docs).
    pub fn read(root: &SysRoot) -> Host {
        let mut unreadable = Vec::new();
        let mut keep = |r: Result<Option<String>>| match r {
            Ok(v) => v,
            Err(e) => {
                unreadable.push(e.to_string());
                None
            }
        };
        let kernel_file = |name: &str| trimmed(&root.proc.join("sys/kernel").join(name));
        let hostname = keep(kernel_file("hostname"));
        let machine_id = machine_id(root);
        let kernel = keep(kernel_file("osrelease"));
        let os = keep(os_release(root));
        let cpuinfo = keep(read_optional(&root.proc.join("cpuinfo")));
        let dmi = root.sys.join("class/dmi/id");
        let sys_vendor = keep(trimmed(&dmi.join("sys_vendor")));
        let product_name = keep(trimmed(&dmi.join("product_name")));
        let hypervisor_type = keep(trimmed(&root.sys.join("hypervisor/type")));

        let online = root.sys.join("devices/system/cpu/online");
        let cpus = keep_parsed(&mut unreadable, &online, count_cpu_list);
        let meminfo = root.proc.join("meminfo");
        let mem_total_bytes = keep_parsed(&mut unreadable, &meminfo, mem_total_bytes);

        let (cpu_model, hypervisor_flag) =
            cpuinfo.as_deref().map(parse_cpuinfo).unwrap_or_default();
        let (virtualization, virtualization_evidence) = detect_virtualization(&VirtSignals {
            sys_vendor: sys_vendor.as_deref(),
            product_name: product_name.as_deref(),
            hypervisor_type: hypervisor_type.as_deref(),
            hypervisor_flag,
            has_dmi: dmi.is_dir(),
        });
        Host {
            hostname,
            machine_id,
            // Checked when the command started (`cmd::run`), so an error here cannot happen.
            labels: crate::labels::of_host().unwrap_or_default(),
            kernel,
            os,
            cpu_model,
            cpus,
            mem_total_bytes,
            virtualization,
            virtualization_evidence,
            unreadable,
        }
    }
}

/// The environment variable that stands in for `/etc/machine-id`, for tests that run several
/// "machines" on one (it names only what this process reports, as its own invoker could).
pub const TEST_MACHINE_ID: &str = "TACHO_TEST_MACHINE_ID";

/// This machine's id: `$TACHO_TEST_MACHINE_ID` (for tests), else `<fs>/etc/machine-id`; `None`
/// when neither is 32 hex digits.
pub fn machine_id(root: &SysRoot) -> Option<String> {
    let text = std::env::var(TEST_MACHINE_ID).ok().or_else(|| {
        read_optional(&root.fs.join("etc/machine-id"))
            .ok()
            .flatten()
    })?;
    let id = text.trim().to_ascii_lowercase();
    (id.len() == 32 && id.chars().all(|c| c.is_ascii_hexdigit())).then_some(id)
}

/// Reads an optional file and parses it; errors other than "missing" are recorded.
fn keep_parsed<T>(
    unreadable: &mut Vec<String>,
    path: &Path,
    parse: impl Fn(&str) -> std::result::Result<T, Malformed>,
) -> Option<T> {
    let result = read_optional(path).and_then(|text| match text {
        None => Ok(None),
        Some(t) => parse(&t)
            .map(Some)
            .map_err(|reason| KernelError::parse(path, None, reason)),
    });
    result.unwrap_or_else(|e| {
        unreadable.push(e.to_string());
        None
    })
}

fn trimmed(path: &Path) -> Result<Option<String>> {
    Ok(read_optional(path)?
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty()))
}

/// `PRETTY_NAME` from `<fs>/etc/os-release`, falling back to `<fs>/usr/lib/os-release` as
/// os-release(5) prescribes.
fn os_release(root: &SysRoot) -> Result<Option<String>> {
    for rel in ["etc/os-release", "usr/lib/os-release"] {
        match read_text(&root.fs.join(rel)) {
            Ok(text) => return Ok(pretty_name(&text)),
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// The `PRETTY_NAME` value of an os-release file, quotes and shell escapes removed.
pub fn pretty_name(text: &str) -> Option<String> {
    let value = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("PRETTY_NAME="))?
        .trim();
    let unquoted = ['"', '\'']
        .iter()
        .find_map(|q| value.strip_prefix(*q).and_then(|v| v.strip_suffix(*q)))
        .unwrap_or(value);
    let mut out = String::new();
    let mut chars = unquoted.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    Some(out).filter(|s| !s.is_empty())
}

/// The CPU model and whether the `hypervisor` flag is set, from /proc/cpuinfo. The model key
/// differs by architecture (`model name` on x86, `cpu model` on MIPS, `cpu` on POWER).
pub fn parse_cpuinfo(text: &str) -> (Option<String>, bool) {
    let field = |key: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    let model = ["model name", "cpu model", "cpu"]
        .iter()
        .find_map(|k| field(k))
        .filter(|m| !m.is_empty());
    let flag = field("flags").is_some_and(|f| f.split_whitespace().any(|w| w == "hypervisor"));
    (model, flag)
}

/// The first value of `key` in /proc/cpuinfo text (`microcode`, `model name`).
pub fn cpuinfo_field(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim().to_string())
    })
}

/// Online NUMA nodes (`<sys>/devices/system/node/online`); `Ok(None)` without NUMA support.
pub fn numa_nodes(root: &SysRoot) -> Result<Option<u64>> {
    let path = root.sys.join("devices/system/node/online");
    read_optional(&path)?
        .map(|t| count_cpu_list(&t).map_err(|reason| KernelError::parse(&path, None, reason)))
        .transpose()
}

/// Number of CPUs in a kernel CPU list (`0-3,8-11` is 8).
pub fn count_cpu_list(text: &str) -> std::result::Result<u64, Malformed> {
    let bad = || format!("expected a CPU list like 0-3,8, found {:?}", text.trim());
    let mut total: u64 = 0;
    for part in text.trim().split(',') {
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<u64>(), b.parse::<u64>()),
            None => (part.parse(), part.parse()),
        };
        let (first, last) = (first.map_err(|_| bad())?, last.map_err(|_| bad())?);
        let span = last.checked_sub(first).ok_or_else(bad)?;
        total = total.checked_add(span + 1).ok_or_else(bad)?;
    }
    Ok(total)
}

/// `MemTotal` from /proc/meminfo, in bytes (the kernel prints kB meaning KiB).
pub fn mem_total_bytes(text: &str) -> std::result::Result<u64, Malformed> {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .ok_or("no MemTotal line")?;
    let mut words = line.split_whitespace();
    let kib: u64 = words
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("bad MemTotal {line:?}"))?;
    if words.next() != Some("kB") {
        return Err(Malformed(format!("MemTotal not in kB: {line:?}")));
    }
    kib.checked_mul(1024)
        .ok_or_else(|| Malformed(format!("MemTotal too large: {line:?}")))
}

/// What the machine shows about a hypervisor.
#[derive(Debug, Default, Clone, Copy)]
pub struct VirtSignals<'a> {
    /// `/sys/class/dmi/id/sys_vendor`.
    pub sys_vendor: Option<&'a str>,
    /// `/sys/class/dmi/id/product_name`.
    pub product_name: Option<&'a str>,
    /// `/sys/hypervisor/type` (Xen guests).
    pub hypervisor_type: Option<&'a str>,
    /// The x86 `hypervisor` CPU flag in /proc/cpuinfo.
    pub hypervisor_flag: bool,
    /// Whether `/sys/class/dmi/id` exists at all (microVMs often boot without DMI tables).
    pub has_dmi: bool,
}

/// Names the hypervisor from DMI strings when they are known ones; otherwise reports only
/// that one exists. Returns the name and the evidence behind it.
pub fn detect_virtualization(s: &VirtSignals) -> (Option<String>, Vec<String>) {
    let mut evidence = Vec::new();
    let vendor = s.sys_vendor.unwrap_or("");
    let product = s.product_name.unwrap_or("");
    if s.sys_vendor.is_some() || s.product_name.is_some() {
        evidence.push(format!(
            "DMI sys_vendor {vendor:?}, product_name {product:?}"
        ));
    }
    if let Some(t) = s.hypervisor_type {
        evidence.push(format!("/sys/hypervisor/type {t:?}"));
    }
    if s.hypervisor_flag {
        evidence.push("cpuinfo flag hypervisor".to_string());
    }
    if !s.has_dmi {
        evidence.push("no DMI tables (common in microVMs such as Firecracker)".to_string());
    }
    const KNOWN: &[(&str, &str)] = &[
        ("KVM", "kvm"),
        ("QEMU", "qemu"),
        ("Firecracker", "firecracker"),
        ("VMware", "vmware"),
        ("VirtualBox", "virtualbox"),
        ("Xen", "xen"),
        ("Amazon EC2", "amazon"),
        ("Google Compute Engine", "google"),
        ("OpenStack", "openstack"),
        ("Parallels", "parallels"),
        ("Bochs", "bochs"),
        ("Cloud Hypervisor", "cloud-hypervisor"),
    ];
    let dmi = KNOWN
        .iter()
        .find(|(needle, _)| product.contains(needle) || vendor.contains(needle))
        .map(|(_, name)| (*name).to_string());
    // Hyper-V reports a generic vendor; only the pair identifies it.
    let hyperv = (vendor == "Microsoft Corporation" && product == "Virtual Machine")
        .then(|| "microsoft".to_string());
    let name = dmi
        .or(hyperv)
        .or_else(|| s.hypervisor_type.map(str::to_lowercase))
        .or_else(|| s.hypervisor_flag.then(|| "unidentified".to_string()));
    (name, evidence)
}

#[cfg(test)]
mod tests;
