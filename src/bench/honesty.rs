//! Honesty checks: every known way a storage benchmark lies, turned into a warning in words.
//!
//! Pure functions over what the run measured and what was read of the machine, so each rule
//! is tested with made-up figures; the integration tests build the real situations.

use super::result::{TargetInfo, TestResult, Warning};
use crate::kernel::host::Host;
use crate::kernel::link::Link;
use crate::units::{
    format_bandwidth, format_bytes_approx, format_count, format_latency_ns, format_size,
};

/// Above this spread between repeats, something (usually a cache) is not steady.
pub const SPREAD_LIMIT_PCT: f64 = 10.0;
/// Tests this small cannot say much about caches; below it the device check stays quiet.
const MIN_CHECKED_BYTES: u64 = 16 << 20;

/// What the checks know of the machine besides the results.
pub struct Context<'a> {
    pub target: &'a TargetInfo,
    pub host: &'a Host,
    /// The link of the single physical disk under the target, when sysfs describes one.
    pub link: Option<&'a Link>,
}

/// Warnings about the whole run: where it ran.
pub fn run_warnings(ctx: &Context) -> Vec<Warning> {
    let mut out = Vec::new();
    if let Some(virt) = &ctx.host.virtualization {
        let evidence = ctx.host.virtualization_evidence.join(", ");
        out.push(Warning {
            code: "vm-detected",
            message: format!(
                "running under a hypervisor ({virt}; seen: {evidence}): the host may cache this \
                 disk (writeback or unsafe cache mode), which cannot be verified from inside; \
                 check the VM's disk cache mode on the host"
            ),
        });
    }
    let fs = ctx.target.filesystem.as_deref().unwrap_or("");
    let options = ctx.target.mount_options.as_deref().unwrap_or("");
    let cow = match fs {
        "btrfs" => !options.split(',').any(|o| o == "nodatacow"),
        "zfs" | "bcachefs" => true,
        _ => false,
    };
    if cow {
        out.push(Warning {
            code: "cow-fs",
            message: format!(
                "{fs} is copy-on-write: overwrites allocate new blocks and fragment the test \
                 file, so results differ from the device's and from other filesystems{}",
                if fs == "zfs" {
                    "; ZFS may also compress (check `zfs get compression`)"
                } else {
                    ""
                }
            ),
        });
    }
    if let Some(opt) = options.split(',').find(|o| o.starts_with("compress")) {
        out.push(Warning {
            code: "compressing-fs",
            message: format!(
                "{fs} is mounted with {opt}: tacho writes incompressible data, so this shows the \
                 worst case; real compressible data may be faster"
            ),
        });
    }
    out
}

/// Warnings about one test's figures.
pub fn test_warnings(ctx: &Context, test: &TestResult) -> Vec<Warning> {
    let mut out = Vec::new();
    out.extend(device_saw_less(test));
    out.extend(faster_than_seek(ctx, test));
    out.extend(fits_in_ram(ctx, test));
    out.extend(spread_high(test));
    out.extend(faster_than_link(ctx, test));
    out.extend(not_steady(test));
    out
}

/// Bytes the busiest device under the target completed in a direction.
fn device_bytes(
    test: &TestResult,
    pick: fn(&crate::kernel::diskstats::DiskDelta) -> Option<u64>,
) -> Option<u64> {
    test.device.iter().filter_map(pick).max()
}

fn device_saw_less(test: &TestResult) -> Option<Warning> {
    let checks = [
        (
            "read",
            test.issued.read_bytes,
            device_bytes(test, |d| d.read_bytes),
        ),
        (
            "wrote",
            test.issued.write_bytes,
            device_bytes(test, |d| d.write_bytes),
        ),
    ];
    checks.into_iter().find_map(|(verb, issued, seen)| {
        let seen = seen?;
        // Half is far below any filesystem's overhead; a real device shows at least what it
        // was given (plus metadata and journal).
        (issued >= MIN_CHECKED_BYTES && seen * 2 < issued).then(|| Warning {
            code: "cache-suspected",
            message: format!(
                "{}: tacho {verb} {} but the device completed only {}: the rest was served by a \
                 cache (page cache, or one in front of the device), not the disk",
                test.name,
                format_bytes_approx(issued),
                format_bytes_approx(seen)
            ),
        })
    })
}

/// A spinning disk needs a seek and half a rotation per random read: milliseconds.
fn faster_than_seek(ctx: &Context, test: &TestResult) -> Option<Warning> {
    // Virtual disks inherit `rotational=1` whatever is behind them; the VM warning covers them.
    if ctx.target.rotational != Some(true) || ctx.host.virtualization.is_some() {
        return None;
    }
    let read = test.read?;
    let qd1 = test.iodepth == 1 && test.numjobs == 1 && test.rw.is_random();
    (qd1 && read.lat_ns.p50 < 1_000_000).then(|| Warning {
        code: "cache-suspected",
        message: format!(
            "{}: the device says it is a spinning disk, yet random reads took {} at the median, \
             less than any seek: a cache (controller, page cache, SSD tier) answered them",
            test.name,
            format_latency_ns(read.lat_ns.p50 as f64)
        ),
    })
}

fn fits_in_ram(ctx: &Context, test: &TestResult) -> Option<Warning> {
    let mem = ctx.host.mem_total_bytes?;
    // Writes flushed after each one reach the device whatever the cache holds.
    let flushed_writes_only = test.read.is_none() && test.sync_every.is_some_and(|s| s.every == 1);
    let region = ctx.target.region_bytes;
    (!test.direct && !flushed_writes_only && region < 2 * mem).then(|| Warning {
        code: "fits-in-ram",
        message: format!(
            "{}: buffered I/O on {} of data, less than twice this machine's {} of RAM: the page \
             cache can hold it, so this measures memory as much as the disk; use direct I/O or a \
             --size above {}",
            test.name,
            format_size(region),
            format_size(mem),
            format_size(2 * mem)
        ),
    })
}

fn spread_high(test: &TestResult) -> Option<Warning> {
    let spread = test.spread_pct?;
    (spread > SPREAD_LIMIT_PCT).then(|| Warning {
        code: "spread-high",
        message: format!(
            "{}: the {} repeats differ by {spread:.0}% (more than {SPREAD_LIMIT_PCT:.0}%): \
             something is caching or competing; run longer or with more --repeat",
            test.name,
            test.repeats.len()
        ),
    })
}

fn faster_than_link(ctx: &Context, test: &TestResult) -> Option<Warning> {
    let link = ctx.link?;
    // 5% above the theoretical payload rate leaves room for rounding, none for a real device.
    (test.total_bw() > link.bytes_per_s * 1.05).then(|| Warning {
        code: "faster-than-device",
        message: format!(
            "{}: {} is more than the disk's link ({}, at most {}) can carry: the data came from a \
             cache on this side of the link",
            test.name,
            format_bandwidth(test.total_bw()),
            link.description,
            format_bandwidth(link.bytes_per_s)
        ),
    })
}

/// The first fifth of a repeat against the rest: SLC caches filling, thin volumes allocating
/// and write-back caches draining all show as a start that differs from the steady state.
fn not_steady(test: &TestResult) -> Option<Warning> {
    for repeat in 1..=test.repeats.len() as u32 {
        let iops: Vec<f64> = test
            .timeline
            .iter()
            .filter(|p| p.repeat == repeat)
            .map(|p| p.iops)
            .collect();
        if iops.len() < 5 {
            continue;
        }
        let head_len = iops.len().div_ceil(5);
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let (head, rest) = (mean(&iops[..head_len]), mean(&iops[head_len..]));
        if rest > 0.0 && ((head - rest) / rest).abs() > 0.25 {
            return Some(Warning {
                code: "not-steady-state",
                message: format!(
                    "{}: the first {head_len} s ran at {} IOPS, the rest at {} (repeat \
                     {repeat}): a cache filled or emptied during the test; run longer (--runtime) \
                     for the steady-state figure",
                    test.name,
                    format_count(head),
                    format_count(rest)
                ),
            });
        }
    }
    None
}
