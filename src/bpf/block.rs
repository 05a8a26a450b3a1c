//! Block I/O attribution (bpf/blockio.bpf.c): bytes and requests per submitting process, device
//! and operation, and per-device log2 histograms of queue time (accounting start → dispatch)
//! and service time (dispatch → completion). The kernel keeps running totals; [`BlockTracer::
//! sample`] returns the change since the previous call.

use std::collections::HashMap;

use aya::maps::HashMap as BpfHashMap;
use aya::{Ebpf, Pod};

/// The object built by `bpf/build.sh` from `bpf/blockio.bpf.c`.
static OBJECT: &[u8] = aya::include_bytes_aligned!("../../bpf/blockio.bpf.o");

/// Log2 slots of a histogram; slot `i` holds latencies in `[2^i, 2^(i+1))` µs (slot 0: < 2 µs).
pub(crate) const SLOTS: usize = 32;

#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct IoKey {
    tgid: u32,
    dev: u32,
    op: u32,
    pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct IoVal {
    bytes: u64,
    count: u64,
    cgroup: u64,
    comm: [u8; 16],
}

#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct HistKey {
    dev: u32,
    kind: u32,
    slot: u32,
    pad: u32,
}

// SAFETY: plain #[repr(C)] integers and byte arrays laid out as the C structs of
// bpf/blockio.bpf.c (explicit padding fields, no implicit holes); any bit pattern is valid.
unsafe impl Pod for IoKey {}
// SAFETY: as above.
unsafe impl Pod for IoVal {}
// SAFETY: as above.
unsafe impl Pod for HistKey {}

/// The block operation of a request (the kernel's `REQ_OP_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Op {
    /// REQ_OP_READ.
    Read,
    /// REQ_OP_WRITE.
    Write,
    /// REQ_OP_FLUSH, REQ_OP_DISCARD and the rest.
    Other,
}

impl Op {
    fn from_raw(op: u32) -> Op {
        match op {
            0 => Op::Read,
            1 => Op::Write,
            _ => Op::Other,
        }
    }
}

/// A block device as (major, minor).
pub(crate) type Dev = (u32, u32);

fn split_dev(dev: u32) -> Dev {
    (dev >> 20, dev & 0xfffff)
}

/// I/O one process submitted to one device in one interval.
#[derive(Clone, Debug, serde::Serialize)]
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
    /// Submission (accounting start) → dispatch to the driver.
    pub(crate) queue: Vec<u64>,
    /// Dispatch → completion: the time the device actually served.
    pub(crate) service: Vec<u64>,
}

/// What the tracer saw in one interval.
#[derive(Clone, Debug, Default)]
pub(crate) struct BlockSample {
    /// Per process, device and operation, largest first.
    pub(crate) procs: Vec<ProcIo>,
    /// Per device.
    pub(crate) latency: HashMap<Dev, DevLatency>,
}

/// The loaded and attached block programs, with the totals of the previous sample.
pub(crate) struct BlockTracer {
    ebpf: Ebpf,
    last_io: HashMap<IoKey, (u64, u64)>,
    last_hist: HashMap<HistKey, u64>,
}

/// (program in the object, kernel tracepoint) pairs.
impl std::fmt::Debug for BlockTracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BlockTracer")
    }
}

const PROGRAMS: [(&str, &str); 4] = [
    ("dirty_folio", "writeback_dirty_folio"),
    ("io_start", "block_io_start"),
    ("rq_issue", "block_rq_issue"),
    ("rq_complete", "block_rq_complete"),
];

impl BlockTracer {
    /// Loads and attaches the programs; the error is a one-line reason for a note.
    pub(crate) fn start() -> Result<BlockTracer, String> {
        let ebpf = super::load(OBJECT, &PROGRAMS)?;
        let mut tracer = BlockTracer {
            ebpf,
            last_io: HashMap::new(),
            last_hist: HashMap::new(),
        };
        // Totals from before this start are not this interval's.
        tracer.sample();
        Ok(tracer)
    }

    /// The change since the previous call (or since start).
    pub(crate) fn sample(&mut self) -> BlockSample {
        let mut out = BlockSample::default();
        if let Some(map) = self.ebpf.map("io_by_proc")
            && let Ok(map) = BpfHashMap::<_, IoKey, IoVal>::try_from(map)
        {
            for (key, val) in map.iter().flatten() {
                let (bytes, count) = self
                    .last_io
                    .insert(key, (val.bytes, val.count))
                    .unwrap_or((0, 0));
                let (bytes, requests) = (
                    val.bytes.saturating_sub(bytes),
                    val.count.saturating_sub(count),
                );
                if requests == 0 && bytes == 0 {
                    continue;
                }
                let end = val
                    .comm
                    .iter()
                    .position(|&b| b == 0)
                    .unwrap_or(val.comm.len());
                out.procs.push(ProcIo {
                    pid: key.tgid,
                    comm: String::from_utf8_lossy(&val.comm[..end]).into_owned(),
                    cgroup: val.cgroup,
                    dev: split_dev(key.dev),
                    op: Op::from_raw(key.op),
                    bytes,
                    requests,
                });
            }
        }
        out.procs
            .sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.pid.cmp(&b.pid)));
        if let Some(map) = self.ebpf.map("latency")
            && let Ok(map) = BpfHashMap::<_, HistKey, u64>::try_from(map)
        {
            for (key, total) in map.iter().flatten() {
                let before = self.last_hist.insert(key, total).unwrap_or(0);
                let delta = total.saturating_sub(before);
                let slot = key.slot as usize;
                if delta == 0 || slot >= SLOTS {
                    continue;
                }
                let dev = out
                    .latency
                    .entry(split_dev(key.dev))
                    .or_insert_with(|| DevLatency {
                        queue: vec![0; SLOTS],
                        service: vec![0; SLOTS],
                    });
                let hist = if key.kind == 0 {
                    &mut dev.queue
                } else {
                    &mut dev.service
                };
                hist[slot] += delta;
            }
        }
        out
    }
}

/// The latency (µs) below which `quantile` (0..1) of a log2 histogram falls, interpolated
/// linearly inside the slot; `None` for an empty histogram.
pub(crate) fn percentile_us(hist: &[u64], quantile: f64) -> Option<f64> {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = quantile.clamp(0.0, 1.0) * total as f64;
    let mut seen = 0u64;
    for (slot, &count) in hist.iter().enumerate() {
        if count == 0 {
            continue;
        }
        if (seen + count) as f64 >= rank {
            let low = if slot == 0 {
                0.0
            } else {
                (1u64 << slot) as f64
            };
            let high = (1u64 << (slot + 1)) as f64;
            let within = (rank - seen as f64) / count as f64;
            return Some(low + (high - low) * within);
        }
        seen += count;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_within_a_slot() {
        let mut hist = vec![0; SLOTS];
        hist[3] = 10; // 8..16 µs
        assert_eq!(percentile_us(&hist, 0.5), Some(12.0));
        assert_eq!(percentile_us(&hist, 1.0), Some(16.0));
        assert_eq!(percentile_us(&vec![0; SLOTS], 0.5), None);
    }

    #[test]
    fn devices_split_as_the_kernel_encodes_them() {
        assert_eq!(split_dev((7 << 20) | 3), (7, 3));
        assert_eq!(split_dev((259 << 20) | 0xfffff), (259, 0xfffff));
    }
}
