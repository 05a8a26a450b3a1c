//! /proc/loadavg: the load averages and the number of runnable scheduling entities.

use std::path::Path;

use super::{KernelError, Result, SysRoot, read_text};

/// One reading of /proc/loadavg.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct LoadAvg {
    /// Load average over the last minute (runnable plus uninterruptible threads, exponentially
    /// averaged).
    pub load1: f64,
    /// Load average over the last 5 minutes.
    pub load5: f64,
    /// Load average over the last 15 minutes.
    pub load15: f64,
    /// Threads runnable right now (running or waiting for a CPU).
    pub runnable: u64,
    /// Threads that exist.
    pub threads: u64,
}

/// Reads `<proc>/loadavg`; text not shaped like `L1 L5 L15 R/T PID` is an error.
pub fn read_loadavg(root: &SysRoot) -> Result<LoadAvg> {
    let path = root.proc.join("loadavg");
    parse_loadavg(&read_text(&path)?, &path)
}

/// Parses `0.52 0.58 0.59 2/345 12345`; `path` only names the file in errors.
pub fn parse_loadavg(text: &str, path: &Path) -> Result<LoadAvg> {
    let bad = || {
        KernelError::parse(
            path,
            Some(1),
            format!("expected 'L1 L5 L15 R/T PID': {text:?}"),
        )
    };
    let words: Vec<&str> = text.split_whitespace().collect();
    let [l1, l5, l15, rt, _last_pid] = words.as_slice() else {
        return Err(bad());
    };
    let load = |w: &str| w.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0);
    let (runnable, threads) = rt.split_once('/').ok_or_else(bad)?;
    Ok(LoadAvg {
        load1: load(l1).ok_or_else(bad)?,
        load5: load(l5).ok_or_else(bad)?,
        load15: load(l15).ok_or_else(bad)?,
        runnable: runnable.parse().map_err(|_| bad())?,
        threads: threads.parse().map_err(|_| bad())?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_real_and_rejects_garbage() {
        let real = include_str!("../../tests/fixtures/top/firecracker/a/proc/loadavg");
        let l = parse_loadavg(real, Path::new("/proc/loadavg")).unwrap();
        assert!(l.threads >= l.runnable && l.threads > 0);
        let l = parse_loadavg("0.52 0.58 0.59 2/345 12345\n", Path::new("/p")).unwrap();
        assert_eq!((l.load1, l.runnable, l.threads), (0.52, 2, 345));
        for bad in [
            "",
            "1 2 3 4/5",
            "1 2 x 4/5 6",
            "1 2 3 45 6",
            "1 2 3 a/5 6",
            "-1 2 3 4/5 6",
        ] {
            let err = parse_loadavg(bad, Path::new("/proc/loadavg")).unwrap_err();
            assert!(err.to_string().contains("/proc/loadavg line 1"), "{err}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,60}") {
            let _ = parse_loadavg(&s, Path::new("/x"));
        }
    }
}
