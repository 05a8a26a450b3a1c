//! Whether two sets of repeats differ: Welch's t-test, which does not assume equal variances
//! (two machines rarely have the same noise).

use statrs::distribution::{ContinuousCDF, StudentsT};

/// Two-sided p-value below which a difference counts as significant.
pub const ALPHA: f64 = 0.05;

/// The two-sided p-value of Welch's t-test for equal means; `None` when either side has fewer
/// than two samples (no variance to judge by).
pub fn welch_p(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (ma, va) = mean_var(a);
    let (mb, vb) = mean_var(b);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let se2 = va / na + vb / nb;
    if se2 == 0.0 {
        // Identical repeats on both sides: any difference in means is certain, none is none.
        return Some(if ma == mb { 1.0 } else { 0.0 });
    }
    let t = (ma - mb) / se2.sqrt();
    // Welch–Satterthwaite degrees of freedom.
    let df = se2 * se2 / ((va / na).powi(2) / (na - 1.0) + (vb / nb).powi(2) / (nb - 1.0));
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    Some((2.0 * (1.0 - dist.cdf(t.abs()))).clamp(0.0, 1.0))
}

/// Mean and unbiased sample variance.
fn mean_var(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_a_textbook_case() {
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
    fn clear_and_unclear_differences() {
        let p = welch_p(&[100.0, 101.0, 99.0], &[80.0, 81.0, 79.0]).unwrap();
        assert!(p < ALPHA, "p = {p}");
        let p = welch_p(&[100.0, 120.0, 80.0], &[98.0, 118.0, 83.0]).unwrap();
        assert!(p > ALPHA, "p = {p}");
        assert_eq!(welch_p(&[1.0], &[1.0, 2.0]), None);
        assert_eq!(welch_p(&[5.0, 5.0], &[5.0, 5.0]), Some(1.0));
        assert_eq!(welch_p(&[5.0, 5.0], &[6.0, 6.0]), Some(0.0));
    }
}
