//! Turns the command line into the list of tests to run, rejecting what cannot work before
//! anything is created (the second step of argument handling).

use super::suite::{self, Suite, SuiteTest};
use super::target::{Inspected, Kind};
use crate::cli::DiskArgs;
use crate::io::{EngineKind, JobSpec, SyncEvery, SyncKind};
use crate::units::format_size;
use anyhow::{Result, bail};
use std::time::Duration;

const CUSTOM_RUNTIME: Duration = Duration::from_secs(10);
const SUITE_REPEATS: u32 = 3;

#[derive(Debug)]
pub struct PlannedTest {
    pub name: String,
    pub spec: JobSpec,
}

#[derive(Debug)]
pub struct Plan {
    pub suite: Option<Suite>,
    /// False when options changed a suite's method (runtime, ramp, size, buffered I/O): such
    /// results do not compare with standard runs of the same suite version.
    pub standard: bool,
    pub tests: Vec<PlannedTest>,
    /// Bytes of the file or device the tests touch (the test file's size for a directory).
    pub region_bytes: u64,
    pub writes: bool,
    /// Fill a test file with data before the first test.
    pub prefill: bool,
    pub repeat: u32,
    /// The etcd suite's pass mark for fdatasync p99.
    pub threshold: Option<Duration>,
}

impl Plan {
    /// True when any test uses O_DIRECT (the target must accept it).
    pub fn any_direct(&self) -> bool {
        self.tests.iter().any(|t| t.spec.direct)
    }
}

/// Options that describe one custom test and so make no sense with a suite.
fn custom_options(a: &DiskArgs) -> Vec<&'static str> {
    let given = [
        ("--bs", a.bs.is_some()),
        ("--bssplit", a.bssplit.is_some()),
        ("--iodepth", a.iodepth.is_some()),
        ("--numjobs", a.numjobs.is_some()),
        ("--rwmixread", a.rwmixread.is_some()),
        ("--fsync", a.fsync.is_some()),
        ("--fdatasync", a.fdatasync.is_some()),
    ];
    given.iter().filter(|(_, g)| *g).map(|(n, _)| *n).collect()
}

/// `engine` is what the machine can run: the asked-for engine, or psync when io_uring is
/// blocked (the caller notes the fallback).
pub fn plan(a: &DiskArgs, target: &Inspected, engine: EngineKind) -> Result<Plan> {
    if a.runtime == Some(Duration::ZERO) {
        bail!("--runtime must be longer than zero, e.g. 5s");
    }
    // Below 2^63: fio's --randseed takes no larger value, and --print-fio must reproduce it.
    let seed = a.randseed.unwrap_or_else(|| fastrand::u64(..1 << 63));
    let (suite, shapes) = match a.rw {
        Some(_) => (None, vec![custom_shape(a)?]),
        None => {
            if let Some(first) = custom_options(a).first() {
                bail!(
                    "{first} describes a custom test; add --rw to run one, or drop {first} to \
                     run the suite"
                );
            }
            let suite =
                suite::find(a.suite.as_deref().unwrap_or("quick")).map_err(anyhow::Error::msg)?;
            let shapes = suite.tests.clone();
            (Some(suite), shapes)
        }
    };
    let is_etcd = suite.as_ref().is_some_and(|s| s.name == "etcd");
    if a.threshold.is_some() && !is_etcd {
        bail!("--threshold sets the etcd suite's pass mark; add --suite etcd or drop it");
    }
    let runtime = a
        .runtime
        .unwrap_or(suite.as_ref().map_or(CUSTOM_RUNTIME, |s| s.runtime));
    let ramp = a
        .ramp
        .unwrap_or(suite.as_ref().map_or(Duration::ZERO, |s| s.ramp));
    let suite_size = suite.as_ref().and_then(|s| s.size);
    let region_wanted = a.size.or(suite_size).unwrap_or(target.capacity);
    if region_wanted > target.capacity && target.kind != Kind::Directory {
        bail!(
            "--size {} is larger than the target ({}); give at most {}",
            format_size(region_wanted),
            format_size(target.capacity),
            format_size(target.capacity)
        );
    }
    let max_bs = shapes.iter().map(|s| s.bs).max().unwrap_or(1);
    // Whole blocks of the largest block size, so every test's I/Os stay inside the region.
    let region_bytes = region_wanted / max_bs * max_bs;
    let lbs = u64::from(target.info.logical_block_size.max(1));
    let mut tests = Vec::new();
    for s in shapes {
        let test_engine = s.engine.unwrap_or(engine);
        if test_engine == EngineKind::Sync && s.iodepth > 1 {
            bail!(
                "--iodepth {} needs an asynchronous engine: the sync engine does one I/O at a \
                 time; use --engine io_uring (or psync){}",
                s.iodepth,
                if suite.is_some() {
                    " with this suite"
                } else {
                    ""
                }
            );
        }
        let direct = s.direct.unwrap_or(!a.buffered);
        validate_sizes(&s, direct, lbs, region_bytes, region_wanted)?;
        tests.push(PlannedTest {
            name: s.name,
            spec: JobSpec {
                rw: s.rw,
                bs: s.bs,
                bssplit: s.bssplit,
                iodepth: s.iodepth,
                numjobs: s.numjobs,
                region_bytes,
                runtime,
                ramp,
                io_limit: suite.as_ref().and_then(|s| s.io_limit),
                rwmixread: s.rwmixread.unwrap_or(50),
                sync: s.sync,
                direct,
                engine: test_engine,
                seed,
            },
        });
    }
    let writes = tests.iter().any(|t| t.spec.rw.writes());
    let changed = a.runtime.is_some() || a.ramp.is_some() || a.size.is_some() || a.buffered;
    Ok(Plan {
        standard: suite.is_some() && !changed,
        prefill: suite.as_ref().is_none_or(|s| s.prefill),
        repeat: a
            .repeat
            .unwrap_or(if suite.is_some() { SUITE_REPEATS } else { 1 }),
        threshold: is_etcd.then(|| a.threshold.unwrap_or(suite::ETCD_P99_LIMIT)),
        suite,
        tests,
        region_bytes,
        writes,
    })
}

fn validate_sizes(s: &SuiteTest, direct: bool, lbs: u64, region: u64, wanted: u64) -> Result<()> {
    let sizes: Vec<u64> = if s.bssplit.is_empty() {
        vec![s.bs]
    } else {
        s.bssplit.iter().map(|b| b.size).collect()
    };
    for size in sizes {
        if direct && size % lbs != 0 {
            bail!(
                "block size {size} is not a multiple of the logical block size ({lbs} bytes), \
                 which direct I/O requires; use a multiple of {lbs}, or add --buffered"
            );
        }
    }
    if region < s.bs {
        bail!(
            "the region ({}) is smaller than one block ({}); use a larger --size",
            format_size(wanted),
            format_size(s.bs)
        );
    }
    Ok(())
}

/// The one test the custom options describe, with fio's defaults where they are silent.
fn custom_shape(a: &DiskArgs) -> Result<SuiteTest> {
    let rw = a.rw.expect("custom tests have --rw");
    let iodepth = a.iodepth.unwrap_or(1);
    let numjobs = a.numjobs.unwrap_or(1);
    if a.engine == Some(EngineKind::Psync) && iodepth * numjobs > 1024 {
        bail!(
            "--engine psync runs one thread per queued I/O, and {} threads is too many; \
             lower --iodepth × --numjobs to 1024 or use --engine io_uring",
            iodepth * numjobs
        );
    }
    let sync = match (a.fsync, a.fdatasync) {
        (Some(every), _) => Some(SyncEvery {
            kind: SyncKind::Fsync,
            every,
        }),
        (None, Some(every)) => Some(SyncEvery {
            kind: SyncKind::Fdatasync,
            every,
        }),
        (None, None) => None,
    };
    if sync.is_some() && !rw.writes() {
        bail!("--fsync/--fdatasync follow writes, but --rw {rw} only reads; use a write pattern");
    }
    if a.rwmixread.is_some() && !rw.is_mixed() {
        bail!("--rwmixread applies to mixed tests only; use --rw rw or --rw randrw");
    }
    let bssplit = a.bssplit.clone().map(|b| b.0).unwrap_or_default();
    if !bssplit.is_empty() && !rw.is_random() {
        bail!("--bssplit mixes block sizes of random I/O; use --rw randread, randwrite or randrw");
    }
    let bs = bssplit
        .iter()
        .map(|b| b.size)
        .max()
        .unwrap_or(a.bs.unwrap_or(4096));
    let size_words = if bssplit.is_empty() {
        format_size(bs)
    } else {
        "mix".to_string()
    };
    let mut name = format!("{rw} {size_words} Q{iodepth}T{numjobs}");
    if let Some(s) = sync {
        name.push_str(&format!(" +{}/{}", s.kind, s.every));
    }
    Ok(SuiteTest {
        name,
        rw,
        bs,
        bssplit,
        iodepth,
        numjobs,
        rwmixread: rw.is_mixed().then(|| a.rwmixread.unwrap_or(50)),
        sync,
        engine: None,
        direct: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::result::TargetInfo;
    use crate::cli::Cli;
    use crate::io::Rw;
    use clap::{CommandFactory, Parser};

    fn target(kind: Kind, capacity: u64, lbs: u32) -> Inspected {
        Inspected {
            kind,
            path: "/t".into(),
            info: TargetInfo {
                path: "/t".into(),
                kind: "directory",
                region_bytes: 0,
                filesystem: None,
                mount_point: None,
                mount_options: None,
                devices: vec![],
                device_model: None,
                rotational: None,
                scheduler: None,
                logical_block_size: lbs,
            },
            device: None,
            stats_devnos: vec![],
            capacity,
            notes: vec![],
        }
    }

    fn args(line: &str) -> DiskArgs {
        let argv = format!("tacho bench disk {line}");
        match Cli::try_parse_from(argv.split_whitespace())
            .unwrap()
            .command
        {
            crate::cli::Command::Bench(b) => match b.what {
                Some(crate::cli::BenchWhat::Disk(d)) => *d,
                _ => panic!("no disk args"),
            },
            _ => panic!("not bench"),
        }
    }

    fn plan_of(line: &str) -> Result<Plan> {
        let a = args(line);
        let engine = a.engine.unwrap_or(EngineKind::IoUring);
        plan(&a, &target(Kind::Directory, 1 << 30, 512), engine)
    }

    fn err_of(line: &str) -> String {
        plan_of(line).unwrap_err().to_string()
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn no_options_is_the_quick_suite() {
        let p = plan_of("").unwrap();
        assert_eq!(p.suite.as_ref().unwrap().name, "quick");
        assert_eq!(p.tests.len(), 7);
        assert!(p.any_direct() && p.writes);
        assert_eq!((p.repeat, p.standard), (3, true));
        assert!(
            p.tests
                .iter()
                .all(|t| t.spec.runtime == Duration::from_secs(2))
        );
        assert_eq!(p.region_bytes, 1 << 30);
    }

    #[test]
    fn custom_test_takes_fio_options() {
        let p = plan_of(
            "--rw randrw --bs 8k --iodepth 16 --numjobs 2 --rwmixread 70 --runtime 2s --ramp 500ms \
             --size 64M --fdatasync 4 --randseed 7 --buffered",
        )
        .unwrap();
        let s = &p.tests[0].spec;
        assert_eq!(
            (s.rw, s.bs, s.iodepth, s.numjobs, s.rwmixread),
            (Rw::RandRw, 8192, 16, 2, 70)
        );
        assert_eq!(
            (s.runtime, s.ramp),
            (Duration::from_secs(2), Duration::from_millis(500))
        );
        assert_eq!(s.region_bytes, 64 << 20);
        assert_eq!(
            s.sync,
            Some(SyncEvery {
                kind: SyncKind::Fdatasync,
                every: 4
            })
        );
        assert_eq!(s.seed, 7);
        assert!(!s.direct);
    }

    #[test]
    fn region_is_whole_blocks() {
        let p = plan_of("--rw read --bs 1M --size 2500k").unwrap();
        assert_eq!(p.region_bytes, 2 << 20);
    }

    #[test]
    fn inconsistent_options_are_refused_with_the_fix() {
        assert!(err_of("--rw read --bs 1000").contains("multiple of 512"));
        assert!(err_of("--rw read --bs 1000").contains("--buffered"));
        assert!(err_of("--rw read --iodepth 32 --engine sync").contains("--engine io_uring"));
        assert!(err_of("--rw read --fsync 1").contains("only reads"));
        assert!(err_of("--rw read --rwmixread 70").contains("mixed"));
        assert!(err_of("--bs 4k").contains("add --rw"));
        assert!(err_of("--suite nope").contains("quick"));
        assert!(err_of("--engine sync").contains("suite"));
        assert!(err_of("--rw read --runtime 0").contains("longer than zero"));
        assert!(err_of("--rw read --bs 1M --size 4k").contains("smaller than one block"));
    }

    #[test]
    fn region_larger_than_a_file_is_refused() {
        let a = args("--rw read --size 2M");
        let err = plan(&a, &target(Kind::File, 1 << 20, 512), EngineKind::IoUring).unwrap_err();
        assert!(err.to_string().contains("larger than the target"), "{err}");
    }

    #[test]
    fn direct_io_follows_the_device_block_size() {
        let a = args("--rw read --bs 2k");
        let err = plan(
            &a,
            &target(Kind::BlockDevice, 1 << 30, 4096),
            EngineKind::IoUring,
        );
        assert!(err.unwrap_err().to_string().contains("4096"));
        let buffered = args("--rw read --bs 2300 --buffered");
        assert!(
            plan(
                &buffered,
                &target(Kind::BlockDevice, 1 << 30, 4096),
                EngineKind::IoUring
            )
            .is_ok()
        );
    }
}
