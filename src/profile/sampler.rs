//! Samples every CPU with `perf_event_open` on the CPU clock (a software event: it works in VMs
//! without a PMU), with user and kernel call chains, into one mmapped ring per CPU.
//!
//! The ring's records are parsed here rather than through a crate: only `PERF_RECORD_SAMPLE`
//! (ip, pid/tid, call chain) and `PERF_RECORD_LOST` are asked for, and the well-kept crates
//! for this (`perf-event2`) do not expose call chains from all-CPU sampling.

use crate::kernel::SysRoot;
use crate::mapping::Mapping;
use perf_event_open_sys::bindings as sys;
use std::collections::HashMap;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// Data pages per CPU ring (plus one header page): 512 KiB, room for a second of 999 Hz
/// samples with 64-frame chains.
const DATA_PAGES: usize = 128;
/// Call chains are cut at this depth.
const MAX_STACK: u16 = 127;

/// One sample: the process and its call chain, leaf first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// Thread-group id (0: the idle task).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Addresses from the leaf up, kernel and user frames together (context markers
    /// removed).
    pub stack: Vec<u64>,
}

/// Why sampling could not start, for a one-line error.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// perf_event_open was refused.
    #[error(
        "sampling all CPUs is not permitted (kernel.perf_event_paranoid is {paranoid}); run as \
         root, give tacho CAP_PERFMON (setcap cap_perfmon+ep), or allow it for everyone with \
         sysctl -w kernel.perf_event_paranoid=-1"
    )]
    Denied {
        /// The sysctl's value, as read.
        paranoid: String,
    },
    /// Another failure, with the system's words.
    #[error("cannot sample the CPUs: {0}")]
    Other(String),
}

/// The open events and their rings.
pub struct Sampler {
    rings: Vec<Ring>,
    /// Samples the kernel dropped because a ring was full.
    pub lost: u64,
}

/// One CPU's event and its ring (header page, then the data pages), touched only through
/// &mut self. The mapping is declared first so it is unmapped before the event is closed.
struct Ring {
    map: Mapping,
    _fd: OwnedFd,
    page: usize,
}

impl Sampler {
    /// Opens a CPU-clock sampling event at `hz` on every CPU online under `root`.
    pub fn start(hz: u64, root: &SysRoot) -> Result<Sampler, StartError> {
        let cpus = online_cpus(root);
        let mut rings = Vec::new();
        for cpu in cpus {
            rings.push(open(cpu, hz, root)?);
        }
        Ok(Sampler { rings, lost: 0 })
    }

    /// Moves every complete record out of the rings.
    pub fn drain(&mut self, out: &mut Vec<Sample>) {
        for i in 0..self.rings.len() {
            let lost = self.rings[i].drain(out);
            self.lost += lost;
        }
    }
}

fn online_cpus(root: &SysRoot) -> Vec<i32> {
    let text =
        std::fs::read_to_string(root.sys.join("devices/system/cpu/online")).unwrap_or_default();
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<i32>(), b.parse::<i32>()) {
            out.extend(a..=b);
        }
    }
    if out.is_empty() {
        out.push(0);
    }
    out
}

fn open(cpu: i32, hz: u64, root: &SysRoot) -> Result<Ring, StartError> {
    let mut attr = sys::perf_event_attr {
        type_: sys::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<sys::perf_event_attr>() as u32,
        config: u64::from(sys::PERF_COUNT_SW_CPU_CLOCK),
        sample_type: u64::from(
            sys::PERF_SAMPLE_IP | sys::PERF_SAMPLE_TID | sys::PERF_SAMPLE_CALLCHAIN,
        ),
        sample_max_stack: MAX_STACK,
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_freq = hz;
    attr.set_freq(1);
    attr.__bindgen_anon_2.wakeup_events = 1;
    // SAFETY: attr is a valid, fully initialised perf_event_attr of the size it states.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(
            &mut attr,
            -1,
            cpu,
            -1,
            u64::from(sys::PERF_FLAG_FD_CLOEXEC) as libc::c_ulong,
        )
    };
    if fd < 0 {
        let err = std::io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => StartError::Denied {
                paranoid: std::fs::read_to_string(root.proc.join("sys/kernel/perf_event_paranoid"))
                    .map(|s| s.trim().to_owned())
                    .unwrap_or_else(|_| "unknown".into()),
            },
            _ => StartError::Other(format!("perf_event_open on CPU {cpu}: {err}")),
        });
    }
    // SAFETY: fd was just returned by the kernel and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let page = Mapping::page_size();
    // A length the kernel accepts for a perf ring: 1 + 2^n pages.
    let map = Mapping::shared(fd.as_fd(), page * (DATA_PAGES + 1))
        .map_err(|e| StartError::Other(format!("cannot map the sample ring of CPU {cpu}: {e}")))?;
    Ok(Ring { map, _fd: fd, page })
}

impl Ring {
    fn header(&self) -> *mut sys::perf_event_mmap_page {
        self.map.as_ptr().cast()
    }

    /// Parses the records between tail and head, then frees them; returns samples lost.
    fn drain(&mut self, out: &mut Vec<Sample>) -> u64 {
        let header = self.header();
        // SAFETY: data_head/data_tail live in the header page this ring maps; the kernel
        // writes head and reads tail, so both are accessed atomically (acquire/release as
        // the perf ABI asks).
        let (head, tail) = unsafe {
            let head = &*(&raw const (*header).data_head as *const AtomicU64);
            let tail = &*(&raw const (*header).data_tail as *const AtomicU64);
            (head.load(Ordering::Acquire), tail.load(Ordering::Relaxed))
        };
        let size = (self.map.len() - self.page) as u64;
        // SAFETY: the data area follows the header page, `size` bytes long.
        let data =
            unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(self.page), size as usize) };
        let mut lost = 0;
        let mut at = tail;
        let mut record = Vec::new();
        while head - at >= 8 {
            let byte = |i: u64| data[((at + i) % size) as usize];
            let rec_size = u64::from(u16::from_ne_bytes([byte(6), byte(7)]));
            if rec_size < 8 || head - at < rec_size {
                break;
            }
            record.clear();
            record.extend((0..rec_size).map(byte));
            match parse(&record) {
                Some(Record::Sample(s)) => out.push(s),
                Some(Record::Lost(n)) => lost += n,
                None => {}
            }
            at += rec_size;
        }
        // SAFETY: as above; the kernel may reuse everything before the new tail.
        unsafe {
            let tail = &*(&raw const (*header).data_tail as *const AtomicU64);
            tail.store(at, Ordering::Release);
        }
        lost
    }
}

enum Record {
    Sample(Sample),
    Lost(u64),
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// One ring record (header included); `None` for kinds not asked for or a malformed one.
fn parse(rec: &[u8]) -> Option<Record> {
    let kind = u32_at(rec, 0)?;
    if kind == sys::PERF_RECORD_LOST {
        // id, then the number lost.
        return Some(Record::Lost(u64_at(rec, 16)?));
    }
    if kind != sys::PERF_RECORD_SAMPLE {
        return None;
    }
    // ip, pid/tid, nr, ips[nr] (sample_type IP | TID | CALLCHAIN, in that order).
    let ip = u64_at(rec, 8)?;
    let pid = u32_at(rec, 16)?;
    let tid = u32_at(rec, 20)?;
    let nr = usize::try_from(u64_at(rec, 24)?).ok()?;
    let mut stack = Vec::with_capacity(nr.min(256));
    for i in 0..nr.min(1024) {
        let addr = u64_at(rec, 32 + 8 * i)?;
        // PERF_CONTEXT_KERNEL, _USER, …: markers between the kernel and user parts.
        if addr >= sys::PERF_CONTEXT_MAX {
            continue;
        }
        stack.push(addr);
    }
    if stack.is_empty() {
        stack.push(ip);
    }
    Some(Record::Sample(Sample { pid, tid, stack }))
}

/// Per process, how many samples each distinct stack got.
pub type Stacks = HashMap<(u32, Vec<u64>), u64>;

/// Counts `samples` into `stacks`.
pub fn count(samples: Vec<Sample>, stacks: &mut Stacks) {
    for s in samples {
        *stacks.entry((s.pid, s.stack)).or_default() += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::fixture;

    #[test]
    fn the_cpus_sampled_are_those_online_under_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::under(dir.path());
        assert_eq!(online_cpus(&root), vec![0], "unreadable: CPU 0 alone");
        fixture::write(dir.path(), "sys/devices/system/cpu/online", "0-2,5\n");
        assert_eq!(online_cpus(&root), vec![0, 1, 2, 5]);
    }

    fn record(kind: u32, body: &[u64]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend(kind.to_ne_bytes());
        r.extend(0u16.to_ne_bytes());
        r.extend(((8 + 8 * body.len()) as u16).to_ne_bytes());
        for v in body {
            r.extend(v.to_ne_bytes());
        }
        r
    }

    #[test]
    fn a_sample_keeps_its_chain_without_context_markers() {
        let pid_tid = (7u64 << 32) | 42;
        let marker = sys::PERF_CONTEXT_MAX + 10;
        let r = record(
            sys::PERF_RECORD_SAMPLE,
            &[0x1000, pid_tid, 4, marker, 0x1000, 0x2000, 0x3000],
        );
        match parse(&r) {
            Some(Record::Sample(s)) => {
                assert_eq!((s.pid, s.tid), (42, 7));
                assert_eq!(s.stack, [0x1000, 0x2000, 0x3000]);
            }
            _ => panic!("not a sample"),
        }
        assert!(matches!(
            parse(&record(sys::PERF_RECORD_LOST, &[1, 5])),
            Some(Record::Lost(5))
        ));
    }

    proptest::proptest! {
        #[test]
        fn any_record_parses_without_panic(bytes in proptest::collection::vec(0u8.., 0..200)) {
            let _ = parse(&bytes);
        }
    }
}
