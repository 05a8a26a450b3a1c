//! Robust statistics for comparing a device with its peers.

pub use crate::stats::median;

/// Median absolute deviation from the median (not scaled).
pub fn mad(values: &[f64]) -> Option<f64> {
    let m = median(values)?;
    let dev: Vec<f64> = values.iter().map(|v| (v - m).abs()).collect();
    median(&dev)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_mad() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        // One outlier does not move either.
        assert_eq!(mad(&[15.0, 14.0, 16.0, 15.0, 61.0]), Some(1.0));
    }
}
