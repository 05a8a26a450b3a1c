//! The model over two real captures taken one second apart while dd wrote with O_DIRECT.

use super::*;
use crate::diagnose::sample::Sampler;
use crate::kernel::SysRoot;
use std::time::Duration;

const FIX: &str = "tests/fixtures/top/firecracker";

fn sample(which: &str) -> (Sample, Devices) {
    let root = SysRoot::new(format!("{FIX}/{which}/proc"), format!("{FIX}/sys"));
    let mut sampler = Sampler::new(root).unwrap();
    let s = sampler.sample().unwrap();
    (s, sampler.devices().clone())
}

/// The captures, with `b` taken exactly one second after `a` (the fixture stores no clock).
fn pair() -> (Sample, Sample, Devices) {
    let (a, _) = sample("a");
    let (mut b, devices) = sample("b");
    b.taken = a.taken + Duration::from_secs(1);
    (a, b, devices)
}

fn opts() -> ModelOptions {
    ModelOptions {
        top: 5,
        sort: SortKey::Io,
        ticks_per_s: 100.0,
        page_size: 4096,
        delayacct: Some(false),
    }
}

/// The sample of the captured interval, not yet judged (`findings` judges it for the
/// reporters' and the screen's tests).
pub(crate) fn fixture_sample() -> TopSample {
    let (a, b, devices) = pair();
    between(&a, &b, &devices, &opts())
}

#[test]
fn disks_processes_and_write_amplification_from_real_captures() {
    let (a, b, devices) = pair();
    let s = between(&a, &b, &devices, &opts());
    assert_eq!(s.schema, "tacho.top.v3");
    assert!((s.interval_s - 1.0).abs() < 1e-9);
    // iostat hides devices never used since boot; so does tacho.
    assert!(s.disks.iter().all(|d| d.device.name != "loop5"));
    let vda = s.disks.iter().find(|d| d.device.name == "vda").unwrap();
    let before = diskstats::find(&a.disks, 254, 0).unwrap();
    let after = diskstats::find(&b.disks, 254, 0).unwrap();
    assert_eq!(vda.w_per_s, Some((after.writes - before.writes) as f64));
    assert!(vda.wareq_sz_kb.unwrap() > 0.0);
    // dd wrote 64 KiB blocks with O_DIRECT and is the busiest writer.
    let dd = &s.processes[0];
    assert_eq!(dd.comm, "dd");
    assert!(dd.write_bytes_per_s.unwrap() > 0.0);
    assert_eq!(
        dd.io_delay_pct, None,
        "delay accounting is off in the capture"
    );
    assert!(s.notes.iter().any(|n| n.contains("task_delayacct")));
    let wa = &s.write_amplification;
    assert!(wa.device_write_bytes > 0 && wa.process_write_bytes > 0);
    assert!(wa.ratio.unwrap() > 0.5, "{wa:?}");
    // CPU split adds up; memory as free computes it.
    let c = &s.cpu.all;
    let sum = c.user_pct
        + c.nice_pct
        + c.system_pct
        + c.irq_pct
        + c.softirq_pct
        + c.iowait_pct
        + c.steal_pct
        + c.guest_pct
        + c.idle_pct;
    assert!((sum - 100.0).abs() < 1e-6);
    assert_eq!(s.cpu.per_cpu.len(), 2);
    assert_eq!(
        s.memory.used_bytes,
        s.memory.total_bytes - s.memory.available_bytes
    );
    let io = s.psi.io.as_ref().unwrap();
    assert!(io.some.stall_ms.unwrap() >= io.full.as_ref().unwrap().stall_ms.unwrap());
    assert!(s.net.iter().any(|n| n.name == "eth0"));
    assert!(s.load.context_switches_per_s.is_some_and(|r| r > 0.0));

    let json = serde_json::to_value(&s).unwrap();
    for key in [
        "user_pct",
        "system_pct",
        "iowait_pct",
        "irq_pct",
        "softirq_pct",
        "steal_pct",
        "idle_pct",
    ] {
        assert!(json["cpu"][key].is_number(), "cpu.{key}");
    }
    for key in [
        "total_bytes",
        "used_bytes",
        "free_bytes",
        "shared_bytes",
        "buffers_bytes",
        "cache_bytes",
        "available_bytes",
    ] {
        assert!(json["memory"][key].is_number(), "memory.{key}");
    }
    for key in [
        "name",
        "r_per_s",
        "w_per_s",
        "rkb_per_s",
        "wkb_per_s",
        "r_await_ms",
        "w_await_ms",
        "aqu_sz",
        "util_pct",
    ] {
        assert!(!json["disks"][0][key].is_null(), "disks[].{key}");
    }
    for key in ["pid", "comm", "read_bytes_per_s", "write_bytes_per_s"] {
        assert!(!json["processes"][0][key].is_null(), "processes[].{key}");
    }
    assert!(json["psi"].is_object() && json["net"].is_array() && json["findings"].is_array());
}

#[test]
fn reused_pids_are_not_compared() {
    let (a, mut b, devices) = pair();
    for p in &mut b.processes.processes {
        p.start_ticks += 1;
    }
    let s = between(&a, &b, &devices, &opts());
    assert!(s.processes.is_empty());
    assert_eq!(s.write_amplification.ratio, None);
}

#[test]
fn counters_that_go_backwards_give_no_rate_not_zero() {
    // A third sample whose counters went back to zero: eth0 was re-created, and the boot-wide
    // counters are what a hand-made capture may hold.
    let (_, b, devices) = pair();
    let (mut later, _) = sample("b");
    later.taken = b.taken + Duration::from_secs(1);
    later.stat.context_switches = 0;
    later.stat.forks = 0;
    let eth0 = later.net.iter_mut().find(|n| n.name == "eth0").unwrap();
    assert!(eth0.rx_bytes > 0, "the fixture's eth0 received nothing");
    eth0.rx_bytes = 0;
    let s = between(&b, &later, &devices, &opts());
    assert_eq!(s.load.context_switches_per_s, None);
    assert_eq!(s.load.forks_per_s, None);
    assert!(s.load.interrupts_per_s.is_some());
    assert!(
        s.net.iter().all(|n| n.name != "eth0"),
        "eth0 shown with rates"
    );
    assert!(
        s.notes
            .iter()
            .any(|n| n.starts_with("eth0: network counters went backwards")),
        "{:?}",
        s.notes
    );
}

#[test]
fn disk_culprits_are_exact_from_cgroup_counters_and_likely_from_open_files() {
    use crate::diagnose::sample::ProcessDetail;
    use crate::kernel::cgroup::{CgroupDeviceIo, CgroupIo, CgroupIoScan, SOURCE_V1};
    use crate::kernel::procinfo::{OpenDevice, ProcessCgroups};
    use culprits::Attribution;

    let (mut a, mut b, devices) = pair();
    let dd = b
        .processes
        .processes
        .iter()
        .find(|p| p.comm == "dd")
        .unwrap()
        .pid;
    b.details.insert(
        dd,
        ProcessDetail {
            cgroups: Some(ProcessCgroups {
                unit_path: Some("/user.slice/session-3.scope".into()),
                io_path: Some("/job".into()),
            }),
            open_devices: vec![OpenDevice {
                major: 254,
                minor: 0,
                write: true,
                path: "/dev/vda".into(),
            }],
            swap_bytes: None,
        },
    );
    // No kernel counters: dd's own bytes, tied to vda by its open descriptor.
    let s = between(&a, &b, &devices, &opts());
    let (dir, c) = &s.culprits.disks["vda"];
    assert_eq!(*dir, super::culprits::Direction::Writes);
    assert_eq!(c[0].pid, Some(dd));
    assert_eq!(c[0].unit.as_deref(), Some("session-3.scope"));
    let Attribution::Likely { reason } = &c[0].attribution else {
        panic!("{c:?}")
    };
    assert!(reason.contains("/dev/vda"), "{reason}");
    // No other device's culprits name dd.
    for (name, (_, others)) in &s.culprits.disks {
        if name != "vda" {
            assert!(
                others.iter().all(|o| o.pid != Some(dd)),
                "{name}: {others:?}"
            );
        }
    }

    // Its cgroup's kernel counters saw half of vda's writes: exact, and half.
    let vda_written = s
        .disks
        .iter()
        .find(|d| d.device.name == "vda")
        .unwrap()
        .write_bytes;
    let scan = |wbytes: u64| CgroupIoScan {
        cgroups: vec![CgroupIo {
            path: "/job".into(),
            devices: vec![CgroupDeviceIo {
                major: 254,
                minor: 0,
                wbytes,
                ..CgroupDeviceIo::default()
            }],
        }],
        unavailable: None,
        source: SOURCE_V1.into(),
    };
    a.cgroups = scan(1 << 20);
    b.cgroups = scan((1 << 20) + vda_written.unwrap() / 2);
    let mut s = between(&a, &b, &devices, &opts());
    let (_, c) = &s.culprits.disks["vda"];
    assert_eq!(c[0].pid, Some(dd));
    assert!(matches!(&c[0].attribution, Attribution::Exact { source } if source.contains("/job")));
    assert!((c[0].share_pct - 50.0).abs() < 1.0, "{}", c[0].share_pct);

    // A judged sample names dd in the sentence when vda is busy.
    crate::diagnose::findings::Judge::new().judge(&mut s);
    let f = s.findings.iter().find(|f| f.subject == "vda");
    if let Some(f) = f {
        assert!(
            f.message
                .contains(&format!("of writes from dd (pid {dd}, session-3.scope)")),
            "{}",
            f.message
        );
    }
}

#[test]
fn accumulated_totals_add_up_intervals() {
    let (a, b, _) = pair();
    let mut acc = accumulate::Accumulator::new();
    acc.add(&a, &b, &opts());
    acc.add(&a, &b, &opts());
    let t = acc.totals(5, SortKey::Io);
    let once = process::deltas(&a, &b, &opts());
    let dd = once.iter().find(|d| d.comm == "dd").unwrap();
    let row = t.processes.iter().find(|p| p.pid == dd.pid).unwrap();
    assert_eq!(row.write_bytes, 2 * dd.write_bytes.unwrap());
    assert_eq!(t.processes[0].pid, dd.pid);
    let all: u64 = t.services.iter().map(|s| s.write_bytes).sum();
    assert!(all >= row.write_bytes);
}

#[test]
fn a_process_born_in_the_interval_counts_from_nothing_and_an_unseen_old_one_does_not() {
    let (mut a, mut b, _) = pair();
    let boot = a.stat.boot_time_s.expect("the capture has btime");
    let template = b.processes.processes[0].clone();
    let ticks_at = |unix: f64| ((unix - boot as f64) * 100.0) as u64;
    let with = |pid: u32, start_ticks: u64| crate::kernel::process::ProcessCounters {
        pid,
        comm: format!("new{pid}"),
        start_ticks,
        utime: 7,
        stime: 3,
        io: Some(crate::kernel::process::ProcessIo {
            write_bytes: 5 << 20,
            ..Default::default()
        }),
        ..template.clone()
    };
    // Born half a second after `a`; and one that started long before `a` yet was not in it
    // (its earlier counters may have been counted already: it must not count from zero).
    b.processes
        .processes
        .push(with(4_000_001, ticks_at(a.unix_time_s + 1.5)));
    b.processes
        .processes
        .push(with(4_000_002, ticks_at(a.unix_time_s - 60.0)));
    let d = process::deltas(&a, &b, &opts());
    let born = d.iter().find(|d| d.pid == 4_000_001).expect("the newborn");
    assert_eq!(born.write_bytes, Some(5 << 20));
    assert_eq!((born.utime, born.stime), (7, 3));
    assert!(d.iter().all(|d| d.pid != 4_000_002), "{:?}", d.last());

    // With the boot clock of `a`'s scan, a process born 0.2 s after it counts from nothing
    // even where btime, whole seconds rounded down, is 0.9 s before the real boot (it was
    // skipped: its first interval's bytes, a whole dd burst, were lost).
    let real_boot = boot as f64 + 0.9;
    a.boot_clock_s = Some(a.unix_time_s - real_boot);
    let at = |unix: f64| ((unix - real_boot) * 100.0) as u64;
    let (mut newborn, mut old) = (with(4_000_003, at(a.unix_time_s + 0.2)), with(4_000_004, 0));
    old.start_ticks = at(a.unix_time_s - 0.05);
    newborn.comm = "newborn".into();
    b.processes.processes.extend([newborn, old]);
    let d = process::deltas(&a, &b, &opts());
    let born = d
        .iter()
        .find(|d| d.pid == 4_000_003)
        .expect("born 0.2 s after the scan");
    assert_eq!(born.write_bytes, Some(5 << 20));
    assert!(d.iter().all(|d| d.pid != 4_000_004), "born before the scan");
    a.boot_clock_s = None;

    // Without a boot time (history recorded before it was kept) both count from nothing.
    a.stat.boot_time_s = None;
    let d = process::deltas(&a, &b, &opts());
    assert!(d.iter().any(|d| d.pid == 4_000_002));
}
