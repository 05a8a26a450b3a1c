//! The figures a chart shows, one point per judged interval: CPU split, memory, pressure,
//! each busy disk's utilisation, latency and throughput, each interface's traffic, and the
//! findings with who they named. The incident report (`top --from --html`) keeps every point
//! of its window; the live page of `top --listen` keeps the last 15 minutes, a ring whose
//! length no client can change.

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::diagnose::findings::{Code, Severity};
use crate::diagnose::model::TopSample;

/// Disks a point keeps, the busiest of its interval (an idle one is kept as idle, not
/// unknown).
const DISKS: usize = 16;
/// Interfaces a point keeps, the busiest of its interval.
const NETS: usize = 16;
/// Disks charted: the busiest over the timeline.
const CHARTED_DISKS: usize = 8;
/// Interfaces charted.
const CHARTED_NETS: usize = 4;
/// Distinct notes kept (the first seen).
const NOTES: usize = 20;
/// Processes whose network bytes are summed (the report lists the busiest).
const NET_PROCESSES: usize = 1000;

/// One interval's figures.
#[derive(Debug, Clone)]
pub struct Point {
    /// End of the interval, seconds since the Unix epoch.
    pub t: f64,
    /// Length of the interval, seconds.
    pub interval_s: f64,
    /// User (with nice), system (with irq and softirq), iowait and steal, percent of all CPUs;
    /// or, from the shared store (which keeps no split), only the busy share, last.
    pub cpu: [Option<f64>; 5],
    /// Memory used, page cache and buffers, and available, bytes (the shared store keeps only
    /// what is available).
    pub memory: [Option<u64>; 3],
    /// Share of the interval some task stalled on CPU, I/O and memory (PSI), percent.
    pub psi: [Option<f64>; 3],
    /// The busiest disks.
    pub disks: Vec<DiskPoint>,
    /// The busiest interfaces.
    pub nets: Vec<NetPoint>,
    /// The interval's findings.
    pub findings: Vec<Fired>,
}

/// A disk's figures over one interval.
#[derive(Debug, Clone)]
pub struct DiskPoint {
    /// Kernel name (what disk findings name as their subject).
    pub name: String,
    /// The name admins know.
    pub display_name: String,
    /// Utilisation, percent.
    pub util_pct: Option<f64>,
    /// Mean read and write latency, milliseconds.
    pub await_ms: [Option<f64>; 2],
    /// Bytes read and written per second.
    pub bytes_per_s: [Option<f64>; 2],
}

/// An interface's traffic over one interval.
#[derive(Debug, Clone)]
pub struct NetPoint {
    /// Interface name.
    pub name: String,
    /// Bytes received and sent per second.
    pub bytes_per_s: [f64; 2],
}

/// A finding of one interval.
#[derive(Debug, Clone)]
pub struct Fired {
    /// Its stable code.
    pub code: Code,
    /// How much it matters.
    pub severity: Severity,
    /// What it is about (a device's kernel name, `cpu`, `memory`).
    pub subject: String,
    /// Its sentence.
    pub message: String,
}

/// Points oldest first, at most `cap` of them, with what the window's samples could not know.
#[derive(Debug, Clone)]
pub struct Timeline {
    points: VecDeque<Point>,
    cap: usize,
    notes: Vec<String>,
    net_by_process: HashMap<(String, Option<String>), f64>,
}

impl Timeline {
    /// An empty timeline keeping at most `cap` points (the oldest go first).
    pub fn new(cap: usize) -> Timeline {
        Timeline {
            points: VecDeque::new(),
            cap: cap.max(1),
            notes: Vec::new(),
            net_by_process: HashMap::new(),
        }
    }

    /// Adds the interval `s`.
    pub fn push(&mut self, s: &TopSample) {
        let c = &s.cpu.all;
        let m = &s.memory;
        let psi = |r: &Option<crate::diagnose::model::PsiResource>| {
            r.as_ref().and_then(|r| r.some.stall_pct)
        };
        let mut disks: Vec<DiskPoint> = s
            .disks
            .iter()
            .filter(|d| d.device.parent.is_none())
            .map(|d| DiskPoint {
                name: d.device.name.clone(),
                display_name: d.device.display_name.clone(),
                util_pct: d.util_pct,
                await_ms: [d.r_await_ms, d.w_await_ms],
                bytes_per_s: [
                    d.rkb_per_s.map(|k| k * 1024.0),
                    d.wkb_per_s.map(|k| k * 1024.0),
                ],
            })
            .collect();
        disks.sort_by(|a, b| {
            b.util_pct
                .unwrap_or(0.0)
                .total_cmp(&a.util_pct.unwrap_or(0.0))
        });
        disks.truncate(DISKS);
        let mut nets: Vec<NetPoint> = s
            .net
            .iter()
            .map(|n| NetPoint {
                name: n.name.clone(),
                bytes_per_s: [n.rx_bytes_per_s, n.tx_bytes_per_s],
            })
            .collect();
        nets.sort_by(|a, b| {
            (b.bytes_per_s[0] + b.bytes_per_s[1]).total_cmp(&(a.bytes_per_s[0] + a.bytes_per_s[1]))
        });
        nets.truncate(NETS);
        let findings = s
            .findings
            .iter()
            .map(|f| Fired {
                code: f.code,
                severity: f.severity,
                subject: f.subject.clone(),
                message: f.message.clone(),
            })
            .collect();
        for note in &s.notes {
            if self.notes.len() < NOTES && !self.notes.contains(note) {
                self.notes.push(note.clone());
            }
        }
        if let Some(conns) = &s.connections {
            for g in &conns.by_process {
                let key = (g.key.clone(), g.unit.clone());
                let bytes = (g.rx_bytes_per_s + g.tx_bytes_per_s) * s.interval_s;
                if let Some(total) = self.net_by_process.get_mut(&key) {
                    *total += bytes;
                } else if self.net_by_process.len() < NET_PROCESSES {
                    self.net_by_process.insert(key, bytes);
                }
            }
        }
        if self.points.len() == self.cap {
            self.points.pop_front();
        }
        self.points.push_back(Point {
            t: s.time_unix_s,
            interval_s: s.interval_s,
            cpu: [
                Some(c.user_pct + c.nice_pct),
                Some(c.system_pct + c.irq_pct + c.softirq_pct),
                Some(c.iowait_pct),
                Some(c.steal_pct),
                None,
            ],
            memory: [
                Some(m.used_bytes),
                Some(m.cache_bytes.saturating_add(m.buffers_bytes)),
                Some(m.available_bytes),
            ],
            psi: [psi(&s.psi.cpu), psi(&s.psi.io), psi(&s.psi.memory)],
            disks,
            nets,
            findings,
        });
    }

    /// Adds an interval the shared store kept (`record --db`): its compact figures, rates
    /// from its bytes; what it does not keep (the CPU split, used memory and cache, disk
    /// latency, CPU pressure, TCP by process) stays unknown.
    #[cfg(feature = "pg")]
    pub fn push_interval(&mut self, i: &crate::history::interval::Interval) {
        let dt = i.end_unix_s - i.start_unix_s;
        let rate = |bytes: u64| (dt > 0.0).then(|| bytes as f64 / dt);
        if self.points.len() == self.cap {
            self.points.pop_front();
        }
        self.points.push_back(Point {
            t: i.end_unix_s,
            interval_s: dt,
            cpu: [None, None, None, None, Some(i.cpu_busy_pct)],
            memory: [None, None, Some(i.available_bytes)],
            psi: [None, i.io_stall_pct, i.memory_stall_pct],
            disks: i
                .disks
                .iter()
                .take(DISKS)
                .map(|d| DiskPoint {
                    name: d.name.clone(),
                    display_name: d.display_name.clone(),
                    util_pct: d.util_pct,
                    await_ms: [None, None],
                    bytes_per_s: [rate(d.read_bytes), rate(d.write_bytes)],
                })
                .collect(),
            nets: i
                .nets
                .iter()
                .take(NETS)
                .map(|n| NetPoint {
                    name: n.name.clone(),
                    bytes_per_s: [
                        rate(n.rx_bytes).unwrap_or(0.0),
                        rate(n.tx_bytes).unwrap_or(0.0),
                    ],
                })
                .collect(),
            findings: i
                .findings
                .iter()
                .map(|f| Fired {
                    code: f.code,
                    severity: f.severity,
                    subject: f.subject.clone(),
                    message: f.message.clone(),
                })
                .collect(),
        });
    }

    /// The points, oldest first.
    pub fn points(&self) -> impl ExactSizeIterator<Item = &Point> + Clone {
        self.points.iter()
    }

    /// What the samples said could not be measured, each once.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Processes (command, unit) by TCP bytes sent and received over the timeline, most first.
    pub fn net_processes(&self, top: usize) -> Vec<(String, Option<String>, f64)> {
        let mut all: Vec<_> = self
            .net_by_process
            .iter()
            .filter(|(_, b)| **b > 0.0)
            .map(|((k, u), b)| (k.clone(), u.clone(), *b))
            .collect();
        all.sort_by(|a, b| b.2.total_cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
        all.truncate(top);
        all
    }

    /// The disks that were busy or moved bytes in any point, kernel name and the name admins
    /// know, busiest (highest utilisation seen) first.
    pub fn disk_names(&self) -> Vec<(String, String)> {
        let mut peak: BTreeMap<&str, (&str, f64, bool)> = BTreeMap::new();
        for d in self.points.iter().flat_map(|p| &p.disks) {
            let e = peak.entry(&d.name).or_insert((&d.display_name, 0.0, false));
            e.1 = e.1.max(d.util_pct.unwrap_or(0.0));
            e.2 |= d.bytes_per_s.iter().flatten().any(|b| *b > 0.0);
        }
        let mut names: Vec<_> = peak
            .into_iter()
            .filter(|(_, (_, util, moved))| *util > 0.0 || *moved)
            .collect();
        names.sort_by(|a, b| b.1.1.total_cmp(&a.1.1).then(a.0.cmp(b.0)));
        names
            .into_iter()
            .take(CHARTED_DISKS)
            .map(|(n, (d, ..))| (n.to_string(), d.to_string()))
            .collect()
    }

    /// The interfaces that moved bytes in any point, busiest first.
    pub fn net_names(&self) -> Vec<String> {
        let mut sum: BTreeMap<&str, f64> = BTreeMap::new();
        for n in self.points.iter().flat_map(|p| &p.nets) {
            *sum.entry(&n.name).or_default() += n.bytes_per_s[0] + n.bytes_per_s[1];
        }
        let mut names: Vec<_> = sum.into_iter().filter(|(_, b)| *b > 0.0).collect();
        names.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        names
            .into_iter()
            .take(CHARTED_NETS)
            .map(|(n, _)| n.to_string())
            .collect()
    }
}
