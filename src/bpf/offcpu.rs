//! Off-CPU time (bpf/offcpu.bpf.c): how long each thread stayed off the CPU, summed in the
//! kernel per (process, thread, kernel stack, user stack, state, system call, descriptor).
//! [`OffCpuTracer::read`] returns the sums since the start, with the waits still open counted
//! up to now, and the stacks as addresses (leaf first).

#[cfg(feature = "bpf")]
use aya::maps::{HashMap as BpfHashMap, StackTraceMap};
#[cfg(feature = "bpf")]
use aya::{Ebpf, Pod};
#[cfg(feature = "bpf")]
use std::collections::HashMap;

/// The object built by `bpf/build.sh` from `bpf/offcpu.bpf.c`.
#[cfg(feature = "bpf")]
static OBJECT: &[u8] = aya::include_bytes_aligned!("../../bpf/offcpu.bpf.o");

/// Which tasks to follow (every process's, when both are `None`).
#[derive(Clone, Copy, Debug, Default)]
// Without the `bpf` feature the tracer that would read it never starts.
#[cfg_attr(not(feature = "bpf"), allow(dead_code))]
pub(crate) struct Target {
    /// One process (thread group).
    pub(crate) tgid: Option<u32>,
    /// One cgroup v2 and everything below it: (its id, its depth below the root).
    pub(crate) cgroup: Option<(u64, u32)>,
    /// Walk no stacks (`tacho top`'s waits are classed by the call, state and descriptor):
    /// every wait's stacks are empty.
    pub(crate) no_stacks: bool,
}

/// One sum: a thread's time off the CPU after leaving it with these stacks, in this state and
/// system call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Wait {
    /// Thread-group id (the process id).
    pub(crate) tgid: u32,
    /// Thread id.
    pub(crate) tid: u32,
    /// The thread's name when this sum began, raw from the kernel (escape it); `None` for a
    /// wait still open.
    pub(crate) thread: Option<String>,
    /// The process's name (its main thread's), as `thread`.
    pub(crate) process: Option<String>,
    /// Kernel addresses, leaf first (empty when the stack could not be kept).
    pub(crate) kernel: Vec<u64>,
    /// User addresses, leaf first.
    pub(crate) user: Vec<u64>,
    /// The task state it left in (0: still runnable, i.e. preempted; 1 sleeping; 2 in D).
    pub(crate) state: u32,
    /// The x86-64 system call it was in.
    pub(crate) syscall: Option<u32>,
    /// The descriptor that call waits on (its first argument; poll's first pollfd).
    pub(crate) fd: Option<u32>,
    /// Time off the CPU, ns.
    pub(crate) ns: u64,
    /// Intervals.
    pub(crate) count: u64,
}

/// What the tracer holds now.
#[derive(Clone, Debug, Default)]
pub(crate) struct Waits {
    /// Every sum.
    pub(crate) waits: Vec<Wait>,
    /// Intervals not counted because the kernel's table was full.
    pub(crate) lost_waits: u64,
    /// Stacks not kept (their table full, or a hash collision).
    pub(crate) lost_stacks: u64,
}

/// In a build without the `bpf` feature: a tracer that never starts (see [`super::missing`]).
#[cfg(not(feature = "bpf"))]
pub(crate) struct OffCpuTracer(std::convert::Infallible);

#[cfg(not(feature = "bpf"))]
impl OffCpuTracer {
    /// Always the missing feature, as a refusal.
    pub(crate) fn start(_: Target) -> Result<OffCpuTracer, super::Refusal> {
        Err(super::missing())
    }

    /// Never called: there is no tracer.
    pub(crate) fn read(&mut self) -> Waits {
        match self.0 {}
    }

    /// Never called: there is no tracer.
    #[allow(dead_code)]
    pub(crate) fn forget(&mut self, _: &std::collections::HashSet<u32>) {
        match self.0 {}
    }
}

#[cfg(feature = "bpf")]
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct WaitKey {
    tgid: u32,
    pid: u32,
    kstack: i32,
    ustack: i32,
    state: u32,
    syscall: i32,
    arg: u64,
}

#[cfg(feature = "bpf")]
#[repr(C)]
#[derive(Clone, Copy)]
struct WaitVal {
    ns: u64,
    count: u64,
    comm: [u8; 16],
    process: [u8; 16],
}

/// A thread's entry in `starts` (bpf/offcpu.bpf.c `struct start`); the cache of places
/// after `arg` is the program's own.
#[cfg(feature = "bpf")]
#[repr(C)]
#[derive(Clone, Copy)]
struct Start {
    ts: u64,
    tgid: u32,
    pad0: u32,
    kstack: i32,
    ustack: i32,
    state: u32,
    syscall: i32,
    arg: u64,
    next_place: u32,
    pad: u32,
    places: [[u64; 3]; 4],
}

// SAFETY: plain #[repr(C)] integers and byte arrays laid out as the C structs of
// bpf/offcpu.bpf.c (no implicit holes: every field is naturally aligned in order, and the
// sizes are multiples of 8); any bit pattern is valid.
#[cfg(feature = "bpf")]
unsafe impl Pod for WaitKey {}
// SAFETY: as above.
#[cfg(feature = "bpf")]
unsafe impl Pod for WaitVal {}
// SAFETY: as above.
#[cfg(feature = "bpf")]
unsafe impl Pod for Start {}

/// A thread's and its process's names.
#[cfg(feature = "bpf")]
type Names = (String, String);

/// The `arg` of a key when the call has no descriptor.
#[cfg(feature = "bpf")]
const NO_ARG: u64 = u64::MAX;

/// The loaded and attached program, and the stacks read so far by id.
#[cfg(feature = "bpf")]
pub(crate) struct OffCpuTracer {
    ebpf: Ebpf,
    stacks: HashMap<i32, Vec<u64>>,
}

#[cfg(feature = "bpf")]
impl OffCpuTracer {
    /// Loads and attaches the program; the error is a one-line reason.
    pub(crate) fn start(target: Target) -> Result<OffCpuTracer, super::Refusal> {
        let (cgroup, level) = target.cgroup.unwrap_or((0, 0));
        let ebpf = super::load(
            OBJECT,
            &[
                ("target_tgid", target.tgid.unwrap_or(0)),
                ("own_tgid", std::process::id()),
                ("cgroup_lo", cgroup as u32),
                ("cgroup_hi", (cgroup >> 32) as u32),
                ("cgroup_level", level),
                ("no_stacks", u32::from(target.no_stacks)),
            ],
            &[("offcpu_switch", "sched_switch")],
            &[],
            &[],
        )?;
        Ok(OffCpuTracer {
            ebpf,
            stacks: HashMap::new(),
        })
    }

    /// The sums since the start, and the waits still open up to now.
    pub(crate) fn read(&mut self) -> Waits {
        let mut out = Waits::default();
        // Key, ns, count, and the (thread, process) names the kernel kept.
        let mut raw: Vec<(WaitKey, u64, u64, Option<Names>)> = Vec::new();
        if let Some(map) = self.ebpf.map("waits")
            && let Ok(map) = BpfHashMap::<_, WaitKey, WaitVal>::try_from(map)
        {
            for (key, val) in map.iter().flatten() {
                let names = (c_text(&val.comm), c_text(&val.process));
                raw.push((
                    key,
                    val.ns,
                    val.count,
                    Some(names).filter(|n| !n.0.is_empty()),
                ));
            }
        }
        // Waits still open, up to now.
        let now = monotonic_ns();
        if let Some(map) = self.ebpf.map("starts")
            && let Ok(map) = BpfHashMap::<_, u32, Start>::try_from(map)
        {
            for (pid, s) in map.iter().flatten() {
                if s.ts == 0 {
                    continue;
                }
                let key = WaitKey {
                    tgid: s.tgid,
                    pid,
                    kstack: s.kstack,
                    ustack: s.ustack,
                    state: s.state,
                    syscall: s.syscall,
                    arg: s.arg,
                };
                raw.push((key, now.saturating_sub(s.ts), 1, None));
            }
        }
        if let Some(map) = self.ebpf.map("lost")
            && let Ok(map) = aya::maps::Array::<_, [u64; 2]>::try_from(map)
            && let Ok(v) = map.get(&0, 0)
        {
            out.lost_waits = v[0];
            out.lost_stacks = v[1];
        }
        for (key, ns, count, names) in raw {
            let kernel = self.stack(key.kstack);
            let user = self.stack(key.ustack);
            out.waits.push(Wait {
                tgid: key.tgid,
                tid: key.pid,
                thread: names.as_ref().map(|n| n.0.clone()),
                process: names.map(|n| n.1),
                kernel,
                user,
                state: key.state,
                syscall: u32::try_from(key.syscall).ok(),
                fd: (key.arg != NO_ARG).then_some(key.arg as u32),
                ns,
                count,
            });
        }
        out
    }

    /// Removes the sums of the threads in `tids` (gone, their sums read for the last time), so
    /// a long run's table holds only live threads.
    pub(crate) fn forget(&mut self, tids: &std::collections::HashSet<u32>) {
        if let Some(map) = self.ebpf.map_mut("waits")
            && let Ok(mut map) = BpfHashMap::<_, WaitKey, WaitVal>::try_from(map)
        {
            let keys: Vec<WaitKey> = map
                .keys()
                .flatten()
                .filter(|k| tids.contains(&k.pid))
                .collect();
            for k in keys {
                let _ = map.remove(&k);
            }
        }
    }

    /// The addresses of stack `id`, leaf first (read once; empty for no stack).
    fn stack(&mut self, id: i32) -> Vec<u64> {
        if id < 0 {
            return Vec::new();
        }
        if let Some(s) = self.stacks.get(&id) {
            return s.clone();
        }
        let addrs: Vec<u64> = self
            .ebpf
            .map("stacks")
            .and_then(|m| StackTraceMap::try_from(m).ok())
            .and_then(|m| m.get(&(id as u32), 0).ok())
            .map(|t| t.frames().iter().map(|f| f.ip).collect())
            .unwrap_or_default();
        self.stacks.insert(id, addrs.clone());
        addrs
    }
}

/// CLOCK_MONOTONIC in ns: the clock of `bpf_ktime_get_ns`.
#[cfg(feature = "bpf")]
fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64) * 1_000_000_000 + t.tv_nsec as u64
}

/// A C string's text, up to its NUL (invalid UTF-8 as U+FFFD).
#[cfg(feature = "bpf")]
fn c_text(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}
