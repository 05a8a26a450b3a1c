//! Which differences matter for performance, in what order, and why (one line each).
//! The order follows how much each setting has been seen to cost: IOMMU mode (2x on NVMe),
//! mitigations, preemption, THP, schedulers, writeback, then the rest.

/// Patterns (`*` matches any text) with the explanation of a difference in them; the first
/// matching entry wins and its position is the difference's rank.
const EXPLAINED: &[(&[&str], &str)] = &[
    (
        &[
            "config.CONFIG_IOMMU_DEFAULT_DMA_STRICT",
            "config.CONFIG_IOMMU_DEFAULT_*",
            "cmdline.iommu",
            "cmdline.iommu.*",
            "cmdline.intel_iommu",
            "cmdline.amd_iommu",
            "iommu_groups.*",
        ],
        "IOMMU DMA mode: strict flushes the IOTLB on every DMA unmap (fast NVMe and NICs lose \
         up to 2x); lazy batches the flushes, passthrough skips translation",
    ),
    (
        &[
            "cmdline.mitigations",
            "vulnerabilities.*",
            "config.CONFIG_MITIGATION_*",
            "config.CONFIG_CPU_MITIGATIONS",
            "config.CONFIG_RETPOLINE",
            "config.CONFIG_PAGE_TABLE_ISOLATION",
            "cmdline.spectre_v2",
            "cmdline.retbleed",
            "cmdline.spec_rstack_overflow",
            "cmdline.pti",
            "cmdline.nopti",
            "cmdline.mds",
            "cmdline.gather_data_sampling",
            "host.microcode",
        ],
        "CPU vulnerability mitigations (and the microcode they rely on): 0-30% on syscall- and \
         context-switch-heavy work; off means exposure to the side channel",
    ),
    (
        &["config.CONFIG_PREEMPT*", "cmdline.preempt"],
        "preemption model: full and RT preemption trade server throughput for lower latency",
    ),
    (
        &["config.CONFIG_HZ*", "config.CONFIG_NO_HZ*", "cmdline.nohz*"],
        "timer tick rate: changes timeslice length and timer interrupt overhead",
    ),
    (
        &["thp.*", "cmdline.transparent_hugepage"],
        "transparent huge pages: always can double system CPU (compaction, khugepaged) and \
         spike latency; madvise limits huge pages to programs that ask",
    ),
    (
        &["devices.*.scheduler"],
        "I/O scheduler: none suits NVMe and virtual disks, mq-deadline or bfq rotational ones",
    ),
    (
        &[
            "devices.*.nr_requests",
            "devices.*.read_ahead_kb",
            "devices.*.write_cache",
            "devices.*.rotational",
        ],
        "block queue setting: requests in flight, read-ahead, or whether flushes are sent",
    ),
    (
        &["sysctl.vm.dirty_*"],
        "writeback limits: how much dirty data waits in RAM before writers are throttled",
    ),
    (
        &[
            "sysctl.vm.swappiness",
            "sysctl.vm.zone_reclaim_mode",
            "sysctl.kernel.numa_balancing",
            "sysctl.vm.overcommit_memory",
            "sysctl.vm.min_free_kbytes",
            "sysctl.vm.vfs_cache_pressure",
            "sysctl.vm.nr_hugepages",
            "swap.*",
        ],
        "memory management: swapping, NUMA placement and reclaim behaviour",
    ),
    (
        &[
            "cpu.governor",
            "cpu.driver",
            "cpu.boost",
            "cpu.intel_no_turbo",
            "cpu.pstate_status",
            "cpu.energy_performance_preference",
            "cpu.scaling_max_khz",
            "cmdline.intel_pstate",
            "cmdline.amd_pstate",
        ],
        "CPU frequency: governor, driver, turbo and caps decide how fast busy cores run",
    ),
    (
        &[
            "cpu.idle_*",
            "cmdline.idle",
            "cmdline.intel_idle.max_cstate",
            "cmdline.processor.max_cstate",
        ],
        "CPU idle states: deeper C-states save power but add wake-up latency",
    ),
    (
        &["mounts.*.options", "mounts.*.fs_type"],
        "mount: filesystem and options (atime, discard, barriers, journal mode)",
    ),
    (
        &["sysctl.kernel.task_delayacct", "cmdline.delayacct"],
        "delay accounting: per-process I/O wait visible or not (a few timestamps per wait)",
    ),
    (
        &[
            "sysctl.kernel.sched_*",
            "config.CONFIG_SCHED_*",
            "cmdline.isolcpus",
            "cmdline.nohz_full",
        ],
        "CPU scheduler tuning or isolation",
    ),
    (
        &["sysctl.net.core.*", "sysctl.net.ipv4.tcp_*"],
        "network stack buffers and TCP behaviour",
    ),
    (
        &["kernel.release"],
        "kernel version: schedulers, drivers and defaults change between releases",
    ),
    (
        &[
            "host.cpu_model",
            "host.cpus",
            "host.mem_total_bytes",
            "host.numa_nodes",
            "host.virtualization",
            "devices.*.model",
        ],
        "hardware: different CPU, memory, disk or hypervisor",
    ),
];

/// The rank of a difference in `key` (its entry, then the first pattern it matches within
/// the entry) and its explanation; `None` when it is not known to matter for performance.
pub fn explain(key: &str) -> Option<((usize, usize), &'static str)> {
    EXPLAINED
        .iter()
        .enumerate()
        .find_map(|(rank, (patterns, why))| {
            let sub = patterns.iter().position(|p| glob(p, key))?;
            Some(((rank, sub), *why))
        })
}

/// `*` matches any run of characters (including dots); everything else literally.
pub(crate) fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, rest) = parts.split_first().expect("split yields one part at least");
    let Some(mut remaining) = text.strip_prefix(first) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return remaining.is_empty();
    };
    for part in middle {
        match remaining.find(part) {
            Some(i) => remaining = &remaining[i + part.len()..],
            None => return false,
        }
    }
    remaining.len() >= last.len() && remaining.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("a.*", "a.b.c"));
        assert!(glob("devices.*.scheduler", "devices.vda.scheduler"));
        assert!(!glob("devices.*.scheduler", "devices.vda.nr_requests"));
        assert!(glob("x", "x"));
        assert!(!glob("x", "xy"));
        assert!(glob("*", ""));
    }

    #[test]
    fn iommu_first_then_mitigations() {
        let (iommu, why) = explain("config.CONFIG_IOMMU_DEFAULT_DMA_STRICT").unwrap();
        assert_eq!(iommu, (0, 0));
        assert!(explain("config.CONFIG_IOMMU_DEFAULT_DMA_LAZY").unwrap().0 > iommu);
        assert!(why.contains("strict"));
        assert!(explain("vulnerabilities.retbleed").unwrap().0 > iommu);
        assert!(explain("cmdline.iommu.strict").is_some());
        assert!(explain("config.CONFIG_EXT4_FS").is_none());
        assert!(explain("sysctl.vm.dirty_ratio").is_some());
    }
}
