//! Virtual memory sysctls (swappiness, dirty limits, zone_reclaim_mode, NUMA balancing) and
//! swap on a slow device.

use super::devices::{Media, classify};
use super::facts::Facts;
use super::{Evidence, Finding, Group, Options, Remedy, Severity, cmds};
use crate::tune::Setting;

const VM_DOC: &str = "kernel docs, admin-guide/sysctl/vm.rst";

pub fn rules(facts: &Facts, options: Options, out: &mut Vec<Finding>) {
    if let Some(&s) = facts.sysctl.get("vm.swappiness") {
        out.push(swappiness(facts, s, options));
    }
    if let Some(f) = dirty(facts) {
        out.push(f);
    }
    if let Some(&z) = facts.sysctl.get("vm.zone_reclaim_mode") {
        out.push(zone_reclaim(facts, z));
    }
    if let Some(&b) = facts.sysctl.get("kernel.numa_balancing") {
        out.push(numa_balancing(facts, b));
    }
    swap_devices(facts, out);
}

fn sysctl_evidence(name: &str, value: impl ToString) -> Evidence {
    Evidence::new(
        format!("/proc/sys/{}", name.replace('.', "/")),
        value.to_string(),
    )
}

/// Swappiness above this makes a database's cold pages candidates for swap before page
/// cache; MongoDB's production notes ask for 1, most database guides for 1–10.
const DATABASE_MAX_SWAPPINESS: u64 = 10;

fn swappiness(facts: &Facts, s: u64, options: Options) -> Finding {
    let swap_total: u64 = facts.swaps.iter().map(|a| a.size_bytes).sum();
    let mut evidence = vec![sysctl_evidence("vm.swappiness", s)];
    evidence.push(Evidence::new(
        "/proc/swaps",
        format!("{} area(s), {} MiB", facts.swaps.len(), swap_total >> 20),
    ));
    let (severity, title, want) = if facts.swaps.is_empty() {
        (
            Severity::Ok,
            format!("swappiness {s}; no swap is active, so it has no effect"),
            s,
        )
    } else if options.profile.is_database() && s > DATABASE_MAX_SWAPPINESS {
        (
            Severity::Warn,
            format!(
                "swappiness {s}: the kernel may swap out {} memory to keep page cache",
                options.profile.name()
            ),
            1,
        )
    } else if s > 100 {
        (
            Severity::Info,
            format!("swappiness {s}: anonymous memory is swapped in preference to page cache"),
            60,
        )
    } else {
        (Severity::Ok, format!("swappiness {s}"), s)
    };
    Finding {
        id: "swappiness",
        group: Group::Vm,
        subject: None,
        severity,
        title,
        evidence,
        why: "swappiness weighs swapping anonymous memory against dropping page cache; a \
              database whose working set is swapped out answers from disk at page-fault speed."
            .to_string(),
        reference: format!("{VM_DOC} (swappiness); MongoDB production notes (vm.swappiness 1)"),
        remedy: if severity == Severity::Ok {
            Remedy::default()
        } else {
            cmds::setting(
                &Setting::Sysctl("vm.swappiness"),
                &want.to_string(),
                &s.to_string(),
            )
        },
    }
}

/// Dirty data above this waits in RAM for writeback: at 200 MB/s (a SATA disk) 4 GiB takes
/// 20 s to drain, and a writer that hits the limit, or an fsync behind it, waits that long.
const MAX_DIRTY_BYTES: u64 = 4 << 30;

fn dirty(facts: &Facts) -> Option<Finding> {
    let get = |n: &str| facts.sysctl.get(n).copied();
    let (ratio, bg_ratio) = (get("vm.dirty_ratio")?, get("vm.dirty_background_ratio")?);
    let (bytes, bg_bytes) = (
        get("vm.dirty_bytes").unwrap_or(0),
        get("vm.dirty_background_bytes").unwrap_or(0),
    );
    // The kernel takes the ratio of "dirtyable" memory (free plus page cache), which
    // MemAvailable approximates.
    let available = facts.meminfo.as_ref().and_then(|m| m.get("MemAvailable"));
    let limit = if bytes > 0 {
        Some(bytes)
    } else {
        available.map(|a| a / 100 * ratio)
    }?;
    let mut evidence = vec![
        sysctl_evidence("vm.dirty_ratio", ratio),
        sysctl_evidence("vm.dirty_background_ratio", bg_ratio),
        sysctl_evidence("vm.dirty_bytes", bytes),
        sysctl_evidence("vm.dirty_background_bytes", bg_bytes),
    ];
    if let Some(a) = available {
        evidence.push(Evidence::new(
            "/proc/meminfo MemAvailable",
            format!("{} MiB", a >> 20),
        ));
    }
    let large = limit > MAX_DIRTY_BYTES;
    let remedy = if large {
        let mut r = cmds::sysctls(
            "dirty",
            &[
                (
                    "vm.dirty_background_bytes",
                    (256u64 << 20).to_string(),
                    String::new(),
                ),
                ("vm.dirty_bytes", (1u64 << 30).to_string(), String::new()),
            ],
        );
        // Writing a ratio resets the matching _bytes to 0 (the kernel refuses 0 for _bytes).
        let revert_to = |name: &str, b: u64, ratio_name: &str, ratio: u64| {
            if b > 0 {
                format!("sysctl -w {name}={b}")
            } else {
                format!("sysctl -w {ratio_name}={ratio}")
            }
        };
        r.revert = Some(format!(
            "{} && {} && rm -f /etc/sysctl.d/99-tacho-dirty.conf",
            revert_to(
                "vm.dirty_background_bytes",
                bg_bytes,
                "vm.dirty_background_ratio",
                bg_ratio
            ),
            revert_to("vm.dirty_bytes", bytes, "vm.dirty_ratio", ratio),
        ));
        r
    } else {
        Remedy::default()
    };
    Some(Finding {
        id: "dirty_limits",
        group: Group::Vm,
        subject: None,
        severity: if large { Severity::Warn } else { Severity::Ok },
        title: format!(
            "up to {} MiB of dirty data may wait in RAM before writers are throttled{}",
            limit >> 20,
            if large {
                format!(
                    "; at 200 MB/s (a SATA disk) that is a {} s writeback stall",
                    limit / 200_000_000
                )
            } else {
                String::new()
            }
        ),
        evidence,
        why: "Dirty pages are written back in bursts; the larger the limit, the longer a \
              process that reaches it (or an fsync queued behind the burst) stalls. On large \
              RAM, byte limits (dirty_background_bytes, dirty_bytes) keep bursts bounded."
            .to_string(),
        reference: format!("{VM_DOC} (dirty_ratio, dirty_bytes, dirty_background_*)"),
        remedy,
    })
}

fn zone_reclaim(facts: &Facts, z: u64) -> Finding {
    let nodes = facts.numa_nodes.unwrap_or(1);
    let on = z != 0;
    Finding {
        id: "zone_reclaim_mode",
        group: Group::Vm,
        subject: None,
        severity: if on && nodes > 1 {
            Severity::Warn
        } else {
            Severity::Ok
        },
        title: if on {
            format!(
                "zone_reclaim_mode {z}: a node reclaims its own cache before using another's ({nodes} NUMA node(s))"
            )
        } else {
            "zone_reclaim_mode 0: memory comes from other nodes before cache is dropped".to_string()
        },
        evidence: vec![
            sysctl_evidence("vm.zone_reclaim_mode", z),
            Evidence::new(
                "/sys/devices/system/node/online",
                format!("{nodes} node(s)"),
            ),
        ],
        why: "With zone reclaim on, a NUMA node throws away its page cache (and may write back \
              or swap) rather than allocate on a neighbour: file servers and databases lose \
              their cache and stall."
            .to_string(),
        reference: format!(
            "{VM_DOC} (zone_reclaim_mode: disabled by default, keep it so for file servers)"
        ),
        remedy: if on && nodes > 1 {
            cmds::setting(
                &Setting::Sysctl("vm.zone_reclaim_mode"),
                "0",
                &z.to_string(),
            )
        } else {
            Remedy::default()
        },
    }
}

fn numa_balancing(facts: &Facts, b: u64) -> Finding {
    let nodes = facts.numa_nodes.unwrap_or(1);
    let (severity, title) = match (b != 0, nodes > 1) {
        (_, false) => (
            Severity::Ok,
            format!("NUMA balancing {b}; one NUMA node, nothing to balance"),
        ),
        (true, true) => (
            Severity::Info,
            format!(
                "NUMA balancing on across {nodes} nodes: the kernel migrates pages toward the CPUs using them"
            ),
        ),
        (false, true) => (
            Severity::Info,
            format!("NUMA balancing off across {nodes} nodes: memory stays where it was allocated"),
        ),
    };
    Finding {
        id: "numa_balancing",
        group: Group::Vm,
        subject: None,
        severity,
        title,
        evidence: vec![
            sysctl_evidence("kernel.numa_balancing", b),
            Evidence::new(
                "/sys/devices/system/node/online",
                format!("{nodes} node(s)"),
            ),
        ],
        why: "Automatic NUMA balancing samples memory accesses with page faults and migrates \
              pages: a gain for long-running processes with poor placement, a cost (system \
              CPU, latency jitter) for workloads pinned with numactl or spread by design."
            .to_string(),
        reference: "kernel docs, admin-guide/sysctl/kernel.rst (numa_balancing)".to_string(),
        remedy: Remedy::default(),
    }
}

fn swap_devices(facts: &Facts, out: &mut Vec<Finding>) {
    for area in &facts.swaps {
        let disks = facts
            .swap_disks
            .get(&area.path)
            .cloned()
            .unwrap_or_default();
        let media: Vec<(String, Media)> = disks
            .iter()
            .filter_map(|name| Some((name.clone(), classify(facts.disk(name)?)?.0)))
            .collect();
        let zram = disks.iter().any(|d| d.starts_with("zram"));
        let slow: Vec<&str> = media
            .iter()
            .filter(|(_, m)| *m == Media::Hdd)
            .map(|(n, _)| n.as_str())
            .collect();
        let severity = if slow.is_empty() {
            Severity::Ok
        } else {
            Severity::Warn
        };
        let on = if zram {
            "compressed RAM (zram)".to_string()
        } else if disks.is_empty() {
            "an unknown device".to_string()
        } else {
            disks.join(", ")
        };
        out.push(Finding {
            id: "swap_device",
            group: Group::Vm,
            subject: Some(area.path.clone()),
            severity,
            title: if slow.is_empty() {
                format!("swap on {on}")
            } else {
                format!("swap on a rotational disk ({}): each page-in costs a seek", slow.join(", "))
            },
            evidence: vec![Evidence::new(
                "/proc/swaps",
                format!(
                    "{} {}, {} MiB, {} MiB used, priority {}",
                    area.path,
                    area.kind,
                    area.size_bytes >> 20,
                    area.used_bytes >> 20,
                    area.priority
                ),
            )],
            why: "Swapped-out pages come back one random read at a time; on a rotational disk \
                  that is ~100 per second, so a swapping process effectively stops. zram or an \
                  SSD serve the same reads in microseconds."
                .to_string(),
            reference: "swapon(8); kernel docs, admin-guide/blockdev/zram.rst".to_string(),
            remedy: if slow.is_empty() {
                Remedy::default()
            } else {
                Remedy {
                    fix: Some(format!(
                        "swapoff {}  # needs enough free RAM for what is swapped out",
                        cmds::sq(&area.path)
                    )),
                    persist: Some(format!(
                        "# comment out the swap line of {} in /etc/fstab (or its systemd .swap unit)",
                        area.path
                    )),
                    revert: Some(format!("swapon {}", cmds::sq(&area.path))),
                    manual: true,
                }
            },
        });
    }
}
