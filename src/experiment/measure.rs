//! What an experiment measures in each round: a tacho measuring command (`bench disk|cpu|mem
//! …`, `time …`) run as a child of tacho with `--json --no-save`, whose headline figure is read
//! from its document the way the store reads it; or `top`: CPU figures over the run of a
//! `--workload` command (its own CPU time from the kernel's accounting of the child, and the
//! machine's system share from /proc/stat over the same window).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::compare::Metric;
use crate::kernel::SysRoot;
use crate::kernel::stat::read_stat;
use crate::text::Escaped;

/// A figure of the `top` measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopFigure {
    /// The workload's system CPU seconds (its own and its waited-for children's).
    System,
    /// The workload's user CPU seconds.
    User,
    /// The workload's wall-clock seconds.
    Wall,
    /// The whole machine's system CPU share over the workload's run, in percent.
    MachineSystem,
}

impl TopFigure {
    const ALL: [TopFigure; 4] = [
        TopFigure::System,
        TopFigure::User,
        TopFigure::Wall,
        TopFigure::MachineSystem,
    ];

    fn word(self) -> &'static str {
        match self {
            TopFigure::System => "system",
            TopFigure::User => "user",
            TopFigure::Wall => "wall",
            TopFigure::MachineSystem => "machine-system",
        }
    }

    fn label(self) -> &'static str {
        match self {
            TopFigure::System => "workload system CPU (s)",
            TopFigure::User => "workload user CPU (s)",
            TopFigure::Wall => "workload wall time (s)",
            TopFigure::MachineSystem => "machine system CPU (%)",
        }
    }
}

/// How each round is measured.
#[derive(Debug, Clone, PartialEq)]
pub enum Measure {
    /// A tacho measuring command's words (`bench cpu --runtime 1s`).
    Tacho(Vec<String>),
    /// `top` over the run of a workload (a shell command line).
    Top {
        /// Run with `sh -c` once per round.
        workload: String,
        /// The figure judged.
        figure: TopFigure,
    },
}

/// One round's figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// What it is, for people (`run ops/s`, `workload system CPU (s)`).
    pub name: String,
    /// The value.
    pub value: f64,
    /// True for throughput, false for times and CPU use.
    pub higher_is_better: bool,
    /// Where the store keeps it; `None` for a figure it has no column for (a percentage).
    pub stored: Option<Stored>,
}

/// Where a figure sits among the store's figures, so the rounds saved as runs compare as
/// the measure's own runs do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stored {
    /// One of the store's directions (`read`, `run`, `wall`, `cpu_time`).
    pub direction: &'static str,
    /// The figure of that direction.
    pub metric: Metric,
    /// The store's unit per unit of [`Figure::value`] (1e9 for seconds kept as nanoseconds).
    pub scale: f64,
}

/// Why a round could not be measured.
#[derive(Debug, thiserror::Error)]
#[error("the measure failed: {0}")]
pub struct MeasureError(String);

impl Measure {
    /// Resolves `--measure`, `--workload` and `--figure`; an error is one line with the fix.
    pub fn parse(
        measure: &str,
        workload: Option<&str>,
        figure: Option<&str>,
    ) -> Result<Measure, String> {
        let words = shell_words::split(measure)
            .map_err(|e| format!("--measure {:?}: {e}", Escaped(measure)))?;
        let figure = figure
            .map(|f| {
                TopFigure::ALL
                    .into_iter()
                    .find(|t| t.word() == f)
                    .ok_or_else(|| {
                        format!(
                            "--figure {:?} is not a figure of top; give one of {}",
                            Escaped(f),
                            TopFigure::ALL.map(TopFigure::word).join(", ")
                        )
                    })
            })
            .transpose()?;
        let first: Vec<&str> = words.iter().take(2).map(String::as_str).collect();
        match first.as_slice() {
            ["top"] if words.len() == 1 => {
                let workload = workload.filter(|w| !w.trim().is_empty()).ok_or(
                    "--measure top samples CPU while a workload runs: add --workload 'CMD'",
                )?;
                Ok(Measure::Top {
                    workload: workload.to_string(),
                    figure: figure.unwrap_or(TopFigure::Wall),
                })
            }
            ["bench", "disk" | "cpu" | "mem"] | ["time", _] | ["load", _] => {
                if workload.is_some() || figure.is_some() {
                    return Err(
                        "--workload and --figure go with --measure top; a bench or time measure \
                         runs its own load and is judged by its headline figure"
                            .into(),
                    );
                }
                Ok(Measure::Tacho(words))
            }
            _ => Err(format!(
                "--measure {:?} is not a measuring command; give 'bench disk|cpu|mem …', \
                 'time CMD…', 'load URL …' or top (with --workload)",
                Escaped(measure)
            )),
        }
    }

    /// The measure as given, for reports.
    pub fn describe(&self) -> String {
        match self {
            Measure::Tacho(words) => shell_words::join(words),
            Measure::Top { workload, figure } => {
                format!(
                    "top --figure {} --workload {}",
                    figure.word(),
                    shell_words::quote(workload)
                )
            }
        }
    }

    /// Runs one round; `exe` is tacho itself.
    pub fn run(&self, exe: &Path, root: &SysRoot) -> Result<Figure, MeasureError> {
        match self {
            Measure::Tacho(words) => tacho_child(exe, words),
            Measure::Top { workload, figure } => top(workload, *figure, root),
        }
    }
}

/// The last non-empty line of a child's stderr, escaped, for an error.
fn last_line(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    Escaped(line).to_string()
}

fn tacho_child(exe: &Path, words: &[String]) -> Result<Figure, MeasureError> {
    let mut cmd = Command::new(exe);
    cmd.args(words);
    for flag in ["--json", "--no-save"] {
        if !words.iter().any(|w| w == flag) {
            cmd.arg(flag);
        }
    }
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| MeasureError(format!("cannot run {}: {e}", exe.display())))?;
    if !out.status.success() {
        return Err(MeasureError(format!(
            "`tacho {}` exited with {}: {}",
            shell_words::join(words),
            out.status,
            last_line(&out.stderr)
        )));
    }
    headline(&out.stdout).ok_or_else(|| {
        MeasureError(format!(
            "`tacho {}` printed no figure to judge",
            shell_words::join(words)
        ))
    })
}

/// The first test's first direction's first figure (IOPS, bandwidth, ops/s, then mean
/// latency), as `compare` orders them; for `load`, its knee (the most the service delivered
/// before it bent), the test the store names `knee`.
pub fn headline(document: &[u8]) -> Option<Figure> {
    let runs = crate::store::parse_documents(document).ok()?;
    let run = runs.first()?;
    // Only a load run's tests are all read (to find the knee); others give their first.
    let knee = (run.kind == crate::store::RunKind::Load)
        .then(|| {
            run.tests
                .iter()
                .map(|t| t.value())
                .find(|t| t["name"] == "knee")
        })
        .flatten();
    let is_knee = knee.is_some();
    let test = match knee {
        Some(k) => k,
        None => run.tests.first()?.value(),
    };
    let figures = crate::store::figures::of_test(&test);
    let first = figures.iter().find(|f| f.sample == 0)?;
    let metric = Metric::ALL.into_iter().find(|m| m.of(first).is_some())?;
    Some(Figure {
        name: if is_knee {
            "knee (successful responses/s)".into()
        } else {
            format!("{} {}", first.direction, metric.label())
        },
        value: metric.of(first)?,
        higher_is_better: metric.higher_is_better(),
        stored: Some(Stored {
            direction: first.direction,
            metric,
            scale: 1.0,
        }),
    })
}

fn top(workload: &str, figure: TopFigure, root: &SysRoot) -> Result<Figure, MeasureError> {
    let before = read_stat(root).map_err(|e| MeasureError(e.to_string()))?;
    let start = Instant::now();
    let child = Command::new("sh")
        .arg("-c")
        .arg(workload)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| MeasureError(format!("cannot start the workload: {e}")))?;
    let pid = i32::try_from(child.id()).map_err(|_| MeasureError("pid out of range".into()))?;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct wait4 fills in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `status` and `usage` are valid for writes for the call; `pid` is our own child,
    // not yet waited for (std's `Child` is never waited on after this).
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = start.elapsed().as_secs_f64();
    if waited != pid {
        return Err(MeasureError(format!(
            "waiting for the workload: {}",
            std::io::Error::last_os_error()
        )));
    }
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(MeasureError(format!(
            "the workload {} did not exit with 0 (wait status {status})",
            shell_words::quote(workload)
        )));
    }
    let after = read_stat(root).map_err(|e| MeasureError(e.to_string()))?;
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let value = match figure {
        TopFigure::System => seconds(usage.ru_stime),
        TopFigure::User => seconds(usage.ru_utime),
        TopFigure::Wall => wall,
        TopFigure::MachineSystem => {
            let total = |t: &crate::kernel::stat::CpuTicks| {
                t.user + t.nice + t.system + t.idle + t.iowait + t.irq + t.softirq + t.steal
            };
            let all = total(&after.total).saturating_sub(total(&before.total));
            let system = after.total.system.saturating_sub(before.total.system);
            if all == 0 {
                return Err(MeasureError(
                    "/proc/stat did not advance over the workload's run".into(),
                ));
            }
            system as f64 / all as f64 * 100.0
        }
    };
    let seconds_as = |direction| {
        Some(Stored {
            direction,
            metric: Metric::LatMean,
            scale: 1e9,
        })
    };
    Ok(Figure {
        name: figure.label().into(),
        value,
        higher_is_better: false,
        stored: match figure {
            TopFigure::System | TopFigure::User => seconds_as("cpu_time"),
            TopFigure::Wall => seconds_as("wall"),
            TopFigure::MachineSystem => None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_are_resolved_or_refused_with_the_fix() {
        assert_eq!(
            Measure::parse("bench cpu --runtime 1s", None, None).unwrap(),
            Measure::Tacho(vec![
                "bench".into(),
                "cpu".into(),
                "--runtime".into(),
                "1s".into()
            ])
        );
        assert_eq!(
            Measure::parse("top", Some("sleep 1"), Some("system")).unwrap(),
            Measure::Top {
                workload: "sleep 1".into(),
                figure: TopFigure::System
            }
        );
        for (m, w, f, says) in [
            ("top", None, None, "add --workload"),
            ("bench cpu", Some("x"), None, "go with --measure top"),
            ("top", Some("x"), Some("idle"), "not a figure of top"),
            ("rm -rf /", None, None, "not a measuring command"),
            ("time", None, None, "not a measuring command"),
            ("bench 'cpu", None, None, "--measure"),
        ] {
            let e = Measure::parse(m, w, f).unwrap_err();
            assert!(e.contains(says), "{m}: {e}");
        }
    }

    #[test]
    fn the_headline_is_the_first_tests_first_figure() {
        let doc = br#"{"schema":"tacho.time.v1","host":{},"results":[{"command":"true",
            "mean":0.5,"stddev":0.1,"median":0.5,"user":0.1,"system":0.2,"min":0.4,"max":0.6,
            "times":[0.4,0.5,0.6],"exit_codes":[0,0,0]}]}"#;
        let f = headline(doc).unwrap();
        assert!(!f.higher_is_better);
        assert_eq!(f.name, "wall mean latency");
        assert!((f.value - 0.5e9).abs() < 1.0, "{f:?}");
        assert!(headline(b"{}").is_none());
    }

    /// A load measure is judged by its knee, not by its first (lowest) step.
    #[test]
    fn a_load_runs_headline_is_its_knee() {
        let doc = br#"{"schema":"tacho.load.v1","host":{},"mode":"ramp",
            "target":{"url":"http://127.0.0.1:80/","connections":4},
            "steps":[{"offered_rps":100.0,"achieved_rps":99.5,"bent":[]},
                     {"offered_rps":200.0,"achieved_rps":150.0,"bent":["x"]}],
            "knee":{"rps":150.0,"held":0,"bent":1}}"#;
        let f = headline(doc).unwrap();
        assert_eq!(
            (f.name.as_str(), f.value),
            ("knee (successful responses/s)", 150.0)
        );
        assert!(f.higher_is_better);
        assert_eq!(
            Measure::parse("load http://127.0.0.1/ --ramp 10..100", None, None).unwrap(),
            Measure::Tacho(shell_words::split("load http://127.0.0.1/ --ramp 10..100").unwrap())
        );
    }
}
