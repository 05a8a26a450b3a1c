//! One judged interval in the few figures a replay summary is made of: its findings with
//! the processes and units they named, bytes per device, CPU, memory, pressure and network
//! figures, and what each process and service did. The summary of a window
//! (`history::summary`) is these intervals added up; `tacho record --db` ships each one, made
//! [`Interval::compact`], to the shared store, where `tacho top --db` adds them up the same way.

use serde::{Deserialize, Serialize};

use crate::diagnose::findings::{Code, Severity};
use crate::diagnose::model::{self, SortKey, TopSample};
use crate::history::Record;

/// Processes by I/O, and services, a compact interval keeps.
#[cfg(feature = "pg")]
pub const COMPACT_TOP: usize = 5;
/// Processes by CPU a compact interval keeps besides those: with five by I/O at most eight
/// processes, which keeps a host's day under 5 MB in the shared store (docs/benchmarks.md).
#[cfg(feature = "pg")]
pub const COMPACT_TOP_CPU: usize = 3;
/// Culprits kept per finding.
const CULPRITS: usize = 3;

/// What one interval contributes to a summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Start, seconds since the Unix epoch.
    pub start_unix_s: f64,
    /// End.
    pub end_unix_s: f64,
    /// The findings of the interval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Found>,
    /// Per device, those that moved bytes or were busy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<DiskFigures>,
    /// Bytes the physical disks wrote.
    pub device_write_bytes: u64,
    /// Bytes processes sent to storage.
    pub process_write_bytes: u64,
    /// Processes that read, wrote or ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<Proc>,
    /// Cgroups (services) that read or wrote.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<Service>,
    /// CPU busy share of all CPUs, percent.
    pub cpu_busy_pct: f64,
    /// Share of the interval some task stalled on I/O (PSI), percent; `None` without PSI.
    pub io_stall_pct: Option<f64>,
    /// Share of the interval some task stalled on memory (PSI), percent.
    pub memory_stall_pct: Option<f64>,
    /// Available memory at the end, bytes.
    pub available_bytes: u64,
    /// Per network interface, bytes received and sent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nets: Vec<NetFigures>,
    /// Exit records the recorder lost in the interval.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub exit_overruns: u64,
}

/// A finding of the interval with who it named.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Found {
    /// Its stable code.
    pub code: Code,
    /// How much it matters.
    pub severity: Severity,
    /// What it is about.
    pub subject: String,
    /// Its sentence.
    pub message: String,
    /// Who it named, most first.
    pub culprits: Vec<Named>,
}

/// A process or service a finding named.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Named {
    /// Command name (the cgroup's last component when there is no process).
    pub comm: String,
    /// The service it runs in.
    pub unit: Option<String>,
    /// Its share of the resource, percent.
    pub share_pct: f64,
}

/// A device's figures over the interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskFigures {
    /// Kernel name.
    pub name: String,
    /// The name admins know.
    pub display_name: String,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Utilisation, percent.
    pub util_pct: Option<f64>,
}

/// A process's figures over the interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proc {
    /// Process id.
    pub pid: u32,
    /// Command name.
    pub comm: String,
    /// Bytes read from storage.
    pub read_bytes: u64,
    /// Bytes sent to storage.
    pub write_bytes: u64,
    /// CPU seconds.
    pub cpu_s: f64,
}

/// A cgroup's bytes over the interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Service {
    /// Cgroup path.
    pub path: String,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
}

/// A network interface's bytes over the interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetFigures {
    /// Interface name.
    pub name: String,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
}

impl Interval {
    /// The interval `a`..`b`, judged as `s`.
    pub fn of(a: &Record, b: &Record, s: &TopSample) -> Interval {
        let dt = s.interval_s;
        let findings = s
            .findings
            .iter()
            .map(|f| Found {
                code: f.code,
                severity: f.severity,
                subject: f.subject.clone(),
                message: f.message.clone(),
                culprits: f
                    .culprits
                    .iter()
                    .take(CULPRITS)
                    .map(|c| Named {
                        comm: c.comm.clone(),
                        unit: c.unit.clone(),
                        share_pct: c.share_pct,
                    })
                    .collect(),
            })
            .collect();
        let disks = s
            .disks
            .iter()
            .map(|d| DiskFigures {
                name: d.device.name.clone(),
                display_name: d.device.display_name.clone(),
                read_bytes: bytes(d.rkb_per_s.map(|k| k * 1024.0), dt),
                write_bytes: d.write_bytes.unwrap_or(0),
                util_pct: d.util_pct,
            })
            .filter(|d| d.read_bytes + d.write_bytes > 0 || d.util_pct.is_some_and(|u| u > 0.0))
            .collect();
        let services = s
            .cgroups
            .iter()
            .map(|c| Service {
                path: c.path.clone(),
                read_bytes: c
                    .devices
                    .iter()
                    .map(|d| bytes(Some(d.rbytes_per_s), dt))
                    .sum(),
                write_bytes: c
                    .devices
                    .iter()
                    .map(|d| bytes(Some(d.wbytes_per_s), dt))
                    .sum(),
            })
            .filter(|c| c.read_bytes + c.write_bytes > 0)
            .collect();
        let nets = s
            .net
            .iter()
            .map(|n| NetFigures {
                name: n.name.clone(),
                rx_bytes: bytes(Some(n.rx_bytes_per_s), dt),
                tx_bytes: bytes(Some(n.tx_bytes_per_s), dt),
            })
            .filter(|n| n.rx_bytes + n.tx_bytes > 0)
            .collect();
        Interval {
            start_unix_s: a.sample.unix_time_s,
            end_unix_s: s.time_unix_s,
            findings,
            disks,
            device_write_bytes: s.write_amplification.device_write_bytes,
            process_write_bytes: s.write_amplification.process_write_bytes,
            processes: processes(a, b),
            services,
            cpu_busy_pct: s.cpu.all.busy_pct(),
            io_stall_pct: s.psi.io.as_ref().and_then(|r| r.some.stall_pct),
            memory_stall_pct: s.psi.memory.as_ref().and_then(|r| r.some.stall_pct),
            available_bytes: s.memory.available_bytes,
            nets,
            exit_overruns: b.sample.exit_overruns,
        }
    }

    /// The interval with only the `top` processes by I/O, the `top_cpu` others by CPU and the
    /// `top` services by bytes, its shares and percentages to a tenth: what the shared store
    /// keeps of it.
    #[cfg(feature = "pg")]
    pub fn compact(mut self, top: usize, top_cpu: usize) -> Interval {
        let tenth = |x: f64| (x * 10.0).round() / 10.0;
        self.cpu_busy_pct = tenth(self.cpu_busy_pct);
        self.io_stall_pct = self.io_stall_pct.map(tenth);
        self.memory_stall_pct = self.memory_stall_pct.map(tenth);
        for d in &mut self.disks {
            d.util_pct = d.util_pct.map(tenth);
        }
        for c in self.findings.iter_mut().flat_map(|f| &mut f.culprits) {
            c.share_pct = tenth(c.share_pct);
        }
        let mut by_io = self.processes.clone();
        by_io.retain(|p| p.read_bytes + p.write_bytes > 0);
        by_io.sort_by_key(|p| (std::cmp::Reverse(p.read_bytes + p.write_bytes), p.pid));
        by_io.truncate(top);
        let mut by_cpu = std::mem::take(&mut self.processes);
        by_cpu.retain(|p| p.cpu_s > 0.0 && !by_io.iter().any(|q| q.pid == p.pid));
        by_cpu.sort_by(|a, b| b.cpu_s.total_cmp(&a.cpu_s).then(a.pid.cmp(&b.pid)));
        by_cpu.truncate(top_cpu);
        by_io.extend(by_cpu);
        self.processes = by_io;
        self.services
            .sort_by_key(|s| std::cmp::Reverse(s.read_bytes + s.write_bytes));
        self.services.truncate(top);
        self
    }
}

/// An interval as the shared store's columns hold it (`tacho_intervals`): the figures Grafana
/// plots in columns of their own, the findings as JSON (`None` when there are none), and the
/// rest as one JSON document of arrays.
#[cfg(feature = "pg")]
#[derive(Debug, Clone, PartialEq)]
pub struct Columns {
    /// End of the interval, seconds since the Unix epoch.
    pub end_unix_s: f64,
    /// Its length, seconds.
    pub seconds: f32,
    /// CPU busy share, percent.
    pub cpu_busy_pct: Option<f32>,
    /// I/O stall share, percent.
    pub io_stall_pct: Option<f32>,
    /// Memory stall share, percent.
    pub memory_stall_pct: Option<f32>,
    /// Available memory at the end, bytes.
    pub available_bytes: Option<i64>,
    /// Bytes the physical disks wrote.
    pub device_write_bytes: Option<i64>,
    /// Bytes processes sent to storage.
    pub process_write_bytes: Option<i64>,
    /// The findings (a JSON array), `None` for none.
    pub findings: Option<String>,
    /// The processes, services, devices and interfaces ([`Figures`] as JSON).
    pub figures: String,
}

/// What the shared store keeps of an interval's lists: arrays instead of objects, since the
/// key names would be most of the bytes.
#[cfg(feature = "pg")]
#[derive(Debug, Default, Serialize, Deserialize)]
struct Figures {
    /// `[pid, comm, read_bytes, write_bytes, cpu_s]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    processes: Vec<(u32, String, u64, u64, f64)>,
    /// `[path, read_bytes, write_bytes]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    services: Vec<(String, u64, u64)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    disks: Vec<StoredDisk>,
    /// `[name, rx_bytes, tx_bytes]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    nets: Vec<(String, u64, u64)>,
    #[serde(default, skip_serializing_if = "is_zero")]
    exit_overruns: u64,
}

/// A device's figures in the shared store: `[name, display_name (null when the same),
/// read_bytes, write_bytes, util_pct]`.
#[cfg(feature = "pg")]
type StoredDisk = (String, Option<String>, u64, u64, Option<f64>);

#[cfg(feature = "pg")]
impl Interval {
    /// The columns the shared store keeps of this interval.
    pub fn columns(&self) -> Columns {
        let figures = Figures {
            processes: self
                .processes
                .iter()
                .map(|p| (p.pid, p.comm.clone(), p.read_bytes, p.write_bytes, p.cpu_s))
                .collect(),
            services: self
                .services
                .iter()
                .map(|s| (s.path.clone(), s.read_bytes, s.write_bytes))
                .collect(),
            disks: self
                .disks
                .iter()
                .map(|d| {
                    let shown = (d.display_name != d.name).then(|| d.display_name.clone());
                    (
                        d.name.clone(),
                        shown,
                        d.read_bytes,
                        d.write_bytes,
                        d.util_pct,
                    )
                })
                .collect(),
            nets: self
                .nets
                .iter()
                .map(|n| (n.name.clone(), n.rx_bytes, n.tx_bytes))
                .collect(),
            exit_overruns: self.exit_overruns,
        };
        let bytes = |n: u64| Some(i64::try_from(n).unwrap_or(i64::MAX));
        Columns {
            end_unix_s: self.end_unix_s,
            seconds: (self.end_unix_s - self.start_unix_s) as f32,
            cpu_busy_pct: Some(self.cpu_busy_pct as f32),
            io_stall_pct: self.io_stall_pct.map(|x| x as f32),
            memory_stall_pct: self.memory_stall_pct.map(|x| x as f32),
            available_bytes: bytes(self.available_bytes),
            device_write_bytes: bytes(self.device_write_bytes),
            process_write_bytes: bytes(self.process_write_bytes),
            findings: (!self.findings.is_empty())
                .then(|| serde_json::to_string(&self.findings).unwrap_or_else(|_| "[]".into())),
            figures: serde_json::to_string(&figures).unwrap_or_else(|_| "{}".into()),
        }
    }

    /// The interval the shared store's columns hold; an error names what did not parse.
    pub fn from_columns(c: &Columns) -> Result<Interval, serde_json::Error> {
        let f: Figures = serde_json::from_str(&c.figures)?;
        let findings = match &c.findings {
            Some(json) => serde_json::from_str(json)?,
            None => Vec::new(),
        };
        let bytes = |n: Option<i64>| n.map_or(0, |n| u64::try_from(n).unwrap_or(0));
        Ok(Interval {
            start_unix_s: c.end_unix_s - widen(c.seconds),
            end_unix_s: c.end_unix_s,
            findings,
            disks: f
                .disks
                .into_iter()
                .map(
                    |(name, shown, read_bytes, write_bytes, util_pct)| DiskFigures {
                        display_name: shown.unwrap_or_else(|| name.clone()),
                        name,
                        read_bytes,
                        write_bytes,
                        util_pct,
                    },
                )
                .collect(),
            device_write_bytes: bytes(c.device_write_bytes),
            process_write_bytes: bytes(c.process_write_bytes),
            processes: f
                .processes
                .into_iter()
                .map(|(pid, comm, read_bytes, write_bytes, cpu_s)| Proc {
                    pid,
                    comm,
                    read_bytes,
                    write_bytes,
                    cpu_s,
                })
                .collect(),
            services: f
                .services
                .into_iter()
                .map(|(path, read_bytes, write_bytes)| Service {
                    path,
                    read_bytes,
                    write_bytes,
                })
                .collect(),
            cpu_busy_pct: c.cpu_busy_pct.map_or(0.0, widen),
            io_stall_pct: c.io_stall_pct.map(widen),
            memory_stall_pct: c.memory_stall_pct.map(widen),
            available_bytes: bytes(c.available_bytes),
            nets: f
                .nets
                .into_iter()
                .map(|(name, rx_bytes, tx_bytes)| NetFigures {
                    name,
                    rx_bytes,
                    tx_bytes,
                })
                .collect(),
            exit_overruns: f.exit_overruns,
        })
    }
}

/// A `real` column's value as the decimal it was written from (`12.3`, not the
/// 12.300000190734863 its binary value widens to).
#[cfg(feature = "pg")]
pub fn widen(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(f64::from(x))
}

/// What each process did over the interval, as live top counts it
/// ([`model::process::deltas`]): processes born in the interval from nothing, those that
/// exited by their exit records, a parent's bytes without its reaped children's.
fn processes(a: &Record, b: &Record) -> Vec<Proc> {
    let opts = a.model_options(0, SortKey::Io);
    model::process::deltas(&a.sample, &b.sample, &opts)
        .into_iter()
        .filter_map(|d| {
            let read_bytes = d.read_bytes.unwrap_or(0);
            let write_bytes = d.write_bytes.unwrap_or(0);
            let ticks = d.utime + d.stime;
            (read_bytes + write_bytes + ticks > 0).then(|| Proc {
                pid: d.pid,
                comm: d.comm,
                read_bytes,
                write_bytes,
                cpu_s: ticks as f64 / b.ticks_per_s,
            })
        })
        .collect()
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Bytes moved in an interval from a rate, rounded to whole bytes.
fn bytes(per_s: Option<f64>, dt: f64) -> u64 {
    per_s.map_or(0, |r| (r * dt).round().max(0.0) as u64)
}

#[cfg(all(test, feature = "pg"))]
mod tests {
    use super::*;

    fn proc_(pid: u32, io: u64, cpu_s: f64) -> Proc {
        Proc {
            pid,
            comm: format!("p{pid}"),
            read_bytes: 0,
            write_bytes: io,
            cpu_s,
        }
    }

    /// What the shared store's columns keep of a compact interval reads back as it was.
    #[test]
    fn an_interval_survives_its_columns() {
        let i = Interval {
            start_unix_s: 1_795_140_600.25,
            end_unix_s: 1_795_140_610.5,
            findings: vec![Found {
                code: Code::DiskBusy,
                severity: Severity::Warning,
                subject: "sda".into(),
                message: "busy".into(),
                culprits: vec![Named {
                    comm: "dd".into(),
                    unit: Some("backup.service".into()),
                    share_pct: 97.1,
                }],
            }],
            disks: vec![
                DiskFigures {
                    name: "dm-0".into(),
                    display_name: "vg-data".into(),
                    read_bytes: 1,
                    write_bytes: u64::from(u32::MAX) * 3,
                    util_pct: Some(93.4),
                },
                DiskFigures {
                    name: "sda".into(),
                    display_name: "sda".into(),
                    read_bytes: 0,
                    write_bytes: 4096,
                    util_pct: None,
                },
            ],
            device_write_bytes: 7,
            process_write_bytes: 5,
            processes: vec![proc_(42, 8192, 0.66)],
            services: vec![Service {
                path: "/system.slice/a \"b\".service".into(),
                read_bytes: 3,
                write_bytes: 4,
            }],
            cpu_busy_pct: 12.3,
            io_stall_pct: Some(0.6),
            memory_stall_pct: None,
            available_bytes: 20_879_958_016,
            nets: vec![NetFigures {
                name: "eth0".into(),
                rx_bytes: 10,
                tx_bytes: 20,
            }],
            exit_overruns: 2,
        };
        let c = i.columns();
        assert!(
            c.figures.starts_with("{\"processes\":[[42,"),
            "{}",
            c.figures
        );
        assert!(c.figures.contains("[\"sda\",null,"), "{}", c.figures);
        let back = Interval::from_columns(&c).unwrap();
        assert!((back.start_unix_s - i.start_unix_s).abs() < 1e-6);
        assert_eq!(
            back,
            Interval {
                start_unix_s: back.start_unix_s,
                ..i.clone()
            }
        );
        let quiet = Interval {
            findings: Vec::new(),
            ..i
        }
        .columns();
        assert_eq!(quiet.findings, None);
    }

    proptest::proptest! {
        /// Whatever text the figures and findings columns hold, reading them fails or not,
        /// and never panics.
        #[test]
        fn any_stored_text_reads_without_panicking(figures in ".{0,200}", findings in ".{0,200}") {
            let c = Columns {
                end_unix_s: 10.0,
                seconds: 1.0,
                cpu_busy_pct: None,
                io_stall_pct: None,
                memory_stall_pct: None,
                available_bytes: Some(-1),
                device_write_bytes: None,
                process_write_bytes: None,
                findings: Some(findings),
                figures,
            };
            let _ = Interval::from_columns(&c);
        }
    }

    /// A compact interval keeps the top processes by I/O and, besides them, the top by CPU.
    #[test]
    fn compact_keeps_the_top_by_io_and_by_cpu() {
        let i = Interval {
            processes: (1..=20)
                .map(|n| proc_(n, u64::from(n) * 10, 21.0 - f64::from(n)))
                .collect(),
            ..Interval::default()
        }
        .compact(3, 2);
        let pids: Vec<u32> = i.processes.iter().map(|p| p.pid).collect();
        assert_eq!(pids, [20, 19, 18, 1, 2]);
    }
}
