//! Block I/O attribution (bpf/blockio.bpf.c): bytes and requests per submitting process, device
//! and operation, and per-device histograms of queue time (creation → dispatch), service time
//! (dispatch → completion) and their sum. The kernel keeps running totals in arrays shared
//! through mmap; [`BlockTracer::sample`] returns the change since the previous call.

use std::collections::HashMap;
#[cfg(feature = "bpf")]
use std::sync::atomic::Ordering::Relaxed;

#[cfg(feature = "bpf")]
use aya::Ebpf;

#[cfg(feature = "bpf")]
use super::hist::BUCKETS;
#[cfg(feature = "bpf")]
use super::shared::SharedArray;

/// The object built by `bpf/build.sh` from `bpf/blockio.bpf.c`.
#[cfg(feature = "bpf")]
static OBJECT: &[u8] = aya::include_bytes_aligned!("../../bpf/blockio.bpf.o");

/// Words of a `struct proc_slot`: key, cgroup, comm[16], padding; bytes, count, padding.
#[cfg(feature = "bpf")]
const PROC_WORDS: usize = 16;
/// Where the counters start in it (their own cache line).
#[cfg(feature = "bpf")]
const PROC_BYTES: usize = 8;
/// Words of a `struct dev_slot`: dev and padding, then queue, service and total histograms.
#[cfg(feature = "bpf")]
const DEV_WORDS: usize = 8 + 3 * BUCKETS;
/// Where the histograms start in it.
#[cfg(feature = "bpf")]
const DEV_HIST: usize = 8;

/// The block operation of a request (the kernel's `REQ_OP_*`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Op {
    /// REQ_OP_READ.
    Read,
    /// REQ_OP_WRITE.
    Write,
    /// REQ_OP_FLUSH, REQ_OP_DISCARD and the rest.
    Other,
}

#[cfg(feature = "bpf")]
impl Op {
    fn from_raw(op: u32) -> Op {
        match op {
            0 => Op::Read,
            1 => Op::Write,
            _ => Op::Other,
        }
    }
}

/// In a build without the `bpf` feature: a tracer that never starts (see [`super::missing`]).
#[cfg(not(feature = "bpf"))]
#[derive(Debug)]
pub(crate) struct BlockTracer(std::convert::Infallible);

#[cfg(not(feature = "bpf"))]
impl BlockTracer {
    /// Always the missing feature, as a refusal.
    pub(crate) fn start() -> Result<BlockTracer, super::Refusal> {
        Err(super::missing())
    }

    /// Never called: there is no tracer.
    pub(crate) fn sample(&mut self) -> BlockSample {
        match self.0 {}
    }
}

/// A block device as (major, minor).
pub(crate) type Dev = (u32, u32);

#[cfg(feature = "bpf")]
fn split_dev(dev: u32) -> Dev {
    (dev >> 20, dev & 0xfffff)
}

/// I/O one process submitted to one device in one interval (kept in `tacho record`'s history,
/// so a replay blames as the live view did).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct ProcIo {
    /// Thread-group id (the process id) of the submitter.
    pub(crate) pid: u32,
    /// The submitter's command name, raw bytes from the kernel (escape before display).
    pub(crate) comm: String,
    /// Its cgroup v2 id when it first submitted to this device.
    pub(crate) cgroup: u64,
    /// The device, (major, minor).
    pub(crate) dev: Dev,
    /// Read, write or other.
    pub(crate) op: Op,
    /// Bytes completed.
    pub(crate) bytes: u64,
    /// Requests completed.
    pub(crate) requests: u64,
}

/// A device's latency histograms for one interval, counts per log2 µs slot.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub(crate) struct DevLatency {
    /// Creation of the request from its first bio → dispatch to the driver.
    pub(crate) queue: Vec<u64>,
    /// Dispatch → completion: the time the device actually served.
    pub(crate) service: Vec<u64>,
    /// Creation → completion: the request's whole time, as iostat's await counts it.
    pub(crate) total: Vec<u64>,
}

/// What the tracer saw in one interval.
#[derive(Clone, Debug, Default)]
pub(crate) struct BlockSample {
    /// Per process, device and operation, largest first.
    pub(crate) procs: Vec<ProcIo>,
    /// Per device.
    pub(crate) latency: HashMap<Dev, DevLatency>,
    /// Requests not counted per process or device because the kernel's table was full.
    pub(crate) dropped: u64,
}

/// The loaded and attached block programs, their shared arrays, and the totals of the previous
/// sample (per array index, with the key that held it).
#[cfg(feature = "bpf")]
pub(crate) struct BlockTracer {
    _ebpf: Ebpf,
    procs: SharedArray,
    devs: SharedArray,
    dropped: SharedArray,
    last_proc: HashMap<usize, (u64, u64, u64)>,
    last_dev: HashMap<usize, (u64, Vec<u64>)>,
    last_dropped: u64,
}

#[cfg(feature = "bpf")]
impl std::fmt::Debug for BlockTracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BlockTracer")
    }
}

/// (program in the object, kernel tracepoint) pairs always attached.
#[cfg(feature = "bpf")]
const PROGRAMS: [(&str, &str); 3] = [
    ("dirty_folio", "writeback_dirty_folio"),
    ("io_start", "block_io_start"),
    ("rq_complete", "block_rq_complete"),
];

/// Attached besides when some queue lacks the kernel's dispatch stamp.
#[cfg(feature = "bpf")]
const ISSUE: (&str, &str) = ("rq_issue", "block_rq_issue");

#[cfg(feature = "bpf")]
impl BlockTracer {
    /// Loads and attaches the programs; the error is a one-line reason for a note.
    pub(crate) fn start() -> Result<BlockTracer, super::Refusal> {
        let sys_block = std::path::Path::new("/sys/block");
        let mut programs = PROGRAMS.to_vec();
        if !every_queue_stamps(sys_block, "wbt_lat_usec") {
            programs.push(ISSUE);
        }
        let own_start = u32::from(!every_queue_stamps(sys_block, "iostats"));
        let ebpf = super::load(OBJECT, &[("own_start", own_start)], &programs)?;
        let mut tracer = BlockTracer {
            procs: SharedArray::map(&ebpf, "procs", PROC_WORDS)?,
            devs: SharedArray::map(&ebpf, "devs", DEV_WORDS)?,
            dropped: SharedArray::map(&ebpf, "dropped", 2)?,
            _ebpf: ebpf,
            last_proc: HashMap::new(),
            last_dev: HashMap::new(),
            last_dropped: 0,
        };
        // Totals from before this start are not this interval's.
        tracer.sample();
        Ok(tracer)
    }

    /// The change since the previous call (or since start).
    pub(crate) fn sample(&mut self) -> BlockSample {
        let mut out = BlockSample {
            procs: self.sample_procs(),
            latency: self.sample_devs(),
            dropped: 0,
        };
        let dropped: u64 = self.dropped.value(0).iter().map(|w| w.load(Relaxed)).sum();
        out.dropped = dropped.saturating_sub(self.last_dropped);
        self.last_dropped = dropped;
        out
    }

    fn sample_procs(&mut self) -> Vec<ProcIo> {
        let mut procs = Vec::new();
        let mut idle_dead = Vec::new();
        for index in 0..self.procs.entries() {
            let v = self.procs.value(index);
            let key = v[0].load(Relaxed);
            if key == 0 {
                self.last_proc.remove(&index);
                continue;
            }
            let (bytes_now, count_now) =
                (v[PROC_BYTES].load(Relaxed), v[PROC_BYTES + 1].load(Relaxed));
            let (bytes, requests) = match self.last_proc.insert(index, (key, bytes_now, count_now))
            {
                Some((k, b, c)) if k == key => {
                    (bytes_now.saturating_sub(b), count_now.saturating_sub(c))
                }
                _ => (bytes_now, count_now),
            };
            let (pid, dev, op) = split_key(key);
            if bytes == 0 && requests == 0 {
                if pid != 0 && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                    idle_dead.push((index, key));
                }
                continue;
            }
            let mut comm = [0u8; 16];
            comm[..8].copy_from_slice(&v[2].load(Relaxed).to_le_bytes());
            comm[8..].copy_from_slice(&v[3].load(Relaxed).to_le_bytes());
            let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
            procs.push(ProcIo {
                pid,
                comm: String::from_utf8_lossy(&comm[..end]).into_owned(),
                cgroup: v[1].load(Relaxed),
                dev,
                op,
                bytes,
                requests,
            });
        }
        for (index, key) in idle_dead {
            self.release(index, key);
        }
        procs.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.pid.cmp(&b.pid)));
        procs
    }

    /// Frees the slot of a process that has exited and did no I/O for an interval, so the
    /// table does not fill over days of short-lived processes. Counters are cleared before the
    /// key, so the next claimer starts from zero; a request of the dead process still in
    /// flight (idle for a whole interval) would count for the slot's next owner.
    fn release(&mut self, index: usize, key: u64) {
        let v = self.procs.value(index);
        v[PROC_BYTES].store(0, Relaxed);
        v[PROC_BYTES + 1].store(0, Relaxed);
        let _ = v[0].compare_exchange(key, 0, Relaxed, Relaxed);
        self.last_proc.remove(&index);
    }

    fn sample_devs(&mut self) -> HashMap<Dev, DevLatency> {
        let mut latency = HashMap::new();
        for index in 0..self.devs.entries() {
            let v = self.devs.value(index);
            let key = v[0].load(Relaxed);
            if key == 0 {
                continue;
            }
            let now: Vec<u64> = v[DEV_HIST..].iter().map(|w| w.load(Relaxed)).collect();
            let before = self.last_dev.insert(index, (key, now.clone()));
            let delta: Vec<u64> = match before {
                Some((k, b)) if k == key => now
                    .iter()
                    .zip(&b)
                    .map(|(n, b)| n.saturating_sub(*b))
                    .collect(),
                _ => now,
            };
            if delta.iter().all(|&c| c == 0) {
                continue;
            }
            latency.insert(
                split_dev(key as u32),
                DevLatency {
                    queue: delta[..BUCKETS].to_vec(),
                    service: delta[BUCKETS..2 * BUCKETS].to_vec(),
                    total: delta[2 * BUCKETS..].to_vec(),
                },
            );
        }
        latency
    }
}

/// (pid, device, operation) of a `proc_key` (bpf/blockio.bpf.c).
#[cfg(feature = "bpf")]
fn split_key(key: u64) -> (u32, Dev, Op) {
    let pid = ((key >> 34) & 0x3f_ffff) as u32;
    let op = Op::from_raw(((key >> 32) & 3) as u32);
    (pid, split_dev(key as u32), op)
}

/// Whether the kernel stamps the times of every multi-queue device's requests itself, judged by
/// one file of each queue: `wbt_lat_usec` is readable exactly where writeback throttling was
/// set up (even if turned off since), which keeps the queue's statistics on, and with them the
/// dispatch stamp; `iostats` other than 0 means the creation stamp. Anything unreadable counts
/// as not stamped, so the programs stamp it themselves.
#[cfg(feature = "bpf")]
fn every_queue_stamps(sys_block: &std::path::Path, file: &str) -> bool {
    let Ok(dir) = std::fs::read_dir(sys_block) else {
        return false;
    };
    dir.flatten().all(|dev| {
        let queue = dev.path().join("queue");
        !dev.path().join("mq").exists()
            || std::fs::read_to_string(queue.join(file))
                .is_ok_and(|v| file != "iostats" || v.trim() != "0")
    })
}

#[cfg(all(test, feature = "bpf"))]
mod tests {
    use super::*;

    #[test]
    fn keys_split_as_the_programs_pack_them() {
        let key = (1u64 << 63) | (4_194_303u64 << 34) | (1u64 << 32) | ((7 << 20) | 3);
        assert_eq!(split_key(key), (4_194_303, (7, 3), Op::Write));
    }

    #[test]
    fn the_kernel_stamps_times_only_where_every_queue_keeps_them() {
        let dir = tempfile::tempdir().unwrap();
        let queue = |name: &str, wbt: Option<&str>, iostats: &str| {
            let q = dir.path().join(name).join("queue");
            std::fs::create_dir_all(&q).unwrap();
            std::fs::create_dir_all(dir.path().join(name).join("mq")).unwrap();
            if let Some(w) = wbt {
                std::fs::write(q.join("wbt_lat_usec"), w).unwrap();
            }
            std::fs::write(q.join("iostats"), iostats).unwrap();
        };
        queue("vda", Some("75000"), "1\n");
        queue("loop0", Some("0"), "1\n");
        std::fs::create_dir_all(dir.path().join("dm-0")).unwrap(); // bio-based: no requests
        assert!(every_queue_stamps(dir.path(), "wbt_lat_usec"));
        assert!(every_queue_stamps(dir.path(), "iostats"));
        queue("nvme0n1", None, "0\n");
        assert!(!every_queue_stamps(dir.path(), "wbt_lat_usec"));
        assert!(!every_queue_stamps(dir.path(), "iostats"));
        assert!(!every_queue_stamps(&dir.path().join("missing"), "iostats"));
    }

    #[test]
    fn devices_split_as_the_kernel_encodes_them() {
        assert_eq!(split_dev((7 << 20) | 3), (7, 3));
        assert_eq!(split_dev((259 << 20) | 0xfffff), (259, 0xfffff));
    }
}
