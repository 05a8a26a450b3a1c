//! CPU time split between two /proc/stat samples, as mpstat computes it: user and nice
//! exclude guest time (the kernel counts it in both), and irq and softirq stay separate
//! (iostat folds them into %system).

use serde::Serialize;

/// Engines (the CPU benchmark, stress) split CPU time too: the type lives with the readers.
pub use crate::kernel::cpusplit::CpuSplit;

/// One CPU's split.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PerCpu {
    /// The CPU's number (N of `cpuN`).
    pub cpu: u32,
    /// Its split, flattened into this object.
    #[serde(flatten)]
    pub split: CpuSplit,
}

/// The `cpu` object of a sample: all CPUs together, then each.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cpu {
    /// All CPUs together, flattened into this object.
    #[serde(flatten)]
    pub all: CpuSplit,
    /// Each CPU present in both samples, in /proc/stat order.
    pub per_cpu: Vec<PerCpu>,
}

/// Splits for all CPUs and for each CPU present in both samples.
pub fn cpu_between(
    a: &crate::kernel::stat::KernelStat,
    b: &crate::kernel::stat::KernelStat,
) -> Cpu {
    let per_cpu = b
        .cpus
        .iter()
        .filter_map(|(n, after)| {
            let (_, before) = a.cpus.iter().find(|(m, _)| m == n)?;
            Some(PerCpu {
                cpu: *n,
                split: CpuSplit::between(before, after)?,
            })
        })
        .collect();
    Cpu {
        all: CpuSplit::between(&a.total, &b.total).unwrap_or_default(),
        per_cpu,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_is_taken_out_of_user_and_parts_add_up() {
        let a = CpuTicks::default();
        let b = CpuTicks {
            user: 40,
            nice: 10,
            system: 10,
            irq: 5,
            softirq: 5,
            iowait: 10,
            steal: 5,
            idle: 15,
            guest: 10,
            guest_nice: 0,
        };
        let s = CpuSplit::between(&a, &b).unwrap();
        // 100 ticks: user 30 (40 less 10 guest), guest 10.
        assert_eq!((s.user_pct, s.guest_pct, s.softirq_pct), (30.0, 10.0, 5.0));
        let sum = s.user_pct
            + s.nice_pct
            + s.system_pct
            + s.irq_pct
            + s.softirq_pct
            + s.iowait_pct
            + s.steal_pct
            + s.guest_pct
            + s.idle_pct;
        assert!((sum - 100.0).abs() < 1e-9);
        assert_eq!(s.busy_pct(), 75.0);
        assert_eq!(CpuSplit::between(&b, &b), None);
        // Backwards counters count as 0, never underflow.
        let back = CpuSplit::between(&b, &CpuTicks { idle: 30, ..a }).unwrap();
        assert_eq!(back.idle_pct, 100.0);
    }
}
