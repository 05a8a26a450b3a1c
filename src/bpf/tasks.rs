//! Every task's counters in one read (`bpf/tasks.h`, an `iter/task` program in the block
//! tracer's object): what /proc/PID/stat and /proc/PID/io give per process, without the
//! kernel generating two text files for each. Each read of the iterator's descriptor walks
//! every task once and returns one fixed-size binary record per task; [`parse`] sums a thread
//! group's records as /proc does (live threads plus the dead threads' totals the group keeps).
//! Figures stay raw (nanoseconds, the kernel's state bits): the sampler turns them into what
//! /proc would print.

/// The iterator program's name in the object.
#[cfg(feature = "bpf")]
pub(crate) const PROGRAM: &str = "task_counters";

/// Bytes of one `struct task_record`.
#[cfg(any(test, feature = "bpf"))]
const RECORD: usize = 232;

/// `task->flags` of a kernel thread.
#[cfg(any(test, feature = "bpf"))]
const PF_KTHREAD: u32 = 0x0020_0000;

/// One thread group, as the kernel holds it at the read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TaskGroup {
    /// Thread-group id (the process id).
    pub(crate) tgid: u32,
    /// Thread-group id of the leader's real parent (0 for the first tasks).
    pub(crate) ppid: u32,
    /// Threads (`signal->nr_threads`).
    pub(crate) threads: u32,
    /// The leader's `__state` bits.
    pub(crate) state: u32,
    /// The leader's `exit_state` bits (zombie, dead).
    pub(crate) exit_state: u32,
    /// The leader is a kernel thread (`PF_KTHREAD`): /proc may name it more fully than its
    /// `comm` (a workqueue worker's `+events`, a kernel thread's whole name).
    pub(crate) kernel_thread: bool,
    /// The leader's start, ns after boot (`start_boottime`).
    pub(crate) start_ns: u64,
    /// User and system time sampled at ticks, ns, summed over the group.
    pub(crate) utime_ns: u64,
    pub(crate) stime_ns: u64,
    /// Precise CPU time (`sum_exec_runtime`), ns, summed over the group.
    pub(crate) runtime_ns: u64,
    /// The group's last adjusted (user, system) time (`signal->prev_cputime`), ns.
    pub(crate) prev_ns: (u64, u64),
    /// Major page faults, summed over the group.
    pub(crate) major_faults: u64,
    /// rchar, wchar, read_bytes, write_bytes, cancelled_write_bytes, summed over the group.
    pub(crate) io: [u64; 5],
    /// The leader's block I/O delay, ns.
    pub(crate) blkio_ns: u64,
    /// Resident pages of its memory (0 for kernel threads).
    pub(crate) rss_pages: u64,
    /// The leader's `comm`, NUL-padded.
    pub(crate) comm: [u8; 16],
    /// (tid, `__state`) of its threads, the leader's too, that may be in uninterruptible
    /// sleep (`TASK_UNINTERRUPTIBLE` or `TASK_RTLOCK_WAIT` set): the sampler names the
    /// blocked ones without reading every thread's /proc/PID/task/TID/stat.
    pub(crate) maybe_blocked: Vec<(u32, u32)>,
}

/// `__state` bits of a task that /proc may show as `D`.
#[cfg(any(test, feature = "bpf"))]
const MAYBE_BLOCKED: u32 = 0x2 | 0x1000;

#[cfg(any(test, feature = "bpf"))]
fn u32_at(r: &[u8], word: usize) -> u32 {
    let at = 4 * word;
    u32::from_ne_bytes([r[at], r[at + 1], r[at + 2], r[at + 3]])
}

#[cfg(any(test, feature = "bpf"))]
fn u64_at(r: &[u8], word: usize) -> u64 {
    let at = 32 + 8 * word;
    let mut b = [0u8; 8];
    b.copy_from_slice(&r[at..at + 8]);
    u64::from_ne_bytes(b)
}

/// Adds the nine counters a record holds from 64-bit word `first` on (utime, stime, run
/// time, major faults, the five io counters: a thread's own, or its group's dead threads').
#[cfg(any(test, feature = "bpf"))]
fn add_counters(g: &mut TaskGroup, r: &[u8], first: usize) {
    g.utime_ns = g.utime_ns.wrapping_add(u64_at(r, first));
    g.stime_ns = g.stime_ns.wrapping_add(u64_at(r, first + 1));
    g.runtime_ns = g.runtime_ns.wrapping_add(u64_at(r, first + 2));
    g.major_faults = g.major_faults.wrapping_add(u64_at(r, first + 3));
    for (i, io) in g.io.iter_mut().enumerate() {
        *io = io.wrapping_add(u64_at(r, first + 4 + i));
    }
}

/// The thread groups of one iterator read, by tgid. A group whose leader's record is missing
/// (the leader reaped between two threads' records) is left out, and a trailing partial
/// record ignored.
#[cfg(any(test, feature = "bpf"))]
pub(crate) fn parse(data: &[u8]) -> Vec<TaskGroup> {
    let mut groups: Vec<TaskGroup> = Vec::new();
    let mut index: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    let mut leaders = std::collections::HashSet::new();
    for r in data.chunks_exact(RECORD) {
        let (pid, tgid) = (u32_at(r, 0), u32_at(r, 1));
        let at = *index.entry(tgid).or_insert_with(|| {
            groups.push(TaskGroup {
                tgid,
                ..TaskGroup::default()
            });
            groups.len() - 1
        });
        let g = &mut groups[at];
        if u32_at(r, 4) & MAYBE_BLOCKED != 0 {
            g.maybe_blocked.push((pid, u32_at(r, 4)));
        }
        // Words after the 32-byte head: start, utime, stime, runtime, maj_flt, io[5], blkio,
        // rss, then the group's dead threads: utime, stime, runtime, maj_flt, io[5], then
        // prev_cputime's utime and stime, then comm.
        add_counters(g, r, 1);
        if pid == tgid && leaders.insert(tgid) {
            g.ppid = u32_at(r, 2);
            g.threads = u32_at(r, 3);
            g.state = u32_at(r, 4);
            g.exit_state = u32_at(r, 5);
            g.kernel_thread = u32_at(r, 6) & PF_KTHREAD != 0;
            g.start_ns = u64_at(r, 0);
            g.blkio_ns = u64_at(r, 10);
            g.rss_pages = u64_at(r, 11);
            add_counters(g, r, 12);
            g.prev_ns = (u64_at(r, 21), u64_at(r, 22));
            g.comm.copy_from_slice(&r[RECORD - 16..]);
        }
    }
    groups.retain(|g| leaders.contains(&g.tgid));
    groups.sort_by_key(|g| g.tgid);
    groups
}

/// The iterator, linked: each [`TaskIter::read`] walks every task afresh.
#[cfg(feature = "bpf")]
#[derive(Debug)]
pub(crate) struct TaskIter {
    link: std::os::fd::OwnedFd,
    buf: Vec<u8>,
}

#[cfg(feature = "bpf")]
impl TaskIter {
    /// Links the iterator program `prog` (see [`super::kept::Loaded::iterator`]); the error
    /// is why not.
    pub(crate) fn new(prog: std::os::fd::BorrowedFd<'_>) -> Result<TaskIter, super::Refusal> {
        let link =
            super::sys::iter_link(prog).map_err(|e| super::refusal("linking iter/task", &e))?;
        Ok(TaskIter {
            link,
            buf: Vec::new(),
        })
    }

    /// Every thread group now.
    pub(crate) fn read(&mut self) -> std::io::Result<Vec<TaskGroup>> {
        use std::io::Read;
        use std::os::fd::AsFd;
        let mut file = std::fs::File::from(super::sys::iter_open(self.link.as_fd())?);
        self.buf.clear();
        file.read_to_end(&mut self.buf)?;
        Ok(parse(&self.buf))
    }
}

/// In a build without the `bpf` feature: an iterator that never exists.
#[cfg(not(feature = "bpf"))]
#[derive(Debug)]
pub(crate) struct TaskIter(std::convert::Infallible);

#[cfg(not(feature = "bpf"))]
impl TaskIter {
    /// Never called: there is no iterator.
    pub(crate) fn read(&mut self) -> std::io::Result<Vec<TaskGroup>> {
        match self.0 {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A record as the program writes it: (pid, tgid) and every 64-bit word after the head
    /// set to `base + its index`, comm "c<tgid>".
    fn record(pid: u32, tgid: u32, base: u64) -> Vec<u8> {
        // Thread 11 sleeps uninterruptibly, group 20 is a kernel thread.
        let state = if pid == 11 { 2 } else { 1 };
        let flags = if tgid == 20 { PF_KTHREAD } else { 0 };
        let mut r = Vec::with_capacity(RECORD);
        for w in [pid, tgid, 7, 3, state, 0, flags, 0] {
            r.extend_from_slice(&w.to_ne_bytes());
        }
        for i in 0..23 {
            r.extend_from_slice(&(base + i).to_ne_bytes());
        }
        let mut comm = [0u8; 16];
        let name = format!("c{tgid}");
        comm[..name.len()].copy_from_slice(name.as_bytes());
        r.extend_from_slice(&comm);
        assert_eq!(r.len(), RECORD);
        r
    }

    #[test]
    fn a_group_sums_its_threads_and_its_dead_threads_once() {
        let mut data = record(10, 10, 100);
        data.extend(record(11, 10, 1000));
        data.extend(record(20, 20, 0));
        // A thread whose leader is not in the read, and a torn record at the end.
        data.extend(record(31, 30, 0));
        data.extend_from_slice(&[1, 2, 3]);
        let groups = parse(&data);
        assert_eq!(groups.len(), 2);
        let g = &groups[0];
        assert_eq!((g.tgid, g.ppid, g.threads, g.state), (10, 7, 3, 1));
        assert_eq!(g.start_ns, 100);
        // utime: the leader's (101), the other thread's (1001) and the dead threads' (112).
        assert_eq!(g.utime_ns, 101 + 1001 + 112);
        assert_eq!(g.runtime_ns, 103 + 1003 + 114);
        assert_eq!(g.io[4], 109 + 1009 + 120);
        assert_eq!((g.blkio_ns, g.rss_pages), (110, 111));
        assert_eq!(g.prev_ns, (121, 122));
        assert_eq!(&g.comm[..3], b"c10");
        assert!(!g.kernel_thread);
        assert_eq!(g.maybe_blocked, [(11, 2)]);
        assert!(groups[1].maybe_blocked.is_empty());
        assert_eq!(groups[1].tgid, 20);
        assert!(groups[1].kernel_thread);
    }

    proptest! {
        #[test]
        fn never_panics(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let groups = parse(&data);
            prop_assert!(groups.len() <= data.len() / RECORD);
        }
    }
}
