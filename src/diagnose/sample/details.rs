//! Facts about the few processes that did something since the previous sample, read so a
//! verdict can name them: their cgroups (cached for the life of the process), the block
//! devices of the files they have open (only when they did storage I/O), and their swap use
//! (only while the machine uses swap). Reading these for every process each second would
//! cost more than the rest of the scan.

use std::collections::{HashMap, HashSet};

use crate::kernel::SysRoot;
use crate::kernel::process::ProcessScan;
use crate::kernel::procinfo::{self, OpenDevice, ProcessCgroups};
use crate::kernel::taskstats::ExitedTask;

/// Descriptors looked at per process; past it, the process's devices are what was seen.
const FD_LIMIT: usize = 4096;

/// What is known about one active process.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProcessDetail {
    /// Its cgroups; `None` when /proc/PID/cgroup could not be read.
    pub cgroups: Option<ProcessCgroups>,
    /// Block devices its open files are on; read only when it did storage I/O.
    pub open_devices: Vec<OpenDevice>,
    /// VmSwap in bytes, read only while the machine has swap in use.
    pub swap_bytes: Option<u64>,
}

/// What the sampler remembers between samples: each process's last counters (to tell who
/// did something) and its cgroups.
#[derive(Debug, Default)]
pub struct Cache {
    /// pid → (start time, CPU ticks, I/O bytes, major faults, RSS pages).
    last: HashMap<u32, (u64, u64, u64, u64, u64)>,
    cgroups: HashMap<(u32, u64), Option<ProcessCgroups>>,
}

impl Cache {
    /// Details of the processes in `scan` that used CPU, did storage I/O, faulted or
    /// changed size since the previous call (none on the first call), and of `parents`, the
    /// live parents of processes that exited between samples: such a child was never read,
    /// and it started in its parent's cgroup, so the parent's names its unit (a shell loop
    /// that only waits for its `dd`s does nothing itself).
    pub fn refresh(
        &mut self,
        root: &SysRoot,
        scan: &ProcessScan,
        swap_used: bool,
        parents: &HashSet<u32>,
    ) -> HashMap<u32, ProcessDetail> {
        let first = self.last.is_empty();
        let mut out = HashMap::new();
        let mut last = HashMap::with_capacity(scan.processes.len());
        for p in &scan.processes {
            let io =
                p.io.map_or(0, |i| i.read_bytes.saturating_add(i.write_bytes));
            let now = (
                p.start_ticks,
                p.utime + p.stime,
                io,
                p.major_faults,
                p.rss_pages,
            );
            last.insert(p.pid, now);
            if first {
                continue;
            }
            let before = self.last.get(&p.pid).filter(|b| b.0 == p.start_ticks);
            // A process born in the interval counts from zero.
            let (cpu0, io0, flt0, rss0) = before.map_or((0, 0, 0, 0), |b| (b.1, b.2, b.3, b.4));
            let did_io = io > io0;
            let active = did_io || now.1 > cpu0 || now.3 > flt0 || now.4 != rss0;
            // A process born in the interval did something: it started. One that lived for
            // milliseconds (a shell loop's `dd`) may be caught exiting, or as a zombie not yet
            // reaped, with no tick, no memory and no readable I/O, yet the tracer counted its
            // writes: its unit is read as a live process's (once: cached per process).
            let born = before.is_none();
            let zombie = p.state == 'Z';
            if !active && !born && !zombie && !parents.contains(&p.pid) {
                continue;
            }
            let cgroups = self
                .cgroups
                .entry((p.pid, p.start_ticks))
                .or_insert_with(|| procinfo::read_cgroups(root, p.pid))
                .clone();
            out.insert(
                p.pid,
                ProcessDetail {
                    cgroups,
                    open_devices: if did_io {
                        procinfo::read_open_devices(root, p.pid, FD_LIMIT)
                    } else {
                        Vec::new()
                    },
                    swap_bytes: swap_used
                        .then(|| procinfo::read_swap_bytes(root, p.pid))
                        .flatten(),
                },
            );
        }
        // One gone before its cgroups were read (a `dd` of a few milliseconds, read at the end
        // of the sample) started in its parent's cgroup: the parent's names its unit.
        for p in &scan.processes {
            let orphan = out.get(&p.pid).is_some_and(|d| d.cgroups.is_none());
            let Some(&(start, ..)) = last.get(&p.ppid).filter(|_| orphan && p.ppid != 0) else {
                continue;
            };
            let parent = self
                .cgroups
                .entry((p.ppid, start))
                .or_insert_with(|| procinfo::read_cgroups(root, p.ppid))
                .clone();
            if let Some(d) = out.get_mut(&p.pid) {
                d.cgroups = parent;
            }
        }
        self.cgroups
            .retain(|(pid, start), _| last.get(pid).is_some_and(|l| l.0 == *start));
        self.last = last;
        out
    }
}

/// Sums the exit records of each process's threads into one record per process, in the
/// order the processes first appear (an exit storm brings thousands a second: one pass).
pub fn by_process(tasks: Vec<ExitedTask>) -> Vec<ExitedTask> {
    let mut out: Vec<ExitedTask> = Vec::new();
    let mut at: HashMap<u32, usize> = HashMap::new();
    for t in tasks {
        match at.get(&t.tgid) {
            Some(&i) => {
                let o = &mut out[i];
                o.utime_us += t.utime_us;
                o.stime_us += t.stime_us;
                o.major_faults += t.major_faults;
                o.read_bytes += t.read_bytes;
                o.write_bytes += t.write_bytes;
                o.cancelled_write_bytes += t.cancelled_write_bytes;
                // The group leader's record names the process.
                if t.tid == t.tgid {
                    o.comm = t.comm;
                    o.ppid = t.ppid;
                }
            }
            None => {
                at.insert(t.tgid, out.len());
                out.push(ExitedTask { tid: t.tgid, ..t });
            }
        }
    }
    out
}
