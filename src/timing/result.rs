//! Timing results: per command in hyperfine's export shape (so monitoring scripts written for
//! hyperfine's JSON keep working), plus what hyperfine does not give: relative speed with a
//! confidence interval, and warnings that say what to do.
//!
//! hyperfine's keys carry no units (`mean` is in seconds, `memory_usage_byte` in bytes); they
//! are kept as they are for compatibility. tacho's own additions carry units in their names.

use super::exec::Measurement;
use super::schedule::Outcome;
use crate::form::{Form, Written};
use crate::kernel::host::Host;
use crate::kernel::tunables::SystemTunables;
use crate::stats;
use crate::warning::{Code, Warning};
use serde::{Deserialize, Serialize};

/// The `schema` of the `tacho time --json` document.
pub const SCHEMA: &str = "tacho.time.v1";

/// One command's results, key for key as hyperfine exports them (in either [`Form`]: the store
/// reads it back as `CommandResult<Read>`).
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, bound = "")]
pub struct CommandResult<F: Form = Written> {
    /// The command line as the user gave it (or its `--command-name`).
    pub command: F::Of<String>,
    /// Mean wall time per run, in seconds (0 when there are no runs).
    pub mean: F::Of<f64>,
    /// `null` for a single run, as in hyperfine.
    pub stddev: F::Of<Option<f64>>,
    /// Median wall time per run, in seconds (0 when there are no runs).
    pub median: F::Of<f64>,
    /// Mean user CPU time per run.
    pub user: F::Of<f64>,
    /// Mean system CPU time per run.
    pub system: F::Of<f64>,
    /// Fastest run's wall time, in seconds (0 when there are no runs).
    pub min: F::Of<f64>,
    /// Slowest run's wall time, in seconds (0 when there are no runs).
    pub max: F::Of<f64>,
    /// Wall time of each run in seconds, in run order, with the shell's spawn time subtracted.
    pub times: F::Of<Vec<F::Of<f64>>>,
    /// Peak resident memory of each run. Never below tacho's own resident size (a few MiB):
    /// until `exec`, the kernel counts the spawning process's pages for the child, as it does
    /// for hyperfine (and as GNU time's figure includes its own ~1 MiB).
    pub memory_usage_byte: F::Of<Vec<u64>>,
    /// `null` for runs ended by a signal or by `--max-time`.
    pub exit_codes: F::Of<Vec<Option<i32>>>,
}

impl CommandResult {
    /// Summarises the timed runs of one command (figures of an empty `runs` are 0, as hyperfine
    /// never exports one).
    pub fn from_runs(command: &str, runs: &[Measurement]) -> CommandResult {
        let times: Vec<f64> = runs.iter().map(|m| m.wall_s).collect();
        let user: Vec<f64> = runs.iter().map(|m| m.user_s).collect();
        let system: Vec<f64> = runs.iter().map(|m| m.system_s).collect();
        CommandResult {
            command: command.to_string(),
            mean: stats::mean(&times).unwrap_or(0.0),
            stddev: stats::stddev(&times),
            median: stats::median(&times).unwrap_or(0.0),
            user: stats::mean(&user).unwrap_or(0.0),
            system: stats::mean(&system).unwrap_or(0.0),
            min: stats::min(&times).unwrap_or(0.0),
            max: stats::max(&times).unwrap_or(0.0),
            memory_usage_byte: runs.iter().map(|m| m.max_rss_bytes).collect(),
            exit_codes: runs.iter().map(|m| m.exit.code()).collect(),
            times,
        }
    }

    /// The largest of `memory_usage_byte`, in bytes; 0 when there are no runs.
    pub fn peak_memory_bytes(&self) -> u64 {
        self.memory_usage_byte.iter().copied().max().unwrap_or(0)
    }
}

/// hyperfine's export document: `{"results": [...]}`.
#[derive(Debug, Serialize, Deserialize)]
pub struct HyperfineExport {
    /// One entry per command, in the order given.
    pub results: Vec<CommandResult>,
}

/// A command's results with tacho's warnings beside hyperfine's keys.
#[derive(Debug, Serialize)]
pub struct TimedCommand {
    /// hyperfine's keys, flattened into this object.
    #[serde(flatten)]
    pub result: CommandResult,
    /// Runs that exceeded `--max-time` (kept only with `--ignore-failure`).
    pub timed_out_runs: u64,
    /// What looks wrong with these runs and what to do about it (outliers, failures, time-outs).
    pub warnings: Vec<Warning>,
}

/// How much slower a command is than the fastest one, with a 95% confidence interval.
#[derive(Debug, Clone, Serialize)]
pub struct Relative {
    /// The command line as shown in the results.
    pub command: String,
    /// mean(this) / mean(fastest); 1 for the fastest itself.
    pub ratio: f64,
    /// Lower end of the ratio's 95% confidence interval.
    pub ci95_low: f64,
    /// Upper end of the ratio's 95% confidence interval.
    pub ci95_high: f64,
    /// Whether the interval excludes 1 (the difference is not noise at the 95% level).
    pub significant: bool,
}

/// The `tacho time --json` document (`tacho.time.v1`); its `results` array reads like
/// hyperfine's.
#[derive(Debug, Serialize)]
pub struct TimeReport {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// The tacho version that ran the timing (Cargo package version).
    pub tool_version: &'static str,
    /// The machine it ran on.
    pub host: Host,
    /// THP, CPU governor and mitigations, for `compare` to show what changed between runs.
    pub tunables: SystemTunables,
    /// Whether the commands took turns (A B A B…) rather than running in blocks.
    pub interleaved: bool,
    /// The shell around each command, `null` with `-N`.
    pub shell: Option<String>,
    /// Mean wall time of the shell alone, subtracted from every run.
    pub shell_spawn_s: Option<f64>,
    /// One entry per command, in the order given.
    pub results: Vec<TimedCommand>,
    /// Empty for a single command; otherwise every command against the fastest.
    pub relative: Vec<Relative>,
    /// A signal stopped the timing: `results` hold the runs that finished (a command that had
    /// none is left out), each with an `interrupted` warning.
    pub interrupted: bool,
}

/// Figures that say what a run's settings were, for the warnings' advice.
#[derive(Debug, Clone, Copy, Default)]
pub struct Context {
    /// Commands ran through a shell (not `-N`), so very short ones are below the spawn correction's
    /// precision.
    pub shell: bool,
    /// `--warmup` was more than 0.
    pub warmup: bool,
    /// `--prepare` was given.
    pub prepare: bool,
}

/// Commands this fast are shorter than the shell-spawn correction is precise.
const MIN_SHELL_TIME_S: f64 = 5e-3;

impl TimedCommand {
    /// One command's results and the warnings they call for.
    pub fn new(command: &str, runs: &[Measurement], ctx: Context) -> TimedCommand {
        use super::exec::Exit;
        let result = CommandResult::from_runs(command, runs);
        let timed_out_runs = runs.iter().filter(|m| m.exit == Exit::TimedOut).count() as u64;
        let warnings = warnings(&result, timed_out_runs, ctx);
        TimedCommand {
            result,
            timed_out_runs,
            warnings,
        }
    }
}

fn warnings(r: &CommandResult, timed_out: u64, ctx: Context) -> Vec<Warning> {
    let mut w = Vec::new();
    let failed = r.exit_codes.iter().filter(|c| **c != Some(0)).count() - timed_out as usize;
    if failed > 0 {
        w.push(Warning {
            code: Code::NonzeroExit,
            message: format!(
                "{failed} of {} failed (ignored with --ignore-failure); their times may \
                 measure an error path",
                crate::units::plural(r.times.len() as u64, "run")
            ),
        });
    }
    if timed_out > 0 {
        w.push(Warning {
            code: Code::TimedOut,
            message: {
                let (were, times_are) = if timed_out == 1 {
                    ("was", "its time is")
                } else {
                    ("were", "their times are")
                };
                format!(
                    "{} {were} killed at --max-time; {times_are} the limit, not the command's",
                    crate::units::plural(timed_out, "run")
                )
            },
        });
    }
    if ctx.shell && r.times.iter().any(|&t| t < MIN_SHELL_TIME_S) {
        w.push(Warning {
            code: Code::FasterThanShell,
            message: "runs took under 5 ms, closer than the shell-spawn correction is precise; \
                      use -N (--shell=none) to time the command without a shell"
                .into(),
        });
    }
    let scores = stats::modified_z_scores(&r.times);
    let hint = match (ctx.warmup, ctx.prepare) {
        (true, true) => "re-run on a quiet system or with more --warmup runs",
        (true, false) => "use more --warmup runs, or --prepare to reset caches before each run",
        (false, true) => "use --warmup to fill caches before measuring",
        (false, false) => "use --warmup to fill caches, or --prepare to clear them before each run",
    };
    if scores.first().is_some_and(|z| *z > stats::OUTLIER_Z) {
        w.push(Warning {
            code: Code::FirstRunSlower,
            message: format!(
                "the first run was much slower than the rest ({:.3} s against a median of \
                 {:.3} s), probably cold caches; {hint}",
                r.times[0], r.median
            ),
        });
    } else {
        let n = scores.iter().filter(|z| z.abs() > stats::OUTLIER_Z).count();
        if n > 0 {
            w.push(Warning {
                code: Code::Outliers,
                message: format!(
                    "{n} of {} runs are statistical outliers (other programs interfering?); \
                     re-run on a quiet system, or {hint}",
                    r.times.len()
                ),
            });
        }
    }
    w
}

/// Each command against the fastest (smallest mean). Empty for fewer than two commands.
pub fn relative_speeds(results: &[CommandResult]) -> Vec<Relative> {
    if results.len() < 2 {
        return Vec::new();
    }
    let Some(fastest) = results.iter().min_by(|a, b| a.mean.total_cmp(&b.mean)) else {
        return Vec::new();
    };
    results
        .iter()
        .map(|r| {
            let same = std::ptr::eq(r, fastest);
            let ratio = if same {
                None
            } else {
                stats::ratio_of_means(&r.times, &fastest.times)
            };
            match ratio {
                Some(q) => Relative {
                    command: r.command.clone(),
                    ratio: q.value,
                    ci95_low: q.ci95_low,
                    ci95_high: q.ci95_high,
                    significant: q.significant(),
                },
                None => {
                    // The fastest itself, or too few runs for an interval.
                    let value = if same || fastest.mean <= 0.0 {
                        1.0
                    } else {
                        r.mean / fastest.mean
                    };
                    Relative {
                        command: r.command.clone(),
                        ratio: value,
                        ci95_low: value,
                        ci95_high: value,
                        significant: false,
                    }
                }
            }
        })
        .collect()
}

/// Builds the report from the scheduler's outcome.
pub fn report(
    (host, tunables): (Host, SystemTunables),
    names: &[String],
    outcome: &Outcome,
    interleaved: bool,
    shell: Option<String>,
    ctx: Context,
) -> TimeReport {
    let results: Vec<TimedCommand> = names
        .iter()
        .zip(&outcome.runs)
        .filter(|(_, runs)| outcome.interrupted.is_none() || !runs.is_empty())
        .map(|(name, runs)| {
            let mut timed = TimedCommand::new(name, runs, ctx);
            if outcome.interrupted.is_some() {
                timed.warnings.insert(0, interrupted(runs.len()));
            }
            timed
        })
        .collect();
    let plain: Vec<CommandResult> = results.iter().map(|r| r.result.clone()).collect();
    TimeReport {
        schema: SCHEMA,
        tool_version: env!("CARGO_PKG_VERSION"),
        host,
        tunables,
        interleaved,
        shell,
        shell_spawn_s: outcome.overhead.map(|o| o.wall_s),
        relative: relative_speeds(&plain),
        results,
        interrupted: outcome.interrupted.is_some(),
    }
}

fn interrupted(runs: usize) -> Warning {
    Warning {
        code: Code::Interrupted,
        message: format!(
            "stopped by a signal after {runs} timed run{}: fewer runs than asked, so the \
             figures are less certain (the run the signal cut short is not counted)",
            if runs == 1 { "" } else { "s" }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::super::exec::Exit;
    use super::*;

    fn m(wall_s: f64, exit: Exit) -> Measurement {
        Measurement {
            wall_s,
            user_s: wall_s / 4.0,
            system_s: wall_s / 8.0,
            max_rss_bytes: 4 << 20,
            exit,
        }
    }

    fn runs(times: &[f64]) -> Vec<Measurement> {
        times.iter().map(|&t| m(t, Exit::Code(0))).collect()
    }

    #[test]
    fn figures_follow_the_runs() {
        let r = CommandResult::from_runs("x", &runs(&[0.2, 0.1, 0.3]));
        assert!((r.mean - 0.2).abs() < 1e-12);
        assert!((r.stddev.unwrap() - 0.1).abs() < 1e-12);
        assert_eq!((r.median, r.min, r.max), (0.2, 0.1, 0.3));
        assert!((r.user - 0.05).abs() < 1e-12);
        assert_eq!(r.exit_codes, [Some(0); 3]);
        assert_eq!(r.peak_memory_bytes(), 4 << 20);
        let one = CommandResult::from_runs("x", &runs(&[0.2]));
        assert_eq!(one.stddev, None);
    }

    #[test]
    fn warnings_for_first_run_outliers_failures_and_timeouts() {
        let ctx = Context::default();
        let first = TimedCommand::new("x", &runs(&[0.5, 0.30, 0.29, 0.31, 0.30]), ctx);
        let codes: Vec<_> = first.warnings.iter().map(|w| w.code).collect();
        assert_eq!(codes, [Code::FirstRunSlower]);
        let later = TimedCommand::new("x", &runs(&[0.30, 0.29, 0.5, 0.31, 0.30]), ctx);
        assert_eq!(later.warnings[0].code, Code::Outliers);
        let mut mixed = runs(&[0.1, 0.1, 0.1]);
        mixed[1].exit = Exit::Code(2);
        mixed[2].exit = Exit::TimedOut;
        let t = TimedCommand::new("x", &mixed, ctx);
        let codes: Vec<_> = t.warnings.iter().map(|w| w.code).collect();
        assert_eq!(codes, [Code::NonzeroExit, Code::TimedOut]);
        assert_eq!(t.timed_out_runs, 1);
        assert_eq!(t.result.exit_codes, [Some(0), Some(2), None]);
        let shell = Context { shell: true, ..ctx };
        let fast = TimedCommand::new("x", &runs(&[0.001, 0.001]), shell);
        assert_eq!(fast.warnings[0].code, Code::FasterThanShell);
    }

    #[test]
    fn relative_speed_against_the_fastest() {
        let a = CommandResult::from_runs("a", &runs(&[20.0, 22.0, 18.0, 20.0, 20.0]));
        let b = CommandResult::from_runs("b", &runs(&[10.0, 11.0, 9.0, 10.0, 10.0]));
        let rel = relative_speeds(&[a, b]);
        assert_eq!(rel[1].ratio, 1.0);
        assert!(!rel[1].significant);
        assert!((rel[0].ratio - 2.0).abs() < 1e-12);
        assert!(rel[0].ci95_low < 2.0 && rel[0].ci95_high > 2.0 && rel[0].significant);
        assert!(relative_speeds(&[CommandResult::from_runs("a", &runs(&[1.0]))]).is_empty());
    }

    #[test]
    fn export_has_exactly_hyperfines_keys_and_loads_back() {
        let r = CommandResult::from_runs("sleep 0.1", &runs(&[0.1, 0.11]));
        let doc = serde_json::to_value(HyperfineExport { results: vec![r] }).unwrap();
        let keys: Vec<&str> = doc["results"][0]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut expected = [
            "command",
            "mean",
            "stddev",
            "median",
            "user",
            "system",
            "min",
            "max",
            "times",
            "memory_usage_byte",
            "exit_codes",
        ];
        expected.sort_unstable();
        let mut keys = keys;
        keys.sort_unstable();
        assert_eq!(keys, expected);
        let back: HyperfineExport = serde_json::from_value(doc).unwrap();
        assert_eq!(back.results[0].times, [0.1, 0.11]);
    }
}
