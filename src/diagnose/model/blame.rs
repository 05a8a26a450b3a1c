//! Who a verdict blames and how that is known: one process (or a cgroup, or one command's
//! processes folded together) with its share and the evidence. The types alone, so the
//! modules that build and rewrite culprits (`culprits`, `fold`, `loops`) share them without
//! importing each other.

use serde::Serialize;

use super::process::Delta;

/// The direction of a device's I/O that its verdict judges: the one that moved more bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Bytes read from the device.
    Reads,
    /// Bytes written to it.
    Writes,
}

impl std::fmt::Display for Direction {
    /// `reads` or `writes`, as verdicts name it ("81% of writes from dd").
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Direction::Reads => "reads",
            Direction::Writes => "writes",
        })
    }
}

/// Processes named in a folded culprit's line ("largest: pid 108 10%, …").
const NAMED_MEMBERS: usize = 3;

/// How a culprit was tied to what it is blamed for.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Attribution {
    /// Kernel counters that count exactly this (named in `source`).
    Exact {
        /// The counters, and how they reached the process.
        source: String,
    },
    /// Inferred from indirect evidence, given in `reason`.
    Likely {
        /// Why this process and this share.
        reason: String,
    },
}

/// One process (or, when no process can be named, one cgroup) behind a verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Culprit {
    /// Its process id; `null` when only its cgroup is known.
    pub pid: Option<u32>,
    /// Command name (the cgroup's last component when there is no process).
    pub comm: String,
    /// The name's exact bytes in hex when they are not UTF-8 (`comm` is then lossy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm_hex: Option<String>,
    /// The service it runs in.
    pub unit: Option<String>,
    /// Its share of the resource in the interval (of the device's bytes in the direction
    /// judged, of all CPU time used, of the memory growth or faults), percent.
    pub share_pct: f64,
    /// It exited during the interval.
    pub exited: bool,
    /// How it was attributed.
    pub attribution: Attribution,
    /// Bytes per second it moved on the device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_per_s: Option<f64>,
    /// User CPU, % of one CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_pct: Option<f64>,
    /// System CPU, % of one CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_pct: Option<f64>,
    /// RSS change over the interval, bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_growth_bytes: Option<i64>,
    /// Major page faults per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub major_faults_per_s: Option<f64>,
    /// Swap in use (VmSwap), bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap_bytes: Option<u64>,
    /// Block requests it completed per second on the device (eBPF; a folded group: its
    /// members' together).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iops: Option<f64>,
    /// 99th percentile of its requests' whole time there (creation → completion), ms (eBPF).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lat_p99_ms: Option<f64>,
    /// Share of its requests' whole time spent queued before dispatch, percent (eBPF).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queued_pct: Option<f64>,
    /// Set when this is one command's processes folded together (see `fold`): how many.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processes: Option<usize>,
    /// How many of those exited during the interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exited_processes: Option<usize>,
    /// Those processes, each as its own culprit, largest first: every one up to
    /// `fold::MAX_MEMBERS`, the rest counted in `members_left_out`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<Culprit>,
    /// Processes of the group past `fold::MAX_MEMBERS`, not listed in `members`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub members_left_out: Option<usize>,
}

impl Culprit {
    pub(super) fn of(d: &Delta, share_pct: f64, attribution: Attribution) -> Culprit {
        Culprit {
            exited: d.exited,
            comm_hex: d.comm_hex.clone(),
            ..Culprit::named(
                Some(d.pid),
                d.comm.clone(),
                d.unit.clone(),
                share_pct,
                attribution,
            )
        }
    }

    /// A culprit known only by what is given (no figures of its own yet).
    pub(crate) fn named(
        pid: Option<u32>,
        comm: String,
        unit: Option<String>,
        share_pct: f64,
        attribution: Attribution,
    ) -> Culprit {
        Culprit {
            pid,
            comm,
            comm_hex: None,
            unit,
            share_pct,
            exited: false,
            attribution,
            bytes_per_s: None,
            user_pct: None,
            system_pct: None,
            rss_growth_bytes: None,
            major_faults_per_s: None,
            swap_bytes: None,
            iops: None,
            lat_p99_ms: None,
            queued_pct: None,
            processes: None,
            exited_processes: None,
            members: Vec::new(),
            members_left_out: None,
        }
    }

    /// `dd (pid 4242, session-3.scope)`, or for one command's processes folded together
    /// `dd: 9 processes, 8 exited, in session-3.scope (largest: pid 31797 12%, …)`.
    /// A name that is not UTF-8 shows its bytes (`\xff`), as the process table does; the
    /// later escaping of the whole verdict leaves that as it is.
    pub fn who(&self) -> String {
        let comm = crate::text::exact(&self.comm, self.comm_hex.as_deref());
        if let Some(n) = self.processes {
            let mut line = format!("{comm}: {n} processes");
            if let Some(gone) = self.exited_processes.filter(|g| *g > 0) {
                line.push_str(&format!(", {gone} exited"));
            }
            if let Some(u) = self.unit.as_ref().filter(|u| **u != self.comm) {
                line.push_str(&format!(", in {u}"));
            }
            let largest: Vec<String> = self
                .members
                .iter()
                .take(NAMED_MEMBERS)
                .filter_map(|m| Some(format!("pid {} {:.0}%", m.pid?, m.share_pct)))
                .collect();
            if !largest.is_empty() {
                line.push_str(&format!(" (largest: {})", largest.join(", ")));
            }
            return line;
        }
        let mut inner = Vec::new();
        if let Some(p) = self.pid {
            inner.push(format!("pid {p}"));
        }
        if let Some(u) = self.unit.as_ref().filter(|u| **u != self.comm) {
            inner.push(u.clone());
        }
        if self.exited {
            inner.push("exited".into());
        }
        if inner.is_empty() {
            comm
        } else {
            format!("{comm} ({})", inner.join(", "))
        }
    }
}
