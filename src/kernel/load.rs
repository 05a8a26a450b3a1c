//! What a load generator watches: the machine's CPU time split (/proc/stat), transparent
//! huge page and compaction counters (/proc/vmstat), and available memory (/proc/meminfo).
//!
//! Samples hold raw cumulative counters; rates come from two samples, and a counter that went
//! backwards gives no value rather than an underflow.

use super::{KernelError, Result, SysRoot, read_text};
use procfs_core::{ExplicitSystemInfo, FromBufRead, FromBufReadSI, KernelStats, VmStat};
use serde::Serialize;
use std::path::Path;

/// Cumulative CPU ticks of all CPUs together (the `cpu` line of /proc/stat).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTicks {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuTicks {
    /// Ticks not spent idle or waiting for I/O.
    pub fn busy(&self) -> u64 {
        self.user + self.nice + self.system + self.irq + self.softirq + self.steal
    }

    fn total(&self) -> u64 {
        self.busy() + self.idle + self.iowait
    }
}

pub fn read_cpu_ticks(root: &SysRoot) -> Result<CpuTicks> {
    let path = root.proc.join("stat");
    parse_cpu_ticks(&read_text(&path)?, &path)
}

pub fn parse_cpu_ticks(text: &str, path: &Path) -> Result<CpuTicks> {
    // Ticks per second only matter for procfs-core's conversions, which are not used here.
    let info = ExplicitSystemInfo {
        boot_time_secs: 0,
        ticks_per_second: 100,
        page_size: 4096,
        is_little_endian: cfg!(target_endian = "little"),
    };
    let stats = KernelStats::from_buf_read(text.as_bytes(), &info)
        .map_err(|e| KernelError::parse(path, None, e.to_string()))?;
    let t = stats.total;
    Ok(CpuTicks {
        user: t.user,
        nice: t.nice,
        system: t.system,
        idle: t.idle,
        iowait: t.iowait.unwrap_or(0),
        irq: t.irq.unwrap_or(0),
        softirq: t.softirq.unwrap_or(0),
        steal: t.steal.unwrap_or(0),
    })
}

/// The CPU split between two samples, in percent of all CPUs' time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CpuSplit {
    pub user_pct: f64,
    pub system_pct: f64,
    pub iowait_pct: f64,
    pub idle_pct: f64,
    /// irq, softirq and steal together.
    pub other_pct: f64,
}

/// `None` when no tick passed or a counter went backwards (CPU hot-unplug resets them).
pub fn cpu_split(before: &CpuTicks, after: &CpuTicks) -> Option<CpuSplit> {
    let d = |a: u64, b: u64| b.checked_sub(a);
    let user = d(before.user + before.nice, after.user + after.nice)?;
    let system = d(before.system, after.system)?;
    let iowait = d(before.iowait, after.iowait)?;
    let idle = d(before.idle, after.idle)?;
    let total = d(before.total(), after.total())?;
    if total == 0 {
        return None;
    }
    let pct = |v: u64| v as f64 * 100.0 / total as f64;
    let other = total.saturating_sub(user + system + iowait + idle);
    Some(CpuSplit {
        user_pct: pct(user),
        system_pct: pct(system),
        iowait_pct: pct(iowait),
        idle_pct: pct(idle),
        other_pct: pct(other),
    })
}

/// /proc/vmstat counters that show transparent huge pages and compaction at work: the
/// system-time cost of THP that `tacho stress --vm` is meant to expose.
pub const VMSTAT_KEYS: [&str; 7] = [
    "thp_fault_alloc",
    "thp_fault_fallback",
    "thp_collapse_alloc",
    "compact_stall",
    "compact_success",
    "compact_fail",
    "pgmajfault",
];

/// Values of [`VMSTAT_KEYS`] in that order; a counter this kernel lacks is `None`.
pub type VmCounters = [Option<u64>; VMSTAT_KEYS.len()];

pub fn read_vm_counters(root: &SysRoot) -> Result<VmCounters> {
    let path = root.proc.join("vmstat");
    parse_vm_counters(&read_text(&path)?, &path)
}

pub fn parse_vm_counters(text: &str, path: &Path) -> Result<VmCounters> {
    let stat = VmStat::from_buf_read(text.as_bytes())
        .map_err(|e| KernelError::parse(path, None, e.to_string()))?;
    Ok(VMSTAT_KEYS.map(|k| stat.0.get(k).and_then(|&v| u64::try_from(v).ok())))
}

/// `MemAvailable` in bytes.
pub fn read_mem_available(root: &SysRoot) -> Result<u64> {
    let path = root.proc.join("meminfo");
    parse_mem_available(&read_text(&path)?, &path)
}

/// Hand-parsed: procfs-core's `Meminfo` insists on a dozen other fields and multiplies
/// without overflow checks.
pub fn parse_mem_available(text: &str, path: &Path) -> Result<u64> {
    let (number, line) = text
        .lines()
        .enumerate()
        .find_map(|(i, l)| l.strip_prefix("MemAvailable:").map(|rest| (i + 1, rest)))
        .ok_or_else(|| {
            KernelError::parse(
                path,
                None,
                "no MemAvailable line (kernels before 3.14 lack it)",
            )
        })?;
    let bad = || {
        KernelError::parse(
            path,
            Some(number),
            format!("expected 'N kB', found {line:?}"),
        )
    };
    let mut words = line.split_whitespace();
    let kib: u64 = words.next().and_then(|n| n.parse().ok()).ok_or_else(bad)?;
    if words.next() != Some("kB") {
        return Err(bad());
    }
    kib.checked_mul(1024).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const STAT: &str = "cpu  100 5 50 800 20 3 2 1 0 0\n\
        cpu0 50 2 25 400 10 1 1 0 0 0\n\
        cpu1 50 3 25 400 10 2 1 1 0 0\n\
        intr 0\nctxt 1000\nbtime 1700000000\nprocesses 500\n\
        procs_running 2\nprocs_blocked 0\nsoftirq 0\n";

    #[test]
    fn cpu_line_and_split() {
        let p = Path::new("/proc/stat");
        let a = parse_cpu_ticks(STAT, p).unwrap();
        assert_eq!(a.user, 100);
        assert_eq!(a.busy(), 100 + 5 + 50 + 3 + 2 + 1);
        let b = CpuTicks {
            user: 150,
            system: 70,
            iowait: 30,
            idle: 820,
            ..a
        };
        // 50 user + 20 system + 10 iowait + 20 idle = 100 ticks.
        let s = cpu_split(&a, &b).unwrap();
        assert_eq!(
            (
                s.user_pct,
                s.system_pct,
                s.iowait_pct,
                s.idle_pct,
                s.other_pct
            ),
            (50.0, 20.0, 10.0, 20.0, 0.0)
        );
        assert_eq!(cpu_split(&b, &a), None);
        assert_eq!(cpu_split(&a, &a), None);
        let err = parse_cpu_ticks("garbage\n", p).unwrap_err().to_string();
        assert!(err.contains("/proc/stat"), "{err}");
    }

    #[test]
    fn vm_counters_and_mem_available() {
        let p = Path::new("/proc/vmstat");
        let c =
            parse_vm_counters("nr_free_pages 10\nthp_fault_alloc 7\ncompact_stall 2\n", p).unwrap();
        assert_eq!(c[0], Some(7));
        assert_eq!(c[1], None);
        assert_eq!(c[3], Some(2));
        assert!(parse_vm_counters("thp_fault_alloc x\n", p).is_err());
        let m = Path::new("/proc/meminfo");
        let text = "MemTotal: 1000 kB\nMemFree: 500 kB\nMemAvailable: 800 kB\n";
        assert_eq!(parse_mem_available(text, m).unwrap(), 800 * 1024);
        let err = parse_mem_available("MemTotal: 1000 kB\nMemFree: 5 kB\n", m);
        assert!(err.is_err());
    }

    proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC{0,200}") {
            let p = Path::new("/x");
            let _ = parse_cpu_ticks(&s, p);
            let _ = parse_vm_counters(&s, p);
            let _ = parse_mem_available(&s, p);
        }
    }
}
