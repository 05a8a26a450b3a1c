//! The process scan from the block tracer's task iterator ([`crate::bpf::tasks`]) instead of
//! every process's /proc/PID/stat and io: one read for all tasks, turned into the figures
//! /proc would print (clock ticks, adjusted user and system time, the state letter).
//!
//! The source is kept for the run: once a sampler scans with the iterator, every scan does
//! (a failed read is the sample's error, not a silent switch), so no process's counters jump
//! between two sources that may differ by a tick. The one exception, fixed per process: a
//! process /proc lists but the iterator does not (one the kernel hides from it) is read
//! from /proc in every scan. Names come from /proc once per process, and again when the
//! kernel's `comm` changes: /proc names a kernel worker by what it works on, which `comm`
//! alone does not say.

use std::collections::{HashMap, HashSet};

use crate::bpf::tasks::{TaskGroup, TaskIter};
use crate::kernel::blocked::{self, BlockedTask};
use crate::kernel::process::{self, ProcessCounters, ProcessIo, ProcessScan};
use crate::kernel::procfiles::ProcFiles;
use crate::kernel::{KernelError, Result, SysRoot};

/// Nanoseconds per clock tick of /proc (USER_HZ is 100 on every architecture Linux reports
/// through /proc).
const NS_PER_TICK: u64 = 10_000_000;

/// What is kept of a process between scans.
#[derive(Debug)]
struct Known {
    start_ns: u64,
    /// The kernel's `comm` when the name was read.
    raw_comm: [u8; 16],
    comm: String,
    comm_hex: Option<String>,
    /// The last (user, system) split handed out, ns: never lowered (as the kernel's
    /// `prev_cputime`).
    prev: (u64, u64),
}

/// The iterator and what it remembers of each process.
#[derive(Debug)]
pub(super) struct TaskSource {
    iter: TaskIter,
    known: HashMap<u32, Known>,
    /// This process's time namespace's boot clock shift, ns: /proc's start times include it.
    boot_offset_ns: i64,
    /// (pid, tid) of the threads the last scan found in uninterruptible sleep.
    maybe_blocked: Vec<(u32, u32)>,
    /// The processes the last scan read from /proc because the iterator lacked them.
    only_in_proc: Vec<u32>,
}

impl TaskSource {
    pub(super) fn new(iter: TaskIter, root: &SysRoot) -> TaskSource {
        TaskSource {
            iter,
            known: HashMap::new(),
            boot_offset_ns: process::boottime_offset_ns(root),
            maybe_blocked: Vec::new(),
            only_in_proc: Vec::new(),
        }
    }

    /// Every process now; `files` serves the processes only /proc lists.
    pub(super) fn scan(&mut self, root: &SysRoot, files: &mut ProcFiles) -> Result<ProcessScan> {
        // /proc's list first: a process it lists that the iterator then lacks is either gone
        // (its read below finds nothing) or hidden from the iterator.
        let listed = process::list_pids(root)?;
        let groups = self.iter.read().map_err(|source| KernelError::Read {
            path: "bpf task iterator (iter/task)".into(),
            source,
        })?;
        let mut scan = ProcessScan::default();
        let mut seen = HashSet::with_capacity(groups.len());
        self.maybe_blocked.clear();
        for g in &groups {
            seen.insert(g.tgid);
            let process = self.counters(root, g);
            scan.processes.push(process);
            self.maybe_blocked.extend(
                g.maybe_blocked
                    .iter()
                    .filter(|&&(_, state)| state_letter(state, 0) == 'D')
                    .map(|&(tid, _)| (g.tgid, tid)),
            );
        }
        let mut buf = Vec::new();
        self.only_in_proc.clear();
        for pid in listed {
            if !seen.contains(&pid) {
                process::read_process(root, files, pid, &mut buf, &mut scan)?;
                self.only_in_proc.push(pid);
            }
        }
        files.end_scan();
        self.known.retain(|pid, _| seen.contains(pid));
        scan.processes.sort_by_key(|p| p.pid);
        Ok(scan)
    }

    /// The threads in state `D` (at most a handful), as [`blocked::read_blocked`] finds them:
    /// among those the last scan's iterator saw in uninterruptible sleep, and every thread of
    /// the processes only /proc listed, instead of every thread's /proc/PID/task/TID/stat.
    pub(super) fn blocked(&self, root: &SysRoot) -> Vec<BlockedTask> {
        let mut tasks = blocked::threads_of(root, &self.only_in_proc);
        tasks.extend_from_slice(&self.maybe_blocked);
        tasks.sort_unstable();
        blocked::read_blocked_among(root, &tasks)
    }

    fn counters(&mut self, root: &SysRoot, g: &TaskGroup) -> ProcessCounters {
        let fresh = |raw_comm: [u8; 16]| {
            let own = || {
                let bytes = &raw_comm[..raw_comm.iter().position(|&b| b == 0).unwrap_or(16)];
                (
                    String::from_utf8_lossy(bytes).into_owned(),
                    crate::text::hex_if_not_utf8(bytes),
                )
            };
            // A user task's /proc name is its comm; only a kernel thread's can say more
            // (a workqueue worker's `+events`, a long kernel thread name), so only those
            // are worth opening /proc/PID/stat for, once per name.
            let (comm, comm_hex) = if g.kernel_thread {
                process::read_comm(root, g.tgid).unwrap_or_else(own)
            } else {
                own()
            };
            Known {
                start_ns: g.start_ns,
                raw_comm,
                comm,
                comm_hex,
                prev: g.prev_ns,
            }
        };
        let known = self
            .known
            .entry(g.tgid)
            .and_modify(|k| {
                if k.start_ns != g.start_ns {
                    *k = fresh(g.comm);
                } else if k.raw_comm != g.comm {
                    let prev = k.prev;
                    *k = fresh(g.comm);
                    k.prev = prev;
                }
            })
            .or_insert_with(|| fresh(g.comm));
        let (utime_ns, stime_ns) = adjust(g.utime_ns, g.stime_ns, g.runtime_ns, &mut known.prev);
        let zombie = g.exit_state != 0;
        ProcessCounters {
            pid: g.tgid,
            comm: known.comm.clone(),
            comm_hex: known.comm_hex.clone(),
            state: state_letter(g.state, g.exit_state),
            ppid: g.ppid,
            start_ticks: g.start_ns.saturating_add_signed(self.boot_offset_ns) / NS_PER_TICK,
            utime: utime_ns / NS_PER_TICK,
            stime: stime_ns / NS_PER_TICK,
            blkio_ticks: g.blkio_ns / NS_PER_TICK,
            threads: u64::from(g.threads),
            // /proc/PID/io of a zombie cannot be read: no I/O to report, as from /proc.
            io: (!zombie).then_some(ProcessIo {
                rchar: g.io[0],
                wchar: g.io[1],
                read_bytes: g.io[2],
                write_bytes: g.io[3],
                cancelled_write_bytes: g.io[4],
            }),
            major_faults: g.major_faults,
            rss_pages: g.rss_pages,
        }
    }
}

/// The kernel's `cputime_adjust`: the tick-sampled user and system times scaled so they sum
/// to the precise run time, neither ever below what `prev` last gave (then updated).
fn adjust(utime: u64, stime: u64, rtime: u64, prev: &mut (u64, u64)) -> (u64, u64) {
    if prev.0.saturating_add(prev.1) >= rtime {
        return *prev;
    }
    let mut s = if stime == 0 {
        0
    } else if utime == 0 {
        rtime
    } else {
        let scaled =
            u128::from(stime) * u128::from(rtime) / (u128::from(stime) + u128::from(utime));
        u64::try_from(scaled).unwrap_or(rtime).min(rtime)
    };
    s = s.max(prev.1);
    let mut u = rtime - s;
    if u < prev.0 {
        u = prev.0;
        s = rtime - u;
    }
    *prev = (u, s);
    (u, s)
}

/// The letter /proc/PID/stat gives for these `__state` and `exit_state` bits
/// (`task_state_index`: "RSDTtXZPI").
fn state_letter(state: u32, exit_state: u32) -> char {
    const TASK_REPORT: u32 = 0x7f;
    const TASK_IDLE: u32 = 0x402; // TASK_UNINTERRUPTIBLE | TASK_NOLOAD
    const TASK_RTLOCK_WAIT: u32 = 0x1000;
    let mut bits = (state | exit_state) & TASK_REPORT;
    if state & TASK_IDLE == TASK_IDLE {
        bits = 0x80;
    }
    if state & TASK_RTLOCK_WAIT != 0 {
        bits = 0x2;
    }
    let index = (u32::BITS - bits.leading_zeros()) as usize;
    b"RSDTtXZPI"[index.min(8)] as char
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn states_read_as_proc_prints_them() {
        assert_eq!(state_letter(0, 0), 'R');
        assert_eq!(state_letter(1, 0), 'S');
        assert_eq!(state_letter(2, 0), 'D');
        assert_eq!(state_letter(0x402, 0), 'I');
        assert_eq!(state_letter(4, 0), 'T');
        assert_eq!(state_letter(8, 0), 't');
        assert_eq!(state_letter(0x40, 0), 'P');
        assert_eq!(state_letter(0, 0x20), 'Z');
        assert_eq!(state_letter(0x1001, 0), 'D');
    }

    #[test]
    fn adjusted_times_sum_to_the_run_time_and_never_go_back() {
        let mut prev = (0, 0);
        // 3 ticks of user time to 1 of system, 10 ms precise: split 3:1.
        assert_eq!(adjust(12, 4, 10_000, &mut prev), (7_500, 2_500));
        // The run time grew but a tick moved the ratio towards user: system stays.
        assert_eq!(adjust(20, 4, 10_400, &mut prev), (7_900, 2_500));
        // No run time since: the last split.
        assert_eq!(adjust(20, 8, 10_400, &mut prev), (7_900, 2_500));
        let mut fresh = (0, 0);
        assert_eq!(adjust(0, 0, 500, &mut fresh), (500, 0));
        assert_eq!(adjust(0, 4, 600, &mut fresh), (500, 100));
    }

    /// What the children of the agreement test do, then each prints "ready" and sleeps (its
    /// counters then stay still while both sources are read).
    #[cfg(feature = "bpf")]
    const WORKLOADS: &str = r#"
import mmap, os, sys, threading, time
kind, path = sys.argv[1], sys.argv[2]
n = 1 << 20
if kind == "spin":
    end = time.process_time() + 0.15
    while time.process_time() < end:
        pass
elif kind == "write":
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, b"x" * n)
    os.fsync(fd)
    os.close(fd)
elif kind == "read":
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, n)
    os.readv(fd, [buf])
    os.close(fd)
elif kind == "threads":
    def work():
        end = time.thread_time() + 0.04
        while time.thread_time() < end:
            pass
        fd = os.open(os.devnull, os.O_WRONLY)
        os.write(fd, b"y" * n)
        os.close(fd)
    ts = [threading.Thread(target=work) for _ in range(3)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    # join returns before the kernel has quite finished a thread's exit.
    while len(os.listdir("/proc/self/task")) > 1:
        time.sleep(0.001)
print("ready", flush=True)
time.sleep(30)
"#;

    /// The iterator's figures of a few processes the test starts equal /proc's: a CPU spinner,
    /// a writer of 1 MiB with fsync, a reader of 1 MiB with O_DIRECT, and a process whose
    /// three threads burnt CPU and wrote, then exited. Exact but for CPU time (within a tick:
    /// the iterator sees the run time of a task's last slice as the scheduler last counted
    /// it, /proc as of now).
    #[cfg(feature = "bpf")]
    #[test]
    fn the_iterator_agrees_with_proc() {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let tracer = match crate::bpf::block::BlockTracer::start(false) {
            Ok(t) => t,
            Err(why) => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "CI runs as root with BTF: the block tracer must start ({why})"
                );
                eprintln!("skipped: {why}");
                return;
            }
        };
        let root = SysRoot::real();
        let mut source = TaskSource::new(tracer.task_iter().expect("iter/task links"), &root);
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let data = dir.path().join("data");
        std::fs::write(&data, vec![7u8; 1 << 20]).unwrap();
        let mut children = Vec::new();
        for kind in ["spin", "write", "read", "threads"] {
            let path = if kind == "write" {
                dir.path().join("out")
            } else {
                data.clone()
            };
            let mut child = Command::new("python3")
                .args(["-c", WORKLOADS, kind])
                .arg(&path)
                .stdout(Stdio::piped())
                .spawn()
                .expect("python3 runs the workloads");
            let mut line = String::new();
            std::io::BufReader::new(child.stdout.take().unwrap())
                .read_line(&mut line)
                .unwrap();
            assert_eq!(line.trim(), "ready", "{kind}");
            children.push((kind, child));
        }
        // Each asleep, its counters still.
        let asleep = |pid: u32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('S')))
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !children.iter().all(|(_, c)| asleep(c.id())) {
            assert!(
                std::time::Instant::now() < deadline,
                "the workloads never slept"
            );
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let from_bpf = source.scan(&root, &mut ProcFiles::with_cap(0)).unwrap();
        let from_proc = process::read_processes(&root, &mut ProcFiles::with_cap(0)).unwrap();
        for (kind, child) in &mut children {
            let pid = child.id();
            let find = |scan: &ProcessScan| {
                scan.processes
                    .iter()
                    .find(|p| p.pid == pid)
                    .cloned()
                    .unwrap_or_else(|| panic!("{kind}: pid {pid} not in the scan"))
            };
            let (b, p) = (find(&from_bpf), find(&from_proc));
            let _ = child.kill();
            let _ = child.wait();
            // CPU time: a tick each way, and the sum exact up to one.
            for (name, x, y) in [("utime", b.utime, p.utime), ("stime", b.stime, p.stime)] {
                assert!(x.abs_diff(y) <= 1, "{kind}: {name} {x} against /proc's {y}");
            }
            assert!(
                (b.utime + b.stime).abs_diff(p.utime + p.stime) <= 1,
                "{kind}: {b:?} against {p:?}"
            );
            let same = |mut c: ProcessCounters| {
                (c.utime, c.stime) = (0, 0);
                c
            };
            assert_eq!(same(b.clone()), same(p.clone()), "{kind}");
            let io = b.io.unwrap();
            match *kind {
                "spin" => assert!(b.utime + b.stime >= 10, "{kind}: {b:?}"),
                // The file's pages, and a few of the filesystem's for creating it.
                "write" => assert!(
                    (1 << 20..(1 << 20) + (64 << 10)).contains(&io.write_bytes),
                    "{kind}: {io:?}"
                ),
                "read" => assert_eq!(io.read_bytes, 1 << 20, "{kind}"),
                _ => {
                    // The exited threads' CPU and bytes count; only the main thread is left.
                    assert_eq!(b.threads, 1, "{kind}");
                    assert!(b.utime + b.stime >= 8, "{kind}: {b:?}");
                    assert!(io.wchar >= 3 << 20, "{kind}: {io:?}");
                }
            }
        }
    }

    proptest! {
        #[test]
        fn adjusting_is_monotonic_and_sums(
            steps in proptest::collection::vec((0u64..1 << 40, 0u64..1 << 40, 0u64..1 << 40), 1..20)
        ) {
            let mut prev = (0u64, 0u64);
            let (mut u, mut s, mut r) = (0u64, 0u64, 0u64);
            for (du, ds, dr) in steps {
                u += du;
                s += ds;
                r += dr;
                let before = prev;
                let (au, as_) = adjust(u, s, r, &mut prev);
                prop_assert!(au >= before.0 && as_ >= before.1);
                prop_assert!(au + as_ == r.max(before.0 + before.1));
            }
        }
    }
}
