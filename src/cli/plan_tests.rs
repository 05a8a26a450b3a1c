//! The command line resolved into a disk-test plan: clap's parsing and the plan's checks
//! together, as a user meets them.

use crate::bench::plan::{DiskOptions, Plan, plan};
use crate::bench::result::TargetInfo;
use crate::bench::target::{Inspected, Kind};
use crate::cli::{BenchWhat, Cli, Command};
use crate::io::{EngineKind, Rw, SyncEvery, SyncKind};
use anyhow::Result;
use clap::{CommandFactory, Parser};
use std::time::Duration;

fn target(kind: Kind, capacity: u64, lbs: u32) -> Inspected {
    Inspected {
        kind,
        path: "/t".into(),
        info: TargetInfo {
            path: "/t".into(),
            kind: Kind::Directory,
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
        free_bytes: Some(100 << 30),
        notes: vec![],
    }
}

fn args(line: &str) -> DiskOptions {
    let argv = format!("tacho bench disk {line}");
    match Cli::try_parse_from(argv.split_whitespace())
        .unwrap()
        .command
    {
        Command::Bench(b) => match b.what {
            Some(BenchWhat::Disk(d)) => d.options(),
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
            .all(|t| t.spec.runtime() == Duration::from_secs(2))
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
        (s.rw(), s.bs(), s.iodepth(), s.numjobs(), s.rwmixread()),
        (Rw::RandRw, 8192, 16, 2, 70)
    );
    assert_eq!(
        (s.runtime(), s.ramp()),
        (Duration::from_secs(2), Duration::from_millis(500))
    );
    assert_eq!(s.region_bytes(), 64 << 20);
    assert_eq!(
        s.sync(),
        Some(SyncEvery {
            kind: SyncKind::Fdatasync,
            every: 4
        })
    );
    assert_eq!(s.seed(), 7);
    assert!(!s.direct());
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

#[test]
fn the_sustained_suite_writes_half_the_free_space_once_and_runs_once() {
    let p = plan_of("--suite sustained").unwrap();
    // target(): 100 GiB free.
    assert_eq!(p.region_bytes, 50 << 30);
    assert_eq!((p.repeat, p.standard, p.prefill), (1, true, false));
    assert_eq!(p.flat_for, Duration::from_secs(30));
    for t in &p.tests {
        assert_eq!(t.spec.io_limit(), Some(50 << 30));
        assert_eq!(t.spec.ramp(), Duration::ZERO);
        assert!(t.until_flat.is_some());
    }
    let p = plan_of("--suite sustained --size 64M --flat-for 2s").unwrap();
    assert_eq!(
        (p.region_bytes, p.flat_for),
        (64 << 20, Duration::from_secs(2))
    );
    assert!(!p.standard);
    let mut unknown = target(Kind::Directory, 1 << 30, 512);
    unknown.free_bytes = None;
    let a = args("--suite sustained");
    let err = plan(&a, &unknown, EngineKind::IoUring)
        .unwrap_err()
        .to_string();
    assert!(err.contains("--size"), "{err}");
    assert!(err_of("--flat-for 5s").contains("--suite sustained"));
    assert!(err_of("--suite sustained --flat-for 0s").contains("at least one second"));
}

#[test]
fn precondition_takes_its_round() {
    assert_eq!(
        args("--precondition").precondition,
        Some(Duration::from_secs(60))
    );
    let a = args("--precondition --precondition-round 2s");
    assert_eq!(a.precondition, Some(Duration::from_secs(2)));
    assert_eq!(
        plan_of("--precondition").unwrap().precondition,
        Some(Duration::from_secs(60))
    );
    assert!(err_of("--precondition --precondition-round 0s").contains("longer than zero"));
}
