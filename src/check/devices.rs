//! Block devices: the I/O scheduler against what the device is (HDD, SATA SSD, NVMe, virtual
//! disk), nr_requests, read-ahead, the write cache mode, and md resyncs in progress.

use super::facts::{Disk, Facts};
use super::{Evidence, Finding, Group, Options, Profile, Remedy, Severity, cmds};
use crate::kernel::blockdev::DeviceKind;
use crate::tune::Setting;

/// What kind of storage a disk is, which decides the scheduler that suits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Media {
    Hdd,
    Ssd,
    Nvme,
    /// A disk emulated by a hypervisor: the host's storage and scheduler are behind it.
    Virtual,
}

impl Media {
    fn name(self) -> &'static str {
        match self {
            Media::Hdd => "rotational disk",
            Media::Ssd => "SATA/SAS SSD",
            Media::Nvme => "NVMe SSD",
            Media::Virtual => "virtual disk",
        }
    }
}

/// Model or vendor strings of disks that hypervisors and clouds emulate.
const VIRTUAL_MARKERS: &[&str] = &[
    "QEMU",
    "VMware",
    "VBOX",
    "Virtual disk",
    "Virtual Disk",
    "Msft",
    "Amazon Elastic Block Store",
    "PersistentDisk",
    "Google",
    "0x1af4",
];

/// Classifies a disk, with the reason; `None` for devices that have no hardware queue of
/// their own to tune (loop, md, dm, zram, empty drives).
pub fn classify(d: &Disk) -> Option<(Media, String)> {
    let name = d.dev.name.as_str();
    if d.dev.kind != DeviceKind::Disk
        || d.dev.size_bytes == 0
        || name.starts_with("zram")
        || name.starts_with("ram")
        || name.starts_with("pmem")
        || name.starts_with("nbd")
    {
        return None;
    }
    let driver = d.hw.driver.as_deref().unwrap_or("");
    let subsystem = d.hw.subsystem.as_deref().unwrap_or("");
    let strings = [d.dev.model.as_deref(), d.hw.vendor.as_deref()];
    if matches!(driver, "virtio_blk" | "xen_blkfront") || matches!(subsystem, "virtio" | "xen") {
        return Some((Media::Virtual, format!("driver {driver}, bus {subsystem}")));
    }
    if let Some(marker) = VIRTUAL_MARKERS
        .iter()
        .find(|m| strings.iter().flatten().any(|s| s.contains(*m)))
    {
        return Some((Media::Virtual, format!("model/vendor says {marker:?}")));
    }
    if name.starts_with("vd") || name.starts_with("xvd") {
        return Some((Media::Virtual, format!("name {name}")));
    }
    if name.starts_with("nvme") {
        return Some((Media::Nvme, "NVMe namespace".to_string()));
    }
    match d.dev.rotational {
        Some(true) => Some((Media::Hdd, "queue/rotational 1".to_string())),
        Some(false) => Some((Media::Ssd, "queue/rotational 0".to_string())),
        None => None,
    }
}

pub fn rules(facts: &Facts, options: Options, out: &mut Vec<Finding>) {
    for d in &facts.disks {
        let Some((media, reason)) = classify(d) else {
            continue;
        };
        let Some(q) = &d.queue else { continue };
        let dev = d.dev.name.as_str();
        let kind = Evidence::new(
            format!("/sys/block/{dev}"),
            format!(
                "{} ({reason}; model {})",
                media.name(),
                d.dev.model.as_deref().unwrap_or("not reported")
            ),
        );
        if let Some(s) = q.scheduler.as_deref() {
            out.push(scheduler(dev, media, s, kind.clone()));
        }
        if let Some(n) = q.nr_requests {
            out.push(nr_requests(dev, n, kind.clone()));
        }
        if let Some(kb) = q.read_ahead_kb {
            out.push(read_ahead(dev, kb, options.profile, kind.clone()));
        }
        if let Some(wc) = q.write_cache.as_deref() {
            out.push(write_cache(d, media, wc, kind));
        }
    }
    md_sync(facts, out);
}

fn queue_evidence(dev: &str, attr: &str, value: impl Into<String>) -> Evidence {
    Evidence::new(format!("/sys/block/{dev}/queue/{attr}"), value)
}

fn scheduler(dev: &str, media: Media, active: &str, kind: Evidence) -> Finding {
    use Severity::{Info, Ok, Warn};
    let (severity, want, why) = match (media, active) {
        (Media::Virtual, "none") | (Media::Nvme, "none") => (Ok, "none", ""),
        (Media::Virtual | Media::Nvme, "bfq") => (
            Warn,
            "none",
            "BFQ's per-request bookkeeping costs CPU on every I/O and caps a fast device's \
             IOPS; it is meant for slow devices and desktop interactivity.",
        ),
        (Media::Virtual, _) => (
            Info,
            "none",
            "The host schedules the real disk; a guest scheduler reorders requests the host \
             will reorder again and adds CPU per I/O. VMs usually run none.",
        ),
        (Media::Nvme, _) => (
            Info,
            "none",
            "NVMe drives have many deep hardware queues; the kernel default none avoids \
             scheduler overhead per I/O.",
        ),
        (Media::Ssd, "bfq") => (
            Info,
            "mq-deadline",
            "BFQ trades throughput for fairness between processes; servers usually prefer \
             mq-deadline or none on SSDs.",
        ),
        (Media::Ssd, _) => (Ok, active, ""),
        (Media::Hdd, "none") => (
            Warn,
            "mq-deadline",
            "A rotational disk pays a seek for every out-of-order request; none passes them \
             in arrival order, mq-deadline sorts and merges them and favours reads.",
        ),
        (Media::Hdd, "kyber") => (
            Info,
            "mq-deadline",
            "kyber targets fast devices; on a rotational disk mq-deadline (or bfq for \
             per-process fairness) sorts requests to save seeks.",
        ),
        (Media::Hdd, _) => (Ok, active, ""),
    };
    let ok = severity == Ok;
    Finding {
        id: "io_scheduler",
        group: Group::Storage,
        subject: Some(dev.to_string()),
        severity,
        title: if ok {
            format!("scheduler {active} suits a {}", media.name())
        } else {
            format!(
                "scheduler {active} on a {}; {want} suits it better",
                media.name()
            )
        },
        evidence: vec![kind, queue_evidence(dev, "scheduler", active)],
        why: if ok {
            "The scheduler matches the device type.".to_string()
        } else {
            why.to_string()
        },
        reference: "kernel Documentation/block/blk-mq.rst, deadline-iosched.rst, \
                    kyber-iosched.rst and bfq-iosched.rst; switching-sched.rst"
            .to_string(),
        remedy: if ok {
            Remedy::default()
        } else {
            cmds::setting(&Setting::Scheduler(dev.into()), want, active)
        },
    }
}

/// Below this, the queue holds too few requests for an SSD or NVMe drive to work in
/// parallel, or for a scheduler to sort (the kernel's own default is 64 or more).
const MIN_NR_REQUESTS: u64 = 32;

fn nr_requests(dev: &str, n: u64, kind: Evidence) -> Finding {
    let low = n < MIN_NR_REQUESTS;
    Finding {
        id: "nr_requests",
        group: Group::Storage,
        subject: Some(dev.to_string()),
        severity: if low { Severity::Warn } else { Severity::Ok },
        title: if low {
            format!("nr_requests {n}: too few requests in flight to keep the device busy")
        } else {
            format!("nr_requests {n}")
        },
        evidence: vec![kind, queue_evidence(dev, "nr_requests", n.to_string())],
        why: "nr_requests bounds the requests queued per hardware queue; SSDs reach their \
              rated IOPS only with dozens in flight, and a scheduler can only sort what is \
              queued."
            .to_string(),
        reference: "kernel docs, block/queue-sysfs.rst".to_string(),
        remedy: if low {
            cmds::queue_attr(dev, "nr_requests", "128", &n.to_string())
        } else {
            Remedy::default()
        },
    }
}

/// Read-ahead above this many KiB reads megabytes for each random read of a file: fine for
/// streaming, waste for random access.
const LARGE_READ_AHEAD_KB: u64 = 4096;
/// MongoDB's production notes: WiredTiger wants 8–32 sectors (4–16 KiB) of read-ahead.
const MONGODB_READ_AHEAD_KB: u64 = 16;

fn read_ahead(dev: &str, kb: u64, profile: Profile, kind: Evidence) -> Finding {
    let (severity, want, why, reference) = if kb == 0 {
        (
            Severity::Warn,
            128,
            "Read-ahead 0 turns every sequential file read into one small synchronous \
             request: streaming reads and backups slow down several times.",
            "kernel docs, block/queue-sysfs.rst (read_ahead_kb)",
        )
    } else if profile == Profile::Mongodb && kb > MONGODB_READ_AHEAD_KB {
        (
            Severity::Warn,
            MONGODB_READ_AHEAD_KB,
            "WiredTiger reads pages at random; a large read-ahead reads data nobody asked \
             for and evicts cache that was useful.",
            "MongoDB production notes (read-ahead 8 to 32 sectors for WiredTiger)",
        )
    } else if kb > LARGE_READ_AHEAD_KB {
        (
            Severity::Info,
            128,
            "Each random read of a file may pull this much more from the device; good for \
             streaming large files, wasted bandwidth for databases and small-file work.",
            "kernel docs, block/queue-sysfs.rst (read_ahead_kb; the default is 128)",
        )
    } else {
        (
            Severity::Ok,
            kb,
            "",
            "kernel docs, block/queue-sysfs.rst (read_ahead_kb)",
        )
    };
    let ok = severity == Severity::Ok;
    Finding {
        id: "read_ahead",
        group: Group::Storage,
        subject: Some(dev.to_string()),
        severity,
        title: if ok {
            format!("read_ahead_kb {kb}")
        } else {
            format!("read_ahead_kb {kb}; {want} suits this workload better")
        },
        evidence: vec![kind, queue_evidence(dev, "read_ahead_kb", kb.to_string())],
        why: if ok {
            "Read-ahead is in the usual range.".to_string()
        } else {
            why.to_string()
        },
        reference: reference.to_string(),
        remedy: if ok {
            Remedy::default()
        } else {
            cmds::setting(
                &Setting::ReadAhead(dev.into()),
                &want.to_string(),
                &kb.to_string(),
            )
        },
    }
}

fn write_cache(d: &Disk, media: Media, mode: &str, kind: Evidence) -> Finding {
    let dev = d.dev.name.as_str();
    let mut evidence = vec![kind, queue_evidence(dev, "write_cache", mode)];
    let drive = d.hw.device_cache_type.as_deref();
    if let Some(drive) = drive {
        evidence.push(Evidence::new(
            format!("/sys/block/{dev}/device/scsi_disk/*/cache_type"),
            drive,
        ));
    }
    let (severity, title, why, remedy) = match (mode, drive, media) {
        ("write through", Some(drive), _) if drive.starts_with("write back") => (
            Severity::Crit,
            "kernel told write through, but the drive caches writes: flushes are not sent"
                .to_string(),
            "With the queue set to write through the kernel sends no cache flushes, so \
             fsync returns before data leaves the drive's volatile cache: a power loss \
             loses acknowledged writes. Benchmarks look faster than the disk is.",
            cmds::queue_attr(dev, "write_cache", "write back", mode),
        ),
        ("write through", _, Media::Virtual) => (
            Severity::Info,
            "write through: the host acknowledges each write only when stored".to_string(),
            "The hypervisor exposes no volatile cache (QEMU writethrough or directsync cache \
             mode): safe, but every write waits for the host's storage. Check the cache \
             mode on the host (see the virtualization finding).",
            Remedy::default(),
        ),
        ("write through", _, _) => (
            Severity::Info,
            "write through: the drive's volatile write cache is off or absent".to_string(),
            "Writes complete only when on stable media: safe, slower for small writes. \
             Enable the drive cache (hdparm -W1) only if the drive or controller has \
             power-loss protection or the kernel sends flushes.",
            Remedy::default(),
        ),
        _ => (
            Severity::Ok,
            format!("{mode}: the kernel flushes the device cache on fsync"),
            "The device caches writes and the kernel sends flushes, so fsync means durable.",
            Remedy::default(),
        ),
    };
    Finding {
        id: "write_cache",
        group: Group::Storage,
        subject: Some(dev.to_string()),
        severity,
        title,
        evidence,
        why: why.to_string(),
        reference: "kernel docs, block/queue-sysfs.rst (write_cache) and \
                    block/writeback_cache_control.rst"
            .to_string(),
        remedy,
    }
}

fn md_sync(facts: &Facts, out: &mut Vec<Finding>) {
    let limit = facts.sysctl.get("dev.raid.speed_limit_max").copied();
    for a in &facts.md {
        let mut evidence = vec![Evidence::new(
            "/proc/mdstat",
            format!(
                "{} {} on {}",
                a.name,
                a.level.as_deref().unwrap_or("inactive"),
                a.members.join(", ")
            ),
        )];
        let Some(s) = &a.sync else {
            out.push(Finding {
                id: "md_resync",
                group: Group::Storage,
                subject: Some(a.name.clone()),
                severity: Severity::Ok,
                title: "no resync, recovery or check running".to_string(),
                evidence,
                why: "The member disks serve only the array's own I/O.".to_string(),
                reference: "kernel docs, admin-guide/md.rst".to_string(),
                remedy: Remedy::default(),
            });
            continue;
        };
        let progress = match (s.done_pct, s.speed_kib_per_s, s.finish_min) {
            (Some(p), Some(v), Some(f)) => {
                format!("{p:.1}% done at {} MiB/s, about {f:.0} min left", v / 1024)
            }
            (Some(p), _, _) => format!("{p:.1}% done"),
            _ => "waiting to start".to_string(),
        };
        evidence.push(Evidence::new(
            "/proc/mdstat",
            format!("{} {progress}", s.action),
        ));
        if let Some(l) = limit {
            evidence.push(Evidence::new(
                "/proc/sys/dev/raid/speed_limit_max",
                format!("{l} KiB/s"),
            ));
        }
        let remedy = match limit {
            // Only for the duration of this resync: nothing to persist.
            Some(l) => Remedy {
                fix: Some("sysctl -w dev.raid.speed_limit_max=50000".to_string()),
                persist: None,
                revert: Some(format!("sysctl -w dev.raid.speed_limit_max={l}")),
                manual: true,
            },
            None => Remedy::default(),
        };
        out.push(Finding {
            id: "md_resync",
            group: Group::Storage,
            subject: Some(a.name.clone()),
            severity: Severity::Warn,
            title: format!("{} in progress: {progress}", s.action),
            evidence,
            why: "The resync reads (and writes) every member disk at up to speed_limit_max; \
                  until it ends, other I/O competes with it and benchmarks measure what is \
                  left. Waiting is usually right: capping the speed prolongs the window \
                  without redundancy."
                .to_string(),
            reference: "kernel docs, admin-guide/md.rst (sync_speed_max)".to_string(),
            remedy,
        });
    }
}
