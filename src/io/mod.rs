//! The I/O engine: runs one [`JobSpec`] against an open file or block device and measures it.
//!
//! It knows nothing of targets, safety or reporting; the caller decides what may be written and
//! hands in a way to open the target (each worker opens its own descriptor, as fio's jobs do,
//! so the `sync` engine's file positions are not shared).

mod blocking;
pub mod buffer;
mod meter;
pub mod offsets;
pub mod spec;
pub mod stats;
mod uring;
pub mod worker;

pub use spec::{BsShare, EngineKind, JobParams, JobSpec, OpenSync, Rw, SyncEvery, SyncKind};
pub use stats::{CpuTime, LatencySummary, Measured, OpStats};
pub use uring::SUBMIT_BATCH as IO_URING_SUBMIT_BATCH;
pub use uring::available as io_uring_available;
pub use worker::Control;

use std::fs::File;
use std::io;
use std::sync::atomic::Ordering;
use worker::retry;

/// Why an engine stopped a test; each message names the operation and where it failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// io_uring could not be set up (blocked, disabled or unsupported by this kernel).
    #[error("cannot set up io_uring: {0}")]
    Setup(io::Error),
    /// The target could not be opened with the flags the test needs (O_DIRECT among them).
    #[error("cannot open the target: {0}")]
    Open(io::Error),
    /// One read, write or flush failed.
    #[error("{op} at offset {offset} failed: {source}")]
    Io {
        /// The operation: `read`, `write`, `seek` or `flush`.
        op: &'static str,
        /// Byte offset of the operation in the target.
        offset: u64,
        /// The kernel's error.
        source: io::Error,
    },
    /// A read or write moved fewer bytes than asked (past the end of a file or device).
    #[error("short {op} at offset {offset}: {got} of {want} bytes")]
    Short {
        /// `read` or `write`.
        op: &'static str,
        /// Byte offset of the operation in the target.
        offset: u64,
        /// Bytes moved.
        got: u64,
        /// Bytes asked for.
        want: u64,
    },
}

impl EngineError {
    pub(crate) fn io(op: &'static str, offset: u64, source: io::Error) -> Self {
        EngineError::Io { op, offset, source }
    }

    /// The OS error behind this failure, if any (EINVAL on O_DIRECT needs its own advice).
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            EngineError::Setup(e) | EngineError::Open(e) => e.raw_os_error(),
            EngineError::Io { source, .. } => source.raw_os_error(),
            EngineError::Short { .. } => None,
        }
    }
}

/// Runs a test: `numjobs` jobs, each one io_uring ring or, for blocking engines, `iodepth`
/// threads. Returns the merged measurements; the first worker error stops the others.
pub fn run_job(
    spec: &JobSpec,
    open: &(dyn Fn() -> io::Result<File> + Sync),
    ctl: &Control,
) -> Result<Measured, EngineError> {
    let threads_per_job = match spec.engine() {
        EngineKind::IoUring => 1,
        EngineKind::Psync | EngineKind::Sync => spec.iodepth(),
    };
    let workers = u64::from(spec.numjobs() * threads_per_job);
    let results: Vec<Result<Measured, EngineError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|stream| {
                scope.spawn(move || {
                    let result =
                        open()
                            .map_err(EngineError::Open)
                            .and_then(|file| match spec.engine() {
                                EngineKind::IoUring => uring::run(&file, spec, stream, ctl),
                                _ => blocking::run(&file, spec, stream, ctl),
                            });
                    if result.is_err() {
                        ctl.abort.store(true, Ordering::Relaxed);
                    }
                    result
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("engine workers do not panic"))
            .collect()
    });
    let mut total = Measured::default();
    for result in results {
        total.merge(&result?);
    }
    Ok(total)
}

/// Writes the first `len` bytes of `file` with random data, so that reads measure real blocks
/// (a sparse or never-written region reads as zeros straight from metadata, or from a thin
/// volume's nothing). Stops early, returning `Ok(false)`, when the caller asks it to stop.
pub fn fill(file: &File, len: u64, ctl: &Control) -> Result<bool, EngineError> {
    const CHUNK: u64 = 4 << 20;
    let mut rng = fastrand::Rng::new();
    let mut buf = buffer::AlignedBuf::random(CHUNK as usize, &mut rng);
    let mut offset = 0;
    while offset < len {
        if ctl.stopped() {
            return Ok(false);
        }
        let n = CHUNK.min(len - offset) as usize;
        buf.scramble(offset);
        // A short write is retried for the rest, so a full filesystem shows as ENOSPC.
        let mut done = 0;
        while done < n {
            let at = offset + done as u64;
            let rest = &buf.as_slice()[done..n];
            let written = retry(|| rustix::io::pwrite(file, rest, at))
                .map_err(|e| EngineError::io("write", at, e.into()))?;
            if written == 0 {
                return Err(EngineError::Short {
                    op: "write",
                    offset: at,
                    got: 0,
                    want: (n - done) as u64,
                });
            }
            done += written;
        }
        offset += n as u64;
        ctl.progress(0, n as u64);
    }
    file.sync_data()
        .map_err(|e| EngineError::io("flush", 0, e))?;
    Ok(true)
}

/// Drops the target's pages from the page cache (fio's `invalidate=1`), so a buffered test
/// starts cold instead of reading what the previous test left in RAM.
pub fn drop_cached_pages(file: &File) {
    // Best effort: dirty pages are written first, and failure only means a warmer cache.
    let _ = file.sync_data();
    let _ = rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::DontNeed);
}
