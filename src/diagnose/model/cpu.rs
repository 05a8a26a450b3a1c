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
