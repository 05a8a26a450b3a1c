//! The result document (`tacho.bench.v1`): what was run, what was measured, what to doubt.
//! Field names carry their units (`_bytes`, `_ns`, `_s`, `_per_s`).

use crate::io::{CpuTime, EngineKind, JobSpec, LatencySummary, Measured, OpStats, Rw, SyncEvery};
use crate::kernel::diskstats::DiskDelta;
use crate::kernel::host::Host;
use crate::kernel::tunables::Tunables;
use serde::Serialize;

pub const SCHEMA: &str = "tacho.bench.v1";

#[derive(Debug, Serialize)]
pub struct BenchReport {
    pub schema: &'static str,
    pub tool_version: &'static str,
    pub host: Host,
    /// Kernel settings that change results (THP, governor, mitigations, device queues).
    pub tunables: Tunables,
    pub target: TargetInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suite: Option<SuiteRef>,
    pub tests: Vec<TestResult>,
    pub warnings: Vec<Warning>,
    /// True when Ctrl-C or SIGTERM cut the run short; `tests` holds what finished.
    pub interrupted: bool,
}

#[derive(Debug, Serialize)]
pub struct SuiteRef {
    pub name: &'static str,
    pub version: u32,
}

/// What was benchmarked, and what lies beneath it.
#[derive(Debug, Clone, Serialize)]
pub struct TargetInfo {
    /// The path the user gave.
    pub path: String,
    /// `directory` (a temporary test file inside), `file` or `block_device`.
    pub kind: &'static str,
    /// Bytes of the region the tests touch.
    pub region_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filesystem: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mount_point: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mount_options: Option<String>,
    /// Kernel names of the block devices under the target (itself and the whole disks beneath).
    pub devices: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rotational: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<String>,
    pub logical_block_size: u32,
}

/// A reason to doubt a figure, with a stable code for scripts and a sentence for people.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Warning {
    pub code: &'static str,
    pub message: String,
}

#[derive(Debug, Serialize)]
pub struct TestResult {
    pub name: String,
    pub rw: Rw,
    pub bs_bytes: u64,
    pub iodepth: u32,
    pub numjobs: u32,
    pub direct: bool,
    pub engine: EngineKind,
    /// Seconds actually measured (after the ramp).
    pub runtime_s: f64,
    pub ramp_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rwmixread: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync_every: Option<SyncEvery>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read: Option<DirResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write: Option<DirResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync: Option<SyncResult>,
    pub cpu: CpuTime,
    /// Bytes submitted over the whole test, ramp included; compare with `device`.
    pub issued: Issued,
    /// /proc/diskstats deltas over the whole test, ramp included.
    pub device: Vec<DiskDelta>,
    pub warnings: Vec<Warning>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Issued {
    pub read_bytes: u64,
    pub write_bytes: u64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct DirResult {
    pub iops: f64,
    pub bw_bytes_per_s: f64,
    pub ios: u64,
    pub bytes: u64,
    pub lat_ns: LatencySummary,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct SyncResult {
    pub count: u64,
    pub lat_ns: LatencySummary,
}

impl TestResult {
    pub fn new(name: String, spec: &JobSpec, m: &Measured, device: Vec<DiskDelta>) -> Self {
        let secs = m.elapsed.as_secs_f64();
        let dir = |s: &OpStats| {
            s.latency().map(|lat_ns| DirResult {
                iops: per_second(s.ios as f64, secs),
                bw_bytes_per_s: per_second(s.bytes as f64, secs),
                ios: s.ios,
                bytes: s.bytes,
                lat_ns,
            })
        };
        TestResult {
            name,
            rw: spec.rw,
            bs_bytes: spec.bs,
            iodepth: spec.iodepth,
            numjobs: spec.numjobs,
            direct: spec.direct,
            engine: spec.engine,
            runtime_s: secs,
            ramp_s: spec.ramp.as_secs_f64(),
            rwmixread: spec.rw.is_mixed().then_some(spec.rwmixread),
            sync_every: spec.sync,
            read: dir(&m.read),
            write: dir(&m.write),
            sync: m.sync.latency().map(|lat_ns| SyncResult {
                count: m.sync.ios,
                lat_ns,
            }),
            cpu: m.cpu,
            issued: Issued {
                read_bytes: m.issued_read_bytes,
                write_bytes: m.issued_write_bytes,
            },
            device,
            warnings: Vec::new(),
        }
    }

    /// Total I/Os per second, reads and writes together.
    pub fn total_iops(&self) -> f64 {
        self.read.map_or(0.0, |d| d.iops) + self.write.map_or(0.0, |d| d.iops)
    }

    pub fn total_bw(&self) -> f64 {
        self.read.map_or(0.0, |d| d.bw_bytes_per_s) + self.write.map_or(0.0, |d| d.bw_bytes_per_s)
    }
}

fn per_second(count: f64, secs: f64) -> f64 {
    if secs > 0.0 { count / secs } else { 0.0 }
}
