//! Every rule against fixture trees: a healthy server where every rule is ok, then one
//! change per test that must turn that rule (and only that subject) to its warning.

use std::path::Path;

use super::*;
use crate::kernel::fixture::{mkdir, symlink, write};
use crate::report::check::{document, write_text};
use crate::report::fix_script::{ScriptKind, write_script};
use tempfile::TempDir;

const NVME: &str = "devices/pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme0";
const SATA: &str = "devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block";
const VIRTIO: &str = "devices/pci0000:00/0000:00:02.0/virtio1/block";
const VIRTUAL: &str = "devices/virtual/block";

struct Tree {
    dir: TempDir,
}

/// Queue settings of a fixture disk.
struct Queue<'a> {
    rotational: &'a str,
    scheduler: &'a str,
    nr_requests: u64,
    read_ahead_kb: u64,
    write_cache: &'a str,
    discard_max_bytes: u64,
}

impl Tree {
    /// A bare-metal server where every rule is ok: NVMe root (ext4, ordered journal, fstrim
    /// timer), an HDD holding /data (xfs, noatime), swap on zram, an idle md array.
    fn healthy() -> Tree {
        let tree = Tree {
            dir: tempfile::tempdir().unwrap(),
        };
        let t = tree.path();
        write(
            t,
            "proc/cmdline",
            "BOOT_IMAGE=/vmlinuz root=/dev/nvme0n1p2 ro quiet\n",
        );
        write(t, "proc/sys/kernel/osrelease", "6.1.0-test\n");
        write(t, "proc/sys/kernel/hostname", "db1\n");
        write(
            t,
            "boot/config-6.1.0-test",
            "CONFIG_HZ_250=y\nCONFIG_HZ=250\nCONFIG_NO_HZ_IDLE=y\nCONFIG_PREEMPT_VOLUNTARY=y\n\
             # CONFIG_PREEMPT is not set\n# CONFIG_IOMMU_DEFAULT_DMA_STRICT is not set\n\
             CONFIG_IOMMU_DEFAULT_DMA_LAZY=y\n",
        );
        write(
            t,
            "proc/cpuinfo",
            "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Gold 6338\nmicrocode\t: 0xd000389\n\
             flags\t\t: fpu sse2\n",
        );
        write(t, "sys/class/dmi/id/sys_vendor", "Dell Inc.\n");
        write(t, "sys/class/dmi/id/product_name", "PowerEdge R650\n");
        write(t, "sys/devices/system/cpu/online", "0-1\n");
        write(t, "sys/devices/system/node/online", "0\n");
        let thp = "sys/kernel/mm/transparent_hugepage";
        write(t, &format!("{thp}/enabled"), "always [madvise] never\n");
        write(
            t,
            &format!("{thp}/defrag"),
            "always defer defer+madvise [madvise] never\n",
        );
        write(
            t,
            "proc/vmstat",
            "nr_free_pages 100\ncompact_stall 3\ncompact_fail 1\nthp_fault_alloc 10\n\
             thp_fault_fallback 0\n",
        );
        write(
            t,
            "proc/meminfo",
            "MemTotal:       16777216 kB\nMemFree:         4194304 kB\nMemAvailable:    8388608 kB\n",
        );
        for (name, value) in [
            ("vm/swappiness", "60"),
            ("vm/dirty_ratio", "20"),
            ("vm/dirty_background_ratio", "10"),
            ("vm/dirty_bytes", "0"),
            ("vm/dirty_background_bytes", "0"),
            ("vm/zone_reclaim_mode", "0"),
            ("vm/overcommit_memory", "0"),
            ("kernel/numa_balancing", "1"),
            ("kernel/task_delayacct", "1"),
            ("dev/raid/speed_limit_max", "200000"),
        ] {
            write(t, &format!("proc/sys/{name}"), &format!("{value}\n"));
        }
        let cpu = "sys/devices/system/cpu";
        for n in 0..2 {
            write(
                t,
                &format!("{cpu}/cpu{n}/cpufreq/scaling_governor"),
                "performance\n",
            );
        }
        write(
            t,
            &format!("{cpu}/cpu0/cpufreq/scaling_driver"),
            "intel_pstate\n",
        );
        write(
            t,
            &format!("{cpu}/cpu0/cpufreq/scaling_max_freq"),
            "3200000\n",
        );
        write(
            t,
            &format!("{cpu}/cpu0/cpufreq/cpuinfo_max_freq"),
            "3200000\n",
        );
        write(t, &format!("{cpu}/intel_pstate/no_turbo"), "0\n");
        write(t, &format!("{cpu}/intel_pstate/status"), "active\n");
        write(t, &format!("{cpu}/cpuidle/current_driver"), "intel_idle\n");
        for (n, name, latency) in [(0, "POLL", 0), (1, "C1", 2), (2, "C6", 170)] {
            let s = format!("{cpu}/cpu0/cpuidle/state{n}");
            write(t, &format!("{s}/name"), &format!("{name}\n"));
            write(t, &format!("{s}/latency"), &format!("{latency}\n"));
            write(t, &format!("{s}/disable"), "0\n");
        }
        let v = format!("{cpu}/vulnerabilities");
        write(t, &format!("{v}/meltdown"), "Not affected\n");
        write(
            t,
            &format!("{v}/spectre_v2"),
            "Mitigation: Enhanced / Automatic IBRS\n",
        );
        write(
            t,
            &format!("{v}/spec_store_bypass"),
            "Mitigation: Speculative Store Bypass disabled via prctl\n",
        );
        write(t, "sys/kernel/iommu_groups/0/type", "DMA-FQ\n");
        write(t, "sys/kernel/iommu_groups/1/type", "DMA-FQ\n");

        tree.disk(
            NVME,
            "nvme0n1",
            "259:0",
            &Queue {
                rotational: "0",
                scheduler: "[none] mq-deadline kyber bfq",
                nr_requests: 1023,
                read_ahead_kb: 128,
                write_cache: "write back",
                discard_max_bytes: 2_199_023_255_040,
            },
        );
        write(
            t,
            &format!("sys/{NVME}/nvme0n1/device/model"),
            "Samsung SSD 980 PRO 1TB\n",
        );
        tree.partition(NVME, "nvme0n1", "nvme0n1p2", "259:2");
        tree.disk(
            SATA,
            "sda",
            "8:0",
            &Queue {
                rotational: "1",
                scheduler: "none [mq-deadline] kyber bfq",
                nr_requests: 64,
                read_ahead_kb: 128,
                write_cache: "write back",
                discard_max_bytes: 0,
            },
        );
        write(
            t,
            &format!("sys/{SATA}/sda/device/model"),
            "ST4000NM0035-1V4\n",
        );
        write(t, &format!("sys/{SATA}/sda/device/vendor"), "ATA\n");
        write(
            t,
            &format!("sys/{SATA}/sda/device/scsi_disk/0:0:0:0/cache_type"),
            "write back\n",
        );
        tree.partition(SATA, "sda", "sda1", "8:1");
        tree.partition(SATA, "sda", "sda2", "8:2");
        // zram: a disk without a scheduler.
        tree.add_dev(VIRTUAL, "zram0", "252:0", 8_388_608);
        write(t, &format!("sys/{VIRTUAL}/zram0/queue/rotational"), "0\n");
        write(
            t,
            &format!("sys/{VIRTUAL}/zram0/queue/logical_block_size"),
            "4096\n",
        );
        write(
            t,
            &format!("sys/{VIRTUAL}/zram0/queue/physical_block_size"),
            "4096\n",
        );
        write(
            t,
            "proc/swaps",
            "Filename\tType\tSize\tUsed\tPriority\n/dev/zram0 partition 4194300 0 100\n",
        );

        tree.set_mounts(&[
            ("/", "ext4", "/dev/nvme0n1p2", "259:2", "rw,relatime"),
            ("/data", "xfs", "/dev/sda1", "8:1", "rw,noatime"),
        ]);
        write(
            t,
            "proc/fs/ext4/nvme0n1p2/options",
            "rw\nrelatime\ndata=ordered\n",
        );
        mkdir(t, "proc/fs/jbd2/nvme0n1p2-8");
        symlink(
            t,
            "etc/systemd/system/timers.target.wants/fstrim.timer",
            "/lib/systemd/system/fstrim.timer",
        );
        mkdir(t, "run/systemd/system");
        mkdir(t, "var/lib/postgresql/15/main");
        write(
            t,
            "proc/mdstat",
            "Personalities : [raid1]\nmd0 : active raid1 sdb1[1] sdc1[0]\n      \
             1046528 blocks super 1.2 [2/2] [UU]\n\nunused devices: <none>\n",
        );
        tree
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, rel: &str, content: &str) {
        write(self.path(), rel, content);
    }

    fn add_dev(&self, parent: &str, name: &str, devno: &str, sectors: u64) {
        let t = self.path();
        let rel = format!("{parent}/{name}");
        write(t, &format!("sys/{rel}/dev"), &format!("{devno}\n"));
        write(t, &format!("sys/{rel}/size"), &format!("{sectors}\n"));
        write(t, &format!("sys/{rel}/ro"), "0\n");
        mkdir(t, &format!("sys/{rel}/holders"));
        mkdir(t, &format!("sys/{rel}/slaves"));
        let up = "../".repeat(2);
        symlink(t, &format!("sys/dev/block/{devno}"), &format!("{up}{rel}"));
        symlink(t, &format!("sys/class/block/{name}"), &format!("{up}{rel}"));
        symlink(t, &format!("sys/block/{name}"), &format!("../{rel}"));
    }

    fn disk(&self, parent: &str, name: &str, devno: &str, q: &Queue) {
        self.add_dev(parent, name, devno, 2_000_000_000);
        let queue = format!("sys/{parent}/{name}/queue");
        let t = self.path();
        for (attr, value) in [
            ("rotational", q.rotational.to_string()),
            ("scheduler", q.scheduler.to_string()),
            ("nr_requests", q.nr_requests.to_string()),
            ("read_ahead_kb", q.read_ahead_kb.to_string()),
            ("write_cache", q.write_cache.to_string()),
            ("discard_max_bytes", q.discard_max_bytes.to_string()),
            ("logical_block_size", "512".to_string()),
            ("physical_block_size", "4096".to_string()),
        ] {
            write(t, &format!("{queue}/{attr}"), &format!("{value}\n"));
        }
    }

    fn partition(&self, parent: &str, disk: &str, name: &str, devno: &str) {
        let t = self.path();
        let rel = format!("{parent}/{disk}/{name}");
        write(t, &format!("sys/{rel}/dev"), &format!("{devno}\n"));
        write(t, &format!("sys/{rel}/size"), "1000000\n");
        write(t, &format!("sys/{rel}/ro"), "0\n");
        write(t, &format!("sys/{rel}/partition"), "1\n");
        symlink(
            t,
            &format!("sys/dev/block/{devno}"),
            &format!("../../{rel}"),
        );
        symlink(
            t,
            &format!("sys/class/block/{name}"),
            &format!("../../{rel}"),
        );
    }

    /// (mount point, type, source, MAJ:MIN, options) in mount order.
    fn set_mounts(&self, mounts: &[(&str, &str, &str, &str, &str)]) {
        let mut text = String::from("22 1 0:21 / /proc rw,relatime - proc proc rw\n");
        for (i, (mp, fs, src, devno, opts)) in mounts.iter().enumerate() {
            text.push_str(&format!(
                "{} 1 {devno} / {mp} {opts} shared:{i} - {fs} {src} rw\n",
                30 + i
            ));
        }
        self.write("proc/self/mountinfo", &text);
    }

    fn judge(&self, profile: Profile) -> Vec<Finding> {
        check(&SysRoot::under(self.path()), Options { profile }).1
    }

    /// The one finding `id` (about `subject`) under `profile`.
    fn finding(&self, profile: Profile, id: &str, subject: Option<&str>) -> Finding {
        let all = self.judge(profile);
        let mut matching: Vec<Finding> = all
            .into_iter()
            .filter(|f| f.id == id && f.subject.as_deref() == subject)
            .collect();
        assert_eq!(matching.len(), 1, "expected one {id} {subject:?} finding");
        matching.remove(0)
    }

    fn severity(&self, id: &str, subject: Option<&str>) -> Severity {
        self.finding(Profile::Default, id, subject).severity
    }
}

#[test]
fn a_proxmox_host_gets_each_vm_disk_judged_from_its_configuration() {
    let tree = Tree::healthy();
    assert!(
        !tree
            .judge(Profile::Default)
            .iter()
            .any(|f| f.id == "pve_vm_disk"),
        "not a Proxmox host: no VM disk findings"
    );
    // As `qm config` writes them, and storage.cfg as the installer leaves it.
    tree.write(
        "etc/pve/qemu-server/100.conf",
        "boot: order=scsi0\nname: web\nscsihw: virtio-scsi-single\n\
         scsi0: local-lvm:vm-100-disk-0,cache=unsafe,iothread=1,discard=on,size=8G\n",
    );
    tree.write(
        "etc/pve/qemu-server/200.conf",
        "name: db\nvirtio0: local-lvm:vm-200-disk-0,iothread=1,discard=on,size=64G\n",
    );
    tree.write(
        "etc/pve/storage.cfg",
        "lvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n",
    );
    let web = tree.finding(Profile::Default, "pve_vm_disk", Some("VM 100 (web) scsi0"));
    assert_eq!(web.severity, Severity::Crit);
    assert_eq!(
        web.remedy.fix.as_deref(),
        Some("qm set 100 --scsi0 local-lvm:vm-100-disk-0,iothread=1,discard=on,size=8G,cache=none")
    );
    assert_eq!(web.group, Group::Virtualization);
    let db = tree.finding(Profile::Default, "pve_vm_disk", Some("VM 200 (db) virtio0"));
    assert_eq!(db.severity, Severity::Ok, "{}", db.title);
    let facts = Facts::read(&SysRoot::under(tree.path()));
    assert!(facts.unreadable.is_empty(), "{:?}", facts.unreadable);
}

#[test]
fn the_healthy_server_is_all_ok() {
    let tree = Tree::healthy();
    let findings = tree.judge(Profile::Default);
    let facts = Facts::read(&SysRoot::under(tree.path()));
    assert!(facts.unreadable.is_empty(), "{:?}", facts.unreadable);
    let not_ok: Vec<String> = findings
        .iter()
        .filter(|f| f.severity != Severity::Ok)
        .map(|f| format!("{} {:?}: {}", f.id, f.subject, f.title))
        .collect();
    assert!(not_ok.is_empty(), "{not_ok:#?}");
    let ids: std::collections::BTreeSet<&str> = findings.iter().map(|f| f.id).collect();
    for id in [
        "thp_enabled",
        "thp_defrag",
        "io_scheduler",
        "nr_requests",
        "read_ahead",
        "write_cache",
        "md_resync",
        "atime",
        "discard",
        "ext4_journal",
        "cow_database",
        "swappiness",
        "dirty_limits",
        "zone_reclaim_mode",
        "numa_balancing",
        "swap_device",
        "cpu_governor",
        "cpu_boost",
        "cpu_max_frequency",
        "cpu_idle",
        "iommu_mode",
        "cpu_mitigations",
        "preempt_model",
        "hz",
        "task_delayacct",
        "virtualization",
    ] {
        assert!(ids.contains(id), "no {id} finding");
    }
    // Devices are judged, zram is not (no queue to tune).
    assert_eq!(tree.severity("io_scheduler", Some("nvme0n1")), Severity::Ok);
    assert_eq!(tree.severity("io_scheduler", Some("sda")), Severity::Ok);
    assert!(
        !findings
            .iter()
            .any(|f| f.subject.as_deref() == Some("zram0"))
    );
    assert_eq!(
        verdict(&findings).split(':').next().unwrap(),
        "no handbrake found"
    );
    // ok findings carry no commands.
    assert!(findings.iter().all(|f| f.remedy == Remedy::default()));
}

#[test]
fn checking_writes_nothing() {
    let tree = Tree::healthy();
    let before = snapshot_tree(tree.path());
    let _ = tree.judge(Profile::Postgres);
    assert_eq!(before, snapshot_tree(tree.path()));
}

/// Every file's path, content and modification time under `dir`.
fn snapshot_tree(dir: &Path) -> Vec<(String, Vec<u8>, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let meta = e.path().symlink_metadata().unwrap();
            if meta.is_dir() {
                stack.push(e.path());
            } else if meta.is_file() {
                out.push((
                    e.path().display().to_string(),
                    std::fs::read(e.path()).unwrap(),
                    meta.modified().unwrap(),
                ));
            }
        }
    }
    out.sort();
    out
}

const THP: &str = "sys/kernel/mm/transparent_hugepage";

#[test]
fn thp_enabled_by_profile() {
    let tree = Tree::healthy();
    let sev = |p: Profile| tree.finding(p, "thp_enabled", None).severity;
    assert_eq!(
        sev(Profile::Redis),
        Severity::Info,
        "madvise works like never for Redis"
    );
    assert_eq!(
        sev(Profile::Mongodb),
        Severity::Warn,
        "MongoDB 8 wants always"
    );
    tree.write(&format!("{THP}/enabled"), "[always] madvise never\n");
    assert_eq!(sev(Profile::Default), Severity::Info);
    assert_eq!(sev(Profile::Web), Severity::Warn);
    assert_eq!(sev(Profile::Etcd), Severity::Warn);
    assert_eq!(sev(Profile::Mongodb), Severity::Ok);
    let redis = tree.finding(Profile::Redis, "thp_enabled", None);
    assert_eq!(redis.severity, Severity::Warn);
    assert!(redis.title.contains("never recommended"), "{}", redis.title);
    assert_eq!(
        redis.remedy.fix.as_deref(),
        Some("echo never > /sys/kernel/mm/transparent_hugepage/enabled")
    );
    assert_eq!(
        redis.remedy.persist.as_deref(),
        Some(
            "echo 'w /sys/kernel/mm/transparent_hugepage/enabled - - - - never' > \
             /etc/tmpfiles.d/tacho-thp-enabled.conf"
        )
    );
    assert!(
        redis
            .remedy
            .revert
            .as_deref()
            .unwrap()
            .starts_with("echo always > ")
    );
    // Compaction stalls raise the severity.
    tree.write("proc/vmstat", "compact_stall 5000\ncompact_fail 900\n");
    assert_eq!(sev(Profile::Default), Severity::Warn);
    assert_eq!(sev(Profile::Postgres), Severity::Crit);
    tree.write(&format!("{THP}/enabled"), "always madvise [never]\n");
    assert_eq!(sev(Profile::Postgres), Severity::Ok);
}

#[test]
fn thp_defrag() {
    let tree = Tree::healthy();
    assert_eq!(tree.severity("thp_defrag", None), Severity::Ok);
    tree.write(
        &format!("{THP}/defrag"),
        "[always] defer defer+madvise madvise never\n",
    );
    assert_eq!(tree.severity("thp_defrag", None), Severity::Warn);
    tree.write("proc/vmstat", "compact_stall 5000\n");
    assert_eq!(tree.severity("thp_defrag", None), Severity::Crit);
}

fn queue(disk_parent: &str, disk: &str, attr: &str) -> String {
    format!("sys/{disk_parent}/{disk}/queue/{attr}")
}

#[test]
fn scheduler_against_device_type() {
    let tree = Tree::healthy();
    tree.write(
        &queue(NVME, "nvme0n1", "scheduler"),
        "none mq-deadline kyber [bfq]\n",
    );
    let f = tree.finding(Profile::Default, "io_scheduler", Some("nvme0n1"));
    assert_eq!(f.severity, Severity::Warn);
    assert_eq!(
        f.remedy.fix.as_deref(),
        Some("echo none > /sys/block/nvme0n1/queue/scheduler")
    );
    tree.write(
        &queue(SATA, "sda", "scheduler"),
        "[none] mq-deadline kyber bfq\n",
    );
    let f = tree.finding(Profile::Default, "io_scheduler", Some("sda"));
    assert_eq!(f.severity, Severity::Warn);
    assert!(
        f.remedy
            .fix
            .unwrap()
            .ends_with("echo mq-deadline > /sys/block/sda/queue/scheduler")
    );
}

#[test]
fn virtio_disks_are_virtual_despite_rotational_1() {
    let tree = Tree::healthy();
    tree.disk(
        VIRTIO,
        "vda",
        "254:0",
        &Queue {
            rotational: "1",
            scheduler: "none [mq-deadline] kyber bfq",
            nr_requests: 256,
            read_ahead_kb: 128,
            write_cache: "write back",
            discard_max_bytes: 0,
        },
    );
    symlink(
        tree.path(),
        &format!("sys/{VIRTIO}/vda/device/driver"),
        "../../../../bus/virtio/drivers/virtio_blk",
    );
    let f = tree.finding(Profile::Default, "io_scheduler", Some("vda"));
    assert_eq!(f.severity, Severity::Info);
    assert!(f.title.contains("virtual disk"), "{}", f.title);
    tree.write(
        &queue(VIRTIO, "vda", "scheduler"),
        "[none] mq-deadline kyber bfq\n",
    );
    assert_eq!(tree.severity("io_scheduler", Some("vda")), Severity::Ok);
    tree.write(
        &queue(VIRTIO, "vda", "scheduler"),
        "none mq-deadline kyber [bfq]\n",
    );
    assert_eq!(tree.severity("io_scheduler", Some("vda")), Severity::Warn);
    // Without the driver link, the name still says virtual; an HDD rule would say "none is bad".
    std::fs::remove_file(tree.path().join(format!("sys/{VIRTIO}/vda/device/driver"))).unwrap();
    tree.write(
        &queue(VIRTIO, "vda", "scheduler"),
        "[none] mq-deadline kyber bfq\n",
    );
    assert_eq!(tree.severity("io_scheduler", Some("vda")), Severity::Ok);
}

#[test]
fn nr_requests_and_read_ahead() {
    let tree = Tree::healthy();
    tree.write(&queue(NVME, "nvme0n1", "nr_requests"), "16\n");
    let f = tree.finding(Profile::Default, "nr_requests", Some("nvme0n1"));
    assert_eq!(f.severity, Severity::Warn);
    assert_eq!(
        f.remedy.revert.as_deref().unwrap().split(" && ").next(),
        Some("echo 16 > /sys/block/nvme0n1/queue/nr_requests")
    );
    assert_eq!(tree.severity("read_ahead", Some("sda")), Severity::Ok);
    assert_eq!(
        tree.finding(Profile::Mongodb, "read_ahead", Some("sda"))
            .severity,
        Severity::Warn
    );
    tree.write(&queue(SATA, "sda", "read_ahead_kb"), "0\n");
    assert_eq!(tree.severity("read_ahead", Some("sda")), Severity::Warn);
    tree.write(&queue(SATA, "sda", "read_ahead_kb"), "8192\n");
    assert_eq!(tree.severity("read_ahead", Some("sda")), Severity::Info);
}

#[test]
fn write_cache_that_drops_flushes_is_critical() {
    let tree = Tree::healthy();
    assert_eq!(tree.severity("write_cache", Some("sda")), Severity::Ok);
    tree.write(&queue(SATA, "sda", "write_cache"), "write through\n");
    let f = tree.finding(Profile::Default, "write_cache", Some("sda"));
    assert_eq!(f.severity, Severity::Crit);
    assert_eq!(
        f.remedy.fix.as_deref(),
        Some("echo 'write back' > /sys/block/sda/queue/write_cache")
    );
    // A drive whose own cache is off: write through is the truth, only worth knowing.
    tree.write(
        &format!("sys/{SATA}/sda/device/scsi_disk/0:0:0:0/cache_type"),
        "write through\n",
    );
    assert_eq!(tree.severity("write_cache", Some("sda")), Severity::Info);
}

#[test]
fn md_resync_in_progress() {
    let tree = Tree::healthy();
    assert_eq!(tree.severity("md_resync", Some("md0")), Severity::Ok);
    tree.write(
        "proc/mdstat",
        "Personalities : [raid1]\nmd0 : active raid1 sdb1[1] sdc1[0]\n      \
         1046528 blocks super 1.2 [2/1] [U_]\n      \
         [=>...................]  recovery =  8.3% (87424/1046528) finish=0.9min speed=17484K/sec\n",
    );
    let f = tree.finding(Profile::Default, "md_resync", Some("md0"));
    assert_eq!(f.severity, Severity::Warn);
    assert!(
        f.title
            .contains("recovery in progress: 8.3% done at 17 MiB/s"),
        "{}",
        f.title
    );
    assert!(f.remedy.manual);
    assert_eq!(
        f.remedy.revert.as_deref(),
        Some("sysctl -w dev.raid.speed_limit_max=200000")
    );
}

#[test]
fn atime_discard_and_journal() {
    let tree = Tree::healthy();
    assert_eq!(tree.severity("atime", Some("/")), Severity::Ok);
    assert_eq!(tree.severity("discard", Some("/")), Severity::Ok);
    assert_eq!(tree.severity("ext4_journal", Some("/")), Severity::Ok);
    // The HDD takes no discards: no discard finding for /data.
    assert!(
        !tree
            .judge(Profile::Default)
            .iter()
            .any(|f| f.id == "discard" && f.subject.as_deref() == Some("/data"))
    );

    tree.set_mounts(&[
        // How the kernel shows a strictatime mount: neither relatime nor noatime.
        ("/", "ext4", "/dev/nvme0n1p2", "259:2", "rw"),
        ("/data", "xfs", "/dev/sda1", "8:1", "rw,noatime"),
    ]);
    let f = tree.finding(Profile::Default, "atime", Some("/"));
    assert_eq!(f.severity, Severity::Warn);
    assert_eq!(f.remedy.fix.as_deref(), Some("mount -o remount,noatime /"));
    assert!(f.remedy.persist.unwrap().contains("/etc/fstab"));

    // No timer and no discard option: the SSD never learns what is free.
    std::fs::remove_file(
        tree.path()
            .join("etc/systemd/system/timers.target.wants/fstrim.timer"),
    )
    .unwrap();
    let f = tree.finding(Profile::Default, "discard", Some("/"));
    assert_eq!(f.severity, Severity::Warn);
    assert_eq!(
        f.remedy.fix.as_deref(),
        Some("systemctl enable --now fstrim.timer")
    );
    tree.set_mounts(&[(
        "/",
        "ext4",
        "/dev/nvme0n1p2",
        "259:2",
        "rw,relatime,discard",
    )]);
    assert_eq!(tree.severity("discard", Some("/")), Severity::Info);

    tree.write("proc/fs/ext4/nvme0n1p2/options", "rw\ndata=journal\n");
    let f = tree.finding(Profile::Default, "ext4_journal", Some("/"));
    assert_eq!(f.severity, Severity::Warn);
    assert!(f.remedy.manual && f.remedy.fix.is_none());
    assert!(
        !f.remedy.revert.unwrap().contains("remount"),
        "ext4 refuses data= on remount"
    );
    std::fs::remove_dir(tree.path().join("proc/fs/jbd2/nvme0n1p2-8")).unwrap();
    assert_eq!(tree.severity("ext4_journal", Some("/")), Severity::Info);
}

#[test]
fn copy_on_write_under_database_files() {
    let tree = Tree::healthy();
    assert_eq!(
        tree.severity("cow_database", Some("/var/lib/postgresql")),
        Severity::Ok
    );
    tree.partition(NVME, "nvme0n1", "nvme0n1p3", "259:3");
    let mounts = [
        ("/", "ext4", "/dev/nvme0n1p2", "259:2", "rw,relatime"),
        (
            "/var/lib/postgresql",
            "btrfs",
            "/dev/nvme0n1p3",
            "259:3",
            "rw,relatime,ssd,space_cache=v2",
        ),
    ];
    tree.set_mounts(&mounts);
    let f = tree.finding(
        Profile::Default,
        "cow_database",
        Some("/var/lib/postgresql"),
    );
    assert_eq!(f.severity, Severity::Warn);
    assert!(f.remedy.manual);
    assert!(
        f.remedy
            .fix
            .unwrap()
            .contains("chattr +C /var/lib/postgresql")
    );
    tree.set_mounts(&[
        mounts[0],
        (
            "/var/lib/postgresql",
            "btrfs",
            "/dev/nvme0n1p3",
            "259:3",
            "rw,nodatacow",
        ),
    ]);
    assert_eq!(
        tree.severity("cow_database", Some("/var/lib/postgresql")),
        Severity::Ok
    );
}

#[test]
fn swappiness_dirty_zone_reclaim_numa() {
    let tree = Tree::healthy();
    let f = tree.finding(Profile::Postgres, "swappiness", None);
    assert_eq!(f.severity, Severity::Warn);
    assert_eq!(f.remedy.fix.as_deref(), Some("sysctl -w vm.swappiness=1"));
    tree.write("proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n");
    assert_eq!(
        tree.finding(Profile::Postgres, "swappiness", None).severity,
        Severity::Ok
    );

    assert_eq!(tree.severity("dirty_limits", None), Severity::Ok);
    tree.write(
        "proc/meminfo",
        "MemTotal: 268435456 kB\nMemAvailable: 201326592 kB\n",
    );
    let f = tree.finding(Profile::Default, "dirty_limits", None);
    assert_eq!(f.severity, Severity::Warn);
    assert!(f.title.starts_with("up to 39321 MiB"), "{}", f.title);
    assert_eq!(
        f.remedy.revert.as_deref(),
        Some(
            "sysctl -w vm.dirty_background_ratio=10 && sysctl -w vm.dirty_ratio=20 && \
             rm -f /etc/sysctl.d/99-tacho-dirty.conf"
        )
    );
    // Byte limits win over ratios.
    tree.write("proc/sys/vm/dirty_bytes", "536870912\n");
    assert_eq!(tree.severity("dirty_limits", None), Severity::Ok);

    tree.write("proc/sys/vm/zone_reclaim_mode", "1\n");
    assert_eq!(
        tree.severity("zone_reclaim_mode", None),
        Severity::Ok,
        "one node"
    );
    assert_eq!(tree.severity("numa_balancing", None), Severity::Ok);
    tree.write("sys/devices/system/node/online", "0-1\n");
    assert_eq!(tree.severity("zone_reclaim_mode", None), Severity::Warn);
    assert_eq!(tree.severity("numa_balancing", None), Severity::Info);
}

#[test]
fn swap_on_a_rotational_disk() {
    let tree = Tree::healthy();
    assert_eq!(
        tree.severity("swap_device", Some("/dev/zram0")),
        Severity::Ok
    );
    tree.write(
        "proc/swaps",
        "Filename\tType\tSize\tUsed\tPriority\n/dev/sda2 partition 8388604 1024 -2\n",
    );
    let f = tree.finding(Profile::Default, "swap_device", Some("/dev/sda2"));
    assert_eq!(f.severity, Severity::Warn);
    assert!(f.title.contains("rotational disk (sda)"), "{}", f.title);
    // A swap file on the NVMe root is fine.
    tree.write(
        "proc/swaps",
        "Filename\tType\tSize\tUsed\tPriority\n/swapfile file 1048572 0 -2\n",
    );
    let f = tree.finding(Profile::Default, "swap_device", Some("/swapfile"));
    assert_eq!(f.severity, Severity::Ok);
    assert_eq!(f.title, "swap on nvme0n1");
}

const CPU: &str = "sys/devices/system/cpu";

#[test]
fn governor_boost_cap_and_idle() {
    let tree = Tree::healthy();
    for n in 0..2 {
        tree.write(
            &format!("{CPU}/cpu{n}/cpufreq/scaling_governor"),
            "powersave\n",
        );
    }
    assert_eq!(
        tree.severity("cpu_governor", None),
        Severity::Info,
        "intel_pstate powersave is dynamic"
    );
    tree.write(
        &format!("{CPU}/cpu0/cpufreq/scaling_driver"),
        "acpi-cpufreq\n",
    );
    let f = tree.finding(Profile::Default, "cpu_governor", None);
    assert_eq!(f.severity, Severity::Warn);
    assert_eq!(
        f.remedy.fix.as_deref(),
        Some(
            "for f in /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor; do echo performance > \"$f\"; done"
        )
    );

    tree.write(&format!("{CPU}/intel_pstate/no_turbo"), "1\n");
    let f = tree.finding(Profile::Default, "cpu_boost", None);
    assert_eq!(f.severity, Severity::Warn);
    assert_eq!(
        f.remedy.fix.as_deref(),
        Some("echo 0 > /sys/devices/system/cpu/intel_pstate/no_turbo")
    );
    assert_eq!(tree.severity("cpu_max_frequency", None), Severity::Ok);
    tree.write(&format!("{CPU}/cpu0/cpufreq/scaling_max_freq"), "1600000\n");
    assert_eq!(tree.severity("cpu_max_frequency", None), Severity::Warn);

    assert_eq!(tree.severity("cpu_idle", None), Severity::Ok);
    tree.write(&format!("{CPU}/cpu0/cpuidle/state2/disable"), "1\n");
    assert_eq!(tree.severity("cpu_idle", None), Severity::Info);
    tree.write("proc/cmdline", "root=/dev/nvme0n1p2 idle=poll\n");
    let f = tree.finding(Profile::Default, "cpu_idle", None);
    assert_eq!(f.severity, Severity::Warn);
    assert!(
        f.remedy
            .persist
            .unwrap()
            .contains("--remove-args=idle=poll")
    );
}

#[test]
fn iommu_strict_is_a_warning_with_its_exposure() {
    let tree = Tree::healthy();
    assert_eq!(tree.severity("iommu_mode", None), Severity::Ok);
    tree.write("sys/kernel/iommu_groups/0/type", "DMA\n");
    tree.write("sys/kernel/iommu_groups/1/type", "DMA\n");
    tree.write("proc/cmdline", "root=/dev/nvme0n1p2 iommu.strict=1\n");
    let f = tree.finding(Profile::Default, "iommu_mode", None);
    assert_eq!(f.severity, Severity::Warn);
    assert!(
        f.title.starts_with("IOMMU strict: 2 device group(s)"),
        "{}",
        f.title
    );
    assert!(f.why.contains("what it exposes"));
    let persist = f.remedy.persist.unwrap();
    assert!(
        persist.contains("iommu.strict=0") && persist.contains("iommu\\.strict=1"),
        "{persist}"
    );
    assert!(f.remedy.fix.is_none(), "a boot option has no fix for now");
    // Strict by build default but no IOMMU in use: worth knowing only.
    std::fs::remove_dir_all(tree.path().join("sys/kernel/iommu_groups")).unwrap();
    tree.write(
        "boot/config-6.1.0-test",
        "CONFIG_HZ=250\nCONFIG_IOMMU_DEFAULT_DMA_STRICT=y\n",
    );
    assert_eq!(tree.severity("iommu_mode", None), Severity::Info);
}

#[test]
fn mitigations_report_state_cost_and_exposure() {
    let tree = Tree::healthy();
    assert_eq!(tree.severity("cpu_mitigations", None), Severity::Ok);
    let v = format!("{CPU}/vulnerabilities");
    tree.write(&format!("{v}/retbleed"), "Mitigation: IBRS\n");
    let f = tree.finding(Profile::Default, "cpu_mitigations", None);
    assert_eq!(f.severity, Severity::Info);
    assert!(f.title.contains("retbleed IBRS"), "{}", f.title);
    assert!(
        f.remedy.fix.is_none(),
        "never advise turning mitigations off"
    );
    assert!(f.why.contains("read kernel or other processes' memory"));
    tree.write(&format!("{v}/spec_store_bypass"), "Vulnerable\n");
    tree.write("proc/cmdline", "root=/dev/nvme0n1p2 mitigations=off\n");
    let f = tree.finding(Profile::Default, "cpu_mitigations", None);
    assert_eq!(f.severity, Severity::Warn);
    assert_eq!(f.title, "exposed: spec_store_bypass (mitigations=off)");
    assert!(
        f.remedy
            .persist
            .unwrap()
            .contains("--remove-args=mitigations=off")
    );
}

#[test]
fn preempt_hz_and_delayacct() {
    let tree = Tree::healthy();
    assert_eq!(tree.severity("preempt_model", None), Severity::Ok);
    assert_eq!(tree.severity("hz", None), Severity::Ok);
    tree.write(
        "boot/config-6.1.0-test",
        "CONFIG_HZ=1000\nCONFIG_PREEMPT_NONE=y\nCONFIG_PREEMPT_DYNAMIC=y\n",
    );
    tree.write("proc/cmdline", "root=/dev/nvme0n1p2 preempt=full\n");
    let f = tree.finding(Profile::Default, "preempt_model", None);
    assert_eq!(
        (f.severity, f.title.as_str()),
        (Severity::Info, "preemption model full")
    );
    assert_eq!(tree.severity("hz", None), Severity::Info);
    tree.write(
        "boot/config-6.1.0-test",
        "CONFIG_HZ=250\nCONFIG_PREEMPT_RT=y\n",
    );
    let f = tree.finding(Profile::Default, "preempt_model", None);
    assert_eq!(f.severity, Severity::Warn);
    assert!(f.remedy.manual);

    assert_eq!(tree.severity("task_delayacct", None), Severity::Ok);
    tree.write("proc/sys/kernel/task_delayacct", "0\n");
    let f = tree.finding(Profile::Default, "task_delayacct", None);
    assert_eq!(f.severity, Severity::Info);
    assert_eq!(
        f.remedy.fix.as_deref(),
        Some("sysctl -w kernel.task_delayacct=1")
    );
}

#[test]
fn virtualization_says_what_cannot_be_seen() {
    let tree = Tree::healthy();
    assert_eq!(tree.severity("virtualization", None), Severity::Ok);
    tree.write("sys/class/dmi/id/sys_vendor", "QEMU\n");
    tree.write(
        "sys/class/dmi/id/product_name",
        "Standard PC (Q35 + ICH9, 2009)\n",
    );
    let f = tree.finding(Profile::Default, "virtualization", None);
    assert_eq!(f.severity, Severity::Info);
    assert!(f.title.contains("qemu"), "{}", f.title);
    assert!(f.why.contains("qm config") && f.why.contains("virsh dumpxml"));
    // The governor rule knows a VM has no cpufreq for a reason.
    std::fs::remove_dir_all(tree.path().join(format!("{CPU}/cpu0/cpufreq"))).unwrap();
    std::fs::remove_dir_all(tree.path().join(format!("{CPU}/cpu1/cpufreq"))).unwrap();
    assert_eq!(tree.severity("cpu_governor", None), Severity::Ok);
}

#[test]
fn unreadable_files_are_listed_not_judged() {
    let tree = Tree::healthy();
    tree.write("proc/sys/vm/swappiness", "lots\n");
    let facts = Facts::read(&SysRoot::under(tree.path()));
    assert!(
        facts
            .unreadable
            .iter()
            .any(|u| u.contains("proc/sys/vm/swappiness")),
        "{:?}",
        facts.unreadable
    );
    assert!(
        !judge(&facts, Options::default())
            .iter()
            .any(|f| f.id == "swappiness")
    );
}

#[test]
fn empty_tree_does_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    let findings = check(&SysRoot::under(dir.path()), Options::default()).1;
    // Only rules that hold without input remain (IOMMU, delay accounting, virtualization).
    assert!(findings.iter().all(|f| f.severity <= Severity::Info));
}

#[test]
fn reports_and_scripts() {
    let tree = Tree::healthy();
    tree.write(&format!("{THP}/enabled"), "[always] madvise never\n");
    tree.write(
        &queue(NVME, "nvme0n1", "scheduler"),
        "none mq-deadline kyber [bfq]\n",
    );
    tree.write(
        "proc/mdstat",
        "md0 : active raid1 sdb1[1] sdc1[0]\n      [=>..]  resync = 1.0% (1/100) finish=9.0min speed=1024K/sec\n",
    );
    let findings = tree.judge(Profile::Redis);

    let v = document(
        Some("db-1"),
        &findings,
        Profile::Redis,
        Some(Severity::Warn),
        &[],
    );
    assert_eq!(v["host"]["hostname"], "db-1");
    assert_eq!(v["schema"], "tacho.check.v1");
    assert_eq!(v["profile"], "redis");
    assert_eq!(v["only"], "warn");
    let listed = v["findings"].as_array().unwrap();
    assert!(
        listed
            .iter()
            .all(|f| f["severity"] == "warn" || f["severity"] == "crit")
    );
    assert_eq!(v["counts"]["warn"].as_u64().unwrap() as usize, listed.len());
    let thp = listed.iter().find(|f| f["id"] == "thp_enabled").unwrap();
    for key in [
        "title",
        "evidence",
        "why",
        "reference",
        "fix",
        "persist",
        "revert",
        "group",
    ] {
        assert!(!thp[key].is_null(), "{key}");
    }
    assert_eq!(
        thp["evidence"][0]["source"],
        "/sys/kernel/mm/transparent_hugepage/enabled"
    );

    let mut text = Vec::new();
    write_text(
        &mut crate::fit::Fit::new(&mut text, None),
        &findings,
        Profile::Redis,
        None,
        &["/proc/x: denied".into()],
    )
    .unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.starts_with("4 warnings; worst: THP always;"), "{text}");
    assert!(text.contains("\nBlock devices\n"));
    assert!(text.contains("fix: echo never > /sys/kernel/mm/transparent_hugepage/enabled"));
    assert!(text.contains("not judged, could not read:\n  /proc/x: denied"));

    let script = |kind| {
        let mut out = Vec::new();
        write_script(&mut out, &findings, kind, "db1").unwrap();
        String::from_utf8(out).unwrap()
    };
    let (apply, revert) = (script(ScriptKind::Apply), script(ScriptKind::Revert));
    let (apply, revert) = (apply.as_str(), revert.as_str());
    assert!(apply.starts_with("#!/bin/sh\n"));
    assert!(apply.contains("\necho never > /sys/kernel/mm/transparent_hugepage/enabled\n"));
    assert!(apply.contains("\necho none > /sys/block/nvme0n1/queue/scheduler\n"));
    // The md resync step needs judgement: a comment only.
    assert!(apply.contains("\n# sysctl -w dev.raid.speed_limit_max=50000\n"));
    assert!(!apply.contains("\nsysctl -w dev.raid"));
    assert!(revert.starts_with("#!/bin/sh\n"));
    assert!(revert.contains("\necho always > /sys/kernel/mm/transparent_hugepage/enabled && rm -f /etc/tmpfiles.d/tacho-thp-enabled.conf\n"));
    // Reverts run in reverse order: the THP (memory) finding was applied first, so undone last.
    assert!(revert.find("nvme0n1").unwrap() < revert.find("transparent_hugepage").unwrap());
    for s in [apply, revert] {
        let o = std::process::Command::new("sh")
            .arg("-n")
            .arg("-c")
            .arg(s)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "sh -n: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]

    /// Garbage in any file the rules read gives findings or `unreadable` entries, never a
    /// panic.
    #[test]
    fn malformed_files_never_panic(
        which in 0usize..12,
        content in "\\PC{0,120}",
    ) {
        let tree = Tree::healthy();
        let rel = [
            "proc/mdstat",
            "proc/self/mountinfo",
            "proc/swaps",
            "proc/cmdline",
            "proc/vmstat",
            "proc/meminfo",
            "boot/config-6.1.0-test",
            "proc/sys/vm/dirty_ratio",
            "proc/fs/ext4/nvme0n1p2/options",
            "sys/kernel/iommu_groups/0/type",
            "sys/devices/system/cpu/cpu0/cpuidle/state1/latency",
            "sys/block/sda/queue/nr_requests",
        ][which];
        tree.write(rel, &content);
        let findings = tree.judge(Profile::Postgres);
        let mut out = Vec::new();
        let mut fit = crate::fit::Fit::new(&mut out, None);
        write_text(&mut fit, &findings, Profile::Postgres, None, &[]).unwrap();
        drop(fit);
        write_script(&mut out, &findings, ScriptKind::Apply, "x").unwrap();
        write_script(&mut out, &findings, ScriptKind::Revert, "x").unwrap();
    }
}
