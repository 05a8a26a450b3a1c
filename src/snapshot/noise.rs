//! Values that differ between two snapshots of the same, unchanged machine: per-boot
//! identifiers, random numbers, counters and gauges, timestamps, and names that container
//! runtimes make up (veth interfaces). Snapshots leave them out and `diff` ignores them.

/// Flattened keys (see [`super::diff::flatten`]) that are noise (`*` matches any text).
const NOISE: &[&str] = &[
    "schema",
    "tool_version",
    "taken_at_unix_s",
    "unreadable*",
    "host.hostname",
    "host.machine_id",
    "host.labels*",
    "host.virtualization_evidence*",
    "sysctl.kernel.random.boot_id",
    "sysctl.kernel.random.uuid",
    "sysctl.kernel.random.entropy_avail",
    "sysctl.kernel.hostname",
    "sysctl.kernel.ns_last_pid",
    "sysctl.kernel.hung_task_detect_count",
    "sysctl.net.core.netdev_rss_key",
    "sysctl.net.ipv4.tcp_fastopen_key",
    "sysctl.kernel.pty.nr",
    "sysctl.kernel.tainted",
    // Lowered by the kernel itself when perf interrupts take too long.
    "sysctl.kernel.perf_event_max_sample_rate",
    "sysctl.fs.dentry-state",
    "sysctl.fs.inode-nr",
    "sysctl.fs.inode-state",
    "sysctl.fs.file-nr",
    "sysctl.fs.aio-nr",
    "sysctl.fs.quota.*",
    "sysctl.fs.binfmt_misc.*",
    "sysctl.dev.cdrom.info",
    "sysctl.net.netfilter.nf_conntrack_count",
    "sysctl.fs.fanotify.*",
    "sysctl.kernel.sched_domain.*",
    "thp.khugepaged/full_scans",
    "thp.khugepaged/pages_collapsed",
    "swap.*.used_bytes",
    "cmdline.initrd",
    "cmdline.BOOT_IMAGE",
];

/// Network interface name prefixes that container runtimes and hypervisors generate.
const GENERATED_IFACES: &[&str] = &[
    "veth", "vnet", "tap", "cali", "lxc", "cni", "flannel", "tun", "br-",
];

/// True when the flattened key `key` is per-boot or per-second noise.
pub fn is_noise(key: &str) -> bool {
    NOISE.iter().any(|p| super::explain::glob(p, key)) || generated_interface(key)
}

/// `sysctl.net.ipv4.conf.veth12ab.rp_filter` and friends.
fn generated_interface(key: &str) -> bool {
    let Some(rest) = key.strip_prefix("sysctl.net.") else {
        return false;
    };
    rest.split('.').any(|part| {
        GENERATED_IFACES
            .iter()
            .any(|g| part.starts_with(g) && part.len() > g.len())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_boot_values_and_generated_names_are_noise() {
        for key in [
            "sysctl.kernel.random.boot_id",
            "sysctl.fs.quota.lookups",
            "sysctl.net.ipv4.conf.veth1a2b3c.rp_filter",
            "sysctl.net.ipv6.neigh.cali0123.retrans_time_ms",
            "taken_at_unix_s",
            "swap./dev/zram0.used_bytes",
        ] {
            assert!(is_noise(key), "{key}");
        }
        for key in [
            "sysctl.vm.swappiness",
            "sysctl.net.ipv4.conf.eth0.rp_filter",
            "sysctl.net.ipv4.tcp_rmem",
            "config.CONFIG_HZ",
            "swap./dev/zram0.size_bytes",
        ] {
            assert!(!is_noise(key), "{key}");
        }
    }
}
