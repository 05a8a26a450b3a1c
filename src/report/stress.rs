//! `tacho stress` for people: what runs, a line per second, and the summary.

use crate::fit::{Col, header_cells, table_line};
use crate::stress::{Plan, Second, StressReport};
use crate::text::Escaped;
use crate::units::{format_bandwidth, format_bytes_approx, format_count, format_size};

/// The opening line: which workers run, with their sizes, and for how long.
pub fn describe(p: &Plan) -> String {
    let mut parts = Vec::new();
    if p.cpu > 0 {
        parts.push(format!("{} cpu at {}%", p.cpu, p.cpu_load_pct));
    }
    if p.vm > 0 {
        parts.push(format!(
            "{} vm × {}{}",
            p.vm,
            format_bytes_approx(p.vm_bytes),
            if p.vm_keep { " (kept)" } else { "" }
        ));
    }
    if p.io > 0 {
        parts.push(format!("{} io (sync)", p.io));
    }
    if p.hdd > 0 {
        parts.push(format!(
            "{} hdd × {} in {}",
            p.hdd,
            format_size(p.hdd_bytes),
            Escaped(&p.hdd_dir.to_string_lossy())
        ));
    }
    format!(
        "stress: {} for {:?} (Ctrl-C stops early and cleans up)",
        parts.join(", "),
        p.timeout
    )
}

/// The per-second columns; on a narrow terminal the THP and compaction counters go first,
/// then the CPU split.
const COLUMNS: [Col; 11] = [
    Col::num("time", 0, 6),
    Col::num("cpu ops/s", 1, 10),
    Col::num("vm touched/s", 1, 12),
    Col::num("syncs/s", 1, 9),
    Col::num("hdd write/s", 1, 12),
    Col::num("user%", 2, 6),
    Col::num("sys%", 2, 6),
    Col::num("iowait%", 2, 7),
    Col::num("thp_alloc", 4, 9),
    Col::num("thp_fall", 4, 8),
    Col::num("compact", 4, 8),
];

/// Column headings of the per-second lines, in the columns that fit in `width`.
pub fn header(width: Option<usize>) -> String {
    table_line(&COLUMNS, &header_cells(&COLUMNS), width)
}

/// One second of the run, aligned under [`header`].
pub fn line(s: &Second, width: Option<usize>) -> String {
    let pct = |f: fn(&crate::diagnose::model::cpu::CpuSplit) -> f64| {
        s.cpu
            .as_ref()
            .map_or("-".into(), |c| format!("{:.1}", f(c)))
    };
    let vm = |k: &str| s.vmstat.get(k).map_or("-".into(), |v| v.to_string());
    let cells = [
        format!("{:.1}s", s.t_s),
        format_count(s.cpu_ops_per_s),
        format_bandwidth(s.vm_touched_bytes_per_s),
        format_count(s.io_syncs_per_s),
        format_bandwidth(s.hdd_written_bytes_per_s),
        pct(|c| c.user_pct),
        pct(|c| c.system_pct),
        pct(|c| c.iowait_pct),
        vm("thp_fault_alloc"),
        vm("thp_fault_fallback"),
        vm("compact_stall"),
    ];
    table_line(&COLUMNS, &cells, width)
}

/// The closing line: done or stopped after how long, the machine's CPU split, the vmstat increases
/// and tacho's peak resident memory.
pub fn summary(r: &StressReport) -> String {
    let cpu = r.cpu.as_ref().map_or("CPU split unknown".into(), |c| {
        format!(
            "machine CPU {:.0}% user, {:.0}% system, {:.0}% iowait",
            c.user_pct, c.system_pct, c.iowait_pct
        )
    });
    let vm: Vec<String> = r.vmstat.iter().map(|(k, v)| format!("{k} +{v}")).collect();
    let rss = r.peak_rss_bytes.map_or(String::new(), |b| {
        format!("; tacho peak RSS {}", format_bytes_approx(b))
    });
    format!(
        "{} after {:.1} s: {cpu}; {}{rss}",
        if r.interrupted { "stopped" } else { "done" },
        r.duration_s,
        if vm.is_empty() {
            "vmstat unreadable".into()
        } else {
            vm.join(", ")
        }
    )
}
