//! Descriptive statistics over small samples (run times, repeat results): mean, standard
//! deviation, median, spread, outliers, and a confidence interval for the ratio of two means.
//!
//! The descriptive figures are a few lines each; Student's t quantile comes from `statrs`.
//! Every function accepts any input without panicking; empty samples give `None`.

/// Arithmetic mean.
pub fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Sample standard deviation (n − 1 in the denominator, as hyperfine and numpy's `ddof=1`);
/// `None` below two values, where it is undefined.
pub fn stddev(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let m = mean(xs)?;
    let ss: f64 = xs.iter().map(|x| (x - m).powi(2)).sum();
    Some((ss / (xs.len() - 1) as f64).sqrt())
}

/// Median; the mean of the two middle values for an even count.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    })
}

/// The value a share `q` (0–1) of the samples lies at or below (nearest rank); sorts them.
/// `None` for no samples.
pub fn quantile(xs: &mut [f64], q: f64) -> Option<f64> {
    xs.sort_by(f64::total_cmp);
    let rank = ((xs.len() as f64 * q).ceil() as usize).clamp(1, xs.len().max(1));
    xs.get(rank - 1).copied()
}

/// Smallest value; `None` for no values.
pub fn min(xs: &[f64]) -> Option<f64> {
    xs.iter().copied().min_by(f64::total_cmp)
}

/// Largest value; `None` for no values.
pub fn max(xs: &[f64]) -> Option<f64> {
    xs.iter().copied().max_by(f64::total_cmp)
}

/// Geometric mean of positive values (scores over kernels of different scales); `None` when
/// there are none or any is not positive.
pub fn geometric_mean(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (mut log_sum, mut n) = (0.0, 0u32);
    for v in values {
        if v <= 0.0 || v.is_nan() {
            return None;
        }
        log_sum += v.ln();
        n += 1;
    }
    (n > 0).then(|| (log_sum / f64::from(n)).exp())
}

/// Spread between repeats: (max − min) / median, in percent. 0 for one value; `None` when the
/// median is zero (no meaningful relative spread).
pub fn spread_pct(xs: &[f64]) -> Option<f64> {
    let med = median(xs)?;
    if med == 0.0 {
        return None;
    }
    Some((max(xs)? - min(xs)?) / med.abs() * 100.0)
}

/// Modified z-score above which a value is an outlier (Iglewicz and Hoaglin): ten standard
/// deviations, estimated robustly as 1.4826 × the median absolute deviation.
pub const OUTLIER_Z: f64 = 1.4826 * 10.0;

/// Median absolute deviation from the median (not scaled).
pub fn mad(xs: &[f64]) -> Option<f64> {
    let m = median(xs)?;
    let deviations: Vec<f64> = xs.iter().map(|x| (x - m).abs()).collect();
    median(&deviations)
}

/// Modified z-scores `(x − median) / MAD`. A MAD of zero (most values identical) is replaced by
/// the smallest positive float, so any value off the common one counts as an outlier.
pub fn modified_z_scores(xs: &[f64]) -> Vec<f64> {
    let (Some(med), Some(mad)) = (median(xs), mad(xs)) else {
        return Vec::new();
    };
    let mad = if mad > 0.0 { mad } else { f64::EPSILON };
    xs.iter().map(|x| (x - med) / mad).collect()
}

/// Two-sided p-value below which a difference counts as significant.
pub const ALPHA: f64 = 0.05;

/// The two-sided p-value of Welch's t-test for equal means, which does not assume equal
/// variances (two machines rarely have the same noise); `None` when either side has fewer
/// than two samples (no variance to judge by).
pub fn welch_p(a: &[f64], b: &[f64]) -> Option<f64> {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (ma, mb) = (mean(a)?, mean(b)?);
    // Variances of the two means.
    let va = stddev(a)?.powi(2) / a.len() as f64;
    let vb = stddev(b)?.powi(2) / b.len() as f64;
    let se2 = va + vb;
    if se2 == 0.0 {
        // Identical repeats on both sides: any difference in means is certain, none is none.
        return Some(if ma == mb { 1.0 } else { 0.0 });
    }
    let t = (ma - mb) / se2.sqrt();
    let dist = StudentsT::new(0.0, 1.0, welch_df(va, a.len(), vb, b.len())).ok()?;
    Some((2.0 * (1.0 - dist.cdf(t.abs()))).clamp(0.0, 1.0))
}

/// Largest side for which [`rank_p`] counts the exact distribution of U (untied samples).
const EXACT_RANK_MAX: usize = 30;

/// The two-sided p-value of the Mann–Whitney U (Wilcoxon rank-sum) test: whether one sample
/// tends to lie above the other, judged by ranks alone, so one wild value cannot make a
/// difference as it can move a mean. Exact for untied samples of up to 30 each, otherwise the
/// normal approximation with the tie and continuity corrections. `None` when either side has
/// fewer than two values or a value is not finite.
pub fn rank_p(a: &[f64], b: &[f64]) -> Option<f64> {
    let (n1, n2) = (a.len(), b.len());
    if n1 < 2 || n2 < 2 || a.iter().chain(b).any(|x| !x.is_finite()) {
        return None;
    }
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    // Average ranks over ties; the tie term for the variance.
    let (mut rank_sum_a, mut ties, mut i) = (0.0, 0.0, 0);
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        let t = (j - i + 1) as f64;
        ties += t * t * t - t;
        rank_sum_a += rank * all[i..=j].iter().filter(|x| x.1).count() as f64;
        i = j + 1;
    }
    let (f1, f2) = (n1 as f64, n2 as f64);
    let u1 = rank_sum_a - f1 * (f1 + 1.0) / 2.0;
    let u = u1.min(f1 * f2 - u1);
    if ties == 0.0 && n1 <= EXACT_RANK_MAX && n2 <= EXACT_RANK_MAX {
        let counts = u_counts(n1, n2);
        let total: f64 = counts.iter().sum();
        let below: f64 = counts.iter().take(u as usize + 1).sum();
        return Some((2.0 * below / total).clamp(0.0, 1.0));
    }
    use statrs::distribution::{ContinuousCDF, Normal};
    let n = f1 + f2;
    let var = f1 * f2 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    if var <= 0.0 {
        return Some(1.0);
    }
    let z = ((f1 * f2 / 2.0 - u) - 0.5).max(0.0) / var.sqrt();
    let normal = Normal::new(0.0, 1.0).ok()?;
    Some((2.0 * (1.0 - normal.cdf(z))).clamp(0.0, 1.0))
}

/// How many orderings of `n1` and `n2` untied values give each U from 0 to n1·n2 (the
/// recurrence of Mann and Whitney, counted in f64: C(60, 30) exceeds u64 comfortably less).
fn u_counts(n1: usize, n2: usize) -> Vec<f64> {
    // counts[i][j]: the distribution for i and j values.
    let mut prev: Vec<Vec<f64>> = (0..=n2).map(|_| vec![1.0]).collect();
    for i in 1..=n1 {
        let mut row: Vec<Vec<f64>> = vec![vec![1.0]];
        for j in 1..=n2 {
            let mut d = vec![0.0; i * j + 1];
            // The largest value is from the first sample (it beats all j) or from the second.
            for (u, c) in prev[j].iter().enumerate() {
                d[u + j] += c;
            }
            for (u, c) in row[j - 1].iter().enumerate() {
                d[u] += c;
            }
            row.push(d);
        }
        prev = row;
    }
    prev.pop().unwrap_or_default()
}

/// Indices of the values whose modified z-score exceeds [`OUTLIER_Z`]. Only tests need the
/// indices (they pin the threshold `timing` counts outliers with).
#[cfg(test)]
pub fn outliers(xs: &[f64]) -> Vec<usize> {
    modified_z_scores(xs)
        .iter()
        .enumerate()
        .filter(|(_, z)| z.abs() > OUTLIER_Z)
        .map(|(i, _)| i)
        .collect()
}

/// A ratio of two means with its 95% confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ratio {
    /// Mean of the numerator sample over mean of the denominator sample.
    pub value: f64,
    /// Lower end of the 95% confidence interval of the ratio.
    pub ci95_low: f64,
    /// Upper end of the 95% confidence interval of the ratio.
    pub ci95_high: f64,
}

impl Ratio {
    /// True when the interval excludes 1: the two means differ at the 95% level.
    pub fn significant(&self) -> bool {
        self.ci95_low > 1.0 || self.ci95_high < 1.0
    }
}

/// mean(num) / mean(den) with a 95% confidence interval.
///
/// The standard error of the ratio comes from the delta method on the two means' standard
/// errors (samples independent, as interleaved runs of different commands are); the interval
/// uses Student's t with Welch–Satterthwaite degrees of freedom, so small samples get wide
/// intervals instead of false confidence. `None` when either sample has fewer than two values
/// or a non-positive mean.
pub fn ratio_of_means(num: &[f64], den: &[f64]) -> Option<Ratio> {
    let (mn, md) = (mean(num)?, mean(den)?);
    let (sn, sd) = (stddev(num)?, stddev(den)?);
    if mn <= 0.0 || md <= 0.0 {
        return None;
    }
    let r = mn / md;
    // Squared relative standard errors of each mean.
    let vn = (sn / mn).powi(2) / num.len() as f64;
    let vd = (sd / md).powi(2) / den.len() as f64;
    let se = r * (vn + vd).sqrt();
    let df = welch_df(vn, num.len(), vd, den.len());
    let half = t_975(df) * se;
    Some(Ratio {
        value: r,
        ci95_low: (r - half).max(0.0),
        ci95_high: r + half,
    })
}

/// A difference of two means with its 95% confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Difference {
    /// mean(b) − mean(a).
    pub value: f64,
    /// Lower end of the 95% confidence interval.
    pub ci95_low: f64,
    /// Upper end.
    pub ci95_high: f64,
}

/// mean(b) − mean(a) with the 95% confidence interval of Welch's t (unequal variances,
/// Welch–Satterthwaite degrees of freedom): the interval excludes 0 exactly when
/// [`welch_p`] is below 0.05. Unlike [`ratio_of_means`] it does not widen with a noisy
/// denominator. `None` when either side has fewer than two values.
pub fn difference_of_means(a: &[f64], b: &[f64]) -> Option<Difference> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (ma, mb) = (mean(a)?, mean(b)?);
    let va = stddev(a)?.powi(2) / a.len() as f64;
    let vb = stddev(b)?.powi(2) / b.len() as f64;
    let half = t_975(welch_df(va, a.len(), vb, b.len())) * (va + vb).sqrt();
    let value = mb - ma;
    Some(Difference {
        value,
        ci95_low: value - half,
        ci95_high: value + half,
    })
}

/// Welch–Satterthwaite degrees of freedom from two (relative) variances of means.
fn welch_df(va: f64, na: usize, vb: f64, nb: usize) -> f64 {
    let denom = va.powi(2) / (na as f64 - 1.0) + vb.powi(2) / (nb as f64 - 1.0);
    if denom > 0.0 {
        (va + vb).powi(2) / denom
    } else {
        // Both samples constant: the interval has zero width whatever df is.
        (na + nb - 2) as f64
    }
}

/// The 97.5th percentile of Student's t distribution (two-sided 95%) for `df` degrees of
/// freedom; a non-finite or sub-1 `df` is treated as 1 (the widest interval).
pub fn t_975(df: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    // Beyond 10^4 the quantile is the normal one to four decimals, and statrs' inversion
    // search stops converging in reasonable time for enormous df (10^9 hung a test).
    const NORMAL_975: f64 = 1.959_964;
    let df = if df.is_finite() && df >= 1.0 { df } else { 1.0 };
    if df > 1e4 {
        return NORMAL_975;
    }
    StudentsT::new(0.0, 1.0, df).map_or(NORMAL_975, |t| t.inverse_cdf(0.975))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn the_difference_interval_agrees_with_welch() {
        let a = [10.0, 11.0, 9.0, 10.5, 9.5];
        for shift in [0.0, 0.5, 1.0, 1.5, 2.0, 3.0] {
            let b: Vec<f64> = a.iter().map(|x| x + shift + (x * 7.0) % 0.3).collect();
            let d = difference_of_means(&a, &b).unwrap();
            let p = welch_p(&a, &b).unwrap();
            assert_eq!(
                d.ci95_low > 0.0 || d.ci95_high < 0.0,
                p < ALPHA,
                "{shift}: {d:?} p={p}"
            );
            assert!(d.ci95_low <= d.value && d.value <= d.ci95_high);
        }
        assert_eq!(difference_of_means(&[1.0], &[1.0, 2.0]), None);
    }

    #[test]
    fn rank_test_matches_exact_and_textbook_values() {
        // Fully separated samples of 5 and 5: 2 orderings of 252 as extreme.
        let p = rank_p(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]).unwrap();
        assert!(close(p, 2.0 / 252.0, 1e-12), "p = {p}");
        // Interleaved: no evidence.
        let p = rank_p(&[1.0, 3.0, 5.0, 7.0, 9.0], &[2.0, 4.0, 6.0, 8.0, 10.0]).unwrap();
        assert!(p > 0.5, "p = {p}");
        // Tied: U = 2, four pairs of ties, variance 25/12 × (11 − 24/90) = 22.36, z = (12.5 −
        // 2 − 0.5) / 4.729 = 2.115, two-sided p = 0.0345 (worked by hand).
        let p = rank_p(&[1.0, 2.0, 2.0, 3.0, 4.0], &[3.0, 4.0, 5.0, 5.0, 6.0]).unwrap();
        assert!(close(p, 0.0345, 5e-4), "p = {p}");
        assert_eq!(rank_p(&[1.0], &[2.0, 3.0]), None);
        assert_eq!(rank_p(&[1.0, f64::NAN], &[2.0, 3.0]), None);
    }

    #[test]
    fn welch_matches_a_textbook_case() {
        // Wikipedia's Welch's t-test example 1: t = -2.46, df = 25.0, p = 0.0214 (checked by
        // integrating the t density numerically).
        let a = [
            27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7,
            21.4,
        ];
        let b = [
            27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5,
            24.4,
        ];
        let p = welch_p(&a, &b).unwrap();
        assert!((p - 0.02138).abs() < 1e-4, "p = {p}");
    }

    #[test]
    fn welch_clear_and_unclear_differences() {
        let p = welch_p(&[100.0, 101.0, 99.0], &[80.0, 81.0, 79.0]).unwrap();
        assert!(p < ALPHA, "p = {p}");
        let p = welch_p(&[100.0, 120.0, 80.0], &[98.0, 118.0, 83.0]).unwrap();
        assert!(p > ALPHA, "p = {p}");
        assert_eq!(welch_p(&[1.0], &[1.0, 2.0]), None);
        assert_eq!(welch_p(&[5.0, 5.0], &[5.0, 5.0]), Some(1.0));
        assert_eq!(welch_p(&[5.0, 5.0], &[6.0, 6.0]), Some(0.0));
    }

    #[test]
    fn one_outlier_moves_neither_median_nor_mad() {
        assert_eq!(mad(&[]), None);
        assert_eq!(mad(&[15.0, 14.0, 16.0, 15.0, 61.0]), Some(1.0));
    }

    #[test]
    fn geometric_mean_of_fixed_values() {
        assert!(close(geometric_mean([1.0, 100.0]).unwrap(), 10.0, 1e-9));
        assert_eq!(geometric_mean([5.0, 0.0]), None);
        assert_eq!(geometric_mean([]), None);
    }

    #[test]
    fn basic_figures_on_a_fixed_sample() {
        let xs = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert_eq!(mean(&xs), Some(5.0));
        // Sum of squared deviations 32 over n − 1 = 7.
        assert!(close(stddev(&xs).unwrap(), (32.0f64 / 7.0).sqrt(), 1e-12));
        assert_eq!(median(&xs), Some(4.5));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(min(&xs), Some(2.0));
        assert_eq!(max(&xs), Some(9.0));
        assert!(close(spread_pct(&xs).unwrap(), 7.0 / 4.5 * 100.0, 1e-9));
    }

    #[test]
    fn empty_and_single_samples() {
        assert_eq!(mean(&[]), None);
        assert_eq!(median(&[]), None);
        assert_eq!(stddev(&[1.0]), None);
        assert_eq!(spread_pct(&[3.0]), Some(0.0));
        assert_eq!(spread_pct(&[0.0]), None);
        assert!(outliers(&[]).is_empty());
        assert_eq!(ratio_of_means(&[1.0], &[1.0, 2.0]), None);
    }

    #[test]
    fn outliers_on_fixed_samples() {
        assert!(outliers(&[-0.2, 0.0, 0.2]).is_empty());
        assert_eq!(outliers(&[-0.2, 0.0, 0.2, 4.0]), vec![3]);
        assert_eq!(outliers(&[0.5, 0.30, 0.29, 0.31, 0.30]), vec![0]);
        // MAD of zero: every value off the common one is an outlier.
        assert_eq!(outliers(&[10.0, 10.0, 10.0, 10.0, 100.0]), vec![4]);
        // Normal-looking noise has none.
        let noise = [
            2.33, 1.42, -0.58, -0.31, 2.29, 0.76, -1.07, -0.96, -1.16, 1.11,
        ];
        assert!(outliers(&noise).is_empty());
    }

    #[test]
    fn t_quantiles() {
        // Textbook table values.
        assert!(close(t_975(1.0), 12.706, 1e-3));
        assert!(close(t_975(8.0), 2.306, 1e-3));
        assert!(close(t_975(30.0), 2.042, 1e-3));
        assert!(close(t_975(120.0), 1.980, 1e-3));
        assert!(close(t_975(9999.0), 1.960, 1e-3));
        assert!(close(t_975(1e9), 1.960, 1e-3));
        assert!(close(t_975(f64::NAN), 12.706, 1e-3));
        assert!(close(t_975(0.2), 12.706, 1e-3));
    }

    #[test]
    fn ratio_with_interval_on_fixed_samples() {
        let a = [10.0, 11.0, 9.0, 10.0, 10.0];
        let b = [20.0, 22.0, 18.0, 20.0, 20.0];
        let r = ratio_of_means(&b, &a).unwrap();
        assert!(close(r.value, 2.0, 1e-12));
        // Relative SE of each mean: (sqrt(0.5)/10)/sqrt(5) = 0.0316; ratio SE = 2 × 0.0447;
        // df = 8, t = 2.306.
        let half = 2.306 * 2.0 * (2.0 * 0.5f64 / 100.0 / 5.0).sqrt();
        assert!(close(r.ci95_low, 2.0 - half, 1e-4), "{r:?}");
        assert!(close(r.ci95_high, 2.0 + half, 1e-4), "{r:?}");
        assert!(r.significant());
        let same = ratio_of_means(&a, &[10.0, 9.0, 11.0, 10.5, 9.5]).unwrap();
        assert!(!same.significant(), "{same:?}");
    }

    #[test]
    fn constant_samples_give_an_exact_ratio() {
        let r = ratio_of_means(&[3.0, 3.0], &[1.0, 1.0]).unwrap();
        assert_eq!((r.value, r.ci95_low, r.ci95_high), (3.0, 3.0, 3.0));
    }

    proptest! {
        #[test]
        fn never_panics(xs in proptest::collection::vec(any::<f64>(), 0..20),
                        ys in proptest::collection::vec(any::<f64>(), 0..20)) {
            let _ = (mean(&xs), stddev(&xs), median(&xs), spread_pct(&xs));
            let _ = outliers(&xs);
            let _ = ratio_of_means(&xs, &ys);
        }

        #[test]
        fn median_lies_between_min_and_max(xs in proptest::collection::vec(-1e9f64..1e9, 1..30)) {
            let m = median(&xs).unwrap();
            prop_assert!(min(&xs).unwrap() <= m && m <= max(&xs).unwrap());
        }
    }
}
