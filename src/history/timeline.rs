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
/// Processes a point keeps: the busiest of its interval by CPU, and as many by storage I/O.
const POINT_PROCESSES: usize = 24;
/// Services (cgroups) by storage I/O, and processes by TCP traffic, a point keeps.
const POINT_GROUPS: usize = 16;

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
    /// The busiest processes and services of the interval.
    pub activity: Activity,
}

/// What the busiest processes and services did over one interval, for their small
/// timelines; one not kept was not among the busiest (or not running), which is not known
/// as zero.
#[derive(Debug, Clone, Default)]
pub struct Activity {
    /// Processes by CPU and by storage I/O.
    pub processes: Vec<ProcessPoint>,
    /// Services (cgroup paths) by storage bytes read and written per second.
    pub services: Vec<(String, f64)>,
    /// Processes (command, unit) by TCP bytes sent and received per second.
    pub net: Vec<((String, Option<String>), f64)>,
}

/// A process's figures over one interval.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessPoint {
    /// Process id.
    pub pid: u32,
    /// Command name.
    pub comm: String,
    /// CPU time, percent of one CPU.
    pub cpu_pct: f64,
    /// Storage bytes read and written per second.
    pub io_bytes_per_s: f64,
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

/// Points oldest first, bounded, with what the window's samples could not know.
#[derive(Debug, Clone)]
pub struct Timeline {
    points: VecDeque<Point>,
    keep: Keep,
    /// Intervals added since the last point, merged, while [`Keep::Whole`] merges.
    pending: Option<(Point, usize)>,
    notes: Vec<String>,
    net_by_process: HashMap<(String, Option<String>), f64>,
}

/// Which points a timeline keeps.
#[derive(Debug, Clone, Copy)]
enum Keep {
    /// The latest, at most this many (the live page's window).
    Latest(usize),
    /// The whole window, in `max` to `2 * max` points: each point merges `stride` intervals,
    /// and the stride doubles (neighbours merged) whenever `2 * max` are reached.
    Whole { max: usize, stride: usize },
}

impl Timeline {
    /// An empty timeline keeping the latest `cap` points (the oldest go first).
    pub fn new(cap: usize) -> Timeline {
        Timeline::keeping(Keep::Latest(cap.max(1)))
    }

    /// An empty timeline keeping the whole of its window in at most `2 * max` points, each the
    /// mean of as many intervals (a long window's points are merged as it grows, so memory
    /// stays bounded whatever its length).
    pub fn whole(max: usize) -> Timeline {
        Timeline::keeping(Keep::Whole {
            max: max.max(1),
            stride: 1,
        })
    }

    fn keeping(keep: Keep) -> Timeline {
        Timeline {
            points: VecDeque::new(),
            keep,
            pending: None,
            notes: Vec::new(),
            net_by_process: HashMap::new(),
        }
    }

    fn add(&mut self, point: Point) {
        match &mut self.keep {
            Keep::Latest(cap) => {
                if self.points.len() == *cap {
                    self.points.pop_front();
                }
                self.points.push_back(point);
            }
            Keep::Whole { max, stride } => {
                let (point, n) = match self.pending.take() {
                    Some((before, n)) => (merge(before, point), n + 1),
                    None => (point, 1),
                };
                if n < *stride {
                    self.pending = Some((point, n));
                    return;
                }
                self.points.push_back(point);
                if self.points.len() >= 2 * *max {
                    let all: Vec<Point> = self.points.drain(..).collect();
                    let mut pairs = all.into_iter();
                    while let Some(a) = pairs.next() {
                        self.points.push_back(match pairs.next() {
                            Some(b) => merge(a, b),
                            None => a,
                        });
                    }
                    *stride *= 2;
                }
            }
        }
    }

    /// Adds the interval `s`.
    pub fn push(&mut self, s: &TopSample) {
        let point = self.point(s);
        self.add(point);
    }

    /// Adds the interval `s` with what its busiest processes and services did, for their
    /// small timelines: from its figures `i` (the history's, which keep every process) and its
    /// TCP traffic by process.
    pub fn push_judged(&mut self, s: &TopSample, i: &crate::history::interval::Interval) {
        let mut point = self.point(s);
        let mut activity = Activity::of(i);
        if let Some(conns) = &s.connections {
            activity.net = conns
                .by_process
                .iter()
                .map(|g| {
                    (
                        (g.key.clone(), g.unit.clone()),
                        g.rx_bytes_per_s + g.tx_bytes_per_s,
                    )
                })
                .collect();
        }
        point.activity = activity.bounded();
        self.add(point);
    }

    /// The point of `s`, its notes and TCP traffic by process counted.
    fn point(&mut self, s: &TopSample) -> Point {
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
        Point {
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
            activity: Activity::default(),
        }
    }

    /// Adds an interval the shared store kept (`record --db`): its compact figures, rates
    /// from its bytes; what it does not keep (the CPU split, used memory and cache, disk
    /// latency, CPU pressure, TCP by process) stays unknown.
    #[cfg(feature = "pg")]
    pub fn push_interval(&mut self, i: &crate::history::interval::Interval) {
        let dt = i.end_unix_s - i.start_unix_s;
        let rate = |bytes: u64| (dt > 0.0).then(|| bytes as f64 / dt);
        self.add(Point {
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
            activity: Activity::of(i),
        });
    }

    /// The points, oldest first.
    pub fn points(&self) -> impl Iterator<Item = &Point> + Clone {
        self.points
            .iter()
            .chain(self.pending.iter().map(|(p, _)| p))
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
        for d in self.points().flat_map(|p| &p.disks) {
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
        for n in self.points().flat_map(|p| &p.nets) {
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

impl Activity {
    /// The busiest processes and services of the interval `i`.
    pub fn of(i: &crate::history::interval::Interval) -> Activity {
        let dt = i.end_unix_s - i.start_unix_s;
        if dt <= 0.0 {
            return Activity::default();
        }
        Activity {
            processes: i
                .processes
                .iter()
                .map(|p| ProcessPoint {
                    pid: p.pid,
                    comm: p.comm.clone(),
                    cpu_pct: p.cpu_s / dt * 100.0,
                    io_bytes_per_s: (p.read_bytes + p.write_bytes) as f64 / dt,
                })
                .collect(),
            services: i
                .services
                .iter()
                .map(|c| (c.path.clone(), (c.read_bytes + c.write_bytes) as f64 / dt))
                .collect(),
            net: Vec::new(),
        }
        .bounded()
    }

    /// Only the busiest: [`POINT_PROCESSES`] processes by CPU and as many others by I/O,
    /// [`POINT_GROUPS`] services and processes by traffic.
    fn bounded(mut self) -> Activity {
        let all = std::mem::take(&mut self.processes);
        let mut by_cpu: Vec<&ProcessPoint> = all.iter().filter(|p| p.cpu_pct > 0.0).collect();
        by_cpu.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct).then(a.pid.cmp(&b.pid)));
        by_cpu.truncate(POINT_PROCESSES);
        let mut by_io: Vec<&ProcessPoint> = all
            .iter()
            .filter(|p| p.io_bytes_per_s > 0.0 && !by_cpu.iter().any(|q| q.pid == p.pid))
            .collect();
        by_io.sort_by(|a, b| {
            b.io_bytes_per_s
                .total_cmp(&a.io_bytes_per_s)
                .then(a.pid.cmp(&b.pid))
        });
        by_io.truncate(POINT_PROCESSES);
        self.processes = by_cpu.into_iter().chain(by_io).cloned().collect();
        busiest(&mut self.services, POINT_GROUPS);
        busiest(&mut self.net, POINT_GROUPS);
        self
    }

    /// Two neighbouring intervals' activity as one: each process's and service's mean over
    /// the intervals it was kept in (weighted by their lengths), the busiest kept.
    fn merge(a: Activity, b: Activity, wa: f64, wb: f64) -> Activity {
        let mut processes = b.processes;
        for p in a.processes {
            match processes
                .iter_mut()
                .find(|q| q.pid == p.pid && q.comm == p.comm)
            {
                Some(q) => {
                    q.cpu_pct = mean(Some(p.cpu_pct), Some(q.cpu_pct), wa, wb).unwrap_or(0.0);
                    q.io_bytes_per_s =
                        mean(Some(p.io_bytes_per_s), Some(q.io_bytes_per_s), wa, wb).unwrap_or(0.0);
                }
                None => processes.push(p),
            }
        }
        Activity {
            processes,
            services: union(a.services, b.services, wa, wb),
            net: union(a.net, b.net, wa, wb),
        }
        .bounded()
    }
}

/// The values of `a` and `b` (`wa` and `wb` long) by key: the weighted mean where both have
/// one.
fn union<K: PartialEq>(a: Vec<(K, f64)>, b: Vec<(K, f64)>, wa: f64, wb: f64) -> Vec<(K, f64)> {
    let mut out = b;
    for (k, v) in a {
        match out.iter_mut().find(|(l, _)| *l == k) {
            Some((_, w)) => *w = mean(Some(v), Some(*w), wa, wb).unwrap_or(0.0),
            None => out.push((k, v)),
        }
    }
    out
}

/// Keeps the `n` largest values, largest first.
fn busiest<K: Ord>(list: &mut Vec<(K, f64)>, n: usize) {
    list.retain(|(_, v)| *v > 0.0);
    list.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    list.truncate(n);
}

/// The mean of two known values weighted by their intervals; one alone if the other is not
/// known.
fn mean(a: Option<f64>, b: Option<f64>, wa: f64, wb: f64) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if wa + wb > 0.0 => Some((a * wa + b * wb) / (wa + wb)),
        (Some(a), Some(_)) => Some(a),
        (a, b) => a.or(b),
    }
}

/// Two neighbouring points as one: the later's end, both lengths, the means of their figures
/// (a disk or interface in one only is known only there), and the findings of either.
fn merge(a: Point, b: Point) -> Point {
    let (wa, wb) = (a.interval_s, b.interval_s);
    let m = |x: Option<f64>, y: Option<f64>| mean(x, y, wa, wb);
    let bytes = |x: Option<u64>, y: Option<u64>| {
        m(x.map(|v| v as f64), y.map(|v| v as f64)).map(|v| v as u64)
    };
    let mut disks = b.disks;
    for d in a.disks {
        match disks.iter_mut().find(|e| e.name == d.name) {
            Some(e) => {
                e.util_pct = m(d.util_pct, e.util_pct);
                for k in 0..2 {
                    e.await_ms[k] = m(d.await_ms[k], e.await_ms[k]);
                    e.bytes_per_s[k] = m(d.bytes_per_s[k], e.bytes_per_s[k]);
                }
            }
            None => disks.push(d),
        }
    }
    let mut nets = b.nets;
    for n in a.nets {
        match nets.iter_mut().find(|e| e.name == n.name) {
            Some(e) => {
                for k in 0..2 {
                    e.bytes_per_s[k] =
                        m(Some(n.bytes_per_s[k]), Some(e.bytes_per_s[k])).unwrap_or(0.0);
                }
            }
            None => nets.push(n),
        }
    }
    let mut findings = a.findings;
    for f in b.findings {
        if !findings
            .iter()
            .any(|e| e.code == f.code && e.subject == f.subject)
        {
            findings.push(f);
        }
    }
    Point {
        activity: Activity::merge(a.activity, b.activity, wa, wb),
        t: b.t,
        interval_s: wa + wb,
        cpu: std::array::from_fn(|k| m(a.cpu[k], b.cpu[k])),
        memory: std::array::from_fn(|k| bytes(a.memory[k], b.memory[k])),
        psi: std::array::from_fn(|k| m(a.psi[k], b.psi[k])),
        disks,
        nets,
        findings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(t: f64, util: f64) -> Point {
        Point {
            t,
            interval_s: 1.0,
            cpu: [Some(t), None, None, None, None],
            memory: [None, None, Some(100)],
            psi: [None; 3],
            disks: vec![DiskPoint {
                name: "sda".into(),
                display_name: "sda".into(),
                util_pct: Some(util),
                await_ms: [None, None],
                bytes_per_s: [Some(0.0), None],
            }],
            nets: Vec::new(),
            findings: Vec::new(),
            activity: Activity::default(),
        }
    }

    #[test]
    fn a_whole_window_stays_bounded_and_keeps_its_means() {
        let mut t = Timeline::whole(10);
        for n in 1..=1000 {
            t.add(point(f64::from(n), if n % 2 == 0 { 100.0 } else { 0.0 }));
        }
        let points: Vec<&Point> = t.points().collect();
        assert!(points.len() >= 10 && points.len() < 20, "{}", points.len());
        // Each point spans its intervals; together they cover all 1000, in order.
        let covered: f64 = points.iter().map(|p| p.interval_s).sum();
        assert_eq!(covered, 1000.0);
        assert_eq!(points.last().unwrap().t, 1000.0);
        assert!(points.windows(2).all(|w| w[0].t < w[1].t));
        // Alternating 0% and 100% busy averages to 50%; the first point's CPU is the mean of
        // its times.
        let util = points[0].disks[0].util_pct.unwrap();
        assert!((util - 50.0).abs() < 1e-9, "{util}");
        let n = points[0].interval_s;
        assert_eq!(points[0].cpu[0], Some((1.0 + n) / 2.0));
        assert_eq!(points[0].memory[2], Some(100));
    }

    #[test]
    fn the_latest_keep_their_cap() {
        let mut t = Timeline::new(5);
        for n in 1..=12 {
            t.add(point(f64::from(n), 1.0));
        }
        let ts: Vec<f64> = t.points().map(|p| p.t).collect();
        assert_eq!(ts, [8.0, 9.0, 10.0, 11.0, 12.0]);
    }
}
