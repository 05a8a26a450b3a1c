//! A series of experiments (`--then`): each step is one experiment against the settings the
//! steps before it kept, and is kept itself only if it was a win. The series says what the
//! kept steps gained together and whether the last steps stopped paying off (SEEDS §4:
//! diminishing returns), then puts every setting back.
//!
//! Safety is the single experiment's, plus one journal of the whole series written before
//! anything changes: it holds every setting of every step at its value before the series, so
//! a kill between steps, while kept steps are applied, is reverted by `--recover` or the next
//! start as a kill inside a step is.

use std::sync::atomic::AtomicBool;

use serde::Serialize;

use super::journal::{Dir, Entry, JournalError, Record};
use super::verdict::Verdict;
use super::{ExperimentError, Observer, Outcome, Plan};
use crate::tune::{Change, Saved};

/// The `schema` of `tacho experiment --then … --json`.
pub const SCHEMA: &str = "tacho.experiment-series.v1";

/// One step of a series.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// The step's experiment, against the settings kept before it.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Kept for the steps after it (it was a win).
    pub kept: bool,
}

/// A whole series.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesOutcome {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The steps that ran, in order.
    pub steps: Vec<Step>,
    /// The kept steps' effects compounded, in percent of the first baseline's figure (each
    /// step's baseline is the one before it with the kept changes); `None` when none was kept.
    pub cumulative_pct: Option<f64>,
    /// The steps after the last kept one that gained nothing distinguishable from noise.
    pub unpaid_steps: usize,
    /// Every setting is back at its value before the series, read back.
    pub reverted: bool,
    /// Stopped by a signal before every step ran.
    pub interrupted: bool,
}

/// Runs `plan` and then each of `then` against the settings kept so far.
pub fn run(
    plan: &Plan,
    then: &[Change],
    stop: &AtomicBool,
    observer: &mut dyn Observer,
) -> Result<SeriesOutcome, ExperimentError> {
    // Every setting of the series, as it is now, into one journal before anything changes.
    let all: Vec<&Change> = plan.changes.iter().chain(then).collect();
    let mut saved: Vec<Saved> = Vec::new();
    for c in &all {
        saved.push(c.setting.read(&plan.root)?);
    }
    let dir = Dir::open(&plan.journal_dir, true)?.ok_or_else(|| {
        JournalError::Invalid(plan.journal_dir.clone(), "could not be made".into())
    })?;
    let held = dir.write(&Record::new(
        all.iter()
            .zip(&saved)
            .map(|(c, s)| Entry {
                setting: c.setting.name(),
                saved: s.clone(),
            })
            .collect(),
        plan.commands.as_ref().map(|c| c.revert.clone()),
    ))?;
    observer.line(&format!(
        "series journal {} records every setting of the series before it",
        held.path().display()
    ));
    let mut kept = Kept::default();
    let mut steps = Vec::new();
    let result = steps_run(plan, then, stop, observer, &mut kept, &mut steps);
    let revert = revert_kept(plan, &all, &saved, &kept);
    let interrupted = super::settle(held, result, revert, "series")?;
    let (cumulative_pct, unpaid_steps) = summary(&steps);
    Ok(SeriesOutcome {
        schema: SCHEMA,
        steps,
        cumulative_pct,
        unpaid_steps,
        reverted: true,
        interrupted,
    })
}

/// What stays applied for the steps after a win.
#[derive(Default)]
struct Kept {
    /// Indices of the series' settings (the first step's, then each `--then`'s).
    settings: Vec<usize>,
    /// The first step's `--change-cmd`.
    command: bool,
}

/// The steps in turn; returns whether a signal stopped them.
fn steps_run(
    plan: &Plan,
    then: &[Change],
    stop: &AtomicBool,
    observer: &mut dyn Observer,
    kept: &mut Kept,
    steps: &mut Vec<Step>,
) -> Result<bool, ExperimentError> {
    let first = (plan.changes.clone(), plan.commands.clone());
    let rest = then.iter().map(|c| (vec![c.clone()], None));
    let mut at = 0;
    for (i, (changes, commands)) in std::iter::once(first).chain(rest).enumerate() {
        let n = changes.len();
        let step_plan = Plan {
            changes: changes.clone(),
            commands,
            ..plan.clone()
        };
        observer.line(&format!("step {}: {}", i + 1, super::describe(&step_plan)));
        let outcome = match super::run(&step_plan, stop, observer) {
            // Nothing to compare: the series goes on without it.
            Err(ExperimentError::Already(what)) => {
                observer.line(&format!("step {}: skipped, {what}", i + 1));
                at += n;
                continue;
            }
            r => r?,
        };
        let won = outcome.effect.is_some_and(|e| e.verdict == Verdict::Win);
        let interrupted = outcome.interrupted;
        // A win stays applied for the steps after it (and is reverted at the end).
        if won && !interrupted {
            for c in &changes {
                let saved = c.setting.read(&plan.root)?;
                c.setting.apply(&plan.root, &c.value, &saved)?;
            }
            if let Some(c) = &step_plan.commands {
                super::command::run("--change-cmd", &c.apply)?;
                kept.command = true;
            }
            kept.settings.extend(at..at + n);
            observer.line(&format!(
                "step {}: a win, applied again for the steps after it",
                i + 1
            ));
        }
        at += n;
        steps.push(Step {
            outcome,
            kept: won && !interrupted,
        });
        if interrupted {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Reverts the kept changes in the reverse order of applying (the `--then` steps', the
/// first step's command, the first step's settings), each read back.
fn revert_kept(
    plan: &Plan,
    all: &[&Change],
    saved: &[Saved],
    kept: &Kept,
) -> Result<(), ExperimentError> {
    let first = plan.changes.len();
    for &i in kept.settings.iter().rev().filter(|&&i| i >= first) {
        all[i].setting.restore(&plan.root, &saved[i])?;
    }
    if let (true, Some(c)) = (kept.command, &plan.commands) {
        super::command::run("--revert-cmd", &c.revert)?;
    }
    for &i in kept.settings.iter().rev().filter(|&&i| i < first) {
        all[i].setting.restore(&plan.root, &saved[i])?;
    }
    Ok(())
}

/// The kept steps' effects compounded, and the steps after the last kept one.
fn summary(steps: &[Step]) -> (Option<f64>, usize) {
    let mut factor = None;
    for s in steps.iter().filter(|s| s.kept) {
        if let Some(e) = s.outcome.effect {
            factor = Some(factor.unwrap_or(1.0) * (1.0 + e.change_pct / 100.0));
        }
    }
    let last_kept = steps.iter().rposition(|s| s.kept);
    let unpaid = steps.len() - last_kept.map_or(0, |i| i + 1);
    (factor.map(|f| (f - 1.0) * 100.0), unpaid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::verdict::Effect;
    use crate::experiment::{Rounds, SCHEMA as ONE};

    fn step(verdict: Verdict, change_pct: f64) -> Step {
        Step {
            outcome: Outcome {
                schema: ONE,
                changes: Vec::new(),
                measure: "top".into(),
                figure: Some("wall".into()),
                higher_is_better: Some(false),
                stored: None,
                rounds: Rounds::fixed(5),
                baseline: vec![1.0; 5],
                changed: vec![1.0; 5],
                effect: Some(Effect {
                    change_pct,
                    ci95_low_pct: change_pct - 1.0,
                    ci95_high_pct: change_pct + 1.0,
                    welch_p: 0.01,
                    rank_p: 0.01,
                    verdict,
                }),
                reverted: true,
                interrupted: false,
            },
            kept: verdict == Verdict::Win,
        }
    }

    #[test]
    fn kept_steps_compound_and_the_steps_after_the_last_win_are_unpaid() {
        let steps = [
            step(Verdict::Win, -20.0),
            step(Verdict::Loss, 5.0),
            step(Verdict::Win, -10.0),
            step(Verdict::NoEffect, -0.5),
            step(Verdict::NoEffect, 0.3),
        ];
        let (cumulative, unpaid) = summary(&steps);
        // 0.8 × 0.9 = 0.72: −28%, not −30%.
        assert!((cumulative.unwrap() + 28.0).abs() < 1e-9, "{cumulative:?}");
        assert_eq!(unpaid, 2);
        let (cumulative, unpaid) = summary(&steps[1..2]);
        assert_eq!((cumulative, unpaid), (None, 1));
    }

    #[test]
    fn the_report_marks_each_step_and_says_where_the_returns_stopped() {
        let o = SeriesOutcome {
            schema: SCHEMA,
            steps: vec![step(Verdict::Win, -20.0), step(Verdict::NoEffect, 0.4)],
            cumulative_pct: Some(-20.0),
            unpaid_steps: 1,
            reverted: true,
            interrupted: false,
        };
        let mut out = Vec::new();
        crate::experiment::report::series_text(&o, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("step 1: ") && lines[0].ends_with(" [kept]"),
            "{text}"
        );
        assert!(lines[1].ends_with(" [left out]"), "{text}");
        assert!(
            lines[2].starts_with("together: 1 kept step gives \u{2212}20.0% on wall"),
            "{text}"
        );
        assert_eq!(
            lines[3],
            "the last 1 step paid nothing beyond noise: the returns have diminished, stop at \
             step 1"
        );
    }
}
