//! Which command runs when: shell calibration, setup, warm-up, timed runs (interleaved A B A B…
//! by default, in blocks as hyperfine does with `--no-interleave`), prepare before each run,
//! cleanup at the end. Generic over [`Executor`] so the order and counts are tested without
//! spawning anything.
//!
//! Interleaving matters on a machine whose speed drifts (other tenants, thermal limits, a
//! backup starting): in blocks, the drift lands on whichever command ran last and looks like a
//! difference between the commands; interleaved, it lands on all of them alike.

use super::exec::{Executor, Interrupted, Invocation, Measurement};
use anyhow::{Result, bail};

/// How many timed runs each command gets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RunCount {
    /// `--runs N`.
    Exact(u64),
    /// hyperfine's rule: at least `min` runs and at least `min_time_s` of measuring, at most
    /// `max` runs.
    Auto {
        /// Fewest timed runs (`--min-runs`).
        min: u64,
        /// Most timed runs (`--max-runs`); `None`: no ceiling.
        max: Option<u64>,
        /// Least total measuring time per command, in seconds (`--min-benchmarking-time`).
        min_time_s: f64,
    },
}

impl RunCount {
    /// Runs for a command whose first run (with its overheads) took `first_s`.
    pub fn target(self, first_s: f64) -> u64 {
        match self {
            RunCount::Exact(n) => n,
            RunCount::Auto {
                min,
                max,
                min_time_s,
            } => {
                let in_time = if first_s > 0.0 {
                    (min_time_s / first_s).min(1e9) as u64
                } else {
                    min
                };
                let n = in_time.max(min);
                max.map_or(n, |m| n.min(m)).max(1)
            }
        }
    }
}

/// Everything the scheduler needs, resolved and validated by `cmd::time`.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The commands to time, in the order given.
    pub commands: Vec<Invocation>,
    /// The shell that wraps each command, for calibration; `None` with `-N`.
    pub shell: Option<String>,
    /// `--setup`: run before the warm-up and timed runs, untimed.
    pub setup: Option<Invocation>,
    /// Empty, one for all commands, or one per command.
    pub prepare: Vec<Invocation>,
    /// `--cleanup`: run after the timed runs, untimed.
    pub cleanup: Option<Invocation>,
    /// Untimed runs of each command before the timed ones (`--warmup`).
    pub warmup: u64,
    /// How many timed runs each command gets.
    pub runs: RunCount,
    /// Commands take turns (A B A B…) rather than running in blocks.
    pub interleave: bool,
    /// A failing run is kept and timing goes on (`--ignore-failure`) instead of stopping.
    pub ignore_failure: bool,
}

/// Mean cost of spawning the shell around a command (`sh -c ""`), subtracted from every run.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Overhead {
    /// Wall time, in seconds.
    pub wall_s: f64,
    /// User-mode CPU time, in seconds.
    pub user_s: f64,
    /// Kernel-mode CPU time, in seconds.
    pub system_s: f64,
}

/// Runs of the shell alone used to estimate [`Overhead`].
pub const CALIBRATION_RUNS: usize = 50;

/// Timed runs of each command, in the order they ran, with the shell overhead removed.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// One list per command, in the order of `Plan::commands`.
    pub runs: Vec<Vec<Measurement>>,
    /// The shell overhead that was subtracted; `None` with `-N`.
    pub overhead: Option<Overhead>,
    /// The signal that stopped the timing after some runs (the run it cut short is not among
    /// `runs`); `None` when every run the plan asked for ran.
    pub interrupted: Option<i32>,
}

/// Calibrates the shell, then runs setup, warm-ups, timed runs and cleanup as `plan` says, through
/// `exec`. A signal after the first timed run ends the timing with the runs that finished
/// (`Outcome::interrupted`); before it, the [`Interrupted`] error is returned.
pub fn run(plan: &Plan, exec: &mut dyn Executor) -> Result<Outcome> {
    let overhead = match &plan.shell {
        Some(shell) => Some(calibrate(shell, exec)?),
        None => None,
    };
    let mut s = Scheduler {
        plan,
        exec,
        overhead: overhead.unwrap_or_default(),
        runs: vec![Vec::new(); plan.commands.len()],
    };
    let all: Vec<usize> = (0..plan.commands.len()).collect();
    let ran = if plan.interleave {
        s.phase(&all)
    } else {
        all.iter().try_for_each(|&c| s.phase(&[c]))
    };
    let interrupted = match ran {
        Ok(()) => None,
        Err(e) => match e.downcast_ref::<Interrupted>() {
            Some(i) if s.runs.iter().any(|r| !r.is_empty()) => Some(i.signal),
            _ => return Err(e),
        },
    };
    Ok(Outcome {
        runs: s.runs,
        overhead,
        interrupted,
    })
}

fn calibrate(shell: &str, exec: &mut dyn Executor) -> Result<Overhead> {
    let empty = Invocation::new("", Some(shell))?;
    let mut sum = Overhead::default();
    for _ in 0..CALIBRATION_RUNS {
        let m = exec.measure(&empty)?;
        if !m.exit.success() {
            bail!(
                "the shell '{shell}' {} when run as '{shell} -c \"\"'; give a working shell \
                 with --shell or use -N",
                m.exit.describe()
            );
        }
        sum.wall_s += m.wall_s;
        sum.user_s += m.user_s;
        sum.system_s += m.system_s;
    }
    let n = CALIBRATION_RUNS as f64;
    Ok(Overhead {
        wall_s: sum.wall_s / n,
        user_s: sum.user_s / n,
        system_s: sum.system_s / n,
    })
}

struct Scheduler<'a> {
    plan: &'a Plan,
    exec: &'a mut dyn Executor,
    overhead: Overhead,
    runs: Vec<Vec<Measurement>>,
}

impl Scheduler<'_> {
    /// Setup, warm-up, timed runs and cleanup for `cmds`, taking turns between them.
    fn phase(&mut self, cmds: &[usize]) -> Result<()> {
        if let Some(setup) = &self.plan.setup {
            self.aux(setup, "--setup")?;
        }
        for _ in 0..self.plan.warmup {
            for &c in cmds {
                self.prepare(c)?;
                let m = self.exec.measure(&self.plan.commands[c])?;
                self.check(c, &m, "a warm-up run")?;
            }
        }
        let mut targets = Vec::with_capacity(cmds.len());
        for &c in cmds {
            let prep_s = self.prepare(c)?;
            let m = self.timed(c)?;
            targets.push(
                self.plan
                    .runs
                    .target(m.wall_s + self.overhead.wall_s + prep_s),
            );
        }
        loop {
            let mut ran = false;
            for (i, &c) in cmds.iter().enumerate() {
                if (self.runs[c].len() as u64) < targets[i] {
                    self.prepare(c)?;
                    self.timed(c)?;
                    ran = true;
                }
            }
            if !ran {
                break;
            }
        }
        if let Some(cleanup) = &self.plan.cleanup {
            self.aux(cleanup, "--cleanup")?;
        }
        Ok(())
    }

    /// Runs the prepare command for `c`, if any; returns how long it took.
    fn prepare(&mut self, c: usize) -> Result<f64> {
        let prepare = match self.plan.prepare.len() {
            0 => return Ok(0.0),
            1 => &self.plan.prepare[0],
            _ => &self.plan.prepare[c],
        };
        self.aux(prepare, "--prepare")
    }

    fn aux(&mut self, inv: &Invocation, option: &str) -> Result<f64> {
        let m = self.exec.measure(inv)?;
        if !m.exit.success() {
            bail!(
                "the {option} command '{}' {}; fix it, or append ' || true' if that is expected",
                inv.line,
                m.exit.describe()
            );
        }
        Ok(m.wall_s)
    }

    fn timed(&mut self, c: usize) -> Result<Measurement> {
        let mut m = self.exec.measure(&self.plan.commands[c])?;
        let n = self.runs[c].len() + 1;
        self.check(c, &m, &format!("run {n}"))?;
        m.wall_s = (m.wall_s - self.overhead.wall_s).max(0.0);
        m.user_s = (m.user_s - self.overhead.user_s).max(0.0);
        m.system_s = (m.system_s - self.overhead.system_s).max(0.0);
        self.runs[c].push(m);
        Ok(m)
    }

    fn check(&self, c: usize, m: &Measurement, when: &str) -> Result<()> {
        if m.exit.success() || self.plan.ignore_failure {
            return Ok(());
        }
        bail!(
            "'{}' {} in {when}; use -i/--ignore-failure to time it anyway, or --show-output to \
             see why",
            self.plan.commands[c].line,
            m.exit.describe()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::exec::Exit;
    use super::*;

    /// Each command line is "NAME SECONDS [EXIT]"; the shell adds 0.001 s. Records the order.
    struct Mock {
        log: Vec<String>,
    }

    impl Executor for Mock {
        fn measure(&mut self, inv: &Invocation) -> Result<Measurement> {
            self.log.push(inv.line.clone());
            let words: Vec<&str> = inv.line.split_whitespace().collect();
            let secs: f64 = words.get(1).and_then(|w| w.parse().ok()).unwrap_or(0.0);
            let code: i32 = words.get(2).and_then(|w| w.parse().ok()).unwrap_or(0);
            let shell = if inv.argv.len() == 3 { 0.001 } else { 0.0 };
            Ok(Measurement {
                wall_s: secs + shell,
                user_s: secs / 2.0 + shell,
                system_s: 0.0,
                max_rss_bytes: 1 << 20,
                exit: Exit::Code(code),
            })
        }
    }

    fn plan(cmds: &[&str]) -> Plan {
        Plan {
            commands: cmds
                .iter()
                .map(|c| Invocation::new(c, None).unwrap())
                .collect(),
            shell: None,
            setup: None,
            prepare: Vec::new(),
            cleanup: None,
            warmup: 0,
            runs: RunCount::Exact(3),
            interleave: true,
            ignore_failure: false,
        }
    }

    #[test]
    fn interleaves_by_default_and_blocks_on_request() {
        let mut p = plan(&["a 1", "b 2"]);
        p.warmup = 1;
        p.setup = Some(Invocation::new("setup", None).unwrap());
        p.prepare = vec![Invocation::new("prep", None).unwrap()];
        p.cleanup = Some(Invocation::new("clean", None).unwrap());
        let mut m = Mock { log: Vec::new() };
        let out = run(&p, &mut m).unwrap();
        assert_eq!(out.runs[0].len(), 3);
        assert_eq!(out.runs[1].len(), 3);
        let mut expected = vec!["setup"];
        for _ in 0..4 {
            expected.extend(["prep", "a 1", "prep", "b 2"]);
        }
        expected.push("clean");
        assert_eq!(m.log, expected);

        p.interleave = false;
        let mut m = Mock { log: Vec::new() };
        run(&p, &mut m).unwrap();
        let block = |c: &'static str| {
            let mut v = vec!["setup"];
            for _ in 0..4 {
                v.extend(["prep", c]);
            }
            v.push("clean");
            v
        };
        assert_eq!(m.log, [block("a 1"), block("b 2")].concat());
    }

    #[test]
    fn auto_count_follows_the_first_run() {
        let auto = RunCount::Auto {
            min: 10,
            max: None,
            min_time_s: 3.0,
        };
        assert_eq!(auto.target(0.001), 3000);
        assert_eq!(auto.target(1.0), 10);
        assert_eq!(auto.target(0.0), 10);
        let capped = RunCount::Auto {
            min: 2,
            max: Some(5),
            min_time_s: 3.0,
        };
        assert_eq!(capped.target(0.001), 5);
        let mut p = plan(&["fast 0.1", "slow 1"]);
        p.runs = auto;
        let out = run(&p, &mut Mock { log: Vec::new() }).unwrap();
        assert_eq!(out.runs[0].len(), 30);
        assert_eq!(out.runs[1].len(), 10);
    }

    #[test]
    fn shell_overhead_is_measured_and_subtracted() {
        let mut p = plan(&["a 0.01"]);
        p.commands = vec![Invocation::new("a 0.01", Some("sh")).unwrap()];
        p.shell = Some("sh".into());
        let mut m = Mock { log: Vec::new() };
        let out = run(&p, &mut m).unwrap();
        assert_eq!(m.log.len(), CALIBRATION_RUNS + 3);
        let o = out.overhead.unwrap();
        assert!((o.wall_s - 0.001).abs() < 1e-12);
        for r in &out.runs[0] {
            assert!((r.wall_s - 0.01).abs() < 1e-12, "{r:?}");
            assert!((r.user_s - 0.005).abs() < 1e-12, "{r:?}");
        }
    }

    #[test]
    fn failures_stop_the_run_unless_ignored() {
        let p = plan(&["a 0.1", "bad 0.1 3"]);
        let err = run(&p, &mut Mock { log: Vec::new() }).unwrap_err();
        assert_eq!(
            err.to_string(),
            "'bad 0.1 3' exited with code 3 in run 1; use -i/--ignore-failure to time it \
             anyway, or --show-output to see why"
        );
        let mut p = p;
        p.ignore_failure = true;
        let out = run(&p, &mut Mock { log: Vec::new() }).unwrap();
        assert!(out.runs[1].iter().all(|m| m.exit == Exit::Code(3)));

        let mut p = plan(&["a 0.1"]);
        p.prepare = vec![Invocation::new("prep 0 1", None).unwrap()];
        let err = run(&p, &mut Mock { log: Vec::new() }).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("the --prepare command 'prep 0 1' exited")
        );
    }

    #[test]
    fn one_prepare_per_command() {
        let mut p = plan(&["a 1", "b 1"]);
        p.runs = RunCount::Exact(1);
        p.prepare = vec![
            Invocation::new("pa", None).unwrap(),
            Invocation::new("pb", None).unwrap(),
        ];
        let mut m = Mock { log: Vec::new() };
        run(&p, &mut m).unwrap();
        assert_eq!(m.log, ["pa", "a 1", "pb", "b 1"]);
    }
}
