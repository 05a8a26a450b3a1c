use super::*;
use crate::kernel::fixture::write;
use proptest::prelude::*;

/// This project's Firecracker VM: THP madvise, no cpufreq, a mix of vulnerability states.
fn firecracker_like(t: &Path) {
    write(
        t,
        "sys/kernel/mm/transparent_hugepage/enabled",
        "always [madvise] never\n",
    );
    write(
        t,
        "sys/kernel/mm/transparent_hugepage/defrag",
        "always defer defer+madvise [madvise] never\n",
    );
    let v = "sys/devices/system/cpu/vulnerabilities";
    write(t, &format!("{v}/mds"), "Not affected\n");
    write(t, &format!("{v}/meltdown"), "Not affected\n");
    write(t, &format!("{v}/spec_store_bypass"), "Vulnerable\n");
    write(
        t,
        &format!("{v}/spec_rstack_overflow"),
        "Vulnerable: Safe RET, no microcode\n",
    );
    write(
        t,
        &format!("{v}/spectre_v1"),
        "Mitigation: usercopy/swapgs barriers and __user pointer sanitization\n",
    );
    write(
        t,
        &format!("{v}/itlb_multihit"),
        "KVM: Mitigation: VMX disabled\n",
    );
    write(t, "sys/devices/system/cpu/online", "0-1\n");
    write(t, "sys/devices/system/cpu/cpu0/uevent", "");
    write(
        t,
        "proc/cmdline",
        "mitigations=auto,no_guest_host console=ttyS0 -- --mitigations=off\n",
    );
}

#[test]
fn reads_a_firecracker_like_fixture() {
    let dir = tempfile::tempdir().unwrap();
    firecracker_like(dir.path());
    let t = SystemTunables::read(&SysRoot::under(dir.path()));
    assert_eq!(t.thp_enabled.as_deref(), Some("madvise"));
    assert_eq!(t.thp_defrag.as_deref(), Some("madvise"));
    assert_eq!(t.cpu_governor, None);
    assert_eq!(
        t.mitigations.as_deref(),
        Some(
            "vulnerable: spec_rstack_overflow, spec_store_bypass; \
             mitigated: itlb_multihit, spectre_v1; 2 not affected"
        )
    );
    assert_eq!(t.mitigations_cmdline.as_deref(), Some("auto,no_guest_host"));
    assert_eq!(t.vulnerabilities.len(), 6);
    assert!(t.unreadable.is_empty(), "{:?}", t.unreadable);
}

#[test]
fn governors_are_summarized() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path();
    for (cpu, gov) in [(0, "performance"), (1, "performance"), (10, "powersave")] {
        write(
            t,
            &format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"),
            &format!("{gov}\n"),
        );
    }
    write(
        t,
        "sys/devices/system/cpu/cpufreq/policy0/scaling_governor",
        "x\n",
    );
    let root = SysRoot::under(t);
    let per_cpu = cpu_governors(&root).unwrap();
    assert_eq!(per_cpu.len(), 3);
    assert_eq!(per_cpu[&10], "powersave");
    assert_eq!(
        SystemTunables::read(&root).cpu_governor.as_deref(),
        Some("mixed: performance, powersave")
    );
    std::fs::write(
        t.join("sys/devices/system/cpu/cpu10/cpufreq/scaling_governor"),
        "performance",
    )
    .unwrap();
    assert_eq!(
        SystemTunables::read(&root).cpu_governor.as_deref(),
        Some("performance")
    );
}

#[test]
fn empty_tree_gives_none_and_bad_thp_file_is_listed() {
    let dir = tempfile::tempdir().unwrap();
    let empty = SystemTunables::read(&SysRoot::under(dir.path()));
    assert_eq!(
        (empty.thp_enabled, empty.cpu_governor, empty.mitigations),
        (None, None, None)
    );
    assert!(empty.unreadable.is_empty());

    write(
        dir.path(),
        "sys/kernel/mm/transparent_hugepage/enabled",
        "always madvise never\n",
    );
    let bad = SystemTunables::read(&SysRoot::under(dir.path()));
    assert_eq!(bad.thp_enabled, None);
    assert_eq!(bad.unreadable.len(), 1);
    assert!(bad.unreadable[0].contains("transparent_hugepage/enabled"));
}

#[test]
fn queue_settings_of_a_disk_and_none_for_a_partition() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path();
    let q = "sys/class/block/vda/queue";
    write(
        t,
        &format!("{q}/scheduler"),
        "none [mq-deadline] kyber bfq \n",
    );
    write(t, &format!("{q}/nr_requests"), "256\n");
    write(t, &format!("{q}/read_ahead_kb"), "8192\n");
    write(t, &format!("{q}/write_cache"), "write back\n");
    write(t, "sys/class/block/vda1/partition", "1\n");
    let root = SysRoot::under(t);
    let vda = QueueTunables::read(&root, "vda").unwrap().unwrap();
    assert_eq!(
        vda,
        QueueTunables {
            device: "vda".into(),
            scheduler: Some("mq-deadline".into()),
            nr_requests: Some(256),
            read_ahead_kb: Some(8192),
            write_cache: Some("write back".into()),
        }
    );
    assert_eq!(QueueTunables::read(&root, "vda1").unwrap(), None);

    write(t, &format!("{q}/nr_requests"), "lots\n");
    let err = QueueTunables::read(&root, "vda").unwrap_err();
    assert!(err.to_string().contains("vda/queue/nr_requests"), "{err}");
}

#[test]
fn the_real_system_reads_without_panicking() {
    let root = SysRoot::real();
    let t = SystemTunables::read(&root);
    if Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
        assert!(t.thp_enabled.is_some(), "{t:?}");
    }
}

#[test]
fn cmdline_option_table() {
    assert_eq!(
        cmdline_option("quiet mitigations=off", "mitigations").as_deref(),
        Some("off")
    );
    assert_eq!(
        cmdline_option("mitigations=auto mitigations=off", "mitigations").as_deref(),
        Some("off")
    );
    assert_eq!(cmdline_option("-- mitigations=off", "mitigations"), None);
    assert_eq!(cmdline_option("nomitigations=off", "mitigations"), None);
}

proptest! {
    #[test]
    fn parsers_never_panic(s in "\\PC*") {
        let _ = bracketed_choice(&s);
        let _ = cmdline_option(&s, "mitigations");
        let map: BTreeMap<String, String> = s.lines().enumerate().map(|(i, l)| (i.to_string(), l.to_string())).collect();
        let _ = summarize_vulnerabilities(&map);
    }
}

#[test]
fn the_queue_of_the_real_root_disk() {
    use std::os::unix::fs::MetadataExt;
    let root = SysRoot::real();
    let dev = std::fs::metadata("/").unwrap().dev();
    let devno = (libc::major(dev), libc::minor(dev));
    let Ok(disk) = crate::kernel::blockdev::resolve(&root, devno.0, devno.1) else {
        eprintln!("SKIP: / is not on a block device with a sysfs entry");
        return;
    };
    let t = Tunables::read(&root, &[devno, devno]);
    assert_eq!(t.devices.len(), 1, "{t:?}");
    assert_eq!(t.devices[0].device, disk.disk);
    assert!(t.devices[0].nr_requests.is_some(), "{t:?}");
}
