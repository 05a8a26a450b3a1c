//! /proc/stat: cumulative CPU time per state (all CPUs and each CPU), context switches, forks,
//! interrupts, and the run queue (`procs_running`, `procs_blocked`).
//!
//! Hand-parsed rather than through procfs-core's `KernelStats` so that a malformed line is an
//! error naming its line number, and so that fixtures need only the lines tacho reads.
//! `tacho stress` and `tacho top` both read the CPU split from here.

use super::Malformed;
use std::path::Path;

use super::{KernelError, Result, SysRoot, read_text};

/// Cumulative time of one CPU (or of all together) in each state, in clock ticks (USER_HZ).
///
/// As the kernel counts them, `user` includes `guest` and `nice` includes `guest_nice`;
/// fields a kernel does not print (very old ones) are 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct CpuTicks {
    /// Normal processes in user mode (guest time included).
    pub user: u64,
    /// Niced processes in user mode (guest_nice time included).
    pub nice: u64,
    /// Kernel mode on behalf of processes (system calls, page faults).
    pub system: u64,
    /// Idle with nothing waiting on I/O.
    pub idle: u64,
    /// Idle while some task waited for I/O (a hint, not a precise figure, per the kernel docs).
    pub iowait: u64,
    /// Servicing hardware interrupts.
    pub irq: u64,
    /// Servicing softirqs.
    pub softirq: u64,
    /// Stolen by the hypervisor for other guests while this one wanted to run.
    pub steal: u64,
    /// Running a virtual CPU of a guest (already counted in `user`).
    pub guest: u64,
    /// Running a niced guest (already counted in `nice`).
    pub guest_nice: u64,
}

/// One reading of /proc/stat.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct KernelStat {
    /// The `cpu` line: all CPUs together.
    pub total: CpuTicks,
    /// The `cpuN` lines, as (N, ticks), in file order (offline CPUs are absent).
    pub cpus: Vec<(u32, CpuTicks)>,
    /// Context switches since boot (`ctxt`).
    pub context_switches: u64,
    /// Processes and threads created since boot (`processes`).
    pub forks: u64,
    /// Interrupts serviced since boot (first number of `intr`).
    pub interrupts: u64,
    /// Threads runnable right now, running or waiting for a CPU (`procs_running`).
    pub procs_running: u64,
    /// Threads blocked on I/O right now (`procs_blocked`).
    pub procs_blocked: u64,
    /// When the machine booted, seconds since the Unix epoch (`btime`); absent from history
    /// records written before it was read.
    #[serde(default)]
    pub boot_time_s: Option<u64>,
}

/// Reads `<proc>/stat`; a malformed line is an error naming its number.
pub fn read_stat(root: &SysRoot) -> Result<KernelStat> {
    let path = root.proc.join("stat");
    parse_stat(&read_text(&path)?, &path)
}

/// Parses the text of /proc/stat; `path` only names the file in errors.
pub fn parse_stat(text: &str, path: &Path) -> Result<KernelStat> {
    let mut stat = KernelStat::default();
    let mut saw_total = false;
    for (i, line) in text.lines().enumerate() {
        let err = |reason: String| KernelError::parse(path, Some(i + 1), reason);
        let mut words = line.split_whitespace();
        let Some(key) = words.next() else { continue };
        let number = |w: Option<&str>| -> std::result::Result<u64, KernelError> {
            w.and_then(|w| w.parse().ok())
                .ok_or_else(|| err(format!("expected a number after {key:?}: {line:?}")))
        };
        match key {
            "cpu" => {
                stat.total = parse_ticks(words).map_err(|m| err(m.0))?;
                saw_total = true;
            }
            "ctxt" => stat.context_switches = number(words.next())?,
            "processes" => stat.forks = number(words.next())?,
            "intr" => stat.interrupts = number(words.next())?,
            "procs_running" => stat.procs_running = number(words.next())?,
            "procs_blocked" => stat.procs_blocked = number(words.next())?,
            "btime" => stat.boot_time_s = Some(number(words.next())?),
            _ => {
                if let Some(n) = key.strip_prefix("cpu") {
                    let n: u32 = n
                        .parse()
                        .map_err(|_| err(format!("unknown CPU line {key:?}")))?;
                    stat.cpus
                        .push((n, parse_ticks(words).map_err(|m| err(m.0))?));
                }
            }
        }
    }
    if !saw_total {
        return Err(KernelError::parse(path, None, "no 'cpu' line"));
    }
    Ok(stat)
}

/// The numbers after `cpu`/`cpuN`: at least user, nice, system and idle (every kernel since
/// 2.4 prints those); later fields default to 0 where a kernel lacks them.
fn parse_ticks<'a>(
    words: impl Iterator<Item = &'a str>,
) -> std::result::Result<CpuTicks, Malformed> {
    let mut v = [0u64; 10];
    let mut n = 0;
    for word in words {
        if n == v.len() {
            return Err(Malformed(format!("more than {} CPU time fields", v.len())));
        }
        v[n] = word
            .parse()
            .map_err(|_| format!("CPU time {word:?} is not a number"))?;
        n += 1;
    }
    if n < 4 {
        return Err(Malformed(format!(
            "expected at least 4 CPU time fields, found {n}"
        )));
    }
    Ok(CpuTicks {
        user: v[0],
        nice: v[1],
        system: v[2],
        idle: v[3],
        iowait: v[4],
        irq: v[5],
        softirq: v[6],
        steal: v[7],
        guest: v[8],
        guest_nice: v[9],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const REAL: &str = include_str!("../../tests/fixtures/top/firecracker/a/proc/stat");

    #[test]
    fn reads_the_real_capture() {
        let s = parse_stat(REAL, Path::new("/proc/stat")).unwrap();
        assert_eq!(s.cpus.len(), 2);
        assert_eq!(s.cpus[1].0, 1);
        let sum = |f: fn(&CpuTicks) -> u64| s.cpus.iter().map(|(_, t)| f(t)).sum::<u64>();
        // The cpu line is the sum of the per-CPU lines, each read a moment apart.
        assert!(sum(|t| t.user).abs_diff(s.total.user) <= 4);
        assert!(sum(|t| t.softirq).abs_diff(s.total.softirq) <= 4);
        assert!(s.context_switches > 0 && s.forks > 0 && s.interrupts > 0);
        assert!(s.procs_running >= 1);
        assert_eq!(s.boot_time_s, Some(1_795_311_114));
    }

    #[test]
    fn old_kernels_and_errors() {
        let p = Path::new("/proc/stat");
        let s = parse_stat("cpu 1 2 3 4\ncpu0 1 2 3 4\nctxt 9\n", p).unwrap();
        assert_eq!((s.total.idle, s.total.steal, s.context_switches), (4, 0, 9));
        assert_eq!(s.boot_time_s, None);
        let err = parse_stat("cpu 1 2 3 4\ncpu0 1 x 3 4\n", p).unwrap_err();
        assert!(err.to_string().contains("/proc/stat line 2"), "{err}");
        let err = parse_stat("cpu 1 2 3\n", p).unwrap_err();
        assert!(err.to_string().contains("line 1"), "{err}");
        assert!(parse_stat("ctxt 5\n", p).is_err());
        assert!(parse_stat("cpu 1 2 3 4\nctxt\n", p).is_err());
        assert!(parse_stat("cpu 1 2 3 4\ncpuX 1 2 3 4\n", p).is_err());
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,300}") {
            let _ = parse_stat(&s, Path::new("/x"));
        }

        #[test]
        fn numeric_cpu_lines_never_panic(v in proptest::collection::vec(any::<u64>(), 0..14)) {
            let line = v.iter().map(u64::to_string).collect::<Vec<_>>().join(" ");
            let _ = parse_stat(&format!("cpu {line}\ncpu0 {line}\n"), Path::new("/x"));
        }
    }
}
