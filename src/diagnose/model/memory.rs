//! Memory as procps-ng's `free` (4.0.1 and later) computes it, what `used` is made of, and
//! the interval's THP, compaction, swap and reclaim events from /proc/vmstat.
//!
//! free (library/meminfo.c): available = MemAvailable (MemFree when the kernel lacks it or
//! reports more than MemTotal, as inside some containers); used = total − available (or
//! total − free if that would be negative); cache = Cached + SReclaimable; shared = Shmem;
//! buffers = Buffers; swap used = SwapTotal − SwapFree.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::kernel::meminfo::{Meminfo, VmStat};

/// Memory as `free` shows it, plus what `used` is made of and the interval's swap traffic; bytes
/// throughout.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Memory {
    /// MemTotal.
    pub total_bytes: u64,
    /// total − available (or total − free if that would be negative), as `free` computes it.
    pub used_bytes: u64,
    /// MemFree: unused memory.
    pub free_bytes: u64,
    /// Shmem.
    pub shared_bytes: u64,
    /// Buffers.
    pub buffers_bytes: u64,
    /// Cached + SReclaimable.
    pub cache_bytes: u64,
    /// MemAvailable (MemFree when the kernel lacks it or reports more than MemTotal).
    pub available_bytes: u64,
    /// SwapTotal.
    pub swap_total_bytes: u64,
    /// SwapTotal − SwapFree.
    pub swap_used_bytes: u64,
    /// SwapFree.
    pub swap_free_bytes: u64,
    /// What `used` is made of.
    pub used_parts: UsedParts,
    /// Page cache waiting to be written (Dirty).
    pub dirty_bytes: u64,
    /// Page cache being written now (Writeback).
    pub writeback_bytes: u64,
    /// Anonymous memory in transparent huge pages (AnonHugePages).
    pub anon_huge_bytes: u64,
    /// Pages swapped in and out per second, in bytes.
    pub swap_in_bytes_per_s: Option<f64>,
    /// Bytes swapped out per second (`pswpout` pages); `None` when /proc/vmstat gave no such
    /// figure.
    pub swap_out_bytes_per_s: Option<f64>,
}

/// The parts of `used` the kernel reports. They need not add up: `other_bytes` is the rest,
/// mostly the share of page cache and reclaimable slab that MemAvailable holds back (half of
/// it, up to the low watermark), plus vmalloc, per-CPU and driver memory; it can be negative.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsedParts {
    /// Anonymous process memory (AnonPages).
    pub anon_bytes: u64,
    /// tmpfs, shared memory and shared anonymous mappings (Shmem).
    pub shmem_bytes: u64,
    /// Kernel slab that cannot be reclaimed (SUnreclaim).
    pub slab_unreclaimable_bytes: u64,
    /// Page tables (PageTables + SecPageTables).
    pub page_tables_bytes: u64,
    /// Kernel stacks (KernelStack).
    pub kernel_stack_bytes: u64,
    /// The hugetlbfs pool (HugePages_Total × Hugepagesize, or Hugetlb where printed).
    pub hugetlb_bytes: u64,
    /// The rest of `used` (see above); negative when the parts add up to more.
    pub other_bytes: i64,
}

/// The `free` figures of one /proc/meminfo reading. A field the kernel lacks counts as 0,
/// as free does.
pub fn memory_of(m: &Meminfo) -> Memory {
    let f = |k: &str| m.get(k).unwrap_or(0);
    let total = f("MemTotal");
    let free = f("MemFree");
    let mut available = m.get("MemAvailable").filter(|&a| a != 0).unwrap_or(free);
    if available > total {
        available = free;
    }
    let used = total
        .checked_sub(available)
        .unwrap_or(total.saturating_sub(free));
    let hugetlb = m
        .get("Hugetlb")
        .unwrap_or_else(|| f("HugePages_Total").saturating_mul(f("Hugepagesize")));
    let parts = [
        f("AnonPages"),
        f("Shmem"),
        f("SUnreclaim"),
        f("PageTables").saturating_add(f("SecPageTables")),
        f("KernelStack"),
        hugetlb,
    ];
    // Saturating: a replayed history's figures are whatever its file says.
    let listed = parts.iter().fold(0u64, |a, &b| a.saturating_add(b));
    Memory {
        total_bytes: total,
        used_bytes: used,
        free_bytes: free,
        shared_bytes: f("Shmem"),
        buffers_bytes: f("Buffers"),
        cache_bytes: f("Cached").saturating_add(f("SReclaimable")),
        available_bytes: available,
        swap_total_bytes: f("SwapTotal"),
        swap_used_bytes: f("SwapTotal").saturating_sub(f("SwapFree")),
        swap_free_bytes: f("SwapFree"),
        used_parts: UsedParts {
            anon_bytes: parts[0],
            shmem_bytes: parts[1],
            slab_unreclaimable_bytes: parts[2],
            page_tables_bytes: parts[3],
            kernel_stack_bytes: parts[4],
            hugetlb_bytes: parts[5],
            other_bytes: used as i64 - listed as i64,
        },
        dirty_bytes: f("Dirty"),
        writeback_bytes: f("Writeback"),
        anon_huge_bytes: f("AnonHugePages"),
        swap_in_bytes_per_s: None,
        swap_out_bytes_per_s: None,
    }
}

/// /proc/vmstat counters whose change over the interval is reported: THP allocation and
/// its failures, compaction (whose stalls cost system time), direct reclaim, swapping,
/// major faults, OOM kills.
pub const VM_EVENTS: &[&str] = &[
    "thp_fault_alloc",
    "thp_fault_fallback",
    "thp_collapse_alloc",
    "thp_collapse_alloc_failed",
    "thp_split_page",
    "compact_stall",
    "compact_fail",
    "compact_success",
    "pgscan_direct",
    "pgsteal_direct",
    "pswpin",
    "pswpout",
    "pgmajfault",
    "oom_kill",
];

/// Each [`VM_EVENTS`] counter's increase over the interval, plus `allocstall` (the sum of
/// the per-zone `allocstall_*` counters, direct reclaim entries). Counters this kernel
/// lacks are absent; one that went backwards is absent too.
pub fn vm_events(a: &VmStat, b: &VmStat) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for key in VM_EVENTS {
        if let (Some(x), Some(y)) = (a.get(key), b.get(key))
            && let Some(d) = y.checked_sub(x)
        {
            out.insert((*key).to_string(), d);
        }
    }
    let stalls = |v: &VmStat| -> Option<u64> {
        let mut it =
            v.0.iter()
                .filter(|(k, _)| k.starts_with("allocstall"))
                .peekable();
        it.peek()?;
        Some(it.fold(0u64, |a, (_, v)| a.saturating_add(*v)))
    };
    if let (Some(x), Some(y)) = (stalls(a), stalls(b))
        && let Some(d) = y.checked_sub(x)
    {
        out.insert("allocstall".into(), d);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::meminfo::{parse_meminfo, parse_vmstat};
    use std::path::Path;

    fn meminfo(text: &str) -> Meminfo {
        parse_meminfo(text, Path::new("m")).unwrap()
    }

    #[test]
    fn free_figures_from_the_real_capture() {
        let text = include_str!("../../../tests/fixtures/top/firecracker/a/proc/meminfo");
        let m = meminfo(text);
        let mem = memory_of(&m);
        let kb = |k: &str| m.get(k).unwrap();
        assert_eq!(mem.total_bytes, kb("MemTotal"));
        assert_eq!(mem.used_bytes, kb("MemTotal") - kb("MemAvailable"));
        assert_eq!(mem.cache_bytes, kb("Cached") + kb("SReclaimable"));
        assert_eq!(mem.shared_bytes, kb("Shmem"));
        let p = &mem.used_parts;
        let listed = p.anon_bytes
            + p.shmem_bytes
            + p.slab_unreclaimable_bytes
            + p.page_tables_bytes
            + p.kernel_stack_bytes
            + p.hugetlb_bytes;
        assert_eq!(listed as i64 + p.other_bytes, mem.used_bytes as i64);
    }

    #[test]
    fn free_fallbacks() {
        // No MemAvailable (kernels before 3.14): available = free.
        let mem = memory_of(&meminfo("MemTotal: 100 kB\nMemFree: 40 kB\n"));
        assert_eq!(
            (mem.available_bytes, mem.used_bytes),
            (40 * 1024, 60 * 1024)
        );
        // A container reporting more available than total: free is used instead.
        let mem = memory_of(&meminfo(
            "MemTotal: 100 kB\nMemFree: 30 kB\nMemAvailable: 500 kB\n",
        ));
        assert_eq!(mem.available_bytes, 30 * 1024);
        let mem = memory_of(&meminfo(
            "MemTotal: 100 kB\nMemFree: 30 kB\nMemAvailable: 50 kB\nHugePages_Total: 2\nHugepagesize: 8 kB\nSwapTotal: 10 kB\nSwapFree: 4 kB\n",
        ));
        assert_eq!(mem.used_parts.hugetlb_bytes, 16 * 1024);
        assert_eq!(mem.swap_used_bytes, 6 * 1024);
    }

    #[test]
    fn vm_event_deltas() {
        let p = Path::new("v");
        let a = parse_vmstat("thp_fault_alloc 5\ncompact_stall 9\nallocstall_normal 1\nallocstall_movable 2\npswpin 7\n", p).unwrap();
        let b = parse_vmstat("thp_fault_alloc 8\ncompact_stall 9\nallocstall_normal 4\nallocstall_movable 2\npswpin 3\n", p).unwrap();
        let e = vm_events(&a, &b);
        assert_eq!(e["thp_fault_alloc"], 3);
        assert_eq!(e["compact_stall"], 0);
        assert_eq!(e["allocstall"], 3);
        assert!(!e.contains_key("pswpin"), "went backwards: no value");
        assert!(!e.contains_key("oom_kill"), "absent on this kernel");
    }
}
