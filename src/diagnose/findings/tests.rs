use super::*;
use crate::diagnose::model::culprits::Direction;
use crate::diagnose::model::groups::{Group, Kind};
use crate::diagnose::model::tests::fixture_sample;
use crate::diagnose::model::waiters::{IoWaiter, WaitsOn};
use crate::kernel::blockdev::DeviceKind;

/// The judged sample of the captured interval, for reporters' and the screen's tests.
pub(crate) fn fixture_top_sample() -> TopSample {
    let mut s = fixture_sample();
    Judge::new().judge(&mut s);
    s
}

#[test]
fn the_captured_interval_gets_a_verdict() {
    assert!(!fixture_top_sample().verdict.is_empty());
}
use crate::diagnose::model::{Disk, PsiLine, PsiResource};

/// The captured sample with its disks, findings and events replaced by the test's own.
fn quiet() -> TopSample {
    let mut s = fixture_top_sample();
    s.findings.clear();
    s.disks.clear();
    s.groups.clear();
    s.culprits = Default::default();
    s.vm_events.clear();
    s.cpu.all = crate::diagnose::model::cpu::CpuSplit {
        idle_pct: 100.0,
        ..Default::default()
    };
    for p in &mut s.cpu.per_cpu {
        p.split = s.cpu.all;
    }
    s.psi.io = None;
    s.psi.memory = None;
    s
}

/// PSI io with `some` and `full` at `avg10_pct` over the last 10 s.
fn io_stall(avg10_pct: f64) -> PsiResource {
    let line = PsiLine {
        avg10_pct,
        avg60_pct: 0.0,
        avg300_pct: 0.0,
        stall_ms: None,
        stall_pct: None,
    };
    PsiResource {
        some: line.clone(),
        full: Some(line),
    }
}

fn disk(name: &str, w_await: f64, util: f64, queue: f64) -> Disk {
    let mut d = fixture_top_sample()
        .disks
        .into_iter()
        .find(|d| d.device.name == "vda")
        .unwrap();
    d.device.name = name.into();
    d.device.display_name = name.into();
    d.device.kind = DeviceKind::Disk;
    d.device.rotational = Some(false);
    d.device.virtual_disk = false;
    d.w_per_s = Some(100.0);
    d.w_await_ms = Some(w_await);
    d.r_per_s = Some(0.0);
    d.r_await_ms = Some(0.0);
    d.util_pct = Some(util);
    d.aqu_sz = Some(queue);
    d
}

fn codes(s: &TopSample) -> Vec<Code> {
    s.findings.iter().map(|f| f.code).collect()
}

#[test]
fn a_quiet_system_gets_the_all_clear() {
    let mut s = quiet();
    Judge::new().judge(&mut s);
    assert!(s.findings.is_empty(), "{:?}", s.findings);
    assert!(
        s.verdict.starts_with("OK: nothing stands out"),
        "{}",
        s.verdict
    );
}

#[test]
fn the_slow_member_of_an_md_array_is_named() {
    let mut s = quiet();
    for (i, a) in [
        15.0, 14.0, 16.0, 61.0, 15.5, 14.5, 15.0, 16.5, 13.5, 15.0, 14.0,
    ]
    .iter()
    .enumerate()
    {
        s.disks.push(disk(
            &format!("sd{}", (b'a' + i as u8) as char),
            *a,
            40.0,
            1.0,
        ));
    }
    s.groups.push(Group {
        name: "md0".into(),
        kind: Kind::Md,
        members: s.disks.iter().map(|d| d.device.name.clone()).collect(),
    });
    Judge::new().judge(&mut s);
    assert_eq!(codes(&s), [Code::HotDisk]);
    assert_eq!(s.findings[0].subject, "sdd");
    assert_eq!(
        s.verdict,
        "sdd: w_await 61.0 ms vs 15.0 ms for its 10 peers in md0 (md array)"
    );
}

#[test]
fn peers_that_differ_by_microseconds_are_not_hot() {
    let mut s = quiet();
    for (i, a) in [0.10, 0.12, 0.5, 0.11].iter().enumerate() {
        s.disks.push(disk(&format!("loop{i}"), *a, 5.0, 0.1));
    }
    s.groups.push(Group {
        name: "stripe".into(),
        kind: Kind::Dm,
        members: s.disks.iter().map(|d| d.device.name.clone()).collect(),
    });
    Judge::new().judge(&mut s);
    assert!(s.findings.is_empty(), "{:?}", s.findings);
}

#[test]
fn rotational_disks_are_judged_by_util_parallel_ones_by_queue_and_baseline() {
    let mut judge = Judge::new();
    // A spinning disk 95% busy is saturated; a virtio disk 100% busy with a short queue is not.
    let mut s = quiet();
    let mut hdd = disk("sda", 30.0, 95.0, 2.0);
    hdd.device.rotational = Some(true);
    let mut vda = disk("vda", 1.0, 100.0, 1.0);
    vda.device.rotational = Some(true);
    vda.device.virtual_disk = true;
    s.disks = vec![hdd, vda];
    judge.judge(&mut s);
    assert_eq!(codes(&s), [Code::DiskSaturated]);
    assert!(
        s.verdict.starts_with("sda is saturated: 95% busy"),
        "{}",
        s.verdict
    );

    // An NVMe disk: five quiet samples make its baseline, then await ×10 with a deep queue.
    let mut judge = Judge::new();
    for _ in 0..5 {
        let mut s = quiet();
        s.disks = vec![disk("nvme0n1", 0.2, 30.0, 0.5)];
        judge.judge(&mut s);
        assert!(s.findings.is_empty());
    }
    let mut s = quiet();
    s.disks = vec![disk("nvme0n1", 2.0, 100.0, 24.0)];
    judge.judge(&mut s);
    assert_eq!(codes(&s), [Code::DiskSaturated]);
    assert!(
        s.verdict.contains("w_await 2.0 ms vs 0.2 ms baseline"),
        "{}",
        s.verdict
    );
    assert!(s.verdict.contains("says little"), "{}", s.verdict);

    // Without a baseline, PSI io decides.
    let mut s = quiet();
    s.disks = vec![disk("nvme0n1", 2.0, 100.0, 24.0)];
    s.psi.io = Some(io_stall(35.0));
    Judge::new().judge(&mut s);
    assert_eq!(codes(&s), [Code::DiskSaturated]);
    assert!(s.verdict.contains("stalled on I/O 35%"), "{}", s.verdict);
}

#[test]
fn cpu_findings() {
    let mut s = quiet();
    s.cpu.all.user_pct = 15.0;
    s.cpu.all.system_pct = 45.0;
    s.cpu.all.steal_pct = 12.0;
    s.cpu.all.idle_pct = 28.0;
    s.vm_events.insert("compact_stall".into(), 40);
    s.vm_events.insert("thp_fault_alloc".into(), 900);
    s.cpu.per_cpu[1].split.softirq_pct = 60.0;
    s.cpu.per_cpu[0].split.softirq_pct = 2.0;
    Judge::new().judge(&mut s);
    let c = codes(&s);
    for code in [
        Code::CpuSystemHigh,
        Code::SoftirqOneCpu,
        Code::CpuSteal,
        Code::CompactionStalls,
    ] {
        assert!(c.contains(&code), "{code} missing from {c:?}");
    }
    let sys = s
        .findings
        .iter()
        .find(|f| f.code == Code::CpuSystemHigh)
        .unwrap();
    assert!(
        sys.message.contains("transparent huge pages"),
        "{}",
        sys.message
    );
    assert!(any_warning(&s.findings));
}

#[test]
fn memory_findings() {
    let mut s = quiet();
    s.memory.available_bytes = s.memory.total_bytes / 50;
    s.memory.swap_out_bytes_per_s = Some(8.0 * 1048576.0);
    s.cpu.all.iowait_pct = 40.0;
    Judge::new().judge(&mut s);
    let c = codes(&s);
    assert!(
        c.contains(&Code::MemoryLow) && c.contains(&Code::Swapping),
        "{c:?}"
    );
    let info = s
        .findings
        .iter()
        .find(|f| f.code == Code::IowaitIdleDisks)
        .unwrap();
    assert_eq!(info.severity, Severity::Info);
    // Warnings come before the informational finding.
    assert_eq!(s.findings.last().unwrap().code, Code::IowaitIdleDisks);
}

/// A sysfs tree with md0 over four loop devices, and two /proc trees whose diskstats differ
/// by one interval in which loop2 took 60 ms per write and its peers 0.5 ms: from sysfs
/// links to the verdict, as `tacho top` runs it.
#[test]
fn a_slow_md_member_found_from_sysfs_and_diskstats() {
    use crate::diagnose::model::{ModelOptions, SortKey, between};
    use crate::diagnose::sample::Sampler;
    use crate::kernel::SysRoot;
    use crate::kernel::fixture::{mkdir, symlink, write};

    let dir = tempfile::tempdir().unwrap();
    let t = dir.path();
    let fix = std::path::Path::new("tests/fixtures/top/firecracker/a/proc");
    let block = "sys/devices/virtual/block";
    let add = |name: &str, devno: &str| {
        write(t, &format!("{block}/{name}/dev"), &format!("{devno}\n"));
        write(t, &format!("{block}/{name}/size"), "131072\n");
        write(
            t,
            &format!("{block}/{name}/queue/logical_block_size"),
            "512\n",
        );
        write(
            t,
            &format!("{block}/{name}/queue/physical_block_size"),
            "512\n",
        );
        write(t, &format!("{block}/{name}/queue/rotational"), "0\n");
        mkdir(t, &format!("{block}/{name}/slaves"));
        symlink(
            t,
            &format!("sys/dev/block/{devno}"),
            &format!("../../devices/virtual/block/{name}"),
        );
    };
    add("md0", "9:0");
    mkdir(t, &format!("{block}/md0/md"));
    for i in 0..4 {
        add(&format!("loop{i}"), &format!("7:{i}"));
        symlink(
            t,
            &format!("{block}/md0/slaves/loop{i}"),
            &format!("../../loop{i}"),
        );
    }
    // Writes of 4 KiB taking `ms` in all, busy for `busy` ms.
    let line = |name: &str, devno: &str, writes: u64, ms: u64, busy: u64| {
        let (major, minor) = devno.split_once(':').unwrap();
        format!(
            "{major} {minor} {name} 0 0 0 0 {writes} 0 {} {ms} 0 {busy} {ms} 0 0 0 0 0 0\n",
            writes * 8
        )
    };
    for (which, scale) in [("a", 1), ("b", 2)] {
        for f in [
            "stat",
            "meminfo",
            "vmstat",
            "loadavg",
            "net/dev",
            "self/mountinfo",
        ] {
            write(
                t,
                &format!("{which}/proc/{f}"),
                &std::fs::read_to_string(fix.join(f)).unwrap(),
            );
        }
        let mut diskstats = line("md0", "9:0", 1000 * scale, 2000 * scale, 9000 * scale);
        for i in 0..4 {
            let (ms, busy) = if i == 2 { (60_000, 9000) } else { (500, 500) };
            diskstats += &line(
                &format!("loop{i}"),
                &format!("7:{i}"),
                1000 * scale,
                ms * scale,
                busy * scale,
            );
        }
        write(t, &format!("{which}/proc/diskstats"), &diskstats);
    }
    let sample = |which: &str| {
        let mut sampler =
            Sampler::new(SysRoot::new(t.join(which).join("proc"), t.join("sys"))).unwrap();
        let s = sampler.sample().unwrap();
        (s, sampler.devices().clone())
    };
    let (a, _) = sample("a");
    let (mut b, devices) = sample("b");
    b.taken = a.taken + std::time::Duration::from_secs(10);
    let opts = ModelOptions {
        top: 5,
        sort: SortKey::Io,
        ticks_per_s: 100.0,
        page_size: 4096,
        delayacct: None,
    };
    let mut s = between(&a, &b, &devices, &opts);
    Judge::new().judge(&mut s);
    assert_eq!(s.groups.len(), 1, "{:?}", s.groups);
    let loop2 = s.disks.iter().find(|d| d.device.name == "loop2").unwrap();
    assert_eq!(
        (loop2.w_await_ms, loop2.group.as_deref()),
        (Some(60.0), Some("md0"))
    );
    let hot = s.findings.iter().find(|f| f.code == Code::HotDisk).unwrap();
    assert_eq!(hot.subject, "loop2");
    assert_eq!(
        hot.message,
        "loop2: w_await 60.0 ms vs 0.5 ms for its 3 peers in md0 (md array)"
    );
}

#[test]
fn an_io_stall_names_the_busiest_device_and_its_writer() {
    use crate::diagnose::model::culprits::{Attribution, Culprit};
    let mut s = quiet();
    // Low queue and await: no saturation verdict, only the stall.
    s.disks = vec![disk("vda", 0.2, 20.0, 0.1), disk("loop11", 0.03, 62.0, 0.6)];
    s.psi.io = Some(io_stall(30.0));
    let dd = Culprit {
        pid: Some(4242),
        comm: "dd".into(),
        comm_hex: None,
        unit: Some("session-3.scope".into()),
        share_pct: 100.0,
        exited: false,
        attribution: Attribution::Exact {
            source: "blkio".into(),
        },
        bytes_per_s: Some(1.0e9),
        user_pct: None,
        system_pct: None,
        rss_growth_bytes: None,
        major_faults_per_s: None,
        swap_bytes: None,
        iops: None,
        lat_p99_ms: None,
        queued_pct: None,
        processes: None,
        exited_processes: None,
        members: Vec::new(),
        members_left_out: None,
    };
    s.culprits
        .disks
        .insert("loop11".into(), (Direction::Writes, vec![dd]));
    Judge::new().judge(&mut s);
    let f = s
        .findings
        .iter()
        .find(|f| f.code == Code::IoPressure)
        .expect("an io_pressure finding");
    assert!(
        f.message.contains("busiest device loop11 (62% util)")
            && f.message
                .contains("100% of writes from dd (pid 4242, session-3.scope)"),
        "{}",
        f.message
    );
    assert_eq!(f.culprits.len(), 1);
    // With nobody known, the stall is still said, naming no one.
    s.culprits = Default::default();
    Judge::new().judge(&mut s);
    let f = s
        .findings
        .iter()
        .find(|f| f.code == Code::IoPressure)
        .unwrap();
    assert!(f.message.ends_with("(PSI io full)"), "{}", f.message);
    assert!(f.culprits.is_empty());
}

fn waiter(pid: u32, tid: u32, waits_on: WaitsOn, function: &str) -> IoWaiter {
    IoWaiter {
        pid,
        comm: "app".into(),
        comm_hex: None,
        tid,
        thread: "iou-wrk".into(),
        thread_hex: None,
        waits_on,
        in_function: Some(function.into()),
        wchan: None,
        stack: Vec::new(),
    }
}

#[test]
fn iowait_with_idle_disks_names_the_waiting_threads() {
    let mut s = quiet();
    s.cpu.all.iowait_pct = 25.0;
    s.io_waiters = vec![waiter(77, 78, WaitsOn::IoUring, "io_cqring_wait")];
    Judge::new().judge(&mut s);
    let f = s
        .findings
        .iter()
        .find(|f| f.code == Code::IowaitIdleDisks)
        .unwrap();
    assert_eq!(
        f.message,
        "iowait 25% while no local disk is busy: 1 thread in D state: app (pid 77, thread \
         iou-wrk 78) waiting on io_uring in io_cqring_wait; disks idle — not a storage problem"
    );
}

#[test]
fn io_stalls_with_a_busy_disk_name_the_waiting_threads() {
    let mut s = quiet();
    s.disks = vec![disk("loop3", 900.0, 100.0, 1.0)];
    s.psi.io = Some(PsiResource {
        some: PsiLine {
            avg10_pct: 90.0,
            avg60_pct: 50.0,
            avg300_pct: 10.0,
            stall_ms: Some(950.0),
            stall_pct: Some(95.0),
        },
        full: None,
    });
    Judge::new().judge(&mut s);
    assert!(!codes(&s).contains(&Code::IowaitTasks), "nobody is blocked");
    s.io_waiters = (0..5)
        .map(|i| waiter(100 + i, 100 + i, WaitsOn::Disk, "__blkdev_direct_IO_simple"))
        .collect();
    Judge::new().judge(&mut s);
    let f = s
        .findings
        .iter()
        .find(|f| f.code == Code::IowaitTasks)
        .unwrap();
    assert!(
        f.message.starts_with(
            "iowait 0%, a task stalled on I/O 95% of the interval: 5 threads in D state: app \
             (pid 100) waiting on a disk in __blkdev_direct_IO_simple, "
        ),
        "{}",
        f.message
    );
    assert!(f.message.ends_with(", and 2 more"), "{}", f.message);
}

#[test]
fn a_waiting_threads_name_that_is_not_utf8_shows_its_bytes() {
    let mut s = quiet();
    s.cpu.all.iowait_pct = 30.0;
    let mut w = waiter(77, 78, WaitsOn::Nfs, "rpc_wait_bit_killable");
    w.thread = "bad\u{fffd}\u{1b}[2J".into();
    w.thread_hex = Some("626164ff1b5b324a".into());
    s.io_waiters = vec![w];
    Judge::new().judge(&mut s);
    let f = s
        .findings
        .iter()
        .find(|f| f.code == Code::IowaitIdleDisks)
        .unwrap();
    assert!(
        f.message
            .contains("(pid 77, thread bad\\xff\\e[2J 78) waiting on NFS in rpc_wait_bit_killable"),
        "{}",
        f.message
    );
}

#[test]
fn a_traced_culprit_says_its_iops_p99_and_queued_share_once() {
    use crate::diagnose::model::culprits::{Attribution, Culprit};
    let mut s = quiet();
    s.disks = vec![disk("vda", 0.2, 20.0, 0.1), disk("loop11", 0.03, 62.0, 0.6)];
    s.psi.io = Some(io_stall(30.0));
    let traced =
        |pid: u32, comm: &str, unit: Option<&str>, share: f64, io: (f64, f64, f64)| Culprit {
            pid: Some(pid),
            comm: comm.into(),
            comm_hex: None,
            unit: unit.map(Into::into),
            share_pct: share,
            exited: false,
            attribution: Attribution::Exact {
                source: "eBPF".into(),
            },
            bytes_per_s: None,
            user_pct: None,
            system_pct: None,
            rss_growth_bytes: None,
            major_faults_per_s: None,
            swap_bytes: None,
            iops: Some(io.0),
            lat_p99_ms: Some(io.1),
            queued_pct: Some(io.2),
            processes: None,
            exited_processes: None,
            members: Vec::new(),
            members_left_out: None,
        };
    let pg = traced(
        812,
        "postgres",
        Some("postgresql.service"),
        80.0,
        (4123.0, 38.2, 81.6),
    );
    let dd = traced(4242, "dd", None, 20.0, (50.0, 0.4, 1.0));
    s.culprits
        .disks
        .insert("loop11".into(), (Direction::Writes, vec![pg, dd]));
    Judge::new().judge(&mut s);
    let f = s
        .findings
        .iter()
        .find(|f| f.code == Code::IoPressure)
        .expect("an io_pressure finding");
    assert!(
        f.message.contains(
            "80% of writes from postgres (pid 812, postgresql.service) at 4.12k IOPS \
             (p99 38.2 ms, 82% of its time queued), 20% of writes from dd (pid 4242)"
        ),
        "{}",
        f.message
    );
    assert!(!f.message.contains("50 IOPS"), "{}", f.message);
}
