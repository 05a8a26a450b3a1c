//! Kernel build and boot choices: IOMMU DMA mode, CPU vulnerability mitigations, the
//! preemption model, HZ, task delay accounting; and what a VM cannot see of its host.

use super::facts::Facts;
use super::{Evidence, Finding, Group, Options, Remedy, Severity, cmds};
use crate::kernel::kconfig;

pub fn rules(facts: &Facts, _options: Options, out: &mut Vec<Finding>) {
    out.push(iommu(facts));
    if let Some(f) = mitigations(facts) {
        out.push(f);
    }
    if let Some(f) = preempt(facts) {
        out.push(f);
    }
    if let Some(f) = hz(facts) {
        out.push(f);
    }
    out.push(delayacct(facts));
}

/// The IOMMU DMA mode, from the command line, or else the build default.
fn iommu_requested(facts: &Facts) -> Option<(&'static str, String)> {
    let opt = |k: &str| facts.cmdline_option(k);
    if opt("iommu.passthrough").as_deref() == Some("1") || opt("iommu").as_deref() == Some("pt") {
        return Some(("passthrough", "kernel command line".to_string()));
    }
    match opt("iommu.strict").as_deref() {
        Some("1") => return Some(("strict", "iommu.strict=1 on the command line".to_string())),
        Some("0") => return Some(("lazy", "iommu.strict=0 on the command line".to_string())),
        _ => {}
    }
    let config = facts.config.as_ref()?;
    kconfig::iommu_default(config)
        .map(|m| (m, format!("build default ({})", config.source.display())))
}

fn iommu(facts: &Facts) -> Finding {
    let groups = &facts.iommu_groups;
    let mut evidence = Vec::new();
    if let Some(c) = &facts.config {
        for name in [
            "CONFIG_IOMMU_DEFAULT_DMA_STRICT",
            "CONFIG_IOMMU_DEFAULT_DMA_LAZY",
            "CONFIG_IOMMU_DEFAULT_PASSTHROUGH",
        ] {
            if let Some(v) = c.get(name) {
                evidence.push(Evidence::new(
                    c.source.to_string_lossy(),
                    format!("{name}={v}"),
                ));
            }
        }
    }
    let cmdline: Vec<String> = [
        "iommu",
        "iommu.strict",
        "iommu.passthrough",
        "intel_iommu",
        "amd_iommu",
    ]
    .iter()
    .filter_map(|k| facts.cmdline_option(k).map(|v| format!("{k}={v}")))
    .collect();
    if !cmdline.is_empty() {
        evidence.push(Evidence::new("/proc/cmdline", cmdline.join(" ")));
    }
    let in_force = groups
        .iter()
        .map(|(t, n)| format!("{n} {t}"))
        .collect::<Vec<_>>();
    evidence.push(Evidence::new(
        "/sys/kernel/iommu_groups/*/type",
        if in_force.is_empty() {
            "no IOMMU groups".to_string()
        } else {
            in_force.join(", ")
        },
    ));
    let requested = iommu_requested(facts);
    let strict_groups = groups.get("DMA").copied().unwrap_or(0);
    let (severity, title) = if strict_groups > 0 {
        (
            Severity::Warn,
            format!(
                "IOMMU strict: {strict_groups} device group(s) flush the IOTLB on every DMA unmap"
            ),
        )
    } else if !groups.is_empty() {
        let mode = if groups.contains_key("DMA-FQ") {
            "lazy"
        } else {
            "passthrough"
        };
        (
            Severity::Ok,
            format!("IOMMU {mode}: DMA unmaps are batched or untranslated"),
        )
    } else {
        match &requested {
            Some(("strict", how)) => (
                Severity::Info,
                format!("IOMMU strict by {how}, but no IOMMU translates DMA here (no groups)"),
            ),
            Some((mode, how)) => (
                Severity::Ok,
                format!("IOMMU {mode} by {how}; no IOMMU translates DMA here"),
            ),
            None => (Severity::Ok, "no IOMMU translates DMA here".to_string()),
        }
    };
    let remedy = if severity >= Severity::Warn {
        let existing = facts
            .cmdline_option("iommu.strict")
            .map(|v| format!("iommu.strict={v}"));
        cmds::kernel_cmdline("iommu.strict=0", existing.as_deref())
    } else {
        Remedy::default()
    };
    Finding {
        id: "iommu_mode",
        group: Group::Kernel,
        subject: None,
        severity,
        title,
        evidence,
        why: "In strict mode every DMA unmap waits for an IOTLB invalidation; fast NVMe drives \
              and NICs lose up to half their throughput (a 2x gap between two kernels differing \
              only in this). Lazy mode batches invalidations; what it exposes: for a few \
              milliseconds a device can still reach memory just unmapped, which matters only \
              against malicious or buggy DMA-capable devices (Thunderbolt, untrusted PCIe)."
            .to_string(),
        reference: "kernel Documentation/admin-guide/kernel-parameters.txt (iommu.strict); \
                    drivers/iommu/Kconfig (IOMMU_DEFAULT_DMA_LAZY)"
            .to_string(),
        remedy,
    }
}

/// Mitigations whose cost is known to be large, with what they protect against.
/// Mitigations whose cost is known to be large: vulnerability file, the status it starts
/// with, and the cost.
const COSTLY: &[(&str, &str, &str)] = &[
    (
        "retbleed",
        "Mitigation: IBRS",
        "retbleed IBRS: up to ~25% on syscall-heavy work (Skylake-era Intel)",
    ),
    (
        "spectre_v2",
        "Mitigation: IBRS",
        "spectre_v2 IBRS (no eIBRS): a large cost on every kernel entry",
    ),
    (
        "spec_rstack_overflow",
        "Mitigation: Safe RET",
        "SRSO Safe RET: several % to ~20% on syscall-heavy work (AMD Zen)",
    ),
    (
        "gather_data_sampling",
        "Mitigation: Microcode",
        "GDS microcode: AVX gather instructions up to ~50% slower",
    ),
    (
        "mds",
        "Mitigation: Clear CPU buffers",
        "MDS buffer clearing: a cost on every kernel exit",
    ),
];

fn mitigations(facts: &Facts) -> Option<Finding> {
    let v = &facts.tunables.vulnerabilities;
    if v.is_empty() {
        return None;
    }
    let vulnerable: Vec<&str> = v
        .iter()
        .filter(|(_, s)| s.trim_start_matches("KVM: ").starts_with("Vulnerable"))
        .map(|(n, _)| n.as_str())
        .collect();
    let costly: Vec<&str> = COSTLY
        .iter()
        .filter(|(name, prefix, _)| v.get(*name).is_some_and(|s| s.starts_with(prefix)))
        .map(|(_, _, cost)| *cost)
        .collect();
    let cmdline = facts.cmdline_option("mitigations");
    let mut evidence = vec![Evidence::new(
        "/sys/devices/system/cpu/vulnerabilities/*",
        facts.tunables.mitigations.clone().unwrap_or_default(),
    )];
    for name in &vulnerable {
        evidence.push(Evidence::new(
            format!("/sys/devices/system/cpu/vulnerabilities/{name}"),
            v[*name].clone(),
        ));
    }
    if let Some(c) = &cmdline {
        evidence.push(Evidence::new("/proc/cmdline", format!("mitigations={c}")));
    }
    let off = cmdline.as_deref() == Some("off");
    let (severity, title) = if !vulnerable.is_empty() {
        (
            Severity::Warn,
            format!(
                "exposed: {}{}",
                vulnerable.join(", "),
                if off { " (mitigations=off)" } else { "" }
            ),
        )
    } else if !costly.is_empty() {
        (
            Severity::Info,
            format!("costly mitigations active: {}", costly.join("; ")),
        )
    } else {
        (
            Severity::Ok,
            "all mitigated or not affected, none of the known costly ones".to_string(),
        )
    };
    let remedy = if off {
        cmds::kernel_cmdline_remove("mitigations=off")
    } else if !vulnerable.is_empty() {
        Remedy {
            fix: Some(
                "# update the CPU microcode (intel-microcode / amd64-microcode) and the kernel, \
                 then reboot"
                    .to_string(),
            ),
            persist: None,
            revert: None,
            manual: true,
        }
    } else {
        Remedy::default()
    };
    Some(Finding {
        id: "cpu_mitigations",
        group: Group::Kernel,
        subject: None,
        severity,
        title,
        evidence,
        why: "Mitigations cost from ~0 to 30% on syscall- and context-switch-heavy work, \
              depending on CPU and kernel. Turning one off (mitigations=off, or per issue such \
              as retbleed=off) lets code on this machine (other users, containers, VM guests) \
              read kernel or other processes' memory through that side channel: consider it \
              only on single-tenant machines that run only trusted code."
            .to_string(),
        reference: "kernel docs, admin-guide/hw-vuln/ and kernel-parameters.txt (mitigations=)"
            .to_string(),
        remedy,
    })
}

fn preempt(facts: &Facts) -> Option<Finding> {
    let config = facts.config.as_ref()?;
    let (model, dynamic) = kconfig::preempt_model(config);
    let boot = facts.cmdline_option("preempt").filter(|_| dynamic);
    let effective = boot.clone().or(model.map(str::to_string))?;
    let mut evidence = vec![Evidence::new(
        config.source.to_string_lossy(),
        format!(
            "model {}{}",
            model.unwrap_or("?"),
            if dynamic { ", PREEMPT_DYNAMIC" } else { "" }
        ),
    )];
    if let Some(b) = &boot {
        evidence.push(Evidence::new("/proc/cmdline", format!("preempt={b}")));
    }
    let (severity, why) = match effective.as_str() {
        "none" | "voluntary" => (
            Severity::Ok,
            "Server preemption models: the kernel yields at explicit points, which favours \
             throughput.",
        ),
        "rt" => (
            Severity::Warn,
            "PREEMPT_RT makes nearly all kernel code preemptible and interrupts threaded: \
             bounded latency for real-time tasks, at a throughput cost for everything else.",
        ),
        _ => (
            Severity::Info,
            "Full (or lazy) preemption lowers scheduling latency for desktops and audio at a \
             small throughput cost for server workloads.",
        ),
    };
    let remedy = if severity >= Severity::Warn && dynamic {
        cmds::kernel_cmdline(
            "preempt=voluntary",
            boot.map(|b| format!("preempt={b}")).as_deref(),
        )
    } else if severity >= Severity::Warn {
        Remedy {
            fix: Some(
                "# boot a kernel built with CONFIG_PREEMPT_VOLUNTARY or CONFIG_PREEMPT_NONE"
                    .to_string(),
            ),
            persist: None,
            revert: None,
            manual: true,
        }
    } else {
        Remedy::default()
    };
    Some(Finding {
        id: "preempt_model",
        group: Group::Kernel,
        subject: None,
        severity,
        title: format!("preemption model {effective}"),
        evidence,
        why: why.to_string(),
        reference: "kernel/Kconfig.preempt; kernel-parameters.txt (preempt=)".to_string(),
        remedy,
    })
}

fn hz(facts: &Facts) -> Option<Finding> {
    let config = facts.config.as_ref()?;
    let hz = config.get("CONFIG_HZ")?;
    let nohz = ["CONFIG_NO_HZ_FULL", "CONFIG_NO_HZ_IDLE"]
        .iter()
        .find(|n| config.get(n) == Some("y"))
        .map_or("periodic tick", |n| n.trim_start_matches("CONFIG_"));
    let severity = if hz == "1000" {
        Severity::Info
    } else {
        Severity::Ok
    };
    Some(Finding {
        id: "hz",
        group: Group::Kernel,
        subject: None,
        severity,
        title: format!("HZ {hz} ({nohz})"),
        evidence: vec![Evidence::new(
            config.source.to_string_lossy(),
            format!("CONFIG_HZ={hz}, {nohz}"),
        )],
        why: "HZ is the timer tick rate: 1000 gives finer timeslices and timers for \
              interactive work at a little more interrupt overhead; 100-300 suits servers. \
              Two machines that differ only here can differ in latency tests."
            .to_string(),
        reference: "kernel/Kconfig.hz".to_string(),
        remedy: Remedy::default(),
    })
}

fn delayacct(facts: &Facts) -> Finding {
    let value = facts.sysctl.get("kernel.task_delayacct").copied();
    let on = value == Some(1) || facts.cmdline_has("delayacct");
    let mut evidence = Vec::new();
    match value {
        Some(v) => evidence.push(Evidence::new(
            "/proc/sys/kernel/task_delayacct",
            v.to_string(),
        )),
        None => evidence.push(Evidence::new(
            "/proc/sys/kernel/task_delayacct",
            "absent (kernel before 5.14: the delayacct boot option decides)",
        )),
    }
    Finding {
        id: "task_delayacct",
        group: Group::Kernel,
        subject: None,
        severity: if on { Severity::Ok } else { Severity::Info },
        title: if on {
            "task delay accounting on: per-process I/O wait is visible".to_string()
        } else {
            "task delay accounting off: per-process I/O wait (tacho top, iotop) is not measured"
                .to_string()
        },
        evidence,
        why: "Without delay accounting the kernel does not record how long each process waited \
              for block I/O or swap, so tools cannot say which process the disk is slowing \
              down. The cost is a few timestamps per wait."
            .to_string(),
        reference: "kernel docs, accounting/delay-accounting.rst".to_string(),
        remedy: match value {
            Some(v) if !on => cmds::sysctl("kernel.task_delayacct", "1", &v.to_string()),
            _ => Remedy::default(),
        },
    }
}

pub fn virtualization(facts: &Facts, out: &mut Vec<Finding>) {
    let host = &facts.host;
    let mut evidence: Vec<Evidence> = host
        .virtualization_evidence
        .iter()
        .map(|e| Evidence::new("/sys/class/dmi/id, /proc/cpuinfo", e))
        .collect();
    let Some(hv) = host.virtualization.as_deref() else {
        out.push(Finding {
            id: "virtualization",
            group: Group::Virtualization,
            subject: None,
            severity: Severity::Ok,
            title: "no hypervisor detected".to_string(),
            evidence,
            why: "No DMI string or CPU flag names a hypervisor; on non-x86 CPUs this does not \
                  prove bare metal."
                .to_string(),
            reference: "systemd-detect-virt(1) uses the same signals".to_string(),
            remedy: Remedy::default(),
        });
        return;
    };
    let virtual_disks: Vec<String> = facts
        .disks
        .iter()
        .filter_map(|d| {
            let (media, _) = super::devices::classify(d)?;
            (media == super::devices::Media::Virtual).then(|| {
                format!(
                    "{} ({})",
                    d.dev.name,
                    d.queue
                        .as_ref()
                        .and_then(|q| q.write_cache.clone())
                        .unwrap_or_default()
                )
            })
        })
        .collect();
    if !virtual_disks.is_empty() {
        evidence.push(Evidence::new(
            "/sys/block/*/queue/write_cache",
            virtual_disks.join(", "),
        ));
    }
    out.push(Finding {
        id: "virtualization",
        group: Group::Virtualization,
        subject: None,
        severity: Severity::Info,
        title: format!(
            "running under {}: the host's cache mode, storage and neighbours are not visible from here",
            if hv == "unidentified" { "an unidentified hypervisor" } else { hv }
        ),
        evidence,
        why: "A host cache (writeback, unsafe) can make disk benchmarks measure host RAM and \
              lose data on power failure; writethrough/directsync make every write wait. The \
              guest sees only whether a volatile cache is advertised (write_cache). Check on \
              the host: Proxmox `qm config VMID | grep -E '^(scsi|virtio|sata|ide)[0-9]'` \
              (cache=), libvirt `virsh dumpxml DOMAIN | grep \"driver name='qemu'\"`, a \
              cloud volume's IOPS and throughput limits; and CPU steal in tacho top."
            .to_string(),
        reference: "QEMU documentation, qemu(1) -drive cache= (writeback, none, writethrough, \
                    directsync, unsafe); Proxmox VE Administration Guide, QEMU/KVM Virtual \
                    Machines, Hard Disk (Cache)"
            .to_string(),
        remedy: Remedy::default(),
    });
}
