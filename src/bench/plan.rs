//! Turns the command line into the list of tests to run, rejecting what cannot work before
//! anything is created (the second step of argument handling).

use super::suite::{self, Suite};
use super::target::{Inspected, Kind};
use crate::cli::DiskArgs;
use crate::io::{EngineKind, JobSpec, Rw, SyncEvery, SyncKind};
use crate::units::format_size;
use anyhow::{Result, bail};
use std::time::Duration;

const CUSTOM_RUNTIME: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub struct PlannedTest {
    pub name: String,
    pub spec: JobSpec,
}

#[derive(Debug)]
pub struct Plan {
    pub suite: Option<Suite>,
    pub tests: Vec<PlannedTest>,
    /// Bytes of the file or device the tests touch (the test file's size for a directory).
    pub region_bytes: u64,
    pub direct: bool,
    pub writes: bool,
}

/// Options that describe one custom test and so make no sense with a suite.
fn custom_options(a: &DiskArgs) -> Vec<&'static str> {
    let given = [
        ("--bs", a.bs.is_some()),
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
    let direct = !a.buffered;
    if a.runtime == Some(Duration::ZERO) {
        bail!("--runtime must be longer than zero, e.g. 5s");
    }
    let seed = a.randseed.unwrap_or_else(|| fastrand::u64(..));
    let (suite, shapes) = match a.rw {
        Some(rw) => (None, vec![custom_shape(a, rw, engine)?]),
        None => {
            if let Some(first) = custom_options(a).first() {
                bail!(
                    "{first} describes a custom test; add --rw to run one, or drop {first} to \
                     run the suite"
                );
            }
            let suite =
                suite::find(a.suite.as_deref().unwrap_or("quick")).map_err(anyhow::Error::msg)?;
            if engine == EngineKind::Sync {
                bail!(
                    "the {} suite keeps several I/Os in flight, which the sync engine cannot; \
                     drop --engine or use --engine io_uring or psync",
                    suite.name
                );
            }
            let shapes = suite
                .tests
                .iter()
                .map(|t| Shape {
                    name: t.name.to_string(),
                    rw: t.rw,
                    bs: t.bs,
                    iodepth: t.iodepth,
                    numjobs: t.numjobs,
                    rwmixread: 50,
                    sync: t.sync,
                    engine,
                    runtime: a.runtime.unwrap_or(suite.runtime),
                    ramp: a.ramp.unwrap_or(suite.ramp),
                })
                .collect();
            (Some(suite), shapes)
        }
    };
    let lbs = u64::from(target.info.logical_block_size.max(1));
    let region_wanted = a.size.unwrap_or(target.capacity);
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
    let mut tests = Vec::new();
    for s in shapes {
        if direct && s.bs % lbs != 0 {
            bail!(
                "--bs {} is not a multiple of the logical block size ({lbs} bytes), which direct \
                 I/O requires; use a multiple of {lbs}, or add --buffered",
                s.bs
            );
        }
        if region_bytes < s.bs {
            bail!(
                "the region ({}) is smaller than one block ({}); use a larger --size",
                format_size(region_wanted),
                format_size(s.bs)
            );
        }
        tests.push(PlannedTest {
            name: s.name,
            spec: JobSpec {
                rw: s.rw,
                bs: s.bs,
                iodepth: s.iodepth,
                numjobs: s.numjobs,
                region_bytes,
                runtime: s.runtime,
                ramp: s.ramp,
                rwmixread: s.rwmixread,
                sync: s.sync,
                direct,
                engine: s.engine,
                seed,
            },
        });
    }
    let writes = tests.iter().any(|t| t.spec.rw.writes());
    Ok(Plan {
        suite,
        tests,
        region_bytes,
        direct,
        writes,
    })
}

struct Shape {
    name: String,
    rw: Rw,
    bs: u64,
    iodepth: u32,
    numjobs: u32,
    rwmixread: u8,
    sync: Option<SyncEvery>,
    engine: EngineKind,
    runtime: Duration,
    ramp: Duration,
}

fn custom_shape(a: &DiskArgs, rw: Rw, engine: EngineKind) -> Result<Shape> {
    let iodepth = a.iodepth.unwrap_or(1);
    if engine == EngineKind::Sync && iodepth > 1 {
        bail!(
            "--iodepth {iodepth} needs an asynchronous engine: the sync engine does one I/O at a \
             time; drop --iodepth or use --engine io_uring"
        );
    }
    let threads = iodepth * a.numjobs.unwrap_or(1);
    if engine == EngineKind::Psync && threads > 1024 {
        bail!(
            "--engine psync runs one thread per queued I/O, and {threads} threads is too many; \
             lower --iodepth × --numjobs to 1024 or use --engine io_uring"
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
    let bs = a.bs.unwrap_or(4096);
    let mut name = format!(
        "{rw} {} Q{iodepth}T{}",
        format_size(bs),
        a.numjobs.unwrap_or(1)
    );
    if let Some(s) = sync {
        name.push_str(&format!(" +{}/{}", s.kind, s.every));
    }
    Ok(Shape {
        name,
        rw,
        bs,
        iodepth,
        numjobs: a.numjobs.unwrap_or(1),
        rwmixread: a.rwmixread.unwrap_or(50),
        sync,
        engine,
        runtime: a.runtime.unwrap_or(CUSTOM_RUNTIME),
        ramp: a.ramp.unwrap_or(Duration::ZERO),
    })
}
