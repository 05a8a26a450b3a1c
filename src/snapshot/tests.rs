use std::os::unix::fs::PermissionsExt;

use super::diff::{Side, compare, flatten};
use super::*;
use crate::kernel::fixture::{symlink, write};
use crate::report::diff::{write_json as write_diff_json, write_text as write_diff_text};

/// A small machine: a few sysctls (one write-only, some per-boot), THP with khugepaged,
/// a kernel config in /boot, one virtio disk, two mounts.
fn machine(t: &Path) {
    write(t, "proc/sys/kernel/osrelease", "6.1.0-test\n");
    write(t, "proc/sys/kernel/hostname", "web1\n");
    write(
        t,
        "proc/sys/kernel/version",
        "#1 SMP PREEMPT_DYNAMIC Debian 6.1.0-1\n",
    );
    write(t, "proc/sys/kernel/random/boot_id", "0b4e0f0c-1\n");
    write(t, "proc/sys/kernel/random/entropy_avail", "256\n");
    write(t, "proc/sys/fs/file-nr", "1024\t0\t9223372036854775807\n");
    write(t, "proc/sys/vm/swappiness", "60\n");
    write(t, "proc/sys/vm/dirty_ratio", "20\n");
    write(t, "proc/sys/net/ipv4/conf/veth9f3a/rp_filter", "0\n");
    write(t, "proc/sys/vm/drop_caches", "0\n");
    std::fs::set_permissions(
        t.join("proc/sys/vm/drop_caches"),
        std::fs::Permissions::from_mode(0o200),
    )
    .unwrap();
    write(
        t,
        "proc/cmdline",
        "BOOT_IMAGE=/vmlinuz-6.1.0 root=/dev/vda1 ro quiet -- single\n",
    );
    write(
        t,
        "proc/cpuinfo",
        "model name\t: AMD EPYC 7763\nmicrocode\t: 0xa0011d1\nflags\t: fpu hypervisor\n",
    );
    write(
        t,
        "boot/config-6.1.0-test",
        "CONFIG_HZ=250\nCONFIG_IOMMU_DEFAULT_DMA_LAZY=y\n# CONFIG_IOMMU_DEFAULT_DMA_STRICT is not set\n",
    );
    let thp = "sys/kernel/mm/transparent_hugepage";
    write(t, &format!("{thp}/enabled"), "always [madvise] never\n");
    write(t, &format!("{thp}/khugepaged/defrag"), "1\n");
    write(t, &format!("{thp}/khugepaged/full_scans"), "42\n");
    let vda = "devices/pci0000:00/0000:00:02.0/virtio1/block/vda";
    write(t, &format!("sys/{vda}/dev"), "254:0\n");
    write(t, &format!("sys/{vda}/size"), "2097152\n");
    write(t, &format!("sys/{vda}/ro"), "0\n");
    for (attr, v) in [
        ("scheduler", "none [mq-deadline]"),
        ("rotational", "1"),
        ("nr_requests", "256"),
        ("read_ahead_kb", "128"),
        ("write_cache", "write back"),
        ("logical_block_size", "512"),
        ("physical_block_size", "512"),
    ] {
        write(t, &format!("sys/{vda}/queue/{attr}"), &format!("{v}\n"));
    }
    symlink(t, "sys/block/vda", &format!("../{vda}"));
    symlink(t, "sys/class/block/vda", &format!("../../{vda}"));
    write(
        t,
        "proc/self/mountinfo",
        "22 1 0:21 / /proc rw,relatime - proc proc rw\n\
         30 1 254:1 / / rw,relatime - ext4 /dev/vda1 rw\n",
    );
    write(t, "proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n");
}

fn capture(t: &Path) -> serde_json::Value {
    serde_json::to_value(Snapshot::capture(&SysRoot::under(t))).unwrap()
}

#[test]
fn captures_configuration_without_noise() {
    let dir = tempfile::tempdir().unwrap();
    machine(dir.path());
    let v = capture(dir.path());
    assert_eq!(v["schema"], SCHEMA);
    assert_eq!(v["kernel"]["release"], "6.1.0-test");
    assert_eq!(
        v["kernel"]["config"]["CONFIG_IOMMU_DEFAULT_DMA_STRICT"],
        "n"
    );
    assert!(
        v["kernel"]["config_source"]
            .as_str()
            .unwrap()
            .ends_with("boot/config-6.1.0-test")
    );
    assert_eq!(v["host"]["microcode"], "0xa0011d1");
    let sysctl = v["sysctl"].as_object().unwrap();
    assert_eq!(sysctl["vm.swappiness"], "60");
    for noise in [
        "kernel.random.boot_id",
        "kernel.random.entropy_avail",
        "fs.file-nr",
        "net.ipv4.conf.veth9f3a.rp_filter",
        "vm.drop_caches",
    ] {
        assert!(!sysctl.contains_key(noise), "{noise}");
    }
    assert!(
        v["unreadable"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u == "sysctl vm.drop_caches: write-only")
    );
    assert_eq!(v["thp"]["enabled"], "madvise");
    assert_eq!(v["thp"]["khugepaged/defrag"], "1");
    assert!(v["thp"].get("khugepaged/full_scans").is_none());
    assert_eq!(v["devices"][0]["name"], "vda");
    assert_eq!(v["devices"][0]["scheduler"], "mq-deadline");
    let mounts = v["mounts"].as_array().unwrap();
    assert_eq!(mounts.len(), 1, "procfs is left out");
    assert_eq!(mounts[0]["mount_point"], "/");
}

#[test]
fn two_snapshots_of_an_unchanged_machine_are_equal() {
    let dir = tempfile::tempdir().unwrap();
    machine(dir.path());
    let a = capture(dir.path());
    // Per-boot values change: a reboot, time passing.
    write(dir.path(), "proc/sys/kernel/random/boot_id", "77aa-2\n");
    write(
        dir.path(),
        "sys/kernel/mm/transparent_hugepage/khugepaged/full_scans",
        "43\n",
    );
    let mut b = capture(dir.path());
    b["taken_at_unix_s"] = serde_json::json!(1);
    assert!(compare(&flatten(&a), &flatten(&b)).is_empty());
}

#[test]
fn flatten_keys() {
    let dir = tempfile::tempdir().unwrap();
    machine(dir.path());
    let flat = flatten(&capture(dir.path()));
    assert_eq!(flat["sysctl.vm.swappiness"], "60");
    assert_eq!(flat["config.CONFIG_HZ"], "250");
    assert!(
        !flat.contains_key("config.CONFIG_IOMMU_DEFAULT_DMA_STRICT"),
        "n is absent"
    );
    assert_eq!(flat["cmdline.root"], "/dev/vda1");
    assert_eq!(flat["cmdline.quiet"], "present");
    assert!(
        !flat.contains_key("cmdline.single"),
        "init's arguments after --"
    );
    assert!(!flat.contains_key("cmdline.BOOT_IMAGE"));
    assert_eq!(flat["devices.vda.scheduler"], "mq-deadline");
    assert_eq!(flat["mounts./.options"], "rw,relatime");
    assert!(
        !flat
            .keys()
            .any(|k| k.starts_with("unreadable") || k == "taken_at_unix_s")
    );
}

#[test]
fn iommu_strict_difference_comes_first_explained() {
    let dir = tempfile::tempdir().unwrap();
    machine(dir.path());
    let a = capture(dir.path());
    write(
        dir.path(),
        "boot/config-6.1.0-test",
        "CONFIG_HZ=250\nCONFIG_IOMMU_DEFAULT_DMA_STRICT=y\n# CONFIG_IOMMU_DEFAULT_DMA_LAZY is not set\n\
         CONFIG_EXT4_FS=y\n",
    );
    write(dir.path(), "proc/sys/vm/dirty_ratio", "40\n");
    write(dir.path(), "proc/sys/kernel/pid_max", "4194304\n");
    let b = capture(dir.path());
    let diffs = compare(&flatten(&a), &flatten(&b));
    let keys: Vec<&str> = diffs.iter().map(|d| d.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "config.CONFIG_IOMMU_DEFAULT_DMA_STRICT",
            "config.CONFIG_IOMMU_DEFAULT_DMA_LAZY",
            "sysctl.vm.dirty_ratio",
            "config.CONFIG_EXT4_FS",
            "sysctl.kernel.pid_max",
        ]
    );
    let first = &diffs[0];
    assert_eq!((first.a.as_deref(), first.b.as_deref()), (None, Some("y")));
    assert!(first.relevant);
    assert!(
        first
            .explanation
            .as_deref()
            .unwrap()
            .contains("strict flushes the IOTLB")
    );
    assert!(!diffs[3].relevant && diffs[3].explanation.is_none());

    let sa = Side::from_value("a.json", &a);
    let sb = Side::from_value("b.json", &b);
    let mut text = Vec::new();
    write_diff_text(&mut text, &sa, &sb, &diffs, false).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.starts_with(
            "5 differences, 3 performance-relevant; first: config.CONFIG_IOMMU_DEFAULT_DMA_STRICT not set vs y\n"
        ),
        "{text}"
    );
    assert!(text.contains("A: a.json (host web1, kernel 6.1.0-test)"));
    let mut json = Vec::new();
    write_diff_json(&mut json, &sa, &sb, &diffs).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(v["schema"], "tacho.diff.v1");
    assert_eq!(v["differences_relevant"], 3);
    assert_eq!(
        v["differences"][0]["key"],
        "config.CONFIG_IOMMU_DEFAULT_DMA_STRICT"
    );
    assert_eq!(v["differences"][0]["a"], serde_json::Value::Null);
}
