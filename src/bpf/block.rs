//! Block I/O attribution (bpf/blockio.bpf.c): bytes and requests per submitting process, device
//! and operation, and per-device histograms of queue time (creation → dispatch), service time
//! (dispatch → completion) and their sum. The kernel keeps running totals in arrays shared
//! through mmap; [`BlockTracer::sample`] returns the change since the previous call.

use std::collections::HashMap;
#[cfg(feature = "bpf")]
use std::sync::atomic::Ordering::Relaxed;

#[cfg(feature = "bpf")]
use super::hist::BUCKETS;
#[cfg(any(test, feature = "bpf"))]
use super::hist::PROC_BUCKETS;
#[cfg(feature = "bpf")]
use super::shared::SharedArray;

/// The object built by `bpf/build.sh` from `bpf/blockio.bpf.c`.
#[cfg(feature = "bpf")]
static OBJECT: &[u8] = aya::include_bytes_aligned!("../../bpf/blockio.bpf.o");

/// Words of a `struct proc_slot`: key, cgroup, comm[16], padding; bytes, count, total and
/// queued ns, padding; then the request-time histogram, two 32-bit counts a word.
#[cfg(feature = "bpf")]
const PROC_WORDS: usize = 16 + PROC_BUCKETS / 2;
/// Where the counters start in it (their own cache line): bytes, count, total_ns, queue_ns.
#[cfg(feature = "bpf")]
const PROC_BYTES: usize = 8;
/// Where the histogram starts.
#[cfg(feature = "bpf")]
const PROC_HIST: usize = 16;
/// Words of a `struct dev_slot`: dev and padding, then queue, service and total histograms.
#[cfg(feature = "bpf")]
const DEV_WORDS: usize = 8 + 3 * BUCKETS;
/// Where the histograms start in it.
#[cfg(feature = "bpf")]
const DEV_HIST: usize = 8;
/// Words of a `struct inflight`: request, creation and dispatch stamps, process and device
/// slots.
#[cfg(feature = "bpf")]
const INFLIGHT_WORDS: usize = 4;

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
    pub(crate) fn start(_keep: bool) -> Result<BlockTracer, super::Refusal> {
        Err(super::missing())
    }

    /// Never called: there is no tracer.
    pub(crate) fn sample(&mut self) -> BlockSample {
        match self.0 {}
    }

    /// Never called: there is no tracer.
    pub(crate) fn task_iter(&self) -> Result<super::tasks::TaskIter, super::Refusal> {
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
    /// Sum of the whole times (creation → completion) of the completed requests whose
    /// creation was seen, ns (0 in histories recorded before it was traced).
    #[serde(default)]
    pub(crate) total_ns: u64,
    /// The queued part of that sum (creation → dispatch), ns.
    #[serde(default)]
    pub(crate) queue_ns: u64,
    /// Those requests' whole times as (bucket, count) of the non-empty buckets of
    /// [`super::hist::proc_bounds_us`], for percentiles (empty in older histories).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) latency: Vec<(u16, u64)>,
}

/// The running totals of one process slot as the kernel keeps them.
#[cfg(any(test, feature = "bpf"))]
#[derive(Clone, Debug, PartialEq)]
struct ProcCounters {
    bytes: u64,
    count: u64,
    total_ns: u64,
    queue_ns: u64,
    /// 32-bit counts that wrap (see [`ProcCounters::since`]).
    hist: [u32; PROC_BUCKETS],
}

/// What a slot gained over an interval.
#[cfg(any(test, feature = "bpf"))]
#[derive(Debug, PartialEq)]
struct ProcDelta {
    bytes: u64,
    requests: u64,
    total_ns: u64,
    queue_ns: u64,
    latency: Vec<(u16, u64)>,
}

#[cfg(any(test, feature = "bpf"))]
impl ProcCounters {
    /// The change since `before` (the same key's totals at the previous sample), or all of
    /// them when the slot is new. The 64-bit totals never wrap, so one that went backwards
    /// (a slot released and claimed again between two reads) gives 0, not an underflow; the
    /// 32-bit histogram counts wrap after 4 billion requests of one bucket, so they are
    /// subtracted modulo 2^32 (a slot that is reset is forgotten: `before` is then `None`).
    fn since(&self, before: Option<&ProcCounters>) -> ProcDelta {
        let zero = ProcCounters {
            bytes: 0,
            count: 0,
            total_ns: 0,
            queue_ns: 0,
            hist: [0; PROC_BUCKETS],
        };
        let b = before.unwrap_or(&zero);
        ProcDelta {
            bytes: self.bytes.saturating_sub(b.bytes),
            requests: self.count.saturating_sub(b.count),
            total_ns: self.total_ns.saturating_sub(b.total_ns),
            queue_ns: self.queue_ns.saturating_sub(b.queue_ns),
            latency: self
                .hist
                .iter()
                .zip(&b.hist)
                .enumerate()
                .filter_map(|(i, (n, b))| {
                    let d = n.wrapping_sub(*b);
                    (d > 0).then_some((i as u16, u64::from(d)))
                })
                .collect(),
        }
    }
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
    loaded: super::kept::Loaded,
    procs: SharedArray,
    devs: SharedArray,
    dropped: SharedArray,
    last_proc: HashMap<usize, (u64, ProcCounters)>,
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
    /// Loads and attaches the programs; with `keep`, takes them from the set an earlier run
    /// kept loaded for the boot, or keeps them for later runs (see [`super::pin`]): what a
    /// short run gains most from, and what a run of days (a recorder) should not hold from
    /// every other run. The error is a one-line reason for a note.
    pub(crate) fn start(keep: bool) -> Result<BlockTracer, super::Refusal> {
        Self::start_in(keep.then(|| std::path::Path::new(super::pin::ROOT)))
    }

    /// [`BlockTracer::start`], with sets kept in the bpffs at `bpffs` (none: for this run
    /// only).
    pub(super) fn start_in(bpffs: Option<&std::path::Path>) -> Result<BlockTracer, super::Refusal> {
        let sys_block = std::path::Path::new("/sys/block");
        let mut programs = PROGRAMS.to_vec();
        if !every_queue_stamps(sys_block, "wbt_lat_usec") {
            programs.push(ISSUE);
        }
        let own_start = u32::from(!every_queue_stamps(sys_block, "iostats"));
        let object = super::kept::Object {
            label: "block",
            bytes: OBJECT,
            globals: &[("own_start", own_start)],
            programs: &programs,
            iterators: &[(super::tasks::PROGRAM, "task")],
            maps: &[
                "procs",
                "devs",
                "dropped",
                "inflight",
                "inflight_spill",
                "dirtier",
            ],
        };
        let (loaded, (procs, devs, dropped)) =
            super::kept::load(bpffs, &object, |loaded, reused| {
                let procs = SharedArray::map(loaded.map("procs")?, "procs", PROC_WORDS)?;
                let devs = SharedArray::map(loaded.map("devs")?, "devs", DEV_WORDS)?;
                let dropped = SharedArray::map(loaded.map("dropped")?, "dropped", 2)?;
                if reused {
                    // What the last run left: its totals, slots, requests in flight and owners of
                    // dirty pages (whose address a new file may have since taken).
                    procs.clear();
                    devs.clear();
                    dropped.clear();
                    SharedArray::map(loaded.map("inflight")?, "inflight", INFLIGHT_WORDS)?.clear();
                    loaded.empty_hash("inflight_spill")?;
                    loaded.empty_hash("dirtier")?;
                }
                Ok((procs, devs, dropped))
            })?;
        let mut tracer = BlockTracer {
            loaded,
            procs,
            devs,
            dropped,
            last_proc: HashMap::new(),
            last_dev: HashMap::new(),
            last_dropped: 0,
        };
        // Totals from before this start are not this interval's.
        tracer.sample();
        Ok(tracer)
    }

    /// The task iterator loaded with the tracer, linked (see [`super::tasks`]); the error is
    /// why the scan stays with /proc.
    pub(crate) fn task_iter(&self) -> Result<super::tasks::TaskIter, super::Refusal> {
        super::tasks::TaskIter::new(self.loaded.iterator(super::tasks::PROGRAM)?)
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
            let mut hist = [0u32; PROC_BUCKETS];
            for (i, w) in v[PROC_HIST..].iter().enumerate() {
                // Two 32-bit counts a word, the lower-numbered bucket in the low half.
                let w = w.load(Relaxed);
                hist[2 * i] = w as u32;
                hist[2 * i + 1] = (w >> 32) as u32;
            }
            let now = ProcCounters {
                bytes: v[PROC_BYTES].load(Relaxed),
                count: v[PROC_BYTES + 1].load(Relaxed),
                total_ns: v[PROC_BYTES + 2].load(Relaxed),
                queue_ns: v[PROC_BYTES + 3].load(Relaxed),
                hist,
            };
            let before = self.last_proc.remove(&index).filter(|(k, _)| *k == key);
            let delta = now.since(before.as_ref().map(|(_, c)| c));
            self.last_proc.insert(index, (key, now));
            let (pid, dev, op) = split_key(key);
            if delta.bytes == 0 && delta.requests == 0 {
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
                bytes: delta.bytes,
                requests: delta.requests,
                total_ns: delta.total_ns,
                queue_ns: delta.queue_ns,
                latency: delta.latency,
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
        for w in &v[PROC_BYTES..PROC_BYTES + 4] {
            w.store(0, Relaxed);
        }
        for w in &v[PROC_HIST..] {
            w.store(0, Relaxed);
        }
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

#[cfg(test)]
mod delta_tests {
    use super::*;

    fn counters(bytes: u64, count: u64, total_ns: u64, queue_ns: u64) -> ProcCounters {
        ProcCounters {
            bytes,
            count,
            total_ns,
            queue_ns,
            hist: [0; PROC_BUCKETS],
        }
    }

    #[test]
    fn an_interval_is_the_change_since_the_last_read() {
        let mut a = counters(4096, 1, 1_000, 100);
        a.hist[10] = 1;
        let mut b = counters(3 * 4096, 3, 9_000, 600);
        b.hist[10] = 2;
        b.hist[40] = 1;
        let d = b.since(Some(&a));
        assert_eq!(
            d,
            ProcDelta {
                bytes: 2 * 4096,
                requests: 2,
                total_ns: 8_000,
                queue_ns: 500,
                latency: vec![(10, 1), (40, 1)],
            }
        );
        // A new slot: everything it holds is this interval's.
        assert_eq!(b.since(None).latency, vec![(10, 2), (40, 1)]);
        assert_eq!(b.since(None).requests, 3);
    }

    #[test]
    fn a_history_recorded_before_latencies_reads_without_them() {
        let old = r#"{"pid":812,"comm":"postgres","cgroup":9,"dev":[254,0],"op":"write","bytes":8192,"requests":2}"#;
        let p: ProcIo = serde_json::from_str(old).unwrap();
        assert_eq!((p.requests, p.total_ns, p.queue_ns), (2, 0, 0));
        assert!(p.latency.is_empty());
        // And a new one keeps them.
        let new = ProcIo {
            total_ns: 5_000_000,
            queue_ns: 1_000_000,
            latency: vec![(40, 2)],
            ..p
        };
        let back: ProcIo = serde_json::from_str(&serde_json::to_string(&new).unwrap()).unwrap();
        assert_eq!(
            (back.total_ns, back.queue_ns, back.latency),
            (5_000_000, 1_000_000, vec![(40, 2)])
        );
    }

    #[test]
    fn totals_going_backwards_give_zero_and_histogram_counts_wrap() {
        let mut a = counters(10_000, 5, 50_000, 20_000);
        a.hist[3] = u32::MAX - 1;
        a.hist[4] = 7;
        let mut b = counters(4096, 1, 1_000, 0);
        b.hist[3] = 2; // wrapped past 2^32: 4 more
        b.hist[4] = 7;
        let d = b.since(Some(&a));
        assert_eq!((d.bytes, d.requests, d.total_ns, d.queue_ns), (0, 0, 0, 0));
        assert_eq!(d.latency, vec![(3, 4)]);
    }
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
