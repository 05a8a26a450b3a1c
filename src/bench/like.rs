//! `bench disk --like-pid P`: will this target hold what a process did? The process's jobs
//! (`bench::derive`) run on the target as fast as they can; each file's rates (bytes read and
//! written, flushes per second) are set against the rates the process needed while it was
//! watched, and the flushes' latency against the process's own.

use crate::bench::result::TestResult;
use crate::bench::result::{Like, LikeFile, Rates};

/// What one watched file asked of its disk, as the tracer counted it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Seen {
    /// The file's path while the process held it, when seen.
    pub path: Option<String>,
    /// Bytes read and written.
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Flushes (fsync, fdatasync, sync_file_range) the job repeats: none when it flushes
    /// nothing (flushes without writes are not carried into a job).
    pub syncs: u64,
    /// The process's own flushes: mean and 99th percentile in ns, when it flushed.
    pub sync_mean_ns: Option<f64>,
    pub sync_p99_ns: Option<f64>,
}

/// Sets each file seen (in the jobs' order) against the test that ran its job (`tests`, in
/// the same order).
pub fn judge(
    pid: i32,
    comms: Vec<String>,
    watched_s: f64,
    seen: &[Seen],
    tests: &[TestResult],
) -> Like {
    let files = seen
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let per_s = |n: u64| {
                if watched_s > 0.0 {
                    n as f64 / watched_s
                } else {
                    0.0
                }
            };
            let needed = Rates {
                read_bytes_per_s: per_s(s.read_bytes),
                write_bytes_per_s: per_s(s.write_bytes),
                syncs_per_s: per_s(s.syncs),
            };
            let test = tests.get(i).filter(|t| !t.interrupted);
            let achieved = test.map(achieved);
            let headroom = achieved.and_then(|a| headroom(&needed, &a));
            LikeFile {
                test: test.map_or_else(|| format!("file{}", i + 1), |t| t.name.clone()),
                path: s.path.clone(),
                needed,
                achieved,
                process_sync_mean_ns: s.sync_mean_ns,
                process_sync_p99_ns: s.sync_p99_ns,
                sync_lat_ns: test.and_then(|t| t.sync.as_ref()).map(|s| s.lat_ns),
                headroom,
                holds: headroom.map(|h| h >= 1.0),
            }
        })
        .collect();
    Like {
        pid,
        comms,
        watched_s,
        files,
    }
}

/// A test's rates over its repeats' measured time together.
fn achieved(t: &TestResult) -> Rates {
    let seconds: f64 = t.repeats.iter().map(|r| r.runtime_s).sum();
    Rates {
        read_bytes_per_s: t.read.map_or(0.0, |d| d.bw_bytes_per_s),
        write_bytes_per_s: t.write.map_or(0.0, |d| d.bw_bytes_per_s),
        syncs_per_s: match &t.sync {
            Some(s) if seconds > 0.0 => s.count as f64 / seconds,
            _ => 0.0,
        },
    }
}

/// The smallest achieved / needed among the rates the process needed; `None` when it needed
/// none (it cannot happen for a derived job, which has reads or writes).
fn headroom(needed: &Rates, achieved: &Rates) -> Option<f64> {
    [
        (needed.read_bytes_per_s, achieved.read_bytes_per_s),
        (needed.write_bytes_per_s, achieved.write_bytes_per_s),
        (needed.syncs_per_s, achieved.syncs_per_s),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0.0)
    .map(|(n, a)| a / n)
    .min_by(f64::total_cmp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headroom_is_the_tightest_rate_the_process_needed() {
        let needed = Rates {
            read_bytes_per_s: 0.0,
            write_bytes_per_s: 1e6,
            syncs_per_s: 400.0,
        };
        let achieved = Rates {
            read_bytes_per_s: 0.0,
            write_bytes_per_s: 5e6,
            syncs_per_s: 200.0,
        };
        assert_eq!(headroom(&needed, &achieved), Some(0.5));
        assert_eq!(headroom(&Rates::default(), &achieved), None);
    }

    #[test]
    fn a_file_without_its_test_has_no_verdict() {
        let seen = Seen {
            write_bytes: 2300,
            syncs: 1,
            ..Seen::default()
        };
        let like = judge(7, vec!["etcd".into()], 1.0, &[seen], &[]);
        let f = &like.files[0];
        assert_eq!((f.test.as_str(), f.holds), ("file1", None));
        assert_eq!(f.needed.write_bytes_per_s, 2300.0);
    }
}
