//! /proc/uptime: seconds since boot, for turning since-boot counters into daily rates.

use std::path::Path;
use std::time::Duration;

use super::{KernelError, Result, SysRoot, read_text};

/// Reads how long the system has been up (the first field of `<proc>/uptime`).
pub fn read_uptime(root: &SysRoot) -> Result<Duration> {
    let path = root.proc.join("uptime");
    parse_uptime(&read_text(&path)?, &path)
}

/// Parses `350735.47 234388.90` (uptime, idle); `path` only names the file in errors.
pub fn parse_uptime(text: &str, path: &Path) -> Result<Duration> {
    text.split_whitespace()
        .next()
        .and_then(|w| w.parse::<f64>().ok())
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| {
            KernelError::parse(path, Some(1), format!("expected 'UPTIME IDLE': {text:?}"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn first_field_is_the_uptime() {
        let up = parse_uptime("350735.47 234388.90\n", Path::new("uptime")).unwrap();
        assert_eq!(up, Duration::from_millis(350_735_470));
    }

    #[test]
    fn garbage_and_negative_are_errors_naming_the_file() {
        for text in ["", "x 1", "-5 1", "NaN 1"] {
            let e = parse_uptime(text, Path::new("/proc/uptime")).unwrap_err();
            assert!(e.to_string().contains("/proc/uptime"), "{e}");
        }
    }

    proptest! {
        #[test]
        fn any_text_never_panics(text in ".{0,40}") {
            let _ = parse_uptime(&text, Path::new("uptime"));
        }
    }
}
