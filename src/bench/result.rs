//! The result document (`tacho.bench.v1`): what was run, what was measured, what to doubt.
//! Field names carry their units (`_bytes`, `_ns`, `_s`, `_per_s`).

use super::hostcache::HostCacheProbe;
use super::sustained::{Cliff, Precondition};
use crate::form::{Form, Written};
use crate::io::{
    BsShare, CpuTime, EngineKind, JobSpec, LatencySummary, Measured, OpStats, Rw, SyncEvery,
};
use crate::kernel::diskstats::DiskDelta;
use crate::kernel::host::Host;
use crate::kernel::tunables::Tunables;
use serde::{Deserialize, Serialize};

/// The `schema` of the `tacho bench disk --json` document.
pub const SCHEMA: &str = "tacho.bench.v1";

/// The result of `tacho bench disk` (the `tacho.bench.v1` document).
#[derive(Debug, Serialize)]
pub struct BenchReport {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// The tacho version that ran it (Cargo package version).
    pub tool_version: &'static str,
    /// The machine it ran on.
    pub host: Host,
    /// Kernel settings that change results (THP, governor, mitigations, device queues).
    pub tunables: Tunables,
    /// What was benchmarked and what lies beneath it.
    pub target: TargetInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suite: Option<SuiteRef>,
    pub tests: Vec<TestResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judgement: Option<Judgement>,
    pub warnings: Vec<Warning>,
    /// What the host-cache probe measured and concluded, when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_cache: Option<HostCacheProbe>,
    /// How the region was preconditioned before the tests (`--precondition`), when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precondition: Option<Precondition>,
    /// The group of hosts this run started with (`--group`), when it was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<Group>,
    /// What a watched process needed against what its derived jobs did here
    /// (`--like-pid`), when it was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub like: Option<Like>,
    /// True when Ctrl-C or SIGTERM cut the run short; `tests` holds what finished.
    pub interrupted: bool,
}

/// Which suite ran and whether its method was kept (in either [`Form`]: the store reads it
/// back as `SuiteRef<Read>`).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default, bound = "")]
pub struct SuiteRef<F: Form = Written> {
    /// The suite's name (`quick`, `etcd`, …).
    pub name: F::Of<String>,
    /// The suite's version: results compare only within one.
    pub version: F::Of<u32>,
    /// False when options changed the suite's method (runtime, ramp, size, buffered I/O).
    pub standard: F::Of<bool>,
    /// Runs of every test.
    pub repeat: F::Of<u32>,
    /// What the options changed when `standard` is false (`runtime 1s`, `size 4.00 MiB`).
    #[serde(skip_serializing_if = "no_changes::<F>")]
    pub changed: F::Of<Vec<F::Of<String>>>,
}

/// An empty `changed` is left out.
fn no_changes<F: Form>(changed: &F::Of<Vec<F::Of<String>>>) -> bool {
    F::is_empty::<F::Of<String>>(changed)
}

/// A pass/fail judgement against a threshold (the etcd suite's).
#[derive(Debug, Clone, Serialize)]
pub struct Judgement {
    /// `pass`, `marginal` (passes by less than 20%: production has other writers) or `fail`.
    pub status: Status,
    /// What was judged (`fdatasync p99`).
    pub metric: &'static str,
    /// The measured value, in nanoseconds.
    pub value_ns: u64,
    /// The threshold it was judged against (`--threshold`), in nanoseconds.
    pub threshold_ns: u64,
}

/// Where a measured figure stands against a threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Under the threshold by a margin.
    Pass,
    /// Under the threshold, but by less than a fifth of it.
    Marginal,
    /// At or over the threshold.
    Fail,
}

impl Status {
    /// The word documents store (`pass`, `marginal`, `fail`).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Marginal => "marginal",
            Status::Fail => "fail",
        }
    }
}

/// What the target path is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A directory: tacho creates, uses and removes its own test file in it.
    Directory,
    /// An existing regular file, used in place.
    File,
    /// A block device, used whole.
    BlockDevice,
}

impl Kind {
    /// The word documents store (`directory`, `file`, `block_device`).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Directory => "directory",
            Kind::File => "file",
            Kind::BlockDevice => "block_device",
        }
    }
}

/// What was benchmarked, and what lies beneath it.
#[derive(Debug, Clone, Serialize)]
pub struct TargetInfo {
    /// The path the user gave.
    pub path: String,
    /// `directory` (a temporary test file inside), `file` or `block_device`.
    pub kind: Kind,
    /// Bytes of the region the tests touch.
    pub region_bytes: u64,
    /// Filesystem type of the mount holding the target (`ext4`); `None` for a block device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filesystem: Option<String>,
    /// Where that filesystem is mounted; `None` for a block device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mount_point: Option<String>,
    /// Its mount options, as mountinfo lists them; `None` for a block device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mount_options: Option<String>,
    /// Kernel names of the block devices under the target (itself and the whole disks beneath).
    pub devices: Vec<String>,
    /// Model string of the disk beneath, if it reports one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_model: Option<String>,
    /// Whether the disk says it spins; `None` when sysfs does not say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rotational: Option<bool>,
    /// The disk's I/O scheduler (`none`, `mq-deadline`); `None` when sysfs does not say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<String>,
    /// Smallest unit the device addresses, in bytes; offsets and sizes are multiples of it.
    pub logical_block_size: u32,
}

pub use crate::warning::Warning;

/// One test of a run: its settings, the figures over all repeats, and each repeat.
#[derive(Debug, Serialize)]
pub struct TestResult {
    /// The test's name as reports show it (a suite's, e.g. `RND4K Q32T1 read`).
    pub name: String,
    /// Access pattern.
    pub rw: Rw,
    /// The block size, or the largest size of a mix.
    pub bs_bytes: u64,
    /// The block-size mix, if any; empty when every I/O is `bs_bytes`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bssplit: Vec<BsShare>,
    /// I/Os in flight per worker.
    pub iodepth: u32,
    /// Workers, each with its own queue.
    pub numjobs: u32,
    /// O_DIRECT (true) or through the page cache.
    pub direct: bool,
    /// The I/O engine that ran (`io_uring`, `psync` or `sync`).
    pub engine: EngineKind,
    /// Seconds measured per repeat (after the ramp), the median over repeats.
    pub runtime_s: f64,
    /// Seconds asked for per repeat (`--runtime`, or the suite's): what `compare` shows as
    /// a changed setting, as the measured window runs a little long on a busy machine.
    pub planned_runtime_s: f64,
    /// Warm-up before each repeat's measured window, in seconds.
    pub ramp_s: f64,
    /// Share of reads in percent, for mixed patterns only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rwmixread: Option<u8>,
    /// The flush after every N writes, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync_every: Option<SyncEvery>,
    /// Reads over every repeat pooled: `ios` and `bytes` the totals, IOPS and bandwidth those
    /// totals over the repeats' measured time together, latency over every I/O.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read: Option<DirResult>,
    /// Writes, summarised like `read`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write: Option<DirResult>,
    /// fsync/fdatasync calls over every repeat; `None` when the test flushes nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync: Option<SyncResult>,
    /// CPU time of tacho's workers over all repeats.
    pub cpu: CpuTime,
    /// (max − min) / median of the repeats' total IOPS, in percent; null with one repeat.
    pub spread_pct: Option<f64>,
    /// How many repeats `read`, `write`, `sync` and `cpu` pool: every one in `repeats` (no
    /// figure of a row comes from a single repeat).
    pub pooled_repeats: usize,
    /// Each repeat's own figures, in run order.
    pub repeats: Vec<RepeatResult>,
    /// Per-second IOPS and bandwidth of every repeat, in order.
    pub timeline: Vec<TimelinePoint>,
    /// Bytes submitted over all repeats, ramps included; compare with `device`.
    pub issued: Issued,
    /// /proc/diskstats deltas over all repeats, ramps and the closing flush included.
    pub device: Vec<DiskDelta>,
    /// Figures to distrust and why.
    pub warnings: Vec<Warning>,
    /// True when a signal cut this test short: `repeats` holds those that finished and the
    /// one that was running, with the time it really ran.
    pub interrupted: bool,
    /// Where the write rate fell (a sustained test's first repeat), when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cliff: Option<Cliff>,
    /// The latency histograms of every repeat pooled, for a run of a group (`--group`): the
    /// group's percentiles come from the union of its hosts' histograms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub histograms: Option<Histograms>,
}

/// Latency histograms as `[highest value of a bucket in ns, count]`, lowest first (HDR, three
/// significant digits).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Histograms {
    /// Reads.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<[u64; 2]>,
    /// Writes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<[u64; 2]>,
}

impl Histograms {
    /// The histograms of `repeats` pooled.
    pub fn of(repeats: &[Measured]) -> Histograms {
        let mut all = Measured::default();
        repeats.iter().for_each(|m| all.merge(m));
        Histograms {
            read: all.read.buckets(),
            write: all.write.buckets(),
        }
    }
}

/// A run of a group of hosts started together (`--group NAME --hosts N`).
#[derive(Debug, Clone, Serialize)]
pub struct Group {
    /// The group's name.
    pub name: String,
    /// How many hosts the group waited for.
    pub hosts: u32,
    /// The hosts it waited for by name (`--hosts a,b,c`); empty when it waited for a count.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// The store's run ids of the group's runs, this one among them, once they all came.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<i64>,
    /// When this host saw the group complete and started, in ns since the Unix epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_unix_ns: Option<u64>,
}

/// Bytes handed to the kernel by one test, ramps included.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Issued {
    /// Bytes of reads submitted.
    pub read_bytes: u64,
    /// Bytes of writes submitted.
    pub write_bytes: u64,
}

/// One direction's figures.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct DirResult {
    /// I/Os completed per second.
    pub iops: f64,
    /// Bytes moved per second.
    pub bw_bytes_per_s: f64,
    /// I/Os completed.
    pub ios: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Latency per I/O, in nanoseconds.
    pub lat_ns: LatencySummary,
}

/// Flush figures.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SyncResult {
    /// Flushes completed.
    pub count: u64,
    /// Latency per flush, in nanoseconds.
    pub lat_ns: LatencySummary,
}

/// One run of a test.
#[derive(Debug, Clone, Serialize)]
pub struct RepeatResult {
    /// Length of this repeat's measured window, in seconds (shorter when a signal cut it).
    pub runtime_s: f64,
    /// Reads of this repeat.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read: Option<DirResult>,
    /// Writes of this repeat.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write: Option<DirResult>,
    /// Flushes of this repeat.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync: Option<SyncResult>,
}

impl RepeatResult {
    /// Reads and writes per second together; 0 for a direction that did not run.
    pub fn total_iops(&self) -> f64 {
        self.read.map_or(0.0, |d| d.iops) + self.write.map_or(0.0, |d| d.iops)
    }
}

/// One second of one repeat's measured window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TimelinePoint {
    /// Repeat number, from 1.
    pub repeat: u32,
    /// Second of the measured window, from 1 (the figures cover the second that ends here).
    pub t_s: u32,
    /// I/Os completed in that second.
    pub iops: f64,
    /// Bytes moved in that second.
    pub bw_bytes_per_s: f64,
}

fn dir_result(s: &OpStats, secs: f64) -> Option<DirResult> {
    s.latency().map(|lat_ns| DirResult {
        iops: per_second(s.ios as f64, secs),
        bw_bytes_per_s: per_second(s.bytes as f64, secs),
        ios: s.ios,
        bytes: s.bytes,
        lat_ns,
    })
}

fn sync_result(s: &OpStats) -> Option<SyncResult> {
    s.latency().map(|lat_ns| SyncResult {
        count: s.ios,
        lat_ns,
    })
}

impl TestResult {
    /// Summarises the repeats of one test (at least one).
    pub fn new(name: String, spec: &JobSpec, repeats: &[Measured], device: Vec<DiskDelta>) -> Self {
        let mut all = Measured::default();
        repeats.iter().for_each(|m| all.merge(m));
        let runs: Vec<RepeatResult> = repeats
            .iter()
            .map(|m| {
                let secs = m.elapsed.as_secs_f64();
                RepeatResult {
                    runtime_s: secs,
                    read: dir_result(&m.read, secs),
                    write: dir_result(&m.write, secs),
                    sync: sync_result(&m.sync),
                }
            })
            .collect();
        // Every figure of a row from the same data, all repeats pooled: rates are the I/Os of
        // every repeat over their measured time together, latencies over every I/O. (Rates from
        // the median repeat beside pooled latencies and flushes once showed 2.23k IOPS with
        // 3.46k flushes/s for a flush after every write.) Each repeat's own figures stay in
        // `repeats`, and their spread in `spread_pct`.
        let pooled_secs: f64 = runs.iter().map(|r| r.runtime_s).sum();
        let totals: Vec<f64> = runs.iter().map(RepeatResult::total_iops).collect();
        let spread_pct = (runs.len() > 1)
            .then(|| crate::stats::spread_pct(&totals))
            .flatten();
        TestResult {
            name,
            rw: spec.rw(),
            bs_bytes: spec.bs(),
            bssplit: spec.bssplit().to_vec(),
            iodepth: spec.iodepth(),
            numjobs: spec.numjobs(),
            direct: spec.direct(),
            engine: spec.engine(),
            // No repeat ran (none is passed today): it ran for no time at all.
            runtime_s: median(runs.iter().map(|r| r.runtime_s)).unwrap_or_default(),
            planned_runtime_s: spec.runtime().as_secs_f64(),
            ramp_s: spec.ramp().as_secs_f64(),
            rwmixread: spec.rw().is_mixed().then_some(spec.rwmixread()),
            sync_every: spec.sync(),
            read: dir_result(&all.read, pooled_secs),
            write: dir_result(&all.write, pooled_secs),
            sync: sync_result(&all.sync),
            cpu: all.cpu,
            spread_pct,
            pooled_repeats: runs.len(),
            timeline: timeline(repeats),
            repeats: runs,
            issued: Issued {
                read_bytes: all.issued_read_bytes,
                write_bytes: all.issued_write_bytes,
            },
            device,
            warnings: Vec::new(),
            interrupted: false,
            cliff: None,
            histograms: None,
        }
    }

    /// Bytes moved in each whole second of the first repeat, in order.
    pub fn first_repeat_bytes_per_s(&self) -> Vec<f64> {
        self.timeline
            .iter()
            .filter(|p| p.repeat == 1)
            .map(|p| p.bw_bytes_per_s)
            .collect()
    }

    /// Total I/Os per second, reads and writes together.
    pub fn total_iops(&self) -> f64 {
        self.read.map_or(0.0, |d| d.iops) + self.write.map_or(0.0, |d| d.iops)
    }

    /// Bytes per second, reads and writes together; 0 for a direction that did not run.
    pub fn total_bw(&self) -> f64 {
        self.read.map_or(0.0, |d| d.bw_bytes_per_s) + self.write.map_or(0.0, |d| d.bw_bytes_per_s)
    }
}

/// Whole seconds only: the last, partial second would understate the rate.
fn timeline(repeats: &[Measured]) -> Vec<TimelinePoint> {
    let mut points = Vec::new();
    for (i, m) in repeats.iter().enumerate() {
        let whole = m.elapsed.as_secs() as usize;
        let t = &m.timeline;
        for (second, (&ios, &bytes)) in t.ios.iter().zip(&t.bytes).enumerate().take(whole) {
            points.push(TimelinePoint {
                repeat: i as u32 + 1,
                t_s: second as u32 + 1,
                iops: ios as f64,
                bw_bytes_per_s: bytes as f64,
            });
        }
    }
    points
}

/// The median of the finite values; `None` when there are none.
fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = values.filter(|x| x.is_finite()).collect();
    crate::stats::median(&v)
}

fn per_second(count: f64, secs: f64) -> f64 {
    if secs > 0.0 { count / secs } else { 0.0 }
}

/// `--like-pid`: what a watched process needed against what its derived jobs did here
/// (computed by `bench::like`).
/// Bytes and flushes per second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Rates {
    /// Bytes read per second.
    pub read_bytes_per_s: f64,
    /// Bytes written per second.
    pub write_bytes_per_s: f64,
    /// Flushes per second.
    pub syncs_per_s: f64,
}

/// One file of the process against its job's run on the target.
#[derive(Debug, Clone, Serialize)]
pub struct LikeFile {
    /// The test that ran its job (`file1`, …).
    pub test: String,
    /// The file's path on the watched host, when seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// What the process did per second while watched.
    pub needed: Rates,
    /// What the job did per second on the target; `None` when its test did not finish.
    pub achieved: Option<Rates>,
    /// The process's own flush latency, mean and p99 in ns (the p99 from a log2 histogram,
    /// so within a factor of two); `None` when it did not flush.
    pub process_sync_mean_ns: Option<f64>,
    pub process_sync_p99_ns: Option<f64>,
    /// The target's flush latency under the job.
    pub sync_lat_ns: Option<crate::io::stats::LatencySummary>,
    /// The smallest of achieved / needed over what the process did (reads, writes, flushes):
    /// above 1 the target keeps up with room to spare; `None` without a finished test.
    pub headroom: Option<f64>,
    /// Whether the target kept up with every rate the process needed (`headroom` ≥ 1).
    pub holds: Option<bool>,
}

/// The whole comparison, kept in the run's report.
#[derive(Debug, Clone, Serialize)]
pub struct Like {
    /// The process watched.
    pub pid: i32,
    /// Its command names as the tracer saw them.
    pub comms: Vec<String>,
    /// How long it was watched, in seconds.
    pub watched_s: f64,
    /// One per derived job, busiest file first.
    pub files: Vec<LikeFile>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median([3.0, 1.0, 2.0].into_iter()), Some(2.0));
        assert_eq!(median([4.0, 1.0, 2.0, 3.0].into_iter()), Some(2.5));
        assert_eq!(median(std::iter::empty()), None);
        assert_eq!(median([f64::NAN].into_iter()), None);
    }

    /// The words stored runs hold, written out: a renamed variant must not rename its word.
    #[test]
    fn statuses_and_kinds_round_trip_through_their_stored_words() {
        let statuses = [
            (Status::Pass, "pass"),
            (Status::Marginal, "marginal"),
            (Status::Fail, "fail"),
        ];
        for (status, word) in statuses {
            let json = serde_json::to_string(&status).unwrap();
            assert_eq!(json, format!("\"{word}\""));
            assert_eq!(serde_json::from_str::<Status>(&json).unwrap(), status);
            assert_eq!(status.as_str(), word);
        }
        let kinds = [
            (Kind::Directory, "directory"),
            (Kind::File, "file"),
            (Kind::BlockDevice, "block_device"),
        ];
        for (kind, word) in kinds {
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{word}\""));
            assert_eq!(serde_json::from_str::<Kind>(&json).unwrap(), kind);
            assert_eq!(kind.as_str(), word);
        }
    }

    #[test]
    fn spread_is_range_over_median() {
        assert_eq!(crate::stats::spread_pct(&[90.0, 100.0, 110.0]), Some(20.0));
        assert_eq!(crate::stats::spread_pct(&[0.0, 0.0]), None);
    }
}
