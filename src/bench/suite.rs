//! Fixed, versioned suites. A suite's tests never change without a new version, so results
//! of the same suite version compare fairly across machines and months.

use crate::io::{Rw, SyncEvery, SyncKind};
use std::time::Duration;

/// One test of a suite; what it leaves open (size, engine, direct) comes from the run.
#[derive(Clone, Debug)]
pub struct SuiteTest {
    pub name: &'static str,
    pub rw: Rw,
    pub bs: u64,
    pub iodepth: u32,
    pub numjobs: u32,
    pub sync: Option<SyncEvery>,
}

#[derive(Clone, Debug)]
pub struct Suite {
    pub name: &'static str,
    pub version: u32,
    pub about: &'static str,
    pub runtime: Duration,
    pub ramp: Duration,
    pub tests: Vec<SuiteTest>,
}

const K: u64 = 1024;
const M: u64 = 1024 * 1024;

fn test(name: &'static str, rw: Rw, bs: u64, iodepth: u32) -> SuiteTest {
    SuiteTest {
        name,
        rw,
        bs,
        iodepth,
        numjobs: 1,
        sync: None,
    }
}

/// Sequential throughput, random IOPS under load and at queue depth 1, and flush latency:
/// the four numbers that tell an SSD from a disk from a network volume, in about a minute.
pub fn quick() -> Suite {
    Suite {
        name: "quick",
        version: 1,
        about: "SEQ1M Q8, RND4K Q32 and Q1, read and write; 4K write+fdatasync Q1",
        runtime: Duration::from_secs(5),
        ramp: Duration::from_secs(1),
        tests: vec![
            test("SEQ1M Q8T1 read", Rw::Read, M, 8),
            test("SEQ1M Q8T1 write", Rw::Write, M, 8),
            test("RND4K Q32T1 read", Rw::RandRead, 4 * K, 32),
            test("RND4K Q32T1 write", Rw::RandWrite, 4 * K, 32),
            test("RND4K Q1T1 read", Rw::RandRead, 4 * K, 1),
            test("RND4K Q1T1 write", Rw::RandWrite, 4 * K, 1),
            SuiteTest {
                sync: Some(SyncEvery {
                    kind: SyncKind::Fdatasync,
                    every: 1,
                }),
                ..test("4K write+fdatasync Q1T1", Rw::Write, 4 * K, 1)
            },
        ],
    }
}

pub fn all() -> Vec<Suite> {
    vec![quick()]
}

pub fn find(name: &str) -> Result<Suite, String> {
    all().into_iter().find(|s| s.name == name).ok_or_else(|| {
        let names: Vec<_> = all().iter().map(|s| s.name).collect();
        format!(
            "unknown suite '{name}'; choose one of: {}",
            names.join(", ")
        )
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
        let names: std::collections::HashSet<_> = q.tests.iter().map(|t| t.name).collect();
        assert_eq!(names.len(), 7, "test names are unique");
    }

    #[test]
    fn unknown_suite_lists_the_known_ones() {
        let err = find("nope").unwrap_err();
        assert!(err.contains("quick"), "{err}");
    }
}
