//! What a test measured: per-direction counts and latency histograms, flush latency, CPU time.

use super::worker::Dir;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::time::Duration;

/// Highest latency the histograms hold exactly; slower I/Os are clamped to it (and `max` keeps
/// the true value). An hour is far beyond any I/O a healthy kernel lets live.
const MAX_TRACKABLE_NS: u64 = 3_600 * 1_000_000_000;

/// Latency of one kind of operation (reads, writes, or flushes).
#[derive(Clone, Debug)]
pub struct OpStats {
    /// Operations completed.
    pub ios: u64,
    /// Bytes they moved (0 for flushes).
    pub bytes: u64,
    sum_ns: u128,
    max_ns: u64,
    hist: Histogram<u64>,
}

impl Default for OpStats {
    fn default() -> Self {
        OpStats {
            ios: 0,
            bytes: 0,
            sum_ns: 0,
            max_ns: 0,
            // Three significant digits: percentiles are exact to 0.1%, like fio's own buckets.
            hist: Histogram::new_with_bounds(1, MAX_TRACKABLE_NS, 3)
                .expect("static histogram bounds are valid"),
        }
    }
}

impl OpStats {
    /// Counts one completed operation of `bytes` that took `latency_ns` nanoseconds.
    #[inline]
    pub fn record(&mut self, bytes: u64, latency_ns: u64) {
        self.ios += 1;
        self.bytes += bytes;
        self.sum_ns += u128::from(latency_ns);
        self.max_ns = self.max_ns.max(latency_ns);
        self.hist.saturating_record(latency_ns.max(1));
    }

    /// Adds another worker's counts and histogram to these.
    pub fn merge(&mut self, other: &OpStats) {
        self.ios += other.ios;
        self.bytes += other.bytes;
        self.sum_ns += other.sum_ns;
        self.max_ns = self.max_ns.max(other.max_ns);
        self.hist
            .add(&other.hist)
            .expect("histograms share the same bounds");
    }

    /// The latency histogram's recorded buckets as `[highest value in the bucket, count]`,
    /// lowest first: what another histogram of the same bounds re-records to merge them.
    pub fn buckets(&self) -> Vec<[u64; 2]> {
        self.hist
            .iter_recorded()
            .map(|v| [v.value_iterated_to(), v.count_at_value()])
            .collect()
    }

    /// Mean and percentiles; `None` when nothing was recorded.
    pub fn latency(&self) -> Option<LatencySummary> {
        if self.ios == 0 {
            return None;
        }
        let q = |quantile: f64| self.hist.value_at_quantile(quantile).min(self.max_ns);
        Some(LatencySummary {
            mean: (self.sum_ns / u128::from(self.ios)) as u64,
            p50: q(0.50),
            p90: q(0.90),
            p99: q(0.99),
            p99_9: q(0.999),
            p99_99: q(0.9999),
            max: self.max_ns,
        })
    }
}

/// Latency figures in nanoseconds (JSON: `lat_ns`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LatencySummary {
    /// Mean latency.
    pub mean: u64,
    /// Median latency.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p99_9: u64,
    /// 99.99th percentile.
    pub p99_99: u64,
    /// Slowest operation, exact (not clamped like the histogram).
    pub max: u64,
}

/// CPU time spent by tacho's own threads while measuring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CpuTime {
    /// User-mode CPU time, in seconds.
    pub user_s: f64,
    /// Kernel-mode CPU time, in seconds.
    pub sys_s: f64,
}

impl CpuTime {
    /// CPU time of the calling thread so far.
    pub fn of_this_thread() -> CpuTime {
        // SAFETY: getrusage writes into the zeroed struct we own; RUSAGE_THREAD is valid on Linux.
        let usage = unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_THREAD, &mut usage);
            usage
        };
        let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        CpuTime {
            user_s: secs(usage.ru_utime),
            sys_s: secs(usage.ru_stime),
        }
    }

    /// CPU time used between `earlier` and `self` (never negative).
    pub fn since(self, earlier: CpuTime) -> CpuTime {
        CpuTime {
            user_s: (self.user_s - earlier.user_s).max(0.0),
            sys_s: (self.sys_s - earlier.sys_s).max(0.0),
        }
    }

    /// Adds another thread's CPU time to this one.
    pub fn add(&mut self, other: CpuTime) {
        self.user_s += other.user_s;
        self.sys_s += other.sys_s;
    }
}

/// I/Os and bytes completed in each second of the measured window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    /// Operations completed in each second, index 0 being the first second of the window.
    pub ios: Vec<u64>,
    /// Bytes moved in each second, aligned with `ios`.
    pub bytes: Vec<u64>,
}

impl Timeline {
    /// Counts `ios` operations moving `bytes` in second `second` of the window, growing the lists
    /// as needed.
    #[inline]
    pub fn add(&mut self, second: usize, ios: u64, bytes: u64) {
        if second >= self.ios.len() {
            self.ios.resize(second + 1, 0);
            self.bytes.resize(second + 1, 0);
        }
        self.ios[second] += ios;
        self.bytes[second] += bytes;
    }

    /// Adds another worker's timeline to this one, second by second.
    pub fn merge(&mut self, other: &Timeline) {
        for (second, (&ios, &bytes)) in other.ios.iter().zip(&other.bytes).enumerate() {
            self.add(second, ios, bytes);
        }
    }
}

/// Everything one worker (or, merged, one test) measured.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// I/Os and bytes per second of the window.
    pub timeline: Timeline,
    /// Reads of the measured window.
    pub read: OpStats,
    /// Writes of the measured window.
    pub write: OpStats,
    /// fsync/fdatasync calls of the measured window.
    pub sync: OpStats,
    /// CPU time of the worker threads during the measured window.
    pub cpu: CpuTime,
    /// Length of the measured window (after the ramp); merged as the longest worker's window.
    pub elapsed: Duration,
    /// Bytes submitted over the whole test, ramp included: what the device should have seen.
    pub issued_read_bytes: u64,
    /// Bytes of writes submitted over the whole test, ramp included.
    pub issued_write_bytes: u64,
}

impl Measured {
    /// Counts bytes handed to the kernel (ramp included).
    #[inline]
    pub fn issued(&mut self, dir: Dir, bytes: u64) {
        match dir {
            Dir::Read => self.issued_read_bytes += bytes,
            Dir::Write => self.issued_write_bytes += bytes,
        }
    }

    /// Records one completed I/O of the measured window; `second` counts from its start.
    #[inline]
    pub fn completed(&mut self, dir: Dir, bytes: u64, latency_ns: u64, second: usize) {
        self.timeline.add(second, 1, bytes);
        match dir {
            Dir::Read => self.read.record(bytes, latency_ns),
            Dir::Write => self.write.record(bytes, latency_ns),
        }
    }

    /// True once another I/O of `bs` bytes would take the worker past `limit` bytes issued
    /// (fio's size-based end of a job: whole blocks only).
    pub fn reached(&self, limit: Option<u64>, bs: u64) -> bool {
        limit.is_some_and(|l| self.issued_read_bytes + self.issued_write_bytes + bs > l)
    }

    /// Adds another worker's figures to these; the window is the longest of the two.
    pub fn merge(&mut self, other: &Measured) {
        self.read.merge(&other.read);
        self.write.merge(&other.write);
        self.timeline.merge(&other.timeline);
        self.sync.merge(&other.sync);
        self.cpu.add(other.cpu);
        self.elapsed = self.elapsed.max(other.elapsed);
        self.issued_read_bytes += other.issued_read_bytes;
        self.issued_write_bytes += other.issued_write_bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut s = OpStats::default();
        for ns in 1..=10_000u64 {
            s.record(4096, ns * 1000);
        }
        let l = s.latency().unwrap();
        assert_eq!(s.ios, 10_000);
        assert_eq!(s.bytes, 10_000 * 4096);
        assert_eq!(l.mean, 5_000_500);
        assert_eq!(l.max, 10_000_000);
        let close = |got: u64, want: u64| (got as f64 - want as f64).abs() / want as f64 <= 0.001;
        assert!(close(l.p50, 5_000_000), "p50 {}", l.p50);
        assert!(close(l.p90, 9_000_000), "p90 {}", l.p90);
        assert!(close(l.p99, 9_900_000), "p99 {}", l.p99);
        assert!(close(l.p99_9, 9_990_000), "p99.9 {}", l.p99_9);
        assert!(l.p99_99 <= l.max);
    }

    #[test]
    fn slowest_tenth_of_a_percent_shows_in_p99_99_only() {
        let mut s = OpStats::default();
        for _ in 0..9_990 {
            s.record(1, 100_000);
        }
        for _ in 0..10 {
            s.record(1, 50_000_000);
        }
        let l = s.latency().unwrap();
        assert!(l.p99_9 < 101_000);
        assert!(l.p99_99 >= 49_000_000);
        assert_eq!(l.max, 50_000_000);
    }

    #[test]
    fn latencies_beyond_an_hour_keep_their_max() {
        let mut s = OpStats::default();
        s.record(1, MAX_TRACKABLE_NS * 2);
        assert_eq!(s.latency().unwrap().max, MAX_TRACKABLE_NS * 2);
    }

    #[test]
    fn empty_has_no_latency() {
        assert!(OpStats::default().latency().is_none());
    }

    #[test]
    fn merge_adds_counts() {
        let mut a = Measured::default();
        let mut b = Measured::default();
        a.completed(Dir::Read, 10, 5, 0);
        b.completed(Dir::Read, 10, 7, 2);
        b.elapsed = Duration::from_secs(2);
        a.merge(&b);
        assert_eq!(a.read.ios, 2);
        assert_eq!(a.read.latency().unwrap().max, 7);
        assert_eq!(a.elapsed, Duration::from_secs(2));
        assert_eq!(a.timeline.ios, vec![1, 0, 1]);
        assert_eq!(a.timeline.bytes, vec![10, 0, 10]);
    }
}
