use super::*;
use crate::kernel::fixture::write;
use proptest::prelude::*;

/// First CPU of /proc/cpuinfo on this project's Firecracker VM.
const CPUINFO: &str = include_str!("../../../tests/fixtures/kernel/cpuinfo-firecracker-amd.txt");
const MEMINFO: &str = include_str!("../../../tests/fixtures/kernel/meminfo-head.txt");

#[test]
fn reads_a_firecracker_like_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path();
    write(t, "proc/sys/kernel/hostname", "vm\n");
    write(t, "proc/sys/kernel/osrelease", "6.18.44-fc-v595\n");
    write(t, "proc/cpuinfo", CPUINFO);
    write(
        t,
        "proc/meminfo",
        "MemTotal:       24684096 kB\nMemFree: 1 kB\n",
    );
    write(t, "sys/devices/system/cpu/online", "0-1\n");
    write(
        t,
        "usr/lib/os-release",
        "NAME=x\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n",
    );
    let host = Host::read(&SysRoot::under(t));
    assert_eq!(host.hostname.as_deref(), Some("vm"));
    assert_eq!(host.kernel.as_deref(), Some("6.18.44-fc-v595"));
    assert_eq!(host.os.as_deref(), Some("Debian GNU/Linux 12 (bookworm)"));
    assert_eq!(host.cpu_model.as_deref(), Some("AMD EPYC"));
    assert_eq!(host.cpus, Some(2));
    assert_eq!(host.mem_total_bytes, Some(24684096 * 1024));
    assert_eq!(host.virtualization.as_deref(), Some("unidentified"));
    assert!(
        host.virtualization_evidence
            .iter()
            .any(|e| e.contains("no DMI"))
    );
    assert!(host.unreadable.is_empty(), "{:?}", host.unreadable);
}

#[test]
fn missing_files_give_none_and_bad_ones_are_listed() {
    let dir = tempfile::tempdir().unwrap();
    let empty = Host::read(&SysRoot::under(dir.path()));
    assert_eq!(empty.hostname, None);
    assert_eq!(
        (empty.cpus, empty.mem_total_bytes, empty.os),
        (None, None, None)
    );
    assert_eq!(empty.virtualization, None);
    assert!(empty.unreadable.is_empty());

    write(dir.path(), "sys/devices/system/cpu/online", "zero\n");
    write(dir.path(), "proc/meminfo", "MemTotal: lots\n");
    let bad = Host::read(&SysRoot::under(dir.path()));
    assert_eq!((bad.cpus, bad.mem_total_bytes), (None, None));
    assert_eq!(bad.unreadable.len(), 2);
    assert!(
        bad.unreadable[0].contains("cpu/online"),
        "{:?}",
        bad.unreadable
    );
}

#[test]
fn etc_os_release_wins_and_kvm_is_named_from_dmi() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path();
    write(
        t,
        "etc/os-release",
        "PRETTY_NAME='Ubuntu 24.04 \\\"LTS\\\"'\n",
    );
    write(t, "usr/lib/os-release", "PRETTY_NAME=\"other\"\n");
    write(t, "sys/class/dmi/id/sys_vendor", "QEMU\n");
    write(t, "sys/class/dmi/id/product_name", "KVM Virtual Machine\n");
    let host = Host::read(&SysRoot::under(t));
    assert_eq!(host.os.as_deref(), Some("Ubuntu 24.04 \"LTS\""));
    assert_eq!(host.virtualization.as_deref(), Some("kvm"));
}

#[test]
fn virtualization_table() {
    let detect = |s: VirtSignals| detect_virtualization(&s).0;
    let dmi = |v, p| VirtSignals {
        sys_vendor: Some(v),
        product_name: Some(p),
        has_dmi: true,
        ..VirtSignals::default()
    };
    assert_eq!(
        detect(dmi("VMware, Inc.", "VMware7,1")).as_deref(),
        Some("vmware")
    );
    assert_eq!(
        detect(dmi("Microsoft Corporation", "Virtual Machine")).as_deref(),
        Some("microsoft")
    );
    assert_eq!(detect(dmi("Dell Inc.", "PowerEdge R740")), None);
    let xen = VirtSignals {
        hypervisor_type: Some("xen"),
        has_dmi: true,
        ..VirtSignals::default()
    };
    assert_eq!(detect(xen).as_deref(), Some("xen"));
}

#[test]
fn small_parsers() {
    assert_eq!(count_cpu_list("0-3,8-11\n"), Ok(8));
    assert_eq!(count_cpu_list("0"), Ok(1));
    assert!(count_cpu_list("3-1").is_err());
    assert!(count_cpu_list("").is_err());
    assert_eq!(mem_total_bytes(MEMINFO).map(|b| b % 1024), Ok(0));
    assert!(mem_total_bytes("MemTotal: 5 MB").is_err());
    assert_eq!(pretty_name("PRETTY_NAME=\n"), None);
    assert_eq!(
        parse_cpuinfo("cpu\t\t: POWER9 (raw)\n"),
        (Some("POWER9 (raw)".into()), false)
    );
}

#[test]
fn real_machine_does_not_panic() {
    let host = Host::read(&SysRoot::real());
    assert!(host.kernel.is_some(), "{host:?}");
}

proptest! {
    #[test]
    fn text_parsers_never_panic(s in "\\PC*") {
        let _ = pretty_name(&s);
        let _ = parse_cpuinfo(&s);
        let _ = count_cpu_list(&s);
        let _ = mem_total_bytes(&s);
    }

    #[test]
    fn cpu_lists_never_panic(s in "[0-9,-]{0,24}") {
        let _ = count_cpu_list(&s);
    }
}

#[test]
fn microcode_and_numa_nodes() {
    let cpuinfo = "processor\t: 0\nmicrocode\t: 0x1000065\nmodel name\t: AMD EPYC\n";
    assert_eq!(
        cpuinfo_field(cpuinfo, "microcode").as_deref(),
        Some("0x1000065")
    );
    assert_eq!(cpuinfo_field(cpuinfo, "nope"), None);
    let dir = tempfile::tempdir().unwrap();
    let root = SysRoot::under(dir.path());
    assert_eq!(numa_nodes(&root).unwrap(), None);
    crate::kernel::fixture::write(dir.path(), "sys/devices/system/node/online", "0-1\n");
    assert_eq!(numa_nodes(&root).unwrap(), Some(2));
    crate::kernel::fixture::write(dir.path(), "sys/devices/system/node/online", "x\n");
    assert!(numa_nodes(&root).is_err());
}
