//! The load workers. Each runs on its own thread until `stop` is set, adding the work it has
//! done to a shared counter so the sampler can print rates every second. Each checks `stop`
//! at least every few milliseconds (one page batch, one 1 MiB write, one sync) so a run ends
//! promptly at its time-out or on a signal.

use crate::cpubench::KernelName;
use crate::cpubench::kernels::Kernel;
use rustix::fs::{AtFlags, Mode, OFlags};
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const PAGE: usize = 4096;

/// Why a worker stopped before it was told to.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// `--vm-bytes` does not fit this machine's address space.
    #[error("--vm-bytes is too large")]
    VmTooLarge,
    /// The kernel refused the memory of a vm worker.
    #[error("cannot allocate {len} bytes for a vm worker: {source}")]
    Allocate {
        /// Bytes asked for.
        len: usize,
        /// mmap's error.
        source: std::io::Error,
    },
    /// The hdd worker's file could not be created, written or removed.
    #[error("cannot {action} {name} in the test directory: {source}")]
    HddFile {
        /// `create`, `write` or `remove`.
        action: &'static str,
        /// The file's name in the test directory.
        name: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// A worker thread panicked.
    #[error("a worker thread panicked")]
    Panicked,
}

/// Busy share of `load_pct` in each period of this length, sleeping the rest (as the usual
/// duty-cycle load generators do); short enough that `top` shows a steady percentage.
const LOAD_PERIOD: Duration = Duration::from_millis(100);

/// Integer kernel batches; counts ops (one op = one round of the integer kernel).
pub fn cpu(load_pct: u8, stop: &AtomicBool, ops: &AtomicU64) {
    let mut kernel = Kernel::new(KernelName::Integer);
    let per_batch = KernelName::Integer.batch_ops();
    let busy = LOAD_PERIOD.mul_f64(f64::from(load_pct) / 100.0);
    let mut sink = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let period = Instant::now();
        while period.elapsed() < busy && !stop.load(Ordering::Relaxed) {
            sink ^= kernel.batch();
            ops.fetch_add(per_batch, Ordering::Relaxed);
        }
        if load_pct < 100 {
            std::thread::sleep(LOAD_PERIOD.saturating_sub(period.elapsed()));
        }
    }
    std::hint::black_box(sink);
}

/// An anonymous private mapping (see [`crate::mapping::Mapping::anonymous`]) that the worker
/// writes page by page.
struct Block(crate::mapping::Mapping);

impl Block {
    fn new(len: usize) -> Result<Block, WorkerError> {
        crate::mapping::Mapping::anonymous(len)
            .map(Block)
            .map_err(|source| WorkerError::Allocate { len, source })
    }

    /// Writes one byte in each page from `from`, at most `pages` pages; returns pages touched.
    fn touch(&mut self, from: usize, pages: usize, value: u8) -> usize {
        let total = self.0.len().div_ceil(PAGE);
        let end = (from + pages).min(total);
        for p in from..end {
            // SAFETY: p * PAGE < len, inside the mapping this struct owns; a volatile write
            // so the compiler keeps every touch.
            unsafe { self.0.as_ptr().add(p * PAGE).write_volatile(value) };
        }
        end.saturating_sub(from)
    }
}

/// Pages touched between checks of `stop` (4 MiB).
const PAGES_PER_STEP: usize = 1024;

/// Allocate `bytes`, write every page, free, repeat; with `keep`, allocate once and keep
/// re-writing. Counts bytes touched (pages × 4 KiB). With `passes`, returns after that many
/// whole passes (a fixed amount of work, so its CPU time can be compared between settings).
pub fn vm(
    bytes: u64,
    keep: bool,
    passes: Option<u64>,
    stop: &AtomicBool,
    touched: &AtomicU64,
) -> Result<(), WorkerError> {
    let len = usize::try_from(bytes).map_err(|_| WorkerError::VmTooLarge)?;
    let pages = len.div_ceil(PAGE);
    let mut kept: Option<Block> = None;
    let mut round = 0u8;
    let mut passed = 0u64;
    while !stop.load(Ordering::Relaxed) && passes.is_none_or(|n| passed < n) {
        passed += 1;
        round = round.wrapping_add(1).max(1);
        let mut map = match kept.take() {
            Some(m) => m,
            None => Block::new(len)?,
        };
        let mut done = 0;
        while done < pages && !stop.load(Ordering::Relaxed) {
            let n = map.touch(done, PAGES_PER_STEP, round);
            done += n;
            touched.fetch_add((n * PAGE) as u64, Ordering::Relaxed);
        }
        if keep {
            kept = Some(map);
        }
    }
    Ok(())
}

/// sync() in a loop; counts calls.
pub fn io(stop: &AtomicBool, syncs: &AtomicU64) {
    while !stop.load(Ordering::Relaxed) {
        rustix::fs::sync();
        syncs.fetch_add(1, Ordering::Relaxed);
    }
}

/// Bytes per write() of the hdd worker.
const HDD_CHUNK: usize = 1 << 20;

/// The name of the hdd worker's file in the test directory.
pub fn hdd_file(worker: usize) -> String {
    format!("hdd.{worker}")
}

/// Write `bytes` to a file in `dir`, delete it, repeat; counts bytes written. The file is
/// created with `O_EXCL|O_NOFOLLOW` and unlinked relative to the directory's descriptor, so
/// no name planted by someone else is ever followed (see [`super::testdir`]).
pub fn hdd(
    dir: &OwnedFd,
    worker: usize,
    bytes: u64,
    stop: &AtomicBool,
    written: &AtomicU64,
) -> Result<(), WorkerError> {
    let name = hdd_file(worker);
    let fail = |action: &'static str, source: std::io::Error| WorkerError::HddFile {
        action,
        name: name.clone(),
        source,
    };
    // Random contents: a compressing filesystem must not shrink the load.
    let mut rng = fastrand::Rng::with_seed(worker as u64);
    let chunk: Vec<u8> = (0..HDD_CHUNK.min(bytes as usize).max(1))
        .map(|_| rng.u8(..))
        .collect();
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    while !stop.load(Ordering::Relaxed) {
        let mut file = rustix::fs::openat(dir, &name, flags, Mode::from_raw_mode(0o600))
            .map(File::from)
            .map_err(|e| fail("create", e.into()))?;
        let mut left = bytes;
        while left > 0 && !stop.load(Ordering::Relaxed) {
            let n = (left as usize).min(chunk.len());
            file.write_all(&chunk[..n]).map_err(|e| fail("write", e))?;
            left -= n as u64;
            written.fetch_add(n as u64, Ordering::Relaxed);
        }
        drop(file);
        rustix::fs::unlinkat(dir, &name, AtFlags::empty()).map_err(|e| fail("remove", e.into()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Runs `work` on a thread until `count` reaches `least` (at most 30 s: a loaded CI
    /// machine can leave the thread unscheduled for a while), stops it, returns its result.
    fn until<T: Send + 'static>(
        count: &AtomicU64,
        least: u64,
        work: impl FnOnce(Arc<AtomicBool>) -> T + Send + 'static,
    ) -> T {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let h = std::thread::spawn(move || work(s));
        let end = std::time::Instant::now() + Duration::from_secs(30);
        while count.load(Ordering::Relaxed) < least && std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap()
    }

    #[test]
    fn workers_count_their_work_and_stop() {
        let ops = Arc::new(AtomicU64::new(0));
        let o = Arc::clone(&ops);
        until(&ops, 1, move |s| cpu(50, &s, &o));
        assert!(ops.load(Ordering::Relaxed) > 0);

        let touched = Arc::new(AtomicU64::new(0));
        let t = Arc::clone(&touched);
        until(&touched, 1 << 20, move |s| vm(1 << 20, true, None, &s, &t)).unwrap();
        assert!(touched.load(Ordering::Relaxed) >= 1 << 20);

        let dir = tempfile::tempdir().unwrap();
        let written = Arc::new(AtomicU64::new(0));
        let fd: OwnedFd = File::open(dir.path()).unwrap().into();
        let w = Arc::clone(&written);
        until(&written, 100_000, move |s| hdd(&fd, 0, 100_000, &s, &w)).unwrap();
        assert!(written.load(Ordering::Relaxed) >= 100_000);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_vm_worker_with_passes_stops_after_that_much_work() {
        let (stop, touched) = (AtomicBool::new(false), AtomicU64::new(0));
        vm(1 << 20, false, Some(3), &stop, &touched).unwrap();
        assert_eq!(touched.load(Ordering::Relaxed), 3 << 20);
    }

    #[test]
    fn mapping_failure_is_an_error_not_an_abort() {
        let stop = AtomicBool::new(false);
        let err = vm(1 << 62, false, None, &stop, &AtomicU64::new(0))
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot allocate"), "{err}");
    }
}
