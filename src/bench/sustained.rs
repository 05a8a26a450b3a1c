//! The method of the `sustained` suite and of `--precondition`, as pure functions of
//! per-second rates: where a device's write rate falls off a cliff (an SLC or DRAM cache
//! filled), when a rate has been flat long enough to stop, and SNIA's steady-state rule.

use serde::Serialize;

/// A rate after the cliff at most this share of the rate before it counts as a cliff; a smaller
/// dip is noise or a busy machine.
pub const CLIFF_RATIO: f64 = 0.7;

/// A window is flat when every second is within this share of the window's mean.
pub const FLAT_TOLERANCE: f64 = 0.2;

/// SNIA PTS steady state: rounds in the measurement window.
pub const STEADY_ROUNDS: usize = 5;
/// SNIA PTS steady state: every round within this share of the window's mean.
pub const STEADY_EXCURSION: f64 = 0.2;
/// SNIA PTS steady state: the fitted line rises or falls by at most this share of the mean
/// over the window.
pub const STEADY_SLOPE: f64 = 0.1;

/// A fall of the write rate: fast for the first `bytes_before` bytes, slow after.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Cliff {
    /// Bytes written before the rate fell (interpolated inside the second it fell in).
    pub bytes_before: u64,
    /// Seconds from the start of the test to the fall.
    pub at_s: f64,
    /// Mean rate before the fall, bytes per second.
    pub before_bytes_per_s: f64,
    /// Mean rate after the fall, bytes per second.
    pub after_bytes_per_s: f64,
    /// The rate after as a share of the rate before, in percent.
    pub after_pct: f64,
}

impl Cliff {
    /// "1.90 GiB/s for the first 38.0 GiB, then 210 MiB/s (11%)".
    pub fn summary(&self) -> String {
        use crate::units::{format_bandwidth, format_bytes_approx};
        format!(
            "{} for the first {}, then {} ({:.0}%)",
            format_bandwidth(self.before_bytes_per_s),
            format_bytes_approx(self.bytes_before),
            format_bandwidth(self.after_bytes_per_s),
            self.after_pct
        )
    }
}

/// SNIA-style preconditioning as it ran: the region written sequentially twice, then rounds of
/// random writes until [`steady`] held (or [`MAX_ROUNDS`] passed).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Precondition {
    /// Sequential passes over the whole region before the random rounds.
    pub sequential_passes: u32,
    /// Block size of the sequential passes, in bytes.
    pub sequential_bs_bytes: u64,
    /// Block size of the random writes, in bytes.
    pub random_bs_bytes: u64,
    /// I/Os in flight of the random writes.
    pub iodepth: u32,
    /// Length of each random round, in seconds.
    pub round_s: f64,
    /// Write IOPS of each random round, in order.
    pub rounds_iops: Vec<f64>,
    /// Whether the steady-state rule held over the last five rounds.
    pub steady: bool,
    /// Mean IOPS of the last five rounds when steady; `None` otherwise.
    pub steady_iops: Option<f64>,
}

impl Precondition {
    /// One line for the report.
    pub fn summary(&self) -> String {
        use crate::units::{format_count, format_size};
        let rounds = self.rounds_iops.len();
        let random = format!(
            "{} random writes Q{} in {rounds} round{} of {}s",
            format_size(self.random_bs_bytes),
            self.iodepth,
            if rounds == 1 { "" } else { "s" },
            self.round_s
        );
        match self.steady_iops {
            Some(iops) if self.steady => format!(
                "preconditioned: the region written {}× sequentially, then {random}: steady at \
                 {} IOPS (last five rounds within 20% of their mean, slope within 10%)",
                self.sequential_passes,
                format_count(iops)
            ),
            _ => format!(
                "preconditioned: the region written {}× sequentially, then {random}: NOT steady \
                 (the last five rounds were not within 20% of their mean with a slope within 10%)",
                self.sequential_passes
            ),
        }
    }
}

/// Random rounds of preconditioning at most (SNIA's PTS stops at 25).
pub const MAX_ROUNDS: usize = 25;

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn sse(v: &[f64], m: f64) -> f64 {
    v.iter().map(|x| (x - m) * (x - m)).sum()
}

fn usable(rates: &[f64]) -> bool {
    rates.iter().all(|r| r.is_finite() && *r >= 0.0)
}

/// Where the split into a fast and a slow part fits best: `(t, before, after)` with second `t`
/// the one the rate fell in (left out of both means: it holds some of each).
fn best_split(rates: &[f64]) -> Option<(usize, f64, f64)> {
    if rates.len() < 3 || !usable(rates) {
        return None;
    }
    (1..rates.len() - 1)
        .map(|t| {
            let (before, after) = (&rates[..t], &rates[t + 1..]);
            let (b, a) = (mean(before), mean(after));
            (t, b, a, sse(before, b) + sse(after, a))
        })
        .min_by(|x, y| x.3.total_cmp(&y.3))
        .map(|(t, b, a, _)| (t, b, a))
}

/// The cliff in a test's per-second write rates (bytes each second, from the test's start),
/// if the rate fell to at most [`CLIFF_RATIO`] of what it was and stayed there.
pub fn cliff(rates: &[f64]) -> Option<Cliff> {
    let (t, before, after) = best_split(rates)?;
    if before <= 0.0 || after > before * CLIFF_RATIO {
        return None;
    }
    // The second it fell in moved `rates[t]` bytes: a share `f` of it at the fast rate, the
    // rest at the slow one.
    let share = ((rates[t] - after) / (before - after)).clamp(0.0, 1.0);
    let written_before: f64 = rates[..t].iter().sum::<f64>() + share * before;
    Some(Cliff {
        bytes_before: written_before as u64,
        at_s: t as f64 + share,
        before_bytes_per_s: before,
        after_bytes_per_s: after,
        after_pct: 100.0 * after / before,
    })
}

/// True when every value of `window` (not empty) is within [`FLAT_TOLERANCE`] of its mean,
/// and the mean is above zero.
pub fn flat(window: &[f64]) -> bool {
    if window.is_empty() || !usable(window) {
        return false;
    }
    let m = mean(window);
    m > 0.0 && window.iter().all(|r| (r - m).abs() <= FLAT_TOLERANCE * m)
}

/// Whether a sustained test may stop after these whole seconds: its last `flat_for` seconds
/// are flat and, when `after_cliff`, all of them come after a cliff (a device that has not
/// fallen yet may still be writing into its cache, however flat that looks).
pub fn may_stop(rates: &[f64], flat_for: usize, after_cliff: bool) -> bool {
    if flat_for == 0 || rates.len() < flat_for || !flat(&rates[rates.len() - flat_for..]) {
        return false;
    }
    if !after_cliff {
        return true;
    }
    match (cliff(rates), best_split(rates)) {
        (Some(_), Some((t, _, _))) => t < rates.len() - flat_for,
        _ => false,
    }
}

/// SNIA's steady-state rule over the last [`STEADY_ROUNDS`] rounds: each within
/// [`STEADY_EXCURSION`] of their mean, and the least-squares line through them rising or
/// falling by at most [`STEADY_SLOPE`] of the mean across the window.
pub fn steady(rounds: &[f64]) -> bool {
    if rounds.len() < STEADY_ROUNDS {
        return false;
    }
    let window = &rounds[rounds.len() - STEADY_ROUNDS..];
    if !usable(window) {
        return false;
    }
    let m = mean(window);
    if m <= 0.0 || window.iter().any(|r| (r - m).abs() > STEADY_EXCURSION * m) {
        return false;
    }
    let n = window.len() as f64;
    let x_mean = (n - 1.0) / 2.0;
    let (mut num, mut den) = (0.0, 0.0);
    for (i, y) in window.iter().enumerate() {
        let dx = i as f64 - x_mean;
        num += dx * (y - m);
        den += dx * dx;
    }
    let slope = num / den;
    (slope * (n - 1.0)).abs() <= STEADY_SLOPE * m
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MIB: f64 = (1 << 20) as f64;

    /// Per-second bytes of a device writing `fast` bytes/s until `n` bytes, `slow` after.
    fn device(fast: f64, slow: f64, n: f64, secs: usize) -> Vec<f64> {
        let mut out = Vec::new();
        let mut written = 0.0;
        for _ in 0..secs {
            let mut left = 1.0;
            let mut this = 0.0;
            if written < n {
                let t = ((n - written) / fast).min(1.0);
                this += t * fast;
                left -= t;
            }
            this += left * slow;
            written += this;
            out.push(this);
        }
        out
    }

    #[test]
    fn a_cliff_inside_a_second_is_found_to_the_byte() {
        let rates = device(1900.0 * MIB, 210.0 * MIB, 38.3 * 1024.0 * MIB, 60);
        let c = cliff(&rates).expect("a cliff");
        let want = 38.3 * 1024.0 * MIB;
        assert!((c.bytes_before as f64 - want).abs() < want * 0.001, "{c:?}");
        assert!((c.after_pct - 100.0 * 210.0 / 1900.0).abs() < 0.1);
        assert_eq!(
            c.summary(),
            "1.86 GiB/s for the first 38.3 GiB, then 210 MiB/s (11%)"
        );
    }

    #[test]
    fn a_cliff_on_a_second_boundary_and_noise() {
        let mut rates = device(100.0, 20.0, 300.0, 10);
        assert_eq!(cliff(&rates).unwrap().bytes_before, 300);
        rates.iter_mut().enumerate().for_each(|(i, r)| {
            *r *= if i % 2 == 0 { 1.05 } else { 0.95 };
        });
        let c = cliff(&rates).unwrap();
        assert!((c.bytes_before as f64 - 300.0).abs() < 30.0, "{c:?}");
    }

    #[test]
    fn no_cliff_on_a_flat_or_gently_sagging_device() {
        assert_eq!(cliff(&[100.0; 20]), None);
        let sag: Vec<f64> = (0..20).map(|i| 100.0 - i as f64).collect();
        assert_eq!(cliff(&sag), None);
        assert_eq!(cliff(&[100.0, 10.0]), None, "too short to tell");
        assert_eq!(cliff(&[0.0; 5]), None);
    }

    #[test]
    fn stopping_waits_for_flat_seconds_after_the_cliff() {
        let rates = device(100.0, 20.0, 500.0, 12);
        // Flat while fast: not yet, the cache is still filling.
        assert!(!may_stop(&rates[..5], 3, true));
        assert!(may_stop(&rates[..5], 3, false));
        // Two slow seconds after the fall: not three yet.
        assert!(!may_stop(&rates[..7], 3, true));
        assert!(may_stop(&rates[..8], 3, true));
        assert!(!may_stop(&rates, 0, false));
    }

    #[test]
    fn snia_steady_state() {
        assert!(steady(&[500.0, 300.0, 100.0, 101.0, 99.0, 100.0, 100.0]));
        assert!(
            !steady(&[100.0, 100.0, 100.0, 100.0]),
            "fewer than five rounds"
        );
        assert!(
            !steady(&[100.0, 100.0, 100.0, 100.0, 125.0]),
            "an excursion"
        );
        // Every round within 20%, but a steady climb of 16% across the window.
        assert!(!steady(&[92.0, 96.0, 100.0, 104.0, 108.0]));
        assert!(steady(&[98.0, 99.0, 100.0, 101.0, 102.0]));
        assert!(!steady(&[f64::NAN; 5]));
    }

    proptest! {
        #[test]
        fn no_input_panics(rates in prop::collection::vec(
            prop_oneof![any::<f64>(), 0.0..1e12f64], 0..64), flat_for in 0usize..70) {
            let c = cliff(&rates);
            if let Some(c) = c {
                prop_assert!(c.after_pct <= CLIFF_RATIO * 100.0 + 1e-9);
                let total: f64 = rates.iter().sum();
                prop_assert!(c.bytes_before as f64 <= total + 1.0);
            }
            let _ = may_stop(&rates, flat_for, true);
            let _ = may_stop(&rates, flat_for, false);
            let _ = steady(&rates);
            let _ = flat(&rates);
        }

        #[test]
        fn a_synthetic_cliff_is_found_within_a_tenth(
            fast in 1e3..1e10f64, ratio in 0.02..0.6f64, fast_secs in 1.5..30.0f64,
            slow_secs in 2usize..30) {
            let n = fast * fast_secs;
            let secs = fast_secs.ceil() as usize + slow_secs;
            let rates = device(fast, fast * ratio, n, secs);
            let c = cliff(&rates).expect("a cliff");
            prop_assert!((c.bytes_before as f64 - n).abs() <= n * 0.1, "{c:?} vs {n}");
        }
    }
}
