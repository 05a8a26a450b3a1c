//! Honesty checks: every known way a storage benchmark lies, turned into a warning in words.
//!
//! Pure functions over what the run measured and what was read of the machine, so each rule
//! is tested with made-up figures; the integration tests build the real situations.

use super::result::{TargetInfo, TestResult, Warning};
use crate::kernel::host::Host;
use crate::kernel::link::Link;
use crate::units::{format_bandwidth, format_bytes_approx, format_count, format_latency_ns};
use crate::warning::Code;

/// Above this spread between repeats, something (usually a cache) is not steady.
pub const SPREAD_LIMIT_PCT: f64 = 10.0;
/// Tests this small cannot say much about caches; below it the device check stays quiet.
const MIN_CHECKED_BYTES: u64 = 16 << 20;

/// What the checks know of the machine besides the results.
pub struct Context<'a> {
    /// What was benchmarked (filesystem, devices, region).
    pub target: &'a TargetInfo,
    /// The machine (virtualization, memory).
    pub host: &'a Host,
    /// The link of the single physical disk under the target, when sysfs describes one.
    pub link: Option<&'a Link>,
    /// The virtual disk under the target and how it was recognised (`vda: driver virtio_blk`).
    pub virtual_disk: Option<&'a str>,
    /// Bytes of the tested region of an existing file that are holes.
    pub hole_bytes: u64,
}

/// Where a warning goes when warnings are listed, lower first: what makes a figure wrong,
/// then what makes it doubtful, then the rest, then where it ran. A match over every code, so
/// a new one cannot be left without a place.
pub fn weight(code: Code) -> usize {
    match code {
        Code::MemoryBacked => 0,
        Code::HostCache => 1,
        Code::LoopBuffered => 2,
        Code::SparseFile => 3,
        Code::CacheSuspected => 4,
        Code::FasterThanDevice => 5,
        Code::FitsInRam => 6,
        Code::DirectUnsupported => 7,
        Code::Interrupted => 8,
        Code::SpreadHigh => 9,
        Code::NotSteadyState => 10,
        Code::FioFileReplaced
        | Code::FioLibaioAsIoUring
        | Code::Spread
        | Code::PoorScaling
        | Code::Steal
        | Code::NoCacheInfo
        | Code::LevelsNotDistinct
        | Code::DramSizeReduced
        | Code::NonzeroExit
        | Code::TimedOut
        | Code::FasterThanShell
        | Code::FirstRunSlower
        | Code::Outliers => 11,
        Code::HostCacheUnprobed => 12,
        Code::CowFs => 13,
        Code::CompressingFs => 14,
        Code::IoUringUnavailable => 15,
        Code::NoDevice => 16,
        Code::RemovedStaleFile => 17,
        Code::VmDetected => 18,
    }
}

/// Orders warnings by [`weight`], keeping the order of equal ones.
pub fn sort_by_weight(warnings: &mut [Warning]) {
    warnings.sort_by_key(|w| weight(w.code));
}

/// Warnings about the whole run: where it ran.
pub fn run_warnings(ctx: &Context) -> Vec<Warning> {
    let mut out = Vec::new();
    // Only a disk the hypervisor provides can be cached by the host; tmpfs, zram or a
    // passed-through device in a VM cannot.
    if let Some(disk) = ctx.virtual_disk {
        let hypervisor = ctx
            .host
            .virtualization
            .as_deref()
            .map_or(String::new(), |v| format!("; hypervisor: {v}"));
        out.push(Warning {
            code: Code::VmDetected,
            message: format!(
                "the target is on a virtual disk ({disk}{hypervisor}): the host may cache it \
                 (writeback or unsafe cache mode), which cannot be verified from inside; check \
                 the VM's disk cache mode on the host"
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
            code: Code::CowFs,
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
            code: Code::CompressingFs,
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
    out.extend(interrupted(test));
    let sparse = sparse_file(ctx, test);
    // Reads of holes are answered with zeros by the filesystem: that, not a cache, is why the
    // device saw less.
    let holes_explain_reads = sparse.is_some();
    out.extend(sparse);
    out.extend(device_saw_less(test, holes_explain_reads));
    out.extend(faster_than_seek(ctx, test));
    out.extend(fits_in_ram(ctx, test));
    out.extend(spread_high(test));
    out.extend(faster_than_link(ctx, test));
    out.extend(not_steady(test));
    out
}

fn interrupted(test: &TestResult) -> Option<Warning> {
    let last = test.repeats.last()?;
    test.interrupted.then(|| Warning {
        code: Code::Interrupted,
        message: format!(
            "{}: stopped by a signal {:.1} s into repeat {} of its measured time: the figures \
             cover less time than was asked and may not be steady",
            test.name,
            last.runtime_s,
            test.repeats.len()
        ),
    })
}

fn sparse_file(ctx: &Context, test: &TestResult) -> Option<Warning> {
    let region = ctx.target.region_bytes;
    if ctx.hole_bytes == 0 || region == 0 || !test.rw.reads() {
        return None;
    }
    let pct = (ctx.hole_bytes as f64 * 100.0 / region as f64).round();
    Some(Warning {
        code: Code::SparseFile,
        message: format!(
            "{}: {pct:.0}% of {} is holes: reads of holes return zeros without touching the \
             disk; fill it first (e.g. dd if=/dev/urandom of=FILE bs=1M count={} \
             conv=notrunc) or give tacho a directory",
            test.name,
            ctx.target.path,
            region.div_ceil(1 << 20)
        ),
    })
}

/// Bytes the busiest device under the target completed in a direction.
fn device_bytes(
    test: &TestResult,
    pick: fn(&crate::kernel::diskstats::DiskDelta) -> Option<u64>,
) -> Option<u64> {
    test.device.iter().filter_map(pick).max()
}

fn device_saw_less(test: &TestResult, reads_explained: bool) -> Option<Warning> {
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
        let seen = seen.filter(|_| !(reads_explained && verb == "read"))?;
        // Half is far below any filesystem's overhead; a real device shows at least what it
        // was given (plus metadata and journal).
        (issued >= MIN_CHECKED_BYTES && seen * 2 < issued).then(|| Warning {
            code: Code::CacheSuspected,
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
        code: Code::CacheSuspected,
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
        code: Code::FitsInRam,
        message: format!(
            "{}: buffered I/O on {} of data, less than twice this machine's {} of RAM: the page \
             cache can hold it, so this measures memory as much as the disk; use direct I/O or a \
             --size above {} (e.g. --size {}G)",
            test.name,
            format_bytes_approx(region),
            format_bytes_approx(mem),
            format_bytes_approx(2 * mem),
            (2 * mem).div_ceil(1 << 30)
        ),
    })
}

fn spread_high(test: &TestResult) -> Option<Warning> {
    let spread = test.spread_pct?;
    (spread > SPREAD_LIMIT_PCT).then(|| Warning {
        code: Code::SpreadHigh,
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
        code: Code::FasterThanDevice,
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
/// A sustained test whose cliff was found says where instead (running longer is what it did).
fn not_steady(test: &TestResult) -> Option<Warning> {
    if test.cliff.is_some() {
        return None;
    }
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
                code: Code::NotSteadyState,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A context with no link, no virtual disk and no holes.
    fn plain<'a>(target: &'a TargetInfo, host: &'a Host) -> Context<'a> {
        Context {
            target,
            host,
            link: None,
            virtual_disk: None,
            hole_bytes: 0,
        }
    }
    use crate::io::{
        EngineKind, JobParams, JobSpec, Measured, Rw, SyncEvery, SyncKind, worker::Dir,
    };
    use crate::kernel::diskstats::DiskDelta;
    use std::time::Duration;

    fn host(virt: Option<&str>) -> Host {
        Host {
            hostname: None,
            machine_id: None,
            labels: Default::default(),
            kernel: None,
            os: None,
            cpu_model: None,
            cpus: Some(2),
            mem_total_bytes: Some(8 << 30),
            virtualization: virt.map(str::to_string),
            virtualization_evidence: vec!["cpuinfo flag hypervisor".into()],
            unreadable: vec![],
        }
    }

    fn target(fs: &str, options: &str, rotational: Option<bool>) -> TargetInfo {
        TargetInfo {
            path: "/data".into(),
            kind: crate::bench::result::Kind::Directory,
            region_bytes: 1 << 30,
            filesystem: Some(fs.into()),
            mount_point: Some("/data".into()),
            mount_options: Some(options.into()),
            devices: vec!["sda".into()],
            device_model: None,
            rotational,
            scheduler: None,
            logical_block_size: 512,
        }
    }

    fn spec(rw: Rw, iodepth: u32, direct: bool) -> JobSpec {
        JobSpec::new(params(rw, iodepth, direct)).unwrap()
    }

    fn params(rw: Rw, iodepth: u32, direct: bool) -> JobParams {
        JobParams {
            rw,
            bs: 4096,
            bssplit: vec![],
            iodepth,
            numjobs: 1,
            region_bytes: 1 << 30,
            runtime: Duration::from_secs(5),
            ramp: Duration::ZERO,
            io_limit: None,
            rwmixread: 50,
            sync: None,
            open_sync: None,
            direct,
            engine: EngineKind::IoUring,
            seed: 1,
        }
    }

    /// One repeat per entry of `per_second`: that many 4 KiB I/Os in each of its seconds, each
    /// taking `latency_ns`.
    fn measured(dir: Dir, per_second: &[u64], latency_ns: u64) -> Measured {
        let mut m = Measured::default();
        for (second, &ios) in per_second.iter().enumerate() {
            for _ in 0..ios {
                m.completed(dir, 4096, latency_ns, second);
                m.issued(dir, 4096);
            }
        }
        m.elapsed = Duration::from_secs(per_second.len() as u64);
        m
    }

    fn result(spec: &JobSpec, repeats: &[Measured], device_bytes: Option<u64>) -> TestResult {
        let device = device_bytes
            .map(|b| DiskDelta {
                name: "sda".into(),
                reads: Some(b / 4096),
                read_bytes: Some(b),
                writes: Some(b / 4096),
                write_bytes: Some(b),
                flushes: None,
                read_ms: None,
                write_ms: None,
                io_ms: None,
                discards: None,
                discard_bytes: None,
            })
            .into_iter()
            .collect();
        TestResult::new("t".into(), spec, repeats, device)
    }

    fn codes(ws: &[Warning]) -> Vec<&'static str> {
        ws.iter().map(|w| w.code.as_str()).collect()
    }

    fn check(ctx: &Context, t: &TestResult) -> Vec<&'static str> {
        codes(&test_warnings(ctx, t))
    }

    #[test]
    fn a_plain_direct_test_raises_nothing() {
        let (t, h) = (target("ext4", "rw,relatime", Some(false)), host(None));
        let ctx = plain(&t, &h);
        let m = measured(Dir::Read, &[5000; 5], 200_000);
        let r = result(
            &spec(Rw::RandRead, 32, true),
            &[m.clone(), m.clone(), m],
            Some(3 * 25_000 * 4096),
        );
        assert!(check(&ctx, &r).is_empty(), "{:?}", r.warnings);
        assert!(run_warnings(&ctx).is_empty());
    }

    #[test]
    fn device_that_saw_less_than_issued_means_a_cache() {
        let (t, h) = (target("ext4", "", None), host(None));
        let ctx = plain(&t, &h);
        let m = measured(Dir::Read, &[10_000; 2], 10_000);
        let r = result(&spec(Rw::Read, 1, true), &[m], Some(4 << 20));
        assert_eq!(check(&ctx, &r), vec!["cache-suspected"]);
        // Without device counters (tmpfs, btrfs) there is nothing to compare: no claim.
        let m = measured(Dir::Read, &[10_000; 2], 10_000);
        assert!(check(&ctx, &result(&spec(Rw::Read, 1, true), &[m], None)).is_empty());
    }

    #[test]
    fn a_spinning_disk_cannot_seek_in_microseconds() {
        let h = host(None);
        let t = target("ext4", "", Some(true));
        let ctx = plain(&t, &h);
        let fast = measured(Dir::Read, &[10_000; 1], 80_000);
        let seen = Some(10_000 * 4096);
        assert_eq!(
            check(
                &ctx,
                &result(
                    &spec(Rw::RandRead, 1, true),
                    std::slice::from_ref(&fast),
                    seen
                )
            ),
            vec!["cache-suspected"]
        );
        let slow = measured(Dir::Read, &[150; 1], 6_000_000);
        assert!(
            check(
                &ctx,
                &result(&spec(Rw::RandRead, 1, true), &[slow], Some(150 * 4096))
            )
            .is_empty()
        );
        // In a VM the rotational flag means nothing (virtio says 1 for everything).
        let vm = host(Some("kvm"));
        let ctx = Context { ..plain(&t, &vm) };
        assert!(check(&ctx, &result(&spec(Rw::RandRead, 1, true), &[fast], seen)).is_empty());
    }

    #[test]
    fn buffered_data_that_fits_in_ram() {
        let (t, h) = (target("ext4", "", None), host(None));
        let ctx = plain(&t, &h);
        let m = measured(Dir::Read, &[100; 1], 1000);
        assert_eq!(
            check(
                &ctx,
                &result(&spec(Rw::Read, 1, false), std::slice::from_ref(&m), None)
            ),
            vec!["fits-in-ram"]
        );
        // Writes flushed one by one (etcd's test) reach the disk whatever the cache holds.
        let etcd = JobSpec::new(JobParams {
            sync: Some(SyncEvery {
                kind: SyncKind::Fdatasync,
                every: 1,
            }),
            ..params(Rw::Write, 1, false)
        })
        .unwrap();
        let w = measured(Dir::Write, &[100; 1], 1000);
        assert!(check(&ctx, &result(&etcd, &[w], None)).is_empty());
        let big = TargetInfo {
            region_bytes: 17 << 30,
            ..t.clone()
        };
        let ctx = Context { ..plain(&big, &h) };
        assert!(check(&ctx, &result(&spec(Rw::Read, 1, false), &[m], None)).is_empty());
    }

    #[test]
    fn repeats_that_disagree() {
        let (t, h) = (target("ext4", "", None), host(None));
        let ctx = plain(&t, &h);
        let runs = [
            measured(Dir::Read, &[1000], 1000),
            measured(Dir::Read, &[1000], 1000),
            measured(Dir::Read, &[800], 1000),
        ];
        let r = result(&spec(Rw::Read, 1, true), &runs, None);
        assert_eq!(r.spread_pct, Some(20.0));
        assert_eq!(check(&ctx, &r), vec!["spread-high"]);
    }

    #[test]
    fn faster_than_the_link() {
        let (t, h) = (target("ext4", "", None), host(None));
        let sata = crate::kernel::link::parse_sata("1.5 Gbps").unwrap();
        let ctx = Context {
            link: Some(&sata),
            ..plain(&t, &h)
        };
        // 50k × 4 KiB per second = 205 MB/s, above SATA 1.5 Gbps' 150 MB/s.
        let m = measured(Dir::Read, &[50_000; 2], 10_000);
        assert_eq!(
            check(&ctx, &result(&spec(Rw::Read, 1, true), &[m], None)),
            vec!["faster-than-device"]
        );
        let m = measured(Dir::Read, &[20_000; 2], 10_000);
        assert!(check(&ctx, &result(&spec(Rw::Read, 1, true), &[m], None)).is_empty());
    }

    #[test]
    fn a_start_unlike_the_rest() {
        let (t, h) = (target("ext4", "", None), host(None));
        let ctx = plain(&t, &h);
        let slc = measured(Dir::Write, &[9000, 3000, 3000, 3000, 3000, 3000], 1000);
        assert_eq!(
            check(&ctx, &result(&spec(Rw::Write, 1, true), &[slc], None)),
            vec!["not-steady-state"]
        );
        let flat = measured(Dir::Write, &[3100, 3000, 2950, 3000, 3050, 3000], 1000);
        assert!(check(&ctx, &result(&spec(Rw::Write, 1, true), &[flat], None)).is_empty());
    }

    #[test]
    fn where_it_runs() {
        let h = host(Some("kvm"));
        let t = target("btrfs", "rw,compress=zstd:3,space_cache=v2", None);
        let ctx = Context {
            virtual_disk: Some("vda: driver virtio_blk"),
            ..plain(&t, &h)
        };
        let mut ws = run_warnings(&ctx);
        assert_eq!(codes(&ws), vec!["vm-detected", "cow-fs", "compressing-fs"]);
        assert!(
            ws[0].message.contains("vda: driver virtio_blk"),
            "{}",
            ws[0].message
        );
        sort_by_weight(&mut ws);
        assert_eq!(codes(&ws), vec!["cow-fs", "compressing-fs", "vm-detected"]);
        // In a VM, storage that is not a virtual disk (tmpfs, zram) is not the host's to cache.
        let ctx = Context {
            virtual_disk: None,
            ..ctx
        };
        assert_eq!(codes(&run_warnings(&ctx)), vec!["cow-fs", "compressing-fs"]);
        let t = target("btrfs", "rw,nodatacow", None);
        let bare = host(None);
        let ctx = plain(&t, &bare);
        assert!(run_warnings(&ctx).is_empty());
    }

    #[test]
    fn what_makes_a_figure_wrong_comes_first() {
        let mut ws: Vec<Warning> = [
            Code::VmDetected,
            Code::SpreadHigh,
            Code::FioFileReplaced,
            Code::CacheSuspected,
        ]
        .into_iter()
        .map(|code| Warning {
            code,
            message: String::new(),
        })
        .collect();
        sort_by_weight(&mut ws);
        assert_eq!(
            codes(&ws),
            vec![
                "cache-suspected",
                "spread-high",
                "fio-file-replaced",
                "vm-detected"
            ]
        );
    }

    #[test]
    fn holes_read_as_zeros_are_named_not_blamed_on_a_cache() {
        let t = TargetInfo {
            kind: crate::bench::result::Kind::File,
            ..target("ext4", "", Some(false))
        };
        let h = host(None);
        let ctx = Context {
            hole_bytes: 3 << 28,
            ..plain(&t, &h)
        };
        let m = measured(Dir::Read, &[10_000; 2], 10_000);
        let r = result(&spec(Rw::RandRead, 1, true), &[m], Some(1 << 20));
        let ws = test_warnings(&ctx, &r);
        assert_eq!(codes(&ws), vec!["sparse-file"]);
        assert!(
            ws[0].message.contains("75% of /data is holes"),
            "{}",
            ws[0].message
        );
        // Writes fill holes as they go: nothing to say.
        let w = measured(Dir::Write, &[100; 1], 1000);
        assert!(check(&ctx, &result(&spec(Rw::Write, 1, true), &[w], None)).is_empty());
    }

    #[test]
    fn an_interrupted_test_says_so() {
        let (t, h) = (target("ext4", "", None), host(None));
        let ctx = plain(&t, &h);
        let mut r = result(
            &spec(Rw::Read, 1, true),
            &[measured(Dir::Read, &[100; 2], 1000)],
            None,
        );
        assert!(check(&ctx, &r).is_empty());
        r.interrupted = true;
        let ws = test_warnings(&ctx, &r);
        assert_eq!(codes(&ws), vec!["interrupted"]);
        assert!(
            ws[0].message.contains("2.0 s into repeat 1"),
            "{}",
            ws[0].message
        );
    }
}
