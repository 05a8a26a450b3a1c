//! `tacho ping`: ioping's latency probe. One small I/O at a time, one per interval, at a
//! random offset of a working set, each timed on its own; then ioping's summary (requests,
//! min/avg/max/mdev, IOPS and throughput over the time spent in requests), kept as running
//! figures ([`Tally`]) so that an endless ping runs in constant memory.
//!
//! The first request is a warm-up (ioping's `-a 1`): shown, not counted.

use super::target::Target;
use crate::io::buffer::AlignedBuf;
use crate::io::worker::retry;
use crate::io::{Control, EngineError};
use serde::Serialize;
use std::time::{Duration, Instant};

/// Requests shown but not counted, as ioping's default `-a 1`.
pub const WARMUP: u64 = 1;
/// ioping's working set in a directory: a 1 MiB test file.
pub const DIRECTORY_WORK_SIZE: u64 = 1 << 20;

/// What to ping with.
#[derive(Debug, Clone)]
pub struct PingOptions {
    /// Requests to make, the warm-up included; `None` until interrupted.
    pub count: Option<u64>,
    /// From the start of one request to the start of the next.
    pub interval: Duration,
    /// Bytes per request.
    pub size: u64,
    /// Bytes of the target the offsets are drawn from, from offset 0.
    pub work_size: u64,
    /// Writes instead of reads.
    pub write: bool,
    /// O_DIRECT; without it, a read's range is dropped from the page cache first (ioping's
    /// default), and a write stays in the page cache.
    pub direct: bool,
}

/// One request.
#[derive(Debug, Clone, Serialize)]
pub struct Request {
    /// 1 for the first.
    pub request: u64,
    /// Byte offset in the target.
    pub offset: u64,
    /// Bytes transferred.
    pub bytes: u64,
    /// How long the request took.
    pub time_ns: u64,
    /// Shown but not counted in the summary.
    pub warmup: bool,
}

/// ioping's statistics over the counted requests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Counted requests.
    pub requests: u64,
    /// Time spent in them.
    pub total_ns: u64,
    /// Bytes they moved.
    pub bytes: u64,
    /// Fastest request.
    pub min_ns: u64,
    /// Mean.
    pub avg_ns: u64,
    /// Slowest request.
    pub max_ns: u64,
    /// Standard deviation (of the population, as ioping's mdev).
    pub mdev_ns: u64,
    /// Requests per second of request time.
    pub iops: f64,
    /// Bytes per second of request time.
    pub bytes_per_s: f64,
}

/// Running figures of the counted requests: exactly what the summary needs, in constant
/// memory (the mean and the squared deviations by Welford's method, which stays exact where a
/// sum of squares of nanoseconds would lose digits).
#[derive(Debug, Clone, Default)]
pub struct Tally {
    requests: u64,
    total_ns: u64,
    bytes: u64,
    min_ns: u64,
    max_ns: u64,
    mean_ns: f64,
    squared_deviations: f64,
}

impl Tally {
    /// Counts `r`, unless it is the warm-up.
    pub fn add(&mut self, r: &Request) {
        if r.warmup {
            return;
        }
        let first = self.requests == 0;
        self.requests += 1;
        self.total_ns = self.total_ns.saturating_add(r.time_ns);
        self.bytes = self.bytes.saturating_add(r.bytes);
        self.min_ns = if first {
            r.time_ns
        } else {
            self.min_ns.min(r.time_ns)
        };
        self.max_ns = self.max_ns.max(r.time_ns);
        let x = r.time_ns as f64;
        let delta = x - self.mean_ns;
        self.mean_ns += delta / self.requests as f64;
        self.squared_deviations += delta * (x - self.mean_ns);
    }

    /// The summary of the counted requests; `None` when there are none.
    pub fn summary(&self) -> Option<Summary> {
        if self.requests == 0 {
            return None;
        }
        let n = self.requests as f64;
        let secs = (self.total_ns as f64 / 1e9).max(1e-9);
        Some(Summary {
            requests: self.requests,
            total_ns: self.total_ns,
            bytes: self.bytes,
            min_ns: self.min_ns,
            avg_ns: (self.total_ns as f64 / n).round() as u64,
            max_ns: self.max_ns,
            mdev_ns: (self.squared_deviations / n).max(0.0).sqrt().round() as u64,
            iops: n / secs,
            bytes_per_s: self.bytes as f64 / secs,
        })
    }
}

/// Pings `target` until `count` requests are made or `ctl` stops it, handing each request to
/// `on_request` as it completes (nothing is kept here). Returns how many were made.
pub fn run(
    target: &Target,
    opts: &PingOptions,
    ctl: &Control,
    on_request: &mut dyn FnMut(&Request),
) -> Result<u64, EngineError> {
    let file = target.open(opts.direct).map_err(EngineError::Open)?;
    let mut rng = fastrand::Rng::new();
    let mut buf = AlignedBuf::random(opts.size as usize, &mut rng);
    let slots = (opts.work_size / opts.size).max(1);
    let mut n = 0;
    while opts.count.is_none_or(|c| n < c) && !ctl.stopped() {
        n += 1;
        let started = Instant::now();
        let offset = rng.u64(..slots) * opts.size;
        if !opts.direct && !opts.write {
            // Advice only: a filesystem that ignores it leaves the next read cached, which the
            // figures show.
            let _ = rustix::fs::fadvise(
                &file,
                offset,
                std::num::NonZeroU64::new(opts.size),
                rustix::fs::Advice::DontNeed,
            );
        }
        let len = buf.len();
        let t0 = Instant::now();
        let got = if opts.write {
            retry(|| rustix::io::pwrite(&file, buf.as_slice(), offset))
        } else {
            retry(|| rustix::io::pread(&file, buf.as_mut_slice(), offset))
        };
        let time_ns = t0.elapsed().as_nanos() as u64;
        let op = if opts.write { "write" } else { "read" };
        let got = got.map_err(|e| EngineError::io(op, offset, e.into()))?;
        if got != len {
            return Err(EngineError::Short {
                op,
                offset,
                got: got as u64,
                want: len as u64,
            });
        }
        let request = Request {
            request: n,
            offset,
            bytes: len as u64,
            time_ns,
            warmup: n <= WARMUP,
        };
        on_request(&request);
        if opts.count.is_some_and(|c| n >= c) {
            break;
        }
        sleep_until(started + opts.interval, ctl);
    }
    Ok(n)
}

/// Sleeps until `deadline`, waking early when `ctl` is stopped.
fn sleep_until(deadline: Instant, ctl: &Control) {
    while !ctl.stopped() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(n: u64, time_ns: u64) -> Request {
        Request {
            request: n,
            offset: 0,
            bytes: 4096,
            time_ns,
            warmup: n <= WARMUP,
        }
    }

    #[test]
    fn the_summary_is_iopings() {
        // The warm-up (1 ms) is left out; 100, 200, 300 µs remain.
        let tally = |reqs: &[Request]| {
            let mut t = Tally::default();
            reqs.iter().for_each(|r| t.add(r));
            t.summary()
        };
        let s = tally(&[
            req(1, 1_000_000),
            req(2, 100_000),
            req(3, 200_000),
            req(4, 300_000),
        ])
        .unwrap();
        assert_eq!(
            (s.requests, s.min_ns, s.avg_ns, s.max_ns),
            (3, 100_000, 200_000, 300_000)
        );
        // Population standard deviation: sqrt(((100)² + 0 + (100)²) / 3) µs.
        assert_eq!(s.mdev_ns, 81_650);
        assert_eq!(s.total_ns, 600_000);
        assert!((s.iops - 5000.0).abs() < 1e-6);
        assert!((s.bytes_per_s - 3.0 * 4096.0 / 600e-6).abs() < 1e-3);
        assert!(tally(&[req(1, 5)]).is_none());
    }
}
