//! CPU and memory verdicts.

use super::{Code, Finding, Severity};
use crate::diagnose::model::TopSample;
use crate::diagnose::model::culprits::Culprit;
use crate::diagnose::model::waiters::{IoWaiter, WaitsOn};
use crate::text::exact;
use crate::units::format_bytes_approx as format_bytes;

/// System time worth a look: above user time and at least this share of all CPU time.
const SYSTEM_PCT: f64 = 20.0;
/// softirq on one CPU: at least this share of that CPU…
const SOFTIRQ_PCT: f64 = 20.0;
/// …and this many times the other CPUs' average.
const SOFTIRQ_FACTOR: f64 = 3.0;
/// Steal time at which the hypervisor visibly takes this VM's CPU.
const STEAL_PCT: f64 = 10.0;
/// iowait worth explaining when no disk is busy.
const IOWAIT_PCT: f64 = 20.0;
/// Share of the interval with a task stalled on I/O (PSI io `some`) worth explaining: unlike
/// %iowait, it does not vanish when the CPUs are busy with other work.
const IO_STALL_PCT: f64 = 20.0;
/// Blocked threads named in a verdict; the rest are counted.
const WAITERS_NAMED: usize = 3;
/// Busy share from which the CPUs are saturated (when the run queue is longer than CPUs).
const BUSY_PCT: f64 = 95.0;
/// PSI memory `some` (avg10) from which tasks are visibly held up waiting for memory.
const PSI_MEMORY_SOME_PCT: f64 = 10.0;
/// MemAvailable below this share of MemTotal leaves little before reclaim and OOM.
const AVAILABLE_LOW_PCT: f64 = 5.0;
/// Swap traffic (in + out) worth reporting.
const SWAP_BYTES_PER_S: f64 = 1024.0 * 1024.0;

/// Names the culprits after the message (`…: burn (pid 5) 97% (96% user, 1% system)`) and
/// attaches them.
fn blame(mut f: Finding, culprits: &[Culprit], what: impl Fn(&Culprit) -> String) -> Finding {
    if !culprits.is_empty() {
        let named: Vec<String> = culprits
            .iter()
            .map(|c| format!("{} {}", c.who(), what(c)))
            .collect();
        f.message = format!("{}: {}", f.message, named.join(", "));
        f.culprits = culprits.to_vec();
    }
    f
}

fn cpu_split(c: &Culprit) -> String {
    format!(
        "{:.0}% CPU ({:.0}% user, {:.0}% system)",
        c.user_pct.unwrap_or(0.0) + c.system_pct.unwrap_or(0.0),
        c.user_pct.unwrap_or(0.0),
        c.system_pct.unwrap_or(0.0)
    )
}

fn memory_use(c: &Culprit) -> String {
    let mut parts = Vec::new();
    if let Some(g) = c.rss_growth_bytes.filter(|&g| g > 0) {
        parts.push(format!("grew {}", format_bytes(g as u64)));
    }
    if let Some(f) = c.major_faults_per_s.filter(|&f| f > 0.0) {
        parts.push(format!("{f:.0} major faults/s"));
    }
    if let Some(s) = c.swap_bytes.filter(|&s| s > 0) {
        parts.push(format!("{} swapped", format_bytes(s)));
    }
    parts.join(", ")
}

pub fn cpu(s: &TopSample, out: &mut Vec<Finding>) {
    let c = &s.cpu.all;
    let compaction = s.vm_events.get("compact_stall").copied().unwrap_or(0);
    let thp = s.vm_events.get("thp_fault_alloc").copied().unwrap_or(0);
    if c.system_pct > c.user_pct && c.system_pct >= SYSTEM_PCT {
        let hint = if compaction > 0 {
            format!(
                "; {compaction} compaction stalls and {thp} THP faults point at transparent huge pages (try transparent_hugepage=madvise)"
            )
        } else {
            "; `sudo tacho profile` names the kernel functions taking it".into()
        };
        out.push(blame(
            Finding::warning(
                Code::CpuSystemHigh,
                "cpu",
                format!(
                    "system time {:.0}% is above user time {:.0}%{hint}; spent by",
                    c.system_pct, c.user_pct
                ),
            ),
            &s.culprits.system,
            cpu_split,
        ));
    }
    if s.cpu.per_cpu.len() >= 2 {
        let hottest = s
            .cpu
            .per_cpu
            .iter()
            .max_by(|a, b| a.split.softirq_pct.total_cmp(&b.split.softirq_pct));
        if let Some(h) = hottest {
            let others: Vec<f64> = s
                .cpu
                .per_cpu
                .iter()
                .filter(|p| p.cpu != h.cpu)
                .map(|p| p.split.softirq_pct)
                .collect();
            let mean = others.iter().sum::<f64>() / others.len() as f64;
            if h.split.softirq_pct >= SOFTIRQ_PCT && h.split.softirq_pct >= SOFTIRQ_FACTOR * mean {
                out.push(Finding::warning(
                    Code::SoftirqOneCpu,
                    format!("cpu{}", h.cpu),
                    format!(
                        "cpu{} spends {:.0}% in softirq, the other CPUs {mean:.0}% on average: interrupt work lands on one CPU (check irqbalance, RPS/RSS)",
                        h.cpu, h.split.softirq_pct
                    ),
                ));
            }
        }
    }
    if c.steal_pct >= STEAL_PCT {
        out.push(Finding::warning(
            Code::CpuSteal,
            "cpu",
            format!(
                "steal {:.0}%: the hypervisor gives this VM's CPU time to other guests",
                c.steal_pct
            ),
        ));
    }
    let disks_idle = s
        .disks
        .iter()
        .all(|d| d.util_pct.unwrap_or(0.0) < 20.0 && d.aqu_sz.unwrap_or(0.0) < 1.0);
    let stalled = s
        .psi
        .io
        .as_ref()
        .and_then(|p| p.some.stall_pct)
        .unwrap_or(0.0);
    if c.iowait_pct >= IOWAIT_PCT && disks_idle {
        let message = if s.io_waiters.is_empty() {
            format!(
                "iowait {:.0}% while no local disk is busy: tasks wait on network storage (NFS, iSCSI) or the CPUs are simply idle",
                c.iowait_pct
            )
        } else {
            format!(
                "iowait {:.0}% while no local disk is busy: {}; {}",
                c.iowait_pct,
                waiters_text(&s.io_waiters),
                if s.io_waiters.iter().any(|w| w.waits_on == WaitsOn::Disk) {
                    "disks idle"
                } else {
                    "disks idle — not a storage problem"
                }
            )
        };
        out.push(Finding {
            code: Code::IowaitIdleDisks,
            severity: Severity::Info,
            subject: "cpu".into(),
            message,
            culprits: Vec::new(),
        });
    } else if (c.iowait_pct >= IOWAIT_PCT || stalled >= IO_STALL_PCT) && !s.io_waiters.is_empty() {
        let no_disk = !s.io_waiters.iter().any(|w| w.waits_on == WaitsOn::Disk);
        out.push(Finding {
            code: Code::IowaitTasks,
            severity: Severity::Info,
            subject: "cpu".into(),
            message: format!(
                "iowait {:.0}%, a task stalled on I/O {stalled:.0}% of the interval: {}{}",
                c.iowait_pct,
                waiters_text(&s.io_waiters),
                if no_disk {
                    "; none waits on a disk — not a storage problem"
                } else {
                    ""
                }
            ),
            culprits: Vec::new(),
        });
    }
    if c.busy_pct() >= BUSY_PCT && s.load.runnable as usize > s.load.cpus.max(1) {
        out.push(blame(
            Finding::warning(
                Code::CpuSaturated,
                "cpu",
                format!(
                    "CPUs saturated: {:.0}% busy, {} runnable threads on {} CPUs",
                    c.busy_pct(),
                    s.load.runnable,
                    s.load.cpus
                ),
            ),
            &s.culprits.cpu,
            cpu_split,
        ));
    }
}

/// `2 threads in D state: app (pid 77, thread io_wq 78) waiting on io_uring in io_cqring_wait, …`
fn waiters_text(waiters: &[IoWaiter]) -> String {
    let named: Vec<String> = waiters
        .iter()
        .take(WAITERS_NAMED)
        .map(|w| {
            let comm = exact(&w.comm, w.comm_hex.as_deref());
            let thread = exact(&w.thread, w.thread_hex.as_deref());
            let who = if w.tid == w.pid {
                format!("{comm} (pid {})", w.pid)
            } else {
                format!("{comm} (pid {}, thread {thread} {})", w.pid, w.tid)
            };
            let on = match w.waits_on {
                WaitsOn::Disk => " waiting on a disk",
                WaitsOn::IoUring => " waiting on io_uring",
                WaitsOn::Nfs => " waiting on NFS",
                WaitsOn::Fuse => " waiting on a FUSE server",
                WaitsOn::Other => " waiting",
            };
            match &w.in_function {
                Some(f) => format!("{who}{on} in {}", exact(f, None)),
                None => format!("{who}{on}"),
            }
        })
        .collect();
    let more = waiters.len().saturating_sub(WAITERS_NAMED);
    let tail = if more > 0 {
        format!(", and {more} more")
    } else {
        String::new()
    };
    let n = waiters.len();
    format!(
        "{n} thread{} in D state: {}{tail}",
        if n == 1 { "" } else { "s" },
        named.join(", ")
    )
}

pub fn memory(s: &TopSample, out: &mut Vec<Finding>) {
    let mut found = Vec::new();
    memory_findings(s, &mut found);
    out.extend(
        found
            .into_iter()
            .map(|f| blame(f, &s.culprits.memory, memory_use)),
    );
}

fn memory_findings(s: &TopSample, out: &mut Vec<Finding>) {
    let m = &s.memory;
    if let Some(p) = &s.psi.memory
        && p.some.avg10_pct >= PSI_MEMORY_SOME_PCT
    {
        out.push(Finding::warning(
            Code::MemoryPressure,
            "memory",
            format!(
                "memory pressure: tasks waited for memory {:.0}% of the last 10 s ({} available)",
                p.some.avg10_pct,
                format_bytes(m.available_bytes)
            ),
        ));
    } else if m.total_bytes > 0
        && (m.available_bytes as f64) < m.total_bytes as f64 * AVAILABLE_LOW_PCT / 100.0
    {
        out.push(Finding::warning(
            Code::MemoryLow,
            "memory",
            format!(
                "only {} of {} memory available",
                format_bytes(m.available_bytes),
                format_bytes(m.total_bytes)
            ),
        ));
    }
    let swap_in = m.swap_in_bytes_per_s.unwrap_or(0.0);
    let swap_out = m.swap_out_bytes_per_s.unwrap_or(0.0);
    if swap_in + swap_out >= SWAP_BYTES_PER_S {
        out.push(Finding::warning(
            Code::Swapping,
            "memory",
            format!(
                "swapping: {}/s in, {}/s out",
                format_bytes(swap_in as u64),
                format_bytes(swap_out as u64)
            ),
        ));
    }
    let stalls = s.vm_events.get("compact_stall").copied().unwrap_or(0);
    if stalls > 0 {
        out.push(Finding::warning(
            Code::CompactionStalls,
            "memory",
            format!(
                "{stalls} direct compaction stalls: allocations (often transparent huge pages) waited while memory was defragmented; THP defrag=defer or madvise avoids it"
            ),
        ));
    }
}

/// The verdict when nothing stands out: the headline figures.
pub fn all_clear(s: &TopSample) -> String {
    let busiest = s
        .disks
        .iter()
        .filter(|d| !d.device.name.starts_with("zram"))
        .max_by(|a, b| {
            a.util_pct
                .unwrap_or(0.0)
                .total_cmp(&b.util_pct.unwrap_or(0.0))
        });
    let disk = busiest
        .map(|d| {
            format!(
                ", busiest disk {} {:.0}% util",
                d.device.name,
                d.util_pct.unwrap_or(0.0)
            )
        })
        .unwrap_or_default();
    format!(
        "OK: nothing stands out (CPU {:.0}% busy{disk}, {} available)",
        s.cpu.all.busy_pct(),
        format_bytes(s.memory.available_bytes)
    )
}
