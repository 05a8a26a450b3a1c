//! The block tracer's log-linear latency buckets (mirror of `bpf/hist.h`) and the figures read
//! from them. A latency in nanoseconds is converted to units of 1/1024 µs; values under 16 units
//! get a bucket each, and every octave `[2^o, 2^(o+1))` above is split into 16 equal buckets,
//! so a percentile interpolated in its bucket is off by under 1/16 of the value. Octave 10 starts
//! at exactly 1 µs, so the buckets also add up exactly to a log2 µs histogram (biolatency's).

/// Buckets of one histogram (`HIST_BUCKETS` in bpf/hist.h).
#[cfg(any(test, feature = "bpf"))]
pub(crate) const BUCKETS: usize = 624;

/// Slots of the log2 µs histogram the buckets fold into: slot `i` holds `[2^i, 2^(i+1))` µs,
/// slot 0 also everything under 1 µs, the last one everything longer.
pub(crate) const LOG2_SLOTS: usize = 32;

/// The bucket of a latency, as `hist_bucket` in bpf/hist.h computes it (used by tests, and
/// kept beside the bounds it must agree with).
#[cfg(test)]
pub(crate) fn bucket(ns: u64) -> usize {
    let v = (ns << 7) / 125;
    if v < 16 {
        return v as usize;
    }
    let o = 63 - v.leading_zeros() as usize;
    if o > 41 {
        return BUCKETS - 1;
    }
    (o - 3) * 16 + ((v >> (o - 4)) & 15) as usize
}

/// Buckets of a process's histogram (`PROC_HIST_BUCKETS` in bpf/hist.h): coarser, as every
/// process slot holds one.
pub(crate) const PROC_BUCKETS: usize = 96;

/// The bucket of a process's request time, as `proc_hist_bucket` in bpf/hist.h computes it.
#[cfg(test)]
pub(crate) fn proc_bucket(ns: u64) -> usize {
    let v = ns >> 10;
    if v < 4 {
        return v as usize;
    }
    let o = 63 - v.leading_zeros() as usize;
    if o > 24 {
        return PROC_BUCKETS - 1;
    }
    (o - 1) * 4 + ((v >> (o - 2)) & 3) as usize
}

/// The bounds of a process bucket in µs, `[low, high)`: units of 1024 ns, one bucket each
/// below 4 units, then each octave split in four.
pub(crate) fn proc_bounds_us(bucket: usize) -> (f64, f64) {
    let (low, high) = if bucket < 4 {
        (bucket as u64, bucket as u64 + 1)
    } else {
        let o = bucket / 4 + 1;
        let sub = (bucket % 4) as u64;
        ((4 + sub) << (o - 2), (5 + sub) << (o - 2))
    };
    (low as f64 * 1.024, high as f64 * 1.024)
}

/// The latency (µs) below which `quantile` of a process's requests fall, from its sparse
/// histogram (bucket, count) as [`crate::bpf::block::ProcIo`] keeps it; `None` when empty.
pub(crate) fn proc_percentile_us(sparse: &[(u16, u64)], quantile: f64) -> Option<f64> {
    // Counted in f64: a hostile history's counts near u64::MAX cannot overflow a sum.
    let mut hist = vec![0f64; PROC_BUCKETS];
    for &(b, c) in sparse {
        if let Some(slot) = hist.get_mut(b as usize) {
            *slot += c as f64;
        }
    }
    let total: f64 = hist.iter().sum();
    if total <= 0.0 {
        return None;
    }
    let rank = quantile.clamp(0.0, 1.0) * total;
    let mut seen = 0.0;
    for (bucket, &count) in hist.iter().enumerate() {
        if count == 0.0 {
            continue;
        }
        if seen + count >= rank {
            let (low, high) = proc_bounds_us(bucket);
            return Some(low + (high - low) * ((rank - seen) / count));
        }
        seen += count;
    }
    None
}

/// The bounds of a bucket in µs, `[low, high)`.
pub(crate) fn bounds_us(bucket: usize) -> (f64, f64) {
    let (low, high) = if bucket < 16 {
        (bucket as u64, bucket as u64 + 1)
    } else {
        let o = bucket / 16 + 3;
        let sub = (bucket % 16) as u64;
        ((16 + sub) << (o - 4), (17 + sub) << (o - 4))
    };
    (low as f64 / 1024.0, high as f64 / 1024.0)
}

/// The latency (µs) below which `quantile` (0..1) of the requests fall, interpolated linearly
/// inside its bucket; `None` for an empty histogram.
pub(crate) fn percentile_us(hist: &[u64], quantile: f64) -> Option<f64> {
    percentile(hist, quantile, bounds_us)
}

/// The same over a log2 µs histogram (slot `i` holds `[2^i, 2^(i+1))` µs, slot 0 also below
/// 1 µs), as the file tracer's sync latencies are kept.
pub(crate) fn log2_percentile_us(hist: &[u64], quantile: f64) -> Option<f64> {
    percentile(hist, quantile, |slot| {
        let low = if slot == 0 {
            0.0
        } else {
            (1u64 << slot) as f64
        };
        (low, (1u64 << (slot + 1)) as f64)
    })
}

fn percentile(hist: &[u64], quantile: f64, bounds: impl Fn(usize) -> (f64, f64)) -> Option<f64> {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = quantile.clamp(0.0, 1.0) * total as f64;
    let mut seen = 0u64;
    for (bucket, &count) in hist.iter().enumerate() {
        if count == 0 {
            continue;
        }
        if (seen + count) as f64 >= rank {
            let (low, high) = bounds(bucket);
            let within = (rank - seen as f64) / count as f64;
            return Some(low + (high - low) * within);
        }
        seen += count;
    }
    None
}

/// The same counts as a log2 µs histogram (whole octaves add up exactly).
pub(crate) fn log2_us(hist: &[u64]) -> Vec<u64> {
    let mut out = vec![0; LOG2_SLOTS];
    for (bucket, &count) in hist.iter().enumerate() {
        // Octave 10 (bucket 112) is [1, 2) µs: log2 slot 0 also takes everything below it.
        let slot = (bucket / 16 + 3).saturating_sub(10).min(LOG2_SLOTS - 1);
        out[slot] += count;
    }
    out
}

/// One interval's latencies folded into log2 µs slots (as [`log2_us`]), with their sum.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Log2Hist {
    /// Requests per slot: slot `i` holds `[2^i, 2^(i+1))` µs, slot 0 also everything under
    /// 1 µs, the last one everything longer.
    pub(crate) slots: Vec<u64>,
    /// The requests' time together in µs, each counted at its fine bucket's middle (a bucket
    /// is at most 1/16 of its lower bound wide, so within 1/32 of the exact sum).
    pub(crate) sum_us: f64,
}

impl Log2Hist {
    /// The log2 view and the estimated sum of a log-linear histogram.
    pub(crate) fn of(hist: &[u64]) -> Log2Hist {
        let sum_us = hist
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(b, &c)| {
                let (low, high) = bounds_us(b);
                c as f64 * (low + high) / 2.0
            })
            .sum();
        Log2Hist {
            slots: log2_us(hist),
            sum_us,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn octaves_start_on_whole_microseconds() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bounds_us(bucket(1_000)), (1.0, 1.0625));
        assert_eq!(bucket(1_000), 112);
        assert_eq!(bounds_us(bucket(2_000)).0, 2.0);
        assert_eq!(bounds_us(bucket(1_024_000)).0, 1024.0);
        assert_eq!(bucket(u64::MAX >> 8), BUCKETS - 1);
    }

    #[test]
    fn a_log2_view_keeps_the_sum_within_its_buckets() {
        let mut hist = vec![0; BUCKETS];
        hist[bucket(1_500)] = 2;
        hist[bucket(100_000)] = 1;
        let l = Log2Hist::of(&hist);
        assert_eq!(l.slots.iter().sum::<u64>(), 3);
        let exact = 2.0 * 1.5 + 100.0;
        assert!((l.sum_us - exact).abs() < exact / 32.0, "{}", l.sum_us);
        assert_eq!(Log2Hist::of(&vec![0; BUCKETS]).sum_us, 0.0);
    }

    #[test]
    fn a_log2_view_folds_whole_octaves() {
        let mut hist = vec![0; BUCKETS];
        hist[bucket(500)] = 1; // under 1 µs
        hist[bucket(1_500)] = 2; // [1, 2) µs
        hist[bucket(12_000)] = 3; // [8, 16) µs
        let log2 = log2_us(&hist);
        assert_eq!(&log2[..5], &[3, 0, 0, 3, 0]);
        assert_eq!(log2.iter().sum::<u64>(), 6);
    }

    #[test]
    fn percentiles_interpolate_within_a_bucket() {
        let mut hist = vec![0; BUCKETS];
        hist[bucket(100_000)] = 10;
        let (low, high) = bounds_us(bucket(100_000));
        assert_eq!(percentile_us(&hist, 1.0), Some(high));
        assert_eq!(percentile_us(&hist, 0.5), Some(low + (high - low) / 2.0));
        assert_eq!(percentile_us(&vec![0; BUCKETS], 0.5), None);
    }

    #[test]
    fn log2_percentiles_interpolate_within_a_slot() {
        let mut hist = vec![0; LOG2_SLOTS];
        hist[3] = 10; // 8..16 µs
        assert_eq!(log2_percentile_us(&hist, 0.5), Some(12.0));
        assert_eq!(log2_percentile_us(&hist, 1.0), Some(16.0));
        assert_eq!(log2_percentile_us(&vec![0; LOG2_SLOTS], 0.5), None);
    }

    #[test]
    fn process_buckets_split_octaves_in_four() {
        assert_eq!(proc_bucket(0), 0);
        assert_eq!(proc_bucket(3 * 1024), 3);
        assert_eq!(proc_bucket(4 * 1024), 4);
        assert_eq!(proc_bounds_us(4), (4.096, 5.12));
        assert_eq!(proc_bounds_us(7), (7.168, 8.192));
        assert_eq!(proc_bucket(8 * 1024), 8);
        // The last bucket starts at 7 * 2^22 units (30 s) and holds everything longer.
        assert_eq!(proc_bucket(u64::MAX), PROC_BUCKETS - 1);
        assert_eq!(proc_bucket(7 << 32), PROC_BUCKETS - 1);
        assert_eq!(
            proc_bounds_us(PROC_BUCKETS - 1).0,
            (7u64 << 22) as f64 * 1.024
        );
        assert_eq!(proc_bucket(1 << 35), PROC_BUCKETS - 1);
        assert_eq!(proc_bucket((7 << 32) - 1), PROC_BUCKETS - 2);
    }

    #[test]
    fn process_percentiles_interpolate_in_the_sparse_histogram() {
        // 99 requests at 1 ms and 1 at 40 ms: p50 in 1 ms's bucket, p99 at its top.
        let fast = proc_bucket(1_000_000) as u16;
        let slow = proc_bucket(40_000_000) as u16;
        let sparse = [(fast, 99), (slow, 1)];
        let (low, high) = proc_bounds_us(fast as usize);
        let p50 = proc_percentile_us(&sparse, 0.5).unwrap();
        assert!(
            low <= p50 && p50 < high && (p50 - 1000.0).abs() < 250.0,
            "{p50}"
        );
        assert_eq!(proc_percentile_us(&sparse, 0.99), Some(high));
        let p100 = proc_percentile_us(&sparse, 1.0).unwrap();
        assert_eq!(p100, proc_bounds_us(slow as usize).1);
        assert_eq!(proc_percentile_us(&[], 0.99), None);
        // A bucket past the end (a history from another build) is ignored, not a panic; nor
        // do a hostile history's counts overflow.
        assert_eq!(proc_percentile_us(&[(500, 3)], 0.5), None);
        let huge = [(fast, u64::MAX), (fast, u64::MAX), (slow, u64::MAX)];
        let p = proc_percentile_us(&huge, 0.5).unwrap();
        assert!(low <= p && p <= high, "{p}");
    }

    proptest! {
        #[test]
        fn every_process_latency_falls_inside_its_bucket(ns in 0u64..(1 << 36)) {
            let b = proc_bucket(ns);
            prop_assert!(b < PROC_BUCKETS);
            let (low, high) = proc_bounds_us(b);
            let us = (ns >> 10) as f64 * 1.024;
            // Past 2^25 units (34 s) everything shares the last bucket.
            if ns < 1 << 35 {
                prop_assert!(low <= us && us < high, "{ns} ns: {us} µs not in [{low}, {high})");
            } else {
                prop_assert_eq!(b, PROC_BUCKETS - 1);
            }
            if b >= 4 {
                prop_assert!(high - low <= low / 4.0 + 1e-9);
            }
        }

        #[test]
        fn every_latency_falls_inside_its_bucket(ns in 0u64..(1 << 50)) {
            let b = bucket(ns);
            // Past 2^32 µs (71 minutes) everything shares the last bucket.
            if ns >= 4_294_967_296_000 {
                prop_assert_eq!(b, BUCKETS - 1);
                return Ok(());
            }
            prop_assert!(b < BUCKETS);
            let (low, high) = bounds_us(b);
            let us = ((ns << 7) / 125) as f64 / 1024.0;
            prop_assert!(low <= us && us < high, "{ns} ns: {us} µs not in [{low}, {high})");
            // Narrow enough for 10% agreement: a bucket above 16 units spans at most 1/16 of its low.
            if b >= 16 {
                prop_assert!(high - low <= low / 16.0 + 1e-12);
            }
        }

        #[test]
        fn a_percentile_of_one_value_is_within_its_bucket(ns in 16_000u64..(1 << 40), q in 0.0f64..1.0) {
            let mut hist = vec![0; BUCKETS];
            hist[bucket(ns)] = 7;
            let p = percentile_us(&hist, q).unwrap();
            let exact = ns as f64 / 1000.0;
            prop_assert!((p - exact).abs() <= exact * 0.07, "{p} vs {exact}");
        }
    }
}
