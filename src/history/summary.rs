//! A window of the history judged again: the stored raw samples go through the same
//! pipeline as `tacho top` live (`diagnose::live::Pipeline`), and the intervals are summed
//! into the `tacho.history.v1` summary (findings with when they fired, totals, peaks).

use std::collections::HashMap;

use serde::Serialize;

use crate::diagnose::findings::{Code, Severity};
use crate::diagnose::live::{Connections, Pipeline};
use crate::diagnose::model::{SortKey, TopSample};
use crate::history::interval::{Interval, Named};
use crate::history::{History, Record};
use anyhow::Result;

/// Schema of the `--from/--to --json` document.
pub const SCHEMA: &str = "tacho.history.v1";
/// An interval longer than this many recorder intervals is a gap (the recorder was stopped),
/// not a sample: counters across it may have been reset by a reboot.
const GAP_FACTOR: f64 = 3.0;

/// What happened in a window.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The tacho that computed it.
    pub tool_version: &'static str,
    /// Start of the window asked for, seconds since the Unix epoch.
    pub from_unix_s: f64,
    /// End of the window asked for.
    pub to_unix_s: f64,
    /// Intervals judged (pairs of consecutive samples inside the window).
    pub intervals: usize,
    /// Seconds covered by those intervals.
    pub covered_s: f64,
    /// Gaps where the recorder was not running, skipped.
    pub gaps: usize,
    /// Each finding with the spans during which it fired, most severe first.
    pub findings: Vec<FindingSpan>,
    /// Bytes per device, busiest first.
    pub disks: Vec<DiskTotal>,
    /// Bytes the physical disks wrote (no partitions, loop, dm or md), the numerator of write
    /// amplification, summed over the intervals.
    pub device_write_bytes: u64,
    /// Bytes processes sent to storage (those whose /proc/PID/io was readable), summed over
    /// the intervals: the denominator.
    pub process_write_bytes: u64,
    /// Processes by bytes read + written.
    pub top_io: Vec<ProcessTotal>,
    /// Processes by CPU time.
    pub top_cpu: Vec<ProcessTotal>,
    /// Cgroups (services) by bytes.
    pub services: Vec<ServiceTotal>,
    /// The worst moments.
    pub peaks: Peaks,
    /// Bytes per network interface, busiest first.
    pub networks: Vec<NetTotal>,
    /// Times the recorder lost processes' exit records in the window (its netlink buffer
    /// overran): a process that exited then may be missing from `top_io` or undercounted.
    pub exit_overruns: u64,
}

/// One finding over a stretch of consecutive intervals.
#[derive(Debug, Clone, Serialize)]
pub struct FindingSpan {
    /// The finding's stable code (`disk_saturated`, …).
    pub code: Code,
    /// Its worst severity in the span.
    pub severity: Severity,
    /// What it is about (a device, `cpu`, `memory`).
    pub subject: String,
    /// The message of its worst interval.
    pub message: String,
    /// Start of its first interval.
    pub from_unix_s: f64,
    /// End of its last interval.
    pub to_unix_s: f64,
    /// Who it named over the span, most often named first.
    pub culprits: Vec<NamedTotal>,
}

/// A process or service a finding named over its span.
#[derive(Debug, Clone, Serialize)]
pub struct NamedTotal {
    /// Command name.
    pub comm: String,
    /// The service it runs in.
    pub unit: Option<String>,
    /// Intervals of the span it was named in.
    pub intervals: usize,
    /// Its highest share of the resource in them, percent.
    pub peak_share_pct: f64,
}

/// A network interface's bytes over the window.
#[derive(Debug, Clone, Serialize)]
pub struct NetTotal {
    /// Interface name.
    pub name: String,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
}

/// A device's bytes over the window.
#[derive(Debug, Clone, Serialize)]
pub struct DiskTotal {
    /// Kernel name.
    pub name: String,
    /// The name admins know (dm name).
    pub display_name: String,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Highest utilisation of an interval, percent.
    pub peak_util_pct: f64,
    /// When it was (end of that interval).
    pub peak_util_unix_s: f64,
}

/// A process's totals over the window.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessTotal {
    /// Process id.
    pub pid: u32,
    /// Command name (as the kernel keeps it).
    pub comm: String,
    /// Bytes it read from storage.
    pub read_bytes: u64,
    /// Bytes it sent to storage.
    pub write_bytes: u64,
    /// CPU seconds (user + system).
    pub cpu_s: f64,
}

/// A cgroup's bytes over the window.
#[derive(Debug, Clone, Serialize)]
pub struct ServiceTotal {
    /// Cgroup path (`/system.slice/backup.service`).
    pub path: String,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
}

/// Highest values of the window, each with its time.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Peaks {
    /// Highest CPU busy share of all CPUs, percent.
    pub cpu_busy_pct: Option<Peak>,
    /// Highest share of an interval some task stalled on I/O (PSI), percent.
    pub io_stall_pct: Option<Peak>,
    /// Highest share of an interval some task stalled on memory (PSI), percent.
    pub memory_stall_pct: Option<Peak>,
    /// Lowest available memory, bytes.
    pub min_available_bytes: Option<Peak>,
}

/// A value and the end of the interval it was seen in.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Peak {
    /// The value.
    pub value: f64,
    /// When, seconds since the Unix epoch.
    pub unix_s: f64,
}

/// Judges every interval of the history from the sample at or before `from` to `to` and
/// sums those ending inside `from..=to`; `top` bounds the process and service lists.
pub fn summarise(history: &History, from: f64, to: f64, top: usize) -> Result<Summary> {
    summarise_each(history, from, to, top, |_| {}, |_, _| {})
}

/// [`summarise`], showing `seen` every record read and handing `each` every interval of the
/// window as judged, and its figures.
pub fn summarise_each(
    history: &History,
    from: f64,
    to: f64,
    top: usize,
    mut seen: impl FnMut(&Record),
    mut each: impl FnMut(&TopSample, &Interval),
) -> Result<Summary> {
    let mut window = Window::new(from, to);
    history.scan(from, to, |rec| {
        seen(&rec);
        window.push_each(rec, &mut each);
    })?;
    Ok(window.finish(top))
}

/// Intervals judged from samples fed oldest first, as `tacho top` judged them live; only the
/// last sample is kept.
pub struct Judge {
    pipeline: Pipeline,
    gaps: usize,
    last: Option<Record>,
}

impl Default for Judge {
    fn default() -> Judge {
        Judge {
            pipeline: Pipeline::new(false),
            gaps: 0,
            last: None,
        }
    }
}

impl Judge {
    /// Judges the interval ending at `b` (after the ones before it, for baselines) and returns
    /// its figures when `wanted` says so for its end; `None` for the first sample, after a gap
    /// (the recorder was stopped), or when not wanted.
    pub fn push(&mut self, b: Record, wanted: impl Fn(f64) -> bool) -> Option<Interval> {
        self.push_each(b, wanted, |_, _| {})
    }

    /// [`Judge::push`], handing `each` the judged interval and its figures when it is wanted.
    pub fn push_each(
        &mut self,
        b: Record,
        wanted: impl Fn(f64) -> bool,
        each: impl FnOnce(&TopSample, &Interval),
    ) -> Option<Interval> {
        let mut out = None;
        if let Some(a) = self.last.take() {
            let dt = b.sample.unix_time_s - a.sample.unix_time_s;
            if dt <= 0.0 || dt > GAP_FACTOR * b.interval_s.max(a.interval_s) + 1.0 {
                self.gaps += 1;
                self.pipeline.forget();
            } else {
                let s = judged(&a, &b, &mut self.pipeline, 0, SortKey::Io);
                if wanted(b.sample.unix_time_s) {
                    let i = Interval::of(&a, &b, &s);
                    each(&s, &i);
                    out = Some(i);
                }
            }
        }
        self.last = Some(b);
        out
    }
}

/// A summary being built from samples fed oldest first.
pub struct Window {
    from: f64,
    to: f64,
    acc: Accumulator,
    judge: Judge,
}

impl Window {
    /// An empty summary of `from..=to`.
    pub fn new(from: f64, to: f64) -> Window {
        Window {
            from,
            to,
            acc: Accumulator::default(),
            judge: Judge::default(),
        }
    }

    /// Judges the interval ending at `b` (after the one before it), summing it when it ends
    /// inside the window and handing `each` the judged interval then.
    pub fn push_each(&mut self, b: Record, each: impl FnOnce(&TopSample, &Interval)) {
        let (from, to) = (self.from, self.to);
        if let Some(i) = self.judge.push_each(b, |end| end > from && end <= to, each) {
            self.acc.add(&i);
        }
    }

    /// The summary, `top` processes and services long.
    pub fn finish(self, top: usize) -> Summary {
        self.acc.finish(self.from, self.to, self.judge.gaps, top)
    }
}

/// The summary of `from..=to` from intervals already judged (the shared store's), oldest
/// first: an interval that does not start where the one before it ended follows a gap.
#[cfg(feature = "pg")]
pub fn of_intervals(
    from: f64,
    to: f64,
    intervals: impl IntoIterator<Item = Interval>,
    top: usize,
) -> Summary {
    let mut acc = Accumulator::default();
    let mut gaps = 0;
    let mut last_end: Option<f64> = None;
    for i in intervals {
        if last_end.is_some_and(|end| (i.start_unix_s - end).abs() > 1e-3) {
            gaps += 1;
        }
        last_end = Some(i.end_unix_s);
        acc.add(&i);
    }
    acc.finish(from, to, gaps, top)
}

/// One interval as `tacho top` would have shown it: the recorded pair through the live
/// pipeline, judged with the baselines `pipeline` holds.
pub fn judged(
    a: &Record,
    b: &Record,
    pipeline: &mut Pipeline,
    top: usize,
    sort: SortKey,
) -> TopSample {
    let opts = b.model_options(top, sort);
    let kept = Connections::Recorded(b.connections.as_ref());
    pipeline.step((&a.sample, &b.sample), &b.device_map(), &opts, kept)
}

#[derive(Default)]
struct Accumulator {
    intervals: usize,
    covered_s: f64,
    spans: Vec<FindingSpan>,
    /// Index in `spans` of each (code, subject) span still open, with its last end time.
    open: HashMap<(Code, String), (usize, f64)>,
    disks: HashMap<String, DiskTotal>,
    device_write_bytes: u64,
    process_write_bytes: u64,
    processes: HashMap<(u32, String), ProcessTotal>,
    services: HashMap<String, ServiceTotal>,
    nets: HashMap<String, NetTotal>,
    peaks: Peaks,
    exit_overruns: u64,
}

impl Accumulator {
    fn add(&mut self, i: &Interval) {
        let (start, end) = (i.start_unix_s, i.end_unix_s);
        self.intervals += 1;
        self.covered_s += end - start;
        self.device_write_bytes = self.device_write_bytes.saturating_add(i.device_write_bytes);
        self.process_write_bytes = self
            .process_write_bytes
            .saturating_add(i.process_write_bytes);
        for f in &i.findings {
            let key = (f.code, f.subject.clone());
            let span = match self.open.get_mut(&key) {
                Some((n, last)) if (*last - start).abs() < 1e-3 => {
                    let span = &mut self.spans[*n];
                    span.to_unix_s = end;
                    if f.severity > span.severity {
                        span.severity = f.severity;
                        span.message = f.message.clone();
                    }
                    *last = end;
                    span
                }
                _ => {
                    self.spans.push(FindingSpan {
                        code: f.code,
                        severity: f.severity,
                        subject: f.subject.clone(),
                        message: f.message.clone(),
                        from_unix_s: start,
                        to_unix_s: end,
                        culprits: Vec::new(),
                    });
                    self.open.insert(key, (self.spans.len() - 1, end));
                    self.spans.last_mut().expect("just pushed")
                }
            };
            for c in &f.culprits {
                name(&mut span.culprits, c);
            }
        }
        for d in &i.disks {
            let t = self
                .disks
                .entry(d.name.clone())
                .or_insert_with(|| DiskTotal {
                    name: d.name.clone(),
                    display_name: d.display_name.clone(),
                    read_bytes: 0,
                    write_bytes: 0,
                    peak_util_pct: 0.0,
                    peak_util_unix_s: end,
                });
            t.read_bytes += d.read_bytes;
            t.write_bytes += d.write_bytes;
            if let Some(u) = d.util_pct.filter(|&u| u > t.peak_util_pct) {
                t.peak_util_pct = u;
                t.peak_util_unix_s = end;
            }
        }
        for c in &i.services {
            let t = self
                .services
                .entry(c.path.clone())
                .or_insert_with(|| ServiceTotal {
                    path: c.path.clone(),
                    read_bytes: 0,
                    write_bytes: 0,
                });
            t.read_bytes += c.read_bytes;
            t.write_bytes += c.write_bytes;
        }
        for n in &i.nets {
            let t = self.nets.entry(n.name.clone()).or_insert_with(|| NetTotal {
                name: n.name.clone(),
                rx_bytes: 0,
                tx_bytes: 0,
            });
            t.rx_bytes += n.rx_bytes;
            t.tx_bytes += n.tx_bytes;
        }
        for p in &i.processes {
            let t = self
                .processes
                .entry((p.pid, p.comm.clone()))
                .or_insert_with(|| ProcessTotal {
                    pid: p.pid,
                    comm: p.comm.clone(),
                    read_bytes: 0,
                    write_bytes: 0,
                    cpu_s: 0.0,
                });
            t.read_bytes += p.read_bytes;
            t.write_bytes += p.write_bytes;
            t.cpu_s += p.cpu_s;
        }
        self.exit_overruns = self.exit_overruns.saturating_add(i.exit_overruns);
        let at = |value: f64| Peak { value, unix_s: end };
        raise(&mut self.peaks.cpu_busy_pct, at(i.cpu_busy_pct), false);
        if let Some(io) = i.io_stall_pct {
            raise(&mut self.peaks.io_stall_pct, at(io), false);
        }
        if let Some(m) = i.memory_stall_pct {
            raise(&mut self.peaks.memory_stall_pct, at(m), false);
        }
        raise(
            &mut self.peaks.min_available_bytes,
            at(i.available_bytes as f64),
            true,
        );
    }

    fn finish(self, from: f64, to: f64, gaps: usize, top: usize) -> Summary {
        let mut spans = self.spans;
        spans.sort_by(|a, b| {
            b.severity
                .cmp(&a.severity)
                .then(a.from_unix_s.total_cmp(&b.from_unix_s))
        });
        let mut disks: Vec<DiskTotal> = self
            .disks
            .into_values()
            .filter(|d| d.read_bytes + d.write_bytes > 0)
            .collect();
        disks.sort_by_key(|d| std::cmp::Reverse(d.read_bytes + d.write_bytes));
        let procs: Vec<ProcessTotal> = self.processes.into_values().collect();
        let mut top_io: Vec<ProcessTotal> = procs
            .iter()
            .filter(|p| p.read_bytes + p.write_bytes > 0)
            .cloned()
            .collect();
        top_io.sort_by_key(|p| (std::cmp::Reverse(p.read_bytes + p.write_bytes), p.pid));
        top_io.truncate(top);
        let mut top_cpu: Vec<ProcessTotal> = procs.into_iter().filter(|p| p.cpu_s > 0.0).collect();
        top_cpu.sort_by(|a, b| b.cpu_s.total_cmp(&a.cpu_s).then(a.pid.cmp(&b.pid)));
        top_cpu.truncate(top);
        let mut services: Vec<ServiceTotal> = self.services.into_values().collect();
        services.sort_by_key(|s| std::cmp::Reverse(s.read_bytes + s.write_bytes));
        services.truncate(top);
        for span in &mut spans {
            span.culprits.sort_by(|a, b| {
                b.intervals
                    .cmp(&a.intervals)
                    .then(b.peak_share_pct.total_cmp(&a.peak_share_pct))
            });
        }
        let mut networks: Vec<NetTotal> = self.nets.into_values().collect();
        networks.sort_by_key(|n| (std::cmp::Reverse(n.rx_bytes + n.tx_bytes), n.name.clone()));
        Summary {
            schema: SCHEMA,
            tool_version: env!("CARGO_PKG_VERSION"),
            from_unix_s: from,
            to_unix_s: to,
            intervals: self.intervals,
            covered_s: self.covered_s,
            gaps,
            findings: spans,
            disks,
            device_write_bytes: self.device_write_bytes,
            process_write_bytes: self.process_write_bytes,
            top_io,
            top_cpu,
            services,
            peaks: self.peaks,
            networks,
            exit_overruns: self.exit_overruns,
        }
    }
}

/// Counts `c` as named once more in a span.
fn name(named: &mut Vec<NamedTotal>, c: &Named) {
    match named
        .iter_mut()
        .find(|n| n.comm == c.comm && n.unit == c.unit)
    {
        Some(n) => {
            n.intervals += 1;
            n.peak_share_pct = n.peak_share_pct.max(c.share_pct);
        }
        None => named.push(NamedTotal {
            comm: c.comm.clone(),
            unit: c.unit.clone(),
            intervals: 1,
            peak_share_pct: c.share_pct,
        }),
    }
}

/// Keeps the higher (or, with `lowest`, the lower) of the peak so far and `new`.
fn raise(slot: &mut Option<Peak>, new: Peak, lowest: bool) {
    let better = slot.is_none_or(|old| {
        if lowest {
            new.value < old.value
        } else {
            new.value > old.value
        }
    });
    if better && new.value.is_finite() {
        *slot = Some(new);
    }
}
