//! Who waited on what over the interval (`top --waits`): each traced process's time off the
//! CPU by class, as a share of its threads' time (threads × interval), with its unit, for the
//! JSON's `waits` section, /metrics and the `waiting` finding.

use serde::Serialize;

use super::process::Delta;
use crate::diagnose::sample::Sample;
use crate::diagnose::sample::waits::WaitClass;

/// The interval's waits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Waits {
    /// Processes, most time off the CPU first (at most 64 traced per interval).
    pub processes: Vec<ProcessWaits>,
    /// Processes that waited but were left out (past the 64).
    pub dropped: usize,
    /// Waits the kernel could not count since the start (its table was full).
    pub lost: u64,
}

/// One process's waits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessWaits {
    /// Process id.
    pub pid: u32,
    /// Command name.
    pub comm: String,
    /// The name's bytes in hex when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm_hex: Option<String>,
    /// The service it runs in.
    pub unit: Option<String>,
    /// Its threads (from /proc, else those the tracer saw): the shares' base is threads ×
    /// interval.
    pub threads: u32,
    /// Time by class, largest first (at most 4).
    pub classes: Vec<ClassShare>,
}

/// One class's time for one process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassShare {
    /// Why (`network`: a connection it opened, waiting on replies; `clients`: a connection it
    /// accepted, waiting for requests; `disk`, `lock`, …).
    pub class: WaitClass,
    /// Time off the CPU, its threads together, ms.
    pub ms: f64,
    /// Share of its threads' time (threads × interval), percent (at most 100).
    pub pct: f64,
    /// Waits ended or open in the interval.
    pub count: u64,
    /// Mean time of one wait, ms.
    pub mean_wait_ms: f64,
    /// What it waited on most: a peer `address:port`, a device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on: Option<String>,
    /// The system call of the largest part.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
}

/// The waits of `b` as shares of the interval `dt`; `None` when they were not traced.
pub fn waits(b: &Sample, deltas: &[Delta], dt: f64) -> Option<Waits> {
    let scan = b.waits.as_ref()?;
    let processes = scan
        .procs
        .iter()
        .map(|p| {
            let delta = deltas.iter().find(|d| d.pid == p.pid);
            let scanned = b
                .processes
                .processes
                .iter()
                .find(|s| s.pid == p.pid)
                .map(|s| u32::try_from(s.threads).unwrap_or(u32::MAX));
            let threads = scanned.unwrap_or(0).max(p.threads).max(1);
            let base_ms = f64::from(threads) * dt * 1000.0;
            ProcessWaits {
                pid: p.pid,
                comm: delta.map_or_else(|| p.comm.clone(), |d| d.comm.clone()),
                comm_hex: delta.and_then(|d| d.comm_hex.clone()),
                unit: delta.and_then(|d| d.unit.clone()),
                threads,
                classes: p
                    .classes
                    .iter()
                    .map(|c| {
                        let ms = c.ns as f64 / 1e6;
                        ClassShare {
                            class: c.class,
                            ms,
                            pct: (ms / base_ms * 100.0).min(100.0),
                            count: c.count,
                            mean_wait_ms: ms / c.count.max(1) as f64,
                            on: c.on.clone(),
                            call: c.call.clone(),
                        }
                    })
                    .collect(),
            }
        })
        .collect();
    Some(Waits {
        processes,
        dropped: scan.dropped,
        lost: scan.lost,
    })
}
