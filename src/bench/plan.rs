//! Turns the command line into the list of tests to run, rejecting what cannot work before
//! anything is created (the second step of argument handling).

use super::suite::{self, Suite, SuiteTest, UntilFlat};
use super::target::{Inspected, Kind};
use crate::choice::Choice;
use crate::io::buffer::ALIGN;
use crate::io::{BsShare, EngineKind, JobParams, JobSpec, OpenSync, Rw, SyncEvery, SyncKind};
use crate::units::{format_bytes_approx, format_size};
use anyhow::{Context, Result, bail};
use std::time::Duration;

pub const CUSTOM_RUNTIME: Duration = Duration::from_secs(10);
/// Repeats of every suite test when `--repeat` is not given (a custom test runs once).
pub const SUITE_REPEATS: u32 = 3;

/// What the user asked of `bench disk`: a suite (by name, default `quick`) or one custom test
/// in fio's terms, plus options that change the method. `None` means "not given", so the plan
/// can tell a suite's own values from the user's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DiskOptions {
    pub suite: Option<String>,
    pub repeat: Option<u32>,
    pub threshold: Option<Duration>,
    pub rw: Option<Rw>,
    /// `--bs`: block size in bytes.
    pub bs: Option<u64>,
    /// `--iodepth`: I/Os in flight per job.
    pub iodepth: Option<u32>,
    /// `--numjobs`: parallel jobs.
    pub numjobs: Option<u32>,
    /// `--rwmixread`: share of reads in a mixed test, in percent.
    pub rwmixread: Option<u8>,
    /// `--bssplit`: the block-size mix; empty when not given.
    pub bssplit: Vec<BsShare>,
    /// `--fsync`: fsync after every N writes.
    pub fsync: Option<u32>,
    /// `--fdatasync`: fdatasync after every N writes.
    pub fdatasync: Option<u32>,
    /// `--engine`: the I/O engine.
    pub engine: Option<EngineKind>,
    pub buffered: bool,
    pub size: Option<u64>,
    pub runtime: Option<Duration>,
    pub ramp: Option<Duration>,
    /// `--flat-for`: how long a sustained test's rate must be flat before it stops.
    pub flat_for: Option<Duration>,
    /// `--precondition`: precondition the region first, with random rounds this long.
    pub precondition: Option<Duration>,
    pub randseed: Option<u64>,
    /// Open with O_DSYNC or O_SYNC (dd's oflag).
    pub open_sync: Option<OpenSync>,
    /// A custom test's workers stop after this many bytes each (fio's size-based jobs).
    pub io_limit: Option<u64>,
    /// Run the host-cache probe: `Some(true)` anywhere, `Some(false)` never, `None` on a
    /// virtual disk only (the caller decides, knowing the disk).
    pub probe_cache: Option<bool>,
}

#[derive(Debug)]
pub struct PlannedTest {
    pub name: String,
    pub spec: JobSpec,
    /// Every repeat starts from an empty test file (see [`SuiteTest::fresh`]).
    pub fresh: bool,
    /// A sustained test also stops once its rate has been flat for the plan's `flat_for`.
    pub until_flat: Option<UntilFlat>,
}

#[derive(Debug)]
pub struct Plan {
    /// The suite that runs; `None` for a custom test.
    pub suite: Option<Suite>,
    /// False when options changed a suite's method (runtime, ramp, size, buffered I/O): such
    /// results do not compare with standard runs of the same suite version.
    pub standard: bool,
    /// The tests in run order, each with its resolved job.
    pub tests: Vec<PlannedTest>,
    /// Bytes of the file or device the tests touch (the test file's size for a directory).
    pub region_bytes: u64,
    /// Whether any test writes (the target must then be safe to write to).
    pub writes: bool,
    /// Fill a test file with data before the first test.
    pub prefill: bool,
    pub repeat: u32,
    /// The etcd suite's pass mark for fdatasync p99.
    pub threshold: Option<Duration>,
    /// Run the host-cache probe after the layout, before the first test.
    pub probe_cache: bool,
    /// The target's logical block size: the smallest direct I/O it takes.
    pub lbs: u64,
    /// How long a sustained test's rate must be flat before it stops.
    pub flat_for: Duration,
    /// Precondition the region before the tests, with random rounds this long.
    pub precondition: Option<Duration>,
    /// Keep each test's latency histograms in its result (a run of a group).
    pub histograms: bool,
}

impl Plan {
    /// True when any test uses O_DIRECT (the target must accept it).
    pub fn any_direct(&self) -> bool {
        self.tests.iter().any(|t| t.spec.direct())
    }

    /// Refuses a plan whose memory (one aligned buffer per I/O in flight in every job, what
    /// both engines allocate, plus each job's histograms) would take more than half of
    /// `available` bytes (MemAvailable), so a typo such as `--bs 256M --iodepth 64` is an
    /// error, not tacho or a neighbour OOM-killed. Tests run one after another, so the largest
    /// one counts.
    pub fn check_memory(&self, available: u64) -> Result<()> {
        let Some((t, need)) = self
            .tests
            .iter()
            .map(|t| (t, memory_needed(&t.spec)))
            .max_by_key(|(_, need)| *need)
        else {
            return Ok(());
        };
        if need <= available / 2 {
            return Ok(());
        }
        bail!(
            "test {} needs about {} of memory for I/O buffers (block size {} × iodepth {} × {} \
             job{}), more than half of the {} available; lower the block size, iodepth or numjobs",
            t.name,
            format_bytes_approx(need),
            format_size(t.spec.bs()),
            t.spec.iodepth(),
            t.spec.numjobs(),
            if t.spec.numjobs() == 1 { "" } else { "s" },
            format_bytes_approx(available)
        )
    }
}

/// What a test holds in memory while it runs, as measured with `/usr/bin/time -v`: per I/O in
/// flight its block rounded up to the alignment plus up to one alignment of padding; per job
/// about 1 MiB (latency histograms, timeline, ring).
fn memory_needed(spec: &JobSpec) -> u64 {
    let align = ALIGN as u64;
    let per_io = spec
        .bs()
        .div_ceil(align)
        .saturating_add(1)
        .saturating_mul(align);
    let per_job = per_io
        .saturating_mul(u64::from(spec.iodepth()))
        .saturating_add(1 << 20);
    per_job.saturating_mul(u64::from(spec.numjobs()))
}

/// Options that describe one custom test and so make no sense with a suite.
fn custom_options(a: &DiskOptions) -> Vec<&'static str> {
    let given = [
        ("--bs", a.bs.is_some()),
        ("--bssplit", !a.bssplit.is_empty()),
        ("--iodepth", a.iodepth.is_some()),
        ("--numjobs", a.numjobs.is_some()),
        ("--rwmixread", a.rwmixread.is_some()),
        ("--fsync", a.fsync.is_some()),
        ("--fdatasync", a.fdatasync.is_some()),
        ("--sync", a.open_sync.is_some()),
    ];
    given.iter().filter(|(_, g)| *g).map(|(n, _)| *n).collect()
}

/// `engine` is what the machine can run: the asked-for engine, or psync when io_uring is
/// blocked (the caller notes the fallback).
pub fn plan(a: &DiskOptions, target: &Inspected, engine: EngineKind) -> Result<Plan> {
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
    if a.precondition.is_some_and(|d| d.is_zero()) {
        bail!("--precondition-round must be longer than zero, e.g. 60s");
    }
    let sustained = suite.as_ref().and_then(|s| s.flat_for);
    if a.flat_for.is_some() && sustained.is_none() {
        bail!(
            "--flat-for sets how long the sustained suite waits for a flat rate; add --suite sustained or drop it"
        );
    }
    if a.flat_for.is_some_and(|d| d.as_secs() == 0) {
        bail!("--flat-for must be at least one second, e.g. 10s");
    }
    let suite_size = suite.as_ref().and_then(|s| s.size);
    let region_wanted = match a.size.or(suite_size) {
        Some(size) => size,
        None => free_share(suite.as_ref(), target)?.unwrap_or(target.capacity),
    };
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
            fresh: s.fresh,
            until_flat: s.until_flat,
            name: s.name,
            spec: JobSpec::new(JobParams {
                rw: s.rw,
                bs: s.bs,
                bssplit: s.bssplit,
                iodepth: s.iodepth,
                numjobs: s.numjobs,
                region_bytes,
                runtime,
                ramp,
                // A sustained test writes its region once at most.
                io_limit: match &suite {
                    Some(s) if s.free_share.is_some() => Some(region_bytes),
                    Some(s) => s.io_limit,
                    None => a.io_limit,
                },
                rwmixread: s.rwmixread.unwrap_or(50),
                sync: s.sync,
                open_sync: s.open_sync,
                direct,
                engine: test_engine,
                seed,
            })?,
        });
    }
    let writes = tests.iter().any(|t| t.spec.rw().writes());
    let changed = a.runtime.is_some()
        || a.ramp.is_some()
        || a.size.is_some()
        || a.buffered
        || a.flat_for.is_some();
    Ok(Plan {
        standard: suite.is_some() && !changed,
        prefill: suite.as_ref().is_none_or(|s| s.prefill),
        repeat: a.repeat.unwrap_or(match &suite {
            Some(s) => s.repeats.unwrap_or(SUITE_REPEATS),
            None => 1,
        }),
        threshold: is_etcd.then(|| a.threshold.unwrap_or(suite::ETCD_P99_LIMIT)),
        suite,
        tests,
        region_bytes,
        writes,
        probe_cache: a.probe_cache == Some(true),
        lbs,
        flat_for: a.flat_for.or(sustained).unwrap_or(suite::SUSTAINED_FLAT),
        precondition: a.precondition,
        histograms: false,
    })
}

/// The test file of a suite that writes until a cache is spent, in a directory with no
/// `--size`: its share of the free space (the test file's own check then keeps 5% free).
fn free_share(suite: Option<&Suite>, target: &Inspected) -> Result<Option<u64>> {
    let Some(share) = suite.and_then(|s| s.free_share) else {
        return Ok(None);
    };
    if target.kind != Kind::Directory {
        return Ok(None);
    }
    match target.free_bytes {
        Some(free) if free > 0 => Ok(Some((free as f64 * share) as u64)),
        _ => bail!(
            "cannot tell how much space {} has free, and the {} suite writes a share of it; \
             give --size",
            target.path.display(),
            suite.map_or("", |s| s.name)
        ),
    }
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
fn custom_shape(a: &DiskOptions) -> Result<SuiteTest> {
    let rw = a.rw.context("a custom test needs --rw")?;
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
    if a.open_sync.is_some() && !rw.writes() {
        bail!("--sync makes writes synchronous, but --rw {rw} only reads; use a write pattern");
    }
    if sync.is_some() && !rw.writes() {
        bail!("--fsync/--fdatasync follow writes, but --rw {rw} only reads; use a write pattern");
    }
    if a.rwmixread.is_some() && !rw.is_mixed() {
        bail!("--rwmixread applies to mixed tests only; use --rw rw or --rw randrw");
    }
    let bssplit = a.bssplit.clone();
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
    if let Some(o) = a.open_sync {
        name.push_str(&format!(" O_{}", o.word().to_uppercase()));
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
        open_sync: a.open_sync,
        engine: None,
        direct: None,
        fresh: false,
        about: None,
        until_flat: None,
    })
}
