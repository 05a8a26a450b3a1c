//! Fixed, versioned suites. A suite's tests never change without a new version, so results
//! of the same suite version compare fairly across machines and months.

use crate::io::{BsShare, EngineKind, OpenSync, Rw, SyncEvery, SyncKind};
use serde::Serialize;
use std::time::Duration;

/// One test of a suite; what it leaves open (`None`) comes from the command line.
#[derive(Clone, Debug, Serialize)]
pub struct SuiteTest {
    /// The test's name in reports (`SEQ1M Q8T1 read`).
    pub name: String,
    /// Access pattern.
    pub rw: Rw,
    /// Block size in bytes (the largest size of a mix).
    pub bs: u64,
    /// The block-size mix, if any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bssplit: Vec<BsShare>,
    /// I/Os in flight per job.
    pub iodepth: u32,
    pub numjobs: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rwmixread: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync: Option<SyncEvery>,
    /// Opened with O_DSYNC or O_SYNC (dd's oflag).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_sync: Option<OpenSync>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direct: Option<bool>,
    /// Every repeat writes into a new, empty test file (blocks allocated as they are written,
    /// as `dd of=FILE` creates one), not over the laid-out one.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub fresh: bool,
    /// What the test's figures measure, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub about: Option<&'static str>,
    /// A sustained test also stops once its per-second rate has been flat for the suite's
    /// `flat_s` (see [`UntilFlat`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until_flat: Option<UntilFlat>,
}

/// When a sustained test may stop before its runtime or region is used up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UntilFlat {
    /// Flat after the rate fell off a cliff: a device still writing into its cache looks flat
    /// too, so flatness before a fall does not count.
    AfterCliff,
    /// Flat at all (random writes after the sequential test spent the cache).
    Flat,
}

/// The etcd suite's pass mark: p99 of fdatasync below this (etcd's documented guidance).
pub const ETCD_P99_LIMIT: Duration = Duration::from_millis(10);

/// A fixed set of tests with a fixed method, versioned so that only like runs are compared.
#[derive(Clone, Debug, Serialize)]
pub struct Suite {
    /// The suite's name in `--suite` (`quick`, `cdm`, `etcd`, …).
    pub name: &'static str,
    /// Bumped whenever a test or the method changes.
    pub version: u32,
    /// One line saying what the suite measures, for `--list-suites`.
    pub about: &'static str,
    /// Measured time of every test.
    #[serde(rename = "runtime_s", serialize_with = "secs")]
    pub runtime: Duration,
    /// Warm-up before each test's measured time.
    #[serde(rename = "ramp_s", serialize_with = "secs")]
    pub ramp: Duration,
    /// Region or test file size; `None` means the run's default (1 GiB test file).
    #[serde(rename = "size_bytes", skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Each job stops after this many bytes even before `runtime` (fio's size-based runs).
    #[serde(rename = "io_limit_bytes", skip_serializing_if = "Option::is_none")]
    pub io_limit: Option<u64>,
    /// Whether a test file is filled with data before the tests (false: preallocated only,
    /// as etcd preallocates its WAL segments).
    pub prefill: bool,
    /// The tests, in run order.
    pub tests: Vec<SuiteTest>,
    /// How long a sustained test's rate must be flat before it stops.
    #[serde(
        rename = "flat_s",
        serialize_with = "opt_secs",
        skip_serializing_if = "Option::is_none"
    )]
    pub flat_for: Option<Duration>,
    /// Share of a directory's free space the test file takes when no `--size` is given, for
    /// suites that write until a cache is spent; each test then writes the region once at most.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_share: Option<f64>,
    /// Repeats of every test when `--repeat` is not given; `None` for the usual three.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeats: Option<u32>,
}

fn opt_secs<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

const K: u64 = 1024;
const M: u64 = 1024 * 1024;

fn test(name: impl Into<String>, rw: Rw, bs: u64, iodepth: u32, numjobs: u32) -> SuiteTest {
    SuiteTest {
        name: name.into(),
        rw,
        bs,
        bssplit: Vec::new(),
        iodepth,
        numjobs,
        rwmixread: None,
        sync: None,
        open_sync: None,
        engine: None,
        direct: None,
        fresh: false,
        about: None,
        until_flat: None,
    }
}

fn every_write(kind: SyncKind) -> Option<SyncEvery> {
    Some(SyncEvery { kind, every: 1 })
}

/// A read and a write test of the same shape, named as CrystalDiskMark does.
fn read_write(label: &str, seq: bool, bs: u64, iodepth: u32, numjobs: u32) -> [SuiteTest; 2] {
    let (r, w) = if seq {
        (Rw::Read, Rw::Write)
    } else {
        (Rw::RandRead, Rw::RandWrite)
    };
    [
        test(format!("{label} read"), r, bs, iodepth, numjobs),
        test(format!("{label} write"), w, bs, iodepth, numjobs),
    ]
}

fn suite(name: &'static str, version: u32, about: &'static str, tests: Vec<SuiteTest>) -> Suite {
    Suite {
        name,
        version,
        about,
        runtime: Duration::from_secs(5),
        ramp: Duration::from_secs(1),
        size: None,
        io_limit: None,
        prefill: true,
        tests,
        flat_for: None,
        free_share: None,
        repeats: None,
    }
}

/// Sequential throughput, random IOPS under load and at queue depth 1, and flush latency:
/// the numbers that tell an SSD from a disk from a network volume, in about a minute with
/// three repeats.
pub fn quick() -> Suite {
    let mut tests = Vec::new();
    tests.extend(read_write("SEQ1M Q8T1", true, M, 8, 1));
    tests.extend(read_write("RND4K Q32T1", false, 4 * K, 32, 1));
    tests.extend(read_write("RND4K Q1T1", false, 4 * K, 1, 1));
    tests.push(SuiteTest {
        sync: every_write(SyncKind::Fdatasync),
        ..test("4K write+fdatasync Q1T1", Rw::Write, 4 * K, 1, 1)
    });
    Suite {
        runtime: Duration::from_secs(2),
        ramp: Duration::from_millis(500),
        ..suite(
            "quick",
            2,
            "SEQ1M Q8, RND4K Q32 and Q1, read and write; 4K write+fdatasync Q1",
            tests,
        )
    }
}

/// CrystalDiskMark's default profile.
pub fn cdm() -> Suite {
    let mut tests = Vec::new();
    tests.extend(read_write("SEQ1M Q8T1", true, M, 8, 1));
    tests.extend(read_write("SEQ1M Q1T1", true, M, 1, 1));
    tests.extend(read_write("RND4K Q32T1", false, 4 * K, 32, 1));
    tests.extend(read_write("RND4K Q1T1", false, 4 * K, 1, 1));
    suite(
        "cdm",
        1,
        "CrystalDiskMark default: SEQ1M Q8T1/Q1T1, RND4K Q32T1/Q1T1",
        tests,
    )
}

/// CrystalDiskMark's NVMe SSD profile.
pub fn cdm_nvme() -> Suite {
    let mut tests = Vec::new();
    tests.extend(read_write("SEQ1M Q8T1", true, M, 8, 1));
    tests.extend(read_write("SEQ128K Q32T1", true, 128 * K, 32, 1));
    tests.extend(read_write("RND4K Q32T16", false, 4 * K, 32, 16));
    tests.extend(read_write("RND4K Q1T1", false, 4 * K, 1, 1));
    suite(
        "cdm-nvme",
        1,
        "CrystalDiskMark NVMe profile: SEQ1M Q8T1, SEQ128K Q32T1, RND4K Q32T16/Q1T1",
        tests,
    )
}

/// etcd's documented disk check: its WAL writes ~2300-byte records, each followed by
/// fdatasync; a disk is good enough when the p99 of fdatasync is under 10 ms. 22 MiB gives
/// about 10^4 samples, what a stable 99th percentile needs.
pub fn etcd() -> Suite {
    let wal = SuiteTest {
        sync: every_write(SyncKind::Fdatasync),
        engine: Some(EngineKind::Sync),
        direct: Some(false),
        ..test("etcd WAL 2300B+fdatasync", Rw::Write, 2300, 1, 1)
    };
    Suite {
        runtime: Duration::from_secs(300),
        ramp: Duration::ZERO,
        size: Some(22 * M),
        io_limit: Some(22 * M),
        // etcd writes into WAL segments it preallocated: unwritten extents, so 2300-byte
        // writes need no read of the page around them. A filled file would add those reads
        // (fio's etcd command also writes into a fresh file).
        prefill: false,
        ..suite(
            "etcd",
            1,
            "etcd's fio check: 22 MiB of 2300 B writes, each + fdatasync; pass if p99 < 10 ms",
            vec![wal],
        )
    }
}

/// The 8 tests used to compare Kubernetes storage backends (Ceph, Longhorn, OpenEBS, ...).
pub fn k8s() -> Suite {
    let tests = vec![
        SuiteTest {
            sync: every_write(SyncKind::Fsync),
            ..test("RND4K Q1T1 write+fsync", Rw::RandWrite, 4 * K, 1, 1)
        },
        test("RND4K Q1T1 read", Rw::RandRead, 4 * K, 1, 1),
        test("RND4K Q128T1 write", Rw::RandWrite, 4 * K, 128, 1),
        test("RND4K Q128T1 read", Rw::RandRead, 4 * K, 128, 1),
        test("RND4K Q128T4 write", Rw::RandWrite, 4 * K, 128, 4),
        test("RND4K Q128T4 read", Rw::RandRead, 4 * K, 128, 4),
        test("SEQ4M Q16T1 write", Rw::Write, 4 * M, 16, 1),
        test("SEQ4M Q16T1 read", Rw::Read, 4 * M, 16, 1),
    ];
    suite(
        "k8s",
        1,
        "Kubernetes storage comparison: 4k random with fsync at QD1, QD128 with 1 and 4 jobs, 4M sequential QD16",
        tests,
    )
}

fn mix(shares: &[(u64, u8)]) -> Vec<BsShare> {
    shares
        .iter()
        .map(|&(size, pct)| BsShare { size, pct })
        .collect()
}

fn mixed(name: &str, bssplit: Vec<BsShare>, read_pct: u8) -> SuiteTest {
    let bs = bssplit.iter().map(|s| s.size).max().unwrap_or(4 * K);
    let rw = if read_pct == 100 {
        Rw::RandRead
    } else {
        Rw::RandRw
    };
    SuiteTest {
        bssplit,
        rwmixread: (rw == Rw::RandRw).then_some(read_pct),
        ..test(name, rw, bs, 32, 1)
    }
}

/// IOmeter's classic access specifications (Intel's database, file server and web server
/// profiles), all random, 32 I/Os outstanding, offsets aligned to 4 KiB.
pub fn iometer() -> Suite {
    let database = mix(&[(8 * K, 100)]);
    let file_server = mix(&[
        (512, 10),
        (K, 5),
        (2 * K, 5),
        (4 * K, 60),
        (8 * K, 2),
        (16 * K, 4),
        (32 * K, 4),
        (64 * K, 10),
    ]);
    let web_server = mix(&[
        (512, 22),
        (K, 15),
        (2 * K, 8),
        (4 * K, 23),
        (8 * K, 15),
        (16 * K, 2),
        (32 * K, 6),
        (64 * K, 7),
        (128 * K, 1),
        (512 * K, 1),
    ]);
    suite(
        "iometer",
        1,
        "IOmeter access specs: database 8K 67% read, file server 512B-64K 80% read, web server 512B-512K reads; random, Q32",
        vec![
            mixed("database 8K 67%R Q32", database, 67),
            mixed("file server 80%R Q32", file_server, 80),
            mixed("web server 100%R Q32", web_server, 100),
        ],
    )
}

/// OLTP as in the DBT-2 profile: 16 KiB random, 57% reads.
pub fn oltp() -> Suite {
    let t = |qd| SuiteTest {
        rwmixread: Some(57),
        ..test(format!("OLTP 16K 57%R Q{qd}T1"), Rw::RandRw, 16 * K, qd, 1)
    };
    suite(
        "oltp",
        1,
        "OLTP (DBT-2): 16K random, 57% read, at QD1 and QD32",
        vec![t(1), t(32)],
    )
}

/// dd's usual comparison: the same 1 MiB sequential writes, one at a time, five ways. Each
/// row measures something else, which is why dd's figures disagree by 10× on one disk.
pub fn dd() -> Suite {
    let dd = |name: &str, about: &'static str| SuiteTest {
        engine: Some(EngineKind::Sync),
        direct: Some(false),
        about: Some(about),
        ..test(name, Rw::Write, M, 1, 1)
    };
    let tests = vec![
        SuiteTest {
            fresh: true,
            ..dd(
                "buffered, new file",
                "dd of=FILE: writes land in the page cache and blocks are allocated later; \
                 measures RAM and the allocator until dirty pages reach their limit",
            )
        },
        dd(
            "buffered, overwrite",
            "dd of=FILE conv=notrunc: the page cache again, over blocks already allocated",
        ),
        SuiteTest {
            direct: Some(true),
            ..dd(
                "direct",
                "dd oflag=direct: each write goes to the device (or to a cache below it) before \
                 the next; no flush, so a volatile disk cache still counts",
            )
        },
        SuiteTest {
            open_sync: Some(OpenSync::Dsync),
            ..dd(
                "dsync",
                "dd oflag=dsync: each write waits until its data is stable (a flush or FUA per \
                 write); what a database's log sees",
            )
        },
        SuiteTest {
            open_sync: Some(OpenSync::Sync),
            ..dd(
                "sync",
                "dd oflag=sync: as dsync, and the file's metadata (times) is made stable too",
            )
        },
    ];
    Suite {
        runtime: Duration::from_secs(60),
        ramp: Duration::ZERO,
        size: Some(256 * M),
        io_limit: Some(256 * M),
        // The first test makes its own new file; the others write over what it wrote.
        prefill: false,
        ..suite(
            "dd",
            1,
            "what dd's ways of writing measure: 256 MiB of 1M writes buffered into a new file, buffered over it, direct, dsync and sync",
            tests,
        )
    }
}

/// Queue depths of the `full` suite's sweep.
pub const SWEEP_DEPTHS: [u32; 8] = [1, 2, 4, 8, 16, 32, 64, 128];

/// quick, then 4k random read and write at every queue depth from 1 to 128: the
/// latency-versus-IOPS curve that shows where a device saturates.
pub fn full() -> Suite {
    let mut tests = quick().tests;
    for (rw, label) in [(Rw::RandRead, "read"), (Rw::RandWrite, "write")] {
        for qd in SWEEP_DEPTHS {
            tests.push(test(
                format!("sweep RND4K Q{qd}T1 {label}"),
                rw,
                4 * K,
                qd,
                1,
            ));
        }
    }
    suite(
        "full",
        1,
        "quick, plus a queue-depth sweep (QD1..QD128) of 4K random read and write",
        tests,
    )
}

/// How long the `sustained` suite's rate must stay flat before a test stops.
pub const SUSTAINED_FLAT: Duration = Duration::from_secs(30);

/// Sequential, then random writes over a fresh region until the rate has been flat for
/// [`SUSTAINED_FLAT`] (the sequential test only after it fell off a cliff), the region
/// (`--size`, or half of a directory's free space) was written once, or an hour passed: where
/// an SLC or DRAM cache ends and what the device sustains after it.
pub fn sustained() -> Suite {
    let seq = SuiteTest {
        until_flat: Some(UntilFlat::AfterCliff),
        ..test("sustained SEQ1M Q8T1 write", Rw::Write, M, 8, 1)
    };
    let rand = SuiteTest {
        until_flat: Some(UntilFlat::Flat),
        ..test("sustained RND4K Q32T1 write", Rw::RandWrite, 4 * K, 32, 1)
    };
    Suite {
        runtime: Duration::from_secs(3600),
        ramp: Duration::ZERO,
        prefill: false,
        flat_for: Some(SUSTAINED_FLAT),
        free_share: Some(0.5),
        repeats: Some(1),
        ..suite(
            "sustained",
            1,
            "writes until the cache is spent: SEQ1M Q8 until flat 30s after a cliff, then RND4K Q32 until flat 30s; at most the region (--size, or half the free space) or 1h each",
            vec![seq, rand],
        )
    }
}

/// Every suite, in the order `--list-suites` shows them.
pub fn all() -> Vec<Suite> {
    vec![
        quick(),
        cdm(),
        cdm_nvme(),
        etcd(),
        k8s(),
        iometer(),
        oltp(),
        full(),
        dd(),
        sustained(),
    ]
}

/// A suite name tacho does not know, with the names it does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown suite '{name}'; choose one of: {} (see --list-suites)", known.join(", "))]
pub struct UnknownSuite {
    /// The name asked for.
    pub name: String,
    /// Every suite's name.
    pub known: Vec<&'static str>,
}

/// The suite named `name`.
pub fn find(name: &str) -> Result<Suite, UnknownSuite> {
    all()
        .into_iter()
        .find(|s| s.name == name)
        .ok_or_else(|| UnknownSuite {
            name: name.to_string(),
            known: all().iter().map(|s| s.name).collect(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_has_the_seven_tests() {
        let q = quick();
        assert_eq!(q.tests.len(), 7);
        assert!(q.tests.iter().any(|t| t.sync.is_some() && t.iodepth == 1));
    }

    #[test]
    fn every_suite_is_well_formed() {
        let all = all();
        let names: std::collections::HashSet<_> = all.iter().map(|s| s.name).collect();
        assert_eq!(names.len(), all.len(), "suite names are unique");
        for s in &all {
            assert!(s.version >= 1);
            let tests: std::collections::HashSet<_> = s.tests.iter().map(|t| &t.name).collect();
            assert_eq!(
                tests.len(),
                s.tests.len(),
                "{}: test names are unique",
                s.name
            );
            for t in &s.tests {
                if !t.bssplit.is_empty() {
                    let total: u32 = t.bssplit.iter().map(|b| u32::from(b.pct)).sum();
                    assert_eq!(total, 100, "{}: {} shares add up to 100", s.name, t.name);
                    assert!(t.rw.is_random());
                    assert_eq!(t.bs, t.bssplit.iter().map(|b| b.size).max().unwrap());
                }
                assert!(t.sync.is_none() || t.rw.writes());
                assert_eq!(t.rwmixread.is_some(), t.rw.is_mixed(), "{}", t.name);
            }
        }
    }

    #[test]
    fn the_suites_the_issue_names() {
        assert_eq!(cdm().tests.len(), 8);
        assert_eq!(cdm_nvme().tests.len(), 8);
        assert_eq!(k8s().tests.len(), 8);
        assert_eq!(iometer().tests.len(), 3);
        assert_eq!(full().tests.len(), 7 + 16);
        let e = etcd();
        assert_eq!(e.tests[0].bs, 2300);
        assert_eq!(e.io_limit, Some(22 << 20));
        assert_eq!(e.tests[0].engine, Some(EngineKind::Sync));
        let dd = dd();
        let ways: Vec<_> = dd
            .tests
            .iter()
            .map(|t| (t.fresh, t.direct, t.open_sync))
            .collect();
        assert_eq!(
            ways,
            vec![
                (true, Some(false), None),
                (false, Some(false), None),
                (false, Some(true), None),
                (false, Some(false), Some(OpenSync::Dsync)),
                (false, Some(false), Some(OpenSync::Sync)),
            ]
        );
        assert!(dd.tests.iter().all(|t| t.about.is_some()));
    }

    #[test]
    fn unknown_suite_lists_the_known_ones() {
        let err = find("nope").unwrap_err().to_string();
        assert!(err.contains("quick") && err.contains("etcd"), "{err}");
    }
}
