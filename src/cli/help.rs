//! Help text whose defaults come from the suite definitions, so `--help` cannot drift from
//! what a run does.

use crate::bench::plan::{CUSTOM_RUNTIME, SUITE_REPEATS};
use crate::bench::suite::{self, Suite};
use std::time::Duration;

pub fn runtime() -> String {
    format!(
        "Measured time per test, e.g. 5s, 500ms, 2m [default: {} for a custom test; per suite: {}]",
        duration(CUSTOM_RUNTIME),
        per_suite(|s| s.runtime)
    )
}

pub fn ramp() -> String {
    format!(
        "Warm-up before measuring starts [default: none for a custom test; per suite: {}]",
        per_suite(|s| s.ramp)
    )
}

pub fn repeat() -> String {
    format!(
        "Runs of every test; a row's figures pool all of them (IOPS and bandwidth over their time \
         together, latencies over every I/O), with the spread between them [default: \
         {SUITE_REPEATS} for suites, 1 for a custom test]"
    )
}

/// The value most suites share, then the suites that differ: `5s, quick 2s, etcd 5m`.
fn per_suite(pick: fn(&Suite) -> Duration) -> String {
    let suites = suite::all();
    let mut values: Vec<Duration> = suites.iter().map(pick).collect();
    values.sort();
    let common = values
        .iter()
        .copied()
        .max_by_key(|v| values.iter().filter(|w| *w == v).count())
        .unwrap_or_default();
    let mut parts = vec![duration(common)];
    parts.extend(
        suites
            .iter()
            .filter(|s| pick(s) != common)
            .map(|s| format!("{} {}", s.name, duration(pick(s)))),
    );
    parts.join(", ")
}

/// `2s`, `500ms`, `5m`, `0s`: as the options are written.
fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        "0s".into()
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_follows_the_suites() {
        let quick = suite::quick();
        assert!(
            runtime().contains(&format!("quick {}", duration(quick.runtime))),
            "{}",
            runtime()
        );
        assert!(ramp().contains(&format!("quick {}", duration(quick.ramp))));
        assert_eq!(duration(Duration::from_millis(500)), "500ms");
        assert_eq!(duration(Duration::from_secs(300)), "5m");
    }
}
