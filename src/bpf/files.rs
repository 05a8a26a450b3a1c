//! Bytes per process and file, and sync latency (bpf/files.bpf.c): what each process read and
//! wrote through read/write-family syscalls and io_uring to each regular file, and how long its fsync,
//! fdatasync and sync_file_range calls took, keyed by (process, device, inode, generation). The kernel
//! keeps totals since the tracer started; [`FileTracer::totals`] reads them.

#[cfg(feature = "bpf")]
use aya::maps::HashMap as BpfHashMap;
#[cfg(feature = "bpf")]
use aya::{Ebpf, Pod};

/// The object built by `bpf/build.sh` from `bpf/files.bpf.c`.
#[cfg(feature = "bpf")]
static OBJECT: &[u8] = aya::include_bytes_aligned!("../../bpf/files.bpf.o");

/// Log2 slots of the sync latency histogram; slot `i` holds `[2^i, 2^(i+1))` µs.
#[cfg(feature = "bpf")]
const SLOTS: usize = 32;

#[cfg(feature = "bpf")]
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct FileKey {
    tgid: u32,
    dev: u32,
    ino: u64,
    generation: u32,
    pad: u32,
}

/// Bytes the kernel keeps of a file's last path component, NUL included (`NAME_LEN`).
#[cfg(feature = "bpf")]
const NAME_LEN: usize = 56;

#[cfg(feature = "bpf")]
#[repr(C)]
#[derive(Clone, Copy)]
struct FileVal {
    read_bytes: u64,
    reads: u64,
    write_bytes: u64,
    writes: u64,
    write_min: u64,
    write_max: u64,
    syncs: u64,
    sync_ns: u64,
    sync_hist: [u64; SLOTS],
    comm: [u8; 16],
    name: [u8; NAME_LEN],
    fsyncs: u64,
    fdatasyncs: u64,
    busy_ns: u64,
}

/// `struct missed_val`: a process's requests not counted, and counted in part.
#[cfg(feature = "bpf")]
#[repr(C)]
#[derive(Clone, Copy)]
struct MissedVal {
    requests: u64,
    partial: u64,
}

// SAFETY: plain #[repr(C)] integers and byte arrays laid out as the C structs of
// bpf/files.bpf.c (no implicit holes: every field is 4- or 8-byte aligned in order); any bit
// pattern is valid.
#[cfg(feature = "bpf")]
unsafe impl Pod for FileKey {}
// SAFETY: as above.
#[cfg(feature = "bpf")]
unsafe impl Pod for FileVal {}
// SAFETY: as above.
#[cfg(feature = "bpf")]
unsafe impl Pod for MissedVal {}

/// In a build without the `bpf` feature: a tracer that never starts (see [`super::missing`]).
#[cfg(not(feature = "bpf"))]
pub(crate) struct FileTracer(std::convert::Infallible);

#[cfg(not(feature = "bpf"))]
impl FileTracer {
    /// Always the missing feature, as a refusal.
    pub(crate) fn start() -> Result<FileTracer, super::Refusal> {
        Err(super::missing())
    }

    /// Never called: there is no tracer.
    pub(crate) fn totals(&self) -> Vec<FileIo> {
        match self.0 {}
    }

    /// Never called: there is no tracer.
    pub(crate) fn uncounted(&self) -> Vec<Uncounted> {
        match self.0 {}
    }

    /// Never called: there is no tracer.
    pub(crate) fn io_threads(&self) -> std::collections::HashMap<u32, u64> {
        match self.0 {}
    }
}

/// What the tracer saw a process ask for but could not count whole: the kernel program reads a
/// bounded number of requests per `io_submit` and of buffers per vectored request.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub(crate) struct Uncounted {
    /// Thread-group id (the process id).
    pub(crate) pid: u32,
    /// Requests whose bytes are in no row: past the first [`MAX_IOCBS`] of one `io_submit`,
    /// unreadable, or for a file when no room was left for a new one.
    pub(crate) requests: u64,
    /// Vectored `io_submit` requests whose bytes were counted for their first
    /// [`MAX_IOVECS`] buffers only.
    pub(crate) partial: u64,
}

/// The `MAX_IOCBS` and `MAX_IOVECS` of bpf/files.bpf.c, for what is said of [`Uncounted`].
pub(crate) const MAX_IOCBS: u64 = 128;
/// See [`MAX_IOCBS`].
pub(crate) const MAX_IOVECS: u64 = 8;

/// What one process did to one file since the tracer started.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub(crate) struct FileIo {
    /// Thread-group id (the process id).
    pub(crate) pid: u32,
    /// Its command name when it first touched the file, invalid UTF-8 shown as U+FFFD
    /// (escape it).
    pub(crate) comm: String,
    /// The name's exact bytes in hex, only when they are not UTF-8 (see [`crate::text`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) comm_hex: Option<String>,
    /// The file's device as userspace numbers it (major, minor).
    pub(crate) dev: (u32, u32),
    /// The file's inode number.
    pub(crate) ino: u64,
    /// The inode's generation: a reused inode number comes with a new one.
    pub(crate) generation: u32,
    /// The file's last path component at its first I/O, raw from the kernel (at most 55
    /// bytes): a path names this file only if it ends in it.
    #[serde(skip)]
    pub(crate) name: Vec<u8>,
    /// Bytes returned by read-family calls.
    pub(crate) read_bytes: u64,
    /// Read-family calls that returned.
    pub(crate) reads: u64,
    /// Bytes written by write-family calls.
    pub(crate) write_bytes: u64,
    /// Write-family calls that returned.
    pub(crate) writes: u64,
    /// Smallest and largest single write (bytes); `None` without writes.
    pub(crate) write_range: Option<(u64, u64)>,
    /// fsync, fdatasync and sync_file_range calls.
    pub(crate) syncs: u64,
    /// Their total time, ns.
    pub(crate) sync_ns: u64,
    /// Their latencies, counts per log2 µs slot.
    #[serde(skip)]
    pub(crate) sync_hist: Vec<u64>,
    /// Of `syncs`: fsync calls, and fdatasync calls (the rest are sync_file_range).
    #[serde(skip)]
    pub(crate) fsyncs: u64,
    #[serde(skip)]
    pub(crate) fdatasyncs: u64,
    /// Time the process's read, write and sync calls on the file took, summed, ns.
    #[serde(skip)]
    pub(crate) busy_ns: u64,
}

/// The loaded and attached programs.
#[cfg(feature = "bpf")]
pub(crate) struct FileTracer {
    ebpf: Ebpf,
}

#[cfg(feature = "bpf")]
impl FileTracer {
    /// Loads and attaches the programs; the error is a one-line reason for a note.
    pub(crate) fn start() -> Result<FileTracer, super::Refusal> {
        // Reads and writes through io_uring, where the kernel has it.
        let ebpf = super::load(
            OBJECT,
            &[],
            &[("sys_enter", "sys_enter"), ("sys_exit", "sys_exit")],
            &[("uring_complete", "io_uring_complete")],
            &[],
        )?;
        Ok(FileTracer { ebpf })
    }

    /// Every (process, file) seen since the start, most bytes first.
    pub(crate) fn totals(&self) -> Vec<FileIo> {
        let mut out = Vec::new();
        if let Some(map) = self.ebpf.map("by_file")
            && let Ok(map) = BpfHashMap::<_, FileKey, FileVal>::try_from(map)
        {
            for (key, val) in map.iter().flatten() {
                out.push(file_io(&key, &val));
            }
        }
        out.sort_by(|a, b| {
            (b.read_bytes + b.write_bytes)
                .cmp(&(a.read_bytes + a.write_bytes))
                .then(b.syncs.cmp(&a.syncs))
                .then(a.pid.cmp(&b.pid))
        });
        out
    }

    /// Per process, how many of its threads made a read, write or sync call on a regular file
    /// since the start (of the last 16384 such threads).
    pub(crate) fn io_threads(&self) -> std::collections::HashMap<u32, u64> {
        let mut out = std::collections::HashMap::new();
        if let Some(map) = self.ebpf.map("io_threads")
            && let Ok(map) = BpfHashMap::<_, u32, u32>::try_from(map)
        {
            for (_, pid) in map.iter().flatten() {
                *out.entry(pid).or_insert(0) += 1;
            }
        }
        out
    }

    /// Every process with requests not counted whole since the start, by pid.
    pub(crate) fn uncounted(&self) -> Vec<Uncounted> {
        let mut out = Vec::new();
        if let Some(map) = self.ebpf.map("missed")
            && let Ok(map) = BpfHashMap::<_, u32, MissedVal>::try_from(map)
        {
            for (pid, val) in map.iter().flatten() {
                out.push(Uncounted {
                    pid,
                    requests: val.requests,
                    partial: val.partial,
                });
            }
        }
        out.sort_by_key(|u| u.pid);
        out
    }
}

/// A C string's bytes, up to its NUL.
#[cfg(feature = "bpf")]
fn until_nul(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

#[cfg(feature = "bpf")]
fn file_io(key: &FileKey, val: &FileVal) -> FileIo {
    FileIo {
        pid: key.tgid,
        comm: String::from_utf8_lossy(until_nul(&val.comm)).into_owned(),
        comm_hex: crate::text::hex_if_not_utf8(until_nul(&val.comm)),
        // The kernel's s_dev packs major in the top 12 bits, minor in the low 20.
        dev: (key.dev >> 20, key.dev & 0xfffff),
        ino: key.ino,
        generation: key.generation,
        name: until_nul(&val.name).to_vec(),
        read_bytes: val.read_bytes,
        reads: val.reads,
        write_bytes: val.write_bytes,
        writes: val.writes,
        write_range: (val.writes > 0 && val.write_max > 0)
            .then_some((val.write_min, val.write_max)),
        syncs: val.syncs,
        sync_ns: val.sync_ns,
        sync_hist: val.sync_hist.to_vec(),
        fsyncs: val.fsyncs,
        fdatasyncs: val.fdatasyncs,
        busy_ns: val.busy_ns,
    }
}
