//! What every engine's worker shares: which operation comes next, and when to measure.

use super::offsets::Offsets;
use super::spec::{JobSpec, Rw, SyncEvery};
use rustix::io::Errno;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Shared between the workers of a test and whoever watches them.
#[derive(Default)]
pub struct Control {
    /// Set by a signal handler or the caller: finish in-flight I/O and stop.
    pub stop: std::sync::Arc<AtomicBool>,
    /// Set when one worker failed, so the others stop too.
    pub(crate) abort: AtomicBool,
    /// Set when the test has measured enough (a sustained test's rate stayed flat): the
    /// workers finish as at the end of their runtime; cleared before the next test.
    ended: AtomicBool,
    /// Completed I/Os and bytes so far, for a progress display.
    pub done_ios: AtomicU64,
    /// Bytes of the I/Os counted in `done_ios`.
    pub done_bytes: AtomicU64,
}

impl Control {
    /// Controls for a test that `stop` can end early.
    pub fn new(stop: std::sync::Arc<AtomicBool>) -> Self {
        Control {
            stop,
            ..Control::default()
        }
    }

    /// True once the caller asked to stop or a worker failed.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.abort.load(Ordering::Relaxed)
    }

    /// Ends the running test as if its runtime were over (not an interruption).
    pub fn end(&self) {
        self.ended.store(true, Ordering::Relaxed);
    }

    /// True once [`Control::end`] ended the running test.
    pub fn ended(&self) -> bool {
        self.ended.load(Ordering::Relaxed)
    }

    /// Lets the next test run its whole time again.
    pub fn clear_end(&self) {
        self.ended.store(false, Ordering::Relaxed);
    }

    pub(crate) fn progress(&self, ios: u64, bytes: u64) {
        self.done_ios.fetch_add(ios, Ordering::Relaxed);
        self.done_bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// Direction of one I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Data from the target into memory.
    Read,
    /// Data from memory to the target.
    Write,
}

impl Dir {
    /// The word for the operation in errors and counters (`read`, `write`).
    pub fn op_name(self) -> &'static str {
        match self {
            Dir::Read => "read",
            Dir::Write => "write",
        }
    }
}

/// Chooses direction and offset of each I/O, and when a flush is due.
pub struct Picker {
    align: u64,
    bs: u64,
    /// Cumulative percentages of a block-size mix: (upper bound, size).
    mix: Vec<(u8, u64)>,
    read_pct: u8,
    reads: Offsets,
    writes: Offsets,
    rng: fastrand::Rng,
    sync: Option<SyncEvery>,
    writes_since_sync: u32,
}

impl Picker {
    /// `stream` distinguishes the workers of one test, so they do not walk in lockstep.
    pub fn new(spec: &JobSpec, stream: u64) -> Self {
        let seed = spec.seed() ^ stream.wrapping_mul(0xA076_1D64_78BD_642F);
        let offsets = |salt: u64| {
            if spec.rw().is_random() {
                Offsets::random(spec.blocks(), seed ^ salt)
            } else {
                Offsets::sequential(spec.blocks())
            }
        };
        let read_pct = match spec.rw() {
            Rw::ReadWrite | Rw::RandRw => spec.rwmixread(),
            other => other.read_pct(0),
        };
        let mut total = 0u8;
        let mix = spec
            .bssplit()
            .iter()
            .map(|share| {
                total = total.saturating_add(share.pct);
                (total, share.size)
            })
            .collect();
        Picker {
            align: spec.align(),
            bs: spec.bs(),
            mix,
            read_pct,
            reads: offsets(1),
            writes: offsets(2),
            rng: fastrand::Rng::with_seed(seed),
            sync: spec.sync(),
            writes_since_sync: 0,
        }
    }

    /// Direction, byte offset and length of the next I/O.
    #[inline]
    pub fn next_op(&mut self) -> (Dir, u64, u64) {
        let dir = match self.read_pct {
            100 => Dir::Read,
            0 => Dir::Write,
            pct => {
                if self.rng.u8(0..100) < pct {
                    Dir::Read
                } else {
                    Dir::Write
                }
            }
        };
        let block = match dir {
            Dir::Read => self.reads.next_block(),
            Dir::Write => {
                self.writes_since_sync += 1;
                self.writes.next_block()
            }
        };
        let len = if self.mix.is_empty() {
            self.bs
        } else {
            let roll = self.rng.u8(0..100);
            self.mix
                .iter()
                .find(|(upper, _)| roll < *upper)
                .map_or(self.bs, |&(_, size)| size)
        };
        (dir, block * self.align, len)
    }

    /// True once, after every N-th write, when a flush must follow.
    pub fn sync_due(&mut self) -> bool {
        match self.sync {
            Some(s) if self.writes_since_sync >= s.every => {
                self.writes_since_sync = 0;
                true
            }
            _ => false,
        }
    }

    /// This worker's random source (mix choices), seeded from the job's seed.
    pub fn rng(&mut self) -> &mut fastrand::Rng {
        &mut self.rng
    }
}

/// The time frame of one worker: warm-up (ramp), then the measured window.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    /// When the ramp ends and I/Os start to count.
    pub measure_from: Instant,
    /// When the worker stops submitting.
    pub end: Instant,
}

impl Window {
    /// A window from now: `ramp` of warm-up, then `runtime` measured.
    pub fn starting_now(ramp: Duration, runtime: Duration) -> Self {
        let start = Instant::now();
        Window {
            measure_from: start + ramp,
            end: start + ramp + runtime,
        }
    }
}

/// Calls `call` again while a signal interrupts it (the engines' system calls, through rustix).
pub fn retry<T>(mut call: impl FnMut() -> Result<T, Errno>) -> Result<T, Errno> {
    loop {
        match call() {
            Err(Errno::INTR) => continue,
            done => return done,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::spec::{EngineKind, JobParams};

    fn spec(rw: Rw, rwmixread: u8) -> JobSpec {
        JobSpec::new(JobParams {
            rw,
            bs: 4096,
            iodepth: 1,
            numjobs: 1,
            region_bytes: 4096 * 100,
            runtime: Duration::from_secs(1),
            ramp: Duration::ZERO,
            io_limit: None,
            bssplit: Vec::new(),
            rwmixread,
            sync: Some(SyncEvery {
                kind: crate::io::spec::SyncKind::Fdatasync,
                every: 3,
            }),
            open_sync: None,
            direct: true,
            engine: EngineKind::IoUring,
            seed: 9,
        })
        .unwrap()
    }

    #[test]
    fn mix_follows_rwmixread() {
        let mut p = Picker::new(&spec(Rw::RandRw, 70), 0);
        let reads = (0..10_000).filter(|_| p.next_op().0 == Dir::Read).count();
        assert!((6_700..7_300).contains(&reads), "{reads} reads of 10000");
    }

    #[test]
    fn offsets_are_block_aligned_and_in_region() {
        let mut p = Picker::new(&spec(Rw::RandWrite, 0), 1);
        for _ in 0..1000 {
            let (dir, off, len) = p.next_op();
            assert_eq!(len, 4096);
            assert_eq!(dir, Dir::Write);
            assert_eq!(off % 4096, 0);
            assert!(off < 4096 * 100);
        }
    }

    #[test]
    fn sync_after_every_n_writes() {
        let mut p = Picker::new(&spec(Rw::Write, 0), 0);
        let mut pattern = String::new();
        for _ in 0..7 {
            p.next_op();
            pattern.push(if p.sync_due() { 'S' } else { 'w' });
        }
        assert_eq!(pattern, "wwSwwSw");
    }

    #[test]
    fn workers_walk_different_orders() {
        let s = spec(Rw::RandRead, 100);
        let mut a = Picker::new(&s, 0);
        let mut b = Picker::new(&s, 1);
        let first: Vec<_> = (0..20).map(|_| a.next_op().1).collect();
        let second: Vec<_> = (0..20).map(|_| b.next_op().1).collect();
        assert_ne!(first, second);
    }
}
