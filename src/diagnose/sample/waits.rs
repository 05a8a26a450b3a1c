//! Who waits on what (`tacho top --waits`): each process's time off the CPU over the interval,
//! by why it waited (the classes of `tacho profile --off-cpu`), with what it waited on most (a
//! TCP peer for the network, a device for the disk), from the off-CPU tracer loaded without
//! stack walks (bpf/offcpu.bpf.c `no_stacks`): the system call, the task state and the
//! descriptor class each wait.
//!
//! The tracer's sums are cumulative per (process, thread, state, call, descriptor); each sample
//! keeps the previous sums and reports the deltas, and forgets (in the kernel too) the threads
//! that are gone, so the kernel's table does not fill over a long run. At most [`MAX_PROCS`]
//! processes are kept per interval (those with the most time stalled on the network, a disk, a
//! lock or memory first, then the most off-CPU time; the rest are counted in `dropped`), each
//! with at most [`MAX_CLASSES`] classes.
// Without the tracer (no `bpf` or no `profile`) only the types a history holds are used.
#![cfg_attr(not(all(feature = "bpf", feature = "profile")), allow(dead_code))]

use serde::{Deserialize, Serialize};

/// Processes kept per interval, at most.
pub const MAX_PROCS: usize = 64;
/// Classes kept per process, at most (the largest).
pub const MAX_CLASSES: usize = 4;
/// A descriptor is looked up (its peer, its device) only for waits of at least this long in
/// the interval: a few links read per interval, not one per thread.
const RESOLVE_MIN_NS: u64 = 10_000_000;

/// Why a process waited, as `tacho profile --off-cpu` classes it; `clients` is a socket
/// accepted on a local listening port (a server waiting for its next request: idle, not
/// stalled), told apart from `network` (a connection this host opened: waiting on replies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitClass {
    /// A futex or kernel lock.
    Lock,
    /// Block I/O: fsync, writeback, a direct read, a file read or write.
    Disk,
    /// A socket this host connected out on: replies from its peer.
    Network,
    /// A socket accepted on a listening port: the next request from a client.
    Clients,
    /// A pipe.
    Pipe,
    /// A sleep the thread asked for.
    Sleep,
    /// A page fault or reclaim.
    Memory,
    /// Runnable, waiting for a CPU.
    Preempted,
    /// poll/epoll on descriptors not known to be sockets.
    Poll,
    /// Anything else.
    Other,
}

impl WaitClass {
    /// The word the verdict and the metrics use.
    pub fn word(self) -> &'static str {
        match self {
            WaitClass::Lock => "lock",
            WaitClass::Disk => "disk",
            WaitClass::Network => "network",
            WaitClass::Clients => "clients",
            WaitClass::Pipe => "pipe",
            WaitClass::Sleep => "sleep",
            WaitClass::Memory => "memory",
            WaitClass::Preempted => "preempted",
            WaitClass::Poll => "poll",
            WaitClass::Other => "other",
        }
    }

    /// Every class, in order.
    #[cfg(test)]
    pub const ALL: [WaitClass; 10] = [
        WaitClass::Lock,
        WaitClass::Disk,
        WaitClass::Network,
        WaitClass::Clients,
        WaitClass::Pipe,
        WaitClass::Sleep,
        WaitClass::Memory,
        WaitClass::Preempted,
        WaitClass::Poll,
        WaitClass::Other,
    ];
}

/// One process's time in one class over the interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassWait {
    /// Why.
    pub class: WaitClass,
    /// Time off the CPU, ns (its threads together).
    pub ns: u64,
    /// Waits (intervals off the CPU) ended or open in the interval.
    pub count: u64,
    /// What it waited on most: `10.0.0.5:3306` (network), `vda` (disk); `None` when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on: Option<String>,
    /// The system call of the largest part ("fsync", "recvfrom"), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
}

/// One process's waits over the interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcWaits {
    /// Process id.
    pub pid: u32,
    /// Its name as the kernel kept it (raw: escape before display).
    pub comm: String,
    /// Threads seen by the tracer in the interval.
    pub threads: u32,
    /// Time by class, largest first, at most [`MAX_CLASSES`].
    pub classes: Vec<ClassWait>,
}

impl ProcWaits {
    /// Off-CPU time of all its classes kept, ns.
    pub fn total_ns(&self) -> u64 {
        self.classes.iter().map(|c| c.ns).sum()
    }

    /// Time in the classes that stall work (network replies, disk, lock, memory), ns.
    pub fn stall_ns(&self) -> u64 {
        self.classes
            .iter()
            .filter(|c| {
                matches!(
                    c.class,
                    WaitClass::Network | WaitClass::Disk | WaitClass::Lock | WaitClass::Memory
                )
            })
            .map(|c| c.ns)
            .sum()
    }
}

/// One interval's waits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WaitScan {
    /// Processes, most off-CPU time first, at most [`MAX_PROCS`].
    pub procs: Vec<ProcWaits>,
    /// Processes that waited but were not kept (past [`MAX_PROCS`]).
    #[serde(default)]
    pub dropped: usize,
    /// Waits the kernel could not count since the start (its table was full).
    #[serde(default)]
    pub lost: u64,
}

/// One (process, thread, state, call, descriptor) sum's growth over the interval, as
/// [`aggregate`] takes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub tgid: u32,
    pub tid: u32,
    pub comm: String,
    pub class: WaitClass,
    pub on: Option<String>,
    pub call: Option<u32>,
    pub ns: u64,
    pub count: u64,
}

/// One class's sums: ns, count, and ns per (target, call).
type ClassAcc = (
    u64,
    u64,
    std::collections::HashMap<(Option<String>, Option<u32>), u64>,
);

/// The parts summed per process and class, bounded as [`WaitScan`] says.
pub fn aggregate(parts: Vec<Part>, lost: u64) -> WaitScan {
    use std::collections::{BTreeMap, HashMap, HashSet};
    struct Acc {
        comm: String,
        tids: HashSet<u32>,
        classes: BTreeMap<WaitClass, ClassAcc>,
    }
    let mut by_pid: HashMap<u32, Acc> = HashMap::new();
    for p in parts {
        let acc = by_pid.entry(p.tgid).or_insert_with(|| Acc {
            comm: p.comm.clone(),
            tids: HashSet::new(),
            classes: BTreeMap::new(),
        });
        if acc.comm.is_empty() {
            acc.comm = p.comm.clone();
        }
        acc.tids.insert(p.tid);
        let c = acc.classes.entry(p.class).or_default();
        c.0 += p.ns;
        c.1 += p.count;
        *c.2.entry((p.on, p.call)).or_default() += p.ns;
    }
    let mut procs: Vec<ProcWaits> = by_pid
        .into_iter()
        .map(|(pid, acc)| {
            let mut classes: Vec<ClassWait> = acc
                .classes
                .into_iter()
                .filter(|(_, (ns, _, _))| *ns > 0)
                .map(|(class, (ns, count, targets))| {
                    // The named target with the most time (else the largest call's).
                    let mut targets: Vec<_> = targets.into_iter().collect();
                    targets.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
                    let call = targets.first().and_then(|t| t.0.1).map(syscall_name);
                    let on = targets.iter().find_map(|t| t.0.0.clone());
                    ClassWait {
                        class,
                        ns,
                        count,
                        on,
                        call: call.map(str::to_string),
                    }
                })
                .collect();
            classes.sort_by(|x, y| y.ns.cmp(&x.ns).then(x.class.cmp(&y.class)));
            classes.truncate(MAX_CLASSES);
            ProcWaits {
                pid,
                comm: acc.comm,
                threads: u32::try_from(acc.tids.len()).unwrap_or(u32::MAX),
                classes,
            }
        })
        .filter(|p| !p.classes.is_empty())
        .collect();
    // The waits that stall work first (a busy machine has many more idle sleepers than
    // MAX_PROCS), then all time off the CPU.
    procs.sort_by(|x, y| {
        y.stall_ns()
            .cmp(&x.stall_ns())
            .then(y.total_ns().cmp(&x.total_ns()))
            .then(x.pid.cmp(&y.pid))
    });
    let dropped = procs.len().saturating_sub(MAX_PROCS);
    procs.truncate(MAX_PROCS);
    WaitScan {
        procs,
        dropped,
        lost,
    }
}

/// The x86-64 name of the system calls a verdict may name; `?` for the rest.
pub fn syscall_name(nr: u32) -> &'static str {
    match nr {
        0 => "read",
        1 => "write",
        7 => "poll",
        17 => "pread64",
        18 => "pwrite64",
        19 => "readv",
        20 => "writev",
        23 => "select",
        35 => "nanosleep",
        42 => "connect",
        43 => "accept",
        44 => "sendto",
        45 => "recvfrom",
        46 => "sendmsg",
        47 => "recvmsg",
        74 => "fsync",
        75 => "fdatasync",
        162 => "sync",
        202 => "futex",
        230 => "clock_nanosleep",
        232 => "epoll_wait",
        270 => "pselect6",
        271 => "ppoll",
        277 => "sync_file_range",
        281 => "epoll_pwait",
        288 => "accept4",
        295 => "preadv",
        296 => "pwritev",
        299 => "recvmmsg",
        306 => "syncfs",
        307 => "sendmmsg",
        441 => "epoll_pwait2",
        _ => "?",
    }
}

/// What each sum grew by since `prev`: (key, ns, count) for the sums whose time grew. A sum
/// counts a thread's closed waits plus its open one up to the read, so it only grows while the
/// thread lives; a key seen for the first time counts whole (the tracer started, or the thread
/// did, within the interval).
pub fn grown<K: std::hash::Hash + Eq + Clone>(
    prev: &std::collections::HashMap<K, (u64, u64)>,
    now: &std::collections::HashMap<K, (u64, u64)>,
) -> Vec<(K, u64, u64)> {
    now.iter()
        .filter_map(|(key, (ns, count))| {
            let (was_ns, was_count) = prev.get(key).copied().unwrap_or_default();
            let ns = ns.saturating_sub(was_ns);
            (ns > 0).then(|| (key.clone(), ns, count.saturating_sub(was_count)))
        })
        .collect()
}

#[cfg(all(feature = "bpf", feature = "profile"))]
pub use live::WaitTracker;

#[cfg(all(feature = "bpf", feature = "profile"))]
mod live {
    use super::{Part, WaitClass, WaitScan};
    use crate::bpf::offcpu::{OffCpuTracer, Target};
    use crate::kernel::SysRoot;
    use crate::profile::waiton::Resolver;
    use crate::profile::why::{self, FdKind, Why};
    use std::collections::{HashMap, HashSet};

    /// (process, thread, state, call, descriptor).
    type Key = (u32, u32, u32, Option<u32>, Option<u32>);

    /// The loaded tracer and the sums it had at the previous sample.
    pub struct WaitTracker {
        tracer: OffCpuTracer,
        prev: HashMap<Key, (u64, u64)>,
        names: HashMap<u32, String>,
    }

    impl std::fmt::Debug for WaitTracker {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("WaitTracker")
                .field("keys", &self.prev.len())
                .finish()
        }
    }

    impl WaitTracker {
        /// Loads the tracer without stack walks; the error says why not in one line.
        pub fn start() -> Result<WaitTracker, crate::bpf::Refusal> {
            let tracer = OffCpuTracer::start(Target {
                tgid: None,
                cgroup: None,
                no_stacks: true,
            })?;
            Ok(WaitTracker {
                tracer,
                prev: HashMap::new(),
                names: HashMap::new(),
            })
        }

        /// The waits since the previous call (the first: since the start).
        pub fn sample(&mut self, root: &SysRoot) -> WaitScan {
            let read = self.tracer.read();
            let mut now: HashMap<Key, (u64, u64)> = HashMap::new();
            for w in &read.waits {
                let e = now
                    .entry((w.tgid, w.tid, w.state, w.syscall, w.fd))
                    .or_default();
                e.0 += w.ns;
                e.1 += w.count;
                if let Some(p) = &w.process {
                    self.names.entry(w.tgid).or_insert_with(|| p.clone());
                }
            }
            let mut resolver = Resolver::new(root.clone());
            let mut parts = Vec::new();
            for (key, ns, count) in super::grown(&self.prev, &now) {
                let (tgid, tid, state, call, fd) = key;
                let target = match fd {
                    Some(fd) if ns >= super::RESOLVE_MIN_NS && state != 0 => {
                        Some(resolver.target(tgid, fd))
                    }
                    _ => None,
                };
                let kind = target.as_ref().map_or(FdKind::Unknown, |t| t.kind);
                let accepted = target.as_ref().is_some_and(|t| t.accepted);
                let mut on = target.and_then(|t| t.name);
                let class = match why::classify(&[], state, call, kind) {
                    Why::Network if accepted => WaitClass::Clients,
                    w => class_of(w),
                };
                if !matches!(class, WaitClass::Network | WaitClass::Disk) {
                    on = None;
                }
                parts.push(Part {
                    tgid,
                    tid,
                    comm: self.names.get(&tgid).cloned().unwrap_or_default(),
                    class,
                    on,
                    call,
                    ns,
                    count,
                });
            }
            // Threads gone: their sums are final; forgotten here and in the kernel.
            let gone: HashSet<u32> = now
                .keys()
                .map(|k| k.1)
                .collect::<HashSet<u32>>()
                .into_iter()
                .filter(|tid| !root.proc.join(tid.to_string()).exists())
                .collect();
            if !gone.is_empty() {
                self.tracer.forget(&gone);
                now.retain(|k, _| !gone.contains(&k.1));
            }
            let live: HashSet<u32> = now.keys().map(|k| k.0).collect();
            self.names.retain(|pid, _| live.contains(pid));
            self.prev = now;
            super::aggregate(parts, read.lost_waits)
        }
    }

    fn class_of(w: Why) -> WaitClass {
        match w {
            Why::Lock => WaitClass::Lock,
            Why::Disk => WaitClass::Disk,
            Why::Network => WaitClass::Network,
            Why::Pipe => WaitClass::Pipe,
            Why::Sleep => WaitClass::Sleep,
            Why::Memory => WaitClass::Memory,
            Why::Preempted => WaitClass::Preempted,
            Why::Poll => WaitClass::Poll,
            Why::Cpu | Why::Other => WaitClass::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(tgid: u32, tid: u32, class: WaitClass, on: Option<&str>, ns: u64) -> Part {
        Part {
            tgid,
            tid,
            comm: "php-fpm".into(),
            class,
            on: on.map(str::to_string),
            call: Some(45),
            ns,
            count: 2,
        }
    }

    #[test]
    fn parts_are_summed_per_process_and_class_with_the_largest_target() {
        let scan = aggregate(
            vec![
                part(1, 1, WaitClass::Network, Some("10.0.0.5:3306"), 700),
                part(1, 2, WaitClass::Network, Some("10.0.0.6:6379"), 200),
                part(1, 2, WaitClass::Network, None, 50),
                part(1, 1, WaitClass::Lock, None, 100),
                part(2, 2, WaitClass::Disk, Some("vda"), 5000),
            ],
            3,
        );
        assert_eq!(scan.lost, 3);
        assert_eq!(scan.procs.len(), 2);
        assert_eq!(scan.procs[0].pid, 2);
        let p = &scan.procs[1];
        assert_eq!(p.threads, 2);
        assert_eq!(p.classes[0].class, WaitClass::Network);
        assert_eq!(p.classes[0].ns, 950);
        assert_eq!(p.classes[0].count, 6);
        assert_eq!(p.classes[0].on.as_deref(), Some("10.0.0.5:3306"));
        assert_eq!(p.classes[0].call.as_deref(), Some("recvfrom"));
        assert_eq!(p.classes[1].class, WaitClass::Lock);
    }

    #[test]
    fn processes_and_classes_are_bounded_and_the_rest_counted() {
        let mut parts = Vec::new();
        for pid in 0..(MAX_PROCS as u32 + 10) {
            for (i, class) in WaitClass::ALL.iter().enumerate() {
                parts.push(part(pid, pid, *class, None, 1 + pid as u64 + i as u64));
            }
        }
        let scan = aggregate(parts, 0);
        assert_eq!(scan.procs.len(), MAX_PROCS);
        assert_eq!(scan.dropped, 10);
        assert!(scan.procs.iter().all(|p| p.classes.len() == MAX_CLASSES));
        // The largest kept.
        assert_eq!(scan.procs[0].pid, MAX_PROCS as u32 + 9);
        // A process stalled on the network comes before any number of sleepers.
        let mut parts: Vec<Part> = (0..(MAX_PROCS as u32 + 10))
            .map(|pid| part(pid, pid, WaitClass::Sleep, None, 1_000_000_000))
            .collect();
        parts.push(part(
            9999,
            9999,
            WaitClass::Network,
            Some("10.0.0.5:3306"),
            5,
        ));
        let scan = aggregate(parts, 0);
        assert_eq!(scan.procs[0].pid, 9999);
    }

    #[test]
    fn sums_are_reported_by_what_they_grew() {
        use std::collections::HashMap;
        let prev: HashMap<u32, (u64, u64)> = [(1, (100, 2)), (2, (500, 5)), (3, (70, 1))].into();
        // 1 grew; 2 did not; 3 went back (its thread's id reused: nothing, not a wrap); 4 is new.
        let now: HashMap<u32, (u64, u64)> =
            [(1, (160, 3)), (2, (500, 5)), (3, (10, 1)), (4, (40, 1))].into();
        let mut g = grown(&prev, &now);
        g.sort();
        assert_eq!(g, vec![(1, 60, 1), (4, 40, 1)]);
    }
}
