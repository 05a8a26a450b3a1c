//! `tacho time --prom-textfile`: each command's run times as a Prometheus summary named
//! `tacho_time_seconds` (min, median and max as quantiles 0, 0.5 and 1), its failed runs and
//! peak memory, so node_exporter's textfile collector can alert on drift or failures of a
//! command timed from cron (a status page's response time every minute, say).

use super::{Family, RunInfo, exposition};
use crate::timing::result::TimeReport;

/// The Prometheus text of a `tacho time` run: run-time quantiles, failed runs and peak memory per
/// command.
pub fn render(report: &TimeReport, info: &RunInfo) -> String {
    let mut time = Family::summary(
        "tacho_time_seconds",
        "Wall-clock time of each run of the command, by quantile (0 is the minimum, 1 the maximum).",
    );
    let mut failed = Family::new(
        "tacho_time_failed_runs",
        "Runs of the command that exited non-zero, were killed by a signal or hit --max-time.",
    );
    let mut memory = Family::new(
        "tacho_time_peak_memory_bytes",
        "Largest resident memory of one run of the command.",
    );
    let commands = super::numbered(report.results.iter().map(|t| t.result.command.as_str()));
    for (r, command) in report.results.iter().map(|t| &t.result).zip(&commands) {
        let labels = [("command", command.as_str())];
        for (q, v) in [("0", r.min), ("0.5", r.median), ("1", r.max)] {
            time.sample(&labels, Some(q), v);
        }
        time.sample_named("_sum", &labels, None, r.times.iter().sum());
        time.sample_named("_count", &labels, None, r.times.len() as f64);
        let fails = r.exit_codes.iter().filter(|c| **c != Some(0)).count();
        failed.sample(&labels, None, fails as f64);
        memory.sample(&labels, None, r.peak_memory_bytes() as f64);
    }
    let [stopped, run, ts] = run_families(info, report.tool_version, false);
    exposition(&[time, failed, memory, stopped, run, ts])
}

/// How one command fared in a run that a failure stopped.
pub struct CommandTally {
    /// The command line as the user gave it (the `command` label).
    pub command: String,
    /// Runs that ended, warm-ups included.
    pub runs: u64,
    /// Runs that exited non-zero, were killed by a signal or hit `--max-time`.
    pub failed: u64,
    /// The exit code of its last run; None when a signal or --max-time ended it.
    pub last_exit_code: Option<i32>,
}

/// The textfile of a run that stopped because a command failed (without --ignore-failure):
/// no timings, but the failed runs and exit codes an alert needs.
pub fn render_failure(tallies: &[CommandTally], info: &RunInfo, tool_version: &str) -> String {
    let mut failed = Family::new(
        "tacho_time_failed_runs",
        "Runs of the command that exited non-zero, were killed by a signal or hit --max-time.",
    );
    let mut code = Family::new(
        "tacho_time_last_exit_code",
        "Exit code of the command's last run before the failure stopped tacho time; -1 when a \
         signal or --max-time ended it.",
    );
    // Numbered over every command, as `render` numbers them, so a command keeps its label.
    let commands = super::numbered(tallies.iter().map(|t| t.command.as_str()));
    for (t, command) in tallies.iter().zip(&commands).filter(|(t, _)| t.runs > 0) {
        let labels = [("command", command.as_str())];
        failed.sample(&labels, None, t.failed as f64);
        code.sample(&labels, None, f64::from(t.last_exit_code.unwrap_or(-1)));
    }
    let [stopped, run, ts] = run_families(info, tool_version, true);
    exposition(&[failed, code, stopped, run, ts])
}

/// Whether the run stopped on a failure, what it was, and when it ended.
fn run_families(info: &RunInfo, tool_version: &str, stopped_by_failure: bool) -> [Family; 3] {
    let mut stopped = Family::new(
        "tacho_time_run_failed",
        "1 when the last tacho time run stopped because a command failed (no timings then), \
         else 0.",
    );
    stopped.sample(&[], None, f64::from(u8::from(stopped_by_failure)));
    let mut run = Family::new(
        "tacho_time_run_info",
        "Always 1; the labels describe the last tacho time run.",
    );
    let id = info.run_id.map(|i| i.to_string()).unwrap_or_default();
    run.sample(
        &[
            ("label", info.label.unwrap_or("")),
            ("run_id", &id),
            ("tool_version", tool_version),
        ],
        None,
        1.0,
    );
    let mut ts = Family::new(
        "tacho_time_run_timestamp_seconds",
        "When the last tacho time run ended, in seconds since the epoch.",
    );
    ts.sample(&[], None, info.timestamp_s as f64);
    [stopped, run, ts]
}
